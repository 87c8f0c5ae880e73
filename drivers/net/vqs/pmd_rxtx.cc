// SPDX-License-Identifier: BSD-3-Clause
// The burst functions: enter the vring's gate, run the datapath, leave.
#include <rte_cycles.h>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "pmd_port.h"

namespace vqs {

uint16_t pmd_rx_burst(void* queue, rte_mbuf** pkts, uint16_t count) {
  auto* q = static_cast<PmdRxQueue*>(queue);
  VirtQueue* vq = q->device->enter(q->vring);
  if (vq == nullptr) return 0;
  const BurstResult r = dequeue_burst(*vq, q->pool, pkts, count, UINT32_MAX);
  q->device->leave(q->vring);
  for (uint16_t i = 0; i < r.packets; ++i) pkts[i]->port = q->port_id;
  return r.packets;
}

uint16_t pmd_tx_burst(void* queue, rte_mbuf** pkts, uint16_t count) {
  auto* q = static_cast<PmdTxQueue*>(queue);
  VirtQueue* vq = q->device->enter(q->vring);
  if (vq == nullptr) return 0;  // no guest: the caller keeps (and counts) its packets
  // Deferred (coalesced) notifications are sent from here, so an application's tx bursts —
  // empty ones too — are what flushes them when traffic stops.
  if (vq->notification_pending()) vq->flush_notifications(rte_get_tsc_cycles());
  const BurstResult r = enqueue_burst(*vq, pkts, count);
  q->device->leave(q->vring);
  // Consumed = delivered or dropped-and-counted; the rest found no guest buffer and stay the
  // caller's, as the tx-burst contract says.
  if (r.packets > 0) rte_pktmbuf_free_bulk(pkts, r.packets);
  return r.packets;
}

}  // namespace vqs
