// SPDX-License-Identifier: BSD-3-Clause
#include "ring/split_ring.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vqs {

bool SplitRing::attach(const SplitRingAddrs& addrs, uint16_t last_avail_idx, uint16_t last_used_idx,
                       bool event_idx) {
  const uint32_t size = addrs.size;
  if (addrs.desc == nullptr || addrs.avail == nullptr || addrs.used == nullptr) return false;
  if (size == 0 || size > kMaxSize || (size & (size - 1)) != 0) return false;
  addrs_ = addrs;
  mask_ = static_cast<uint16_t>(size - 1);
  last_avail_ = last_avail_idx;
  seen_avail_ = last_avail_idx;
  last_used_ = last_used_idx;
  shadow_count_ = 0;
  shadow_limit_ = static_cast<uint16_t>(size < kShadowSize ? size : kShadowSize);
  signalled_used_ = last_used_idx;
  signalled_used_valid_ = false;
  event_idx_ = event_idx;
  broken_ = false;
  guest_suppressed_ = false;  // read at the first decision
  owed_ = false;
  line_release_ = buffer_release_ = LineRelease::kOff;  // until set_line_release()
  probe_.start(0);
  placement_from_ = nullptr;
  kicks_enabled_ = true;  // so that the call below writes the suppression state
  set_kicks_enabled(false);
  return true;
}

void SplitRing::set_line_release(LineRelease descs, uint64_t tsc_hz,
                                 const PlacementProbe* placement_from, LineRelease buffers) {
  const bool can = line_release_supported();
  line_release_ = can ? descs : LineRelease::kOff;
  buffer_release_ = can ? buffers : LineRelease::kOff;
  const bool probes =
      (line_release_ == LineRelease::kAuto || buffer_release_ == LineRelease::kAuto) &&
      placement_from == nullptr;
  probe_.start(probes ? tsc_hz : 0);
  placement_from_ = placement_from;
}

uint16_t SplitRing::release_descs(const uint16_t* heads, uint16_t count) const {
  const bool can_release = line_release_supported();
  uint16_t released = 0;
  uintptr_t previous = 0;
  for (uint16_t i = 0; i < count; ++i) {
    if (heads[i] >= addrs_.size) continue;  // the guest's head, unchecked: not in the table
    const uintptr_t line =
        reinterpret_cast<uintptr_t>(&addrs_.desc[heads[i]]) & ~uintptr_t{kCacheLine - 1};
    if (line == previous) continue;  // a burst's heads run in order: neighbours share lines
    previous = line;
    if (can_release) release_line(reinterpret_cast<const void*>(line));
    ++released;
  }
  return released;
}

void SplitRing::flush_shadow() {
  if (shadow_count_ == 0) return;
  // The shadow holds the entries just before last_used_ (never more than the ring's size).
  const UsedSpan span = used_span(static_cast<uint16_t>(last_used_ - shadow_count_), shadow_count_);
  std::memcpy(&addrs_.used->ring[span.first], shadow_, span.head * sizeof(VringUsedElem));
  std::memcpy(&addrs_.used->ring[0], shadow_ + span.head, span.rest * sizeof(VringUsedElem));
  if (log_ != nullptr) {
    log_->used_written(sizeof(VringUsed) + span.first * sizeof(VringUsedElem),
                       span.head * sizeof(VringUsedElem));
    if (span.rest > 0) log_->used_written(sizeof(VringUsed), span.rest * sizeof(VringUsedElem));
  }
  shadow_count_ = 0;
}

bool SplitRing::guest_wants_interrupt() {
  const uint16_t old_idx = signalled_used_;
  const bool old_valid = signalled_used_valid_;
  signalled_used_ = last_used_;
  signalled_used_valid_ = true;
  if (old_idx == last_used_) return false;  // nothing used since the last decision
  if (!event_idx_) {
    // Within the interval after a read that said "no interrupts", that answer stands. Timed from
    // the read, not from the first decision it answered: after a pause (a guest that went idle,
    // then asked for interrupts) the first decision reads at once.
    if (guest_suppressed_ && recheck_cycles_ != 0 && clock_() - read_at_ < recheck_cycles_) {
      owed_ = true;
      return false;
    }
    return read_suppression_flag();
  }
  __atomic_thread_fence(__ATOMIC_SEQ_CST);  // as read_suppression_flag's
  if (!old_valid) return true;
  const uint16_t used_event = __atomic_load_n(&addrs_.avail->ring[addrs_.size], __ATOMIC_RELAXED);
  // vring_need_event: the guest wants an interrupt once used idx moves past used_event.
  return static_cast<uint16_t>(last_used_ - used_event - 1) <
         static_cast<uint16_t>(last_used_ - old_idx);
}

bool SplitRing::read_suppression_flag() {
  // Our used-index store must be visible before we read the guest's suppression state, or both
  // sides may decide the other will act (store-load ordering needs a full barrier).
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  const uint16_t flags = __atomic_load_n(&addrs_.avail->flags, __ATOMIC_RELAXED);
  guest_suppressed_ = (flags & kVringAvailFNoInterrupt) != 0;
  if (guest_suppressed_ && recheck_cycles_ != 0) read_at_ = clock_();
  owed_ = false;
  return !guest_suppressed_;
}

void SplitRing::set_interrupt_recheck(uint64_t cycles, Clock clock) {
  recheck_cycles_ = clock != nullptr ? cycles : 0;
  clock_ = clock;
}

bool SplitRing::settle_interrupt_check(bool now) {
  if (!owed_) return false;
  if (!now && clock_() - read_at_ < recheck_cycles_) return false;
  return read_suppression_flag();
}

void SplitRing::set_kicks_enabled(bool enabled) {
  if (enabled == kicks_enabled_) return;
  kicks_enabled_ = enabled;
  if (event_idx_) {
    // Disabled: leave avail_event one behind our index, so the guest kicks only once it has
    // posted a whole 2^16 entries; the guest ignores kVringUsedFNoNotify with EVENT_IDX.
    write_avail_event(enabled ? last_avail_ : static_cast<uint16_t>(last_avail_ - 1));
  } else {
    uint16_t flags = __atomic_load_n(&addrs_.used->flags, __ATOMIC_RELAXED);
    flags = enabled ? (flags & ~kVringUsedFNoNotify) : (flags | kVringUsedFNoNotify);
    __atomic_store_n(&addrs_.used->flags, flags, __ATOMIC_RELAXED);
    if (log_ != nullptr) log_->used_written(offsetof(VringUsed, flags), sizeof(uint16_t));
  }
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

}  // namespace vqs
