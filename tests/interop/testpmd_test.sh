#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# net_vqs in dpdk-testpmd (loaded with -d) against a second dpdk-testpmd whose port is DPDK's
# virtio_user, two processes on their own CPUs, io forwarding on both sides (the guest starts the
# ping-pong with --tx-first). --stats-period keeps a non-interactive testpmd running until SIGINT
# (without it, it exits at end of input).
#   testpmd_test.sh PLUGIN.so pair     server mode: traffic both ways, both sides' counters agree
#   testpmd_test.sh PLUGIN.so client   client mode: our PMD connects to a virtio_user server,
#                                      and reconnects after the guest process restarts
set -euo pipefail

plugin=$1
scenario=$2
run=$(mktemp -d /run/vqs-testpmd.XXXXXX)  # EAL refuses plugins below world-writable directories
tag=$(basename "$run")
cp "$plugin" "$run/librte_net_vqs.so"
sock=$run/vhost.sock
cleanup() {
  pkill -INT -f -- "--file-prefix $tag-" 2>/dev/null || true
  sleep 1
  pkill -KILL -f -- "--file-prefix $tag-" 2>/dev/null || true
  [ -n "${VQS_KEEP_RUN:-}" ] || rm -rf "$run"
  rm -rf /var/run/dpdk/"$tag"-*
  rm -f /dev/hugepages/"$tag"-*
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; exit 1; }

# A sanitizer build of the plugin (build-asan) needs its runtimes in the uninstrumented testpmd,
# loaded first. Leaks are not looked for there: testpmd's and DPDK's own are not ours.
preload=$(ldd "$plugin" | awk '/lib(asan|ubsan)\.so/ {print $3}' | sort | tr '\n' ' ')
host_env=()
if [ -n "$preload" ]; then
  host_env=(env LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0:abort_on_error=1")
fi

# host SECONDS DEVARGS_EXTRA: our PMD, forwarding io on lcore 1 (main lcore 0).
host() {
  "${host_env[@]}" timeout -s INT "$1" dpdk-testpmd -l 0,1 --main-lcore 0 \
    --file-prefix "$tag-host" -m 256 --no-pci -d "$run/librte_net_vqs.so" --vdev "net_vqs0,iface=$sock$2" \
    --log-level "pmd.net.vqs:info" --log-level "*:notice" -- --forward-mode=io --nb-cores=1 \
    --auto-start --stats-period 1 \
    </dev/null >"$run/host.log" 2>&1
}
# guest SECONDS NAME DEVARGS_EXTRA: virtio_user, forwarding io on lcore 0 (main lcore 1).
guest() {
  timeout -s INT "$1" dpdk-testpmd -l 0,1 --main-lcore 1 --file-prefix "$tag-$2" -m 256 \
    --no-pci --single-file-segments --vdev "net_virtio_user0,path=$sock,queue_size=256$3" \
    --log-level "*:notice" -- --forward-mode=io --tx-first --nb-cores=1 --auto-start \
    --stats-period 1 \
    </dev/null >"$run/$2.log" 2>&1
}
wait_for_socket() {
  for _ in $(seq 100); do [ -S "$sock" ] && return 0; sleep 0.1; done
  fail "no socket at $sock"
}
wait_for_log() {  # FILE PATTERN
  for _ in $(seq 300); do grep -aq "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no \"$2\" in $1"
}
# counter LOG RX|TX: the last accumulated forward statistic printed at exit.
counter() {
  grep -a -oE "$2-packets: +[0-9]+ +$2-dropped" "$1" | tail -n 1 | grep -oE '[0-9]+' | head -n 1
}
# Packets can be in flight in a ring when a side stops: one ring plus one burst.
close_enough() {
  local a=$1 b=$2 slack=$3
  [ $((a > b ? a - b : b - a)) -le "$slack" ]
}

case "$scenario" in
  pair)
    host 12 "" &
    host_pid=$!
    wait_for_socket
    guest 6 guest "" || true
    wait "$host_pid" || true
    g_tx=$(counter "$run/guest.log" TX); g_rx=$(counter "$run/guest.log" RX)
    h_rx=$(counter "$run/host.log" RX); h_tx=$(counter "$run/host.log" TX)
    echo "guest tx $g_tx rx $g_rx, host rx $h_rx tx $h_tx"
    [ -n "$g_tx" ] && [ -n "$h_rx" ] || fail "no statistics (see $run)"
    [ "$h_rx" -gt 100000 ] || fail "host received only $h_rx packets"
    [ "$g_rx" -gt 100000 ] || fail "guest received only $g_rx packets"
    close_enough "$g_tx" "$h_rx" 288 || fail "guest sent $g_tx, host received $h_rx"
    close_enough "$h_tx" "$g_rx" 288 || fail "host sent $h_tx, guest received $g_rx"
    ;;
  client)
    # The host first: it connects once the guest's socket appears, and its port is started by
    # then, whatever the build (a sanitizer build starts slowly; the guest's --tx-first burst
    # must find it forwarding).
    host 24 ",client=1" &
    host_pid=$!
    wait_for_log "$run/host.log" "start packet forwarding"
    guest 8 guest1 ",server=1" &
    guest_pid=$!
    wait "$guest_pid" || true  # the guest process goes away...
    sleep 2
    guest 6 guest2 ",server=1" || true  # ...and comes back: the host must reconnect by itself
    wait "$host_pid" || true
    g1_tx=$(counter "$run/guest1.log" TX); g2_tx=$(counter "$run/guest2.log" TX)
    g2_rx=$(counter "$run/guest2.log" RX); h_rx=$(counter "$run/host.log" RX)
    echo "guest1 tx $g1_tx, guest2 tx $g2_tx rx $g2_rx, host rx $h_rx"
    [ -n "$g1_tx" ] && [ -n "$g2_rx" ] && [ -n "$h_rx" ] || fail "no statistics"
    [ "$g1_tx" -gt 100000 ] || fail "first guest sent only $g1_tx packets"
    [ "$g2_rx" -gt 100000 ] || fail "no traffic after the guest restarted ($g2_rx packets)"
    close_enough $((g1_tx + g2_tx)) "$h_rx" 576 || fail "guests sent $((g1_tx + g2_tx)), host received $h_rx"
    grep -aq "net_vqs0: port 0 on $sock (client" "$run/host.log" || fail "host was not in client mode"
    ;;
  *)
    fail "unknown scenario $scenario"
    ;;
esac
echo "PASS: $scenario"
