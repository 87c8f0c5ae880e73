// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/dequeue.h"

#include <rte_ether.h>

#include <cstring>

#include "datapath/net_offload.h"
#include "datapath/zero_copy_lend.h"
#include "ring/virtio_net_hdr.h"

namespace vqs {
namespace {

constexpr uint16_t kAllocChunk = 32;  // head mbufs taken from the pool at a time

enum class CopyResult { kOk, kPoolEmpty, kNeverFits };

// Copies the packet (the chain after its virtio-net header) into `head` and further segments
// from `stash`. On failure frees what it added; `head` stays the caller's.
CopyResult copy_chain_to_mbuf(IoVecCursor& src, uint32_t len, rte_mbuf* head, MbufStash& stash) {
  rte_mbuf* seg = head;
  uint32_t room = rte_pktmbuf_tailroom(head);
  uint32_t left = len;
  for (;;) {
    const uint32_t n = left < room ? left : room;
    src.read(rte_pktmbuf_mtod_offset(seg, uint8_t*, seg->data_len), n);
    seg->data_len = static_cast<uint16_t>(seg->data_len + n);
    left -= n;
    if (left == 0) break;
    rte_mbuf* next;
    if (!stash.take(&next, 1)) {
      // A packet that needs more mbufs than the pool holds would block the ring for ever.
      const uint32_t seg_room = rte_pktmbuf_data_room_size(stash.pool());
      const uint32_t segs_needed = head->nb_segs + (left + seg_room - 1) / seg_room;
      rte_pktmbuf_free(head->next);
      head->next = nullptr;
      head->nb_segs = 1;
      head->data_len = 0;
      return segs_needed > stash.pool()->size ? CopyResult::kNeverFits : CopyResult::kPoolEmpty;
    }
    next->data_off = 0;  // headroom only matters in the first segment
    seg->next = next;
    seg = next;
    ++head->nb_segs;
    room = rte_pktmbuf_tailroom(seg);
  }
  head->pkt_len = len;
  return CopyResult::kOk;
}

// What one burst carries from chain to chain.
struct DequeueState {
  DequeueState(VirtQueue& queue, rte_mempool* pool, rte_mbuf** out_pkts, uint32_t byte_limit,
               const LendPolicy& lend_policy, ZeroCopyTracker* tracker)
      : vq(queue),
        ring(queue.ring()),
        stats(queue.stats()),
        reader(queue.chain_reader()),
        iov(queue.iov_scratch()),
        pkts(out_pkts),
        stash(pool),
        lending(lend_policy),
        zero_copy(tracker),
        hdr_size(queue.features().net_hdr_size),
        lend_min_len(tracker != nullptr ? lend_policy.min_len : UINT32_MAX),
        dma_ready(tracker != nullptr && tracker->dma_ready()),
        max_bytes(byte_limit) {}

  VirtQueue& vq;
  SplitRing& ring;
  QueueStats& stats;
  const DescChainReader& reader;
  IoVecList& iov;
  rte_mbuf** pkts;
  MbufStash stash;  // further segments; the unused ones go back at the end of the burst
  const LendPolicy& lending;
  ZeroCopyTracker* const zero_copy;  // null: no lending on this queue
  const uint32_t hdr_size;
  const uint32_t lend_min_len;
  const bool dma_ready;
  const uint32_t max_bytes;
  uint16_t consumed = 0;   // chains taken from the ring
  uint16_t out = 0;        // packets delivered in pkts[]
  uint16_t allocated = 0;  // pkts[out, allocated) are fresh mbufs not yet used
  bool pool_empty = false;
  BurstResult result;
};

// The chain stays in the guest's ring and the burst ends (no mbufs, or waiting for a lent chain).
enum class ChainStep { kNext, kStop };

// How many chains this burst may take. A guest cannot have more chains posted than the ring holds
// minus those still lent (they hold descriptors it has not got back): counted before the reap,
// this also keeps one burst's used entries (completions plus new chains) within the ring's size.
uint16_t chains_to_take(VirtQueue& vq, ZeroCopyTracker* zero_copy, uint16_t max_packets) {
  uint16_t room = vq.ring().size();
  if (zero_copy != nullptr) {
    room = static_cast<uint16_t>(room - zero_copy->in_flight());
    if (zero_copy->completions_waiting()) zero_copy->reap(vq.ring());
  }
  uint16_t count = vq.avail_count();
  if (count > room) count = room;
  if (count > max_packets) count = max_packets;
  return count;
}

// Makes pkts[out] a fresh mbuf. Heads are taken kAllocChunk at a time, so a burst cut short by its
// byte limit (or by invalid chains) does not allocate and free a whole burst's worth.
__rte_always_inline bool take_head_mbuf(DequeueState& s, rte_mempool* pool, uint16_t count) {
  if (s.out < s.allocated) return true;
  const uint16_t left = count - s.consumed;
  const uint16_t want = left < kAllocChunk ? left : kAllocChunk;
  if (rte_pktmbuf_alloc_bulk(pool, s.pkts + s.out, want) == 0) {
    s.allocated = static_cast<uint16_t>(s.out + want);
  } else if ((s.pkts[s.out] = rte_pktmbuf_alloc(pool)) != nullptr) {
    s.allocated = static_cast<uint16_t>(s.out + 1);  // nearly empty: one at a time
  } else {
    s.pool_empty = true;
    return false;
  }
  return true;
}

__rte_always_inline void deliver(DequeueState& s, rte_mbuf* m, uint32_t pkt_len) {
  ++s.out;
  s.result.bytes += pkt_len;
  s.stats.count_packet(pkt_len, rte_pktmbuf_mtod(m, const uint8_t*));
}

// The common case: one descriptor holding header and packet, the packet fitting the head mbuf and
// too short to lend.
__rte_always_inline void copy_single_buffer(DequeueState& s, uint16_t head, rte_mbuf* m,
                                            const uint8_t* buf, uint32_t len) {
  const uint32_t pkt_len = len - s.hdr_size;
  VirtioNetHdr hdr;
  std::memcpy(&hdr, buf, sizeof(hdr));
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), buf + s.hdr_size, pkt_len);
  m->data_len = static_cast<uint16_t>(pkt_len);
  m->pkt_len = pkt_len;
  s.ring.put_used(head, 0);
  ++s.consumed;
  if ((hdr.flags != 0 || hdr.gso_type != kNetHdrGsoNone) && !apply_guest_tx_offload(hdr, m)) {
    rte_pktmbuf_reset(m);  // reused for the next packet
    s.stats.count_drop(DropReason::kBadOffloadRequest);
    return;
  }
  deliver(s, m, pkt_len);
  if (s.zero_copy != nullptr) ++s.stats.zero_copy_copied;
}

// kCount: a chain that can be delivered.
DropReason check_chain(ChainError error, uint64_t chain_len, uint32_t hdr_size) {
  if (error != ChainError::kNone || chain_len < hdr_size) return DropReason::kInvalidDescriptor;
  if (chain_len - hdr_size < RTE_ETHER_HDR_LEN) return DropReason::kRunt;
  if (chain_len - hdr_size > kMaxFrameLen) return DropReason::kTooLarge;
  return DropReason::kCount;
}

// A lent chain goes back to the guest when its last mbuf is freed, not now.
void finish_lent(DequeueState& s, const VirtioNetHdr& hdr, rte_mbuf* m, uint32_t pkt_len) {
  ++s.consumed;
  if (!apply_guest_tx_offload(hdr, m)) {
    // Freeing it completes the lent chain (returned with the next burst); a fresh mbuf takes
    // its place.
    rte_pktmbuf_free(m);
    s.pkts[s.out] = s.pkts[s.allocated - 1];
    --s.allocated;
    s.stats.count_drop(DropReason::kBadOffloadRequest);
    return;
  }
  deliver(s, m, pkt_len);
  ++s.stats.zero_copy_packets;
}

// Copies the packet into `m` (and more segments). Sets *drop when it is dropped instead.
ChainStep copy_packet(DequeueState& s, IoVecCursor& cursor, const VirtioNetHdr& hdr, rte_mbuf* m,
                      uint32_t pkt_len, bool limit_hit, DropReason* drop) {
  const CopyResult copied = copy_chain_to_mbuf(cursor, pkt_len, m, s.stash);
  if (copied == CopyResult::kPoolEmpty) {
    s.pool_empty = true;
    return ChainStep::kStop;
  }
  if (copied == CopyResult::kNeverFits) {
    rte_pktmbuf_reset(m);  // reused for the next packet
    *drop = DropReason::kTooLarge;
    return ChainStep::kNext;
  }
  if (!apply_guest_tx_offload(hdr, m)) {
    if (m->next != nullptr) rte_pktmbuf_free(m->next);
    rte_pktmbuf_reset(m);  // reused for the next packet
    *drop = DropReason::kBadOffloadRequest;
    return ChainStep::kNext;
  }
  if (s.zero_copy != nullptr) ++s.stats.zero_copy_copied;
  if (limit_hit) {
    ++s.stats.zero_copy_limit_copies;  // counted once the copy is made
    s.result.lending_full = true;
  }
  deliver(s, m, pkt_len);
  return ChainStep::kNext;
}

// Any chain the fast path did not take: validated, then lent or copied.
ChainStep dequeue_chain(DequeueState& s, uint16_t head, rte_mbuf* m, uint8_t* single,
                        uint32_t single_len) {
  s.iov.clear();
  // One descriptor, already read and translated (a packet to lend, or one that does not fit the
  // head mbuf): no second walk of the chain.
  const ChainError error = single != nullptr && s.iov.push(single, single_len)
                               ? ChainError::kNone
                               : s.reader.read(head, ChainAccess::kDeviceReads, s.iov);
  const uint64_t chain_len = s.iov.total_len();
  DropReason drop = check_chain(error, chain_len, s.hdr_size);
  if (drop == DropReason::kCount) {
    const uint32_t pkt_len = static_cast<uint32_t>(chain_len - s.hdr_size);
    VirtioNetHdr hdr;
    IoVecCursor cursor(s.iov);
    cursor.read(&hdr, sizeof(hdr));  // legacy and 1.x share these 10 bytes
    cursor.skip(s.hdr_size - sizeof(hdr));
    bool limit_hit = false;
    if (pkt_len >= s.lend_min_len && offload_fits_head(hdr)) {
      const LendResult lent =
          lend_packet(s.iov, s.hdr_size, pkt_len, head, m, s.stash, *s.zero_copy, s.dma_ready);
      if (lent == LendResult::kLent) {
        finish_lent(s, hdr, m, pkt_len);
        return ChainStep::kNext;
      }
      if (lent == LendResult::kPoolEmpty) {
        s.pool_empty = true;
        return ChainStep::kStop;
      }
      limit_hit = lent == LendResult::kNoSlot;
      // Waiting needs a lent chain to come back: on a ring too small to lend from (limit 0)
      // nothing ever would, and the queue would stop for good.
      if (limit_hit && !s.lending.fallback && s.zero_copy->in_flight() > 0) {
        ++s.stats.zero_copy_limit_waits;
        s.result.lending_full = true;  // the owner asks lazy NIC tx queues for the lent chains
        return ChainStep::kStop;
      }
    }
    if (copy_packet(s, cursor, hdr, m, pkt_len, limit_hit, &drop) == ChainStep::kStop) {
      return ChainStep::kStop;
    }
  }
  if (drop != DropReason::kCount) s.stats.count_drop(drop);
  s.ring.put_used(head, 0);  // nothing is written into a TX buffer
  ++s.consumed;
  return ChainStep::kNext;
}

}  // namespace

BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes, const LendPolicy& lending) {
  if (!vq.ready()) return BurstResult{};
  const uint16_t used_before = vq.ring().last_used_idx();
  // Lent chains whose mbufs were freed since the last burst go back to the guest with this one.
  ZeroCopyTracker* const zero_copy = vq.features().in_order ? nullptr : lending.tracker;
  const uint16_t count = chains_to_take(vq, zero_copy, max_packets);
  if (count == 0) {
    vq.complete_burst(used_before);
    return BurstResult{};
  }
  // The lines a copy or a lend reads first: the header and the packet's head (the hardware
  // prefetcher follows a longer copy).
  vq.prefetch_tx_chains(count, kZeroCopyHeadLen);

  DequeueState s(vq, pool, pkts, max_bytes, lending, zero_copy);
  while (s.consumed < count && take_head_mbuf(s, pool, count)) {
    const uint16_t head = s.ring.avail_head(s.consumed);
    rte_mbuf* m = pkts[s.out];
    uint32_t single_len = 0;
    uint8_t* const single = s.reader.single_buffer(head, ChainAccess::kDeviceReads, &single_len);
    if (single != nullptr && single_len >= s.hdr_size + RTE_ETHER_HDR_LEN &&
        single_len - s.hdr_size <= rte_pktmbuf_tailroom(m) &&
        single_len - s.hdr_size < s.lend_min_len) {
      copy_single_buffer(s, head, m, single, single_len);
    } else if (dequeue_chain(s, head, m, single, single_len) == ChainStep::kStop) {
      break;
    }
    if (s.result.bytes >= max_bytes) break;
  }
  s.ring.consume(s.consumed);
  vq.complete_burst(used_before);
  if (s.pool_empty) ++s.stats.mbuf_alloc_failures;
  if (s.out < s.allocated) rte_pktmbuf_free_bulk(pkts + s.out, s.allocated - s.out);
  s.result.packets = s.out;
  return s.result;
}

}  // namespace vqs
