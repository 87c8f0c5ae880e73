// SPDX-License-Identifier: BSD-3-Clause
#include "ring/placement_probe.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace vqs {

namespace {

#if defined(__x86_64__)
// LFENCE on both sides: the TSC is read after everything before has completed, the load included,
// and before anything after starts.
inline uint64_t fenced_tsc() {
  _mm_lfence();
  const uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
#endif

}  // namespace

void PlacementProbe::start(uint64_t tsc_hz) {
  // Field by field: far_ may be read meanwhile by the lcore of the queue pair's other ring.
  enabled_ = false;
  __atomic_store_n(&far_, false, __ATOMIC_RELAXED);
  countdown_ = kSampleEvery;
  near_cycles_ = far_cycles_ = average_ = samples_ = 0;
#if defined(__x86_64__)
  if (tsc_hz == 0) return;
  enabled_ = true;
  near_cycles_ = tsc_hz * kNearNs / 1000000000;
  far_cycles_ = tsc_hz * kFarNs / 1000000000;
#else
  (void)tsc_hz;
#endif
}

uint16_t PlacementProbe::timed_load(const uint16_t* idx, uint16_t previous) {
#if defined(__x86_64__)
  const uint64_t before = fenced_tsc();
  const uint16_t value = __atomic_load_n(idx, __ATOMIC_ACQUIRE);
  const uint64_t after = fenced_tsc();
  if (value != previous) add_sample(after - before);
  return value;
#else
  (void)previous;
  return __atomic_load_n(idx, __ATOMIC_ACQUIRE);
#endif
}

void PlacementProbe::add_sample(uint64_t cycles) {
  // A sample an interrupt or a preemption stretched would drag the average for long.
  if (cycles > 4 * far_cycles_) cycles = 4 * far_cycles_;
  if (samples_ == 0) {
    average_ = cycles;
  } else {
    average_ = average_ - (average_ >> kWeightShift) + (cycles >> kWeightShift);
  }
  ++samples_;
  if (average_ > far_cycles_) {
    __atomic_store_n(&far_, true, __ATOMIC_RELAXED);
  } else if (average_ < near_cycles_) {
    __atomic_store_n(&far_, false, __ATOMIC_RELAXED);
  }
}

}  // namespace vqs
