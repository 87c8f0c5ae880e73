// SPDX-License-Identifier: BSD-3-Clause
// DMA registration through EAL, for IOVA-as-VA mode: memory becomes DPDK external memory
// (rte_extmem_register) and is DMA-mapped, IOVA = VA, for each of a fixed set of devices
// (rte_dev_dma_map: VFIO's container, or the driver's own). In IOVA-as-PA mode a virtual address
// is no IOVA: do not use it there.
#pragma once

#include <rte_bus.h>
#include <rte_dev.h>

#include <string>
#include <vector>

#include "ring/dma_registrar.h"

namespace vqs {

class EalDmaRegistrar final : public DmaRegistrar {
 public:
  // `devices` is fixed for the registrar's life, which must outlast every registration. Each is
  // looked up again, by bus and name, at every call: it may be gone by then (detached, or freed
  // by EAL's cleanup of its bus before the owner's teardown unregisters), and a device that is
  // gone has nothing to map or unmap.
  explicit EalDmaRegistrar(const std::vector<rte_device*>& devices);

  // Whether `device` takes rte_dev_dma_map of external memory: tried on one page of our own
  // (false, with a warning, also when that page cannot be registered as external memory).
  static bool can_map(rte_device* device);

  bool register_memory(void* addr, uint64_t len, uint64_t page_size) override;
  void unregister_memory(void* addr, uint64_t len) override;

 private:
  struct Device {
    const rte_bus* bus;  // buses are static: never freed
    std::string name;
  };
  // The device now, or nullptr when it is gone.
  static rte_device* find(const Device& device);

  std::vector<Device> devices_;
};

}  // namespace vqs
