// SPDX-License-Identifier: BSD-3-Clause
// The guest of the weight-share benchmark (switch_vs_ovs.sh --scenarios share): several ports
// flooding one switch lcore at once, each with its own frame size, so that what the switch takes
// from each (its share) shows whether the per-queue weights hold under overload.
//
//   vqs-share-guest EAL-ARGS -- --sizes BYTES[,BYTES...]
//
// One worker lcore drives the ports of the active set ("set portlist A,B,C"): the k-th sends
// frames of the k-th size (the last size repeats), a burst at a time, as fast as its ring takes
// them. A flooded ring takes only what the switch drained, so each port's Tx rate is the switch's
// intake from it. Reads testpmd's commands that switch_vs_ovs.sh sends from stdin ("set portlist
// ...", "start", "stop", "show port stats all", "quit") and answers "show port stats all" with,
// since the previous one: the total Tx-pps and the lines
//   "Share-pps: N N N" and "Share-Bps: N N N"  (per active port, in the portlist's order)
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "guest_commands.h"
#include "guest_frame.h"
#include "guest_port.h"

namespace {

using vqs::bench::PortList;

constexpr uint16_t kBurst = 32;
constexpr uint32_t kMaxActive = 8;
constexpr uint32_t kMaxSize = 1518;  // one default-sized mbuf per frame

// One writer (the worker), so relaxed stores of running totals are enough.
struct alignas(64) SlotCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
};

std::atomic<bool> g_stop{false};
vqs::bench::Published<PortList> g_active;  // empty: stopped
std::array<SlotCounters, kMaxActive> g_sent;

struct Worker {
  rte_mempool* pool;
  std::vector<uint32_t> sizes;
  uint32_t size_of(uint32_t slot) const { return sizes[std::min<size_t>(slot, sizes.size() - 1)]; }
};

int worker_loop(void* arg) {
  const Worker& w = *static_cast<const Worker*>(arg);
  uint32_t seen = 0;
  PortList ports;
  std::array<uint64_t, kMaxActive> packets{}, bytes{};
  rte_mbuf* pkts[kBurst];
  while (!g_stop.load(std::memory_order_relaxed)) {
    g_active.take(&seen, &ports);
    for (uint32_t k = 0; k < ports.size(); ++k) {
      if (rte_pktmbuf_alloc_bulk(w.pool, pkts, kBurst) != 0) continue;  // the pool refills
      const uint32_t size = w.size_of(k);
      for (uint16_t i = 0; i < kBurst; ++i)
        vqs::bench::build_frame(pkts[i], size, RTE_ETHER_TYPE_IPV4);
      const uint16_t sent = rte_eth_tx_burst(ports[k], 0, pkts, kBurst);
      if (sent < kBurst) rte_pktmbuf_free_bulk(pkts + sent, kBurst - sent);
      packets[k] += sent;
      bytes[k] += uint64_t{sent} * size;
      g_sent[k].packets.store(packets[k], std::memory_order_relaxed);
      g_sent[k].bytes.store(bytes[k], std::memory_order_relaxed);
    }
  }
  return 0;
}

// "show port stats all": the rates since the previous call, for the `count` active ports.
class Reporter {
 public:
  void report(size_t count) {
    const double seconds = interval_.next();
    std::string pps, bps;
    uint64_t total = 0;
    for (uint32_t k = 0; k < kMaxActive; ++k) {
      const uint64_t p = g_sent[k].packets.load(std::memory_order_relaxed);
      const uint64_t b = g_sent[k].bytes.load(std::memory_order_relaxed);
      if (k < count) {
        total += p - last_packets_[k];
        // Appended piece by piece: " " + to_string() draws a false -Wrestrict from GCC 12 -O3.
        pps += ' ';
        pps += std::to_string(vqs::bench::ReportInterval::rate(p - last_packets_[k], seconds));
        bps += ' ';
        bps += std::to_string(vqs::bench::ReportInterval::rate(b - last_bytes_[k], seconds));
      }
      last_packets_[k] = p;
      last_bytes_[k] = b;
    }
    std::printf("  Tx-pps: %12lu\n  Share-pps:%s\n  Share-Bps:%s\n",
                vqs::bench::ReportInterval::rate(total, seconds), pps.c_str(), bps.c_str());
  }

 private:
  vqs::bench::ReportInterval interval_;
  std::array<uint64_t, kMaxActive> last_packets_{}, last_bytes_{};
};

void on_signal(int) { g_stop.store(true); }

bool parse_sizes(const char* text, std::vector<uint32_t>* sizes) {
  for (const char* p = text;;) {
    char* end;
    const unsigned long size = std::strtoul(p, &end, 10);
    if (end == p || size < 60 || size > kMaxSize) return false;
    sizes->push_back(static_cast<uint32_t>(size));
    if (*end == '\0') return true;
    if (*end != ',') return false;
    p = end + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-share-guest: EAL init failed\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  Worker w{nullptr, {}};
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--sizes") == 0 && !parse_sizes(argv[++i], &w.sizes)) w.sizes.clear();
  }
  if (w.sizes.empty()) {
    std::fprintf(stderr, "usage: vqs-share-guest EAL-ARGS -- --sizes 60..1518[,60..1518...]\n");
    return 2;
  }
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (rte_eth_dev_count_avail() == 0 || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-share-guest: needs --vdev ports and a worker lcore\n");
    return 2;
  }
  w.pool = vqs::bench::create_port_pool("share", "vqs-share-guest");
  if (w.pool == nullptr) return 1;
  if (!vqs::bench::start_all_ports(w.pool, "vqs-share-guest")) return 1;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Reporter reporter;
  size_t active = 0;
  vqs::bench::GuestCommands commands;
  commands.start = [&](const PortList& ports) {
    active = std::min<size_t>(ports.size(), kMaxActive);
    g_active.publish(PortList(ports.begin(), ports.begin() + static_cast<long>(active)));
  };
  commands.stop = [&] { g_active.publish({}); };
  commands.show = [&] { reporter.report(active); };
  vqs::bench::serve_commands(worker_loop, &w, worker, commands, g_stop);
  vqs::bench::close_all_ports();
  return 0;
}
