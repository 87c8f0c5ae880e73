// SPDX-License-Identifier: BSD-3-Clause
// Guest kicks as the owner's wake-ups: each vring's kickfd (and, with zero-copy, its completion
// eventfd) kept in the epoll fd the owner sleeps on, and kicks armed or not from the datapath.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "vhost/vhost_device.h"
#include "vhost/vhost_log.h"

namespace vqs {

void VhostDevice::kick_without_blocking(int kickfd) {
  // The fd's flags are the frontend's: a blocking eventfd whose counter it filled would hold
  // this thread in write(). Only write when it can take the count at once.
  pollfd p{kickfd, POLLOUT, 0};
  if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT)) (void)eventfd_write(kickfd, 1);
}

void VhostDevice::watch_kickfd_locked(Vring& v, bool watch) {
  if (v.waiter_epfd < 0 || v.kickfd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = v.kickfd;
  epoll_ctl(v.waiter_epfd, watch ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, v.kickfd, &ev);
  // The sleeper polls once on waking: a guest that arrived or left is a reason to look.
  if (!watch) return;
  kick_without_blocking(v.kickfd);
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
  q->set_kicks_enabled(armed);
  // Lent chains completed by other threads go back to the guest when we next poll: they wake us
  // too (the guest may be waiting for them, e.g. TCP small queues).
  if (armed && v.zero_copy != nullptr) v.zero_copy->arm_wake(true);
  if (armed && v.kickfd >= 0) {
    // Drain, without blocking on an fd whose flags are the frontend's: poll first.
    pollfd p{v.kickfd, POLLIN, 0};
    eventfd_t ignored;
    if (poll(&p, 1, 0) == 1) (void)eventfd_read(v.kickfd, &ignored);
    if (q->avail_count(1) > 0) (void)eventfd_write(v.kickfd, 1);
  }
  leave(vring);
  return true;
}

}  // namespace vqs
