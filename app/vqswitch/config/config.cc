// SPDX-License-Identifier: BSD-3-Clause
// YAML -> Config: a strict schema walk. Every value is checked where it is read, so that the first
// problem is reported with the position and key path of the value (or key) to blame.
#include "config/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>

#include "config/plan.h"
#include "config/yaml_reader.h"

namespace vqs::app {

const char* port_type_name(PortType type) { return type == PortType::kVhost ? "vhost" : "ethdev"; }

const char* vlan_mode_name(VlanMode mode) {
  switch (mode) {
    case VlanMode::kNone:
      return "none";
    case VlanMode::kAccess:
      return "access";
    case VlanMode::kTrunk:
      return "trunk";
  }
  return "?";
}

const char* forwarding_mode_name(ForwardingMode mode) {
  return mode == ForwardingMode::kXconnect ? "xconnect" : "bridge";
}

namespace {

std::string format_error(const std::string& file, SourcePos pos, const std::string& key,
                         const std::string& message) {
  std::string out = file;
  if (pos.line > 0) out += ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

}  // namespace

std::string Config::error_at(const std::string& key, const std::string& message) const {
  std::string at = key;
  while (!at.empty()) {
    auto it = positions.find(at);
    if (it != positions.end()) return format_error(file, it->second, key, message);
    size_t cut = at.find_last_of(".[");
    if (cut == std::string::npos) break;
    at.resize(cut);
  }
  return format_error(file, {}, key, message);
}

namespace {

bool is_power_of_two(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

// The schema: each key of the file read into Config as it is met (YamlReader does the typing).
class Loader : public YamlReader {
 public:
  explicit Loader(Config* config) : YamlReader(&config->positions), config_(*config) {}

  // `empty`: the text has no document at all (only blanks and comments).
  void load(const YAML::Node& root, bool empty);
  // One port mapping, read as a ports[] entry (named `key` in messages) against the ports
  // already in the config; appended to them.
  void load_port(const YAML::Node& root, const std::string& key);

 private:
  void read_eal(const Value& v);
  void read_control(const Value& v);
  std::string read_socket_path(const Value& v);
  SocketAccess read_socket_access(const MapView& m, const char* mode_key, const char* group_key);
  void read_port(const Value& v);
  void read_vhost(const MapView& m, PortConfig* port);
  void read_ethdev(const MapView& m, PortConfig* port);
  Weight read_weight(const Value& v, Weight base);
  VlanConfig read_vlan(const Value& v);
  void read_lcore(const Value& v);
  RxQueueRef read_rx_queue(const Value& v);
  void read_pairs(const Value& v);
  // The port `v` names, or an error at `v`.
  const PortConfig& port_named(const Value& v, const std::string& name) const;

  Config& config_;
};

const PortConfig& Loader::port_named(const Value& v, const std::string& name) const {
  const PortConfig* port = config_.find_port(name);
  if (!port) fail(v, "unknown port " + in_quotes(name));
  return *port;
}

// [A-Za-z0-9_.-]{1,max_size}: safe in messages, file names and the "port:queue" syntax.
bool valid_name(const std::string& name, size_t max_size) {
  if (name.empty() || name.size() > max_size) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

// A PCI address or a vdev, optionally with devargs: "0000:01:00.0", "net_tap0,iface=t0".
bool valid_device(const std::string& device) {
  std::string name = device.substr(0, device.find(','));
  if (name.empty()) return false;
  bool name_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '.';
  });
  bool args_ok = std::none_of(device.begin(), device.end(),
                              [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
  return name_ok && args_ok;
}

// EAL options the loader sets from its own keys; passing them in eal.args would contradict them.
const char* eal_option_owner(const std::string& arg) {
  static const std::pair<const char*, const char*> kOwned[] = {
      {"-l", "eal.cores"},       {"-c", "eal.cores"},
      {"--lcores", "eal.cores"}, {"--main-lcore", "eal.main_lcore"},
      {"-m", "eal.memory_mb"},   {"--file-prefix", "eal.file_prefix"},
      {"--no-huge", "eal.huge"}};
  for (const auto& [option, key] : kOwned) {
    std::string_view o(option);
    if (arg == o) return key;
    // "--file-prefix=x"; short options also glue their value on ("-l0-1").
    if (arg.size() > o.size() && arg.compare(0, o.size(), o) == 0 &&
        (o[1] != '-' || arg[o.size()] == '='))
      return key;
  }
  return nullptr;
}

void Loader::load(const YAML::Node& root, bool empty) {
  Value top = visit(root, "", {1, 1});
  if (empty) fail(top, "empty configuration (expected a mapping with version: 1)");
  if (!root.IsMap()) fail(top, "expected a mapping at the top level, got " + describe(root));
  MapView m(*this, top,
            {"version", "eal", "mbufs", "burst", "stats_interval_s", "control", "ports", "lcores",
             "rxq_assign", "auto_balance", "forwarding"});

  const Value& version = m.require("version");
  if (read_integer(version) != kConfigVersion)
    fail(version, "unsupported version " + version.node.Scalar() + ", this vqswitch reads " +
                      std::to_string(kConfigVersion));
  config_.version = kConfigVersion;

  if (const Value* v = m.find("eal")) read_eal(*v);
  if (const Value* v = m.find("mbufs")) {
    int64_t mbufs = read_integer(*v);
    if (mbufs != 0 && (mbufs < 1024 || mbufs > 16777216))
      fail(*v, "must be 0 (auto) or 1024..16777216, got " + v->node.Scalar());
    config_.mbufs = static_cast<uint32_t>(mbufs);
  }
  if (const Value* v = m.find("burst")) config_.burst = read_int(*v, 1, 64);
  if (const Value* v = m.find("control")) read_control(*v);
  if (const Value* v = m.find("stats_interval_s"))
    config_.stats_interval_s = read_int(*v, 0, 86400);

  // The forwarding mode first: which port keys are allowed depends on it.
  const Value& forwarding = m.require("forwarding");
  expect_map(forwarding);
  MapView f(*this, forwarding, {"mode", "pairs", "mac_table_size", "mac_aging_s"});
  ForwardingConfig& fw = config_.forwarding;
  fw.mode = read_choice(f.require("mode"), {"xconnect", "bridge"}) == 0 ? ForwardingMode::kXconnect
                                                                        : ForwardingMode::kBridge;

  const Value& ports = m.require("ports");
  std::vector<Value> port_values = elements(ports);
  if (port_values.empty() || port_values.size() > kMaxPorts)
    fail(ports, "must have 1.." + std::to_string(kMaxPorts) + " entries, got " +
                    std::to_string(port_values.size()));
  for (const Value& port : port_values) read_port(port);

  if (const Value* v = m.find("lcores")) {
    std::vector<Value> lcores = elements(*v);
    if (lcores.empty() || lcores.size() > kMaxLcores)
      fail(*v, "must have 1.." + std::to_string(kMaxLcores) + " entries, got " +
                   std::to_string(lcores.size()) + " (leave lcores out for the default placement)");
    for (const Value& lcore : lcores) read_lcore(lcore);
  }

  if (const Value* v = m.find("rxq_assign"))
    config_.rxq_assign = read_choice(*v, {"roundrobin", "cycles"}) == 0 ? RxqAssign::kRoundRobin
                                                                        : RxqAssign::kCycles;
  if (const Value* v = m.find("auto_balance")) {
    expect_map(*v);
    MapView ab(*this, *v, {"enabled", "threshold_pct", "interval_s"});
    AutoBalanceConfig& b = config_.auto_balance;
    if (const Value* e = ab.find("enabled")) b.enabled = read_bool(*e);
    if (const Value* t = ab.find("threshold_pct")) b.threshold_pct = read_int(*t, 1, 100);
    if (const Value* i = ab.find("interval_s")) b.interval_s = read_int(*i, 10, 86400);
    if (b.enabled && config_.rxq_assign != RxqAssign::kCycles)
      fail(*ab.find("enabled"), "needs rxq_assign: cycles (queues move by their measured load)");
  }

  if (fw.mode == ForwardingMode::kXconnect) {
    f.forbid("mac_table_size", "only in bridge mode");
    f.forbid("mac_aging_s", "only in bridge mode");
    read_pairs(f.require("pairs"));
  } else {
    f.forbid("pairs", "only in xconnect mode");
    if (const Value* v = f.find("mac_table_size")) fw.mac_table_size = read_int(*v, 16, 1 << 20);
    if (const Value* v = f.find("mac_aging_s")) fw.mac_aging_s = read_int(*v, 0, 86400);
  }
}

void Loader::load_port(const YAML::Node& root, const std::string& key) {
  Value port = visit(root, key, {1, 1});
  if (config_.ports.size() >= kMaxPorts)
    fail(port, "the switch has " + std::to_string(kMaxPorts) + " ports, the most it takes");
  read_port(port);
}

void Loader::read_eal(const Value& v) {
  expect_map(v);
  MapView m(*this, v, {"cores", "main_lcore", "memory_mb", "file_prefix", "huge", "args"});
  EalConfig& eal = config_.eal;
  std::optional<std::vector<unsigned>> cores = parse_core_list(eal.cores);
  if (const Value* c = m.find("cores")) {
    eal.cores = read_string(*c);
    cores = parse_core_list(eal.cores);
    if (!cores)
      fail(*c, "must be lcore ids below " + std::to_string(kMaxLcores) +
                   " and ascending ranges like \"0-3,6\", each once, got " + in_quotes(eal.cores));
  }
  if (const Value* c = m.find("main_lcore")) {
    eal.main_lcore = static_cast<unsigned>(read_int(*c, 0, kMaxLcores - 1));
    if (std::find(cores->begin(), cores->end(), *eal.main_lcore) == cores->end())
      fail(*c, "lcore " + std::to_string(*eal.main_lcore) + " is not in eal.cores " +
                   in_quotes(eal.cores));
  }
  if (const Value* c = m.find("memory_mb")) eal.memory_mb = read_int(*c, 64, 1048576);
  if (const Value* c = m.find("file_prefix")) {
    eal.file_prefix = read_string(*c);
    if (!valid_name(eal.file_prefix, 64))
      fail(*c, "must be 1..64 characters of A-Z a-z 0-9 _ . -, got " + in_quotes(eal.file_prefix));
  }
  if (const Value* c = m.find("huge")) eal.huge = read_bool(*c);
  if (const Value* c = m.find("args")) {
    for (const Value& arg : elements(*c)) {
      std::string s = read_string(arg);
      if (const char* owner = eal_option_owner(s))
        fail(arg, in_quotes(s) + " is set from " + owner + ", not through eal.args");
      eal.args.push_back(std::move(s));
    }
  }
}

void Loader::read_port(const Value& v) {
  expect_map(v);
  MapView m(*this, v,
            {"name",
             "type",
             "socket",
             "mode",
             "reconnect",
             "socket_mode",
             "socket_group",
             "queues",
             "tso",
             "weight",
             "notify_coalesce",
             "refill_threshold",
             "zerocopy",
             "zerocopy_min_len",
             "zerocopy_fallback",
             "desc_release",
             "buffer_release",
             "interrupt_recheck_us",
             "tx_retries_max",
             "vlan",
             "device",
             "rx_descriptors",
             "tx_descriptors",
             "rx_free_thresh",
             "mtu"});
  PortConfig port;
  port.line = v.pos.line;

  const Value& name = m.require("name");
  port.name = read_string(name);
  if (!valid_name(port.name, 32))
    fail(name, "must be 1..32 characters of A-Z a-z 0-9 _ . -, got " + in_quotes(port.name));
  int other = config_.port_index(port.name);
  if (other >= 0)
    fail(name, "duplicate port name " + in_quotes(port.name) + " (also ports[" +
                   std::to_string(other) + "])");

  port.type = read_choice(m.require("type"), {"vhost", "ethdev"}) == 0 ? PortType::kVhost
                                                                       : PortType::kEthdev;
  if (const Value* q = m.find("queues")) port.queues = read_int(*q, 1, kMaxQueues);
  if (const Value* w = m.find("weight")) port.weight = read_weight(*w, port.weight);
  if (const Value* t = m.find("tx_retries_max")) port.tx_retries_max = read_int(*t, 0, 32);
  if (const Value* vl = m.find("vlan")) {
    if (config_.forwarding.mode != ForwardingMode::kBridge)
      m.forbid("vlan", "only in bridge mode (forwarding.mode is xconnect)");
    port.vlan = read_vlan(*vl);
  }

  if (port.type == PortType::kVhost) {
    for (const char* key : {"device", "rx_descriptors", "tx_descriptors", "rx_free_thresh", "mtu"})
      m.forbid(key, "only for ethdev ports");
    read_vhost(m, &port);
  } else {
    for (const char* key :
         {"socket", "mode", "reconnect", "socket_mode", "socket_group", "tso", "notify_coalesce",
          "refill_threshold", "zerocopy", "zerocopy_min_len", "zerocopy_fallback", "desc_release",
          "buffer_release", "interrupt_recheck_us"})
      m.forbid(key, "only for vhost ports");
    size_t ethdevs = std::count_if(config_.ports.begin(), config_.ports.end(),
                                   [](const auto& p) { return p.type == PortType::kEthdev; });
    if (ethdevs == kMaxEthdevPorts)
      fail(v, "more than " + std::to_string(kMaxEthdevPorts) +
                  " ethdev ports (DPDK's RTE_MAX_ETHPORTS)");
    read_ethdev(m, &port);
  }
  config_.ports.push_back(std::move(port));
}

std::string Loader::read_socket_path(const Value& v) {
  std::string path = read_string(v);
  if (path.empty() || path[0] != '/') fail(v, "must be an absolute path, got " + in_quotes(path));
  if (path.back() == '/') fail(v, "must name a file, got " + in_quotes(path));
  // One spelling per file ("/tmp//a", "/tmp/./a" and "/tmp/x/../a" are "/tmp/a"), so that
  // duplicate checks see the same file however it is written.
  path = std::filesystem::path(path).lexically_normal().string();
  if (path.size() > 107)  // sun_path holds 108 bytes with the terminating NUL
    fail(v,
         "must be at most 107 characters (a unix socket path), got " + std::to_string(path.size()));
  return path;
}

SocketAccess Loader::read_socket_access(const MapView& m, const char* mode_key,
                                        const char* group_key) {
  SocketAccess access;
  if (const Value* v = m.find(mode_key)) {
    std::string why;
    access.mode = parse_socket_mode(read_string(*v), &why);
    if (!access.mode) fail(*v, why + ", got " + in_quotes(read_string(*v)));
  }
  if (const Value* v = m.find(group_key)) {
    std::string why;
    access.group = parse_socket_group(read_string(*v), &why);
    if (!access.group) fail(*v, why);
  }
  return access;
}

void Loader::read_control(const Value& v) {
  expect_map(v);
  MapView m(*this, v, {"socket", "mode", "group"});
  ControlConfig& control = config_.control;
  if (const Value* s = m.find("socket")) control.socket = read_socket_path(*s);
  control.access = read_socket_access(m, "mode", "group");
}

void Loader::read_vhost(const MapView& m, PortConfig* port) {
  const Value& socket = m.require("socket");
  port->socket = read_socket_path(socket);
  for (size_t i = 0; i < config_.ports.size(); ++i)
    if (config_.ports[i].type == PortType::kVhost && config_.ports[i].socket == port->socket)
      fail(socket, "duplicate socket " + in_quotes(port->socket) + " (also ports[" +
                       std::to_string(i) + "].socket)");

  VhostPortOptions& o = port->vhost;
  o.interrupt_recheck_us = kDefaultInterruptRecheckUs;  // the PMD's default is 0
  if (const Value* v = m.find("mode")) o.client = read_choice(*v, {"server", "client"}) == 1;
  if (const Value* v = m.find("reconnect")) o.reconnect = read_bool(*v);
  o.access = read_socket_access(m, "socket_mode", "socket_group");
  if (const Value* v = m.find("tso")) o.tso = read_bool(*v);
  auto read_within = [&](const Value& v, const OptionLimits& limits) {
    return read_int(v, static_cast<int64_t>(limits.min), static_cast<int64_t>(limits.max));
  };
  if (const Value* v = m.find("notify_coalesce")) {
    expect_map(*v);
    MapView nc(*this, *v, {"packets", "usecs"});
    if (const Value* p = nc.find("packets"))
      o.notify.coalesce_packets =
          static_cast<uint32_t>(read_within(*p, vhost_limits::kNotifyCoalescePackets));
    if (const Value* u = nc.find("usecs"))
      o.notify.coalesce_usecs =
          static_cast<uint32_t>(read_within(*u, vhost_limits::kNotifyCoalesceUsecs));
  }
  if (const Value* v = m.find("refill_threshold"))
    o.notify.refill_threshold =
        static_cast<uint32_t>(read_within(*v, vhost_limits::kRefillThreshold));
  if (const Value* v = m.find("zerocopy")) o.zero_copy = read_bool(*v);
  if (const Value* v = m.find("zerocopy_min_len"))
    o.zero_copy_min_len = static_cast<uint32_t>(read_within(*v, vhost_limits::kZeroCopyMinLen));
  if (const Value* v = m.find("zerocopy_fallback")) o.zero_copy_fallback = read_bool(*v);
  constexpr LineRelease kModes[] = {LineRelease::kAuto, LineRelease::kOn, LineRelease::kOff};
  if (const Value* v = m.find("desc_release"))
    o.desc_release = kModes[read_choice(*v, {"auto", "on", "off"})];
  if (const Value* v = m.find("buffer_release"))
    o.buffer_release = kModes[read_choice(*v, {"auto", "on", "off"})];
  if (const Value* v = m.find("interrupt_recheck_us"))
    o.interrupt_recheck_us =
        static_cast<uint32_t>(read_within(*v, vhost_limits::kInterruptRecheckUs));

  const auto conflict = find_option_conflict(o, [&](const char* key) { return m.find(key); });
  if (!conflict) return;
  switch (conflict->needs) {
    case OptionConflict::Needs::kClientMode:
      m.forbid(conflict->key, "only with mode: client");
      break;
    case OptionConflict::Needs::kServerMode:
      m.forbid(conflict->key, "only with mode: server (QEMU owns a client's socket)");
      break;
    case OptionConflict::Needs::kZeroCopy:
      m.forbid(conflict->key, "only with zerocopy: true");
      break;
  }
}

void Loader::read_ethdev(const MapView& m, PortConfig* port) {
  const Value& device = m.require("device");
  port->device = read_string(device);
  if (!valid_device(port->device))
    fail(device,
         "must be a PCI address (\"0000:01:00.0\") or a vdev (\"net_tap0,iface=t0\"), got " +
             in_quotes(port->device));
  std::string name = port->device.substr(0, port->device.find(','));
  for (size_t i = 0; i < config_.ports.size(); ++i) {
    const PortConfig& other = config_.ports[i];
    if (other.type == PortType::kEthdev && other.device.substr(0, other.device.find(',')) == name)
      fail(device, "device " + in_quotes(name) + " is already ports[" + std::to_string(i) + "]");
  }

  auto descriptors = [&](const char* key, uint16_t* out) {
    if (const Value* v = m.find(key)) {
      int64_t n = read_integer(*v);
      if (n < 64 || n > 32768 || !is_power_of_two(n))
        fail(*v, "must be a power of two in 64..32768, got " + v->node.Scalar());
      *out = static_cast<uint16_t>(n);
    }
  };
  descriptors("rx_descriptors", &port->rx_descriptors);
  descriptors("tx_descriptors", &port->tx_descriptors);
  if (const Value* v = m.find("rx_free_thresh")) {
    int64_t n = read_integer(*v);
    if (n < 1 || n >= port->rx_descriptors)
      fail(*v, "must be " + range(1, port->rx_descriptors - 1) + " (below rx_descriptors), got " +
                   v->node.Scalar());
    port->rx_free_thresh = static_cast<uint16_t>(n);
  }
  if (const Value* v = m.find("mtu")) port->mtu = read_int(*v, 68, 9600);
}

Weight Loader::read_weight(const Value& v, Weight base) {
  expect_map(v);
  MapView m(*this, v, {"packets", "bytes"});
  if (const Value* p = m.find("packets")) base.packets = read_int(*p, 1, kMaxWeightPackets);
  if (const Value* b = m.find("bytes")) base.bytes = read_int(*b, 1, kMaxWeightBytes);
  return base;
}

VlanConfig Loader::read_vlan(const Value& v) {
  expect_map(v);
  MapView m(*this, v, {"mode", "vlan", "vlans", "native"});
  VlanConfig vlan;
  if (read_choice(m.require("mode"), {"access", "trunk"}) == 0) {
    vlan.mode = VlanMode::kAccess;
    m.forbid("vlans", "only with mode: trunk");
    m.forbid("native", "only with mode: trunk");
    vlan.access_vlan = read_int(m.require("vlan"), 1, 4094);
    return vlan;
  }
  vlan.mode = VlanMode::kTrunk;
  m.forbid("vlan", "only with mode: access (a trunk has vlans)");
  const Value& list = m.require("vlans");
  std::vector<Value> ids = elements(list);
  if (ids.empty()) fail(list, "a trunk needs at least one VLAN");
  for (size_t i = 0; i < ids.size(); ++i) {
    uint16_t id = read_int(ids[i], 1, 4094);
    auto seen = std::find(vlan.trunk_vlans.begin(), vlan.trunk_vlans.end(), id);
    if (seen != vlan.trunk_vlans.end())
      fail(ids[i], "duplicate VLAN " + std::to_string(id) + " (also vlans[" +
                       std::to_string(seen - vlan.trunk_vlans.begin()) + "])");
    vlan.trunk_vlans.push_back(id);
  }
  std::sort(vlan.trunk_vlans.begin(), vlan.trunk_vlans.end());
  if (const Value* n = m.find("native")) vlan.native_vlan = read_int(*n, 1, 4094);
  return vlan;
}

void Loader::read_lcore(const Value& v) {
  expect_map(v);
  MapView m(*this, v, {"lcore", "rx", "busy_poll_us"});
  LcoreConfig lcore;
  lcore.lcore = read_int(m.require("lcore"), 0, kMaxLcores - 1);
  const Value* rx = m.find("rx");
  if (!rx || (rx->node.IsScalar() && rx->node.Scalar() == "auto")) {
    lcore.auto_rx = true;  // absent: auto, as documented
  } else if (!rx->node.IsSequence()) {
    fail(*rx, "must be auto or a list of rx queues, got " + describe(rx->node));
  } else {
    std::vector<Value> refs = elements(*rx);
    if (refs.empty()) fail(*rx, "must be auto or a non-empty list of rx queues");
    for (const Value& ref : refs) lcore.rx.push_back(read_rx_queue(ref));
  }
  if (const Value* b = m.find("busy_poll_us")) lcore.busy_poll_us = read_int(*b, 0, kMaxBusyPollUs);
  config_.lcores.push_back(std::move(lcore));
}

RxQueueRef Loader::read_rx_queue(const Value& v) {
  auto check_queue = [&](const Value& at, const PortConfig& port, int64_t queue) {
    if (queue >= port.queues)
      fail(at, "queue " + std::to_string(queue) + " out of range: " + port.name +
                   " has queues 0.." + std::to_string(port.queues - 1));
  };
  RxQueueRef ref;
  if (v.node.IsScalar()) {
    std::string s = v.node.Scalar();
    size_t colon = s.rfind(':');
    bool ok = colon != std::string::npos && colon > 0 && colon + 1 < s.size() &&
              s.size() - colon <= 6 && std::all_of(s.begin() + colon + 1, s.end(), [](char c) {
                return std::isdigit(static_cast<unsigned char>(c));
              });
    if (!ok)
      fail(v,
           "expected \"port:queue\" like \"vm0:0\" or {port: vm0, queue: 0}, got " + in_quotes(s));
    ref.port = s.substr(0, colon);
    const PortConfig& port = port_named(v, ref.port);
    int64_t queue = std::stol(s.substr(colon + 1));
    check_queue(v, port, queue);
    ref.queue = static_cast<uint16_t>(queue);
    ref.weight = port.weight;
    return ref;
  }
  if (!v.node.IsMap())
    fail(v, "expected \"port:queue\" or {port: NAME, queue: N}, got " + describe(v.node));
  MapView m(*this, v, {"port", "queue", "weight"});
  const Value& name = m.require("port");
  ref.port = read_string(name);
  const PortConfig& port = port_named(name, ref.port);
  const Value& queue = m.require("queue");
  ref.queue = read_int(queue, 0, kMaxQueues - 1);
  check_queue(queue, port, ref.queue);
  ref.weight = port.weight;
  if (const Value* w = m.find("weight")) ref.weight = read_weight(*w, port.weight);
  return ref;
}

void Loader::read_pairs(const Value& v) {
  std::vector<Value> pairs = elements(v);
  // Per port: the pair it is in, -1 if none yet.
  std::vector<int> pair_of(config_.ports.size(), -1);
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (!pairs[i].node.IsSequence())
      fail(pairs[i], "expected a pair [port, port], got " + describe(pairs[i].node));
    std::vector<Value> ends = elements(pairs[i]);
    if (ends.size() != 2)
      fail(pairs[i], "must be a pair [port, port], got " + std::to_string(ends.size()) +
                         (ends.size() == 1 ? " entry" : " entries"));
    std::string names[2];
    for (int e = 0; e < 2; ++e) {
      names[e] = read_string(ends[e]);
      int port = config_.port_index(names[e]);
      if (port < 0) fail(ends[e], "unknown port " + in_quotes(names[e]));
      if (e == 1 && names[1] == names[0]) fail(ends[e], "port " + names[e] + " paired with itself");
      if (pair_of[port] >= 0)
        fail(ends[e], "port " + names[e] + " is already in forwarding.pairs[" +
                          std::to_string(pair_of[port]) + "]");
      pair_of[port] = static_cast<int>(i);
    }
    config_.forwarding.pairs.emplace_back(names[0], names[1]);
  }
  for (size_t p = 0; p < config_.ports.size(); ++p)
    if (pair_of[p] < 0)
      fail(config_.positions.at("ports[" + std::to_string(p) + "]"),
           "ports[" + std::to_string(p) + "]",
           "not forwarded: " + config_.ports[p].name + " is in no forwarding.pairs entry");
}

// Counts the documents in a stream, without building them.
struct DocumentCounter final : YAML::EventHandler {
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents == 2) second_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  int documents = 0;
  YAML::Mark second_start;
};

}  // namespace

std::optional<Config> parse_config(const std::string& text, const std::string& file,
                                   std::string* error) {
  Config config;
  config.file = file;
  try {
    // Not YAML::LoadAll: in yaml-cpp 0.7 it loops allocating forever on a stray ","
    // (jbeder/yaml-cpp#1040, fixed by #1319 after 0.8). Load parses one document; DocumentCounter
    // looks for a second one, parsing at most two.
    YAML::Node root = YAML::Load(text);
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    for (int i = 0; i < 2 && parser.HandleNextDocument(counter); ++i) {
    }
    Loader loader(&config);
    loader.load(root, counter.documents == 0);
    if (counter.documents > 1)
      throw YamlError{pos_of(counter.second_start), "",
                      "a second YAML document; the configuration is one"};
  } catch (const YamlError& e) {
    *error = format_error(file, e.pos, e.key, e.message);
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    *error = format_error(file, pos_of(e.mark), "", "invalid YAML: " + e.msg);
    return std::nullopt;
  }
  // Placement errors (lcores, queues) come from the planner, positioned through config.positions.
  if (!make_plan(config, error)) return std::nullopt;
  return config;
}

std::optional<PortConfig> parse_port(const Config& running, const std::string& text,
                                     const std::string& source, std::string* error) {
  Config config = running;
  config.file = source;
  config.positions.clear();
  try {
    const YAML::Node root = YAML::Load(text);
    Loader loader(&config);
    loader.load_port(root, "port");
  } catch (const YamlError& e) {
    *error = format_error(source, e.pos, e.key, e.message);
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    *error = format_error(source, pos_of(e.mark), "", "invalid YAML: " + e.msg);
    return std::nullopt;
  }
  PortConfig port = std::move(config.ports.back());
  port.line = 0;  // not in the file
  return port;
}

std::optional<Config> load_config(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = path + ": cannot read: " + std::strerror(errno);
    return std::nullopt;
  }
  // Read to one byte past the limit, whatever the file claims to be (a FIFO, /dev/zero).
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    *error = path + ": cannot read: " + std::strerror(errno);
    return std::nullopt;
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    *error = path + ": larger than " + std::to_string(kMaxConfigBytes) +
             " bytes; a configuration is far smaller";
    return std::nullopt;
  }
  return parse_config(text, path, error);
}

}  // namespace vqs::app
