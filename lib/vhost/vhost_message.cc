// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/vhost_message.h"

#include <fcntl.h>
#include <rte_version.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "ring/guest_mapping.h"
#include "vhost/vhost_device.h"
#include "vhost/vhost_log.h"
#include "vhost/vhost_registry.h"
#include "vhost/vhost_user_request.h"

namespace vqs {
namespace {

// The start of a vhost-user message as the hooks receive it (vhost-user specification, "Message
// format": request, flags, size, then the payload; a u64 payload right after the 12-byte header,
// as librte_vhost 22.11's packed VhostUserMsg lays it out). Only what we read and write.
struct [[gnu::packed]] VhostUserMsgHead {
  uint32_t request;
  uint32_t flags;
  uint32_t size;  // of the payload
  uint64_t u64;
};
static_assert(offsetof(VhostUserMsgHead, request) == 0 && offsetof(VhostUserMsgHead, flags) == 4 &&
              offsetof(VhostUserMsgHead, size) == 8 && offsetof(VhostUserMsgHead, u64) == 12 &&
              sizeof(VhostUserMsgHead) == 20);

// SET_MEM_TABLE as the pre-hook receives it: librte_vhost 22.11's packed vhu_msg_context, the
// message (header, then VhostUserMemory) followed by its fds, whose offset is checked against the
// message before use. See docs/architecture.md, "Control plane".
static_assert(RTE_VER_YEAR == 22 && RTE_VER_MONTH == 11,
              "re-check librte_vhost's vhu_msg_context layout (kMsgFdsOffset) for this DPDK");
constexpr uint32_t kMaxMemRegions = 8;
constexpr size_t kMsgPayloadOffset = 12;
constexpr size_t kMsgFdsOffset = 644;    // offsetof(vhu_msg_context, fds)
constexpr size_t kMsgFdNumOffset = 676;  // offsetof(vhu_msg_context, fd_num)
struct [[gnu::packed]] MemTableRegion {
  uint64_t guest_phys_addr;
  uint64_t memory_size;
  uint64_t userspace_addr;
  uint64_t mmap_offset;
};

// Closes the fds a message came with: librte_vhost leaves them to a pre-hook that fails it.
void close_message_fds(void* msg) {
  auto* bytes = static_cast<uint8_t*>(msg);
  int fd_num = 0;
  int fds[kMaxMemRegions];
  std::memcpy(&fd_num, bytes + kMsgFdNumOffset, sizeof(fd_num));
  std::memcpy(fds, bytes + kMsgFdsOffset, sizeof(fds));
  fd_num = std::clamp(fd_num, 0, static_cast<int>(kMaxMemRegions));
  for (int i = 0; i < fd_num; ++i) {
    if (fds[i] >= 0) close(fds[i]);
    fds[i] = -1;
  }
  std::memcpy(bytes + kMsgFdsOffset, fds, sizeof(fds));
}

// Refuses, before librte_vhost maps it, a SET_MEM_TABLE with a region past the end of its file
// (its first touch would raise SIGBUS) or fds that do not match its regions, closing the fds a
// failed pre-hook is left with (docs/security.md).
bool mem_table_fits_files(const std::string& path, void* msg) {
  auto* bytes = static_cast<uint8_t*>(msg);
  uint32_t nregions = 0, size = 0;
  int fd_num = 0;
  std::memcpy(&size, bytes + 8, sizeof(size));
  std::memcpy(&nregions, bytes + kMsgPayloadOffset, sizeof(nregions));
  std::memcpy(&fd_num, bytes + kMsgFdNumOffset, sizeof(fd_num));
  int fds[kMaxMemRegions];
  std::string why;
  if (fd_num < 0 || fd_num > static_cast<int>(kMaxMemRegions) || nregions > kMaxMemRegions ||
      static_cast<uint32_t>(fd_num) != nregions ||
      size < sizeof(uint64_t) + nregions * sizeof(MemTableRegion)) {
    why = std::to_string(nregions) + " regions with " + std::to_string(fd_num) + " fds";
  }
  std::memcpy(fds, bytes + kMsgFdsOffset, sizeof(fds));
  for (uint32_t i = 0; why.empty() && i < nregions; ++i) {
    MemTableRegion r;
    std::memcpy(&r, bytes + kMsgPayloadOffset + 8 + i * sizeof(r), sizeof(r));
    if (!region_fits_file(fds[i], r.mmap_offset, r.memory_size, &why))
      why = "region " + std::to_string(i) + ": " + why;
  }
  if (why.empty()) return true;
  VQS_LOG(ERR, "%s: memory table refused: %s", path.c_str(), why.c_str());
  close_message_fds(msg);
  return false;
}

// Refuses a SET_LOG_BASE whose log is not all inside its file (marking past the end would raise
// SIGBUS), whose file could still shrink under it (the same, later: QEMU seals its log memfd
// against shrinking), or that sits at an offset: librte_vhost 22.11 maps the log from that offset
// but marks from its mapping plus the offset again, past the mapping's end; QEMU always sends 0.
bool log_fits_file(const std::string& path, void* msg) {
  auto* bytes = static_cast<uint8_t*>(msg);
  uint32_t size = 0;
  int fd_num = 0, fd = -1;
  uint64_t log_size = 0, log_offset = 0;
  std::memcpy(&size, bytes + 8, sizeof(size));
  std::memcpy(&fd_num, bytes + kMsgFdNumOffset, sizeof(fd_num));
  std::memcpy(&fd, bytes + kMsgFdsOffset, sizeof(fd));
  std::memcpy(&log_size, bytes + kMsgPayloadOffset, sizeof(log_size));
  std::memcpy(&log_offset, bytes + kMsgPayloadOffset + 8, sizeof(log_offset));
  std::string why;
  if (fd_num != 1 || size != 2 * sizeof(uint64_t))
    why = std::to_string(fd_num) + " fds, a payload of " + std::to_string(size) + " bytes";
  else if (log_offset != 0)
    why = "it is at offset " + std::to_string(log_offset);
  else if (!region_fits_file(fd, 0, log_size, &why))
    why = "the log: " + why;
  else if (const int seals = fcntl(fd, F_GET_SEALS); seals < 0 || !(seals & F_SEAL_SHRINK))
    why = "its file is not sealed against shrinking (F_SEAL_SHRINK)";
  if (why.empty()) return true;
  VQS_LOG(ERR, "%s: dirty log refused: %s", path.c_str(), why.c_str());
  close_message_fds(msg);
  return false;
}

// Pre- (kAfter false) and post-message hook. To answer a message itself (GET_QUEUE_NUM) the
// pre-hook writes the u64 payload and returns REPLY: librte_vhost sends it back and skips its
// own handler.
template <bool kAfter>
enum rte_vhost_msg_result message_hook(int vid, void* msg) {
  VhostUserMsgHead head;
  std::memcpy(&head, msg, sizeof(head));
  return with_device(vid, [&](VhostDevice* d) {
    uint64_t reply = 0;
    // A second frontend: its message fails (without NEED_REPLY librte_vhost then closes it).
    if (!kAfter && d != nullptr && !d->admit(vid)) {
      close_message_fds(msg);
      return RTE_VHOST_MSG_RESULT_ERR;
    }
    // A request outside what we negotiate (see served_request): failed, as the second
    // frontend's.
    if (!kAfter && d != nullptr && !served_request(head.request)) {
      VQS_LOG(ERR, "%s: vhost-user request %u refused: not served", d->path().c_str(),
              head.request);
      close_message_fds(msg);
      d->count_refused_message();
      return RTE_VHOST_MSG_RESULT_ERR;
    }
    // Refused before the device suspends for it: the table in use stays (librte_vhost keeps
    // it), and without REPLY_ACK librte_vhost closes the connection.
    if (!kAfter && head.request == static_cast<uint32_t>(VhostUserRequest::kSetMemTable) &&
        d != nullptr && !mem_table_fits_files(d->path(), msg)) {
      d->count_refused_memory_table();
      return RTE_VHOST_MSG_RESULT_ERR;
    }
    if (!kAfter && head.request == static_cast<uint32_t>(VhostUserRequest::kSetLogBase) &&
        d != nullptr && !log_fits_file(d->path(), msg)) {
      d->count_refused_message();
      return RTE_VHOST_MSG_RESULT_ERR;
    }
    // The MAC in the first 6 bytes of the u64 payload. librte_vhost stores it too, for a
    // dequeue of its own that we do not use.
    if (!kAfter && head.request == static_cast<uint32_t>(VhostUserRequest::kSendRarp) &&
        d != nullptr && head.size >= sizeof(uint64_t)) {
      uint8_t mac[6];
      std::memcpy(mac, &head.u64, sizeof(mac));
      d->request_rarp(mac);
    }
    if (d == nullptr || !d->on_message(vid, head.request, kAfter, &reply))
      return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
    head.u64 = reply;
    head.size = sizeof(reply);
    std::memcpy(msg, &head, sizeof(head));
    return RTE_VHOST_MSG_RESULT_REPLY;
  });
}

const rte_vhost_user_extern_ops kMessageHooks = {message_hook<false>, message_hook<true>};

}  // namespace

const rte_vhost_user_extern_ops& vhost_message_hooks() { return kMessageHooks; }

}  // namespace vqs
