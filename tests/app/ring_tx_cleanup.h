// SPDX-License-Identifier: BSD-3-Clause
// A net_ring port made to free on request, as a NIC does: net_ring (DPDK 22.11) holds what it is
// sent in its tx ring and has no tx_done_cleanup; a NIC such as ixgbe keeps sent mbufs until its
// ring runs low or rte_eth_tx_done_cleanup asks. Tests only.
#pragma once

#include <rte_ring.h>

#include <cstdint>

namespace vqs::app::test {

// From now on rte_eth_tx_done_cleanup on `port_id` (a net_ring port with one tx queue whose ring
// is `tx`) frees every mbuf in `tx` and returns how many. Only the lcore that sends on the port
// may call it, and nothing else may dequeue from `tx` meanwhile. forget_tx_done_cleanup(port_id)
// before `tx` is freed (the port may be closed already).
void give_tx_done_cleanup(uint16_t port_id, rte_ring* tx);
void forget_tx_done_cleanup(uint16_t port_id);

}  // namespace vqs::app::test
