// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness: a hostile frontend's vhost-user messages to a zero-copy VhostDevice served by
// librte_vhost with our hooks (coverage guides it through our code only, not librte_vhost).
// Checks: no crash or hang (each connection ends within 2 s), then link down, every gate closed,
// no fd or memfd mapping left. See docs/security.md, "Fuzzing".
#include <dirent.h>
#include <fcntl.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_eal.h>
#include <rte_log.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "guarded_memory.h"
#include "ring/virtio_net_hdr.h"
#include "ring/vring.h"
#include "vhost/vhost_device.h"
#include "vhost/vhost_user_request.h"

using namespace vqs;
using R = VhostUserRequest;

namespace {

constexpr uint32_t kVersion = 0x1;
constexpr uint32_t kNeedReply = 1u << 3;
constexpr uint64_t kVringNoFd = 1ull << 8;
constexpr uint64_t kFProtocolFeatures = 1ull << 30;
constexpr uint16_t kQueuePairs = 2;

// Never deleted: it would outlive the registry it is listed in (a function-local static) when
// destroyed at exit.
VhostDevice* device = nullptr;
std::string socket_path;

struct [[gnu::packed]] Header {
  uint32_t request;
  uint32_t flags;
  uint32_t size;
};

// SET_VRING_ADDR's payload (the frontend's addresses of a ring's three areas, and its log).
struct [[gnu::packed]] VringAddrMsg {
  uint32_t index, flags;
  uint64_t desc, used, avail, log;
};

// SET_MEM_TABLE's payload: regions of {guest address, size, frontend address, mmap offset}.
struct [[gnu::packed]] MemTableMsg {
  uint32_t nregions, padding;
  uint64_t region[8][4];
};

class Frontend {
 public:
  Frontend() : fd_(socket(AF_UNIX, SOCK_STREAM, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      std::abort();
    const timeval timeout{2, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~Frontend() { close(fd_); }

  // False once the backend has closed the connection (it may, on any refused message).
  bool send(uint32_t request, uint32_t flags, const void* payload, uint32_t size,
            const std::vector<int>& fds = {}) {
    // VQS_FUZZ_TRACE=1: each message, to read what an input does.
    static const bool trace = std::getenv("VQS_FUZZ_TRACE") != nullptr;
    if (trace) {
      uint64_t u64 = 0;
      if (size > 0) std::memcpy(&u64, payload, std::min<uint32_t>(size, 8));
      std::fprintf(stderr, "request %u flags %#x size %u u64 %#llx fds %zu\n", request, flags, size,
                   static_cast<unsigned long long>(u64), fds.size());
    }
    std::vector<uint8_t> bytes(sizeof(Header) + size);
    const Header h{request, kVersion | flags, size};
    std::memcpy(bytes.data(), &h, sizeof(h));
    if (size > 0) std::memcpy(bytes.data() + sizeof(h), payload, size);
    iovec iov{bytes.data(), bytes.size()};
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
    return sendmsg(fd_, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  bool send(R request, uint32_t flags, const void* payload, uint32_t size,
            const std::vector<int>& fds = {}) {
    return send(static_cast<uint32_t>(request), flags, payload, size, fds);
  }
  bool send_u64(R request, uint32_t flags, uint64_t value, const std::vector<int>& fds = {}) {
    return send(request, flags, &value, sizeof(value), fds);
  }

  // Hangs up its side and reads whatever the backend still says until it closes its own, which
  // it does once every message before the hang-up was handled. False on a 2 s silence: a hang.
  bool hang_up() {
    shutdown(fd_, SHUT_WR);
    char sink[4096];
    for (;;) {
      const ssize_t n = recv(fd_, sink, sizeof(sink), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0) return false;
    }
  }

 private:
  int fd_;
};

// Open fds of the kinds a frontend sends or a connection makes: memfds, eventfds, sockets (the
// fuzzer's own pipes come and go).
int open_fds() {
  int count = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) std::abort();
  char path[64], target[256];
  while (const dirent* e = readdir(dir)) {
    std::snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    const ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (std::strncmp(target, "/memfd:", 7) == 0 ||
        std::strcmp(target, "anon_inode:[eventfd]") == 0 || std::strncmp(target, "socket:", 7) == 0)
      ++count;
  }
  closedir(dir);
  return count;
}

int memfd_mappings() {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) std::abort();
  int count = 0;
  char line[4096];
  while (std::fgets(line, sizeof(line), maps) != nullptr)
    if (std::strstr(line, "/memfd:") != nullptr) ++count;
  std::fclose(maps);
  return count;
}

// A region's memory: a memfd of the fuzzer's size. The frontend's own copy is not needed (the
// rings stay empty); its "userspace address" is just a number the vring addresses refer to.
struct Region {
  int fd;
  uint64_t file_size;
  uint64_t gpa, size, uaddr, offset;
};

Region make_region(FuzzedDataProvider& in, uint64_t default_uaddr) {
  const uint64_t kSizes[] = {0, 4096, 64 << 10, 2 << 20};
  Region r{};
  r.file_size = in.ConsumeBool() ? kSizes[in.ConsumeIntegralInRange(0, 3)]
                                 : in.ConsumeIntegralInRange<uint64_t>(0, 4 << 20);
  r.fd = memfd_create("vqs-fuzz-guest", MFD_CLOEXEC);
  if (r.fd < 0 || ftruncate(r.fd, static_cast<off_t>(r.file_size)) != 0) std::abort();
  const bool fits = in.ConsumeProbability<float>() < 0.8f;
  r.gpa = fits ? 0 : in.ConsumeIntegral<uint64_t>();
  r.size = fits ? r.file_size : in.ConsumeIntegral<uint64_t>();
  r.offset = fits ? 0 : in.ConsumeIntegral<uint64_t>();
  r.uaddr = fits ? default_uaddr : in.ConsumeIntegral<uint64_t>();
  return r;
}

// librte_vhost lets a connection go on its own thread. Returns the deadline (2 s) for what
// follows from it.
std::chrono::steady_clock::time_point wait_until_let_go() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (device->frontend_connections() != 0) {
    VQS_FUZZ_CHECK(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return deadline;
}

int fds_before = 0;
int maps_before = 0;

// Guest memory for a started queue pair: one region of kBringUpSize bytes at the frontend's
// address `uaddr`; vring v's areas at v x kBringUpStride (descriptors, then the avail ring or
// driver event area at +4096, the used ring or device event area at +8192).
constexpr uint64_t kBringUpSize = 64 << 10;
constexpr uint64_t kBringUpStride = 16 << 10;

// Sends what a frontend sends to start queue pair 0, as QEMU does: features (split or packed,
// with protocol features or not), a memory table whose rings hold the fuzzer's bytes (hostile
// descriptors, flags and wrap bits for a packed ring's resume, avail and used indices), then for
// vrings 0 and 1 their size, base (the fuzzer's: a packed base carries wrap bits), addresses,
// kick and call, and the enable. librte_vhost then starts the device, so our ring start (and a
// packed ring's base check) runs on what the fuzzer wrote. False once the backend hung up.
bool bring_up(Frontend& frontend, FuzzedDataProvider& in, uint64_t uaddr) {
  const bool packed = in.ConsumeBool();
  const bool protocol = in.ConsumeProbability<float>() < 0.8f;
  uint64_t features =
      (offered_virtio_features(true, true) & in.ConsumeIntegral<uint64_t>()) | (1ull << kFVersion1);
  features &= ~(1ull << kFRingPacked);
  if (packed) features |= 1ull << kFRingPacked;
  if (protocol) features |= kFProtocolFeatures;
  if (!frontend.send(R::kSetOwner, 0, nullptr, 0) ||
      !frontend.send_u64(R::kSetFeatures, 0, features))
    return false;
  if (protocol && !frontend.send_u64(R::kSetProtocolFeatures, 0, handled_protocol_features()))
    return false;

  const int fd = memfd_create("vqs-fuzz-guest", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, kBringUpSize) != 0) std::abort();
  void* memory = mmap(nullptr, kBringUpSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED) std::abort();
  for (uint64_t v = 0; v < 2; ++v) {  // each vring's descriptors and its two small areas
    auto* ring = static_cast<uint8_t*>(memory) + v * kBringUpStride;
    const std::vector<uint8_t> desc = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange(0, 4096));
    if (!desc.empty()) std::memcpy(ring, desc.data(), desc.size());
    const uint64_t driver_area = in.ConsumeIntegral<uint64_t>(),
                   device_area = in.ConsumeIntegral<uint64_t>();
    std::memcpy(ring + 4096, &driver_area, sizeof(driver_area));
    std::memcpy(ring + 8192, &device_area, sizeof(device_area));
  }
  munmap(memory, kBringUpSize);
  MemTableMsg table{};
  table.nregions = 1;
  const uint64_t region[4] = {0, kBringUpSize, uaddr, 0};
  std::memcpy(table.region[0], region, sizeof(region));
  const bool sent = frontend.send(R::kSetMemTable, 0, &table, 8 + 32, {fd});
  close(fd);
  if (!sent) return false;

  for (uint32_t v = 0; v < 2; ++v) {
    const uint64_t at = uaddr + v * kBringUpStride;
    const VringAddrMsg addr{v, 0, at, at + 8192, at + 4096, 0};
    const uint32_t base = in.ConsumeBool() ? 0 : in.ConsumeIntegral<uint32_t>();
    const int kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    const int call = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    const bool ok =
        frontend.send_u64(R::kSetVringNum, 0, v | (uint64_t{256} << 32)) &&
        frontend.send_u64(R::kSetVringBase, 0, v | (uint64_t{base} << 32)) &&
        frontend.send(R::kSetVringAddr, 0, &addr, sizeof(addr)) &&
        frontend.send_u64(R::kSetVringKick, 0, v, {kick}) &&
        frontend.send_u64(R::kSetVringCall, 0, v, {call}) &&
        (!protocol || frontend.send_u64(R::kSetVringEnable, 0, v | (uint64_t{1} << 32)));
    close(kick);
    close(call);
    if (!ok) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string prefix = "--file-prefix=vqs-fuzz-" + std::to_string(getpid());
  const char* args[] = {"vhost_message_fuzz", "--no-huge",   "--no-shconf", "--no-pci", "-m", "256",
                        "--log-level=0",      prefix.c_str()};
  if (rte_eal_init(static_cast<int>(std::size(args)), const_cast<char**>(args)) < 0) std::abort();
  rte_log_set_global_level(RTE_LOG_EMERG);  // librte_vhost logs every message at INFO
  socket_path = "/tmp/vqs-fuzz-" + std::to_string(getpid()) + ".sock";
  unlink(socket_path.c_str());
  std::atexit([] { unlink(socket_path.c_str()); });  // the device is never unregistered
  VhostDeviceOptions options;
  options.path = socket_path;
  options.queue_pairs = kQueuePairs;
  options.tso = true;
  options.zero_copy = true;
  std::string error;
  device = VhostDevice::create(options, nullptr, &error).release();
  if (device == nullptr) {
    std::fprintf(stderr, "%s\n", error.c_str());
    std::abort();
  }
  device->set_datapath_enabled(true);
  // One connection first: librte_vhost's thread and its descriptors come with the first one and
  // stay; what every input must leave as it found is counted after it.
  {
    Frontend frontend;
    frontend.send(R::kGetFeatures, 0, nullptr, 0);
    VQS_FUZZ_CHECK(frontend.hang_up());
  }
  wait_until_let_go();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // and its device freed
  fds_before = open_fds();
  maps_before = memfd_mappings();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  constexpr uint64_t kUaddr = 0x7f0000000000;  // the frontend's address of region 0
  {
    Frontend frontend;
    std::vector<int> sent;  // fds handed over: the backend owns them now
    bool open = true;
    for (int op = 0; open && op < 24 && in.remaining_bytes() > 0; ++op) {
      const uint32_t flags = in.ConsumeBool() ? kNeedReply : 0;
      const uint32_t vring = in.ConsumeIntegralInRange<uint32_t>(0, 2 * kQueuePairs);
      switch (in.ConsumeIntegralInRange(0, 14)) {
        case 0:
          open = frontend.send(R::kGetFeatures, flags, nullptr, 0);
          break;
        case 1: {  // what we offer, masked by the fuzzer, with PROTOCOL_FEATURES mostly
          uint64_t features = offered_virtio_features(true, true) & in.ConsumeIntegral<uint64_t>();
          if (in.ConsumeBool()) features |= kFProtocolFeatures;
          open = frontend.send_u64(R::kSetFeatures, flags, features);
          break;
        }
        case 2:
          open = frontend.send(in.ConsumeBool() ? R::kSetOwner : R::kResetOwner, flags, nullptr, 0);
          break;
        case 3: {  // SET_MEM_TABLE, 1 or 2 regions, fds as many as regions or not
          MemTableMsg table{};
          std::vector<int> fds;
          table.nregions = in.ConsumeIntegralInRange<uint32_t>(1, 2);
          for (uint32_t i = 0; i < table.nregions; ++i) {
            const Region r = make_region(in, kUaddr + i * (8ull << 20));
            const uint64_t fields[4] = {r.gpa + i * (8ull << 20), r.size, r.uaddr, r.offset};
            std::memcpy(table.region[i], fields, sizeof(fields));
            fds.push_back(r.fd);
          }
          if (in.ConsumeProbability<float>() < 0.1f) {  // one fd too few
            close(fds.back());
            fds.pop_back();
          }
          open = frontend.send(R::kSetMemTable, flags, &table, 8 + 32 * table.nregions, fds);
          for (int fd : fds) close(fd);  // ours; the backend got its own copies
          break;
        }
        case 4:
        case 5:
        case 12: {  // SET_VRING_NUM / BASE / ENABLE
          const R kRequests[] = {R::kSetVringNum, R::kSetVringBase, R::kSetVringEnable};
          const R request = kRequests[in.ConsumeIntegralInRange(0, 2)];
          const uint32_t num = in.ConsumeBool() ? (request == R::kSetVringNum ? 256 : 1)
                                                : in.ConsumeIntegral<uint32_t>();
          open = frontend.send_u64(request, flags, vring | (uint64_t{num} << 32));
          break;
        }
        case 6: {  // SET_VRING_ADDR: a 256-entry ring at the start of region 0, or anywhere
          VringAddrMsg addr{vring, 0, kUaddr, kUaddr + 8192, kUaddr + 4096, 0};
          if (in.ConsumeBool()) {  // log the used ring (live migration), at its address or not
            addr.flags = 1u << 0;  // VHOST_VRING_F_LOG
            addr.log = in.ConsumeBool() ? 8192 : in.ConsumeIntegral<uint64_t>();
          }
          if (in.ConsumeProbability<float>() < 0.3f) {
            addr.desc = in.ConsumeIntegral<uint64_t>();
            addr.used = in.ConsumeIntegral<uint64_t>();
            addr.avail = in.ConsumeIntegral<uint64_t>();
          }
          open = frontend.send(R::kSetVringAddr, flags, &addr, sizeof(addr));
          break;
        }
        case 7:
        case 8: {  // SET_VRING_KICK / CALL: an eventfd, or "no fd"
          const R request = in.ConsumeBool() ? R::kSetVringKick : R::kSetVringCall;
          if (in.ConsumeBool()) {
            open = frontend.send_u64(request, flags, vring | kVringNoFd);
          } else {
            const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
            open = frontend.send_u64(request, flags, vring, {fd});
            close(fd);
          }
          break;
        }
        case 9:
          open = frontend.send_u64(R::kGetVringBase, flags, vring);
          break;
        case 10:
          open = frontend.send(R::kGetProtocolFeatures, flags, nullptr, 0) &&
                 frontend.send_u64(R::kSetProtocolFeatures, flags,
                                   handled_protocol_features() & in.ConsumeIntegral<uint64_t>());
          break;
        case 13: {  // SET_LOG_BASE: a memfd log of the fuzzer's size, size and offset
          const uint64_t file_size = in.ConsumeIntegralInRange<uint64_t>(0, 64 << 10);
          const int fd = memfd_create("vqs-fuzz-log", MFD_CLOEXEC | MFD_ALLOW_SEALING);
          if (fd < 0 || ftruncate(fd, static_cast<off_t>(file_size)) != 0) std::abort();
          if (in.ConsumeProbability<float>() < 0.8f &&  // sealed as QEMU does, mostly
              fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
            std::abort();
          const bool fits = in.ConsumeProbability<float>() < 0.7f;
          const uint64_t log[2] = {fits ? file_size : in.ConsumeIntegral<uint64_t>(),
                                   fits ? 0 : in.ConsumeIntegral<uint64_t>()};
          open = frontend.send(R::kSetLogBase, flags, log, sizeof(log), {fd});
          close(fd);
          break;
        }
        case 14:  // queue pair 0 started as a frontend would, on rings of the fuzzer's bytes
          open = bring_up(frontend, in, kUaddr);
          break;
        case 11: {  // any request, any payload, no fds
          const uint32_t request = in.ConsumeIntegralInRange<uint32_t>(0, 40);
          const std::vector<uint8_t> payload =
              in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 64));
          open = frontend.send(request, flags | (in.ConsumeIntegral<uint32_t>() & ~0xfu),
                               payload.data(), static_cast<uint32_t>(payload.size()));
          break;
        }
      }
    }
    VQS_FUZZ_CHECK(frontend.hang_up());
  }
  const auto deadline = wait_until_let_go();
  VQS_FUZZ_CHECK(!device->link_up());
  for (uint16_t v = 0; v < device->vring_count(); ++v) VQS_FUZZ_CHECK(!device->vring_ready(v));
  // librte_vhost tells us the connection is gone (destroy_connection) before it frees the
  // device's memory table and fds: wait for those too, within the same bound.
  while (open_fds() != fds_before || memfd_mappings() != maps_before) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fds %d (before %d), memfd mappings %d (before %d)\n", open_fds(),
                   fds_before, memfd_mappings(), maps_before);
      VQS_FUZZ_CHECK(!"every fd and mapping of the connection released");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return 0;
}
