#include "ring_tx_cleanup.h"

#include <ethdev_driver.h>
#include <rte_mbuf.h>

#include <mutex>
#include <vector>

namespace vqs::app::test {
namespace {

struct Cleaned {
  uint16_t port_id;
  rte_ring* tx;
};

std::mutex cleaned_mutex;
std::vector<Cleaned> cleaned_ports;  // never shrinks: a port id is not reused within a test run
eth_dev_ops ring_ops_with_cleanup;   // net_ring's own operations, plus tx_done_cleanup

int free_all_sent(void* txq, uint32_t /*free_cnt*/) {
  rte_ring* tx = nullptr;
  {
    std::lock_guard lock(cleaned_mutex);
    for (const Cleaned& c : cleaned_ports)
      if (rte_eth_devices[c.port_id].data->tx_queues[0] == txq) tx = c.tx;
  }
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
  std::lock_guard lock(cleaned_mutex);
  rte_eth_dev& dev = rte_eth_devices[port_id];
  if (dev.dev_ops != &ring_ops_with_cleanup) {
    ring_ops_with_cleanup = *dev.dev_ops;  // every net_ring port has the same operations
    ring_ops_with_cleanup.tx_done_cleanup = free_all_sent;
    dev.dev_ops = &ring_ops_with_cleanup;
  }
  cleaned_ports.push_back({port_id, tx});
}

}  // namespace vqs::app::test
