// SPDX-License-Identifier: BSD-3-Clause
// Frames the benchmark guests build: an Ethernet header and, beyond it, whatever the mbuf held.
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <cstdio>

namespace vqs::bench {

inline constexpr rte_ether_addr kGuestSrcMac{{0x02, 0, 0, 0, 0, 0x01}};
inline constexpr rte_ether_addr kGuestDstMac{{0x02, 0, 0, 0, 0, 0x02}};

// `size` bytes in one mbuf (the caller's pool holds them), the header's addresses and type set.
inline void build_frame(rte_mbuf* m, uint32_t size, uint16_t ether_type,
                        const rte_ether_addr& dst = kGuestDstMac,
                        const rte_ether_addr& src = kGuestSrcMac) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  eth->dst_addr = dst;
  eth->src_addr = src;
  eth->ether_type = rte_cpu_to_be_16(ether_type);
  m->data_len = static_cast<uint16_t>(size);
  m->pkt_len = size;
}

// "02:00:00:00:00:aa" -> *mac.
inline bool parse_mac(const char* text, rte_ether_addr* mac) {
  unsigned b[6];
  char extra;
  if (std::sscanf(text, "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &extra) !=
      6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (b[i] > 0xff) return false;
    mac->addr_bytes[i] = static_cast<uint8_t>(b[i]);
  }
  return true;
}

}  // namespace vqs::bench
