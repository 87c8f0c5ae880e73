// SPDX-License-Identifier: BSD-3-Clause
#include "control/rxq_balancer.h"

#include <cstdio>

#include "core/rxq_balance.h"
#include "ports/switch_log.h"

namespace vqs::app {

bool RxqBalancer::rebalance(bool force, Result* result, std::string* error) {
  const auto& lcores = switch_.lcores();
  const Config& config = switch_.config();
  if (config.rxq_assign == RxqAssign::kCycles && load_.interval_s() == 0) {
    result->why_not = "no load measured yet (the first interval takes 5 s)";
    return true;
  }
  std::vector<QueueLoad> queues;
  std::vector<const RxSlot*> slots;
  std::vector<bool> takes(lcores.size());
  std::vector<int> nodes(lcores.size());  // queues stay on their port's NUMA node where they can
  for (size_t i = 0; i < lcores.size(); ++i) {
    takes[i] = switch_.takes_auto_rx(i);
    nodes[i] = switch_.lcore_node(i);
    for (const RxSlot& s : lcores[i]->poller().slots()) {
      queues.push_back(
          {load_.queue(i, s).busy_cycles, i, !takes[i], switch_.port_node(s.port->index())});
      slots.push_back(&s);
    }
  }
  std::vector<size_t> current(queues.size());
  for (size_t q = 0; q < queues.size(); ++q) current[q] = queues[q].lcore;
  const std::vector<size_t> proposed = config.rxq_assign == RxqAssign::kCycles
                                           ? assign_by_cycles(queues, takes, nodes)
                                           : assign_round_robin(queues, takes, nodes);
  result->improvement_pct = improvement_pct(lcore_loads(queues, current, lcores.size()),
                                            lcore_loads(queues, proposed, lcores.size()));
  std::vector<Switch::RxMove> moves;
  for (size_t q = 0; q < queues.size(); ++q) {
    if (proposed[q] == current[q]) continue;
    moves.push_back({slots[q]->port->index(), slots[q]->queue, current[q], proposed[q]});
    result->moves.push_back({slots[q]->port->name(), slots[q]->queue, lcores[current[q]]->lcore(),
                             lcores[proposed[q]]->lcore()});
  }
  if (moves.empty()) {
    result->why_not = "every queue is where it would go";
    return true;
  }
  if (!force && result->improvement_pct < config.auto_balance.threshold_pct) {
    char text[128];
    std::snprintf(text, sizeof(text),
                  "the lcores' load variance would be %.0f %% lower, below the threshold (%u %%)",
                  result->improvement_pct, config.auto_balance.threshold_pct);
    result->why_not = text;
    result->moves.clear();
    return true;
  }
  if (!switch_.move_rx(moves, error)) return false;
  ++rebalances_;
  SWITCH_LOG(INFO, "rx queues placed again: %zu moved, the lcores' load variance %.0f %% lower",
             moves.size(), result->improvement_pct);
  return true;
}

void RxqBalancer::tick(uint64_t now_ms) {
  const AutoBalanceConfig& ab = switch_.config().auto_balance;
  if (!ab.enabled) return;
  if (next_ms_ == 0) next_ms_ = now_ms + ab.interval_s * 1000ull;
  if (now_ms < next_ms_) return;
  next_ms_ = now_ms + ab.interval_s * 1000ull;
  Result result;
  std::string error;
  if (!rebalance(false, &result, &error)) SWITCH_LOG(WARNING, "auto_balance: %s", error.c_str());
}

}  // namespace vqs::app
