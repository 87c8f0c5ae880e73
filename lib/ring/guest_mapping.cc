// SPDX-License-Identifier: BSD-3-Clause
#include "ring/guest_mapping.h"

#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vqs {

uint64_t backing_page_size(int fd) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC)
    return static_cast<uint64_t>(fs.f_bsize);
  return static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

bool region_fits_file(int fd, uint64_t offset, uint64_t size, std::string* why) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    *why = std::string("fstat: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = "its fd is not a regular file";
    return false;
  }
  if (size == 0) {
    // Nothing to map: librte_vhost 22.11 fails such a region and leaks its fd.
    *why = "it is empty";
    return false;
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size || size > file_size - offset) {
    // Offset and size apart: their sum may wrap (the frontend chose both).
    *why = "it takes " + std::to_string(size) + " bytes from offset " + std::to_string(offset) +
           " of a file of " + std::to_string(file_size) + " bytes";
    return false;
  }
  return true;
}

GuestMapping* GuestMapping::create(const std::vector<Region>& regions, GuestMemory* memory,
                                   DmaRegistrar* registrar, std::string* error) {
  memory->clear();
  auto* mapping = new GuestMapping();
  mapping->registrar_ = registrar;
  mapping->dma_ready_ = registrar != nullptr;
  bool ok = true;
  for (size_t i = 0; i < regions.size(); ++i) {
    const Region& r = regions[i];
    if (r.mmap_offset > r.mmap_size || r.size > r.mmap_size - r.mmap_offset) {
      *error = "region " + std::to_string(i) + " lies outside its file mapping";
      ok = false;
      break;
    }
    if (std::string why; !region_fits_file(r.fd, r.mmap_offset, r.size, &why)) {
      *error = "region " + std::to_string(i) + " refused: " + why;
      ok = false;
      break;
    }
    void* addr = mmap(nullptr, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (addr == MAP_FAILED) {
      *error = "region " + std::to_string(i) + ": mmap: " + std::strerror(errno);
      ok = false;
      break;
    }
    // The whole file mapping: mmap placed it on a page boundary of the backing pages, and its
    // size is a multiple of them (hugetlbfs refuses anything else).
    const bool registered = registrar != nullptr &&
                            registrar->register_memory(addr, r.mmap_size, backing_page_size(r.fd));
    mapping->dma_ready_ &= registered;
    mapping->mapped_.push_back(Mapped{addr, r.mmap_size, registered});
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
  for (const Mapped& m : mapped_) {
    if (m.registered) registrar_->unregister_memory(m.addr, m.len);
    munmap(m.addr, m.len);
  }
}

}  // namespace vqs
