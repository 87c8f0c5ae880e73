// SPDX-License-Identifier: BSD-3-Clause
// What closing DPDK 22.11's virtio_user ports needs beyond the ethdev API. Tests only.
#pragma once

#include <cstdint>

namespace vqs::test {

// Whether `port` is driven by DPDK's virtio_user.
bool is_virtio_user(uint16_t port);

// Call before closing a virtio_user port that was configured with intr_conf.rxq (harmless for
// any other port). virtio_dev_close() closes the rx eventfds in rte_intr_efd_disable() (the
// handle's max_intr is one more than its nb_efd), then virtio_user_dev_uninit() closes the same
// numbers again. In between, another thread of the process (librte_vhost's, the EAL interrupt
// thread rebuilding its epoll set) may be given such a number: the second close takes its fd
// away. This leaves the closing to virtio_user, which owns the fds.
void leave_rx_eventfds_to_virtio_user(uint16_t port);

// The eventfd that stands for rx queue `queue` of a port with rx interrupts, or -1.
int rx_eventfd(uint16_t port, uint16_t queue);

}  // namespace vqs::test
