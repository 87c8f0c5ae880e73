// SPDX-License-Identifier: BSD-3-Clause
// Interrupt rechecks through the datapath (split rings without EVENT_IDX): a polling guest's "no
// interrupts" stands for the interval; whatever the guest asked meanwhile is settled by the next
// burst after it, a burst that publishes nothing, a flush, arming kicks, or stopping.
#include <catch2/catch.hpp>

#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

uint64_t fake_now = 0;
uint64_t fake_clock() { return fake_now; }

// 100 us at a 1 MHz clock: 100 ticks.
void use_recheck(VirtQueue& q, VirtQueue::Setup s) {
  s.tsc_hz = 1000000;
  s.interrupt_recheck_us = 100;
  s.clock = &fake_clock;
  REQUIRE(q.start(s));
}

// The guest polled (our first decision read its "no interrupts"), then asked for interrupts:
// the decisions after it are owed.
void guest_stops_polling(Device& dev, SimGuest& guest, bool rx) {
  guest.set_avail_flags(kVringAvailFNoInterrupt);
  auto burst = [&] {
    if (rx) {
      REQUIRE(dev.enqueue(make_packets(2)) == 2);
    } else {
      guest.send(SimPacket{{}, make_frame(60, 1)});
      REQUIRE(dev.dequeue().size() == 1);
    }
  };
  burst();
  guest.set_avail_flags(0);
  burst();
  CHECK(guest.take_interrupts() == 0);
}

}  // namespace

TEST_CASE("interrupt rechecks, guest RX: a flush once due, or at once before sleeping", "[split]") {
  Device dev(kModernFeatures);
  fake_now = 1000;
  use_recheck(dev.rxq, dev.rx.setup());
  dev.rx.post_rx(100, 1536);
  guest_stops_polling(dev, dev.rx, true);
  CHECK(dev.rxq.notification_pending());
  SECTION("a flush before the interval is over sends nothing; after it, the interrupt") {
    fake_now += 99;
    dev.rxq.flush_notifications(fake_now);
    CHECK(dev.rx.take_interrupts() == 0);
    fake_now += 1;
    dev.rxq.flush_notifications(fake_now);
    CHECK(dev.rx.take_interrupts() == 1);
    CHECK_FALSE(dev.rxq.notification_pending());
    CHECK(dev.rxq.stats().guest_notifications_late == 1);
  }
  SECTION("a burst once the interval is over reads the flag itself") {
    fake_now += 100;
    CHECK(dev.enqueue(make_packets(1)) == 1);
    CHECK(dev.rx.take_interrupts() == 1);
    CHECK_FALSE(dev.rxq.notification_pending());
    CHECK(dev.enqueue(make_packets(1)) == 1);  // interrupts wanted: read every burst
    CHECK(dev.rx.take_interrupts() == 1);
    CHECK(dev.rxq.stats().guest_notifications_late == 1);  // the first of the two
  }
  SECTION("kFlushNow (an owner about to sleep) settles at once") {
    dev.rxq.flush_notifications(GuestNotifier::kFlushNow);
    CHECK(dev.rx.take_interrupts() == 1);
  }
  SECTION("a guest still polling at the recheck gets nothing") {
    dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
    dev.rxq.flush_notifications(GuestNotifier::kFlushNow);
    CHECK(dev.rx.take_interrupts() == 0);
    CHECK_FALSE(dev.rxq.notification_pending());
    CHECK(dev.rxq.stats().guest_notifications_late == 0);
  }
  SECTION("stopping sends the owed interrupt without reading the ring") {
    dev.rx.set_avail_flags(kVringAvailFNoInterrupt);  // a read would send nothing
    dev.rxq.stop();
    CHECK(dev.rx.take_interrupts() == 1);
    CHECK(dev.rxq.stats().guest_notifications_late == 0);  // maybe spurious: not counted
    CHECK_FALSE(dev.rxq.notification_pending());
  }
}

TEST_CASE("interrupt rechecks, guest TX: a poll that takes nothing, or arming kicks", "[split]") {
  Device dev(kModernFeatures);
  fake_now = 5000;
  use_recheck(dev.txq, dev.tx.setup());
  guest_stops_polling(dev, dev.tx, false);
  SECTION("an empty poll before the interval is over sends nothing; after it, the interrupt") {
    CHECK(dev.dequeue().empty());
    CHECK(dev.tx.take_interrupts() == 0);
    fake_now += 100;
    CHECK(dev.dequeue().empty());
    CHECK(dev.tx.take_interrupts() == 1);
    CHECK(dev.txq.stats().guest_notifications_late == 1);
    CHECK_FALSE(dev.txq.interrupt_check_owed());
  }
  SECTION("arming kicks (an owner about to sleep) settles at once") {
    dev.txq.set_kicks_enabled(true);
    CHECK(dev.tx.take_interrupts() == 1);
    CHECK(dev.txq.stats().guest_notifications_late == 1);
    CHECK_FALSE(dev.txq.interrupt_check_owed());
  }
}

TEST_CASE("interrupt rechecks off: every burst reads the flag", "[split]") {
  Device dev(kModernFeatures);
  VirtQueue::Setup s = dev.rx.setup();
  s.clock = &fake_clock;  // a clock, but no interval
  REQUIRE(dev.rxq.start(s));
  dev.rx.post_rx(100, 1536);
  dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  CHECK(dev.enqueue(make_packets(2)) == 2);
  dev.rx.set_avail_flags(0);
  CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK_FALSE(dev.rxq.notification_pending());
}
