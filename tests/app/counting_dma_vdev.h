// SPDX-License-Identifier: BSD-3-Clause
// A vdev driver whose devices count the rte_dev_dma_map and rte_dev_dma_unmap calls made on them
// (the vdev bus hands those to the driver): to see which devices a DMA registrar reaches.
// Tests only.
#pragma once

#include <rte_dev.h>

#include <string>

namespace vqs::app::test {

struct DmaCalls {
  int maps = 0;
  int unmaps = 0;
};

// Creates the device `name` (which must start with "vqs_dma_counter") and returns it, or nullptr.
// rte_vdev_uninit(name) removes it.
rte_device* create_counting_dma_device(const std::string& name);
// The calls made on the driver's devices so far, all of them together.
DmaCalls& counted_dma_calls();

}  // namespace vqs::app::test
