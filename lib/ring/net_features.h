// SPDX-License-Identifier: BSD-3-Clause
// The virtio-net features a queue's datapath depends on, decoded once from the negotiated set.
#pragma once

#include "ring/virtio_net_hdr.h"
#include "ring/vring.h"

#include <cstdint>

namespace vqs {

struct NetFeatures {
  bool version_1 = false;
  bool mrg_rxbuf = false;
  bool indirect_desc = false;
  bool event_idx = false;
  bool guest_csum = false;  // the guest accepts NEEDS_CSUM / DATA_VALID on receive
  bool guest_tso4 = false;
  bool guest_tso6 = false;
  bool in_order = false;  // used entries must follow the avail ring's order
  // 12 bytes with VERSION_1 or MRG_RXBUF (struct VirtioNetHdrMrgRxbuf), else the legacy 10.
  uint16_t net_hdr_size = sizeof(VirtioNetHdr);

  static NetFeatures from_bits(uint64_t features) {
    auto has = [features](unsigned bit) { return (features >> bit) & 1; };
    NetFeatures f;
    f.version_1 = has(kFVersion1);
    f.mrg_rxbuf = has(kNetFMrgRxbuf);
    f.indirect_desc = has(kRingFIndirectDesc);
    f.event_idx = has(kRingFEventIdx);
    f.guest_csum = has(kNetFGuestCsum);
    f.guest_tso4 = has(kNetFGuestTso4);
    f.guest_tso6 = has(kNetFGuestTso6);
    f.in_order = has(kFInOrder);
    f.net_hdr_size =
        (f.version_1 || f.mrg_rxbuf) ? sizeof(VirtioNetHdrMrgRxbuf) : sizeof(VirtioNetHdr);
    return f;
  }
};

}  // namespace vqs
