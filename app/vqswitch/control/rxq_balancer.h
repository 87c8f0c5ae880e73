// SPDX-License-Identifier: BSD-3-Clause
// Places rx queues again by their measured load: on request (`vqswitchctl rxq-rebalance`, OVS's
// dpif-netdev/pmd-rxq-rebalance) and, with auto_balance, every interval when the lcores' load
// would spread more evenly by the threshold (OVS's pmd-auto-lb). Control thread; the lcores take
// the moves through Switch::move_rx.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/load_sampler.h"
#include "core/switch.h"

namespace vqs::app {

class RxqBalancer {
 public:
  RxqBalancer(Switch& sw, const LoadSampler& load) : switch_(sw), load_(load) {}

  struct Move {
    std::string port;
    uint16_t queue;
    unsigned from;  // lcore ids
    unsigned to;
  };
  struct Result {
    std::vector<Move> moves;  // applied (empty when nothing moved)
    double improvement_pct = 0;
    std::string why_not;  // empty when the queues were placed again
  };
  // Places the queues of the rx: auto lcores again, as rxq_assign says: by the busy cycles of
  // the last interval (largest first onto the least loaded), or in turn. Unless `force`, only
  // when that lowers the variance of the lcores' load by auto_balance.threshold_pct. False with
  // `error` when an lcore did not take the move.
  bool rebalance(bool force, Result* result, std::string* error);
  // From the control loop: with auto_balance, a rebalance every interval_s.
  void tick(uint64_t now_ms);
  uint64_t rebalances() const { return rebalances_; }

 private:
  Switch& switch_;
  const LoadSampler& load_;
  uint64_t next_ms_ = 0;
  uint64_t rebalances_ = 0;
};

}  // namespace vqs::app
