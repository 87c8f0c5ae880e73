// The vdev driver: probe creates a port from devargs, remove closes it.
#include <bus_vdev_driver.h>
#include <rte_bus.h>
#include <ethdev_vdev.h>
#include <rte_malloc.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "devargs.h"
#include "eal_dma_registrar.h"
#include "lending_choice.h"
#include "pmd_port.h"

namespace vqs {

int pmd_logtype = RTE_LOGTYPE_PMD;

// The devices of the ethdevs that DMA (not on the vdev bus), each once. EAL probes the vdev bus
// last, so at our probe every device given on the command line is there; one attached later
// (hotplug) is not.
static std::vector<rte_device*> dma_devices() {
  std::vector<rte_device*> devices;
  uint16_t port_id;
  RTE_ETH_FOREACH_DEV(port_id) {
    rte_eth_dev_info info;
    if (rte_eth_dev_info_get(port_id, &info) != 0 || info.device == nullptr) continue;
    if (std::strcmp(rte_bus_name(rte_dev_bus(info.device)), "vdev") == 0) continue;
    if (std::find(devices.begin(), devices.end(), info.device) == devices.end())
      devices.push_back(info.device);
  }
  return devices;
}

// Sets up `options` (zero-copy on) for the devices that may be sent what it lends: DMA-mapped
// guest memory through `registrar`, or zero-copy off with a warning.
static void plan_lending(const char* name, VhostDeviceOptions& options,
                         std::unique_ptr<EalDmaRegistrar>& registrar) {
  std::vector<rte_device*> devices = dma_devices();
  const bool iova_va = rte_eal_iova_mode() == RTE_IOVA_VA;
  std::vector<DmaOutput> outputs;
  for (rte_device* d : devices)
    outputs.push_back({rte_dev_name(d), iova_va && EalDmaRegistrar::can_map(d)});
  const PmdLendingChoice choice = choose_pmd_lending(iova_va, outputs);
  switch (choice.lending) {
    case PmdLending::kAsIs:
      return;
    case PmdLending::kDmaMapped:
      registrar = std::make_unique<EalDmaRegistrar>(std::move(devices));
      options.dma_registrar = registrar.get();
      options.lend_only_dma_ready = true;
      VQS_PMD_LOG(INFO, "%s: zero-copy: guest memory is DMA-mapped for the %zu devices that DMA",
                  name, outputs.size());
      return;
    case PmdLending::kOff:
      options.zero_copy = false;
      VQS_PMD_LOG(WARNING, "%s: zero-copy disabled, every packet is copied: %s", name,
                  choice.why.c_str());
      return;
  }
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

  if (options->zero_copy) plan_lending(name, *options, port->dma_registrar());
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
RTE_PMD_REGISTER_PARAM_STRING(net_vqs,
                              "iface=<path> queues=<1..128> client=<0|1> reconnect=<0|1> "
                              "tso=<0|1> notify_coalesce_packets=<0..1024> "
                              "notify_coalesce_usecs=<0..1000000> refill_threshold=<0..32768> "
                              "zerocopy=<0|1> zerocopy_min_len=<64..65535>");
RTE_INIT(vqs_pmd_log_init) {
  const int type = rte_log_register_type_and_pick_level("pmd.net.vqs", RTE_LOG_NOTICE);
  if (type >= 0) vqs::pmd_logtype = type;
}
