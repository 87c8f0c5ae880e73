// SPDX-License-Identifier: BSD-3-Clause
#include "ports/port.h"

namespace vqs::app {

const char* switch_drop_name(SwitchDrop reason) {
  switch (reason) {
    case SwitchDrop::kTxGuestFull:
      return "tx_guest_full";
    case SwitchDrop::kTxQueueFull:
      return "tx_queue_full";
    case SwitchDrop::kLinkDown:
      return "link_down";
    case SwitchDrop::kNoRoute:
      return "no_route";
    case SwitchDrop::kVlanFiltered:
      return "vlan_filtered";
    case SwitchDrop::kMbufExhausted:
      return "mbuf_exhausted";
    case SwitchDrop::kTxUnsupported:
      return "tx_unsupported";
    case SwitchDrop::kCount:
      break;
  }
  return "unknown";
}

void Port::init_queues(uint16_t rx, uint16_t tx) {
  tx_locks_ = std::make_unique<TxLock[]>(tx);
  rx_counters_ = std::make_unique<PortQueueCounters[]>(rx);
  tx_counters_ = std::make_unique<PortQueueCounters[]>(tx);
}

}  // namespace vqs::app
