#include "tx_buffer.h"

#include <algorithm>

namespace vqs::app {

TxBufferSet::TxBufferSet(std::vector<Output> outputs, uint16_t burst)
    : buffers_(outputs.size()),
      pending_(outputs.size()),
      burst_(std::clamp<uint16_t>(burst, 1, kMaxBurst)) {
  for (size_t i = 0; i < outputs.size(); ++i) buffers_[i].out = outputs[i];
}

void TxBufferSet::flush_port(uint16_t port) {
  // Stays listed in pending_: flush() finds it empty and skips it.
  send(buffers_[port]);
}

void TxBufferSet::flush() {
  for (uint16_t i = 0; i < pending_count_; ++i) {
    Buffer& b = buffers_[pending_[i]];
    if (b.count > 0) send(b);
    b.listed = false;
  }
  pending_count_ = 0;
}

void TxBufferSet::send(Buffer& b) {
  const Output& out = b.out;
  Port* const port = out.port;
  // A guest that enabled fewer queue pairs has our queue stand in for an enabled one.
  const uint16_t queue = port->tx_queue_in_use(out.queue);
  PortQueueCounters& counters = port->tx_counters(queue);
  uint16_t sent = 0;
  uint64_t bytes = 0;
  if (out.shared) rte_spinlock_lock(port->tx_lock(queue));
  b.count = port->tx_prepare(queue, b.pkts, b.count);
  for (uint16_t i = 0; i < b.count; ++i) bytes += b.pkts[i]->pkt_len;
  if (port->tx_ready(queue)) {
    // As OVS-DPDK: retry only while the queue keeps taking packets, at most retries_max times.
    uint32_t retries = 0;
    while (true) {
      const uint16_t n = port->tx_burst(queue, b.pkts + sent, b.count - sent);
      sent += n;
      if (sent == b.count || n == 0 || retries == out.retries_max) break;
      ++retries;
    }
    counters.tx_retries += retries;
    if (sent < b.count) {
      // A guest that went away during the flush is not a full ring.
      const SwitchDrop reason = !port->tx_ready(queue) ? SwitchDrop::kLinkDown
                                : port->is_guest()     ? SwitchDrop::kTxGuestFull
                                                       : SwitchDrop::kTxQueueFull;
      counters.count_drop(reason, b.count - sent);
    }
  } else {
    counters.count_drop(SwitchDrop::kLinkDown, b.count);
  }
  // The unsent are still ours: their bytes were not sent.
  for (uint16_t i = sent; i < b.count; ++i) bytes -= b.pkts[i]->pkt_len;
  counters.tx_packets += sent;
  counters.tx_bytes += bytes;
  if (out.shared) rte_spinlock_unlock(port->tx_lock(queue));
  if (sent < b.count) rte_pktmbuf_free_bulk(b.pkts + sent, b.count - sent);
  b.count = 0;
}

void TxBufferSet::housekeeping(uint64_t now_tsc) {
  for (Buffer& b : buffers_) {
    if (!b.out.housekeeping) continue;
    Port* const port = b.out.port;
    const uint16_t queue = port->tx_queue_in_use(b.out.queue);
    if (b.out.shared) rte_spinlock_lock(port->tx_lock(queue));
    port->tx_housekeeping(queue, now_tsc);
    if (b.out.shared) rte_spinlock_unlock(port->tx_lock(queue));
  }
}

}  // namespace vqs::app
