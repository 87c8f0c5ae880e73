// SPDX-License-Identifier: BSD-3-Clause
// A NUMA topology given by the test: which node each CPU and each PCI device is on (this machine
// kind has one node).
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "config/numa_topology.h"

namespace vqs::app::test {

class FakeNumaTopology final : public NumaTopology {
 public:
  // `cpu_nodes[cpu]`: the node of each CPU there is; `devices`: PCI address -> node.
  FakeNumaTopology(std::vector<int> cpu_nodes, std::map<std::string, int> devices = {})
      : cpu_nodes_(std::move(cpu_nodes)), devices_(std::move(devices)) {}

  int node_count() const override {
    int nodes = 1;
    for (int n : cpu_nodes_) nodes = std::max(nodes, n + 1);
    for (const auto& [device, n] : devices_) nodes = std::max(nodes, n + 1);
    return nodes;
  }
  int node_of_cpu(unsigned cpu) const override {
    return cpu < cpu_nodes_.size() ? cpu_nodes_[cpu] : kAnyNode;
  }
  int node_of_device(const std::string& device) const override {
    const auto it = devices_.find(pci_address_of(device));
    return it == devices_.end() ? kAnyNode : it->second;
  }

 private:
  std::vector<int> cpu_nodes_;
  std::map<std::string, int> devices_;
};

}  // namespace vqs::app::test
