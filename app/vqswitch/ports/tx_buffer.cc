// SPDX-License-Identifier: BSD-3-Clause
#include "ports/tx_buffer.h"

#include <rte_ethdev.h>

#include <algorithm>
#include <cerrno>

#include "ring/guest_notifier.h"

namespace vqs::app {

TxBufferSet::TxBufferSet(std::vector<Output> outputs, uint16_t burst, GsoPools gso,
                         size_t port_room)
    : burst_(std::clamp<uint16_t>(burst, 1, kMaxBurst)) {
  const size_t room = std::max(outputs.size(), port_room);
  buffers_.reserve(room);
  pending_.reserve(room);
  deferred_.reserve(room);  // each port at most once: never grows while forwarding
  buffers_.resize(outputs.size());
  pending_.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) buffers_[i].out = outputs[i];
  gso_ctx_.direct_pool = gso.direct;
  gso_ctx_.indirect_pool = gso.indirect;
  gso_ctx_.gso_types = RTE_ETH_TX_OFFLOAD_TCP_TSO;
  gso_ctx_.flag = 0;  // IPv4 IDs increment per segment, as a NIC's TSO does
}

void TxBufferSet::push_segments(uint16_t port, rte_mbuf* pkt) {
  // rte_gso cuts TCP over IPv4 only. An IPv6 train goes on whole, and the output counts it
  // (tx_unsupported at a NIC, too_large at a guest).
  if (gso_ctx_.direct_pool == nullptr || !(pkt->ol_flags & RTE_MBUF_F_TX_IPV4)) {
    append(port, pkt);
    return;
  }
  gso_ctx_.gso_size = static_cast<uint16_t>(
      std::min<uint32_t>(UINT16_MAX, pkt->l2_len + pkt->l3_len + pkt->l4_len + pkt->tso_segsz));
  const uint64_t flags = pkt->ol_flags;
  rte_mbuf* segments[kMaxSegments];
  const int n = rte_gso_segment(pkt, &gso_ctx_, segments, kMaxSegments);
  if (n == 0) {
    // Fits one segment: rte_gso dropped the segmentation request (for every output sharing the
    // frame, which is just as right for them) and left the checksum requests.
    append(port, pkt);
    return;
  }
  // Other outputs may share the frame (flooding): they see its request as it came.
  pkt->ol_flags = flags;
  if (n < 0) {
    // No mbufs for the segments, or more segments than kMaxSegments (a tiny MSS).
    if (input_ != nullptr)
      input_->count_drop(n == -ENOMEM ? SwitchDrop::kMbufExhausted : SwitchDrop::kTxUnsupported);
    rte_pktmbuf_free(pkt);
    return;
  }
  // The segments hold references to the payload: our own reference goes.
  rte_pktmbuf_free(pkt);
  for (int i = 0; i < n; ++i) append(port, segments[i]);
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
  // Even a burst that delivered nothing may have published used entries (invalid guest RX
  // chains) and owe an interrupt decision.
  if (out.housekeeping) {
    b.sent_since_housekeeping = true;
    if (!b.deferred) {
      b.deferred = true;
      deferred_.push_back(static_cast<uint16_t>(&b - buffers_.data()));
    }
  }
  b.count = 0;
}

void TxBufferSet::clean_up(Buffer& b, Released& r) {
  Port* const port = b.out.port;
  if (b.out.shared) rte_spinlock_lock(port->tx_lock(b.out.queue));
  const int rc = port->tx_done_cleanup(b.out.queue);
  if (b.out.shared) rte_spinlock_unlock(port->tx_lock(b.out.queue));
  ++r.asked;
  if (rc > 0) r.packets += static_cast<uint64_t>(rc);
  if (rc == -ENOTSUP) {
    ++r.unsupported;
    b.cleanup_unsupported = true;
  }
}

TxBufferSet::Released TxBufferSet::release_sent() {
  flush();
  Released r;
  for (Buffer& b : buffers_)
    if (b.out.port != nullptr && !b.out.port->is_guest()) clean_up(b, r);
  return r;
}

TxBufferSet::Released TxBufferSet::reclaim_sent() {
  Released r;
  for (Buffer& b : buffers_)
    if (b.out.port != nullptr && !b.out.port->is_guest() && !b.cleanup_unsupported) clean_up(b, r);
  return r;
}

void TxBufferSet::set_output(uint16_t port, const Output& out) {
  if (port >= buffers_.size()) {
    buffers_.resize(port + 1u);
    pending_.resize(port + 1u);
  }
  Buffer& b = buffers_[port];
  b.out = out;
  b.cleanup_unsupported = false;
}

void TxBufferSet::remove_output(uint16_t port) {
  if (port >= buffers_.size() || buffers_[port].out.port == nullptr) return;
  Buffer& b = buffers_[port];
  if (b.count > 0) send(b);
  if (b.deferred) {
    // Coalesced notifications go out now; the port leaves the deferred list.
    Port* const p = b.out.port;
    const uint16_t queue = p->tx_queue_in_use(b.out.queue);
    if (b.out.shared) rte_spinlock_lock(p->tx_lock(queue));
    (void)p->tx_housekeeping(queue, GuestNotifier::kFlushNow);
    if (b.out.shared) rte_spinlock_unlock(p->tx_lock(queue));
    deferred_.erase(std::find(deferred_.begin(), deferred_.end(), port));
    b.deferred = false;
  }
  b.out = Output{};
  b.cleanup_unsupported = false;
}

void TxBufferSet::housekeeping(uint64_t now_tsc) {
  size_t kept = 0;
  for (const uint16_t index : deferred_) {
    Buffer& b = buffers_[index];
    if (b.sent_since_housekeeping && now_tsc != GuestNotifier::kFlushNow) {
      b.sent_since_housekeeping = false;
      deferred_[kept++] = index;
      continue;
    }
    b.sent_since_housekeeping = false;
    Port* const port = b.out.port;
    const uint16_t queue = port->tx_queue_in_use(b.out.queue);
    if (b.out.shared) rte_spinlock_lock(port->tx_lock(queue));
    const bool still = port->tx_housekeeping(queue, now_tsc);
    if (b.out.shared) rte_spinlock_unlock(port->tx_lock(queue));
    if (still) {
      deferred_[kept++] = index;
    } else {
      b.deferred = false;
    }
  }
  deferred_.resize(kept);
}

}  // namespace vqs::app
