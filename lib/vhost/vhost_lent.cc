// SPDX-License-Identifier: BSD-3-Clause
// Buffers lent to mbufs (dequeue zero-copy) when their ring stops or their device goes: waited
// for within a bound, returned to the guest, or left to the tracker as orphans.
#include <rte_cycles.h>

#include "vhost/vhost_device.h"
#include "vhost/vhost_log.h"

namespace vqs {
namespace {

// How long a stopping guest TX vring waits for its lent buffers to come back before the ring's
// indices are handed over (on librte_vhost's thread, which serves every device: short), and how
// long the device's teardown waits before it leaves a tracker allocated.
constexpr uint64_t kLentStopWaitMs = 50;
constexpr uint64_t kLentTeardownWaitMs = 1000;
// While a stopping vring waits, the owner's release request is repeated this often: a NIC frees
// only what it has finished sending, and more finishes as the wait goes on.
constexpr uint64_t kLentReleaseRepeatMs = 10;

}  // namespace

uint32_t VhostDevice::reap_orphans() {
  // Cheap hints first (no lock while a guest is served, or when nothing completed): librte_vhost's
  // thread may hold the lock through a stopping ring's wait.
  bool waiting = false;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    const ZeroCopyTracker* zc = vrings_[i].zero_copy.get();
    waiting |= zc != nullptr && zc->completions_waiting();
  }
  if (!waiting || link_up()) {
    uint32_t lent = 0;
    for (uint16_t i = 0; i < vring_count(); ++i) lent += zero_copy_in_flight(i);
    return lent;
  }
  std::lock_guard lock(mutex_);
  uint32_t lent = 0;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    ZeroCopyTracker* zc = vrings_[i].zero_copy.get();
    if (zc == nullptr) continue;
    // Without a running device every vring is stopped (its gate closed: we are its owner) and
    // every chain still lent is an orphan.
    if (!running_ && zc->completions_waiting()) zc->reap_orphans_only();
    lent += zc->in_flight();
  }
  return lent;
}

void VhostDevice::return_lent_locked(Vring& v) {
  ZeroCopyTracker& zc = *v.zero_copy;
  if (!v.queue.attached()) return;
  const uint16_t used_before = v.queue.used_token();
  const uint64_t hz = rte_get_timer_hz();
  // Suspended for a message, the ring restarts after it and chains lent now come back to it
  // then: only what completed already is returned. A stop (the device going, the vring
  // disabled) waits, within one deadline for all of the device's vrings.
  const bool suspend = suspended_ && running_;
  if (suspend) {
    lent_wait_deadline_ = rte_get_timer_cycles();
  } else if (lent_wait_deadline_ == 0) {
    lent_wait_deadline_ = rte_get_timer_cycles() + hz * kLentStopWaitMs / 1000;
  }
  const uint64_t deadline = lent_wait_deadline_;
  uint64_t next_request = 0;
  // The gate is closed: this thread is the queue's owner now.
  while (true) {
    if (zc.completions_waiting()) {
      if (v.queue.packed())
        zc.reap(v.queue.packed_ring());
      else
        zc.reap(v.queue.ring());
    }
    const uint64_t now = rte_get_timer_cycles();
    if (zc.in_flight() == 0 || now >= deadline) break;
    if (options_.release_lent && now >= next_request) {
      options_.release_lent();
      next_request = now + hz * kLentReleaseRepeatMs / 1000;
    }
    rte_delay_us_sleep(100);
  }
  // A packed ring resumes from one base for both positions (the frontend's): chains still lent
  // go back now, or the guest would wait at their used position for ever.
  const uint16_t given_back = !suspend && v.queue.packed() && zc.in_flight() > 0
                                  ? zc.give_back_lent(v.queue.packed_ring())
                                  : 0;
  v.queue.complete_burst(used_before);
  if (zc.in_flight() > 0 && !suspend)
    VQS_LOG(WARNING, "%s: %u zero-copy buffers still held when the ring stopped%s", path().c_str(),
            zc.in_flight(),
            given_back > 0 ? " (returned to the packed ring's guest unfinished)" : "");
}

void VhostDevice::release_trackers_at_teardown() {
  // Chains still lent: their mbufs call back into the trackers when freed, so a tracker is
  // freed only once its chains completed (waited for, bounded); otherwise it is left allocated,
  // with the mappings it holds, rather than freed under a consumer.
  const uint64_t deadline =
      rte_get_timer_cycles() + rte_get_timer_hz() * kLentTeardownWaitMs / 1000;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    ZeroCopyTracker::Handle& zc = vrings_[i].zero_copy;
    if (zc == nullptr) continue;
    zc->reap_orphans_only();
    while (zc->in_flight() > 0 && rte_get_timer_cycles() < deadline) {
      rte_delay_us_sleep(1000);
      zc->reap_orphans_only();
    }
    if (zc->in_flight() > 0) {
      VQS_LOG(WARNING, "%s: vring %u: %u zero-copy buffers still held at teardown; left mapped",
              path().c_str(), i, zc->in_flight());
      (void)zc.release();
    }
  }
}

}  // namespace vqs
