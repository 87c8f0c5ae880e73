// SPDX-License-Identifier: BSD-3-Clause
// A vhost-user frontend speaking the protocol over the unix socket by hand (ours, not QEMU's or
// virtio_user's): to send what a real frontend would not, and to see exactly what comes back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vhost/vhost_user_request.h"

namespace vqs::test {

// vhost-user specification: requests (by the spec's names, from lib/vhost's one list), header
// flags, feature bits.
namespace vhost_user {
using enum VhostUserRequest;
constexpr uint32_t kVersion = 0x1;
constexpr uint32_t kReplyFlag = 1u << 2;
constexpr uint32_t kNeedReply = 1u << 3;
constexpr uint64_t kFProtocolFeatures = 1ull << 30;
constexpr uint64_t kProtocolFMq = 1ull << 0;
constexpr uint64_t kProtocolFReplyAck = 1ull << 3;
constexpr uint64_t kFLogAll = 1ull << kVhostFLogAll;
constexpr uint32_t kVringFLog = 1u << 0;  // SET_VRING_ADDR: log the used ring at `log`
}  // namespace vhost_user

struct [[gnu::packed]] RawMessage {
  VhostUserRequest request{};
  uint32_t flags = vhost_user::kVersion;
  uint32_t size = 0;
  uint64_t u64 = 0;
};

// A guest memory region as SET_MEM_TABLE carries it, with the fd sent beside it.
struct RawRegion {
  uint64_t guest_phys_addr;
  uint64_t memory_size;
  uint64_t userspace_addr;
  uint64_t mmap_offset;
  int fd;
};

class RawFrontend {
 public:
  // Connects; a missing reply later fails the test after 2 s instead of hanging it.
  explicit RawFrontend(const std::string& path);
  ~RawFrontend();
  RawFrontend(const RawFrontend&) = delete;
  RawFrontend& operator=(const RawFrontend&) = delete;

  // A message with no payload, or a u64 one.
  void send_message(VhostUserRequest request, uint32_t flags = 0, bool with_u64 = false,
                    uint64_t u64 = 0);
  // Any request with the given payload bytes.
  void send_payload(VhostUserRequest request, uint32_t flags, const std::vector<uint8_t>& payload);
  // SET_MEM_TABLE with the regions' fds (SCM_RIGHTS).
  void send_mem_table(const std::vector<RawRegion>& regions, uint32_t flags = 0);
  // SET_VRING_NUM/BASE/ENABLE: {index, num}.
  void send_vring_state(VhostUserRequest request, uint32_t index, uint32_t num, uint32_t flags = 0);
  // SET_VRING_ADDR: the rings at the frontend's (our) addresses; with kVringFLog in `addr_flags`,
  // the used ring's guest address for the dirty log.
  void send_vring_addr(uint32_t index, uint64_t desc, uint64_t used, uint64_t avail,
                       uint32_t addr_flags = 0, uint64_t log = 0);
  // SET_LOG_BASE: the dirty log, `size` bytes of `fd` from `offset`.
  void send_log_base(int fd, uint64_t size, uint64_t offset, uint32_t flags = 0);
  // SET_VRING_KICK/CALL: the vring's eventfd.
  void send_vring_fd(VhostUserRequest request, uint32_t index, int fd, uint32_t flags = 0);
  // A reply with a u64 payload, or (`payload` false) one that may have none (SET_LOG_BASE's
  // success); u64 is then 0.
  RawMessage receive_reply(bool payload = true);
  // Whether the backend closed the connection (end of file) within the receive timeout.
  bool closed_by_peer();

 private:
  void send_raw(const void* bytes, size_t len, const int* fds, size_t fd_count);
  int fd_;
};

// A guest on the raw frontend: 2 MiB of memfd memory mapped here, one or two queue pairs of split
// rings (vrings 2p guest RX, 2p + 1 guest TX) set up through the protocol as QEMU does, no
// offloads, no mergeable buffers (VERSION_1: 12-byte header). Guest TX is driven by hand, on any
// pair; guest RX on the first.
class RawGuest {
 public:
  static constexpr uint16_t kRingSize = 256;
  static constexpr uint64_t kMemSize = 2 << 20;

  static constexpr uint16_t kMaxQueuePairs = 2;
  static constexpr uint16_t kAllPairs = kMaxQueuePairs;

  explicit RawGuest(const std::string& path, uint16_t queue_pairs = 1);
  ~RawGuest();
  RawFrontend& frontend() { return frontend_; }
  // Posts `count` TX packets of `len` bytes (after the 12-byte header) on queue pair `pair`,
  // each in its own buffer at a fixed guest address per descriptor; returns once they are
  // published.
  void send(uint16_t count, uint32_t len, uint16_t pair = 0);
  // Used entries the device returned on a TX ring so far, and the chains posted and not yet
  // returned.
  uint16_t tx_used(uint16_t pair = 0) const;
  uint16_t tx_outstanding() const { return static_cast<uint16_t>(tx_ring().avail_idx - tx_used()); }
  // Guest RX: posts `count` receive buffers of 2 KiB (one descriptor each, at a fixed guest
  // address per slot: rx_buffer_gpa), and the used entries returned so far.
  void post_rx(uint16_t count);
  uint16_t rx_used() const;
  static constexpr uint64_t rx_buffer_gpa(uint16_t slot) {
    return (1 << 20) + uint64_t{slot} * 2048;  // past the TX buffers (256 KiB + 256 x 2 KiB)
  }
  // A fresh eventfd for `request` (SET_VRING_CALL or KICK) on `index`, NEED_REPLY; returns the
  // reply's u64 (0: success).
  uint64_t replace_vring_fd(VhostUserRequest request, uint32_t index);
  // SET_MEM_TABLE again with the same single region, NEED_REPLY; the reply's u64.
  uint64_t resend_mem_table();
  // Live migration as QEMU starts and ends it: SET_FEATURES with or without VHOST_F_LOG_ALL,
  // then each vring's addresses with or without the log flag (SET_LOG_BASE is the caller's).
  void set_logging(bool on);
  // RESET_OWNER (librte_vhost stops the device and forgets the frontend's state, as at a
  // guest's reboot), then the whole set-up again with empty rings, with or without logging
  // (VHOST_F_LOG_ALL and the vrings' log flag), every pair's vrings set up and the first
  // `enabled_pairs` pairs' enabled; returns once librte_vhost has handled it all.
  void reset_owner_and_set_up(bool logging, uint16_t enabled_pairs = kAllPairs);
  // SET_VRING_ENABLE for both vrings of `pair`; returns once librte_vhost has handled them.
  void enable_pair(uint16_t pair);
  // Guest-physical address of vring `index`'s used ring.
  uint64_t used_ring_gpa(uint32_t index) const { return rings_[index].used; }

 private:
  struct Ring {
    uint64_t desc, avail, used;  // guest addresses (= offsets in the memfd)
    int kick = -1, call = -1;
    uint16_t avail_idx = 0;  // the driver's next avail index
  };
  uint8_t* host(uint64_t gpa) const { return mem_ + gpa; }
  const Ring& tx_ring(uint16_t pair = 0) const { return rings_[2 * pair + 1]; }
  // The protocol from GET_FEATURES to the vrings enabled, as QEMU starts a device.
  void set_up(bool logging, uint16_t enabled_pairs);

  RawFrontend frontend_;
  int memfd_ = -1;
  uint8_t* mem_ = nullptr;
  uint16_t queue_pairs_;
  Ring rings_[2 * kMaxQueuePairs];
};

// A memfd of `file_size` bytes, closed when it goes; `sealed`: it cannot shrink or grow any more
// (as QEMU seals its dirty log).
struct Memfd {
  explicit Memfd(uint64_t file_size, bool sealed = false);
  ~Memfd();
  Memfd(const Memfd&) = delete;
  Memfd& operator=(const Memfd&) = delete;
  int fd;
};

// Open file descriptors of this process (the backend runs in it too).
int open_fd_count();

}  // namespace vqs::test
