// SPDX-License-Identifier: BSD-3-Clause
// Offload metadata between the virtio-net header and rte_mbuf. Guest TX: the header becomes
// receive metadata, as DPDK's virtio PMD presents it. Guest RX: tx requests become the header,
// done in software or refused when not negotiated; checksums go to the guest's copy, never the
// mbuf. TCP segmentation only. See docs/architecture.md, "Offloads".
#pragma once

#include <rte_mbuf.h>
#include "ring/virtio_net_hdr.h"

#include <cstdint>

#include "ring/io_vec.h"
#include "ring/net_features.h"
#include "ring/queue_stats.h"

namespace vqs {

// Bounds on a guest's GSO request (gso_size 1 would ask for ~64k frames): no real path needs an
// MSS below 88; 256 segments carry 64 KiB from an MSS of 256 and fit the switch's segmentation.
constexpr uint16_t kMinGuestGsoSize = 88;
constexpr uint32_t kMaxGuestGsoSegments = 256;

// Guest TX: maps `hdr` onto the freshly copied packet `m` (may complete a checksum in `m`).
// False for a GSO request that is not passed on (its type, layout or size is not allowed; see
// docs/architecture.md, "Offloads"): the caller drops the packet as kBadOffloadRequest.
[[nodiscard]] bool apply_guest_tx_offload(const VirtioNetHdr& hdr, rte_mbuf* m);

// A forwarder's step between the two: turns a guest TX packet's pending work (checksum not yet
// computed, or a TCP segment train) into the tx requests an output port acts on — another
// guest's RX header, a NIC's offloads, or software. Packets with nothing pending are unchanged.
inline void rx_offload_to_tx_request(rte_mbuf* m) {
  const uint64_t ol = m->ol_flags;
  if ((ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) != RTE_MBUF_F_RX_L4_CKSUM_NONE) return;
  uint64_t tx = 0;
  const uint32_t l3 = m->packet_type & RTE_PTYPE_L3_MASK;
  const bool ipv4 = RTE_ETH_IS_IPV4_HDR(l3);
  if (ipv4) {
    tx |= RTE_MBUF_F_TX_IPV4;
  } else if (RTE_ETH_IS_IPV6_HDR(l3)) {
    tx |= RTE_MBUF_F_TX_IPV6;
  } else {
    return;  // apply_guest_tx_offload completed any other checksum itself
  }
  const uint32_t l4 = m->packet_type & RTE_PTYPE_L4_MASK;
  if (ol & RTE_MBUF_F_RX_LRO) {
    // Each segment needs its TCP checksum and, for IPv4, its header checksum.
    tx |= RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_TCP_CKSUM | (ipv4 ? RTE_MBUF_F_TX_IP_CKSUM : 0);
  } else if (l4 == RTE_PTYPE_L4_TCP) {
    tx |= RTE_MBUF_F_TX_TCP_CKSUM;
  } else if (l4 == RTE_PTYPE_L4_UDP) {
    tx |= RTE_MBUF_F_TX_UDP_CKSUM;
  } else {
    return;
  }
  m->ol_flags = (ol & ~(RTE_MBUF_F_RX_L4_CKSUM_MASK | RTE_MBUF_F_RX_LRO)) | tx;
}

// Software fallback for an output without the offload: computes the TCP/UDP and IPv4 header
// checksums a tx request asks for (from scratch, whatever the fields hold) into `m`, which must
// be writable, and clears the request. False when `m` asks for segmentation (not done here) or
// its headers are not where l2_len/l3_len say.
bool complete_tx_checksum(rte_mbuf* m);

// Guest RX: the header to write, and bytes to patch in the packet's copy in guest memory.
struct GuestRxOffload {
  struct Patch {
    uint32_t offset;  // from the start of the packet (after the virtio-net header)
    uint8_t len;
    uint8_t bytes[4];
  };
  VirtioNetHdr hdr;
  uint8_t patch_count;
  Patch patches[2];
};

// Fills `out` for `m`. Returns DropReason::kCount when the packet can go to the guest, else why
// not: kTooLarge when it needs segmentation the guest did not negotiate, kBadOffloadRequest when
// the mbuf's offload request does not fit its headers.
DropReason plan_guest_rx_offload(const rte_mbuf* m, const NetFeatures& features,
                                 GuestRxOffload* out);

}  // namespace vqs
