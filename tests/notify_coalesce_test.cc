// SPDX-License-Identifier: BSD-3-Clause
// Guest RX notification coalescing through the datapath: packets, time, the guest's suppression,
// flushes between bursts.
#include <rte_cycles.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

// Restarts the guest RX queue with `policy` (no burst has run: the indices are the guest's).
void use_policy(Device& dev, const NotifyPolicy& policy, uint64_t tsc_hz = rte_get_tsc_hz()) {
  VirtQueue::Setup s = dev.rx.setup();
  s.notify = policy;
  s.tsc_hz = tsc_hz;
  REQUIRE(dev.rxq.start(s));
}

NotifyPolicy packets(uint32_t n) {
  NotifyPolicy p;
  p.coalesce_packets = n;
  return p;
}

NotifyPolicy usecs(uint32_t n) {
  NotifyPolicy p;
  p.coalesce_usecs = n;
  return p;
}

}  // namespace

TEST_CASE("coalescing off: one notification per burst the guest wants, as without a policy") {
  Device dev(kModernFeatures);
  use_policy(dev, NotifyPolicy{});
  dev.rx.post_rx(200, 1536);
  for (int i = 0; i < 3; ++i) CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 3);
  dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK_FALSE(dev.rxq.notification_pending());
  CHECK(dev.rxq.stats().guest_notifications == 3);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 0);
  CHECK(dev.rxq.stats().guest_notifications_refill == 0);
}

TEST_CASE("coalescing by packets: one notification at the Nth packet") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  use_policy(dev, packets(4));
  dev.rx.post_rx(200, 1536);
  for (int i = 0; i < 3; ++i) {
    CHECK(dev.enqueue(make_packets(1)) == 1);
    CHECK(dev.rx.take_interrupts() == 0);
    CHECK(dev.rxq.notification_pending());
  }
  CHECK(dev.rx.receive().size() == 3);  // visible at once: only the interrupt waits
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 3);
  CHECK(dev.enqueue(make_packets(1)) == 1);  // the 4th
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK_FALSE(dev.rxq.notification_pending());
  CHECK(dev.rxq.stats().guest_notifications == 1);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 3);

  SECTION("a burst of at least N packets notifies at once") {
    CHECK(dev.enqueue(make_packets(10)) == 10);
    CHECK(dev.rx.take_interrupts() == 1);
    CHECK(dev.rxq.stats().guest_notifications_coalesced == 3);
  }
  SECTION("the count restarts after each notification") {
    CHECK(dev.enqueue(make_packets(2)) == 2);
    CHECK(dev.enqueue(make_packets(1)) == 1);
    CHECK(dev.rx.take_interrupts() == 0);
    CHECK(dev.enqueue(make_packets(1)) == 1);
    CHECK(dev.rx.take_interrupts() == 1);
    CHECK(dev.rxq.stats().guest_notifications == 2);
    CHECK(dev.rxq.stats().guest_notifications_coalesced == 5);
  }
}

TEST_CASE("coalescing by packets with EVENT_IDX merges the bursts after the one the guest wanted") {
  Device dev(kModernFeatures | bit(kRingFEventIdx));
  use_policy(dev, packets(8));
  dev.rx.post_rx(200, 1536);
  dev.rx.set_used_event(0);
  CHECK(dev.enqueue(make_packets(2)) == 2);  // used 0 -> 2 passes 0: wanted, deferred
  CHECK(dev.enqueue(make_packets(2)) == 2);  // not wanted by itself
  CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 1);
  CHECK(dev.enqueue(make_packets(2)) == 2);  // 8 packets
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications == 1);
}

TEST_CASE("coalescing by packets: a flush sends the deferred notification once traffic stops") {
  Device dev(kModernFeatures);
  use_policy(dev, packets(32));
  dev.rx.post_rx(200, 1536);
  CHECK(dev.enqueue(make_packets(3)) == 3);
  REQUIRE(dev.rxq.notification_pending());
  // Packets arrived since the previous flush: the queue is busy, keep waiting.
  dev.rxq.flush_notifications(0);
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.enqueue(make_packets(3)) == 3);
  dev.rxq.flush_notifications(0);
  CHECK(dev.rx.take_interrupts() == 0);
  // Nothing since: idle, send.
  dev.rxq.flush_notifications(0);
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK_FALSE(dev.rxq.notification_pending());
  dev.rxq.flush_notifications(0);
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.rxq.stats().guest_notifications == 1);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 2);
}

TEST_CASE("coalescing by time: deferred until the deadline, then sent by a flush") {
  Device dev(kModernFeatures);
  const uint64_t hz = rte_get_tsc_hz();
  use_policy(dev, usecs(1000000), hz);  // one second: far beyond this test's own run time
  REQUIRE(dev.rxq.notify_timed());
  dev.rx.post_rx(200, 1536);
  const uint64_t before = rte_get_tsc_cycles();
  CHECK(dev.enqueue(make_packets(5)) == 5);
  CHECK(dev.enqueue(make_packets(5)) == 5);
  CHECK(dev.rx.take_interrupts() == 0);
  REQUIRE(dev.rxq.notification_pending());
  // Idle flushes do not send early: the time limit rules.
  dev.rxq.flush_notifications(rte_get_tsc_cycles());
  dev.rxq.flush_notifications(rte_get_tsc_cycles());
  CHECK(dev.rx.take_interrupts() == 0);
  dev.rxq.flush_notifications(before + hz / 2);
  CHECK(dev.rx.take_interrupts() == 0);
  // The deadline counts from the first deferred burst, not the last.
  dev.rxq.flush_notifications(rte_get_tsc_cycles() + hz);
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK_FALSE(dev.rxq.notification_pending());
  CHECK(dev.rxq.stats().guest_notifications == 1);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 2);
}

TEST_CASE("coalescing by time: a burst after the deadline sends at once") {
  Device dev(kModernFeatures);
  use_policy(dev, usecs(50));
  dev.rx.post_rx(200, 1536);
  CHECK(dev.enqueue(make_packets(1)) == 1);
  CHECK(dev.rx.take_interrupts() == 0);
  usleep(2000);
  CHECK(dev.enqueue(make_packets(1)) == 1);
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 1);
}

TEST_CASE("coalescing by packets and time: whichever comes first") {
  Device dev(kModernFeatures);
  NotifyPolicy p;
  p.coalesce_packets = 4;
  p.coalesce_usecs = 1000000;
  use_policy(dev, p);
  dev.rx.post_rx(200, 1536);
  CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 1);  // packets first
  CHECK(dev.enqueue(make_packets(1)) == 1);
  CHECK(dev.rx.take_interrupts() == 0);
  dev.rxq.flush_notifications(rte_get_tsc_cycles() + 2 * rte_get_tsc_hz());
  CHECK(dev.rx.take_interrupts() == 1);  // then time
}

TEST_CASE("coalescing respects the guest's suppression") {
  SECTION("kVringAvailFNoInterrupt") {
    Device dev(kModernFeatures);
    use_policy(dev, packets(4));
    dev.rx.post_rx(200, 1536);
    dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
    for (int i = 0; i < 10; ++i) CHECK(dev.enqueue(make_packets(1)) == 1);
    dev.rxq.flush_notifications(0);
    dev.rxq.flush_notifications(0);
    CHECK(dev.rx.take_interrupts() == 0);
    CHECK_FALSE(dev.rxq.notification_pending());
    CHECK(dev.rxq.stats().guest_notifications_coalesced == 0);
    // Re-enabled after 10 unnotified packets: the limit is already reached, no wait.
    dev.rx.set_avail_flags(0);
    CHECK(dev.enqueue(make_packets(1)) == 1);
    CHECK(dev.rx.take_interrupts() == 1);
  }
  SECTION("used_event not reached") {
    Device dev(kModernFeatures | bit(kRingFEventIdx));
    use_policy(dev, usecs(10));
    dev.rx.post_rx(200, 1536);
    dev.rx.set_used_event(0);
    CHECK(dev.enqueue(make_packets(1)) == 1);  // first decision: wanted, deferred
    dev.rxq.flush_notifications(rte_get_tsc_cycles() + rte_get_tsc_hz());
    CHECK(dev.rx.take_interrupts() == 1);
    dev.rx.set_used_event(100);
    for (int i = 0; i < 5; ++i) CHECK(dev.enqueue(make_packets(2)) == 2);  // used 1 -> 11
    CHECK_FALSE(dev.rxq.notification_pending());
    dev.rxq.flush_notifications(rte_get_tsc_cycles() + rte_get_tsc_hz());
    CHECK(dev.rx.take_interrupts() == 0);
    CHECK(dev.rxq.stats().guest_notifications == 1);
    CHECK(dev.rxq.stats().guest_notifications_coalesced == 1);
  }
}

TEST_CASE("a queue that stops sends its deferred notification") {
  Device dev(kModernFeatures);
  use_policy(dev, packets(64));
  dev.rx.post_rx(200, 1536);
  CHECK(dev.enqueue(make_packets(3)) == 3);
  CHECK(dev.rx.take_interrupts() == 0);
  dev.rxq.stop();
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK_FALSE(dev.rxq.notification_pending());
  // Restarted from the guest's indices: nothing left over.
  use_policy(dev, packets(64));
  dev.rxq.flush_notifications(0);
  CHECK(dev.rx.take_interrupts() == 0);
}

TEST_CASE("notify policy settings: limits and derived values") {
  NotifyPolicy p;
  CHECK_FALSE(p.coalescing());
  CHECK(p.valid());
  p.coalesce_usecs = NotifyPolicy::kMaxCoalesceUsecs;
  CHECK(p.coalescing());
  CHECK(p.valid());
  CHECK(p.coalesce_cycles(2000000000) == 2000000000);
  p.coalesce_usecs = 1;
  CHECK(p.coalesce_cycles(100) == 1);  // rounds up to one cycle: still timed
  p.coalesce_usecs = NotifyPolicy::kMaxCoalesceUsecs + 1;
  CHECK_FALSE(p.valid());
  p = NotifyPolicy{};
  p.coalesce_packets = NotifyPolicy::kMaxCoalescePackets + 1;
  CHECK_FALSE(p.valid());
  p = NotifyPolicy{};
  p.refill_threshold = NotifyPolicy::kMaxRefillThreshold + 1;
  CHECK_FALSE(p.valid());
}
