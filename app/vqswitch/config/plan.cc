// SPDX-License-Identifier: BSD-3-Clause
// Config -> Plan: lcores, rx queue placement, tx queues, xconnect peers.
#include "config/plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace vqs::app {

namespace {

std::string trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

// A decimal lcore id below kMaxLcores, or nullopt.
std::optional<unsigned> parse_lcore_id(const std::string& text) {
  std::string s = trim(text);
  if (s.empty() || s.size() > 3) return std::nullopt;
  if (!std::all_of(s.begin(), s.end(),
                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    return std::nullopt;
  unsigned id = static_cast<unsigned>(std::stoul(s));
  if (id >= kMaxLcores) return std::nullopt;
  return id;
}

std::string lcore_key(size_t index) { return "lcores[" + std::to_string(index) + "]"; }

}  // namespace

std::optional<std::vector<unsigned>> parse_core_list(const std::string& cores) {
  std::vector<unsigned> out;
  std::vector<bool> seen(kMaxLcores, false);
  std::istringstream in(cores);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t dash = item.find('-');
    std::optional<unsigned> lo = parse_lcore_id(item.substr(0, dash));
    std::optional<unsigned> hi =
        dash == std::string::npos ? lo : parse_lcore_id(item.substr(dash + 1));
    if (!lo || !hi || *hi < *lo) return std::nullopt;
    for (unsigned id = *lo; id <= *hi; ++id) {
      if (seen[id]) return std::nullopt;
      seen[id] = true;
      out.push_back(id);
    }
  }
  // getline drops a trailing empty item: "0," would otherwise pass.
  if (out.empty() || cores.empty() || trim(cores).back() == ',') return std::nullopt;
  std::sort(out.begin(), out.end());
  return out;
}

std::string format_core_list(const std::vector<unsigned>& lcores) {
  std::string out;
  for (size_t i = 0; i < lcores.size();) {
    size_t j = i;
    while (j + 1 < lcores.size() && lcores[j + 1] == lcores[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(lcores[i]);
    if (j > i) {
      out += '-';  // appended, not "-" + to_string(): GCC 12 -O3 reports a false -Wrestrict
      out += std::to_string(lcores[j]);
    }
    i = j + 1;
  }
  return out;
}

namespace {

// make_plan's steps, in order; each returns false with the error set.
class Planner {
 public:
  Planner(const Config& config, const NumaTopology& topology, std::string* error)
      : config_(config), topology_(topology), error_(error) {}

  std::optional<Plan> run() {
    if (!plan_eal() || !plan_lcores()) return std::nullopt;
    plan_port_nodes();
    if (!place_listed_rx() || !place_auto_rx() || !pair_xconnect()) return std::nullopt;
    plan_tx();
    plan_pools();
    return std::move(plan_);
  }

 private:
  bool fail(const std::string& key, const std::string& message) {
    *error_ = config_.error_at(key, message);
    return false;
  }

  bool in_cores(unsigned lcore) const {
    return std::find(plan_.eal_lcores.begin(), plan_.eal_lcores.end(), lcore) !=
           plan_.eal_lcores.end();
  }

  std::string not_in_cores(unsigned lcore) const {
    return "lcore " + std::to_string(lcore) + " is not in eal.cores \"" + config_.eal.cores + "\"";
  }

  bool plan_eal() {
    std::optional<std::vector<unsigned>> cores = parse_core_list(config_.eal.cores);
    if (!cores) return fail("eal.cores", "malformed core list \"" + config_.eal.cores + "\"");
    plan_.eal_lcores = *cores;
    plan_.main_lcore = config_.eal.main_lcore.value_or(cores->front());
    if (!in_cores(plan_.main_lcore)) return fail("eal.main_lcore", not_in_cores(plan_.main_lcore));
    if (config_.ports.empty() || config_.ports.size() > kMaxPorts)
      return fail("ports", "must have 1.." + std::to_string(kMaxPorts) + " entries, got " +
                               std::to_string(config_.ports.size()));
    return true;
  }

  // Forwarding lcores: as listed, or every EAL lcore but the main one (which then only runs the
  // control plane), or the main lcore alone if it is the only one.
  bool plan_lcores() {
    if (config_.lcores.empty()) {
      for (unsigned lcore : plan_.eal_lcores)
        if (lcore != plan_.main_lcore || plan_.eal_lcores.size() == 1)
          add_lcore(lcore, std::nullopt, true);
    }
    for (size_t i = 0; i < config_.lcores.size(); ++i) {
      const LcoreConfig& lc = config_.lcores[i];
      if (!in_cores(lc.lcore)) return fail(lcore_key(i) + ".lcore", not_in_cores(lc.lcore));
      for (size_t j = 0; j < i; ++j)
        if (config_.lcores[j].lcore == lc.lcore)
          return fail(lcore_key(i) + ".lcore", "lcore " + std::to_string(lc.lcore) +
                                                   " is listed twice (also " + lcore_key(j) + ")");
      add_lcore(lc.lcore, lc.busy_poll_us, lc.auto_rx);
    }
    return true;
  }

  void add_lcore(unsigned lcore, std::optional<uint32_t> busy_poll_us, bool auto_rx) {
    PlannedLcore planned;
    planned.lcore = lcore;
    planned.busy_poll_us = busy_poll_us;
    planned.slot = static_cast<uint16_t>(plan_.lcores.size());
    planned.is_main = lcore == plan_.main_lcore;
    planned.node = topology_.node_of_cpu(lcore);
    plan_.lcores.push_back(planned);
    auto_rx_.push_back(auto_rx);
  }

  // Each rx queue gets the slot polling it (-1 while none does). Explicit placement first.
  bool place_listed_rx() {
    owner_.resize(config_.ports.size());
    for (size_t p = 0; p < config_.ports.size(); ++p) owner_[p].assign(config_.ports[p].queues, -1);
    for (size_t i = 0; i < config_.lcores.size(); ++i) {
      const std::vector<RxQueueRef>& refs = config_.lcores[i].rx;
      for (size_t j = 0; j < refs.size(); ++j) {
        const RxQueueRef& ref = refs[j];
        const std::string key = lcore_key(i) + ".rx[" + std::to_string(j) + "]";
        const int p = config_.port_index(ref.port);
        if (p < 0) return fail(key, "unknown port \"" + ref.port + "\"");
        if (ref.queue >= config_.ports[p].queues)
          return fail(key, "queue " + std::to_string(ref.queue) + " out of range: " + ref.port +
                               " has queues 0.." + std::to_string(config_.ports[p].queues - 1));
        int& polled_by = owner_[p][ref.queue];
        if (polled_by >= 0)
          return fail(key, ref.port + ":" + std::to_string(ref.queue) + " is already polled by " +
                               lcore_key(polled_by) + " (lcore " +
                               std::to_string(plan_.lcores[polled_by].lcore) + ")");
        polled_by = static_cast<int>(i);
        plan_.lcores[i].rx.push_back({static_cast<uint16_t>(p), ref.queue, ref.weight});
      }
    }
    return true;
  }

  // Guests: their memory's node, known when they connect. NICs: their device's.
  void plan_port_nodes() {
    for (const PortConfig& port : config_.ports)
      plan_.port_nodes.push_back(
          port.type == PortType::kEthdev ? topology_.node_of_device(port.device) : kAnyNode);
  }

  // The rest in turn over the `rx: auto` lcores on the port's node (all of them where none is
  // there, or the node is not known), in port then queue order: each to the one given the fewest
  // so far, the first of them on a tie. With one node, plain round-robin.
  bool place_auto_rx() {
    std::vector<size_t> auto_slots;
    for (size_t s = 0; s < auto_rx_.size(); ++s)
      if (auto_rx_[s]) auto_slots.push_back(s);
    std::vector<size_t> given(plan_.lcores.size(), 0);
    for (size_t p = 0; p < config_.ports.size(); ++p) {
      const int node = plan_.port_nodes[p];
      const bool local =
          node != kAnyNode && std::any_of(auto_slots.begin(), auto_slots.end(),
                                          [&](size_t s) { return plan_.lcores[s].node == node; });
      for (uint16_t q = 0; q < config_.ports[p].queues; ++q) {
        if (owner_[p][q] >= 0) continue;
        if (auto_slots.empty())
          return fail("lcores", config_.ports[p].name + ":" + std::to_string(q) +
                                    " is polled by no lcore (list it in an lcore's rx, or give an "
                                    "lcore rx: auto)");
        size_t slot = SIZE_MAX;
        for (size_t s : auto_slots)
          if ((!local || plan_.lcores[s].node == node) &&
              (slot == SIZE_MAX || given[s] < given[slot]))
            slot = s;
        ++given[slot];
        owner_[p][q] = static_cast<int>(slot);
        plan_.lcores[slot].rx.push_back({static_cast<uint16_t>(p), q, config_.ports[p].weight});
      }
    }
    return true;
  }

  bool pair_xconnect() {
    plan_.xconnect_peer.assign(config_.ports.size(), -1);
    if (config_.forwarding.mode != ForwardingMode::kXconnect) return true;
    for (size_t i = 0; i < config_.forwarding.pairs.size(); ++i) {
      const auto& [a_name, b_name] = config_.forwarding.pairs[i];
      const std::string key = "forwarding.pairs[" + std::to_string(i) + "]";
      const int a = config_.port_index(a_name);
      const int b = config_.port_index(b_name);
      if (a < 0) return fail(key + "[0]", "unknown port \"" + a_name + "\"");
      if (b < 0) return fail(key + "[1]", "unknown port \"" + b_name + "\"");
      if (a == b || plan_.xconnect_peer[a] >= 0 || plan_.xconnect_peer[b] >= 0)
        return fail(key, "a port may be in one pair only, and not with itself");
      plan_.xconnect_peer[a] = b;
      plan_.xconnect_peer[b] = a;
    }
    return true;
  }

  // Tx: an ethdev queue per forwarding lcore, so never shared. A guest has only its queue pairs,
  // and may enable fewer of them at any time: lcores then send on the enabled ones (as OVS-DPDK
  // remaps), so with more than one lcore its queues are always flushed under their lock.
  void plan_tx() {
    const size_t n_lcores = plan_.lcores.size();
    for (const PortConfig& port : config_.ports) {
      const bool ethdev = port.type == PortType::kEthdev;
      plan_.tx_queues.push_back(ethdev ? static_cast<uint16_t>(n_lcores) : port.queues);
      plan_.tx_shared.push_back(!ethdev && n_lcores > 1);
    }
  }

  // A pool per node with forwarding lcores or NICs; each port takes mbufs from its node's, else
  // from that of the lcore polling its queue 0. Sized for what its ports keep in flight (rings a
  // NIC keeps full, a burst per guest queue, a tx buffer per lcore) and the lcores' caches:
  // `mbufs:` (when given) each.
  void plan_pools() {
    std::vector<int> nodes;
    auto add_node = [&nodes](int node) {
      if (node != kAnyNode && std::find(nodes.begin(), nodes.end(), node) == nodes.end())
        nodes.push_back(node);
    };
    for (const PlannedLcore& lcore : plan_.lcores) add_node(lcore.node);
    for (int node : plan_.port_nodes) add_node(node);
    if (nodes.empty()) nodes.push_back(0);  // lcores the machine does not have: the EAL says so
    std::sort(nodes.begin(), nodes.end());
    for (size_t p = 0; p < config_.ports.size(); ++p) {
      int node = plan_.port_nodes[p];
      if (node == kAnyNode) {
        for (const PlannedLcore& lcore : plan_.lcores)
          for (const PlannedRxQueue& rx : lcore.rx)
            if (rx.port == p && rx.queue == 0) node = lcore.node;
      }
      if (node == kAnyNode) node = nodes.front();
      plan_.port_pool_nodes.push_back(node);
    }
    const uint64_t lcores = plan_.lcores.size();
    for (int node : nodes) {
      uint64_t n = (lcores + 1) * kMempoolCache * 3 / 2;
      for (size_t p = 0; p < config_.ports.size(); ++p) {
        if (plan_.port_pool_nodes[p] != node) continue;
        const PortConfig& port = config_.ports[p];
        n += port.type == PortType::kEthdev
                 ? uint64_t{port.queues} * port.rx_descriptors + lcores * port.tx_descriptors
                 : uint64_t{port.queues} * 2 * config_.burst;
        n += lcores * config_.burst;  // a tx buffer per lcore
      }
      const uint32_t mbufs =
          config_.mbufs != 0
              ? config_.mbufs
              : static_cast<uint32_t>(std::clamp<uint64_t>(n, kMinMbufs, UINT32_MAX / 2));
      plan_.pools.push_back({node, mbufs});
    }
  }

  const Config& config_;
  const NumaTopology& topology_;
  std::string* error_;
  Plan plan_;
  std::vector<bool> auto_rx_;            // per slot: takes the queues nobody listed
  std::vector<std::vector<int>> owner_;  // per port and queue: the polling slot, or -1
};

}  // namespace

std::optional<Plan> make_plan(const Config& config, const NumaTopology& topology,
                              std::string* error) {
  return Planner(config, topology, error).run();
}

namespace {

std::string format_bytes(uint32_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

std::string format_weight(const Weight& w) {
  return std::to_string(w.packets) + " pkts / " + format_bytes(w.bytes);
}

std::string format_vlan(const VlanConfig& vlan) {
  switch (vlan.mode) {
    case VlanMode::kNone:
      return "untagged";
    case VlanMode::kAccess:
      return "access " + std::to_string(vlan.access_vlan);
    case VlanMode::kTrunk: {
      std::string out = "trunk ";
      for (size_t i = 0; i < vlan.trunk_vlans.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(vlan.trunk_vlans[i]);
      }
      if (vlan.native_vlan) {
        out += ", native ";
        out += std::to_string(vlan.native_vlan);
      } else {
        out += ", untagged dropped";
      }
      return out;
    }
  }
  return "?";
}

std::string auto_or(uint32_t value) { return value ? std::to_string(value) : "auto"; }

}  // namespace

std::string format_plan(const Config& config, const Plan& plan) {
  std::ostringstream out;
  const EalConfig& eal = config.eal;
  out << "config " << config.file << "\n";
  out << "eal: lcores " << format_core_list(plan.eal_lcores) << ", main lcore " << plan.main_lcore
      << ", " << eal.memory_mb << " MB " << (eal.huge ? "hugepages" : "without hugepages")
      << ", file prefix " << eal.file_prefix;
  if (!eal.args.empty()) out << ", args";
  for (const std::string& arg : eal.args) out << " " << arg;
  out << "\n";
  out << "burst " << config.burst << ", mbufs " << auto_or(config.mbufs) << ", stats ";
  if (config.stats_interval_s)
    out << "every " << config.stats_interval_s << " s\n";
  else
    out << "off\n";
  out << "mbuf pools:";
  for (size_t i = 0; i < plan.pools.size(); ++i) {
    out << (i ? "; node " : " node ") << plan.pools[i].node << ", " << plan.pools[i].mbufs
        << " mbufs" << (config.mbufs ? "" : " (auto)") << ", for";
    bool any = false;
    for (size_t p = 0; p < config.ports.size(); ++p) {
      if (plan.port_pool_nodes[p] != plan.pools[i].node) continue;
      out << (any ? ", " : " ") << config.ports[p].name;
      any = true;
    }
    if (!any) out << " no port";
  }
  out << "\n";
  out << "control socket " << config.control_socket();
  if (config.control.access.mode)
    out << " mode " << std::oct << *config.control.access.mode << std::dec;
  out << "\n";
  const ForwardingConfig& fw = config.forwarding;
  out << "forwarding: " << forwarding_mode_name(fw.mode);
  if (fw.mode == ForwardingMode::kBridge) {
    out << ", MAC table " << fw.mac_table_size << " entries, aging ";
    if (fw.mac_aging_s)
      out << fw.mac_aging_s << " s\n";
    else
      out << "off\n";
  } else {
    for (size_t i = 0; i < fw.pairs.size(); ++i)
      out << (i ? ", " : " ") << fw.pairs[i].first << " <-> " << fw.pairs[i].second;
    out << "\n";
  }

  out << "\nports (" << config.ports.size() << "):\n";
  for (size_t p = 0; p < config.ports.size(); ++p) {
    const PortConfig& port = config.ports[p];
    out << "  " << port.name << ": " << port_type_name(port.type) << " ";
    if (port.type == PortType::kVhost) {
      out << port.socket << " (" << (port.vhost.client ? "client" : "server");
      if (port.vhost.client) out << (port.vhost.reconnect ? ", reconnect" : ", no reconnect");
      if (port.vhost.access.mode) {
        char mode[8];
        std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(*port.vhost.access.mode));
        out << ", mode " << mode;
      }
      if (port.vhost.access.group) out << ", group " << *port.vhost.access.group;
      out << ")\n";
      out << "    queue pairs " << port.queues << ", tx queues " << plan.tx_queues[p]
          << (plan.tx_shared[p] ? " locked" : "") << ", tso " << (port.vhost.tso ? "on" : "off")
          << ", zerocopy ";
      if (port.vhost.zero_copy)
        out << "from " << port.vhost.zero_copy_min_len << " bytes"
            << (port.vhost.zero_copy_fallback ? "" : ", no copy fallback");
      else
        out << "off";
      out << "\n";
      out << "    weight " << format_weight(port.weight) << ", refill threshold "
          << auto_or(port.vhost.notify.refill_threshold) << ", notify coalesce ";
      if (port.vhost.notify.coalesce_packets || port.vhost.notify.coalesce_usecs)
        out << port.vhost.notify.coalesce_packets << " pkts / " << port.vhost.notify.coalesce_usecs
            << " us";
      else
        out << "off";
      out << ", tx retries " << port.tx_retries_max << ", desc release "
          << line_release_name(port.vhost.desc_release) << ", buffer release "
          << line_release_name(port.vhost.buffer_release) << ", interrupt recheck "
          << port.vhost.interrupt_recheck_us << " us\n";
    } else {
      out << port.device;
      if (plan.port_nodes[p] != kAnyNode) out << " (node " << plan.port_nodes[p] << ")";
      out << "\n";
      out << "    rx queues " << port.queues << ", tx queues " << plan.tx_queues[p]
          << ", descriptors " << port.rx_descriptors << " rx / " << port.tx_descriptors
          << " tx, rx_free_thresh " << auto_or(port.rx_free_thresh) << ", mtu "
          << (port.mtu ? std::to_string(port.mtu) : std::string("device default")) << "\n";
      out << "    weight " << format_weight(port.weight) << ", tx retries " << port.tx_retries_max
          << "\n";
    }
    if (fw.mode == ForwardingMode::kBridge)
      out << "    vlan " << format_vlan(port.vlan) << "\n";
    else if (plan.xconnect_peer[p] >= 0)
      out << "    xconnect -> " << config.ports[plan.xconnect_peer[p]].name << "\n";
  }

  out << "\nlcores: main " << plan.main_lcore;
  bool main_forwards = std::any_of(plan.lcores.begin(), plan.lcores.end(),
                                   [](const PlannedLcore& l) { return l.is_main; });
  out << (main_forwards ? " (also forwards)" : " (control plane and stats)") << ", forwarding "
      << plan.lcores.size() << "\n";
  for (const PlannedLcore& lcore : plan.lcores) {
    out << "  lcore " << lcore.lcore << " (slot " << lcore.slot << (lcore.is_main ? ", main" : "")
        << "), ";
    if (lcore.node != kAnyNode) out << "node " << lcore.node << ", ";
    out << "busy poll ";
    if (lcore.busy_poll_us)
      out << *lcore.busy_poll_us << " us then sleep\n";
    else
      out << "forever\n";
    if (lcore.rx.empty()) out << "    rx none (idle: every queue is placed elsewhere)\n";
    for (const PlannedRxQueue& rx : lcore.rx) {
      out << "    rx " << config.ports[rx.port].name << ":" << rx.queue << ", weight "
          << format_weight(rx.weight);
      if (plan.cross_node(rx.port, lcore))
        out << ", cross-NUMA: the port is on node " << plan.port_nodes[rx.port];
      out << "\n";
    }
    out << "    tx";
    for (size_t p = 0; p < config.ports.size(); ++p)
      out << (p ? ", " : " ") << config.ports[p].name << ":"
          << plan.tx_queue(static_cast<uint16_t>(p), lcore.slot)
          << (!plan.tx_shared[p]                       ? ""
              : plan.lcores.size() > plan.tx_queues[p] ? " (shared)"
                                                       : " (locked)");
    out << "\n";
  }
  return out.str();
}

}  // namespace vqs::app
