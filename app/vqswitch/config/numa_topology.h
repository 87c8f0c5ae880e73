// SPDX-License-Identifier: BSD-3-Clause
// Which NUMA node a CPU or a device is on: libnuma and sysfs on a host, a fixed map in tests (this
// machine kind has one node). The plan asks it where lcores and NICs are; a guest's node is its
// memory's, known once it connects (VhostDevice::memory_node).
#pragma once

#include <string>

namespace vqs::app {

// Not known (a guest not connected yet) or not tied to one node (a vdev).
constexpr int kAnyNode = -1;

class NumaTopology {
 public:
  virtual ~NumaTopology() = default;
  // Nodes there are: 1 on a machine without NUMA.
  virtual int node_count() const = 0;
  // The node of CPU `cpu` (an EAL lcore id: vqswitch gives the EAL its cores with -l, so lcore
  // and CPU ids are the same), or kAnyNode for a CPU the machine does not have.
  virtual int node_of_cpu(unsigned cpu) const = 0;
  // The node of an ethdev device as a port's `device` names it: a PCI address's (with or without
  // its domain and devargs), or kAnyNode (a vdev, or a device the machine does not have).
  virtual int node_of_device(const std::string& device) const = 0;
};

// The machine's, through libnuma (and sysfs for PCI devices, as the EAL reads it). Where libnuma
// finds no NUMA support every CPU and device is on node 0.
const NumaTopology& system_numa_topology();

// The PCI address in a port's `device` ("0000:81:00.0", "81:00.0,rxq_cqe_comp_en=0"), completed
// to its domain form, or "" when it is not one.
std::string pci_address_of(const std::string& device);

}  // namespace vqs::app
