// SPDX-License-Identifier: BSD-3-Clause
// The guests of the noisy-neighbour benchmark (switch_vs_ovs.sh --scenarios noisy): on one
// forwarding lcore of the switch, a flooder's queue and a probe stream's queue compete, and the
// probe's one-way latency through the switch shows how long the flooder's visits keep the lcore.
//
//   vqs-noisy-guest EAL-ARGS -- [--size BYTES] [--probe-us US] [--flood 0|1]
//
// One worker lcore drives three ports of the active set: the first floods --size frames (64 B)
// as fast as its ring takes them (unless --flood 0), the second sends a 64-byte probe every
// --probe-us (20) microseconds carrying its sequence number and the TSC at sending, the third
// receives the probes (the switch forwards the second port to the third) and records each one's
// latency: TSC at reception minus TSC at sending (one process, one CPU: one clock). Reads testpmd's
// commands that switch_vs_ovs.sh sends from stdin ("set portlist A,B,C", "start", "stop",
// "show port stats all", "quit") and answers "show port stats all" with, since the previous
// one: the flooder's Tx-pps, the probe's Rx-pps, and a line
//   "Probe-latency-ns: p50 N p99 N p999 N max N lost N of N"
// (of N: the probes numbered between the highest received then and now, so probes still in
// flight at the end of the interval are not lost).
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
#include <vector>

#include "guest_commands.h"
#include "guest_frame.h"
#include "guest_port.h"

namespace {

using vqs::bench::PortList;

constexpr uint16_t kBurst = 32;
constexpr uint32_t kProbeLen = 64;
constexpr uint32_t kProbeMagic = 0x76717370;  // "vqsp"
// Latencies kept between two reports: 2^23 probes, 8 s at 1M probes/s (--probe-us 1).
constexpr uint32_t kLatencyCapacity = 1u << 23;

// The ports of the active set: "set portlist FLOOD,PROBE_TX,PROBE_RX".
struct ActiveSet {
  uint16_t flood = RTE_MAX_ETHPORTS;  // RTE_MAX_ETHPORTS: stopped
  uint16_t probe_tx = RTE_MAX_ETHPORTS;
  uint16_t probe_rx = RTE_MAX_ETHPORTS;
};

struct ProbePayload {
  uint32_t magic;
  uint32_t seq;
  uint64_t sent_tsc;
};

std::atomic<bool> g_stop{false};
vqs::bench::Published<PortList> g_active;  // empty: stopped
std::atomic<uint64_t> g_flood_sent{0};
// Probes are numbered: the loss over an interval is how far the highest number received moved,
// less how many arrived, so probes still in flight at its end are not counted lost. Both are
// published in one word (highest number + 1 above, valid probes received below, each modulo
// 2^32), so a report never pairs one's new value with the other's old one.
std::atomic<uint64_t> g_probe_progress{0};
std::vector<uint32_t> g_latency_ns(kLatencyCapacity);
std::atomic<uint64_t> g_latency_count{0};  // released after each entry is written

struct Worker {
  rte_mempool* pool;
  uint32_t size;
  uint64_t probe_interval_cycles;
  bool flood;
};

int worker_loop(void* arg) {
  const Worker& w = *static_cast<const Worker*>(arg);
  const uint64_t ns_per_cycle_q32 = (uint64_t{1000000000} << 32) / rte_get_tsc_hz();
  uint32_t seen = 0;
  PortList ports;
  ActiveSet set;
  uint32_t seq = 0;
  uint64_t next_probe = rte_rdtsc();
  rte_mbuf* pkts[kBurst];
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (g_active.take(&seen, &ports))
      set = ports.size() == 3 ? ActiveSet{ports[0], ports[1], ports[2]} : ActiveSet{};
    if (set.flood == RTE_MAX_ETHPORTS) continue;
    // The flood: whatever its ring takes.
    if (w.flood && rte_pktmbuf_alloc_bulk(w.pool, pkts, kBurst) == 0) {
      for (uint16_t i = 0; i < kBurst; ++i)
        vqs::bench::build_frame(pkts[i], w.size, RTE_ETHER_TYPE_IPV4);
      const uint16_t sent = rte_eth_tx_burst(set.flood, 0, pkts, kBurst);
      if (sent < kBurst) rte_pktmbuf_free_bulk(pkts + sent, kBurst - sent);
      g_flood_sent.fetch_add(sent, std::memory_order_relaxed);
    }
    // The probe: one frame when due.
    uint64_t now = rte_rdtsc();
    if (now >= next_probe) {
      next_probe = now + w.probe_interval_cycles;
      rte_mbuf* m = rte_pktmbuf_alloc(w.pool);
      if (m != nullptr) {
        vqs::bench::build_frame(m, kProbeLen, 0x88b5);  // IEEE local experimental
        auto* p = rte_pktmbuf_mtod_offset(m, ProbePayload*, sizeof(rte_ether_hdr));
        p->magic = kProbeMagic;
        p->seq = seq;  // numbered only once the ring took it: a refused probe is not lost
        p->sent_tsc = rte_rdtsc();
        if (rte_eth_tx_burst(set.probe_tx, 0, &m, 1) == 1) {
          ++seq;
        } else {
          rte_pktmbuf_free(m);
        }
      }
    }
    // Probes that came through.
    const uint16_t n = rte_eth_rx_burst(set.probe_rx, 0, pkts, kBurst);
    if (n == 0) continue;
    now = rte_rdtsc();
    uint64_t count = g_latency_count.load(std::memory_order_relaxed);
    const uint64_t progress = g_probe_progress.load(std::memory_order_relaxed);
    uint32_t highest = static_cast<uint32_t>(progress >> 32);
    uint32_t received = static_cast<uint32_t>(progress);
    for (uint16_t i = 0; i < n; ++i) {
      const auto* p = rte_pktmbuf_mtod_offset(pkts[i], const ProbePayload*, sizeof(rte_ether_hdr));
      if (rte_pktmbuf_data_len(pkts[i]) >= sizeof(rte_ether_hdr) + sizeof(ProbePayload) &&
          p->magic == kProbeMagic && now >= p->sent_tsc) {
        // In 128 bits: a probe left in a ring since an earlier period is seconds old.
        const auto ns = static_cast<uint64_t>(
            (static_cast<unsigned __int128>(now - p->sent_tsc) * ns_per_cycle_q32) >> 32);
        g_latency_ns[count % kLatencyCapacity] =
            static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX));
        ++count;
        ++received;
        if (static_cast<int32_t>(p->seq + 1 - highest) > 0) highest = p->seq + 1;
      }
    }
    g_latency_count.store(count, std::memory_order_release);
    g_probe_progress.store((uint64_t{highest} << 32) | received, std::memory_order_relaxed);
    rte_pktmbuf_free_bulk(pkts, n);
  }
  return 0;
}

// "show port stats all": rates and the latency distribution since the previous call.
// "show port stats all": the rates and the latency distribution since the previous call.
class Reporter {
 public:
  void report() {
    const double seconds = interval_.next();
    const uint64_t flood = g_flood_sent.load();
    const uint64_t progress = g_probe_progress.load();
    const auto highest = static_cast<uint32_t>(progress >> 32);
    const auto received = static_cast<uint32_t>(progress);
    const uint64_t count = g_latency_count.load(std::memory_order_acquire);
    // Modulo 2^32, as published.
    const uint32_t sent_d = highest - last_highest_;  // numbered meanwhile
    const uint32_t received_d = received - last_received_;
    std::printf("  Tx-pps: %12lu\n  Rx-pps: %12lu\n",
                vqs::bench::ReportInterval::rate(flood - last_flood_, seconds),
                vqs::bench::ReportInterval::rate(received_d, seconds));
    std::vector<uint32_t> lat;
    const uint64_t first =
        std::max(last_count_, count > kLatencyCapacity ? count - kLatencyCapacity : 0);
    lat.reserve(count - first);
    for (uint64_t i = first; i < count; ++i) lat.push_back(g_latency_ns[i % kLatencyCapacity]);
    std::sort(lat.begin(), lat.end());
    auto at = [&](double q) {
      return lat.empty()
                 ? 0UL
                 : static_cast<unsigned long>(lat[static_cast<size_t>(q * (lat.size() - 1))]);
    };
    std::printf("  Probe-latency-ns: p50 %lu p99 %lu p999 %lu max %lu lost %lu of %lu\n", at(0.5),
                at(0.99), at(0.999), lat.empty() ? 0UL : static_cast<unsigned long>(lat.back()),
                static_cast<unsigned long>(sent_d > received_d ? sent_d - received_d : 0),
                static_cast<unsigned long>(sent_d));
    last_flood_ = flood;
    last_highest_ = highest;
    last_received_ = received;
    last_count_ = count;
  }

 private:
  vqs::bench::ReportInterval interval_;
  uint64_t last_flood_ = 0, last_count_ = 0;
  uint32_t last_highest_ = 0, last_received_ = 0;
};

void on_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-noisy-guest: EAL init failed\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  uint32_t size = 64;
  uint32_t probe_us = 20;
  bool flood = true;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0)
      size = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--probe-us") == 0)
      probe_us = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--flood") == 0)
      flood = std::atoi(argv[++i]) != 0;
  }
  if (size < 60 || size > 9000 || probe_us == 0) {
    std::fprintf(
        stderr,
        "usage: vqs-noisy-guest EAL-ARGS -- [--size 60..9000] [--probe-us US] [--flood 0|1]\n");
    return 2;
  }
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (rte_eth_dev_count_avail() < 3 || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-noisy-guest: needs three --vdev ports and a worker lcore\n");
    return 2;
  }
  // One mbuf per frame, jumbo frames included.
  const auto data_room = static_cast<uint16_t>(
      std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE, size + RTE_PKTMBUF_HEADROOM));
  rte_mempool* pool =
      rte_pktmbuf_pool_create("noisy", 32767, 256, 0, data_room, static_cast<int>(rte_socket_id()));
  if (pool == nullptr) {
    std::fprintf(stderr, "vqs-noisy-guest: no mbuf pool\n");
    return 1;
  }
  if (!vqs::bench::start_all_ports(pool, "vqs-noisy-guest")) return 1;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Worker w{pool, size, rte_get_tsc_hz() * probe_us / 1000000, flood};
  Reporter reporter;
  vqs::bench::GuestCommands commands;
  commands.ports = 3;
  commands.start = [](const PortList& ports) { g_active.publish(ports); };
  commands.stop = [] { g_active.publish({}); };
  commands.show = [&reporter] { reporter.report(); };
  vqs::bench::serve_commands(worker_loop, &w, worker, commands, g_stop);
  vqs::bench::close_all_ports();
  return 0;
}
