// SPDX-License-Identifier: BSD-3-Clause
// The guest of the zero-copy benchmark (zerocopy_stall.sh): two flows leave one TX queue, one to
// an output that may stall, one to another guest port, and the second one's delivered rate shows
// whether the first one's stall holds it back.
//
//   vqs-zc-guest EAL-ARGS -- [--pps PPS] [--size-a BYTES] [--size-b BYTES] [--mac-a MAC]
//
// Ports come in pairs per switch: the first of the active set ("set portlist A,B") sends both
// flows, each paced at --pps (100000) packets per second: flow A, --size-a (1400) byte frames to
// --mac-a (02:00:00:00:00:aa, the address the stalled output answers for), and flow B,
// --size-b (64) byte frames to the second port's address. The second port announces itself with
// a broadcast every 100 ms (so the switch's bridge learns it) and counts flow B's frames. Frames
// a ring refuses are counted, not retried. Reads testpmd's commands that the script sends from
// stdin ("set portlist A,B", "start", "stop", "show port stats all", "quit") and answers
// "show port stats all" with the rates since the previous one:
//   "Flows: a-sent N b-sent N b-received N refused N"  (packets per second)
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "guest_commands.h"
#include "guest_frame.h"
#include "guest_port.h"

namespace {

using vqs::bench::build_frame;
using vqs::bench::PortList;

constexpr uint16_t kMaxBurst = 32;
constexpr uint16_t kEtherTypeA = 0x88b5;  // IEEE local experimental 1 and 2
constexpr uint16_t kEtherTypeB = 0x88b6;
const rte_ether_addr kSenderMac = vqs::bench::kGuestSrcMac;
const rte_ether_addr kReceiverMac{{0x02, 0, 0, 0, 0, 0xbb}};
const rte_ether_addr kBroadcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};

struct Counters {
  std::atomic<uint64_t> a_sent{0};
  std::atomic<uint64_t> b_sent{0};
  std::atomic<uint64_t> b_received{0};
  std::atomic<uint64_t> refused{0};
};

std::atomic<bool> g_stop{false};
vqs::bench::Published<PortList> g_active;  // {sender, receiver}; empty: stopped
Counters g_counters;

struct Worker {
  rte_mempool* pool;
  uint64_t interval_cycles;  // between two frames of one flow
  uint32_t size_a;
  uint32_t size_b;
  rte_ether_addr mac_a;
};

// Sends the frames of one flow that are due (at most a burst); returns how many the ring took.
uint16_t send_due(const Worker& w, uint16_t port, uint64_t now, uint64_t* next,
                  const rte_ether_addr& dst, uint16_t type, uint32_t size) {
  if (now < *next) return 0;
  const uint64_t due = (now - *next) / w.interval_cycles + 1;
  const auto n = static_cast<uint16_t>(std::min<uint64_t>(due, kMaxBurst));
  *next += due * w.interval_cycles;  // what a full ring refused is not made up later
  rte_mbuf* pkts[kMaxBurst];
  if (rte_pktmbuf_alloc_bulk(w.pool, pkts, n) != 0) return 0;
  for (uint16_t i = 0; i < n; ++i) build_frame(pkts[i], size, type, dst, kSenderMac);
  const uint16_t sent = rte_eth_tx_burst(port, 0, pkts, n);
  if (sent < n) rte_pktmbuf_free_bulk(pkts + sent, n - sent);
  g_counters.refused.fetch_add(n - sent, std::memory_order_relaxed);
  return sent;
}

int worker_loop(void* arg) {
  const Worker& w = *static_cast<const Worker*>(arg);
  const uint64_t hello_interval = rte_get_tsc_hz() / 10;
  uint32_t seen = 0;
  PortList set;
  uint16_t tx = RTE_MAX_ETHPORTS, rx = RTE_MAX_ETHPORTS;  // RTE_MAX_ETHPORTS: stopped
  uint64_t next_a = 0, next_b = 0, next_hello = 0;
  bool a_first = false;
  rte_mbuf* pkts[kMaxBurst];
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (g_active.take(&seen, &set)) {
      tx = set.size() == 2 ? set[0] : RTE_MAX_ETHPORTS;
      rx = set.size() == 2 ? set[1] : RTE_MAX_ETHPORTS;
      next_a = next_b = next_hello = rte_rdtsc();
    }
    if (tx == RTE_MAX_ETHPORTS) continue;
    const uint64_t now = rte_rdtsc();
    if (now >= next_hello) {
      next_hello = now + hello_interval;
      rte_mbuf* m = rte_pktmbuf_alloc(w.pool);
      if (m != nullptr) {
        build_frame(m, 64, kEtherTypeB, kBroadcast, kReceiverMac);
        if (rte_eth_tx_burst(rx, 0, &m, 1) == 0) rte_pktmbuf_free(m);
      }
    }
    // The flows take turns going first: with the ring full, each send gets the slots freed
    // since the one before, and a fixed order would hand nearly all of them to the first flow.
    a_first = !a_first;
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == a_first)
        g_counters.a_sent.fetch_add(send_due(w, tx, now, &next_a, w.mac_a, kEtherTypeA, w.size_a),
                                    std::memory_order_relaxed);
      else
        g_counters.b_sent.fetch_add(
            send_due(w, tx, now, &next_b, kReceiverMac, kEtherTypeB, w.size_b),
            std::memory_order_relaxed);
    }
    // Flow B at the receiver (flow A reaches it too while the switch floods it, not counted).
    uint16_t n = rte_eth_rx_burst(rx, 0, pkts, kMaxBurst);
    uint64_t b = 0;
    for (uint16_t i = 0; i < n; ++i) {
      const auto* eth = rte_pktmbuf_mtod(pkts[i], const rte_ether_hdr*);
      b += eth->ether_type == rte_cpu_to_be_16(kEtherTypeB) &&
           rte_is_same_ether_addr(&eth->src_addr, &kSenderMac);
    }
    if (n > 0) rte_pktmbuf_free_bulk(pkts, n);
    g_counters.b_received.fetch_add(b, std::memory_order_relaxed);
    // The sender's port receives the receiver's broadcasts: dropped here.
    n = rte_eth_rx_burst(tx, 0, pkts, kMaxBurst);
    if (n > 0) rte_pktmbuf_free_bulk(pkts, n);
  }
  return 0;
}

void on_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-zc-guest: EAL init failed\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  uint64_t pps = 100000;
  Worker w{nullptr, 0, 1400, 64, rte_ether_addr{{0x02, 0, 0, 0, 0, 0xaa}}};
  bool ok = true;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--pps") == 0)
      pps = std::strtoull(argv[++i], nullptr, 10);
    else if (std::strcmp(argv[i], "--size-a") == 0)
      w.size_a = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--size-b") == 0)
      w.size_b = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--mac-a") == 0)
      ok &= vqs::bench::parse_mac(argv[++i], &w.mac_a);
  }
  if (!ok || pps == 0 || w.size_a < 60 || w.size_a > 1518 || w.size_b < 60 || w.size_b > 1518) {
    std::fprintf(stderr,
                 "usage: vqs-zc-guest EAL-ARGS -- [--pps N] [--size-a 60..1518] "
                 "[--size-b 60..1518] [--mac-a MAC]\n");
    return 2;
  }
  w.interval_cycles = std::max<uint64_t>(1, rte_get_tsc_hz() / pps);
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (rte_eth_dev_count_avail() < 2 || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-zc-guest: needs two --vdev ports and a worker lcore\n");
    return 2;
  }
  w.pool = rte_pktmbuf_pool_create("zc", 32767, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   static_cast<int>(rte_socket_id()));
  if (w.pool == nullptr) {
    std::fprintf(stderr, "vqs-zc-guest: no mbuf pool\n");
    return 1;
  }
  if (!vqs::bench::start_all_ports(w.pool, "vqs-zc-guest")) return 1;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  vqs::bench::CounterRates<4> rates;
  vqs::bench::GuestCommands commands;
  commands.ports = 2;
  commands.start = [](const PortList& ports) { g_active.publish(ports); };
  commands.stop = [] { g_active.publish({}); };
  commands.show = [&rates] {  // the rates since the previous "show"
    const auto r = rates.next({g_counters.a_sent.load(), g_counters.b_sent.load(),
                               g_counters.b_received.load(), g_counters.refused.load()});
    std::printf("  Flows: a-sent %lu b-sent %lu b-received %lu refused %lu\n", r[0], r[1], r[2],
                r[3]);
  };
  vqs::bench::serve_commands(worker_loop, &w, worker, commands, g_stop);
  vqs::bench::close_all_ports();
  return 0;
}
