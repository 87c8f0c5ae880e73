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

#include "guest_port.h"

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint32_t kMaxActive = 8;
constexpr uint32_t kMaxSize = 1518;  // one default-sized mbuf per frame

struct ActiveSet {
  std::array<uint16_t, kMaxActive> ports{};
  uint32_t count = 0;  // 0: stopped
};

// One writer (the worker), so relaxed stores of running totals are enough.
struct alignas(64) SlotCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
};

std::atomic<bool> g_stop{false};
std::atomic<uint32_t> g_generation{0};  // the worker picks up a new set when it changes
ActiveSet g_set_shared;                 // written by the main lcore before the generation moves
std::array<SlotCounters, kMaxActive> g_sent;

struct Worker {
  rte_mempool* pool;
  std::vector<uint32_t> sizes;
  uint32_t size_of(uint32_t slot) const { return sizes[std::min<size_t>(slot, sizes.size() - 1)]; }
};

void build_frame(rte_mbuf* m, uint32_t size) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  eth->dst_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x02}};
  eth->src_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x01}};
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  m->data_len = static_cast<uint16_t>(size);
  m->pkt_len = size;
}

int worker_loop(void* arg) {
  const Worker& w = *static_cast<const Worker*>(arg);
  uint32_t generation = g_generation.load(std::memory_order_acquire);
  ActiveSet set = g_set_shared;
  std::array<uint64_t, kMaxActive> packets{}, bytes{};
  rte_mbuf* pkts[kBurst];
  while (!g_stop.load(std::memory_order_relaxed)) {
    const uint32_t g = g_generation.load(std::memory_order_acquire);
    if (g != generation) {
      generation = g;
      set = g_set_shared;
    }
    for (uint32_t k = 0; k < set.count; ++k) {
      if (rte_pktmbuf_alloc_bulk(w.pool, pkts, kBurst) != 0) break;
      const uint32_t size = w.size_of(k);
      for (uint16_t i = 0; i < kBurst; ++i) build_frame(pkts[i], size);
      const uint16_t sent = rte_eth_tx_burst(set.ports[k], 0, pkts, kBurst);
      if (sent < kBurst) rte_pktmbuf_free_bulk(pkts + sent, kBurst - sent);
      packets[k] += sent;
      bytes[k] += uint64_t{sent} * size;
      g_sent[k].packets.store(packets[k], std::memory_order_relaxed);
      g_sent[k].bytes.store(bytes[k], std::memory_order_relaxed);
    }
  }
  return 0;
}

// "show port stats all": the rates since the previous call.
void report(uint64_t* last_tsc, std::array<uint64_t, kMaxActive>* last_packets,
            std::array<uint64_t, kMaxActive>* last_bytes, uint32_t count) {
  const uint64_t now = rte_get_tsc_cycles();
  const double seconds =
      *last_tsc == 0 ? 0
                     : static_cast<double>(now - *last_tsc) / static_cast<double>(rte_get_tsc_hz());
  auto rate = [&](uint64_t d) {
    return seconds > 0 ? static_cast<unsigned long>(static_cast<double>(d) / seconds) : 0UL;
  };
  std::string pps, bps;
  uint64_t total = 0;
  for (uint32_t k = 0; k < kMaxActive; ++k) {
    const uint64_t p = g_sent[k].packets.load(std::memory_order_relaxed);
    const uint64_t b = g_sent[k].bytes.load(std::memory_order_relaxed);
    if (k < count) {
      total += p - (*last_packets)[k];
      pps += " " + std::to_string(rate(p - (*last_packets)[k]));
      bps += " " + std::to_string(rate(b - (*last_bytes)[k]));
    }
    (*last_packets)[k] = p;
    (*last_bytes)[k] = b;
  }
  std::printf("  Tx-pps: %12lu\n  Share-pps:%s\n  Share-Bps:%s\n", rate(total), pps.c_str(),
              bps.c_str());
  *last_tsc = now;
}

void run_commands() {
  ActiveSet selected;
  uint64_t last_tsc = 0;
  std::array<uint64_t, kMaxActive> last_packets{}, last_bytes{};
  char line[256];
  std::printf("testpmd> ");
  std::fflush(stdout);
  while (!g_stop.load() && std::fgets(line, sizeof(line), stdin) != nullptr) {
    if (std::strncmp(line, "set portlist ", 13) == 0) {
      selected = ActiveSet{};
      for (char* p = line + 13; selected.count < kMaxActive;) {
        char* end;
        const unsigned long port = std::strtoul(p, &end, 10);
        if (end == p || port >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(port)) break;
        selected.ports[selected.count++] = static_cast<uint16_t>(port);
        if (*end != ',') break;
        p = end + 1;
      }
    } else if (std::strncmp(line, "start", 5) == 0) {
      g_set_shared = selected;
      g_generation.fetch_add(1, std::memory_order_release);
    } else if (std::strncmp(line, "stop", 4) == 0) {
      g_set_shared = ActiveSet{};
      g_generation.fetch_add(1, std::memory_order_release);
    } else if (std::strncmp(line, "show port stats all", 19) == 0) {
      report(&last_tsc, &last_packets, &last_bytes, selected.count);
    } else if (std::strncmp(line, "quit", 4) == 0) {
      break;
    }
    std::printf("testpmd> ");
    std::fflush(stdout);
  }
  g_stop.store(true);
}

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
  w.pool = rte_pktmbuf_pool_create("share", 32767, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                   static_cast<int>(rte_socket_id()));
  if (w.pool == nullptr) {
    std::fprintf(stderr, "vqs-share-guest: no mbuf pool\n");
    return 1;
  }
  uint16_t port;
  RTE_ETH_FOREACH_DEV(port) {
    if (!vqs::bench::start_port(port, w.pool)) {
      std::fprintf(stderr, "vqs-share-guest: port %u setup failed\n", port);
      return 1;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  rte_eal_remote_launch(worker_loop, &w, worker);
  run_commands();
  rte_eal_wait_lcore(worker);
  RTE_ETH_FOREACH_DEV(port) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
  }
  rte_eal_cleanup();
  return 0;
}
