// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/enqueue.h"

#include "ring/virtio_net_hdr.h"

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_prefetch.h>

#include <cstring>

#include "datapath/net_offload.h"
#include "ring/ring_burst.h"

namespace vqs {
namespace {

// Of each guest buffer a burst writes, the packet bytes fetched ahead for writing (one line: the
// hardware prefetcher follows a longer copy).
constexpr uint32_t kRxPrefetchBytes = 64;

template <typename Handle>
struct RxHead {
  Handle chain;  // the burst's handle
  uint32_t capacity;
};

// Writes header and packet into the buffers in `iov` (already known to be large enough), then
// the offload patches (checksums) into the packet's copy.
void write_packet(const IoVecList& iov, const VirtioNetHdrMrgRxbuf& hdr, uint32_t hdr_size,
                  const rte_mbuf* m, const GuestRxOffload& offload) {
  IoVecCursor cursor(iov);
  cursor.write(&hdr, hdr_size);
  for (const rte_mbuf* seg = m; seg != nullptr; seg = seg->next)
    cursor.write(rte_pktmbuf_mtod(seg, const uint8_t*), seg->data_len);
  for (uint8_t i = 0; i < offload.patch_count; ++i) {
    const GuestRxOffload::Patch& p = offload.patches[i];
    IoVecCursor at(iov);
    at.skip(hdr_size + p.offset);
    at.write(p.bytes, p.len);
  }
}

// A packet without offloads in one buffer: header zero, num_buffers 1, stored only where the
// guest's copy differs, so its line stays in the guest's cache (as librte_vhost's
// ASSIGN_UNLESS_EQUAL; docs/benchmarks.md, "What moved the numbers").
void write_plain_header(uint8_t* buf, uint32_t hdr_size) {
  VirtioNetHdrMrgRxbuf hdr{};
  hdr.num_buffers = 1;
  // Constant sizes, so that the comparisons are inlined.
  if (hdr_size == sizeof(hdr)) {
    if (std::memcmp(buf, &hdr, sizeof(hdr)) != 0) std::memcpy(buf, &hdr, sizeof(hdr));
  } else {
    if (std::memcmp(buf, &hdr, sizeof(VirtioNetHdr)) != 0)
      std::memcpy(buf, &hdr, sizeof(VirtioNetHdr));
  }
}

// The packet's segments one after another at `dst` (known to hold pkt_len bytes). memmove: a
// segment may be guest memory (a lent packet's payload), which a hostile guest may also post as
// the receive buffer.
void copy_segments(uint8_t* dst, const rte_mbuf* m) {
  for (const rte_mbuf* seg = m; seg != nullptr; seg = seg->next) {
    std::memmove(dst, rte_pktmbuf_mtod(seg, const uint8_t*), seg->data_len);
    dst += seg->data_len;
  }
}

// The destination MAC for the stats: a chained mbuf's first segment may hold less of it.
const uint8_t* destination(const rte_mbuf* m, uint32_t len, uint8_t (&copy)[RTE_ETHER_ADDR_LEN]) {
  if (len < RTE_ETHER_ADDR_LEN) return rte_pktmbuf_mtod(m, const uint8_t*);
  return static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, RTE_ETHER_ADDR_LEN, copy));
}

// The fast path's packet copies and used entries, made after the headers of up to kCapacity
// packets are written: the header comparisons' loads (lines the guest may hold) then overlap,
// instead of each waiting behind the stores of the packets before it (guest-rx 64 B: 1.49x near,
// docs/benchmarks.md "Copies after the headers"). A packet's used entry follows its copy, so a
// used entry staged (a packed ring publishes a full shadow) is always of a packet written whole.
template <typename Burst>
class DeferredCopies {
 public:
  // The switch's default burst, so one of its bursts is one group. Groups of 8 and 16 did as well
  // (guest-rx and VM-to-VM 64 B within 3 %, docs/benchmarks.md "Copies after the headers").
  static constexpr uint32_t kCapacity = 32;
  DeferredCopies(VirtQueue& vq, Burst& burst, DirtyLog* log, uint32_t hdr_size)
      : vq_(vq), burst_(burst), log_(log), hdr_size_(hdr_size) {}

  // `m` (`len` bytes) to copy into `buf` past its header, then chain `id` used.
  void add(typename Burst::Handle id, uint8_t* buf, const rte_mbuf* m, uint32_t len) {
    if (count_ == kCapacity) flush();
    copies_[count_++] = Copy{id, buf, m, len};
  }
  // Every copy and used entry added, in order: before any other used entry of the burst.
  void flush() {
    for (uint32_t i = 0; i < count_; ++i) {
      const Copy& c = copies_[i];
      // An mbuf of our own pool's memory cannot overlap a guest buffer.
      if (c.m->nb_segs == 1 && RTE_MBUF_DIRECT(c.m)) [[likely]]
        std::memcpy(c.buf + hdr_size_, rte_pktmbuf_mtod(c.m, const uint8_t*), c.len);
      else
        copy_segments(c.buf + hdr_size_, c.m);
      if (log_ != nullptr) [[unlikely]]
        vq_.log_written(log_, c.buf, hdr_size_ + c.len);
      burst_.put_used(c.id, hdr_size_ + c.len);
    }
    count_ = 0;
  }

 private:
  struct Copy {
    typename Burst::Handle id;
    uint8_t* buf;
    const rte_mbuf* m;
    uint32_t len;
  };
  VirtQueue& vq_;
  Burst& burst_;
  DirtyLog* const log_;
  const uint32_t hdr_size_;
  uint32_t count_ = 0;
  Copy copies_[kCapacity];  // [0, count_): headers written, packets not yet
};

// Descriptor reads a burst may spend gathering, per packet, on top of one longest chain: a
// 64 KiB packet in 1.5 KiB mergeable buffers takes 44 one-descriptor chains, and Linux's
// non-mergeable big-packet chains have 19 descriptors. Chains of empty or tiny buffers could
// otherwise cost 10^5-10^6 reads a packet.
constexpr uint32_t kRxDescriptorsPerPacket = 64;

// Chains a packed burst copies more at a time when its packets need more than one each.
constexpr uint16_t kMoreChains = 32;

// Gathers posted receive chains for one packet, from ring position `pos` on.
template <typename Burst>
class RxBufferGatherer {
 public:
  RxBufferGatherer(VirtQueue& vq, Burst& burst, uint16_t posted, uint16_t packets)
      : vq_(vq),
        burst_(burst),
        posted_(posted),
        descriptors_left_(kRxDescriptorsPerPacket * packets + IoVecList::kCapacity) {}

  // Chains known to be posted (a packed burst copies more as they are needed).
  uint16_t posted() const { return posted_; }
  // Whether the chains end at `pos`: no more posted, or no more for this burst.
  bool at_end(uint16_t pos) {
    if (pos < posted_) return false;
    if (!ended_) posted_ = burst_.more(posted_, static_cast<uint16_t>(posted_ + kMoreChains));
    return pos >= posted_;
  }

  enum class Outcome { kFits, kTooSmall, kRingEmpty };

  // Non-mergeable: one chain that must hold `need` bytes. Invalid chains on the way are
  // consumed (used.len 0) and counted. kTooSmall leaves the chain posted.
  Outcome one_chain(uint16_t& pos, uint32_t need) {
    IoVecList& iov = vq_.iov_scratch();
    for (;;) {
      if (at_end(pos)) return Outcome::kRingEmpty;
      const typename Burst::Handle id = burst_.handle(pos);
      iov.clear();
      const ChainError error = read(id, iov);
      if (budget_spent()) {
        end_at(pos);  // this chain and the rest stay posted for the next burst
        return Outcome::kRingEmpty;
      }
      if (error != ChainError::kNone) {
        ++pos;
        if (!consume_invalid(id)) end_at(pos);  // enough for this burst: as if the ring ended
        continue;
      }
      if (iov.total_len() < need) return Outcome::kTooSmall;
      heads_[0] = Head{id, need};
      head_count_ = 1;
      ++pos;
      return Outcome::kFits;
    }
  }

  // Mergeable: as many chains as `need` takes, each at least one header long. Invalid chains on
  // the way are consumed and counted; see leave_posted() for when the packet is not written.
  Outcome merged_chains(uint16_t& pos, uint32_t need, uint32_t hdr_size) {
    IoVecList& iov = vq_.iov_scratch();
    iov.clear();
    head_count_ = 0;
    uint64_t capacity = 0;
    uint16_t walk = pos;
    uint16_t first_valid = 0;
    bool invalid_after_valid = false;
    while (capacity < need) {
      if (at_end(walk)) {
        pos = leave_posted(walk, first_valid, invalid_after_valid);
        return Outcome::kRingEmpty;
      }
      const typename Burst::Handle id = burst_.handle(walk);
      const uint32_t before = iov.count();
      const uint64_t before_len = iov.total_len();
      const ChainError error = read(id, iov);
      if (budget_spent()) {
        iov.truncate(before);
        end_at(walk);  // this chain and the rest stay posted for the next burst
        pos = leave_posted(walk, first_valid, invalid_after_valid);
        return Outcome::kRingEmpty;
      }
      if (error == ChainError::kTooManySegments && head_count_ > 0) {
        // The guest's buffers are too small for this packet within our segment limit.
        pos = leave_posted(walk, first_valid, invalid_after_valid);
        return Outcome::kTooSmall;
      }
      ++walk;
      const uint64_t chain_len = iov.total_len() - before_len;
      if (error != ChainError::kNone || chain_len < hdr_size) {
        iov.truncate(before);
        if (head_count_ > 0 && vq_.features().in_order) {
          // In order, this chain's used entry cannot go before those of the chains gathered
          // ahead of it: they go back empty first, and the packet gathers afresh after it.
          return_gathered();
          iov.clear();
          capacity = 0;
        } else if (head_count_ > 0) {
          invalid_after_valid = true;
        }
        if (!consume_invalid(id)) end_at(walk);  // enough for this burst: as if the ring ended
        continue;
      }
      if (head_count_ == 0) first_valid = static_cast<uint16_t>(walk - 1);
      const uint64_t take = need - capacity < chain_len ? need - capacity : chain_len;
      heads_[head_count_++] = Head{id, static_cast<uint32_t>(take)};
      capacity += chain_len;
    }
    // Gathered chains are consumed; invalid chains among them were already returned.
    pos = walk;
    return Outcome::kFits;
  }

  uint32_t head_count() const { return head_count_; }
  using Head = RxHead<typename Burst::Handle>;
  const Head& head(uint32_t i) const { return heads_[i]; }

 private:
  ChainError read(typename Burst::Handle id, IoVecList& iov) {
    uint32_t visited = 0;
    const ChainError error = burst_.read(id, ChainAccess::kDeviceWrites, iov, &visited);
    if (visited > descriptors_left_ && !budget_spent_) {
      budget_spent_ = true;
      ++vq_.stats().rx_descriptor_budget_bursts;
    }
    descriptors_left_ -= visited < descriptors_left_ ? visited : descriptors_left_;
    return error;
  }
  bool budget_spent() const { return budget_spent_; }
  void end_at(uint16_t pos) {
    posted_ = pos;
    ended_ = true;
  }

  // The packet will not be written: the ring position to go on from. Gathered chains stay posted
  // unless an invalid chain after them was consumed; then they go back to the guest empty.
  uint16_t leave_posted(uint16_t walk, uint16_t first_valid, bool invalid_after_valid) {
    if (head_count_ == 0) return walk;
    if (!invalid_after_valid) return first_valid;
    return_gathered();
    return walk;
  }

  // The gathered chains go back to the guest empty (used.len 0), in ring order.
  void return_gathered() {
    for (uint32_t i = 0; i < head_count_; ++i) burst_.put_used(heads_[i].chain, 0);
    head_count_ = 0;
  }

  // An invalid chain goes back empty. Counted per chain, not as a packet drop: the packet goes on
  // to the next chain. Bounded per burst, so a ring full of invalid chains costs one burst a few
  // thousand descriptor reads at most.
  bool consume_invalid(typename Burst::Handle id) {
    burst_.put_used(id, 0);
    ++vq_.stats().invalid_rx_chains;
    return ++invalid_chains_ < kMaxInvalidChainsPerBurst;
  }

  static constexpr uint32_t kMaxInvalidChainsPerBurst = 32;

  VirtQueue& vq_;
  Burst& burst_;
  uint16_t posted_;
  bool ended_ = false;
  uint32_t descriptors_left_;
  bool budget_spent_ = false;
  uint32_t invalid_chains_ = 0;
  uint32_t head_count_ = 0;
  // Each gathered chain has at least one buffer, so the segment limit bounds the chain count.
  Head heads_[IoVecList::kCapacity];
};

template <typename Burst>
BurstResult enqueue_burst_on(VirtQueue& vq, rte_mbuf* const* pkts, uint16_t count) {
  BurstResult result;
  Burst burst(vq);
  const uint16_t used_before = vq.used_token();
  const uint16_t posted = burst.available(count);
  const NetFeatures& features = vq.features();
  const uint32_t hdr_size = features.net_hdr_size;
  QueueStats& stats = vq.stats();
  const uint64_t packets_before = stats.packets;
  RxBufferGatherer<Burst> gatherer(vq, burst, posted, count);
  uint16_t pos = 0;
  uint16_t consumed = 0;
  DirtyLog* const log = vq.dirty_log();  // live migration: each buffer written is reported

  // The mbufs' headers are read first (length, offload flags): fetch them all now, and each
  // packet's data one packet ahead.
  for (uint16_t i = 0; i < count; ++i) rte_prefetch0(pkts[i]);
  burst.prefetch_rx(posted < count ? posted : count, kRxPrefetchBytes);
  // Offload requests that need plan_guest_rx_offload(); anything else gets a zero header.
  const uint64_t offload_mask = RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IP_CKSUM |
                                RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG |
                                (features.guest_csum ? RTE_MBUF_F_RX_L4_CKSUM_MASK : 0);
  DeferredCopies<Burst> copies(vq, burst, log, hdr_size);
  // Now and then a frame is recorded for the queue pair's sender gate (sender_gate.h).
  bool sample_due = vq.forward_sample().due(packets_before);
  for (; consumed < count; ++consumed) {
    const rte_mbuf* m = pkts[consumed];
    if (consumed + 1 < count) rte_prefetch0(rte_pktmbuf_mtod(pkts[consumed + 1], const void*));
    const uint32_t len = rte_pktmbuf_pkt_len(m);
    // Fast path: a packet without offload requests into a one-descriptor chain that holds it
    // whole (with or without mergeable buffers, what the slow path would do too). Chained mbufs
    // too: a lent guest frame (zero-copy) is a copied head and the guest's payload.
    if (pos < gatherer.posted() && (m->ol_flags & offload_mask) == 0 && len <= kMaxFrameLen) {
      const typename Burst::Handle id = burst.handle(pos);
      uint32_t buf_len = 0;
      uint8_t* buf = burst.single_buffer(id, ChainAccess::kDeviceWrites, &buf_len);
      if (buf != nullptr && buf_len >= hdr_size + len) {
        write_plain_header(buf, hdr_size);
        copies.add(id, buf, m, len);
        if (sample_due && m->data_len >= ForwardSample::kFrom + ForwardSample::kLen) [[unlikely]] {
          vq.forward_sample().record(buf + hdr_size,
                                     rte_pktmbuf_mtod(m, const uint8_t*) + ForwardSample::kFrom,
                                     packets_before);
          sample_due = false;
        }
        ++pos;
        result.bytes += len;
        uint8_t dst_copy[RTE_ETHER_ADDR_LEN];
        stats.count_packet(len, m->nb_segs == 1 ? rte_pktmbuf_mtod(m, const uint8_t*)
                                                : destination(m, len, dst_copy));
        continue;
      }
    }
    copies.flush();  // their used entries go first
    GuestRxOffload offload;
    const DropReason refused =
        len > kMaxFrameLen ? DropReason::kTooLarge : plan_guest_rx_offload(m, features, &offload);
    if (refused != DropReason::kCount) {
      stats.count_drop(refused);
      continue;
    }
    const uint32_t need = hdr_size + len;
    using Outcome = typename RxBufferGatherer<Burst>::Outcome;
    const Outcome outcome = features.mrg_rxbuf ? gatherer.merged_chains(pos, need, hdr_size)
                                               : gatherer.one_chain(pos, need);
    if (outcome == Outcome::kRingEmpty) break;
    if (outcome == Outcome::kTooSmall) {
      stats.count_drop(DropReason::kTooLarge);
      continue;
    }
    VirtioNetHdrMrgRxbuf hdr;
    hdr.hdr = offload.hdr;
    hdr.num_buffers = static_cast<uint16_t>(gatherer.head_count());
    write_packet(vq.iov_scratch(), hdr, hdr_size, m, offload);
    if (log != nullptr) [[unlikely]]
      vq.log_written(log, vq.iov_scratch(), need);
    for (uint32_t i = 0; i < gatherer.head_count(); ++i)
      burst.put_used(gatherer.head(i).chain, gatherer.head(i).capacity);
    result.bytes += len;
    uint8_t dst_copy[RTE_ETHER_ADDR_LEN];
    stats.count_packet(len, destination(m, len, dst_copy));
  }
  copies.flush();
  burst.consume(pos);
  vq.complete_rx_burst(used_before, static_cast<uint32_t>(stats.packets - packets_before),
                       static_cast<uint16_t>(gatherer.posted() - pos),
                       vq.notify_timed() ? rte_get_tsc_cycles() : 0);
  // The descriptor lines read go back if the guest is far (SplitBurst::release_lines).
  burst.release_lines(pos);
  result.packets = consumed;
  return result;
}

}  // namespace

BurstResult enqueue_burst(VirtQueue& vq, rte_mbuf* const* pkts, uint16_t count) {
  if (!vq.ready() || count == 0) return BurstResult{};
  if (vq.packed()) return enqueue_burst_on<PackedBurst>(vq, pkts, count);
  return enqueue_burst_on<SplitBurst>(vq, pkts, count);
}

}  // namespace vqs
