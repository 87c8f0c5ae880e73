// SPDX-License-Identifier: BSD-3-Clause
// Guest TX -> mbufs: the device side of a guest's transmit queue.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "ring/virtqueue.h"

namespace vqs {

class ZeroCopyTracker;

// Guest TX packets of at least this many bytes may be lent instead of copied (as Linux vhost-net's
// GOODCOPY_LEN): below it a copy costs less than the bookkeeping.
constexpr uint32_t kDefaultZeroCopyMinLen = 256;

// How a guest TX queue lends its packets (dequeue zero-copy). The default copies every packet.
struct LendPolicy {
  // Lends packets of at least min_len bytes through this tracker (started by the owner for the
  // ring's size); nullptr: always copy. Ignored on an IN_ORDER ring: lent chains return out of
  // order (IN_ORDER is not offered with zero-copy).
  ZeroCopyTracker* tracker = nullptr;
  uint32_t min_len = kDefaultZeroCopyMinLen;
  // At the in-flight limit: copy (true), or leave the packet in the ring until a lent chain
  // comes back (false; benchmarks only: the head-of-line blocking the copy prevents).
  bool fallback = true;
};

// Takes up to `max_packets` packets from `vq` into `pkts`, copied into mbufs from `pool` (chained
// when larger than one mbuf). Stops early when the ring is empty, when `max_bytes` are taken (at
// least one packet is), or when the pool runs dry (the rest stay in the guest's ring). Invalid or
// oversized chains are consumed, counted and dropped. Packets are lent instead as `lending` says.
// Returns the packets and bytes delivered.
BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes, const LendPolicy& lending = {});

}  // namespace vqs
