// The learning L2 bridge (forwarding mode `bridge`): MAC learning per (MAC, VLAN) in an rte_hash
// shared by every forwarding lcore, aging, flooding of broadcast/multicast/unknown unicast within
// the VLAN, and VLAN access/trunk handling per port.
// (Interface sketch: the implementer owns this file and may refine it; keep forward()'s shape.)
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "port.h"
#include "tx_buffer.h"

namespace vqs::app {

struct BridgeCounters {
  uint64_t learned = 0;   // new (MAC, VLAN) entries
  uint64_t moved = 0;     // entry seen on another port
  uint64_t aged = 0;      // removed by aging
  uint64_t table_full = 0;  // could not learn: table full
  uint64_t flooded = 0;   // packets flooded (unknown unicast, broadcast, multicast)
  uint64_t entries = 0;   // now
};

class L2Bridge {
 public:
  // `port_vlans` indexed by port index; `lcores`: forwarding lcores (slots 0..lcores-1) that call
  // forward(). nullptr with `error` when DPDK refuses the table.
  static std::unique_ptr<L2Bridge> create(const std::vector<VlanConfig>& port_vlans,
                                          uint32_t table_size, uint32_t aging_s, uint16_t lcores,
                                          std::string* error);
  ~L2Bridge();

  // Datapath, on forwarding lcore `slot`: learns the sources, and pushes each packet to its
  // output port(s) in `out` (which owns them from then on) with the VLAN tag the output needs.
  // Drops are freed and counted in `in_counters` (vlan_filtered, no_route, mbuf_exhausted).
  void forward(uint16_t slot, uint16_t in_port, rte_mbuf** pkts, uint16_t count, uint64_t now_tsc,
               TxBufferSet& out, PortQueueCounters& in_counters);
  // Datapath: the lcore holds no reference into the table now (call once per loop iteration).
  void quiescent(uint16_t slot);
  // Control thread: removes entries not seen for aging_s.
  void age(uint64_t now_tsc);

  BridgeCounters counters() const;
};

}  // namespace vqs::app
