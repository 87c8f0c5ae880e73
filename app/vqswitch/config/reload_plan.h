// SPDX-License-Identifier: BSD-3-Clause
// `vqswitchctl reload`: what must change to run a re-read configuration file, worked out before
// anything is touched, or why it cannot be done without a restart. No DPDK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace vqs::app {

// An rx queue as it is polled now.
struct PolledQueue {
  std::string port;
  uint16_t queue = 0;
  unsigned lcore = 0;
  Weight weight;
};

// What the switch runs now: its configuration (Switch::running_config), where each rx queue is
// polled and with what weight, and each forwarding lcore's busy-poll setting.
struct RunningSwitch {
  Config config;
  std::vector<PolledQueue> queues;
  std::vector<std::pair<unsigned, std::optional<uint32_t>>> busy_poll;  // by lcore id
};

struct ReloadPlan {
  std::vector<std::string> removed;  // ports to delete
  // Ports to add, with the lcore each rx queue goes to when the file places it (else the
  // least loaded).
  struct Added {
    PortConfig port;
    std::vector<std::optional<unsigned>> rx_lcores;  // by queue
  };
  std::vector<Added> added;
  std::vector<std::string> recreated;  // among both: a setting other than weights changed
  std::vector<PolledQueue> weights;    // queues of kept ports whose weight changes
  std::vector<std::pair<unsigned, std::optional<uint32_t>>> busy_poll;  // lcores that change
  std::vector<std::pair<std::string, std::string>> pairs;               // xconnect, afterwards
  bool pairs_change = false;
  bool empty() const {
    return removed.empty() && added.empty() && weights.empty() && busy_poll.empty() &&
           !pairs_change;
  }
};

// nullopt with `error` ("FILE:LINE:COLUMN: KEY: cannot change while vqswitch runs ...") when
// `next` differs from `now` in what is fixed at start: eal, mbufs, burst, stats_interval_s,
// control, the forwarding mode and table, the forwarding lcores, or an rx queue of a port kept
// listed on another lcore than the one polling it.
std::optional<ReloadPlan> plan_reload(const RunningSwitch& now, const Config& next,
                                      std::string* error);

}  // namespace vqs::app
