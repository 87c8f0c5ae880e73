// SPDX-License-Identifier: BSD-3-Clause
// Guest TX zero-copy: the packet's first bytes are copied into the mbuf (headers we parse and may
// rewrite live in our memory, fixed once checked); its payload is the guest's own buffers,
// attached as external buffers under a slot of the queue's ZeroCopyTracker.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "datapath/mbuf_stash.h"
#include "datapath/zero_copy_tracker.h"
#include "ring/io_vec.h"
#include "ring/virtio_net_hdr.h"

namespace vqs {

// Bytes copied into the head mbuf: Ethernet, a VLAN tag, IPv6 and a TCP header with options.
constexpr uint32_t kZeroCopyHeadLen = 128;
// Payload pieces (guest buffers, split at memory-region boundaries) one packet may lend.
constexpr uint32_t kZeroCopyMaxPieces = 64;
// The longest TCP header (data offset 15).
constexpr uint32_t kMaxL4HeaderLen = 60;

// Whether a packet with virtio-net header `hdr` may be lent: an offload request's headers
// (checksum field, L4 header from csum_start) must lie in the copied head, since we may rewrite
// them and never write to the guest's TX buffers (docs/architecture.md, "Dequeue zero-copy").
inline bool offload_fits_head(const VirtioNetHdr& hdr) {
  if (!(hdr.flags & kNetHdrFNeedsCsum)) return hdr.gso_type == kNetHdrGsoNone;
  const uint32_t start = hdr.csum_start;
  return start + kMaxL4HeaderLen <= kZeroCopyHeadLen &&
         start + hdr.csum_offset + 2 <= kZeroCopyHeadLen;
}

enum class LendResult {
  kLent,
  kNoSlot,         // the tracker's limit is reached: copy (and count it)
  kNotAttachable,  // no payload beyond the head, a piece over 64 KiB, or too many pieces: copy
  kPoolEmpty,      // no mbufs for the pieces: the packet stays in the ring
};

// Builds `head` (a fresh mbuf) as the `pkt_len`-byte packet after the `hdr_size`-byte header in
// `chain`, lending the chain at `desc_head` (`ring_slots` descriptors of a packed ring); payload
// segments come from `stash`. With `dma_ready` (GuestMapping::dma_ready) segments carry their
// address as buf_iova, else RTE_BAD_IOVA. Unless kLent, `head` is unchanged and nothing is lent.
LendResult lend_packet(const IoVecList& chain, uint32_t hdr_size, uint32_t pkt_len,
                       uint16_t desc_head, uint16_t ring_slots, rte_mbuf* head, MbufStash& stash,
                       ZeroCopyTracker& tracker, bool dma_ready);

}  // namespace vqs
