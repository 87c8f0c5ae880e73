// SPDX-License-Identifier: BSD-3-Clause
#include "ring_tx_cleanup.h"

#include <ethdev_driver.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace vqs::app::test {
namespace {

struct Cleaned {
  uint16_t port_id;
  rte_ring* tx;
};

std::mutex cleaned_mutex;
std::vector<Cleaned> cleaned_ports;
std::once_flag ops_made;
eth_dev_ops ring_ops_with_cleanup;  // net_ring's own operations, plus tx_done_cleanup

// The ring behind tx queue `txq`, among the ports given a cleanup that are still open.
rte_ring* ring_of(void* txq) {
  std::lock_guard lock(cleaned_mutex);
  for (const Cleaned& c : cleaned_ports) {
    const rte_eth_dev& dev = rte_eth_devices[c.port_id];
    if (dev.state != RTE_ETH_DEV_UNUSED && dev.data != nullptr && dev.data->tx_queues != nullptr &&
        dev.data->tx_queues[0] == txq)
      return c.tx;
  }
  return nullptr;
}

int free_all_sent(void* txq, uint32_t /*free_cnt*/) {
  rte_ring* const tx = ring_of(txq);
  if (tx == nullptr) return -ENOTSUP;
  int freed = 0;
  void* m;
  while (rte_ring_dequeue(tx, &m) == 0) {
    rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    ++freed;
  }
  return freed;
}

}  // namespace

void give_tx_done_cleanup(uint16_t port_id, rte_ring* tx) {
  rte_eth_dev& dev = rte_eth_devices[port_id];
  // Made once, before any lcore may read it: every net_ring port has the same operations.
  std::call_once(ops_made, [&dev] {
    ring_ops_with_cleanup = *dev.dev_ops;
    ring_ops_with_cleanup.tx_done_cleanup = free_all_sent;
  });
  std::lock_guard lock(cleaned_mutex);
  cleaned_ports.push_back({port_id, tx});
  dev.dev_ops = &ring_ops_with_cleanup;
}

void forget_tx_done_cleanup(uint16_t port_id) {
  std::lock_guard lock(cleaned_mutex);
  std::erase_if(cleaned_ports, [port_id](const Cleaned& c) { return c.port_id == port_id; });
}

}  // namespace vqs::app::test
