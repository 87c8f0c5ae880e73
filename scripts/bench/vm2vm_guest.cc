// SPDX-License-Identifier: BSD-3-Clause
// The guest of the VM-to-VM benchmark (switch_vs_ovs.sh --scenarios vm2vm): two ports on one
// switch's L2 bridge, each sending UDP frames from its own MAC address to the other's and
// receiving the other's, so that both switches learn both addresses and forward unicast, as
// between two VMs that have talked before. testpmd's flowgen, used until 2026-12-06, sends
// every frame from one fixed source address to one that never sends: every frame was flooded,
// and the one source moved between the two ports burst by burst.
//
//   vqs-vm2vm-guest EAL-ARGS -- --size BYTES
//
// One worker lcore drives the two ports of the active set ("set portlist A,B"): on each, a
// receive burst (freed) and a send burst of --size frames (one flow, headers written into each
// mbuf as testpmd's flowgen and txonly do). Reads testpmd's commands that switch_vs_ovs.sh sends
// from stdin ("set portlist A,B", "start", "stop", "show port stats all", "quit") and answers
// "show port stats all" with each active port's "Rx-pps: N  Tx-pps: N" since the previous one.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "guest_commands.h"
#include "guest_port.h"

namespace {

using vqs::bench::PortList;

constexpr uint16_t kBurst = 32;
constexpr uint32_t kHeaderLen = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr);
constexpr uint32_t kMaxSize = 1518;  // one default-sized mbuf per frame

// One writer (the worker), so relaxed stores of running totals are enough.
struct alignas(64) PortCounters {
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> sent{0};
};

std::atomic<bool> g_stop{false};
vqs::bench::Published<PortList> g_active;  // empty: stopped
std::array<PortCounters, 2> g_counters;

// The headers of the frames `from` sends to `to`: one UDP flow a direction.
std::array<uint8_t, kHeaderLen> headers(uint16_t from, uint16_t to, uint32_t size) {
  std::array<uint8_t, kHeaderLen> h{};
  auto* eth = reinterpret_cast<rte_ether_hdr*>(h.data());
  rte_eth_macaddr_get(to, &eth->dst_addr);
  rte_eth_macaddr_get(from, &eth->src_addr);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(size - sizeof(rte_ether_hdr)));
  ip->src_addr = rte_cpu_to_be_32(0xc0000200 + from);  // 192.0.2.x
  ip->dst_addr = rte_cpu_to_be_32(0xc0000200 + to);
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
  udp->src_port = rte_cpu_to_be_16(9);
  udp->dst_port = rte_cpu_to_be_16(9);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(size - kHeaderLen + sizeof(*udp)));
  return h;
}

struct Worker {
  rte_mempool* pool;
  uint32_t size;
};

int worker_loop(void* arg) {
  const Worker& w = *static_cast<const Worker*>(arg);
  uint32_t seen = 0;
  PortList ports;
  std::array<std::array<uint8_t, kHeaderLen>, 2> templates{};
  std::array<uint64_t, 2> received{}, sent{};
  rte_mbuf* pkts[kBurst];
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (g_active.take(&seen, &ports) && ports.size() == 2) {
      templates[0] = headers(ports[0], ports[1], w.size);
      templates[1] = headers(ports[1], ports[0], w.size);
    }
    if (ports.size() != 2) continue;
    for (uint32_t k = 0; k < 2; ++k) {
      const uint16_t got = rte_eth_rx_burst(ports[k], 0, pkts, kBurst);
      if (got != 0) {
        rte_pktmbuf_free_bulk(pkts, got);
        received[k] += got;
        g_counters[k].received.store(received[k], std::memory_order_relaxed);
      }
      if (rte_pktmbuf_alloc_bulk(w.pool, pkts, kBurst) != 0) continue;  // the pool refills
      for (uint16_t i = 0; i < kBurst; ++i) {
        std::memcpy(rte_pktmbuf_mtod(pkts[i], uint8_t*), templates[k].data(), kHeaderLen);
        pkts[i]->data_len = static_cast<uint16_t>(w.size);
        pkts[i]->pkt_len = w.size;
      }
      const uint16_t out = rte_eth_tx_burst(ports[k], 0, pkts, kBurst);
      if (out < kBurst) rte_pktmbuf_free_bulk(pkts + out, kBurst - out);
      sent[k] += out;
      g_counters[k].sent.store(sent[k], std::memory_order_relaxed);
    }
  }
  return 0;
}

// "show port stats all": each active port's rates since the previous call.
class Reporter {
 public:
  void report(size_t count) {
    std::array<uint64_t, 4> totals;
    for (uint32_t k = 0; k < 2; ++k) {
      totals[2 * k] = g_counters[k].received.load(std::memory_order_relaxed);
      totals[2 * k + 1] = g_counters[k].sent.load(std::memory_order_relaxed);
    }
    const auto rates = rates_.next(totals);
    for (uint32_t k = 0; k < count; ++k)
      std::printf("  Rx-pps: %12lu          Tx-pps: %12lu\n", rates[2 * k], rates[2 * k + 1]);
  }

 private:
  vqs::bench::CounterRates<4> rates_;
};

void on_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-vm2vm-guest: EAL init failed\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  Worker w{nullptr, 0};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0) w.size = static_cast<uint32_t>(std::atoi(argv[++i]));
  }
  if (w.size < 60 || w.size > kMaxSize) {
    std::fprintf(stderr, "usage: vqs-vm2vm-guest EAL-ARGS -- --size 60..%u\n", kMaxSize);
    return 2;
  }
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (rte_eth_dev_count_avail() < 2 || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-vm2vm-guest: needs two --vdev ports and a worker lcore\n");
    return 2;
  }
  w.pool = vqs::bench::create_port_pool("vm2vm", "vqs-vm2vm-guest");
  if (w.pool == nullptr) return 1;
  if (!vqs::bench::start_all_ports(w.pool, "vqs-vm2vm-guest")) return 1;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Reporter reporter;
  size_t active = 0;
  vqs::bench::GuestCommands commands;
  commands.ports = 2;
  commands.start = [&](const PortList& ports) {
    active = ports.size();
    g_active.publish(ports);
  };
  commands.stop = [&] {
    active = 0;
    g_active.publish({});
  };
  commands.show = [&] { reporter.report(active); };
  vqs::bench::serve_commands(worker_loop, &w, worker, commands, g_stop);
  vqs::bench::close_all_ports();
  return 0;
}
