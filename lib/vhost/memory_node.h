// SPDX-License-Identifier: BSD-3-Clause
// The NUMA node a page of memory is on: where a guest's memory is, so that its queues are polled
// and given mbufs on that node (as librte_vhost and OVS-DPDK place a vhost port).
#pragma once

namespace vqs {

// The node of the page at `address` (mapped), or -1 when the kernel cannot tell (no NUMA).
int memory_node_of(const void* address);

}  // namespace vqs
