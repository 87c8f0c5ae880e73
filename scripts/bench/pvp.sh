#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# PVP-style comparison of our net_vqs PMD with DPDK's own net_vhost, in the same harness.
#
# Two processes, each polling on its own CPU: the host (dpdk-testpmd, io forwarding between the
# backend under test and a net_null port) on lcore 1, the guest (dpdk-testpmd with virtio_user)
# on lcore 0. guest-tx: the guest sends (txonly), the host forwards to net_null, the guest's
# Tx-pps is measured. guest-rx: net_null generates, the host forwards into the guest (rxonly,
# mergeable buffers), the guest's Rx-pps is measured. Backends alternate within each round; each
# run's rate is the median of its one-second samples after a warm-up; the ratio reported is the
# median of the per-round ratios (see ../shared notes: absolute numbers are noise here).
# guest-tx-fill: guest-tx with build/scripts/bench/vqs-guest-tx as the guest, which writes every
# byte of each frame it sends, as a real sender does (txonly writes only the headers of a recycled
# mbuf, so the payload a copying backend reads is still in its cache from the last lap).
# guest-tx lines (and guest-tx-fill's) also give the host's busy TSC cycles per packet (testpmd --record-core-cycles):
# what forwarding one packet cost the host, which the guest's own speed does not cap.
#
#   scripts/bench/pvp.sh [--rounds N] [--seconds S] [--sizes "64 1500"]
#                        [--modes "guest-tx guest-rx guest-tx-fill"]
#                        [--plugin PATH] [--vqs-args DEVARGS] [--baseline-vqs-args DEVARGS]
#                        [--table NAME]
#
# --plugin: the net_vqs build to measure; --vqs-args adds devargs to net_vqs (e.g. zerocopy=1);
# --baseline-vqs-args: compare against net_vqs with these devargs instead of net_vhost (e.g.
# zerocopy=0, for zero-copy on/off); --table names the table in docs/benchmarks.md to rewrite
# (between <!-- NAME:begin --> and <!-- NAME:end -->; default pvp). As docs/benchmarks.md records:
#   scripts/bench/pvp.sh --modes guest-tx --sizes "64 1500 9000" --vqs-args zerocopy=1 \
#     --table pvp-zerocopy
#   scripts/bench/pvp.sh --modes guest-tx --sizes "64 1500 9000" --vqs-args zerocopy=1 \
#     --baseline-vqs-args zerocopy=0 --table pvp-zerocopy-onoff
#
# Needs root and hugepages (scripts/setup.sh) and a build (build/drivers/librte_net_vqs.so).
# Prints one line per scenario and writes the table into docs/benchmarks.md.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$top/scripts/bench/common.sh"
rounds=5
seconds=12
warmup=3
sizes="64 1500"
modes="guest-tx guest-rx"
vqs_args=""
baseline_args=""
baseline=net_vhost
table=pvp
plugin_src=$top/build/drivers/librte_net_vqs.so
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --vqs-args) vqs_args=",$2"; shift 2 ;;
    --baseline-vqs-args) baseline_args=",$2"; baseline="net_vqs$baseline_args"; shift 2 ;;
    --table) table=$2; shift 2 ;;
    --plugin) plugin_src=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
candidate="net_vqs$vqs_args"

[ -f "$plugin_src" ] || { echo "build first: $plugin_src missing" >&2; exit 1; }
case " $modes " in *" guest-tx-fill "*)
  [ -x "$top/build/scripts/bench/vqs-guest-tx" ] || { echo "build first: vqs-guest-tx" >&2; exit 1; } ;;
esac
run=$(mktemp -d /run/vqs-bench.XXXXXX)  # not world-writable: EAL loads plugins from here
cp "$plugin_src" "$run/librte_net_vqs.so"
# No pkill by name: another checkout may be benchmarking with the same file prefix. Both
# testpmds run under timeout, and an interrupt (Ctrl-C) reaches them through the process group.
trap 'rm -rf "$run"' EXIT
sock=$run/vhost.sock

# host BACKEND MODE SIZE SECONDS (BACKEND: net_vhost or net_vqs[,DEVARGS])
host() {
  local backend=$1 mode=$2 size=$3 secs=$4 vdev plugin=()
  if [ "$backend" = net_vhost ]; then
    vdev="net_vhost0,iface=$sock,queues=1"
  else
    vdev="net_vqs0,iface=$sock${backend#net_vqs}"
    plugin=(-d "$run/librte_net_vqs.so")
  fi
  local null="net_null0,no-rx=1"
  [ "$mode" = guest-rx ] && null="net_null0,size=$size"
  timeout -s INT "$secs" dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix vqs-bench-host -m 512 \
    --no-pci "${plugin[@]}" --vdev "$vdev" --vdev "$null" --log-level "*:warning" -- \
    --forward-mode=io --nb-cores=1 --auto-start --stats-period 1 --record-core-cycles \
    </dev/null >"$run/host.log" 2>&1
}

# guest MODE SIZE SECONDS
guest() {
  local mode=$1 size=$2 secs=$3 fwd
  # Frames over one default mbuf: --mbuf-size must come before --txpkts, or testpmd refuses the
  # size and sends 64 bytes.
  local mbuf=() prog=(dpdk-testpmd)
  [ "$size" -gt 1800 ] && mbuf=("--mbuf-size=$((size + 256))")
  case "$mode" in
    guest-tx) fwd=("${mbuf[@]}" --forward-mode=txonly "--txpkts=$size") ;;
    guest-rx) fwd=(--forward-mode=rxonly) ;;
    guest-tx-fill) prog=("$top/build/scripts/bench/vqs-guest-tx"); fwd=(--size "$size") ;;
  esac
  [ "$mode" = guest-tx-fill ] || fwd+=(--nb-cores=1 --auto-start --stats-period 1)
  timeout -s INT "$secs" "${prog[@]}" -l 0,1 --main-lcore 1 --file-prefix vqs-bench-guest \
    -m 512 --no-pci --single-file-segments \
    --vdev "net_virtio_user0,path=$sock,queue_size=1024,mrg_rxbuf=1,in_order=0" \
    --log-level "*:warning" -- "${fwd[@]}" </dev/null >"$run/guest.log" 2>&1 || true
}

one_run() {  # BACKEND MODE SIZE -> "Mpps host-busy-cycles/packet"
  local backend=$1 mode=$2 size=$3 key=Tx-pps
  [ "$mode" = guest-rx ] && key=Rx-pps
  rm -f "$sock"
  host "$backend" "$mode" "$size" $((seconds + 6)) &
  local host_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 1
  guest "$mode" "$size" "$seconds"
  kill -INT "$host_pid" 2>/dev/null || true
  wait "$host_pid" 2>/dev/null || true
  sleep 1
  echo "$(median_rate "$run/guest.log" "$key" "$warmup") $(busy_cycles "$run/host.log")"
}

load_before=$(load)
results=()
for mode in $modes; do
  for size in $sizes; do
    base_runs="" cand_runs="" ratios="" base_cyc="" cand_cyc=""
    for r in $(seq "$rounds"); do
      # Alternate which backend goes first, so drift over time hits both alike.
      if [ $((r % 2)) -eq 1 ]; then order="$baseline $candidate"; else order="$candidate $baseline"; fi
      declare -A got=() cyc=()
      for b in $order; do read -r got[$b] cyc[$b] < <(one_run "$b" "$mode" "$size"); done
      base_runs+=" ${got[$baseline]}" cand_runs+=" ${got[$candidate]}"
      base_cyc+=" ${cyc[$baseline]:-0}" cand_cyc+=" ${cyc[$candidate]:-0}"
      ratios+=" $(awk -v a="${got[$candidate]}" -v b="${got[$baseline]}" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')"
      echo "  $mode ${size}B round $r: $baseline ${got[$baseline]} Mpps (host ${cyc[$baseline]:-?} cycles/packet), $candidate ${got[$candidate]} Mpps (host ${cyc[$candidate]:-?}) (load $(load))" >&2
    done
    mapfile -t lines < <(scenario_lines "$mode" "$size" "$baseline" "$base_runs" "$candidate" \
      "$cand_runs" "$ratios" rounds "$base_cyc" "$cand_cyc" "$(tsc_mhz "$run/host.log")")
    printf '%s\n' "${lines[@]}"
    results+=("${lines[@]}")
  done
done

write_table "$table" \
  "$(date -u +%Y-%m-%d) $(nproc) CPUs, $rounds rounds x ${seconds}s, $(dpdk_version), load average $load_before -> $(load)" \
  "${results[@]}"
