// SPDX-License-Identifier: BSD-3-Clause
// Set-up for L2 bridge tests: a bridge over FakePorts (one rx queue, a tx queue per forwarding
// lcore), frames built from MACs and tags, and a private mbuf pool that must be full again when
// the test ends (nothing leaked, nothing freed twice).
#pragma once

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bridge/l2_bridge.h"
#include "fake_port.h"
#include "ports/tx_buffer.h"

namespace vqs::app::test {

using Mac = std::array<uint8_t, 6>;
// Locally administered unicast addresses.
constexpr Mac host(uint8_t n, uint8_t m = 0) { return {0x02, 0, 0, 0, m, n}; }
constexpr Mac kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr Mac kMulticast = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};

constexpr uint64_t kT0 = uint64_t{1} << 40;  // a TSC value to start from
constexpr unsigned kPoolSize = 2047;

inline uint16_t tci(uint16_t vid, uint8_t pcp = 0, bool dei = false) {
  return static_cast<uint16_t>(pcp << 13 | (dei ? 1 << 12 : 0) | vid);
}

// An Ethernet frame: IPv4 ethertype, a fixed payload pattern, optionally 802.1Q-tagged.
inline std::vector<uint8_t> frame(const Mac& dst, const Mac& src,
                                  std::optional<uint16_t> tag = std::nullopt,
                                  uint16_t payload = 60) {
  std::vector<uint8_t> f(dst.begin(), dst.end());
  f.insert(f.end(), src.begin(), src.end());
  if (tag) {
    f.insert(f.end(), {0x81, 0x00, static_cast<uint8_t>(*tag >> 8), static_cast<uint8_t>(*tag)});
  }
  f.insert(f.end(), {0x08, 0x00});
  for (uint16_t i = 0; i < payload; ++i) f.push_back(static_cast<uint8_t>(i * 7 + 3));
  return f;
}

inline std::vector<uint8_t> bytes_of(const rte_mbuf* m) {
  std::vector<uint8_t> out(rte_pktmbuf_pkt_len(m));
  const void* p = rte_pktmbuf_read(m, 0, static_cast<uint32_t>(out.size()), out.data());
  if (p != out.data()) std::memcpy(out.data(), p, out.size());
  return out;
}

inline VlanConfig unaware() { return {}; }
inline VlanConfig access(uint16_t vlan) {
  VlanConfig c;
  c.mode = VlanMode::kAccess;
  c.access_vlan = vlan;
  return c;
}
inline VlanConfig trunk(std::vector<uint16_t> vlans, uint16_t native = 0) {
  VlanConfig c;
  c.mode = VlanMode::kTrunk;
  c.trunk_vlans = std::move(vlans);
  c.native_vlan = native;
  return c;
}

class BridgeFixture {
 public:
  explicit BridgeFixture(std::vector<VlanConfig> vlans, uint32_t table_size = 1024,
                         uint32_t aging_s = 300, uint16_t lcores = 1) {
    static int serial = 0;
    const std::string name = "br_pool_" + std::to_string(serial++);
    pool = rte_pktmbuf_pool_create(name.c_str(), kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   SOCKET_ID_ANY);
    REQUIRE(pool != nullptr);
    for (uint16_t i = 0; i < vlans.size(); ++i)
      ports.push_back(std::make_unique<FakePort>(std::string("p").append(std::to_string(i)), i, 1,
                                                 lcores, false));  // not "p" + : -Wrestrict
    for (uint16_t slot = 0; slot < lcores; ++slot) {
      std::vector<TxBufferSet::Output> outputs(ports.size());
      for (size_t i = 0; i < ports.size(); ++i) {
        outputs[i].port = ports[i].get();
        outputs[i].queue = slot;
      }
      tx.push_back(std::make_unique<TxBufferSet>(std::move(outputs), 32));
    }
    std::string error;
    bridge = L2Bridge::create(vlans, table_size, aging_s, lcores, &error);
    INFO(error);
    REQUIRE(bridge != nullptr);
  }
  ~BridgeFixture() {
    bridge.reset();
    ports.clear();
    if (std::uncaught_exceptions() == 0) CHECK(rte_mempool_avail_count(pool) == kPoolSize);
    rte_mempool_free(pool);
  }

  rte_mbuf* mbuf(const std::vector<uint8_t>& bytes) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    REQUIRE(m != nullptr);
    char* data = rte_pktmbuf_append(m, static_cast<uint16_t>(bytes.size()));
    REQUIRE(data != nullptr);
    std::memcpy(data, bytes.data(), bytes.size());
    return m;
  }

  // Forwards `pkts` received on `in_port` and sends what the bridge buffered.
  void forward(uint16_t in_port, std::vector<rte_mbuf*> pkts, uint64_t now = kT0,
               uint16_t slot = 0) {
    for (rte_mbuf* m : pkts) m->port = in_port;
    bridge->forward(slot, in_port, pkts.data(), static_cast<uint16_t>(pkts.size()), now, *tx[slot],
                    ports[in_port]->rx_counters(0));
    tx[slot]->flush();
    bridge->quiescent(slot);
  }
  void send(uint16_t in_port, const std::vector<uint8_t>& bytes, uint64_t now = kT0) {
    forward(in_port, {mbuf(bytes)}, now);
  }

  std::vector<rte_mbuf*>& sent(uint16_t port, uint16_t slot = 0) { return ports[port]->sent(slot); }
  // What `port` sent, as bytes; frees it.
  std::vector<std::vector<uint8_t>> take(uint16_t port) {
    std::vector<std::vector<uint8_t>> out;
    for (rte_mbuf* m : sent(port)) {
      out.push_back(bytes_of(m));
      rte_pktmbuf_free(m);
    }
    sent(port).clear();
    return out;
  }
  // How many frames each port sent (then freed).
  std::vector<size_t> take_counts() {
    std::vector<size_t> counts;
    for (uint16_t i = 0; i < ports.size(); ++i) counts.push_back(take(i).size());
    return counts;
  }
  uint64_t drops(uint16_t in_port, SwitchDrop reason) {
    return ports[in_port]->rx_counters(0).drops[static_cast<int>(reason)];
  }

  rte_mempool* pool = nullptr;
  std::vector<std::unique_ptr<FakePort>> ports;
  std::vector<std::unique_ptr<TxBufferSet>> tx;
  std::unique_ptr<L2Bridge> bridge;
};

}  // namespace vqs::app::test
