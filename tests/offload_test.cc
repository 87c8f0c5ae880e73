// SPDX-License-Identifier: BSD-3-Clause
// Offload metadata in both directions, checked against independent checksum code.
#include <rte_ip.h>
#include <rte_net.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "datapath/net_offload.h"
#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

enum class L4 { kTcp, kUdp, kSctp };

// Ethernet + IPv4/IPv6 + TCP/UDP/SCTP + payload, lengths filled in, checksums zero.
std::vector<uint8_t> build_frame(int ip_version, L4 l4, uint32_t payload_len) {
  const uint32_t l3_len = ip_version == 4 ? 20 : 40;
  const uint32_t l4_len = l4 == L4::kTcp ? 20 : (l4 == L4::kUdp ? 8 : 12);
  std::vector<uint8_t> f(14 + l3_len + l4_len + payload_len);
  for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<uint8_t>(i * 7 + 3);
  const uint8_t proto = l4 == L4::kTcp ? 6 : (l4 == L4::kUdp ? 17 : 132);
  uint8_t* p = f.data();
  std::memset(p, 0x02, 12);
  p[12] = ip_version == 4 ? 0x08 : 0x86;
  p[13] = ip_version == 4 ? 0x00 : 0xdd;
  uint8_t* ip = p + 14;
  const uint32_t l4_total = l4_len + payload_len;
  if (ip_version == 4) {
    std::memset(ip, 0, 20);
    ip[0] = 0x45;
    const uint16_t total = static_cast<uint16_t>(20 + l4_total);
    ip[2] = total >> 8;
    ip[3] = total & 0xff;
    ip[8] = 64;
    ip[9] = proto;
    const uint8_t addrs[8] = {10, 0, 0, 1, 10, 0, 0, 2};
    std::memcpy(ip + 12, addrs, 8);
  } else {
    std::memset(ip, 0, 8);
    ip[0] = 0x60;
    ip[4] = static_cast<uint8_t>(l4_total >> 8);
    ip[5] = l4_total & 0xff;
    ip[6] = proto;
    ip[7] = 64;
  }
  uint8_t* th = ip + l3_len;
  if (l4 == L4::kTcp) {
    th[12] = 5 << 4;
    th[16] = th[17] = 0;
  } else if (l4 == L4::kUdp) {
    th[4] = static_cast<uint8_t>(l4_total >> 8);
    th[5] = l4_total & 0xff;
    th[6] = th[7] = 0;
  } else {
    std::memset(th + 8, 0, 4);
  }
  return f;
}

uint32_t sum16(const uint8_t* p, size_t n, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) sum += (p[i] << 8) | p[i + 1];
  if (n & 1) sum += p[n - 1] << 8;
  return sum;
}

// True when the L4 checksum of `f` (TCP or UDP) verifies, pseudo-header included.
bool l4_checksum_ok(const std::vector<uint8_t>& f, int ip_version) {
  const uint8_t* ip = f.data() + 14;
  const uint32_t l3_len = ip_version == 4 ? 20 : 40;
  const uint32_t l4_total = static_cast<uint32_t>(f.size()) - 14 - l3_len;
  uint32_t sum = 0;
  if (ip_version == 4) {
    sum = sum16(ip + 12, 8) + ip[9];
  } else {
    sum = sum16(ip + 8, 32) + ip[6];
  }
  sum += l4_total;
  sum = sum16(ip + l3_len, l4_total, sum);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

bool ipv4_header_ok(const std::vector<uint8_t>& f) {
  uint32_t sum = sum16(f.data() + 14, 20);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

uint32_t crc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffff;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78 & (0u - (crc & 1)));
  }
  return ~crc;
}

// Sends `frame` with `hdr` from the guest and returns the dequeued mbuf.
rte_mbuf* guest_sends(Device& dev, const std::vector<uint8_t>& frame, const VirtioNetHdr& hdr) {
  SimPacket p;
  p.hdr.hdr = hdr;
  p.data = frame;
  dev.tx.send(p);
  auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 1);
  return pkts[0];
}

// Enqueues `m` to the guest and returns what the guest received.
SimPacket guest_receives(Device& dev, rte_mbuf* m) {
  dev.rx.post_rx(64, 1536);
  REQUIRE(dev.enqueue({m}) == 1);
  auto got = dev.rx.receive();
  REQUIRE(got.size() == 1);
  return got[0];
}

constexpr uint64_t kGuestOffloads = kModernFeatures | bit(kNetFMrgRxbuf) | bit(kNetFGuestCsum) |
                                    bit(kNetFGuestTso4) | bit(kNetFGuestTso6);
constexpr uint64_t kNoGuestOffloads = kModernFeatures | bit(kNetFMrgRxbuf);

}  // namespace

TEST_CASE("guest TX: no offload in the header, no offload flags") {
  Device dev(kModernFeatures);
  rte_mbuf* m = guest_sends(dev, build_frame(4, L4::kTcp, 100), VirtioNetHdr{});
  CHECK(m->ol_flags == 0);
  CHECK(m->packet_type == 0);
}

TEST_CASE("guest TX: NEEDS_CSUM on TCP/UDP/SCTP becomes RX_L4_CKSUM_NONE with header lengths") {
  const struct {
    int ip;
    L4 l4;
    uint16_t csum_offset;
    uint32_t ptype_l4;
    uint8_t l4_len;
  } cases[] = {{4, L4::kTcp, 16, RTE_PTYPE_L4_TCP, 20},
               {6, L4::kTcp, 16, RTE_PTYPE_L4_TCP, 20},
               {4, L4::kUdp, 6, RTE_PTYPE_L4_UDP, 8},
               {6, L4::kUdp, 6, RTE_PTYPE_L4_UDP, 8},
               {4, L4::kSctp, 8, RTE_PTYPE_L4_SCTP, 12}};
  for (const auto& c : cases) {
    Device dev(kModernFeatures);
    VirtioNetHdr hdr{};
    hdr.flags = kNetHdrFNeedsCsum;
    hdr.csum_start = static_cast<uint16_t>(14 + (c.ip == 4 ? 20 : 40));
    hdr.csum_offset = c.csum_offset;
    rte_mbuf* m = guest_sends(dev, build_frame(c.ip, c.l4, 300), hdr);
    INFO("ip " << c.ip << " l4 " << int(c.l4));
    CHECK((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_NONE);
    CHECK((m->packet_type & RTE_PTYPE_L4_MASK) == c.ptype_l4);
    CHECK(m->l2_len == 14);
    CHECK(m->l3_len == (c.ip == 4 ? 20 : 40));
    if (c.l4 != L4::kSctp) CHECK(m->l4_len == c.l4_len);
  }
}

TEST_CASE("guest TX: NEEDS_CSUM at an unknown place is completed in software") {
  Device dev(kModernFeatures);
  auto frame = build_frame(4, L4::kUdp, 200);
  // The guest checksums from the UDP header but names a layout we do not parse (as for a
  // tunnel): csum_start at the UDP header, offset 6, yet the frame claims IPv4 options.
  // Easiest unknown case: an EtherType we do not know, same bytes otherwise.
  frame[12] = 0x88;
  frame[13] = 0xb5;
  // Pseudo-header sum in the field, as a guest driver leaves it.
  uint32_t phdr = sum16(frame.data() + 26, 8) + 17 + (frame.size() - 34);
  while (phdr >> 16) phdr = (phdr & 0xffff) + (phdr >> 16);
  frame[40] = static_cast<uint8_t>(phdr >> 8);
  frame[41] = static_cast<uint8_t>(phdr);
  VirtioNetHdr hdr{};
  hdr.flags = kNetHdrFNeedsCsum;
  hdr.csum_start = 34;
  hdr.csum_offset = 6;
  rte_mbuf* m = guest_sends(dev, frame, hdr);
  auto bytes = mbuf_bytes(m);
  CHECK((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == 0);
  bytes[12] = 0x08;  // verify as the IPv4/UDP packet it really is
  bytes[13] = 0x00;
  CHECK(l4_checksum_ok(bytes, 4));
}

TEST_CASE("guest TX: GSO becomes RX_LRO with tso_segsz, when the header matches the packet") {
  const struct {
    uint8_t gso_type;
    int ip;
    L4 l4;
    bool lro;
  } cases[] = {{kNetHdrGsoTcpv4, 4, L4::kTcp, true},
               {kNetHdrGsoTcpv6, 6, L4::kTcp, true},
               {kNetHdrGsoTcpv4 | kNetHdrGsoEcn, 4, L4::kTcp, true},
               {kNetHdrGsoTcpv6 | kNetHdrGsoEcn, 6, L4::kTcp, true}};
  for (const auto& c : cases) {
    Device dev(kModernFeatures);
    VirtioNetHdr hdr{};
    hdr.flags = kNetHdrFNeedsCsum;
    hdr.csum_start = static_cast<uint16_t>(14 + (c.ip == 4 ? 20 : 40));
    hdr.csum_offset = c.l4 == L4::kTcp ? 16 : 6;
    hdr.gso_type = c.gso_type;
    hdr.gso_size = 1448;
    hdr.hdr_len = 66;
    rte_mbuf* m = guest_sends(dev, build_frame(c.ip, c.l4, 20000), hdr);
    INFO("gso_type " << int(c.gso_type));
    CHECK(((m->ol_flags & RTE_MBUF_F_RX_LRO) != 0) == c.lro);
    if (c.lro) CHECK(m->tso_segsz == 1448);
    CHECK(mbuf_bytes(m) == build_frame(c.ip, c.l4, 20000));
  }
}

// A GSO request is a promise of work to whoever segments (rte_gso here, a NIC's TSO): only a
// sane one is passed on. The packet is dropped, counted, and its descriptor returned.
TEST_CASE("guest TX: a GSO request the headers or limits do not allow is dropped, counted") {
  struct Case {
    const char* what;
    uint8_t gso_type;
    int ip;
    L4 l4;
    uint16_t gso_size;
    uint32_t payload;
    bool needs_csum = true;
    int csum_start_shift = 0;
    uint8_t tcp_data_offset = 5;  // 32-bit words
  };
  const Case cases[] = {
      {"gso_size 1", kNetHdrGsoTcpv4, 4, L4::kTcp, 1, 20000},
      {"gso_size 87", kNetHdrGsoTcpv4, 4, L4::kTcp, 87, 2000},
      {"too many segments", kNetHdrGsoTcpv4, 4, L4::kTcp, 100, 100 * kMaxGuestGsoSegments + 1},
      {"TCPV6 on IPv4", kNetHdrGsoTcpv6, 4, L4::kTcp, 1448, 20000},
      {"TCPV4 on IPv6", kNetHdrGsoTcpv4, 6, L4::kTcp, 1448, 20000},
      {"TCPV4 on UDP", kNetHdrGsoTcpv4, 4, L4::kUdp, 1448, 20000},
      {"UFO (not offered)", kNetHdrGsoUdp, 4, L4::kUdp, 1448, 20000},
      {"unknown type", 0x33, 4, L4::kTcp, 1448, 20000},
      {"no NEEDS_CSUM", kNetHdrGsoTcpv4, 4, L4::kTcp, 1448, 20000, false},
      {"csum_start not at TCP", kNetHdrGsoTcpv4, 4, L4::kTcp, 1448, 20000, true, 2},
      {"TCP header of 16 bytes", kNetHdrGsoTcpv4, 4, L4::kTcp, 1448, 20000, true, 0, 4},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Device dev(kModernFeatures);
    std::vector<uint8_t> frame = build_frame(c.ip, c.l4, c.payload);
    const uint32_t l4_off = 14 + (c.ip == 4 ? 20 : 40);
    if (c.l4 == L4::kTcp) frame[l4_off + 12] = static_cast<uint8_t>(c.tcp_data_offset << 4);
    VirtioNetHdr hdr{};
    hdr.flags = c.needs_csum ? kNetHdrFNeedsCsum : 0;
    hdr.csum_start = static_cast<uint16_t>(l4_off + c.csum_start_shift);
    hdr.csum_offset = c.l4 == L4::kTcp ? 16 : 6;
    hdr.gso_type = c.gso_type;
    hdr.gso_size = c.gso_size;
    SimPacket p;
    p.hdr.hdr = hdr;
    p.data = frame;
    dev.tx.send(p);
    CHECK(dev.dequeue().empty());
    CHECK(dev.txq.stats().dropped(DropReason::kBadOffloadRequest) == 1);
    CHECK(dev.tx.take_used().size() == 1);
  }
}

TEST_CASE("guest TX: GSO at the limits is accepted") {
  for (const auto& [gso_size, payload] :
       {std::pair<uint16_t, uint32_t>{kMinGuestGsoSize, 3000}, {200, 200 * kMaxGuestGsoSegments}}) {
    INFO("gso_size " << gso_size << " payload " << payload);
    Device dev(kModernFeatures);
    VirtioNetHdr hdr{};
    hdr.flags = kNetHdrFNeedsCsum;
    hdr.csum_start = 34;
    hdr.csum_offset = 16;
    hdr.gso_type = kNetHdrGsoTcpv4;
    hdr.gso_size = gso_size;
    rte_mbuf* m = guest_sends(dev, build_frame(4, L4::kTcp, payload), hdr);
    CHECK((m->ol_flags & RTE_MBUF_F_RX_LRO) != 0);
    CHECK(m->tso_segsz == gso_size);
  }
}

TEST_CASE("guest RX: checksum requests become NEEDS_CSUM when the guest takes them") {
  for (int ip : {4, 6}) {
    for (L4 l4 : {L4::kTcp, L4::kUdp}) {
      Device dev(kGuestOffloads);
      const auto frame = build_frame(ip, l4, 500);
      rte_mbuf* m = make_mbuf(frame);
      m->l2_len = 14;
      m->l3_len = ip == 4 ? 20 : 40;
      m->ol_flags = (ip == 4 ? RTE_MBUF_F_TX_IPV4 : RTE_MBUF_F_TX_IPV6) |
                    (l4 == L4::kTcp ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM);
      const SimPacket got = guest_receives(dev, m);
      INFO("ip " << ip << " tcp " << (l4 == L4::kTcp));
      CHECK(got.hdr.hdr.flags == kNetHdrFNeedsCsum);
      CHECK(got.hdr.hdr.csum_start == 14 + (ip == 4 ? 20 : 40));
      CHECK(got.hdr.hdr.csum_offset == (l4 == L4::kTcp ? 16 : 6));
      // The guest completes the checksum: from csum_start to the end, over the pseudo-header sum
      // that we left in the field. Emulate that and check the result verifies.
      auto data = got.data;
      const size_t start = got.hdr.hdr.csum_start, field = start + got.hdr.hdr.csum_offset;
      uint32_t sum = sum16(data.data() + start, data.size() - start);
      while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
      const uint16_t csum = static_cast<uint16_t>(~sum);
      data[field] = static_cast<uint8_t>(csum >> 8);
      data[field + 1] = static_cast<uint8_t>(csum);
      CHECK(l4_checksum_ok(data, ip));
    }
  }
}

TEST_CASE("guest RX: checksums the guest did not negotiate are computed in software") {
  for (int ip : {4, 6}) {
    for (L4 l4 : {L4::kTcp, L4::kUdp}) {
      Device dev(kNoGuestOffloads);
      auto frame = build_frame(ip, l4, 3000);                              // chained mbuf
      frame[14 + (ip == 4 ? 20 : 40) + (l4 == L4::kTcp ? 16 : 6)] = 0xab;  // garbage in the field
      rte_mbuf* m = make_mbuf(frame);
      REQUIRE(m->nb_segs > 1);
      m->l2_len = 14;
      m->l3_len = ip == 4 ? 20 : 40;
      m->ol_flags = (ip == 4 ? RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM : RTE_MBUF_F_TX_IPV6) |
                    (l4 == L4::kTcp ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM);
      const SimPacket got = guest_receives(dev, m);
      INFO("ip " << ip << " tcp " << (l4 == L4::kTcp));
      CHECK(got.hdr.hdr.flags == 0);
      CHECK(l4_checksum_ok(got.data, ip));
      if (ip == 4) CHECK(ipv4_header_ok(got.data));
    }
  }
}

TEST_CASE("guest RX: SCTP CRC32c is always computed here") {
  Device dev(kGuestOffloads);
  auto frame = build_frame(4, L4::kSctp, 2500);
  rte_mbuf* m = make_mbuf(frame);
  m->l2_len = 14;
  m->l3_len = 20;
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_SCTP_CKSUM;
  const SimPacket got = guest_receives(dev, m);
  CHECK(got.hdr.hdr.flags == 0);
  auto data = got.data;
  uint32_t stored;
  std::memcpy(&stored, data.data() + 34 + 8, 4);
  std::memset(data.data() + 34 + 8, 0, 4);
  CHECK(stored == crc32c(data.data() + 34, data.size() - 34));
}

TEST_CASE("guest RX: the IPv4 header checksum is written in the guest's copy only") {
  Device dev(kGuestOffloads);
  const auto frame = build_frame(4, L4::kUdp, 100);
  rte_mbuf* m = make_mbuf(frame);
  rte_mbuf_refcnt_update(m, 1);  // shared, as a flooded packet is
  m->l2_len = 14;
  m->l3_len = 20;
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
  const SimPacket got = guest_receives(dev, m);
  CHECK(ipv4_header_ok(got.data));
  CHECK(mbuf_bytes(m) == frame);  // untouched
  rte_pktmbuf_free(m);
}

TEST_CASE("guest RX: TSO becomes GSO when negotiated, else the packet is dropped as too large") {
  for (int ip : {4, 6}) {
    const auto frame = build_frame(ip, L4::kTcp, 8000);
    auto make = [&] {
      rte_mbuf* m = make_mbuf(frame);
      m->l2_len = 14;
      m->l3_len = ip == 4 ? 20 : 40;
      m->l4_len = 20;
      m->tso_segsz = 1448;
      m->ol_flags = (ip == 4 ? RTE_MBUF_F_TX_IPV4 : RTE_MBUF_F_TX_IPV6) | RTE_MBUF_F_TX_TCP_SEG;
      return m;
    };
    {
      Device dev(kGuestOffloads);
      const SimPacket got = guest_receives(dev, make());
      CHECK(got.hdr.hdr.gso_type == (ip == 4 ? kNetHdrGsoTcpv4 : kNetHdrGsoTcpv6));
      CHECK(got.hdr.hdr.gso_size == 1448);
      CHECK(got.hdr.hdr.hdr_len == 14 + (ip == 4 ? 20 : 40) + 20);
      CHECK(got.hdr.hdr.flags == kNetHdrFNeedsCsum);
      CHECK(got.data.size() == frame.size());
    }
    {
      Device dev(kNoGuestOffloads | bit(kNetFGuestCsum));
      dev.rx.post_rx(64, 1536);
      CHECK(dev.enqueue({make()}) == 1);
      CHECK(dev.rx.receive().empty());
      CHECK(dev.rxq.stats().dropped(DropReason::kTooLarge) == 1);
    }
  }
}

TEST_CASE("guest RX: a TSO request that fits one segment needs no GSO") {
  Device dev(kNoGuestOffloads);
  const auto frame = build_frame(4, L4::kTcp, 1000);
  rte_mbuf* m = make_mbuf(frame);
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 20;
  m->tso_segsz = 1448;
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_SEG;
  const SimPacket got = guest_receives(dev, m);
  CHECK(got.hdr.hdr.gso_type == kNetHdrGsoNone);
  CHECK(l4_checksum_ok(got.data, 4));
}

TEST_CASE("guest RX: UDP segmentation cannot be delivered (no USO) and is dropped as too large") {
  Device dev(kGuestOffloads);
  rte_mbuf* m = make_mbuf(build_frame(4, L4::kUdp, 6000));
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 8;
  m->tso_segsz = 1472;
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_SEG;
  dev.rx.post_rx(64, 1536);
  CHECK(dev.enqueue({m}) == 1);
  CHECK(dev.rx.receive().empty());
  CHECK(dev.rxq.stats().dropped(DropReason::kTooLarge) == 1);
}

TEST_CASE("guest RX: GSO carries the full pseudo-header sum, as Linux expects of a partial csum") {
  Device dev(kGuestOffloads);
  rte_mbuf* m = make_mbuf(build_frame(4, L4::kTcp, 8000));
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 20;
  m->tso_segsz = 1448;
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_SEG;
  const SimPacket got = guest_receives(dev, m);
  REQUIRE(got.hdr.hdr.gso_type == kNetHdrGsoTcpv4);
  // Completing the partial checksum over the whole packet gives a valid checksum.
  auto data = got.data;
  uint32_t sum = sum16(data.data() + 34, data.size() - 34);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t csum = static_cast<uint16_t>(~sum);
  data[50] = static_cast<uint8_t>(csum >> 8);
  data[51] = static_cast<uint8_t>(csum);
  CHECK(l4_checksum_ok(data, 4));
}

TEST_CASE("guest RX: offload requests that do not fit the headers are dropped, counted") {
  Device dev(kGuestOffloads);
  dev.rx.post_rx(64, 1536);
  auto request = [](uint64_t flags, uint8_t l3_len, uint8_t l4_len) {
    rte_mbuf* m = make_mbuf(build_frame(4, L4::kTcp, 8000));
    m->l2_len = 14;
    m->l3_len = l3_len;
    m->l4_len = l4_len;
    m->tso_segsz = 1448;
    m->ol_flags = RTE_MBUF_F_TX_IPV4 | flags;
    return m;
  };
  CHECK(dev.enqueue({request(RTE_MBUF_F_TX_TCP_SEG, 0, 20),  // no L3 length
                     request(RTE_MBUF_F_TX_TCP_SEG, 20, 0),  // no L4 length
                     request(RTE_MBUF_F_TX_TCP_CKSUM, 8, 20)}) == 3);
  CHECK(dev.rxq.stats().dropped(DropReason::kBadOffloadRequest) == 3);
  CHECK(dev.rx.receive().empty());
}

TEST_CASE("guest TX: a checksum request at an odd offset is flagged bad, not passed on") {
  Device dev(kModernFeatures);
  auto frame = build_frame(4, L4::kUdp, 200);
  frame[12] = 0x88;  // an EtherType we do not parse
  frame[13] = 0xb5;
  VirtioNetHdr hdr{};
  hdr.flags = kNetHdrFNeedsCsum;
  hdr.csum_start = 34;
  hdr.csum_offset = 7;
  rte_mbuf* m = guest_sends(dev, frame, hdr);
  CHECK((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_BAD);
}

TEST_CASE("guest RX: a verified checksum becomes DATA_VALID for a GUEST_CSUM guest") {
  Device dev(kGuestOffloads);
  rte_mbuf* m = make_mbuf(build_frame(4, L4::kUdp, 100));
  m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD;
  CHECK(guest_receives(dev, m).hdr.hdr.flags == kNetHdrFDataValid);
  Device plain(kNoGuestOffloads);
  m = make_mbuf(build_frame(4, L4::kUdp, 100));
  m->ol_flags = RTE_MBUF_F_RX_L4_CKSUM_GOOD;
  CHECK(guest_receives(plain, m).hdr.hdr.flags == 0);
}

TEST_CASE("offload round trip: guest GSO packet forwarded to another guest keeps its GSO") {
  Device dev(kGuestOffloads);
  VirtioNetHdr hdr{};
  hdr.flags = kNetHdrFNeedsCsum;
  hdr.csum_start = 34;
  hdr.csum_offset = 16;
  hdr.gso_type = kNetHdrGsoTcpv4;
  hdr.gso_size = 1448;
  hdr.hdr_len = 54;
  const auto frame = build_frame(4, L4::kTcp, 30000);
  rte_mbuf* m = guest_sends(dev, frame, hdr);
  // What a forwarding application does with receive metadata before transmitting.
  REQUIRE((m->ol_flags & RTE_MBUF_F_RX_LRO));
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_SEG;
  const SimPacket got = guest_receives(dev, m);
  CHECK(got.hdr.hdr.gso_type == kNetHdrGsoTcpv4);
  CHECK(got.hdr.hdr.gso_size == 1448);
  CHECK(got.hdr.hdr.csum_start == 34);
  CHECK(got.hdr.hdr.csum_offset == 16);
  CHECK(got.hdr.hdr.hdr_len == 54);
  CHECK(got.data.size() == frame.size());
}

TEST_CASE("forwarding: a guest's pending checksum becomes a tx request another guest honours") {
  for (int ip : {4, 6}) {
    for (L4 l4 : {L4::kTcp, L4::kUdp}) {
      // One device: its guest sends with NEEDS_CSUM, and receives without GUEST_CSUM.
      Device dev(kNoGuestOffloads);
      VirtioNetHdr hdr{};
      hdr.flags = kNetHdrFNeedsCsum;
      hdr.csum_start = static_cast<uint16_t>(14 + (ip == 4 ? 20 : 40));
      hdr.csum_offset = l4 == L4::kTcp ? 16 : 6;
      rte_mbuf* m = guest_sends(dev, build_frame(ip, l4, 200), hdr);
      rx_offload_to_tx_request(m);
      INFO("ip " << ip << " tcp " << (l4 == L4::kTcp));
      CHECK((m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == 0);
      CHECK((m->ol_flags & RTE_MBUF_F_TX_L4_MASK) ==
            (l4 == L4::kTcp ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM));
      const SimPacket got = guest_receives(dev, m);
      CHECK(l4_checksum_ok(got.data, ip));
    }
  }
}

TEST_CASE("forwarding: a guest's TSO train becomes a TCP_SEG request") {
  Device from(kModernFeatures | bit(kNetFHostTso4));
  VirtioNetHdr hdr{};
  hdr.flags = kNetHdrFNeedsCsum;
  hdr.csum_start = 14 + 20;
  hdr.csum_offset = 16;
  hdr.gso_type = kNetHdrGsoTcpv4;
  hdr.gso_size = 1000;
  hdr.hdr_len = 54;
  rte_mbuf* m = guest_sends(from, build_frame(4, L4::kTcp, 4000), hdr);
  rx_offload_to_tx_request(m);
  CHECK(m->ol_flags & RTE_MBUF_F_TX_TCP_SEG);
  CHECK(m->ol_flags & RTE_MBUF_F_TX_IP_CKSUM);
  CHECK(m->tso_segsz == 1000);
  CHECK_FALSE(complete_tx_checksum(m));  // segmentation is not done in software here
}

TEST_CASE(
    "software fallback: tx checksum requests completed from scratch in chained and flat mbufs") {
  for (int ip : {4, 6}) {
    for (L4 l4 : {L4::kTcp, L4::kUdp}) {
      for (uint32_t payload : {100u, 3000u}) {
        auto frame = build_frame(ip, l4, payload);
        frame[14 + (ip == 4 ? 20 : 40) + (l4 == L4::kTcp ? 16 : 6)] = 0x5a;  // garbage
        if (ip == 4) frame[14 + 10] = 0x77;                                  // bad IP checksum
        rte_mbuf* m = make_mbuf(frame);
        m->l2_len = 14;
        m->l3_len = ip == 4 ? 20 : 40;
        m->ol_flags = (ip == 4 ? RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM : RTE_MBUF_F_TX_IPV6) |
                      (l4 == L4::kTcp ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM);
        INFO("ip " << ip << " tcp " << (l4 == L4::kTcp) << " payload " << payload);
        REQUIRE(complete_tx_checksum(m));
        CHECK(m->ol_flags == (ip == 4 ? RTE_MBUF_F_TX_IPV4 : RTE_MBUF_F_TX_IPV6));
        std::vector<uint8_t> out(rte_pktmbuf_pkt_len(m));
        rte_pktmbuf_read(m, 0, static_cast<uint32_t>(out.size()), out.data());
        const void* p = rte_pktmbuf_read(m, 0, static_cast<uint32_t>(out.size()), out.data());
        if (p != out.data()) std::memcpy(out.data(), p, out.size());
        CHECK(l4_checksum_ok(out, ip));
        if (ip == 4) CHECK(ipv4_header_ok(out));
        rte_pktmbuf_free(m);
      }
    }
  }
}

TEST_CASE("software fallback: checksums over segments of odd lengths (lent packets have them)") {
  // A segment that starts at an odd offset of the summed range has its bytes swapped in the
  // sum; DPDK 22.11's rte_raw_cksum_mbuf lost the carries of such a segment's sum.
  for (int ip : {4, 6}) {
    for (L4 l4 : {L4::kTcp, L4::kUdp}) {
      const auto frame = build_frame(ip, l4, 3000);
      rte_mbuf* m = nullptr;
      size_t off = 0;
      for (size_t len : {101ul, 1501ul, frame.size() - 1602}) {
        const std::vector<uint8_t> piece(frame.begin() + off, frame.begin() + off + len);
        rte_mbuf* seg = make_mbuf(piece);
        if (m == nullptr) {
          m = seg;
        } else {
          REQUIRE(rte_pktmbuf_chain(m, seg) == 0);
        }
        off += len;
      }
      m->l2_len = 14;
      m->l3_len = ip == 4 ? 20 : 40;
      m->ol_flags = (ip == 4 ? RTE_MBUF_F_TX_IPV4 : RTE_MBUF_F_TX_IPV6) |
                    (l4 == L4::kTcp ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM);
      INFO("ip " << ip << " tcp " << (l4 == L4::kTcp));
      REQUIRE(complete_tx_checksum(m));
      CHECK(l4_checksum_ok(mbuf_bytes(m), ip));
      rte_pktmbuf_free(m);
    }
  }
}

TEST_CASE("software fallback: an IPv4 header with options is summed whole") {
  // 8 bytes of options (IHL 7): the header checksum covers all 28 bytes.
  auto frame = build_frame(4, L4::kUdp, 64);
  const uint8_t options[8] = {0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00};  // router alert, NOPs, EOL
  frame.insert(frame.begin() + 34, options, options + 8);
  frame[14] = 0x47;
  const uint16_t total = static_cast<uint16_t>(frame.size() - 14);
  frame[16] = static_cast<uint8_t>(total >> 8);
  frame[17] = static_cast<uint8_t>(total);
  rte_mbuf* m = make_mbuf(frame);
  m->l2_len = 14;
  m->l3_len = 28;
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
  REQUIRE(complete_tx_checksum(m));
  const auto out = mbuf_bytes(m);
  uint32_t sum = sum16(out.data() + 14, 28);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  CHECK(sum == 0xffff);
  rte_pktmbuf_free(m);
}
