// SPDX-License-Identifier: BSD-3-Clause
// A port of the switch: a guest (served by our datapath library) or a NIC (any DPDK ethdev).
// Calls are per burst; one lcore per rx queue, and per tx queue unless the plan marks the tx
// queue shared (then the caller holds tx_lock()).
#pragma once

#include <rte_mbuf.h>
#include <rte_spinlock.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ring/virtqueue.h"

namespace vqs::app {

// Why the switch lost a packet (the datapath's own reasons are counted by the port, see
// QueueStats). Every drop is counted under exactly one reason.
enum class SwitchDrop : uint8_t {
  kTxGuestFull,    // guest RX ring stayed full through tx_retries_max retries
  kTxQueueFull,    // NIC tx queue stayed full through tx_retries_max retries
  kLinkDown,       // output guest not connected, or its queue not enabled
  kNoRoute,        // bridge: no output port (own port, other VLAN, or flood to nobody)
  kVlanFiltered,   // bridge: VLAN not allowed on the input port
  kMbufExhausted,  // flood copy or VLAN tag push could not get an mbuf
  kTxUnsupported,  // the output cannot send it: segmentation or a chained mbuf it lacks
  kCount,
};
constexpr int kSwitchDropCount = static_cast<int>(SwitchDrop::kCount);
const char* switch_drop_name(SwitchDrop reason);

// Counters a port keeps per queue, besides the datapath's.
struct alignas(64) PortQueueCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_retries = 0;
  uint64_t drops[kSwitchDropCount] = {};
  void count_drop(SwitchDrop reason, uint64_t n = 1) { drops[static_cast<int>(reason)] += n; }
};

class Port {
 public:
  Port(std::string name, uint16_t index) : name_(std::move(name)), index_(index) {}
  virtual ~Port() = default;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  const std::string& name() const { return name_; }
  uint16_t index() const { return index_; }  // in Config::ports

  virtual bool is_guest() const = 0;
  virtual uint16_t rx_queue_count() const = 0;
  virtual uint16_t tx_queue_count() const = 0;
  virtual bool link_up() const = 0;

  // Up to `max_packets` packets and about `max_bytes` bytes (at least one packet is taken when
  // any is there). mbuf->port is set to index().
  virtual BurstResult rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t max_packets,
                               uint32_t max_bytes) = 0;
  // Sends from the front of `pkts`; returns how many were consumed (sent, or dropped and counted
  // by the datapath, and freed). The rest are still the caller's: the queue is full.
  virtual uint16_t tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count) = 0;
  // Before tx_burst, under the same lock: makes `pkts` sendable on this port (offload requests
  // the device lacks done in software) and drops, frees and counts (tx_unsupported) what cannot
  // be sent. Returns how many remain, compacted to the front.
  virtual uint16_t tx_prepare(uint16_t /*queue*/, rte_mbuf** /*pkts*/, uint16_t count) {
    return count;
  }
  // For a guest: whether the tx queue may be used now (connected, queue enabled). A NIC: always.
  virtual bool tx_ready(uint16_t queue) const = 0;
  // Whether a TCP segment train (TSO request) must be cut into segments before tx_burst: the
  // device cannot segment it (no TSO), or the guest did not negotiate GUEST_TSO4 + GUEST_CSUM.
  virtual bool needs_tcp_segmentation() const { return false; }
  // The tx queue that stands in for `queue` now: itself, or for a guest that enabled fewer queue
  // pairs, an enabled one. Read once per flush; the flush then takes that queue's lock.
  virtual uint16_t tx_queue_in_use(uint16_t queue) const { return queue; }

  // Sleep support. watch_rx_wake adds the rx queue's wake-up source (guest kicks, NIC rx
  // interrupt) to the epoll set `epfd`, to be waited on with rte_epoll_wait, which hands `data`
  // back; or removes it (add false). False when the queue cannot wake a sleeper. arm_rx_wake
  // enables the wake-up before a sleep and disables it after.
  virtual bool watch_rx_wake(uint16_t queue, int epfd, bool add, void* data) = 0;
  virtual bool arm_rx_wake(uint16_t queue, bool armed) = 0;

  // Asks the device to free the mbufs of packets it has finished sending on tx queue `queue`
  // (rte_eth_tx_done_cleanup); called as tx_burst is (by the queue's lcore, or under its lock).
  // Returns the packets freed, or -ENOTSUP when the device cannot. A guest holds no mbufs.
  virtual int tx_done_cleanup(uint16_t /*queue*/) { return 0; }

  // Called by the lcore that transmits on the port, between bursts: deferred work such as
  // coalesced guest notifications whose time has come. Returns whether deferred work remains.
  virtual bool tx_housekeeping(uint16_t /*queue*/, uint64_t /*now_tsc*/) { return false; }

  rte_spinlock_t* tx_lock(uint16_t queue) { return &tx_locks_[queue].lock; }
  PortQueueCounters& rx_counters(uint16_t queue) { return rx_counters_[queue]; }
  PortQueueCounters& tx_counters(uint16_t queue) { return tx_counters_[queue]; }

 protected:
  void init_queues(uint16_t rx, uint16_t tx);

 private:
  struct alignas(64) TxLock {
    rte_spinlock_t lock = RTE_SPINLOCK_INITIALIZER;
  };
  const std::string name_;
  const uint16_t index_;
  std::unique_ptr<TxLock[]> tx_locks_;
  std::unique_ptr<PortQueueCounters[]> rx_counters_;
  std::unique_ptr<PortQueueCounters[]> tx_counters_;
};

}  // namespace vqs::app
