// SPDX-License-Identifier: BSD-3-Clause
// vqs-burst-cost: what one datapath burst costs the host, per packet, on one CPU and without a
// second process: a simulated guest (the unit tests' SimGuest) posts a burst, the datapath takes
// it (guest TX: dequeue_burst) or fills it (guest RX: enqueue_burst), the guest takes the used
// entries back, and so on. Only the datapath call is timed (TSC cycles). Under callgrind with
// --toggle-collect on the same call (burst_cost.sh), it counts instructions per packet: unlike
// any rate on these shared two-CPU machines, that count repeats exactly, so a change to the burst
// code is judged by it before it is judged by interleaved pairs.
//
//   vqs-burst-cost --ring split|packed --direction tx|rx [--size 64] [--burst 32]
//                  [--bursts 20000] [--ring-size 1024] [--in-order]
//
// Prints one line: the settings, packets, and TSC cycles per packet (a median over chunks of
// 1000 bursts). Exits non-zero if a burst moved fewer packets than were posted.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "sim_guest.h"

namespace {

using vqs::BurstResult;
using vqs::test::SimGuest;
using vqs::test::SimMemory;
using vqs::test::SimPacket;

struct Options {
  bool packed = false;
  bool guest_tx = true;
  uint32_t size = 64;
  uint16_t burst = 32;
  uint32_t bursts = 20000;
  uint16_t ring_size = 1024;
  bool in_order = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "vqs-burst-cost: %s\nusage: vqs-burst-cost --ring split|packed --direction tx|rx "
               "[--size B] [--burst N] [--bursts N] [--ring-size N] [--in-order]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--in-order") {
      o.in_order = true;
      continue;
    }
    if (i + 1 >= argc) usage(("missing value for " + arg).c_str());
    const std::string value = argv[++i];
    if (arg == "--ring" && (value == "split" || value == "packed")) {
      o.packed = value == "packed";
    } else if (arg == "--direction" && (value == "tx" || value == "rx")) {
      o.guest_tx = value == "tx";
    } else if (arg == "--size") {
      o.size = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (arg == "--burst") {
      o.burst = static_cast<uint16_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (arg == "--bursts") {
      o.bursts = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else if (arg == "--ring-size") {
      o.ring_size = static_cast<uint16_t>(std::strtoul(value.c_str(), nullptr, 10));
    } else {
      usage(("bad option " + arg + " " + value).c_str());
    }
  }
  if (o.size < 60 || o.size > 9000) usage("--size must be 60..9000");
  if (!o.guest_tx && o.size > 2048) usage("--direction rx takes --size up to 2048 (one mbuf)");
  if (o.burst == 0 || o.burst > 256 || o.burst > o.ring_size / 2)
    usage("--burst must be 1..256 and at most half the ring");
  if (o.bursts == 0) usage("--bursts must be positive");
  return o;
}

uint64_t median(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs the bursts; returns cycles per packet (median over chunks, in hundredths) or 0 on a short
// burst.
uint64_t run(const Options& o, rte_mempool* pool) {
  uint64_t features = (1ull << vqs::kFVersion1) | (1ull << vqs::kNetFMrgRxbuf);
  if (o.packed) features |= 1ull << vqs::kFRingPacked;
  if (o.in_order) features |= 1ull << vqs::kFInOrder;
  SimMemory mem({64 << 20, 64 << 20, 8 << 20});
  SimGuest guest(mem, o.ring_size, features);
  vqs::VirtQueue vq;
  if (!vq.start(guest.setup())) {
    std::fprintf(stderr, "vqs-burst-cost: queue start failed\n");
    std::exit(1);
  }
  SimPacket packet;
  packet.data = vqs::test::make_frame(o.size, 1);
  std::vector<rte_mbuf*> pkts(o.burst);
  const uint32_t rx_buf_len = 2048;
  const uint16_t rx_bufs_per_packet =
      static_cast<uint16_t>((o.size + guest.hdr_size() + rx_buf_len - 1) / rx_buf_len);
  constexpr uint32_t kChunk = 1000;
  std::vector<uint64_t> chunk_cycles;
  uint64_t cycles = 0;
  for (uint32_t b = 0; b < o.bursts; ++b) {
    BurstResult r;
    if (o.guest_tx) {
      for (uint16_t k = 0; k < o.burst; ++k) guest.send(packet, {}, k + 1 == o.burst);
      const uint64_t t0 = rte_rdtsc_precise();
      r = vqs::dequeue_burst(vq, pool, pkts.data(), o.burst, UINT32_MAX);
      cycles += rte_rdtsc_precise() - t0;
      rte_pktmbuf_free_bulk(pkts.data(), r.packets);
      guest.take_used();
    } else {
      guest.post_rx(static_cast<uint16_t>(o.burst * rx_bufs_per_packet), rx_buf_len);
      if (rte_pktmbuf_alloc_bulk(pool, pkts.data(), o.burst) != 0) {
        std::fprintf(stderr, "vqs-burst-cost: mbuf pool empty\n");
        return 0;
      }
      for (rte_mbuf* m : pkts) {
        std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(o.size)), packet.data.data(),
                    o.size);
      }
      const uint64_t t0 = rte_rdtsc_precise();
      r = vqs::enqueue_burst(vq, pkts.data(), o.burst);
      cycles += rte_rdtsc_precise() - t0;
      rte_pktmbuf_free_bulk(pkts.data(), o.burst);
      guest.receive();
    }
    if (r.packets != o.burst) {
      std::fprintf(stderr, "vqs-burst-cost: burst %u moved %u of %u packets\n", b, r.packets,
                   o.burst);
      return 0;
    }
    if ((b + 1) % kChunk == 0 || b + 1 == o.bursts) {
      const uint32_t bursts_in_chunk = (b % kChunk) + 1;
      chunk_cycles.push_back(cycles * 100 / (uint64_t{bursts_in_chunk} * o.burst));
      cycles = 0;
    }
  }
  vq.stop();
  return median(chunk_cycles);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const std::string prefix = "vqs-burst-cost-" + std::to_string(getpid());
  std::vector<std::string> args = {
      "vqs-burst-cost", "--no-huge", "--no-shconf", "--no-pci", "-m", "64", "-l", "0",
      "--file-prefix",  prefix,      "--log-level", "*:error"};
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "vqs-burst-cost: rte_eal_init failed\n");
    return 1;
  }
  rte_mempool* pool =
      rte_pktmbuf_pool_create("burst_cost", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (pool == nullptr) {
    std::fprintf(stderr, "vqs-burst-cost: mbuf pool\n");
    return 1;
  }
  const uint64_t centi_cycles = run(o, pool);
  std::printf(
      "ring=%s direction=%s size=%u burst=%u bursts=%u ring_size=%u in_order=%d packets=%lu "
      "cycles_per_packet=%lu.%02lu\n",
      o.packed ? "packed" : "split", o.guest_tx ? "tx" : "rx", o.size, o.burst, o.bursts,
      o.ring_size, o.in_order ? 1 : 0, static_cast<unsigned long>(uint64_t{o.bursts} * o.burst),
      static_cast<unsigned long>(centi_cycles / 100),
      static_cast<unsigned long>(centi_cycles % 100));
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return centi_cycles == 0 ? 1 : 0;
}
