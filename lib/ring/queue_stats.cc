// SPDX-License-Identifier: BSD-3-Clause
#include "ring/queue_stats.h"

namespace vqs {

const char* drop_reason_name(DropReason reason) {
  switch (reason) {
    case DropReason::kInvalidDescriptor:
      return "invalid_descriptor";
    case DropReason::kRunt:
      return "runt";
    case DropReason::kTooLarge:
      return "too_large";
    case DropReason::kBadOffloadRequest:
      return "bad_offload_request";
    case DropReason::kNoGuestBuffer:
      return "no_guest_buffer";
    case DropReason::kCount:
      break;
  }
  return "unknown";
}

const char* size_bucket_name(SizeBucket bucket) {
  switch (bucket) {
    case SizeBucket::kUndersize:
      return "undersize_packets";
    case SizeBucket::k64:
      return "size_64_packets";
    case SizeBucket::k65To127:
      return "size_65_127_packets";
    case SizeBucket::k128To255:
      return "size_128_255_packets";
    case SizeBucket::k256To511:
      return "size_256_511_packets";
    case SizeBucket::k512To1023:
      return "size_512_1023_packets";
    case SizeBucket::k1024To1518:
      return "size_1024_1518_packets";
    case SizeBucket::k1519AndUp:
      return "size_1519_max_packets";
    case SizeBucket::kCount:
      break;
  }
  return "unknown";
}

void QueueStats::add(const QueueStats& other) {
  for (const QueueCounter& c : kQueueCounters) this->*c.field += other.*c.field;
  for (int b = 0; b < kSizeBucketCount; ++b) sizes[b] += other.sizes[b];
  for (int r = 0; r < kDropReasonCount; ++r) drops[r] += other.drops[r];
}

}  // namespace vqs
