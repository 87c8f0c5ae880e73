// SPDX-License-Identifier: BSD-3-Clause
#include "vhost/vhost_device.h"

#include <poll.h>
#include <rte_cycles.h>
#include <rte_log.h>
#include <rte_version.h>
#include <rte_vhost.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <shared_mutex>

#include "ring/guest_mapping.h"
#include "ring/virtio_net_hdr.h"
#include "ring/vring.h"
#include "vhost/vhost_user_request.h"

#define VQS_LOG(level, fmt, ...) \
  rte_log(RTE_LOG_##level, RTE_LOGTYPE_USER1, "vqs: " fmt "\n", ##__VA_ARGS__)

namespace vqs {
namespace {

// Requests after which ring addresses, guest memory, the kick/call fds or the features may
// differ: the datapath stays out while they are handled.
bool changes_ring_state(uint32_t request) {
  switch (static_cast<VhostUserRequest>(request)) {
    case VhostUserRequest::kSetFeatures:
    case VhostUserRequest::kSetMemTable:
    case VhostUserRequest::kSetVringNum:
    case VhostUserRequest::kSetVringAddr:
    case VhostUserRequest::kSetVringBase:
    case VhostUserRequest::kSetVringKick:
    case VhostUserRequest::kSetVringCall:  // librte_vhost closes the old callfd we write to
      return true;
    default:
      return false;
  }
}

// Socket path -> device. Callbacks hold the lock shared for their whole run, so a device is not
// destroyed under a running callback; the destructor takes it exclusively to unlist the device.
std::shared_mutex registry_mutex;
std::map<std::string, VhostDevice*>& registry() {
  static std::map<std::string, VhostDevice*> devices;
  return devices;
}

template <typename Fn>
auto with_device(int vid, Fn&& fn) {
  char path[PATH_MAX];
  std::shared_lock lock(registry_mutex);
  VhostDevice* device = nullptr;
  if (rte_vhost_get_ifname(vid, path, sizeof(path)) == 0) {
    auto it = registry().find(path);
    if (it != registry().end()) device = it->second;
  }
  return fn(device);
}

// How long a stopping guest TX vring waits for its lent buffers to come back before the ring's
// indices are handed over (on librte_vhost's thread, which serves every device: short), and how
// long the device's teardown waits before it leaves a tracker allocated.
constexpr uint64_t kLentStopWaitMs = 50;
constexpr uint64_t kLentTeardownWaitMs = 1000;
// While a stopping vring waits, the owner's release request is repeated this often: a NIC frees
// only what it has finished sending, and more finishes as the wait goes on.
constexpr uint64_t kLentReleaseRepeatMs = 10;

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
// message (header, then VhostUserMemory: nregions, padding, regions of four u64) followed by the
// fds that came with it. The fds' place follows from the size of the message's payload union,
// which librte_vhost keeps stable for external handlers ("can't be changed carelessly"); it is
// checked against the message before use.
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

// A SET_MEM_TABLE whose regions reach past the end of their files would map, and the first
// touch of those pages (librte_vhost's own, translating ring addresses, or an lcore's) raises
// SIGBUS in the whole process. Such a table is refused before librte_vhost maps it; so is one
// whose fds do not match its regions (librte_vhost would refuse it too). Its fds are closed here:
// librte_vhost leaves a message's fds to a pre-hook that fails it.
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

// Pre- (kAfter false) and post-message hook. When the device answers a message itself, the
// pre-hook writes the u64 payload and returns REPLY: librte_vhost then sends the message back as
// the reply (setting the reply flags, clearing NEED_REPLY) and skips its own handler, and with it
// the check that the message carries no fds (none are expected with the ones we answer).
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
    if (d == nullptr || !d->on_message(vid, head.request, kAfter, &reply))
      return RTE_VHOST_MSG_RESULT_NOT_HANDLED;
    head.u64 = reply;
    head.size = sizeof(reply);
    std::memcpy(msg, &head, sizeof(head));
    return RTE_VHOST_MSG_RESULT_REPLY;
  });
}

const rte_vhost_user_extern_ops kMessageHooks = {message_hook<false>, message_hook<true>};

const rte_vhost_device_ops kDeviceOps = {
    .new_device =
        [](int vid) {
          return with_device(vid, [vid](VhostDevice* d) { return d ? d->on_new_device(vid) : -1; });
        },
    .destroy_device =
        [](int vid) {
          with_device(vid, [vid](VhostDevice* d) {
            if (d) d->on_destroy_device(vid);
            return 0;
          });
        },
    .vring_state_changed =
        [](int vid, uint16_t vring, int enable) {
          return with_device(vid, [&](VhostDevice* d) {
            if (d) d->on_vring_state_changed(vid, vring, enable != 0);
            return 0;
          });
        },
    .features_changed = nullptr,
    .new_connection =
        [](int vid) {
          return with_device(vid,
                             [vid](VhostDevice* d) { return d ? d->on_new_connection(vid) : -1; });
        },
    .destroy_connection =
        [](int vid) {
          with_device(vid, [vid](VhostDevice* d) {
            if (d) d->on_destroy_connection(vid);
            return 0;
          });
        },
    .guest_notified = nullptr,
    .reserved = {nullptr},
};

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a socket";
}

// Prepares a server socket's path for bind(). A socket file left by a process that is gone is
// removed; anything else there is an error: a socket someone accepts on, and any path that is not
// a socket itself (lstat: a symlink is not followed), which is never removed. librte_vhost
// unlinks a server's path when its registration is undone, so the check comes before it.
bool clear_server_socket_path(const std::string& path, std::string* error) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    *error = std::string("cannot inspect the socket path: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISSOCK(st.st_mode)) {
    *error = std::string("the path exists and is not a socket (") + file_kind(st.st_mode) +
             "); it is left as it is";
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    *error = "socket path longer than " + std::to_string(sizeof(addr.sun_path) - 1) + " bytes";
    return false;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket(): ") + std::strerror(errno);
    return false;
  }
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  const int err = errno;
  close(fd);
  if (live || err != ECONNREFUSED) {
    *error = live ? std::string("another process accepts connections on this socket")
                  : std::string("cannot probe the existing socket: ") + std::strerror(err);
    return false;
  }
  VQS_LOG(INFO, "%s: removing stale socket file", path.c_str());
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    *error = std::string("cannot remove the stale socket file: ") + std::strerror(errno);
    return false;
  }
  return true;
}

}  // namespace

uint64_t offered_virtio_features(bool tso, bool zero_copy) {
  uint64_t f = (1ull << kFVersion1) | (1ull << kNetFMrgRxbuf) | (1ull << kRingFIndirectDesc) |
               (1ull << kRingFEventIdx) | (1ull << kNetFMq) | (1ull << kNetFCtrlVq) |
               (1ull << kNetFCsum) | (1ull << kNetFGuestCsum) | (1ull << kFAnyLayout) |
               (1ull << kNetFGuestAnnounce) | (1ull << VHOST_USER_F_PROTOCOL_FEATURES);
  // CTRL_VQ, GUEST_ANNOUNCE: the frontend (QEMU, virtio_user) serves the control queue itself.
  // IN_ORDER: both directions use chains in avail order (the mergeable gatherer keeps to it when
  // negotiated); DPDK's virtio driver then takes its cheaper in-order paths, as with net_vhost.
  // Not with zero-copy: lent chains come back in the order their mbufs are freed.
  if (!zero_copy) f |= 1ull << kFInOrder;
  if (tso) {
    f |= (1ull << kNetFHostTso4) | (1ull << kNetFHostTso6) | (1ull << kNetFGuestTso4) |
         (1ull << kNetFGuestTso6);
  }
  return f;
}

uint64_t handled_protocol_features() {
  // Not RARP (librte_vhost only stores it for its own dequeue), not LOG_SHMFD (no dirty logging
  // yet, so no VHOST_F_LOG_ALL either), not INFLIGHT_SHMFD, nothing vDPA- or postcopy-specific.
  return (1ull << VHOST_USER_PROTOCOL_F_MQ) | (1ull << VHOST_USER_PROTOCOL_F_REPLY_ACK) |
         (1ull << VHOST_USER_PROTOCOL_F_STATUS);
}

VhostDevice::VhostDevice(const VhostDeviceOptions& options, Listener* listener)
    : options_(options), listener_(listener), vrings_(new Vring[2 * options.queue_pairs]) {
  if (options.zero_copy)
    for (uint16_t q = 0; q < options.queue_pairs; ++q)
      vrings_[guest_tx_vring(q)].zero_copy = ZeroCopyTracker::acquire();
}

std::unique_ptr<VhostDevice> VhostDevice::create(const VhostDeviceOptions& options,
                                                 Listener* listener, std::string* error) {
  const char* path = options.path.c_str();
  std::unique_ptr<VhostDevice> device(new VhostDevice(options, listener));
  {
    std::unique_lock lock(registry_mutex);
    if (!registry().emplace(options.path, device.get()).second) {
      *error = "socket " + options.path + " is already in use by another port";
      return nullptr;
    }
  }
  auto fail = [&](const std::string& what, bool registered) -> std::unique_ptr<VhostDevice> {
    *error = options.path + ": " + what;
    if (registered) rte_vhost_driver_unregister(path);
    std::unique_lock lock(registry_mutex);
    registry().erase(options.path);
    device->registered_ = false;
    return nullptr;
  };
  device->registered_ = true;

  uint64_t flags = 0;
  if (options.client) {
    flags |= RTE_VHOST_USER_CLIENT;
    if (!options.reconnect) flags |= RTE_VHOST_USER_NO_RECONNECT;
  } else if (std::string why; !clear_server_socket_path(options.path, &why)) {
    return fail(why, false);
  }
  if (rte_vhost_driver_register(path, flags) != 0)
    return fail("vhost-user registration failed", false);
  if (rte_vhost_driver_callback_register(path, &kDeviceOps) != 0)
    return fail("callback registration failed", true);
  // disable_features, unlike set_features, keeps librte_vhost's builtin net mode, in which a
  // device is ready once its first queue pair is (not every vring it allocated) and queue pairs
  // beyond the negotiated MQ are released: what a virtio-net guest expects.
  uint64_t lib_features = 0;
  if (rte_vhost_driver_get_features(path, &lib_features) != 0 ||
      rte_vhost_driver_disable_features(
          path, lib_features & ~offered_virtio_features(options.tso, options.zero_copy)) != 0)
    return fail("feature set-up failed", true);
  uint64_t protocol = 0;
  if (rte_vhost_driver_get_protocol_features(path, &protocol) != 0 ||
      rte_vhost_driver_set_protocol_features(path, protocol & handled_protocol_features()) != 0)
    return fail("protocol feature set-up failed", true);
  if (rte_vhost_driver_start(path) != 0) return fail("could not start the socket", true);
  // Right after bind(): until then the socket has the umask's mode, so a mode wider than that
  // opens no window (a narrower one does: keep sockets in a directory only the intended users
  // can reach).
  if (std::string why; !options.client && !apply_socket_access(options.path, options.access, &why))
    return fail(why, true);
  return device;
}

VhostDevice::~VhostDevice() {
  if (!registered_) return;
  {
    // Exclusive: no callback runs meanwhile (they hold it shared), so librte_vhost cannot free
    // the device under us while we hand the indices back; then unlisted, callbacks find nothing.
    std::unique_lock registry_lock(registry_mutex);
    std::lock_guard lock(mutex_);
    datapath_enabled_ = false;
    running_ = false;
    apply_locked();
    registry().erase(options_.path);
  }
  rte_vhost_driver_unregister(options_.path.c_str());
  // Chains still lent: their mbufs call back into the trackers when freed, so a tracker is
  // freed only once its chains completed (waited for, bounded); otherwise it is left allocated,
  // with the mappings it holds, rather than freed under a consumer.
  const uint64_t deadline =
      rte_get_timer_cycles() + rte_get_timer_hz() * kLentTeardownWaitMs / 1000;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    ZeroCopyTracker::Handle& zc = vrings_[i].zero_copy;
    if (zc == nullptr) continue;
    zc->reap_orphans_only();
    while (zc->in_flight() > 0 && rte_get_timer_cycles() < deadline) {
      rte_delay_us_sleep(1000);
      zc->reap_orphans_only();
    }
    if (zc->in_flight() > 0) {
      VQS_LOG(WARNING, "%s: vring %u: %u zero-copy buffers still held at teardown; left mapped",
              path().c_str(), i, zc->in_flight());
      (void)zc.release();
    }
  }
  if (mapping_ != nullptr) mapping_->release();
}

void VhostDevice::set_datapath_enabled(bool enabled) {
  std::lock_guard lock(mutex_);
  datapath_enabled_ = enabled;
  apply_locked();
}

int VhostDevice::on_new_connection(int vid) {
  {
    std::lock_guard lock(mutex_);
    // Every connection keeps its own vring-enabled flags; which one is served is decided by
    // new_device (the newest device wins). A second frontend while one is connected is refused
    // at its first message (admit()); until then it changes nothing for the device served.
    if (!enabled_by_vid_.empty())
      VQS_LOG(WARNING, "%s: frontend %d connects while another is connected", path().c_str(), vid);
    enabled_by_vid_[vid].assign(vring_count(), false);
  }
  // The hooks bracket every message from now on (no context: they look the device up by path).
  return rte_vhost_extern_callback_register(vid, &kMessageHooks, nullptr) == 0 ? 0 : -1;
}

void VhostDevice::on_destroy_connection(int vid) {
  std::lock_guard lock(mutex_);
  enabled_by_vid_.erase(vid);
  admitted_.erase(vid);
}

size_t VhostDevice::frontend_connections() {
  std::lock_guard lock(mutex_);
  return enabled_by_vid_.size();
}

bool VhostDevice::admit(int vid) {
  std::lock_guard lock(mutex_);
  if (admitted_.count(vid) != 0) return true;
  for (int other : admitted_) {
    if (enabled_by_vid_.count(other) == 0) continue;
    refused_frontends_.fetch_add(1);
    VQS_LOG(WARNING, "%s: frontend %d refused: frontend %d is connected", path().c_str(), vid,
            other);
    return false;
  }
  admitted_.insert(vid);
  return true;
}

int VhostDevice::on_new_device(int vid) {
  {
    std::lock_guard lock(mutex_);
    auto flags = enabled_by_vid_.find(vid);
    if (flags == enabled_by_vid_.end()) return -1;
    if (running_) {  // an older connection's device: it is not served any more
      running_ = false;
      apply_locked();
    }
    vid_ = vid;
    for (uint16_t i = 0; i < vring_count(); ++i) vrings_[i].enabled = flags->second[i];
    uint64_t features = 0;
    rte_vhost_get_negotiated_features(vid, &features);
    features_.store(features, std::memory_order_release);
    suspended_ = false;
    if (!load_memory_locked(true)) {
      link_up_.store(false, std::memory_order_release);
      return -1;
    }
    running_ = true;
    apply_locked();
    link_up_.store(true, std::memory_order_release);
  }
  VQS_LOG(INFO, "%s: guest device %d running (features 0x%" PRIx64 ")", path().c_str(), vid,
          negotiated_features());
  if (listener_) listener_->on_link_change(true);
  return 0;
}

void VhostDevice::on_destroy_device(int vid) {
  {
    std::lock_guard lock(mutex_);
    if (vid != vid_) return;
    running_ = false;
    suspended_ = false;
    apply_locked();  // stops every vring and hands its indices back to librte_vhost
    memory_.clear();
    loaded_table_.clear();
    if (mapping_ != nullptr) {
      mapping_->release();  // chains still lent keep it until they complete
      mapping_ = nullptr;
    }
    link_up_.store(false, std::memory_order_release);
  }
  VQS_LOG(INFO, "%s: guest device %d stopped", path().c_str(), vid);
  if (listener_) listener_->on_link_change(false);
}

uint32_t VhostDevice::reap_orphans() {
  // Cheap hints first (no lock while a guest is served, or when nothing completed): librte_vhost's
  // thread may hold the lock through a stopping ring's wait.
  bool waiting = false;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    const ZeroCopyTracker* zc = vrings_[i].zero_copy.get();
    waiting |= zc != nullptr && zc->completions_waiting();
  }
  if (!waiting || link_up()) {
    uint32_t lent = 0;
    for (uint16_t i = 0; i < vring_count(); ++i) lent += zero_copy_in_flight(i);
    return lent;
  }
  std::lock_guard lock(mutex_);
  uint32_t lent = 0;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    ZeroCopyTracker* zc = vrings_[i].zero_copy.get();
    if (zc == nullptr) continue;
    // Without a running device every vring is stopped (its gate closed: we are its owner) and
    // every chain still lent is an orphan.
    if (!running_ && zc->completions_waiting()) zc->reap_orphans_only();
    lent += zc->in_flight();
  }
  return lent;
}

bool VhostDevice::vring_enabled(uint16_t vring) {
  std::lock_guard lock(mutex_);
  return vid_ >= 0 && vrings_[vring].enabled;
}

void VhostDevice::on_vring_state_changed(int vid, uint16_t vring, bool enabled) {
  if (vring >= vring_count()) {
    if (enabled) {
      unserved_vring_enables_.fetch_add(1);
      VQS_LOG(WARNING, "%s: guest enabled vring %u but only %u queue pairs are served",
              path().c_str(), vring, queue_pairs());
    }
    return;
  }
  {
    std::lock_guard lock(mutex_);
    auto flags = enabled_by_vid_.find(vid);
    if (flags != enabled_by_vid_.end()) flags->second[vring] = enabled;
    if (vid != vid_) return;  // not the device being served
    vrings_[vring].enabled = enabled;
    apply_locked();
  }
  if (listener_) listener_->on_vring_state(vring, enabled);
}

bool VhostDevice::on_message(int vid, uint32_t request, bool after, uint64_t* reply) {
  bool link_lost = false;
  {
    std::lock_guard lock(mutex_);
    if (!after && vid == vid_) {
      if (suspended_) {
        // The previous ring-changing message failed (librte_vhost skips the post-hook then) and
        // left its state half changed: serve nothing until the device is set up again.
        VQS_LOG(ERR, "%s: a vhost-user message failed; device stopped until it is reset",
                path().c_str());
        suspended_ = false;
        running_ = false;
        apply_locked();
        link_lost = link_up_.exchange(false);
      } else if (running_ && changes_ring_state(request)) {
        suspended_ = true;
        apply_locked();
      }
    } else if (after && suspended_ && vid == vid_) {
      suspended_ = false;
      uint64_t features = 0;
      rte_vhost_get_negotiated_features(vid_, &features);
      features_.store(features, std::memory_order_release);
      if (!load_memory_locked(false)) {
        running_ = false;
        link_lost = link_up_.exchange(false);
      }
      apply_locked();
    }
  }
  if (link_lost && listener_) listener_->on_link_change(false);
  // librte_vhost would announce its own maximum, and a frontend with more queue pairs than we
  // serve would be accepted with the extra ones never polled. Asked before any device exists
  // (QEMU: right after protocol feature negotiation), so for every connection.
  if (after || request != static_cast<uint32_t>(VhostUserRequest::kGetQueueNum)) return false;
  *reply = queue_pairs();
  return true;
}

bool VhostDevice::load_memory_locked(bool force) {
  rte_vhost_memory* table = nullptr;
  if (rte_vhost_get_mem_table(vid_, &table) != 0) {
    VQS_LOG(ERR, "%s: no guest memory table", path().c_str());
    memory_.clear();
    loaded_table_.clear();
    return false;
  }
  std::vector<LoadedRegion> regions_now;
  for (uint32_t i = 0; i < table->nregions; ++i) {
    const rte_vhost_mem_region& r = table->regions[i];
    regions_now.push_back({r.guest_phys_addr, r.size, r.host_user_addr, r.mmap_size, r.fd});
  }
  if (!force && !loaded_table_.empty() && regions_now == loaded_table_) {
    std::free(table);
    return true;
  }
  loaded_table_.clear();
  memory_.clear();
  if (mapping_ != nullptr) {
    mapping_->release();  // trackers with chains lent from it keep it
    mapping_ = nullptr;
  }
  if (options_.zero_copy) {
    // Our own mapping of the region fds: lent buffers outlive librte_vhost's.
    std::vector<GuestMapping::Region> regions;
    for (uint32_t i = 0; i < table->nregions; ++i) {
      const rte_vhost_mem_region& r = table->regions[i];
      regions.push_back({r.guest_phys_addr, r.size, r.fd, r.mmap_size,
                         r.host_user_addr - reinterpret_cast<uint64_t>(r.mmap_addr)});
    }
    std::free(table);
    std::string error;
    mapping_ = GuestMapping::create(regions, &memory_, options_.dma_registrar, &error);
    if (mapping_ == nullptr) {
      VQS_LOG(ERR, "%s: guest memory: %s", path().c_str(), error.c_str());
      return false;
    }
    if (options_.dma_registrar != nullptr && !mapping_->dma_ready())
      VQS_LOG(WARNING, "%s: guest memory not registered for DMA: %s", path().c_str(),
              options_.lend_only_dma_ready ? "nothing is lent, every packet is copied"
                                           : "what it lends is copied toward devices that DMA");
    loaded_table_ = std::move(regions_now);
    return true;
  }
  bool ok = true;
  for (uint32_t i = 0; i < table->nregions; ++i) {
    const rte_vhost_mem_region& r = table->regions[i];
    if (!memory_.add_region(r.guest_phys_addr, r.size, reinterpret_cast<void*>(r.host_user_addr))) {
      VQS_LOG(ERR, "%s: guest memory region %u (0x%" PRIx64 "+0x%" PRIx64 ") rejected",
              path().c_str(), i, r.guest_phys_addr, r.size);
      ok = false;
    }
  }
  std::free(table);
  if (ok) loaded_table_ = std::move(regions_now);
  return ok;
}

void VhostDevice::apply_locked() {
  lent_wait_deadline_ = 0;
  for (uint16_t i = 0; i < vring_count(); ++i) {
    Vring& v = vrings_[i];
    const bool want_started = running_ && !suspended_ && v.enabled;
    if (v.started && !want_started) stop_vring_locked(i);
    if (!v.started && want_started) v.started = start_vring_locked(i);
    const bool want_open = v.started && datapath_enabled_;
    if (want_open && !v.gate.is_open()) v.gate.open();
    if (!want_open && v.gate.is_open()) v.gate.close();
    // The session is over: chains lent from a vring stopped earlier in it (disabled, or stopped
    // for a message whose memory table then failed) will not come back to the next session's
    // ring either. The vring is stopped, so this thread is its owner.
    if (!running_ && !v.started && v.zero_copy != nullptr) v.zero_copy->orphan_lent();
  }
}

bool VhostDevice::start_vring_locked(uint16_t index) {
  rte_vhost_vring vr{};
  uint16_t last_avail = 0, last_used = 0;
  if (rte_vhost_get_vhost_vring(vid_, index, &vr) != 0 ||
      rte_vhost_get_vring_base(vid_, index, &last_avail, &last_used) != 0) {
    VQS_LOG(ERR, "%s: vring %u: no ring state", path().c_str(), index);
    return false;
  }
  VirtQueue::Setup setup;
  setup.addrs =
      SplitRingAddrs{reinterpret_cast<VringDesc*>(vr.desc), reinterpret_cast<VringAvail*>(vr.avail),
                     reinterpret_cast<VringUsed*>(vr.used), vr.size};
  setup.last_avail_idx = last_avail;
  setup.last_used_idx = last_used;
  setup.features = negotiated_features();
  setup.memory = &memory_;
  setup.callfd = vr.callfd;
  Vring& v = vrings_[index];
  if (v.zero_copy != nullptr) {
    v.zero_copy->start(vr.size);
    v.zero_copy->set_mapping(mapping_);
    v.lending.tracker = v.zero_copy.get();
    // No IOVA for what would be lent, and its consumers may DMA: copy all (counted as copied).
    v.lending.min_len = options_.lend_only_dma_ready && !v.zero_copy->dma_ready()
                            ? UINT32_MAX
                            : options_.zero_copy_min_len;
    v.lending.fallback = options_.zero_copy_fallback;
  }
  if (is_guest_rx_vring(index)) {  // we enqueue, the policy applies
    setup.notify = options_.notify;
    setup.tsc_hz = rte_get_tsc_hz();
  }
  if (!v.queue.start(setup)) {
    VQS_LOG(ERR, "%s: vring %u: unusable ring (size %u)", path().c_str(), index, vr.size);
    return false;
  }
  // The gate is closed: the ring is ours to set up as the owner last asked.
  if (v.kicks_armed.load()) v.queue.ring().set_kicks_enabled(true);
  v.kickfd = vr.kickfd;
  watch_kickfd_locked(v, true);
  return true;
}

void VhostDevice::watch_kickfd_locked(Vring& v, bool watch) {
  if (v.waiter_epfd < 0 || v.kickfd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = v.kickfd;
  epoll_ctl(v.waiter_epfd, watch ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, v.kickfd, &ev);
  // The sleeper polls once on waking: a guest that arrived or left is a reason to look.
  if (!watch) return;
  eventfd_write(v.kickfd, 1);
}

void VhostDevice::watch_completions_locked(Vring& v, bool watch) {
  if (v.zero_copy == nullptr || v.waiter_epfd < 0) return;
  const int fd = v.zero_copy->wake_fd();
  if (fd < 0) {
    if (watch)
      VQS_LOG(WARNING, "%s: no eventfd for zero-copy completions: a sleeper sees them late",
              path().c_str());
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(v.waiter_epfd, watch ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev);
}

void VhostDevice::set_kick_waiter(uint16_t vring, int epoll_fd) {
  std::lock_guard lock(mutex_);
  Vring& v = vrings_[vring];
  if (v.started) watch_kickfd_locked(v, false);
  watch_completions_locked(v, false);
  v.waiter_epfd = epoll_fd;
  watch_completions_locked(v, true);
  if (v.started) watch_kickfd_locked(v, true);
}

bool VhostDevice::arm_kicks(uint16_t vring, bool armed) {
  Vring& v = vrings_[vring];
  v.kicks_armed.store(armed);
  if (!armed && v.zero_copy != nullptr) v.zero_copy->arm_wake(false);
  VirtQueue* q = enter(vring);
  if (q == nullptr) return false;
  q->ring().set_kicks_enabled(armed);
  // Lent chains completed by other threads go back to the guest when we next poll: they wake us
  // too (the guest may be waiting for them, e.g. TCP small queues).
  if (armed && v.zero_copy != nullptr) v.zero_copy->arm_wake(true);
  if (armed && v.kickfd >= 0) {
    // Drain, without blocking on an fd whose flags are the frontend's: poll first.
    pollfd p{v.kickfd, POLLIN, 0};
    eventfd_t ignored;
    if (poll(&p, 1, 0) == 1) (void)eventfd_read(v.kickfd, &ignored);
    if (q->avail_count() > 0) (void)eventfd_write(v.kickfd, 1);
  }
  leave(vring);
  return true;
}

void VhostDevice::stop_vring_locked(uint16_t index) {
  Vring& v = vrings_[index];
  v.gate.close();
  watch_kickfd_locked(v, false);
  v.kickfd = -1;
  if (v.zero_copy != nullptr) return_lent_locked(v);
  // GET_VRING_BASE replies with librte_vhost's copy of the indices: keep it current.
  const SplitRing& ring = v.queue.ring();
  rte_vhost_set_vring_base(vid_, index, ring.last_avail_idx(), ring.last_used_idx());
  v.queue.stop();
  v.started = false;
  if (v.zero_copy != nullptr) {
    // The session is over (device stopped or gone): what is still lent never comes back to this
    // ring (apply_locked marks it). Otherwise (a message being handled, the queue disabled) it
    // does, after the restart.
    v.zero_copy->set_mapping(nullptr);
  }
}

void VhostDevice::return_lent_locked(Vring& v) {
  ZeroCopyTracker& zc = *v.zero_copy;
  SplitRing& ring = v.queue.ring();
  if (!ring.attached()) return;
  const uint16_t used_before = ring.last_used_idx();
  const uint64_t hz = rte_get_timer_hz();
  // Suspended for a message, the ring restarts after it and chains lent now come back to it
  // then: only what completed already is returned. A stop (the device going, the vring
  // disabled) waits, within one deadline for all of the device's vrings.
  const bool suspend = suspended_ && running_;
  if (suspend) {
    lent_wait_deadline_ = rte_get_timer_cycles();
  } else if (lent_wait_deadline_ == 0) {
    lent_wait_deadline_ = rte_get_timer_cycles() + hz * kLentStopWaitMs / 1000;
  }
  const uint64_t deadline = lent_wait_deadline_;
  uint64_t next_request = 0;
  // The gate is closed: this thread is the queue's owner now.
  while (true) {
    if (zc.completions_waiting()) zc.reap(ring);
    const uint64_t now = rte_get_timer_cycles();
    if (zc.in_flight() == 0 || now >= deadline) break;
    if (options_.release_lent && now >= next_request) {
      options_.release_lent();
      next_request = now + hz * kLentReleaseRepeatMs / 1000;
    }
    rte_delay_us_sleep(100);
  }
  v.queue.complete_burst(used_before);
  if (zc.in_flight() > 0 && !suspend)
    VQS_LOG(WARNING, "%s: %u zero-copy buffers still held when the ring stopped", path().c_str(),
            zc.in_flight());
}

}  // namespace vqs
