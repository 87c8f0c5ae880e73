// SPDX-License-Identifier: BSD-3-Clause
#include "ring/packed_batch.h"

namespace vqs {

uint16_t PackedBatch::fill(uint16_t want) {
  if (chain_count_ >= want || !(copy_four_singles(want) || copy_chain())) return chain_count_;
  // The descriptors the further copies will read, asked for at once: their lines (the guest
  // wrote them last) then arrive together instead of one miss after another. Only once a chain
  // was there: on a ring with nothing available, which is most polls, the lines ahead are the
  // ones the guest writes next, and hints took them from it for nothing (far placement, guest-tx
  // 64 B: 11-36 % more host cycles a packet; docs/benchmarks.md, "Interleaved, packed
  // virtqueues"). A hint only: within the ring, not past its end.
  if (chain_count_ < want) {
    const uint32_t size = ring_->size();
    const uint32_t wanted = uint32_t{want} - chain_count_;
    const uint32_t ahead = wanted < size - pos_.slot ? wanted : size - pos_.slot;
    const auto* from = reinterpret_cast<const uint8_t*>(ring_->descs() + pos_.slot);
    for (uint32_t off = 0; off < ahead * sizeof(VringPackedDesc); off += kCacheLine)
      prefetch_line(from + off);
  }
  while (chain_count_ < want && (copy_four_singles(want) || copy_chain())) {
  }
  return chain_count_;
}

static_assert(PackedBatch::kMaxChains <= PackedBatch::kMaxDescs);

bool PackedBatch::copy_four_singles(uint16_t want) {
  constexpr uint16_t kFour = 4;
  const uint32_t size = ring_->size();
  // (With only one-slot chains held, the copies number the chains: kMaxDescs is not reached.)
  if (singles_ != chain_count_ || want < chain_count_ + kFour || full_ ||
      chain_count_ + kFour > kMaxChains || slots_ + kFour > size ||
      uint32_t{pos_.slot} + kFour > size) {
    return false;
  }
  const VringPackedDesc* at = ring_->descs() + pos_.slot;
  // Available in this lap (AVAIL equal to the wrap counter, USED not) and not chained on.
  const uint16_t mask = kAvailUsed | kVringDescFNext;
  const uint16_t expect = pos_.wrap ? kVringPackedDescFAvail : kVringPackedDescFUsed;
  uint16_t flags[kFour];
  bool all = true;
#pragma GCC unroll 4
  for (uint16_t k = 0; k < kFour; ++k) {
    flags[k] = __atomic_load_n(&at[k].flags, __ATOMIC_RELAXED);
    all &= (flags[k] & mask) == expect;
  }
  if (!all) return false;
  // The descriptors after the flags that made them available (what the driver wrote first).
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  VringPackedDesc* to = descs_ + desc_count_;
#pragma GCC unroll 4
  for (uint16_t k = 0; k < kFour; ++k) {
    to[k] = load_desc(at, k);
    to[k].flags = flags[k];  // what was checked is what is used
  }
  chain_count_ = static_cast<uint16_t>(chain_count_ + kFour);
  singles_ = chain_count_;
  desc_count_ += kFour;
  slots_ += kFour;
  pos_.slot = static_cast<uint16_t>(pos_.slot + kFour);
  if (pos_.slot == size) {
    pos_.slot = 0;
    pos_.wrap = !pos_.wrap;
  }
  return true;
}

bool PackedBatch::copy_chain() {
  if (full_ || chain_count_ == kMaxChains) return false;
  const uint32_t size = ring_->size();
  // A whole lap is the most the driver can have made available at once.
  if (slots_ >= size) return false;
  const VringPackedDesc* ring = ring_->descs();
  // The common chain first: one descriptor (one buffer, or an indirect table).
  const uint16_t head_flags = __atomic_load_n(&ring[pos_.slot].flags, __ATOMIC_ACQUIRE);
  if (!packed_desc_available(head_flags, pos_.wrap)) return false;
  if (!(head_flags & kVringDescFNext) && desc_count_ < kMaxDescs) {
    VringPackedDesc& d = descs_[desc_count_];
    d = load_desc(ring, pos_.slot);
    d.flags = head_flags;
    if (singles_ == chain_count_) {
      ++singles_;  // chain i is descs_[i]
    } else {
      Chain& c = chains_[chain_count_];
      c.first = static_cast<uint16_t>(desc_count_);
      c.copied = 1;
      c.descs = 1;
      c.id = d.id;
      c.error = ChainError::kNone;
      c.slots_end = slots_ + 1;
    }
    ++chain_count_;
    ++desc_count_;
    ++slots_;
    if (++pos_.slot == size) {
      pos_.slot = 0;
      pos_.wrap = !pos_.wrap;
    }
    return true;
  }
  const uint32_t bound = size < IoVecList::kCapacity ? size : IoVecList::kCapacity;
  // The first chain may take the whole bound; a later one must fit what is left of the lap and
  // of the copies, or it waits for the next burst, where it comes first.
  uint32_t limit = bound;
  if (chain_count_ > 0) {
    if (size - slots_ < limit) limit = size - slots_;
    if (kMaxDescs - desc_count_ < limit) limit = kMaxDescs - desc_count_;
  }
  Chain& c = chains_[chain_count_];
  c = Chain{};
  c.first = static_cast<uint16_t>(desc_count_);
  PackedPos pos = pos_;
  uint16_t flags = 0;
  for (;;) {
    if (c.copied == limit) {
      if (chain_count_ > 0) {
        full_ = true;
        return false;
      }
      c.error = ChainError::kTooLong;
      break;
    }
    // The flags first (acquire), then the rest of the descriptor, once; the copy is what is used.
    const uint16_t f = __atomic_load_n(&ring[pos.slot].flags, __ATOMIC_ACQUIRE);
    if (!packed_desc_available(f, pos.wrap)) {
      if (c.copied == 0) return false;  // no chain here (yet)
      // The driver makes a chain's head available last: a chained descriptor that is not is a
      // broken chain, which ends here.
      c.error = ChainError::kNotAvailable;
      break;
    }
    VringPackedDesc d = load_desc(ring, pos.slot);
    d.flags = f;
    descs_[desc_count_ + c.copied] = d;
    ++c.copied;
    c.id = d.id;
    flags = f;
    pos = pos.advanced(1, static_cast<uint16_t>(size));
    if (!(f & kVringDescFNext)) break;
  }
  c.descs = c.copied;
  if (c.error == ChainError::kTooLong) {
    // Refused, it still goes back whole: the rest of it (still chained and available, within
    // one lap) is skipped, never taken for the head of another chain.
    while ((flags & kVringDescFNext) && c.descs < size) {
      const uint16_t f = __atomic_load_n(&ring[pos.slot].flags, __ATOMIC_ACQUIRE);
      if (!packed_desc_available(f, pos.wrap)) break;
      c.id = __atomic_load_n(&ring[pos.slot].id, __ATOMIC_RELAXED);
      flags = f;
      ++c.descs;
      pos = pos.advanced(1, static_cast<uint16_t>(size));
    }
  }
  desc_count_ += c.copied;
  slots_ += c.descs;
  c.slots_end = slots_;
  pos_ = pos;
  ++chain_count_;
  return true;
}

ChainError PackedBatch::read(uint16_t i, ChainAccess access, IoVecList& out,
                             uint32_t* visited) const {
  const Chain c = chain(i);
  if (c.error != ChainError::kNone) {
    if (visited != nullptr) *visited += c.copied;
    return c.error;
  }
  const uint32_t size = ring_->size();
  const uint32_t bound = size < IoVecList::kCapacity ? size : IoVecList::kCapacity;
  uint32_t budget = bound - c.copied;  // the chain's own descriptors are within the bound
  ChainError error = ChainError::kNone;
  for (uint32_t k = 0; k < c.copied; ++k) {
    const VringPackedDesc& d = descs_[c.first + k];
    if (d.flags & kVringDescFIndirect) {
      if (d.flags & kVringDescFNext) {
        error = ChainError::kIndirectWithNext;
      } else if (!indirect_negotiated_) {
        error = ChainError::kIndirectNotNegotiated;
      } else {
        error = read_indirect(d, access, out, budget);
      }
      break;
    }
    error = append_buffer(*memory_, d.addr, d.len, d.flags & kVringDescFWrite, access, out);
    if (error != ChainError::kNone) break;
  }
  if (visited != nullptr) *visited += bound - budget;
  return error;
}

// An indirect table's descriptors are used in order, all of them: in a packed ring only their
// WRITE flag means anything (NEXT, INDIRECT and the id are reserved, and ignored).
//
// For a chain the device reads (guest TX), WRITE is not held against an entry: DPDK's virtio
// driver (22.11) presets every entry of its packed TX indirect tables WRITE and never clears it
// on the header's, and librte_vhost reads them regardless. Reading a device-writable buffer is
// a SHOULD NOT in the specification (2.8.8), harmless to us; writing a device-readable one, which
// the receive direction would do, stays refused.
ChainError PackedBatch::read_indirect(const VringPackedDesc& d, ChainAccess access, IoVecList& out,
                                      uint32_t& budget) const {
  uint32_t entries = 0;
  ChainError error = ChainError::kNone;
  const auto* table = static_cast<const VringPackedDesc*>(
      indirect_table(*memory_, d.addr, d.len, &entries, &error));
  if (table == nullptr) return error;
  for (uint32_t k = 0; k < entries; ++k) {
    if (budget == 0) return ChainError::kTooLong;
    --budget;
    const VringPackedDesc e = load_desc(table, k);
    const bool device_writes =
        access == ChainAccess::kDeviceWrites ? (e.flags & kVringDescFWrite) != 0 : false;
    error = append_buffer(*memory_, e.addr, e.len, device_writes, access, out);
    if (error != ChainError::kNone) return error;
  }
  return ChainError::kNone;
}

}  // namespace vqs
