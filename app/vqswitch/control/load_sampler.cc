// SPDX-License-Identifier: BSD-3-Clause
#include "control/load_sampler.h"

namespace vqs::app {

LoadSampler::Snapshot LoadSampler::take(uint64_t now_ms) const {
  Snapshot s;
  s.ms = now_ms;
  for (const auto& loop : switch_.lcores()) {
    const LcoreCounters& c = loop->counters();
    s.lcores.push_back({c.busy_cycles, c.idle_cycles, c.packets, c.sleeps});
    std::vector<Load> queues;
    for (const RxSlot& slot : loop->poller().slots())
      queues.push_back({slot.busy_cycles, 0, slot.port->rx_counters(slot.queue).rx_packets, 0});
    s.queues.push_back(std::move(queues));
  }
  return s;
}

void LoadSampler::sample(uint64_t now_ms) {
  if (snapshots_ > 0 && now_ms - last_.ms < kIntervalMs) return;
  previous_ = std::move(last_);
  last_ = take(now_ms);
  ++snapshots_;
}

LoadSampler::Load LoadSampler::difference(const Load& now, const Load& before) {
  return {now.busy_cycles - before.busy_cycles, now.idle_cycles - before.idle_cycles,
          now.packets - before.packets, now.sleeps - before.sleeps};
}

LoadSampler::Load LoadSampler::lcore(size_t lcore_index) const {
  if (snapshots_ < 2 || lcore_index >= last_.lcores.size()) return {};
  return difference(last_.lcores[lcore_index], previous_.lcores[lcore_index]);
}

LoadSampler::Load LoadSampler::queue(size_t lcore_index, size_t slot_index) const {
  if (snapshots_ < 2 || lcore_index >= last_.queues.size() ||
      slot_index >= last_.queues[lcore_index].size() ||
      slot_index >= previous_.queues[lcore_index].size())
    return {};
  return difference(last_.queues[lcore_index][slot_index],
                    previous_.queues[lcore_index][slot_index]);
}

double LoadSampler::interval_s() const {
  return snapshots_ < 2 ? 0.0 : static_cast<double>(last_.ms - previous_.ms) / 1000.0;
}

}  // namespace vqs::app
