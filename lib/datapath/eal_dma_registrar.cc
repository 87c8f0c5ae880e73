// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/eal_dma_registrar.h"

#include "datapath/vqs_log.h"

#include <bus_driver.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_memory.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>

namespace vqs {
namespace {

uint64_t iova_of(void* addr) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr)); }

int name_differs(const rte_device* device, const void* name) {
  return std::strcmp(rte_dev_name(device), static_cast<const char*>(name));
}

}  // namespace

EalDmaRegistrar::EalDmaRegistrar(const std::vector<rte_device*>& devices) {
  for (rte_device* d : devices) devices_.push_back({rte_dev_bus(d), rte_dev_name(d)});
}

rte_device* EalDmaRegistrar::find(const Device& device) {
  return device.bus->find_device(nullptr, name_differs, device.name.c_str());
}

bool EalDmaRegistrar::can_map(rte_device* device) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* addr = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) return false;
  bool ok = false;
  if (rte_extmem_register(addr, page, nullptr, 0, page) == 0) {
    ok = rte_dev_dma_map(device, addr, iova_of(addr), page) == 0;
    if (ok) (void)rte_dev_dma_unmap(device, addr, iova_of(addr), page);
    (void)rte_extmem_unregister(addr, page);
  } else {
    // Not the device's answer: say so, or the caller's "refuses the map" would mislead.
    VQS_LOG(WARNING, "%s: cannot try a DMA map: rte_extmem_register: %s", rte_dev_name(device),
            rte_strerror(rte_errno));
  }
  munmap(addr, page);
  return ok;
}

bool EalDmaRegistrar::register_memory(void* addr, uint64_t len, uint64_t page_size) {
  // No per-page IOVAs: in VA mode rte_mem_virt2iova answers the address without the memsegs.
  if (rte_extmem_register(addr, len, nullptr, 0, page_size) != 0) {
    VQS_LOG(WARNING, "rte_extmem_register(%p, 0x%" PRIx64 ", page 0x%" PRIx64 "): %s", addr, len,
            page_size, rte_strerror(rte_errno));
    return false;
  }
  std::vector<rte_device*> mapped;
  for (const Device& d : devices_) {
    rte_device* const device = find(d);
    if (device == nullptr) continue;  // gone: nothing can send to it
    if (rte_dev_dma_map(device, addr, iova_of(addr), len) == 0) {
      mapped.push_back(device);
      continue;
    }
    VQS_LOG(WARNING, "rte_dev_dma_map(%s, %p, 0x%" PRIx64 "): %s", d.name.c_str(), addr, len,
            rte_strerror(rte_errno));
    for (rte_device* m : mapped) (void)rte_dev_dma_unmap(m, addr, iova_of(addr), len);
    (void)rte_extmem_unregister(addr, len);
    return false;
  }
  return true;
}

void EalDmaRegistrar::unregister_memory(void* addr, uint64_t len) {
  for (const Device& d : devices_) {
    rte_device* const device = find(d);
    if (device == nullptr) continue;  // gone, and its DMA mappings with it
    if (rte_dev_dma_unmap(device, addr, iova_of(addr), len) != 0)
      VQS_LOG(WARNING, "rte_dev_dma_unmap(%s, %p, 0x%" PRIx64 "): %s", d.name.c_str(), addr, len,
              rte_strerror(rte_errno));
  }
  if (rte_extmem_unregister(addr, len) != 0)
    VQS_LOG(WARNING, "rte_extmem_unregister(%p, 0x%" PRIx64 "): %s", addr, len,
            rte_strerror(rte_errno));
}

}  // namespace vqs
