#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The vqswitch binary's command line: every example in config/ passes --check and prints a plan;
# a broken file fails with "FILE:LINE:COL: KEY: message" on stderr and starts nothing; bad options
# are refused.
#   cli_test.sh VQSWITCH CONFIG_DIR
set -uo pipefail

vqswitch=$1
config_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

count=0
for f in "$config_dir"/*.yaml; do
  count=$((count + 1))
  if ! out=$("$vqswitch" --check "$f" 2>&1); then
    fail "--check $f: $out"
  elif ! grep -q 'lcore' <<<"$out"; then
    fail "--check $f printed no plan: $out"
  fi
done
[ "$count" -ge 4 ] || fail "only $count example configurations in $config_dir"

cat >"$work/bad.yaml" <<'YAML'
version: 1
ports:
  - name: vm0
    type: vhost
    socket: /tmp/vqs-cli-test.sock
    queues: 0
forwarding: {mode: xconnect, pairs: [[vm0, vm0]]}
YAML
out=$("$vqswitch" --config "$work/bad.yaml" 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "bad config: exit $rc, want 1"
grep -qE "^$work/bad.yaml:6:13: ports\[0\]\.queues: " <<<"$out" || fail "bad config message: $out"
[ ! -e /tmp/vqs-cli-test.sock ] || fail "a socket was created for a bad config"

"$vqswitch" --version | grep -E '^vqswitch [0-9]+\.[0-9]+\.[0-9]+ \(DPDK 22\.11' >/dev/null ||
  fail "--version: $("$vqswitch" --version 2>&1)"
help=$("$vqswitch" --help)
for option in --config --check --stats --duration --version --help; do
  grep -q -- "$option" <<<"$help" || fail "--help does not list $option"
done
"$vqswitch" --config 2>/dev/null && fail "--config without a file accepted"
"$vqswitch" --bogus x 2>/dev/null && fail "unknown option accepted"
"$vqswitch" --check "$work/missing.yaml" 2>"$work/err" && fail "missing file accepted"
grep -q "missing.yaml" "$work/err" || fail "missing file: message does not name it"

# A run stopped by SIGINT or SIGTERM shuts down cleanly and prints its final counters (no
# hugepages needed while no guest connects): with the main lcore forwarding (the control loop on
# an EAL control thread) and without.
stop_run() {  # CORES SIGNAL
  cat >"$work/run.yaml" <<YAML
version: 1
eal: {cores: "$1", memory_mb: 128, huge: false, file_prefix: vqs-cli-$$, args: ["--no-pci"]}
ports:
  - {name: vm0, type: vhost, socket: $work/vm0.sock}
  - {name: vm1, type: vhost, socket: $work/vm1.sock}
forwarding: {mode: xconnect, pairs: [[vm0, vm1]]}
YAML
  "$vqswitch" --config "$work/run.yaml" --stats >"$work/run.out" 2>&1 &
  local pid=$!
  for _ in $(seq 100); do [ -S "$work/vm1.sock" ] && break; sleep 0.1; done
  [ -S "$work/vm1.sock" ] || fail "run on $1: no socket at $work/vm1.sock"
  sleep 1.5
  # DPDK's own telemetry client reads the switch's commands.
  printf '/vqswitch/ports\n/vqswitch/queues,vm1\n' |
    dpdk-telemetry.py -f "vqs-cli-$$" >"$work/telemetry.out" 2>&1 ||
    fail "run on $1: dpdk-telemetry.py: $(tail -n 3 "$work/telemetry.out")"
  grep -q '"vm1"' "$work/telemetry.out" || fail "run on $1: /vqswitch/ports: $(cat "$work/telemetry.out")"
  grep -q '"rxq0"' "$work/telemetry.out" ||
    fail "run on $1: /vqswitch/queues,vm1: $(cat "$work/telemetry.out")"
  kill -"$2" "$pid"
  wait "$pid"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "run on $1 stopped by SIG$2: exit $rc: $(tail -n 5 "$work/run.out")"
  grep -q "^vqswitch: SIG$2, stopping" "$work/run.out" || fail "run on $1: SIG$2 not reported"
  grep -q '^final counters:' "$work/run.out" || fail "run on $1: no final counters"
  grep -qE '^vm0 +down' "$work/run.out" || fail "run on $1: no live statistics line"
  [ ! -e "$work/vm0.sock" ] || fail "run on $1: socket left behind"
}
stop_run 0 INT
stop_run 0-1 TERM

# A path at a server socket's place that is not a socket is never removed (issue 16, hole 4): a
# regular file holding data, or a symlink to one, makes vqswitch fail naming the path, start
# nothing, and leave the file as it was. A socket file left by a process that is gone is removed.
not_a_socket() {  # KIND
  cat >"$work/clash.yaml" <<YAML
version: 1
eal: {cores: "0", memory_mb: 128, huge: false, file_prefix: vqs-cli-clash-$$, args: ["--no-pci"]}
ports:
  - {name: vm0, type: vhost, socket: $work/vm0.sock}
  - {name: vm1, type: vhost, socket: $work/clash.sock}
forwarding: {mode: xconnect, pairs: [[vm0, vm1]]}
YAML
  rm -f "$work/clash.sock" "$work/data"
  echo "precious data" >"$work/data"
  case $1 in
    file) cp "$work/data" "$work/clash.sock" ;;
    symlink) ln -s "$work/data" "$work/clash.sock" ;;
    dangling) ln -s "$work/nowhere" "$work/clash.sock" ;;
  esac
  timeout 20 "$vqswitch" --config "$work/clash.yaml" >"$work/clash.out" 2>&1
  local rc=$?
  [ "$rc" -eq 1 ] || fail "$1 at a socket path: exit $rc, want 1: $(tail -n 3 "$work/clash.out")"
  grep -q "$work/clash.sock: .*not a socket" "$work/clash.out" ||
    fail "$1 at a socket path: message does not name it: $(tail -n 3 "$work/clash.out")"
  [ -L "$work/clash.sock" ] || [ -f "$work/clash.sock" ] || fail "$1 at a socket path was removed"
  [ "$(cat "$work/data")" = "precious data" ] || fail "$1 at a socket path: data changed"
  [ ! -e "$work/vm0.sock" ] || fail "$1 at a socket path: another port's socket was left"
}
not_a_socket file
not_a_socket symlink
not_a_socket dangling
# run_until_ready CONFIG OUT: runs vqswitch until it reports it is running, then stops it with
# SIGINT; returns its exit status (a signal before EAL starts would kill it, as any program).
run_until_ready() {
  "$vqswitch" --config "$1" >"$2" 2>&1 &
  local pid=$!
  for _ in $(seq 200); do grep -q 'running until SIGINT' "$2" && break; sleep 0.1; done
  kill -INT "$pid"
  wait "$pid"
}
rm -f "$work/clash.sock"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/clash.sock"
[ -S "$work/clash.sock" ] || fail "could not leave a stale socket file"
run_until_ready "$work/clash.yaml" "$work/clash.out"
rc=$?
[ "$rc" -eq 0 ] || fail "stale socket file: exit $rc, want 0: $(tail -n 3 "$work/clash.out")"
grep -q "stale socket file removed" "$work/clash.out" || fail "stale socket file: not reported removed"
# The library logs on its own log type: at vqs.lib:warning that INFO line is gone.
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/clash.sock"
sed -e 's/args: \["--no-pci"\]/args: ["--no-pci", "--log-level=vqs.lib:warning"]/' \
  "$work/clash.yaml" >"$work/quiet.yaml"
run_until_ready "$work/quiet.yaml" "$work/quiet.out"
rc=$?
[ "$rc" -eq 0 ] || fail "vqs.lib:warning: exit $rc: $(tail -n 3 "$work/quiet.out")"
grep -q "stale socket file removed" "$work/quiet.out" && fail "--log-level=vqs.lib:warning ignored"

# A socket another process listens on is neither taken over nor removed.
rm -f "$work/clash.sock"
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); time.sleep(30)' \
  "$work/clash.sock" &
listener=$!
for _ in $(seq 50); do [ -S "$work/clash.sock" ] && break; sleep 0.1; done
timeout 20 "$vqswitch" --config "$work/clash.yaml" >"$work/clash.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "live socket: exit $rc, want 1: $(tail -n 3 "$work/clash.out")"
grep -q "$work/clash.sock: another process accepts" "$work/clash.out" ||
  fail "live socket: message: $(tail -n 3 "$work/clash.out")"
[ -S "$work/clash.sock" ] || fail "live socket: another process's socket was removed"
kill "$listener"
wait "$listener" 2>/dev/null

# socket_mode and socket_group are the socket's as soon as it exists (issue 16, hole 5).
cat >"$work/access.yaml" <<YAML
version: 1
eal: {cores: "0", memory_mb: 128, huge: false, file_prefix: vqs-cli-access-$$, args: ["--no-pci"]}
ports:
  - {name: vm0, type: vhost, socket: $work/acc0.sock, socket_mode: "0620", socket_group: nogroup}
  - {name: vm1, type: vhost, socket: $work/acc1.sock}
forwarding: {mode: xconnect, pairs: [[vm0, vm1]]}
YAML
"$vqswitch" --config "$work/access.yaml" >"$work/access.out" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$work/acc1.sock" ] && break; sleep 0.1; done
[ "$(stat -c '%a %G' "$work/acc0.sock" 2>&1)" = "620 nogroup" ] ||
  fail "socket_mode/socket_group: $(stat -c '%a %G' "$work/acc0.sock" 2>&1)"
kill -INT "$pid"
wait "$pid" || fail "socket_mode/socket_group run: exit $?: $(tail -n 3 "$work/access.out")"

echo "$count examples checked, $failures failures"
[ "$failures" -eq 0 ]
