// SPDX-License-Identifier: BSD-3-Clause
// The TSC as this thread's lcore loop last read it: the clock of its guest rings' interrupt
// rechecks (VhostDeviceOptions::decision_clock). The loop reads the TSC once a pass and after
// each visit that took packets; each ring's decision read it again, an rdtsc of 25-40 cycles,
// several a pass. Behind the TSC by at most one pass (an owed decision then stands that much
// longer). A thread without a loop (librte_vhost's, or the control thread returning lent chains
// at a ring's stop) reads the TSC.
#pragma once

#include <cstdint>

#include "ring/tsc_clock.h"

namespace vqs::app {

constinit inline thread_local uint64_t loop_tsc = 0;

inline uint64_t loop_clock() { return loop_tsc != 0 ? loop_tsc : tsc_clock(); }

}  // namespace vqs::app
