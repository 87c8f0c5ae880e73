// SPDX-License-Identifier: BSD-3-Clause
// The burst functions: ethdev's calling convention over VhostDevice's bursts.
#include "pmd_port.h"

namespace vqs {

uint16_t pmd_rx_burst(void* queue, rte_mbuf** pkts, uint16_t count) {
  auto* q = static_cast<PmdRxQueue*>(queue);
  const BurstResult r = q->device->receive_burst(q->queue, q->pool, pkts, count, UINT32_MAX);
  for (uint16_t i = 0; i < r.packets; ++i) pkts[i]->port = q->port_id;
  return r.packets;
}

uint16_t pmd_tx_burst(void* queue, rte_mbuf** pkts, uint16_t count) {
  auto* q = static_cast<PmdTxQueue*>(queue);
  // Deferred (coalesced) notifications are sent from here, so an application's tx bursts —
  // empty ones too — are what flushes them when traffic stops. Without a guest nothing is
  // consumed: the caller keeps (and counts) its packets, as the tx-burst contract says.
  return q->device->send_burst(q->queue, pkts, count, /*flush_deferred=*/true);
}

}  // namespace vqs
