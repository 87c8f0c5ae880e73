// SPDX-License-Identifier: BSD-3-Clause
// Live migration's dirty-page log, as the datapath sees it: while the frontend logs
// (VHOST_F_LOG_ALL), every guest byte the device writes is reported here so that the migration
// copies its page again. The vhost layer's implementation marks librte_vhost's shared log; tests
// record. Set on a queue only while logging is on, so a queue without it pays one pointer test
// per write site (per burst or per packet, never per byte).
#pragma once

#include <cstdint>

namespace vqs {

class DirtyLog {
 public:
  virtual ~DirtyLog() = default;
  // The device wrote guest-physical [gpa, gpa + len) (a receive buffer).
  virtual void guest_written(uint64_t gpa, uint64_t len) = 0;
  // The device wrote [offset, offset + len) of the used ring, counted from its start (flags).
  virtual void used_written(uint64_t offset, uint64_t len) = 0;
};

}  // namespace vqs
