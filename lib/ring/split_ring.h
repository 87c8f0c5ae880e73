// SPDX-License-Identifier: BSD-3-Clause
// The device side of one split virtqueue: our indices, used-ring writes and both directions of
// notification suppression (VRING_*_F_NO_* flags, or kRingFEventIdx).
//
// librte_vhost keeps indices of its own that our datapath does not update, so the notification
// decision is made here, on ours. No EAL here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ring/dirty_log.h"
#include "ring/line_release.h"
#include "ring/placement_probe.h"
#include "ring/prefetch.h"
#include "ring/vring.h"

namespace vqs {

struct SplitRingAddrs {
  VringDesc* desc = nullptr;
  VringAvail* avail = nullptr;
  VringUsed* used = nullptr;
  uint16_t size = 0;  // a power of two, at most 32768
};

class SplitRing {
 public:
  static constexpr uint32_t kMaxSize = 32768;

  // Fails on a null ring or a size that is zero, not a power of two or above kMaxSize. The
  // indices are where the device resumes (0 on a fresh device; librte_vhost's vring base after
  // a reconnect). Guest kicks start disabled: the datapath polls.
  bool attach(const SplitRingAddrs& addrs, uint16_t last_avail_idx, uint16_t last_used_idx,
              bool event_idx);
  void detach() {
    addrs_ = SplitRingAddrs{};
    log_ = nullptr;
    owed_ = false;    // nothing to read any more
    probe_.start(0);  // nothing to measure: a packed session next must not show this one's
  }
  // Live migration: every used-ring write from now on is reported to `log` (nullptr: none).
  void set_dirty_log(DirtyLog* log) { log_ = log; }
  bool attached() const { return addrs_.desc != nullptr; }

  uint16_t size() const { return addrs_.size; }
  uint16_t last_avail_idx() const { return last_avail_; }
  uint16_t last_used_idx() const { return last_used_; }

  // A guest that claims more posted entries than the ring holds has corrupted its ring: like
  // QEMU's "virtio: queue broken", the ring is then not served again until it is re-attached.
  bool broken() const { return broken_; }

  // Entries the guest posted that we have not consumed; 0 (and broken) on a corrupt avail index.
  // Entries read after this call are ordered after the index read. While the index as last loaded
  // says more than `enough` remain, that count is the answer, without a load: the guest writes
  // the index's line with every burst it posts, so each load of it is a transfer from the
  // guest's cache and makes the guest's next store take the line back (docs/architecture.md,
  // "The avail index loaded only when needed"). The placement probe's timed loads stay.
  uint16_t avail_count(uint16_t enough = UINT16_MAX) {
    if (broken_) return 0;
    const bool timed = probe_.due();
    const uint16_t known = static_cast<uint16_t>(seen_avail_ - last_avail_);
    if (!timed && known > enough && known <= addrs_.size) return known;
    const uint16_t avail_idx = timed ? probe_.timed_load(&addrs_.avail->idx, seen_avail_)
                                     : __atomic_load_n(&addrs_.avail->idx, __ATOMIC_ACQUIRE);
    seen_avail_ = avail_idx;
    const uint16_t count = static_cast<uint16_t>(avail_idx - last_avail_);
    if (count > addrs_.size) {
      broken_ = true;
      return 0;
    }
    return count;
  }
  // The head of the i-th entry not yet consumed; unchecked guest data, the chain reader checks it.
  uint16_t avail_head(uint16_t i) const {
    return __atomic_load_n(&addrs_.avail->ring[(last_avail_ + i) & mask_], __ATOMIC_RELAXED);
  }
  void consume(uint16_t count) { last_avail_ = static_cast<uint16_t>(last_avail_ + count); }

  // Cache hints, for lines the guest wrote last: the descriptor an avail entry points to
  // (unchecked: a prefetch of an out-of-range slot is harmless but skipped, as the address would be
  // outside the table).
  void prefetch_desc(uint16_t head) const {
    if (head < addrs_.size) prefetch_line(&addrs_.desc[head]);
  }
  // The descriptors of the next `count` entries, all at once: their cache misses then overlap
  // instead of each packet waiting for its own.
  void prefetch_descs(uint16_t count) const {
    for (uint16_t i = 0; i < count; ++i) prefetch_desc(avail_head(i));
  }

  // Giving lines back (line_release.h): descriptor lines by `descs`, and (guest TX rings) the
  // heads of the packets copied out of the guest's buffers by `buffers`; for kAuto with the
  // placement probed on our avail index at `tsc_hz`, or taken from `placement_from` (a guest RX
  // ring: its queue pair's TX ring's, which the guest's every transmit burst writes). Off where
  // the CPU cannot.
  void set_line_release(LineRelease descs, uint64_t tsc_hz,
                        const PlacementProbe* placement_from = nullptr,
                        LineRelease buffers = LineRelease::kOff);
  LineRelease line_release() const { return line_release_; }
  LineRelease buffer_release() const { return buffer_release_; }
  const PlacementProbe& placement() const { return probe_; }
  // Whether a burst gives its descriptor lines back: kAuto while the guest is far, whoever is
  // the bottleneck (a line that went to memory is fetched sooner than one in a far cache, by the
  // guest and by us next lap; gating on bursts that emptied the ring kept a far PVP or VM-to-VM
  // in a slow state where no burst did: docs/architecture.md, "Descriptor lines given back").
  bool releases_lines() const {
    return line_release_ == LineRelease::kOn ||
           (line_release_ == LineRelease::kAuto && guest_far());
  }
  // The same for the heads of the packets copied out of the guest's TX buffers; kAuto also needs
  // `guest_sends_own` (sender_gate.h).
  bool releases_buffer_lines(bool waited_on_guest, bool guest_sends_own) const {
    return (buffer_release_ != LineRelease::kAuto || guest_sends_own) &&
           releases(buffer_release_, waited_on_guest);
  }
  // Gives back the table lines of the descriptors `heads` name (each line once when heads that
  // share it come together; heads outside the table are skipped). Returns the lines given back.
  uint16_t release_descs(const uint16_t* heads, uint16_t count) const;

  // Stages a used entry; the guest sees it after publish_used(). Entries collect in a local shadow
  // copied to the ring together, never more than the ring holds at once (docs/architecture.md,
  // "Dequeue (guest TX)"; docs/security.md).
  void put_used(uint16_t id, uint32_t len) {
    if (shadow_count_ == shadow_limit_) flush_shadow();
    shadow_[shadow_count_++] = VringUsedElem{id, len};
    last_used_ = static_cast<uint16_t>(last_used_ + 1);
  }
  // The lines of the used ring that the next `count` used entries go to (at most a ring's worth),
  // each passed to `visit` once per piece: the entries up to the ring's end, then those from its
  // start (a ring of a line or less may see its one line twice).
  template <typename Visit>
  void for_each_used_line(uint16_t count, Visit visit) const {
    const UsedSpan span = used_span(last_used_, count < addrs_.size ? count : addrs_.size);
    visit_lines(&addrs_.used->ring[span.first], span.head, visit);
    visit_lines(&addrs_.used->ring[0], span.rest, visit);
  }
  // A burst's used entries are copied in at its end (flush_shadow), into lines the guest reads:
  // fetched for writing when the burst begins, their stores need not each wait for its line
  // behind the burst's other stores (VM-to-VM 64 B far, docs/benchmarks.md "Used-ring lines
  // fetched ahead").
  void prefetch_used(uint16_t count) const {
    for_each_used_line(count, [](const void* line) { prefetch_line_for_write(line); });
  }

  // Makes staged used entries visible (one index store per burst) and, when guest kicks are
  // enabled with EVENT_IDX, tells the guest how far we have read.
  void publish_used() {
    flush_shadow();
    if (kicks_enabled_ && event_idx_) write_avail_event(last_avail_);
    __atomic_store_n(&addrs_.used->idx, last_used_, __ATOMIC_RELEASE);
    if (log_ != nullptr) log_->used_written(offsetof(VringUsed, idx), sizeof(uint16_t));
  }

  // Whether the guest asked to be interrupted for the used entries published since the last call
  // that returned true or false: kVringAvailFNoInterrupt, or used_event with EVENT_IDX (16-bit
  // wrap-around as in the spec's vring_need_event). With a recheck interval set and without
  // EVENT_IDX, a guest that said it wants no interrupts is taken at its word for that long
  // before the flag is read again: the decision is then owed (below).
  bool guest_wants_interrupt();

  // Interrupt rechecks (docs/architecture.md, "Interrupt rechecks"): each decision above costs a
  // full fence, which waits for the burst's stores to lines the guest holds, and a load of the
  // line the guest writes its avail index to, whose next store then waits for our copy to go.
  // A polling guest never changes its answer, so for `cycles` of `clock` after a read that said
  // "no interrupts", decisions answer the same without reading. 0: read every time. `clock` may
  // lag the TSC (a poll loop's last reading: the answer then stands that much longer) and may
  // differ between threads: a reading below read_at_ counts as the interval passed.
  using Clock = uint64_t (*)();
  void set_interrupt_recheck(uint64_t cycles, Clock clock);
  // A decision was answered without reading the flag, and is not settled yet.
  bool interrupt_check_owed() const { return owed_; }
  // Reads the flag for an owed decision once its interval has passed (or at once with `now`):
  // whether the guest wants an interrupt. The owner calls it when it would otherwise leave the
  // ring alone: a poll that publishes nothing, a flush between bursts, before it sleeps.
  bool settle_interrupt_check(bool now);

  // Guest -> device notifications (kicks). Disabled while polling; enable before sleeping, then
  // call avail_count() once more, since the guest may have posted before it saw the change.
  void set_kicks_enabled(bool enabled);
  bool event_idx() const { return event_idx_; }

 private:
  void write_avail_event(uint16_t value) {
    // The u16 right after the used ring's entries.
    auto* avail_event =
        reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(addrs_.used) + sizeof(VringUsed) +
                                    sizeof(VringUsedElem) * addrs_.size);
    __atomic_store_n(avail_event, value, __ATOMIC_RELAXED);
    if (log_ != nullptr) log_->used_written(avail_event_offset(), sizeof(uint16_t));
  }
  uint64_t avail_event_offset() const {
    return sizeof(VringUsed) + sizeof(VringUsedElem) * uint64_t{addrs_.size};
  }

  static constexpr uint16_t kShadowSize = 64;

  // Where `count` (at most the ring's size) used entries from index `idx` on lie in the ring:
  // `head` of them from slot `first` up to the ring's end, the `rest` from slot 0.
  struct UsedSpan {
    uint16_t first;
    uint16_t head;
    uint16_t rest;
  };
  UsedSpan used_span(uint16_t idx, uint16_t count) const {
    const uint16_t first = idx & mask_;
    const uint16_t until_end = static_cast<uint16_t>(addrs_.size - first);
    const uint16_t head = count < until_end ? count : until_end;
    return UsedSpan{first, head, static_cast<uint16_t>(count - head)};
  }

  template <typename Visit>
  static void visit_lines(const VringUsedElem* from, uint16_t count, Visit& visit) {
    if (count == 0) return;
    const uintptr_t end = reinterpret_cast<uintptr_t>(from + count);
    for (uintptr_t line = reinterpret_cast<uintptr_t>(from) & ~uintptr_t{kCacheLine - 1};
         line < end; line += kCacheLine)
      visit(reinterpret_cast<const void*>(line));
  }

  void flush_shadow();

  SplitRingAddrs addrs_{};
  DirtyLog* log_ = nullptr;
  uint16_t shadow_count_ = 0;
  uint16_t shadow_limit_ = 0;  // min(kShadowSize, ring size)
  VringUsedElem shadow_[kShadowSize];
  uint16_t mask_ = 0;
  uint16_t last_avail_ = 0;
  uint16_t seen_avail_ = 0;  // the avail index as our latest load read it
  uint16_t last_used_ = 0;
  uint16_t signalled_used_ = 0;
  bool signalled_used_valid_ = false;
  bool event_idx_ = false;
  bool kicks_enabled_ = false;
  bool broken_ = false;
  // Interrupt rechecks: the flag as last read, when (clock_) it last read "no interrupts", and
  // whether a decision stood on that since.
  bool guest_suppressed_ = false;
  bool owed_ = false;
  uint64_t read_at_ = 0;
  uint64_t recheck_cycles_ = 0;
  Clock clock_ = nullptr;
  bool read_suppression_flag();
  bool guest_far() const { return (placement_from_ != nullptr ? placement_from_ : &probe_)->far(); }
  bool releases(LineRelease mode, bool waited_on_guest) const {
    return mode == LineRelease::kOn ||
           (mode == LineRelease::kAuto && waited_on_guest && guest_far());
  }

  LineRelease line_release_ = LineRelease::kOff;
  LineRelease buffer_release_ = LineRelease::kOff;
  PlacementProbe probe_;
  const PlacementProbe* placement_from_ = nullptr;  // whose far() kAuto follows, if not probe_
};

}  // namespace vqs
