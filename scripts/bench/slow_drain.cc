// SPDX-License-Identifier: BSD-3-Clause
// The stalled output of the zero-copy benchmark (zerocopy_stall.sh): a port that holds the mbufs
// sent to it until a slow consumer takes them, as a NIC's tx ring holds them until the wire
// (paused by flow control, or slower than the traffic) has sent them.
//
//   vqs-slow-drain --proc-type=secondary --file-prefix SWITCH_PREFIX [EAL-ARGS]
//       -- --ring NAME --return NAME [--mac 02:00:00:00:00:aa]
//
// A DPDK secondary process of the switch. The switch sends to a net_ring port on a tx queue whose
// rte_ring is --ring (net_ring's "ETH_RXTX<queue>_<device>"); this process takes mbufs from it at
// the rate it is told and hands them back through --return, the ring of an rx queue the switch
// polls, with both MAC addresses rewritten to --mac: the switch's bridge learns that address on
// the port and drops the frame (its destination is the port it came from), freeing it in the
// switch's own process. A lent mbuf's free callback lives in the switch's code, so it must be
// freed there, never here; only the head mbuf (the switch's pool, shared memory) is written.
//
// Reads commands from stdin: "rate PPS" (0: take nothing, a stalled output), "show" (prints
// "Drained-pps: N" since the previous one and "Held: N", the mbufs waiting in --ring), "quit".
#include <rte_eal.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "guest_frame.h"

namespace {

constexpr unsigned kBurst = 64;
// The consumer wakes once per burst's worth at the rate, within these bounds: each wake-up
// costs the CPU it shares with the guest (~10 us on a VM), so at most 5000 a second.
constexpr long kMinTickNs = 200000;  // at most 64 / 200 us = 320k packets a second
constexpr long kMaxTickNs = 2000000;

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_rate{0};
std::atomic<uint64_t> g_drained{0};

// Takes what the rate allows every tick; a credit of at most one burst carries over, so a rate
// change takes effect within a tick.
void consume(rte_ring* held, rte_ring* back, rte_ether_addr mac) {
  timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  double credit = 0;
  void* pkts[kBurst];
  while (!g_stop.load(std::memory_order_relaxed)) {
    const uint64_t rate = g_rate.load(std::memory_order_relaxed);
    const long tick = rate == 0 ? kMaxTickNs
                                : std::clamp<long>(static_cast<long>(kBurst * 1e9 / rate),
                                                   kMinTickNs, kMaxTickNs);
    next.tv_nsec += tick;
    if (next.tv_nsec >= 1000000000) {
      next.tv_nsec -= 1000000000;
      ++next.tv_sec;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr);
    credit += static_cast<double>(rate) * tick / 1e9;
    if (credit > kBurst) credit = kBurst;
    const auto want = static_cast<unsigned>(credit);
    if (want == 0) continue;
    const unsigned n = rte_ring_dequeue_burst(held, pkts, want, nullptr);
    credit -= n;
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(pkts[i]);
      if (rte_pktmbuf_data_len(m) < sizeof(rte_ether_hdr)) continue;
      auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
      eth->src_addr = mac;
      eth->dst_addr = mac;
    }
    unsigned sent = 0;
    while (sent < n && !g_stop.load(std::memory_order_relaxed))
      sent += rte_ring_enqueue_burst(back, pkts + sent, n - sent, nullptr);
    g_drained.fetch_add(n, std::memory_order_relaxed);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-slow-drain: EAL init failed (is the switch running?)\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  const char* held_name = nullptr;
  const char* back_name = nullptr;
  rte_ether_addr mac{{0x02, 0, 0, 0, 0, 0xaa}};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--ring") == 0)
      held_name = argv[++i];
    else if (std::strcmp(argv[i], "--return") == 0)
      back_name = argv[++i];
    else if (std::strcmp(argv[i], "--mac") == 0 && !vqs::bench::parse_mac(argv[++i], &mac))
      held_name = nullptr;
  }
  if (held_name == nullptr || back_name == nullptr) {
    std::fprintf(stderr, "usage: vqs-slow-drain EAL-ARGS -- --ring NAME --return NAME [--mac M]\n");
    return 2;
  }
  rte_ring* held = rte_ring_lookup(held_name);
  rte_ring* back = rte_ring_lookup(back_name);
  if (held == nullptr || back == nullptr) {
    std::fprintf(stderr, "vqs-slow-drain: no ring %s\n", held == nullptr ? held_name : back_name);
    return 1;
  }
  std::thread consumer(consume, held, back, mac);
  uint64_t last_drained = 0;
  timespec last;
  clock_gettime(CLOCK_MONOTONIC, &last);
  char line[128];
  std::printf("drain> ");
  std::fflush(stdout);
  while (std::fgets(line, sizeof(line), stdin) != nullptr) {
    unsigned long long rate;
    if (std::sscanf(line, "rate %llu", &rate) == 1) {
      g_rate.store(rate);
    } else if (std::strncmp(line, "show", 4) == 0) {
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      const double seconds =
          static_cast<double>(now.tv_sec - last.tv_sec) + (now.tv_nsec - last.tv_nsec) / 1e9;
      const uint64_t drained = g_drained.load();
      std::printf("  Drained-pps: %.0f\n  Held: %u\n",
                  seconds > 0 ? static_cast<double>(drained - last_drained) / seconds : 0.0,
                  rte_ring_count(held));
      last_drained = drained;
      last = now;
    } else if (std::strncmp(line, "quit", 4) == 0) {
      break;
    }
    std::printf("drain> ");
    std::fflush(stdout);
  }
  g_stop.store(true);
  consumer.join();
  rte_eal_cleanup();
  return 0;
}
