#!/usr/bin/env bash
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

echo "$count examples checked, $failures failures"
[ "$failures" -eq 0 ]
