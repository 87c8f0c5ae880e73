// Per-lcore transmit buffers: one per output port, holding up to a burst of packets for the
// lcore's own tx queue on that port. Flushed when full and at the end of each rx queue visit.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <vector>

#include "port.h"

namespace vqs::app {

class TxBufferSet {
 public:
  struct Output {
    Port* port = nullptr;
    uint16_t queue = 0;   // this lcore's tx queue on the port
    bool shared = false;  // other lcores use the queue too: flush under its lock
    uint32_t retries_max = 8;
    bool housekeeping = false;  // the port defers work to Port::tx_housekeeping (coalescing)
  };

  // `outputs` is indexed by port index; `burst` at most kMaxBurst.
  TxBufferSet(std::vector<Output> outputs, uint16_t burst);

  static constexpr uint16_t kMaxBurst = 64;

  uint16_t port_count() const { return static_cast<uint16_t>(buffers_.size()); }
  Port* port(uint16_t index) const { return buffers_[index].out.port; }

  void push(uint16_t port, rte_mbuf* pkt) {
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

  // Deferred per-queue work of every output (e.g. coalesced guest notifications).
  void housekeeping(uint64_t now_tsc);

 private:
  struct Buffer {
    Output out;
    uint16_t count = 0;
    bool listed = false;  // in pending_
    rte_mbuf* pkts[kMaxBurst];
  };
  void flush_port(uint16_t port);
  void send(Buffer& b);

  std::vector<Buffer> buffers_;
  std::vector<uint16_t> pending_;  // ports with buffered packets, each once
  uint16_t pending_count_ = 0;
  const uint16_t burst_;
};

}  // namespace vqs::app
