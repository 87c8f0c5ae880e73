// SPDX-License-Identifier: BSD-3-Clause
// Giving a guest's descriptor lines back once we have read them. A line we read stays shared in
// our cache, so the guest's next write to it must first invalidate our copy. When the two CPUs
// share no cache that is a round trip between dies (~220 ns on the machines measured), and the
// guest's stores wait for those in turn, one per line of four descriptors: half of what a far
// guest spends a packet (docs/benchmarks.md, "Descriptor lines given back"). CLFLUSHOPT writes
// the line back and drops it from every cache, so that the guest's write fetches it from memory
// without waiting for us. It costs our CPU ~70 cycles a line and moves a line that two CPUs
// sharing a cache would have found close by to memory: SplitRing gives lines back only when
// asked to, or when the guest is far and the bottleneck (LineRelease::kAuto). No EAL here.
#pragma once

#include <cstdint>

namespace vqs {

enum class LineRelease : uint8_t {
  kAuto,  // when the guest's CPU shares no cache with ours and a burst waited on the guest
  kOn,    // after every burst
  kOff,
};

// Whether this CPU can give lines back (x86-64 with CLFLUSHOPT); checked once.
bool line_release_supported();

// Writes back and evicts the line holding `p` from every cache (no ordering: CLFLUSHOPT). Only
// after line_release_supported().
inline void release_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("clflushopt %0" : : "m"(*static_cast<const volatile char*>(p)));
#else
  (void)p;
#endif
}

}  // namespace vqs
