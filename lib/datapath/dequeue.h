// SPDX-License-Identifier: BSD-3-Clause
// Guest TX -> mbufs: the device side of a guest's transmit queue.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "datapath/lend_policy.h"
#include "ring/virtqueue.h"

namespace vqs {

// Takes up to `max_packets` packets from `vq` into `pkts`, copied into mbufs from `pool` or lent
// as `lending` says. Stops when the ring is empty, `max_bytes` are taken (at least one packet is)
// or the pool runs dry (the rest stay posted); invalid chains are dropped and counted. Returns
// packets and bytes delivered. See docs/architecture.md, "Dequeue (guest TX)".
BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes, const LendPolicy& lending = {});

}  // namespace vqs
