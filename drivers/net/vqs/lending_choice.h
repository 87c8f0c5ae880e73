// SPDX-License-Identifier: BSD-3-Clause
// Whether net_vqs may lend guest TX buffers (zerocopy=1) in this process, and how. Any device on
// a bus other than vdev may get lent segments, so they need an IOVA for all of them (DMA-mapped,
// IOVA as VA) or nothing is lent; with no such device, RTE_BAD_IOVA.
// See docs/architecture.md, "Dequeue zero-copy".
#pragma once

#include <string>
#include <vector>

namespace vqs {

// A device that may DMA, and whether it takes rte_dev_dma_map of external memory.
struct DmaOutput {
  std::string name;
  bool can_map = false;
};

enum class PmdLending {
  kAsIs,       // no device that DMAs: lend, segments without an IOVA
  kDmaMapped,  // map guest memory for every such device; lend only what was mapped
  kOff,        // copy everything (why says which device, and why it cannot be mapped)
};

struct PmdLendingChoice {
  PmdLending lending = PmdLending::kAsIs;
  std::string why;
};

inline PmdLendingChoice choose_pmd_lending(bool iova_va, const std::vector<DmaOutput>& outputs) {
  if (outputs.empty()) return {};
  if (!iova_va)
    return {PmdLending::kOff, "IOVA mode is PA, so guest memory cannot be DMA-mapped for " +
                                  outputs.front().name + ", which the application may send to"};
  for (const DmaOutput& o : outputs)
    if (!o.can_map)
      return {PmdLending::kOff, o.name +
                                    " refuses rte_dev_dma_map of external memory, and the "
                                    "application may send to it"};
  return {PmdLending::kDmaMapped, {}};
}

}  // namespace vqs
