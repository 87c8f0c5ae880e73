// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/dequeue.h"

#include <rte_ether.h>

#include <cstring>

#include "datapath/net_offload.h"
#include "datapath/zero_copy_lend.h"
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

}  // namespace

BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes, const LendPolicy& lending) {
  BurstResult result;
  if (!vq.ready()) return result;
  SplitRing& ring = vq.ring();
  const uint16_t used_before = ring.last_used_idx();
  // Lent chains whose mbufs were freed since the last burst go back to the guest with this one.
  ZeroCopyTracker* const zero_copy = vq.features().in_order ? nullptr : lending.tracker;
  // A guest cannot have more chains posted than the ring holds minus those still lent (they
  // hold descriptors it has not got back): counted before the reap, this also keeps the used
  // entries of one burst (completions plus new chains) within the ring's size.
  uint16_t room = ring.size();
  if (zero_copy != nullptr) {
    room = static_cast<uint16_t>(room - zero_copy->in_flight());
    if (zero_copy->completions_waiting()) zero_copy->reap(ring);
  }
  uint16_t count = vq.avail_count();
  if (count > room) count = room;
  if (count > max_packets) count = max_packets;
  if (count == 0) {
    vq.complete_burst(used_before);
    return result;
  }

  // The lines a copy or a lend reads first: the header and the packet's head (the hardware
  // prefetcher follows a longer copy).
  vq.prefetch_tx_chains(count, kZeroCopyHeadLen);
  QueueStats& stats = vq.stats();
  const uint32_t lend_min_len = zero_copy != nullptr ? lending.min_len : UINT32_MAX;
  const bool dma_ready = zero_copy != nullptr && zero_copy->dma_ready();
  const uint32_t hdr_size = vq.features().net_hdr_size;
  const DescChainReader& reader = vq.chain_reader();
  IoVecList& iov = vq.iov_scratch();
  MbufStash stash(pool);   // further segments; the unused ones go back at the end of the burst
  uint16_t consumed = 0;   // chains taken from the ring
  uint16_t out = 0;        // packets delivered in pkts[]
  uint16_t allocated = 0;  // pkts[out, allocated) are fresh mbufs not yet used
  bool pool_empty = false;
  while (consumed < count) {
    if (out == allocated) {
      const uint16_t want = count - consumed < kAllocChunk ? count - consumed : kAllocChunk;
      if (rte_pktmbuf_alloc_bulk(pool, pkts + out, want) == 0) {
        allocated = static_cast<uint16_t>(out + want);
      } else if ((pkts[out] = rte_pktmbuf_alloc(pool)) != nullptr) {
        allocated = static_cast<uint16_t>(out + 1);  // nearly empty: one at a time
      } else {
        pool_empty = true;
        break;  // the rest stay in the guest's ring
      }
    }
    const uint16_t head = ring.avail_head(consumed);
    rte_mbuf* m = pkts[out];
    // Fast path: one descriptor holding header and packet, the packet fitting one mbuf, and too
    // short to lend.
    uint32_t single_len = 0;
    uint8_t* const single = reader.single_buffer(head, ChainAccess::kDeviceReads, &single_len);
    if (single != nullptr && single_len >= hdr_size + RTE_ETHER_HDR_LEN &&
        single_len - hdr_size <= rte_pktmbuf_tailroom(m) && single_len - hdr_size < lend_min_len) {
      const uint32_t pkt_len = single_len - hdr_size;
      VirtioNetHdr hdr;
      std::memcpy(&hdr, single, sizeof(hdr));
      std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), single + hdr_size, pkt_len);
      m->data_len = static_cast<uint16_t>(pkt_len);
      m->pkt_len = pkt_len;
      ring.put_used(head, 0);
      ++consumed;
      if ((hdr.flags != 0 || hdr.gso_type != kNetHdrGsoNone) && !apply_guest_tx_offload(hdr, m)) {
        rte_pktmbuf_reset(m);  // reused for the next packet
        stats.count_drop(DropReason::kBadOffloadRequest);
        continue;
      }
      ++out;
      result.bytes += pkt_len;
      stats.count_packet(pkt_len, rte_pktmbuf_mtod(m, const uint8_t*));
      if (zero_copy != nullptr) ++stats.zero_copy_copied;
      if (result.bytes >= max_bytes) break;
      continue;
    }
    iov.clear();
    // One descriptor, already read and translated above (a packet to lend, or one that does not
    // fit the head mbuf): no second walk of the chain.
    const ChainError error = single != nullptr && iov.push(single, single_len)
                                 ? ChainError::kNone
                                 : reader.read(head, ChainAccess::kDeviceReads, iov);
    const uint64_t chain_len = iov.total_len();
    DropReason drop = DropReason::kCount;
    if (error != ChainError::kNone || chain_len < hdr_size) {
      drop = DropReason::kInvalidDescriptor;
    } else if (chain_len - hdr_size < RTE_ETHER_HDR_LEN) {
      drop = DropReason::kRunt;
    } else if (chain_len - hdr_size > kMaxFrameLen) {
      drop = DropReason::kTooLarge;
    }
    if (drop == DropReason::kCount) {
      const uint32_t pkt_len = static_cast<uint32_t>(chain_len - hdr_size);
      VirtioNetHdr hdr;
      IoVecCursor cursor(iov);
      cursor.read(&hdr, sizeof(hdr));  // legacy and 1.x share these 10 bytes
      cursor.skip(hdr_size - sizeof(hdr));
      bool limit_hit = false;
      if (pkt_len >= lend_min_len && offload_fits_head(hdr)) {
        const LendResult lent =
            lend_packet(iov, hdr_size, pkt_len, head, m, stash, *zero_copy, dma_ready);
        if (lent == LendResult::kLent) {
          // The chain goes back to the guest when its last mbuf is freed, not now.
          ++consumed;
          if (!apply_guest_tx_offload(hdr, m)) {
            // Freeing it completes the lent chain (returned with the next burst); a fresh mbuf
            // takes its place.
            rte_pktmbuf_free(m);
            pkts[out] = pkts[allocated - 1];
            --allocated;
            stats.count_drop(DropReason::kBadOffloadRequest);
            continue;
          }
          ++out;
          result.bytes += pkt_len;
          stats.count_packet(pkt_len, rte_pktmbuf_mtod(m, const uint8_t*));
          ++stats.zero_copy_packets;
          if (result.bytes >= max_bytes) break;
          continue;
        }
        if (lent == LendResult::kPoolEmpty) {
          pool_empty = true;
          break;  // this packet stays in the guest's ring
        }
        limit_hit = lent == LendResult::kNoSlot;
        // Waiting needs a lent chain to come back: on a ring too small to lend from (limit 0)
        // nothing ever would, and the queue would stop for good.
        if (limit_hit && !lending.fallback && zero_copy->in_flight() > 0) {
          ++stats.zero_copy_limit_waits;
          result.lending_full = true;  // the owner asks lazy NIC tx queues for the lent chains
          break;  // this packet stays in the guest's ring until a lent chain comes back
        }
      }
      const CopyResult copied = copy_chain_to_mbuf(cursor, pkt_len, m, stash);
      if (copied == CopyResult::kPoolEmpty) {
        pool_empty = true;
        break;  // this packet stays in the guest's ring
      }
      if (copied == CopyResult::kOk && !apply_guest_tx_offload(hdr, m)) {
        if (m->next != nullptr) rte_pktmbuf_free(m->next);
        rte_pktmbuf_reset(m);  // reused for the next packet
        drop = DropReason::kBadOffloadRequest;
      } else if (copied == CopyResult::kOk) {
        if (zero_copy != nullptr) ++stats.zero_copy_copied;
        if (limit_hit) {
          ++stats.zero_copy_limit_copies;  // counted once the copy is made
          result.lending_full = true;
        }
        ++out;
        result.bytes += pkt_len;
        stats.count_packet(pkt_len, rte_pktmbuf_mtod(m, const uint8_t*));
      } else {
        rte_pktmbuf_reset(m);  // reused for the next packet
        drop = DropReason::kTooLarge;
      }
    }
    if (drop != DropReason::kCount) stats.count_drop(drop);
    ring.put_used(head, 0);  // nothing is written into a TX buffer
    ++consumed;
    if (result.bytes >= max_bytes) break;
  }
  ring.consume(consumed);
  vq.complete_burst(used_before);
  if (pool_empty) ++stats.mbuf_alloc_failures;
  if (out < allocated) rte_pktmbuf_free_bulk(pkts + out, allocated - out);
  result.packets = out;
  return result;
}

}  // namespace vqs
