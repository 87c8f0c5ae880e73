#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The switch demo, on a built tree: vqswitch bridges two guests (config/demo.yaml), and one
# dpdk-testpmd process plays both guests with DPDK's virtio_user — port 0 on vm0's socket, port 1
# on vm1's — forwarding in `mac` mode with --tx-first, so frames circle guest -> switch -> guest
# with each guest's own MAC (the bridge learns both). Live statistics for a few seconds, then the
# switch's final counters and the guests' own count. Exits non-zero when nothing flowed or the
# switch dropped anything.
#   demo_run.sh BUILD_DIR [SECONDS]
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$1
seconds=${2:-8}
config=$top/config/demo.yaml
run=$(mktemp -d /run/vqs-demo.XXXXXX)
tag=$(basename "$run")
mac0=02:00:00:00:de:00
mac1=02:00:00:00:de:01

cleanup() {
  pkill -INT -f -- "--file-prefix $tag-guest" 2>/dev/null || true
  [ -n "${switch_pid:-}" ] && kill -INT "$switch_pid" 2>/dev/null || true
  sleep 0.5
  pkill -KILL -f -- "--file-prefix $tag-guest" 2>/dev/null || true
  rm -rf "$run" /var/run/dpdk/"$tag"-* /dev/hugepages/"$tag"-*
}
trap cleanup EXIT

sockets=$(grep -oE 'socket: *[^ ,}]+' "$config" | awk '{print $2}')
for s in $sockets; do rm -f "$s"; done

echo "== vqswitch --check $config"
"$build/app/vqswitch/vqswitch" --check "$config"

echo "== vqswitch --config $config (live statistics every second)"
# Created before tail starts: the background job's redirection may come after it.
: >"$run/switch.log"
"$build/app/vqswitch/vqswitch" --config "$config" --stats --duration "$seconds" \
  >>"$run/switch.log" 2>&1 &
switch_pid=$!
tail -n +1 -f --pid="$switch_pid" "$run/switch.log" &
for s in $sockets; do
  for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
  [ -S "$s" ] || { echo "demo: vqswitch did not create $s"; exit 1; }
done
set -- $sockets

# Both guests in one testpmd on lcore 0 (the switch forwards on lcore 1).
timeout -s INT $((seconds - 2)) dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix "$tag-guest" \
  -m 512 --no-pci --single-file-segments \
  --vdev "net_virtio_user0,path=$1,queue_size=256,mac=$mac0" \
  --vdev "net_virtio_user1,path=$2,queue_size=256,mac=$mac1" --log-level "*:warning" -- \
  --forward-mode=mac --eth-peer="0,$mac1" --eth-peer="1,$mac0" --tx-first --nb-cores=1 \
  --auto-start --stats-period 1 </dev/null >"$run/guests.log" 2>&1 || true
wait "$switch_pid" >"$run/switch.status" 2>&1 && switch_rc=0 || switch_rc=$?
switch_pid=

# The guests' accumulated totals as testpmd prints them at exit.
guest_rx=$(grep -a -oE 'RX-packets: +[0-9]+ +RX-dropped' "$run/guests.log" | tail -n 1 | grep -oE '[0-9]+' | head -n 1)
echo "== guests (dpdk-testpmd, virtio_user): received ${guest_rx:-nothing} frames through the switch"
[ "$switch_rc" -eq 0 ] || { echo "demo: vqswitch exited with $switch_rc"; exit 1; }
[ -n "$guest_rx" ] && [ "$guest_rx" -gt 1000 ] || { echo "demo: too little traffic"; tail -n 30 "$run/guests.log"; exit 1; }
# Frames circle at a constant count, so a guest ring never overflows: any drop is a fault, but
# for frames still in flight toward a guest that has just left (testpmd closes its two ports one
# after the other at the end: counted as link_down).
faults=$(grep -E '^  port ' "$run/switch.log" | sed 's/.* drops [0-9]*: //' | tr ' ,' '\n\n' |
         grep -vE '^(none|link_down=[0-9]+|)$' || true)
if [ -n "$faults" ]; then
  echo "demo: the switch dropped frames: $faults"
  exit 1
fi
