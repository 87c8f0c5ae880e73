// SPDX-License-Identifier: BSD-3-Clause
#include "ring/notify_policy.h"

namespace vqs {

uint32_t NotifyPolicy::refill_threshold_for(uint16_t ring_size) const {
  if (refill_threshold != 0) return refill_threshold;
  // At least 1, so that an empty ring still counts as low on the smallest rings.
  return ring_size / 2 > 0 ? ring_size / 2u : 1;
}

uint64_t NotifyPolicy::coalesce_cycles(uint64_t tsc_hz) const {
  if (coalesce_usecs == 0) return 0;
  const uint64_t cycles = coalesce_usecs * tsc_hz / 1000000;
  return cycles > 0 ? cycles : 1;
}

}  // namespace vqs
