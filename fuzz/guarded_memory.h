// SPDX-License-Identifier: BSD-3-Clause
// Guest memory for the fuzz harnesses: each region its own mmap between two PROT_NONE guard
// pages, so that a read or write past a region's ends faults at once (ASan does not watch mmap'd
// memory). Rings are placed flush against a region's end: an overrun of the used ring hits the
// guard page.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ring/guest_memory.h"
#include "ring/vring.h"

namespace vqs::fuzz {

class GuardedMemory {
 public:
  // Regions of the given sizes (rounded up to pages), at guest-physical addresses kBase,
  // kBase + kSpacing, ...
  static constexpr uint64_t kBase = 0x10000;
  static constexpr uint64_t kSpacing = 0x1000000;

  // Regions listed in `read_only` are mapped read-only where the datapath sees them (the table),
  // and a second, writable view of the same pages (writable()) lets the harness fill them: a
  // write through the table faults, without an mprotect per input (each one a TLB shootdown
  // across the EAL's threads).
  explicit GuardedMemory(const std::vector<uint64_t>& sizes,
                         const std::vector<size_t>& read_only = {}) {
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    for (size_t i = 0; i < sizes.size(); ++i) {
      const uint64_t len = (sizes[i] + page - 1) / page * page;
      void* all = mmap(nullptr, len + 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (all == MAP_FAILED) std::abort();
      uint8_t* host = static_cast<uint8_t*>(all) + page;
      uint8_t* writable = host;
      if (std::find(read_only.begin(), read_only.end(), i) != read_only.end()) {
        const int fd = memfd_create("guarded", 0);
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(len)) != 0) std::abort();
        if (mmap(host, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) std::abort();
        void* alias = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (alias == MAP_FAILED) std::abort();
        close(fd);
        writable = static_cast<uint8_t*>(alias);
      } else if (mprotect(host, len, PROT_READ | PROT_WRITE) != 0) {
        std::abort();
      }
      regions_.push_back({kBase + i * kSpacing, len, host, writable, all, len + 2 * page});
      if (!table_.add_region(kBase + i * kSpacing, len, host)) std::abort();
    }
  }
  ~GuardedMemory() {
    for (const Region& r : regions_) {
      if (r.writable != r.host) munmap(r.writable, r.size);
      munmap(r.mapping, r.mapping_len);
    }
  }
  GuardedMemory(const GuardedMemory&) = delete;
  GuardedMemory& operator=(const GuardedMemory&) = delete;

  const GuestMemory& table() const { return table_; }
  uint8_t* host(size_t region) const { return regions_[region].host; }
  // Where the harness writes a read-only region (host() for the others).
  uint8_t* writable(size_t region) const { return regions_[region].writable; }
  uint64_t gpa(size_t region) const { return regions_[region].gpa; }
  uint64_t size(size_t region) const { return regions_[region].size; }
  // The last `len` bytes of a region (flush against its end guard), and their guest address.
  uint8_t* tail(size_t region, uint64_t len) const {
    return regions_[region].host + regions_[region].size - len;
  }
  uint64_t tail_gpa(size_t region, uint64_t len) const {
    return regions_[region].gpa + regions_[region].size - len;
  }
  // Whether [p, p + len) lies inside one region.
  bool contains(const void* p, uint64_t len) const {
    const auto* b = static_cast<const uint8_t*>(p);
    for (const Region& r : regions_)
      if (b >= r.host && len <= r.size && b - r.host <= static_cast<ptrdiff_t>(r.size - len))
        return true;
    return false;
  }

 private:
  struct Region {
    uint64_t gpa;
    uint64_t size;
    uint8_t* host;
    uint8_t* writable;
    void* mapping;
    uint64_t mapping_len;
  };
  std::vector<Region> regions_;
  GuestMemory table_;
};

// One queue's rings in their own region: descriptor table and avail ring at the start, the used
// ring (4-byte aligned) flush against the region's end guard.
struct Rings {
  VringDesc* desc;
  VringAvail* avail;
  VringUsed* used;
  uint64_t desc_avail_bytes;
};

inline Rings place_rings(const GuardedMemory& memory, size_t region, uint16_t n) {
  Rings r;
  r.desc = reinterpret_cast<VringDesc*>(memory.host(region));
  r.avail = reinterpret_cast<VringAvail*>(memory.host(region) + 16ull * n);
  r.desc_avail_bytes = 16ull * n + 6 + 2ull * n;
  const uint64_t used_bytes = (6 + 8ull * n + 3) / 4 * 4;
  r.used = reinterpret_cast<VringUsed*>(memory.tail(region, used_bytes));
  return r;
}

// The harnesses' encoding, to let the fuzzer build valid chains easily: a descriptor whose flags
// have bit 15 set (no meaning in virtio) has its address taken as an offset into `region`; the
// bit is cleared. Any other descriptor keeps its raw address (mostly outside guest memory).
inline void relocate_descs(uint8_t* table, uint32_t count, const GuardedMemory& memory,
                           size_t region) {
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t* d = table + 16ull * i;
    uint16_t flags;
    std::memcpy(&flags, d + 12, 2);
    if (!(flags & 0x8000)) continue;
    uint64_t addr;
    std::memcpy(&addr, d, 8);
    addr = memory.gpa(region) + addr % memory.size(region);
    flags &= 0x7fff;
    std::memcpy(d, &addr, 8);
    std::memcpy(d + 12, &flags, 2);
  }
}

// A 64-bit FNV-1a hash, to see whether memory changed.
inline uint64_t hash_bytes(const uint8_t* p, uint64_t len) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Stops the fuzzer with a message when an invariant fails: a finding, like a crash.
#define VQS_FUZZ_CHECK(cond)                                                             \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// Descriptors whose id has bit 15 set point into region `region` (the rest keep the fuzzer's
// address, mostly outside guest memory), so that chains reach real buffers and indirect tables.
inline void relocate_packed(uint8_t* ring, uint32_t count, const GuardedMemory& memory,
                            size_t region) {
  for (uint32_t i = 0; i < count; ++i) {
    VringPackedDesc d;
    std::memcpy(&d, ring + 16ull * i, sizeof(d));
    if (!(d.id & 0x8000)) continue;
    d.addr = memory.gpa(region) + d.addr % memory.size(region);
    std::memcpy(ring + 16ull * i, &d, sizeof(d));
  }
}

}  // namespace vqs::fuzz
