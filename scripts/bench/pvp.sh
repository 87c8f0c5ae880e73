#!/usr/bin/env bash
# PVP-style comparison of our net_vqs PMD with DPDK's own net_vhost, in the same harness.
#
# Two processes, each polling on its own CPU: the host (dpdk-testpmd, io forwarding between the
# backend under test and a net_null port) on lcore 1, the guest (dpdk-testpmd with virtio_user)
# on lcore 0. guest-tx: the guest sends (txonly), the host forwards to net_null, the guest's
# Tx-pps is measured. guest-rx: net_null generates, the host forwards into the guest (rxonly,
# mergeable buffers), the guest's Rx-pps is measured. Backends alternate within each round; each
# run's rate is the median of its one-second samples after a warm-up; the ratio reported is the
# median of the per-round ratios (see ../shared notes: absolute numbers are noise here).
#
#   scripts/bench/pvp.sh [--rounds N] [--seconds S] [--sizes "64 1500"] [--modes "guest-tx guest-rx"]
#                        [--plugin PATH] [--vqs-args DEVARGS] [--table NAME]
#
# --plugin: the net_vqs build to measure; --vqs-args adds devargs to net_vqs (e.g. zerocopy=1);
# --table names the table in docs/benchmarks.md to rewrite (between <!-- NAME:begin --> and
# <!-- NAME:end -->; default pvp). Zero-copy, as docs/benchmarks.md records it:
#   scripts/bench/pvp.sh --modes guest-tx --sizes "64 1500 9000" --vqs-args zerocopy=1 \
#     --table pvp-zerocopy
#
# Needs root and hugepages (scripts/setup.sh) and a build (build/drivers/librte_net_vqs.so).
# Prints one line per scenario and writes the table into docs/benchmarks.md.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rounds=5
seconds=12
warmup=3
sizes="64 1500"
modes="guest-tx guest-rx"
vqs_args=""
table=pvp
plugin_src=$top/build/drivers/librte_net_vqs.so
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --vqs-args) vqs_args=",$2"; shift 2 ;;
    --table) table=$2; shift 2 ;;
    --plugin) plugin_src=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

[ -f "$plugin_src" ] || { echo "build first: $plugin_src missing" >&2; exit 1; }
run=$(mktemp -d /run/vqs-bench.XXXXXX)  # not world-writable: EAL loads plugins from here
cp "$plugin_src" "$run/"
# No pkill by name: another checkout may be benchmarking with the same file prefix. Both
# testpmds run under timeout, and an interrupt (Ctrl-C) reaches them through the process group.
trap 'rm -rf "$run"' EXIT
sock=$run/vhost.sock

# host BACKEND MODE SIZE SECONDS
host() {
  local backend=$1 mode=$2 size=$3 secs=$4 vdev plugin=()
  if [ "$backend" = net_vqs ]; then
    vdev="net_vqs0,iface=$sock$vqs_args"
    plugin=(-d "$run/librte_net_vqs.so")
  else
    vdev="net_vhost0,iface=$sock,queues=1"
  fi
  local null="net_null0,no-rx=1"
  [ "$mode" = guest-rx ] && null="net_null0,size=$size"
  timeout -s INT "$secs" dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix vqs-bench-host -m 512 \
    --no-pci "${plugin[@]}" --vdev "$vdev" --vdev "$null" --log-level "*:warning" -- \
    --forward-mode=io --nb-cores=1 --auto-start --stats-period 1 </dev/null >"$run/host.log" 2>&1
}

# guest MODE SIZE SECONDS: prints the median guest-side Mpps after the warm-up.
guest() {
  local mode=$1 size=$2 secs=$3 fwd pps_key
  # Frames over one default mbuf: --mbuf-size must come before --txpkts, or testpmd refuses the
  # size and sends 64 bytes.
  local mbuf=()
  [ "$size" -gt 1800 ] && mbuf=("--mbuf-size=$((size + 256))")
  if [ "$mode" = guest-tx ]; then fwd=("${mbuf[@]}" --forward-mode=txonly "--txpkts=$size"); pps_key=Tx-pps
  else fwd=(--forward-mode=rxonly); pps_key=Rx-pps; fi
  timeout -s INT "$secs" dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix vqs-bench-guest \
    -m 512 --no-pci --single-file-segments \
    --vdev "net_virtio_user0,path=$sock,queue_size=1024,mrg_rxbuf=1,in_order=0" \
    --log-level "*:warning" -- "${fwd[@]}" --nb-cores=1 --auto-start --stats-period 1 \
    </dev/null >"$run/guest.log" 2>&1 || true
  grep -a -oE "$pps_key: +[0-9]+" "$run/guest.log" | awk '{print $2}' | tail -n +$((warmup + 1)) |
    sort -n | awk '{v[NR]=$1} END {if (NR == 0) print 0; else printf "%.3f\n", v[int((NR+1)/2)] / 1e6}'
}

one_run() {  # BACKEND MODE SIZE -> Mpps
  local backend=$1 mode=$2 size=$3
  rm -f "$sock"
  host "$backend" "$mode" "$size" $((seconds + 6)) &
  local host_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 1
  local mpps
  mpps=$(guest "$mode" "$size" "$seconds")
  kill -INT "$host_pid" 2>/dev/null || true
  wait "$host_pid" 2>/dev/null || true
  sleep 1
  echo "$mpps"
}

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END {printf "%.3f", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

results=()
for mode in $modes; do
  for size in $sizes; do
    vhost_runs="" vqs_runs="" ratios=""
    for r in $(seq "$rounds"); do
      # Alternate which backend goes first, so drift over time hits both alike.
      if [ $((r % 2)) -eq 1 ]; then order="net_vhost net_vqs"; else order="net_vqs net_vhost"; fi
      declare -A got=()
      for b in $order; do got[$b]=$(one_run "$b" "$mode" "$size"); done
      vhost_runs+=" ${got[net_vhost]}"
      vqs_runs+=" ${got[net_vqs]}"
      ratios+=" $(awk -v a="${got[net_vqs]}" -v b="${got[net_vhost]}" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')"
      echo "  $mode ${size}B round $r: net_vhost ${got[net_vhost]} Mpps, net_vqs ${got[net_vqs]} Mpps" >&2
    done
    line=$(printf '%-9s %5sB  net_vhost %7s Mpps  net_vqs%s %7s Mpps  ratio %5sx  (rounds:%s)' \
      "$mode" "$size" "$(echo "$vhost_runs" | median)" "$vqs_args" "$(echo "$vqs_runs" | median)" \
      "$(echo "$ratios" | median)" "$ratios")
    echo "$line"
    results+=("$line")
  done
done

# The table between the markers in docs/benchmarks.md is this script's; the rest is prose.
doc=$top/docs/benchmarks.md
if [ -f "$doc" ] && grep -q "<!-- $table:begin -->" "$doc"; then
  {
    sed "/<!-- $table:begin -->/q" "$doc"
    echo '```'
    echo "$(date -u +%Y-%m-%d) $(nproc) CPUs, $rounds rounds x ${seconds}s, $(dpkg-query -W -f='DPDK ${Version}' libdpdk-dev)"
    printf '%s\n' "${results[@]}"
    echo '```'
    sed -n "/<!-- $table:end -->/,\$p" "$doc"
  } >"$doc.new" && mv "$doc.new" "$doc"
fi
