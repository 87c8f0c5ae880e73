// SPDX-License-Identifier: BSD-3-Clause
#include "ports/guest_port.h"

#include <rte_log.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "datapath/net_offload.h"
#include "ports/switch_log.h"
#include "ring/net_features.h"

namespace vqs::app {

GuestPort::GuestPort(const PortConfig& config, uint16_t index, rte_mempool* pool)
    : Port(config.name, index),
      config_(config),
      pool_(pool),
      kick_epfd_(std::make_unique<int[]>(config.queues)),
      kick_events_(std::make_unique<rte_epoll_event[]>(config.queues)),
      tx_queue_map_(std::make_unique<std::atomic<uint16_t>[]>(config.queues)) {
  init_queues(config.queues, config.queues);
  for (uint16_t q = 0; q < config.queues; ++q) {
    kick_epfd_[q] = -1;
    tx_queue_map_[q].store(q, std::memory_order_relaxed);
  }
}

std::unique_ptr<GuestPort> GuestPort::create(const PortConfig& config, uint16_t index,
                                             rte_mempool* pool, SwitchHooks hooks,
                                             std::string* error) {
  std::unique_ptr<GuestPort> port(new GuestPort(config, index, pool));
  VhostDeviceOptions options;
  static_cast<VhostPortOptions&>(options) = config.vhost;
  options.path = config.socket;
  options.queue_pairs = config.queues;
  options.release_lent = std::move(hooks.release_lent);
  options.dma_registrar = hooks.dma_registrar;
  options.decision_clock = hooks.decision_clock;
  port->pool_for_node_ = std::move(hooks.pool_for_node);
  port->device_ = VhostDevice::create(options, port.get(), error);
  if (port->device_ == nullptr) return nullptr;
  for (uint16_t q = 0; q < config.queues; ++q) {
    port->kick_epfd_[q] = epoll_create1(EPOLL_CLOEXEC);
    if (port->kick_epfd_[q] < 0) {
      *error = "epoll_create1 failed";
      return nullptr;
    }
    port->device_->set_kick_waiter(guest_tx_vring(q), port->kick_epfd_[q]);
  }
  port->map_tx_queues();
  if (port->device_->link_up()) port->choose_pool();
  return port;
}

GuestPort::~GuestPort() {
  if (device_ != nullptr) {
    device_->set_datapath_enabled(false);
    for (uint16_t q = 0; q < config_.queues; ++q)
      if (kick_epfd_[q] >= 0) device_->set_kick_waiter(guest_tx_vring(q), -1);
    device_.reset();
  }
  for (uint16_t q = 0; q < config_.queues; ++q)
    if (kick_epfd_[q] >= 0) close(kick_epfd_[q]);
}

bool GuestPort::watch_rx_wake(uint16_t queue, int epfd, bool add, void* data) {
  rte_epoll_event& ev = kick_events_[queue];
  if (add) {
    ev = rte_epoll_event{};
    ev.epdata.event = EPOLLIN;
    ev.epdata.data = data;
  }
  return rte_epoll_ctl(epfd, add ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, kick_epfd_[queue], &ev) == 0;
}

BurstResult GuestPort::rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t max_packets,
                                uint32_t max_bytes) {
  const BurstResult r = device_->receive_burst(queue, pool_.load(std::memory_order_relaxed), pkts,
                                               max_packets, max_bytes);
  for (uint16_t i = 0; i < r.packets; ++i) {
    pkts[i]->port = index();
    // A checksum the guest left to us (or a TSO train) is now the output's to finish.
    rx_offload_to_tx_request(pkts[i]);
  }
  return r;
}

uint16_t GuestPort::tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count) {
  // Deferred notifications are tx_housekeeping's. Consumed: delivered, or dropped and counted by
  // the datapath; the rest found no guest buffer.
  return device_->send_burst(queue, pkts, count, /*flush_deferred=*/false);
}

bool GuestPort::needs_tcp_segmentation() const {
  const NetFeatures features = NetFeatures::from_bits(device_->negotiated_features());
  return !features.guest_tso4 || !features.guest_csum;
}

bool GuestPort::tx_housekeeping(uint16_t queue, uint64_t now_tsc) {
  // Suspended for a moment (a message being handled): look again later. Gone: nothing is owed.
  return device_->flush_notifications(queue, now_tsc);
}

void GuestPort::on_link_change(bool up) {
  SWITCH_LOG(INFO, "port %s: guest %s", name().c_str(), up ? "connected" : "disconnected");
  if (up) choose_pool();
  map_tx_queues();
}

void GuestPort::choose_pool() {
  std::lock_guard lock(tx_queue_map_mutex_);
  if (device_ == nullptr || !pool_for_node_) return;  // connected while create() runs: after
  // Its packets are copied out of its memory into these mbufs, then sent on from them: on its
  // node where there is a pool (OVS-DPDK does the same).
  const int node = device_->memory_node();
  rte_mempool* pool = node >= 0 ? pool_for_node_(node) : nullptr;
  if (pool == nullptr || pool == pool_.load(std::memory_order_relaxed)) return;
  pool_.store(pool, std::memory_order_relaxed);
  SWITCH_LOG(INFO, "port %s: guest memory on node %d: mbufs from that node's pool", name().c_str(),
             node);
}

void GuestPort::map_tx_queues() {
  std::lock_guard lock(tx_queue_map_mutex_);
  if (device_ == nullptr) return;  // a guest that connects while create() runs: mapped after
  const uint16_t pairs = config_.queues;
  std::vector<uint16_t> enabled;
  std::vector<bool> own(pairs);
  for (uint16_t q = 0; q < pairs; ++q) {
    own[q] = device_->vring_enabled(guest_rx_vring(q));
    if (own[q]) enabled.push_back(q);
  }
  // With none enabled every queue keeps its own, and its flushes count link_down.
  for (uint16_t q = 0; q < pairs; ++q)
    tx_queue_map_[q].store(own[q] || enabled.empty() ? q : enabled[q % enabled.size()],
                           std::memory_order_relaxed);
}

}  // namespace vqs::app
