// SPDX-License-Identifier: BSD-3-Clause
// vhost-user requests by their specification names (front-end to back-end messages), and which of
// them a virtio-net device with our features serves.
#pragma once

#include <cstdint>

namespace vqs {

// VHOST_F_LOG_ALL, the feature bit a frontend sets while it logs dirty pages (live migration).
// <linux/vhost_types.h> has it, but pulls in <linux/virtio_ring.h>, which does not compile as C++.
constexpr unsigned kVhostFLogAll = 26;

enum class VhostUserRequest : uint32_t {
  kGetFeatures = 1,
  kSetFeatures = 2,
  kSetOwner = 3,
  kResetOwner = 4,
  kSetMemTable = 5,
  kSetLogBase = 6,
  kSetLogFd = 7,
  kSetVringNum = 8,
  kSetVringAddr = 9,
  kSetVringBase = 10,
  kGetVringBase = 11,
  kSetVringKick = 12,
  kSetVringCall = 13,
  kSetVringErr = 14,
  kGetProtocolFeatures = 15,
  kSetProtocolFeatures = 16,
  kGetQueueNum = 17,
  kSetVringEnable = 18,
  kSendRarp = 19,
  kNetSetMtu = 20,
  kSetBackendReqFd = 21,
  kIotlbMsg = 22,
  kSetVringEndian = 23,
  kGetConfig = 24,
  kSetConfig = 25,
  kCreateCryptoSession = 26,
  kCloseCryptoSession = 27,
  kPostcopyAdvise = 28,
  kPostcopyListen = 29,
  kPostcopyEnd = 30,
  kGetInflightFd = 31,
  kSetInflightFd = 32,
  kGpuSetSocket = 33,
  kResetDevice = 34,
  kVringKick = 35,
  kGetMaxMemSlots = 36,
  kAddMemReg = 37,
  kRemMemReg = 38,
  kSetStatus = 39,
  kGetStatus = 40,
};

// Whether a request belongs to what we negotiate: the base protocol plus MQ, REPLY_ACK, STATUS,
// LOG_SHMFD (SET_LOG_BASE) and RARP (SEND_RARP).
// The rest are refused before librte_vhost sees them (docs/security.md: it serves some whatever
// was negotiated, GET_INFLIGHT_FD allocating what the message asks).
constexpr bool served_request(uint32_t request) {
  switch (static_cast<VhostUserRequest>(request)) {
    case VhostUserRequest::kGetFeatures:
    case VhostUserRequest::kSetFeatures:
    case VhostUserRequest::kSetOwner:
    case VhostUserRequest::kResetOwner:
    case VhostUserRequest::kSetMemTable:
    case VhostUserRequest::kSetVringNum:
    case VhostUserRequest::kSetVringAddr:
    case VhostUserRequest::kSetVringBase:
    case VhostUserRequest::kGetVringBase:
    case VhostUserRequest::kSetVringKick:
    case VhostUserRequest::kSetVringCall:
    case VhostUserRequest::kSetVringErr:
    case VhostUserRequest::kGetProtocolFeatures:
    case VhostUserRequest::kSetProtocolFeatures:
    case VhostUserRequest::kGetQueueNum:
    case VhostUserRequest::kSetVringEnable:
    case VhostUserRequest::kSetStatus:
    case VhostUserRequest::kGetStatus:
    case VhostUserRequest::kSetLogBase:
    case VhostUserRequest::kSendRarp:
      return true;
    default:
      return false;
  }
}

// Requests after which ring addresses, guest memory, the kick/call fds, the dirty log or the
// features (VHOST_F_LOG_ALL toggles logging) may differ: the datapath stays out while they are
// handled.
constexpr bool changes_ring_state(uint32_t request) {
  switch (static_cast<VhostUserRequest>(request)) {
    case VhostUserRequest::kSetFeatures:
    case VhostUserRequest::kSetMemTable:
    case VhostUserRequest::kSetVringNum:
    case VhostUserRequest::kSetVringAddr:
    case VhostUserRequest::kSetVringBase:
    case VhostUserRequest::kSetVringKick:
    case VhostUserRequest::kSetVringCall:  // librte_vhost closes the old callfd we write to
    case VhostUserRequest::kSetLogBase:    // librte_vhost unmaps the old log we mark
      return true;
    default:
      return false;
  }
}

}  // namespace vqs
