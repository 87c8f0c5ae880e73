// SPDX-License-Identifier: BSD-3-Clause
#include "virtio_user_teardown.h"

#include <ethdev_driver.h>

#include <cstring>

namespace vqs::test {

bool is_virtio_user(uint16_t port) {
  rte_eth_dev_info info{};
  return rte_eth_dev_info_get(port, &info) == 0 && info.driver_name != nullptr &&
         std::strcmp(info.driver_name, "net_virtio_user") == 0;
}

void leave_rx_eventfds_to_virtio_user(uint16_t port) {
  if (!is_virtio_user(port)) return;
  rte_intr_handle* handle = rte_eth_devices[port].intr_handle;
  if (handle == nullptr) return;
  // rte_intr_efd_disable() closes the event fds only while max_intr exceeds nb_efd.
  const int event_fds = rte_intr_nb_efd_get(handle);
  if (event_fds > 0 && rte_intr_max_intr_get(handle) > event_fds)
    rte_intr_max_intr_set(handle, event_fds);
}

int rx_eventfd(uint16_t port, uint16_t queue) {
  const rte_intr_handle* handle = rte_eth_devices[port].intr_handle;
  if (handle == nullptr || queue >= rte_intr_nb_efd_get(handle)) return -1;
  return rte_intr_efds_index_get(handle, queue);
}

}  // namespace vqs::test
