// SPDX-License-Identifier: BSD-3-Clause
// The end of a datapath harness's input: both queues stopped and every chain still lent reaped
// as the control plane does when a session ends; none may be left in flight.
#pragma once

#include "datapath/zero_copy_tracker.h"
#include "guarded_memory.h"
#include "ring/virtqueue.h"

namespace vqs::fuzz {

inline void stop_and_reap(VirtQueue& txq, VirtQueue& rxq, ZeroCopyTracker& tracker) {
  txq.stop();
  rxq.stop();
  tracker.orphan_lent();
  tracker.reap_orphans_only();
  VQS_FUZZ_CHECK(tracker.in_flight() == 0);
}

}  // namespace vqs::fuzz
