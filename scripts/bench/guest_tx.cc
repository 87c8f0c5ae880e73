// A guest-side traffic source for scripts/bench/pvp.sh (mode guest-tx-fill): sends UDP frames of
// one size through the port EAL created (virtio_user), writing every byte of each frame as it is
// built, as a guest kernel does when it copies a socket's data into an skb. testpmd's txonly
// writes only the headers into a recycled mbuf, so a backend that copies finds the payload still
// in its own cache from the mbuf's last lap, and what copying costs is hidden.
//
//   vqs-guest-tx EAL-ARGS -- --size BYTES
//
// Sends on the first worker lcore; prints "Tx-pps: N" once a second from the main lcore (as
// testpmd's --stats-period does) until SIGINT or SIGTERM.
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

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint32_t kHeaderLen = sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) + sizeof(rte_udp_hdr);

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_sent{0};

struct Source {
  uint16_t port;
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
    if (rte_pktmbuf_alloc_bulk(src.pool, pkts, kBurst) != 0) continue;
    for (uint16_t i = 0; i < kBurst; ++i) build_frame(pkts[i], src.size, fill++);
    const uint16_t sent = rte_eth_tx_burst(src.port, 0, pkts, kBurst);
    if (sent < kBurst) rte_pktmbuf_free_bulk(pkts + sent, kBurst - sent);
    g_sent.fetch_add(sent, std::memory_order_relaxed);
  }
  return 0;
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
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--size") == 0 && i + 1 < argc) size = std::atoi(argv[++i]);
  }
  if (size < kHeaderLen || size > 9216) {
    std::fprintf(stderr, "usage: vqs-guest-tx EAL-ARGS -- --size BYTES (%u..9216)\n", kHeaderLen);
    return 2;
  }
  const uint16_t port = static_cast<uint16_t>(rte_eth_find_next(0));
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (port == RTE_MAX_ETHPORTS || worker >= RTE_MAX_LCORE) {
    std::fprintf(stderr, "vqs-guest-tx: needs a --vdev port and a worker lcore\n");
    return 2;
  }
  const uint16_t room = static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + (size > 2048 ? size : 2048));
  rte_mempool* pool =
      rte_pktmbuf_pool_create("guest_tx", 8191, 256, 0, room, static_cast<int>(rte_socket_id()));
  rte_eth_conf conf{};
  if (pool == nullptr || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 0, rte_eth_dev_socket_id(port), nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 0, rte_eth_dev_socket_id(port), nullptr) != 0 ||
      rte_eth_dev_start(port) != 0) {
    std::fprintf(stderr, "vqs-guest-tx: port %u setup failed\n", port);
    return 1;
  }
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Source src{port, pool, size};
  rte_eal_remote_launch(send_loop, &src, worker);
  uint64_t last = 0;
  while (!g_stop.load()) {
    rte_delay_us_sleep(1000 * 1000);
    const uint64_t now = g_sent.load(std::memory_order_relaxed);
    std::printf("  Tx-pps: %12lu\n", static_cast<unsigned long>(now - last));
    std::fflush(stdout);
    last = now;
  }
  rte_eal_wait_lcore(worker);
  std::printf("sent %lu frames of %u bytes\n", static_cast<unsigned long>(g_sent.load()), size);
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  rte_eal_cleanup();
  return 0;
}
