// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/net_offload.h"

#include <rte_hash_crc.h>
#include <rte_ip.h>
#include <rte_net.h>
#include <rte_sctp.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <cstddef>
#include <cstring>

namespace vqs {
namespace {

constexpr uint32_t kTcpCsumOffset = offsetof(rte_tcp_hdr, cksum);
constexpr uint32_t kUdpCsumOffset = offsetof(rte_udp_hdr, dgram_cksum);
constexpr uint32_t kSctpCsumOffset = offsetof(rte_sctp_hdr, cksum);
constexpr uint32_t kIpv4CsumOffset = offsetof(rte_ipv4_hdr, hdr_checksum);

bool is_l4_csum_layout(uint32_t ptype, uint16_t csum_offset) {
  switch (ptype & RTE_PTYPE_L4_MASK) {
    case RTE_PTYPE_L4_TCP:
      return csum_offset == kTcpCsumOffset;
    case RTE_PTYPE_L4_UDP:
      return csum_offset == kUdpCsumOffset;
    case RTE_PTYPE_L4_SCTP:
      return csum_offset == kSctpCsumOffset;
    default:
      return false;
  }
}

// Writes `len` bytes at packet offset `off` of a (possibly chained) mbuf. Caller checks bounds.
void mbuf_write(rte_mbuf* m, uint32_t off, const void* src, uint32_t len) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (; m != nullptr && len > 0; m = m->next) {
    if (off >= m->data_len) {
      off -= m->data_len;
      continue;
    }
    const uint32_t n = RTE_MIN(len, static_cast<uint32_t>(m->data_len - off));
    std::memcpy(rte_pktmbuf_mtod_offset(m, uint8_t*, off), p, n);
    p += n;
    len -= n;
    off = 0;
  }
}

uint16_t fold(uint32_t sum) {
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// Calls fn(pointer, length) for each contiguous piece of m[off, off + len).
template <typename Fn>
void for_each_piece(const rte_mbuf* m, uint32_t off, uint32_t len, Fn&& fn) {
  for (; m != nullptr && len > 0; m = m->next) {
    if (off >= m->data_len) {
      off -= m->data_len;
      continue;
    }
    const uint32_t n = RTE_MIN(len, static_cast<uint32_t>(m->data_len - off));
    fn(rte_pktmbuf_mtod_offset(m, const uint8_t*, off), n);
    len -= n;
    off = 0;
  }
}

// Folded one's-complement sum of m[off, off + len). Not rte_raw_cksum_mbuf: DPDK 22.11's cuts a
// piece's 32-bit sum to 16 bits before swapping the bytes of a piece that starts at an odd
// offset, and loses its carries (a lent packet's pieces have any length; offload_fuzz found it).
uint32_t raw_sum(const rte_mbuf* m, uint32_t off, uint32_t len) {
  uint32_t sum = 0;
  uint32_t done = 0;
  for_each_piece(m, off, len, [&](const uint8_t* p, uint32_t n) {
    const uint16_t piece = rte_raw_cksum(p, n);
    sum += (done & 1) ? rte_bswap16(piece) : piece;
    done += n;
  });
  return fold(sum);
}

// SCTP's CRC32c over m[off, end) with the 4 checksum bytes at `field` taken as zero (RFC 4960).
uint32_t sctp_crc(const rte_mbuf* m, uint32_t off, uint32_t end, uint32_t field) {
  uint32_t crc = 0xffffffff;
  auto feed = [&crc](const uint8_t* p, uint32_t n) {
    // rte_hash_crc loads 8 bytes at a time: start it on an aligned address.
    for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n)
      crc = rte_hash_crc_1byte(*p++, crc);
    crc = rte_hash_crc(p, n, crc);
  };
  for_each_piece(m, off, field - off, feed);
  crc = rte_hash_crc_4byte(0, crc);
  for_each_piece(m, field + 4, end - field - 4, feed);
  return ~crc;
}

}  // namespace

bool apply_guest_tx_offload(const VirtioNetHdr& hdr, rte_mbuf* m) {
  if (hdr.flags == 0 && hdr.gso_type == kNetHdrGsoNone) return true;

  rte_net_hdr_lens lens{};
  const uint32_t ptype = rte_net_get_ptype(m, &lens, RTE_PTYPE_ALL_MASK);
  m->packet_type = ptype;
  m->l2_len = lens.l2_len;
  m->l3_len = lens.l3_len;
  m->l4_len = lens.l4_len;
  m->ol_flags |= RTE_MBUF_F_RX_IP_CKSUM_UNKNOWN;

  // The spec has the device look only at NEEDS_CSUM on transmit; DATA_VALID is receive-only.
  if (hdr.flags & kNetHdrFNeedsCsum) {
    const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
    const uint32_t csum_start = hdr.csum_start;
    const uint32_t field = csum_start + hdr.csum_offset;
    if (csum_start == uint32_t{lens.l2_len} + lens.l3_len &&
        is_l4_csum_layout(ptype, hdr.csum_offset)) {
      m->ol_flags |= RTE_MBUF_F_RX_L4_CKSUM_NONE;
    } else if (field + 2 <= pkt_len && hdr.csum_offset % 2 == 0) {
      // Tunnel or unknown protocol: complete the partial checksum ourselves. The field holds the
      // guest's pseudo-header sum, so the sum over [csum_start, end) is the whole checksum.
      uint16_t csum = static_cast<uint16_t>(~raw_sum(m, csum_start, pkt_len - csum_start));
      if (csum == 0) csum = 0xffff;
      mbuf_write(m, field, &csum, sizeof(csum));
    } else {
      // A request no checksum can satisfy: say so rather than pass a partial sum on as valid.
      m->ol_flags |= RTE_MBUF_F_RX_L4_CKSUM_BAD;
    }
  }

  // TCP segmentation only (no HOST_UFO/USO offered). Whoever segments takes the headers from the
  // first segment at the offsets parsed here: they must agree with csum_start and lie in that
  // segment (a lent packet's 128-byte head).
  if (hdr.gso_type == kNetHdrGsoNone) return true;
  const uint8_t gso = hdr.gso_type & ~kNetHdrGsoEcn;
  const uint32_t l3 = ptype & RTE_PTYPE_L3_MASK;
  const bool ip_matches = (gso == kNetHdrGsoTcpv4 && RTE_ETH_IS_IPV4_HDR(l3)) ||
                          (gso == kNetHdrGsoTcpv6 && RTE_ETH_IS_IPV6_HDR(l3));
  const uint32_t l4_off = uint32_t{lens.l2_len} + lens.l3_len;
  const uint32_t headers = l4_off + lens.l4_len;
  if (!ip_matches || (ptype & RTE_PTYPE_L4_MASK) != RTE_PTYPE_L4_TCP ||
      !(hdr.flags & kNetHdrFNeedsCsum) || hdr.csum_start != l4_off || lens.l4_len < 20 ||
      headers > rte_pktmbuf_data_len(m) || hdr.gso_size < kMinGuestGsoSize)
    return false;
  const uint32_t payload = rte_pktmbuf_pkt_len(m) - headers;
  if ((payload + hdr.gso_size - 1) / hdr.gso_size > kMaxGuestGsoSegments) return false;
  m->ol_flags |= RTE_MBUF_F_RX_LRO | RTE_MBUF_F_RX_L4_CKSUM_NONE;
  m->tso_segsz = hdr.gso_size;
  return true;
}

bool complete_tx_checksum(rte_mbuf* m) {
  const uint64_t ol = m->ol_flags;
  if (ol & (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG)) return false;
  const uint64_t l4_request = ol & RTE_MBUF_F_TX_L4_MASK;
  const auto l3_off = static_cast<uint32_t>(m->l2_len);
  const auto l4_off = static_cast<uint32_t>(m->l2_len + m->l3_len);
  const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
  uint32_t field = 0;
  if (l4_request == RTE_MBUF_F_TX_TCP_CKSUM) {
    field = l4_off + 16;
  } else if (l4_request == RTE_MBUF_F_TX_UDP_CKSUM) {
    field = l4_off + 6;
  } else if (l4_request != 0) {
    return false;  // SCTP: not requested by guests (apply_guest_tx_offload completes it)
  }
  if (field + 2 > pkt_len) return false;
  if (field != 0) {
    // From scratch, whatever the field holds: the pseudo-header sum first, then the whole sum.
    uint16_t phdr;
    if (ol & RTE_MBUF_F_TX_IPV4) {
      rte_ipv4_hdr ip;
      const void* h = rte_pktmbuf_read(m, l3_off, sizeof(ip), &ip);
      if (h == nullptr) return false;
      phdr = rte_ipv4_phdr_cksum(static_cast<const rte_ipv4_hdr*>(h), 0);
    } else if (ol & RTE_MBUF_F_TX_IPV6) {
      rte_ipv6_hdr ip;
      const void* h = rte_pktmbuf_read(m, l3_off, sizeof(ip), &ip);
      if (h == nullptr) return false;
      phdr = rte_ipv6_phdr_cksum(static_cast<const rte_ipv6_hdr*>(h), 0);
    } else {
      return false;
    }
    mbuf_write(m, field, &phdr, sizeof(phdr));
    uint16_t csum = static_cast<uint16_t>(~raw_sum(m, l4_off, pkt_len - l4_off));
    if (csum == 0 && l4_request == RTE_MBUF_F_TX_UDP_CKSUM) csum = 0xffff;
    mbuf_write(m, field, &csum, sizeof(csum));
  }
  if (ol & RTE_MBUF_F_TX_IP_CKSUM) {
    // The whole header, options included, as its IHL says.
    uint8_t copy[60];
    const auto* first = static_cast<const uint8_t*>(rte_pktmbuf_read(m, l3_off, 1, copy));
    if (first == nullptr) return false;
    const uint32_t ihl = (*first & 0xf) * 4u;
    const void* h = ihl < sizeof(rte_ipv4_hdr) ? nullptr : rte_pktmbuf_read(m, l3_off, ihl, copy);
    if (h == nullptr) return false;
    uint8_t ip[60];
    std::memcpy(ip, h, ihl);
    std::memset(ip + kIpv4CsumOffset, 0, 2);
    const uint16_t ip_csum = static_cast<uint16_t>(~rte_raw_cksum(ip, ihl));
    mbuf_write(m, l3_off + kIpv4CsumOffset, &ip_csum, sizeof(ip_csum));
  }
  m->ol_flags = ol & ~(RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IP_CKSUM);
  return true;
}

DropReason plan_guest_rx_offload(const rte_mbuf* m, const NetFeatures& features,
                                 GuestRxOffload* out) {
  std::memset(&out->hdr, 0, sizeof(out->hdr));
  out->patch_count = 0;
  const uint64_t ol = m->ol_flags;
  uint64_t l4_request = ol & RTE_MBUF_F_TX_L4_MASK;
  const bool wants_ip_csum = ol & RTE_MBUF_F_TX_IP_CKSUM;
  const uint64_t seg_request = ol & (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG);

  if (l4_request == 0 && seg_request == 0 && !wants_ip_csum) {
    if (features.guest_csum && (ol & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
      out->hdr.flags = kNetHdrFDataValid;
    return DropReason::kCount;
  }

  // The headers the request names, read whole (l2/l3/l4_len are 7, 9 and 8 bits wide).
  const uint32_t pkt_len = rte_pktmbuf_pkt_len(m);
  const uint32_t l3_off = m->l2_len;
  const uint32_t l4_off = l3_off + m->l3_len;
  const uint32_t hdrs_len = l4_off + m->l4_len;
  uint8_t copy[1024];
  const uint32_t head_len = RTE_MIN(pkt_len, hdrs_len + 8);  // + the UDP/SCTP field if no l4_len
  const auto* head = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, head_len, copy));
  if (head == nullptr || m->l3_len < sizeof(rte_ipv4_hdr) || l4_off > head_len)
    return DropReason::kBadOffloadRequest;
  const uint8_t ip_version = head[l3_off] >> 4;
  if (ip_version != 4 && ip_version != 6) return DropReason::kBadOffloadRequest;
  const bool ipv4 = ip_version == 4;
  const auto* ip4 = reinterpret_cast<const rte_ipv4_hdr*>(head + l3_off);
  const auto* ip6 = reinterpret_cast<const rte_ipv6_hdr*>(head + l3_off);

  if (wants_ip_csum && ipv4) {
    // Summed as the header is in the packet, options included, with the field taken as zero.
    uint8_t ip_hdr[64];
    const uint32_t ihl = RTE_MIN(static_cast<uint32_t>(m->l3_len), 60u);
    std::memcpy(ip_hdr, head + l3_off, ihl);
    std::memset(ip_hdr + kIpv4CsumOffset, 0, 2);
    const uint16_t csum = static_cast<uint16_t>(~rte_raw_cksum(ip_hdr, ihl));
    GuestRxOffload::Patch& p = out->patches[out->patch_count++];
    p.offset = l3_off + kIpv4CsumOffset;
    p.len = 2;
    std::memcpy(p.bytes, &csum, 2);
  }

  if (seg_request != 0) {
    const bool needs_segmentation = m->tso_segsz != 0 && pkt_len > hdrs_len + m->tso_segsz;
    if (needs_segmentation) {
      // UDP segmentation would need GUEST_USO4/6 (not offered); UFO is another thing.
      if (seg_request & RTE_MBUF_F_TX_UDP_SEG) return DropReason::kTooLarge;
      if (m->l4_len < sizeof(rte_tcp_hdr)) return DropReason::kBadOffloadRequest;
      const bool negotiated = ipv4 ? features.guest_tso4 : features.guest_tso6;
      if (!negotiated || !features.guest_csum) return DropReason::kTooLarge;
      out->hdr.gso_type = ipv4 ? kNetHdrGsoTcpv4 : kNetHdrGsoTcpv6;
      out->hdr.gso_size = m->tso_segsz;
      out->hdr.hdr_len = static_cast<uint16_t>(hdrs_len);
    }
    l4_request =
        (seg_request & RTE_MBUF_F_TX_TCP_SEG) ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM;
  }

  if (l4_request == 0) return DropReason::kCount;
  uint32_t csum_offset;
  switch (l4_request) {
    case RTE_MBUF_F_TX_TCP_CKSUM:
      csum_offset = kTcpCsumOffset;
      break;
    case RTE_MBUF_F_TX_UDP_CKSUM:
      csum_offset = kUdpCsumOffset;
      break;
    case RTE_MBUF_F_TX_SCTP_CKSUM:
      csum_offset = kSctpCsumOffset;
      break;
    default:
      return DropReason::kBadOffloadRequest;
  }
  const uint32_t field = l4_off + csum_offset;
  const uint32_t field_len = l4_request == RTE_MBUF_F_TX_SCTP_CKSUM ? 4 : 2;
  if (field + field_len > pkt_len) return DropReason::kBadOffloadRequest;
  GuestRxOffload::Patch& p = out->patches[out->patch_count++];
  p.offset = field;
  p.len = static_cast<uint8_t>(field_len);

  if (l4_request == RTE_MBUF_F_TX_SCTP_CKSUM) {
    // CRC32c cannot be expressed as NEEDS_CSUM: always computed here.
    const uint32_t crc = sctp_crc(m, l4_off, pkt_len, field);
    std::memcpy(p.bytes, &crc, 4);
    return DropReason::kCount;
  }
  // The pseudo-header sum with the L4 length, also for GSO: what Linux keeps in a partial
  // checksum (and what DPDK's virtio PMD restores in its TSO path).
  const uint16_t phdr = ipv4 ? rte_ipv4_phdr_cksum(ip4, 0) : rte_ipv6_phdr_cksum(ip6, 0);
  uint16_t csum;
  if (features.guest_csum) {
    out->hdr.flags = kNetHdrFNeedsCsum;
    out->hdr.csum_start = static_cast<uint16_t>(l4_off);
    out->hdr.csum_offset = static_cast<uint16_t>(csum_offset);
    csum = phdr;  // the guest completes it
  } else {
    // Full checksum, with the field itself counted as zero.
    uint32_t sum = phdr;
    sum += raw_sum(m, l4_off, csum_offset);
    sum += raw_sum(m, field + 2, pkt_len - field - 2);
    csum = static_cast<uint16_t>(~fold(sum));
    if (csum == 0 && l4_request == RTE_MBUF_F_TX_UDP_CKSUM) csum = 0xffff;
  }
  std::memcpy(p.bytes, &csum, 2);
  return DropReason::kCount;
}

}  // namespace vqs
