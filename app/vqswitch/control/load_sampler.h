// SPDX-License-Identifier: BSD-3-Clause
// Each lcore's and each rx queue's busy cycles and packets over the last complete interval, from
// snapshots the control thread takes of the lcores' counters (as OVS's pmd-rxq-show reports a
// queue's share of its PMD thread over recent intervals). The lcores only count.
#pragma once

#include <cstdint>
#include <vector>

#include "core/switch.h"

namespace vqs::app {

class LoadSampler {
 public:
  static constexpr uint64_t kIntervalMs = 5000;

  struct Load {
    uint64_t busy_cycles = 0;
    uint64_t idle_cycles = 0;  // lcores only
    uint64_t packets = 0;
    uint64_t sleeps = 0;  // lcores only
  };

  explicit LoadSampler(const Switch& sw) : switch_(sw) {}

  // Takes a snapshot once kIntervalMs has passed since the last one.
  void sample(uint64_t now_ms);
  // Over the last complete interval; zeros before the first one completes.
  Load lcore(size_t lcore_index) const;
  // `slot` polled by that lcore; zeros when it was not there at both ends of the interval.
  Load queue(size_t lcore_index, const RxSlot& slot) const;
  // Length of that interval in seconds; 0 before the first one completes.
  double interval_s() const;

 private:
  struct QueueSample {
    const Port* port;
    uint16_t queue;
    Load load;
  };
  struct Snapshot {
    uint64_t ms = 0;
    std::vector<Load> lcores;
    std::vector<std::vector<QueueSample>> queues;  // by lcore
  };
  Snapshot take(uint64_t now_ms) const;
  static Load difference(const Load& now, const Load& before);

  const Switch& switch_;
  Snapshot previous_;
  Snapshot last_;
  int snapshots_ = 0;
};

}  // namespace vqs::app
