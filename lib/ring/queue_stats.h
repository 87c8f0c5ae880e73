// SPDX-License-Identifier: BSD-3-Clause
// Per-queue counters, written only by the lcore that owns the queue and summed when read.
#pragma once

#include <cstdint>

namespace vqs {

// Why a packet was lost. Every drop in the datapath is counted under exactly one reason.
enum class DropReason : uint8_t {
  kInvalidDescriptor,  // guest TX chain failed validation; consumed with used.len = 0
  kRunt,               // guest TX packet shorter than an Ethernet header (as Linux tun drops)
  kTooLarge,           // larger than the guest's buffers, our frame limit or the mbuf pool, or
                       // needs segmentation the guest did not negotiate
  kBadOffloadRequest,  // guest RX: mbuf asks for an offload its headers do not allow;
                       // guest TX: a GSO request not passed on (apply_guest_tx_offload)
  kNoGuestBuffer,      // guest RX ring empty (counted by the caller that gives up on the packet)
  kCount,
};
constexpr int kDropReasonCount = static_cast<int>(DropReason::kCount);

const char* drop_reason_name(DropReason reason);

// Packet-size buckets as RFC 2819 counts them, and as librte_vhost's per-queue stats do.
enum class SizeBucket : uint8_t {
  kUndersize,  // shorter than 64 bytes
  k64,
  k65To127,
  k128To255,
  k256To511,
  k512To1023,
  k1024To1518,
  k1519AndUp,
  kCount,
};
constexpr int kSizeBucketCount = static_cast<int>(SizeBucket::kCount);

const char* size_bucket_name(SizeBucket bucket);

inline SizeBucket size_bucket(uint32_t len) {
  if (len < 64) return SizeBucket::kUndersize;
  if (len == 64) return SizeBucket::k64;
  if (len > 1518) return SizeBucket::k1519AndUp;
  if (len >= 1024) return SizeBucket::k1024To1518;
  // 65..1023: one bucket per power of two, from the position of the highest set bit.
  return static_cast<SizeBucket>(31 - __builtin_clz(len) - 4);
}

struct alignas(64) QueueStats {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t sizes[kSizeBucketCount] = {};
  uint64_t multicast = 0;  // destination MAC multicast, broadcast excluded
  uint64_t broadcast = 0;
  uint64_t drops[kDropReasonCount] = {};
  // mbuf pool empty during guest TX: not a drop, the packets stay in the guest's ring.
  uint64_t mbuf_alloc_failures = 0;
  uint64_t guest_notifications = 0;  // interrupts sent (eventfd writes), whatever the reason
  // Guest RX with coalescing: bursts whose notification the guest wanted but that was deferred,
  // to be merged into a later one.
  uint64_t guest_notifications_coalesced = 0;
  // Of guest_notifications: sent only because the guest's posted buffers fell below the refill
  // threshold (despite its suppression, or before coalescing would have sent them).
  uint64_t guest_notifications_refill = 0;
  // Interrupt decisions owed under interrupt_recheck_us that found the guest asking for
  // interrupts: it was told up to the interval late (a spurious one at stop() is not counted).
  uint64_t guest_notifications_late = 0;
  // Guest RX chains that failed validation, consumed with used.len = 0: not packet drops (the
  // packet went on to the next chain), but the guest lost a buffer.
  uint64_t invalid_rx_chains = 0;
  // Guest RX bursts cut short by their descriptor budget: the posted chains asked for far more
  // descriptor reads than the packets could need (empty descriptors, tiny buffers); the rest of
  // the burst waits, as if the ring had run dry.
  uint64_t rx_descriptor_budget_bursts = 0;
  // Guest TX with zero-copy on: packets lent (attached, not copied), packets copied (shorter than
  // the minimum, not attachable, or no slot free), and of those copies, the ones forced by the
  // in-flight limit.
  uint64_t zero_copy_packets = 0;
  uint64_t zero_copy_copied = 0;
  uint64_t zero_copy_limit_copies = 0;
  // Bursts that stopped at the in-flight limit instead of copying (zero_copy_fallback off, a
  // benchmark setting).
  uint64_t zero_copy_limit_waits = 0;
  // Times the guest corrupted the ring (avail index ahead by more than the ring size); the queue
  // is then not served until it is restarted.
  uint64_t ring_broken = 0;
  // Descriptor-table lines given back to the guest once read, and guest TX packet-head lines
  // once copied (line_release.h).
  uint64_t desc_lines_released = 0;
  uint64_t buffer_lines_released = 0;

  void count_drop(DropReason reason, uint64_t n = 1) { drops[static_cast<int>(reason)] += n; }
  uint64_t dropped(DropReason reason) const { return drops[static_cast<int>(reason)]; }
  uint64_t total_drops() const {
    uint64_t sum = 0;
    for (uint64_t d : drops) sum += d;
    return sum;
  }
  // `frame`: the packet's first bytes (its destination MAC when len >= 6).
  void count_packet(uint32_t len, const uint8_t* frame) {
    ++packets;
    bytes += len;
    ++sizes[static_cast<int>(size_bucket(len))];
    if (len >= 6 && (frame[0] & 1) != 0) [[unlikely]] {
      if ((frame[0] & frame[1] & frame[2] & frame[3] & frame[4] & frame[5]) == 0xff)
        ++broadcast;
      else
        ++multicast;
    }
  }
  // Adds `other`'s counters (sums over queues).
  void add(const QueueStats& other);
};

// Every counter of QueueStats besides drops and sizes, under the name each report uses (the
// PMD's xstats, the switch's telemetry): librte_vhost's per-queue stats name where the meaning is
// the same, so tools that read net_vhost's read ours.
struct QueueCounter {
  const char* name;
  uint64_t QueueStats::*field;
};
inline constexpr QueueCounter kQueueCounters[] = {
    {"good_packets", &QueueStats::packets},
    {"good_bytes", &QueueStats::bytes},
    {"multicast_packets", &QueueStats::multicast},
    {"broadcast_packets", &QueueStats::broadcast},
    {"invalid_rx_chains", &QueueStats::invalid_rx_chains},
    {"rx_descriptor_budget_bursts", &QueueStats::rx_descriptor_budget_bursts},
    {"mbuf_alloc_failures", &QueueStats::mbuf_alloc_failures},
    {"guest_notifications", &QueueStats::guest_notifications},
    {"guest_notifications_coalesced", &QueueStats::guest_notifications_coalesced},
    {"guest_notifications_refill", &QueueStats::guest_notifications_refill},
    {"guest_notifications_late", &QueueStats::guest_notifications_late},
    {"ring_broken", &QueueStats::ring_broken},
    {"zerocopy_packets", &QueueStats::zero_copy_packets},
    {"zerocopy_copied", &QueueStats::zero_copy_copied},
    {"zerocopy_limit_copies", &QueueStats::zero_copy_limit_copies},
    {"zerocopy_limit_waits", &QueueStats::zero_copy_limit_waits},
    {"desc_lines_released", &QueueStats::desc_lines_released},
    {"buffer_lines_released", &QueueStats::buffer_lines_released},
};

}  // namespace vqs
