// SPDX-License-Identifier: BSD-3-Clause
// Whether the guest's CPU shares a cache with ours, from how long our load of a line the guest has
// just written takes. One load of a ring's avail index in kSampleEvery is timed, and counts only
// when the index changed since our previous load: the guest wrote the line, so the load had to
// fetch it from the guest's cache. Measured here, fences included: 90-160 ns (average ~120) when
// the two CPUs share no cache (a transfer between dies), 20-25 ns for a line in our own cache.
// The samples' running average decides, with hysteresis between kNearNs and kFarNs, since a
// VM's vCPUs may move between the two placements. No EAL here.
#pragma once

#include <cstdint>

namespace vqs {

class PlacementProbe {
 public:
  static constexpr uint32_t kSampleEvery = 64;  // polls a timed load (a few cycles a poll)
  static constexpr uint32_t kNearNs = 75;       // average below: near
  static constexpr uint32_t kFarNs = 85;        // average above: far

  // Samples from now on, reading the TSC at `tsc_hz`; 0 (or a CPU without the timing this
  // needs): never samples, never far. Starts near, with no samples.
  void start(uint64_t tsc_hz);
  bool enabled() const { return __atomic_load_n(&enabled_, __ATOMIC_RELAXED); }

  // Per poll: whether this poll's load is the timed one.
  bool due() {
    if (!enabled() || --countdown_ != 0) return false;
    countdown_ = kSampleEvery;
    return true;
  }
  // The timed load of `*idx`, which our previous load read as `previous`.
  uint16_t timed_load(const uint16_t* idx, uint16_t previous);
  // One crossing's load, in TSC cycles (the fences' own cost included).
  void add_sample(uint64_t cycles);

  // Read by the lcore of the queue pair's other ring as well (SplitRing::set_line_release).
  bool far() const { return __atomic_load_n(&far_, __ATOMIC_RELAXED); }
  uint64_t average_cycles() const { return __atomic_load_n(&average_, __ATOMIC_RELAXED); }
  uint64_t samples() const { return __atomic_load_n(&samples_, __ATOMIC_RELAXED); }

  // What the probe says, for monitoring from any thread (a burst old at worst).
  struct Reading {
    bool measured = false;  // probing, with samples
    bool far = false;
    uint32_t line_ns = 0;  // the samples' running average
    // As monitoring shows it: "far" (no cache shared), "near" or "unmeasured".
    const char* name() const { return !measured ? "unmeasured" : far ? "far" : "near"; }
  };
  Reading reading() const;

 private:
  // A sample counts 1/2^kWeightShift: the average follows a move within ~20 samples.
  static constexpr unsigned kWeightShift = 3;

  bool enabled_ = false;
  bool far_ = false;
  uint64_t tsc_hz_ = 0;
  uint32_t countdown_ = kSampleEvery;
  uint64_t near_cycles_ = 0;
  uint64_t far_cycles_ = 0;
  uint64_t average_ = 0;
  uint64_t samples_ = 0;
};

}  // namespace vqs
