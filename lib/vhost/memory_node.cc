// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/memory_node.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace vqs {

int memory_node_of(const void* address) {
  // get_mempolicy(2) without libnuma's wrapper: the PMD links nothing more for it. With
  // MPOL_F_NODE | MPOL_F_ADDR it reports the node the page is allocated on.
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0UL, address, MPOL_F_NODE | MPOL_F_ADDR) != 0)
    return -1;
  return node;
}

}  // namespace vqs
