// SPDX-License-Identifier: BSD-3-Clause
// A guest port: one vhost-user socket served natively by our datapath library (no ethdev), so
// a process is not bound by RTE_MAX_ETHPORTS. rx queue q is the guest's TX vring 2q + 1, tx queue
// q its RX vring 2q.
#pragma once

#include <rte_interrupts.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "config/config.h"
#include "ports/port.h"
#include "vhost/vhost_device.h"

namespace vqs::app {

class GuestPort final : public Port, private VhostDevice::Listener {
 public:
  // Registers the socket (listening, or connecting in client mode). nullptr with `error` set when
  // librte_vhost refuses it.
  // From the switch. For zero-copy (see VhostDeviceOptions): how to have lent buffers released
  // (Switch::request_tx_release), and the registrar that maps guest memory for its NICs. For
  // NUMA: the pool of a node (nullptr: none there), asked when the guest connects.
  struct SwitchHooks {
    std::function<void()> release_lent;
    DmaRegistrar* dma_registrar = nullptr;
    std::function<rte_mempool*(int node)> pool_for_node;
    SplitRing::Clock decision_clock = nullptr;  // VhostDeviceOptions::decision_clock
  };
  // `pool`: where mbufs come from until a guest connects on a node that has one.
  static std::unique_ptr<GuestPort> create(const PortConfig& config, uint16_t index,
                                           rte_mempool* pool, SwitchHooks hooks,
                                           std::string* error);
  ~GuestPort() override;

  // Admits the datapath (or, false, waits until no lcore is inside a burst).
  void set_enabled(bool enabled) { device_->set_datapath_enabled(enabled); }
  const VhostDevice& device() const { return *device_; }
  // With zerocopy: whether its TX lends (VhostDevice::set_lending; Switch::update_lending).
  void set_lending(bool lend) { device_->set_lending(lend); }
  // Control thread, now and then: VhostDevice::reap_orphans.
  void reap_orphans() { device_->reap_orphans(); }
  const PortConfig& config() const { return config_; }
  // The NUMA node of the guest's memory, -1 until it connects (VhostDevice::memory_node).
  int numa_node() const { return device_->memory_node(); }
  // The pool its rx queues take mbufs from now.
  rte_mempool* pool() const { return pool_.load(std::memory_order_relaxed); }

  bool is_guest() const override { return true; }
  uint16_t rx_queue_count() const override { return device_->queue_pairs(); }
  uint16_t tx_queue_count() const override { return device_->queue_pairs(); }
  bool link_up() const override { return device_->link_up(); }
  BurstResult rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t max_packets,
                       uint32_t max_bytes) override;
  uint16_t tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count) override;
  bool tx_ready(uint16_t queue) const override {
    return device_->vring_ready(guest_rx_vring(queue));
  }
  bool watch_rx_wake(uint16_t queue, int epfd, bool add, void* data) override;
  bool arm_rx_wake(uint16_t queue, bool armed) override {
    return device_->arm_kicks(guest_tx_vring(queue), armed);
  }
  bool needs_tcp_segmentation() const override;
  uint16_t tx_queue_in_use(uint16_t queue) const override {
    return tx_queue_map_[queue].load(std::memory_order_relaxed);
  }
  bool tx_housekeeping(uint16_t queue, uint64_t now_tsc) override;

 private:
  GuestPort(const PortConfig& config, uint16_t index, rte_mempool* pool);
  void on_link_change(bool up) override;
  void on_vring_state(uint16_t, bool) override { map_tx_queues(); }
  // Points every tx queue at itself when the guest enabled it, else at an enabled one.
  void map_tx_queues();
  // The pool of the guest's memory node, where the switch has one.
  void choose_pool();

  const PortConfig config_;
  // Read once per burst; set by librte_vhost's thread when a guest connects (mbufs already
  // taken go back to their own pool).
  std::atomic<rte_mempool*> pool_;
  std::function<rte_mempool*(int node)> pool_for_node_;
  std::unique_ptr<VhostDevice> device_;
  // Per rx queue, for sleeping lcores: an epoll set holding the current kickfd (it changes when
  // the guest reconnects), and its entry in the lcore's set.
  std::unique_ptr<int[]> kick_epfd_;
  std::unique_ptr<rte_epoll_event[]> kick_events_;
  std::unique_ptr<std::atomic<uint16_t>[]> tx_queue_map_;
  std::mutex tx_queue_map_mutex_;  // librte_vhost's thread and the owner's both remap (and
                                   // choose the pool)
};

}  // namespace vqs::app
