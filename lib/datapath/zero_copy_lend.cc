// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/zero_copy_lend.h"

#include <rte_memcpy.h>

namespace vqs {

LendResult lend_packet(const IoVecList& chain, uint32_t hdr_size, uint32_t pkt_len,
                       uint16_t desc_head, uint16_t ring_slots, rte_mbuf* head, MbufStash& stash,
                       ZeroCopyTracker& tracker, bool dma_ready) {
  const uint32_t head_len = pkt_len < kZeroCopyHeadLen ? pkt_len : kZeroCopyHeadLen;
  if (head_len == pkt_len || head_len > rte_pktmbuf_tailroom(head))
    return LendResult::kNotAttachable;
  // The payload pieces: the chain after the virtio-net header and the copied head.
  IoVec pieces[kZeroCopyMaxPieces];
  uint32_t count = 0;
  uint64_t skip = uint64_t{hdr_size} + head_len;
  uint64_t left = pkt_len - head_len;
  for (uint32_t i = 0; i < chain.count() && left > 0; ++i) {
    const IoVec& v = chain[i];
    if (skip >= v.len) {
      skip -= v.len;
      continue;
    }
    const uint64_t len = v.len - skip < left ? v.len - skip : left;
    if (len > UINT16_MAX || count == kZeroCopyMaxPieces) return LendResult::kNotAttachable;
    pieces[count++] = IoVec{v.base + skip, static_cast<uint32_t>(len)};
    left -= len;
    skip = 0;
  }
  if (left != 0 || count == 0) return LendResult::kNotAttachable;

  rte_mbuf_ext_shared_info* shinfo =
      tracker.lend(desc_head, ring_slots, static_cast<uint16_t>(count));
  if (shinfo == nullptr) return LendResult::kNoSlot;
  rte_mbuf* segs[kZeroCopyMaxPieces];
  if (!stash.take(segs, count)) {
    tracker.cancel(shinfo);
    return LendResult::kPoolEmpty;
  }
  if (head_len == kZeroCopyHeadLen && chain[0].len >= hdr_size + kZeroCopyHeadLen) {
    // The usual layout (header and packet in one buffer): a copy of constant size, inlined.
    rte_memcpy(rte_pktmbuf_mtod(head, uint8_t*), chain[0].base + hdr_size, kZeroCopyHeadLen);
  } else {
    IoVecCursor cursor(chain);
    cursor.skip(hdr_size);
    cursor.read(rte_pktmbuf_mtod(head, uint8_t*), head_len);
  }
  head->data_len = static_cast<uint16_t>(head_len);
  rte_mbuf* prev = head;
  for (uint32_t i = 0; i < count; ++i) {
    rte_mbuf* seg = segs[i];
    const rte_iova_t iova =
        dma_ready ? static_cast<rte_iova_t>(reinterpret_cast<uintptr_t>(pieces[i].base))
                  : RTE_BAD_IOVA;
    rte_pktmbuf_attach_extbuf(seg, pieces[i].base, iova, static_cast<uint16_t>(pieces[i].len),
                              shinfo);
    seg->data_len = static_cast<uint16_t>(pieces[i].len);
    prev->next = seg;
    prev = seg;
  }
  head->nb_segs = static_cast<uint16_t>(1 + count);
  head->pkt_len = pkt_len;
  return LendResult::kLent;
}

}  // namespace vqs
