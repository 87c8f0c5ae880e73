// A vhost-user frontend speaking the protocol over the unix socket by hand (ours, not QEMU's or
// virtio_user's): to send what a real frontend would not, and to see exactly what comes back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vqs::test {

// vhost-user specification: requests, header flags, feature bits.
namespace vhost_user {
constexpr uint32_t kGetFeatures = 1;
constexpr uint32_t kSetFeatures = 2;
constexpr uint32_t kSetOwner = 3;
constexpr uint32_t kSetMemTable = 5;
constexpr uint32_t kGetProtocolFeatures = 15;
constexpr uint32_t kSetProtocolFeatures = 16;
constexpr uint32_t kGetQueueNum = 17;
constexpr uint32_t kVersion = 0x1;
constexpr uint32_t kReplyFlag = 1u << 2;
constexpr uint32_t kNeedReply = 1u << 3;
constexpr uint64_t kFProtocolFeatures = 1ull << 30;
constexpr uint64_t kProtocolFMq = 1ull << 0;
constexpr uint64_t kProtocolFReplyAck = 1ull << 3;
}  // namespace vhost_user

struct [[gnu::packed]] RawMessage {
  uint32_t request = 0;
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
  void send_message(uint32_t request, uint32_t flags = 0, bool with_u64 = false, uint64_t u64 = 0);
  // SET_MEM_TABLE with the regions' fds (SCM_RIGHTS).
  void send_mem_table(const std::vector<RawRegion>& regions, uint32_t flags = 0);
  // A reply with a u64 payload (every reply these tests expect has one).
  RawMessage receive_reply();
  // Whether the backend closed the connection (end of file) within the receive timeout.
  bool closed_by_peer();

 private:
  int fd_;
};

// Open file descriptors of this process (the backend runs in it too).
int open_fd_count();

}  // namespace vqs::test
