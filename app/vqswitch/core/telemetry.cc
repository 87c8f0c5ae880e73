// SPDX-License-Identifier: BSD-3-Clause
#include "core/telemetry.h"

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "ports/guest_port.h"

namespace vqs::app {
namespace {

std::mutex attached_mutex;
const Switch* attached = nullptr;

// Ports and lcores are read under the switch's topology lock (runtime ports change them).
std::shared_lock<std::shared_mutex> topology_lock() {
  return attached != nullptr ? std::shared_lock(attached->topology_mutex())
                             : std::shared_lock<std::shared_mutex>();
}

void add_u64(rte_tel_data* d, const char* name, uint64_t v) {
  rte_tel_data_add_dict_u64(d, name, v);
}

bool has_param(const char* params) { return params != nullptr && *params != '\0'; }

// Without a parameter, the port names (as /ethdev/list lists ids: a telemetry reply holds 16 KiB,
// too little for the counters of hundreds of guests); with a port name, its counters.
int ports_command(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(attached_mutex);
  std::shared_lock topology = topology_lock();
  if (!has_param(params)) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    if (attached != nullptr)
      for (const auto& port : attached->ports())
        if (port != nullptr) rte_tel_data_add_array_string(d, port->name().c_str());
    return 0;
  }
  rte_tel_data_start_dict(d);
  if (attached == nullptr) return -1;
  for (uint16_t i = 0; i < attached->ports().size(); ++i) {
    if (attached->ports()[i] == nullptr) continue;
    const Port& port = *attached->ports()[i];
    if (port.name() != params) continue;
    const PortTotals t = attached->totals(i);
    rte_tel_data* p = d;
    rte_tel_data_add_dict_string(p, "type", port.is_guest() ? "vhost" : "ethdev");
    rte_tel_data_add_dict_string(p, "link", port.link_up() ? "up" : "down");
    add_u64(p, "rx_packets", t.rx_packets);
    add_u64(p, "rx_bytes", t.rx_bytes);
    add_u64(p, "tx_packets", t.tx_packets);
    add_u64(p, "tx_bytes", t.tx_bytes);
    add_u64(p, "tx_retries", t.tx_retries);
    add_u64(p, "drops", t.total_drops());
    for (int r = 0; r < kSwitchDropCount; ++r)
      add_u64(p, switch_drop_name(static_cast<SwitchDrop>(r)), t.switch_drops[r]);
    if (port.is_guest()) {
      for (int r = 0; r < kDropReasonCount; ++r)
        add_u64(p, drop_reason_name(static_cast<DropReason>(r)), t.guest.drops[r]);
      // Both directions summed (good_packets: received plus delivered), as the PMD's xstats
      // name each queue's.
      for (const QueueCounter& c : kQueueCounters) add_u64(p, c.name, t.guest.*c.field);
      for (int b = 0; b < kSizeBucketCount; ++b)
        add_u64(p, size_bucket_name(static_cast<SizeBucket>(b)), t.guest.sizes[b]);
      add_u64(p, "zerocopy_in_flight", t.zerocopy_in_flight);
      add_u64(p, "zerocopy_wakeups", t.zerocopy_wakeups);
      add_u64(p, "zerocopy_orphans", t.zerocopy_orphans);
      // What the vhost-user side refused: a second frontend, a memory table past its files, a
      // request outside what we negotiate.
      const vqs::VhostDevice& device = static_cast<const GuestPort&>(port).device();
      add_u64(p, "refused_frontends", device.refused_frontends());
      add_u64(p, "refused_memory_tables", device.refused_memory_tables());
      add_u64(p, "refused_messages", device.refused_messages());
      add_u64(p, "rarps_sent", device.rarps_sent());
      add_u64(p, "rarps_failed", device.rarps_failed());
    } else {
      add_u64(p, "rx_missed", t.rx_missed);
      add_u64(p, "rx_nombuf", t.rx_nombuf);
      add_u64(p, "rx_errors", t.rx_errors);
      add_u64(p, "tx_errors", t.tx_errors);
    }
    return 0;
  }
  return -1;  // no such port
}

// A container added to `d` under `key`, or freed: 22.11 neither frees nor keeps a container that
// does not fit (a dictionary holds RTE_TEL_MAX_DICT_ENTRIES).
void add_container(rte_tel_data* d, const std::string& key, rte_tel_data* value) {
  if (rte_tel_data_add_dict_container(d, key.c_str(), value, 0) != 0) rte_tel_data_free(value);
}

// Parses "N" (an lcore id) or "NAME:Q" (a port's queue); false when it is neither.
bool parse_number(const std::string& text, unsigned* value) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != text.npos)
    return false;
  *value = static_cast<unsigned>(std::stoul(text));
  return true;
}

// Without a parameter, the forwarding lcores' ids; with one, that lcore's counters.
int lcores_command(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(attached_mutex);
  std::shared_lock topology = topology_lock();
  if (!has_param(params)) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    if (attached != nullptr)
      for (const auto& loop : attached->lcores())
        rte_tel_data_add_array_int(d, static_cast<int>(loop->lcore()));
    return 0;
  }
  rte_tel_data_start_dict(d);
  unsigned id;
  if (attached == nullptr || !parse_number(params, &id)) return -1;
  for (const auto& loop : attached->lcores()) {
    if (loop->lcore() != id) continue;
    const LcoreCounters& c = loop->counters();
    uint64_t by_weight = 0, empty = 0;
    for (const RxSlot& s : loop->poller().slots()) {
      by_weight += s.visits_ended_by_weight;
      empty += s.visits_ended_empty;
    }
    add_u64(d, "rx_queues", loop->poller().slots().size());
    add_u64(d, "iterations", c.iterations);
    add_u64(d, "busy_iterations", c.busy_iterations);
    add_u64(d, "packets", c.packets);
    add_u64(d, "busy_cycles", c.busy_cycles);
    add_u64(d, "idle_cycles", c.idle_cycles);
    add_u64(d, "visits_ended_by_weight", by_weight);
    add_u64(d, "visits_ended_empty", empty);
    add_u64(d, "sleeps", c.sleeps);
    add_u64(d, "wakeups", c.wakeups);
    add_u64(d, "kick_wakeups", c.kick_wakeups);
    add_u64(d, "rx_interrupt_wakeups", c.rx_interrupt_wakeups);
    add_u64(d, "tx_release_requests", c.tx_release_requests);
    add_u64(d, "tx_release_packets", c.tx_release_packets);
    add_u64(d, "tx_released_before_sleep", c.tx_released_before_sleep);
    add_u64(d, "sleeps_put_off", c.sleeps_put_off);
    add_u64(d, "tx_release_unsupported", c.tx_release_unsupported);
    add_u64(d, "lent_reclaims", c.lent_reclaims);
    add_u64(d, "lent_reclaimed_packets", c.lent_reclaimed_packets);
    return 0;
  }
  return -1;  // no such forwarding lcore
}

// A polled rx queue's placement and counters, into the dictionary `q`.
void add_queue_counters(rte_tel_data* q, const LcoreLoop& loop, const RxSlot& s) {
  const PortQueueCounters& c = s.port->rx_counters(s.queue);
  add_u64(q, "lcore", loop.lcore());
  add_u64(q, "weight_packets", s.weight.packets);
  add_u64(q, "weight_bytes", s.weight.bytes);
  add_u64(q, "rx_packets", c.rx_packets);
  add_u64(q, "rx_bytes", c.rx_bytes);
  add_u64(q, "visits_ended_by_weight", s.visits_ended_by_weight);
  add_u64(q, "visits_ended_empty", s.visits_ended_empty);
  if (s.port->is_guest()) {
    // Whether the guest's CPU shares a cache with this lcore's and whether it sends frames of
    // its own (the releases at auto).
    const VhostDevice& device = static_cast<const GuestPort*>(s.port)->device();
    const PlacementProbe::Reading placement = device.guest_placement(guest_tx_vring(s.queue));
    rte_tel_data_add_dict_string(q, "guest_cache", placement.name());
    add_u64(q, "guest_line_ns", placement.line_ns);
    add_u64(q, "guest_sends_own", device.guest_sends_own(guest_tx_vring(s.queue)));
  }
}

// Without a parameter, every polled rx queue as "PORT:Q" in polling order (a reply holds 16 KiB:
// too little for the counters of hundreds of guests' queues); with "PORT", that port's queues
// keyed "rxqQ"; with "PORT:Q", one queue.
int queues_command(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(attached_mutex);
  std::shared_lock topology = topology_lock();
  if (!has_param(params)) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    if (attached == nullptr) return 0;
    for (const auto& loop : attached->lcores())
      for (const RxSlot& s : loop->poller().slots())
        rte_tel_data_add_array_string(d, (s.port->name() + ":" + std::to_string(s.queue)).c_str());
    return 0;
  }
  rte_tel_data_start_dict(d);
  if (attached == nullptr) return -1;
  std::string port = params;
  unsigned queue = 0;
  const size_t colon = port.rfind(':');
  const bool one = colon != port.npos && parse_number(port.substr(colon + 1), &queue);
  if (one) port.resize(colon);
  bool found = false;
  for (const auto& loop : attached->lcores()) {
    for (const RxSlot& s : loop->poller().slots()) {
      if (s.port->name() != port || (one && s.queue != queue)) continue;
      found = true;
      if (one) {
        rte_tel_data_add_dict_string(d, "port", port.c_str());
        add_u64(d, "queue", s.queue);
        add_queue_counters(d, *loop, s);
        return 0;
      }
      rte_tel_data* q = rte_tel_data_alloc();
      if (q == nullptr) return -1;
      rte_tel_data_start_dict(q);
      add_queue_counters(q, *loop, s);
      add_container(d, "rxq" + std::to_string(s.queue), q);
    }
  }
  return found ? 0 : -1;
}

}  // namespace

void telemetry_attach(const Switch* sw) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    rte_telemetry_register_cmd("/vqswitch/ports", ports_command,
                               "Counters per port; parameter: a port name (optional)");
    rte_telemetry_register_cmd(
        "/vqswitch/lcores", lcores_command,
        "Forwarding lcores; parameter: an lcore id, for its packets, cycles, visits, sleeps");
    rte_telemetry_register_cmd("/vqswitch/queues", queues_command,
                               "Polled rx queues (PORT:Q); parameter: PORT or PORT:Q, for lcore, "
                               "weights, visits");
  });
  std::lock_guard lock(attached_mutex);
  attached = sw;
}

}  // namespace vqs::app
