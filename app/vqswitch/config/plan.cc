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

std::optional<Plan> make_plan(const Config& config, std::string* error) {
  auto fail = [&](const std::string& key, const std::string& message) {
    *error = config.error_at(key, message);
    return std::nullopt;
  };
  Plan plan;
  std::optional<std::vector<unsigned>> cores = parse_core_list(config.eal.cores);
  if (!cores) return fail("eal.cores", "malformed core list \"" + config.eal.cores + "\"");
  plan.eal_lcores = *cores;
  auto in_cores = [&](unsigned lcore) {
    return std::find(cores->begin(), cores->end(), lcore) != cores->end();
  };
  plan.main_lcore = config.eal.main_lcore.value_or(cores->front());
  if (!in_cores(plan.main_lcore))
    return fail("eal.main_lcore", "lcore " + std::to_string(plan.main_lcore) +
                                      " is not in eal.cores \"" + config.eal.cores + "\"");
  if (config.ports.empty() || config.ports.size() > kMaxPorts)
    return fail("ports", "must have 1.." + std::to_string(kMaxPorts) + " entries, got " +
                             std::to_string(config.ports.size()));

  // Forwarding lcores: as listed, or every EAL lcore but the main one (which then only runs the
  // control plane), or the main lcore alone if it is the only one.
  std::vector<bool> auto_rx;
  if (config.lcores.empty()) {
    for (unsigned lcore : *cores)
      if (lcore != plan.main_lcore || cores->size() == 1) {
        PlannedLcore planned;
        planned.lcore = lcore;
        plan.lcores.push_back(planned);
        auto_rx.push_back(true);
      }
  } else {
    for (size_t i = 0; i < config.lcores.size(); ++i) {
      const LcoreConfig& lc = config.lcores[i];
      if (!in_cores(lc.lcore))
        return fail(lcore_key(i) + ".lcore", "lcore " + std::to_string(lc.lcore) +
                                                 " is not in eal.cores \"" + config.eal.cores +
                                                 "\"");
      for (size_t j = 0; j < i; ++j)
        if (config.lcores[j].lcore == lc.lcore)
          return fail(lcore_key(i) + ".lcore", "lcore " + std::to_string(lc.lcore) +
                                                   " is listed twice (also " + lcore_key(j) + ")");
      PlannedLcore planned;
      planned.lcore = lc.lcore;
      planned.busy_poll_us = lc.busy_poll_us;
      plan.lcores.push_back(planned);
      auto_rx.push_back(lc.auto_rx);
    }
  }
  for (size_t s = 0; s < plan.lcores.size(); ++s) {
    plan.lcores[s].slot = static_cast<uint16_t>(s);
    plan.lcores[s].is_main = plan.lcores[s].lcore == plan.main_lcore;
  }

  // Each rx queue: the slot polling it, -1 while none does. Explicit placement first.
  std::vector<std::vector<int>> owner(config.ports.size());
  for (size_t p = 0; p < config.ports.size(); ++p) owner[p].assign(config.ports[p].queues, -1);
  for (size_t i = 0; i < config.lcores.size(); ++i) {
    const std::vector<RxQueueRef>& refs = config.lcores[i].rx;
    for (size_t j = 0; j < refs.size(); ++j) {
      const RxQueueRef& ref = refs[j];
      std::string key = lcore_key(i) + ".rx[" + std::to_string(j) + "]";
      int p = config.port_index(ref.port);
      if (p < 0) return fail(key, "unknown port \"" + ref.port + "\"");
      if (ref.queue >= config.ports[p].queues)
        return fail(key, "queue " + std::to_string(ref.queue) + " out of range: " + ref.port +
                             " has queues 0.." + std::to_string(config.ports[p].queues - 1));
      int& polled_by = owner[p][ref.queue];
      if (polled_by >= 0)
        return fail(key, ref.port + ":" + std::to_string(ref.queue) + " is already polled by " +
                             lcore_key(polled_by) + " (lcore " +
                             std::to_string(plan.lcores[polled_by].lcore) + ")");
      polled_by = static_cast<int>(i);
      plan.lcores[i].rx.push_back({static_cast<uint16_t>(p), ref.queue, ref.weight});
    }
  }
  // The rest round-robin over the `rx: auto` lcores, in port then queue order.
  std::vector<size_t> auto_slots;
  for (size_t s = 0; s < auto_rx.size(); ++s)
    if (auto_rx[s]) auto_slots.push_back(s);
  size_t next = 0;
  for (size_t p = 0; p < config.ports.size(); ++p) {
    for (uint16_t q = 0; q < config.ports[p].queues; ++q) {
      if (owner[p][q] >= 0) continue;
      if (auto_slots.empty())
        return fail("lcores", config.ports[p].name + ":" + std::to_string(q) +
                                  " is polled by no lcore (list it in an lcore's rx, or give an "
                                  "lcore rx: auto)");
      size_t slot = auto_slots[next++ % auto_slots.size()];
      owner[p][q] = static_cast<int>(slot);
      plan.lcores[slot].rx.push_back({static_cast<uint16_t>(p), q, config.ports[p].weight});
    }
  }

  // Tx: an ethdev queue per forwarding lcore, so never shared. A guest has only its queue pairs,
  // and may enable fewer of them at any time: lcores then send on the enabled ones (as OVS-DPDK
  // remaps), so with more than one lcore its queues are always flushed under their lock.
  const size_t n_lcores = plan.lcores.size();
  for (const PortConfig& port : config.ports) {
    bool ethdev = port.type == PortType::kEthdev;
    plan.tx_queues.push_back(ethdev ? static_cast<uint16_t>(n_lcores) : port.queues);
    plan.tx_shared.push_back(!ethdev && n_lcores > 1);
  }

  plan.xconnect_peer.assign(config.ports.size(), -1);
  if (config.forwarding.mode == ForwardingMode::kXconnect) {
    for (size_t i = 0; i < config.forwarding.pairs.size(); ++i) {
      const auto& [a_name, b_name] = config.forwarding.pairs[i];
      std::string key = "forwarding.pairs[" + std::to_string(i) + "]";
      int a = config.port_index(a_name);
      int b = config.port_index(b_name);
      if (a < 0) return fail(key + "[0]", "unknown port \"" + a_name + "\"");
      if (b < 0) return fail(key + "[1]", "unknown port \"" + b_name + "\"");
      if (a == b || plan.xconnect_peer[a] >= 0 || plan.xconnect_peer[b] >= 0)
        return fail(key, "a port may be in one pair only, and not with itself");
      plan.xconnect_peer[a] = b;
      plan.xconnect_peer[b] = a;
    }
  }
  return plan;
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
      out << ", tx retries " << port.tx_retries_max << "\n";
    } else {
      out << port.device << "\n";
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
        << "), busy poll ";
    if (lcore.busy_poll_us)
      out << *lcore.busy_poll_us << " us then sleep\n";
    else
      out << "forever\n";
    if (lcore.rx.empty()) out << "    rx none (idle: every queue is placed elsewhere)\n";
    for (const PlannedRxQueue& rx : lcore.rx)
      out << "    rx " << config.ports[rx.port].name << ":" << rx.queue << ", weight "
          << format_weight(rx.weight) << "\n";
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
