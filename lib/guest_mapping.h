// Our own mapping of a guest's memory regions, for dequeue zero-copy. mbufs lent to the rest of
// the system point into guest memory; librte_vhost unmaps its copy when the guest disconnects or
// changes its memory table, which may come before the last lent mbuf is freed. This mapping (of
// the same region fds, MAP_SHARED) is reference counted instead: the device holds one reference,
// and so does every ZeroCopyTracker with chains lent into it, so the memory stays mapped until
// the last of them lets go, and a slow consumer never reads unmapped memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "guest_memory.h"

namespace vqs {

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
  // `memory` cleared) with `error` set when a region cannot be mapped or is rejected.
  static GuestMapping* create(const std::vector<Region>& regions, GuestMemory* memory,
                              std::string* error);
  GuestMapping(const GuestMapping&) = delete;
  GuestMapping& operator=(const GuestMapping&) = delete;

  void retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // The last release unmaps and deletes.
  void release();

 private:
  GuestMapping() = default;
  ~GuestMapping();

  struct Mapped {
    void* addr;
    uint64_t len;
  };
  std::vector<Mapped> mapped_;
  std::atomic<uint32_t> refs_{1};
};

}  // namespace vqs
