#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Live migration of Linux guests between two vqswitch ports, with a real QEMU on each side (TCG,
# docs/guests.md's command lines). Two guests, migrated at once while this host pings each with a
# data pattern through the bridge (net_tap port):
#   A: vm a0 -> a1, GUEST_ANNOUNCE (QEMU's default): the guest announces itself after the move;
#   B: vm b0 -> b1, guest_announce=off: QEMU has vqswitch send the guest's RARP (SEND_RARP).
# Checked: QEMU migrates (it refuses a vhost-user backend without dirty logging); vqswitch logged
# dirty pages on the source ports; each guest answers through its new port within seconds, the
# bridge has moved its MAC there, and no reply came back corrupted or twice. What the log holds is
# checked where it can be seen: tests/dirty_log_test.cc (every byte written, against the pages
# reported) and interop_virtio_user (librte_vhost's shared log). Here, a build that logs nothing
# still passes: the guest rewrites the pages around what we write (its avail ring, the buffers'
# neighbours) before QEMU's last pass, so QEMU sends them again anyway.
#   qemu_migration_test.sh VQSWITCH VQSWITCHCTL SOURCE_DIR
set -uo pipefail

vqswitch=$1
ctl=$2
src=$3
run=$(mktemp -d /run/vqs-mig.XXXXXX)
tag=$(basename "$run")
tap=vqsm$$
net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250)).0
host=${net%.0}.1
port_a=$((40000 + RANDOM % 10000))
port_b=$((port_a + 1))
switch_pid=
failures=0
checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { checks=$((checks + 1)); echo "ok: $*"; }
cleanup() {
  disown -a
  pkill -KILL -f -- "$run/" 2>/dev/null  # the QEMUs and pings (their files are in $run)
  [ -n "$switch_pid" ] && kill -INT "$switch_pid" 2>/dev/null
  sleep 0.5
  [ -n "$switch_pid" ] && kill -KILL "$switch_pid" 2>/dev/null
  rm -rf "$run" /var/run/dpdk/"$tag"* /dev/hugepages/"$tag"*
}
trap cleanup EXIT
ctl() { "$ctl" -s "$run/ctl.sock" "$@"; }

guest_dir=$("$src/scripts/guest/build.sh") || { echo "FAIL: cannot build the guest"; exit 1; }
command -v qemu-system-x86_64 >/dev/null || { echo "FAIL: qemu-system-x86 not installed"; exit 1; }

cat >"$run/switch.yaml" <<YAML
version: 1
eal: {cores: "0-1", main_lcore: 0, memory_mb: 256, file_prefix: $tag,
      args: ["--no-pci", "--single-file-segments"]}
control: {socket: $run/ctl.sock}
stats_interval_s: 0
ports:
  - {name: a0, type: vhost, socket: $run/a0.sock}
  - {name: a1, type: vhost, socket: $run/a1.sock}
  - {name: b0, type: vhost, socket: $run/b0.sock}
  - {name: b1, type: vhost, socket: $run/b1.sock}
  - {name: host, type: ethdev, device: "net_tap0,iface=$tap"}
lcores: [{lcore: 1, rx: auto, busy_poll_us: 200}]
forwarding: {mode: bridge}
YAML

"$vqswitch" --config "$run/switch.yaml" >"$run/switch.log" 2>&1 &
switch_pid=$!
for _ in $(seq 100); do [ -S "$run/ctl.sock" ] && break; sleep 0.1; done
[ -S "$run/ctl.sock" ] || { echo "FAIL: vqswitch did not start: $(tail -n 5 "$run/switch.log")"; exit 1; }
ip addr add "$host/24" dev "$tap" && ip link set "$tap" up || { echo "FAIL: no tap $tap"; exit 1; }

# One side of a guest's migration: $1 name (its socket and files), $2 last byte of the guest's
# address and MAC, $3 extra virtio-net-pci options, $4 extra QEMU options (-incoming). Source and
# destination differ in nothing else, as QEMU requires.
qemu() {
  local name=$1 n=$2 device_opts=$3
  shift 3
  qemu-system-x86_64 -machine pc,accel=tcg,memory-backend=mem -cpu max -m 128M \
    -object memory-backend-file,id=mem,size=128M,mem-path=/dev/hugepages,share=on \
    -kernel "$guest_dir/vmlinuz" -initrd "$guest_dir/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 vqs.ip=${net%.0}.$n/24 vqs.ping=$host" \
    -chardev "socket,id=chr0,path=$run/$name.sock,reconnect=1" \
    -netdev "vhost-user,id=net0,chardev=chr0" \
    -device "virtio-net-pci,netdev=net0,mac=52:54:00:00:01:0$n,vectors=0,rx_queue_size=1024,tx_queue_size=1024$device_opts" \
    -qmp "unix:$run/$name.qmp,server=on,wait=off" \
    -display none -serial "file:$run/$name.console" -no-reboot "$@" >"$run/$name.qemu.log" 2>&1 &
}
# A QMP command to QEMU $1: $2 the command, $3 its arguments (JSON); prints the "return" value
# as JSON, or the error.
qmp() {
  local args=${3:-'{}'}
  python3 - "$run/$1.qmp" "$2" "$args" <<'PY'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
for _ in range(50):
    try:
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.1)
s.settimeout(10)
f = s.makefile("rw")
def reply():
    while True:  # events may come first
        msg = json.loads(f.readline())
        if "return" in msg or "error" in msg:
            return msg
f.readline()  # the greeting
f.write(json.dumps({"execute": "qmp_capabilities"}) + "\n")
f.flush()
reply()
f.write(json.dumps({"execute": sys.argv[2], "arguments": json.loads(sys.argv[3])}) + "\n")
f.flush()
msg = reply()
print(json.dumps(msg.get("return", msg)))
PY
}
# A field of a QMP reply ($1, JSON) by its path ($2, e.g. status).
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$1" "$2"; }

qemu a0 2 ""
qemu b0 3 ",guest_announce=off"
qemu a1 2 "" -incoming "tcp:127.0.0.1:$port_a"
qemu b1 3 ",guest_announce=off" -incoming "tcp:127.0.0.1:$port_b"

for g in a0 b0; do
  for _ in $(seq 240); do grep -aq "VQS-GUEST-PINGS-DONE" "$run/$g.console" 2>/dev/null && break; sleep 0.5; done
  grep -aq "VQS-GUEST-PING-OK" "$run/$g.console" && ok "$g booted and reached the host" ||
    fail "$g did not boot or reach the host: $(tail -n 5 "$run/$g.console" 2>/dev/null) $(cat "$run/$g.qemu.log")"
done
for n in 2 3; do
  ping -c 2 -W 5 "${net%.0}.$n" >/dev/null 2>&1 && ok "the host reaches ${net%.0}.$n on its source port" ||
    fail "the host cannot reach ${net%.0}.$n before the migration"
done

# A flow through the bridge during the migration: 1000-byte pings with a data pattern, 64 in
# flight (so that some sit in the guest's receive ring when it stops), which the guest echoes;
# ping reports a reply whose data differs, and duplicates.
for n in 2 3; do
  ping -f -l 64 -s 1000 -p a55aa55a0ff0 -w 60 "${net%.0}.$n" >"$run/flow$n.out" 2>&1 &
done
sleep 1
qmp a0 migrate "{\"uri\": \"tcp:127.0.0.1:$port_a\"}" >"$run/a0.migrate"
qmp b0 migrate "{\"uri\": \"tcp:127.0.0.1:$port_b\"}" >"$run/b0.migrate"
declare -A done_at info
for _ in $(seq 600); do
  for g in a0 b0; do
    [ -n "${done_at[$g]:-}" ] && continue
    info[$g]=$(qmp "$g" query-migrate)
    case "$(field "${info[$g]}" status)" in
      completed) done_at[$g]=$(date +%s%N) ;;
      failed|cancelled) done_at[$g]=failed ;;
    esac
  done
  [ -n "${done_at[a0]:-}" ] && [ -n "${done_at[b0]:-}" ] && break
  sleep 0.1
done
for g in a0 b0; do
  case "${done_at[$g]:-}" in
    ''|failed) fail "$g: migration did not complete: ${info[$g]} $(cat "$run/$g.migrate" "$run/$g.qemu.log")" ;;
    *) ok "$g migrated to ${g%0}1 in $(field "${info[$g]}" total-time) ms (downtime $(field "${info[$g]}" downtime) ms)" ;;
  esac
done
for g in a0 b0; do
  grep -q "$run/$g.sock: dirty page logging on" "$run/switch.log" && ok "$g: vqswitch logged dirty pages during the migration" ||
    fail "$g: vqswitch never turned dirty page logging on"
done

# Each guest answers through its new port: how long after its migration completed.
for n in 2 3; do
  g=$([ "$n" = 2 ] && echo a0 || echo b0)
  back=""
  for _ in $(seq 100); do
    if ping -c 1 -W 0.2 "${net%.0}.$n" >/dev/null 2>&1; then
      [ "${done_at[$g]:-failed}" != failed ] && back=$((($(date +%s%N) - done_at[$g]) / 1000000))
      break
    fi
  done
  [ -n "$back" ] && ok "${net%.0}.$n answers on its destination port $back ms after the migration completed (a ping flood still running)" ||
    fail "${net%.0}.$n does not answer after the migration"
  echo "migration: ${net%.0}.$n answers ${back:-never} ms after completion" >>"$run/summary.txt"
done
ctl fdb-show --json >"$run/fdb.json"
python3 - "$run/fdb.json" <<'PY' && ok "the bridge moved both MACs to the destination ports" || fail "fdb: $(ctl fdb-show)"
import json, sys
port = {e["mac"]: e["port"] for e in json.load(open(sys.argv[1]))["entries"]}
sys.exit(0 if port.get("52:54:00:00:01:02") == "a1" and port.get("52:54:00:00:01:03") == "b1" else 1)
PY
# B cannot announce itself: QEMU asked vqswitch for its RARP on b1. A announced itself.
grep -q "$run/b1.sock: RARP requested for 52:54:00:00:01:03" "$run/switch.log" &&
  ok "b1: QEMU asked for guest B's RARP" || fail "b1: no RARP was requested for guest B"
grep -q "$run/a1.sock: RARP requested" "$run/switch.log" &&
  fail "a1: a RARP was requested for a guest that announces itself" || ok "a1: guest A announced itself"
for g in a0 b0 a1 b1; do
  status=$(field "$(qmp "$g" query-status)" status)
  want=$([ "${g#?}" = 0 ] && echo postmigrate || echo running)
  [ "$status" = "$want" ] && ok "$g's QEMU is $status" || fail "$g's QEMU is $status, not $want"
done

# The flows: replies before and after the move, none with wrong data.
sleep 1
pkill -INT -f -- "-p a55aa55a0ff0" 2>/dev/null
sleep 0.5
for n in 2 3; do
  received=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' "$run/flow$n.out")
  if grep -q "wrong data\|corrupted" "$run/flow$n.out"; then
    fail "${net%.0}.$n: replies with corrupted data: $(grep -m 3 "wrong data\|corrupted" "$run/flow$n.out")"
  elif grep -q "duplicates" "$run/flow$n.out"; then
    # A request answered twice: a receive entry the guest saw again after the move.
    fail "${net%.0}.$n: duplicate replies: $(grep -a "packets transmitted" "$run/flow$n.out")"
  elif [ "${received:-0}" -gt 0 ]; then
    ok "${net%.0}.$n: the flow's replies carried the pattern intact ($(grep -a "packets transmitted" "$run/flow$n.out"))"
    echo "migration: ${net%.0}.$n flow: $(grep -a "packets transmitted" "$run/flow$n.out")" >>"$run/summary.txt"
  else
    fail "${net%.0}.$n: the flow got no reply: $(tail -n 3 "$run/flow$n.out")"
  fi
done
cat "$run/summary.txt" 2>/dev/null

if [ "$failures" -ne 0 ]; then
  echo "--- vqswitch log"; tail -n 40 "$run/switch.log"
fi
echo "qemu_migration: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
