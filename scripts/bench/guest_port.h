// SPDX-License-Identifier: BSD-3-Clause
// What the benchmark guests share: starting their ports.
#pragma once

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdio>

namespace vqs::bench {

// Configures and starts `port` with one queue pair, rings of the driver's default size; with
// `rx_interrupts`, its Rx queue's interrupt can be armed (rte_eth_dev_rx_intr_enable).
inline bool start_port(uint16_t port, rte_mempool* pool, bool rx_interrupts = false) {
  rte_eth_conf conf{};
  conf.intr_conf.rxq = rx_interrupts ? 1 : 0;
  return rte_eth_dev_configure(port, 1, 1, &conf) == 0 &&
         rte_eth_rx_queue_setup(port, 0, 0, rte_eth_dev_socket_id(port), nullptr, pool) == 0 &&
         rte_eth_tx_queue_setup(port, 0, 0, rte_eth_dev_socket_id(port), nullptr) == 0 &&
         rte_eth_dev_start(port) == 0;
}

// Starts every port EAL created (the --vdev ones); says which one failed, prefixed `program`.
inline bool start_all_ports(rte_mempool* pool, const char* program, bool rx_interrupts = false) {
  uint16_t port;
  RTE_ETH_FOREACH_DEV(port) {
    if (!start_port(port, pool, rx_interrupts)) {
      std::fprintf(stderr, "%s: port %u setup failed%s\n", program, port,
                   rx_interrupts ? " (Rx interrupts?)" : "");
      return false;
    }
  }
  return true;
}

// An mbuf pool for every port EAL created: each may hold a ring's worth on Rx and an uncleaned
// one on Tx (1024 each by default). nullptr, said with `program` first, when DPDK refuses.
inline rte_mempool* create_port_pool(const char* name, const char* program) {
  const unsigned mbufs = std::max(32767u, rte_eth_dev_count_avail() * 2048u + 8192u);
  rte_mempool* pool = rte_pktmbuf_pool_create(name, mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              static_cast<int>(rte_socket_id()));
  if (pool == nullptr) std::fprintf(stderr, "%s: no mbuf pool\n", program);
  return pool;
}

// At the end: every port stopped and closed (a vhost-user backend sees the guest go), then EAL.
inline void close_all_ports() {
  uint16_t port;
  RTE_ETH_FOREACH_DEV(port) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
  }
  rte_eal_cleanup();
}

}  // namespace vqs::bench
