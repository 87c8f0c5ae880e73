// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/dequeue.h"

#include <rte_ether.h>

#include <cstring>

#include "datapath/net_offload.h"
#include "datapath/zero_copy_lend.h"
#include "ring/line_release.h"
#include "ring/ring_burst.h"
#include "ring/virtio_net_hdr.h"

namespace vqs {
namespace {

// Head mbufs are taken from the pool this many at a time, so a burst cut short by its byte limit
// (or by invalid chains) does not allocate and free a whole burst's worth.
constexpr uint16_t kAllocChunk = 32;

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

// Chains this burst may take: those posted, but no more than the ring holds minus those still
// lent (they hold descriptors the guest has not got back), nor more than `max`. Counted before
// the reap, this also keeps the used entries of one burst (completions plus new chains) within
// the ring's size. `*takes_all`: the burst takes every chain the guest has posted (it is
// waiting on the guest).
template <typename Burst>
inline uint16_t chains_to_take(Burst& burst, ZeroCopyTracker* zero_copy, uint16_t max,
                               bool* takes_all) {
  uint16_t room = burst.ring().size();
  if (zero_copy != nullptr) {
    room = static_cast<uint16_t>(room - zero_copy->in_flight());
    if (zero_copy->completions_waiting()) zero_copy->reap(burst.ring());
  }
  if (room > max) room = max;
  const uint16_t posted = burst.available(room);
  *takes_all = posted <= room;
  return posted < room ? posted : room;
}

// Head mbufs for the chains still to take, kAllocChunk at a time, into pkts[out..]; one at a
// time when the pool is nearly empty. Returns the new end of the fresh mbufs, `out` when none.
inline uint16_t take_head_mbufs(rte_mempool* pool, rte_mbuf** pkts, uint16_t out, uint16_t left) {
  const uint16_t want = left < kAllocChunk ? left : kAllocChunk;
  if (rte_pktmbuf_alloc_bulk(pool, pkts + out, want) == 0) return static_cast<uint16_t>(out + want);
  if ((pkts[out] = rte_pktmbuf_alloc(pool)) != nullptr) return static_cast<uint16_t>(out + 1);
  return out;
}

// What every chain of one burst shares.
template <typename Burst>
struct BurstContext {
  VirtQueue& vq;
  Burst& burst;
  QueueStats& stats;
  IoVecList& iov;
  MbufStash& stash;
  ZeroCopyTracker* zero_copy;  // null: no lending on this queue
  const LendPolicy& lending;
  uint32_t hdr_size;
  uint32_t lend_min_len;  // UINT32_MAX when not lending
  bool dma_ready;
};

// What became of one chain taken by the slow path.
enum class ChainOutcome : uint8_t {
  kCopied,       // the packet is in the head mbuf; the chain goes back now
  kLent,         // the head mbuf carries the guest's buffers; the chain goes back when freed
  kDropped,      // counted under its reason; the head mbuf is reset for reuse
  kLentDropped,  // lent, then refused: the head mbuf was freed (the chain completes later)
  kPoolEmpty,    // the chain stays in the guest's ring
  kLendWait,     // the chain stays in the ring until a lent chain comes back
};

// The fast path: one descriptor holding header and packet, the packet fitting `m`, too short to
// lend. Returns false (nothing done) when the chain is not of that kind. Takes plain values, not
// the BurstContext, so that they stay in registers across the loop. `release_head`: the packet's
// head lines go back to the guest once copied (buffer_release).
inline __attribute__((always_inline)) bool copy_single_buffer(uint8_t* single, uint32_t single_len,
                                                              uint32_t hdr_size,
                                                              uint32_t lend_min_len, rte_mbuf* m,
                                                              QueueStats& stats, bool* dropped,
                                                              bool release_head) {
  if (single == nullptr || single_len < hdr_size + RTE_ETHER_HDR_LEN ||
      single_len - hdr_size > rte_pktmbuf_tailroom(m) || single_len - hdr_size >= lend_min_len) {
    return false;
  }
  const uint32_t pkt_len = single_len - hdr_size;
  VirtioNetHdr hdr;
  std::memcpy(&hdr, single, sizeof(hdr));
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), single + hdr_size, pkt_len);
  if (release_head) stats.buffer_lines_released += release_packet_head(single + hdr_size, pkt_len);
  m->data_len = static_cast<uint16_t>(pkt_len);
  m->pkt_len = pkt_len;
  *dropped = (hdr.flags != 0 || hdr.gso_type != kNetHdrGsoNone) && !apply_guest_tx_offload(hdr, m);
  if (*dropped) {
    rte_pktmbuf_reset(m);  // reused for the next packet
    stats.count_drop(DropReason::kBadOffloadRequest);
  }
  return true;
}

DropReason check_chain_length(ChainError error, uint64_t chain_len, uint32_t hdr_size) {
  if (error != ChainError::kNone || chain_len < hdr_size) return DropReason::kInvalidDescriptor;
  if (chain_len - hdr_size < RTE_ETHER_HDR_LEN) return DropReason::kRunt;
  if (chain_len - hdr_size > kMaxFrameLen) return DropReason::kTooLarge;
  return DropReason::kCount;
}

// Every chain the fast path does not take: several descriptors, a packet to lend or one larger
// than the head mbuf. `single` is the chain's one descriptor when it has only one, already
// translated. Out of line: the fast path's loop stays small.
template <typename Burst>
__attribute__((noinline)) ChainOutcome dequeue_chain(const BurstContext<Burst>& ctx,
                                                     typename Burst::Handle head, uint8_t* single,
                                                     uint32_t single_len, rte_mbuf* m,
                                                     uint32_t* pkt_len_out, BurstResult& result) {
  IoVecList& iov = ctx.iov;
  iov.clear();
  const ChainError error = single != nullptr && iov.push(single, single_len)
                               ? ChainError::kNone
                               : ctx.burst.read(head, ChainAccess::kDeviceReads, iov);
  const uint64_t chain_len = iov.total_len();
  const DropReason invalid = check_chain_length(error, chain_len, ctx.hdr_size);
  if (invalid != DropReason::kCount) {
    ctx.stats.count_drop(invalid);
    return ChainOutcome::kDropped;
  }
  const uint32_t pkt_len = static_cast<uint32_t>(chain_len - ctx.hdr_size);
  *pkt_len_out = pkt_len;
  VirtioNetHdr hdr;
  IoVecCursor cursor(iov);
  cursor.read(&hdr, sizeof(hdr));  // legacy and 1.x share these 10 bytes
  cursor.skip(ctx.hdr_size - sizeof(hdr));
  bool limit_hit = false;
  if (pkt_len >= ctx.lend_min_len && offload_fits_head(hdr)) {
    const LendResult lent =
        lend_packet(iov, ctx.hdr_size, pkt_len, ctx.burst.id(head), ctx.burst.ring_slots(head), m,
                    ctx.stash, *ctx.zero_copy, ctx.dma_ready);
    if (lent == LendResult::kLent) {
      // The chain goes back to the guest when its last mbuf is freed, not now.
      if (!apply_guest_tx_offload(hdr, m)) {
        rte_pktmbuf_free(m);  // completes the lent chain, returned with the next burst
        ctx.stats.count_drop(DropReason::kBadOffloadRequest);
        return ChainOutcome::kLentDropped;
      }
      ++ctx.stats.zero_copy_packets;
      return ChainOutcome::kLent;
    }
    if (lent == LendResult::kPoolEmpty) return ChainOutcome::kPoolEmpty;
    limit_hit = lent == LendResult::kNoSlot;
    // Waiting needs a lent chain to come back: on a ring too small to lend from (limit 0)
    // nothing ever would, and the queue would stop for good.
    if (limit_hit && !ctx.lending.fallback && ctx.zero_copy->in_flight() > 0) {
      ++ctx.stats.zero_copy_limit_waits;
      result.lending_full = true;  // the owner asks lazy NIC tx queues for the lent chains
      return ChainOutcome::kLendWait;
    }
  }
  const CopyResult copied = copy_chain_to_mbuf(cursor, pkt_len, m, ctx.stash);
  if (copied == CopyResult::kPoolEmpty) return ChainOutcome::kPoolEmpty;
  if (copied == CopyResult::kNeverFits) {
    rte_pktmbuf_reset(m);
    ctx.stats.count_drop(DropReason::kTooLarge);
    return ChainOutcome::kDropped;
  }
  if (!apply_guest_tx_offload(hdr, m)) {
    if (m->next != nullptr) rte_pktmbuf_free(m->next);
    rte_pktmbuf_reset(m);
    ctx.stats.count_drop(DropReason::kBadOffloadRequest);
    return ChainOutcome::kDropped;
  }
  if (ctx.zero_copy != nullptr) ++ctx.stats.zero_copy_copied;
  if (limit_hit) {
    ++ctx.stats.zero_copy_limit_copies;  // counted once the copy is made
    result.lending_full = true;
  }
  return ChainOutcome::kCopied;
}

template <typename Burst>
BurstResult dequeue_burst_on(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts,
                             uint16_t max_packets, uint32_t max_bytes, const LendPolicy& lending) {
  BurstResult result;
  Burst burst(vq);
  const uint16_t used_before = vq.used_token();
  // Lent chains whose mbufs were freed since the last burst go back to the guest with this one.
  ZeroCopyTracker* const zero_copy = vq.features().in_order ? nullptr : lending.tracker;
  bool takes_all = false;
  const uint16_t count = chains_to_take(burst, zero_copy, max_packets, &takes_all);
  if (count == 0) {
    vq.complete_burst(used_before);
    return result;
  }

  // The lines a copy or a lend reads first: the header and the packet's head (the hardware
  // prefetcher follows a longer copy).
  burst.prefetch_tx(count, kZeroCopyHeadLen);
  QueueStats& stats = vq.stats();
  const uint32_t lend_min_len = zero_copy != nullptr ? lending.min_len : UINT32_MAX;
  const uint32_t hdr_size = vq.features().net_hdr_size;
  MbufStash stash(pool);  // further segments; the unused ones go back at the end of the burst
  const BurstContext<Burst> ctx{vq,           burst,
                                stats,        vq.iov_scratch(),
                                stash,        zero_copy,
                                lending,      hdr_size,
                                lend_min_len, zero_copy != nullptr && zero_copy->dma_ready()};
  // A burst that empties the ring waits on the guest: if it is far, the heads of the packets
  // copied go back, so that its next writes of headers there need not take them from us.
  const bool release_heads = burst.releases_buffer_lines(takes_all);
  // A frame we wrote into the queue pair's RX ring, looked out for (sender_gate.h).
  const uint8_t* const watched = vq.sender_gate().watched();
  uint16_t consumed = 0;   // chains taken from the ring
  uint16_t out = 0;        // packets delivered in pkts[]
  uint16_t allocated = 0;  // pkts[out, allocated) are fresh mbufs not yet used
  bool pool_empty = false;
  while (consumed < count) {
    if (out == allocated) {
      allocated = take_head_mbufs(pool, pkts, out, static_cast<uint16_t>(count - consumed));
      if (allocated == out) {
        pool_empty = true;
        break;  // the rest stay in the guest's ring
      }
    }
    const typename Burst::Handle head = burst.handle(consumed);
    rte_mbuf* m = pkts[out];
    uint32_t single_len = 0;
    uint8_t* const single = burst.single_buffer(head, ChainAccess::kDeviceReads, &single_len);
    bool dropped = false;
    uint32_t pkt_len = single_len - hdr_size;
    if (copy_single_buffer(single, single_len, hdr_size, lend_min_len, m, stats, &dropped,
                           release_heads)) {
      burst.put_sent(head);
      ++consumed;
      if (dropped) continue;
      if (single + hdr_size == watched) [[unlikely]]
        vq.sender_gate().vote(watched, rte_pktmbuf_mtod(m, const uint8_t*), pkt_len);
      if (zero_copy != nullptr) ++stats.zero_copy_copied;
    } else {
      const ChainOutcome outcome =
          dequeue_chain(ctx, head, single, single_len, m, &pkt_len, result);
      if (outcome == ChainOutcome::kPoolEmpty) {
        pool_empty = true;
        break;  // this packet stays in the guest's ring
      }
      if (outcome == ChainOutcome::kLendWait) break;
      // Nothing is written into a TX buffer; a lent chain goes back when its mbufs are freed.
      if (outcome != ChainOutcome::kLent && outcome != ChainOutcome::kLentDropped) {
        burst.put_used(head, 0);
      }
      ++consumed;
      if (outcome == ChainOutcome::kLentDropped) {
        pkts[out] = pkts[allocated - 1];  // a fresh mbuf takes the freed one's place
        --allocated;
        continue;
      }
      if (outcome == ChainOutcome::kDropped) continue;
    }
    ++out;
    result.bytes += pkt_len;
    stats.count_packet(pkt_len, rte_pktmbuf_mtod(m, const uint8_t*));
    if (result.bytes >= max_bytes) break;
  }
  burst.consume(consumed);
  vq.complete_burst(used_before);
  // The descriptor lines read go back if the guest is far (SplitBurst::release_lines).
  burst.release_lines(consumed);
  if (pool_empty) ++stats.mbuf_alloc_failures;
  if (out < allocated) rte_pktmbuf_free_bulk(pkts + out, allocated - out);
  vq.sender_gate().update(stats.packets);  // one compare, a load once a window
  result.packets = out;
  return result;
}

}  // namespace

BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes, const LendPolicy& lending) {
  if (!vq.ready()) return BurstResult{};
  if (vq.packed())
    return dequeue_burst_on<PackedBurst>(vq, pool, pkts, max_packets, max_bytes, lending);
  return dequeue_burst_on<SplitBurst>(vq, pool, pkts, max_packets, max_bytes, lending);
}

}  // namespace vqs
