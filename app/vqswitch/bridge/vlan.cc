// SPDX-License-Identifier: BSD-3-Clause
#include "bridge/vlan.h"

namespace vqs::app {

namespace {

void store_be16(uint8_t* p, uint16_t v) {
  const uint16_t be = rte_cpu_to_be_16(v);
  std::memcpy(p, &be, sizeof(be));
}

constexpr uint16_t kTagLen = sizeof(rte_vlan_hdr);
constexpr uint16_t kMacsLen = 2 * RTE_ETHER_ADDR_LEN;

// TX offloads (checksum, TSO) locate headers by l2_len (0 when none was requested): it follows
// the tag.
void grow_l2_len(rte_mbuf* m) {
  if (m->ol_flags & RTE_MBUF_F_TX_TUNNEL_MASK) {
    if (m->outer_l2_len != 0) m->outer_l2_len = m->outer_l2_len + kTagLen;
  } else if (m->l2_len != 0) {
    m->l2_len = m->l2_len + kTagLen;
  }
}
void shrink_l2_len(rte_mbuf* m) {
  if (m->ol_flags & RTE_MBUF_F_TX_TUNNEL_MASK) {
    if (m->outer_l2_len >= VlanMap::kTaggedHeaderLen) m->outer_l2_len = m->outer_l2_len - kTagLen;
  } else if (m->l2_len >= VlanMap::kTaggedHeaderLen) {
    m->l2_len = m->l2_len - kTagLen;
  }
}

}  // namespace

bool retag(rte_mbuf* m, TagForm have, TagForm want) {
  if (have == want) return true;
  if (have == kUntagged) {
    if (rte_pktmbuf_headroom(m) < kTagLen) return false;
    const uint8_t* old_front = rte_pktmbuf_mtod(m, const uint8_t*);
    uint8_t* front = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, kTagLen));
    std::memmove(front, old_front, kMacsLen);
    store_be16(front + kMacsLen, RTE_ETHER_TYPE_VLAN);
    store_be16(front + RTE_ETHER_HDR_LEN, static_cast<uint16_t>(want));
    grow_l2_len(m);
    return true;
  }
  uint8_t* front = rte_pktmbuf_mtod(m, uint8_t*);
  if (want == kUntagged) {
    std::memmove(front + kTagLen, front, kMacsLen);
    rte_pktmbuf_adj(m, kTagLen);
    shrink_l2_len(m);
    return true;
  }
  store_be16(front + RTE_ETHER_HDR_LEN, static_cast<uint16_t>(want));
  return true;
}

std::optional<VlanMap> VlanMap::create(const std::vector<VlanConfig>& ports, std::string* error) {
  std::vector<const VlanConfig*> present;
  for (const VlanConfig& c : ports) present.push_back(&c);
  return create(present, error);
}

std::optional<VlanMap> VlanMap::create(const std::vector<const VlanConfig*>& ports,
                                       std::string* error) {
  if (ports.size() > UINT16_MAX) {
    *error = "bridge: too many ports";
    return std::nullopt;
  }
  auto valid = [](uint16_t vlan) { return vlan >= 1 && vlan <= kVlanMax; };
  VlanMap map;
  map.ports_.resize(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) {
    Port& p = map.ports_[i];
    if (ports[i] == nullptr) {
      p.present = false;  // in no flood list
      continue;
    }
    const VlanConfig& c = *ports[i];
    p.mode = c.mode;
    const std::string where = "bridge: port " + std::to_string(i) + ": ";
    switch (c.mode) {
      case VlanMode::kNone:
        break;
      case VlanMode::kAccess:
        if (!valid(c.access_vlan)) {
          *error = where + "access VLAN " + std::to_string(c.access_vlan) + " not in 1..4094";
          return std::nullopt;
        }
        p.access_vlan = c.access_vlan;
        break;
      case VlanMode::kTrunk: {
        if (c.native_vlan != 0 && !valid(c.native_vlan)) {
          *error = where + "native VLAN " + std::to_string(c.native_vlan) + " not in 1..4094";
          return std::nullopt;
        }
        p.native_vlan = c.native_vlan;
        p.trunk_index = static_cast<uint16_t>(map.trunk_allowed_.size());
        auto& allowed = map.trunk_allowed_.emplace_back();
        for (uint16_t v : c.trunk_vlans) {
          if (!valid(v)) {
            *error = where + "trunk VLAN " + std::to_string(v) + " not in 1..4094";
            return std::nullopt;
          }
          allowed.set(v);
        }
        // The native VLAN is the trunk's too: its frames may also come tagged.
        if (c.native_vlan != 0) allowed.set(c.native_vlan);
        break;
      }
    }
  }
  // Flood lists per VLAN.
  map.member_begin_.assign(kVlanMax + 2, 0);
  for (uint32_t v = 0; v <= kVlanMax; ++v) {
    map.member_begin_[v] = static_cast<uint32_t>(map.members_.size());
    for (size_t i = 0; i < map.ports_.size(); ++i) {
      const Port& p = map.ports_[i];
      if (!p.present) continue;
      const bool member = v == kVlanUnaware ? p.mode == VlanMode::kNone
                                            : (p.mode == VlanMode::kAccess && p.access_vlan == v) ||
                                                  (p.mode == VlanMode::kTrunk &&
                                                   map.trunk_allowed_[p.trunk_index].test(v));
      if (member) map.members_.push_back(static_cast<uint16_t>(i));
    }
  }
  map.member_begin_[kVlanMax + 1] = static_cast<uint32_t>(map.members_.size());
  return map;
}

}  // namespace vqs::app
