// SPDX-License-Identifier: BSD-3-Clause
// vqs-selfcheck: drives the datapath for a few seconds with a simulated guest that sends packets
// to itself (guest TX -> dequeue -> enqueue -> guest RX), compares every byte and prints rates and
// counters. The README's main command runs it until the PMD and the switch exist.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "sim_guest.h"

using namespace vqs;
using namespace vqs::test;

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint64_t kFeatures = (1ull << kFVersion1) | (1ull << kNetFMrgRxbuf) |
                               (1ull << kRingFEventIdx) | (1ull << kRingFIndirectDesc);

struct LoopResult {
  uint64_t packets = 0;
  uint64_t mismatches = 0;
  double seconds = 0;
};

LoopResult run_loop(rte_mempool* pool, uint32_t frame_len, double seconds) {
  SimMemory mem({64 << 20, 64 << 20, 8 << 20});
  SimGuest tx(mem, 256, kFeatures), rx(mem, 256, kFeatures);
  VirtQueue txq, rxq;
  if (!txq.start(tx.setup()) || !rxq.start(rx.setup())) {
    std::fprintf(stderr, "selfcheck: queue start failed\n");
    std::exit(1);
  }
  SimPacket packet;
  packet.data = make_frame(frame_len, 1);
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t start = rte_rdtsc();
  const uint64_t end = start + static_cast<uint64_t>(seconds * hz);
  LoopResult result;
  rte_mbuf* pkts[kBurst];
  while (rte_rdtsc() < end) {
    for (uint16_t i = 0; i < kBurst; ++i) tx.send(packet, {}, i + 1 == kBurst);
    const BurstResult got = dequeue_burst(txq, pool, pkts, kBurst, UINT32_MAX);
    tx.take_used();
    rx.post_rx(static_cast<uint16_t>(got.packets * ((frame_len + 12) / 1536 + 1)), 1536);
    const BurstResult put = enqueue_burst(rxq, pkts, got.packets);
    rte_pktmbuf_free_bulk(pkts, put.packets);
    if (put.packets < got.packets)
      rte_pktmbuf_free_bulk(pkts + put.packets, got.packets - put.packets);
    for (const SimPacket& p : rx.receive()) {
      ++result.packets;
      if (p.data != packet.data) ++result.mismatches;
    }
  }
  result.seconds = static_cast<double>(rte_rdtsc() - start) / hz;
  const QueueStats& ts = txq.stats();
  const QueueStats& rs = rxq.stats();
  std::printf(
      "  %5u B: %8.3f Mpps  guest TX %lu pkts %lu B, guest RX %lu pkts %lu B, "
      "drops %lu, mismatches %lu\n",
      frame_len, result.packets / result.seconds / 1e6, ts.packets, ts.bytes, rs.packets, rs.bytes,
      ts.total_drops() + rs.total_drops(), result.mismatches);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--seconds") == 0) seconds = std::atof(argv[i + 1]);
  const std::string prefix = "vqs-selfcheck-" + std::to_string(getpid());
  std::vector<std::string> args = {
      "vqs-selfcheck", "--no-huge", "--no-shconf", "--no-pci", "-m", "512", "-l", "0",
      "--file-prefix", prefix,      "--log-level", "*:error"};
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "selfcheck: rte_eal_init failed\n");
    return 1;
  }
  rte_mempool* pool =
      rte_pktmbuf_pool_create("selfcheck", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (pool == nullptr) return 1;
  std::printf(
      "vqs datapath self-check: simulated guest looping its TX into its RX, "
      "%.1f s per size (rates include the simulated guest's own work)\n",
      seconds);
  bool ok = true;
  for (uint32_t len : {64u, 1500u, 9000u}) {
    const LoopResult r = run_loop(pool, len, seconds);
    ok = ok && r.packets > 0 && r.mismatches == 0;
  }
  const bool pool_full = rte_mempool_avail_count(pool) == pool->size;
  std::printf("mbuf pool back to full: %s\n", pool_full ? "yes" : "NO");
  std::printf("self-check %s\n", ok && pool_full ? "passed" : "FAILED");
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return ok && pool_full ? 0 : 1;
}
