// SPDX-License-Identifier: BSD-3-Clause
// The chains one burst takes from a packed virtqueue, copied out of the descriptor ring once.
//
// A packed ring has no index of available entries: a chain is found by the flags of its
// descriptors, and the next chain starts where this one ends. So a burst first copies the
// chains it may take (their boundaries, ids and descriptors) into this batch, and then works on
// chain i of the batch as it works on the i-th avail entry of a split ring. The copies are the
// only reading of the guest's descriptors: what is checked is what is used. No EAL here.
#pragma once

#include <cstdint>

#include "ring/desc_chain.h"
#include "ring/guest_memory.h"
#include "ring/io_vec.h"
#include "ring/packed_ring.h"
#include "ring/vring.h"

namespace vqs {

class PackedBatch {
 public:
  // Chains and descriptors one batch holds: a burst's worth, and one longest chain.
  static constexpr uint16_t kMaxChains = 512;
  static constexpr uint32_t kMaxDescs = IoVecList::kCapacity;

  struct Chain {
    uint32_t slots_end = 0;  // ring slots taken by the batch's chains up to this one's end
    uint16_t first = 0;      // its first descriptor among the copies
    uint16_t copied = 0;     // descriptors copied (fewer than slots when cut, see error)
    uint16_t descs = 0;      // ring slots it takes, at least 1
    uint16_t id = 0;         // the buffer id, from its last descriptor
    // Found while copying: kNotAvailable (a chained descriptor not made available: the chain
    // ends before it) or kTooLong (longer than the ring or IoVecList::kCapacity: its remaining
    // descriptors are skipped, only their flags and ids read, so that it goes back whole).
    ChainError error = ChainError::kNone;
  };

  // At queue start: the memory buffers are checked against, and whether indirect tables are
  // allowed.
  void bind(const GuestMemory* memory, bool indirect_negotiated) {
    memory_ = memory;
    indirect_negotiated_ = indirect_negotiated;
  }

  // Empties the batch; it goes on from the ring's next available position.
  void begin(const PackedRing& ring) {
    ring_ = &ring;
    pos_ = ring.next_avail();
    chain_count_ = 0;
    singles_ = 0;
    translated_ = 0;
    desc_count_ = 0;
    slots_ = 0;
    full_ = false;
  }
  // Copies further chains until `want` are held, the ring has no more, or the batch is full.
  // Returns the chains held.
  uint16_t fill(uint16_t want);
  uint16_t count() const { return chain_count_; }
  Chain chain(uint16_t i) const {
    if (i >= singles_) return chains_[i];
    return Chain{uint32_t{i} + 1u, i, 1, 1, descs_[i].id, ChainError::kNone};
  }
  // Chain i's buffer id, and the ring slots it takes.
  uint16_t id(uint16_t i) const { return i < singles_ ? descs_[i].id : chains_[i].id; }
  uint16_t chain_slots(uint16_t i) const { return i < singles_ ? 1 : chains_[i].descs; }
  // Chains 0 to singles() - 1 take one slot each; chain i's descriptor is singles_descs()[i].
  uint16_t singles() const { return singles_; }
  const VringPackedDesc* singles_descs() const { return descs_; }
  // Ring slots the first `n` chains take: what consuming them moves the ring on by.
  uint32_t slots(uint16_t n) const { return n <= singles_ ? n : chains_[n - 1].slots_end; }

  // Chain i's buffers appended to `out`, with DescChainReader::read's contract (a partial chain
  // on error; `visited` adds the descriptors read, indirect entries included).
  ChainError read(uint16_t i, ChainAccess access, IoVecList& out,
                  uint32_t* visited = nullptr) const;

  // Chain i's one buffer when it is a single direct descriptor in the given direction, non-empty
  // and inside one guest region; nullptr otherwise (then read() decides). As
  // DescChainReader::single_buffer.
  uint8_t* single_buffer(uint16_t i, ChainAccess access, uint32_t* len) const {
    if (i >= singles_ && (chains_[i].copied != 1 || chains_[i].error != ChainError::kNone))
      return nullptr;
    const VringPackedDesc& d = descs_[i < singles_ ? i : chains_[i].first];
    const uint16_t want = access == ChainAccess::kDeviceWrites ? kVringDescFWrite : 0;
    if ((d.flags & ~kAvailUsed) != want || d.len == 0) return nullptr;
    *len = d.len;
    return i < translated_ ? host_[i] : memory_->translate(d.addr, d.len);
  }

  // Cache hints for the first buffers of the first `count` chains, each translated whole on the
  // way, for single_buffer() to take instead of translating it again.
  // Guest RX: the first `bytes` of each, written from `written_from` on (prefetch_buffer_head).
  void prefetch_rx_buffers(uint16_t count, uint32_t bytes, uint32_t written_from) {
    translate_first_buffers(count, [&](const VringPackedDesc& d, const uint8_t* host) {
      hint_rx_buffer(*memory_, d.addr, d.len, host, bytes, written_from);
    });
  }
  // Guest TX: the packet's first `packet_bytes` past the `hdr_size`-byte header (tx_hints_from).
  void prefetch_tx_buffers(uint16_t count, uint32_t hdr_size, uint32_t packet_bytes) {
    translate_first_buffers(count, [&](const VringPackedDesc& d, const uint8_t* host) {
      hint_tx_buffer(*memory_, d.addr, d.len, host, hdr_size, packet_bytes);
    });
  }

 private:
  static constexpr uint16_t kAvailUsed = kVringPackedDescFAvail | kVringPackedDescFUsed;

  // Chain i's first copied descriptor, nullptr when none was copied.
  const VringPackedDesc* first_desc(uint16_t i) const {
    if (i < singles_) return &descs_[i];
    return chains_[i].copied == 0 ? nullptr : &descs_[chains_[i].first];
  }
  // host_[i] for the first `count` chains, each first buffer given to hint(descriptor, host)
  // (host nullptr when the buffer spans regions).
  template <typename Hint>
  void translate_first_buffers(uint16_t count, Hint hint) {
    for (uint16_t i = 0; i < count; ++i) {
      const VringPackedDesc* d = first_desc(i);
      uint8_t* host = nullptr;
      if (d != nullptr && !(d->flags & kVringDescFIndirect)) {
        host = memory_->translate(d->addr, d->len);
        hint(*d, host);
      }
      host_[i] = host;
    }
    if (count > translated_) translated_ = count;
  }
  // Copies four one-slot chains at pos_ at once: their flags checked together, their
  // descriptors copied as one line. False (nothing taken) unless all four are there, in this
  // lap, and the batch holds nothing but one-slot chains so far.
  bool copy_four_singles(uint16_t want);
  // Copies the chain at pos_; false (nothing taken) when there is none or it does not fit.
  bool copy_chain();
  ChainError read_indirect(const VringPackedDesc& d, ChainAccess access, IoVecList& out,
                           uint32_t& budget) const;

  const PackedRing* ring_ = nullptr;
  const GuestMemory* memory_ = nullptr;
  bool indirect_negotiated_ = false;
  bool full_ = false;  // a chain did not fit: no more this burst
  PackedPos pos_;      // where the next chain starts
  uint16_t chain_count_ = 0;
  // Chains 0 to singles_ - 1 take one slot each (one buffer, or an indirect table) and chain i
  // is descs_[i] alone: no Chain entry is written for them. Most bursts hold nothing else. Once
  // a longer chain is copied, chains_[i] holds every further one.
  uint16_t singles_ = 0;
  // host_[i] for chains below translated_: chain i's first buffer translated whole (nullptr when
  // it is not one direct descriptor inside one region).
  uint16_t translated_ = 0;
  uint8_t* host_[kMaxChains];
  uint32_t desc_count_ = 0;
  uint32_t slots_ = 0;
  Chain chains_[kMaxChains];
  VringPackedDesc descs_[kMaxDescs];
};

}  // namespace vqs
