// Per-queue counters, written only by the lcore that owns the queue and summed when read.
#pragma once

#include <cstdint>

namespace vqs {

// Why a packet was lost. Every drop in the datapath is counted under exactly one reason.
enum class DropReason : uint8_t {
  kInvalidDescriptor,  // guest chain failed validation; it was consumed with used.len = 0
  kNoGuestBuffer,      // guest RX ring empty (counted by the caller that gives up on the packet)
  kTooLarge,           // larger than the guest's buffers / our frame limit, or needs an offload
                       // the guest did not negotiate
  kCount,
};
constexpr int kDropReasonCount = static_cast<int>(DropReason::kCount);

const char* drop_reason_name(DropReason reason);

struct alignas(64) QueueStats {
  uint64_t packets = 0;
  uint64_t bytes = 0;
  uint64_t drops[kDropReasonCount] = {};
  // mbuf pool empty during guest TX: not a drop, the packets stay in the guest's ring.
  uint64_t mbuf_alloc_failures = 0;
  uint64_t guest_notifications = 0;
  // Times the guest corrupted the ring (avail index ahead by more than the ring size); the queue
  // is then not served until it is restarted.
  uint64_t ring_broken = 0;

  void count_drop(DropReason reason, uint64_t n = 1) { drops[static_cast<int>(reason)] += n; }
  uint64_t dropped(DropReason reason) const { return drops[static_cast<int>(reason)]; }
};

}  // namespace vqs
