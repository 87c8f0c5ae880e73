// SPDX-License-Identifier: BSD-3-Clause
// Statistics for people: a periodic one-line-per-port summary (rates and drops by reason) and the
// final counters printed at shutdown.
#pragma once

#include <cstdio>
#include <vector>

#include "core/switch.h"

namespace vqs::app {

class StatsReport {
 public:
  explicit StatsReport(const Switch& sw);
  // One line per port with the rates since the previous call.
  void print_rates(std::FILE* out);
  // Every counter of every port and lcore, for the end of a run.
  void print_totals(std::FILE* out) const;

 private:
  const Switch& switch_;
  void take_last();

  std::vector<PortTotals> last_;  // by port index
  uint64_t generation_ = 0;       // Switch::topology_generation() when last_ was taken
  uint64_t last_tsc_ = 0;
};

}  // namespace vqs::app
