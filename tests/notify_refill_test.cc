// SPDX-License-Identifier: BSD-3-Clause
// Refill thresholds: a guest whose posted RX buffers fall below the threshold is notified at
// once, whatever its suppression or coalescing say, once per crossing.
#include <rte_cycles.h>

#include <catch2/catch.hpp>

#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

// The rules below, with the threshold at 32 whatever the ring's size.
NotifyPolicy threshold_32() {
  NotifyPolicy p;
  p.refill_threshold = 32;
  return p;
}

void use_policy(Device& dev, const NotifyPolicy& policy) {
  VirtQueue::Setup s = dev.rx.setup();
  s.notify = policy;
  s.tsc_hz = rte_get_tsc_hz();
  REQUIRE(dev.rxq.start(s));
}

}  // namespace

TEST_CASE("automatic refill threshold: half the ring") {
  for (auto [size, expected] :
       {std::pair<uint16_t, uint32_t>{16, 8}, {64, 32}, {256, 128}, {1024, 512}, {2, 1}, {1, 1}}) {
    Device dev(kModernFeatures, size);
    CHECK(dev.rxq.refill_threshold() == 0);  // no policy: no threshold
    use_policy(dev, NotifyPolicy{});
    CHECK(dev.rxq.refill_threshold() == expected);
  }
  CHECK(NotifyPolicy{}.refill_threshold_for(32768) == 16384);  // the largest split ring
  Device dev(kModernFeatures, 256);
  NotifyPolicy p;
  p.refill_threshold = 100;
  use_policy(dev, p);
  CHECK(dev.rxq.refill_threshold() == 100);
}

TEST_CASE("refill threshold forces a notification the guest suppressed, once per crossing") {
  const uint64_t event_idx = GENERATE(0ull, bit(kRingFEventIdx));
  Device dev(kModernFeatures | event_idx);  // ring 256, threshold 32
  use_policy(dev, threshold_32());
  if (event_idx) {
    dev.rx.set_used_event(60000);  // far ahead: never reached here
  } else {
    dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  }
  dev.rx.post_rx(40, 1536);
  CHECK(dev.enqueue(make_packets(5)) == 5);  // 35 left
  if (event_idx) dev.rx.take_interrupts();   // the first decision with EVENT_IDX is always yes
  CHECK(dev.rx.take_interrupts() == 0);
  const uint64_t sent_before = dev.rxq.stats().guest_notifications;
  CHECK(dev.enqueue(make_packets(5)) == 5);  // 30 < 32: crossing
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications_refill == 1);
  CHECK(dev.enqueue(make_packets(5)) == 5);  // still low: no storm
  CHECK(dev.enqueue(make_packets(5)) == 5);
  CHECK(dev.rx.take_interrupts() == 0);
  // The guest reposts above the threshold: re-armed.
  dev.rx.receive();
  dev.rx.post_rx(30, 1536);                  // 20 + 30 = 50
  CHECK(dev.enqueue(make_packets(5)) == 5);  // 45: above
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.enqueue(make_packets(14)) == 14);  // 31: crossing again
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications_refill == 2);
  CHECK(dev.rxq.stats().guest_notifications == sent_before + 2);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 0);
}

TEST_CASE("refill threshold: re-armed by a burst that leaves the guest above it") {
  Device dev(kModernFeatures, 64);  // threshold 32
  use_policy(dev, threshold_32());
  dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  // Drains the ring in one burst (plus a retry that finds it empty); returns interrupts sent.
  auto drain = [&dev] {
    auto pkts = make_packets(80);
    const uint16_t taken = dev.enqueue(pkts);
    const std::vector<rte_mbuf*> rest(pkts.begin() + taken, pkts.end());
    CHECK(dev.enqueue(rest) == 0);
    free_packets(rest, 0);
    CHECK(dev.rx.receive().size() == taken);
    return dev.rx.take_interrupts();
  };
  dev.rx.post_rx(64, 1536);
  CHECK(drain() == 1);  // armed from the start
  // Refilled and drained again within one burst: no burst saw it above, no second interrupt.
  dev.rx.post_rx(64, 1536);
  CHECK(drain() == 0);
  // A burst that leaves it above re-arms.
  dev.rx.post_rx(64, 1536);
  CHECK(dev.enqueue(make_packets(10)) == 10);  // 54 left
  CHECK(dev.rx.receive().size() == 10);
  CHECK(drain() == 1);
  CHECK(dev.rxq.stats().guest_notifications_refill == 2);
  CHECK(dev.rxq.stats().guest_notifications == 2);
}

TEST_CASE("refill threshold: an empty ring that refuses packets notifies a suppressing guest") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  use_policy(dev, threshold_32());
  dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  auto pkts = make_packets(3);
  CHECK(dev.enqueue(pkts) == 0);
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications_refill == 1);
  CHECK(dev.enqueue(pkts) == 0);  // retries (as the switch's tx buffers do) stay quiet
  CHECK(dev.enqueue(pkts) == 0);
  CHECK(dev.rx.take_interrupts() == 0);
  free_packets(pkts, 0);
}

TEST_CASE("refill threshold: a low guest that wants notifications gets them without forcing") {
  Device dev(kModernFeatures);
  use_policy(dev, threshold_32());
  dev.rx.post_rx(20, 1536);  // below 32 from the start
  for (int i = 0; i < 3; ++i) CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 3);
  CHECK(dev.rxq.stats().guest_notifications_refill == 0);
  // The crossing was told by the first of them: suppressing now stays quiet.
  dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  CHECK(dev.enqueue(make_packets(2)) == 2);
  CHECK(dev.rx.take_interrupts() == 0);
}

TEST_CASE("refill threshold overrides coalescing") {
  Device dev(kModernFeatures);
  NotifyPolicy p;
  p.refill_threshold = 32;
  p.coalesce_packets = 64;
  p.coalesce_usecs = 1000000;
  use_policy(dev, p);
  dev.rx.post_rx(40, 1536);
  CHECK(dev.enqueue(make_packets(5)) == 5);  // 35: deferred
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 1);
  CHECK(dev.enqueue(make_packets(5)) == 5);  // 30: low, the deferred one goes out now
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications_refill == 1);
  CHECK_FALSE(dev.rxq.notification_pending());
  // While low, what the guest wants is not deferred.
  CHECK(dev.enqueue(make_packets(5)) == 5);
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.rxq.stats().guest_notifications_refill == 2);
  CHECK(dev.rxq.stats().guest_notifications_coalesced == 1);
  CHECK(dev.rxq.stats().guest_notifications == 2);
}

TEST_CASE("without a notify policy there is no refill threshold") {
  Device dev(kModernFeatures);
  dev.rx.set_avail_flags(kVringAvailFNoInterrupt);
  auto pkts = make_packets(3);
  CHECK(dev.enqueue(pkts) == 0);
  dev.rx.post_rx(2, 1536);
  CHECK(dev.enqueue(pkts) == 2);
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.rxq.stats().guest_notifications == 0);
  free_packets(pkts, 2);
}
