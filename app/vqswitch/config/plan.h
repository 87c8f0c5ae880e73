// SPDX-License-Identifier: BSD-3-Clause
// The plan: which lcore polls which rx queue, and which tx queue each lcore uses on each port,
// worked out from a validated Config without starting anything (`vqswitch --check` prints it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/numa_topology.h"

namespace vqs::app {

// Mbufs each lcore's cache of a pool may hold, and the smallest pool made.
constexpr uint32_t kMempoolCache = 256;
constexpr uint32_t kMinMbufs = 8192;

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
  int node = kAnyNode;  // its CPU's NUMA node
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
  // NUMA: per port, its node (kAnyNode for a vdev, and for a guest until it connects: its node
  // is its memory's); one mbuf pool per node with forwarding lcores or ports, in node order,
  // with the mbufs it gets; per port, the node of the pool its rx queues take mbufs from (its
  // own, else that of the lcore polling its queue 0; a guest moves to its memory's when it
  // connects, where there is a pool).
  std::vector<int> port_nodes;
  struct Pool {
    int node = 0;
    uint32_t mbufs = 0;
  };
  std::vector<Pool> pools;
  std::vector<int> port_pool_nodes;

  // The tx queue the lcore in `slot` uses on `port`: its own on an ethdev, slot % queues on a
  // guest.
  uint16_t tx_queue(uint16_t port, uint16_t slot) const { return slot % tx_queues[port]; }
  // Whether `lcore` polling a queue of `port` reaches across NUMA nodes (both nodes known).
  bool cross_node(uint16_t port, const PlannedLcore& lcore) const {
    return port_nodes[port] != kAnyNode && lcore.node != kAnyNode && port_nodes[port] != lcore.node;
  }
};

// Expands an EAL core list ("0-3,6": ids and ranges, blanks allowed around them) into lcore ids,
// sorted; nullopt if malformed, empty, with an id >= kMaxLcores, a range going down or an id twice.
std::optional<std::vector<unsigned>> parse_core_list(const std::string& cores);
// The inverse, canonical: {0, 1, 2, 3, 6} -> "0-3,6" (what the EAL's -l gets).
std::string format_core_list(const std::vector<unsigned>& lcores);

// nullopt with `error` (Config::error_at: "FILE:LINE:COLUMN: KEY: ...") when the placement is
// impossible: a malformed eal.cores, a main lcore or lcore outside it, an lcore listed twice, an rx
// queue of an unknown port or out of range, a queue polled twice or not at all. Queues not
// listed go to the lcores with rx: auto on their port's NUMA node where there are any (else to
// any, and cross_node() says so). Nodes are `topology`'s: they never make a plan fail.
std::optional<Plan> make_plan(const Config& config, const NumaTopology& topology,
                              std::string* error);
inline std::optional<Plan> make_plan(const Config& config, std::string* error) {
  return make_plan(config, system_numa_topology(), error);
}

// Human-readable plan, as `vqswitch --check` prints it.
std::string format_plan(const Config& config, const Plan& plan);

}  // namespace vqs::app
