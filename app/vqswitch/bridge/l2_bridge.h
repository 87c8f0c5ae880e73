// SPDX-License-Identifier: BSD-3-Clause
// The learning L2 bridge (forwarding mode `bridge`): learning per (MAC, VLAN), aging, flooding
// within the VLAN, VLAN access/trunk ports. Lcore `slot` calls forward() per burst (a TxBufferSet
// with an output per port), quiescent(slot) each loop and offline(slot) before sleeping; callers
// need an lcore id (registered when missing). See docs/architecture.md, "The switch".
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bridge/mac_table.h"
#include "bridge/vlan.h"
#include "config/config.h"
#include "ports/port.h"
#include "ports/tx_buffer.h"

namespace vqs::app {

struct BridgeCounters {
  uint64_t learned = 0;     // new (MAC, VLAN) entries
  uint64_t moved = 0;       // entry seen on another port
  uint64_t aged = 0;        // removed by aging
  uint64_t table_full = 0;  // could not learn: table full
  uint64_t flooded = 0;     // packets flooded (unknown unicast, broadcast, multicast)
  uint64_t entries = 0;     // now
};

class L2Bridge {
 public:
  // `port_vlans` indexed by port index; `table_size`: (MAC, VLAN) entries; `aging_s`: 0 = never;
  // `lcores`: forwarding lcores (slots 0..lcores-1) that call forward(). nullptr with `error` when
  // a VLAN id is out of range or DPDK refuses the table.
  static std::unique_ptr<L2Bridge> create(const std::vector<VlanConfig>& port_vlans,
                                          uint32_t table_size, uint32_t aging_s, uint16_t lcores,
                                          std::string* error);
  // The forwarding lcores must have stopped.
  ~L2Bridge();
  L2Bridge(const L2Bridge&) = delete;
  L2Bridge& operator=(const L2Bridge&) = delete;

  // Datapath, on forwarding lcore `slot`: learns the sources, and pushes each packet to its
  // output port(s) in `out` (which owns them from then on) with the VLAN tag the output needs.
  // Drops are freed and counted in `in_counters` (vlan_filtered, no_route, mbuf_exhausted).
  void forward(uint16_t slot, uint16_t in_port, rte_mbuf** pkts, uint16_t count, uint64_t now_tsc,
               TxBufferSet& out, PortQueueCounters& in_counters);
  // Datapath: the lcore holds no reference into the table now (call once per loop iteration).
  void quiescent(uint16_t slot) { table_->quiescent(slot); }
  // Datapath: the lcore is about to sleep or stop; its next forward() takes it back online.
  void offline(uint16_t slot) { table_->offline(slot); }
  // Control thread: removes entries not seen for aging_s.
  void age(uint64_t now_tsc);
  // Control thread: empties the MAC table; returns the entries removed.
  uint64_t flush() { return table_->flush(); }
  // Control thread: removes the entries that point at `port`; returns how many. Once no lcore
  // receives from the port (nothing learns it again), and before its output goes.
  uint64_t flush_port(uint16_t port);

  // Ports added or removed at run time (docs/architecture.md, "Runtime ports"). The control
  // thread publishes a new VLAN map (the bridge keeps it), each lcore takes it between two
  // passes (use_vlans), and once every lcore has, retire_vlans frees the older maps.
  const VlanMap* publish_vlans(VlanMap vlans);
  void use_vlans(uint16_t slot, const VlanMap* vlans) { slots_[slot].vlans = vlans; }
  void retire_vlans();
  // Control thread: `visit(key, port, seen_tsc)` for each entry (key: MacTable::key).
  void for_each_entry(const std::function<void(uint64_t, uint16_t, uint64_t)>& visit) const {
    table_->for_each(visit);
  }

  BridgeCounters counters() const;

 private:
  // Per lcore, written by it alone (relaxed stores, summed when read).
  struct alignas(RTE_CACHE_LINE_SIZE) SlotCounters {
    std::atomic<uint64_t> learned{0};
    std::atomic<uint64_t> moved{0};
    std::atomic<uint64_t> table_full{0};
    std::atomic<uint64_t> flooded{0};
    const VlanMap* vlans = nullptr;  // the map this lcore forwards by
  };
  struct Packet;  // a frame of the burst being forwarded
  struct Chunk;   // the frames of one table lookup, those dropped, and the lookup

  L2Bridge(VlanMap vlans, std::unique_ptr<MacTable> table, uint32_t aging_s, uint16_t lcores);

  // forward_chunk's steps: ingress VLAN and lookup keys, learning the sources, then output.
  void forward_chunk(const VlanMap& vlans, uint16_t slot, uint16_t in_port, rte_mbuf** pkts,
                     uint16_t count, uint64_t now_tsc, TxBufferSet& out,
                     PortQueueCounters& in_counters);
  void classify(const VlanMap& vlans, uint16_t in_port, rte_mbuf** pkts, uint16_t count,
                Chunk& chunk);
  void learn_sources(uint16_t slot, uint16_t in_port, uint64_t now_tsc, const Chunk& chunk);
  void send(const VlanMap& vlans, uint16_t slot, uint16_t in_port, Chunk& chunk, TxBufferSet& out,
            PortQueueCounters& in_counters);
  // Sends `p` to `port` in the form the port needs (or drops it, counted).
  void unicast(const VlanMap& vlans, const Packet& p, uint16_t port, TxBufferSet& out,
               PortQueueCounters& in_counters);
  // Sends `p` to every other port of its VLAN; false when there was none.
  bool flood(const VlanMap& vlans, const Packet& p, uint16_t in_port, TxBufferSet& out,
             PortQueueCounters& in_counters);

  std::vector<std::unique_ptr<const VlanMap>> vlan_maps_;  // the latest last
  const std::unique_ptr<MacTable> table_;
  const uint64_t aging_tsc_;  // 0: never
  std::unique_ptr<SlotCounters[]> slots_;
  const uint16_t slot_count_;
  std::atomic<uint64_t> aged_{0};
};

}  // namespace vqs::app
