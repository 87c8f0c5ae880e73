#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Linux guests under QEMU on vqswitch, with the command lines docs/guests.md gives: Debian's kernel
# and virtio_net (scripts/guest/build.sh), QEMU 7.2 with TCG (no KVM here: vectors=0). Three at
# once on one bridge with a net_tap port into this host's stack:
#   g0: vqswitch serves the socket, QEMU connects as client with reconnect=1;
#   g1: the same with two queue pairs (mq=on, two vCPUs) and packed virtqueues (packed=on): both
#       queues must carry traffic;
#   g2: QEMU serves the socket (server=on), vqswitch connects (mode: client); packed virtqueues.
# Each guest pings the host and the guest before it through the bridge; the host pings each.
# Then vqswitch restarts under them: each guest answers again, without a reboot.
#   qemu_guest_test.sh VQSWITCH VQSWITCHCTL SOURCE_DIR
set -uo pipefail

vqswitch=$1
ctl=$2
src=$3
run=$(mktemp -d /run/vqs-qemu.XXXXXX)
tag=$(basename "$run")
tap=vqsq$$
net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250)).0
host=${net%.0}.1
switch_pid=
source "$src/scripts/guest/harness.sh"
cleanup() {
  pkill -KILL -f -- "$run/" 2>/dev/null  # the QEMUs (their sockets and consoles are in $run)
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
  - {name: g0, type: vhost, socket: $run/g0.sock}
  - {name: g1, type: vhost, socket: $run/g1.sock, queues: 2}
  - {name: g2, type: vhost, socket: $run/g2.sock, mode: client}
  - {name: host, type: ethdev, device: "net_tap0,iface=$tap"}
lcores: [{lcore: 1, rx: auto, busy_poll_us: 200}]
forwarding: {mode: bridge}
YAML

# QEMU as docs/guests.md gives it: guest RAM shared with vqswitch (a hugetlbfs file, share=on).
# $1 name, $2 vCPUs, $3 last byte of its address, $4 its chardev options, $5 its netdev queues,
# $6 further virtio-net-pci options.
qemu() {
  local name=$1 cpus=$2 n=$3 chardev=$4 queues=$5 device_opts=${6:-} mq=""
  [ "$queues" -gt 1 ] && mq=",mq=on"
  local peers=$host
  [ "$n" -gt 2 ] && peers="$host,${net%.0}.$((n - 1))"
  qemu-system-x86_64 -machine pc,accel=tcg,memory-backend=mem -cpu max -smp "$cpus" -m 128M \
    -object memory-backend-file,id=mem,size=128M,mem-path=/dev/hugepages,share=on \
    -kernel "$guest_dir/vmlinuz" -initrd "$guest_dir/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 vqs.ip=${net%.0}.$n/24 vqs.ping=$peers vqs.watch=$host" \
    -chardev "socket,id=chr0,path=$run/$name.sock,$chardev" \
    -netdev "vhost-user,id=net0,chardev=chr0,queues=$queues" \
    -device "virtio-net-pci,netdev=net0,mac=52:54:00:00:00:0$n$mq,vectors=0$device_opts" \
    -display none -serial "file:$run/$name.console" -no-reboot >"$run/$name.qemu.log" 2>&1 &
}

# g2's QEMU listens first: vqswitch connects to it at start (and would retry until it does).
qemu g2 1 4 "server=on,wait=off" 1 ",packed=on"
for _ in $(seq 50); do [ -S "$run/g2.sock" ] && break; sleep 0.1; done
# vqswitch, and the host's end of its tap port (a fixed MAC: the guests' ARP entries for the
# host stay right across a restart of the switch, which creates the tap anew).
start_switch() {
  rm -f "$run/ctl.sock"
  "$vqswitch" --config "$run/switch.yaml" >>"$run/switch.log" 2>&1 &
  switch_pid=$!
  for _ in $(seq 100); do [ -S "$run/ctl.sock" ] && break; sleep 0.1; done
  [ -S "$run/ctl.sock" ] || { echo "FAIL: vqswitch did not start: $(tail -n 5 "$run/switch.log")"; exit 1; }
  ip link set "$tap" address 02:00:00:00:00:01 && ip addr add "$host/24" dev "$tap" &&
    ip link set "$tap" up || { echo "FAIL: no tap $tap"; exit 1; }
}
start_switch
qemu g0 1 2 "reconnect=1" 1
qemu g1 2 3 "reconnect=1" 2 ",packed=on"

# Booted (about 10 s each alone, on TCG), then each pings its peers.
for g in g0 g1 g2; do
  for _ in $(seq 240); do grep -aq "VQS-GUEST-PINGS-DONE" "$run/$g.console" 2>/dev/null && break; sleep 0.5; done
  if grep -aq "VQS-GUEST-PINGS-DONE" "$run/$g.console"; then
    ok "$g booted: $(grep -a VQS-GUEST-READY "$run/$g.console" | cut -c1-60)"
  else
    fail "$g did not finish booting: $(tail -n 5 "$run/$g.console" 2>/dev/null) $(cat "$run/$g.qemu.log")"
    continue
  fi
  if grep -aq "VQS-GUEST-PING-FAIL" "$run/$g.console"; then
    fail "$g: $(grep -a VQS-GUEST-PING "$run/$g.console" | tr '\n' ' ')"
  else
    ok "$g reached $(grep -a VQS-GUEST-PING-OK "$run/$g.console" | cut -d' ' -f2 | tr '\n' ' ')"
  fi
done
grep -aq "VQS-GUEST-READY .* queues 2 " "$run/g1.console" && ok "g1 has two queue pairs" ||
  fail "g1 does not have two queue pairs: $(grep -a VQS-GUEST-READY "$run/g1.console")"

for n in 2 3 4; do
  if ping -c 3 -W 5 "${net%.0}.$n" >"$run/ping.out" 2>&1; then
    ok "the host reaches ${net%.0}.$n"
  else
    fail "the host cannot reach ${net%.0}.$n: $(tail -n 2 "$run/ping.out")"
  fi
done
# g1 pinged from each of its two vCPUs, and its kernel sends on the queue of the vCPU that
# transmits (XPS): vqswitch received on both of its rx queues.
ctl rxq-show --json >"$run/rxq.json"
python3 - "$run/rxq.json" <<'PY' && ok "g1's two queues each carried packets" || fail "g1's queues: $(cat "$run/rxq.json")"
import json, sys
q = {(r["port"], r["queue"]): r for r in json.load(open(sys.argv[1]))["rx_queues"]}
sys.exit(0 if all(q[("g1", i)]["packets_total"] > 0 for i in (0, 1)) else 1)
PY
ctl stats --json >"$run/stats.json"
python3 - "$run/stats.json" <<'PY' && ok "every guest port received and sent" || fail "counters: $(ctl stats)"
import json, sys
ports = {p["name"]: p for p in json.load(open(sys.argv[1]))["ports"]}
sys.exit(0 if all(ports[g]["rx_packets"] > 0 and ports[g]["tx_packets"] > 0
                  for g in ("g0", "g1", "g2")) else 1)
PY
ctl show --json >"$run/show.json"
python3 - "$run/show.json" <<'PY' && ok "show: every guest is up, on a known NUMA node" || fail "show: $(ctl show)"
import json, sys
ports = {p["name"]: p for p in json.load(open(sys.argv[1]))["ports"]}
sys.exit(0 if all(ports[g]["link"] == "up" and ports[g]["numa_node"] >= 0
                  for g in ("g0", "g1", "g2")) else 1)
PY
# The ring format each guest's virtio_net negotiated (VIRTIO_F_RING_PACKED, bit 34).
packed_formats() {
  ctl show --json >"$run/show.json"
  python3 - "$run/show.json" <<'PY'
import json, sys
ports = {p["name"]: p for p in json.load(open(sys.argv[1]))["ports"]}
want = {"g0": 0, "g1": 1, "g2": 1}
sys.exit(0 if all((int(ports[g]["features"], 16) >> 34) & 1 == v for g, v in want.items()) else 1)
PY
}
packed_formats && ok "g1 and g2 run packed virtqueues, g0 split ones" ||
  fail "ring formats: $(ctl show)"

# Restart without a guest reboot: vqswitch stops (SIGINT) and starts again with the guests
# running; QEMU reconnects to its socket (g0, g1: reconnect=1) or vqswitch connects to QEMU's
# (g2). How long until each guest answers the host again, counted from the new start (the
# guests are pinged in turn: each figure includes the wait for those before it).
# The guests ping the host every 0.2 s (vqs.watch) through all of it: the last reply each saw
# before the stop.
seqs() { grep -a "^VQS-WATCH .* seq=" "$run/$1.console" | sed 's/.* seq=\([0-9]*\).*/\1/'; }
declare -A before
for g in g0 g1 g2; do before[$g]=$(seqs "$g" | tail -n 1); done
stopped=$(date +%s%N)
kill -INT "$switch_pid"
wait "$switch_pid"
switch_pid=
sleep 1
start_switch
restarted=$(date +%s%N)
down_ms=$(((restarted - stopped) / 1000000))
echo "restart: vqswitch down for $down_ms ms (1 s of it on purpose)" >"$run/restart.txt"
for n in 2 3 4; do
  back=""
  for _ in $(seq 60); do
    if ping -c 1 -W 1 "${net%.0}.$n" >/dev/null 2>&1; then
      back=$((($(date +%s%N) - restarted) / 1000000))
      break
    fi
  done
  if [ -n "$back" ]; then
    ok "after a restart of vqswitch, ${net%.0}.$n answers again after $back ms"
    echo "restart: ${net%.0}.$n back after $back ms" >>"$run/restart.txt"
  else
    fail "after a restart of vqswitch, ${net%.0}.$n never answered: $(ctl show 2>&1)"
  fi
done
for g in g0 g1 g2; do
  grep -aq "VQS-GUEST-READY" "$run/$g.console" && [ "$(grep -ac "VQS-GUEST-READY" "$run/$g.console")" -eq 1 ] &&
    ok "$g did not reboot" || fail "$g rebooted"
done
packed_formats && ok "after the restart, g1 and g2 still run packed virtqueues" ||
  fail "ring formats after the restart: $(ctl show)"
# QEMU keeps no base of its own for a packed ring whose backend went away: it gives the one it
# started with, and vqswitch must find where the rings stand from their descriptors.
resumed=$(grep -c "disagrees with the packed ring" "$run/switch.log")
[ "$resumed" -gt 0 ] && ok "vqswitch resumed $resumed packed vrings from their descriptors, not QEMU's stale bases" ||
  fail "no packed vring was resumed from its descriptors: $(grep -a "vring" "$run/switch.log" | tail -n 5)"
# What the guests saw: their own pings answered again; how many were lost after the stop (a
# request waits in the guest's TX ring while vqswitch is away), and the longest round trip.
sleep 2
declare -A longest
for g in g0 g1 g2; do
  from=${before[$g]:-0}
  last=$(seqs "$g" | tail -n 1)
  lost=$(seqs "$g" | awk -v from="$from" '$1 > from && NR > 1 && $1 > prev + 1 { n += $1 - prev - 1 } { prev = $1 } END { print n + 0 }')
  rtt=$(grep -a "^VQS-WATCH .* seq=" "$run/$g.console" |
        awk -v from="$from" '{ s = $0; sub(/.* seq=/, "", s); sub(/ .*/, "", s); t = $0; sub(/.*time=/, "", t); sub(/ .*/, "", t) }
                             s + 0 > from + 0 && t + 0 > max { max = t + 0 } END { printf "%.0f", max }')
  if [ -n "$last" ] && [ "$last" -gt "$from" ]; then
    ok "$g's own pings to the host are answered again: $lost lost after the stop, longest round trip $rtt ms"
    echo "restart: $g's pings every 0.2 s: $lost lost, longest round trip $rtt ms" >>"$run/restart.txt"
    longest[$g]=$rtt
  else
    fail "$g's own pings stopped being answered (last seq $last, before the stop $from)"
  fi
done
# g1 (QEMU the client, packed rings) keeps sending while vqswitch is away: its requests wait in
# its TX rings, which the new vqswitch must resume at the first of them (found from the
# descriptors), not behind them. One answered with a round trip longer than the outage was
# such a request. (Requests the guest never posts are lost in the guest: in some runs it stops
# posting for 2 s; ring dumps at the resume showed only what it had posted, all of it resumed.)
rtt=${longest[g1]:-}
[ -n "$rtt" ] && [ "$rtt" -ge "$down_ms" ] &&
  ok "g1: a request that waited in its packed TX ring through the restart ($down_ms ms) was answered" ||
  fail "g1: no request from its TX ring during the outage ($down_ms ms) was answered (longest round trip ${rtt:-none} ms)"
cat "$run/restart.txt" 2>/dev/null

if [ "$failures" -ne 0 ]; then
  echo "--- vqswitch log"; tail -n 40 "$run/switch.log"
fi
echo "qemu_guest: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
