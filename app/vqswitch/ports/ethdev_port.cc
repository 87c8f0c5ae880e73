// SPDX-License-Identifier: BSD-3-Clause
#include "ports/ethdev_port.h"

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_pci.h>

#include "datapath/net_offload.h"

#include <algorithm>
#include <cstring>

namespace vqs::app {
namespace {

std::string dpdk_error(const char* what, int rc) {
  return std::string(what) + " failed: " + rte_strerror(rc < 0 ? -rc : rc);
}

// Whether a segment after the head is an external buffer (a guest's, lent by zero-copy dequeue)
// that `policy` does not let the device have as it is.
bool must_copy(const rte_mbuf* m, LentPolicy policy) {
  for (const rte_mbuf* seg = m->next; seg != nullptr; seg = seg->next) {
    if (!RTE_MBUF_HAS_EXTBUF(seg)) continue;
    if (policy == LentPolicy::kCopy || seg->buf_iova == RTE_BAD_IOVA) return true;
  }
  return false;
}

}  // namespace

// The ethdev name of a device string: a vdev's name before its arguments ("net_tap0,iface=t0"),
// or a PCI address in EAL's full form ("03:00.0" is 0000:03:00.0).
std::string ethdev_name(const std::string& device) {
  const std::string name = device.substr(0, device.find(','));
  rte_pci_addr addr;
  if (rte_pci_addr_parse(name.c_str(), &addr) != 0) return name;
  char full[PCI_PRI_STR_SIZE];
  rte_pci_device_name(&addr, full, sizeof(full));
  return full;
}

LentPolicy lent_policy(bool dma, bool multi_segs, bool dma_mappable) {
  if (!multi_segs) return LentPolicy::kCopy;
  if (!dma) return LentPolicy::kAsIs;
  return dma_mappable ? LentPolicy::kAsIsIfDmaReady : LentPolicy::kCopy;
}

std::unique_ptr<EthdevPort> EthdevPort::create(const PortConfig& config, uint16_t index,
                                               uint16_t tx_queues, uint16_t burst,
                                               bool rx_interrupts, rte_mempool* pool,
                                               std::string* error) {
  std::unique_ptr<EthdevPort> port(new EthdevPort(config, index));
  const std::string name = ethdev_name(config.device);
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
    port->probed_ = config.device;
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
  const int rc = rte_eth_dev_info_get(port_id_, &info);
  if (rc != 0) {
    *error = dpdk_error("rte_eth_dev_info_get", rc);
    return false;
  }
  if (!check_queue_counts(info, error)) return false;
  tx_queues_ = std::min<uint16_t>(tx_queues, info.max_tx_queues);
  device_ = info.device;
  pool_ = pool;
  rte_eth_conf conf = make_device_conf(info, rx_interrupts);
  if (!configure(info, &conf, error) || !setup_queues(info, conf, burst, pool, error)) return false;
  if (const int start_rc = rte_eth_dev_start(port_id_); start_rc != 0) {
    *error = dpdk_error("rte_eth_dev_start", start_rc);
    return false;
  }
  started_ = true;
  // A bridge port sees frames for every MAC behind it; devices that cannot are fine in xconnect.
  (void)rte_eth_promiscuous_enable(port_id_);
  return true;
}

bool EthdevPort::check_queue_counts(const rte_eth_dev_info& info, std::string* error) const {
  if (config_.queues > info.max_rx_queues) {
    *error = "has " + std::to_string(info.max_rx_queues) + " rx queues, " +
             std::to_string(config_.queues) + " configured";
    return false;
  }
  if (info.max_tx_queues == 0) {
    *error = "has no tx queues";
    return false;
  }
  return true;
}

rte_eth_conf EthdevPort::make_device_conf(const rte_eth_dev_info& info, bool rx_interrupts) {
  rte_eth_conf conf{};
  // What guests leave to the output (checksums, TSO) and chained mbufs (frames over one mbuf),
  // where the device has them; tx_prepare() covers the rest in software or drops it, counted.
  // A vdev (tap, af_packet, ring, null ...) reads mbufs with the CPU; anything else may DMA.
  dma_ = std::strcmp(rte_bus_name(rte_dev_bus(info.device)), "vdev") != 0;
  tx_offloads_ =
      info.tx_offload_capa &
      (RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM |
       RTE_ETH_TX_OFFLOAD_TCP_TSO | RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
  conf.txmode.offloads = tx_offloads_;
  lent_ = lent_policy(dma_, multi_segs(), false);
  if (config_.mtu != 0) {
    conf.rxmode.mtu = config_.mtu;
    // Frames larger than one mbuf arrive chained, where the device can do it.
    const uint32_t frame = uint32_t{config_.mtu} + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 8;
    if (frame > RTE_MBUF_DEFAULT_DATAROOM)
      conf.rxmode.offloads |= info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER;
  }
  if (config_.queues > 1) {
    // Spread flows over the rx queues.
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf =
        info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
  }
  conf.intr_conf.rxq = rx_interrupts ? 1 : 0;
  return conf;
}

// rte_eth_dev_configure, stepping back from what some devices refuse; then the MTU.
bool EthdevPort::configure(const rte_eth_dev_info& info, rte_eth_conf* conf, std::string* error) {
  int rc = rte_eth_dev_configure(port_id_, config_.queues, tx_queues_, conf);
  if (rc != 0 && tx_queues_ != config_.queues) {
    // Some devices (net_tap) want as many tx queues as rx queues: the lcores then share them.
    tx_queues_ = std::min<uint16_t>(config_.queues, info.max_tx_queues);
    rc = rte_eth_dev_configure(port_id_, config_.queues, tx_queues_, conf);
  }
  if (rc != 0 && conf->intr_conf.rxq != 0) {
    // No rx interrupts on this device: its lcore polls it even when sleeping is allowed.
    conf->intr_conf.rxq = 0;
    rc = rte_eth_dev_configure(port_id_, config_.queues, tx_queues_, conf);
  }
  if (rc != 0) {
    *error = dpdk_error("rte_eth_dev_configure", rc) + " (" + std::to_string(config_.queues) +
             " rx, " + std::to_string(tx_queues_) + " tx queues)";
    return false;
  }
  init_queues(config_.queues, tx_queues_);
  rx_interrupts_ = conf->intr_conf.rxq != 0;
  if (config_.mtu != 0 && (rc = rte_eth_dev_set_mtu(port_id_, config_.mtu)) != 0) {
    *error = dpdk_error("rte_eth_dev_set_mtu", rc);
    return false;
  }
  return true;
}

bool EthdevPort::setup_queues(const rte_eth_dev_info& info, const rte_eth_conf& conf,
                              uint16_t burst, rte_mempool* pool, std::string* error) {
  uint16_t rx_desc = config_.rx_descriptors;
  uint16_t tx_desc = config_.tx_descriptors;
  int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_desc, &tx_desc);
  if (rc != 0) {
    *error = dpdk_error("rte_eth_dev_adjust_nb_rx_tx_desc", rc);
    return false;
  }
  const int socket = rte_eth_dev_socket_id(port_id_);
  rte_eth_rxconf rxconf = info.default_rxconf;
  // Refill before the ring runs dry: min(burst, ring) / 2 unless configured — but never below
  // the driver's own default, which some drivers need for their fast rx paths (i40e and ixgbe
  // fall back to scalar rx below 32).
  rxconf.rx_free_thresh =
      config_.rx_free_thresh != 0
          ? config_.rx_free_thresh
          : std::max<uint16_t>(info.default_rxconf.rx_free_thresh,
                               static_cast<uint16_t>(std::min<uint16_t>(burst, rx_desc) / 2));
  rxconf.offloads = conf.rxmode.offloads;
  for (uint16_t q = 0; q < config_.queues; ++q) {
    if ((rc = rte_eth_rx_queue_setup(port_id_, q, rx_desc, socket, &rxconf, pool)) != 0) {
      *error = dpdk_error("rte_eth_rx_queue_setup", rc);
      return false;
    }
  }
  rte_eth_txconf txconf = info.default_txconf;
  txconf.offloads = conf.txmode.offloads;
  for (uint16_t q = 0; q < tx_queues_; ++q) {
    if ((rc = rte_eth_tx_queue_setup(port_id_, q, tx_desc, socket, &txconf)) != 0) {
      *error = dpdk_error("rte_eth_tx_queue_setup", rc);
      return false;
    }
  }
  return true;
}

EthdevPort::~EthdevPort() {
  if (port_id_ != RTE_MAX_ETHPORTS) {
    if (started_) (void)rte_eth_dev_stop(port_id_);
    (void)rte_eth_dev_close(port_id_);
  }
  // A device we probed is detached too, so that a port added later may probe it again.
  if (!probed_.empty()) {
    const std::string name = ethdev_name(probed_);
    rte_pci_addr addr;
    const bool pci = rte_pci_addr_parse(name.c_str(), &addr) == 0;
    (void)rte_eal_hotplug_remove(pci ? "pci" : "vdev", name.c_str());
  }
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

uint16_t EthdevPort::tx_prepare(uint16_t queue, rte_mbuf** pkts, uint16_t count) {
  constexpr uint64_t kRequests = RTE_MBUF_F_TX_L4_MASK | RTE_MBUF_F_TX_IP_CKSUM |
                                 RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG;
  uint16_t kept = 0;
  bool requests = false;
  for (uint16_t i = 0; i < count; ++i) {
    rte_mbuf* m = pkts[i];
    if (lent_ != LentPolicy::kAsIs && m->nb_segs > 1 && must_copy(m, lent_)) {
      // Into our own mbufs (one, when it fits); the original goes, returning the guest's buffer.
      rte_mbuf* copy = rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX);
      rte_pktmbuf_free(m);
      if (copy == nullptr) {
        tx_counters(queue).count_drop(SwitchDrop::kMbufExhausted);
        continue;
      }
      m = copy;
    }
    bool sendable = m->nb_segs == 1 || (tx_offloads_ & RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
    const uint64_t request = m->ol_flags & kRequests;
    if (sendable && request != 0) {
      uint64_t needs = 0;
      if (request & RTE_MBUF_F_TX_IP_CKSUM) needs |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
      if ((request & RTE_MBUF_F_TX_L4_MASK) == RTE_MBUF_F_TX_TCP_CKSUM)
        needs |= RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
      if ((request & RTE_MBUF_F_TX_L4_MASK) == RTE_MBUF_F_TX_UDP_CKSUM)
        needs |= RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
      if (request & RTE_MBUF_F_TX_TCP_SEG) needs |= RTE_ETH_TX_OFFLOAD_TCP_TSO;
      if (request & RTE_MBUF_F_TX_UDP_SEG) needs |= UINT64_MAX;  // never enabled here
      if ((needs & tx_offloads_) == needs) {
        requests = true;
      } else {
        // Done in software: only on a frame no one else reads (the bridge copies before it
        // shares a frame that needs changing), and never segmentation.
        sendable = RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1 && complete_tx_checksum(m);
      }
    }
    if (sendable) {
      pkts[kept++] = m;
    } else {
      rte_pktmbuf_free(m);
      tx_counters(queue).count_drop(SwitchDrop::kTxUnsupported);
    }
  }
  if (!requests) return kept;
  // Device-specific fix-ups of offload requests (pseudo-header sums and the like). It stops at
  // the first packet the device refuses: that one is dropped, the rest prepared in turn.
  uint16_t ready = 0;
  for (uint16_t next = 0; next < kept;) {
    const uint16_t n = rte_eth_tx_prepare(port_id_, queue, pkts + next, kept - next);
    if (ready != next) std::memmove(pkts + ready, pkts + next, n * sizeof(*pkts));
    ready += n;
    next += n;
    if (next < kept) {
      rte_pktmbuf_free(pkts[next++]);
      tx_counters(queue).count_drop(SwitchDrop::kTxUnsupported);
    }
  }
  return ready;
}

bool EthdevPort::watch_rx_wake(uint16_t queue, int epfd, bool add, void* data) {
  // EAL's own event entry for the queue: rte_epoll_wait then clears the interrupt as the
  // device's handle type requires (reads a VFIO/UIO eventfd, leaves a net_tap queue fd alone).
  return rx_interrupts_ &&
         rte_eth_dev_rx_intr_ctl_q(port_id_, queue, epfd,
                                   add ? RTE_INTR_EVENT_ADD : RTE_INTR_EVENT_DEL, data) == 0;
}

bool EthdevPort::arm_rx_wake(uint16_t queue, bool armed) {
  if (!rx_interrupts_) return false;
  return (armed ? rte_eth_dev_rx_intr_enable(port_id_, queue)
                : rte_eth_dev_rx_intr_disable(port_id_, queue)) == 0;
}

}  // namespace vqs::app
