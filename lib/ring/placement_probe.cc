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
  // Field by field: far_ may be read meanwhile by the lcore of the queue pair's other ring, and
  // the rest by monitoring (reading()).
  __atomic_store_n(&enabled_, false, __ATOMIC_RELAXED);
  __atomic_store_n(&far_, false, __ATOMIC_RELAXED);
  __atomic_store_n(&samples_, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&average_, 0, __ATOMIC_RELAXED);
  countdown_ = kSampleEvery;
  near_cycles_ = far_cycles_ = 0;
#if defined(__x86_64__)
  if (tsc_hz == 0) return;
  __atomic_store_n(&tsc_hz_, tsc_hz, __ATOMIC_RELAXED);
  near_cycles_ = tsc_hz * kNearNs / 1000000000;
  far_cycles_ = tsc_hz * kFarNs / 1000000000;
  __atomic_store_n(&enabled_, true, __ATOMIC_RELAXED);
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
  uint64_t average = average_;
  average = samples_ == 0 ? cycles : average - (average >> kWeightShift) + (cycles >> kWeightShift);
  __atomic_store_n(&average_, average, __ATOMIC_RELAXED);
  __atomic_store_n(&samples_, samples_ + 1, __ATOMIC_RELAXED);
  if (average > far_cycles_) {
    __atomic_store_n(&far_, true, __ATOMIC_RELAXED);
  } else if (average < near_cycles_) {
    __atomic_store_n(&far_, false, __ATOMIC_RELAXED);
  }
}

PlacementProbe::Reading PlacementProbe::reading() const {
  Reading r;
  const uint64_t hz = __atomic_load_n(&tsc_hz_, __ATOMIC_RELAXED);
  r.measured = enabled() && samples() != 0 && hz != 0;
  if (!r.measured) return r;
  r.far = far();
  r.line_ns = static_cast<uint32_t>(average_cycles() * 1000000000 / hz);
  return r;
}

}  // namespace vqs
