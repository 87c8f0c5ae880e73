// SPDX-License-Identifier: BSD-3-Clause
#include "core/stats_report.h"

#include <rte_cycles.h>

#include <string>

namespace vqs::app {
namespace {

// "drops: tx_guest_full=12 no_guest_buffer=3" for the reasons that counted anything, from
// `now - before` (before may be null: totals).
std::string drop_list(const PortTotals& now, const PortTotals* before) {
  std::string s;
  auto add = [&s](const char* name, uint64_t n) {
    if (n == 0) return;
    s += ' ';
    s += name;
    s += '=';
    s += std::to_string(n);
  };
  for (int r = 0; r < kSwitchDropCount; ++r)
    add(switch_drop_name(static_cast<SwitchDrop>(r)),
        now.switch_drops[r] - (before ? before->switch_drops[r] : 0));
  for (int r = 0; r < kDropReasonCount; ++r)
    add(drop_reason_name(static_cast<DropReason>(r)),
        now.guest.drops[r] - (before ? before->guest.drops[r] : 0));
  add("rx_missed", now.rx_missed - (before ? before->rx_missed : 0));
  add("rx_nombuf", now.rx_nombuf - (before ? before->rx_nombuf : 0));
  add("rx_errors", now.rx_errors - (before ? before->rx_errors : 0));
  add("tx_errors", now.tx_errors - (before ? before->tx_errors : 0));
  return s.empty() ? " none" : s;
}

}  // namespace

StatsReport::StatsReport(const Switch& sw) : switch_(sw) {
  take_last();
  last_tsc_ = rte_rdtsc();
}

void StatsReport::take_last() {
  last_.assign(switch_.ports().size(), PortTotals{});
  for (uint16_t i = 0; i < last_.size(); ++i)
    if (switch_.ports()[i] != nullptr) last_[i] = switch_.totals(i);
  generation_ = switch_.topology_generation();
}

void StatsReport::print_rates(std::FILE* out) {
  const uint64_t now_tsc = rte_rdtsc();
  const double seconds = static_cast<double>(now_tsc - last_tsc_) / rte_get_tsc_hz();
  last_tsc_ = now_tsc;
  if (seconds <= 0) return;
  if (generation_ != switch_.topology_generation()) {
    take_last();  // ports came or went: rates from the next interval
    return;
  }
  for (uint16_t i = 0; i < last_.size(); ++i) {
    if (switch_.ports()[i] == nullptr) continue;
    const Port& port = *switch_.ports()[i];
    const PortTotals now = switch_.totals(i);
    const PortTotals& before = last_[i];
    std::fprintf(
        out, "%-12s %-4s rx %9.3f Mpps %8.1f Mbit/s  tx %9.3f Mpps %8.1f Mbit/s  drops/s:%s\n",
        port.name().c_str(), port.link_up() ? "up" : "down",
        (now.rx_packets - before.rx_packets) / seconds / 1e6,
        (now.rx_bytes - before.rx_bytes) * 8 / seconds / 1e6,
        (now.tx_packets - before.tx_packets) / seconds / 1e6,
        (now.tx_bytes - before.tx_bytes) * 8 / seconds / 1e6, drop_list(now, &before).c_str());
    last_[i] = now;
  }
  std::fflush(out);
}

void StatsReport::print_totals(std::FILE* out) const {
  std::fprintf(out, "final counters:\n");
  for (uint16_t i = 0; i < switch_.ports().size(); ++i) {
    if (switch_.ports()[i] == nullptr) continue;
    const Port& port = *switch_.ports()[i];
    const PortTotals t = switch_.totals(i);
    std::fprintf(out,
                 "  port %-12s rx %lu pkts %lu bytes  tx %lu pkts %lu bytes  tx_retries %lu  "
                 "drops %lu:%s\n",
                 port.name().c_str(), t.rx_packets, t.rx_bytes, t.tx_packets, t.tx_bytes,
                 t.tx_retries, t.total_drops(), drop_list(t, nullptr).c_str());
    if (port.is_guest()) {
      std::fprintf(out,
                   "  %-17s guest notifications %lu (coalesced %lu, forced by refill %lu, late "
                   "%lu)\n",
                   "", t.guest.guest_notifications, t.guest.guest_notifications_coalesced,
                   t.guest.guest_notifications_refill, t.guest.guest_notifications_late);
    }
  }
  for (const auto& loop : switch_.lcores()) {
    const LcoreCounters& c = loop->counters();
    uint64_t by_weight = 0, empty = 0;
    for (const RxSlot& s : loop->poller().slots()) {
      by_weight += s.visits_ended_by_weight;
      empty += s.visits_ended_empty;
    }
    const uint64_t cycles = c.busy_cycles + c.idle_cycles;
    std::fprintf(out,
                 "  lcore %-3u packets %lu  busy %.1f%%  visits ended by weight %lu, empty %lu  "
                 "sleeps %lu (woken %lu: kicks %lu, rx interrupts %lu)  tx release requests %lu "
                 "(packets freed %lu, unsupported %lu)  freed before sleeping %lu (sleeps put off "
                 "%lu)  reclaims at the zero-copy limit %lu (packets freed %lu)\n",
                 loop->lcore(), c.packets, cycles ? 100.0 * c.busy_cycles / cycles : 0.0, by_weight,
                 empty, c.sleeps, c.wakeups, c.kick_wakeups, c.rx_interrupt_wakeups,
                 c.tx_release_requests, c.tx_release_packets, c.tx_release_unsupported,
                 c.tx_released_before_sleep, c.sleeps_put_off, c.lent_reclaims,
                 c.lent_reclaimed_packets);
  }
  if (const L2Bridge* bridge = switch_.bridge()) {
    const BridgeCounters b = bridge->counters();
    std::fprintf(out,
                 "  bridge entries %lu  learned %lu  moved %lu  aged %lu  table_full %lu  "
                 "flooded %lu\n",
                 b.entries, b.learned, b.moved, b.aged, b.table_full, b.flooded);
  }
  std::fflush(out);
}

}  // namespace vqs::app
