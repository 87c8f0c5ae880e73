// Offload metadata between the virtio-net header and rte_mbuf.
//
// Guest TX (dequeue): the header becomes receive-side metadata, as DPDK's own virtio PMD and
// librte_vhost's compliant mode present it to applications: NEEDS_CSUM ->
// RTE_MBUF_F_RX_L4_CKSUM_NONE (checksum not yet computed), GSO -> RTE_MBUF_F_RX_LRO with tso_segsz;
// packet_type, l2/l3/l4_len are filled so that an application forwarding the packet only has to set
// the tx flags.
//
// Guest RX (enqueue): the mbuf's tx offload requests become the header. What the guest did not
// negotiate is done in software (checksums) or refused (segmentation). Checksums are written into
// the guest's copy, never into the mbuf, which may be shared.
//
// TCP segmentation only, both ways: UDP segmentation (RTE_MBUF_F_TX_UDP_SEG) would need the
// guest's USO features, which we do not offer, and virtio's UFO is IP fragmentation of one
// datagram, a different thing.
#pragma once

#include <rte_mbuf.h>
#include "virtio_net_hdr.h"

#include <cstdint>

#include "io_vec.h"
#include "net_features.h"
#include "queue_stats.h"

namespace vqs {

// Guest TX: maps `hdr` onto the freshly copied packet `m` (may complete a checksum in `m`).
void apply_guest_tx_offload(const VirtioNetHdr& hdr, rte_mbuf* m);

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
