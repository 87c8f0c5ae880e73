// SPDX-License-Identifier: BSD-3-Clause
// Per-lcore transmit buffers, one per output port (the lcore's own tx queue there), flushed when
// full and after each rx queue visit. A TCP segment train toward a port that cannot take it whole
// is cut with rte_gso as it is buffered. See docs/architecture.md, "The switch".
#pragma once

#include <rte_gso.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <vector>

#include "datapath/net_offload.h"
#include "ports/port.h"

namespace vqs::app {

// Software segmentation: segment headers from `direct`, payload references from `indirect`
// (an mbuf pool without data room). Without pools, trains are passed on whole.
struct GsoPools {
  rte_mempool* direct = nullptr;
  rte_mempool* indirect = nullptr;
};

class TxBufferSet {
 public:
  struct Output {
    Port* port = nullptr;
    uint16_t queue = 0;   // this lcore's tx queue on the port
    bool shared = false;  // other lcores use the queue too: flush under its lock
    uint32_t retries_max = 8;
    bool housekeeping = false;  // the port defers work to Port::tx_housekeeping (coalescing)
  };

  // `outputs` is indexed by port index; `burst` at most kMaxBurst. `port_room`: port indexes
  // set_output may add without allocating (the switch: every port it may have, so that an lcore
  // taking a runtime port allocates nothing; untouched, the reserve costs address space only).
  TxBufferSet(std::vector<Output> outputs, uint16_t burst, GsoPools gso = {}, size_t port_room = 0);

  static constexpr uint16_t kMaxBurst = 64;
  // Segments of one train at most: as many as a guest's GSO request may ask for.
  static constexpr uint16_t kMaxSegments = kMaxGuestGsoSegments;

  uint16_t port_count() const { return static_cast<uint16_t>(buffers_.size()); }
  Port* port(uint16_t index) const { return buffers_[index].out.port; }  // nullptr: none

  // Runtime ports, by the owning lcore between two passes (nothing buffered). set_output gives
  // port index `port` an output (growing the set within its reserve); remove_output sends what
  // is deferred for it (coalesced notifications) and forgets it: nothing may be pushed to it.
  void set_output(uint16_t port, const Output& out);
  void remove_output(uint16_t port);

  // The counters of the rx queue whose packets are pushed next: drops found while buffering
  // (segmentation without mbufs) are the input's, as the bridge counts its own.
  void set_input(PortQueueCounters* counters) { input_ = counters; }

  void push(uint16_t port, rte_mbuf* pkt) {
    Buffer& b = buffers_[port];
    if ((pkt->ol_flags & RTE_MBUF_F_TX_TCP_SEG) && b.out.port->needs_tcp_segmentation())
        [[unlikely]] {
      push_segments(port, pkt);
      return;
    }
    append(port, pkt);
  }
  void append(uint16_t port, rte_mbuf* pkt) {
    Buffer& b = buffers_[port];
    if (!b.listed) {
      b.listed = true;
      pending_[pending_count_++] = port;
    }
    b.pkts[b.count++] = pkt;
    if (b.count == burst_) flush_port(port);
  }
  // Sends everything buffered. Packets a full queue did not take after the retries are freed and
  // counted (tx_guest_full / tx_queue_full); toward a port that cannot send now, link_down.
  void flush();

  // What release_sent() got back.
  struct Released {
    uint64_t packets = 0;      // freed by the devices
    uint32_t asked = 0;        // tx queues asked
    uint32_t unsupported = 0;  // ... whose device cannot free on request (-ENOTSUP)
  };
  // Flushes, then asks this lcore's tx queue on every NIC to free the mbufs of packets it has
  // sent: a stopping guest gets its lent buffers back sooner (see Switch::request_tx_release).
  Released release_sent();
  // The same, on the spot (no flush) and only of the queues whose device has not answered
  // -ENOTSUP: asked often, while a guest's lent buffers are held (LcoreLoop::reclaim_lent).
  Released reclaim_sent();

  // Deferred per-queue work (coalesced guest notifications, owed interrupt decisions) of the
  // outputs flushed since it was last done: a list, so the cost follows the outputs in use, not
  // the guests configured. An output sent to since the previous pass is left to its next burst,
  // which settles what is due itself (each flush enters the guest's ring: a full fence); one
  // that was not is flushed. GuestNotifier::kFlushNow flushes every one.
  void housekeeping(uint64_t now_tsc);

 private:
  struct Buffer {
    Output out;
    uint16_t count = 0;
    bool listed = false;                   // in pending_
    bool deferred = false;                 // in deferred_
    bool sent_since_housekeeping = false;  // since the previous housekeeping pass
    bool cleanup_unsupported = false;      // the device answered tx_done_cleanup with -ENOTSUP
    rte_mbuf* pkts[kMaxBurst];
  };
  void flush_port(uint16_t port);
  void clean_up(Buffer& b, Released& r);
  void send(Buffer& b);
  void push_segments(uint16_t port, rte_mbuf* pkt);

  std::vector<Buffer> buffers_;
  std::vector<uint16_t> pending_;  // ports with buffered packets, each once
  uint16_t pending_count_ = 0;
  std::vector<uint16_t> deferred_;  // ports whose flushes may have left deferred work, each once
  const uint16_t burst_;
  rte_gso_ctx gso_ctx_{};
  PortQueueCounters* input_ = nullptr;
};

}  // namespace vqs::app
