// SPDX-License-Identifier: BSD-3-Clause
#include "config/numa_topology.h"

#include <numa.h>

#include <cctype>
#include <fstream>

namespace vqs::app {
namespace {

class SystemNumaTopology final : public NumaTopology {
 public:
  SystemNumaTopology() : numa_(numa_available() >= 0) {}

  int node_count() const override { return numa_ ? numa_num_configured_nodes() : 1; }

  int node_of_cpu(unsigned cpu) const override {
    if (cpu >= static_cast<unsigned>(numa_num_configured_cpus())) return kAnyNode;
    if (!numa_) return 0;
    const int node = numa_node_of_cpu(static_cast<int>(cpu));
    return node >= 0 ? node : kAnyNode;
  }

  int node_of_device(const std::string& device) const override {
    const std::string address = pci_address_of(device);
    if (address.empty()) return kAnyNode;
    std::ifstream in("/sys/bus/pci/devices/" + address + "/numa_node");
    int node = kAnyNode;
    if (!(in >> node)) return kAnyNode;  // no such device here
    // The kernel says -1 where the firmware gave no node: on a NUMA-less machine that is node 0.
    if (node < 0) return numa_ && node_count() > 1 ? kAnyNode : 0;
    return node;
  }

 private:
  const bool numa_;
};

bool hex_digits(const std::string& s, size_t from, size_t count) {
  if (from + count > s.size()) return false;
  for (size_t i = from; i < from + count; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

}  // namespace

const NumaTopology& system_numa_topology() {
  static const SystemNumaTopology topology;
  return topology;
}

std::string pci_address_of(const std::string& device) {
  const std::string name = device.substr(0, device.find(','));
  // BB:DD.F, as the EAL also accepts it, is in domain 0000.
  const std::string full = name.size() == 7 ? "0000:" + name : name;
  if (full.size() != 12 || !hex_digits(full, 0, 4) || full[4] != ':' || !hex_digits(full, 5, 2) ||
      full[7] != ':' || !hex_digits(full, 8, 2) || full[10] != '.' ||
      !std::isdigit(static_cast<unsigned char>(full[11])) || full[11] > '7')
    return "";
  std::string lower = full;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

}  // namespace vqs::app
