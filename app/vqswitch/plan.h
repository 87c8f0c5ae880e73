// The plan: which lcore polls which rx queue, and which tx queue each lcore uses on each port,
// worked out from a validated Config without starting anything (`vqswitch --check` prints it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config.h"

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
  // whether several lcores share one, so that a flush must take the queue's lock.
  std::vector<uint16_t> tx_queues;
  std::vector<bool> tx_shared;
  // xconnect: per port, the index of the port its packets go to.
  std::vector<int> xconnect_peer;
};

// Expands an EAL core list ("0-3,6") into lcore ids; nullopt if malformed.
std::optional<std::vector<unsigned>> parse_core_list(const std::string& cores);

// nullopt with `error` ("FILE: lcores: ...") when the placement is impossible: an lcore outside
// eal.cores, a queue polled twice or not at all, a port with nothing polling it.
std::optional<Plan> make_plan(const Config& config, std::string* error);

// Human-readable plan, as `vqswitch --check` prints it.
std::string format_plan(const Config& config, const Plan& plan);

}  // namespace vqs::app
