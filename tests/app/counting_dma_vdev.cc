// SPDX-License-Identifier: BSD-3-Clause
#include "counting_dma_vdev.h"

#include <bus_driver.h>
#include <bus_vdev_driver.h>

#include <cstring>

namespace vqs::app::test {
namespace {

DmaCalls calls;

int count_map(rte_vdev_device*, void*, uint64_t, size_t) {
  ++calls.maps;
  return 0;
}

int count_unmap(rte_vdev_device*, void*, uint64_t, size_t) {
  ++calls.unmaps;
  return 0;
}

int name_differs(const rte_device* device, const void* name) {
  return std::strcmp(rte_dev_name(device), static_cast<const char*>(name));
}

}  // namespace

rte_device* create_counting_dma_device(const std::string& name) {
  if (rte_vdev_init(name.c_str(), "") != 0) return nullptr;
  rte_bus* vdev = rte_bus_find_by_name("vdev");
  return vdev->find_device(nullptr, name_differs, name.c_str());
}

DmaCalls& counted_dma_calls() { return calls; }

}  // namespace vqs::app::test

static rte_vdev_driver vqs_dma_counter_driver = [] {
  rte_vdev_driver d{};
  d.probe = [](rte_vdev_device*) { return 0; };
  d.remove = [](rte_vdev_device*) { return 0; };
  d.dma_map = vqs::app::test::count_map;
  d.dma_unmap = vqs::app::test::count_unmap;
  return d;
}();

RTE_PMD_REGISTER_VDEV(vqs_dma_counter, vqs_dma_counter_driver);
