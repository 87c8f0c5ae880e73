# SPDX-License-Identifier: BSD-3-Clause
# Shared by the tests that run Linux guests under QEMU (sourced, after setting `run`, the test's
# directory, and `src`, the source tree): check counters, QEMU as docs/guests.md gives it for a
# migratable guest, QMP, and the ping flood's verdict.

failures=0
checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); echo "ok: $*"; }

# One side of a guest's migration: $1 name (its QMP socket and files in $run), $2 the port's
# socket, $3 the guest's address/len, $4 the host's address (pinged at boot), $5 its MAC, $6
# extra virtio-net-pci options, then extra QEMU options (-incoming). Source and destination
# differ in nothing else, as QEMU requires. No IPv6 in the guest: its router solicitations would
# teach bridges where it is at times of their own. Needs guest_dir (scripts/guest/build.sh).
guest_qemu() {
  local name=$1 sock=$2 addr=$3 host_addr=$4 mac=$5 device_opts=$6
  shift 6
  qemu-system-x86_64 -machine pc,accel=tcg,memory-backend=mem -cpu max -m 128M \
    -object memory-backend-file,id=mem,size=128M,mem-path=/dev/hugepages,share=on \
    -kernel "$guest_dir/vmlinuz" -initrd "$guest_dir/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 ipv6.disable=1 vqs.ip=$addr vqs.ping=$host_addr" \
    -chardev "socket,id=chr0,path=$sock,reconnect=1" \
    -netdev "vhost-user,id=net0,chardev=chr0" \
    -device "virtio-net-pci,netdev=net0,mac=$mac,vectors=0,rx_queue_size=1024,tx_queue_size=1024$device_opts" \
    -qmp "unix:$run/$name.qmp,server=on,wait=off" \
    -display none -serial "file:$run/$name.console" -no-reboot "$@" >"$run/$name.qemu.log" 2>&1 &
  disown  # killed on purpose later: no job notice
}

# A QMP command to QEMU $1: $2 the command, $3 its arguments (JSON); prints the "return" value.
qmp() {
  local name=$1
  shift
  "$src/scripts/guest/qmp.py" "$run/$name.qmp" "$@"
}
# A field of a QMP reply ($1, JSON) by its name ($2, e.g. status).
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2"; }

# A ping flood with a data pattern toward $1 (64 in flight, 1000 bytes), its output in $2: some
# requests sit in the guest's receive ring whenever it stops. flood_verdict reads it after.
flood_pattern=a55aa55a0ff0
flood() { ping -f -l 64 -s 1000 -p "$flood_pattern" -w 60 "$1" >"$2" 2>&1 & }
flood_stop() {
  pkill -INT -f -- "-p $flood_pattern" 2>/dev/null
  sleep 0.5
}
# $1 the flood's output, $2 what it went to: no reply with other data, none twice, some at all.
flood_verdict() {
  if grep -q "wrong data\|corrupted" "$1"; then
    fail "$2: replies with corrupted data: $(grep -a -m 3 "wrong data\|corrupted" "$1")"
  elif grep -q "duplicates" "$1"; then
    # A request answered twice: a receive entry the guest saw again after the move.
    fail "$2: duplicate replies: $(grep -a "packets transmitted" "$1")"
  elif grep -q " [1-9][0-9]* received" "$1"; then
    ok "$2: the flood's replies carried the pattern intact, none twice ($(grep -a "packets transmitted" "$1"))"
  else
    fail "$2: the flood got no reply: $(tail -n 3 "$1")"
  fi
}
