#include "telemetry.h"

#include <rte_cycles.h>
#include <rte_telemetry.h>

#include <cstring>
#include <mutex>

namespace vqs::app {
namespace {

std::mutex attached_mutex;
const Switch* attached = nullptr;

void add_u64(rte_tel_data* d, const char* name, uint64_t v) {
  rte_tel_data_add_dict_u64(d, name, v);
}

bool has_param(const char* params) { return params != nullptr && *params != '\0'; }

// Without a parameter, the port names (as /ethdev/list lists ids: a telemetry reply holds 16 KiB,
// too little for the counters of hundreds of guests); with a port name, its counters.
int ports_command(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(attached_mutex);
  if (!has_param(params)) {
    rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
    if (attached != nullptr)
      for (const auto& port : attached->ports())
        rte_tel_data_add_array_string(d, port->name().c_str());
    return 0;
  }
  rte_tel_data_start_dict(d);
  if (attached == nullptr) return -1;
  for (uint16_t i = 0; i < attached->ports().size(); ++i) {
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
        add_u64(p, drop_reason_name(static_cast<DropReason>(r)), t.datapath_drops[r]);
      add_u64(p, "mbuf_alloc_failures", t.mbuf_alloc_failures);
      add_u64(p, "guest_notifications", t.guest_notifications);
      add_u64(p, "guest_notifications_coalesced", t.guest_notifications_coalesced);
      add_u64(p, "guest_notifications_refill", t.guest_notifications_refill);
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

int lcores_command(const char*, const char*, rte_tel_data* d) {
  std::lock_guard lock(attached_mutex);
  rte_tel_data_start_dict(d);
  if (attached == nullptr) return 0;
  for (const auto& loop : attached->lcores()) {
    const LcoreCounters& c = loop->counters();
    rte_tel_data* l = rte_tel_data_alloc();
    rte_tel_data_start_dict(l);
    uint64_t by_weight = 0, empty = 0;
    for (const RxSlot& s : loop->poller().slots()) {
      by_weight += s.visits_ended_by_weight;
      empty += s.visits_ended_empty;
    }
    add_u64(l, "rx_queues", loop->poller().slots().size());
    add_u64(l, "iterations", c.iterations);
    add_u64(l, "busy_iterations", c.busy_iterations);
    add_u64(l, "packets", c.packets);
    add_u64(l, "busy_cycles", c.busy_cycles);
    add_u64(l, "idle_cycles", c.idle_cycles);
    add_u64(l, "visits_ended_by_weight", by_weight);
    add_u64(l, "visits_ended_empty", empty);
    add_u64(l, "sleeps", c.sleeps);
    add_u64(l, "wakeups", c.wakeups);
    add_u64(l, "kick_wakeups", c.kick_wakeups);
    add_u64(l, "rx_interrupt_wakeups", c.rx_interrupt_wakeups);
    const std::string name = "lcore" + std::to_string(loop->lcore());
    rte_tel_data_add_dict_container(d, name.c_str(), l, 0);
  }
  return 0;
}

// Keyed "rxq0", "rxq1" ... in polling order, each naming its port and queue: port names may hold
// characters telemetry refuses in keys, and 22.11 has no arrays of dictionaries.
int queues_command(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(attached_mutex);
  rte_tel_data_start_dict(d);
  if (attached == nullptr) return 0;
  unsigned index = 0;
  for (const auto& loop : attached->lcores()) {
    for (const RxSlot& s : loop->poller().slots()) {
      if (has_param(params) && s.port->name() != params) {
        ++index;
        continue;
      }
      const PortQueueCounters& c = s.port->rx_counters(s.queue);
      rte_tel_data* q = rte_tel_data_alloc();
      rte_tel_data_start_dict(q);
      rte_tel_data_add_dict_string(q, "port", s.port->name().c_str());
      add_u64(q, "queue", s.queue);
      add_u64(q, "lcore", loop->lcore());
      add_u64(q, "weight_packets", s.weight.packets);
      add_u64(q, "weight_bytes", s.weight.bytes);
      add_u64(q, "rx_packets", c.rx_packets);
      add_u64(q, "rx_bytes", c.rx_bytes);
      add_u64(q, "visits_ended_by_weight", s.visits_ended_by_weight);
      add_u64(q, "visits_ended_empty", s.visits_ended_empty);
      const std::string key = "rxq" + std::to_string(index++);
      rte_tel_data_add_dict_container(d, key.c_str(), q, 0);
    }
  }
  return 0;
}

}  // namespace

void telemetry_attach(const Switch* sw) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    rte_telemetry_register_cmd("/vqswitch/ports", ports_command,
                               "Counters per port; parameter: a port name (optional)");
    rte_telemetry_register_cmd("/vqswitch/lcores", lcores_command,
                               "Per forwarding lcore: packets, cycles, visits, sleeps");
    rte_telemetry_register_cmd("/vqswitch/queues", queues_command,
                               "Per polled rx queue: lcore, weights, visits; parameter: a port");
  });
  std::lock_guard lock(attached_mutex);
  attached = sw;
}

}  // namespace vqs::app
