// SPDX-License-Identifier: BSD-3-Clause
// vqs-bridge-cost: what the L2 bridge costs per frame, on one CPU, without guests: bursts of 32
// frames from one port of a bridge whose table already knows every address, forwarded into the
// unit tests' FakePorts and freed. Under callgrind with --toggle-collect='*forward_measured*'
// (bridge_cost.sh) it counts the instructions of the measured bursts only: the bridge's work
// (lookups, learning, output buffering) and the flush of what it buffered into the ports, which
// repeat exactly run after run, so a change to the bridge is judged by them where rates through
// guests on these two shared CPUs cannot tell 10 % apart.
//
//   vqs-bridge-cost [--flows 1|N] [--bursts 20000] [--hosts 64]
//
// --flows 1: every frame of a burst from one sender to one host (a VM's burst to a peer);
// --flows N: frame i of a burst from sender i % N to host i % N (N conversations interleaved).
// Senders are behind the input port, --hosts hosts behind three output ports, all learned first
// (not counted). Prints the packets forwarded.
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bridge/l2_bridge.h"
#include "fake_port.h"
#include "ports/tx_buffer.h"

namespace {

using vqs::app::test::FakePort;

constexpr uint16_t kBurst = 32;
constexpr uint16_t kPorts = 4;  // port 0 receives; hosts live behind ports 1..3
constexpr uint16_t kFrameLen = 64;

void mac_of(uint32_t host, uint8_t* mac) {
  const uint8_t bytes[6] = {0x02,
                            0,
                            0,
                            static_cast<uint8_t>(host >> 16),
                            static_cast<uint8_t>(host >> 8),
                            static_cast<uint8_t>(host)};
  std::memcpy(mac, bytes, sizeof(bytes));
}

rte_mbuf* frame(rte_mempool* pool, uint32_t dst, uint32_t src) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  char* data = rte_pktmbuf_append(m, kFrameLen);
  if (data == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  auto* p = reinterpret_cast<uint8_t*>(data);
  std::memset(p, 0, kFrameLen);
  mac_of(dst, p);
  mac_of(src, p + 6);
  p[12] = 0x08;  // IPv4
  return m;
}

// One measured burst: what callgrind counts.
[[gnu::noinline]] void forward_measured(vqs::app::L2Bridge& bridge, uint16_t in_port,
                                        rte_mbuf** pkts, uint16_t count, vqs::app::TxBufferSet& tx,
                                        vqs::app::PortQueueCounters& counters) {
  bridge.forward(0, in_port, pkts, count, 1, tx, counters);
  tx.flush();
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t flows = 1, bursts = 20000, hosts = 64;
  bool usable = argc % 2 == 1;
  for (int i = 1; i + 1 < argc && usable; i += 2) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(argv[i + 1], &end, 10);
    usable = *argv[i + 1] != '\0' && *end == '\0' && v <= UINT32_MAX;
    if (std::strcmp(argv[i], "--flows") == 0)
      flows = static_cast<uint32_t>(v);
    else if (std::strcmp(argv[i], "--bursts") == 0)
      bursts = static_cast<uint32_t>(v);
    else if (std::strcmp(argv[i], "--hosts") == 0)
      hosts = static_cast<uint32_t>(v);
    else
      usable = false;
  }
  if (!usable || flows == 0 || flows > hosts || hosts > 4096) {
    std::fprintf(stderr,
                 "usage: vqs-bridge-cost [--flows 1..hosts] [--bursts N] [--hosts <=4096]\n");
    return 2;
  }
  const std::string prefix = std::string("vqs-bridge-cost-").append(std::to_string(getpid()));
  std::vector<std::string> args = {
      argv[0], "--no-huge", "--no-shconf",   "--no-pci", "-m",          "256",
      "-l",    "0",         "--file-prefix", prefix,     "--log-level", "*:warning"};
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) return 1;

  rte_mempool* pool = rte_pktmbuf_pool_create("bridge_cost", 8191, 256, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  std::vector<std::unique_ptr<FakePort>> ports;
  std::vector<vqs::app::TxBufferSet::Output> outputs(kPorts);
  for (uint16_t i = 0; i < kPorts; ++i) {
    ports.push_back(
        std::make_unique<FakePort>(std::string("p").append(std::to_string(i)), i, 1, 1, true));
    outputs[i].port = ports[i].get();
  }
  vqs::app::TxBufferSet tx(std::move(outputs), kBurst);
  std::string error;
  auto bridge =
      vqs::app::L2Bridge::create(std::vector<vqs::app::VlanConfig>(kPorts), 4096, 300, 1, &error);
  if (pool == nullptr || bridge == nullptr) {
    std::fprintf(stderr, "vqs-bridge-cost: %s\n", pool == nullptr ? "no pool" : error.c_str());
    return 1;
  }
  rte_mbuf* pkts[kBurst];
  const auto send = [&](uint16_t in_port, uint16_t count, bool measured) {
    if (measured) {
      forward_measured(*bridge, in_port, pkts, count, tx, ports[in_port]->rx_counters(0));
    } else {
      bridge->forward(0, in_port, pkts, count, 1, tx, ports[in_port]->rx_counters(0));
      tx.flush();
    }
    bridge->quiescent(0);
    for (auto& p : ports) p->free_sent();
  };
  // Hosts behind ports 1..3, senders behind port 0: all announce themselves first.
  constexpr uint32_t kSenders = 1u << 16;
  const auto announce = [&](uint32_t who, uint16_t port) {
    pkts[0] = frame(pool, 0, who);
    std::memset(rte_pktmbuf_mtod(pkts[0], uint8_t*), 0xff, 6);  // broadcast
    send(port, 1, false);
  };
  for (uint32_t h = 0; h < hosts; ++h) announce(h, static_cast<uint16_t>(1 + h % 3));
  for (uint32_t f = 0; f < flows; ++f) announce(kSenders + f, 0);
  uint64_t packets = 0;
  for (uint32_t b = 0; b < bursts; ++b) {
    for (uint16_t i = 0; i < kBurst; ++i) {
      const uint32_t flow = i % flows;
      pkts[i] = frame(pool, flow, kSenders + flow);
      if (pkts[i] == nullptr) return 1;
    }
    send(0, kBurst, true);
    packets += kBurst;
  }
  const vqs::app::BridgeCounters c = bridge->counters();
  if (c.flooded != hosts + flows || c.moved != 0) {
    std::fprintf(stderr, "vqs-bridge-cost: flooded %lu, moved %lu: not learned unicast\n",
                 static_cast<unsigned long>(c.flooded), static_cast<unsigned long>(c.moved));
    return 1;
  }
  std::printf("flows=%u hosts=%u packets=%lu\n", flows, hosts, static_cast<unsigned long>(packets));
  bridge.reset();
  ports.clear();
  rte_eal_cleanup();
  return 0;
}
