// SPDX-License-Identifier: BSD-3-Clause
// Guest TX -> mbufs: the device side of a guest's transmit queue.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "datapath/lend_policy.h"
#include "ring/virtqueue.h"

namespace vqs {

// Takes up to `max_packets` packets from `vq` into `pkts`, copied into mbufs from `pool` (chained
// when larger than one mbuf). Stops early when the ring is empty, when `max_bytes` are taken (at
// least one packet is), or when the pool runs dry (the rest stay in the guest's ring). Invalid or
// oversized chains are consumed, counted and dropped. Packets are lent instead as `lending` says.
// Returns the packets and bytes delivered.
BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes, const LendPolicy& lending = {});

}  // namespace vqs
