#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# net_vqs in dpdk-testpmd serving a Linux guest under QEMU (docs/guests.md's command line, QEMU
# as client with reconnect=1), io forwarding between the guest and a net_tap port into this
# host's stack: the host pings the guest; then testpmd stops and starts again with the guest
# running, and the guest answers again without a reboot. Reports how long that took. The guest
# runs packed virtqueues (packed=on): QEMU then gives the restarted testpmd a stale vring base
# (it keeps none of its own for packed rings), and net_vqs resumes from the descriptors.
#   pmd_qemu_restart_test.sh PLUGIN.so SOURCE_DIR
set -uo pipefail

plugin=$1
src=$2
run=$(mktemp -d /run/vqs-pmdq.XXXXXX)  # EAL refuses plugins below world-writable directories
tag=$(basename "$run")
tap=vqsp$$
net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250)).0
host=${net%.0}.1
guest=${net%.0}.2
cp "$plugin" "$run/librte_net_vqs.so"
testpmd_pid=
source "$src/scripts/guest/harness.sh"
cleanup() {
  pkill -KILL -f -- "$run/g0" 2>/dev/null  # QEMU (its socket and console are in $run)
  [ -n "$testpmd_pid" ] && kill -INT "$testpmd_pid" 2>/dev/null
  sleep 0.5
  pkill -KILL -f -- "--file-prefix $tag" 2>/dev/null
  rm -rf "$run" /var/run/dpdk/"$tag"* /dev/hugepages/"$tag"*
}
trap cleanup EXIT

guest_dir=$("$src/scripts/guest/build.sh") || { echo "FAIL: cannot build the guest"; exit 1; }
# A sanitizer build of the plugin needs its runtimes in the uninstrumented testpmd, loaded first.
preload=$(ldd "$plugin" | awk '/lib(asan|ubsan)\.so/ {print $3}' | sort | tr '\n' ' ')
host_env=()
[ -n "$preload" ] && host_env=(env LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")

# testpmd: net_vqs (port 0, the guest's socket) and net_tap (port 1) forwarded to each other on
# lcore 1; the tap's host end gets a fixed MAC and the host's address.
start_testpmd() {
  "${host_env[@]}" dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix "$tag" -m 256 --no-pci \
    --single-file-segments -d "$run/librte_net_vqs.so" --vdev "net_vqs0,iface=$run/g0.sock" \
    --vdev "net_tap0,iface=$tap" --log-level "*:notice" -- --forward-mode=io --nb-cores=1 \
    --auto-start --stats-period 1 </dev/null >>"$run/testpmd.log" 2>&1 &
  testpmd_pid=$!
  for _ in $(seq 100); do [ -S "$run/g0.sock" ] && ip link show "$tap" >/dev/null 2>&1 && break; sleep 0.1; done
  ip link set "$tap" address 02:00:00:00:00:01 && ip addr add "$host/24" dev "$tap" &&
    ip link set "$tap" up || { echo "FAIL: testpmd did not start: $(tail -n 5 "$run/testpmd.log")"; exit 1; }
}
start_testpmd

qemu-system-x86_64 -machine pc,accel=tcg,memory-backend=mem -cpu max -smp 1 -m 128M \
  -object memory-backend-file,id=mem,size=128M,mem-path=/dev/hugepages,share=on \
  -kernel "$guest_dir/vmlinuz" -initrd "$guest_dir/initramfs.gz" \
  -append "console=ttyS0 quiet panic=-1 vqs.ip=$guest/24 vqs.ping=$host" \
  -chardev "socket,id=chr0,path=$run/g0.sock,reconnect=1" \
  -netdev vhost-user,id=net0,chardev=chr0,queues=1 \
  -device virtio-net-pci,netdev=net0,mac=52:54:00:00:00:02,vectors=0,packed=on \
  -display none -serial "file:$run/g0.console" -no-reboot >"$run/qemu.log" 2>&1 &

for _ in $(seq 240); do grep -aq "VQS-GUEST-PINGS-DONE" "$run/g0.console" 2>/dev/null && break; sleep 0.5; done
if grep -aq "VQS-GUEST-PING-OK" "$run/g0.console"; then
  ok "the guest, served by net_vqs, reached the host"
else
  fail "the guest did not reach the host: $(tail -n 5 "$run/g0.console" 2>/dev/null) $(cat "$run/qemu.log")"
fi
ping -c 3 -W 5 "$guest" >/dev/null 2>&1 && ok "the host reaches the guest" || fail "the host cannot reach the guest"
# The guest's virtio features, one character per bit: VIRTIO_F_RING_PACKED is bit 34.
features=$(grep -a -m 1 "VQS-GUEST-READY" "$run/g0.console" | sed 's/.*features //')
[ "${features:34:1}" = 1 ] && ok "the guest's virtio_net runs packed virtqueues" ||
  fail "the guest did not negotiate packed virtqueues: features $features"

stopped=$(date +%s%N)
kill -INT "$testpmd_pid"
wait "$testpmd_pid"
testpmd_pid=
sleep 1
start_testpmd
restarted=$(date +%s%N)
back=""
for _ in $(seq 60); do
  if ping -c 1 -W 1 "$guest" >/dev/null 2>&1; then
    back=$((($(date +%s%N) - restarted) / 1000000))
    break
  fi
done
if [ -n "$back" ]; then
  ok "after a restart of testpmd, the guest answers again after $back ms (down $(((restarted - stopped) / 1000000)) ms, 1 s of it on purpose)"
else
  fail "after a restart of testpmd the guest never answered: $(tail -n 20 "$run/testpmd.log")"
fi
[ "$(grep -ac "VQS-GUEST-READY" "$run/g0.console")" -eq 1 ] && ok "the guest did not reboot" ||
  fail "the guest rebooted"
grep -aq "disagrees with the packed ring" "$run/testpmd.log" &&
  ok "net_vqs resumed the packed vrings from their descriptors: $(grep -ac "disagrees with the packed ring" "$run/testpmd.log") of them" ||
  fail "net_vqs did not resume from the descriptors: $(grep -a "vring" "$run/testpmd.log" | tail -n 3)"
[ "$failures" -ne 0 ] && { echo "--- testpmd log"; tail -n 30 "$run/testpmd.log"; }
echo "pmd_qemu_restart: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
