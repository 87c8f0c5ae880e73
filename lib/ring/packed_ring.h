// SPDX-License-Identifier: BSD-3-Clause
// The device side of one packed virtqueue (virtio 1.1+, 2.8): where the chains the driver made
// available start (PackedBatch copies and reads them), marking them used in place, and both
// directions of event suppression. Positions are ring slots with a wrap counter each, as the
// specification counts them; librte_vhost's vring base carries the counter in bit 15. No EAL here.
//
#pragma once

#include <cstdint>

#include "ring/dirty_log.h"
#include "ring/guest_memory.h"
#include "ring/vring.h"

namespace vqs {

struct PackedRingAddrs {
  VringPackedDesc* desc = nullptr;
  VringPackedEvent* driver_event = nullptr;  // the driver's: when to interrupt it
  VringPackedEvent* device_event = nullptr;  // ours: when the driver should kick
  uint16_t size = 0;                         // any size from 1 to 32768 (no power of two needed)
};

// A position in the descriptor ring: the slot and the wrap counter it is read or written with.
struct PackedPos {
  uint16_t slot = 0;
  bool wrap = true;  // both counters start at 1
  // librte_vhost's vring base: the slot, the counter in bit 15.
  static PackedPos from_base(uint16_t base) {
    return PackedPos{static_cast<uint16_t>(base & 0x7fff), (base >> 15) != 0};
  }
  uint16_t base() const { return static_cast<uint16_t>(slot | (wrap ? 0x8000 : 0)); }
  // `count` slots on, in a ring of `size`.
  PackedPos advanced(uint32_t count, uint16_t size) const {
    uint32_t s = slot + count;
    bool w = wrap;
    while (s >= size) {
      s -= size;
      w = !w;
    }
    return PackedPos{static_cast<uint16_t>(s), w};
  }
  // One slot back, in a ring of `size`.
  PackedPos before(uint16_t size) const {
    return slot == 0 ? PackedPos{static_cast<uint16_t>(size - 1), !wrap}
                     : PackedPos{static_cast<uint16_t>(slot - 1), wrap};
  }
  bool operator==(const PackedPos&) const = default;
};

// Whether descriptor flags mark it available in the lap of wrap counter `wrap`: AVAIL equal to the
// counter, USED not (a used descriptor has both equal).
inline bool packed_desc_available(uint16_t flags, bool wrap) {
  return ((flags & kVringPackedDescFAvail) != 0) == wrap &&
         ((flags & kVringPackedDescFUsed) != 0) != wrap;
}

class PackedRing {
 public:
  static constexpr uint32_t kMaxSize = 32768;

  // Where a device resumes a ring whose frontend gave one base for both positions, as
  // SET_VRING_BASE does (docs/architecture.md, "Packed rings after a restart"). `base` when the
  // descriptors agree with it: the slots from it to the driver's position are all available.
  // Otherwise the frontend's base is stale (QEMU keeps none of its own for a packed ring whose
  // backend went away) and the position is found from the descriptors: the driver's position,
  // where the slots' laps change, then back over the available slots behind it, to the first one
  // the device had not marked used. Exact while each chain takes one slot (indirect tables, one
  // buffer per receive chain: what Linux and DPDK post when INDIRECT_DESC is negotiated) and
  // used entries were written in order (not after zero-copy completions out of order, whose
  // chains' own slots stay marked available). `recovered` says which. Reads each slot's flags a
  // few times at most.
  static PackedPos resume_position(const VringPackedDesc* desc, uint16_t size, PackedPos base,
                                   bool* recovered);

  // Fails on a null area or a size of 0 or above kMaxSize. The bases are where the device
  // resumes (librte_vhost's vring base: 0x8000 on a fresh device). Guest kicks start disabled.
  // `in_order`: VIRTIO_F_IN_ORDER was negotiated, so used entries of length 0 may be written for
  // whole batches (publish_used()).
  bool attach(const PackedRingAddrs& addrs, uint16_t avail_base, uint16_t used_base, bool event_idx,
              bool in_order);
  void detach() {
    addrs_ = PackedRingAddrs{};
    log_ = nullptr;
  }
  bool attached() const { return addrs_.desc != nullptr; }
  // Live migration: every write to the descriptor ring and our event area is reported to `log`
  // by guest-physical address, found in `memory` (nullptr: none). Not as used-ring offsets: a
  // frontend's log address for a packed ring is its device area, not the descriptors.
  void set_dirty_log(DirtyLog* log, const GuestMemory* memory) {
    log_ = log;
    log_memory_ = memory;
  }

  uint16_t size() const { return addrs_.size; }
  const VringPackedDesc* descs() const { return addrs_.desc; }
  PackedPos next_avail() const { return avail_; }
  PackedPos next_used() const { return used_; }

  // Whether the driver made the descriptor at `at` available (its AVAIL flag equals the wrap
  // counter of `at`, its USED flag does not). Reads after a true answer are ordered after it.
  bool available(PackedPos at) const {
    return packed_desc_available(__atomic_load_n(&addrs_.desc[at.slot].flags, __ATOMIC_ACQUIRE),
                                 at.wrap);
  }
  // Consumes `descs` slots from the next available position on.
  void consume(uint32_t descs) { avail_ = avail_.advanced(descs, addrs_.size); }
  // Chains available from the next available position on, counted up to `limit` (their heads
  // and chained descriptors' flags are read, within one lap).
  uint16_t count_available(uint16_t limit) const;
  // Whether at least `slots` slots from the next available position on are available: one look,
  // at the last of them (a driver makes slots available in ring order). For refill thresholds,
  // every burst: a receive chain takes one slot (one buffer, or an indirect table).
  bool slots_available(uint32_t slots) const {
    if (slots == 0) return true;
    if (slots > addrs_.size) return false;
    return available(avail_.advanced(slots - 1, addrs_.size));
  }

  // Stages a used entry for a chain of `descs` slots; the driver sees it after publish_used().
  void put_used(uint16_t id, uint32_t len, uint16_t descs) {
    if (shadow_count_ == kShadowSize) flush_shadow();
    shadow_[shadow_count_++] = Shadow{id, len, descs};
    shadow_lengths_ |= len;
    ++used_token_;
  }
  // put_used(descs[k].id, 0, 1) for each of `count` one-slot chains: what a guest sent.
  void put_used_sent(const VringPackedDesc* descs, uint16_t count);
  // Moves with every put_used(): a burst compares it to tell whether it used anything.
  uint16_t used_token() const { return used_token_; }
  // Makes the staged used entries visible: each written in place, the first one's flags last.
  // In order and all of length 0 (the chains a guest sent), all but the last go back as one
  // entry, the id of the last of them at the first one's slot (virtio 1.1, 2.8.23): the driver
  // gets one descriptor line back instead of one per four chains, as from librte_vhost. The last
  // chain keeps its own entry, so that the slot behind the used position is always marked used
  // (what resume_position() reads after a restart).
  void publish_used() { flush_shadow(); }

  // Whether the driver asked to be interrupted for what was published since the last call that
  // returned true or false: its event area's flags, or with EVENT_IDX its off_wrap.
  bool guest_wants_interrupt();

  // Driver -> device notifications (kicks): disabled while polling; enable before sleeping, then
  // look at the next available descriptor once more.
  void set_kicks_enabled(bool enabled);

 private:
  struct Shadow {
    uint16_t id;
    uint32_t len;
    uint32_t descs;  // slots: a batch's together may pass 65535 (a hostile driver's chains)
  };
  static constexpr uint16_t kShadowSize = 64;

  static uint16_t used_flags(bool wrap) {
    return wrap ? (kVringPackedDescFAvail | kVringPackedDescFUsed) : 0;
  }
  void flush_shadow();
  // Writes `count` used entries in place, entry_at(i) giving the i-th (a Shadow), and makes them
  // visible: flush_shadow() and put_used_sent() alike.
  template <typename EntryAt>
  void write_used(uint16_t count, EntryAt entry_at);
  void write_kick_offset() {
    __atomic_store_n(&addrs_.device_event->off_wrap, avail_.base(), __ATOMIC_RELAXED);
    if (log_ != nullptr) log_write(addrs_.device_event, sizeof(VringPackedEvent));
  }
  void log_write(const void* host, uint64_t len) const {
    uint64_t gpa = 0;
    if (log_memory_->guest_phys_of(static_cast<const uint8_t*>(host), &gpa))
      log_->guest_written(gpa, len);
  }

  PackedRingAddrs addrs_{};
  DirtyLog* log_ = nullptr;
  const GuestMemory* log_memory_ = nullptr;
  PackedPos avail_;
  PackedPos used_;
  PackedPos signalled_;  // where the used position was at the last interrupt decision
  bool signalled_valid_ = false;
  bool event_idx_ = false;
  bool in_order_ = false;
  bool kicks_enabled_ = false;
  uint16_t shadow_count_ = 0;
  uint32_t shadow_lengths_ = 0;  // the staged entries' lengths or-ed: 0 when all are 0
  uint16_t used_token_ = 0;
  Shadow shadow_[kShadowSize];
};

}  // namespace vqs
