// SPDX-License-Identifier: BSD-3-Clause
// vqswitch's configuration: what a YAML file says, validated, with defaults filled in where they
// do not depend on a guest (ring-size-derived defaults stay 0 = "auto" until a guest connects).
// docs/configuration.md documents every key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/yaml_reader.h"
#include "vhost/vhost_port_options.h"

namespace vqs::app {

constexpr int kConfigVersion = 1;

// Limits of Debian's DPDK 22.11 build, checked here so that a config never fails half-way through
// start-up: RTE_MAX_LCORE, RTE_MAX_ETHPORTS, RTE_MAX_VHOST_DEVICE, VHOST_MAX_QUEUE_PAIRS.
constexpr unsigned kMaxLcores = 128;
constexpr unsigned kMaxEthdevPorts = 32;
constexpr unsigned kMaxPorts = 1024;
constexpr unsigned kMaxQueues = kMaxQueuePairs;  // queues of any port: a guest's limit
// A configuration file is read to at most this size: a thousand ports take a few hundred KiB.
constexpr size_t kMaxConfigBytes = 1 << 20;

// Packets per visit when the config gives none: chosen from the sweeps in docs/benchmarks.md
// ("Packet weights"), the reasons in docs/configuration.md. Not tied to the ring size: 2 x ring
// (the earlier default) let a NIC queue's visit last long enough for a guest's TX ring to
// overflow behind it, and held a neighbour's packets for as long.
constexpr uint32_t kDefaultPacketWeight = 64;
// Bytes per visit when the config gives none, from the same sweeps with 1500- and 9000-byte
// frames: it ends visits only for frames above 4 KiB (jumbo, guest TSO), whose copies make a
// visit long; 256 KiB kept a neighbour's latency below OVS-DPDK's at the flooder's full rate.
constexpr uint32_t kDefaultByteWeight = 256 << 10;

// interrupt_recheck_us when the config gives none (the PMD's devarg defaults to 0: it cannot
// count on tx bursts to flush): how long a polling guest's "no interrupts" stands before it is
// read again, from the sweep in docs/benchmarks.md ("Interrupt rechecks"); a guest that asks for
// interrupts within that long of our last read is woken up to this late, once.
constexpr uint32_t kDefaultInterruptRecheckUs = 100;

// Limits of a weight and of busy_poll_us, for the config file and vqswitchctl alike.
constexpr uint32_t kMaxWeightPackets = 65536;
constexpr uint32_t kMaxWeightBytes = 1u << 30;
constexpr uint32_t kMaxBusyPollUs = 10000000;

// A queue's share of its lcore: a visit ends when either is spent or the queue is empty.
struct Weight {
  uint32_t packets = kDefaultPacketWeight;
  uint32_t bytes = kDefaultByteWeight;
  bool operator==(const Weight&) const = default;
};

enum class VlanMode { kNone, kAccess, kTrunk };

struct VlanConfig {
  VlanMode mode = VlanMode::kNone;    // kNone: untagged frames only, VLAN 0 (bridge)
  uint16_t access_vlan = 0;           // kAccess: 1..4094
  std::vector<uint16_t> trunk_vlans;  // kTrunk: allowed tagged VLANs, 1..4094, sorted, unique
  uint16_t native_vlan = 0;           // kTrunk: untagged frames belong to it; 0: dropped
  bool operator==(const VlanConfig&) const = default;
};

enum class PortType { kVhost, kEthdev };

// The names the YAML file uses, for messages and `--check`.
const char* port_type_name(PortType type);
const char* vlan_mode_name(VlanMode mode);

struct PortConfig {
  std::string name;  // unique; how lcores and forwarding refer to the port
  PortType type = PortType::kVhost;
  uint16_t queues = 1;          // vhost: queue pairs served; ethdev: rx queues
  Weight weight;                // default for each of the port's rx queues
  VlanConfig vlan;              // bridge mode only
  uint32_t tx_retries_max = 8;  // tx toward a full queue: retries before drops are counted

  // vhost: the socket, and the options the PMD's devargs set too (their defaults and limits)
  std::string socket;
  VhostPortOptions vhost;  // queue_pairs unused: `queues` above

  // ethdev
  std::string device;  // PCI address or vdev string ("net_tap0,iface=t0")
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  uint16_t rx_free_thresh = 0;  // 0: min(burst, rx_descriptors) / 2
  uint16_t mtu = 0;             // 0: leave the device's

  int line = 0;  // 1-based, where the port's entry starts (for messages after parsing)
  bool operator==(const PortConfig&) const = default;
};

// One rx queue an lcore polls, with its weight (the port's unless overridden).
struct RxQueueRef {
  std::string port;
  uint16_t queue = 0;
  Weight weight;  // the loader resolves the inheritance: fields not overridden are the port's
};

struct LcoreConfig {
  unsigned lcore = 0;                    // EAL lcore id, within eal.cores
  bool auto_rx = false;                  // rx: auto
  std::vector<RxQueueRef> rx;            // explicit placement
  std::optional<uint32_t> busy_poll_us;  // unset: poll forever
};

enum class ForwardingMode { kXconnect, kBridge };

const char* forwarding_mode_name(ForwardingMode mode);

struct ForwardingConfig {
  ForwardingMode mode = ForwardingMode::kXconnect;
  std::vector<std::pair<std::string, std::string>> pairs;  // xconnect: both directions
  uint32_t mac_table_size = 4096;                          // bridge: learned (MAC, VLAN) entries
  uint32_t mac_aging_s = 300;                              // bridge: 0 = never age
};

struct EalConfig {
  std::string cores = "0-1";           // -l
  std::optional<unsigned> main_lcore;  // default: the first of cores
  uint32_t memory_mb = 1024;           // -m
  std::string file_prefix = "vqswitch";
  bool huge = true;               // false: --no-huge (tests; no guest can share such memory)
  std::vector<std::string> args;  // appended as they are
};

// How rx queues are dealt to lcores with rx: auto when they are placed again (rxq-rebalance,
// auto_balance): in turn, or by their measured busy cycles (OVS's pmd-rxq-assign).
enum class RxqAssign { kRoundRobin, kCycles };
// OVS's pmd-auto-lb: every interval_s, queues move when that spreads the lcores' load more
// evenly by at least threshold_pct (the variance of their busy cycles, reduced by that much).
struct AutoBalanceConfig {
  bool enabled = false;
  uint32_t threshold_pct = 25;
  uint32_t interval_s = 60;
};

// The control socket vqswitchctl talks to (docs/operations.md).
struct ControlConfig {
  std::string socket;   // empty: kControlDir/<eal.file_prefix>.ctl
  SocketAccess access;  // unset mode: 0600 (root only)
};
inline constexpr const char* kControlDir = "/run/vqswitch";

struct Config {
  std::string file;  // as given on the command line, for messages
  int version = kConfigVersion;
  EalConfig eal;
  uint32_t mbufs = 0;             // 0: sized from ports, queues and descriptors
  uint16_t burst = 32;            // rx burst and tx buffer size
  uint32_t stats_interval_s = 1;  // live one-line-per-port summary; 0 = off
  ControlConfig control;
  std::vector<PortConfig> ports;
  std::vector<LcoreConfig> lcores;  // empty: every EAL lcore but main forwards, rx: auto
  RxqAssign rxq_assign = RxqAssign::kRoundRobin;
  AutoBalanceConfig auto_balance;
  ForwardingConfig forwarding;
  // Key path ("ports[1].queues", "lcores[0].rx[2]") -> where its value starts, for every value the
  // loader read, so that later stages (plan, start-up) can blame the line that caused a problem.
  std::map<std::string, SourcePos> positions;

  // The control socket's path: control.socket, or its default from eal.file_prefix.
  std::string control_socket() const {
    return control.socket.empty() ? std::string(kControlDir) + "/" + eal.file_prefix + ".ctl"
                                  : control.socket;
  }

  // "FILE:LINE:COLUMN: KEY: message", positioned at `key` or, if it was not read from the file, at
  // its nearest parent that was ("ports[0].socket" -> "ports[0]"); "FILE: KEY: message" if none.
  std::string error_at(const std::string& key, const std::string& message) const;

  const PortConfig* find_port(const std::string& name) const {
    for (const PortConfig& p : ports)
      if (p.name == name) return &p;
    return nullptr;
  }
  // Index into `ports`, or -1.
  int port_index(const std::string& name) const {
    for (size_t i = 0; i < ports.size(); ++i)
      if (ports[i].name == name) return static_cast<int>(i);
    return -1;
  }
};

// Reads and validates `path`, including that make_plan() succeeds on it. On error returns nullopt
// and sets `error` to "FILE:LINE:COLUMN: KEY: what is wrong" (KEY as a path, e.g.
// "ports[1].queues"; a file that is not valid YAML has no KEY; a file that cannot be read has no
// LINE:COLUMN).
std::optional<Config> load_config(const std::string& path, std::string* error);
// The same from text, `file` naming it in messages.
std::optional<Config> parse_config(const std::string& text, const std::string& file,
                                   std::string* error);

// A port mapping given at run time (vqswitchctl add-port), read by the code that reads the file's
// ports[] entries, against the ports of `running` (a name, socket or device taken is an error).
// nullopt with `error` "SOURCE:LINE:COLUMN: port.KEY: what is wrong".
std::optional<PortConfig> parse_port(const Config& running, const std::string& text,
                                     const std::string& source, std::string* error);

}  // namespace vqs::app
