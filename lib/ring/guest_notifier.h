// SPDX-License-Identifier: BSD-3-Clause
// The notification decision of one guest RX queue, per burst: coalescing and the refill
// threshold. Pure state, no ring access and no EAL: VirtQueue feeds it what a burst did and sends
// what it returns. See docs/architecture.md, "Notifications".
#pragma once

#include <cstdint>

#include "ring/notify_policy.h"

namespace vqs {

class GuestNotifier {
 public:
  enum class Action : uint8_t {
    kNone,
    kDefer,            // the guest wanted a notification: coalesced into a later one
    kNotify,           // what the guest asked for (possibly covering deferred bursts)
    kNotifyForRefill,  // sent only because the guest is low on buffers
  };

  // Off: notify after every burst the guest wants it, no refill threshold (guest TX queues).
  void start_off() { start(NotifyPolicy{}, 0, 0, false); }
  // The threshold is resolved for `ring_size`; `tsc_hz` converts coalesce_usecs. Out-of-range
  // settings are clamped to NotifyPolicy's limits.
  void start(const NotifyPolicy& policy, uint16_t ring_size, uint64_t tsc_hz, bool refill = true);

  bool coalescing() const { return coalescing_; }
  // Whether bursts and flushes need the current TSC.
  bool timed() const { return coalesce_cycles_ != 0; }
  uint32_t refill_threshold() const { return refill_threshold_; }  // 0: off
  bool pending() const { return pending_; }

  // After a burst: `wanted` is the guest's suppression state for the entries it published,
  // `delivered` the packets written, `low` whether the guest's posted buffers are below the
  // refill threshold now. `now_tsc` is read only when timed().
  Action after_burst(bool wanted, uint32_t delivered, bool low, uint64_t now_tsc);

  // Between bursts, with pending(): whether the deferred notification is due now — its time has
  // come, or (packet limit only) no packet was delivered since the previous flush, so traffic
  // stopped and the packets limit would never be reached.
  // now_tsc == kFlushNow: send whatever is pending (an owner about to sleep or stop).
  static constexpr uint64_t kFlushNow = UINT64_MAX;
  bool flush(uint64_t now_tsc);

  // The queue stops: drops any deferred notification (the caller sends it if pending()).
  void reset() {
    pending_ = false;
    since_notify_ = 0;
    since_flush_ = 0;
    refill_armed_ = true;
  }

 private:
  void notified() {
    pending_ = false;
    since_notify_ = 0;
  }

  uint64_t coalesce_cycles_ = 0;
  uint64_t deadline_ = 0;  // TSC at which a deferred notification is due (timed)
  uint32_t coalesce_packets_ = 0;
  uint32_t refill_threshold_ = 0;
  uint32_t since_notify_ = 0;  // packets delivered since the last notification (coalescing)
  uint32_t since_flush_ = 0;   // packets delivered since the last flush or deferral
  bool coalescing_ = false;
  bool pending_ = false;
  bool refill_armed_ = true;
};

}  // namespace vqs
