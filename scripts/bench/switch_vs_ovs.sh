#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# vqswitch against OVS-DPDK (Debian's openvswitch-switch-dpdk), on the same guests, period by
# period.
#
# One OVS-DPDK (its own ovsdb-server and ovs-vswitchd, started here in a private run directory,
# no systemd) and one vqswitch per variant run side by side, each forwarding on CPU 1 with its
# main thread on CPU 0; one guest (dpdk-testpmd with DPDK's virtio_user, forwarding on CPU 0) has
# its own ports on every switch. All switches but the one under test are frozen (SIGSTOP), so
# each period has CPU 1 to one switch; the guest's `set portlist` moves its traffic to that
# switch's ports. A round visits every switch once, the order reversed every other round, so
# each variant's ratio to OVS is taken from periods close in time (the median of the rounds'
# ratios is reported). Each period: 1 s of warm-up, then the guest's rate over --seconds and the
# switch's busy TSC cycles per packet it received (vqswitch: telemetry /vqswitch/lcores,1;
# OVS: dpif-netdev/pmd-stats-show, after pmd-stats-clear). In guest-rx those packets are the
# NIC's, offered whether the guest's ring has room or not, and both switches are always busy:
# the period also gives the share of them dropped at the guest's full ring (guest_delivery; near
# zero: the switch bounds the rate, high: the guest does; vqswitch's only, see there).
#
# Scenarios (each switch: xconnect / OpenFlow in_port->output for one guest port and a net_null
# "NIC"; the L2 bridge / the NORMAL action for vm2vm):
#   pvp       net_null (generating) -> switch -> guest macswap -> switch -> net_null; guest Tx-pps
#   guest-tx  guest txonly -> switch -> net_null sink; guest Tx-pps
#   guest-rx  net_null (generating) -> switch -> guest rxonly; guest Rx-pps
#   vm2vm     two guest ports on the bridge (build/scripts/bench/vqs-vm2vm-guest), each sending
#             one UDP flow from its own MAC address to the other's and receiving the other's:
#             learned unicast both ways; guest Rx-pps of both
#   noisy     noisy neighbours on the switch's one lcore: a NIC (net_null generating --size
#             frames, always more than the lcore can take) forwarded to a net_null sink, and a
#             guest port (build/scripts/bench/vqs-noisy-guest) flooding --size frames to another
#             sink, while a second guest port sends a 64-byte probe every 20 us to a third; the
#             flooding guest's Tx-pps, and the probes' one-way latency (p50, p99, p99.9, medians
#             of the periods) and loss
#   probe     the noisy scenario's probe alone (no flood, the NIC quiet), one every --probe-us
#             microseconds: the offered load; the probes' Rx-pps, latency and loss, and the
#             switch process's CPU use (utime + stime over the period): with busy_poll_us set,
#             what sleeping gives back and what it costs the probe
#   intr-rx   a receiver that sleeps until notified (build/scripts/bench/vqs-intr-guest: epoll on
#             its Rx queue's call eventfd, as a Linux guest waits for its interrupt), fed through
#             the switch by a sender in the same guest at --pps packets per second (bursts of 32
#             on a timerfd): what the receiver got, the loss, and its wake-ups; with notification
#             coalescing a sleeping receiver's ring fills until the switch notifies it, and the
#             refill threshold is what notifies it early
#   share     three guest ports (build/scripts/bench/vqs-share-guest) flooding at once, each to
#             its own net_null sink, beside a NIC (net_null generating 64-byte frames, weight 1024
#             packets on vqswitch) forwarded to a sink, so that the lcore is the bottleneck and
#             every guest queue is full when visited (one guest alone sends about as fast as
#             the lcore forwards): the share of packets and of bytes the switch takes from each
#             guest port, against the shares --expect names (the ratio of the weights the
#             variant gives the ports), and Jain's index of the two; --sizes items are comma
#             lists there, the frame size of each port ("64,512,1500")
#
#   scripts/bench/switch_vs_ovs.sh [--scenarios "pvp guest-tx guest-rx vm2vm"] [--sizes "64 1500"]
#       [--rounds N] [--seconds S] [--variant LABEL 'YAML'] ... [--cpu-state] [--table NAME]
#       [--queue-size N] [--probe-us US] [--expect "1:2:4"] [--pps "N ..."]
#       [--guest-devargs ",in_order=1"]
#
# --variant LABEL 'YAML[|LCORE_YAML[|VHOST_YAML]]': a vqswitch whose every port mapping has YAML
# added (flow style, e.g. 'weight: {packets: 32}'), whose lcore entry has LCORE_YAML added (e.g.
# '|busy_poll_us: 50') and whose vhost ports alone have VHOST_YAML added ('||refill_threshold:
# 32'); in share, YAML may be one part per guest port, 'A;B;C'; repeat for several (a sweep);
# --bin PATH after a --variant runs that variant with another vqswitch binary (an A/B of two
# builds). Without any --variant, one vqswitch with the
# defaults, labelled "vqswitch". --probe-us "US ...": the probe's interval in noisy and probe
# (20); several: each in turn, as sizes are. --cpu-state: each period's placement class (near, far, mixed;
# see pvp_interleaved.sh), sampled with the guest and the switch under test frozen, printed
# with the samples' median line latency, and the results per class. --queue-size: the guests'
# virtio ring size (1024). --guest-devargs: appended to every guest virtio_user port's devargs
# (the ports have in_order=0, so that both switches meet the guest's free-list paths;
# ",in_order=1" gives virtio_user's own default, in-order paths against both, which both
# offer). --table: the block of docs/benchmarks.md to rewrite (default switch-vs-ovs; none:
# print only). Needs root and a build; raises the 2 MiB hugepages to what
# the switches and the guest take. VQS_BENCH_KEEP=1 keeps the run directory (every log);
# VQS_BENCH_PERF=1 records each period with `perf record -C 0,1` into it (perf.SCENARIO.SIZE.
# SWITCH.N.data; `perf report --sort cpu,comm,sym`), instead of sampling the placement.
# VQS_GUEST_TESTPMD=PATH runs the guest with another dpdk-testpmd (one built with -g from the
# dpdk source package, so that perf can name the virtio driver's functions).
set -euo pipefail

# Runs from a copy of itself and common.sh, so that editing the tree during a run (which takes
# long) cannot change the script under bash's feet; VQS_TOP names the tree.
if [ -z "${VQS_TOP:-}" ]; then
  top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  snapshot=$(mktemp -d /tmp/vqs-switch-vs-ovs.XXXXXX)
  cp "$top/scripts/bench/switch_vs_ovs.sh" "$top/scripts/bench/common.sh" "$snapshot/"
  VQS_TOP=$top VQS_SNAPSHOT=$snapshot exec bash "$snapshot/switch_vs_ovs.sh" "$@"
fi
top=$VQS_TOP
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
scenarios="pvp guest-tx guest-rx vm2vm"
queue_size=1024
probe_list=20
probe_us=20
expect=1:1:1
pps_list=1000000
pps=1000000
guest_devargs=""
sizes="64 1500"
rounds=10
seconds=3
table=switch-vs-ovs
cpu_state=""
labels=()
extras=()
bins=()  # per variant: another vqswitch binary (--bin), or empty
while [ $# -gt 0 ]; do
  case "$1" in
    --scenarios) scenarios=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --variant) labels+=("$2"); extras+=("$3"); bins+=(""); shift 3 ;;
    --bin) [ ${#bins[@]} -gt 0 ] || { echo "--bin follows a --variant" >&2; exit 2; }
      bins[$((${#bins[@]} - 1))]=$2; shift 2 ;;
    --table) table=$2; shift 2 ;;
    --queue-size) queue_size=$2; shift 2 ;;
    --probe-us) probe_list=$2; shift 2 ;;
    --expect) expect=$2; shift 2 ;;
    --pps) pps_list=$2; shift 2 ;;
    --guest-devargs) guest_devargs=$2; shift 2 ;;
    --cpu-state) cpu_state=$top/build/scripts/bench/vqs-cpu-share; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#labels[@]} -gt 0 ] || { labels=(vqswitch); extras=(""); }
for s in $scenarios; do
  case "$s" in
    pvp | guest-tx | guest-rx) ;;
    vm2vm) [ -x "$top/build/scripts/bench/vqs-vm2vm-guest" ] ||
      { echo "build first: vqs-vm2vm-guest" >&2; exit 1; } ;;
    noisy | probe) [ -x "$top/build/scripts/bench/vqs-noisy-guest" ] ||
      { echo "build first: vqs-noisy-guest" >&2; exit 1; } ;;
    share) [ -x "$top/build/scripts/bench/vqs-share-guest" ] ||
      { echo "build first: vqs-share-guest" >&2; exit 1; } ;;
    intr-rx) [ -x "$top/build/scripts/bench/vqs-intr-guest" ] ||
      { echo "build first: vqs-intr-guest" >&2; exit 1; } ;;
    *) echo "scenario $s?" >&2; exit 2 ;;
  esac
done
vqswitch=$top/build/app/vqswitch/vqswitch
ovs_vswitchd=/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk
[ -x "$vqswitch" ] || { echo "build first: $vqswitch" >&2; exit 1; }
[ -z "$cpu_state" ] || [ -x "$cpu_state" ] || { echo "build first: $cpu_state" >&2; exit 1; }
if [ ! -x "$ovs_vswitchd" ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    openvswitch-switch-dpdk >/dev/null
fi

# Hugepages: each switch preallocates 512 MB and takes more as it needs it (OVS's and vqswitch's
# mbuf pools), so 1 GB each; 1 GB for the guest; 512 MB to spare.
readonly kSwitchMb=512 kGuestMb=1024
need=$(((1024 * (1 + ${#labels[@]}) + kGuestMb + 512) / 2))
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
[ "$(cat $nr)" -ge "$need" ] || echo "$need" >$nr
[ "$(cat $nr)" -ge "$need" ] || { echo "only $(cat $nr) hugepages, want $need" >&2; exit 1; }

run=$(mktemp -d /run/vqs-svo.XXXXXX)
declare -A tel_in=() tel_out=()  # by switch index: its telemetry reader's fds (tel_start)
tag=$(basename "$run")
pids=()      # every process started, for cleanup
sw_pids=()   # per switch: 0 is OVS, 1.. the vqswitch variants
names=(ovs-dpdk "${labels[@]}")
export OVS_RUNDIR=$run/ovs OVS_LOGDIR=$run/ovs OVS_DBDIR=$run/ovs
vsctl() { ovs-vsctl --db="unix:$OVS_RUNDIR/db.sock" "$@"; }
appctl() { ovs-appctl -t "$(echo "$OVS_RUNDIR"/ovs-vswitchd*."$(cat "$OVS_RUNDIR/ovs-vswitchd.pid")".ctl)" "$@"; }

stop_all() {
  local p
  tel_stop
  for p in "${pids[@]}" "${sw_pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  # A subshell writes: a guest that is gone would have the write's SIGPIPE end this shell.
  [ -n "${fd_guest:-}" ] && { (echo quit >&"$fd_guest") 2>/dev/null || true; exec {fd_guest}>&-; fd_guest=""; }
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for f in "$OVS_RUNDIR"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for f in "$OVS_RUNDIR"/*.pid; do [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true; done
  pids=() sw_pids=()
  # A socket left by a switch that had to be killed would let the next guest start before the
  # next switch has replaced it.
  rm -rf /dev/hugepages/"$tag"-* /var/run/dpdk/"$tag"-* "$run"/*.sock
}
cleanup() {
  stop_all
  [ -n "${VQS_BENCH_KEEP:-}" ] || rm -rf "$run"
  [ -z "${VQS_SNAPSHOT:-}" ] || rm -rf "$VQS_SNAPSHOT"
}
trap cleanup EXIT

# guest_ports SCENARIO: the names of the guest's ports on each switch.
guest_ports() {
  case "$1" in
    vm2vm) echo vm0 vm1 ;;
    noisy | probe | share) echo vm0 vm1 vm2 ;;
    intr-rx) echo vm0 vm1 ;;
    *) echo vm0 ;;
  esac
}

# Guest port k's MAC (vm2vm: ports 2j and 2j+1, one switch's pair, send to each other's).
mac_of() { printf '02:00:00:5e:00:%02x' "$1"; }

# start_ovs SCENARIO SIZE: ovsdb-server and ovs-vswitchd, bridge br0 (netdev datapath) with the
# scenario's ports; adds its vhost-user sockets to `sockets` and its pid to `sw_pids`.
start_ovs() {
  local scenario=$1 size=$2 null
  rm -rf "$OVS_RUNDIR"
  mkdir -p "$OVS_RUNDIR"
  ovsdb-tool create "$OVS_RUNDIR/conf.db" /usr/share/openvswitch/vswitch.ovsschema
  ovsdb-server --remote="punix:$OVS_RUNDIR/db.sock" --pidfile="$OVS_RUNDIR/ovsdb-server.pid" \
    --detach --log-file="$OVS_RUNDIR/ovsdb-server.log" -vconsole:off "$OVS_RUNDIR/conf.db" 2>/dev/null
  vsctl --no-wait init
  vsctl --no-wait set Open_vSwitch . other_config:dpdk-init=true \
    other_config:dpdk-extra="--no-pci --file-prefix $tag-ovs" \
    other_config:dpdk-socket-mem=$kSwitchMb other_config:dpdk-lcore-mask=0x1 \
    other_config:pmd-cpu-mask=0x2
  "$ovs_vswitchd" "unix:$OVS_RUNDIR/db.sock" --pidfile="$OVS_RUNDIR/ovs-vswitchd.pid" --detach \
    --log-file="$OVS_RUNDIR/ovs-vswitchd.log" -vconsole:off 2>/dev/null
  vsctl add-br br0 -- set bridge br0 datapath_type=netdev
  if [ "$scenario" = vm2vm ]; then
    vsctl add-port br0 vm0 -- set Interface vm0 type=dpdkvhostuser
    vsctl add-port br0 vm1 -- set Interface vm1 type=dpdkvhostuser
  elif [ "$scenario" = noisy ] || [ "$scenario" = probe ]; then
    null=net_null0,size=$size
    [ "$scenario" = probe ] && null=net_null0,no-rx=1
    for v in vm0 vm1 vm2; do vsctl add-port br0 $v -- set Interface $v type=dpdkvhostuser; done
    # Jumbo frames: OVS-DPDK sizes its mbufs by the MTU and takes no chained ones.
    [ "$size" -le 1518 ] || for v in vm0 vm1 vm2; do vsctl set Interface $v mtu_request=9000; done
    vsctl add-port br0 nic0 -- set Interface nic0 type=dpdk "options:dpdk-devargs=$null"
    vsctl add-port br0 nic1 -- set Interface nic1 type=dpdk "options:dpdk-devargs=net_null1,no-rx=1"
    vsctl add-port br0 nic2 -- set Interface nic2 type=dpdk "options:dpdk-devargs=net_null2,no-rx=1"
    ovs-ofctl del-flows br0
    for pair in nic0,nic1 vm0,nic2 vm1,vm2; do
      ovs-ofctl add-flow br0 "in_port=${pair%,*},actions=output:${pair#*,}"
      ovs-ofctl add-flow br0 "in_port=${pair#*,},actions=output:${pair%,*}"
    done
  elif [ "$scenario" = intr-rx ]; then
    vsctl add-port br0 vm0 -- set Interface vm0 type=dpdkvhostuser
    vsctl add-port br0 vm1 -- set Interface vm1 type=dpdkvhostuser
    ovs-ofctl del-flows br0
    ovs-ofctl add-flow br0 in_port=vm0,actions=output:vm1
  elif [ "$scenario" = share ]; then
    ovs-ofctl del-flows br0
    for k in 0 1 2; do
      vsctl add-port br0 vm$k -- set Interface vm$k type=dpdkvhostuser
      vsctl add-port br0 nic$k -- set Interface nic$k type=dpdk "options:dpdk-devargs=net_null$k,no-rx=1"
      ovs-ofctl add-flow br0 in_port=vm$k,actions=output:nic$k
    done
    vsctl add-port br0 nic3 -- set Interface nic3 type=dpdk "options:dpdk-devargs=net_null3,size=64"
    vsctl add-port br0 nic4 -- set Interface nic4 type=dpdk "options:dpdk-devargs=net_null4,no-rx=1"
    ovs-ofctl add-flow br0 in_port=nic3,actions=output:nic4
  else
    null="net_null0,size=$size"
    [ "$scenario" = guest-tx ] && null="net_null0,no-rx=1"
    vsctl add-port br0 vm0 -- set Interface vm0 type=dpdkvhostuser
    vsctl add-port br0 nic0 -- set Interface nic0 type=dpdk "options:dpdk-devargs=$null"
    ovs-ofctl del-flows br0
    ovs-ofctl add-flow br0 in_port=vm0,actions=output:nic0
    ovs-ofctl add-flow br0 in_port=nic0,actions=output:vm0
  fi
  sw_pids+=("$(cat "$OVS_RUNDIR/ovs-vswitchd.pid")")
  for v in $(guest_ports "$scenario"); do sockets+=("$OVS_RUNDIR/$v"); done
}

# start_vqswitch INDEX SCENARIO SIZE: vqswitch variant INDEX (1..), as start_ovs.
start_vqswitch() {
  local i=$1 scenario=$2 size=$3 extra=${extras[$(($1 - 1))]} yaml=$run/vqswitch$1.yaml null
  local port_extra="" lcore_extra="" vhost_extra="" lcores rest
  # PORT_YAML|LCORE_YAML|VHOST_YAML
  case "$extra" in *"|"*)
    rest=${extra#*|}
    extra=${extra%%|*}
    case "$rest" in *"|"*) vhost_extra=${rest#*|}; rest=${rest%%|*} ;; esac
    [ -n "$rest" ] && lcore_extra=", $rest" ;;
  esac
  [ -n "$extra" ] && port_extra=", $extra"
  local vm_extra=$port_extra${vhost_extra:+, $vhost_extra}
  lcores="lcores: [{lcore: 1, rx: auto$lcore_extra}]"
  null="net_null0,size=$size"
  [ "$scenario" = guest-tx ] && null="net_null0,no-rx=1"
  {
    echo "version: 1"
    echo "eal: {cores: \"0-1\", main_lcore: 0, memory_mb: $kSwitchMb, file_prefix: $tag-vqs$i,"
    echo "      args: [\"--no-pci\", \"--log-level=*:warning\"]}"
    echo "stats_interval_s: 0"
    echo "ports:"
    [ "$scenario" = share ] || echo "  - {name: vm0, type: vhost, socket: $run/vqs$i-vm0.sock$vm_extra}"
    if [ "$scenario" = vm2vm ]; then
      echo "  - {name: vm1, type: vhost, socket: $run/vqs$i-vm1.sock$vm_extra}"
      echo "$lcores"
      echo "forwarding: {mode: bridge}"
    elif [ "$scenario" = noisy ] || [ "$scenario" = probe ]; then
      null=net_null0,size=$size
      [ "$scenario" = probe ] && null=net_null0,no-rx=1
      echo "  - {name: vm1, type: vhost, socket: $run/vqs$i-vm1.sock$vm_extra}"
      echo "  - {name: vm2, type: vhost, socket: $run/vqs$i-vm2.sock$vm_extra}"
      echo "  - {name: nic0, type: ethdev, device: \"$null\"$port_extra}"
      echo "  - {name: nic1, type: ethdev, device: \"net_null1,no-rx=1\"$port_extra}"
      echo "  - {name: nic2, type: ethdev, device: \"net_null2,no-rx=1\"$port_extra}"
      echo "$lcores"
      echo "forwarding: {mode: xconnect, pairs: [[nic0, nic1], [vm0, nic2], [vm1, vm2]]}"
    elif [ "$scenario" = intr-rx ]; then
      echo "  - {name: vm1, type: vhost, socket: $run/vqs$i-vm1.sock$vm_extra}"
      echo "$lcores"
      echo "forwarding: {mode: xconnect, pairs: [[vm0, vm1]]}"
    elif [ "$scenario" = share ]; then
      # Each guest port its own part of the variant's port YAML ("A;B;C"; one part: all).
      local parts part
      IFS=';' read -r -a parts <<<"$extra"
      for k in 0 1 2; do
        part=""
        [ ${#parts[@]} -eq 0 ] || part=${parts[$k]:-${parts[$((${#parts[@]} - 1))]}}
        echo "  - {name: vm$k, type: vhost, socket: $run/vqs$i-vm$k.sock${part:+, $part}${vhost_extra:+, $vhost_extra}}"
        echo "  - {name: nic$k, type: ethdev, device: \"net_null$k,no-rx=1\"}"
      done
      echo "  - {name: nic3, type: ethdev, device: \"net_null3,size=64\", weight: {packets: 1024}}"
      echo "  - {name: nic4, type: ethdev, device: \"net_null4,no-rx=1\"}"
      echo "$lcores"
      echo "forwarding: {mode: xconnect, pairs: [[vm0, nic0], [vm1, nic1], [vm2, nic2], [nic3, nic4]]}"
    else
      echo "  - {name: nic0, type: ethdev, device: \"$null\"$port_extra}"
      echo "$lcores"
      echo "forwarding: {mode: xconnect, pairs: [[vm0, nic0]]}"
    fi
  } >"$yaml"
  local bin=${bins[$((i - 1))]:-$vqswitch}
  "$bin" --check "$yaml" >"$run/vqswitch$i.plan" ||
    { echo "variant ${labels[$((i - 1))]}: bad config" >&2; cat "$run/vqswitch$i.plan" >&2; exit 1; }
  "$bin" --config "$yaml" >"$run/vqswitch$i.log" 2>&1 &
  pids+=($!)
  sw_pids+=($!)
  for v in $(guest_ports "$scenario"); do sockets+=("$run/vqs$i-$v.sock"); done
}

# start_guest SCENARIO SIZE SOCKET...: the guest testpmd, interactive, reading from a fifo.
start_guest() {
  local scenario=$1 size=$2 vdevs=() fwd=() k=0 s testpmd_args=()
  local prog=("${VQS_GUEST_TESTPMD:-dpdk-testpmd}")
  shift 2
  for s in "$@"; do
    for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
    [ -S "$s" ] || { echo "no socket $s; see $run" >&2; exit 1; }
    vdevs+=(--vdev "net_virtio_user$k,path=$s,queue_size=$queue_size,mrg_rxbuf=1,in_order=0,mac=$(mac_of $k)$guest_devargs")
    k=$((k + 1))
  done
  [[ $size != *,* ]] && [ "$size" -gt 1800 ] && fwd+=("--mbuf-size=$((size + 256))")
  testpmd_args=(-i --port-topology=loop --nb-cores=1)
  case "$scenario" in
    noisy) prog=("$top/build/scripts/bench/vqs-noisy-guest"); testpmd_args=()
      fwd=(--size "$size" --probe-us "$probe_us") ;;
    probe) prog=("$top/build/scripts/bench/vqs-noisy-guest"); testpmd_args=()
      fwd=(--size "$size" --probe-us "$probe_us" --flood 0) ;;
    share) prog=("$top/build/scripts/bench/vqs-share-guest"); testpmd_args=()
      fwd=(--sizes "$size") ;;
    intr-rx) prog=("$top/build/scripts/bench/vqs-intr-guest"); testpmd_args=()
      fwd=(--size "$size" --pps "$pps") ;;
    pvp) fwd+=(--forward-mode=macswap) ;;
    guest-tx) fwd+=(--forward-mode=txonly "--txpkts=$size") ;;
    guest-rx) fwd+=(--forward-mode=rxonly) ;;
    vm2vm) prog=("$top/build/scripts/bench/vqs-vm2vm-guest"); testpmd_args=()
      fwd=(--size "$size") ;;
  esac
  rm -f "$run/guest.in"
  mkfifo "$run/guest.in"
  stdbuf -oL "${prog[@]}" -l 0,1 --main-lcore 1 --file-prefix "$tag-guest" -m $kGuestMb --no-pci \
    --single-file-segments "${vdevs[@]}" --log-level "*:warning" -- "${testpmd_args[@]}" \
    "${fwd[@]}" <"$run/guest.in" >"$run/guest.log" 2>&1 &
  pids+=($!)
  guest_pid=$!
  exec {fd_guest}>"$run/guest.in"
  for _ in $(seq 600); do grep -aq "testpmd>" "$run/guest.log" 2>/dev/null && break; sleep 0.2; done
  grep -aq "testpmd>" "$run/guest.log" || { echo "guest did not start; see $run/guest.log" >&2; exit 1; }
  sleep 1
}

# renice_switches N: every thread of every switch to nice N.
renice_switches() {
  local p t
  for p in "${sw_pids[@]}"; do
    for t in /proc/"$p"/task/*; do renice -n "$1" -p "${t##*/}" >/dev/null 2>&1 || true; done
  done
}

# cpu_ticks PID: user + system clock ticks of all of PID's threads so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

guest() {
  kill -0 "$guest_pid" 2>/dev/null || { echo "the guest is gone; see $run/guest.log" >&2; exit 1; }
  echo "$1" >&"$fd_guest"
}
log_size() { stat -c %s "$1"; }

# A reader per vqswitch that keeps one connection to its telemetry socket, started while the
# switches are frozen: a period's counters then cost a socket round trip, not a Python start on
# one of the two CPUs in the middle of the period's counter window (up to half a second each,
# counted as our lcore's busy cycles when it landed on CPU 1; docs/benchmarks.md, "Descriptor
# lines given back after the interrupt decision"). Its input: COMMAND, SEP, FALLBACK and the
# KEYs, tab-separated; its output: one line, as vqs_telemetry's.
tel_reader='import json, socket, sys
sock = None
for line in sys.stdin:
    command, sep, fallback, *keys = line.rstrip("\n").split("\t")
    out = fallback
    try:
        if sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            sock.connect(sys.argv[1])
            sock.recv(1 << 16)  # the greeting
        sock.send(command.encode())
        d = json.loads(sock.recv(1 << 20).decode()).get(command.split(",")[0], {}) or {}
        if keys and keys[0] in d:
            out = sep.join(str(d[k]) for k in keys)
    except (OSError, ValueError):
        sock = None
    print(out, flush=True)'
# tel_start INDEX: the reader of vqswitch INDEX (its socket needs only to exist).
tel_start() {
  local i=$1 fd
  mkfifo "$run/tel$i.in" "$run/tel$i.out"
  python3 -c "$tel_reader" "/var/run/dpdk/$tag-vqs$i/dpdk_telemetry.v2" <"$run/tel$i.in" \
    >"$run/tel$i.out" 2>/dev/null &
  exec {fd}>"$run/tel$i.in"
  tel_in[$i]=$fd
  exec {fd}<"$run/tel$i.out"
  tel_out[$i]=$fd
}
tel_stop() {
  local fd
  for fd in "${tel_in[@]}" "${tel_out[@]}"; do exec {fd}>&-; done
  tel_in=() tel_out=()
  rm -f "$run"/tel*.in "$run"/tel*.out
}

# vqs_telemetry INDEX COMMAND SEP FALLBACK KEY...: the KEYs of vqswitch INDEX's answer to the
# telemetry COMMAND ("/vqswitch/ports,vm0"), joined by SEP; FALLBACK when it has not the first.
# Asks INDEX's reader (tel_start), which every period has.
vqs_telemetry() {
  local i=$1 command=$2 sep=$3 fallback=$4 line
  shift 4
  (IFS=$'\t'; echo "$command"$'\t'"$sep"$'\t'"$fallback"$'\t'"$*") >&"${tel_in[$i]}"
  read -r -u "${tel_out[$i]}" line
  echo "$line"
}

# guest_delivery INDEX: "delivered dropped" toward the guest port vm0 of switch INDEX so far (frames
# it wrote into the guest's ring, and frames it dropped because the ring was full); "0 0" when
# unknown, as for OVS-DPDK: Debian's OVS 3.1 gives no counters for a dpdkvhostuser port here
# ("could not retrieve stats (Protocol error)" in dpctl/show -s, ovs-ofctl dump-ports and the
# Interface's statistics alike), so its share prints as "-".
guest_delivery() {
  if [ "$1" -eq 0 ]; then
    echo 0 0
  else
    vqs_telemetry "$1" /vqswitch/ports,vm0 " " "0 0" tx_packets tx_guest_full
  fi
}

# placed_port: the guest port whose queue guest_placement and line_releases read.
placed_port() { if [ "$scenario" = share ]; then echo vm1; else echo vm0; fi; }

# guest_placement INDEX: where vqswitch INDEX's desc_release probe puts its first guest and whether
# the guest sends frames of its own ("far/128/1": class, line ns, buffer_release's sender gate;
# "unmeasured/0/0" when it does not probe); "-" for OVS-DPDK.
guest_placement() {
  [ "$1" -eq 0 ] && { echo -; return; }
  vqs_telemetry "$1" "/vqswitch/queues,$(placed_port):0" / - guest_cache guest_line_ns guest_sends_own
}

# line_releases INDEX: "packets lines" so far on that guest port of vqswitch INDEX: the packets
# it took and delivered, and the cache lines desc_release and buffer_release gave back (CLFLUSHOPT)
# with them; "0 0" for OVS-DPDK.
line_releases() {
  [ "$1" -eq 0 ] && { echo 0 0; return; }
  vqs_telemetry "$1" "/vqswitch/ports,$(placed_port)" " " "0 0 0 0" rx_packets tx_packets \
    desc_lines_released buffer_lines_released | awk '{print $1 + $2, $3 + $4}'
}

# switch_counters INDEX: "busy_cycles packets idle_cycles" of switch INDEX so far (OVS: since the
# last clear).
switch_counters() {
  if [ "$1" -eq 0 ]; then
    appctl dpif-netdev/pmd-stats-show | awk '/^pmd thread/ {pmd = 1} /^main thread/ {pmd = 0}
      pmd && /processing cycles:/ {c = $3} pmd && /packets received:/ {p = $3}
      pmd && /idle cycles:/ {i = $3} END {printf "%.0f %.0f %.0f\n", c, p, i}'
  else
    vqs_telemetry "$1" /vqswitch/lcores,1 " " "0 0 0" busy_cycles packets idle_cycles
  fi
}

# period INDEX SCENARIO GUEST_PORTS: forward through switch INDEX for one period; prints
# "Mpps cycles/packet state probe placed busy" (state: with --cpu-state the placement class and the
# median line latency, "far/214", else none; probe, in noisy and probe: "p50/p99/p999/lost/sent/cpu"
# with latencies in ns and the switch process's CPU use in % of one CPU, else -; placed: what
# vqswitch's own probe said at the period's end, guest_placement, and "/N", the lines given back
# a packet over the period, line_releases; busy: the switch lcore's busy share of its TSC cycles
# over the period, in %, "-" when unknown: near 100 the switch is the bound, not the guest).
period() {
  local i=$1 scenario=$2 ports=$3 key=Tx-pps at rate c0 p0 i0 c1 p1 i1 rp0 rl0 rp1 rl1 state=none
  local probe
  case "$scenario" in guest-rx | vm2vm | probe | intr-rx) key=Rx-pps ;; esac
  kill -CONT "${sw_pids[$i]}"
  guest "set portlist $ports"
  guest start
  sleep 1
  [ "$i" -eq 0 ] && appctl dpif-netdev/pmd-stats-clear >/dev/null
  # A vqswitch's counters come from its reader (tel_start), a socket round trip; OVS-DPDK's from
  # ovs-appctl, whose exit the pause lets go before the period starts (a process exiting on
  # either CPU stalls a poller).
  read -r c0 p0 i0 <<<"$(switch_counters "$i")"
  read -r rp0 rl0 <<<"$(line_releases "$i")"
  local d0=0 x0=0 d1=0 x1=0
  [ "$scenario" = guest-rx ] && read -r d0 x0 <<<"$(guest_delivery "$i")"
  sleep 0.2
  guest "show port stats all"  # starts the rate's interval
  local ticks0 ticks1 t0 t1
  ticks0=$(cpu_ticks "${sw_pids[$i]}")
  t0=$(date +%s%N)
  if [ -n "${VQS_BENCH_PERF:-}" ]; then
    perf record -q -C 0,1 -o "$run/perf.$scenario.$size.${names[$i]}.$(date +%H%M%S).data" \
      -- sleep "$seconds" >/dev/null 2>&1
  elif [ -n "$cpu_state" ]; then
    state=$(line_crossings "$seconds" "$cpu_state" "$guest_pid" "${sw_pids[$i]}" | crossing_state)
  else
    sleep "$seconds"
  fi
  at=$(log_size "$run/guest.log")
  guest "show port stats all"
  ticks1=$(cpu_ticks "${sw_pids[$i]}")
  t1=$(date +%s%N)
  sleep 0.3
  read -r c1 p1 i1 <<<"$(switch_counters "$i")"
  read -r rp1 rl1 <<<"$(line_releases "$i")"
  [ "$scenario" = guest-rx ] && read -r d1 x1 <<<"$(guest_delivery "$i")"
  local placed
  placed=$(guest_placement "$i")
  # Lines given back a packet over the period: auto's gates open or shut (0.25 a packet when a
  # line of four descriptors goes back with every burst).
  [ "$placed" = - ] || placed+=$(awk -v p="$((rp1 - rp0))" -v l="$((rl1 - rl0))" \
    'BEGIN {printf "/%.3f", (p > 0) ? l / p : 0}')
  guest stop
  sleep 0.3
  kill -STOP "${sw_pids[$i]}"
  rate=$(tail -c +$((at + 1)) "$run/guest.log" | grep -a -oE "$key: +[0-9]+" |
    awk '{s += $2} END {printf "%.3f", s / 1e6}' || true)
  probe=$(tail -c +$((at + 1)) "$run/guest.log" | grep -a "Probe-latency-ns:" | tail -1 |
    awk '{print $3 "/" $5 "/" $7 "/" $11 "/" $13}' || true)
  [ -n "$probe" ] && probe+=$(awk -v a="$ticks0" -v b="$ticks1" -v t0="$t0" -v t1="$t1" \
    -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "/%.0f", 100 * (b - a) / hz / ((t1 - t0) / 1e9)}')
  # guest-rx: the share (%) of the frames offered to the guest that its full ring dropped.
  [ "$scenario" = guest-rx ] && probe=$(awk -v d="$((d1 - d0))" -v x="$((x1 - x0))" \
    'BEGIN {if (d + x > 0) printf "%.1f", 100 * x / (d + x); else print "-"}')
  # intr-rx: "sent/received/wakeups/refused", per second.
  [ "$scenario" = intr-rx ] && probe=$(tail -c +$((at + 1)) "$run/guest.log" |
    awk '/Tx-pps:/ {t = $2} /Rx-pps:/ {r = $2} /Intr:/ {w = $3; f = $5} END {print t "/" r "/" w "/" f}')
  # share: "PPS:PPS:PPS/BPS:BPS:BPS", per guest port.
  [ "$scenario" = share ] && probe=$(tail -c +$((at + 1)) "$run/guest.log" |
    awk '/Share-pps:/ {$1 = ""; p = $0} /Share-Bps:/ {$1 = ""; b = $0}
      END {gsub(/^ +/, "", p); gsub(/^ +/, "", b); gsub(/ +/, ":", p); gsub(/ +/, ":", b); print p "/" b}')
  awk -v r="$rate" -v c0="$c0" -v c1="$c1" -v p0="$p0" -v p1="$p1" -v k="$state" -v q="${probe:--}" \
    -v g="${placed:--}" -v i0="$i0" -v i1="$i1" 'BEGIN {
      b = c1 - c0; t = b + i1 - i0
      printf "%s %.0f %s %s %s %s\n", r, (p1 > p0) ? b / (p1 - p0) : 0, k, q, g,
        (t > 0) ? sprintf("%.0f", 100 * b / t) : "-"}'
}

# known_median "N - N ...": the median of the numbers, "-" when there are none.
known_median() {
  local known
  known=$(echo "$1" | tr ' ' '\n' | grep -v -e '^-$' -e '^$' || true)
  if [ -n "$known" ]; then echo "$known" | median; else echo -; fi
}

# probe_summary "p50/p99/p999/lost/sent ...": the medians of the periods' percentiles (us) and the
# loss summed over them.
probe_summary() {
  echo "$1" | tr ' ' '\n' | sed '/^$/d' | awk -F/ '
    {p50[NR] = $1; p99[NR] = $2; p999[NR] = $3; lost += $4; sent += $5; cpu[NR] = $6}
    function med(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END {printf "p50 %.1f us, p99 %.1f us, p99.9 %.1f us (medians of %d periods), lost %d of %d, switch CPU %.0f%%\n",
      med(p50, NR) / 1000, med(p99, NR) / 1000, med(p999, NR) / 1000, NR, lost, sent, med(cpu, NR)}'
}

# share_summary EXPECT "PPS:PPS:PPS/BPS:BPS:BPS ...": the medians over the periods of each port's
# share of the packets and of the bytes (%), and of Jain's fairness index of the shares measured
# against EXPECT ("1:2:4"): (sum x)^2 / (n sum x^2) with x = share / expected share; 1 when the
# shares are the expected ones. With a second argument "tsv LABEL SIZE": one TSV row per port
# instead (label, size, port, expected %, packets %, bytes %, Jain packets, Jain bytes).
share_summary() {
  echo "$2" | tr ' ' '\n' | sed '/^$/d' | awk -F/ -v expect="$1" -v mode="${3:-}" -v label="${4:-}" -v size="${5:-}" '
    function med(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function jain(v, n,   k, s, q, x) {
      s = 0; q = 0
      for (k = 1; k <= n; k++) { x = v[k] / w[k]; s += x; q += x * x }
      return (q > 0) ? s * s / (n * q) : 0
    }
    BEGIN { n = split(expect, w, ":"); for (k = 1; k <= n; k++) wsum += w[k]; for (k = 1; k <= n; k++) w[k] /= wsum }
    {
      split($1, p, ":"); split($2, b, ":"); ps = 0; bs = 0
      for (k = 1; k <= n; k++) { ps += p[k]; bs += b[k] }
      if (ps == 0 || bs == 0) next
      periods++
      for (k = 1; k <= n; k++) { sp[k] = p[k] / ps; sb[k] = b[k] / bs; P[k, periods] = 100 * sp[k]; B[k, periods] = 100 * sb[k] }
      JP[periods] = jain(sp, n); JB[periods] = jain(sb, n)
    }
    END {
      if (periods == 0) { print "no shares"; exit }
      jp = med(JP, periods); jb = med(JB, periods)
      for (k = 1; k <= n; k++) {
        for (i = 1; i <= periods; i++) { tp[i] = P[k, i]; tb[i] = B[k, i] }
        mp[k] = med(tp, periods); mb[k] = med(tb, periods)
      }
      if (mode == "tsv") {
        for (k = 1; k <= n; k++) printf "%s\t%s\tvm%d\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\n", label, size, k - 1, 100 * w[k], mp[k], mb[k], jp, jb
        exit
      }
      printf "packets"; for (k = 1; k <= n; k++) printf "%s%.1f", (k > 1) ? "/" : " ", mp[k]
      printf " %%, bytes"; for (k = 1; k <= n; k++) printf "%s%.1f", (k > 1) ? "/" : " ", mb[k]
      printf " %%, Jain packets %.3f bytes %.3f against %s (medians of %d periods)\n", jp, jb, expect, periods
    }'
}

# intr_summary "sent/received/wakeups/refused ...": medians over the periods of what the sender's
# ring took, what the receiver got, the loss between them, and the receiver's wake-ups.
intr_summary() {
  echo "$1" | tr ' ' '\n' | sed '/^$/d' | awk -F/ '
    function med(a, n,   i, j, t) {
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    $1 > 0 {n++; s[n] = $1; r[n] = $2; l[n] = 100 * ($1 - $2) / $1; w[n] = $3; f[n] = $4}
    END {
      if (n == 0) { print "no periods"; exit }
      printf "sent %.3f Mpps, received %.3f, lost %.2f %%, %.0f wake-ups/s, refused by the sender'"'"'s ring %.0f/s (medians of %d periods)\n",
        med(s, n) / 1e6, med(r, n) / 1e6, med(l, n), med(w, n), med(f, n), n
    }'
}
# intr_loss "...": the median loss (%); - without a period that sent anything.
intr_loss() {
  local losses
  losses=$(echo "$1" | tr ' ' '\n' | sed '/^$/d' | awk -F/ '$1 > 0 {printf "%.3f\n", 100 * ($1 - $2) / $1}')
  if [ -n "$losses" ]; then echo "$losses" | median; else echo -; fi
}

# probe_us FIELD "p50/p99/p999/lost/sent ...": the median of the periods' FIELD (1: p50, 2: p99)
# in us.
probe_us() {
  echo "$2" | tr ' ' '\n' | sed '/^$/d' | awk -F/ -v f="$1" '{printf "%.2f\n", $f / 1000}' | median
}
# probe_field FIELD "...": the median of the periods' FIELD as it is (6: CPU %).
probe_field() { echo "$2" | tr ' ' '\n' | sed '/^$/d' | awk -F/ -v f="$1" '{print $f}' | median; }

load_before=$(load)
results=()
data=()
shares=()
for scenario in $scenarios; do
  # noisy and probe: every size at every probe interval.
  points=$sizes
  case "$scenario" in
    noisy | probe) points=$(for z in $sizes; do for u in $probe_list; do echo "$z/$u"; done; done) ;;
    intr-rx) points=$(for z in $sizes; do for u in $pps_list; do echo "$z/$u"; done; done) ;;
  esac
  for point in $points; do
    size=${point%/*}
    if [ "$scenario" = intr-rx ]; then
      pps=${point#*/}
    elif [ "$point" != "$size" ]; then
      probe_us=${point#*/}
    fi
    label=$scenario
    [ "$scenario" = probe ] && label="probe@$((1000000 / probe_us))pps"
    [ "$scenario" = intr-rx ] && label="intr-rx@$(awk -v p="$pps" 'BEGIN {printf "%g", p / 1e6}')Mpps"
    per_switch=$(guest_ports "$scenario" | wc -w)
    sockets=() sw_pids=()
    start_ovs "$scenario" "$size"
    for i in $(seq ${#labels[@]}); do start_vqswitch "$i" "$scenario" "$size"; done
    # Every switch polls while the guest comes up (they must answer its vhost-user messages), and
    # the guest's main thread shares CPU 1 with their lcores: without this, each of its messages
    # waits for a time slice behind every poller, and with several switches the start takes
    # minutes.
    renice_switches 19
    start_guest "$scenario" "$size" "${sockets[@]}"
    renice_switches 0
    for i in $(seq ${#labels[@]}); do tel_start "$i"; done
    for p in "${sw_pids[@]}"; do kill -STOP "$p"; done
    declare -A rates=() cycles=() probes=() class_rates=() class_cycles=() class_ratios=() round_class=()
    declare -A class_dropped=()
    for r in $(seq "$rounds"); do
      order=$(seq 0 ${#labels[@]})
      [ $((r % 2)) -eq 0 ] && order=$(echo "$order" | tac)
      declare -A this=() this_class=() this_cycles=() this_dropped=()
      for i in $order; do
        ports=$(seq -s, $((i * per_switch)) $((i * per_switch + per_switch - 1)))
        read -r rate cyc state probe placed busy < <(period "$i" "$scenario" "$ports")
        class=${state%/*} where=${state/\// }
        [ "$state" = "$class" ] || where+=" ns"
        # vqswitch's own verdict beside the harness's (desc_release auto).
        if [ "$placed" != - ]; then
          where+=", guest $(echo "$placed" | awk -F/ '{print $1, $2 " ns" ($3 == 1 ? ", sends own" : "") \
            ", lines given back " $4 " a packet"}')"
        fi
        probes[$i]+=" $probe"
        shown=${probe#-}
        if [ "$scenario" = guest-rx ]; then
          shown=""
          [ "$probe" = - ] || { this_dropped[$i]=$probe; shown=", dropped at the guest's full ring $probe %"; }
        fi
        rates[$i]+=" $rate"
        cycles[$i]+=" $cyc"
        this[$i]=$rate
        this_class[$i]=$class
        this_cycles[$i]=$cyc
        echo "  $label ${size}B round $r: ${names[$i]} $rate Mpps, $cyc cycles/packet, busy $busy %" \
          "($where, load $(load))$shown" >&2
      done
      for i in $(seq ${#labels[@]}); do
        ratio=$(awk -v a="${this[$i]}" -v b="${this[0]}" 'BEGIN {printf "%.3f", (b > 0) ? a / b : 0}')
        rates[ratio.$i]+=" $ratio"
        pair=${this_class[0]}
        [ "${this_class[$i]}" = "$pair" ] || pair=mixed
        class_rates[$i.b.${this_class[0]}]+=" ${this[0]}"
        class_rates[$i.a.${this_class[$i]}]+=" ${this[$i]}"
        class_cycles[$i.b.${this_class[0]}]+=" ${this_cycles[0]}"
        class_cycles[$i.a.${this_class[$i]}]+=" ${this_cycles[$i]}"
        [ -z "${this_dropped[0]:-}" ] || class_dropped[$i.b.${this_class[0]}]+=" ${this_dropped[0]}"
        [ -z "${this_dropped[$i]:-}" ] || class_dropped[$i.a.${this_class[$i]}]+=" ${this_dropped[$i]}"
        class_ratios[$i.$pair]+=" $ratio"
      done
    done
    stop_all
    # What each bridge learned (its final counters, printed at SIGINT): a guest whose frames
    # are not learned unicast shows here as moves and floods.
    if [ "$scenario" = vm2vm ]; then
      for i in $(seq ${#labels[@]}); do
        echo "  $label ${size}B ${labels[$((i - 1))]}: $(grep -a -o 'bridge entries.*' "$run/vqswitch$i.log" |
          tail -1)" >&2
      done
    fi
    for i in $(seq ${#labels[@]}); do
      mapfile -t lines < <(scenario_lines "$label" "$size" ovs-dpdk "${rates[0]}" "${labels[$((i - 1))]}" \
        "${rates[$i]}" "${rates[ratio.$i]}" rounds "${cycles[0]}" "${cycles[$i]}" |
        sed 's/host busy TSC/switch busy TSC/')
      if [ "$scenario" = guest-rx ]; then
        lines+=("$(printf "%17s dropped at the guest's full ring, %% of the frames offered (medians): %s %s, %s %s" \
          "" ovs-dpdk "$(known_median "${probes[0]}")" "${labels[$((i - 1))]}" \
          "$(known_median "${probes[$i]}")")")
      fi
      if [ -n "$cpu_state" ]; then
        declare -A cr=() cc=() cq=() cd=()
        for c in near far mixed; do
          [ -n "${class_dropped[$i.a.$c]:-}" ] && cd[a.$c]=${class_dropped[$i.a.$c]}
          [ -n "${class_dropped[$i.b.$c]:-}" ] && cd[b.$c]=${class_dropped[$i.b.$c]}
          [ -n "${class_rates[$i.a.$c]:-}" ] && cr[a.$c]=${class_rates[$i.a.$c]}
          [ -n "${class_rates[$i.b.$c]:-}" ] && cr[b.$c]=${class_rates[$i.b.$c]}
          [ -n "${class_cycles[$i.a.$c]:-}" ] && cc[a.$c]=${class_cycles[$i.a.$c]}
          [ -n "${class_cycles[$i.b.$c]:-}" ] && cc[b.$c]=${class_cycles[$i.b.$c]}
          [ -n "${class_ratios[$i.$c]:-}" ] && cq[$c]=${class_ratios[$i.$c]}
        done
        mapfile -t -O "${#lines[@]}" lines < <(class_lines ovs-dpdk "${labels[$((i - 1))]}" cr cc cq \
          "host cycles" cd | sed 's/host cycles/switch cycles\/packet/')
      fi
      if [ "$scenario" = noisy ] || [ "$scenario" = probe ]; then
        for k in 0 "$i"; do
          lines+=("$(printf '%17s probe latency %-9s %s' "" "${names[$k]}:" "$(probe_summary "${probes[$k]}")")")
        done
      fi
      if [ "$scenario" = intr-rx ]; then
        for k in 0 "$i"; do
          lines+=("$(printf '%17s receiver %-9s %s' "" "${names[$k]}:" "$(intr_summary "${probes[$k]}")")")
        done
      fi
      if [ "$scenario" = share ]; then
        for k in 0 "$i"; do
          lines+=("$(printf '%17s shares %-9s %s' "" "${names[$k]}:" "$(share_summary "$expect" "${probes[$k]}")")")
          [ "$k" -eq 0 ] && [ "$i" -gt 1 ] && continue
          shares+=("$(share_summary "$expect" "${probes[$k]}" tsv "${names[$k]}" "$size")")
        done
      fi
      printf '%s\n' "${lines[@]}"
      results+=("${lines[@]}")
      # The plot's data: per class (all, then each seen), medians of rates, ratios and cycles.
      for c in all near far mixed; do
        if [ $c = all ]; then
          b=${rates[0]} a=${rates[$i]} q=${rates[ratio.$i]} bc=${cycles[0]} ac=${cycles[$i]}
        else
          b=${class_rates[$i.b.$c]:-} a=${class_rates[$i.a.$c]:-} q=${class_ratios[$i.$c]:-}
          bc=${class_cycles[$i.b.$c]:-} ac=${class_cycles[$i.a.$c]:-}
        fi
        [ -n "${q// /}" ] || continue
        lat=(- - - - - -)
        loss=(- -)
        [ "$scenario" = intr-rx ] && [ $c = all ] &&
          loss=("$(intr_loss "${probes[0]}")" "$(intr_loss "${probes[$i]}")")
        { [ "$scenario" = noisy ] || [ "$scenario" = probe ]; } && [ $c = all ] &&
          lat=("$(probe_us 1 "${probes[0]}")" "$(probe_us 1 "${probes[$i]}")"
               "$(probe_us 2 "${probes[0]}")" "$(probe_us 2 "${probes[$i]}")"
               "$(probe_field 6 "${probes[0]}")" "$(probe_field 6 "${probes[$i]}")")
        data+=("$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$label" \
          "$size" "${labels[$((i - 1))]}" $c "$(echo "$b" | median)" "$(echo "$a" | median)" \
          "$(echo "$q" | median)" "$(echo "$bc" | median)" "$(echo "$ac" | median)" \
          "$(echo "$q" | wc -w)" "${lat[@]}" "${loss[@]}")")
      done
    done
  done
done

if [ "$table" != none ]; then
  mkdir -p "$top/docs/data"
  { printf 'scenario\tsize\tvariant\tclass\tovs_mpps\tvqs_mpps\tratio\tovs_cycles\tvqs_cycles\tpairs\tovs_probe_p50_us\tvqs_probe_p50_us\tovs_probe_p99_us\tvqs_probe_p99_us\tovs_cpu_pct\tvqs_cpu_pct\tovs_lost_pct\tvqs_lost_pct\n'
    printf '%s\n' "${data[@]}"; } >"$top/docs/data/$table.tsv"
  if [ ${#shares[@]} -gt 0 ]; then
    { printf 'variant\tsizes\tport\texpected_pct\tpackets_pct\tbytes_pct\tjain_packets\tjain_bytes\n'
      printf '%s\n' "${shares[@]}"; } >"$top/docs/data/$table-shares.tsv"
  fi
  "$top/scripts/bench/plot.sh" "$table" || echo "no plot (gnuplot?)" >&2
fi
[ "$table" = none ] || write_table "$table" \
  "$(date -u +%Y-%m-%d) $(nproc) CPUs, $rounds rounds x ${seconds}s per switch, $(dpdk_version), $(ovs-vswitchd --version | head -1 | awk '{print "OVS " $NF}'),${guest_devargs:+ guest$guest_devargs,} load average $load_before -> $(load)" \
  "${results[@]}"
