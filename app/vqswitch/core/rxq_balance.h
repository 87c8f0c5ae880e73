// SPDX-License-Identifier: BSD-3-Clause
// Rx queue placement by measured load (`rxq_assign: cycles`, OVS's pmd-rxq-assign=cycles) and
// the test of whether moving queues is worth it (`auto_balance`, OVS's pmd-auto-lb): pure
// functions over the lcores' and queues' busy cycles of the last interval.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vqs::app {

struct QueueLoad {
  uint64_t cycles = 0;  // busy cycles over the last interval
  size_t lcore = 0;     // index of the lcore polling it now
  bool pinned = false;  // placed by the file on an lcore without rx: auto: it stays
  int node = -1;        // its port's NUMA node, -1 when not known
};

// Where each queue goes (an lcore index, same order as `queues`): pinned queues stay; the others,
// largest first, each onto the lcore in `takes` (by index) with the least load so far (pinned
// queues' included; ties: the lcore polling it now, then the lowest index). With `lcore_nodes`
// (by index; empty: no NUMA), a queue whose node is known goes to an lcore on that node where
// `takes` has one.
std::vector<size_t> assign_by_cycles(const std::vector<QueueLoad>& queues,
                                     const std::vector<bool>& takes,
                                     const std::vector<int>& lcore_nodes = {});
// The same dealt in turn, in the queues' order (round robin), for rxq_assign: roundrobin.
std::vector<size_t> assign_round_robin(const std::vector<QueueLoad>& queues,
                                       const std::vector<bool>& takes,
                                       const std::vector<int>& lcore_nodes = {});
// Only what NUMA asks (a guest connected and its memory's node is known): a movable queue polled
// on another node than its own goes to the lcore of `takes` on its node that polls the fewest
// queues (after the moves before it); every other queue stays.
std::vector<size_t> assign_to_nodes(const std::vector<QueueLoad>& queues,
                                    const std::vector<bool>& takes,
                                    const std::vector<int>& lcore_nodes);

// Each lcore's load under `placement`: the sum of its queues' cycles.
std::vector<uint64_t> lcore_loads(const std::vector<QueueLoad>& queues,
                                  const std::vector<size_t>& placement, size_t lcores);
// How much more evenly `proposed` spreads the load than `current`: the variance of the lcores'
// loads, reduced by this many percent (0 when it is not reduced).
double improvement_pct(const std::vector<uint64_t>& current, const std::vector<uint64_t>& proposed);

}  // namespace vqs::app
