// SPDX-License-Identifier: BSD-3-Clause
// The running switch: the mbuf pool, the ports in config order, the bridge, and one LcoreLoop
// per forwarding lcore, built from a Config and its Plan after EAL is up.
#pragma once

#include <rte_mempool.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "bridge/l2_bridge.h"
#include "config/config.h"
#include "config/plan.h"
#include "config/reload_plan.h"
#include "core/lcore_loop.h"
#include "ports/port.h"
#include "ring/dma_registrar.h"

namespace vqs::app {

// A port's counters summed over its queues (and, for a guest, the datapath's drop reasons).
struct PortTotals {
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0, tx_retries = 0;
  uint64_t switch_drops[kSwitchDropCount] = {};
  // Guests: the datapath's counters summed over every vring (both directions; its drops by
  // reason, notifications, zero-copy), named as kQueueCounters names them.
  QueueStats guest;
  uint64_t rx_missed = 0, rx_nombuf = 0, rx_errors = 0, tx_errors = 0;  // NICs (rte_eth_stats)
  uint64_t zerocopy_in_flight = 0;  // guests with zerocopy: lent now
  uint64_t zerocopy_wakeups = 0;    // ... completions that woke a sleeping lcore
  uint64_t zerocopy_orphans = 0;    // ... chains freed after their session ended
  uint64_t total_drops() const;
};

class Switch {
 public:
  // nullptr with `error` when a port or the pool cannot be created; nothing is left running.
  static std::unique_ptr<Switch> create(const Config& config, const Plan& plan, std::string* error);
  ~Switch();

  // Runs every lcore loop until `stop` is set, and `control` (statistics, aging) beside them: on
  // the calling (main lcore) thread, or on a thread of its own when the main lcore forwards too.
  // Returns when every loop and `control` have ended.
  void run(const std::atomic<bool>& stop, const std::function<void()>& control);
  void wake_all();  // async-signal-safe: wake sleeping loops so they see `stop`
  // Control threads: every lcore, at its next pass (woken if asleep), flushes its
  // tx buffers and asks its NIC tx queues to free the mbufs they have sent. A guest ring that
  // stops with buffers lent calls this while it waits for them (VhostDeviceOptions::release_lent).
  void request_tx_release();

  const Config& config() const { return config_; }  // as it was at start
  const Plan& plan() const { return plan_; }
  // By port index; nullptr where a port was deleted (the index is taken by the next add_port).
  const std::vector<std::unique_ptr<Port>>& ports() const { return ports_; }
  // The port named `name`, or -1.
  int port_index(const std::string& name) const;
  // The configuration of the port at `index` (from the file or add_port).
  const PortConfig& port_config(uint16_t index) const { return port_configs_[index]; }
  // The configuration as it runs: the file's, with the ports added and deleted since (in index
  // order) and the xconnect pairs as they are now. add_port validates against it.
  Config running_config() const;

  // Runtime ports (docs/architecture.md, "Runtime ports"), from the control thread while run()
  // forwards; no lcore takes a lock for them. add_port creates the port from `port` (checked by
  // parse_port), gives every lcore an output to it, and its rx queues to the lcores with the
  // fewest (among those with rx: auto); in xconnect mode it is paired with `peer` when given.
  // Returns its index, or nullopt with `error` (nothing changed).
  // `rx_lcores` (optional, by queue): the lcore id a queue goes to, where the file placed it.
  std::optional<uint16_t> add_port(const PortConfig& port, const std::string& peer,
                                   std::string* error,
                                   const std::vector<std::optional<unsigned>>* rx_lcores = nullptr);
  // Takes the port out of every lcore (its rx queues first, then, once its MAC entries are
  // flushed, its outputs), has `last_look(index)` read its final counters, then destroys it.
  // False with `error` when there is no such port or an lcore did not take the change in time
  // (then the port stays, unpolled, and is destroyed with the switch).
  bool del_port(const std::string& name, const std::function<void(uint16_t)>& last_look,
                std::string* error);
  // xconnect: pairs two ports that have no peer.
  bool add_pair(const std::string& a, const std::string& b, std::string* error);
  // xconnect: exactly these pairs from now on (reload); every port named must exist.
  bool set_pairs(const std::vector<std::pair<std::string, std::string>>& pairs, std::string* error);
  // Rx queues to other lcores (rxq-rebalance, auto_balance): each (port index, queue) leaves
  // its lcore, slot and counters with it, then joins lcore index `to`. Not polled in between
  // (its ring holds what arrives).
  struct RxMove {
    uint16_t port;
    uint16_t queue;
    size_t from;  // lcore indices
    size_t to;
  };
  bool move_rx(const std::vector<RxMove>& moves, std::string* error);
  // Whether the lcore at `index` takes rx queues that are not placed by the file (rx: auto).
  bool takes_auto_rx(size_t index) const { return auto_rx_[lcores_[index]->slot()]; }

  // What reload compares the file with: running_config(), where each rx queue is polled with
  // what weight, and each lcore's busy-poll.
  RunningSwitch running_state() const;
  // Held exclusively by add_port and del_port while they change ports and lcores; other threads
  // than the control thread (telemetry) hold it shared while they read them.
  std::shared_mutex& topology_mutex() const { return topology_mutex_; }
  // Bumped by every add_port and del_port: per-slot snapshots taken before are stale.
  uint64_t topology_generation() const {
    return topology_generation_.load(std::memory_order_acquire);
  }
  const std::vector<std::unique_ptr<LcoreLoop>>& lcores() const { return lcores_; }
  L2Bridge* bridge() const { return bridge_.get(); }
  // The mbuf pools, one per NUMA node the plan found (Plan::pools), in node order.
  struct NodePool {
    int node = 0;
    rte_mempool* pool = nullptr;
  };
  const std::vector<NodePool>& pools() const { return pools_; }
  // The pool of `node`, or nullptr where there is none.
  rte_mempool* pool_for_node(int node) const;
  // NUMA nodes: of the lcore at `index` (its CPU's), and of a port (a NIC's device; a guest's
  // memory, once connected), -1 when not known.
  int lcore_node(size_t index) const { return plan_.lcores[index].node; }
  int port_node(uint16_t index) const;
  PortTotals totals(uint16_t port) const;
  // Control thread, periodically: bridge aging; guests gone with buffers lent reaped; rx queues
  // of guests that connected on another NUMA node than their lcore's moved to an lcore there
  // (with rx: auto), or a warning.
  void housekeeping();

 private:
  Switch(const Config& config, const Plan& plan) : config_(config), plan_(plan) {}
  // build()'s steps, in order.
  bool build(std::string* error);
  bool create_pools(std::string* error);
  bool create_ports(std::string* error);
  bool create_forwarding(std::string* error);
  void create_lcores();
  // The tx buffers of the lcore in `slot`: one output per port.
  std::vector<TxBufferSet::Output> tx_outputs(uint16_t slot) const;
  TxBufferSet::Output tx_output(const Port& port, uint16_t slot) const;
  // The port at `index` from port_configs_, its rx queues taking mbufs from `pool`.
  bool create_port(uint16_t index, rte_mempool* pool, std::string* error);
  // The pool a port added at run time takes mbufs from: its device's node's (NICs), else the
  // first.
  rte_mempool* pool_for_added(const PortConfig& port) const;
  // housekeeping(): queues polled on another node than their port's, where an lcore with rx:
  // auto on that node can take them; a warning, once, for those that stay.
  void place_by_node();
  // Hands a change to every lcore (`change_for(loop)`), then waits for them all.
  bool apply_to_lcores(const std::function<LcoreChange(const LcoreLoop&)>& change_for,
                       std::string* error);
  // A new forwarding table from the current one, changed by `edit`, with the VLAN map of the
  // ports there are now but `leaving` (bridge). The old table is retired (retire_forwarding)
  // once every lcore has the new one.
  const Forwarding* next_forwarding(const std::function<void(Forwarding&)>& edit, int leaving,
                                    const VlanMap** vlans, std::string* error);
  void retire_forwarding();
  bool mbufs_for(const PortConfig& port, rte_mempool* pool, std::string* error) const;
  // With zero-copy guests: how each NIC takes lent buffers (EthdevPort::set_lent, a warning for
  // those that get copies), and the registrar mapping guest memory for the NICs that can DMA
  // from it (IOVA as VA). After the NICs exist, before the guests.
  void plan_lent_buffers();
  // Each zero-copy guest lends only while one of its outputs takes lent buffers as they are (a
  // NIC whose EthdevPort::lent() is not kCopy): toward guests and copying NICs the frame is
  // copied anyway, and lending only adds its bookkeeping (docs/benchmarks.md, "Zero-copy between
  // two guests"). After every change to the ports or the forwarding table.
  void update_lending();
  // Whether port `to` sends lent guest buffers as they are.
  bool takes_lent(int to) const;

  const Config config_;
  const Plan plan_;
  std::vector<PortConfig> port_configs_;  // by port index (a deleted port's: name empty)
  std::vector<bool> auto_rx_;             // by lcore slot: takes the queues of added ports
  std::vector<NodePool> pools_;
  rte_mempool* gso_pool_ = nullptr;              // indirect mbufs for software TCP segmentation
  std::unique_ptr<DmaRegistrar> dma_registrar_;  // outlives the guests: declared before ports_
  std::vector<std::unique_ptr<Port>> ports_;
  std::unique_ptr<L2Bridge> bridge_;
  std::unique_ptr<Forwarding> forwarding_;                       // what the lcores forward by
  std::vector<std::unique_ptr<Forwarding>> retired_forwarding_;  // until every lcore moved on
  std::vector<std::unique_ptr<Port>> detached_;  // deleted, but an lcore never confirmed it
  mutable std::shared_mutex topology_mutex_;
  std::atomic<uint64_t> topology_generation_{0};
  std::vector<std::unique_ptr<LcoreLoop>> lcores_;
  std::set<std::string> cross_node_warned_;  // "port:queue:node" placements warned about
  const std::atomic<bool>* stop_ = nullptr;
  LcoreSignals lcore_signals_;  // see request_tx_release, LcoreLoop::apply
  std::mutex release_mutex_;    // request_tx_release against the lcores' destruction
};

}  // namespace vqs::app
