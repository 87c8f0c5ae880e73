#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Latency-bound loop: net_vqs vs DPDK's net_vhost (or two net_vqs builds), in the same harness.
#
# Two processes, each polling on its own CPU: the host (dpdk-testpmd, io forwarding from the
# backend's single port back to itself) on lcore 1, the guest (dpdk-testpmd with virtio_user, io
# forwarding, --tx-first) on lcore 0. The guest's first burst (32 packets of 64 B) then circulates
# for ever, guest -> host -> guest, as one batch: the rate is 32 / round-trip time, so it measures
# how soon each side sees and publishes what the other did, not how much work a core can do.
# Rate = guest Rx-pps, median of the one-second samples after the warm-up; the ratio reported is
# the median of the per-round ratios (candidates alternate, the first of each round alternating).
#
#   scripts/bench/loop.sh [--rounds N] [--seconds S] [--guest-devargs ",in_order=0"]
#                         [--plugin PATH] [--baseline-plugin PATH]
#                         [--baseline-guest-devargs ",in_order=0"] [--no-doc]
#
# --plugin: the net_vqs under test (default build/drivers/librte_net_vqs.so). --guest-devargs:
# appended to the guest's net_virtio_user devargs (default: virtio_user's own defaults, ring of
# 256). The baseline is net_vhost, unless --baseline-plugin (another net_vqs build) or
# --baseline-guest-devargs (net_vqs under test, the baseline's guest with these devargs instead)
# make it a net_vqs too; then the docs are not written.
# Both testpmds record their busy cycles (--record-core-cycles): TSC cycles per packet spent in
# forwarding iterations that found packets, i.e. how long each side takes to turn the batch
# around, without its waiting; they show which side got slower or faster, whatever the rate did.
# Needs root and hugepages (scripts/setup.sh). Prints the rates and busy cycles and, unless
# --no-doc or with a net_vqs baseline, writes them into docs/benchmarks.md between the loop
# markers. Never asserts a time.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$top/scripts/bench/common.sh"
rounds=5
seconds=12
warmup=3
guest_devargs=""
plugin_src=$top/build/drivers/librte_net_vqs.so
baseline_src=""
baseline_devargs=""
write_doc=1
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --guest-devargs) guest_devargs=$2; shift 2 ;;
    --plugin) plugin_src=$2; shift 2 ;;
    --baseline-plugin) baseline_src=$2; write_doc=0; shift 2 ;;
    --baseline-guest-devargs) baseline_devargs=$2; write_doc=0; shift 2 ;;
    --no-doc) write_doc=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

[ -f "$plugin_src" ] || { echo "build first: $plugin_src missing" >&2; exit 1; }
run=$(mktemp -d /run/vqs-loop.XXXXXX)  # not world-writable: EAL loads plugins from here
mkdir "$run/a" "$run/b"
cp "$plugin_src" "$run/b/librte_net_vqs.so"
a_name=net_vhost
a_devargs=$guest_devargs
if [ -n "$baseline_src" ] || [ -n "$baseline_devargs" ]; then
  cp "${baseline_src:-$plugin_src}" "$run/a/librte_net_vqs.so"
  a_name=baseline
  [ -n "$baseline_devargs" ] && a_devargs=$baseline_devargs
fi
b_name=net_vqs
trap 'rm -rf "$run"' EXIT
sock=$run/vhost.sock

# host CANDIDATE SECONDS
host() {
  local cand=$1 secs=$2 vdev plugin=()
  if [ "$cand" = net_vhost ]; then
    vdev="net_vhost0,iface=$sock,queues=1"
  else
    vdev="net_vqs0,iface=$sock"
    if [ "$cand" = baseline ]; then plugin=(-d "$run/a/librte_net_vqs.so")
    else plugin=(-d "$run/b/librte_net_vqs.so"); fi
  fi
  timeout -s INT "$secs" dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix vqs-loop-host -m 256 \
    --no-pci "${plugin[@]}" --vdev "$vdev" --log-level "*:warning" -- \
    --forward-mode=io --nb-cores=1 --auto-start --stats-period 1 --record-core-cycles \
    </dev/null >"$run/host.log" 2>&1
}

# guest CANDIDATE SECONDS: runs the guest; its log is $run/guest.log.
guest() {
  local cand=$1 secs=$2 devargs=$guest_devargs
  [ "$cand" = "$a_name" ] && devargs=$a_devargs
  timeout -s INT "$secs" dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix vqs-loop-guest \
    -m 256 --no-pci --single-file-segments \
    --vdev "net_virtio_user0,path=$sock,queue_size=256$devargs" \
    --log-level "*:warning" -- --forward-mode=io --tx-first --nb-cores=1 --auto-start \
    --stats-period 1 --record-core-cycles </dev/null >"$run/guest.log" 2>&1 || true
}

one_run() {  # CANDIDATE -> "Mpps host-cycles/packet guest-cycles/packet"
  local cand=$1
  rm -f "$sock"
  host "$cand" $((seconds + 6)) &
  local host_pid=$!
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 1
  guest "$cand" "$seconds"
  kill -INT "$host_pid" 2>/dev/null || true
  wait "$host_pid" 2>/dev/null || true
  sleep 1
  echo "$(median_rate "$run/guest.log" Rx-pps "$warmup") $(busy_cycles "$run/host.log") $(busy_cycles "$run/guest.log")"
}


load_before=$(load)
a_runs="" b_runs="" ratios="" a_host="" b_host="" a_guest="" b_guest=""
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="$a_name $b_name"; else order="$b_name $a_name"; fi
  declare -A mpps=() hcyc=() gcyc=()
  for c in $order; do
    read -r mpps[$c] hcyc[$c] gcyc[$c] < <(one_run "$c")
  done
  a_runs+=" ${mpps[$a_name]}" b_runs+=" ${mpps[$b_name]}"
  a_host+=" ${hcyc[$a_name]}" b_host+=" ${hcyc[$b_name]}"
  a_guest+=" ${gcyc[$a_name]}" b_guest+=" ${gcyc[$b_name]}"
  ratios+=" $(awk -v a="${mpps[$b_name]}" -v b="${mpps[$a_name]}" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')"
  echo "  loop round $r: $a_name ${mpps[$a_name]} Mpps (busy cycles/packet host ${hcyc[$a_name]}, guest ${gcyc[$a_name]}), $b_name ${mpps[$b_name]} Mpps (host ${hcyc[$b_name]}, guest ${gcyc[$b_name]}) (load $(load))" >&2
done
[ "$a_devargs" != "$guest_devargs" ] && a_name="$a_name($a_devargs)"
line=$(printf 'loop 64B%s  %s %7s Mpps  %s %7s Mpps  ratio %5sx  (rounds:%s)' \
  "${guest_devargs:+ ($guest_devargs)}" "$a_name" "$(echo "$a_runs" | median)" "$b_name" \
  "$(echo "$b_runs" | median)" "$(echo "$ratios" | median)" "$ratios")
cycles=$(printf '  busy TSC cycles/packet (medians): host %s %s, %s %s; guest %s %s, %s %s' \
  "$a_name" "$(echo "$a_host" | median)" "$b_name" "$(echo "$b_host" | median)" \
  "$a_name" "$(echo "$a_guest" | median)" "$b_name" "$(echo "$b_guest" | median)")
echo "$line"
echo "$cycles"
echo "load average before: $load_before, after: $(load)"

if [ "$write_doc" = 1 ]; then
  write_table loop \
    "$(date -u +%Y-%m-%d) $(nproc) CPUs, $rounds rounds x ${seconds}s, $(dpdk_version), load average $load_before -> $(load)" \
    "$line" "$cycles"
fi
