// SPDX-License-Identifier: BSD-3-Clause
// Our own reference-counted mapping of a guest's memory, for dequeue zero-copy: lent mbufs may
// outlive librte_vhost's mapping, so the device and each tracker with chains lent hold a
// reference. With a DmaRegistrar each region is also DMA-registered; the last release unregisters,
// then unmaps. See docs/architecture.md, "Dequeue zero-copy".
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "ring/dma_registrar.h"
#include "ring/guest_memory.h"

namespace vqs {

// The size of the pages backing a mapping of `fd`: the huge page size of a hugetlbfs file (or
// memfd), else the system page size.
uint64_t backing_page_size(int fd);

// Whether a non-empty region of `size` bytes at `offset` lies within the regular file `fd` (a
// mapping past a file's end raises SIGBUS at first touch; docs/security.md). False with `why`.
bool region_fits_file(int fd, uint64_t offset, uint64_t size, std::string* why);

class GuestMapping {
 public:
  // A region as the vhost-user frontend sent it: its fd, the size of the file mapping, and where
  // the region starts in it.
  struct Region {
    uint64_t guest_phys_addr;
    uint64_t size;
    int fd;
    uint64_t mmap_size;
    uint64_t mmap_offset;
  };

  // Maps every region and fills `memory` with our addresses; nullptr (nothing left mapped,
  // `memory` cleared) with `error` set when a region cannot be mapped or is rejected. With a
  // `registrar` (which must outlive the mapping) each mapped region is registered with it; a
  // region it refuses leaves the mapping usable, but not dma_ready().
  static GuestMapping* create(const std::vector<Region>& regions, GuestMemory* memory,
                              DmaRegistrar* registrar, std::string* error);
  GuestMapping(const GuestMapping&) = delete;
  GuestMapping& operator=(const GuestMapping&) = delete;

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // The last release unregisters, unmaps and deletes.
  void release();
  // Every region is registered with the registrar: buffers in it may be DMAed at IOVA = address.
  bool dma_ready() const { return dma_ready_; }

 private:
  GuestMapping() = default;
  ~GuestMapping();

  struct Mapped {
    void* addr;
    uint64_t len;
    bool registered;
  };
  std::vector<Mapped> mapped_;
  DmaRegistrar* registrar_ = nullptr;
  bool dma_ready_ = false;
  std::atomic<uint32_t> refs_{1};
};

}  // namespace vqs
