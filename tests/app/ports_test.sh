#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runtime ports against real guests: vqswitch bridges two DPDK virtio_user guests (one testpmd,
# frames circling vm0 -> switch -> vm1 -> switch -> vm0 with each guest's MAC) while vqswitchctl
# adds and deletes a third guest port 100 times, a few times with a guest connected and sending
# on it, and a NIC port (net_null) a few times. The two guests must lose nothing, the mbuf pool
# must be full again once they stop, and bad mappings must get the configuration's errors.
#   ports_test.sh VQSWITCH VQSWITCHCTL [ROUNDS]
set -uo pipefail

vqswitch=$1
ctl=$2
rounds=${3:-100}
run=$(mktemp -d /run/vqs-ports.XXXXXX)
tag=$(basename "$run")
mac0=02:00:00:00:a0:00
mac1=02:00:00:00:a0:01
macx=02:00:00:00:a0:0f
switch_pid=
failures=0
checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() {  # DESCRIPTION PYTHON-EXPRESSION-ON-j < JSON
  checks=$((checks + 1))
  python3 -c "import json, sys
j = json.load(sys.stdin)
sys.exit(0 if ($2) else 1)" || { fail "$1"; return 1; }
}
cleanup() {
  pkill -INT -f -- "--file-prefix $tag-g" 2>/dev/null
  [ -n "$switch_pid" ] && kill -INT "$switch_pid" 2>/dev/null
  sleep 0.5
  pkill -KILL -f -- "--file-prefix $tag-g" 2>/dev/null
  [ -n "$switch_pid" ] && kill -KILL "$switch_pid" 2>/dev/null
  rm -rf "$run" /var/run/dpdk/"$tag"-* /dev/hugepages/"$tag"-*
}
trap cleanup EXIT
ctl() { "$ctl" -s "$run/ctl.sock" "$@"; }

cat >"$run/switch.yaml" <<YAML
version: 1
eal: {cores: "0-1", main_lcore: 0, memory_mb: 256, file_prefix: $tag-s,
      args: ["--no-pci", "--single-file-segments"]}
control: {socket: $run/ctl.sock}
stats_interval_s: 0
ports:
  - {name: vm0, type: vhost, socket: $run/vm0.sock}
  - {name: vm1, type: vhost, socket: $run/vm1.sock}
forwarding: {mode: bridge}
YAML
"$vqswitch" --config "$run/switch.yaml" >"$run/switch.log" 2>&1 &
switch_pid=$!
for _ in $(seq 100); do [ -S "$run/ctl.sock" ] && break; sleep 0.1; done
[ -S "$run/ctl.sock" ] || { echo "FAIL: no control socket: $(tail -n 5 "$run/switch.log")"; exit 1; }

# The two guests, driven through a FIFO (testpmd's prompt). testpmd's default pool is sized for
# 32 ports (~360 MB of hugepages, whatever -m says): 8192 mbufs are plenty for two.
mkfifo "$run/g.in"
stdbuf -oL dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix "$tag-g" -m 256 --no-pci \
  --single-file-segments \
  --vdev "net_virtio_user0,path=$run/vm0.sock,queue_size=256,mac=$mac0" \
  --vdev "net_virtio_user1,path=$run/vm1.sock,queue_size=256,mac=$mac1" --log-level "*:warning" \
  -- -i --forward-mode=mac --eth-peer="0,$mac1" --eth-peer="1,$mac0" --nb-cores=1 \
  --total-num-mbufs=8192 \
  <"$run/g.in" >"$run/g.log" 2>&1 &
exec 3>"$run/g.in"
for _ in $(seq 100); do grep -aq "testpmd>" "$run/g.log" && break; sleep 0.1; done
echo "start tx_first" >&3
sleep 2

# A guest on the added port x: txonly to its own MAC, so the bridge (which learns x's MAC on x)
# drops what it sends as no_route, on x, and vm0 and vm1 see none of it. --stats-period keeps a
# testpmd without a terminal forwarding (without it, it reads EOF from stdin and quits at once).
guest_x() {
  timeout -s INT "$1" dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix "$tag-gx" -m 128 --no-pci \
    --single-file-segments --vdev "net_virtio_user0,path=$run/x.sock,queue_size=256,mac=$macx" \
    --log-level "*:warning" -- --forward-mode=txonly --eth-peer="0,$macx" --nb-cores=1 \
    --total-num-mbufs=4096 --auto-start --stats-period 1 </dev/null >"$run/gx.log" 2>&1
}

x_mapping="{name: x, type: vhost, socket: $run/x.sock}"
added=0
deleted=0
with_guest=0
for i in $(seq "$rounds"); do
  if ! ctl add-port "$x_mapping" >"$run/add.out" 2>&1; then
    fail "round $i: add-port: $(cat "$run/add.out")"
    break
  fi
  added=$((added + 1))
  if [ $((i % 40)) -eq 1 ]; then
    # A guest connects and sends; it is still connected when the port goes.
    # Its start-up shares a CPU with the two guests' polling: give it time.
    guest_x 60 &
    gx=$!
    for _ in $(seq 300); do
      ctl stats x --json 2>/dev/null | grep '"rx_packets": [1-9]' >/dev/null && break
      sleep 0.1
    done
    ctl stats x --json 2>/dev/null | grep '"rx_packets": [1-9]' >/dev/null || { ctl rxq-show; ctl show; }
    ctl del-port x --json >"$run/del.json" 2>&1 || fail "round $i: del-port with a guest: $(cat "$run/del.json")"
    check "round $i: x received from its guest, and dropped it as no_route (its own MAC)" \
      'j["deleted"] == "x" and j["final"]["rx_packets"] > 0 and
       j["final"]["drops_by_reason"]["no_route"] > 0' <"$run/del.json" ||
      { cat "$run/gx.log"; grep -a "x.sock\|^vq" "$run/switch.log" | tail -n 60; }
    pkill -INT -f -- "--file-prefix $tag-gx"
    wait "$gx"
    with_guest=$((with_guest + 1))
  elif ! ctl del-port x >"$run/del.out" 2>&1; then
    fail "round $i: del-port: $(cat "$run/del.out")"
    break
  fi
  deleted=$((deleted + 1))
done
echo "x added $added times and deleted $deleted times ($with_guest with a guest sending)"

# A NIC added and deleted: the device is probed, and detached again so it can come back.
for i in 1 2 3; do
  ctl add-port '{name: n9, type: ethdev, device: "net_null9,no-rx=1"}' >"$run/add.out" 2>&1 ||
    fail "NIC round $i: add-port: $(cat "$run/add.out")"
  ctl del-port n9 >"$run/del.out" 2>&1 || fail "NIC round $i: del-port: $(cat "$run/del.out")"
done

# Errors: the configuration's own messages, one line, exit status 1; nothing added.
expect_error() {  # PATTERN COMMAND...
  local pattern=$1
  shift
  checks=$((checks + 1))
  ctl "$@" >"$run/err.out" 2>&1
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$*: exit $rc, want 1"
  grep -qE "$pattern" "$run/err.out" || fail "$*: '$(cat "$run/err.out")' does not match '$pattern'"
}
expect_error '^vqswitchctl: add-port: add-port:1:8: port.name: duplicate port name "vm0"' \
  add-port "{name: vm0, type: vhost, socket: $run/y.sock}"
expect_error 'port.socket: duplicate socket ".*/vm1.sock"' \
  add-port "{name: y, type: vhost, socket: $run/vm1.sock}"
expect_error 'port.socket: must be an absolute path' add-port '{name: y, type: vhost, socket: y.sock}'
expect_error 'port.queues: must be 1\.\.' add-port "{name: y, type: vhost, socket: $run/y.sock, queues: 0}"
expect_error 'port.vlan' add-port "{name: y, type: vhost, socket: $run/y.sock, vlan: {mode: bogus}}"
expect_error 'invalid YAML' add-port '{name: y, type: vhost'
expect_error 'only in xconnect mode' add-port "{name: y, type: vhost, socket: $run/y.sock}" --peer vm0
expect_error "no port named 'nosuch'" del-port nosuch
expect_error 'only in xconnect mode' add-pair vm0 vm1
ctl show --json >"$run/show.json" || fail "show --json"
check "only vm0 and vm1 are left" '[p["name"] for p in j["ports"]] == ["vm0", "vm1"]' <"$run/show.json"
[ -S "$run/y.sock" ] && fail "a refused add-port left its socket"

# The guests stop: whatever circled is back in their rings, and every mbuf in the pool.
echo "stop" >&3
sleep 1
ctl stats --json >"$run/stats.json" || fail "stats --json"
check "vm0 and vm1 forwarded frames and dropped none" \
  'all(p["rx_packets"] > 100000 and p["tx_packets"] > 100000 and p["drops"] == 0
       for p in j["ports"])' <"$run/stats.json"
ctl show --json >"$run/show.json" || fail "show --json"
check "the mbuf pools are full again" 'all(p["available"] == p["size"] for p in j["mbufs"])' <"$run/show.json"
echo "quit" >&3
exec 3>&-

kill -INT "$switch_pid"
wait "$switch_pid"
rc=$?
switch_pid=
[ "$rc" -eq 0 ] || fail "vqswitch exited with $rc: $(tail -n 5 "$run/switch.log")"
grep -q "port x added" "$run/switch.log" || fail "no log line for an added port"
python3 - "$run/stats.json" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["ports"]:
    print(f'{p["name"]}: rx {p["rx_packets"]} tx {p["tx_packets"]} drops {p["drops"]}')
PY
[ "$added" -eq "$rounds" ] && [ "$deleted" -eq "$rounds" ] || fail "only $added adds, $deleted deletes"
echo "ports_test: $rounds add/del rounds, $checks checks, $failures failures"
[ "$failures" -eq 0 ]
