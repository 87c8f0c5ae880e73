// SPDX-License-Identifier: BSD-3-Clause
#include "ring/desc_chain.h"

#include <cstring>

namespace vqs {
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
    case ChainError::kNotAvailable:
      return "not_available";
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

  if (index >= table_size) return ChainError::kBadIndex;
  for (;;) {
    if (budget == 0) return ChainError::kTooLong;
    --budget;
    const VringDesc d = load_desc(table, index);
    if (d.flags & kVringDescFIndirect) {
      if (!indirect_negotiated_) return ChainError::kIndirectNotNegotiated;
      if (in_indirect) return ChainError::kNestedIndirect;
      if (d.flags & kVringDescFNext) return ChainError::kIndirectWithNext;
      ChainError error = ChainError::kNone;
      table = static_cast<const VringDesc*>(
          indirect_table(*memory_, d.addr, d.len, &table_size, &error));
      if (table == nullptr) return error;
      index = 0;
      in_indirect = true;
      continue;
    }
    const ChainError error =
        append_buffer(*memory_, d.addr, d.len, d.flags & kVringDescFWrite, access, out);
    if (error != ChainError::kNone) return error;
    if (!(d.flags & kVringDescFNext)) return ChainError::kNone;
    index = d.next;
    if (index >= table_size) return ChainError::kBadIndex;
  }
}

}  // namespace vqs
