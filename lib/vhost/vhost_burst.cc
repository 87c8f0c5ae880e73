// SPDX-License-Identifier: BSD-3-Clause
// The datapath's entry points on a VhostDevice: enter the vring's gate, run one burst, leave.
// The PMD's rx/tx bursts and the switch's guest port are thin adapters over these.
#include <rte_arp.h>
#include <rte_cycles.h>

#include <cstring>

#include "datapath/enqueue.h"
#include "vhost/vhost_device.h"

namespace vqs {

BurstResult VhostDevice::receive_burst(uint16_t queue, rte_mempool* pool, rte_mbuf** pkts,
                                       uint16_t max_packets, uint32_t max_bytes) {
  Vring& v = vrings_[guest_tx_vring(queue)];
  QueueGate::Entry entry(v.gate);
  if (!entry) return {};
  // While lending is off every packet is copied; the tracker still takes back what was lent.
  LendPolicy copy_all;
  const LendPolicy* lending = &v.lending;
  if (v.lending.tracker != nullptr && !lending_on_.load(std::memory_order_relaxed)) [[unlikely]] {
    copy_all = v.lending;
    copy_all.min_len = UINT32_MAX;
    lending = &copy_all;
  }
  // Only queue 0's vring is ever set (one load a burst, of a line this lcore owns).
  if (v.pending_rarp.load(std::memory_order_relaxed) != 0 && max_packets > 0) [[unlikely]] {
    const uint64_t pending = v.pending_rarp.exchange(0, std::memory_order_relaxed);
    rte_ether_addr mac;
    std::memcpy(mac.addr_bytes, &pending, RTE_ETHER_ADDR_LEN);  // little-endian: low bytes first
    rte_mbuf* rarp = rte_net_make_rarp_packet(pool, &mac);
    if (rarp == nullptr) {
      // Tried again next burst, unless a newer request came meanwhile.
      rarps_failed_.fetch_add(1, std::memory_order_relaxed);
      uint64_t none = 0;
      v.pending_rarp.compare_exchange_strong(none, pending, std::memory_order_relaxed);
    } else {
      rarps_sent_.fetch_add(1, std::memory_order_relaxed);
      const uint32_t len = rte_pktmbuf_pkt_len(rarp);
      v.queue.stats().count_packet(len, rte_pktmbuf_mtod(rarp, const uint8_t*));
      pkts[0] = rarp;
      BurstResult r = dequeue_burst(v.queue, pool, pkts + 1, static_cast<uint16_t>(max_packets - 1),
                                    max_bytes > len ? max_bytes - len : 1, *lending);
      ++r.packets;
      r.bytes += len;
      return r;
    }
  }
  return dequeue_burst(v.queue, pool, pkts, max_packets, max_bytes, *lending);
}

uint16_t VhostDevice::send_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count,
                                 bool flush_deferred) {
  BurstResult r;
  {
    Vring& v = vrings_[guest_rx_vring(queue)];
    QueueGate::Entry entry(v.gate);
    if (!entry) return 0;
    if (flush_deferred && v.queue.notification_pending())
      v.queue.flush_notifications(rte_get_tsc_cycles());
    r = enqueue_burst(v.queue, pkts, count);
  }
  // Outside the gate: freeing may complete lent chains, which takes no ring of ours.
  if (r.packets > 0) rte_pktmbuf_free_bulk(pkts, r.packets);
  return r.packets;
}

bool VhostDevice::flush_notifications(uint16_t queue, uint64_t now_tsc) {
  Vring& v = vrings_[guest_rx_vring(queue)];
  QueueGate::Entry entry(v.gate);
  if (!entry) return link_up();
  if (v.queue.notification_pending()) v.queue.flush_notifications(now_tsc);
  return v.queue.notification_pending();
}

}  // namespace vqs
