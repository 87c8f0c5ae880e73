// SPDX-License-Identifier: BSD-3-Clause
#include "ring/desc_chain.h"

#include <cstring>

namespace vqs {
namespace {

// One copy of a descriptor; the compiler barrier stops it from re-reading guest memory later.
inline VringDesc load_desc(const VringDesc* table, uint32_t index) {
  VringDesc d;
  std::memcpy(&d, &table[index], sizeof(d));
  asm volatile("" ::: "memory");
  return d;
}

}  // namespace

const char* chain_error_name(ChainError error) {
  switch (error) {
    case ChainError::kNone:
      return "none";
    case ChainError::kBadIndex:
      return "bad_index";
    case ChainError::kBadAddress:
      return "bad_address";
    case ChainError::kTooLong:
      return "too_long";
    case ChainError::kTooManySegments:
      return "too_many_segments";
    case ChainError::kWrongDirection:
      return "wrong_direction";
    case ChainError::kIndirectNotNegotiated:
      return "indirect_not_negotiated";
    case ChainError::kNestedIndirect:
      return "nested_indirect";
    case ChainError::kIndirectWithNext:
      return "indirect_with_next";
    case ChainError::kBadIndirectLength:
      return "bad_indirect_length";
  }
  return "unknown";
}

// Every descriptor visited counts against `budget` (read() starts it at the chain bound), empty
// ones too: a legitimate chain never needs more than the ring size or the scatter list's
// capacity, and the bound keeps a hostile chain cheap.
ChainError DescChainReader::walk(uint16_t head, ChainAccess access, IoVecList& out,
                                 uint32_t& budget) const {
  const VringDesc* table = table_;
  uint32_t table_size = ring_size_;
  uint32_t index = head;
  bool in_indirect = false;
  const uint16_t want_write = access == ChainAccess::kDeviceWrites ? kVringDescFWrite : 0;

  if (index >= table_size) return ChainError::kBadIndex;
  for (;;) {
    if (budget == 0) return ChainError::kTooLong;
    --budget;
    const VringDesc d = load_desc(table, index);
    if (d.flags & kVringDescFIndirect) {
      if (!indirect_negotiated_) return ChainError::kIndirectNotNegotiated;
      if (in_indirect) return ChainError::kNestedIndirect;
      if (d.flags & kVringDescFNext) return ChainError::kIndirectWithNext;
      if (d.len == 0 || d.len % sizeof(VringDesc) != 0) return ChainError::kBadIndirectLength;
      // An indirect table must be contiguous in host memory: we require it to lie in one region.
      table = reinterpret_cast<const VringDesc*>(memory_->translate(d.addr, d.len));
      if (table == nullptr) return ChainError::kBadAddress;
      table_size = d.len / sizeof(VringDesc);
      index = 0;
      in_indirect = true;
      continue;
    }
    if ((d.flags & kVringDescFWrite) != want_write) return ChainError::kWrongDirection;
    if (d.len != 0) {
      const GuestMemory::MapResult mapped = memory_->map(d.addr, d.len, out);
      if (mapped == GuestMemory::MapResult::kUnmapped) return ChainError::kBadAddress;
      if (mapped == GuestMemory::MapResult::kListFull) return ChainError::kTooManySegments;
    }
    if (!(d.flags & kVringDescFNext)) return ChainError::kNone;
    index = d.next;
    if (index >= table_size) return ChainError::kBadIndex;
  }
}

}  // namespace vqs
