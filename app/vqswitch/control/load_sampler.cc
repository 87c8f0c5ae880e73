// SPDX-License-Identifier: BSD-3-Clause
#include "control/load_sampler.h"

namespace vqs::app {

LoadSampler::Snapshot LoadSampler::take(uint64_t now_ms) const {
  Snapshot s;
  s.ms = now_ms;
  for (const auto& loop : switch_.lcores()) {
    const LcoreCounters& c = loop->counters();
    s.lcores.push_back({c.busy_cycles, c.idle_cycles, c.packets, c.sleeps});
    std::vector<QueueSample> queues;
    for (const RxSlot& slot : loop->poller().slots())
      queues.push_back({slot.port,
                        slot.queue,
                        {slot.busy_cycles, 0, slot.port->rx_counters(slot.queue).rx_packets, 0}});
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
  // A counter that went down belongs to a queue that came and went in between: no figure.
  if (now.busy_cycles < before.busy_cycles || now.packets < before.packets) return {};
  return {now.busy_cycles - before.busy_cycles, now.idle_cycles - before.idle_cycles,
          now.packets - before.packets, now.sleeps - before.sleeps};
}

LoadSampler::Load LoadSampler::lcore(size_t lcore_index) const {
  if (snapshots_ < 2 || lcore_index >= last_.lcores.size()) return {};
  return difference(last_.lcores[lcore_index], previous_.lcores[lcore_index]);
}

LoadSampler::Load LoadSampler::queue(size_t lcore_index, const RxSlot& slot) const {
  if (snapshots_ < 2 || lcore_index >= last_.queues.size()) return {};
  // By the queue, not its place in the lcore's list: ports come and go between snapshots.
  auto find = [&](const Snapshot& s) -> const Load* {
    for (const QueueSample& q : s.queues[lcore_index])
      if (q.port == slot.port && q.queue == slot.queue) return &q.load;
    return nullptr;
  };
  const Load* now = find(last_);
  const Load* before = find(previous_);
  if (now == nullptr || before == nullptr) return {};
  return difference(*now, *before);
}

double LoadSampler::interval_s() const {
  return snapshots_ < 2 ? 0.0 : static_cast<double>(last_.ms - previous_.ms) / 1000.0;
}

}  // namespace vqs::app
