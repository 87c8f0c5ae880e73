// SPDX-License-Identifier: BSD-3-Clause
#include "ring/guest_notifier.h"

namespace vqs {

void GuestNotifier::start(const NotifyPolicy& policy, uint16_t ring_size, uint64_t tsc_hz,
                          bool refill) {
  NotifyPolicy p = policy;
  if (p.coalesce_packets > NotifyPolicy::kMaxCoalescePackets)
    p.coalesce_packets = NotifyPolicy::kMaxCoalescePackets;
  if (p.coalesce_usecs > NotifyPolicy::kMaxCoalesceUsecs)
    p.coalesce_usecs = NotifyPolicy::kMaxCoalesceUsecs;
  if (p.refill_threshold > NotifyPolicy::kMaxRefillThreshold)
    p.refill_threshold = NotifyPolicy::kMaxRefillThreshold;
  coalescing_ = p.coalescing();
  coalesce_packets_ = p.coalesce_packets;
  coalesce_cycles_ = p.coalesce_cycles(tsc_hz);
  refill_threshold_ = refill ? p.refill_threshold_for(ring_size) : 0;
  deadline_ = 0;
  reset();
}

GuestNotifier::Action GuestNotifier::after_burst(bool wanted, uint32_t delivered, bool low,
                                                 uint64_t now_tsc) {
  bool due = wanted;
  if (coalescing_) {
    since_notify_ += delivered;
    if (wanted && !pending_) {
      pending_ = true;
      deadline_ = now_tsc + coalesce_cycles_;
      since_flush_ = 0;
    }
    since_flush_ += delivered;
    due = pending_ && ((coalesce_packets_ != 0 && since_notify_ >= coalesce_packets_) ||
                       (coalesce_cycles_ != 0 && now_tsc >= deadline_));
  }
  if (low) {
    // Below the threshold nothing waits: what the guest wants goes out now, and once per
    // crossing the guest is told even if it suppressed notifications.
    const bool forced = !due && (pending_ || wanted || refill_armed_);
    refill_armed_ = false;
    if (!due && !forced) return Action::kNone;
    notified();
    return forced ? Action::kNotifyForRefill : Action::kNotify;
  }
  // Re-armed only by a burst that leaves the guest at or above the threshold, not by one that
  // merely starts there: a polling guest that refills in chunks about the threshold's size would
  // otherwise cross it on every burst and cost us an eventfd write (~0.7 us) each time.
  refill_armed_ = true;
  if (due) {
    notified();
    return Action::kNotify;
  }
  return wanted ? Action::kDefer : Action::kNone;
}

bool GuestNotifier::flush(uint64_t now_tsc) {
  const bool due =
      now_tsc == kFlushNow || (coalesce_cycles_ != 0 ? now_tsc >= deadline_ : since_flush_ == 0);
  since_flush_ = 0;
  if (due) notified();
  return due;
}

}  // namespace vqs
