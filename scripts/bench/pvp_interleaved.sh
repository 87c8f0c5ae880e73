#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# PVP comparison of net_vqs with DPDK's net_vhost, both backends in the same two processes,
# switched every few seconds.
#
# pvp.sh restarts both testpmds for every run, so each run lands wherever the VM's two vCPUs
# happen to be (these machines switch between fast and slow modes for seconds at a time, which
# moves a 64-byte rate by 2x and a 1500-byte copy's by 5x). Here one host testpmd serves both
# backends (net_vqs0 and net_vhost0, each with its own net_null port) and one guest testpmd has
# a virtio_user port on each; testpmd's interactive commands (set portlist, start, stop)
# switch forwarding between the pairs without a restart, so the two backends are measured in
# many short periods, alternately, under the same conditions (--cpu-state: and per mode). Each period: switch, 1 s of warm-up, then the guest's rate over
# --seconds (guest Tx-pps for guest-tx, Rx-pps for guest-rx) and, for guest-tx, the host's busy
# TSC cycles per packet over the period (--record-core-cycles, printed at each stop); for
# guest-rx, instead, the share of net_null's frames dropped at the guest's full ring (near zero:
# the host bounds the rate; see stop_cycles). The ratio is the median of the ratios of adjacent
# periods (the order alternates, ABBA...).
# guest-tx-fill: guest-tx with build/scripts/bench/vqs-guest-tx -i as the guest, which writes
# every byte of each frame (see pvp.sh) and answers the testpmd commands used here.
# pvp: the guest forwards in macswap mode what the host's net_null sends it, back to net_null
# (the host's io forwarding carries both directions); the rate is the guest's Tx-pps, and the
# host's cycles are not reported (see below).
#
#   scripts/bench/pvp_interleaved.sh [--periods N] [--seconds S] [--sizes "64 1500"]
#                                    [--modes "guest-tx guest-rx guest-tx-fill pvp"] [--plugin PATH]
#                                    [--vqs-args DEVARGS] [--baseline-vqs-args DEVARGS]
#                                    [--guest-args DEVARGS] [--table NAME] [--cpu-state]
#                                    [--host-args "TESTPMD ARGS"] [--guest-testpmd-args "ARGS"]
#                                    [--marks FILE]
#
# --cpu-state: how fast a cache line crosses between the two CPUs, sampled during each period:
# every 0.5 s both testpmds are frozen (SIGSTOP) for the 1-3 ms of build/scripts/bench/
# vqs-cpu-share --bounce (under 1% of the period, alike for both backends). For seconds at a
# time a line crosses in ~60 ns (near) or in ~250 ns (far); within far the rates have modes of
# their own that the latency does not separate. A period is near or far if all its samples
# agree (150 ns apart), else mixed; each pair is printed with its periods' median latencies,
# and each scenario also gets its rates, host cycles and ratios per class (a pair's class: its
# two periods' if they agree). --seconds must be whole seconds.
# --periods: periods per backend and scenario (default 20); --baseline-vqs-args: a second net_vqs
# port with these devargs instead of net_vhost; --guest-args: further devargs of both guest
# virtio_user ports (packed_vq=1: packed virtqueues; the script stops unless both backends
# negotiated the format asked for); --host-args: further testpmd arguments of the host (e.g.
# --record-burst-stats: every stop then prints the burst sizes each port saw, in host.log, kept
# with VQS_BENCH_KEEP=1); --guest-testpmd-args: further testpmd arguments of the guest, not
# for guest-tx-fill (e.g. --txfreet=N: a split TX ring's used entries are cleaned up once more
# than its size less N wait; testpmd's default 32); --marks: append each period's measured
# interval to FILE as "start end backend mode size class" (CLOCK_REALTIME seconds; backend a:
# net_vqs, b: the baseline; class near, far, mixed or none), to split a profile taken meanwhile
# (perf record --clockid realtime; scripts/bench/profile_by_period.sh); --table: the table in
# docs/benchmarks.md to rewrite (default pvp-interleaved; none writes nothing).
# Needs root, hugepages and a build.
# VQS_BENCH_KEEP=1 keeps the run directory (both testpmds' logs) for a look afterwards.
# VQS_GUEST_TESTPMD=PATH runs the guest with another dpdk-testpmd (one built with -g from the
# dpdk source package, so that perf names the virtio driver's functions; see switch_vs_ovs.sh).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$top/scripts/bench/common.sh"
periods=20
seconds=3
sizes="64 1500"
modes="guest-tx guest-rx"
vqs_args=""
baseline_args=""
guest_args=""
host_args=()
guest_testpmd_args=()
table=pvp-interleaved
marks=""
cpu_state=""
plugin_src=$top/build/drivers/librte_net_vqs.so
while [ $# -gt 0 ]; do
  case "$1" in
    --periods) periods=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --vqs-args) vqs_args=",$2"; shift 2 ;;
    --baseline-vqs-args) baseline_args=",$2"; shift 2 ;;
    --guest-args) guest_args=",$2"; shift 2 ;;
    --host-args) read -r -a host_args <<<"$2"; shift 2 ;;
    --guest-testpmd-args) read -r -a guest_testpmd_args <<<"$2"; shift 2 ;;
    --table) table=$2; shift 2 ;;
    --marks) marks=$2; shift 2 ;;
    --plugin) plugin_src=$2; shift 2 ;;
    --cpu-state) cpu_state=$top/build/scripts/bench/vqs-cpu-share; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
for mode in $modes; do
  case "$mode" in
    guest-tx | guest-rx | pvp) ;;
    guest-tx-fill)
      [ -x "$top/build/scripts/bench/vqs-guest-tx" ] ||
        { echo "build first: vqs-guest-tx" >&2; exit 1; }
      [ ${#guest_testpmd_args[@]} -eq 0 ] ||
        { echo "--guest-testpmd-args: not with guest-tx-fill" >&2; exit 2; } ;;
    *) echo "mode $mode: guest-tx, guest-tx-fill, guest-rx or pvp" >&2; exit 2 ;;
  esac
done
[ -f "$plugin_src" ] || { echo "build first: $plugin_src missing" >&2; exit 1; }
[ -z "$cpu_state" ] || [ -x "$cpu_state" ] || { echo "build first: $cpu_state" >&2; exit 1; }
candidate="net_vqs$vqs_args"
if [ -n "$baseline_args" ]; then
  baseline="net_vqs$baseline_args" baseline_dev=net_vqs1
else
  baseline=net_vhost baseline_dev=net_vhost0
fi

run=$(mktemp -d /run/vqs-bench.XXXXXX)  # not world-writable: EAL loads plugins from here
cp "$plugin_src" "$run/librte_net_vqs.so"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done  # if frozen by a sample
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  [ -n "${VQS_BENCH_KEEP:-}" ] || rm -rf "$run"
}
trap cleanup EXIT

# send WHO COMMAND: a command line to the host's or the guest's testpmd prompt.
send() { echo "$2" >&"${fd[$1]}"; }
# since WHO OFFSET: what that testpmd printed after byte OFFSET of its log.
since() { tail -c +$(($2 + 1)) "$run/$1.log"; }
size_of() { stat -c %s "$run/$1.log"; }
# port_id WHO NAME: the port id testpmd gave the device NAME ("show port summary all").
port_id() {
  local at id=""
  for _ in 1 2 3 4 5; do  # a guest still connecting to its sockets answers late
    at=$(size_of "$1")
    send "$1" "show port summary all"
    sleep 0.5
    id=$(since "$1" "$at" | grep -a -E "^[0-9]+ .* $2 " | awk '{print $1}' | head -1 || true)
    [ -n "$id" ] && break
  done
  echo "$id"
}

# start_pair MODE SIZE: both testpmds, interactive, reading commands from fifos.
declare -A fd=()
start_pair() {
  local mode=$1 size=$2 null_a null_b vqs_b mbuf=() fwd prog=("${VQS_GUEST_TESTPMD:-dpdk-testpmd}")
  if [ "$mode" = guest-rx ] || [ "$mode" = pvp ]; then
    null_a="net_null0,size=$size" null_b="net_null1,size=$size"
  else
    null_a="net_null0,no-rx=1" null_b="net_null1,no-rx=1"
  fi
  if [ "$baseline" = net_vhost ]; then
    vqs_b="$baseline_dev,iface=$run/b.sock,queues=1"
  else
    vqs_b="$baseline_dev,iface=$run/b.sock$baseline_args"
  fi
  rm -f "$run"/*.sock "$run"/*.in
  mkfifo "$run/host.in" "$run/guest.in"
  # Line-buffered, so each command's answer is in the log when we read it.
  stdbuf -oL dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix vqs-ilv-host -m 512 --no-pci \
    -d "$run/librte_net_vqs.so" --vdev "net_vqs0,iface=$run/a.sock$vqs_args" --vdev "$vqs_b" \
    --vdev "$null_a" --vdev "$null_b" --log-level "lib.vhost.config:info" \
    --log-level "*:warning" -- -i --forward-mode=io \
    --nb-cores=1 --record-core-cycles "${host_args[@]}" <"$run/host.in" >"$run/host.log" 2>&1 &
  pids+=($!)
  exec {fd[host]}>"$run/host.in"
  for _ in $(seq 100); do [ -S "$run/a.sock" ] && [ -S "$run/b.sock" ] && break; sleep 0.1; done
  sleep 1
  [ "$size" -gt 1800 ] && mbuf=("--mbuf-size=$((size + 256))")
  case "$mode" in
    guest-rx) fwd=(--forward-mode=rxonly --nb-cores=1) ;;
    guest-tx) fwd=("${mbuf[@]}" --forward-mode=txonly "--txpkts=$size" --nb-cores=1) ;;
    guest-tx-fill) prog=("$top/build/scripts/bench/vqs-guest-tx"); fwd=(--size "$size") ;;
    pvp) fwd=("${mbuf[@]}" --forward-mode=macswap --nb-cores=1) ;;
  esac
  stdbuf -oL "${prog[@]}" -l 0,1 --main-lcore 1 --file-prefix vqs-ilv-guest -m 512 --no-pci \
    --single-file-segments \
    --vdev "net_virtio_user0,path=$run/a.sock,queue_size=1024,mrg_rxbuf=1,in_order=0$guest_args" \
    --vdev "net_virtio_user1,path=$run/b.sock,queue_size=1024,mrg_rxbuf=1,in_order=0$guest_args" \
    --log-level "*:warning" -- -i "${fwd[@]}" "${guest_testpmd_args[@]}" \
    <"$run/guest.in" >"$run/guest.log" 2>&1 &
  pids+=($!)
  exec {fd[guest]}>"$run/guest.in"
  for _ in $(seq 100); do grep -aq "testpmd>" "$run/guest.log" 2>/dev/null && break; sleep 0.1; done
  sleep 1
  # Both backends must run the ring format asked for (librte_vhost logs what was negotiated).
  local want=0 sock features=""
  [[ $guest_args == *packed_vq=1* ]] && want=1
  for sock in a b; do
    features=$(grep -a "($run/$sock.sock) negotiated Virtio features" "$run/host.log" | tail -1 |
               grep -oE "0x[0-9a-f]+")
    if [ -z "$features" ] || [ $(((features >> 34) & 1)) -ne "$want" ]; then
      echo "$sock.sock: VIRTIO_F_RING_PACKED is not $want (features ${features:-none})" >&2
      exit 1
    fi
  done
}

stop_pair() {
  send guest stop
  send guest quit
  send host stop
  sleep 1
  send host quit
  exec {fd[guest]}>&- {fd[host]}>&-
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

# period WHICH MODE: forward through backend WHICH (a: candidate, b: baseline) for one period;
# prints "Mpps host-cycles/packet state" (the cycles those of the period before, printed at its
# stop; the state with --cpu-state the class, near, far or mixed, and the median line latency,
# "far/214", else none).
period() {
  local which=$1 mode=$2 key=Tx-pps at cycles rate class=none state=none
  [ "$mode" = guest-rx ] && key=Rx-pps
  at=$(size_of host)
  send host stop
  send guest stop
  sleep 0.3
  read -r cycles dropped < <(since host "$at" | stop_cycles "$mode")
  send host "set portlist ${hport[$which]},${hnull[$which]}"
  send guest "set portlist ${gport[$which]}"
  send host start
  send guest start
  sleep 1
  send guest "show port stats ${gport[$which]}"  # starts the rate's interval
  local started
  started=$(date +%s.%N)
  if [ -n "$cpu_state" ]; then
    state=$(line_crossings "$seconds" "$cpu_state" "${pids[@]}" | crossing_state)
    class=${state%/*}
  else
    sleep "$seconds"
  fi
  at=$(size_of guest)
  send guest "show port stats ${gport[$which]}"
  [ -z "$marks" ] || echo "$started $(date +%s.%N) $which $mode $size $class" >>"$marks"
  sleep 0.3
  rate=$(since guest "$at" | grep -a -oE "$key: +[0-9]+" | awk '{printf "%.3f", $2 / 1e6}' | tail -1 || true)
  echo "${rate:-0} ${cycles:-0} $state ${dropped:--}"
}

# stop_cycles MODE, given what the host printed at a stop: "cycles dropped" of the period before.
# testpmd divides its cycles by the frames it received. In guest-rx (as in pvp) those are
# net_null's, offered whether or not the guest's ring has room, and the host is always busy: a
# backend that drops more spins faster and looks cheaper, and its cycles a frame delivered are
# only the rate inverted. So guest-rx gives no cycles (0), but the share of the offered frames
# dropped at the guest's full ring: near zero, the host bounds the rate; high, the guest does.
# Else testpmd's cycles a packet, and "-".
stop_cycles() {
  awk -v mode="$1" '
    /CPU cycles\/packet=/ {
      match($0, /CPU cycles\/packet=[0-9.]+/); per = substr($0, RSTART + 18, RLENGTH - 18)
    }
    /Accumulated forward statistics/ {acc = 1}
    acc && /TX-packets:/ {dropped = $4; offered = $6; acc = 0}
    END {
      if (per == "") { print "0 -"; exit }
      if (mode != "guest-rx") { print per, "-"; exit }
      if (offered + 0 == 0) { print "0 -"; exit }
      printf "0 %.1f\n", 100 * dropped / offered
    }'
}

load_before=$(load)
results=()
for mode in $modes; do
  for size in $sizes; do
    start_pair "$mode" "$size"
    declare -A hport=([a]=$(port_id host net_vqs0) [b]=$(port_id host "$baseline_dev"))
    declare -A hnull=([a]=$(port_id host net_null0) [b]=$(port_id host net_null1))
    declare -A gport=([a]=$(port_id guest net_virtio_user0) [b]=$(port_id guest net_virtio_user1))
    for k in a b; do
      [ -n "${hport[$k]}" ] && [ -n "${hnull[$k]}" ] && [ -n "${gport[$k]}" ] ||
        { echo "ports not found; see $run/host.log, $run/guest.log" >&2; exit 1; }
    done
    rates_a="" rates_b="" cyc_a="" cyc_b="" ratios="" prev=""
    # ABBA...: each pair of neighbours is one of each, and the order alternates.
    sequence=""
    for p in $(seq "$periods"); do
      if [ $((p % 2)) -eq 1 ]; then sequence+=" a b"; else sequence+=" b a"; fi
    done
    declare -A last=() ns=() class_rates=() class_cycles=() class_ratios=() class_dropped=()
    pair_class="" prev_class=""
    for which in $sequence; do
      read -r rate cycles state dropped < <(period "$which" "$mode")
      class=${state%/*}
      [ "$state" = "$class" ] || ns[$which]=${state#*/}
      # A pair's class: its periods' if they agree, else mixed.
      if [ -z "$pair_class" ]; then pair_class=$class; elif [ "$pair_class" != "$class" ]; then pair_class=mixed; fi
      # The cycles printed at this stop belong to the period before.
      if [ -n "$prev" ] && [ "$cycles" != 0 ]; then
        if [ "$prev" = a ]; then cyc_a+=" $cycles"; else cyc_b+=" $cycles"; fi
        class_cycles[$prev.$prev_class]+=" $cycles"
      fi
      [ -z "$prev" ] || [ "$dropped" = - ] || class_dropped[$prev.$prev_class]+=" $dropped"
      if [ "$which" = a ]; then rates_a+=" $rate"; else rates_b+=" $rate"; fi
      class_rates[$which.$class]+=" $rate"
      prev_class=$class
      last[$which]=$rate
      # A ratio per pair: after each second period of a pair.
      if [ -n "${last[a]:-}" ] && [ -n "${last[b]:-}" ]; then
        ratio=$(awk -v a="${last[a]}" -v b="${last[b]}" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')
        ratios+=" $ratio"
        class_ratios[$pair_class]+=" $ratio"
        echo "  $mode ${size}B: $baseline ${last[b]} Mpps, $candidate ${last[a]} Mpps ($pair_class${ns[b]:+ ${ns[b]}/${ns[a]} ns}, load $(load))" >&2
        last=()
        pair_class=""
      fi
      prev=$which
    done
    # The last period's cycles, printed at the final stop.
    at=$(size_of host)
    send host stop
    sleep 0.3
    read -r cycles dropped < <(since host "$at" | stop_cycles "$mode")
    if [ "$cycles" != 0 ]; then
      if [ "$prev" = a ]; then cyc_a+=" $cycles"; else cyc_b+=" $cycles"; fi
      class_cycles[$prev.$prev_class]+=" $cycles"
    fi
    [ "$dropped" = - ] || class_dropped[$prev.$prev_class]+=" $dropped"
    stop_pair
    # pvp: the host's io forwarding counts every net_null frame it receives, most of which the
    # guest's full ring then drops, so its cycles per packet say nothing of the guest's packets.
    [ "$mode" = pvp ] && { cyc_a="" cyc_b=""; class_cycles=(); }
    mapfile -t lines < <(scenario_lines "$mode" "$size" "$baseline" "$rates_b" "$candidate" \
      "$rates_a" "$ratios" pairs "$cyc_b" "$cyc_a" "$(tsc_mhz "$run/host.log")")
    cycles_label="host cycles"
    [ "$mode" = guest-rx ] && cycles_label=""
    [ -z "$cpu_state" ] || mapfile -t -O "${#lines[@]}" lines < <(class_lines "$baseline" "$candidate" \
      class_rates class_cycles class_ratios "$cycles_label" class_dropped)
    printf '%s\n' "${lines[@]}"
    results+=("${lines[@]}")
  done
done

[ "$table" = none ] || write_table "$table" \
  "$(date -u +%Y-%m-%d) $(nproc) CPUs, $periods periods x ${seconds}s per backend, $(dpdk_version), load average $load_before -> $(load)" \
  "${results[@]}"
