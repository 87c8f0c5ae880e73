// SPDX-License-Identifier: BSD-3-Clause
// Holds the EAL interrupt thread in a callback of ours, so that no other interrupt or alarm
// callback runs meanwhile. Tests only.
#pragma once

#include <rte_interrupts.h>

#include <atomic>

namespace vqs::test {

// DPDK 22.11's virtio_user stops its port with rte_intr_callback_unregister() and ignores the
// -EAGAIN it gets while its link-state handler is running (the interrupt thread calls it
// whenever a vhost-user reply waits on the socket). The handler then stays registered on the
// socket's fd number after the port is freed, and the next event on that number runs it on a
// zeroed ethdev: a SEGV on the interrupt thread. Closing a virtio_user port while the thread
// is parked here makes the unregister succeed.
class InterruptThreadPark {
 public:
  // Returns once the interrupt thread is inside our callback (or after 5 s: parked() says).
  InterruptThreadPark();
  // Lets the thread go and removes our callback.
  ~InterruptThreadPark();
  InterruptThreadPark(const InterruptThreadPark&) = delete;
  InterruptThreadPark& operator=(const InterruptThreadPark&) = delete;

  bool parked() const { return parked_.load(std::memory_order_acquire); }

 private:
  static void hold(void* park);

  int wake_fd_ = -1;  // an eventfd: readable, it brings the thread into hold()
  rte_intr_handle* handle_ = nullptr;
  std::atomic<bool> parked_{false};
  std::atomic<bool> released_{false};
};

}  // namespace vqs::test
