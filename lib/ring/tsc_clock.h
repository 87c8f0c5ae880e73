// SPDX-License-Identifier: BSD-3-Clause
// The CPU's time stamp counter, read without EAL for the ring library's few timed decisions (a
// burst's, never a packet's). Unfenced: a decision that waits microseconds need not order it.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace vqs {

#if defined(__x86_64__)
constexpr bool kTscClock = true;
inline uint64_t tsc_clock() { return __rdtsc(); }
#else
constexpr bool kTscClock = false;  // timed decisions are then off
inline uint64_t tsc_clock() { return 0; }
#endif

}  // namespace vqs
