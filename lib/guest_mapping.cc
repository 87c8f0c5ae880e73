#include "guest_mapping.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace vqs {

GuestMapping* GuestMapping::create(const std::vector<Region>& regions, GuestMemory* memory,
                                   std::string* error) {
  memory->clear();
  auto* mapping = new GuestMapping();
  bool ok = true;
  for (size_t i = 0; i < regions.size(); ++i) {
    const Region& r = regions[i];
    if (r.mmap_offset > r.mmap_size || r.size > r.mmap_size - r.mmap_offset) {
      *error = "region " + std::to_string(i) + " lies outside its file mapping";
      ok = false;
      break;
    }
    void* addr = mmap(nullptr, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (addr == MAP_FAILED) {
      *error = "region " + std::to_string(i) + ": mmap: " + std::strerror(errno);
      ok = false;
      break;
    }
    mapping->mapped_.push_back(Mapped{addr, r.mmap_size});
    if (!memory->add_region(r.guest_phys_addr, r.size,
                            static_cast<uint8_t*>(addr) + r.mmap_offset)) {
      *error = "region " + std::to_string(i) + " rejected (empty, wrapping or overlapping)";
      ok = false;
      break;
    }
  }
  if (ok) return mapping;
  memory->clear();
  mapping->release();
  return nullptr;
}

void GuestMapping::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

GuestMapping::~GuestMapping() {
  for (const Mapped& m : mapped_) munmap(m.addr, m.len);
}

}  // namespace vqs
