// SPDX-License-Identifier: BSD-3-Clause
#include "datapath/zero_copy_tracker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>
#include <vector>

namespace vqs {
namespace {

// Trackers given back, for the next device. Control plane only.
std::mutex recycled_mutex;
std::vector<ZeroCopyTracker*>& recycled() {
  static auto* trackers = new std::vector<ZeroCopyTracker*>;  // never destroyed, as they are not
  return *trackers;
}

}  // namespace

ZeroCopyTracker::Handle ZeroCopyTracker::acquire() {
  {
    std::lock_guard lock(recycled_mutex);
    if (!recycled().empty()) {
      ZeroCopyTracker* tracker = recycled().back();
      recycled().pop_back();
      return Handle(tracker);
    }
  }
  return Handle(new ZeroCopyTracker);
}

void ZeroCopyTracker::Recycle::operator()(ZeroCopyTracker* tracker) const {
  tracker->reset();
  std::lock_guard lock(recycled_mutex);
  recycled().push_back(tracker);
}

void ZeroCopyTracker::reset() {
  for (Slot& s : slots_) {
    s.mapping = nullptr;
    s.own_ref = false;
    s.head = 0;
    s.orphan = false;
  }
  free_[0] = free_[1] = ~uint64_t{0};
  in_flight_.store(0, std::memory_order_relaxed);
  limit_ = 0;
  slot_limit_ = 0;
  lent_slots_ = 0;
  mapping_ = nullptr;
  lent_from_mapping_ = 0;
  orphans_reaped_.store(0, std::memory_order_relaxed);
  done_[0].store(0, std::memory_order_relaxed);
  done_[1].store(0, std::memory_order_relaxed);
  // A late completer of the previous device may still exchange this, write the fd and count it:
  // at worst one spurious wake (and one wake counted) for the next device.
  wake_armed_.store(false, std::memory_order_relaxed);
  wakes_.store(0, std::memory_order_relaxed);
  if (wake_fd_ >= 0) {
    eventfd_t ignored;
    (void)eventfd_read(wake_fd_, &ignored);  // a wake of the previous device, not acted on
  }
}

ZeroCopyTracker::ZeroCopyTracker() {
  for (uint16_t i = 0; i < kMaxSlots; ++i) {
    Slot& s = slots_[i];
    s.shinfo.free_cb = on_free;
    s.shinfo.fcb_opaque = &s;
    s.tracker = this;
    s.index = static_cast<uint8_t>(i);
  }
  reset();  // the state a recycled tracker is given back in, from one place
}

ZeroCopyTracker::~ZeroCopyTracker() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void ZeroCopyTracker::on_free(void* /*addr*/, void* opaque) {
  Slot* s = static_cast<Slot*>(opaque);
  ZeroCopyTracker* const tracker = s->tracker;
  // Release: the consumer's last read of the buffer happens before the guest may reuse it.
  // Sequentially consistent with the load below, against arm_wake's store then load: either the
  // owner sees this completion before it sleeps, or we see it armed.
  tracker->done_[s->index >> 6].fetch_or(uint64_t{1} << (s->index & 63), std::memory_order_seq_cst);
  if (tracker->wake_armed_.load(std::memory_order_seq_cst)) [[unlikely]]
    tracker->wake_owner();
}

void ZeroCopyTracker::wake_owner() {
  // One write per arming, whichever of the completers (or the owner) gets here first.
  if (!wake_armed_.exchange(false, std::memory_order_acq_rel)) return;
  (void)eventfd_write(wake_fd_, 1);
  wakes_.fetch_add(1, std::memory_order_relaxed);
}

int ZeroCopyTracker::wake_fd() {
  if (wake_fd_ < 0) wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return wake_fd_;
}

void ZeroCopyTracker::arm_wake(bool armed) {
  if (!armed || wake_fd_ < 0) {
    wake_armed_.store(false, std::memory_order_relaxed);
    return;
  }
  eventfd_t ignored;
  (void)eventfd_read(wake_fd_, &ignored);  // an earlier wake, already acted on
  wake_armed_.store(true, std::memory_order_seq_cst);
  if ((done_[0].load(std::memory_order_seq_cst) | done_[1].load(std::memory_order_seq_cst)) != 0)
    wake_owner();
}

rte_mbuf_ext_shared_info* ZeroCopyTracker::lend(uint16_t head, uint16_t ring_slots,
                                                uint16_t segments) {
  const uint16_t lent = in_flight_.load(std::memory_order_relaxed);
  if (lent >= limit_ || lent_slots_ + ring_slots > slot_limit_) return nullptr;
  const int word = free_[0] != 0 ? 0 : 1;
  if (free_[word] == 0) return nullptr;  // every slot lent (limit_ is at most kMaxSlots)
  const int bit = __builtin_ctzll(free_[word]);
  free_[word] &= ~(uint64_t{1} << bit);
  Slot& s = slots_[word * 64 + bit];
  s.head = head;
  s.ring_slots = ring_slots;
  s.orphan = false;
  s.mapping = mapping_;
  s.own_ref = false;
  if (mapping_ != nullptr && lent_from_mapping_++ == 0) mapping_->retain();
  rte_mbuf_ext_refcnt_set(&s.shinfo, segments);
  lent_slots_ += ring_slots;
  in_flight_.store(static_cast<uint16_t>(lent + 1), std::memory_order_relaxed);
  return &s.shinfo;
}

void ZeroCopyTracker::cancel(rte_mbuf_ext_shared_info* shinfo) {
  Slot* s = reinterpret_cast<Slot*>(shinfo);
  drop_mapping_ref(*s);
  lent_slots_ -= s->ring_slots;
  free_[s->index >> 6] |= uint64_t{1} << (s->index & 63);
  in_flight_.store(static_cast<uint16_t>(in_flight_.load(std::memory_order_relaxed) - 1),
                   std::memory_order_relaxed);
}

void ZeroCopyTracker::orphan_lent() {
  for_each_lent([](Slot& s) { s.orphan = true; });
}

uint16_t ZeroCopyTracker::give_back_lent(PackedRing& ring) {
  uint16_t given = 0;
  for_each_lent([&](Slot& s) {
    if (s.orphan) return;
    ring.put_used(s.head, 0, s.ring_slots);
    s.orphan = true;
    ++given;
  });
  return given;
}

void ZeroCopyTracker::drop_mapping_ref(Slot& s) {
  if (s.own_ref) {
    s.mapping->release();  // may unmap an earlier session's memory: its last user is gone
  } else if (s.mapping != nullptr && --lent_from_mapping_ == 0) {
    mapping_->release();
  }
  s.mapping = nullptr;
  s.own_ref = false;
}

void ZeroCopyTracker::set_mapping(GuestMapping* mapping) {
  if (mapping == mapping_) return;
  if (mapping_ != nullptr && lent_from_mapping_ > 0) {
    // Chains lent from the old mapping keep it, each with its own reference.
    for_each_lent([this](Slot& s) {
      if (s.own_ref || s.mapping == nullptr) return;
      mapping_->retain();
      s.own_ref = true;
    });
    mapping_->release();
  }
  mapping_ = mapping;
  lent_from_mapping_ = 0;
}

template <typename PutUsed>
uint16_t ZeroCopyTracker::reap_with(PutUsed&& put_used) {
  uint16_t returned = 0;
  uint16_t freed = 0;
  for (int word = 0; word < 2; ++word) {
    if (done_[word].load(std::memory_order_relaxed) == 0) continue;
    uint64_t done = done_[word].exchange(0, std::memory_order_acquire);
    free_[word] |= done;
    while (done != 0) {
      const int bit = __builtin_ctzll(done);
      done &= done - 1;
      Slot& s = slots_[word * 64 + bit];
      ++freed;
      lent_slots_ -= s.ring_slots;
      drop_mapping_ref(s);
      if (!s.orphan) {
        put_used(s);
        ++returned;
      }
    }
  }
  if (freed != 0) {
    in_flight_.store(static_cast<uint16_t>(in_flight_.load(std::memory_order_relaxed) - freed),
                     std::memory_order_relaxed);
    if (freed != returned)
      orphans_reaped_.store(orphans_reaped_.load(std::memory_order_relaxed) + (freed - returned),
                            std::memory_order_relaxed);
  }
  return returned;
}

uint16_t ZeroCopyTracker::reap(SplitRing& ring) {
  return reap_with([&ring](const Slot& s) { ring.put_used(s.head, 0); });
}

uint16_t ZeroCopyTracker::reap(PackedRing& ring) {
  return reap_with([&ring](const Slot& s) { ring.put_used(s.head, 0, s.ring_slots); });
}

void ZeroCopyTracker::reap_orphans_only() {
  orphan_lent();
  reap_with([](const Slot&) {});
}

}  // namespace vqs
