#include "dequeue.h"

#include "virtio_net_hdr.h"

#include "net_offload.h"

namespace vqs {
namespace {

constexpr uint16_t kSegAllocChunk = 32;

// Copies the packet (the chain after its virtio-net header) into `head` and further segments
// from `pool`, allocated in bulk. On allocation failure frees what it added and returns false.
bool copy_chain_to_mbuf(IoVecCursor& src, uint32_t len, rte_mbuf* head, rte_mempool* pool) {
  rte_mbuf* seg = head;
  uint32_t room = rte_pktmbuf_tailroom(head);
  uint32_t left = len;
  rte_mbuf* spare[kSegAllocChunk];
  uint16_t spare_count = 0;
  uint16_t spare_used = 0;
  for (;;) {
    const uint32_t n = left < room ? left : room;
    src.read(rte_pktmbuf_mtod_offset(seg, uint8_t*, seg->data_len), n);
    seg->data_len = static_cast<uint16_t>(seg->data_len + n);
    left -= n;
    if (left == 0) break;
    if (spare_used == spare_count) {
      const uint32_t seg_room = rte_pktmbuf_data_room_size(pool);
      const uint32_t want = (left + seg_room - 1) / seg_room;
      spare_count = static_cast<uint16_t>(want < kSegAllocChunk ? want : kSegAllocChunk);
      spare_used = 0;
      if (rte_pktmbuf_alloc_bulk(pool, spare, spare_count) != 0) {
        rte_pktmbuf_free(head->next);  // the chain we added; head itself is the caller's
        head->next = nullptr;
        head->nb_segs = 1;
        head->data_len = 0;
        return false;
      }
    }
    rte_mbuf* next = spare[spare_used++];
    next->data_off = 0;  // headroom only matters in the first segment
    seg->next = next;
    seg = next;
    ++head->nb_segs;
    room = rte_pktmbuf_tailroom(seg);
  }
  head->pkt_len = len;
  return true;
}

}  // namespace

BurstResult dequeue_burst(VirtQueue& vq, rte_mempool* pool, rte_mbuf** pkts, uint16_t max_packets,
                          uint32_t max_bytes) {
  BurstResult result;
  if (!vq.ready()) return result;
  SplitRing& ring = vq.ring();
  uint16_t count = vq.avail_count();
  if (count > max_packets) count = max_packets;
  if (count == 0) return result;

  QueueStats& stats = vq.stats();
  if (rte_pktmbuf_alloc_bulk(pool, pkts, count) != 0) {
    // Take what the pool still has rather than nothing.
    uint16_t got = 0;
    while (got < count && (pkts[got] = rte_pktmbuf_alloc(pool)) != nullptr) ++got;
    ++stats.mbuf_alloc_failures;
    if (got == 0) return result;
    count = got;
  }

  const uint16_t used_before = ring.last_used_idx();
  const uint32_t hdr_size = vq.features().net_hdr_size;
  const DescChainReader& reader = vq.chain_reader();
  IoVecList& iov = vq.iov_scratch();
  uint16_t consumed = 0;
  uint16_t out = 0;
  while (consumed < count) {
    const uint16_t head = ring.avail_head(consumed);
    iov.clear();
    const ChainError error = reader.read(head, ChainAccess::kDeviceReads, iov);
    const uint64_t chain_len = iov.total_len();
    if (error != ChainError::kNone || chain_len < hdr_size) {
      ring.put_used(head, 0);
      ++consumed;
      stats.count_drop(DropReason::kInvalidDescriptor);
      continue;
    }
    if (chain_len - hdr_size > kMaxFrameLen) {
      ring.put_used(head, 0);
      ++consumed;
      stats.count_drop(DropReason::kTooLarge);
      continue;
    }
    const uint32_t pkt_len = static_cast<uint32_t>(chain_len - hdr_size);
    VirtioNetHdr hdr;
    IoVecCursor cursor(iov);
    cursor.read(&hdr, sizeof(hdr));  // legacy and 1.x share these 10 bytes
    cursor.skip(hdr_size - sizeof(hdr));
    rte_mbuf* m = pkts[out];
    if (!copy_chain_to_mbuf(cursor, pkt_len, m, pool)) {
      ++stats.mbuf_alloc_failures;
      break;  // this packet stays in the guest's ring
    }
    apply_guest_tx_offload(hdr, m);
    ring.put_used(head, 0);  // nothing written into a TX buffer
    ++consumed;
    ++out;
    result.bytes += pkt_len;
    stats.count_packet(pkt_len);
    if (result.bytes >= max_bytes) break;
  }
  ring.consume(consumed);
  vq.complete_burst(used_before);
  if (out < count) rte_pktmbuf_free_bulk(pkts + out, count - out);
  result.packets = out;
  return result;
}

}  // namespace vqs
