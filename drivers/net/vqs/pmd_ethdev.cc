// SPDX-License-Identifier: BSD-3-Clause
// eth_dev_ops of net_vqs: configuration, queues, start/stop, link, offload capabilities.
#include <rte_interrupts.h>
#include <rte_malloc.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "pmd_port.h"
#include "ring/virtqueue.h"

namespace vqs {
namespace {

int dev_configure(rte_eth_dev*) { return 0; }

int dev_infos_get(rte_eth_dev* dev, rte_eth_dev_info* info) {
  VhostDevice* device = pmd_port(dev)->device();
  const bool tso = device != nullptr && device->tso();
  info->max_mac_addrs = 1;
  info->max_rx_pktlen = kMaxFrameLen;
  info->min_mtu = RTE_ETHER_MIN_MTU;
  info->max_mtu = UINT16_MAX;  // a 64 KiB IP packet
  info->max_rx_queues = device ? device->queue_pairs() : 1;
  info->max_tx_queues = info->max_rx_queues;
  info->min_rx_bufsize = 0;
  // Guest TX: chained mbufs for large packets; checksum state and GSO as receive metadata.
  info->rx_offload_capa = RTE_ETH_RX_OFFLOAD_SCATTER | RTE_ETH_RX_OFFLOAD_TCP_CKSUM |
                          RTE_ETH_RX_OFFLOAD_UDP_CKSUM | RTE_ETH_RX_OFFLOAD_SCTP_CKSUM;
  // Guest RX: checksums are offloaded to the guest or computed; TSO needs the guest's GUEST_TSO.
  info->tx_offload_capa = RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
                          RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM |
                          RTE_ETH_TX_OFFLOAD_SCTP_CKSUM;
  if (tso) {
    info->rx_offload_capa |= RTE_ETH_RX_OFFLOAD_TCP_LRO;
    info->tx_offload_capa |= RTE_ETH_TX_OFFLOAD_TCP_TSO;
  }
  info->rx_queue_offload_capa = 0;
  info->tx_queue_offload_capa = 0;
  // The rings are the guest's: any descriptor count is accepted and ignored.
  info->rx_desc_lim.nb_max = UINT16_MAX;
  info->tx_desc_lim.nb_max = UINT16_MAX;
  info->speed_capa = RTE_ETH_LINK_SPEED_10G;
  return 0;
}

int rx_queue_setup(rte_eth_dev* dev, uint16_t queue, uint16_t, unsigned socket,
                   const rte_eth_rxconf*, rte_mempool* pool) {
  auto* q = static_cast<PmdRxQueue*>(
      rte_zmalloc_socket("net_vqs_rxq", sizeof(PmdRxQueue), RTE_CACHE_LINE_SIZE, socket));
  if (q == nullptr) return -ENOMEM;
  q->device = pmd_port(dev)->device();
  q->pool = pool;
  q->queue = queue;
  q->port_id = dev->data->port_id;
  dev->data->rx_queues[queue] = q;
  return 0;
}

int tx_queue_setup(rte_eth_dev* dev, uint16_t queue, uint16_t, unsigned socket,
                   const rte_eth_txconf*) {
  auto* q = static_cast<PmdTxQueue*>(
      rte_zmalloc_socket("net_vqs_txq", sizeof(PmdTxQueue), RTE_CACHE_LINE_SIZE, socket));
  if (q == nullptr) return -ENOMEM;
  q->device = pmd_port(dev)->device();
  q->queue = queue;
  dev->data->tx_queues[queue] = q;
  return 0;
}

void rx_queue_release(rte_eth_dev* dev, uint16_t queue) {
  rte_free(dev->data->rx_queues[queue]);
  dev->data->rx_queues[queue] = nullptr;
}

void tx_queue_release(rte_eth_dev* dev, uint16_t queue) {
  rte_free(dev->data->tx_queues[queue]);
  dev->data->tx_queues[queue] = nullptr;
}

int link_update(rte_eth_dev* dev, int) {
  VhostDevice* device = pmd_port(dev)->device();
  rte_eth_link link{};
  link.link_speed = RTE_ETH_SPEED_NUM_10G;
  link.link_duplex = RTE_ETH_LINK_FULL_DUPLEX;
  link.link_autoneg = RTE_ETH_LINK_FIXED;
  link.link_status = device != nullptr && device->link_up() && dev->data->dev_started
                         ? RTE_ETH_LINK_UP
                         : RTE_ETH_LINK_DOWN;
  return rte_eth_linkstatus_set(dev, &link);
}

// Rx interrupts: one epoll fd per rx queue, which the application registers once; VhostDevice
// keeps the current guest's kickfd in it, so a guest that reconnects (new kickfd) still wakes it.
void uninstall_rx_interrupts(rte_eth_dev* dev) {
  rte_intr_handle* handle = dev->intr_handle;
  if (handle == nullptr) return;
  VhostDevice* device = pmd_port(dev)->device();
  for (int q = 0; q < rte_intr_nb_efd_get(handle); ++q) {
    if (device != nullptr) device->set_kick_waiter(rx_vring(q), -1);
    const int fd = rte_intr_efds_index_get(handle, q);
    if (fd >= 0) close(fd);
  }
  rte_intr_vec_list_free(handle);
  rte_intr_instance_free(handle);
  dev->intr_handle = nullptr;
}

int install_rx_interrupts(rte_eth_dev* dev) {
  const uint16_t queues = dev->data->nb_rx_queues;
  rte_intr_handle* handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (handle == nullptr) return -ENOMEM;
  dev->intr_handle = handle;
  // Counter size 0: EAL must not read from our epoll fds when they fire.
  if (rte_intr_type_set(handle, RTE_INTR_HANDLE_VDEV) != 0 ||
      rte_intr_efd_counter_size_set(handle, 0) != 0 ||
      rte_intr_vec_list_alloc(handle, nullptr, queues) != 0 ||
      rte_intr_max_intr_set(handle, queues + 1) != 0) {
    uninstall_rx_interrupts(dev);
    return -ENOMEM;
  }
  for (uint16_t q = 0; q < queues; ++q) {
    const int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0 || rte_intr_efds_index_set(handle, q, epfd) != 0) {
      const int err = epfd < 0 ? errno : ENOMEM;
      if (epfd >= 0) close(epfd);
      uninstall_rx_interrupts(dev);  // closes the q fds made so far (nb_efd counts them)
      return -err;
    }
    // Counted as soon as it exists, so that an error later closes exactly what was opened.
    rte_intr_nb_efd_set(handle, q + 1);
    rte_intr_vec_list_index_set(handle, q, RTE_INTR_VEC_RXTX_OFFSET + q);
    pmd_port(dev)->device()->set_kick_waiter(rx_vring(q), epfd);
  }
  return 0;
}

int rx_queue_intr_enable(rte_eth_dev* dev, uint16_t queue) {
  pmd_port(dev)->device()->arm_kicks(rx_vring(queue), true);
  return 0;
}

int rx_queue_intr_disable(rte_eth_dev* dev, uint16_t queue) {
  pmd_port(dev)->device()->arm_kicks(rx_vring(queue), false);
  return 0;
}

int dev_start(rte_eth_dev* dev) {
  // Rebuilt on every start: the number of rx queues or intr_conf may have changed since.
  uninstall_rx_interrupts(dev);
  if (dev->data->dev_conf.intr_conf.rxq) {
    const int ret = install_rx_interrupts(dev);
    if (ret != 0) return ret;
  }
  pmd_port(dev)->device()->set_datapath_enabled(true);
  for (uint16_t i = 0; i < dev->data->nb_rx_queues; ++i)
    dev->data->rx_queue_state[i] = RTE_ETH_QUEUE_STATE_STARTED;
  for (uint16_t i = 0; i < dev->data->nb_tx_queues; ++i)
    dev->data->tx_queue_state[i] = RTE_ETH_QUEUE_STATE_STARTED;
  dev->data->dev_started = 1;
  link_update(dev, 0);
  return 0;
}

int dev_stop(rte_eth_dev* dev) {
  // Returns once no lcore is inside a burst of this port.
  pmd_port(dev)->device()->set_datapath_enabled(false);
  dev->data->dev_started = 0;
  for (uint16_t i = 0; i < dev->data->nb_rx_queues; ++i)
    dev->data->rx_queue_state[i] = RTE_ETH_QUEUE_STATE_STOPPED;
  for (uint16_t i = 0; i < dev->data->nb_tx_queues; ++i)
    dev->data->tx_queue_state[i] = RTE_ETH_QUEUE_STATE_STOPPED;
  link_update(dev, 0);
  return 0;
}

}  // namespace

int pmd_close(rte_eth_dev* dev) {
  if (rte_eal_process_type() != RTE_PROC_PRIMARY) return 0;
  PmdPort* port = pmd_port(dev);
  if (port == nullptr || port->device() == nullptr) return 0;  // closed already
  if (dev->data->dev_started) dev_stop(dev);
  uninstall_rx_interrupts(dev);
  port->close_device();  // unregisters the socket: the guest sees the backend go away
  for (uint16_t i = 0; i < dev->data->nb_rx_queues; ++i) rx_queue_release(dev, i);
  for (uint16_t i = 0; i < dev->data->nb_tx_queues; ++i) tx_queue_release(dev, i);
  // PmdPort stays (only its device is gone, which makes close idempotent); ethdev frees
  // dev_private and mac_addrs when the port is released.
  return 0;
}

namespace {

int accept(rte_eth_dev*) { return 0; }

int mtu_set(rte_eth_dev*, uint16_t mtu) { return mtu >= RTE_ETHER_MIN_MTU ? 0 : -EINVAL; }

}  // namespace

void PmdPort::on_link_change(bool) {
  rte_eth_dev* dev = &rte_eth_devices[port_id_];
  if (!dev->data->dev_started) return;
  link_update(dev, 0);
  rte_eth_dev_callback_process(dev, RTE_ETH_EVENT_INTR_LSC, nullptr);
}

void PmdPort::on_vring_state(uint16_t vring, bool enabled) {
  VQS_PMD_LOG(INFO, "port %u: vring %u (%s queue %u) %s", port_id_, vring,
              is_guest_rx_vring(vring) ? "tx" : "rx", queue_of_vring(vring),
              enabled ? "enabled" : "disabled");
  rte_eth_dev_callback_process(&rte_eth_devices[port_id_], RTE_ETH_EVENT_QUEUE_STATE, nullptr);
}

const eth_dev_ops kPmdOps = [] {
  eth_dev_ops ops{};
  ops.dev_configure = dev_configure;
  ops.dev_start = dev_start;
  ops.dev_stop = dev_stop;
  ops.dev_close = pmd_close;
  ops.promiscuous_enable = accept;
  ops.promiscuous_disable = accept;
  ops.allmulticast_enable = accept;
  ops.allmulticast_disable = accept;
  ops.link_update = link_update;
  ops.stats_get = pmd_stats_get;
  ops.stats_reset = pmd_stats_reset;
  ops.xstats_get = pmd_xstats_get;
  ops.xstats_get_names = pmd_xstats_get_names;
  ops.xstats_reset = pmd_xstats_reset;
  ops.dev_infos_get = dev_infos_get;
  ops.mtu_set = mtu_set;
  ops.rx_queue_setup = rx_queue_setup;
  ops.tx_queue_setup = tx_queue_setup;
  ops.rx_queue_release = rx_queue_release;
  ops.tx_queue_release = tx_queue_release;
  ops.rx_queue_intr_enable = rx_queue_intr_enable;
  ops.rx_queue_intr_disable = rx_queue_intr_disable;
  return ops;
}();

}  // namespace vqs
