// SPDX-License-Identifier: BSD-3-Clause
// How a guest TX queue lends its packets (dequeue zero-copy): no EAL, so that the options of a
// vhost port (vhost/vhost_port_options.h) take their default from here.
#pragma once

#include <cstdint>

namespace vqs {

class ZeroCopyTracker;

// Guest TX packets of at least this many bytes may be lent instead of copied (as Linux vhost-net's
// GOODCOPY_LEN): below it a copy costs less than the bookkeeping.
constexpr uint32_t kDefaultZeroCopyMinLen = 256;

// How a guest TX queue lends its packets (dequeue zero-copy). The default copies every packet.
struct LendPolicy {
  // Lends packets of at least min_len bytes through this tracker (started by the owner for the
  // ring's size); nullptr: always copy. Ignored on an IN_ORDER ring: lent chains return out of
  // order (IN_ORDER is not offered with zero-copy).
  ZeroCopyTracker* tracker = nullptr;
  uint32_t min_len = kDefaultZeroCopyMinLen;
  // At the in-flight limit: copy (true), or leave the packet in the ring until a lent chain
  // comes back (false; benchmarks only: the head-of-line blocking the copy prevents).
  bool fallback = true;
};

}  // namespace vqs
