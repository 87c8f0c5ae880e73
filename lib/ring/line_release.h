// SPDX-License-Identifier: BSD-3-Clause
// Giving a guest's descriptor lines back once we have read them. A line we read stays shared in
// our cache, so the guest's next write to it must first invalidate our copy. When the two CPUs
// share no cache that is a round trip between dies (~220 ns on the machines measured), and the
// guest's stores wait for those in turn, one per line of four descriptors: half of what a far
// guest spends a packet (docs/benchmarks.md, "Descriptor lines given back"). CLFLUSHOPT writes
// the line back and drops it from every cache, so that the guest's write fetches it from memory
// without waiting for us. It costs our CPU ~70 cycles a line and moves a line that two CPUs
// sharing a cache would have found close by to memory: SplitRing gives lines back only when
// asked to, or when the guest is far (LineRelease::kAuto). No EAL here.
#pragma once

#include <cstdint>

namespace vqs {

enum class LineRelease : uint8_t {
  kAuto,  // when the guest's CPU shares no cache with ours (descriptor lines: desc_release);
          // guest TX packet heads (buffer_release) also need a burst that waited on the guest and
          // a guest that sends its own frames (sender_gate.h)
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

// Guest TX: the bytes of a packet's head whose lines buffer_release gives back once copied, the
// headers any guest writes again in that buffer (a payload may be left as it was, as testpmd's
// txonly leaves it, and 1500 B would cost ~24 flushes a packet).
constexpr uint32_t kReleasedPacketHead = 64;

// Gives back the lines of the first kReleasedPacketHead bytes of the `len` at `packet`. Returns
// the lines given back. Only after line_release_supported().
inline uint32_t release_packet_head(const uint8_t* packet, uint32_t len) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(packet);
  const uintptr_t end = start + (len < kReleasedPacketHead ? len : kReleasedPacketHead);
  uint32_t released = 0;
  for (uintptr_t line = start & ~uintptr_t{63}; line < end; line += 64, ++released)
    release_line(reinterpret_cast<const void*>(line));
  return released;
}

}  // namespace vqs
