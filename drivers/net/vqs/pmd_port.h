// SPDX-License-Identifier: BSD-3-Clause
// The net_vqs port: ethdev private data, and the queue objects its bursts receive.
#pragma once

#include <ethdev_driver.h>
#include <rte_ether.h>

#include <memory>

#include "datapath/eal_dma_registrar.h"
#include "ring/queue_stats.h"
#include "vhost/vhost_device.h"

namespace vqs {

extern int pmd_logtype;
#define VQS_PMD_LOG(level, fmt, ...) \
  rte_log(RTE_LOG_##level, ::vqs::pmd_logtype, "net_vqs: " fmt "\n", ##__VA_ARGS__)

// ethdev rx queue i polls the guest's TX queue i; tx queue i fills its RX queue i.
inline uint16_t rx_vring(uint16_t queue) { return guest_tx_vring(queue); }
inline uint16_t tx_vring(uint16_t queue) { return guest_rx_vring(queue); }

struct alignas(64) PmdRxQueue {
  VhostDevice* device;
  rte_mempool* pool;
  uint16_t queue;
  uint16_t port_id;
};

struct alignas(64) PmdTxQueue {
  VhostDevice* device;
  uint16_t queue;
};

// Lives in dev->data->dev_private: constructed in place at probe, destroyed only when probe fails
// (ethdev frees dev_private when the port is released), so close_device() lets go of what it
// owns.
class PmdPort final : public VhostDevice::Listener {
 public:
  explicit PmdPort(uint16_t port_id) : port_id_(port_id) {}

  uint16_t port_id() const { return port_id_; }
  VhostDevice* device() { return device_.get(); }
  // Set at probe when guest memory must be DMA-mapped (zero-copy beside devices that DMA).
  void set_dma_registrar(std::unique_ptr<EalDmaRegistrar> registrar) {
    dma_registrar_ = std::move(registrar);
  }
  void set_device(std::unique_ptr<VhostDevice> device) { device_ = std::move(device); }
  // The device's guest mappings use the registrar until the device is gone (chains still lent
  // then keep their mapping for good, and never call it again).
  void close_device() {
    device_.reset();
    dma_registrar_.reset();
  }

  // Counters at the last stats reset, per vring: the datapath never writes its counters from
  // another thread, so a reset is a snapshot that reads subtract.
  QueueStats& reset_base(uint16_t vring) { return reset_base_[vring]; }

  void on_link_change(bool up) override;
  void on_vring_state(uint16_t vring, bool enabled) override;

 private:
  const uint16_t port_id_;
  std::unique_ptr<EalDmaRegistrar> dma_registrar_;
  std::unique_ptr<VhostDevice> device_;
  QueueStats reset_base_[2 * kMaxQueuePairs];
};

extern const eth_dev_ops kPmdOps;
int pmd_close(rte_eth_dev* dev);  // stops the port if started; idempotent
uint16_t pmd_rx_burst(void* queue, rte_mbuf** pkts, uint16_t count);
uint16_t pmd_tx_burst(void* queue, rte_mbuf** pkts, uint16_t count);

// Stats and xstats (pmd_stats.cc).
int pmd_stats_get(rte_eth_dev* dev, rte_eth_stats* stats);
int pmd_stats_reset(rte_eth_dev* dev);
int pmd_xstats_get_names(rte_eth_dev* dev, rte_eth_xstat_name* names, unsigned size);
int pmd_xstats_get(rte_eth_dev* dev, rte_eth_xstat* xstats, unsigned count);
int pmd_xstats_reset(rte_eth_dev* dev);

inline PmdPort* pmd_port(rte_eth_dev* dev) { return static_cast<PmdPort*>(dev->data->dev_private); }

}  // namespace vqs
