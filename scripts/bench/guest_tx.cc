// SPDX-License-Identifier: BSD-3-Clause
// A guest-side traffic source for scripts/bench/pvp.sh and pvp_interleaved.sh (mode
// guest-tx-fill): sends UDP frames of one size through a port EAL created (virtio_user), writing
// every byte of each frame as it is built, as a guest kernel does when it copies a socket's data
// into an skb. testpmd's txonly writes only the headers into a recycled mbuf, so a backend that
// copies finds the payload still in its own cache from the mbuf's last lap, and what copying
// costs is hidden.
//
//   vqs-guest-tx EAL-ARGS -- --size BYTES [-i]
//
// Sends on the first worker lcore. Without -i: sends on the first port and prints "Tx-pps: N"
// once a second from the main lcore (as testpmd's --stats-period does) until SIGINT or SIGTERM.
// With -i: reads the few testpmd commands pvp_interleaved.sh uses from stdin ("set portlist N",
// "start", "stop", "show port stats N", "show port summary all", "quit"), answering as testpmd
// does, so that it can stand in for testpmd's txonly there.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "guest_port.h"

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint32_t kHeaderLen = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr);

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_sent{0};
// What the sender's time goes to: frames built (sent or not), and TSC cycles spent building them
// and in rte_eth_tx_burst, so a run shows whether the guest or the backend sets the rate.
std::atomic<uint64_t> g_built{0};
std::atomic<uint64_t> g_build_cycles{0};
std::atomic<uint64_t> g_tx_cycles{0};
// Interactive mode: the port sent on (RTE_MAX_ETHPORTS: none), and what each port has sent.
std::atomic<uint16_t> g_active{0};
std::atomic<uint64_t> g_sent_by_port[RTE_MAX_ETHPORTS];

struct Source {
  rte_mempool* pool;
  uint32_t size;
};

void build_frame(rte_mbuf* m, uint32_t size, uint8_t fill) {
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  eth->dst_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x02}};
  eth->src_addr = rte_ether_addr{{0x02, 0, 0, 0, 0, 0x01}};
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  std::memset(ip, 0, sizeof(*ip));
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(size - sizeof(rte_ether_hdr)));
  ip->src_addr = rte_cpu_to_be_32(0xc0000201);  // 192.0.2.1
  ip->dst_addr = rte_cpu_to_be_32(0xc0000202);
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(ip + 1);
  udp->src_port = rte_cpu_to_be_16(9);
  udp->dst_port = rte_cpu_to_be_16(9);
  udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(size - kHeaderLen + sizeof(*udp)));
  udp->dgram_cksum = 0;
  std::memset(p + kHeaderLen, fill, size - kHeaderLen);  // the data a sender writes
  m->data_len = static_cast<uint16_t>(size);
  m->pkt_len = size;
}

int send_loop(void* arg) {
  const Source& src = *static_cast<const Source*>(arg);
  rte_mbuf* pkts[kBurst];
  uint8_t fill = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    const uint16_t port = g_active.load(std::memory_order_relaxed);
    if (port == RTE_MAX_ETHPORTS) continue;
    if (rte_pktmbuf_alloc_bulk(src.pool, pkts, kBurst) != 0) continue;
    const uint64_t t0 = rte_rdtsc();
    for (uint16_t i = 0; i < kBurst; ++i) build_frame(pkts[i], src.size, fill++);
    const uint64_t t1 = rte_rdtsc();
    const uint16_t sent = rte_eth_tx_burst(port, 0, pkts, kBurst);
    g_build_cycles.fetch_add(t1 - t0, std::memory_order_relaxed);
    g_tx_cycles.fetch_add(rte_rdtsc() - t1, std::memory_order_relaxed);
    g_built.fetch_add(kBurst, std::memory_order_relaxed);
    if (sent < kBurst) rte_pktmbuf_free_bulk(pkts + sent, kBurst - sent);
    g_sent.fetch_add(sent, std::memory_order_relaxed);
    g_sent_by_port[port].fetch_add(sent, std::memory_order_relaxed);
  }
  return 0;
}

// The interactive mode's command loop (main lcore): until "quit" or the end of stdin.
void run_commands() {
  uint16_t selected = 0;  // set portlist: used by the next start
  uint64_t last_sent[RTE_MAX_ETHPORTS] = {};
  uint64_t last_tsc[RTE_MAX_ETHPORTS] = {};
  char line[256];
  std::printf("testpmd> ");
  std::fflush(stdout);
  while (!g_stop.load() && std::fgets(line, sizeof(line), stdin) != nullptr) {
    unsigned port = 0;
    if (std::sscanf(line, "set portlist %u", &port) == 1 && port < RTE_MAX_ETHPORTS) {
      selected = static_cast<uint16_t>(port);
    } else if (std::strncmp(line, "start", 5) == 0) {
      g_active.store(selected);
    } else if (std::strncmp(line, "stop", 4) == 0) {
      g_active.store(RTE_MAX_ETHPORTS);
    } else if (std::sscanf(line, "show port stats %u", &port) == 1 && port < RTE_MAX_ETHPORTS) {
      // As testpmd: the rate since the last time this port's stats were shown.
      const uint64_t now = rte_get_tsc_cycles();
      const uint64_t sent = g_sent_by_port[port].load(std::memory_order_relaxed);
      const uint64_t pps = last_tsc[port] == 0 ? 0
                                               : (sent - last_sent[port]) * rte_get_tsc_hz() /
                                                     (now - last_tsc[port]);
      last_sent[port] = sent;
      last_tsc[port] = now;
      std::printf("  Tx-packets: %lu\n  Tx-pps: %12lu\n", static_cast<unsigned long>(sent),
                  static_cast<unsigned long>(pps));
    } else if (std::strncmp(line, "show port summary", 17) == 0) {
      uint16_t p;
      RTE_ETH_FOREACH_DEV(p) {
        char name[RTE_ETH_NAME_MAX_LEN];
        if (rte_eth_dev_get_name_by_port(p, name) == 0) std::printf("%u x %s x\n", p, name);
      }
    } else if (std::strncmp(line, "quit", 4) == 0) {
      break;
    }
    std::printf("testpmd> ");
    std::fflush(stdout);
  }
  g_stop.store(true);
}

void on_signal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  const int eal_args = rte_eal_init(argc, argv);
  if (eal_args < 0) {
    std::fprintf(stderr, "vqs-guest-tx: EAL init failed\n");
    return 1;
  }
  argc -= eal_args;
  argv += eal_args;
  uint32_t size = 0;
  bool interactive = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) size = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "-i") == 0) interactive = true;
  }
  if (size < kHeaderLen || size > 9216) {
    std::fprintf(stderr, "usage: vqs-guest-tx EAL-ARGS -- --size BYTES [-i] (%u..9216)\n",
                 kHeaderLen);
    return 2;
  }
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (rte_eth_dev_count_avail() == 0 || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-guest-tx: needs a --vdev port and a worker lcore\n");
    return 2;
  }
  const uint16_t room = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + (size > 2048 ? size : 2048));
  rte_mempool* pool =
      rte_pktmbuf_pool_create("guest_tx", 8191, 256, 0, room, static_cast<int>(rte_socket_id()));
  if (pool == nullptr) {
    std::fprintf(stderr, "vqs-guest-tx: no mbuf pool\n");
    return 1;
  }
  uint16_t port;
  RTE_ETH_FOREACH_DEV(port) {
    if (!vqs::bench::start_port(port, pool)) {
      std::fprintf(stderr, "vqs-guest-tx: port %u setup failed\n", port);
      return 1;
    }
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  g_active.store(interactive ? RTE_MAX_ETHPORTS : static_cast<uint16_t>(rte_eth_find_next(0)));
  Source src{pool, size};
  rte_eal_remote_launch(send_loop, &src, worker);
  if (interactive) {
    run_commands();
  } else {
    uint64_t last_sent = 0, last_built = 0, last_build_cycles = 0, last_tx_cycles = 0;
    while (!g_stop.load()) {
      rte_delay_us_sleep(1000 * 1000);
      const uint64_t sent = g_sent.load(std::memory_order_relaxed);
      const uint64_t built = g_built.load(std::memory_order_relaxed);
      const uint64_t build_cycles = g_build_cycles.load(std::memory_order_relaxed);
      const uint64_t tx_cycles = g_tx_cycles.load(std::memory_order_relaxed);
      const double frames = built > last_built ? static_cast<double>(built - last_built) : 1.0;
      std::printf(
          "  Tx-pps: %12lu  Built-pps: %12lu  build cycles/frame: %7.1f  tx cycles/frame: %7.1f\n",
          static_cast<unsigned long>(sent - last_sent),
          static_cast<unsigned long>(built - last_built),
          static_cast<double>(build_cycles - last_build_cycles) / frames,
          static_cast<double>(tx_cycles - last_tx_cycles) / frames);
      std::fflush(stdout);
      last_sent = sent;
      last_built = built;
      last_build_cycles = build_cycles;
      last_tx_cycles = tx_cycles;
    }
  }
  rte_eal_wait_lcore(worker);
  std::printf("sent %lu frames of %u bytes\n", static_cast<unsigned long>(g_sent.load()), size);
  RTE_ETH_FOREACH_DEV(port) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
  }
  rte_eal_cleanup();
  return 0;
}
