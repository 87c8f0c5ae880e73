// SPDX-License-Identifier: BSD-3-Clause
#include "control/commands.h"

#include <rte_ethdev.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <string_view>

#include "config/reload_plan.h"
#include "ports/ethdev_port.h"
#include "ports/guest_port.h"

namespace vqs::app {
namespace {

using Json = nlohmann::ordered_json;

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  return buf;
}

// Concatenation by appending: GCC 12 at -O3 reports a false -Wrestrict on "literal" + string&&.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out += part;
  return out;
}

double percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// `now` minus `base` in every unsigned number both hold under the same key path.
void subtract_numbers(Json& now, const Json& base) {
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (!base.contains(it.key())) continue;
    const Json& b = base[it.key()];
    if (it->is_object() && b.is_object()) {
      subtract_numbers(*it, b);
    } else if (it->is_number_unsigned() && b.is_number_unsigned()) {
      const uint64_t n = it->get<uint64_t>();
      const uint64_t m = b.get<uint64_t>();
      *it = n >= m ? n - m : 0;
    }
  }
}

// A decimal in lo..hi, nothing else.
bool parse_number(const std::string& text, uint64_t lo, uint64_t hi, uint64_t* value) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != text.npos)
    return false;
  *value = std::stoull(text);
  return *value >= lo && *value <= hi;
}

constexpr int kApplyTimeoutMs = 2000;

std::string mac_text(uint64_t key) {
  return format("%02x:%02x:%02x:%02x:%02x:%02x", static_cast<unsigned>(key & 0xff),
                static_cast<unsigned>(key >> 8 & 0xff), static_cast<unsigned>(key >> 16 & 0xff),
                static_cast<unsigned>(key >> 24 & 0xff), static_cast<unsigned>(key >> 32 & 0xff),
                static_cast<unsigned>(key >> 40 & 0xff));
}

}  // namespace

std::string ControlCommands::usage() {
  return "commands (add --json for JSON):\n"
         "  show                 ports (type, link, queues, socket or device, features) and "
         "lcores\n"
         "  lcore-show           each forwarding lcore: busy %, packets, cycles per packet, "
         "sleeps\n"
         "  rxq-show             each rx queue: its lcore and its share of that lcore's busy "
         "cycles\n"
         "  stats [PORT] [--clear]  counters of every port (or one); --clear: count from now\n"
         "  fdb-show             the bridge's MAC table: MAC, VLAN, port, age\n"
         "  fdb-flush            empty the bridge's MAC table\n"
         "  set-weight PORT[:QUEUE] [packets=N] [bytes=N]  an rx queue's weights (every queue of\n"
         "                       PORT without :QUEUE), from its next visit\n"
         "  set-busy-poll LCORE US|off  idle this long before sleeping; off: poll always\n"
         "  add-port MAPPING [--peer PORT]  a port, MAPPING as a ports[] entry of the "
         "configuration\n"
         "                       (YAML flow style); xconnect: --peer pairs it with PORT\n"
         "  del-port PORT        take PORT out of forwarding and remove it\n"
         "  add-pair PORT PORT   xconnect: pair two ports that have no peer\n"
         "  rxq-rebalance        place the rx queues of rx: auto lcores again (rxq_assign: "
         "by\n"
         "                       the last interval's busy cycles, or in turn)\n"
         "  reload               read the config file again and apply what changed (ports, "
         "weights,\n"
         "                       busy-poll, pairs); settings fixed at start are refused\n"
         "  help                 this list\n";
}

ControlReply ControlCommands::run(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  bool json = false;
  bool clear = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0 && args[i] == "--json") {
      json = true;
    } else if (i > 0 && args[i] == "--clear") {
      clear = true;
    } else {
      words.push_back(args[i]);
    }
  }
  const std::string& command = words.empty() ? std::string() : words[0];
  const size_t operands = words.size() - 1;
  auto fail = [](const std::string& message) { return ControlReply{false, message + "\n"}; };
  auto reply = [&](const Json& j, std::string (*text)(const Json&)) {
    return ControlReply{true, json ? j.dump(2) + "\n" : text(j)};
  };
  if (clear && command != "stats") return fail(command + ": unknown option --clear");
  if (command == "rxq-rebalance") {
    if (operands > 0) return fail("rxq-rebalance: unexpected argument '" + words.back() + "'");
    std::string error;
    const std::optional<Json> j = rxq_rebalance(&error);
    if (!j) return fail("rxq-rebalance: " + error);
    return reply(*j, rxq_rebalance_text);
  }
  if (command == "reload") {
    if (operands > 0) return fail("reload: unexpected argument '" + words.back() + "'");
    std::string error;
    const std::optional<Json> j = reload(&error);
    if (!j) return fail("reload: " + error);
    return reply(*j, reload_text);
  }
  if (command == "add-port" || command == "del-port" || command == "add-pair") {
    std::string error;
    const std::vector<std::string> rest(words.begin() + 1, words.end());
    const std::optional<Json> j = command == "add-port"   ? add_port(rest, &error)
                                  : command == "del-port" ? del_port(rest, &error)
                                                          : add_pair(rest, &error);
    if (!j) return fail(command + ": " + error);
    return reply(*j, topology_text);
  }
  const size_t max_operands = command == "stats"           ? 1
                              : command == "set-weight"    ? 3
                              : command == "set-busy-poll" ? 2
                                                           : 0;
  if (operands > max_operands)
    return fail(command + ": unexpected argument '" + words.back() + "'");
  if (command == "set-weight" || command == "set-busy-poll") {
    std::string error;
    const std::vector<std::string> rest(words.begin() + 1, words.end());
    const std::optional<Json> j =
        command == "set-weight" ? set_weight(rest, &error) : set_busy_poll(rest, &error);
    if (!j) return fail(command + ": " + error);
    return reply(*j, command == "set-weight" ? set_weight_text : set_busy_poll_text);
  }

  if (command == "help") return {true, usage()};
  if (command == "show") return reply(show(), show_text);
  if (command == "lcore-show") return reply(lcore_show(), lcore_show_text);
  if (command == "rxq-show") return reply(rxq_show(), rxq_show_text);
  if (command == "stats") {
    std::string error;
    const std::optional<Json> j = stats(operands == 1 ? words[1] : "", clear, &error);
    if (!j) return fail(error);
    return reply(*j, stats_text);
  }
  if (command == "fdb-show" || command == "fdb-flush") {
    if (switch_.bridge() == nullptr)
      return fail(command + ": no bridge (forwarding.mode is xconnect)");
    if (command == "fdb-show") return reply(fdb_show(), fdb_show_text);
    const Json j = fdb_flush();
    return {true, json ? j.dump(2) + "\n"
                       : format("flushed %" PRIu64 " entries\n", j["flushed"].get<uint64_t>())};
  }
  return fail("unknown command '" + command + "'\n" + usage());
}

Json ControlCommands::show() const {
  Json j;
  Json ports = Json::array();
  for (const auto& port : switch_.ports()) {
    if (port == nullptr) continue;
    const PortConfig& pc = switch_.port_config(port->index());
    Json p;
    p["name"] = port->name();
    p["type"] = port_type_name(pc.type);
    p["link"] = port->link_up() ? "up" : "down";
    p["rx_queues"] = port->rx_queue_count();
    p["tx_queues"] = port->tx_queue_count();
    // A NIC's device's; a guest's memory's once it connected; -1: not known, or any.
    p["numa_node"] = switch_.port_node(port->index());
    if (port->is_guest()) {
      const VhostDevice& device = static_cast<const GuestPort&>(*port).device();
      p["socket"] = pc.socket;
      p["mode"] = pc.vhost.client ? "client" : "server";
      p["features"] = format("0x%016" PRIx64, device.negotiated_features());
      // A live migration is copying the guest's memory (its frontend logs dirty pages). The
      // features stay as they were when the source stopped: only a running device migrates.
      p["migrating"] = device.link_up() && device.dirty_logging();
    } else {
      const auto& nic = static_cast<const EthdevPort&>(*port);
      p["device"] = pc.device;
      p["port_id"] = nic.port_id();
    }
    ports.push_back(std::move(p));
  }
  j["ports"] = std::move(ports);
  Json lcores = Json::array();
  for (size_t i = 0; i < switch_.lcores().size(); ++i) {
    const auto& loop = switch_.lcores()[i];
    Json l;
    l["lcore"] = loop->lcore();
    l["numa_node"] = switch_.lcore_node(i);
    if (loop->busy_poll_us()) {
      l["busy_poll_us"] = *loop->busy_poll_us();
    } else {
      l["busy_poll_us"] = nullptr;
    }
    Json rx = Json::array();
    for (const RxSlot& s : loop->poller().slots())
      rx.push_back(s.port->name() + ":" + std::to_string(s.queue));
    l["rx"] = std::move(rx);
    lcores.push_back(std::move(l));
  }
  j["lcores"] = std::move(lcores);
  Json pools = Json::array();
  for (const Switch::NodePool& p : switch_.pools()) {
    Json pool;
    pool["numa_node"] = p.node;
    pool["size"] = p.pool->size;
    pool["available"] = rte_mempool_avail_count(p.pool);  // the lcores' caches included
    pools.push_back(std::move(pool));
  }
  j["mbufs"] = std::move(pools);
  return j;
}

Json ControlCommands::lcore_show() const {
  Json j;
  j["interval_s"] = load_.interval_s();
  Json lcores = Json::array();
  for (size_t i = 0; i < switch_.lcores().size(); ++i) {
    const LcoreLoop& loop = *switch_.lcores()[i];
    const LcoreCounters& c = loop.counters();
    const LoadSampler::Load last = load_.lcore(i);
    Json l;
    l["lcore"] = loop.lcore();
    l["rx_queues"] = loop.poller().slots().size();
    l["busy_pct"] = percent(last.busy_cycles, last.busy_cycles + last.idle_cycles);
    l["packets"] = last.packets;
    l["cycles_per_packet"] =
        last.packets == 0 ? 0.0 : static_cast<double>(last.busy_cycles) / last.packets;
    l["sleeps"] = last.sleeps;
    Json total;
    total["busy_pct"] = percent(c.busy_cycles, c.busy_cycles + c.idle_cycles);
    total["packets"] = c.packets;
    total["cycles_per_packet"] =
        c.packets == 0 ? 0.0 : static_cast<double>(c.busy_cycles) / c.packets;
    total["sleeps"] = c.sleeps;
    total["wakeups"] = c.wakeups;
    l["total"] = std::move(total);
    lcores.push_back(std::move(l));
  }
  j["lcores"] = std::move(lcores);
  return j;
}

Json ControlCommands::rxq_show() const {
  Json j;
  j["interval_s"] = load_.interval_s();
  Json queues = Json::array();
  for (size_t i = 0; i < switch_.lcores().size(); ++i) {
    const LcoreLoop& loop = *switch_.lcores()[i];
    const LoadSampler::Load lcore = load_.lcore(i);
    const auto& slots = loop.poller().slots();
    for (size_t s = 0; s < slots.size(); ++s) {
      const RxSlot& slot = slots[s];
      const LoadSampler::Load q = load_.queue(i, slot);
      Json r;
      r["port"] = slot.port->name();
      r["queue"] = slot.queue;
      r["lcore"] = loop.lcore();
      r["lcore_numa_node"] = switch_.lcore_node(i);
      r["port_numa_node"] = switch_.port_node(slot.port->index());
      r["cross_numa"] = r["port_numa_node"] >= 0 && r["lcore_numa_node"] >= 0 &&
                        r["port_numa_node"] != r["lcore_numa_node"];
      r["usage_pct"] = percent(q.busy_cycles, lcore.busy_cycles);
      r["packets"] = q.packets;
      r["packets_total"] = slot.port->rx_counters(slot.queue).rx_packets;  // since it was added
      r["weight_packets"] = slot.weight.packets;
      r["weight_bytes"] = slot.weight.bytes;
      if (slot.port->is_guest()) {
        // Whether the guest's CPU shares a cache with this lcore's and whether it sends frames
        // of its own (the releases at auto).
        const VhostDevice& device = static_cast<const GuestPort*>(slot.port)->device();
        const PlacementProbe::Reading placement =
            device.guest_placement(guest_tx_vring(slot.queue));
        r["guest_cache"] = placement.name();
        r["guest_line_ns"] = placement.line_ns;
        r["guest_sends_own"] = device.guest_sends_own(guest_tx_vring(slot.queue));
      }
      queues.push_back(std::move(r));
    }
  }
  j["rx_queues"] = std::move(queues);
  return j;
}

Json ControlCommands::port_stats(uint16_t index) const {
  const Port& port = *switch_.ports()[index];
  const PortTotals t = switch_.totals(index);
  Json p;
  p["name"] = port.name();
  p["rx_packets"] = t.rx_packets;
  p["rx_bytes"] = t.rx_bytes;
  p["tx_packets"] = t.tx_packets;
  p["tx_bytes"] = t.tx_bytes;
  p["tx_retries"] = t.tx_retries;
  p["drops"] = t.total_drops();
  Json drops;
  for (int r = 0; r < kSwitchDropCount; ++r)
    drops[switch_drop_name(static_cast<SwitchDrop>(r))] = t.switch_drops[r];
  if (port.is_guest()) {
    for (int r = 0; r < kDropReasonCount; ++r)
      drops[drop_reason_name(static_cast<DropReason>(r))] = t.guest.drops[r];
  } else {
    drops["rx_missed"] = t.rx_missed;
    drops["rx_errors"] = t.rx_errors;
    drops["tx_errors"] = t.tx_errors;
  }
  p["drops_by_reason"] = std::move(drops);
  if (port.is_guest()) {
    Json guest;
    for (const QueueCounter& c : kQueueCounters) guest[c.name] = t.guest.*c.field;
    for (int b = 0; b < kSizeBucketCount; ++b)
      guest[size_bucket_name(static_cast<SizeBucket>(b))] = t.guest.sizes[b];
    p["guest"] = std::move(guest);
  } else {
    p["rx_nombuf"] = t.rx_nombuf;
  }
  return p;
}

std::optional<Json> ControlCommands::stats(const std::string& name, bool clear,
                                           std::string* error) {
  const auto& ports = switch_.ports();
  if (cleared_.size() != ports.size()) cleared_.assign(ports.size(), Json());
  Json j;
  Json list = Json::array();
  bool found = false;
  for (uint16_t i = 0; i < ports.size(); ++i) {
    if (ports[i] == nullptr || (!name.empty() && ports[i]->name() != name)) continue;
    found = true;
    Json now = port_stats(i);
    if (clear) {
      cleared_[i] = now;
    } else if (!cleared_[i].is_null()) {
      subtract_numbers(now, cleared_[i]);
    }
    if (!clear) list.push_back(std::move(now));
  }
  if (!found) {
    *error = "stats: no port named '" + name + "'";
    return std::nullopt;
  }
  if (clear) {
    j["cleared"] = name.empty() ? "all" : name;
  } else {
    j["ports"] = std::move(list);
  }
  return j;
}

Json ControlCommands::fdb_show() const {
  Json j;
  Json entries = Json::array();
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t now = rte_rdtsc();
  switch_.bridge()->for_each_entry([&](uint64_t key, uint16_t port, uint64_t seen_tsc) {
    Json e;
    e["mac"] = mac_text(key);
    e["vlan"] = static_cast<unsigned>(key >> 48);
    const auto& ports = switch_.ports();
    e["port"] = port < ports.size() && ports[port] != nullptr ? ports[port]->name() : "?";
    e["age_s"] = now > seen_tsc ? (now - seen_tsc) / hz : 0;
    entries.push_back(std::move(e));
  });
  j["entries"] = std::move(entries);
  return j;
}

Json ControlCommands::fdb_flush() {
  Json j;
  j["flushed"] = switch_.bridge()->flush();
  return j;
}

std::optional<Json> ControlCommands::set_weight(const std::vector<std::string>& operands,
                                                std::string* error) {
  if (operands.size() < 2) {
    *error = "usage: set-weight PORT[:QUEUE] [packets=N] [bytes=N]";
    return std::nullopt;
  }
  std::string name = operands[0];
  std::optional<uint16_t> queue;
  const size_t colon = name.rfind(':');
  uint64_t number = 0;
  if (colon != name.npos) {
    if (!parse_number(name.substr(colon + 1), 0, UINT16_MAX, &number)) {
      *error = "bad queue in '" + name + "'";
      return std::nullopt;
    }
    queue = static_cast<uint16_t>(number);
    name.resize(colon);
  }
  const int port = switch_.port_index(name);
  if (port < 0) {
    *error = "no port named '" + name + "'";
    return std::nullopt;
  }
  const uint16_t queues = switch_.port_config(static_cast<uint16_t>(port)).queues;
  if (queue && *queue >= queues) {
    *error = name + " has rx queues 0.." + std::to_string(queues - 1);
    return std::nullopt;
  }
  std::optional<uint32_t> packets, bytes;
  for (size_t i = 1; i < operands.size(); ++i) {
    const std::string& arg = operands[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == arg.npos ? "" : arg.substr(eq + 1);
    const bool is_packets = key == "packets";
    if (!is_packets && key != "bytes") {
      *error = "unknown setting '" + key + "' (packets=N, bytes=N)";
      return std::nullopt;
    }
    const uint64_t max = is_packets ? kMaxWeightPackets : kMaxWeightBytes;
    if (!parse_number(value, 1, max, &number)) {
      *error = key + ": must be 1.." + std::to_string(max) + ", got '" + value + "'";
      return std::nullopt;
    }
    (is_packets ? packets : bytes) = static_cast<uint32_t>(number);
  }
  Json changed = Json::array();
  for (const auto& loop : switch_.lcores()) {
    LcoreChange change;
    const auto& slots = loop->poller().slots();
    for (uint16_t s = 0; s < slots.size(); ++s) {
      if (slots[s].port->index() != port || (queue && slots[s].queue != *queue)) continue;
      Weight w = slots[s].weight;
      if (packets) w.packets = *packets;
      if (bytes) w.bytes = *bytes;
      change.weights.emplace_back(s, w);
      Json c;
      c["port"] = name;
      c["queue"] = slots[s].queue;
      c["lcore"] = loop->lcore();
      c["weight_packets"] = w.packets;
      c["weight_bytes"] = w.bytes;
      changed.push_back(std::move(c));
    }
    if (change.weights.empty()) continue;
    if (!loop->apply(std::move(change), kApplyTimeoutMs)) {
      *error = cat({"lcore ", std::to_string(loop->lcore()),
                    " has not taken the change yet (it will at its next pass)"});
      return std::nullopt;
    }
  }
  Json j;
  j["changed"] = std::move(changed);
  return j;
}

std::optional<Json> ControlCommands::set_busy_poll(const std::vector<std::string>& operands,
                                                   std::string* error) {
  uint64_t id = 0;
  uint64_t us = 0;
  if (operands.size() != 2 || !parse_number(operands[0], 0, UINT32_MAX, &id)) {
    *error = "usage: set-busy-poll LCORE US|off";
    return std::nullopt;
  }
  const bool off = operands[1] == "off";
  if (!off && !parse_number(operands[1], 0, kMaxBusyPollUs, &us)) {
    *error = cat(
        {"US: must be 0..", std::to_string(kMaxBusyPollUs), " or off, got '", operands[1], "'"});
    return std::nullopt;
  }
  for (const auto& loop : switch_.lcores()) {
    if (loop->lcore() != id) continue;
    LcoreChange change;
    change.busy_poll_us = off ? std::nullopt : std::optional<uint32_t>(static_cast<uint32_t>(us));
    if (!loop->apply(std::move(change), kApplyTimeoutMs)) {
      *error = cat({"lcore ", std::to_string(id),
                    " has not taken the change yet (it will at its next pass)"});
      return std::nullopt;
    }
    Json j;
    j["lcore"] = id;
    if (off) {
      j["busy_poll_us"] = nullptr;
    } else {
      j["busy_poll_us"] = us;
    }
    return j;
  }
  *error = cat({"lcore ", std::to_string(id), " is not a forwarding lcore"});
  return std::nullopt;
}

std::string set_weight_text(const Json& j) {
  std::string out;
  for (const Json& c : j["changed"])
    out += format("%s:%u (lcore %u): weight %u packets / %u bytes\n",
                  c["port"].get<std::string>().c_str(), c["queue"].get<unsigned>(),
                  c["lcore"].get<unsigned>(), c["weight_packets"].get<unsigned>(),
                  c["weight_bytes"].get<unsigned>());
  return out;
}

std::string set_busy_poll_text(const Json& j) {
  return format("lcore %u: ", j["lcore"].get<unsigned>()) +
         (j["busy_poll_us"].is_null()
              ? std::string("polls always\n")
              : format("sleeps after %u us idle\n", j["busy_poll_us"].get<unsigned>()));
}

// A NUMA node as the text output shows it: -1 is "any" (not known, or not tied to one).
std::string node_text(const Json& node) {
  return node.get<int>() >= 0 ? std::to_string(node.get<int>()) : std::string("any");
}

std::string show_text(const Json& j) {
  std::string out;
  for (const Json& p : j["ports"]) {
    out += format("port %-16s %-6s %-4s rxq %-3u txq %-3u", p["name"].get<std::string>().c_str(),
                  p["type"].get<std::string>().c_str(), p["link"].get<std::string>().c_str(),
                  p["rx_queues"].get<unsigned>(), p["tx_queues"].get<unsigned>());
    if (p.contains("socket")) {
      out += cat({"  ", p["socket"].get<std::string>(), " (", p["mode"].get<std::string>(),
                  ")  features ", p["features"].get<std::string>(),
                  p["migrating"].get<bool>() ? "  migrating" : ""});
    } else {
      out += format("  %s (port %u)", p["device"].get<std::string>().c_str(),
                    p["port_id"].get<unsigned>());
    }
    out += cat({"  numa node ", node_text(p["numa_node"]), "\n"});
  }
  for (const Json& l : j["lcores"]) {
    out += format("lcore %-3u node %s  ", l["lcore"].get<unsigned>(),
                  node_text(l["numa_node"]).c_str());
    out += l["busy_poll_us"].is_null()
               ? std::string("polls always")
               : format("sleeps after %u us idle", l["busy_poll_us"].get<unsigned>());
    out += "  rx:";
    for (const Json& q : l["rx"]) out += cat({" ", q.get<std::string>()});
    out += "\n";
  }
  for (const Json& pool : j["mbufs"])
    out += format("mbufs on node %d: %u, %u available\n", pool["numa_node"].get<int>(),
                  pool["size"].get<unsigned>(), pool["available"].get<unsigned>());
  return out;
}

std::string lcore_show_text(const Json& j) {
  std::string out = format("last %.1f s:\n", j["interval_s"].get<double>());
  for (const Json& l : j["lcores"]) {
    const Json& t = l["total"];
    out += format("lcore %-3u rxq %-4u busy %5.1f %%  packets %-12" PRIu64
                  " cycles/packet %7.1f  "
                  "sleeps %-8" PRIu64 " | since start: busy %5.1f %%  packets %" PRIu64
                  "  cycles/packet %.1f  sleeps %" PRIu64 "\n",
                  l["lcore"].get<unsigned>(), l["rx_queues"].get<unsigned>(),
                  l["busy_pct"].get<double>(), l["packets"].get<uint64_t>(),
                  l["cycles_per_packet"].get<double>(), l["sleeps"].get<uint64_t>(),
                  t["busy_pct"].get<double>(), t["packets"].get<uint64_t>(),
                  t["cycles_per_packet"].get<double>(), t["sleeps"].get<uint64_t>());
  }
  return out;
}

std::string rxq_show_text(const Json& j) {
  std::string out = format("last %.1f s:\n", j["interval_s"].get<double>());
  for (const Json& q : j["rx_queues"]) {
    out += format(
        "lcore %-3u %-20s usage %5.1f %%  packets %-12" PRIu64 " weight %u packets / %u bytes",
        q["lcore"].get<unsigned>(),
        (q["port"].get<std::string>() + ":" + std::to_string(q["queue"].get<unsigned>())).c_str(),
        q["usage_pct"].get<double>(), q["packets"].get<uint64_t>(),
        q["weight_packets"].get<unsigned>(), q["weight_bytes"].get<unsigned>());
    // As pmd-rxq-show marks a queue polled from another NUMA node.
    if (q["cross_numa"].get<bool>())
      out += format("  (cross-NUMA: port on node %d, lcore on node %d)",
                    q["port_numa_node"].get<int>(), q["lcore_numa_node"].get<int>());
    if (q.contains("guest_cache") && q["guest_cache"] != "unmeasured")
      out += format("  guest cache %s (%u ns)", q["guest_cache"].get<std::string>().c_str(),
                    q["guest_line_ns"].get<unsigned>());
    if (q.contains("guest_sends_own") && q["guest_sends_own"].get<bool>())
      out += "  guest sends own frames";
    out += "\n";
  }
  return out;
}

std::string stats_text(const Json& j) {
  if (j.contains("cleared")) return cat({"cleared: ", j["cleared"].get<std::string>(), "\n"});
  std::string out;
  for (const Json& p : j["ports"]) {
    out += format("port %-16s rx %" PRIu64 " packets %" PRIu64 " bytes  tx %" PRIu64
                  " packets %" PRIu64 " bytes  tx_retries %" PRIu64 "  drops %" PRIu64,
                  p["name"].get<std::string>().c_str(), p["rx_packets"].get<uint64_t>(),
                  p["rx_bytes"].get<uint64_t>(), p["tx_packets"].get<uint64_t>(),
                  p["tx_bytes"].get<uint64_t>(), p["tx_retries"].get<uint64_t>(),
                  p["drops"].get<uint64_t>());
    for (const auto& [reason, n] : p["drops_by_reason"].items())
      if (n.get<uint64_t>() != 0) out += cat({" ", reason, "=", std::to_string(n.get<uint64_t>())});
    out += "\n";
  }
  return out;
}

std::string fdb_show_text(const Json& j) {
  std::string out = format("%-17s %-4s %-16s %s\n", "MAC", "VLAN", "port", "age (s)");
  for (const Json& e : j["entries"])
    out += format("%-17s %-4u %-16s %" PRIu64 "\n", e["mac"].get<std::string>().c_str(),
                  e["vlan"].get<unsigned>(), e["port"].get<std::string>().c_str(),
                  e["age_s"].get<uint64_t>());
  return out;
}

std::optional<Json> ControlCommands::add_port(const std::vector<std::string>& operands,
                                              std::string* error) {
  std::string mapping;
  std::string peer;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i] == "--peer" && i + 1 < operands.size() && peer.empty()) {
      peer = operands[++i];
    } else if (mapping.empty() && operands[i] != "--peer") {
      mapping = operands[i];
    } else {
      *error = "usage: add-port MAPPING [--peer PORT]";
      return std::nullopt;
    }
  }
  if (mapping.empty()) {
    *error = "usage: add-port MAPPING [--peer PORT]";
    return std::nullopt;
  }
  const std::optional<PortConfig> port =
      parse_port(switch_.running_config(), mapping, "add-port", error);
  if (!port) return std::nullopt;
  const std::optional<uint16_t> index = switch_.add_port(*port, peer, error);
  if (!index) return std::nullopt;
  cleared_.clear();
  Json j;
  j["added"] = port->name;
  j["type"] = port_type_name(port->type);
  Json rx = Json::array();
  for (const auto& loop : switch_.lcores())
    for (const RxSlot& s : loop->poller().slots())
      if (s.port->index() == *index) {
        Json q;
        q["queue"] = s.queue;
        q["lcore"] = loop->lcore();
        rx.push_back(std::move(q));
      }
  j["rx"] = std::move(rx);
  if (!peer.empty()) j["peer"] = peer;
  return j;
}

std::optional<Json> ControlCommands::del_port(const std::vector<std::string>& operands,
                                              std::string* error) {
  if (operands.size() != 1) {
    *error = "usage: del-port PORT";
    return std::nullopt;
  }
  const int index = switch_.port_index(operands[0]);
  if (index < 0) {
    *error = "no port named '" + operands[0] + "'";
    return std::nullopt;
  }
  Json last;  // its counters once no lcore uses it, as stats shows them
  if (!switch_.del_port(
          operands[0], [&](uint16_t i) { last = port_stats(i); }, error))
    return std::nullopt;
  cleared_.clear();
  Json j;
  j["deleted"] = operands[0];
  j["final"] = std::move(last);
  return j;
}

std::optional<Json> ControlCommands::add_pair(const std::vector<std::string>& operands,
                                              std::string* error) {
  if (operands.size() != 2) {
    *error = "usage: add-pair PORT PORT";
    return std::nullopt;
  }
  if (!switch_.add_pair(operands[0], operands[1], error)) return std::nullopt;
  Json j;
  j["paired"] = Json::array({operands[0], operands[1]});
  return j;
}

std::string topology_text(const Json& j) {
  if (j.contains("added")) {
    std::string text =
        cat({"added ", j["added"].get<std::string>(), " (", j["type"].get<std::string>(), ")"});
    if (j.contains("peer")) text += cat({", paired with ", j["peer"].get<std::string>()});
    for (const Json& q : j["rx"])
      text += format(", rx queue %u on lcore %u", q["queue"].get<unsigned>(),
                     q["lcore"].get<unsigned>());
    return text + "\n";
  }
  if (j.contains("deleted")) {
    const Json& f = j["final"];
    return format("deleted %s: rx %" PRIu64 " tx %" PRIu64 " drops %" PRIu64 " packets\n",
                  j["deleted"].get<std::string>().c_str(), f["rx_packets"].get<uint64_t>(),
                  f["tx_packets"].get<uint64_t>(), f["drops"].get<uint64_t>());
  }
  return cat({"paired ", j["paired"][0].get<std::string>(), " and ",
              j["paired"][1].get<std::string>(), "\n"});
}

std::optional<Json> ControlCommands::reload(std::string* error) {
  const std::optional<Config> next = load_config(switch_.config().file, error);
  if (!next) return std::nullopt;
  const std::optional<ReloadPlan> plan = plan_reload(switch_.running_state(), *next, error);
  if (!plan) return std::nullopt;
  Json j;
  j["file"] = switch_.config().file;
  j["removed"] = Json::array();
  j["added"] = Json::array();
  j["recreated"] = plan->recreated;
  j["weights"] = Json::array();
  j["busy_poll"] = Json::array();
  // Applied in order; a step that fails (a device that does not probe) ends the reload, and the
  // reply says what was done before it.
  auto stop = [&](const std::string& what) {
    *error = what + " (applied before it: " + j.dump() + ")";
    return std::nullopt;
  };
  for (const std::string& name : plan->removed) {
    if (!switch_.del_port(
            name, [](uint16_t) {}, error))
      return stop("del-port " + name + ": " + *error);
    j["removed"].push_back(name);
  }
  for (const ReloadPlan::Added& a : plan->added) {
    if (!switch_.add_port(a.port, "", error, &a.rx_lcores))
      return stop("add-port " + a.port.name + ": " + *error);
    j["added"].push_back(a.port.name);
  }
  if (plan->pairs_change) {
    if (!switch_.set_pairs(plan->pairs, error)) return stop("forwarding.pairs: " + *error);
    j["pairs"] = plan->pairs;
  }
  for (const auto& loop : switch_.lcores()) {
    LcoreChange change;
    const auto& slots = loop->poller().slots();
    for (const PolledQueue& q : plan->weights) {
      if (q.lcore != loop->lcore()) continue;
      for (uint16_t s = 0; s < slots.size(); ++s)
        if (slots[s].port->name() == q.port && slots[s].queue == q.queue) {
          change.weights.emplace_back(s, q.weight);
          Json w;
          w["port"] = q.port;
          w["queue"] = q.queue;
          w["weight_packets"] = q.weight.packets;
          w["weight_bytes"] = q.weight.bytes;
          j["weights"].push_back(std::move(w));
        }
    }
    for (const auto& [lcore, us] : plan->busy_poll) {
      if (lcore != loop->lcore()) continue;
      change.busy_poll_us = us;
      Json b;
      b["lcore"] = lcore;
      b["busy_poll_us"] = us ? Json(*us) : Json(nullptr);
      j["busy_poll"].push_back(std::move(b));
    }
    if ((change.weights.empty() && !change.busy_poll_us) ||
        loop->apply(std::move(change), kApplyTimeoutMs))
      continue;
    return stop(cat({"lcore ", std::to_string(loop->lcore()),
                     " has not taken the change yet (it will at its next pass)"}));
  }
  cleared_.clear();
  return j;
}

std::string reload_text(const Json& j) {
  std::string out;
  auto list = [&](const char* what, const Json& names) {
    if (names.empty()) return;
    out += what;
    for (const Json& n : names) out += cat({" ", n.get<std::string>()});
    out += "\n";
  };
  list("removed:", j["removed"]);
  list("added:", j["added"]);
  list("recreated (settings changed):", j["recreated"]);
  for (const Json& w : j["weights"])
    out += format("weight %s:%u: packets %u bytes %u\n", w["port"].get<std::string>().c_str(),
                  w["queue"].get<unsigned>(), w["weight_packets"].get<unsigned>(),
                  w["weight_bytes"].get<unsigned>());
  for (const Json& b : j["busy_poll"])
    out += b["busy_poll_us"].is_null()
               ? format("lcore %u: polls always\n", b["lcore"].get<unsigned>())
               : format("lcore %u: sleeps after %u us idle\n", b["lcore"].get<unsigned>(),
                        b["busy_poll_us"].get<unsigned>());
  if (j.contains("pairs")) out += "xconnect pairs set again\n";
  if (out.empty()) out = "no change\n";
  return cat({"reloaded ", j["file"].get<std::string>(), "\n", out});
}

std::optional<Json> ControlCommands::rxq_rebalance(std::string* error) {
  RxqBalancer::Result result;
  if (!balancer_.rebalance(true, &result, error)) return std::nullopt;
  Json j;
  j["assign"] = switch_.config().rxq_assign == RxqAssign::kCycles ? "cycles" : "roundrobin";
  j["improvement_pct"] = result.improvement_pct;
  Json moves = Json::array();
  for (const RxqBalancer::Move& m : result.moves) {
    Json mv;
    mv["port"] = m.port;
    mv["queue"] = m.queue;
    mv["from"] = m.from;
    mv["to"] = m.to;
    moves.push_back(std::move(mv));
  }
  j["moved"] = std::move(moves);
  if (!result.why_not.empty()) j["not_moved"] = result.why_not;
  return j;
}

std::string rxq_rebalance_text(const Json& j) {
  if (j.contains("not_moved"))
    return cat({"nothing moved: ", j["not_moved"].get<std::string>(), "\n"});
  std::string out;
  for (const Json& m : j["moved"])
    out += format("%s:%u: lcore %u -> %u\n", m["port"].get<std::string>().c_str(),
                  m["queue"].get<unsigned>(), m["from"].get<unsigned>(), m["to"].get<unsigned>());
  return out +
         format("the lcores' load variance %.0f %% lower\n", j["improvement_pct"].get<double>());
}

}  // namespace vqs::app
