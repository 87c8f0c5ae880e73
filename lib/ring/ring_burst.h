// SPDX-License-Identifier: BSD-3-Clause
// One burst's access to a virtqueue's available chains, one class per ring format with the same
// members, so that the datapath's bursts are written once and instantiated per format; the
// format is chosen once per burst (VirtQueue::packed()), never per packet.
//
// A chain is named by a handle, valid for the burst: its position among the burst's chains (a
// split ring's head and first descriptor are read once, for the chains the burst hints; a packed
// ring's chains are copied into the burst's PackedBatch). No EAL here.
#pragma once

#include <cstdint>

#include "ring/virtqueue.h"

namespace vqs {

class SplitBurst {
 public:
  explicit SplitBurst(VirtQueue& vq) : vq_(vq), ring_(vq.ring()), reader_(vq.chain_reader()) {}
  SplitRing& ring() { return ring_; }

  // Chains available now: all of them when there are `want` or fewer, else more than `want`,
  // perhaps as the avail index said when last loaded (SplitRing::avail_count).
  uint16_t available(uint16_t want) {
    const uint16_t n = vq_.avail_count(want);
    known_only_ = n > want;
    return n;
  }
  // Once the first `have` are used: how many there are now. The index is loaded again only when
  // available() counted more than wanted (perhaps without a load); otherwise it said them all.
  uint16_t more(uint16_t have, uint16_t /*want*/) {
    if (!known_only_) return have;
    known_only_ = false;
    const uint16_t n = vq_.avail_count();
    return n > have ? n : have;
  }

  // A hinted chain's handle is its position in the burst: its head and first descriptor were
  // read once, by the hint pass (below). Any other's is its head, read from the avail ring here,
  // once, above kRawHead (a head may take all 16 bits: a hostile one is checked, not masked).
  using Handle = uint32_t;
  Handle handle(uint16_t i) const {
    return i < hinted_ ? Handle{i} : kRawHead | Handle{ring_.avail_head(i)};
  }
  uint8_t* single_buffer(Handle h, ChainAccess access, uint32_t* len) const {
    if (h < kRawHead) return DescChainReader::single_buffer(first_[h], access, len);
    return reader_.single_buffer(head(h), access, len);
  }
  ChainError read(Handle h, ChainAccess access, IoVecList& out, uint32_t* visited = nullptr) const {
    return reader_.read(head(h), access, out, visited);
  }
  void put_used(Handle h, uint32_t len) { ring_.put_used(head(h), len); }
  void put_sent(Handle h) { ring_.put_used(head(h), 0); }
  // What a zero-copy tracker keeps to return the chain later.
  uint16_t id(Handle h) const { return head(h); }
  uint16_t ring_slots(Handle /*h*/) const { return 1; }
  // The first `count` chains are taken.
  void consume(uint16_t count) { ring_.consume(count); }
  // Whether the packets copied in this burst give their head lines back (buffer_release).
  bool releases_buffer_lines(bool waited_on_guest) const {
    return ring_.releases_buffer_lines(waited_on_guest, vq_.sender_gate().sends_own());
  }
  // Once the first `count` chains are taken: their first descriptors' lines go back to the guest
  // when the ring says so (SplitRing::releases_lines). The hint pass read those descriptors,
  // and only those are given back. Called after the burst's interrupt decision: the full fence
  // there waits for every flush issued before it (CLFLUSHOPT is ordered with locked
  // instructions), and a far flush takes as long as a crossing; issued after it, the flushes
  // complete while the lcore forwards the burst, before its next fence.
  void release_lines(uint16_t count) {
    if (!ring_.releases_lines()) return;
    vq_.stats().desc_lines_released +=
        ring_.release_descs(heads_, count < hinted_ ? count : hinted_);
  }

  // Cache hints for the first `count` chains: descriptors first, then (once those are on their
  // way) the buffers they point to, so that a burst's misses overlap instead of queueing. Each
  // first descriptor is read once and its buffer translated once, for single_buffer() to take.
  // Guest TX: the packet's first `packet_bytes`, not the header's line before it
  // (tx_hints_from). Guest RX: the header and the packet's first `packet_bytes`, for writing.
  // Both: the used-ring lines of their `count` used entries, for writing.
  void prefetch_tx(uint16_t count, uint32_t packet_bytes) {
    ring_.prefetch_used(count);
    const uint32_t hdr_size = vq_.features().net_hdr_size;
    read_first_buffers(count, [&](const FirstBuffer& f) {
      hint_tx_buffer(reader_.memory(), f.desc.addr, f.desc.len, f.host, hdr_size, packet_bytes);
    });
  }
  void prefetch_rx(uint16_t count, uint32_t packet_bytes) {
    ring_.prefetch_used(count);
    const uint32_t hdr_size = vq_.features().net_hdr_size;
    read_first_buffers(count, [&](const FirstBuffer& f) {
      hint_rx_buffer(reader_.memory(), f.desc.addr, f.desc.len, f.host, hdr_size + packet_bytes,
                     hdr_size);
    });
  }

 private:
  // Chains whose head and first descriptor a burst holds: a burst's worth, as a packed batch
  // (testpmd's --burst goes up to 512). On the stack, touched only as far as a burst hints.
  static constexpr uint16_t kHinted = PackedBatch::kMaxChains;
  static constexpr Handle kRawHead = Handle{1} << 16;

  uint16_t head(Handle h) const {
    return h < kRawHead ? heads_[h] : static_cast<uint16_t>(h - kRawHead);
  }
  template <typename Hint>
  void read_first_buffers(uint16_t count, Hint hint) {
    if (count > kHinted) count = kHinted;
    ring_.prefetch_descs(count);
    for (uint16_t i = hinted_; i < count; ++i) {
      heads_[i] = ring_.avail_head(i);
      first_[i] = reader_.first_buffer(heads_[i]);
      // Indirect tables and heads outside the table get no hint.
      if (first_[i].desc.len != 0 && !(first_[i].desc.flags & kVringDescFIndirect)) hint(first_[i]);
    }
    if (count > hinted_) hinted_ = count;
  }

  VirtQueue& vq_;
  SplitRing& ring_;
  const DescChainReader& reader_;
  uint16_t hinted_ = 0;  // chains below it: heads_[] and first_[] hold their head and first buffer
  bool known_only_ = false;  // available() counted more than wanted, maybe without a load
  uint16_t heads_[kHinted];
  FirstBuffer first_[kHinted];
};

class PackedBurst {
 public:
  explicit PackedBurst(VirtQueue& vq)
      : vq_(vq), ring_(vq.packed_ring()), batch_(vq.packed_batch()) {
    batch_.begin(ring_);
  }
  PackedRing& ring() { return ring_; }

  // Chains available now, copied into the batch: up to `want` (and the batch's capacity).
  uint16_t available(uint16_t want) { return batch_.fill(want); }
  uint16_t more(uint16_t /*have*/, uint16_t want) { return batch_.fill(want); }

  using Handle = uint16_t;  // the chain's index in the batch
  Handle handle(uint16_t i) const { return i; }
  uint8_t* single_buffer(uint16_t h, ChainAccess access, uint32_t* len) const {
    return batch_.single_buffer(h, access, len);
  }
  ChainError read(uint16_t h, ChainAccess access, IoVecList& out,
                  uint32_t* visited = nullptr) const {
    return batch_.read(h, access, out, visited);
  }
  void put_used(uint16_t h, uint32_t len) {
    if (run_end_ != run_begin_) [[unlikely]]
      put_run();  // what was sent before goes back before it
    ring_.put_used(batch_.id(h), len, batch_.chain_slots(h));
  }
  // put_used(h, 0) for a chain the guest sent. One-slot chains given back one after another (a
  // guest TX burst) collect as a run of handles, written in one go from the batch's copies when
  // anything else is given back or the burst consumes.
  void put_sent(uint16_t h) {
    if (h < batch_.singles()) {
      if (h == run_end_ && run_end_ != run_begin_) {
        ++run_end_;
        return;
      }
      put_run();
      run_begin_ = h;
      run_end_ = static_cast<uint16_t>(h + 1);
      return;
    }
    put_used(h, 0);
  }
  uint16_t id(uint16_t h) const { return batch_.id(h); }
  // A packed ring's descriptors take our used writes as well: not given back (SplitBurst's).
  bool releases_buffer_lines(bool /*waited_on_guest*/) const { return false; }
  void release_lines(uint16_t /*count*/) {}
  uint16_t ring_slots(uint16_t h) const { return batch_.chain_slots(h); }
  void consume(uint16_t count) {
    put_run();
    ring_.consume(batch_.slots(count));
  }

  // The descriptors were just copied (the copy was the miss); the buffers they name follow.
  void prefetch_tx(uint16_t count, uint32_t packet_bytes) const {
    batch_.prefetch_tx_buffers(count, vq_.features().net_hdr_size, packet_bytes);
  }
  void prefetch_rx(uint16_t count, uint32_t packet_bytes) const {
    const uint32_t hdr_size = vq_.features().net_hdr_size;
    batch_.prefetch_rx_buffers(count, hdr_size + packet_bytes, hdr_size);
  }

 private:
  void put_run() {
    if (run_end_ == run_begin_) return;
    ring_.put_used_sent(batch_.singles_descs() + run_begin_,
                        static_cast<uint16_t>(run_end_ - run_begin_));
    run_begin_ = run_end_;
  }

  VirtQueue& vq_;
  PackedRing& ring_;
  PackedBatch& batch_;
  uint16_t run_begin_ = 0;  // [run_begin_, run_end_): handles given back, not yet to the ring
  uint16_t run_end_ = 0;
};

}  // namespace vqs
