// SPDX-License-Identifier: BSD-3-Clause
// virtio-net's vring numbering: queue pair q is vrings 2q (the guest's RX queue, which the device
// fills) and 2q + 1 (the guest's TX queue, which the device empties).
#pragma once

#include <cstdint>

namespace vqs {

constexpr uint16_t guest_rx_vring(uint16_t queue) { return static_cast<uint16_t>(2 * queue); }
constexpr uint16_t guest_tx_vring(uint16_t queue) { return static_cast<uint16_t>(2 * queue + 1); }
constexpr bool is_guest_rx_vring(uint16_t vring) { return vring % 2 == 0; }
constexpr uint16_t queue_of_vring(uint16_t vring) { return static_cast<uint16_t>(vring / 2); }

}  // namespace vqs
