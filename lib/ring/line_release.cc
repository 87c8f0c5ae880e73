// SPDX-License-Identifier: BSD-3-Clause
#include "ring/line_release.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace vqs {

bool line_release_supported() {
#if defined(__x86_64__)
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID leaf 7, subleaf 0: EBX bit 23 is CLFLUSHOPT.
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
    return ((ebx >> 23) & 1) != 0;
  }();
  return supported;
#else
  return false;
#endif
}

}  // namespace vqs
