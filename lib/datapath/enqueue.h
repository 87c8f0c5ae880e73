// SPDX-License-Identifier: BSD-3-Clause
// mbufs -> guest RX: the device side of a guest's receive queue.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "ring/virtqueue.h"

namespace vqs {

// Copies `pkts` into the guest's posted receive buffers, in order, with mergeable buffers when
// negotiated. Returns in `packets` how many mbufs were consumed from the front of `pkts` —
// delivered, or dropped and counted (too large, or needing an offload the guest lacks) — and in
// `bytes` the bytes delivered. The caller frees the consumed mbufs; the rest found no guest
// buffer and are still the caller's. A packet that does not fit never consumes guest buffers.
BurstResult enqueue_burst(VirtQueue& vq, rte_mbuf* const* pkts, uint16_t count);

}  // namespace vqs
