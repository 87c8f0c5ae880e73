#include "raw_frontend.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

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

void RawFrontend::send_message(uint32_t request, uint32_t flags, bool with_u64, uint64_t u64) {
  RawMessage m;
  m.request = request;
  m.flags = vhost_user::kVersion | flags;
  m.size = with_u64 ? sizeof(uint64_t) : 0;
  m.u64 = u64;
  const size_t len = kHeaderSize + m.size;
  REQUIRE(send(fd_, &m, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len));
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

  iovec iov{buf, kHeaderSize + size};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  REQUIRE(sendmsg(fd_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(iov.iov_len));
}

RawMessage RawFrontend::receive_reply() {
  RawMessage m;
  REQUIRE(recv(fd_, &m, kHeaderSize, MSG_WAITALL) == static_cast<ssize_t>(kHeaderSize));
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
