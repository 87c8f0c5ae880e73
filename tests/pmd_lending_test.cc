// SPDX-License-Identifier: BSD-3-Clause
// net_vqs zero-copy beside devices that DMA: map guest memory for all of them, or lend nothing.
#include <catch2/catch.hpp>

#include "vqs/lending_choice.h"

using namespace vqs;

TEST_CASE("PMD lending: as is with no device that DMAs, in either IOVA mode") {
  CHECK(choose_pmd_lending(true, {}).lending == PmdLending::kAsIs);
  CHECK(choose_pmd_lending(false, {}).lending == PmdLending::kAsIs);
}

TEST_CASE("PMD lending: DMA-mapped when every device that DMAs can map, in IOVA-as-VA mode") {
  const PmdLendingChoice c =
      choose_pmd_lending(true, {{"0000:01:00.0", true}, {"0000:01:00.1", true}});
  CHECK(c.lending == PmdLending::kDmaMapped);
  CHECK(c.why.empty());
}

TEST_CASE("PMD lending: off, naming the device, when one cannot be given an IOVA") {
  const PmdLendingChoice pa = choose_pmd_lending(false, {{"0000:01:00.0", true}});
  CHECK(pa.lending == PmdLending::kOff);
  CHECK(pa.why.find("IOVA mode is PA") != std::string::npos);
  CHECK(pa.why.find("0000:01:00.0") != std::string::npos);
  const PmdLendingChoice refused =
      choose_pmd_lending(true, {{"0000:01:00.0", true}, {"0000:02:00.0", false}});
  CHECK(refused.lending == PmdLending::kOff);
  CHECK(refused.why.find("0000:02:00.0") != std::string::npos);
  CHECK(refused.why.find("rte_dev_dma_map") != std::string::npos);
}
