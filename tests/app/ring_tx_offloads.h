// SPDX-License-Identifier: BSD-3-Clause
// A net_ring port made to claim a NIC's tx offloads (checksums, TSO, chained mbufs) and to refuse
// marked packets in its tx_prepare, as a NIC's prepare refuses what it cannot send: to test what
// the switch does around rte_eth_tx_prepare. net_ring itself sends whatever it is given. Tests
// only.
#pragma once

#include <cstdint>

namespace vqs::app::test {

// A packet of this length is refused by the port's tx_prepare (rte_errno EINVAL).
constexpr uint32_t kRefusedByTxPrepareLen = 666;

// Call before the port is configured (its tx_prepare is installed when it starts).
void give_tx_offloads(uint16_t port_id);

}  // namespace vqs::app::test
