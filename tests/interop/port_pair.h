// SPDX-License-Identifier: BSD-3-Clause
// Our net_vqs port and a DPDK virtio_user guest on the same vhost-user socket, in this process.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vqs::test {

rte_mempool* interop_pool();

struct GuestOptions {
  uint16_t queues = 1;
  bool mrg_rxbuf = true;
  bool in_order = false;     // VIRTIO_F_IN_ORDER: virtio_user's in-order rx/tx paths
  bool packed = false;       // VIRTIO_F_RING_PACKED: packed virtqueues (packed_vq=1)
  std::string extra = {};    // further virtio_user devargs, e.g. ",vectorized=1"
  uint64_t rx_offloads = 0;  // e.g. TCP_CKSUM: the guest negotiates GUEST_CSUM
  uint64_t tx_offloads = 0;  // e.g. TCP_CKSUM: the guest negotiates CSUM
  uint16_t mtu = 9000;
  bool rx_interrupts = false;  // intr_conf.rxq: the guest may sleep on its rx queues
};

// Creates (and starts) an ethdev from a vdev string; returns its port id.
uint16_t start_vdev_port(const std::string& name, const std::string& args, uint16_t queues,
                         uint64_t rx_offloads, uint64_t tx_offloads, uint16_t mtu,
                         bool rx_interrupts = false);
void stop_vdev_port(uint16_t port, const std::string& name);
bool wait_link(uint16_t port, bool up, int timeout_ms = 5000);

class HostPort {
 public:
  HostPort(uint16_t queues, const std::string& extra_args = "", bool rx_interrupts = false);
  ~HostPort();
  uint16_t port() const { return port_; }
  const std::string& socket() const { return socket_; }

 private:
  std::string name_, socket_;
  uint16_t port_;
};

class GuestPort {
 public:
  GuestPort(const HostPort& host, const GuestOptions& options = {});
  ~GuestPort();
  uint16_t port() const { return port_; }

 private:
  std::string name_;
  uint16_t port_;
};

// A packet of `len` bytes (chained mbufs when larger than one): Ethernet/IPv4/UDP or TCP, then a
// pattern depending on `seed`.
rte_mbuf* make_packet(uint32_t len, uint32_t seed, bool tcp = false);
std::vector<uint8_t> packet_bytes(const rte_mbuf* m);

// Polls rx on (port, queue) until `count` packets arrived or `timeout_ms` passed.
std::vector<rte_mbuf*> receive(uint16_t port, uint16_t queue, size_t count, int timeout_ms = 2000);
// Sends all of `pkts`, retrying briefly; frees what could not be sent. Returns how many were sent.
uint16_t send_all(uint16_t port, uint16_t queue, std::vector<rte_mbuf*> pkts);
void free_all(const std::vector<rte_mbuf*>& pkts);

// The features librte_vhost negotiated on the connection to `socket` (0 when there is none).
uint64_t negotiated_features(const std::string& socket);
// An xstat of `port` by name (the test fails if it does not exist).
uint64_t xstat(uint16_t port, const std::string& name);
// Mappings of hugepage files and memfds in /proc/self/maps, what guest memory is mapped from (the
// rest moves with the heap).
int mapping_count();
// Whether every mbuf of interop_pool() is back.
bool pool_full();

}  // namespace vqs::test
