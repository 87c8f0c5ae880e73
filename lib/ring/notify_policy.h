// SPDX-License-Identifier: BSD-3-Clause
// How a guest RX queue notifies its guest: interrupt coalescing (as VPP's vhost-user
// coalesce-frames / coalesce-time) and the refill threshold. Settings only; GuestNotifier applies
// them per queue. No EAL.
#pragma once

#include <cstdint>

namespace vqs {

struct NotifyPolicy {
  static constexpr uint32_t kMaxCoalescePackets = 1024;
  static constexpr uint32_t kMaxCoalesceUsecs = 1000000;
  static constexpr uint32_t kMaxRefillThreshold = 32768;  // the largest split ring

  // A notification the guest wants is deferred until this many packets were delivered since the
  // last one (0: no packet limit) ...
  uint32_t coalesce_packets = 0;
  // ... or this long after the first deferred one (0: no time limit). Both 0: coalescing off.
  uint32_t coalesce_usecs = 0;
  // The guest is notified at once when its posted RX buffers fall below this; 0: automatic,
  // half the ring (at least 1): what is left must last the guest's wake-up (docs/benchmarks.md,
  // "Refill threshold and notification coalescing").
  uint32_t refill_threshold = 0;

  bool coalescing() const { return coalesce_packets != 0 || coalesce_usecs != 0; }
  bool operator==(const NotifyPolicy&) const = default;
  // Within the limits above (what devargs and the switch's config accept).
  bool valid() const {
    return coalesce_packets <= kMaxCoalescePackets && coalesce_usecs <= kMaxCoalesceUsecs &&
           refill_threshold <= kMaxRefillThreshold;
  }
  // The threshold that applies to a ring of `ring_size` entries.
  uint32_t refill_threshold_for(uint16_t ring_size) const;
  // coalesce_usecs in TSC cycles (at least 1 when set, so a timed policy stays timed).
  uint64_t coalesce_cycles(uint64_t tsc_hz) const;
};

}  // namespace vqs
