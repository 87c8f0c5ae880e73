// SPDX-License-Identifier: BSD-3-Clause
// The virtio-net header and feature bits, as the virtio 1.x specification (5.1) defines them.
// <linux/virtio_net.h> has the same, but does not compile as C++.
#pragma once

#include <cstdint>

namespace vqs {

struct VirtioNetHdr {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};

// VERSION_1 or MRG_RXBUF: the header always carries num_buffers.
struct VirtioNetHdrMrgRxbuf {
  VirtioNetHdr hdr;
  uint16_t num_buffers;
};

static_assert(sizeof(VirtioNetHdr) == 10 && sizeof(VirtioNetHdrMrgRxbuf) == 12);

constexpr uint8_t kNetHdrFNeedsCsum = 1;
constexpr uint8_t kNetHdrFDataValid = 2;

constexpr uint8_t kNetHdrGsoNone = 0;
constexpr uint8_t kNetHdrGsoTcpv4 = 1;
constexpr uint8_t kNetHdrGsoUdp = 3;
constexpr uint8_t kNetHdrGsoTcpv6 = 4;
constexpr uint8_t kNetHdrGsoEcn = 0x80;

// Feature bits.
constexpr unsigned kNetFCsum = 0;
constexpr unsigned kNetFGuestCsum = 1;
constexpr unsigned kNetFGuestTso4 = 7;
constexpr unsigned kNetFGuestTso6 = 8;
constexpr unsigned kNetFHostTso4 = 11;
constexpr unsigned kNetFHostTso6 = 12;
constexpr unsigned kNetFMrgRxbuf = 15;
constexpr unsigned kNetFCtrlVq = 17;
constexpr unsigned kNetFGuestAnnounce = 21;
constexpr unsigned kNetFMq = 22;
constexpr unsigned kFAnyLayout = 27;
constexpr unsigned kFVersion1 = 32;
// The device uses buffers in the order the driver made them available (spec 2.7.9).
constexpr unsigned kFInOrder = 35;

}  // namespace vqs
