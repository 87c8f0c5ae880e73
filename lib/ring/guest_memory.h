// SPDX-License-Identifier: BSD-3-Clause
// Guest-physical to host-virtual translation over the guest's memory table.
//
// Everything the guest gives us (descriptor addresses and lengths) is hostile: every lookup checks
// the whole range against a region, with 64-bit overflow checks, and fails rather than clamps.
// No EAL here, so this layer is unit-testable and fuzzable on its own.
#pragma once

#include <array>
#include <cstdint>

#include "ring/io_vec.h"

namespace vqs {

struct GuestRegion {
  uint64_t guest_phys_addr;
  uint64_t size;
  uint8_t* host_addr;
};

class GuestMemory {
 public:
  // librte_vhost 22.11 accepts at most 8 regions (VHOST_MEMORY_MAX_NREGIONS).
  static constexpr uint32_t kMaxRegions = 8;

  // Fails (and changes nothing) on a full table, an empty or wrapping region, or one that overlaps
  // a region already added, in guest-physical space.
  bool add_region(uint64_t guest_phys_addr, uint64_t size, void* host_addr);
  void clear() { count_ = 0; }
  uint32_t region_count() const { return count_; }
  const GuestRegion& region(uint32_t i) const { return regions_[i]; }

  // Host address of [gpa, gpa + len) when it lies inside one region, else nullptr.
  uint8_t* translate(uint64_t gpa, uint64_t len) const {
    const GuestRegion* r = find(gpa);
    if (r == nullptr) return nullptr;
    const uint64_t offset = gpa - r->guest_phys_addr;
    if (len > r->size - offset) return nullptr;
    return r->host_addr + offset;
  }

  // The guest-physical address of host address `host`, when it lies in a region: for logging
  // what the device wrote through a translated pointer (live migration). The regions are
  // disjoint in host space as well (each its own mapping).
  bool guest_phys_of(const uint8_t* host, uint64_t* gpa) const {
    for (uint32_t i = 0; i < count_; ++i) {
      const GuestRegion& r = regions_[i];
      const uint64_t offset = static_cast<uint64_t>(host - r.host_addr);
      if (host >= r.host_addr && offset < r.size) {
        *gpa = r.guest_phys_addr + offset;
        return true;
      }
    }
    return false;
  }

  // Whether host addresses [host, host + len) lie inside one region: a ring area translated
  // elsewhere (librte_vhost), checked against the table and ring size in use now.
  bool holds(const void* host, uint64_t len) const {
    const auto* p = static_cast<const uint8_t*>(host);
    for (uint32_t i = 0; i < count_; ++i) {
      const GuestRegion& r = regions_[i];
      const uint64_t offset = static_cast<uint64_t>(p - r.host_addr);
      if (p >= r.host_addr && offset < r.size) return len <= r.size - offset;
    }
    return false;
  }

  enum class MapResult { kOk, kUnmapped, kListFull };

  // Appends [gpa, gpa + len) to `out`, one entry per region it crosses. kUnmapped when any byte
  // is outside guest memory or the range wraps, kListFull when `out` has no room; `out` may then
  // hold a partial list.
  MapResult map(uint64_t gpa, uint32_t len, IoVecList& out) const {
    uint8_t* host = translate(gpa, len);
    if (host == nullptr) return map_across_regions(gpa, len, out);
    return out.push(host, len) ? MapResult::kOk : MapResult::kListFull;
  }

 private:
  const GuestRegion* find(uint64_t gpa) const {
    for (uint32_t i = 0; i < count_; ++i) {
      const GuestRegion& r = regions_[i];
      if (gpa - r.guest_phys_addr < r.size) return &r;  // unsigned: also rejects gpa < start
    }
    return nullptr;
  }
  MapResult map_across_regions(uint64_t gpa, uint32_t len, IoVecList& out) const;

  std::array<GuestRegion, kMaxRegions> regions_{};
  uint32_t count_ = 0;
};

}  // namespace vqs
