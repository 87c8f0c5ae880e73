// SPDX-License-Identifier: BSD-3-Clause
#include "ring/guest_memory.h"

namespace vqs {

bool GuestMemory::add_region(uint64_t guest_phys_addr, uint64_t size, void* host_addr) {
  if (count_ == kMaxRegions || size == 0 || host_addr == nullptr) return false;
  if (guest_phys_addr + size < guest_phys_addr) return false;  // wraps (or ends exactly at 2^64)
  for (uint32_t i = 0; i < count_; ++i) {
    const GuestRegion& r = regions_[i];
    if (guest_phys_addr < r.guest_phys_addr + r.size && r.guest_phys_addr < guest_phys_addr + size)
      return false;
  }
  regions_[count_++] = GuestRegion{guest_phys_addr, size, static_cast<uint8_t*>(host_addr)};
  return true;
}

GuestMemory::MapResult GuestMemory::map_across_regions(uint64_t gpa, uint32_t len,
                                                       IoVecList& out) const {
  if (gpa + len < gpa) return MapResult::kUnmapped;
  while (len > 0) {
    const GuestRegion* r = find(gpa);
    if (r == nullptr) return MapResult::kUnmapped;
    const uint64_t offset = gpa - r->guest_phys_addr;
    const uint64_t room = r->size - offset;
    const uint32_t piece = room < len ? static_cast<uint32_t>(room) : len;
    if (!out.push(r->host_addr + offset, piece)) return MapResult::kListFull;
    gpa += piece;
    len -= piece;
  }
  return MapResult::kOk;
}

}  // namespace vqs
