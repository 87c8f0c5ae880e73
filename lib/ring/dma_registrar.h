// SPDX-License-Identifier: BSD-3-Clause
// Makes memory that the process mapped itself usable for device DMA, at IOVA = its virtual
// address, and undoes it. GuestMapping calls it for each guest region it maps and again when its
// last reference goes, on whichever thread that is (a queue's lcore or librte_vhost's thread):
// implementations are thread-safe. Per mapping, never per packet.
#pragma once

#include <cstdint>

namespace vqs {

class DmaRegistrar {
 public:
  virtual ~DmaRegistrar() = default;
  // [addr, addr + len), aligned to `page_size` (a power of two: the pages backing it). False
  // when it could not be registered for every device (then nothing is left registered).
  virtual bool register_memory(void* addr, uint64_t len, uint64_t page_size) = 0;
  // Undoes a register_memory that returned true, before the memory is unmapped.
  virtual void unregister_memory(void* addr, uint64_t len) = 0;
};

}  // namespace vqs
