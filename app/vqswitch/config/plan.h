// SPDX-License-Identifier: BSD-3-Clause
// The plan: which lcore polls which rx queue, and which tx queue each lcore uses on each port,
// worked out from a validated Config without starting anything (`vqswitch --check` prints it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace vqs::app {

struct PlannedRxQueue {
  uint16_t port = 0;  // index into Config::ports
  uint16_t queue = 0;
  Weight weight;
};

struct PlannedLcore {
  unsigned lcore = 0;  // EAL lcore id
  uint16_t slot = 0;   // 0..forwarding lcores - 1: the lcore's tx queue on every port is derived
                       // from it
  bool is_main = false;
  std::vector<PlannedRxQueue> rx;
  std::optional<uint32_t> busy_poll_us;
};

struct Plan {
  std::vector<unsigned> eal_lcores;  // expanded eal.cores
  unsigned main_lcore = 0;
  std::vector<PlannedLcore> lcores;  // forwarding lcores, in slot order
  // Per port: tx queues to set up (ethdev: one per forwarding lcore; vhost: the queue pairs) and
  // whether several lcores may share one, so that a flush must take the queue's lock (a guest
  // with more than one lcore: it may enable fewer queue pairs, then lcores share the enabled).
  std::vector<uint16_t> tx_queues;
  std::vector<bool> tx_shared;
  // xconnect: per port, the index of the port its packets go to; -1 in bridge mode.
  std::vector<int> xconnect_peer;

  // The tx queue the lcore in `slot` uses on `port`: its own on an ethdev, slot % queues on a
  // guest.
  uint16_t tx_queue(uint16_t port, uint16_t slot) const { return slot % tx_queues[port]; }
};

// Expands an EAL core list ("0-3,6": ids and ranges, blanks allowed around them) into lcore ids,
// sorted; nullopt if malformed, empty, with an id >= kMaxLcores, a range going down or an id twice.
std::optional<std::vector<unsigned>> parse_core_list(const std::string& cores);
// The inverse, canonical: {0, 1, 2, 3, 6} -> "0-3,6" (what the EAL's -l gets).
std::string format_core_list(const std::vector<unsigned>& lcores);

// nullopt with `error` (Config::error_at: "FILE:LINE:COLUMN: KEY: ...") when the placement is
// impossible: a malformed eal.cores, a main lcore or lcore outside it, an lcore listed twice, an rx
// queue of an unknown port or out of range, a queue polled twice or not at all.
std::optional<Plan> make_plan(const Config& config, std::string* error);

// Human-readable plan, as `vqswitch --check` prints it.
std::string format_plan(const Config& config, const Plan& plan);

}  // namespace vqs::app
