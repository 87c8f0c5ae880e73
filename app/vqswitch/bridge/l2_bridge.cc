// SPDX-License-Identifier: BSD-3-Clause
#include "bridge/l2_bridge.h"

#include <rte_cycles.h>

#include <algorithm>

namespace vqs::app {

namespace {

// Packets per table lookup: a source and a destination key each.
constexpr uint16_t kChunk = RTE_HASH_LOOKUP_BULK_MAX / 2;
constexpr uint16_t kNoKeyIndex = UINT16_MAX;

void bump(std::atomic<uint64_t>& counter, uint64_t n) {
  if (n != 0) counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

bool is_multicast(const uint8_t* mac) { return (mac[0] & 0x01) != 0; }

// A source worth learning: unicast and not all zeros.
bool is_learnable(const uint8_t* mac) {
  return !is_multicast(mac) && (mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5]) != 0;
}

// `m` in the form `want`: `m` itself edited in place when `consume` allows and it is writable,
// else a copy from its own pool (then `m` is freed if consumed). nullptr when no mbuf could be had
// (`m` freed if consumed).
rte_mbuf* reshaped(rte_mbuf* m, TagForm have, TagForm want, bool consume) {
  if (consume && mbuf_writable(m) && retag(m, have, want)) return m;
  rte_mbuf* copy = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX);
  if (copy != nullptr && !retag(copy, have, want)) {
    rte_pktmbuf_free(copy);
    copy = nullptr;
  }
  if (consume) rte_pktmbuf_free(m);
  return copy;
}

}  // namespace

struct L2Bridge::Packet {
  rte_mbuf* m;
  VlanIngress in;
  uint64_t src_key;
  uint64_t dst_key;
  uint16_t src_index;  // into the chunk's lookup keys, or kNoKeyIndex: not looked up
  uint16_t dst_index;
};

struct L2Bridge::Chunk {
  Packet packets[kChunk];  // those that passed the ingress VLAN rules
  uint16_t n = 0;
  rte_mbuf* dropped[kChunk];
  uint16_t n_dropped = 0;
  uint64_t filtered = 0;
  uint64_t no_route = 0;
  const void* keys[2 * kChunk];  // sources, then destinations, as Packet's indices say
  uint16_t n_keys = 0;
  int32_t positions[2 * kChunk];  // the table's answer per key; < 0: absent

  void drop(rte_mbuf* m) { dropped[n_dropped++] = m; }
};

std::unique_ptr<L2Bridge> L2Bridge::create(const std::vector<VlanConfig>& port_vlans,
                                           uint32_t table_size, uint32_t aging_s, uint16_t lcores,
                                           std::string* error) {
  std::optional<VlanMap> vlans = VlanMap::create(port_vlans, error);
  if (!vlans) return nullptr;
  std::unique_ptr<MacTable> table = MacTable::create(table_size, lcores, error);
  if (!table) return nullptr;
  return std::unique_ptr<L2Bridge>(
      new L2Bridge(std::move(*vlans), std::move(table), aging_s, lcores));
}

L2Bridge::L2Bridge(VlanMap vlans, std::unique_ptr<MacTable> table, uint32_t aging_s,
                   uint16_t lcores)
    : table_(std::move(table)),
      aging_tsc_(static_cast<uint64_t>(aging_s) * rte_get_tsc_hz()),
      slots_(std::make_unique<SlotCounters[]>(lcores)),
      slot_count_(lcores) {
  const VlanMap* first = publish_vlans(std::move(vlans));
  for (uint16_t i = 0; i < lcores; ++i) slots_[i].vlans = first;
}

const VlanMap* L2Bridge::publish_vlans(VlanMap vlans) {
  vlan_maps_.push_back(std::make_unique<const VlanMap>(std::move(vlans)));
  return vlan_maps_.back().get();
}

void L2Bridge::retire_vlans() {
  if (vlan_maps_.size() > 1) vlan_maps_.erase(vlan_maps_.begin(), vlan_maps_.end() - 1);
}

uint64_t L2Bridge::flush_port(uint16_t port) { return table_->remove_port(port); }

L2Bridge::~L2Bridge() = default;

void L2Bridge::forward(uint16_t slot, uint16_t in_port, rte_mbuf** pkts, uint16_t count,
                       uint64_t now_tsc, TxBufferSet& out, PortQueueCounters& in_counters) {
  table_->enter(slot);
  const VlanMap& vlans = *slots_[slot].vlans;
  for (uint16_t done = 0; done < count; done += kChunk) {
    forward_chunk(vlans, slot, in_port, pkts + done, std::min<uint16_t>(kChunk, count - done),
                  now_tsc, out, in_counters);
  }
}

__rte_always_inline void L2Bridge::classify(const VlanMap& vlans, uint16_t in_port, rte_mbuf** pkts,
                                            uint16_t count, Chunk& chunk) {
  // A frame whose key equals the previous frame's shares its lookup (a flow's frames come in
  // runs): a burst of one flow takes two keys, not two a frame.
  uint16_t last_src = kNoKeyIndex;
  uint16_t last_dst = kNoKeyIndex;
  uint64_t last_src_key = 0;  // valid while last_src is set
  uint64_t last_dst_key = 0;
  for (uint16_t i = 0; i < count; ++i) {
    Packet& p = chunk.packets[chunk.n];
    p.m = pkts[i];
    const VlanVerdict verdict = vlans.classify(in_port, p.m, &p.in);
    if (verdict != VlanVerdict::kOk) {
      (verdict == VlanVerdict::kFiltered ? chunk.filtered : chunk.no_route)++;
      chunk.drop(p.m);
      continue;
    }
    const uint8_t* dst = rte_pktmbuf_mtod(p.m, const uint8_t*);
    const uint8_t* src = dst + RTE_ETHER_ADDR_LEN;
    p.src_index = kNoKeyIndex;
    p.dst_index = kNoKeyIndex;
    if (is_learnable(src)) {
      p.src_key = MacTable::key(src, p.in.vlan);
      if (last_src == kNoKeyIndex || last_src_key != p.src_key) {
        last_src_key = p.src_key;
        last_src = chunk.n_keys;
        chunk.keys[chunk.n_keys++] = &p.src_key;
      }
      p.src_index = last_src;
    }
    if (!is_multicast(dst)) {
      p.dst_key = MacTable::key(dst, p.in.vlan);
      if (last_dst == kNoKeyIndex || last_dst_key != p.dst_key) {
        last_dst_key = p.dst_key;
        last_dst = chunk.n_keys;
        chunk.keys[chunk.n_keys++] = &p.dst_key;
      }
      p.dst_index = last_dst;
    }
    ++chunk.n;
  }
}

__rte_always_inline void L2Bridge::learn_sources(uint16_t slot, uint16_t in_port, uint64_t now_tsc,
                                                 const Chunk& chunk) {
  uint64_t learned = 0;
  uint64_t moved = 0;
  uint64_t full = 0;
  uint64_t added_key = 0;  // the last source added in this chunk: its next packets need no add
  int32_t added_position = -1;
  uint16_t last_index = kNoKeyIndex;  // frames sharing a key index share the verdict
  for (uint16_t i = 0; i < chunk.n; ++i) {
    const Packet& p = chunk.packets[i];
    if (p.src_index == kNoKeyIndex || p.src_index == last_index) continue;
    last_index = p.src_index;
    int32_t position = chunk.positions[p.src_index];
    if (position < 0 && added_position >= 0 && p.src_key == added_key) position = added_position;
    const bool absent = position < 0;
    const MacTable::Learn result = table_->learn(slot, position, p.src_key, in_port, now_tsc);
    if (absent && position >= 0) {
      added_key = p.src_key;
      added_position = position;
    }
    switch (result) {
      case MacTable::Learn::kKnown:
        break;
      case MacTable::Learn::kLearned:
        ++learned;
        break;
      case MacTable::Learn::kMoved:
        ++moved;
        break;
      case MacTable::Learn::kFull:
        ++full;
        break;
    }
  }
  SlotCounters& counters = slots_[slot];
  bump(counters.learned, learned);
  bump(counters.moved, moved);
  bump(counters.table_full, full);
}

__rte_always_inline void L2Bridge::send(const VlanMap& vlans, uint16_t slot, uint16_t in_port,
                                        Chunk& chunk, TxBufferSet& out,
                                        PortQueueCounters& in_counters) {
  uint64_t flooded = 0;
  uint16_t last_index = kNoKeyIndex;  // frames sharing a key index share the output
  int32_t last_port = -1;
  for (uint16_t i = 0; i < chunk.n; ++i) {
    const Packet& p = chunk.packets[i];
    int32_t port = -1;
    if (p.dst_index != kNoKeyIndex && p.dst_index == last_index) {
      port = last_port;
    } else if (p.dst_index != kNoKeyIndex && chunk.positions[p.dst_index] >= 0) {
      port = table_->port(chunk.positions[p.dst_index], p.dst_key);
      last_index = p.dst_index;
      last_port = port;
    }
    if (port < 0) {  // broadcast, multicast, unknown unicast
      if (flood(vlans, p, in_port, out, in_counters)) {
        ++flooded;
      } else {
        ++chunk.no_route;
        chunk.drop(p.m);
      }
    } else if (port == in_port) {
      ++chunk.no_route;
      chunk.drop(p.m);
    } else {
      unicast(vlans, p, static_cast<uint16_t>(port), out, in_counters);
    }
  }
  bump(slots_[slot].flooded, flooded);
}

void L2Bridge::forward_chunk(const VlanMap& vlans, uint16_t slot, uint16_t in_port, rte_mbuf** pkts,
                             uint16_t count, uint64_t now_tsc, TxBufferSet& out,
                             PortQueueCounters& in_counters) {
  Chunk chunk;
  classify(vlans, in_port, pkts, count, chunk);
  if (chunk.n_keys > 0) table_->lookup(chunk.keys, chunk.n_keys, chunk.positions);
  // Learning before forwarding: a packet's source may be the next one's destination.
  learn_sources(slot, in_port, now_tsc, chunk);
  send(vlans, slot, in_port, chunk, out, in_counters);
  if (chunk.n_dropped > 0) rte_pktmbuf_free_bulk(chunk.dropped, chunk.n_dropped);
  if (chunk.filtered != 0) in_counters.count_drop(SwitchDrop::kVlanFiltered, chunk.filtered);
  if (chunk.no_route != 0) in_counters.count_drop(SwitchDrop::kNoRoute, chunk.no_route);
}

__rte_always_inline void L2Bridge::unicast(const VlanMap& vlans, const Packet& p, uint16_t port,
                                           TxBufferSet& out, PortQueueCounters& in_counters) {
  const TagForm want = vlans.egress_form(port, p.in);
  rte_mbuf* m = want == p.in.have ? p.m : reshaped(p.m, p.in.have, want, true);
  if (m == nullptr) {
    in_counters.count_drop(SwitchDrop::kMbufExhausted);
    return;
  }
  out.push(port, m);
}

bool L2Bridge::flood(const VlanMap& vlans, const Packet& p, uint16_t in_port, TxBufferSet& out,
                     PortQueueCounters& in_counters) {
  // The outputs of one packet want at most two forms: untagged, and one tag (the VLAN's, with
  // the ingress PCP/DEI; or, between VLAN-unaware ports, the frame as it came).
  const std::span<const uint16_t> members = vlans.members(p.in.vlan);
  uint32_t wanting[2] = {0, 0};
  TagForm form[2] = {kUntagged, kUntagged};
  for (uint16_t port : members) {
    if (port == in_port) continue;
    const TagForm f = vlans.egress_form(port, p.in);
    const int k = f != kUntagged;
    form[k] = f;
    ++wanting[k];
  }
  if (wanting[0] + wanting[1] == 0) return false;

  // Outputs wanting the frame as it is share it; a form that needs an edit gets a copy, or the
  // frame itself when nobody else needs it as it is.
  rte_mbuf* frame[2] = {nullptr, nullptr};
  bool m_unused = true;
  for (int k = 0; k < 2; ++k) {
    if (wanting[k] != 0 && form[k] == p.in.have) {
      frame[k] = p.m;
      m_unused = false;
    }
  }
  for (int k = 0; k < 2; ++k) {
    if (wanting[k] == 0 || form[k] == p.in.have) continue;
    const bool later_edit = k == 0 && wanting[1] != 0 && form[1] != p.in.have;
    const bool consume = m_unused && !later_edit;
    frame[k] = reshaped(p.m, p.in.have, form[k], consume);
    if (consume) m_unused = false;
    if (frame[k] == nullptr) in_counters.count_drop(SwitchDrop::kMbufExhausted, wanting[k]);
  }
  if (m_unused) rte_pktmbuf_free(p.m);

  // References first: a push may send (and free) a frame before the other pushes.
  for (int k = 0; k < 2; ++k) {
    if (frame[k] != nullptr && wanting[k] > 1)
      rte_pktmbuf_refcnt_update(frame[k], static_cast<int16_t>(wanting[k] - 1));
  }
  for (uint16_t port : members) {
    if (port == in_port) continue;
    rte_mbuf* m = frame[vlans.egress_form(port, p.in) != kUntagged];
    if (m != nullptr) out.push(port, m);
  }
  return true;
}

void L2Bridge::age(uint64_t now_tsc) {
  if (aging_tsc_ == 0) return;
  aged_.fetch_add(table_->age(now_tsc, aging_tsc_), std::memory_order_relaxed);
}

BridgeCounters L2Bridge::counters() const {
  BridgeCounters c;
  for (uint16_t i = 0; i < slot_count_; ++i) {
    const SlotCounters& s = slots_[i];
    c.learned += s.learned.load(std::memory_order_relaxed);
    c.moved += s.moved.load(std::memory_order_relaxed);
    c.table_full += s.table_full.load(std::memory_order_relaxed);
    c.flooded += s.flooded.load(std::memory_order_relaxed);
  }
  c.aged = aged_.load(std::memory_order_relaxed);
  c.entries = table_->size();
  return c;
}

}  // namespace vqs::app
