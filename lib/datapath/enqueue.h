// SPDX-License-Identifier: BSD-3-Clause
// mbufs -> guest RX: the device side of a guest's receive queue.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "ring/virtqueue.h"

namespace vqs {

// Copies `pkts` into the guest's posted receive buffers, in order. Returns in `packets` the mbufs
// consumed from the front of `pkts` (delivered, or dropped and counted), which the caller frees,
// and in `bytes` those delivered; the rest found no guest buffer and stay the caller's.
// See docs/architecture.md, "Enqueue (guest RX)".
BurstResult enqueue_burst(VirtQueue& vq, rte_mbuf* const* pkts, uint16_t count);

}  // namespace vqs
