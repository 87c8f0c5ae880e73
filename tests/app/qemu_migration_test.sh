#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Live migration of Linux guests between vqswitch ports, with a real QEMU on each side (TCG,
# docs/guests.md's command lines). Two guests, each moved by QEMU from port 0 to port 1 and back:
#   A: ports a0, a1; GUEST_ANNOUNCE (QEMU's default): the guest announces itself after a move;
#   B: ports b0, b1; guest_announce=off: QEMU has vqswitch send the guest's RARP (SEND_RARP);
#      packed virtqueues (packed=on): their positions move with the guest, their writes are logged.
# The first move is quiet (no traffic in flight), so only the announcement or the RARP can teach
# the bridge where the guest went; the move back runs under a ping flood with a data pattern
# through the bridge (a net_tap port into this host).
# Checked: QEMU migrates (it refuses a vhost-user backend without dirty logging); vqswitch logged
# dirty pages on the source ports; the bridge moves each MAC to the new port; each guest answers
# there within seconds; no reply came back corrupted or twice. What the log holds is
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
tcp_port=$((40000 + RANDOM % 10000))  # migration streams: this and the next three
switch_pid=
source "$src/scripts/guest/harness.sh"
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

# Guest $3 (A or B: the last byte of its address and MAC) on port socket $2; see guest_qemu.
qemu() {
  local name=$1 sock=$2 n=$3 device_opts=$4
  shift 4
  guest_qemu "$name" "$run/$sock.sock" "${net%.0}.$n/24" "$host" "52:54:00:00:01:0$n" "$device_opts" "$@"
}

# Migrates each "FROM:TO:PORT" at once and waits; then checks each completed and that vqswitch
# logged dirty pages on the source port. Sets done_at[FROM] (ns) for each.
declare -A done_at
migrate() {
  local m from to tcp
  declare -A info
  for m in "$@"; do
    IFS=: read -r from to tcp <<<"$m"
    qmp "$from" migrate "{\"uri\": \"tcp:127.0.0.1:$tcp\"}" >"$run/$from.migrate"
    done_at[$from]=
  done
  for _ in $(seq 600); do
    local pending=0
    for m in "$@"; do
      from=${m%%:*}
      [ -n "${done_at[$from]}" ] && continue
      info[$from]=$(qmp "$from" query-migrate)
      case "$(field "${info[$from]}" status)" in
        completed) done_at[$from]=$(date +%s%N) ;;
        failed|cancelled) done_at[$from]=failed ;;
        *) pending=1 ;;
      esac
    done
    [ "$pending" -eq 0 ] && break
    sleep 0.1
  done
  for m in "$@"; do
    IFS=: read -r from to tcp <<<"$m"
    case "${done_at[$from]}" in
      ''|failed) fail "$from: migration did not complete: ${info[$from]} $(cat "$run/$from.migrate" "$run/$from.qemu.log")" ;;
      *) ok "$from -> $to: migrated in $(field "${info[$from]}" total-time) ms (downtime $(field "${info[$from]}" downtime) ms)" ;;
    esac
  done
}
# After migrate: each FROM:TO's source QEMU stopped, its destination running.
check_states() {
  local m from to
  for m in "$@"; do
    IFS=: read -r from to _ <<<"$m"
    [ "$(field "$(qmp "$from" query-status)" status)" = postmigrate ] && [ "$(field "$(qmp "$to" query-status)" status)" = running ] &&
      ok "$from's QEMU stopped, $to's runs" || fail "$from -> $to: QEMU states after the migration"
  done
}
# Until 3 s after done_at[$1] (and at least once), whether the bridge has each MAC=PORT given
# after it; sets learned[MAC] to how long after done_at[$1] it was first seen there.
declare -A learned
fdb_wait() {
  local since=$1 pair found
  shift
  learned=()
  while :; do
    found=$(ctl fdb-show --json | python3 -c 'import json, sys
have = {(e["mac"], e["port"]) for e in json.load(sys.stdin)["entries"]}
print(" ".join(p for p in sys.argv[1:] if tuple(p.split("=")) in have))' "$@")
    for pair in $found; do
      [ -n "${learned[${pair%=*}]:-}" ] || learned[${pair%=*}]=$((($(date +%s%N) - done_at[$since]) / 1000000))
    done
    [ "${#learned[@]}" -eq "$#" ] && return 0
    [ $((($(date +%s%N) - done_at[$since]) / 1000000)) -lt 3000 ] || return 1
    sleep 0.05
  done
}
# The host reaches guest $1 (last address byte); records how long after done_at[$2].
answers() {
  local back=""
  for _ in $(seq 100); do
    if ping -c 1 -W 0.2 "${net%.0}.$1" >/dev/null 2>&1; then
      back=$((($(date +%s%N) - done_at[$2]) / 1000000))
      break
    fi
  done
  [ -n "$back" ] && ok "${net%.0}.$1 answers $back ms after $2's migration completed $3" ||
    fail "${net%.0}.$1 does not answer after $2's migration"
  echo "migration: ${net%.0}.$1 answers ${back:-never} ms after $2's migration completed $3" >>"$run/summary.txt"
}

qemu a0 a0 2 ""
qemu b0 b0 3 ",guest_announce=off,packed=on"
qemu a1 a1 2 "" -incoming "tcp:127.0.0.1:$tcp_port"
qemu b1 b1 3 ",guest_announce=off,packed=on" -incoming "tcp:127.0.0.1:$((tcp_port + 1))"
for g in a0 b0; do
  for _ in $(seq 240); do grep -aq "VQS-GUEST-PINGS-DONE" "$run/$g.console" 2>/dev/null && break; sleep 0.5; done
  grep -aq "VQS-GUEST-PING-OK" "$run/$g.console" && ok "$g booted and reached the host" ||
    fail "$g did not boot or reach the host: $(tail -n 5 "$run/$g.console" 2>/dev/null) $(cat "$run/$g.qemu.log")"
done
for n in 2 3; do
  ping -c 2 -W 5 "${net%.0}.$n" >/dev/null 2>&1 && ok "the host reaches ${net%.0}.$n on its first port" ||
    fail "the host cannot reach ${net%.0}.$n before the migration"
done
# B's virtio features, one character per bit: VIRTIO_F_RING_PACKED is bit 34; A's are split.
for g in a0 b0; do
  features=$(grep -a -m 1 "VQS-GUEST-READY" "$run/$g.console" | sed 's/.*features //')
  want=0
  [ "$g" = b0 ] && want=1
  [ "${features:34:1}" = "$want" ] && ok "$g: packed virtqueues $want (as asked)" ||
    fail "$g: VIRTIO_F_RING_PACKED is not $want: features $features"
done

# The quiet move: nothing in flight, so the bridge learns the new port only from what the guest
# or vqswitch announce (the guests have no IPv6, whose router solicitations would teach it
# too, at times of their own). The guests answered the host's pings just now through a neighbour entry
# that may be stale: Linux then confirms it with an ARP request 5 s later (its
# delay_first_probe_time), which would teach the bridge too. Let that pass first.
sleep 7
# Slowed down to a few seconds, so that `show` can be seen marking the source ports migrating.
for g in a0 b0; do qmp "$g" migrate-set-parameters '{"max-bandwidth": 16777216}' >/dev/null; done
mkdir -p "$run/show"
(for i in $(seq 100); do ctl show --json >"$run/show/$i.json" 2>/dev/null; sleep 0.05; done) &
sampler=$!
migrate a0:a1:"$tcp_port" b0:b1:"$((tcp_port + 1))"
fdb_wait b0 52:54:00:00:01:02=a1 52:54:00:00:01:03=b1
check_states a0:a1 b0:b1
kill "$sampler" 2>/dev/null
wait "$sampler" 2>/dev/null
python3 - "$run/show" <<'PY' && ok "show marked a0 and b0 migrating while QEMU copied their guests" ||
import glob, json, sys
seen = set()
for path in glob.glob(sys.argv[1] + "/*.json"):
    try:
        ports = json.load(open(path))["ports"]
    except ValueError:
        continue  # the sample cut short by the end of the sampler
    seen |= {p["name"] for p in ports if p.get("migrating")}
print("marked migrating:", sorted(seen))
sys.exit(0 if {"a0", "b0"} <= seen and not seen & {"a1", "b1"} else 1)
PY
  fail "show did not mark exactly a0 and b0 migrating"
ctl show --json | python3 -c 'import json, sys; sys.exit(1 if any(p.get("migrating") for p in json.load(sys.stdin)["ports"]) else 0)' &&
  ok "after the move no port is marked migrating" || fail "a port is still marked migrating: $(ctl show)"
for g in a0 b0; do
  grep -q "$run/$g.sock: dirty page logging on" "$run/switch.log" && ok "$g: vqswitch logged dirty pages during the migration" ||
    fail "$g: vqswitch never turned dirty page logging on"
done
a_ms=${learned[52:54:00:00:01:02]:-} b_ms=${learned[52:54:00:00:01:03]:-}
[ -n "$a_ms" ] && ok "the bridge moved guest A's MAC to a1 (it announced itself) $a_ms ms after the move" ||
  fail "the bridge did not move guest A's MAC to a1 within 3 s: $(ctl fdb-show)"
[ -n "$b_ms" ] && ok "the bridge moved guest B's MAC to b1 (its RARP, from vqswitch) $b_ms ms after the move" ||
  fail "the bridge did not move guest B's MAC to b1 within 3 s: $(ctl fdb-show)"
echo "migration: guest A's MAC on a1 ${a_ms:-never} ms after the move (its own announcement)" >>"$run/summary.txt"
echo "migration: guest B's MAC on b1 ${b_ms:-never} ms after the move (the RARP vqswitch sent)" >>"$run/summary.txt"
grep -q "$run/b1.sock: RARP requested for 52:54:00:00:01:03" "$run/switch.log" &&
  ok "b1: QEMU asked for guest B's RARP" || fail "b1: no RARP was requested for guest B"
grep -q "$run/a1.sock: RARP requested" "$run/switch.log" &&
  fail "a1: a RARP was requested for a guest that announces itself" || ok "a1: no RARP for guest A"
answers 2 a0 ""
answers 3 b0 ""

# The move back, under a flow: 1000-byte pings with a data pattern, 64 in flight (some sit in
# the guest's receive ring when it stops), which the guest echoes; ping reports a reply whose
# data differs, and duplicates. The first sources are gone: new QEMUs wait on ports a0 and b0.
pkill -KILL -f -- "$run/a0.qmp" ; pkill -KILL -f -- "$run/b0.qmp"
qemu a2 a0 2 "" -incoming "tcp:127.0.0.1:$((tcp_port + 2))"
qemu b2 b0 3 ",guest_announce=off,packed=on" -incoming "tcp:127.0.0.1:$((tcp_port + 3))"
sleep 1
for n in 2 3; do flood "${net%.0}.$n" "$run/flow$n.out"; done
sleep 1
migrate a1:a2:"$((tcp_port + 2))" b1:b2:"$((tcp_port + 3))"
fdb_wait b1 52:54:00:00:01:02=a0 52:54:00:00:01:03=b0 && ok "the bridge has both MACs back on a0 and b0" ||
  fail "the bridge: $(ctl fdb-show)"
check_states a1:a2 b1:b2
answers 2 a1 "(a ping flood running)"
answers 3 b1 "(a ping flood running)"
sleep 1
flood_stop
for n in 2 3; do
  flood_verdict "$run/flow$n.out" "${net%.0}.$n"
  echo "migration: ${net%.0}.$n flood: $(grep -a "packets transmitted" "$run/flow$n.out")" >>"$run/summary.txt"
done
cat "$run/summary.txt" 2>/dev/null

if [ "$failures" -ne 0 ]; then
  echo "--- vqswitch log"; tail -n 40 "$run/switch.log"
fi
echo "qemu_migration: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
