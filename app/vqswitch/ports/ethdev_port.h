// SPDX-License-Identifier: BSD-3-Clause
// A NIC port: any DPDK ethdev (PCI, net_tap, net_af_packet, net_null ...), one rx queue per
// configured queue and one tx queue per forwarding lcore (fewer when the device has fewer; the
// plan then shares them under a lock).
#pragma once

#include <rte_ethdev.h>

#include <memory>
#include <string>

#include "config/config.h"
#include "ports/port.h"

namespace vqs::app {

// The ethdev name EAL gives the device of a config `device` string: a vdev's name before its
// arguments ("net_tap0,iface=t0"), or a PCI address in full form ("03:00.0" is "0000:03:00.0").
std::string ethdev_name(const std::string& device);

// How an ethdev port sends packets holding lent guest buffers (dequeue zero-copy).
enum class LentPolicy : uint8_t {
  kAsIs,            // a vdev: reads them with the CPU
  kAsIsIfDmaReady,  // a device that DMAs, for which guest memory is DMA-mapped (IOVA as VA): as
                    // they are when the segments carry an IOVA, else copied (memory not mapped)
  kCopy,            // copied into our own mbufs: no multi-segment tx, or a DMA device guest
                    // memory cannot be mapped for (IOVA as PA, rte_dev_dma_map unsupported)
};
// `dma`: the device is not a vdev (it may DMA); `multi_segs`: it sends chained mbufs;
// `dma_mappable`: IOVA-as-VA mode and rte_dev_dma_map works on the device.
LentPolicy lent_policy(bool dma, bool multi_segs, bool dma_mappable);

class EthdevPort final : public Port {
 public:
  // Probes the device if EAL has not (PCI address or vdev string), configures `tx_queues` tx
  // queues (or as many as the device has) and starts it. `rx_interrupts`: ask for rx queue
  // interrupts, for lcores that sleep; silently off when the device lacks them.
  static std::unique_ptr<EthdevPort> create(const PortConfig& config, uint16_t index,
                                            uint16_t tx_queues, uint16_t burst, bool rx_interrupts,
                                            rte_mempool* pool, std::string* error);
  ~EthdevPort() override;  // stops and closes the device

  uint16_t port_id() const { return port_id_; }
  const PortConfig& config() const { return config_; }
  rte_device* device() const { return device_; }
  // Not a vdev: it may DMA from the buffers it is given.
  bool dma() const { return dma_; }
  bool multi_segs() const { return (tx_offloads_ & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0; }
  LentPolicy lent() const { return lent_; }
  // Before forwarding starts: the switch, knowing whether guest memory will be DMA-mapped for
  // this device. The default is lent_policy(dma(), multi_segs(), false).
  void set_lent(LentPolicy policy) { lent_ = policy; }

  bool is_guest() const override { return false; }
  uint16_t rx_queue_count() const override { return config_.queues; }
  uint16_t tx_queue_count() const override { return tx_queues_; }
  bool link_up() const override;
  BurstResult rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t max_packets,
                       uint32_t max_bytes) override;
  uint16_t tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count) override {
    return rte_eth_tx_burst(port_id_, queue, pkts, count);
  }
  uint16_t tx_prepare(uint16_t queue, rte_mbuf** pkts, uint16_t count) override;
  bool tx_ready(uint16_t) const override { return true; }
  int tx_done_cleanup(uint16_t queue) override {
    return rte_eth_tx_done_cleanup(port_id_, queue, 0);
  }
  bool needs_tcp_segmentation() const override {
    return (tx_offloads_ & RTE_ETH_TX_OFFLOAD_TCP_TSO) == 0;
  }
  bool watch_rx_wake(uint16_t queue, int epfd, bool add, void* data) override;
  bool arm_rx_wake(uint16_t queue, bool armed) override;

 private:
  EthdevPort(const PortConfig& config, uint16_t index)
      : Port(config.name, index), config_(config) {}
  // start()'s steps, in order.
  bool start(uint16_t tx_queues, uint16_t burst, bool rx_interrupts, rte_mempool* pool,
             std::string* error);
  bool check_queue_counts(const rte_eth_dev_info& info, std::string* error) const;
  rte_eth_conf make_device_conf(const rte_eth_dev_info& info, bool rx_interrupts);
  bool configure(const rte_eth_dev_info& info, rte_eth_conf* conf, std::string* error);
  bool setup_queues(const rte_eth_dev_info& info, const rte_eth_conf& conf, uint16_t burst,
                    rte_mempool* pool, std::string* error);

  const PortConfig config_;
  uint16_t port_id_ = RTE_MAX_ETHPORTS;
  uint16_t tx_queues_ = 0;
  bool rx_interrupts_ = false;
  uint64_t tx_offloads_ = 0;  // enabled on the device (checksums, TSO, multi-segment)
  rte_device* device_ = nullptr;
  bool dma_ = false;
  LentPolicy lent_ = LentPolicy::kCopy;
  std::string probed_;           // the device string, when this port probed the device
  rte_mempool* pool_ = nullptr;  // for copies of lent guest buffers
  bool started_ = false;
};

}  // namespace vqs::app
