// SPDX-License-Identifier: BSD-3-Clause
#include "raw_frontend.h"

#include <fcntl.h>

#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>

namespace vqs::test {
namespace {

constexpr size_t kHeaderSize = 12;

struct [[gnu::packed]] MemTable {
  uint32_t nregions;
  uint32_t padding;
  struct [[gnu::packed]] {
    uint64_t guest_phys_addr, memory_size, userspace_addr, mmap_offset;
  } regions[8];
};

}  // namespace

RawFrontend::RawFrontend(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM, 0)) {
  REQUIRE(fd_ >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const timeval timeout{2, 0};
  REQUIRE(setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) == 0);
}

RawFrontend::~RawFrontend() { close(fd_); }

void RawFrontend::send_message(VhostUserRequest request, uint32_t flags, bool with_u64,
                               uint64_t u64) {
  RawMessage m;
  m.request = request;
  m.flags = vhost_user::kVersion | flags;
  m.size = with_u64 ? sizeof(uint64_t) : 0;
  m.u64 = u64;
  const size_t len = kHeaderSize + m.size;
  REQUIRE(send(fd_, &m, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len));
}

void RawFrontend::send_raw(const void* bytes, size_t len, const int* fds, size_t fd_count) {
  iovec iov{const_cast<void*>(bytes), len};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd_count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fd_count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, fd_count * sizeof(int));
  }
  REQUIRE(sendmsg(fd_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(len));
}

void RawFrontend::send_payload(VhostUserRequest request, uint32_t flags,
                               const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> bytes(kHeaderSize + payload.size());
  const uint32_t head[3] = {static_cast<uint32_t>(request), vhost_user::kVersion | flags,
                            static_cast<uint32_t>(payload.size())};
  std::memcpy(bytes.data(), head, kHeaderSize);
  if (!payload.empty()) std::memcpy(bytes.data() + kHeaderSize, payload.data(), payload.size());
  send_raw(bytes.data(), bytes.size(), nullptr, 0);
}

void RawFrontend::send_vring_state(VhostUserRequest request, uint32_t index, uint32_t num,
                                   uint32_t flags) {
  struct [[gnu::packed]] {
    RawMessage head;
  } m{};
  m.head.request = request;
  m.head.flags = vhost_user::kVersion | flags;
  m.head.size = 8;
  m.head.u64 = index | (uint64_t{num} << 32);
  send_raw(&m, kHeaderSize + 8, nullptr, 0);
}

void RawFrontend::send_vring_addr(uint32_t index, uint64_t desc, uint64_t used, uint64_t avail,
                                  uint32_t addr_flags, uint64_t log) {
  struct [[gnu::packed]] {
    VhostUserRequest request;
    uint32_t flags, size;
    uint32_t index, addr_flags;
    uint64_t desc, used, avail, log;
  } m{vhost_user::kSetVringAddr,
      vhost_user::kVersion,
      40,
      index,
      addr_flags,
      desc,
      used,
      avail,
      log};
  send_raw(&m, sizeof(m), nullptr, 0);
}

void RawFrontend::send_log_base(int fd, uint64_t size, uint64_t offset, uint32_t flags) {
  struct [[gnu::packed]] {
    VhostUserRequest request;
    uint32_t flags, size;
    uint64_t mmap_size, mmap_offset;
  } m{vhost_user::kSetLogBase, vhost_user::kVersion | flags, 16, size, offset};
  send_raw(&m, sizeof(m), &fd, 1);
}

void RawFrontend::send_vring_fd(VhostUserRequest request, uint32_t index, int fd, uint32_t flags) {
  RawMessage m;
  m.request = request;
  m.flags = vhost_user::kVersion | flags;
  m.size = 8;
  m.u64 = index;
  send_raw(&m, kHeaderSize + 8, &fd, 1);
}

void RawFrontend::send_mem_table(const std::vector<RawRegion>& regions, uint32_t flags) {
  REQUIRE(regions.size() <= 8);
  uint8_t buf[kHeaderSize + sizeof(MemTable)] = {};
  MemTable table{};
  table.nregions = static_cast<uint32_t>(regions.size());
  std::vector<int> fds;
  for (size_t i = 0; i < regions.size(); ++i) {
    table.regions[i] = {regions[i].guest_phys_addr, regions[i].memory_size,
                        regions[i].userspace_addr, regions[i].mmap_offset};
    fds.push_back(regions[i].fd);
  }
  const uint32_t size = 8 + static_cast<uint32_t>(regions.size()) * 32;
  RawMessage head;
  head.request = vhost_user::kSetMemTable;
  head.flags = vhost_user::kVersion | flags;
  head.size = size;
  std::memcpy(buf, &head, kHeaderSize);
  std::memcpy(buf + kHeaderSize, &table, size);

  send_raw(buf, kHeaderSize + size, fds.data(), fds.size());
}

RawMessage RawFrontend::receive_reply(bool payload) {
  RawMessage m;
  REQUIRE(recv(fd_, &m, kHeaderSize, MSG_WAITALL) == static_cast<ssize_t>(kHeaderSize));
  if (!payload && m.size == 0) {
    m.u64 = 0;
    CHECK(m.flags == (vhost_user::kVersion | vhost_user::kReplyFlag));
    return m;
  }
  REQUIRE(m.size == sizeof(uint64_t));
  uint64_t u64 = 0;
  REQUIRE(recv(fd_, &u64, sizeof(u64), MSG_WAITALL) == sizeof(u64));
  m.u64 = u64;
  CHECK(m.flags == (vhost_user::kVersion | vhost_user::kReplyFlag));
  return m;
}

bool RawFrontend::closed_by_peer() {
  char c;
  return recv(fd_, &c, 1, 0) == 0;
}

namespace {

// Split ring layout in guest memory (virtio 1.x alignments: desc 16, avail 2, used 4).
constexpr uint64_t kDescBytes = 16ull * RawGuest::kRingSize;
constexpr uint64_t kAvailBytes = 6 + 2ull * RawGuest::kRingSize;
constexpr uint64_t kUsedBytes = 6 + 8ull * RawGuest::kRingSize;
constexpr uint64_t kRingArea = 64 << 10;  // each vring's rings within 64 KiB
constexpr uint64_t kBuffers = 256 << 10;  // packet buffers from here (TX, then RX)
constexpr uint64_t kBufferStride = 2048;  // one per descriptor
// The second pair's TX buffers: past the RX buffers (1 MiB + 256 x 2 KiB).
constexpr uint64_t kSecondPairBuffers = 3 << 19;
constexpr uint32_t kHeaderBytes = 12;  // virtio_net_hdr_mrg_rxbuf (VERSION_1)
constexpr uint64_t kFVersion1 = 1ull << 32;

}  // namespace

RawGuest::RawGuest(const std::string& path, uint16_t queue_pairs)
    : frontend_(path), queue_pairs_(queue_pairs) {
  REQUIRE((queue_pairs >= 1 && queue_pairs <= kMaxQueuePairs));
  // The rings of all vrings lie below the buffers.
  static_assert(2 * kMaxQueuePairs * kRingArea <= kBuffers);
  static_assert(kSecondPairBuffers + RawGuest::kRingSize * kBufferStride <= RawGuest::kMemSize);
  memfd_ = memfd_create("raw-guest", MFD_CLOEXEC);
  REQUIRE(memfd_ >= 0);
  REQUIRE(ftruncate(memfd_, kMemSize) == 0);
  void* mem = mmap(nullptr, kMemSize, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  REQUIRE(mem != MAP_FAILED);
  mem_ = static_cast<uint8_t*>(mem);
  set_up(false, kAllPairs);
}

void RawGuest::set_up(bool logging, uint16_t enabled_pairs) {
  using namespace vhost_user;
  std::memset(mem_, 0, kMemSize);
  for (Ring& r : rings_) r.avail_idx = 0;
  frontend_.send_message(kGetFeatures);
  const uint64_t features = frontend_.receive_reply().u64;
  REQUIRE((features & kFVersion1) != 0);
  frontend_.send_message(kGetProtocolFeatures);
  REQUIRE((frontend_.receive_reply().u64 & kProtocolFReplyAck) != 0);
  frontend_.send_message(kSetProtocolFeatures, 0, true, kProtocolFReplyAck);
  frontend_.send_message(kSetOwner);
  frontend_.send_message(kSetFeatures, 0, true,
                         kFVersion1 | kFProtocolFeatures | (logging ? kFLogAll : 0));
  frontend_.send_mem_table({{0, kMemSize, reinterpret_cast<uint64_t>(mem_), 0, memfd_}},
                           kNeedReply);
  REQUIRE(frontend_.receive_reply().u64 == 0);
  for (uint32_t i = 0; i < 2u * queue_pairs_; ++i) {
    Ring& r = rings_[i];
    r.desc = i * kRingArea;
    r.avail = r.desc + kDescBytes;
    r.used = (r.avail + kAvailBytes + 3) & ~uint64_t{3};
    REQUIRE(r.used + kUsedBytes <= (i + 1) * kRingArea);
    if (r.kick < 0) r.kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r.call < 0) r.call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    REQUIRE((r.kick >= 0 && r.call >= 0));
    frontend_.send_vring_state(kSetVringNum, i, kRingSize);
    frontend_.send_vring_state(kSetVringBase, i, 0);
    frontend_.send_vring_addr(
        i, reinterpret_cast<uint64_t>(host(r.desc)), reinterpret_cast<uint64_t>(host(r.used)),
        reinterpret_cast<uint64_t>(host(r.avail)), logging ? kVringFLog : 0, r.used);
    frontend_.send_vring_fd(kSetVringKick, i, r.kick);
    frontend_.send_vring_fd(kSetVringCall, i, r.call);
  }
  for (uint16_t pair = 0; pair < std::min(enabled_pairs, queue_pairs_); ++pair)
    for (uint32_t i = 2u * pair; i < 2u * pair + 2; ++i)
      frontend_.send_vring_state(kSetVringEnable, i, 1);
}

void RawGuest::reset_owner_and_set_up(bool logging, uint16_t enabled_pairs) {
  using namespace vhost_user;
  frontend_.send_message(kResetOwner);
  set_up(logging, enabled_pairs);
  // Every message handled: the device of before is gone, the new one running.
  frontend_.send_message(kGetFeatures);
  frontend_.receive_reply();
}

RawGuest::~RawGuest() {
  for (Ring& r : rings_) {
    if (r.kick >= 0) close(r.kick);
    if (r.call >= 0) close(r.call);
  }
  if (mem_ != nullptr) munmap(mem_, kMemSize);
  if (memfd_ >= 0) close(memfd_);
}

void RawGuest::enable_pair(uint16_t pair) {
  using namespace vhost_user;
  REQUIRE(pair < queue_pairs_);
  for (uint32_t i = 2u * pair; i < 2u * pair + 2; ++i)
    frontend_.send_vring_state(kSetVringEnable, i, 1);
  frontend_.send_message(kGetFeatures);  // its reply: every message before it handled
  frontend_.receive_reply();
}

void RawGuest::send(uint16_t count, uint32_t len, uint16_t pair) {
  REQUIRE(pair < queue_pairs_);
  Ring& r = rings_[2 * pair + 1];
  auto* avail = reinterpret_cast<uint16_t*>(host(r.avail));  // flags, idx, ring[]
  for (uint16_t i = 0; i < count; ++i) {
    const uint16_t slot = static_cast<uint16_t>(r.avail_idx % kRingSize);
    const uint64_t buf = (pair == 0 ? kBuffers : kSecondPairBuffers) + slot * kBufferStride;
    REQUIRE(kHeaderBytes + len <= kBufferStride);
    uint8_t* b = host(buf);
    std::memset(b, 0, kHeaderBytes);
    std::memset(b + kHeaderBytes, 0xff, 12);  // broadcast destination, source
    b[kHeaderBytes + 12] = 0x08;              // IPv4 ethertype: a plain frame
    b[kHeaderBytes + 13] = 0x00;
    for (uint32_t k = 14; k < len; ++k) b[kHeaderBytes + k] = static_cast<uint8_t>(k + slot);
    struct [[gnu::packed]] Desc {
      uint64_t addr;
      uint32_t len;
      uint16_t flags, next;
    } d{buf, kHeaderBytes + len, 0, 0};
    std::memcpy(host(r.desc) + 16ull * slot, &d, sizeof(d));
    avail[2 + slot] = slot;
    ++r.avail_idx;
  }
  __atomic_store_n(&avail[1], r.avail_idx, __ATOMIC_RELEASE);
  const uint64_t one = 1;
  REQUIRE(write(r.kick, &one, sizeof(one)) == sizeof(one));
}

void RawGuest::post_rx(uint16_t count) {
  Ring& r = rings_[0];
  auto* avail = reinterpret_cast<uint16_t*>(host(r.avail));
  for (uint16_t i = 0; i < count; ++i) {
    const uint16_t slot = static_cast<uint16_t>(r.avail_idx % kRingSize);
    struct [[gnu::packed]] Desc {
      uint64_t addr;
      uint32_t len;
      uint16_t flags, next;
    } d{rx_buffer_gpa(slot), kBufferStride, 2 /* VRING_DESC_F_WRITE */, 0};
    std::memcpy(host(r.desc) + 16ull * slot, &d, sizeof(d));
    avail[2 + slot] = slot;
    ++r.avail_idx;
  }
  __atomic_store_n(&avail[1], r.avail_idx, __ATOMIC_RELEASE);
}

uint16_t RawGuest::rx_used() const {
  return __atomic_load_n(reinterpret_cast<const uint16_t*>(host(rings_[0].used) + 2),
                         __ATOMIC_ACQUIRE);
}

void RawGuest::set_logging(bool on) {
  using namespace vhost_user;
  frontend_.send_message(kSetFeatures, 0, true,
                         kFVersion1 | kFProtocolFeatures | (on ? kFLogAll : 0));
  for (uint32_t i = 0; i < 2u * queue_pairs_; ++i) {
    const Ring& r = rings_[i];
    frontend_.send_vring_addr(
        i, reinterpret_cast<uint64_t>(host(r.desc)), reinterpret_cast<uint64_t>(host(r.used)),
        reinterpret_cast<uint64_t>(host(r.avail)), on ? kVringFLog : 0, r.used);
  }
}

Memfd::Memfd(uint64_t file_size, bool sealed)
    : fd(memfd_create("test", MFD_CLOEXEC | (sealed ? MFD_ALLOW_SEALING : 0))) {
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, static_cast<off_t>(file_size)) == 0);
  if (sealed) REQUIRE(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0);
}

Memfd::~Memfd() { close(fd); }

uint16_t RawGuest::tx_used(uint16_t pair) const {
  return __atomic_load_n(reinterpret_cast<const uint16_t*>(host(tx_ring(pair).used) + 2),
                         __ATOMIC_ACQUIRE);
}

uint64_t RawGuest::replace_vring_fd(VhostUserRequest request, uint32_t index) {
  Ring& r = rings_[index];
  int& fd = request == vhost_user::kSetVringCall ? r.call : r.kick;
  const int fresh = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  REQUIRE(fresh >= 0);
  frontend_.send_vring_fd(request, index, fresh, vhost_user::kNeedReply);
  close(fd);
  fd = fresh;
  return frontend_.receive_reply().u64;
}

uint64_t RawGuest::resend_mem_table() {
  frontend_.send_mem_table({{0, kMemSize, reinterpret_cast<uint64_t>(mem_), 0, memfd_}},
                           vhost_user::kNeedReply);
  return frontend_.receive_reply().u64;
}

int open_fd_count() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  REQUIRE(dir != nullptr);
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n - 1;  // the directory's own
}

}  // namespace vqs::test
