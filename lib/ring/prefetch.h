// SPDX-License-Identifier: BSD-3-Clause
// A cache hint the compiler keeps. GCC 12 deletes a loop whose body is a conditional
// __builtin_prefetch (it has no side effects), which silently removed every descriptor and buffer
// prefetch of a burst; an asm volatile, as DPDK's rte_prefetch0, cannot be dropped. Here rather
// than rte_prefetch.h: the ring library has no DPDK dependency.
#pragma once

namespace vqs {

constexpr unsigned kCacheLine = 64;  // the line size of x86-64 and most arm64 servers

inline void prefetch_line(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const volatile char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pldl1keep, %0" : : "Q"(*static_cast<const volatile char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// For a line about to be written: fetched for ownership, so that the store does not wait for a
// request of its own (misses of a burst overlap instead of filling the store buffer in turn).
inline void prefetch_line_for_write(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const volatile char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pstl1keep, %0" : : "Q"(*static_cast<const volatile char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

}  // namespace vqs
