// The vdev driver: probe creates a port from devargs, remove closes it.
#include <bus_vdev_driver.h>
#include <ethdev_vdev.h>
#include <rte_malloc.h>

#include <new>
#include <string>

#include "devargs.h"
#include "pmd_port.h"

namespace vqs {

int pmd_logtype = RTE_LOGTYPE_PMD;

static int probe(rte_vdev_device* vdev) {
  const char* name = rte_vdev_device_name(vdev);
  if (rte_eal_process_type() != RTE_PROC_PRIMARY) {
    VQS_PMD_LOG(ERR, "%s: secondary processes are not supported", name);
    return -ENOTSUP;
  }
  std::string error;
  const std::optional<VhostDeviceOptions> options =
      parse_devargs(rte_vdev_device_args(vdev), &error);
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
