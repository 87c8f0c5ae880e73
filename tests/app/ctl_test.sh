#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# vqswitchctl against a running vqswitch (net_null ports forwarding at full rate, no hugepages):
# every read command answers in text and in JSON that parses, with the numbers a busy lcore must
# show; errors are one line and exit 1; the control socket is mode 0600 unless widened, refuses
# to replace a file that is not a socket, and is gone after the switch stops.
#   ctl_test.sh VQSWITCH VQSWITCHCTL
set -uo pipefail

vqswitch=$1
ctl=$2
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
checks=0
check() {  # DESCRIPTION PYTHON-EXPRESSION-ON-j < JSON
  checks=$((checks + 1))
  python3 -c "import json, sys
j = json.load(sys.stdin)
sys.exit(0 if ($2) else 1)" || fail "$1"
}

sock=$work/ctl.sock
cat >"$work/run.yaml" <<YAML
version: 1
eal: {cores: "0-1", main_lcore: 0, memory_mb: 256, huge: false, file_prefix: vqs-ctl-$$,
      args: ["--no-pci", "--vdev", "net_null0", "--vdev", "net_null1"]}
control: {socket: $sock}
ports:
  - {name: n0, type: ethdev, device: net_null0}
  - {name: n1, type: ethdev, device: net_null1}
forwarding: {mode: xconnect, pairs: [[n0, n1]]}
YAML
"$vqswitch" --config "$work/run.yaml" >"$work/run.out" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { fail "no control socket at $sock: $(tail -n 5 "$work/run.out")"; exit 1; }
grep -q "control socket $sock" "$work/run.out" || fail "start-up does not name the control socket"
[ "$(stat -c %a "$sock")" = 600 ] || fail "control socket mode $(stat -c %a "$sock"), want 600"

# A complete load interval (5 s) for lcore-show and rxq-show.
sleep 6

"$ctl" -s "$sock" show >"$work/show.txt" || fail "show: exit $?"
grep -qE '^port n0 +ethdev' "$work/show.txt" || fail "show: $(cat "$work/show.txt")"
grep -qE '^lcore 1 .*rx: n0:0 n1:0' "$work/show.txt" || fail "show lcores: $(cat "$work/show.txt")"
"$ctl" -s "$sock" show --json >"$work/show.json" || fail "show --json: exit $?"
check "show --json: ports" '[p["name"] for p in j["ports"]] == ["n0", "n1"] and
  j["ports"][0]["type"] == "ethdev" and j["ports"][0]["device"] == "net_null0"' <"$work/show.json"
check "show --json: lcores" 'j["lcores"][0]["lcore"] == 1 and j["lcores"][0]["rx"] == ["n0:0", "n1:0"]' \
  <"$work/show.json"
check "show --json: NUMA nodes of ports and lcores (one node here), one mbuf pool on it" \
  'all(p["numa_node"] == 0 for p in j["ports"]) and j["lcores"][0]["numa_node"] == 0 and
   len(j["mbufs"]) == 1 and j["mbufs"][0]["numa_node"] == 0 and j["mbufs"][0]["size"] > 0' \
  <"$work/show.json"
grep -qE '^mbufs on node 0: [0-9]+, [0-9]+ available' "$work/show.txt" || fail "show: pools: $(cat "$work/show.txt")"

"$ctl" -s "$sock" lcore-show --json >"$work/lcore.json" || fail "lcore-show --json: exit $?"
check "lcore-show: a forwarding lcore at full rate is busy and counts cycles per packet" \
  'j["interval_s"] >= 4.9 and j["lcores"][0]["busy_pct"] > 50 and
   j["lcores"][0]["packets"] > 0 and j["lcores"][0]["cycles_per_packet"] > 0 and
   j["lcores"][0]["total"]["packets"] >= j["lcores"][0]["packets"]' <"$work/lcore.json"
"$ctl" -s "$sock" lcore-show | grep -E '^lcore 1 +rxq 2 +busy' >/dev/null || fail "lcore-show text"

"$ctl" -s "$sock" rxq-show --json >"$work/rxq.json" || fail "rxq-show --json: exit $?"
check "rxq-show: both queues on lcore 1, their shares sum to at most 100 % and are not zero" \
  'len(j["rx_queues"]) == 2 and all(q["lcore"] == 1 and q["usage_pct"] > 10 for q in j["rx_queues"])
   and sum(q["usage_pct"] for q in j["rx_queues"]) <= 100.0001' <"$work/rxq.json"
check "rxq-show: nodes, nothing across NUMA nodes, packets since start" \
  'all(q["port_numa_node"] == 0 and q["lcore_numa_node"] == 0 and not q["cross_numa"] and
       q["packets_total"] >= q["packets"] for q in j["rx_queues"])' <"$work/rxq.json"
"$ctl" -s "$sock" rxq-show | grep -E '^lcore 1 +n0:0 +usage' >/dev/null || fail "rxq-show text"

"$ctl" -s "$sock" stats --json >"$work/stats.json" || fail "stats --json: exit $?"
check "stats: packets forwarded both ways" \
  'all(p["rx_packets"] > 0 and p["tx_packets"] > 0 for p in j["ports"])' <"$work/stats.json"
"$ctl" -s "$sock" stats n0 --clear >/dev/null || fail "stats n0 --clear: exit $?"
"$ctl" -s "$sock" stats n0 --json >"$work/cleared.json" || fail "stats n0 --json: exit $?"
python3 - "$work/stats.json" "$work/cleared.json" <<'PY' || fail "stats after --clear count from the clear"
import json, sys
before = json.load(open(sys.argv[1]))["ports"][0]
after = json.load(open(sys.argv[2]))["ports"]
sys.exit(0 if len(after) == 1 and after[0]["name"] == "n0"
         and after[0]["rx_packets"] < before["rx_packets"] else 1)
PY

# Runtime changes: weights per queue or port, busy-poll per lcore, taken by the running lcore.
"$ctl" -s "$sock" set-weight n0:0 packets=32 >"$work/w.txt" || fail "set-weight: exit $?"
grep -qx 'n0:0 (lcore 1): weight 32 packets / 262144 bytes' "$work/w.txt" ||
  fail "set-weight text: $(cat "$work/w.txt")"
"$ctl" -s "$sock" set-weight n1 bytes=65536 --json >"$work/w.json" || fail "set-weight --json"
check "set-weight --json" 'j["changed"] == [{"port": "n1", "queue": 0, "lcore": 1,
  "weight_packets": 64, "weight_bytes": 65536}]' <"$work/w.json"
"$ctl" -s "$sock" rxq-show --json >"$work/rxq2.json" || fail "rxq-show --json after set-weight"
check "rxq-show shows the new weights" '[(q["weight_packets"], q["weight_bytes"])
  for q in j["rx_queues"]] == [(32, 262144), (64, 65536)]' <"$work/rxq2.json"
"$ctl" -s "$sock" set-busy-poll 1 100 | grep -x 'lcore 1: sleeps after 100 us idle' >/dev/null ||
  fail "set-busy-poll 1 100"
"$ctl" -s "$sock" show | grep -E '^lcore 1 +node [0-9a-z]+ +sleeps after 100 us idle' >/dev/null || fail "show after set-busy-poll"
"$ctl" -s "$sock" set-busy-poll 1 off --json >"$work/bp.json" || fail "set-busy-poll off --json"
check "set-busy-poll off --json" 'j == {"lcore": 1, "busy_poll_us": None}' <"$work/bp.json"
expect_error() {  # EXPECTED-MESSAGE ARGS...
  local want=$1
  shift
  local got
  got=$("$ctl" -s "$sock" "$@" 2>&1 >/dev/null)
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$*: exit $rc, want 1"
  [ "$got" = "vqswitchctl: $want" ] || fail "$*: '$got', want 'vqswitchctl: $want'"
}
expect_error "set-weight: packets: must be 1..65536, got '0'" set-weight n0 packets=0
expect_error "set-weight: no port named 'nosuch'" set-weight nosuch packets=1
expect_error "set-weight: n0 has rx queues 0..0" set-weight n0:3 packets=1
expect_error "set-weight: unknown setting 'pkts' (packets=N, bytes=N)" set-weight n0 pkts=1
expect_error "set-busy-poll: lcore 7 is not a forwarding lcore" set-busy-poll 7 10
expect_error "set-busy-poll: US: must be 0..10000000 or off, got 'soon'" set-busy-poll 1 soon

# Errors: one line naming what was wrong, exit status 1.
err=$("$ctl" -s "$sock" stats nosuch 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 1 ] || fail "stats nosuch: exit $rc, want 1"
[ "$err" = "vqswitchctl: stats: no port named 'nosuch'" ] || fail "stats nosuch: '$err'"
"$ctl" -s "$sock" frobnicate 2>"$work/err"
[ $? -eq 1 ] || fail "unknown command: exit status"
grep -q "unknown command 'frobnicate'" "$work/err" || fail "unknown command: $(cat "$work/err")"
"$ctl" -s "$sock" fdb-show 2>"$work/err"
[ $? -eq 1 ] || fail "fdb-show in xconnect mode: exit status"
grep -q "no bridge" "$work/err" || fail "fdb-show in xconnect mode: $(cat "$work/err")"
"$ctl" -s "$sock" show extra 2>/dev/null && fail "show with an extra argument accepted"
"$ctl" -s "$work/nowhere.sock" show 2>/dev/null
[ $? -eq 2 ] || fail "no switch at the socket: exit status, want 2"
"$ctl" -s "$sock" help | grep 'rxq-show' >/dev/null || fail "help does not list rxq-show"

# Runtime ports in xconnect mode: n2 alone, n3 paired with it (--peer); n2 deleted leaves n3
# unrouted; add-pair pairs n3 with a new n4. The devices are probed and detached at run time.
stat_of() {  # PORT KEY: a number from stats PORT --json
  "$ctl" -s "$sock" stats "$1" --json | python3 -c "import json, sys
p = json.load(sys.stdin)['ports'][0]
print(p['drops_by_reason']['$2'] if '$2' == 'no_route' else p['$2'])"
}
"$ctl" -s "$sock" add-port '{name: n2, type: ethdev, device: net_null2}' --json >"$work/add.json" ||
  fail "add-port n2: $(cat "$work/add.json")"
check "add-port --json: the port and where its queue is polled" \
  'j["added"] == "n2" and j["type"] == "ethdev" and j["rx"] == [{"queue": 0, "lcore": 1}]' \
  <"$work/add.json"
out=$("$ctl" -s "$sock" add-port '{name: n3, type: ethdev, device: net_null3}' --peer n2)
[ "$out" = "added n3 (ethdev), paired with n2, rx queue 0 on lcore 1" ] || fail "add-port n3: '$out'"
sleep 0.5
[ "$(stat_of n3 tx_packets)" -gt 0 ] && [ "$(stat_of n2 tx_packets)" -gt 0 ] ||
  fail "n2 and n3 do not forward to each other"
"$ctl" -s "$sock" del-port n2 --json >"$work/del.json" || fail "del-port n2: $(cat "$work/del.json")"
check "del-port --json: the port's final counters" \
  'j["deleted"] == "n2" and j["final"]["name"] == "n2" and j["final"]["rx_packets"] > 0' \
  <"$work/del.json"
before=$(stat_of n3 no_route)
sleep 0.3
[ "$(stat_of n3 no_route)" -gt "$before" ] || fail "n3 without its peer: no no_route drops"
"$ctl" -s "$sock" add-port '{name: n4, type: ethdev, device: net_null4}' >/dev/null ||
  fail "add-port n4"
"$ctl" -s "$sock" add-pair n3 n4 --json >"$work/pair.json" || fail "add-pair: $(cat "$work/pair.json")"
check "add-pair --json" 'j["paired"] == ["n3", "n4"]' <"$work/pair.json"
before=$(stat_of n4 tx_packets)
sleep 0.3
[ "$(stat_of n4 tx_packets)" -gt "$before" ] || fail "n4 gets nothing from n3 after add-pair"
expect_error "add-pair: n3 is paired with n4" add-pair n3 n4
expect_error "add-port: --peer: n0 is paired with n1" add-port '{name: n5, type: ethdev, device: net_null5}' --peer n0
# n4 took n2's index: n0 n1 n4 n3, as show lists them.
expect_error 'add-port: add-port:1:34: port.device: device "net_null3" is already ports[3]' \
  add-port '{name: n5, type: ethdev, device: net_null3}'
err=$("$ctl" -s "$sock" add-port '{name: n5, type: ethdev, device: net_nosuch5}' 2>&1)
[[ "$err" == "vqswitchctl: add-port: n5: device net_nosuch5: probe failed"* ]] ||
  fail "add-port of a device that does not probe: '$err'"
"$ctl" -s "$sock" del-port n3 >/dev/null || fail "del-port n3"
"$ctl" -s "$sock" del-port n4 >/dev/null || fail "del-port n4"
"$ctl" -s "$sock" add-port '{name: n2, type: ethdev, device: net_null2}' --peer n9 2>/dev/null &&
  fail "add-port --peer with an unknown port accepted"
"$ctl" -s "$sock" add-port '{name: n2, type: ethdev, device: net_null2}' >/dev/null ||
  fail "add-port n2 again (its device detached by del-port)"
"$ctl" -s "$sock" del-port n2 >/dev/null || fail "del-port n2 again"
"$ctl" -s "$sock" show --json >"$work/show.json"
check "show after the runtime ports: n0 and n1" '[p["name"] for p in j["ports"]] == ["n0", "n1"]' \
  <"$work/show.json"

# reload: the file gains n2 and n3 (a pair) and a weight on n0; then an EAL change is refused
# with nothing applied; then the file as it was takes them away again.
cp "$work/run.yaml" "$work/run.yaml.orig"
sed -i -e 's|  - {name: n0, type: ethdev, device: net_null0}|  - {name: n0, type: ethdev, device: net_null0, weight: {packets: 16}}|' \
  -e 's|  - {name: n1, type: ethdev, device: net_null1}|&\n  - {name: n2, type: ethdev, device: net_null2}\n  - {name: n3, type: ethdev, device: net_null3}|' \
  -e 's|pairs: \[\[n0, n1\]\]|pairs: [[n0, n1], [n3, n2]]|' "$work/run.yaml"
"$ctl" -s "$sock" reload --json >"$work/reload.json" || fail "reload: $(cat "$work/reload.json")"
check "reload --json: n2 and n3 added and paired, n0's weight" \
  'j["added"] == ["n2", "n3"] and j["removed"] == [] and ["n3", "n2"] in j["pairs"] and
   {"port": "n0", "queue": 0, "weight_packets": 16, "weight_bytes": 262144} in j["weights"]' \
  <"$work/reload.json"
sleep 0.3
[ "$(stat_of n2 tx_packets)" -gt 0 ] || fail "n2 gets nothing from n3 after reload"
"$ctl" -s "$sock" rxq-show --json >"$work/rxq.json"
check "rxq-show: n0's weight from the file" \
  '[q["weight_packets"] for q in j["rx_queues"] if q["port"] == "n0"] == [16]' <"$work/rxq.json"
out=$("$ctl" -s "$sock" reload)
[ "$out" = "$(printf 'reloaded %s\nno change' "$work/run.yaml")" ] || fail "reload unchanged: '$out'"
sed -i -e 's|memory_mb: 256|memory_mb: 512|' "$work/run.yaml"
err=$("$ctl" -s "$sock" reload 2>&1 >/dev/null)
[ $? -eq 1 ] || fail "reload with an EAL change: exit status"
[ "$err" = "vqswitchctl: reload: $work/run.yaml:2:47: eal.memory_mb: cannot change while vqswitch runs (restart it to): was 256, now 512" ] ||
  fail "reload with an EAL change: '$err'"
"$ctl" -s "$sock" show --json >"$work/show.json"
check "a refused reload applies nothing" '[p["name"] for p in j["ports"]] == ["n0", "n1", "n2", "n3"]' \
  <"$work/show.json"
cp "$work/run.yaml.orig" "$work/run.yaml"
"$ctl" -s "$sock" reload --json >"$work/reload.json" || fail "reload back: $(cat "$work/reload.json")"
check "reload back: n2 and n3 removed, n0's weight the default again" \
  'sorted(j["removed"]) == ["n2", "n3"] and j["added"] == [] and
   j["weights"][0]["weight_packets"] == 64' <"$work/reload.json"

# rxq-rebalance with one forwarding lcore: nothing can move.
"$ctl" -s "$sock" rxq-rebalance --json >"$work/rebalance.json" || fail "rxq-rebalance: exit $?"
check "rxq-rebalance --json: one lcore, nothing moved" \
  'j["assign"] == "roundrobin" and j["moved"] == [] and "not_moved" in j' <"$work/rebalance.json"

# A request that never ends is cut off; the switch keeps answering.
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.send(b"show"); time.sleep(3)' "$sock" &
slow=$!
sleep 0.5
"$ctl" -s "$sock" show >/dev/null || fail "a slow client blocks the others"
wait "$slow"

kill -INT "$pid"
wait "$pid"
rc=$?
pid=
[ "$rc" -eq 0 ] || fail "stop: exit $rc: $(tail -n 5 "$work/run.out")"
[ ! -e "$sock" ] || fail "control socket left behind after the stop"

# Bridge mode: fdb-show and fdb-flush answer (what they hold with real guests is checked in
# switch_interop).
sed -e 's/mode: xconnect, pairs: \[\[n0, n1\]\]/mode: bridge/' "$work/run.yaml" >"$work/bridge.yaml"
"$vqswitch" --config "$work/bridge.yaml" >"$work/bridge.out" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
"$ctl" -s "$sock" fdb-show --json >"$work/fdb.json" || fail "fdb-show --json: exit $?"
check "fdb-show --json" 'isinstance(j["entries"], list) and
  all(set(e) == {"mac", "vlan", "port", "age_s"} for e in j["entries"])' <"$work/fdb.json"
"$ctl" -s "$sock" fdb-flush --json >"$work/flush.json" || fail "fdb-flush --json: exit $?"
check "fdb-flush --json" 'isinstance(j["flushed"], int) and j["flushed"] >= 0' <"$work/flush.json"
"$ctl" -s "$sock" fdb-show | grep '^MAC' >/dev/null || fail "fdb-show text has no header"
kill -INT "$pid"
wait "$pid"
pid=

# A regular file at the control socket's path: vqswitch refuses to start and leaves it.
echo "precious data" >"$sock"
timeout 20 "$vqswitch" --config "$work/run.yaml" >"$work/clash.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "regular file at the control socket: exit $rc, want 1"
grep -q "control socket $sock: .*not a socket" "$work/clash.out" ||
  fail "regular file at the control socket: $(tail -n 3 "$work/clash.out")"
[ "$(cat "$sock")" = "precious data" ] || fail "regular file at the control socket was changed"
rm -f "$sock"

# control.mode widens it.
sed -e "s|control: {socket: $sock}|control: {socket: $sock, mode: \"0660\"}|" "$work/run.yaml" \
  >"$work/mode.yaml"
"$vqswitch" --config "$work/mode.yaml" >"$work/mode.out" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ "$(stat -c %a "$sock" 2>/dev/null)" = 660 ] || fail "control.mode 0660: got $(stat -c %a "$sock")"
kill -INT "$pid"
wait "$pid"
pid=

echo "ctl_test: $checks JSON checks, $failures failures"
[ "$failures" -eq 0 ]
