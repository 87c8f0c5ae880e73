// SPDX-License-Identifier: BSD-3-Clause
// Guest TX chains lent out, at most limit() per virtqueue. Freeing a chain's last mbuf marks its
// slot done (one atomic OR); the owner reaps it into the used ring in its next burst, and only
// then reuses the slot. Recycled (acquire()), never freed: a completer reads its tracker after
// its OR. See docs/architecture.md, "Dequeue zero-copy".
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "ring/guest_mapping.h"
#include "ring/packed_ring.h"
#include "ring/split_ring.h"

namespace vqs {

class ZeroCopyTracker {
 public:
  static constexpr uint16_t kMaxSlots = 128;

  // min(128, ring size / 4): a quarter of the guest's ring at most is ever lent, so a consumer
  // that holds its mbufs cannot starve the guest of TX buffers.
  static uint16_t limit_for_ring(uint16_t ring_size) {
    const uint16_t quarter = static_cast<uint16_t>(ring_size / 4);
    return quarter < kMaxSlots ? quarter : kMaxSlots;
  }

  ZeroCopyTracker();
  ~ZeroCopyTracker();
  ZeroCopyTracker(const ZeroCopyTracker&) = delete;
  ZeroCopyTracker& operator=(const ZeroCopyTracker&) = delete;

  // A tracker for a device (control plane): a reused one when any was given back, reset. The
  // handle gives it back, which it may only do with nothing lent (in_flight() == 0); a device
  // that gives up waiting for its chains releases the handle instead, leaving it allocated.
  struct Recycle {
    void operator()(ZeroCopyTracker* tracker) const;
  };
  using Handle = std::unique_ptr<ZeroCopyTracker, Recycle>;
  static Handle acquire();

  // Owner, when the ring starts: the limit for its size. Orphans of earlier sessions still count
  // against it until they complete.
  void start(uint16_t ring_size) {
    limit_ = limit_for_ring(ring_size);
    slot_limit_ = static_cast<uint16_t>(ring_size / 4);
  }
  // Owner, when the ring stops: chains still lent will not be returned to this ring.
  void orphan_lent();
  // Owner, a packed ring stopping for good with chains still lent: their used entries are
  // written now (length 0) and they become orphans (their mapping stays held until they
  // complete). A packed ring cannot resume with its used position behind its available one: the
  // frontend keeps one base for both. The guest may then reuse a buffer a consumer still reads
  // (its data, not our memory). Returns the entries put.
  uint16_t give_back_lent(PackedRing& ring);
  // Owner (the ring stopped): the guest mapping chains are lent from from now on; nullptr when
  // the memory outlives every lent mbuf anyway (tests). While chains are lent from a mapping, the
  // tracker holds a reference to it, so the memory stays mapped until the last one completes.
  void set_mapping(GuestMapping* mapping);

  // Owner: lends a slot for the chain at `head` (its id; with a packed ring, `ring_slots` says how
  // many descriptors it takes), whose packet is attached to `segments` mbufs. nullptr when
  // limit() chains are lent: the caller copies instead.
  rte_mbuf_ext_shared_info* lend(uint16_t head, uint16_t ring_slots, uint16_t segments);
  // Owner: undoes lend() for a chain whose mbufs were never handed out (attach failed midway).
  void cancel(rte_mbuf_ext_shared_info* shinfo);

  // Any thread: whether completions wait to be reaped (a cheap check before reap()).
  bool completions_waiting() const {
    return (done_[0].load(std::memory_order_relaxed) | done_[1].load(std::memory_order_relaxed)) !=
           0;
  }
  // Owner: puts the heads of completed chains on `ring` (used.len 0: the device wrote nothing)
  // and frees their slots; orphans are freed only. Returns the entries put on the ring.
  uint16_t reap(SplitRing& ring);
  uint16_t reap(PackedRing& ring);
  // Owner: frees completed slots without touching a ring (nothing attached, e.g. at teardown).
  void reap_orphans_only();

  // Completion wake-ups for an owner that sleeps while others hold its chains: the first completion
  // after arm_wake(true) writes this eventfd, once. Call before the owner first sleeps; kept open
  // for the tracker's life (never a closed fd to a completer); -1 if it cannot be created.
  int wake_fd();
  // Owner: before sleeping (true) and after (false). Arming drains the fd, and writes it at once
  // when completions already wait, so none is slept through.
  void arm_wake(bool armed);
  // Times a completion (or arming) wrote the fd. Any thread.
  uint64_t wakes() const { return wakes_.load(std::memory_order_relaxed); }
  // Orphaned chains whose completion was reaped (their descriptors never went back to a ring).
  // Written by the owner, read by any thread.
  uint64_t orphans_reaped() const { return orphans_reaped_.load(std::memory_order_relaxed); }

  uint16_t limit() const { return limit_; }
  // Owner: whether chains lent now come from memory registered for DMA (GuestMapping::dma_ready).
  bool dma_ready() const { return mapping_ != nullptr && mapping_->dma_ready(); }
  // Chains lent now, orphans included. Owner; other threads read a recent value.
  uint16_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    rte_mbuf_ext_shared_info shinfo;  // first: the free callback gets the slot from its opaque
    ZeroCopyTracker* tracker = nullptr;
    GuestMapping* mapping = nullptr;  // the chain's memory (nullptr: not ours to keep)
    bool own_ref = false;             // holds its own reference to `mapping` (lent before a remap)
    uint16_t head = 0;
    uint16_t ring_slots = 1;  // packed rings: descriptors the chain takes
    uint8_t index = 0;
    bool orphan = false;
  };
  static void on_free(void* addr, void* opaque);
  // The state of a new tracker, but for the eventfd (kept open). Nothing may be lent.
  void reset();
  void wake_owner();
  void drop_mapping_ref(Slot& s);
  template <typename PutUsed>
  uint16_t reap_with(PutUsed&& put_used);
  // Owner: calls `f` with each slot not free (lent, or completed and not reaped yet).
  template <typename F>
  void for_each_lent(F&& f) {
    for (int word = 0; word < 2; ++word) {
      for (uint64_t lent = ~free_[word]; lent != 0; lent &= lent - 1)
        f(slots_[word * 64 + __builtin_ctzll(lent)]);
    }
  }

  Slot slots_[kMaxSlots];
  uint64_t free_[2];  // owner: slots that may be lent
  std::atomic<uint16_t> in_flight_{0};
  uint16_t limit_ = 0;
  // Packed rings: a lent chain holds all its descriptors' slots, so what is lent is bounded in
  // slots too (a quarter of the ring; split chains count one each, within limit_).
  uint16_t slot_limit_ = 0;
  uint32_t lent_slots_ = 0;  // owner
  GuestMapping* mapping_ = nullptr;
  uint16_t lent_from_mapping_ = 0;  // lent slots covered by the one reference held to mapping_
  std::atomic<uint64_t> orphans_reaped_{0};
  int wake_fd_ = -1;
  // Written by whichever thread frees an mbuf: a line of its own. wake_armed_ shares it, since
  // every completion reads it right after its OR.
  alignas(64) std::atomic<uint64_t> done_[2]{};
  std::atomic<bool> wake_armed_{false};
  std::atomic<uint64_t> wakes_{0};
};

}  // namespace vqs
