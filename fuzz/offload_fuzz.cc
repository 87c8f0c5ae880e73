// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness: one guest packet with fuzzed headers and chain through the switch's offload
// path (dequeue, rx_offload_to_tx_request, TxBufferSet/rte_gso) to a NIC or a second guest.
// Checks: sender's buffers unwritten, GSO within limits, segments and checksums right, every
// packet delivered or counted, pools full. See docs/security.md, "Fuzzing".
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "datapath/net_offload.h"
#include "datapath/zero_copy_tracker.h"
#include "fake_port.h"
#include "guarded_memory.h"
#include "ports/tx_buffer.h"
#include "queue_teardown.h"
#include "ring/virtqueue.h"

using namespace vqs;
using vqs::app::SwitchDrop;
using vqs::app::TxBufferSet;
using vqs::fuzz::GuardedMemory;
using vqs::fuzz::place_rings;
using vqs::fuzz::Rings;

namespace {

constexpr unsigned kPoolSize = 4095;      // a 64 KiB packet copied takes 33 mbufs
constexpr unsigned kGsoPoolSize = 1023;   // 256 segments, each a header and a payload mbuf or two
constexpr uint16_t kTxRing = 8;           // one chain of up to 8 descriptors
constexpr uint16_t kRxRing = 256;         // as many buffers as segments
constexpr uint32_t kMaxRxBuffer = 65664;  // one buffer holds the largest packet and its header
constexpr uint64_t kTxBufferBytes = 72 << 10;

rte_mempool* pool = nullptr;
rte_mempool* gso_direct = nullptr;
rte_mempool* gso_indirect = nullptr;

constexpr uint8_t kTcp = 6;
constexpr uint8_t kUdp = 17;

void put(std::vector<uint8_t>& out, FuzzedDataProvider& in, size_t n) {
  std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(n);
  bytes.resize(n);
  out.insert(out.end(), bytes.begin(), bytes.end());
}
void put16(std::vector<uint8_t>& out, uint16_t v) {  // network order
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

// What the sending guest transmits: its virtio-net header and the frame.
struct GuestPacket {
  VirtioNetHdr hdr{};
  std::vector<uint8_t> frame;
};

// A frame the fuzzer can steer field by field: each length either agrees with the frame or is
// raw, and so is each header field the offload code reads.
GuestPacket build_packet(FuzzedDataProvider& in) {
  GuestPacket p;
  if (in.ConsumeIntegralInRange(0, 7) == 0) {  // raw bytes and a raw header
    p.hdr.flags = in.ConsumeIntegral<uint8_t>();
    p.hdr.gso_type = in.ConsumeIntegral<uint8_t>();
    p.hdr.hdr_len = in.ConsumeIntegral<uint16_t>();
    p.hdr.gso_size = in.ConsumeIntegral<uint16_t>();
    p.hdr.csum_start = in.ConsumeIntegral<uint16_t>();
    p.hdr.csum_offset = in.ConsumeIntegral<uint16_t>();
    p.frame = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 2048));
    return p;
  }
  const bool consistent = in.ConsumeProbability<float>() < 0.9f;
  const bool ipv6 = in.ConsumeBool();
  const bool vlan = in.ConsumeBool();
  const int l4_choice = in.ConsumeIntegralInRange(0, 3);
  const uint8_t proto = l4_choice <= 1   ? kTcp
                        : l4_choice == 2 ? kUdp
                                         : in.ConsumeIntegral<uint8_t>();
  const uint32_t ihl = in.ConsumeIntegralInRange<uint32_t>(5, 15);
  const uint32_t doff = in.ConsumeIntegralInRange<uint32_t>(5, 15);
  const uint32_t payload = in.ConsumeIntegralInRange<uint32_t>(0, 65600);
  const uint32_t l2 = vlan ? 18 : 14;
  const uint32_t l3 = ipv6 ? 40 : 4 * ihl;
  const uint32_t l4 = proto == kTcp ? 4 * doff : proto == kUdp ? 8 : 0;
  std::vector<uint8_t>& f = p.frame;
  f.reserve(l2 + l3 + l4 + payload);
  put(f, in, 12);  // MAC addresses
  if (vlan) {
    put16(f, RTE_ETHER_TYPE_VLAN);
    put(f, in, 2);
  }
  put16(f, ipv6 ? RTE_ETHER_TYPE_IPV6 : RTE_ETHER_TYPE_IPV4);
  const auto len_field = [&](uint32_t value) {
    put16(f, consistent ? static_cast<uint16_t>(value) : in.ConsumeIntegral<uint16_t>());
  };
  if (ipv6) {
    f.push_back(0x60);
    put(f, in, 3);  // traffic class, flow label
    len_field(l4 + payload);
    f.push_back(proto);
    put(f, in, 33);  // hop limit, addresses
  } else {
    f.push_back(static_cast<uint8_t>(0x40 | ihl));
    put(f, in, 1);  // TOS
    len_field(l3 + l4 + payload);
    put(f, in, 2);  // id
    if (in.ConsumeBool()) {
      put16(f, in.ConsumeBool() ? 0x4000 : 0);  // DF or nothing: not a fragment
    } else {
      put(f, in, 2);
    }
    put(f, in, 1);  // TTL
    f.push_back(proto);
    put(f, in, 10 + (l3 - 20));  // checksum, addresses, options
  }
  if (proto == kTcp) {
    put(f, in, 12);  // ports, sequence and acknowledgement numbers
    f.push_back(static_cast<uint8_t>(doff << 4));
    put(f, in, 7 + (l4 - 20));  // flags, window, checksum, urgent pointer, options
  } else if (proto == kUdp) {
    put(f, in, 4);  // ports
    len_field(l4 + payload);
    put(f, in, 2);
  }
  // The payload: a pattern from one byte of input, laid down a block at a time (a loop per
  // byte would be most of the harness's time under coverage instrumentation).
  uint8_t block[509];  // prime: segment boundaries fall at different places of it
  const uint8_t seed = in.ConsumeIntegral<uint8_t>();
  for (uint32_t i = 0; i < sizeof(block); ++i) block[i] = static_cast<uint8_t>(seed + i * 7);
  for (uint32_t done = 0; done < payload;) {
    const uint32_t n = std::min<uint32_t>(sizeof(block), payload - done);
    f.insert(f.end(), block, block + n);
    done += n;
  }

  const uint32_t l4_off = l2 + l3;
  p.hdr.flags = in.ConsumeBool() ? kNetHdrFNeedsCsum : in.ConsumeIntegral<uint8_t>();
  p.hdr.csum_start = consistent ? static_cast<uint16_t>(l4_off) : in.ConsumeIntegral<uint16_t>();
  p.hdr.csum_offset = consistent ? (proto == kUdp ? 6 : 16) : in.ConsumeIntegral<uint16_t>();
  const uint8_t kGsoTypes[] = {kNetHdrGsoNone, kNetHdrGsoTcpv4, kNetHdrGsoTcpv6, kNetHdrGsoUdp};
  const int gso_choice = in.ConsumeIntegralInRange(0, 4);
  p.hdr.gso_type = gso_choice < 4 ? kGsoTypes[gso_choice] : in.ConsumeIntegral<uint8_t>();
  if (in.ConsumeBool()) p.hdr.gso_type |= kNetHdrGsoEcn;
  p.hdr.gso_size = in.ConsumeIntegral<uint16_t>();
  p.hdr.hdr_len = consistent ? static_cast<uint16_t>(l4_off + l4) : in.ConsumeIntegral<uint16_t>();
  return p;
}

std::vector<uint8_t> mbuf_bytes(const rte_mbuf* m) {
  std::vector<uint8_t> bytes(rte_pktmbuf_pkt_len(m));
  for (uint32_t off = 0; m != nullptr; m = m->next) {
    std::memcpy(bytes.data() + off, rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
    off += m->data_len;
  }
  return bytes;
}

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

uint32_t fold(uint32_t sum) {
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >> 16);
  return sum;
}

// Whether the TCP/UDP checksum at l4_off is right, with the pseudo-header DPDK and the stacks
// compute from the IP header. Only asked where the IP header's lengths agree with the frame:
// otherwise no receiver would check the sum over these bytes.
bool l4_checksum_valid(const std::vector<uint8_t>& f, uint32_t l3_off, uint32_t l4_off) {
  uint32_t sum;
  if ((f[l3_off] >> 4) == 4) {
    sum = rte_ipv4_phdr_cksum(reinterpret_cast<const rte_ipv4_hdr*>(f.data() + l3_off), 0);
  } else {
    sum = rte_ipv6_phdr_cksum(reinterpret_cast<const rte_ipv6_hdr*>(f.data() + l3_off), 0);
  }
  sum += rte_raw_cksum(f.data() + l4_off, f.size() - l4_off);
  return fold(sum) == 0xffff;
}

bool ip_lengths_agree(const std::vector<uint8_t>& f, uint32_t l3_off, uint32_t l4_off) {
  if (l4_off > f.size() || l3_off + 20 > f.size()) return false;
  if ((f[l3_off] >> 4) == 4) return be16(&f[l3_off + 2]) == f.size() - l3_off;
  return l4_off - l3_off == 40 && be16(&f[l3_off + 4]) == f.size() - l4_off;
}

// The IPv4 header checksum over the header as its IHL gives it.
bool ipv4_header_valid(const std::vector<uint8_t>& f, uint32_t l3_off) {
  const uint32_t ihl = (f[l3_off] & 0xf) * 4u;
  return ihl >= 20 && l3_off + ihl <= f.size() &&
         fold(rte_raw_cksum(f.data() + l3_off, ihl)) == 0xffff;
}

// The checksum fields the request in `m` allows an offload to change: the IPv4 header's and the
// TCP/UDP one.
bool in_checksum_field(uint32_t i, const rte_mbuf& m) {
  const uint32_t l3 = m.l2_len, l4 = l3 + m.l3_len;
  const uint64_t l4_request = m.ol_flags & RTE_MBUF_F_TX_L4_MASK;
  if ((m.ol_flags & RTE_MBUF_F_TX_IP_CKSUM) && i >= l3 + 10 && i < l3 + 12) return true;
  uint32_t field;
  if (l4_request == RTE_MBUF_F_TX_TCP_CKSUM || (m.ol_flags & RTE_MBUF_F_TX_TCP_SEG)) {
    field = l4 + 16;
  } else if (l4_request == RTE_MBUF_F_TX_UDP_CKSUM) {
    field = l4 + 6;
  } else {
    return false;
  }
  return i >= field && i < field + 2;
}

// What a segment looked like when it was handed to the output.
struct Sent {
  std::vector<uint8_t> bytes;
  rte_mbuf meta;  // flags and header lengths only
};

// A NIC without checksum offload: EthdevPort::tx_prepare's software fallback.
void check_nic_delivery(rte_mbuf* m) {
  const uint64_t ol = m->ol_flags;
  const bool l4_request = (ol & RTE_MBUF_F_TX_L4_MASK) == RTE_MBUF_F_TX_TCP_CKSUM ||
                          (ol & RTE_MBUF_F_TX_L4_MASK) == RTE_MBUF_F_TX_UDP_CKSUM;
  if (ol & RTE_MBUF_F_TX_TCP_SEG) {
    // A NIC's TSO gets what a guest may ask for, nothing more.
    const uint32_t headers = m->l2_len + m->l3_len + m->l4_len;
    VQS_FUZZ_CHECK(m->l4_len >= 20 && headers <= m->data_len);
    VQS_FUZZ_CHECK(m->tso_segsz >= kMinGuestGsoSize);
    VQS_FUZZ_CHECK((m->pkt_len - headers + m->tso_segsz - 1) / m->tso_segsz <=
                   kMaxGuestGsoSegments);
    return;
  }
  if (!l4_request && !(ol & RTE_MBUF_F_TX_IP_CKSUM)) return;
  if (!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1 || !complete_tx_checksum(m)) return;
  const std::vector<uint8_t> f = mbuf_bytes(m);
  const uint32_t l3_off = m->l2_len, l4_off = l3_off + m->l3_len;
  if (!ip_lengths_agree(f, l3_off, l4_off)) return;
  if (l4_request) VQS_FUZZ_CHECK(l4_checksum_valid(f, l3_off, l4_off));
  if (ol & RTE_MBUF_F_TX_IP_CKSUM) VQS_FUZZ_CHECK(ipv4_header_valid(f, l3_off));
}

// The receiving guest's view of one delivered packet: `hdr` and `frame` as it reads them.
void check_guest_delivery(const Sent& sent, const VirtioNetHdr& hdr, std::vector<uint8_t> frame,
                          const NetFeatures& features) {
  VQS_FUZZ_CHECK(frame.size() == sent.bytes.size());
  const bool unchanged = frame == sent.bytes;
  for (size_t i = 0; !unchanged && i < frame.size(); ++i)
    VQS_FUZZ_CHECK(frame[i] == sent.bytes[i] ||
                   in_checksum_field(static_cast<uint32_t>(i), sent.meta));
  if (hdr.gso_type != kNetHdrGsoNone) {
    const bool v4 = hdr.gso_type == kNetHdrGsoTcpv4, v6 = hdr.gso_type == kNetHdrGsoTcpv6;
    VQS_FUZZ_CHECK((v4 && features.guest_tso4) || (v6 && features.guest_tso6));
    VQS_FUZZ_CHECK(features.guest_csum && (hdr.flags & kNetHdrFNeedsCsum));
    VQS_FUZZ_CHECK(hdr.gso_size > 0 && hdr.hdr_len <= frame.size());
  }
  if (hdr.flags & kNetHdrFNeedsCsum) {
    VQS_FUZZ_CHECK(features.guest_csum);
    VQS_FUZZ_CHECK(uint32_t{hdr.csum_start} + hdr.csum_offset + 2 <= frame.size());
    // Completed as the guest's stack does: the sum from csum_start on, the field holding the
    // pseudo-header sum.
    const uint16_t csum = static_cast<uint16_t>(
        ~rte_raw_cksum(frame.data() + hdr.csum_start, frame.size() - hdr.csum_start));
    std::memcpy(frame.data() + hdr.csum_start + hdr.csum_offset, &csum, 2);
  }
  const rte_mbuf& m = sent.meta;
  const uint64_t l4 = m.ol_flags & RTE_MBUF_F_TX_L4_MASK;
  const bool l4_request = l4 == RTE_MBUF_F_TX_TCP_CKSUM || l4 == RTE_MBUF_F_TX_UDP_CKSUM ||
                          (m.ol_flags & RTE_MBUF_F_TX_TCP_SEG);
  const uint32_t l3_off = m.l2_len, l4_off = l3_off + m.l3_len;
  if (!ip_lengths_agree(frame, l3_off, l4_off)) return;
  if (l4_request) VQS_FUZZ_CHECK(l4_checksum_valid(frame, l3_off, l4_off));
  if ((m.ol_flags & RTE_MBUF_F_TX_IP_CKSUM) && (frame[l3_off] >> 4) == 4)
    VQS_FUZZ_CHECK(ipv4_header_valid(frame, l3_off));
}

// The dequeued frame is the guest's, but for a checksum completed in software (NEEDS_CSUM
// where no one downstream would recognise it): then right over [csum_start, end).
void check_dequeued(const GuestPacket& packet, const std::vector<uint8_t>& frame) {
  VQS_FUZZ_CHECK(frame.size() == packet.frame.size());
  if (frame == packet.frame) return;
  const uint32_t field = uint32_t{packet.hdr.csum_start} + packet.hdr.csum_offset;
  bool completed = false;
  for (uint32_t i = 0; i < frame.size(); ++i) {
    if (frame[i] == packet.frame[i]) continue;
    VQS_FUZZ_CHECK((packet.hdr.flags & kNetHdrFNeedsCsum) && i >= field && i < field + 2);
    completed = true;
  }
  if (completed) {
    // What the receiver checks: the sum over the same bytes plus the pseudo-header sum, which
    // the guest had left in the field.
    uint16_t pseudo;
    std::memcpy(&pseudo, packet.frame.data() + field, 2);
    const uint8_t* from = frame.data() + packet.hdr.csum_start;
    VQS_FUZZ_CHECK(fold(rte_raw_cksum(from, frame.size() - packet.hdr.csum_start) + pseudo) ==
                   0xffff);
  }
}

// Segments of a train cut by rte_gso: their TCP payloads, in order, are the packet's.
void check_segments(const std::vector<uint8_t>& packet, const rte_mbuf& train,
                    const std::vector<Sent>& segments) {
  const uint32_t headers = train.l2_len + train.l3_len + train.l4_len;
  std::vector<uint8_t> payload;
  for (const Sent& s : segments) {
    VQS_FUZZ_CHECK(s.bytes.size() >= headers);
    VQS_FUZZ_CHECK(s.bytes.size() <= headers + train.tso_segsz);
    payload.insert(payload.end(), s.bytes.begin() + headers, s.bytes.end());
  }
  VQS_FUZZ_CHECK(
      std::equal(payload.begin(), payload.end(), packet.begin() + headers, packet.end()));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string prefix = "--file-prefix=vqs-fuzz-" + std::to_string(getpid());
  const char* args[] = {"offload_fuzz", "--no-huge", "--no-shconf",   "--no-pci",
                        "-m",           "256",       "--log-level=0", prefix.c_str()};
  if (rte_eal_init(static_cast<int>(std::size(args)), const_cast<char**>(args)) < 0) std::abort();
  pool = rte_pktmbuf_pool_create("fuzz", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  gso_direct = rte_pktmbuf_pool_create("gso_direct", kGsoPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       SOCKET_ID_ANY);
  gso_indirect = rte_pktmbuf_pool_create("gso_indirect", kGsoPoolSize, 0, 0, 0, SOCKET_ID_ANY);
  if (pool == nullptr || gso_direct == nullptr || gso_indirect == nullptr) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  // The sender's features decide its header's size; the receiver's what it may be given.
  const auto feature_set = [&in](std::initializer_list<unsigned> bits) {
    uint64_t features = 0;
    for (unsigned bit : bits)
      if (in.ConsumeBool()) features |= 1ull << bit;
    return features;
  };
  const uint64_t tx_features =
      feature_set({kFVersion1, kNetFMrgRxbuf, kNetFCsum, kNetFHostTso4, kNetFHostTso6});
  const uint64_t rx_features =
      feature_set({kFVersion1, kNetFMrgRxbuf, kNetFGuestCsum, kNetFGuestTso4, kNetFGuestTso6});
  const bool zero_copy = in.ConsumeBool();
  const uint32_t zero_copy_min_len = in.ConsumeIntegralInRange<uint32_t>(64, 2048);
  const bool to_guest = in.ConsumeBool();
  const bool nic_has_tso = in.ConsumeBool();
  const uint32_t rx_buffer =
      in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(12, kMaxRxBuffer) : 2048;
  const int pieces = in.ConsumeIntegralInRange<int>(1, kTxRing);
  std::vector<uint32_t> cuts;
  for (int i = 1; i < pieces; ++i) cuts.push_back(in.ConsumeIntegral<uint32_t>());
  const GuestPacket packet = build_packet(in);

  // Region 2, the sender's buffers, is read-only to the datapath: nothing may write it.
  static GuardedMemory memory(
      {4096 * 2, 4096 * 4, kTxBufferBytes, uint64_t{kRxRing} * kMaxRxBuffer}, {2});
  const NetFeatures tx_net = NetFeatures::from_bits(tx_features);
  const NetFeatures rx_net = NetFeatures::from_bits(rx_features);

  // The sender's chain: header and frame, cut into `pieces` descriptors, flush against the end
  // of its region.
  std::vector<uint8_t> chain(tx_net.net_hdr_size, 0);
  std::memcpy(chain.data(), &packet.hdr, sizeof(packet.hdr));
  chain.insert(chain.end(), packet.frame.begin(), packet.frame.end());
  if (chain.size() > memory.size(2)) return 0;
  for (uint32_t& c : cuts) c %= static_cast<uint32_t>(chain.size() + 1);
  std::sort(cuts.begin(), cuts.end());
  cuts.push_back(static_cast<uint32_t>(chain.size()));
  std::memcpy(memory.writable(2) + memory.size(2) - chain.size(), chain.data(), chain.size());
  const uint64_t tx_gpa = memory.tail_gpa(2, chain.size());

  const Rings tx = place_rings(memory, 0, kTxRing);
  std::memset(memory.host(0), 0, memory.size(0));
  uint32_t from = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    tx.desc[i] = VringDesc{tx_gpa + from, cuts[i] - from,
                           static_cast<uint16_t>(i + 1 < cuts.size() ? kVringDescFNext : 0),
                           static_cast<uint16_t>(i + 1)};
    from = cuts[i];
  }
  tx.avail->ring[0] = 0;
  tx.avail->idx = 1;

  const Rings rx = place_rings(memory, 1, kRxRing);
  std::memset(memory.host(1), 0, memory.size(1));
  for (uint16_t i = 0; i < kRxRing; ++i) {
    rx.desc[i] =
        VringDesc{memory.gpa(3) + uint64_t{i} * kMaxRxBuffer, rx_buffer, kVringDescFWrite, 0};
    rx.avail->ring[i] = i;
  }
  rx.avail->idx = kRxRing;

  ZeroCopyTracker tracker;
  tracker.start(kTxRing);
  VirtQueue txq, rxq;
  VirtQueue::Setup setup;
  setup.memory = &memory.table();
  setup.features = tx_features;
  setup.addrs = SplitRingAddrs{tx.desc, tx.avail, tx.used, kTxRing};
  LendPolicy lending;  // copies all unless zero_copy
  if (zero_copy) {
    lending.tracker = &tracker;
    lending.min_len = zero_copy_min_len;
  }
  if (!txq.start(setup)) std::abort();
  setup.features = rx_features;
  setup.addrs = SplitRingAddrs{rx.desc, rx.avail, rx.used, kRxRing};
  if (!rxq.start(setup)) std::abort();

  rte_mbuf* m = nullptr;
  const BurstResult got = dequeue_burst(txq, pool, &m, 1, UINT32_MAX, lending);
  VQS_FUZZ_CHECK(got.packets == 1 || txq.stats().total_drops() == 1);

  if (got.packets == 1) {
    const std::vector<uint8_t> frame = mbuf_bytes(m);
    check_dequeued(packet, frame);
    rx_offload_to_tx_request(m);
    const rte_mbuf train = *m;
    const bool cut = (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG) && (m->ol_flags & RTE_MBUF_F_TX_IPV4);

    // The output: a guest (it takes trains whole with GUEST_TSO4 and GUEST_CSUM, as GuestPort
    // says) or a NIC with or without TSO.
    app::test::FakePort out("out", 0, 1, 1, to_guest);
    out.segments_tcp = to_guest ? rx_net.guest_tso4 && rx_net.guest_csum : nic_has_tso;
    app::PortQueueCounters input;
    TxBufferSet buffers({TxBufferSet::Output{&out, 0}}, TxBufferSet::kMaxBurst,
                        app::GsoPools{gso_direct, gso_indirect});
    buffers.set_input(&input);
    buffers.push(0, m);
    buffers.flush();
    VQS_FUZZ_CHECK(input.drops[static_cast<int>(SwitchDrop::kTxUnsupported)] == 0);
    VQS_FUZZ_CHECK(input.drops[static_cast<int>(SwitchDrop::kMbufExhausted)] == 0);
    std::vector<rte_mbuf*>& segments = out.sent(0);
    VQS_FUZZ_CHECK(!segments.empty() && segments.size() <= kMaxGuestGsoSegments);
    std::vector<Sent> sent(segments.size());
    for (size_t i = 0; i < segments.size(); ++i) {
      sent[i].bytes = mbuf_bytes(segments[i]);
      sent[i].meta = *segments[i];
    }
    if (cut && !out.segments_tcp && segments.size() > 1) check_segments(frame, train, sent);

    if (!to_guest) {
      for (rte_mbuf* s : segments) check_nic_delivery(s);
    } else {
      // One packet at a time, so that each one's fate is known: delivered (its used entries
      // are read back: one, or with mergeable buffers num_buffers), dropped (counted), or left
      // for want of buffers (the switch counts tx_guest_full).
      size_t consumed = 0;
      uint16_t used_seen = 0;
      for (; consumed < segments.size(); ++consumed) {
        const uint64_t drops_before = rxq.stats().total_drops();
        if (enqueue_burst(rxq, &segments[consumed], 1).packets == 0) break;
        const uint64_t dropped = rxq.stats().total_drops() - drops_before;
        const uint16_t used = static_cast<uint16_t>(rx.used->idx - used_seen);
        VQS_FUZZ_CHECK((dropped == 1 && used == 0) || (dropped == 0 && used > 0));
        if (dropped == 1) continue;
        std::vector<uint8_t> bytes;
        for (uint16_t e = used_seen; e != rx.used->idx; ++e) {
          const VringUsedElem u = rx.used->ring[e];
          VQS_FUZZ_CHECK(u.id < kRxRing && u.len <= rx_buffer);
          const uint8_t* buf = memory.host(3) + uint64_t{u.id} * kMaxRxBuffer;
          bytes.insert(bytes.end(), buf, buf + u.len);
          if (e == used_seen && rx_net.mrg_rxbuf) {
            VQS_FUZZ_CHECK(u.len >= sizeof(VirtioNetHdrMrgRxbuf));
            VQS_FUZZ_CHECK(reinterpret_cast<const VirtioNetHdrMrgRxbuf*>(buf)->num_buffers == used);
          }
        }
        VQS_FUZZ_CHECK(rx_net.mrg_rxbuf || used == 1);
        used_seen = rx.used->idx;
        VQS_FUZZ_CHECK(bytes.size() >= rx_net.net_hdr_size);
        VirtioNetHdr hdr;
        std::memcpy(&hdr, bytes.data(), sizeof(hdr));
        bytes.erase(bytes.begin(), bytes.begin() + rx_net.net_hdr_size);
        check_guest_delivery(sent[consumed], hdr, std::move(bytes), rx_net);
      }
      rte_pktmbuf_free_bulk(segments.data(), static_cast<unsigned>(consumed));
      segments.erase(segments.begin(), segments.begin() + static_cast<ptrdiff_t>(consumed));
    }
    out.free_sent();
  }
  fuzz::stop_and_reap(txq, rxq, tracker);
  VQS_FUZZ_CHECK(rte_mempool_avail_count(pool) == kPoolSize);
  VQS_FUZZ_CHECK(rte_mempool_avail_count(gso_direct) == kGsoPoolSize);
  VQS_FUZZ_CHECK(rte_mempool_avail_count(gso_indirect) == kGsoPoolSize);
  return 0;
}
