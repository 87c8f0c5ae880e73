// SPDX-License-Identifier: BSD-3-Clause
#include "core/rxq_balance.h"

#include <algorithm>
#include <cstdint>
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

bool movable(const QueueLoad& q, const std::vector<bool>& takes) {
  return !q.pinned && q.lcore < takes.size() && takes[q.lcore];
}

// The lcores a movable queue may go to: those of `takes` on its node, or all of them where its
// node is not known or has none.
std::vector<bool> candidates(const QueueLoad& q, const std::vector<bool>& takes,
                             const std::vector<int>& lcore_nodes) {
  if (q.node < 0 || lcore_nodes.size() != takes.size()) return takes;
  std::vector<bool> local(takes.size());
  bool any = false;
  for (size_t l = 0; l < takes.size(); ++l) {
    local[l] = takes[l] && lcore_nodes[l] == q.node;
    any = any || local[l];
  }
  return any ? local : takes;
}

}  // namespace

std::vector<size_t> assign_by_cycles(const std::vector<QueueLoad>& queues,
                                     const std::vector<bool>& takes,
                                     const std::vector<int>& lcore_nodes) {
  std::vector<size_t> placement(queues.size());
  std::vector<uint64_t> load(takes.size(), 0);
  std::vector<size_t> order;
  for (size_t i = 0; i < queues.size(); ++i) {
    placement[i] = queues[i].lcore;
    if (!movable(queues[i], takes)) {
      if (queues[i].lcore < load.size()) load[queues[i].lcore] += queues[i].cycles;
    } else {
      order.push_back(i);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return queues[a].cycles > queues[b].cycles; });
  for (size_t i : order) {
    const std::vector<bool> to = candidates(queues[i], takes, lcore_nodes);
    size_t best = to[queues[i].lcore] ? queues[i].lcore : SIZE_MAX;
    for (size_t l = 0; l < to.size(); ++l)
      if (to[l] && (best == SIZE_MAX || load[l] < load[best])) best = l;
    placement[i] = best;
    load[best] += queues[i].cycles;
  }
  return placement;
}

std::vector<size_t> assign_round_robin(const std::vector<QueueLoad>& queues,
                                       const std::vector<bool>& takes,
                                       const std::vector<int>& lcore_nodes) {
  // In turn: each to the candidate dealt the fewest so far, the lowest index on a tie (with one
  // set of candidates, plain round robin).
  std::vector<size_t> placement(queues.size());
  std::vector<size_t> dealt(takes.size(), 0);
  for (size_t i = 0; i < queues.size(); ++i) {
    placement[i] = queues[i].lcore;
    if (!movable(queues[i], takes)) continue;
    const std::vector<bool> to = candidates(queues[i], takes, lcore_nodes);
    size_t best = SIZE_MAX;
    for (size_t l = 0; l < to.size(); ++l)
      if (to[l] && (best == SIZE_MAX || dealt[l] < dealt[best])) best = l;
    placement[i] = best;
    ++dealt[best];
  }
  return placement;
}

std::vector<size_t> assign_to_nodes(const std::vector<QueueLoad>& queues,
                                    const std::vector<bool>& takes,
                                    const std::vector<int>& lcore_nodes) {
  std::vector<size_t> placement(queues.size());
  std::vector<size_t> polled(takes.size(), 0);
  for (const QueueLoad& q : queues)
    if (q.lcore < polled.size()) ++polled[q.lcore];
  for (size_t i = 0; i < queues.size(); ++i) {
    const QueueLoad& q = queues[i];
    placement[i] = q.lcore;
    if (!movable(q, takes) || q.node < 0 || lcore_nodes.size() != takes.size() ||
        lcore_nodes[q.lcore] == q.node)
      continue;
    size_t best = SIZE_MAX;
    for (size_t l = 0; l < takes.size(); ++l)
      if (takes[l] && lcore_nodes[l] == q.node && (best == SIZE_MAX || polled[l] < polled[best]))
        best = l;
    if (best == SIZE_MAX) continue;  // no lcore there takes queues: it stays, cross-node
    placement[i] = best;
    --polled[q.lcore];
    ++polled[best];
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

double improvement_pct(const std::vector<uint64_t>& current,
                       const std::vector<uint64_t>& proposed) {
  const double now = variance(current);
  if (now <= 0) return 0;
  return std::max(0.0, (now - variance(proposed)) * 100.0 / now);
}

}  // namespace vqs::app
