// SPDX-License-Identifier: BSD-3-Clause
// VLANs of the L2 bridge: ingress VLAN per port kind, flood sets, egress tags, tag edits on mbuf
// data. NIC VLAN offloads are never relied on: a tag an ethdev stripped into mbuf->vlan_tci is put
// back into the data when an output needs it. See docs/architecture.md, "The switch".
#pragma once

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_mbuf.h>

#include <bitset>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/config.h"

namespace vqs::app {

// How the front of a frame looks: kUntagged, or an 802.1Q tag (0x8100) with this TCI.
using TagForm = uint32_t;
constexpr TagForm kUntagged = 0x10000;

constexpr uint16_t kVlanUnaware = 0;  // internal VLAN of the kNone ports
constexpr uint16_t kVlanMax = 4094;
constexpr uint16_t kVidMask = 0x0fff;
constexpr uint16_t kPcpDeiMask = 0xf000;

// Where an ingress frame belongs.
struct VlanIngress {
  uint16_t vlan = 0;             // kVlanUnaware, or 1..kVlanMax
  uint16_t pcp_dei = 0;          // of the ingress tag (0 when untagged): kept on egress tags
  TagForm have = kUntagged;      // the tag in the data now
  TagForm original = kUntagged;  // as the frame came in (a NIC-stripped tag included)
};

enum class VlanVerdict : uint8_t { kOk, kFiltered, kRunt };

// Tag edits on the first segment, all or nothing: false when a tag cannot be pushed for lack of
// headroom. The mbuf must be writable (mbuf_writable).
bool retag(rte_mbuf* m, TagForm have, TagForm want);

// Whether the frame's data may be edited in place: our own buffer (not attached to another mbuf
// or to an external buffer such as guest memory) and no other holder.
inline bool mbuf_writable(const rte_mbuf* m) {
  return RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1;
}

class VlanMap {
 public:
  // `ports` indexed by port index. nullopt with `error` when a VLAN id is out of range.
  static std::optional<VlanMap> create(const std::vector<VlanConfig>& ports, std::string* error);
  // The same with gaps: nullptr where no port is (an index freed by del-port), a member of no
  // VLAN.
  static std::optional<VlanMap> create(const std::vector<const VlanConfig*>& ports,
                                       std::string* error);

  uint16_t port_count() const { return static_cast<uint16_t>(ports_.size()); }

  // Ingress on `port`. Clears the mbuf's RX VLAN flags: a stripped tag is then only in `in`.
  VlanVerdict classify(uint16_t port, rte_mbuf* m, VlanIngress* in) const {
    if (rte_pktmbuf_data_len(m) < RTE_ETHER_HDR_LEN) return VlanVerdict::kRunt;
    const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
    const bool stripped = (m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED) != 0;
    m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED);
    in->have = kUntagged;
    // With a stripped tag the data's own ethertype (maybe an inner tag) is payload to us.
    if (!stripped && load_be16(data + 2 * RTE_ETHER_ADDR_LEN) == RTE_ETHER_TYPE_VLAN) {
      if (rte_pktmbuf_data_len(m) < kTaggedHeaderLen) return VlanVerdict::kRunt;
      in->have = load_be16(data + RTE_ETHER_HDR_LEN);
    }
    in->original = stripped ? m->vlan_tci : in->have;
    const bool tagged = in->original != kUntagged;
    const uint16_t tci = tagged ? static_cast<uint16_t>(in->original) : 0;
    const uint16_t vid = tci & kVidMask;
    in->pcp_dei = tci & kPcpDeiMask;
    const Port& p = ports_[port];
    switch (p.mode) {
      case VlanMode::kNone:
        in->vlan = kVlanUnaware;
        return VlanVerdict::kOk;
      case VlanMode::kAccess:
        // Untagged or priority-tagged only (as OVS: even a tag with the access VLAN is dropped).
        if (vid != 0) return VlanVerdict::kFiltered;
        in->vlan = p.access_vlan;
        return VlanVerdict::kOk;
      case VlanMode::kTrunk:
        if (vid == 0) {
          if (p.native_vlan == 0) return VlanVerdict::kFiltered;
          in->vlan = p.native_vlan;
        } else {
          if (!trunk_allowed_[p.trunk_index][vid]) return VlanVerdict::kFiltered;
          in->vlan = vid;
        }
        return VlanVerdict::kOk;
    }
    return VlanVerdict::kFiltered;
  }

  // The ports of `vlan` (the ingress port among them: the caller skips it).
  std::span<const uint16_t> members(uint16_t vlan) const {
    return {members_.data() + member_begin_[vlan], members_.data() + member_begin_[vlan + 1]};
  }

  // The form `port` (a member of in.vlan) sends frames of `in` in.
  TagForm egress_form(uint16_t port, const VlanIngress& in) const {
    const Port& p = ports_[port];
    switch (p.mode) {
      case VlanMode::kNone:
        return in.original;
      case VlanMode::kAccess:
        return kUntagged;
      case VlanMode::kTrunk:
        return in.vlan == p.native_vlan ? kUntagged : static_cast<TagForm>(in.pcp_dei | in.vlan);
    }
    return kUntagged;
  }

  static constexpr uint16_t kTaggedHeaderLen = RTE_ETHER_HDR_LEN + sizeof(rte_vlan_hdr);

  // Unaligned-safe: frames may sit at any address (guest buffers).
  static uint16_t load_be16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof(v));
    return rte_be_to_cpu_16(v);
  }

 private:
  struct Port {
    bool present = true;
    VlanMode mode = VlanMode::kNone;
    uint16_t access_vlan = 0;
    uint16_t native_vlan = 0;  // trunk: 0 = untagged frames dropped
    uint16_t trunk_index = 0;  // into trunk_allowed_
  };

  std::vector<Port> ports_;
  std::vector<std::bitset<kVidMask + 1>> trunk_allowed_;  // per trunk: tagged VIDs accepted
  // members of VLAN v: members_[member_begin_[v] .. member_begin_[v + 1]), v in 0..4095.
  std::vector<uint32_t> member_begin_;
  std::vector<uint16_t> members_;
};

}  // namespace vqs::app
