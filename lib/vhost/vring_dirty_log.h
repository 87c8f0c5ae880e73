// SPDX-License-Identifier: BSD-3-Clause
// The dirty log of one vring during live migration: our datapath's writes marked in the log the
// frontend shares with librte_vhost (SET_LOG_BASE), through its public calls. They mark nothing
// unless VHOST_F_LOG_ALL is negotiated, and are bounded by the log's size; the device keeps us
// out of the datapath while the log is replaced (docs/architecture.md, "Live migration").
#pragma once

#include <rte_vhost.h>

#include <cstdint>

#include "ring/dirty_log.h"

namespace vqs {

class VringDirtyLog final : public DirtyLog {
 public:
  void bind(int vid, uint16_t vring) {
    vid_ = vid;
    vring_ = vring;
  }
  void guest_written(uint64_t gpa, uint64_t len) override { rte_vhost_log_write(vid_, gpa, len); }
  // Relative to the used ring's guest-physical address the frontend gave for logging
  // (SET_VRING_ADDR's log_guest_addr).
  void used_written(uint64_t offset, uint64_t len) override {
    rte_vhost_log_used_vring(vid_, vring_, offset, len);
  }

 private:
  int vid_ = -1;
  uint16_t vring_ = 0;
};

}  // namespace vqs
