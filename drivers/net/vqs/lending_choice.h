// SPDX-License-Identifier: BSD-3-Clause
// Whether net_vqs may lend guest TX buffers (zerocopy=1) in this process, and how. The PMD does
// not know where the application sends what it receives, so every device that may DMA (any a
// driver took on a bus other than vdev) is a possible output, and a lent segment must carry an
// IOVA it can use: guest memory DMA-mapped for all of them (IOVA as VA), or nothing lent.
// Without such devices the segments carry RTE_BAD_IOVA, which no virtual device reads.
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
