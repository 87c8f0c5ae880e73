#include "virtqueue.h"

#include <sys/eventfd.h>

namespace vqs {

bool VirtQueue::start(const Setup& setup) {
  features_ = NetFeatures::from_bits(setup.features);
  if (setup.memory == nullptr ||
      !ring_.attach(setup.addrs, setup.last_avail_idx, setup.last_used_idx, features_.event_idx)) {
    ring_.detach();
    return false;
  }
  reader_ =
      DescChainReader(setup.addrs.desc, setup.addrs.size, setup.memory, features_.indirect_desc);
  callfd_ = setup.callfd;
  broken_counted_ = false;
  return true;
}

void VirtQueue::stop() {
  ring_.detach();
  callfd_ = -1;
}

void VirtQueue::complete_burst(uint16_t used_before) {
  if (ring_.last_used_idx() == used_before) return;
  ring_.publish_used();
  if (ring_.guest_wants_interrupt()) interrupt_guest();
}

void VirtQueue::interrupt_guest() {
  ++stats_.guest_notifications;
  // A full eventfd counter (EAGAIN) still wakes the guest: nothing to retry.
  if (callfd_ >= 0) (void)eventfd_write(callfd_, 1);
}

}  // namespace vqs
