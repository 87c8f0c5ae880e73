// SPDX-License-Identifier: BSD-3-Clause
#include "ring_tx_offloads.h"

#include <ethdev_driver.h>
#include <rte_errno.h>
#include <rte_mbuf.h>

#include <mutex>

namespace vqs::app::test {
namespace {

std::once_flag ops_made;
eth_dev_ops ring_ops;            // net_ring's own operations ...
eth_dev_infos_get_t ring_infos;  // ... whose dev_infos_get is wrapped
eth_dev_ops ring_ops_offloads;   // by this one's

int infos_with_offloads(rte_eth_dev* dev, rte_eth_dev_info* info) {
  const int rc = ring_infos(dev, info);
  info->tx_offload_capa |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM |
                           RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_TSO |
                           RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  return rc;
}

uint16_t refuse_marked(void*, rte_mbuf** pkts, uint16_t count) {
  for (uint16_t i = 0; i < count; ++i) {
    if (pkts[i]->pkt_len == kRefusedByTxPrepareLen) {
      rte_errno = EINVAL;
      return i;
    }
  }
  return count;
}

}  // namespace

void give_tx_offloads(uint16_t port_id) {
  rte_eth_dev& dev = rte_eth_devices[port_id];
  std::call_once(ops_made, [&dev] {
    ring_ops = *dev.dev_ops;
    ring_infos = ring_ops.dev_infos_get;
    ring_ops_offloads = ring_ops;
    ring_ops_offloads.dev_infos_get = infos_with_offloads;
  });
  dev.dev_ops = &ring_ops_offloads;
  dev.tx_pkt_prepare = refuse_marked;
}

}  // namespace vqs::app::test
