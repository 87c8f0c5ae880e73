// SPDX-License-Identifier: BSD-3-Clause
#include "ring/virtqueue.h"

#include <sys/eventfd.h>

namespace vqs {

namespace {

// Whether the ring's areas, at the size given, lie in guest memory. librte_vhost checks them
// when it translates the addresses, but a later SET_VRING_NUM changes the size without a new
// translation: a ring grown that way would reach past its region.
bool rings_in_memory(const VirtQueue::Setup& setup, bool packed, bool event_idx) {
  const GuestMemory& memory = setup.ring_memory != nullptr ? *setup.ring_memory : *setup.memory;
  const uint64_t event = event_idx ? sizeof(uint16_t) : 0;
  if (packed) {
    const PackedRingAddrs& a = setup.packed_addrs;
    return memory.holds(a.desc, uint64_t{sizeof(VringPackedDesc)} * a.size) &&
           memory.holds(a.driver_event, sizeof(VringPackedEvent)) &&
           memory.holds(a.device_event, sizeof(VringPackedEvent));
  }
  const SplitRingAddrs& a = setup.addrs;
  return memory.holds(a.desc, uint64_t{sizeof(VringDesc)} * a.size) &&
         memory.holds(a.avail, offsetof(VringAvail, ring) + uint64_t{2} * a.size + event) &&
         memory.holds(a.used, offsetof(VringUsed, ring) + uint64_t{8} * a.size + event);
}

}  // namespace

bool VirtQueue::start(const Setup& setup) {
  features_ = NetFeatures::from_bits(setup.features);
  packed_ = (setup.features >> kFRingPacked) & 1;
  resumed_from_ring_ = false;
  if (setup.memory == nullptr || !rings_in_memory(setup, packed_, features_.event_idx)) {
    ring_.detach();
    packed_ring_.detach();
    return false;
  }
  uint16_t size = 0;
  if (packed_) {
    if (batch_ == nullptr) batch_ = std::make_unique<PackedBatch>();
    // Before attaching: attaching writes the ring's notification suppression state.
    packed_ring_.set_dirty_log(setup.dirty_log,
                               setup.ring_memory != nullptr ? setup.ring_memory : setup.memory);
    uint16_t avail_base = setup.last_avail_idx, used_base = setup.last_used_idx;
    const PackedRingAddrs& addrs = setup.packed_addrs;
    if (!setup.base_is_ours && avail_base == used_base && addrs.desc != nullptr &&
        addrs.size != 0 && addrs.size <= PackedRing::kMaxSize &&
        (avail_base & 0x7fff) < addrs.size) {
      // One base for both, as a frontend gives it: checked against the ring (it may be stale).
      const PackedPos resume = PackedRing::resume_position(
          addrs.desc, addrs.size, PackedPos::from_base(avail_base), &resumed_from_ring_);
      avail_base = used_base = resume.base();
    }
    if (!packed_ring_.attach(addrs, avail_base, used_base, features_.event_idx,
                             features_.in_order)) {
      packed_ring_.detach();
      return false;
    }
    batch_->bind(setup.memory, features_.indirect_desc);
    size = setup.packed_addrs.size;
  } else {
    ring_.set_dirty_log(setup.dirty_log);
    if (!ring_.attach(setup.addrs, setup.last_avail_idx, setup.last_used_idx,
                      features_.event_idx)) {
      ring_.detach();
      return false;
    }
    ring_.set_line_release(setup.line_release, setup.tsc_hz, setup.placement_from,
                           setup.buffer_release);
    const SplitRing::Clock clock =
        setup.clock != nullptr ? setup.clock : (kTscClock ? &tsc_clock : nullptr);
    ring_.set_interrupt_recheck(setup.interrupt_recheck_us * setup.tsc_hz / 1000000, clock);
    reader_ =
        DescChainReader(setup.addrs.desc, setup.addrs.size, setup.memory, features_.indirect_desc);
    size = setup.addrs.size;
  }
  // Frames sampled on the queue pair's RX ring vote only where the verdict is used.
  ForwardSample* const votes_from =
      !packed_ && setup.buffer_release == LineRelease::kAuto ? setup.pair_rx_sample : nullptr;
  sender_gate_.start(setup.pair_rx_stats != nullptr ? &setup.pair_rx_stats->packets : nullptr,
                     votes_from, stats_.packets);
  forward_sample_.reset(stats_.packets);  // as a guest RX ring: nothing from an old mapping
  memory_ = setup.memory;
  log_ = setup.dirty_log;
  callfd_ = setup.callfd;
  broken_counted_ = false;
  if (setup.notify)
    notifier_.start(*setup.notify, size, setup.tsc_hz);
  else
    notifier_.start_off();
  return true;
}

void VirtQueue::stop() {
  // Entries published but not yet notified would wait for the next burst after a restart, or
  // for ever: tell the guest now (the callfd is still the guest's while we are being stopped).
  // An owed decision is sent without reading the ring: a spurious interrupt costs the guest
  // one look.
  if ((ring_.attached() || packed_ring_.attached()) && notification_pending()) interrupt_guest();
  notifier_.reset();
  ring_.detach();
  packed_ring_.detach();
  sender_gate_.start(nullptr, nullptr, 0);  // no verdict for a stopped ring
  forward_sample_.reset(stats_.packets);
  log_ = nullptr;
  callfd_ = -1;
}

void VirtQueue::complete_burst(uint16_t used_before) {
  if (publish_used(used_before)) interrupt_guest();
}

void VirtQueue::apply_notify_policy(uint16_t used_before, uint32_t delivered, uint16_t remaining,
                                    uint64_t now_tsc) {
  const bool wanted = publish_used(used_before);
  // The snapshot is from before the burst (a packed burst's: only the chains it copied); the
  // guest may have posted since, so look again before calling it low (one load, only then).
  const uint32_t threshold = notifier_.refill_threshold();
  const bool low = remaining < threshold && posted_below(threshold);
  switch (notifier_.after_burst(wanted, delivered, low, now_tsc)) {
    case GuestNotifier::Action::kNone:
      break;
    case GuestNotifier::Action::kDefer:
      ++stats_.guest_notifications_coalesced;
      break;
    case GuestNotifier::Action::kNotifyForRefill:
      ++stats_.guest_notifications_refill;
      interrupt_guest();
      break;
    case GuestNotifier::Action::kNotify:
      interrupt_guest();
      break;
  }
}

void VirtQueue::interrupt_guest() {
  ++stats_.guest_notifications;
  // A full eventfd counter (EAGAIN) still wakes the guest: nothing to retry.
  if (callfd_ >= 0) (void)eventfd_write(callfd_, 1);
}

}  // namespace vqs
