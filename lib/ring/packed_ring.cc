// SPDX-License-Identifier: BSD-3-Clause
#include "ring/packed_ring.h"

namespace vqs {

uint16_t PackedRing::count_available(uint16_t limit) const {
  uint16_t chains = 0;
  uint32_t slots = 0;
  PackedPos pos = avail_;
  bool in_chain = false;
  while (slots < addrs_.size && (chains < limit || in_chain)) {
    const uint16_t flags = __atomic_load_n(&addrs_.desc[pos.slot].flags, __ATOMIC_ACQUIRE);
    if (!packed_desc_available(flags, pos.wrap)) break;
    if (!in_chain) ++chains;
    in_chain = (flags & kVringDescFNext) != 0;
    ++slots;
    pos = pos.advanced(1, addrs_.size);
  }
  return chains;
}

PackedPos PackedRing::resume_position(const VringPackedDesc* desc, uint16_t size, PackedPos base,
                                      bool* recovered) {
  auto flags = [desc](uint16_t slot) {
    return __atomic_load_n(&desc[slot].flags, __ATOMIC_ACQUIRE);
  };
  auto lap = [&flags](uint16_t slot) { return (flags(slot) & kVringPackedDescFAvail) != 0; };
  // A slot's AVAIL bit is the lap the driver last made it available in (marking it used keeps it).
  // The driver's position is where that changes; a ring all of one lap was just completed. The
  // driver may post meanwhile: one that wraps moves slot 0 into the next lap, and the slots seen
  // after it would mislead, so look again then (a few times: it posts a lap between two).
  PackedPos driver;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const bool first_lap = lap(0);
    driver = PackedPos{0, !first_lap};
    for (uint16_t slot = 1; slot < size; ++slot) {
      if (lap(slot) != first_lap) {
        driver = PackedPos{slot, first_lap};
        break;
      }
    }
    if (lap(0) == first_lap) break;
  }
  // Slots from `base` to the driver's position, counted over two laps (positions repeat then).
  auto index = [size](PackedPos p) { return uint32_t{p.slot} + (p.wrap ? size : 0u); };
  const uint32_t distance = (index(driver) + 2u * size - index(base)) % (2u * size);
  bool agrees = base.slot < size && distance <= size;
  PackedPos at = base;
  for (uint32_t i = 0; agrees && i < distance; ++i) {
    agrees = packed_desc_available(flags(at.slot), at.wrap);
    at = at.advanced(1, size);
  }
  // And the slot behind `base` must not be available: a device standing at `base` had marked it
  // used (or it was never made available again); an available one means chains were waiting
  // behind `base` (a full ring looks like an empty one from its driver's position).
  if (agrees) {
    const PackedPos behind = base.before(size);
    agrees = !packed_desc_available(flags(behind.slot), behind.wrap);
  }
  *recovered = !agrees;
  if (agrees) return base;
  PackedPos resume = driver;
  for (uint32_t i = 0; i < size; ++i) {
    const PackedPos behind = resume.before(size);
    if (!packed_desc_available(flags(behind.slot), behind.wrap)) break;
    resume = behind;
  }
  return resume;
}

bool PackedRing::attach(const PackedRingAddrs& addrs, uint16_t avail_base, uint16_t used_base,
                        bool event_idx, bool in_order) {
  if (addrs.desc == nullptr || addrs.driver_event == nullptr || addrs.device_event == nullptr)
    return false;
  if (addrs.size == 0 || addrs.size > kMaxSize) return false;
  const PackedPos avail = PackedPos::from_base(avail_base);
  const PackedPos used = PackedPos::from_base(used_base);
  if (avail.slot >= addrs.size || used.slot >= addrs.size) return false;
  addrs_ = addrs;
  avail_ = avail;
  used_ = used;
  signalled_ = used;
  signalled_valid_ = false;
  event_idx_ = event_idx;
  in_order_ = in_order;
  shadow_count_ = 0;
  shadow_lengths_ = 0;
  kicks_enabled_ = true;  // so that the call below writes the suppression state
  set_kicks_enabled(false);
  return true;
}

void PackedRing::put_used_sent(const VringPackedDesc* descs, uint16_t count) {
  used_token_ = static_cast<uint16_t>(used_token_ + count);
  if (count == 0) return;
  if (in_order_) {
    // As two entries: the last but one returns every chain before it (virtio 1.1, 2.8.23), the
    // last its own; flush_shadow() may join the first with those staged before.
    if (shadow_count_ + 2 > kShadowSize) flush_shadow();
    if (count > 1) shadow_[shadow_count_++] = Shadow{descs[count - 2].id, 0, count - 1u};
    shadow_[shadow_count_++] = Shadow{descs[count - 1].id, 0, 1};
    return;
  }
  if (shadow_count_ != 0) flush_shadow();  // those staged before go first
  // Straight from the batch's copies, without staging them.
  write_used(count, [descs](uint16_t k) { return Shadow{descs[k].id, 0, 1}; });
}

template <typename EntryAt>
void PackedRing::write_used(uint16_t count, EntryAt entry_at) {
  // Each entry goes to the next used position, which then moves on by the chain's slots. The
  // driver reads used entries in order, from the first: its flags go last, after a release
  // fence, so that the whole batch becomes visible at once. In locals: the writes to the ring
  // may alias the members, which would be read again.
  VringPackedDesc* const ring = addrs_.desc;
  const uint32_t size = addrs_.size;
  const PackedPos start = used_;
  uint32_t slot = start.slot;
  uint16_t flags = used_flags(start.wrap);
  for (uint16_t i = 0; i < count; ++i) {
    const Shadow e = entry_at(i);
    VringPackedDesc* d = &ring[slot];
    d->id = e.id;
    d->len = e.len;
    if (i > 0) d->flags = flags;
    slot += e.descs;
    while (slot >= size) {  // an in-order entry of many chains may pass the end
      slot -= size;
      flags ^= kVringPackedDescFAvail | kVringPackedDescFUsed;
    }
  }
  used_ = PackedPos{static_cast<uint16_t>(slot), (flags & kVringPackedDescFUsed) != 0};
  __atomic_store_n(&ring[start.slot].flags, used_flags(start.wrap), __ATOMIC_RELEASE);
  if (log_ != nullptr) {
    // After the writes: a page marked before its last write could be copied (and its mark
    // cleared) in between, and the copy would lack it.
    PackedPos at = start;
    for (uint16_t i = 0; i < count; ++i) {
      log_write(&ring[at.slot], sizeof(VringPackedDesc));
      at = at.advanced(entry_at(i).descs, addrs_.size);
    }
  }
  // With EVENT_IDX and kicks wanted, the offset we asked the driver to kick at moves on with us.
  if (kicks_enabled_ && event_idx_) write_kick_offset();
}

void PackedRing::flush_shadow() {
  if (shadow_count_ == 0) return;
  if (in_order_ && shadow_lengths_ == 0 && shadow_count_ > 2) {
    // All but the last as one entry: the id of the last of them, their slots together.
    uint32_t slots = 0;
    for (uint16_t i = 0; i + 1 < shadow_count_; ++i) slots += shadow_[i].descs;
    shadow_[0] = Shadow{shadow_[shadow_count_ - 2].id, 0, slots};
    shadow_[1] = shadow_[shadow_count_ - 1];
    shadow_count_ = 2;
  }
  write_used(shadow_count_, [this](uint16_t i) { return shadow_[i]; });
  shadow_count_ = 0;
  shadow_lengths_ = 0;
}

bool PackedRing::guest_wants_interrupt() {
  const PackedPos old = signalled_;
  const bool old_valid = signalled_valid_;
  signalled_ = used_;
  signalled_valid_ = true;
  if (old == used_) return false;  // nothing used since the last decision
  // Our used entries must be visible before we read the driver's suppression state, or both
  // sides may decide the other will act (store-load ordering needs a full barrier).
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  // Acquire: the driver writes off_wrap before the flags that make it count.
  const uint16_t flags = __atomic_load_n(&addrs_.driver_event->flags, __ATOMIC_ACQUIRE);
  if (flags != kVringPackedEventFDesc || !event_idx_) return flags != kVringPackedEventFDisable;
  if (!old_valid) return true;
  // Interrupt when the used position passed the driver's event offset since the last decision:
  // the split ring's vring_need_event, on positions unrolled across the wrap (off and old are
  // taken one lap back when they belong to the previous one).
  const uint16_t off_wrap = __atomic_load_n(&addrs_.driver_event->off_wrap, __ATOMIC_RELAXED);
  const int32_t size = addrs_.size;
  const int32_t now = used_.slot;
  int32_t off = off_wrap & 0x7fff;
  int32_t before = old.slot;
  if (((off_wrap >> 15) != 0) != used_.wrap) off -= size;
  if (old.wrap != used_.wrap) before -= size;
  // Entries published in (before, now]: the driver asked at `off`.
  return static_cast<uint16_t>(now - off - 1) < static_cast<uint16_t>(now - before);
}

void PackedRing::set_kicks_enabled(bool enabled) {
  if (enabled == kicks_enabled_) return;
  kicks_enabled_ = enabled;
  VringPackedEvent* ev = addrs_.device_event;
  if (enabled && event_idx_) {
    // Kick once the descriptor at our next available position is made available: the offset
    // first, so that a driver that sees DESC sees it.
    write_kick_offset();
    __atomic_store_n(&ev->flags, kVringPackedEventFDesc, __ATOMIC_RELEASE);
  } else {
    __atomic_store_n(&ev->flags, enabled ? kVringPackedEventFEnable : kVringPackedEventFDisable,
                     __ATOMIC_RELEASE);
  }
  if (log_ != nullptr) log_write(ev, sizeof(*ev));
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

}  // namespace vqs
