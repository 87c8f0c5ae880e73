// SPDX-License-Identifier: BSD-3-Clause
#include "interrupt_thread_park.h"

#include <rte_cycles.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace vqs::test {

InterruptThreadPark::InterruptThreadPark() {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  handle_ = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (wake_fd_ < 0 || handle_ == nullptr) return;
  // EXT: the thread reads nothing itself and calls us while the eventfd is readable.
  if (rte_intr_fd_set(handle_, wake_fd_) != 0 ||
      rte_intr_type_set(handle_, RTE_INTR_HANDLE_EXT) != 0 ||
      rte_intr_callback_register(handle_, hold, this) != 0) {
    rte_intr_instance_free(handle_);
    handle_ = nullptr;
    return;
  }
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) != sizeof(one)) return;
  const uint64_t deadline = rte_get_timer_cycles() + 5 * rte_get_timer_hz();
  while (!parked() && rte_get_timer_cycles() < deadline) rte_delay_us_sleep(100);
}

InterruptThreadPark::~InterruptThreadPark() {
  released_.store(true, std::memory_order_release);
  released_.notify_all();
  // Waits while hold() is still returning.
  if (handle_ != nullptr) {
    rte_intr_callback_unregister_sync(handle_, hold, this);
    rte_intr_instance_free(handle_);
  }
  if (wake_fd_ >= 0) close(wake_fd_);
}

void InterruptThreadPark::hold(void* arg) {
  auto* park = static_cast<InterruptThreadPark*>(arg);
  // Drained, so that the level-triggered thread does not call us again once released.
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t got = read(park->wake_fd_, &count, sizeof(count));
  park->parked_.store(true, std::memory_order_release);
  park->released_.wait(false, std::memory_order_acquire);
}

}  // namespace vqs::test
