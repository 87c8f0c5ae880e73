// SPDX-License-Identifier: BSD-3-Clause
#include "port_pair.h"

#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_ip.h>
#include <rte_vhost.h>

#include <catch2/catch.hpp>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "interrupt_thread_park.h"
#include "virtio_user_teardown.h"

namespace vqs::test {
namespace {

int next_serial = 0;

std::string run_dir() {
  const char* dir = std::getenv("VQS_TEST_RUN_DIR");
  return dir ? dir : "/run";
}

}  // namespace

rte_mempool* interop_pool() {
  static rte_mempool* pool =
      rte_pktmbuf_pool_create("interop", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  REQUIRE(pool != nullptr);
  return pool;
}

uint16_t start_vdev_port(const std::string& name, const std::string& args, uint16_t queues,
                         uint64_t rx_offloads, uint64_t tx_offloads, uint16_t mtu,
                         bool rx_interrupts) {
  INFO("vdev " << name << "," << args);
  REQUIRE(rte_vdev_init(name.c_str(), args.c_str()) == 0);
  uint16_t port = 0;
  REQUIRE(rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0);
  rte_eth_dev_info info{};
  REQUIRE(rte_eth_dev_info_get(port, &info) == 0);
  rte_eth_conf conf{};
  conf.rxmode.mtu = mtu;
  conf.intr_conf.rxq = rx_interrupts ? 1 : 0;
  // Scattered rx and multi-segment tx where the driver has them (virtio without mergeable
  // buffers has no scattered rx).
  conf.rxmode.offloads = rx_offloads | (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER);
  conf.txmode.offloads = tx_offloads | (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
  REQUIRE(rte_eth_dev_configure(port, queues, queues, &conf) == 0);
  for (uint16_t q = 0; q < queues; ++q) {
    REQUIRE(rte_eth_rx_queue_setup(port, q, 256, rte_socket_id(), nullptr, interop_pool()) == 0);
    REQUIRE(rte_eth_tx_queue_setup(port, q, 256, rte_socket_id(), nullptr) == 0);
  }
  REQUIRE(rte_eth_dev_start(port) == 0);
  return port;
}

void stop_vdev_port(uint16_t port, const std::string& name) {
  // A virtio_user port is closed with the EAL interrupt thread parked: its link-state handler
  // is not running, so the stop's unregister succeeds (interrupt_thread_park.h), and it does
  // not run on a half-closed port.
  std::optional<InterruptThreadPark> park;
  if (is_virtio_user(port)) {
    park.emplace();
    CHECK(park->parked());
  }
  CHECK(rte_eth_dev_stop(port) == 0);
  leave_rx_eventfds_to_virtio_user(port);
  CHECK(rte_eth_dev_close(port) == 0);
  CHECK(rte_vdev_uninit(name.c_str()) == 0);
}

int mapping_count() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  REQUIRE(maps != nullptr);
  int count = 0;
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr)
    if (std::strstr(line, "/dev/hugepages") != nullptr || std::strstr(line, "/memfd:") != nullptr)
      ++count;
  std::fclose(maps);
  return count;
}

bool wait_link(uint16_t port, bool up, int timeout_ms) {
  const uint64_t end = rte_get_timer_cycles() + rte_get_timer_hz() * timeout_ms / 1000;
  while (rte_get_timer_cycles() < end) {
    rte_eth_link link{};
    rte_eth_link_get_nowait(port, &link);
    if ((link.link_status == RTE_ETH_LINK_UP) == up) return true;
    rte_delay_ms(1);
  }
  return false;
}

HostPort::HostPort(uint16_t queues, const std::string& extra_args, bool rx_interrupts) {
  const int serial = next_serial++;
  name_ = "net_vqs" + std::to_string(serial);
  socket_ = run_dir() + "/vhost" + std::to_string(serial) + ".sock";
  std::string args = "iface=" + socket_ + ",queues=" + std::to_string(queues);
  if (!extra_args.empty()) args += "," + extra_args;
  port_ = start_vdev_port(
      name_, args, queues, 0,
      RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM,
      9000, rx_interrupts);
}

HostPort::~HostPort() { stop_vdev_port(port_, name_); }

GuestPort::GuestPort(const HostPort& host, const GuestOptions& o) {
  name_ = "net_virtio_user" + std::to_string(next_serial++);
  const std::string args = "path=" + host.socket() + ",queues=" + std::to_string(o.queues) +
                           ",queue_size=256,packed_vq=" + (o.packed ? "1" : "0") +
                           ",in_order=" + (o.in_order ? "1" : "0") +
                           ",mrg_rxbuf=" + (o.mrg_rxbuf ? "1" : "0") + o.extra;
  port_ =
      start_vdev_port(name_, args, o.queues, o.rx_offloads, o.tx_offloads, o.mtu, o.rx_interrupts);
  REQUIRE(wait_link(host.port(), true));
}

GuestPort::~GuestPort() { stop_vdev_port(port_, name_); }

uint64_t negotiated_features(const std::string& socket) {
  for (int vid = 0; vid < RTE_MAX_VHOST_DEVICE; ++vid) {
    char name[PATH_MAX];
    uint64_t features = 0;
    if (rte_vhost_get_ifname(vid, name, sizeof(name)) == 0 && socket == name &&
        rte_vhost_get_negotiated_features(vid, &features) == 0)
      return features;
  }
  return 0;
}

rte_mbuf* make_packet(uint32_t len, uint32_t seed, bool tcp) {
  std::vector<uint8_t> f(len);
  for (uint32_t i = 0; i < len; ++i) f[i] = static_cast<uint8_t>(i * 29 + seed * 13 + (i >> 8));
  if (len >= 54) {
    const uint8_t eth[14] = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00};
    std::memcpy(f.data(), eth, 14);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
    std::memset(ip, 0, sizeof(*ip));
    ip->version_ihl = 0x45;
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(len - 14));
    ip->time_to_live = 64;
    ip->next_proto_id = tcp ? IPPROTO_TCP : IPPROTO_UDP;
    ip->src_addr = rte_cpu_to_be_32(0x0a000001);
    ip->dst_addr = rte_cpu_to_be_32(0x0a000002);
    if (tcp) {
      f[34 + 12] = 5 << 4;  // data offset
      f[34 + 16] = f[34 + 17] = 0;
    } else {
      f[34 + 4] = static_cast<uint8_t>((len - 34) >> 8);
      f[34 + 5] = static_cast<uint8_t>(len - 34);
      f[34 + 6] = f[34 + 7] = 0;
    }
  }
  rte_mbuf* head = rte_pktmbuf_alloc(interop_pool());
  REQUIRE(head != nullptr);
  uint32_t off = 0;
  rte_mbuf* seg = head;
  while (true) {
    const uint32_t n = std::min<uint32_t>(len - off, rte_pktmbuf_tailroom(seg));
    std::memcpy(rte_pktmbuf_append(head, static_cast<uint16_t>(n)), f.data() + off, n);
    off += n;
    if (off == len) break;
    seg = rte_pktmbuf_alloc(interop_pool());
    REQUIRE(seg != nullptr);
    REQUIRE(rte_pktmbuf_chain(head, seg) == 0);
  }
  return head;
}

std::vector<uint8_t> packet_bytes(const rte_mbuf* m) {
  std::vector<uint8_t> out(rte_pktmbuf_pkt_len(m));
  const void* p = rte_pktmbuf_read(m, 0, static_cast<uint32_t>(out.size()), out.data());
  if (p != out.data()) std::memcpy(out.data(), p, out.size());
  return out;
}

std::vector<rte_mbuf*> receive(uint16_t port, uint16_t queue, size_t count, int timeout_ms) {
  std::vector<rte_mbuf*> got;
  const uint64_t end = rte_get_timer_cycles() + rte_get_timer_hz() * timeout_ms / 1000;
  rte_mbuf* burst[32];
  while (got.size() < count && rte_get_timer_cycles() < end) {
    const uint16_t n = rte_eth_rx_burst(port, queue, burst, 32);
    got.insert(got.end(), burst, burst + n);
  }
  return got;
}

uint16_t send_all(uint16_t port, uint16_t queue, std::vector<rte_mbuf*> pkts) {
  uint16_t sent = 0;
  for (int tries = 0; tries < 1000 && sent < pkts.size(); ++tries) {
    const uint16_t n = static_cast<uint16_t>(pkts.size() - sent);
    sent += rte_eth_tx_burst(port, queue, pkts.data() + sent, n);
  }
  for (size_t i = sent; i < pkts.size(); ++i) rte_pktmbuf_free(pkts[i]);
  return sent;
}

void free_all(const std::vector<rte_mbuf*>& pkts) {
  for (rte_mbuf* m : pkts) rte_pktmbuf_free(m);
}

uint64_t xstat(uint16_t port, const std::string& name) {
  uint64_t id = 0, value = 0;
  REQUIRE(rte_eth_xstats_get_id_by_name(port, name.c_str(), &id) == 0);
  REQUIRE(rte_eth_xstats_get_by_id(port, &id, &value, 1) == 1);
  return value;
}

bool pool_full() { return rte_mempool_avail_count(interop_pool()) == interop_pool()->size; }

}  // namespace vqs::test
