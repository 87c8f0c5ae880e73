// SPDX-License-Identifier: BSD-3-Clause
#include "core/rxq_balance.h"

#include <algorithm>
#include <numeric>

namespace vqs::app {
namespace {

double variance(const std::vector<uint64_t>& loads) {
  if (loads.empty()) return 0;
  const double mean =
      std::accumulate(loads.begin(), loads.end(), 0.0) / static_cast<double>(loads.size());
  double sum = 0;
  for (uint64_t l : loads) sum += (static_cast<double>(l) - mean) * (static_cast<double>(l) - mean);
  return sum / static_cast<double>(loads.size());
}

}  // namespace

std::vector<size_t> assign_by_cycles(const std::vector<QueueLoad>& queues,
                                     const std::vector<bool>& takes) {
  std::vector<size_t> placement(queues.size());
  std::vector<uint64_t> load(takes.size(), 0);
  std::vector<size_t> order;
  for (size_t i = 0; i < queues.size(); ++i) {
    placement[i] = queues[i].lcore;
    if (queues[i].pinned || queues[i].lcore >= takes.size() || !takes[queues[i].lcore]) {
      if (queues[i].lcore < load.size()) load[queues[i].lcore] += queues[i].cycles;
    } else {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return queues[a].cycles > queues[b].cycles; });
  for (size_t i : order) {
    size_t best = queues[i].lcore;
    for (size_t l = 0; l < takes.size(); ++l)
      if (takes[l] && load[l] < load[best]) best = l;
    placement[i] = best;
    load[best] += queues[i].cycles;
  }
  return placement;
}

std::vector<size_t> assign_round_robin(const std::vector<QueueLoad>& queues,
                                       const std::vector<bool>& takes) {
  std::vector<size_t> placement(queues.size());
  std::vector<size_t> dealers;
  for (size_t l = 0; l < takes.size(); ++l)
    if (takes[l]) dealers.push_back(l);
  size_t next = 0;
  for (size_t i = 0; i < queues.size(); ++i) {
    const bool movable =
        !queues[i].pinned && queues[i].lcore < takes.size() && takes[queues[i].lcore];
    placement[i] = movable && !dealers.empty() ? dealers[next++ % dealers.size()] : queues[i].lcore;
  }
  return placement;
}

std::vector<uint64_t> lcore_loads(const std::vector<QueueLoad>& queues,
                                  const std::vector<size_t>& placement, size_t lcores) {
  std::vector<uint64_t> loads(lcores, 0);
  for (size_t i = 0; i < queues.size(); ++i)
    if (placement[i] < lcores) loads[placement[i]] += queues[i].cycles;
  return loads;
}

double improvement_pct(const std::vector<uint64_t>& current, const std::vector<uint64_t>& proposed) {
  const double now = variance(current);
  if (now <= 0) return 0;
  return std::max(0.0, (now - variance(proposed)) * 100.0 / now);
}

}  // namespace vqs::app
