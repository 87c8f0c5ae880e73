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

echo "$count examples checked, $failures failures"
[ "$failures" -eq 0 ]
