// SPDX-License-Identifier: BSD-3-Clause
// One virtio-net virtqueue as the datapath serves it: its ring (split, or packed with
// VIRTIO_F_RING_PACKED, chosen at start), the guest memory it points into, the negotiated
// features, counters and per-queue scratch space. Owned by one lcore at a
// time; the control plane calls start()/stop() only while that lcore is kept away (quiesced).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "ring/desc_chain.h"
#include "ring/dirty_log.h"
#include "ring/guest_memory.h"
#include "ring/guest_notifier.h"
#include "ring/io_vec.h"
#include "ring/line_release.h"
#include "ring/net_features.h"
#include "ring/notify_policy.h"
#include "ring/packed_batch.h"
#include "ring/packed_ring.h"
#include "ring/queue_stats.h"
#include "ring/sender_gate.h"
#include "ring/split_ring.h"
#include "ring/tsc_clock.h"

namespace vqs {

// Largest packet (after the virtio-net header) we take from or give to a guest: a 64 KiB IP
// packet behind an Ethernet header with one VLAN tag.
constexpr uint32_t kMaxFrameLen = 65535 + 14 + 4;

// What one burst consumed, for per-queue packet and byte weights.
struct BurstResult {
  uint16_t packets = 0;
  // Guest TX zero-copy: the queue's in-flight limit had packets of this burst copied (its lent
  // buffers are held somewhere; a NIC that frees lazily may be asked to let them go).
  bool lending_full = false;
  uint32_t bytes = 0;
};

class VirtQueue {
 public:
  struct Setup {
    SplitRingAddrs addrs;          // split rings
    PackedRingAddrs packed_addrs;  // with kFRingPacked in `features`
    // Where the device resumes: split, the indices; packed, librte_vhost's vring bases (the
    // slot, the wrap counter in bit 15).
    uint16_t last_avail_idx = 0;
    uint16_t last_used_idx = 0;
    // Packed: the bases are the ones this process handed back when the ring last stopped, so
    // they are not checked against the ring (PackedRing::resume_position).
    bool base_is_ours = false;
    uint64_t features = 0;
    const GuestMemory* memory = nullptr;
    // Packed rings under live migration: the table that holds the ring's own host addresses,
    // to log its writes by guest-physical address (nullptr: `memory`).
    const GuestMemory* ring_memory = nullptr;
    int callfd = -1;  // eventfd that interrupts the guest; -1: the guest polls
    // Guest RX queues: coalescing and refill threshold for complete_rx_burst(). Unset: notify
    // after every burst the guest wants it, no threshold.
    std::optional<NotifyPolicy> notify;
    // Converts notify->coalesce_usecs, interrupt_recheck_us and the placement probe's thresholds
    // to TSC cycles.
    uint64_t tsc_hz = 0;
    // Split rings without EVENT_IDX: how long a guest's "no interrupts" answer stands before it
    // is read again (SplitRing::set_interrupt_recheck); 0: after every burst. Only for an owner
    // that calls flush_notifications() between bursts and set_kicks_enabled(true) before it
    // sleeps (interrupt_check_owed below). `clock`: nullptr for the TSC read at each decision
    // (the switch gives its lcores' last reading; tests their own).
    uint32_t interrupt_recheck_us = 0;
    SplitRing::Clock clock = nullptr;
    // Split rings: when descriptor lines go back to the guest once read (line_release.h), and
    // for kAuto whose placement probe says where the guest is (nullptr: this ring's own).
    LineRelease line_release = LineRelease::kAuto;
    const PlacementProbe* placement_from = nullptr;
    // Guest TX split rings: when the heads of packets copied out go back (line_release.h), and
    // for kAuto the counters and the ForwardSample of the queue pair's RX ring, which tell a
    // forwarding guest apart (sender_gate.h; nullptr: the guest only sends).
    LineRelease buffer_release = LineRelease::kOff;
    const QueueStats* pair_rx_stats = nullptr;
    ForwardSample* pair_rx_sample = nullptr;
    // Live migration: while the frontend logs dirty pages, where our writes are reported (the
    // used ring, and receive buffers through log_written()). nullptr: not logging.
    DirtyLog* dirty_log = nullptr;
  };

  // False (and not ready) when the ring addresses or size are unusable.
  bool start(const Setup& setup);
  void stop();
  bool ready() const {
    return packed_ ? packed_ring_.attached() : ring_.attached() && !ring_.broken();
  }

  bool attached() const { return packed_ ? packed_ring_.attached() : ring_.attached(); }
  // The ring format, fixed from start() to stop(): bursts choose their code by it once.
  bool packed() const { return packed_; }
  // Where the guest's CPU is, as this (split) ring's writes of its avail index say.
  const PlacementProbe& placement() const { return ring_.placement(); }
  SplitRing& ring() { return ring_; }
  const SplitRing& ring() const { return ring_; }
  const DescChainReader& chain_reader() const { return reader_; }
  PackedRing& packed_ring() { return packed_ring_; }
  const PackedRing& packed_ring() const { return packed_ring_; }
  PackedBatch& packed_batch() { return *batch_; }

  // Packed: whether start() found the frontend's base stale and resumed where the ring's
  // descriptors say (PackedRing::resume_position).
  bool resumed_from_ring() const { return resumed_from_ring_; }
  // Where the device stands, as librte_vhost's vring base encodes it (packed: the wrap counters
  // in bit 15), for a restart to resume from.
  uint16_t avail_base() const {
    return packed_ ? packed_ring_.next_avail().base() : ring_.last_avail_idx();
  }
  uint16_t used_base() const {
    return packed_ ? packed_ring_.next_used().base() : ring_.last_used_idx();
  }
  // Moves with every used entry staged: a burst compares it to tell whether it used anything.
  uint16_t used_token() const {
    return packed_ ? packed_ring_.used_token() : ring_.last_used_idx();
  }
  // Guest kicks (see SplitRing::set_kicks_enabled), for either format.
  // Enabling them is what an owner does before it sleeps: an owed interrupt decision is settled
  // first.
  void set_kicks_enabled(bool enabled) {
    if (packed_) {
      packed_ring_.set_kicks_enabled(enabled);
      return;
    }
    if (enabled && settle_owed(true)) interrupt_guest();
    ring_.set_kicks_enabled(enabled);
  }
  const NetFeatures& features() const { return features_; }
  QueueStats& stats() { return stats_; }
  const QueueStats& stats() const { return stats_; }
  // Guest TX: whether the guest sends frames of its own (buffer_release auto's second gate),
  // renewed by each burst's update().
  SenderGate& sender_gate() { return sender_gate_; }
  const SenderGate& sender_gate() const { return sender_gate_; }
  // Guest RX: a frame written now and then, for the queue pair's sender gate to look out for.
  ForwardSample& forward_sample() { return forward_sample_; }
  IoVecList& iov_scratch() { return iov_; }

  // Live migration: the log our writes go to, nullptr while the frontend does not log. Read once
  // per burst; a burst that writes guest buffers reports each through log_written().
  DirtyLog* dirty_log() const { return log_; }
  // Reports `len` bytes written at `host` (inside one buffer of a chain, so inside one region).
  void log_written(DirtyLog* log, const uint8_t* host, uint64_t len) const {
    uint64_t gpa = 0;
    if (memory_->guest_phys_of(host, &gpa)) log->guest_written(gpa, len);
  }
  // The same for the first `len` bytes of a scatter list.
  void log_written(DirtyLog* log, const IoVecList& iov, uint64_t len) const {
    for (uint32_t i = 0; i < iov.count() && len > 0; ++i) {
      const uint64_t part = iov[i].len < len ? iov[i].len : len;
      log_written(log, iov[i].base, part);
      len -= part;
    }
  }

  // Chains the guest posted and we have not consumed (RX buffers or TX packets): a packed ring is
  // counted only up to `limit`; a split ring's count is exact up to `limit`, and above it may be
  // the count its index said when last loaded (SplitRing::avail_count). Counts the moment a
  // corrupt split ring is found.
  uint16_t avail_count(uint16_t limit = UINT16_MAX) {
    if (packed_) return packed_ring_.count_available(limit);
    const uint16_t n = ring_.avail_count(limit);
    if (n == 0 && ring_.broken() && !broken_counted_) {
      ++stats_.ring_broken;
      broken_counted_ = true;
    }
    return n;
  }

  // Ends a guest TX burst: makes the used entries visible and interrupts the guest if it asked
  // for it. `used_before`: used_token() when the burst began.
  void complete_burst(uint16_t used_before);

  // Whether fewer than `threshold` receive buffers are posted (refill thresholds): a split
  // ring's index, or a packed ring's slot `threshold` - 1 ahead (one load either way).
  bool posted_below(uint32_t threshold) {
    if (packed_) return !packed_ring_.slots_available(threshold);
    return avail_count() < threshold;
  }

  // Ends a guest RX burst: publishes, then applies the notify policy. `delivered`: packets
  // written; `remaining`: posted buffers left after the burst (a snapshot: re-read when it looks
  // low); `now_tsc`: read only when notify_timed().
  void complete_rx_burst(uint16_t used_before, uint32_t delivered, uint16_t remaining,
                         uint64_t now_tsc) {
    if (!notifier_.coalescing() && notifier_.refill_threshold() == 0) {
      complete_burst(used_before);
      return;
    }
    apply_notify_policy(used_before, delivered, remaining, now_tsc);
  }

  // Sends a deferred (coalesced) notification whose time has come. The owner of the queue calls
  // it between bursts, cheaply and often (every lcore loop iteration, or each tx burst), so that
  // a deferred notification is not stranded when traffic stops. Inside the queue's gate.
  // An owed interrupt decision (Setup::interrupt_recheck_us) is settled here once due, at once
  // with kFlushNow.
  void flush_notifications(uint64_t now_tsc) {
    const bool flushed = notifier_.pending() && notifier_.flush(now_tsc);
    const bool settled = settle_owed(now_tsc == GuestNotifier::kFlushNow);
    if (flushed || settled) interrupt_guest();
  }
  // Whether a flush could send anything (a caller may skip reading the TSC otherwise).
  bool notification_pending() const { return notifier_.pending() || interrupt_check_owed(); }
  // An interrupt decision was answered without reading the guest's flag and is not settled.
  bool interrupt_check_owed() const { return !packed_ && ring_.interrupt_check_owed(); }
  // Whether bursts and flushes need the current TSC (coalesce_usecs set).
  bool notify_timed() const { return notifier_.timed(); }
  // The refill threshold in effect (0: none), resolved for the ring size at start().
  uint32_t refill_threshold() const { return notifier_.refill_threshold(); }

 private:
  void apply_notify_policy(uint16_t used_before, uint32_t delivered, uint16_t remaining,
                           uint64_t now_tsc);
  void interrupt_guest();
  // Publishes what was staged since `used_before`; whether the guest asked to be interrupted.
  // A burst that publishes nothing settles an owed decision that is due.
  bool publish_used(uint16_t used_before) {
    if (used_token() == used_before) return settle_owed(false);
    if (packed_) {
      packed_ring_.publish_used();
      return packed_ring_.guest_wants_interrupt();
    }
    const bool owed = ring_.interrupt_check_owed();
    ring_.publish_used();
    const bool wanted = ring_.guest_wants_interrupt();
    if (wanted && owed) ++stats_.guest_notifications_late;  // this decision settled it
    return wanted;
  }
  // Settles an owed interrupt decision once due (at once with `now`): whether the guest asked
  // for the interrupt it was owed, counted late.
  bool settle_owed(bool now) {
    if (packed_ || !ring_.settle_interrupt_check(now)) return false;
    ++stats_.guest_notifications_late;
    return true;
  }

  bool packed_ = false;
  bool resumed_from_ring_ = false;
  SplitRing ring_;
  DescChainReader reader_;
  PackedRing packed_ring_;
  std::unique_ptr<PackedBatch> batch_;  // allocated when a packed ring first starts
  const GuestMemory* memory_ = nullptr;
  DirtyLog* log_ = nullptr;
  NetFeatures features_;
  int callfd_ = -1;
  bool broken_counted_ = false;
  GuestNotifier notifier_;
  QueueStats stats_;
  SenderGate sender_gate_;
  ForwardSample forward_sample_;
  IoVecList iov_;
};

}  // namespace vqs
