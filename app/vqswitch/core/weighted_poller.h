// SPDX-License-Identifier: BSD-3-Clause
// Weighted service of an lcore's rx queues: a visit ends when the queue is empty or its packet or
// byte weight is spent. The byte overshoot is owed by the next visit (deficit round robin); a
// queue found empty forgets its debt. See docs/architecture.md, "The switch".
#pragma once

#include <rte_mbuf.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "config/config.h"
#include "ports/port.h"

namespace vqs::app {

struct alignas(64) RxSlot {
  Port* port = nullptr;
  uint16_t queue = 0;
  Weight weight;
  int64_t byte_debt = 0;
  // Counters.
  uint64_t busy_cycles = 0;  // of the visits that took packets (and the empty ones just before)
  uint64_t visits_ended_by_weight = 0;
  uint64_t visits_ended_empty = 0;
};

class WeightedPoller {
 public:
  WeightedPoller(std::vector<RxSlot> slots, uint16_t burst)
      : slots_(std::move(slots)), burst_(burst) {}

  std::vector<RxSlot>& slots() { return slots_; }
  const std::vector<RxSlot>& slots() const { return slots_; }

  // Visits `slot`, handing each burst to `forward(slot, pkts, count)`; returns the packets taken.
  template <typename Forward>
  uint32_t visit(RxSlot& slot, Forward&& forward) {
    uint32_t packet_budget = slot.weight.packets;
    int64_t byte_budget = static_cast<int64_t>(slot.weight.bytes) - slot.byte_debt;
    uint32_t taken = 0;
    rte_mbuf* pkts[kMaxBurst];
    while (true) {
      if (byte_budget <= 0 || packet_budget == 0) {
        // Spent (possibly by a debt larger than one weight): owe what is left over.
        slot.byte_debt = byte_budget < 0 ? -byte_budget : 0;
        ++slot.visits_ended_by_weight;
        break;
      }
      const auto want = static_cast<uint16_t>(std::min<uint32_t>(burst_, packet_budget));
      const BurstResult r =
          slot.port->rx_burst(slot.queue, pkts, want, static_cast<uint32_t>(byte_budget));
      if (r.packets == 0) {
        slot.byte_debt = 0;
        ++slot.visits_ended_empty;
        break;
      }
      forward(slot, pkts, r.packets);
      lending_full_ |= r.lending_full;
      taken += r.packets;
      packet_budget -= r.packets;
      byte_budget -= r.bytes;
      PortQueueCounters& counters = slot.port->rx_counters(slot.queue);
      counters.rx_packets += r.packets;
      counters.rx_bytes += r.bytes;
      // A short burst that neither weight cut: the queue had no more.
      if (r.packets < want && byte_budget > 0) {
        slot.byte_debt = 0;
        ++slot.visits_ended_empty;
        break;
      }
    }
    return taken;
  }

  // Whether a guest queue visited since the last call had packets copied for its zero-copy
  // in-flight limit; clears it.
  bool take_lending_full() {
    const bool full = lending_full_;
    lending_full_ = false;
    return full;
  }

  static constexpr uint16_t kMaxBurst = 64;

 private:
  std::vector<RxSlot> slots_;
  const uint16_t burst_;
  bool lending_full_ = false;
};

}  // namespace vqs::app
