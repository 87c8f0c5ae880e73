#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Zero-copy under a stalled output: what the copy fallback buys (issue 15; the seed's experiment,
# where vhost-net without its fallback let two flows of one guest fall from ~80k pps to ~400 when
# one flow's output stalled).
#
# One guest (build/scripts/bench/vqs-zc-guest) sends two flows from one TX queue through
# vqswitch's L2 bridge: flow A, 1400-byte frames, to a port that holds what it is sent until a
# slow consumer takes it (a net_ring port drained by build/scripts/bench/vqs-slow-drain, a DPDK
# secondary process of the switch, as a NIC's tx ring holds mbufs until the wire sends them), and
# flow B, 64-byte frames, to a second port of the guest. Each at --pps (100000). Three vqswitch
# instances, the same but for the guest's port: copying (`zerocopy: false`), lending with the copy
# fallback (`zerocopy: true`, the product), and lending without it (`zerocopy_fallback: false`, a
# benchmark-only setting: at the in-flight limit the TX queue waits for a lent buffer to come
# back). Each takes its turn on CPU 1 (the others frozen), period by period, the order reversed
# every other round; each turn has two periods: "flowing" (the consumer takes up to twice a
# flow's rate) and "stalled" (it takes --stall-pps, 1000). A frozen switch's consumer is frozen
# too: the consumers wake on the guest's CPU. Reported per variant and phase: the medians of both
# flows' sent and delivered rates (flow A's delivered: what the consumer took), and of the frames
# the guest's ring refused.
#
#   scripts/bench/zerocopy_stall.sh [--rounds N] [--seconds S] [--pps N] [--stall-pps N]
#       [--queue-size N] [--table NAME]
#
# --table: the block of docs/benchmarks.md to rewrite (default zerocopy-stall; none: print only);
# docs/data/TABLE.tsv gets the medians. Needs root and a build. VQS_BENCH_KEEP=1 keeps the run
# directory.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$top/scripts/bench/common.sh"
rounds=4
seconds=3
pps=100000
stall_pps=1000
queue_size=256
table=zerocopy-stall
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --pps) pps=$2; shift 2 ;;
    --stall-pps) stall_pps=$2; shift 2 ;;
    --queue-size) queue_size=$2; shift 2 ;;
    --table) table=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
bin=$top/build/scripts/bench
vqswitch=$top/build/app/vqswitch/vqswitch
for b in "$vqswitch" "$bin/vqs-zc-guest" "$bin/vqs-slow-drain"; do
  [ -x "$b" ] || { echo "build first: $b" >&2; exit 1; }
done
labels=(copy zerocopy "zerocopy, no fallback")
extras=("" ", zerocopy: true" ", zerocopy: true, zerocopy_fallback: false")
readonly kSwitchMb=512 kGuestMb=1024
need=$(((kSwitchMb * 2 * ${#labels[@]} + kGuestMb + 512) / 2))
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
[ "$(cat $nr)" -ge "$need" ] || echo "$need" >$nr

run=$(mktemp -d /run/vqs-zc.XXXXXX)
tag=$(basename "$run")
pids=() sw_pids=() drain_pids=() drain_fds=()
cleanup() {
  local p fd
  for p in "${sw_pids[@]}" "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  [ -n "${fd_guest:-}" ] && { (echo quit >&"$fd_guest") 2>/dev/null || true; }
  for fd in "${drain_fds[@]}"; do (echo quit >&"$fd") 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}" "${sw_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}" "${sw_pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf /dev/hugepages/"$tag"-* /var/run/dpdk/"$tag"-*
  [ -n "${VQS_BENCH_KEEP:-}" ] || rm -rf "$run"
}
trap cleanup EXIT

# The switches: vm0 (the guest's sender) with the variant's zero-copy setting, vm1 (its
# receiver), and slow, a net_ring port. Two lcore slots, the first (the main lcore) left without
# queues, asleep: the forwarding lcore is slot 1 and so sends on slow's tx queue 1, whose ring
# (ETH_RXTX1_net_ring0) only the consumer reads, while it polls rx queue 0 (ETH_RXTX0_net_ring0),
# where the consumer returns them.
for i in "${!labels[@]}"; do
  yaml=$run/vqswitch$i.yaml
  cat >"$yaml" <<EOF
version: 1
eal: {cores: "0-1", main_lcore: 0, memory_mb: $kSwitchMb, file_prefix: $tag-vqs$i,
      args: ["--no-pci", "--log-level=*:warning"]}
stats_interval_s: 0
ports:
  - {name: vm0, type: vhost, socket: $run/vqs$i-vm0.sock${extras[$i]}}
  - {name: vm1, type: vhost, socket: $run/vqs$i-vm1.sock}
  - {name: slow, type: ethdev, device: net_ring0}
lcores:
  - {lcore: 0, rx: auto, busy_poll_us: 0}
  - {lcore: 1, rx: ["vm0:0", "vm1:0", "slow:0"]}
forwarding: {mode: bridge}
EOF
  "$vqswitch" --check "$yaml" >"$run/vqswitch$i.plan" || { cat "$run/vqswitch$i.plan" >&2; exit 1; }
  "$vqswitch" --config "$yaml" >"$run/vqswitch$i.log" 2>&1 &
  sw_pids+=($!)
done
vdevs=()
k=0
for i in "${!labels[@]}"; do
  for v in vm0 vm1; do
    s=$run/vqs$i-$v.sock
    for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
    [ -S "$s" ] || { echo "no socket $s; see $run" >&2; exit 1; }
    vdevs+=(--vdev "net_virtio_user$k,path=$s,queue_size=$queue_size,mrg_rxbuf=1,in_order=0")
    k=$((k + 1))
  done
done
# The consumers: secondary processes of each switch (its primary must be up: the sockets are).
for i in "${!labels[@]}"; do
  mkfifo "$run/drain$i.in"
  "$bin/vqs-slow-drain" --proc-type=secondary --file-prefix "$tag-vqs$i" -l 0 --no-pci \
    --log-level "*:warning" -- --ring ETH_RXTX1_net_ring0 --return ETH_RXTX0_net_ring0 \
    <"$run/drain$i.in" >"$run/drain$i.log" 2>&1 &
  pids+=($!)
  drain_pids+=($!)
  exec {fd}>"$run/drain$i.in"
  drain_fds+=("$fd")
done
mkfifo "$run/guest.in"
stdbuf -oL "$bin/vqs-zc-guest" -l 0,1 --main-lcore 1 --file-prefix "$tag-guest" -m $kGuestMb \
  --no-pci --single-file-segments "${vdevs[@]}" --log-level "*:warning" -- --pps "$pps" \
  <"$run/guest.in" >"$run/guest.log" 2>&1 &
pids+=($!)
guest_pid=$!
exec {fd_guest}>"$run/guest.in"
for _ in $(seq 600); do grep -aq "testpmd>" "$run/guest.log" 2>/dev/null && break; sleep 0.2; done
grep -aq "testpmd>" "$run/guest.log" || { echo "guest did not start; see $run" >&2; exit 1; }
for i in "${!labels[@]}"; do
  grep -aq "drain>" "$run/drain$i.log" || { echo "consumer $i did not start; see $run" >&2; exit 1; }
done
for p in "${sw_pids[@]}" "${drain_pids[@]}"; do kill -STOP "$p"; done

guest() {
  kill -0 "$guest_pid" 2>/dev/null || { echo "the guest is gone; see $run/guest.log" >&2; exit 1; }
  echo "$1" >&"$fd_guest"
}
drain() { echo "$2" >&"${drain_fds[$1]}"; }

# phase I RATE: one period of switch I with its consumer taking RATE; prints
# "a_sent b_sent b_received refused drained held".
phase() {
  local i=$1 at dat
  drain "$i" "rate $2"
  sleep 1
  guest "show port stats all"
  drain "$i" show
  sleep "$seconds"
  at=$(stat -c %s "$run/guest.log")
  dat=$(stat -c %s "$run/drain$i.log")
  guest "show port stats all"
  drain "$i" show
  sleep 0.3
  tail -c +$((at + 1)) "$run/guest.log" | awk '/Flows:/ {a = $3; b = $5; r = $7; f = $9} END {printf "%s %s %s %s", a, b, r, f}'
  tail -c +$((dat + 1)) "$run/drain$i.log" | awk '/Drained-pps:/ {d = $2} /Held:/ {h = $2} END {printf " %s %s\n", d, h}'
}

declare -A results=()
for r in $(seq "$rounds"); do
  order=$(seq 0 $((${#labels[@]} - 1)))
  [ $((r % 2)) -eq 0 ] && order=$(echo "$order" | tac)
  for i in $order; do
    kill -CONT "${sw_pids[$i]}" "${drain_pids[$i]}"
    guest "set portlist $((2 * i)),$((2 * i + 1))"
    guest start
    for p in flowing stalled; do
      rate=$((2 * pps))
      [ $p = stalled ] && rate=$stall_pps
      line=$(phase "$i" "$rate")
      results[$i.$p]+="$line;"
      echo "  round $r: ${labels[$i]} $p: a-sent b-sent b-received refused drained held = $line (load $(load))" >&2
    done
    guest stop
    drain "$i" "rate $((2 * pps))"  # what is held goes back before the switch is frozen
    sleep 0.5
    kill -STOP "${sw_pids[$i]}" "${drain_pids[$i]}"
  done
done

# field F "line;line;...": the median of field F (1-based) over the periods, in kpps.
field() { echo "$2" | tr ';' '\n' | sed '/^$/d' | awk -v f="$1" '{print $f / 1000}' | median; }
lines=()
data=()
for i in "${!labels[@]}"; do
  for p in flowing stalled; do
    v=${results[$i.$p]}
    lines+=("$(printf '%-22s %-8s flow A sent %8s kpps, taken by the output %8s; flow B sent %8s, delivered %8s; refused by the ring %8s (medians of %d periods)' \
      "${labels[$i]}" "$p" "$(field 1 "$v")" "$(field 5 "$v")" "$(field 2 "$v")" "$(field 3 "$v")" \
      "$(field 4 "$v")" "$(echo "$v" | tr ';' '\n' | sed '/^$/d' | wc -l)")")
    data+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s' "${labels[$i]}" "$p" "$(field 1 "$v")" \
      "$(field 5 "$v")" "$(field 2 "$v")" "$(field 3 "$v")" "$(field 4 "$v")")")
  done
done
printf '%s\n' "${lines[@]}"
if [ "$table" != none ]; then
  mkdir -p "$top/docs/data"
  { printf 'variant\tphase\ta_sent_kpps\ta_taken_kpps\tb_sent_kpps\tb_delivered_kpps\trefused_kpps\n'
    printf '%s\n' "${data[@]}"; } >"$top/docs/data/$table.tsv"
  # Plot: flow B's delivered rate, flowing and stalled, per variant (log scale: a stall without
  # the fallback takes it from ~100k to ~10 packets/s).
  command -v gnuplot >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
  awk -F'\t' 'NR > 1 {v[$1] = v[$1] "\t" (($6 > 0) ? $6 : 0.001); if (!($1 in o)) o[$1] = n++; name[o[$1]] = $1}
    END {for (i = 0; i < n; i++) print "\"" name[i] "\"" v[name[i]]}' "$top/docs/data/$table.tsv" >"$run/plot.dat"
  mkdir -p "$top/docs/img"
  gnuplot <<GP || echo "no plot" >&2
set terminal pngcairo size 900,500 font 'sans,10' noenhanced
set output '$top/docs/img/$table.png'
set title 'Flow B (64 B, to another guest) while flow A (1400 B) goes to an output that stalls ($(date -u +%F))'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set yrange [0.001:1000]
set ylabel 'flow B delivered (kpps), median of periods'
set grid ytics
set key outside right
plot '$run/plot.dat' using 2:xticlabels(1) title 'output flowing', '' using 3 title 'output stalled ($stall_pps pps)'
GP
  write_table "$table" \
    "$(date -u +%Y-%m-%d) $(nproc) CPUs, $rounds rounds x ${seconds}s per phase, $(dpdk_version), flows of $pps pps each, guest rings of $queue_size, stalled output taking $stall_pps pps, load average $(load)" \
    "${lines[@]}"
fi
