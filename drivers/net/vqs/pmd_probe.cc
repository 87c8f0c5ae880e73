// SPDX-License-Identifier: BSD-3-Clause
// The vdev driver: probe creates a port from devargs, remove closes it.
#include <bus_driver.h>
#include <bus_vdev_driver.h>
#include <ethdev_vdev.h>
#include <rte_malloc.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "datapath/eal_dma_registrar.h"
#include "devargs.h"
#include "lending_choice.h"
#include "pmd_port.h"

namespace vqs {

int pmd_logtype = RTE_LOGTYPE_PMD;

// The devices that may DMA from what they are given: every driven device on every bus but vdev
// (EAL probes vdev last, so they are all there; docs/pmd.md, "Zero-copy").
static std::vector<rte_device*> dma_devices() {
  std::vector<rte_device*> devices;
  auto any = [](const rte_bus*, const void*) { return 0; };
  auto any_device = [](const rte_device*, const void*) { return 0; };
  for (rte_bus* bus = rte_bus_find(nullptr, any, nullptr); bus != nullptr;
       bus = rte_bus_find(bus, any, nullptr)) {
    if (std::strcmp(rte_bus_name(bus), "vdev") == 0 || bus->find_device == nullptr) continue;
    for (rte_device* d = bus->find_device(nullptr, any_device, nullptr); d != nullptr;
         d = bus->find_device(d, any_device, nullptr))
      if (rte_dev_is_probed(d)) devices.push_back(d);
  }
  return devices;
}

// Sets up `options` (zero-copy on) for the devices that may be sent what it lends: guest memory
// DMA-mapped through the registrar returned (which must outlive the device), nothing needed
// (nullptr), or zero-copy off with a warning (nullptr).
static std::unique_ptr<EalDmaRegistrar> plan_lending(const char* name,
                                                     VhostDeviceOptions& options) {
  const std::vector<rte_device*> devices = dma_devices();
  const bool iova_va = rte_eal_iova_mode() == RTE_IOVA_VA;
  std::vector<DmaOutput> outputs;
  for (rte_device* d : devices)
    outputs.push_back({rte_dev_name(d), iova_va && EalDmaRegistrar::can_map(d)});
  const PmdLendingChoice choice = choose_pmd_lending(iova_va, outputs);
  switch (choice.lending) {
    case PmdLending::kAsIs:
      return nullptr;
    case PmdLending::kDmaMapped: {
      auto registrar = std::make_unique<EalDmaRegistrar>(devices);
      options.dma_registrar = registrar.get();
      options.lend_only_dma_ready = true;
      VQS_PMD_LOG(INFO, "%s: zero-copy: guest memory will be DMA-mapped for %zu device(s), %s%s",
                  name, outputs.size(), outputs.front().name.c_str(),
                  outputs.size() > 1 ? " and others" : "");
      return registrar;
    }
    case PmdLending::kOff:
      options.zero_copy = false;
      VQS_PMD_LOG(WARNING, "%s: zero-copy disabled, every packet is copied: %s", name,
                  choice.why.c_str());
      return nullptr;
  }
  return nullptr;
}

static int probe(rte_vdev_device* vdev) {
  const char* name = rte_vdev_device_name(vdev);
  if (rte_eal_process_type() != RTE_PROC_PRIMARY) {
    VQS_PMD_LOG(ERR, "%s: secondary processes are not supported", name);
    return -ENOTSUP;
  }
  std::string error;
  std::optional<VhostDeviceOptions> options = parse_devargs(rte_vdev_device_args(vdev), &error);
  if (!options) {
    VQS_PMD_LOG(ERR, "%s: %s", name, error.c_str());
    return -EINVAL;
  }
  rte_eth_dev* dev = rte_eth_vdev_allocate(vdev, sizeof(PmdPort));
  if (dev == nullptr) return -ENOMEM;
  auto* port = new (dev->data->dev_private) PmdPort(dev->data->port_id);

  auto* mac = static_cast<rte_ether_addr*>(
      rte_zmalloc_socket(name, sizeof(rte_ether_addr), 0, rte_socket_id()));
  if (mac == nullptr) {
    port->~PmdPort();
    rte_eth_dev_release_port(dev);
    return -ENOMEM;
  }
  // Locally administered, unique per port in this process.
  const uint8_t bytes[RTE_ETHER_ADDR_LEN] = {0x02,
                                             0x76,
                                             0x71,
                                             0x73,
                                             static_cast<uint8_t>(dev->data->port_id >> 8),
                                             static_cast<uint8_t>(dev->data->port_id)};
  std::copy(bytes, bytes + RTE_ETHER_ADDR_LEN, mac->addr_bytes);
  dev->data->mac_addrs = mac;
  dev->data->dev_flags |= RTE_ETH_DEV_INTR_LSC;
  dev->dev_ops = &kPmdOps;
  dev->rx_pkt_burst = pmd_rx_burst;
  dev->tx_pkt_burst = pmd_tx_burst;

  if (options->zero_copy) port->set_dma_registrar(plan_lending(name, *options));
  std::unique_ptr<VhostDevice> device = VhostDevice::create(*options, port, &error);
  if (!device) {
    VQS_PMD_LOG(ERR, "%s: %s", name, error.c_str());
    port->~PmdPort();
    rte_eth_dev_release_port(dev);
    return -EINVAL;
  }
  port->set_device(std::move(device));
  rte_eth_dev_probing_finish(dev);
  VQS_PMD_LOG(INFO, "%s: port %u on %s (%s, %u queue pair%s)", name, dev->data->port_id,
              options->path.c_str(), options->client ? "client" : "server", options->queue_pairs,
              options->queue_pairs == 1 ? "" : "s");
  return 0;
}

static int remove(rte_vdev_device* vdev) {
  rte_eth_dev* dev = rte_eth_dev_allocated(rte_vdev_device_name(vdev));
  if (dev == nullptr) return 0;  // already closed and released
  // Our close stops a started port too (rte_eth_dev_close refuses one); then release once.
  pmd_close(dev);
  return rte_eth_dev_release_port(dev);
}

}  // namespace vqs

// Outside the namespace: the registration macro pastes the variable's name into a function name.
static rte_vdev_driver vqs_vdev_driver = [] {
  rte_vdev_driver d{};
  d.probe = vqs::probe;
  d.remove = vqs::remove;
  return d;
}();

RTE_PMD_REGISTER_VDEV(net_vqs, vqs_vdev_driver);
RTE_PMD_REGISTER_PARAM_STRING(
    net_vqs,
    "iface=<path> queues=<1..128> client=<0|1> reconnect=<0|1> "
    "tso=<0|1> notify_coalesce_packets=<0..1024> "
    "notify_coalesce_usecs=<0..1000000> refill_threshold=<0..32768> "
    "zerocopy=<0|1> zerocopy_min_len=<64..65535> desc_release=<auto|on|off> "
    "buffer_release=<auto|on|off> interrupt_recheck_us=<0..1000> "
    "socket_mode=<octal, e.g. 0660> socket_group=<name|gid>");
RTE_INIT(vqs_pmd_log_init) {
  const int type = rte_log_register_type_and_pick_level("pmd.net.vqs", RTE_LOG_NOTICE);
  if (type >= 0) vqs::pmd_logtype = type;
}
