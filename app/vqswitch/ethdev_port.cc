#include "ethdev_port.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>

#include <algorithm>
#include <cstring>

namespace vqs::app {
namespace {

// The ethdev name of a device string: a vdev's name before its arguments ("net_tap0,iface=t0"),
// or a PCI address as given.
std::string device_name(const std::string& device) { return device.substr(0, device.find(',')); }

std::string dpdk_error(const char* what, int rc) {
  return std::string(what) + " failed: " + rte_strerror(rc < 0 ? -rc : rc);
}

}  // namespace

std::unique_ptr<EthdevPort> EthdevPort::create(const PortConfig& config, uint16_t index,
                                               uint16_t tx_queues, uint16_t burst,
                                               bool rx_interrupts, rte_mempool* pool,
                                               std::string* error) {
  std::unique_ptr<EthdevPort> port(new EthdevPort(config, index));
  const std::string name = device_name(config.device);
  uint16_t port_id;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    const int rc = rte_dev_probe(config.device.c_str());
    if (rc != 0) {
      *error = "device " + config.device + ": " + dpdk_error("probe", rc);
      return nullptr;
    }
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
      *error = "device " + config.device + ": probed, but no ethdev named " + name;
      return nullptr;
    }
  }
  port->port_id_ = port_id;
  if (!port->start(tx_queues, burst, rx_interrupts, pool, error)) {
    *error = "device " + config.device + ": " + *error;
    return nullptr;
  }
  return port;
}

bool EthdevPort::start(uint16_t tx_queues, uint16_t burst, bool rx_interrupts, rte_mempool* pool,
                       std::string* error) {
  rte_eth_dev_info info;
  int rc = rte_eth_dev_info_get(port_id_, &info);
  if (rc != 0) {
    *error = dpdk_error("rte_eth_dev_info_get", rc);
    return false;
  }
  if (config_.queues > info.max_rx_queues) {
    *error = "has " + std::to_string(info.max_rx_queues) + " rx queues, " +
             std::to_string(config_.queues) + " configured";
    return false;
  }
  tx_queues_ = std::min<uint16_t>(tx_queues, info.max_tx_queues);
  init_queues(config_.queues, tx_queues_);

  rte_eth_conf conf{};
  conf.intr_conf.rxq = rx_interrupts ? 1 : 0;
  rc = rte_eth_dev_configure(port_id_, config_.queues, tx_queues_, &conf);
  if (rc != 0 && rx_interrupts) {
    // No rx interrupts on this device: its lcore polls it even when sleeping is allowed.
    conf.intr_conf.rxq = 0;
    rc = rte_eth_dev_configure(port_id_, config_.queues, tx_queues_, &conf);
  }
  if (rc != 0) {
    *error = dpdk_error("rte_eth_dev_configure", rc);
    return false;
  }
  rx_interrupts_ = conf.intr_conf.rxq != 0;
  if (config_.mtu != 0 && (rc = rte_eth_dev_set_mtu(port_id_, config_.mtu)) != 0) {
    *error = dpdk_error("rte_eth_dev_set_mtu", rc);
    return false;
  }
  uint16_t rx_desc = config_.rx_descriptors;
  uint16_t tx_desc = config_.tx_descriptors;
  if ((rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_desc, &tx_desc)) != 0) {
    *error = dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc", rc);
    return false;
  }
  rx_descriptors_ = rx_desc;
  const int socket = rte_eth_dev_socket_id(port_id_);
  rte_eth_rxconf rxconf = info.default_rxconf;
  // Refill before the ring runs dry: the design's min(burst, ring) / 2 unless configured.
  rxconf.rx_free_thresh = config_.rx_free_thresh != 0
                              ? config_.rx_free_thresh
                              : static_cast<uint16_t>(std::min<uint16_t>(burst, rx_desc) / 2);
  for (uint16_t q = 0; q < config_.queues; ++q) {
    rc = rte_eth_rx_queue_setup(port_id_, q, rx_desc, socket, &rxconf, pool);
    if (rc != 0) {
      *error = dpdk_error("rte_eth_rx_queue_setup", rc);
      return false;
    }
  }
  for (uint16_t q = 0; q < tx_queues_; ++q) {
    rc = rte_eth_tx_queue_setup(port_id_, q, tx_desc, socket, &info.default_txconf);
    if (rc != 0) {
      *error = dpdk_error("rte_eth_tx_queue_setup", rc);
      return false;
    }
  }
  if ((rc = rte_eth_dev_start(port_id_)) != 0) {
    *error = dpdk_error("rte_eth_dev_start", rc);
    return false;
  }
  started_ = true;
  // A bridge port sees frames for every MAC behind it; devices that cannot are fine in xconnect.
  (void)rte_eth_promiscuous_enable(port_id_);
  return true;
}

EthdevPort::~EthdevPort() {
  if (port_id_ == RTE_MAX_ETHPORTS) return;
  if (started_) (void)rte_eth_dev_stop(port_id_);
  (void)rte_eth_dev_close(port_id_);
}

bool EthdevPort::link_up() const {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port_id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

BurstResult EthdevPort::rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t max_packets,
                                 uint32_t /*max_bytes: a NIC burst cannot be cut by bytes*/) {
  BurstResult r;
  r.packets = rte_eth_rx_burst(port_id_, queue, pkts, max_packets);
  for (uint16_t i = 0; i < r.packets; ++i) {
    r.bytes += pkts[i]->pkt_len;
    pkts[i]->port = index();
  }
  return r;
}

int EthdevPort::rx_wake_fd(uint16_t queue) {
  if (!rx_interrupts_) return -1;
  const int fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id_, queue);
  return fd >= 0 ? fd : -1;
}

bool EthdevPort::arm_rx_wake(uint16_t queue, bool armed) {
  if (!rx_interrupts_) return false;
  return (armed ? rte_eth_dev_rx_intr_enable(port_id_, queue)
                : rte_eth_dev_rx_intr_disable(port_id_, queue)) == 0;
}

}  // namespace vqs::app
