#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Live migration of a Linux guest between two net_vqs ports of one dpdk-testpmd, with a real QEMU
# on each side (TCG). testpmd forwards net_vqs0 <-> net_tap0 and net_vqs1 <-> net_tap1 (io,
# paired); both taps are ports of a Linux bridge in this host, which holds the host's address.
# The guest has guest_announce=off, so after a move QEMU asks the new port for its RARP
# (SEND_RARP): the port's next rx burst carries it to its tap, and the Linux bridge learns the
# guest's MAC there. The guest moves to net_vqs1 quietly (only the RARP can teach the bridge),
# then back to net_vqs0 under a ping flood with a data pattern.
#   pmd_qemu_migration_test.sh PLUGIN.so SOURCE_DIR
set -uo pipefail

plugin=$1
src=$2
run=$(mktemp -d /run/vqs-pmdm.XXXXXX)  # EAL refuses plugins below world-writable directories
tag=$(basename "$run")
tap=vqsm$$
bridge=vqsmb$$
net=10.$((RANDOM % 200 + 20)).$((RANDOM % 250)).0
host=${net%.0}.1
guest=${net%.0}.2
mac=52:54:00:00:02:02
port=$((50000 + RANDOM % 10000))
cp "$plugin" "$run/librte_net_vqs.so"
testpmd_pid=
source "$src/scripts/guest/harness.sh"
cleanup() {
  disown -a
  pkill -KILL -f -- "$run/" 2>/dev/null  # QEMU and the flood (their files are in $run)
  [ -n "$testpmd_pid" ] && kill -INT "$testpmd_pid" 2>/dev/null
  sleep 0.5
  pkill -KILL -f -- "--file-prefix $tag" 2>/dev/null
  ip link del "$bridge" 2>/dev/null
  rm -rf "$run" /var/run/dpdk/"$tag"* /dev/hugepages/"$tag"*
}
trap cleanup EXIT

guest_dir=$("$src/scripts/guest/build.sh") || { echo "FAIL: cannot build the guest"; exit 1; }
preload=$(ldd "$plugin" | awk '/lib(asan|ubsan)\.so/ {print $3}' | sort | tr '\n' ' ')
host_env=()
[ -n "$preload" ] && host_env=(env LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")

# Ports in --vdev order: 0 net_vqs0, 1 net_tap0, 2 net_vqs1, 3 net_tap1; paired: 0<->1, 2<->3.
"${host_env[@]}" dpdk-testpmd -l 0,1 --main-lcore 0 --file-prefix "$tag" -m 256 --no-pci \
  --single-file-segments -d "$run/librte_net_vqs.so" \
  --vdev "net_vqs0,iface=$run/vm0.sock" --vdev "net_tap0,iface=${tap}a" \
  --vdev "net_vqs1,iface=$run/vm1.sock" --vdev "net_tap1,iface=${tap}b" --log-level "*:notice" \
  -- --forward-mode=io --port-topology=paired --nb-cores=1 --auto-start --stats-period 1 \
  </dev/null >"$run/testpmd.log" 2>&1 &
testpmd_pid=$!
for _ in $(seq 100); do
  [ -S "$run/vm1.sock" ] && ip link show "${tap}b" >/dev/null 2>&1 && break
  sleep 0.1
done
ip link add "$bridge" type bridge && ip link set "${tap}a" master "$bridge" &&
  ip link set "${tap}b" master "$bridge" && ip link set "${tap}a" up && ip link set "${tap}b" up &&
  ip addr add "$host/24" dev "$bridge" && ip link set "$bridge" up ||
  { echo "FAIL: testpmd or the bridge did not come up: $(tail -n 5 "$run/testpmd.log")"; exit 1; }

qemu() {  # $1 name (QMP socket, files), $2 the port's socket, then extra options (-incoming)
  local name=$1 sock=$2
  shift 2
  guest_qemu "$name" "$run/$sock.sock" "$guest/24" "$host" "$mac" ",guest_announce=off" "$@"
}
# Migrates QEMU $1 to QEMU $2 (waiting on TCP port $3) and waits; sets done_at (ns).
migrate() {
  local info=""
  done_at=
  qmp "$1" migrate "{\"uri\": \"tcp:127.0.0.1:$3\"}" >"$run/migrate.out"
  for _ in $(seq 600); do
    info=$(qmp "$1" query-migrate)
    case "$(field "$info" status)" in
      completed) done_at=$(date +%s%N); break ;;
      failed|cancelled) break ;;
    esac
    sleep 0.1
  done
  if [ -n "$done_at" ]; then
    ok "QEMU migrated the guest ($1 -> $2) in $(field "$info" total-time) ms (downtime $(field "$info" downtime) ms)"
  else
    fail "$1 -> $2: the migration did not complete: $info $(cat "$run/migrate.out" "$run/$1.qemu.log")"
    done_at=$(date +%s%N)
  fi
}
check_states() {  # after migrate $1 $2
  [ "$(field "$(qmp "$1" query-status)" status)" = postmigrate ] && [ "$(field "$(qmp "$2" query-status)" status)" = running ] &&
    ok "$1's QEMU stopped, $2's runs" || fail "$1 -> $2: QEMU states after the migration"
}
# Whether the Linux bridge has the guest behind tap $1 by 3 s after done_at (checked at least
# once); sets `learned` to when it was seen there.
fdb_has() {
  while :; do
    learned=$((($(date +%s%N) - done_at) / 1000000))
    bridge fdb show br "$bridge" | grep "$mac dev $1 " >/dev/null && return 0
    [ "$learned" -lt 3000 ] || return 1
    sleep 0.05
  done
}
answers() {  # $1: what is running meanwhile
  local back=""
  for _ in $(seq 100); do
    if ping -c 1 -W 0.2 "$guest" >/dev/null 2>&1; then
      back=$((($(date +%s%N) - done_at) / 1000000))
      break
    fi
  done
  [ -n "$back" ] && ok "the guest answers $back ms after the migration completed$1" ||
    fail "the guest does not answer after the migration"
}

qemu vm0 vm0
qemu vm1 vm1 -incoming "tcp:127.0.0.1:$port"
for _ in $(seq 240); do grep -aq "VQS-GUEST-PINGS-DONE" "$run/vm0.console" 2>/dev/null && break; sleep 0.5; done
grep -aq "VQS-GUEST-PING-OK" "$run/vm0.console" && ok "the guest booted on net_vqs0 and reached the host" ||
  fail "the guest did not reach the host: $(tail -n 5 "$run/vm0.console" 2>/dev/null) $(cat "$run/vm0.qemu.log")"
ping -c 2 -W 5 "$guest" >/dev/null 2>&1 && ok "the host reaches the guest" || fail "the host cannot reach the guest"
bridge fdb show br "$bridge" | grep "$mac dev ${tap}a " >/dev/null && ok "the Linux bridge has the guest behind ${tap}a" ||
  fail "the Linux bridge does not have the guest behind ${tap}a: $(bridge fdb show br "$bridge" | grep "$mac")"

# The quiet move: nothing in flight, so only the RARP teaches the Linux bridge where the guest
# went (the guest has no IPv6, whose router solicitations would, at times of their own). The guest answered pings just now through a neighbour entry that may be stale: Linux
# confirms it with an ARP request 5 s later (delay_first_probe_time). Let that pass first.
sleep 7
migrate vm0 vm1 "$port"
fdb_has "${tap}b" && ok "the Linux bridge moved the guest behind ${tap}b within $learned ms (its RARP, from net_vqs1)" ||
  fail "the Linux bridge did not move the guest within 3 s: $(bridge fdb show br "$bridge" | grep "$mac")"
check_states vm0 vm1
answers ""

# The move back under a ping flood with a data pattern (64 in flight): a new QEMU waits on
# net_vqs0's socket.
pkill -KILL -f -- "$run/vm0.qmp"
qemu vm2 vm0 -incoming "tcp:127.0.0.1:$((port + 1))"
sleep 1
flood "$guest" "$run/flow.out"
sleep 1
migrate vm1 vm2 "$((port + 1))"
fdb_has "${tap}a" && ok "the Linux bridge has the guest behind ${tap}a again" ||
  fail "the Linux bridge does not have the guest back behind ${tap}a: $(bridge fdb show br "$bridge" | grep "$mac")"
check_states vm1 vm2
answers " (a ping flood running)"
sleep 1
flood_stop
flood_verdict "$run/flow.out" "the guest"

[ "$failures" -ne 0 ] && { echo "--- testpmd log"; tail -n 30 "$run/testpmd.log"; }
echo "pmd_qemu_migration: $checks checks passed, $failures failed"
[ "$failures" -eq 0 ]
