// SPDX-License-Identifier: BSD-3-Clause
#include "ring/split_ring.h"
#include "ring/queue_stats.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "sim_guest.h"

using namespace vqs;
using vqs::test::SimGuest;
using vqs::test::SimMemory;

namespace {

constexpr uint64_t kEventIdx = 1ull << kRingFEventIdx;

SplitRing attach(SimGuest& guest, uint16_t last_avail = 0, uint16_t last_used = 0) {
  SplitRing ring;
  VirtQueue::Setup s = guest.setup();
  REQUIRE(ring.attach(s.addrs, last_avail, last_used, (guest.features() & kEventIdx) != 0));
  return ring;
}

// The spec's vring_need_event, written out independently.
bool spec_need_event(uint16_t event, uint16_t new_idx, uint16_t old_idx) {
  return static_cast<uint16_t>(new_idx - event - 1) < static_cast<uint16_t>(new_idx - old_idx);
}

}  // namespace

TEST_CASE("attach rejects unusable rings") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 256, 0};
  SplitRingAddrs addrs = guest.setup().addrs;
  SplitRing ring;
  for (uint16_t size : {0, 3, 100, 255}) {
    addrs.size = size;
    CHECK_FALSE(ring.attach(addrs, 0, 0, false));
  }
  addrs.size = 256;
  addrs.used = nullptr;
  CHECK_FALSE(ring.attach(addrs, 0, 0, false));
}

TEST_CASE("avail entries, used entries and 16-bit wrap-around") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 8, 0};
  const uint16_t start = 65530;  // the indices wrap during the test
  guest.start_at(start);
  SplitRing ring = attach(guest, start, start);
  CHECK(ring.avail_count() == 0);
  for (int round = 0; round < 4; ++round) {
    for (uint16_t i = 0; i < 5; ++i) guest.post_head(i);
    guest.publish();
    REQUIRE(ring.avail_count() == 5);
    for (uint16_t i = 0; i < 5; ++i) CHECK(ring.avail_head(i) == i);
    ring.consume(5);
    for (uint16_t i = 0; i < 5; ++i) ring.put_used(i, 100 + i);
    CHECK(guest.used_idx() == static_cast<uint16_t>(start + 5 * round));  // not yet published
    ring.publish_used();
    CHECK(guest.used_idx() == static_cast<uint16_t>(start + 5 * (round + 1)));
    const auto used = guest.take_used();
    REQUIRE(used.size() == 5);
    for (uint16_t i = 0; i < 5; ++i) {
      CHECK(used[i].id == i);
      CHECK(used[i].len == 100u + i);
    }
  }
  CHECK(ring.last_avail_idx() == static_cast<uint16_t>(start + 20));
}

TEST_CASE("an avail index that jumps more than the ring size breaks the ring") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 8, 0};
  SplitRing ring = attach(guest);
  guest.set_avail_idx(8);
  CHECK(ring.avail_count() == 8);
  guest.set_avail_idx(9);
  CHECK(ring.avail_count() == 0);
  CHECK(ring.broken());
  guest.set_avail_idx(1);
  CHECK(ring.avail_count() == 0);  // stays broken until attached again
  ring = attach(guest, 0, 0);
  CHECK(ring.avail_count() == 1);
}

TEST_CASE("the avail index is loaded again only when what it said last runs short") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 256, 0};
  SplitRing ring = attach(guest);
  guest.set_avail_idx(100);
  CHECK(ring.avail_count(32) == 100);  // nothing known yet: loaded
  ring.consume(32);
  guest.set_avail_idx(200);
  CHECK(ring.avail_count(32) == 68);  // 68 known to remain: no load
  CHECK(ring.avail_count(67) == 68);
  CHECK(ring.avail_count(68) == 168);  // not more than wanted: loaded
  ring.consume(140);
  guest.set_avail_idx(210);
  CHECK(ring.avail_count(32) == 38);  // 28 known: loaded
  CHECK(ring.avail_count() == 38);    // no bound: always loaded
  // A corrupt index is found at the next load; until then the entries known posted are served.
  guest.set_avail_idx(static_cast<uint16_t>(210 + 300));
  CHECK(ring.avail_count(8) == 38);
  CHECK(ring.avail_count(38) == 0);
  CHECK(ring.broken());
  CHECK(ring.avail_count(0) == 0);
}

TEST_CASE("interrupt suppression without EVENT_IDX follows kVringAvailFNoInterrupt") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 8, 0};
  SplitRing ring = attach(guest);
  CHECK_FALSE(ring.guest_wants_interrupt());  // nothing used yet
  ring.put_used(0, 0);
  ring.publish_used();
  CHECK(ring.guest_wants_interrupt());
  CHECK_FALSE(ring.guest_wants_interrupt());  // nothing new since
  guest.set_avail_flags(kVringAvailFNoInterrupt);
  ring.put_used(1, 0);
  ring.publish_used();
  CHECK_FALSE(ring.guest_wants_interrupt());
}

namespace {
uint64_t fake_now = 0;
uint64_t fake_clock() { return fake_now; }
// One used entry published, then the decision.
bool publish_and_decide(SplitRing& ring) {
  ring.put_used(0, 0);
  ring.publish_used();
  return ring.guest_wants_interrupt();
}
// A guest that polls (kVringAvailFNoInterrupt) behind a ring with a 100-cycle recheck interval,
// whose first decision read the flag at fake_now 1000.
struct PollingGuestRing {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 64, 0};
  SplitRing ring = attach(guest);
  PollingGuestRing() {
    fake_now = 1000;
    ring.set_interrupt_recheck(100, &fake_clock);
    guest.set_avail_flags(kVringAvailFNoInterrupt);
    CHECK_FALSE(publish_and_decide(ring));  // read: suppressed
    CHECK_FALSE(ring.interrupt_check_owed());
  }
};
}  // namespace

TEST_CASE("interrupt rechecks: a guest's 'no interrupts' stands for the interval, then is read") {
  PollingGuestRing polling;
  SimGuest& guest = polling.guest;
  SplitRing& ring = polling.ring;
  // The guest enables interrupts; within the interval the answer stands, owed.
  guest.set_avail_flags(0);
  CHECK_FALSE(publish_and_decide(ring));
  CHECK(ring.interrupt_check_owed());
  fake_now += 99;
  CHECK_FALSE(publish_and_decide(ring));
  CHECK_FALSE(ring.settle_interrupt_check(false));  // not due yet
  CHECK(ring.interrupt_check_owed());
  SECTION("the next decision once the interval is over reads it") {
    fake_now += 1;
    CHECK(publish_and_decide(ring));
    CHECK_FALSE(ring.interrupt_check_owed());
    CHECK(publish_and_decide(ring));  // no longer suppressed: read every time
  }
  SECTION("a settle once the interval is over reads it") {
    fake_now += 1;
    CHECK(ring.settle_interrupt_check(false));
    CHECK_FALSE(ring.interrupt_check_owed());
    CHECK_FALSE(ring.settle_interrupt_check(true));  // nothing owed
  }
  SECTION("a settle asked for now reads it at once") {
    CHECK(ring.settle_interrupt_check(true));
    CHECK_FALSE(ring.interrupt_check_owed());
  }
  SECTION("a guest still polling: the interval starts again at the next decision") {
    guest.set_avail_flags(kVringAvailFNoInterrupt);
    fake_now += 1;
    CHECK_FALSE(ring.settle_interrupt_check(false));
    CHECK_FALSE(ring.interrupt_check_owed());
    CHECK_FALSE(publish_and_decide(ring));
    CHECK(ring.interrupt_check_owed());
  }
  SECTION("detached, nothing is owed") {
    ring.detach();
    CHECK_FALSE(ring.interrupt_check_owed());
  }
}

TEST_CASE("interrupt rechecks: timed from the read, so the first decision after a pause reads") {
  PollingGuestRing polling;  // read at 1000: suppressed
  SimGuest& guest = polling.guest;
  SplitRing& ring = polling.ring;
  // The guest went idle, then asked for interrupts; our next decision comes after the interval.
  guest.set_avail_flags(0);
  fake_now += 5000;
  CHECK(publish_and_decide(ring));
  CHECK_FALSE(ring.interrupt_check_owed());
}

TEST_CASE("interrupt rechecks: off at 0, without a clock, and with EVENT_IDX") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  fake_now = 0;
  SECTION("0 or no clock: every decision reads the flag") {
    for (const bool with_clock : {false, true}) {
      SimGuest guest{mem, 64, 0};
      SplitRing ring = attach(guest);
      ring.set_interrupt_recheck(with_clock ? 0 : 100, with_clock ? &fake_clock : nullptr);
      guest.set_avail_flags(kVringAvailFNoInterrupt);
      CHECK_FALSE(publish_and_decide(ring));
      guest.set_avail_flags(0);
      CHECK(publish_and_decide(ring));
      CHECK_FALSE(ring.interrupt_check_owed());
    }
  }
  SECTION("EVENT_IDX: used_event is read every time") {
    SimGuest guest{mem, 64, kEventIdx};
    SplitRing ring = attach(guest);
    ring.set_interrupt_recheck(100, &fake_clock);
    guest.set_avail_flags(kVringAvailFNoInterrupt);  // ignored with EVENT_IDX
    CHECK(publish_and_decide(ring));                 // the first decision
    // No interrupt wanted for a long way, then one at the next entry.
    guest.set_used_event(static_cast<uint16_t>(ring.last_used_idx() + 1000));
    CHECK_FALSE(publish_and_decide(ring));
    guest.set_used_event(ring.last_used_idx());
    CHECK(publish_and_decide(ring));
    CHECK_FALSE(ring.interrupt_check_owed());
  }
}

TEST_CASE("interrupt suppression with EVENT_IDX matches vring_need_event across wrap-around") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  for (uint16_t start : {uint16_t(0), uint16_t(65500), uint16_t(65535)}) {
    SimGuest guest{mem, 64, kEventIdx};
    SplitRing ring = attach(guest, start, start);
    ring.put_used(0, 0);
    ring.publish_used();
    CHECK(ring.guest_wants_interrupt());  // first decision: always
    uint16_t old_idx = static_cast<uint16_t>(start + 1);
    for (int step = 0; step < 300; ++step) {
      const uint16_t batch = static_cast<uint16_t>(1 + step % 7);
      const uint16_t used_event = static_cast<uint16_t>(old_idx + (step * 5) % 11 - 3);
      guest.set_used_event(used_event);
      for (uint16_t i = 0; i < batch; ++i) ring.put_used(i, 0);
      ring.publish_used();
      const uint16_t new_idx = ring.last_used_idx();
      INFO("start " << start << " step " << step << " event " << used_event << " old " << old_idx
                    << " new " << new_idx);
      CHECK(ring.guest_wants_interrupt() == spec_need_event(used_event, new_idx, old_idx));
      old_idx = new_idx;
    }
  }
}

TEST_CASE("guest kicks: disabled while polling, enabled before sleeping") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SECTION("flags without EVENT_IDX") {
    SimGuest guest{mem, 8, 0};
    SplitRing ring = attach(guest);
    CHECK(guest.used_flags() & kVringUsedFNoNotify);
    ring.set_kicks_enabled(true);
    CHECK_FALSE(guest.used_flags() & kVringUsedFNoNotify);
    ring.set_kicks_enabled(false);
    CHECK(guest.used_flags() & kVringUsedFNoNotify);
  }
  SECTION("avail_event with EVENT_IDX") {
    SimGuest guest{mem, 8, kEventIdx};
    guest.set_avail_idx(1000);
    SplitRing ring = attach(guest, 1000, 1000);
    // Disabled: the guest, posting from 1000, would kick only after wrapping 2^16 entries.
    CHECK(guest.avail_event() == 999);
    CHECK_FALSE(spec_need_event(guest.avail_event(), 1001, 1000));
    ring.set_kicks_enabled(true);
    CHECK(guest.avail_event() == 1000);
    CHECK(spec_need_event(guest.avail_event(), 1001, 1000));
    // Enabled: each burst advances avail_event to where we have read.
    for (uint16_t i = 0; i < 3; ++i) guest.post_head(i);
    guest.publish();
    REQUIRE(ring.avail_count() == 3);
    ring.consume(3);
    ring.put_used(0, 0);
    ring.publish_used();
    CHECK(guest.avail_event() == 1003);
  }
}

TEST_CASE("size buckets follow RFC 2819's boundaries, as librte_vhost's stats do") {
  const std::pair<uint32_t, SizeBucket> cases[] = {
      {0, SizeBucket::kUndersize},     {63, SizeBucket::kUndersize},
      {64, SizeBucket::k64},           {65, SizeBucket::k65To127},
      {127, SizeBucket::k65To127},     {128, SizeBucket::k128To255},
      {255, SizeBucket::k128To255},    {256, SizeBucket::k256To511},
      {511, SizeBucket::k256To511},    {512, SizeBucket::k512To1023},
      {1023, SizeBucket::k512To1023},  {1024, SizeBucket::k1024To1518},
      {1518, SizeBucket::k1024To1518}, {1519, SizeBucket::k1519AndUp},
      {65535, SizeBucket::k1519AndUp}};
  for (const auto& [len, bucket] : cases) {
    INFO("len " << len);
    CHECK(size_bucket(len) == bucket);
  }
}

TEST_CASE("packets to a multicast or the broadcast address are counted apart") {
  QueueStats stats;
  const uint8_t unicast[6] = {0x02, 0, 0, 0, 0, 1};
  const uint8_t multicast[6] = {0x01, 0x00, 0x5e, 0, 0, 1};
  const uint8_t broadcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const uint8_t almost[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};  // multicast, not broadcast
  stats.count_packet(64, unicast);
  stats.count_packet(64, multicast);
  stats.count_packet(1500, broadcast);
  stats.count_packet(64, almost);
  stats.count_packet(5, broadcast);  // too short to have a destination: neither
  CHECK(stats.packets == 5);
  CHECK(stats.multicast == 2);
  CHECK(stats.broadcast == 1);
  CHECK(stats.sizes[static_cast<int>(SizeBucket::k64)] == 3);
  CHECK(stats.sizes[static_cast<int>(SizeBucket::kUndersize)] == 1);
  QueueStats sum;
  sum.add(stats);
  sum.add(stats);
  CHECK(sum.multicast == 4);
  CHECK(sum.sizes[static_cast<int>(SizeBucket::k1519AndUp)] == 0);
  CHECK(sum.sizes[static_cast<int>(SizeBucket::k1024To1518)] == 2);
}

// Issue 16, hole 1: more used entries staged in one burst than the ring holds (lent chains coming
// back beside a full ring) wrap within the ring; nothing is written past its end.
TEST_CASE("used entries beyond the ring size in one burst stay inside the ring") {
  for (uint16_t size = 2; size <= 32; size = static_cast<uint16_t>(size * 2)) {
    for (uint16_t start = 0; start < size; ++start) {
      INFO("ring " << size << " used index at " << start);
      // The used ring in a buffer of its own, a canary after its avail_event.
      constexpr size_t kCanary = 64 * sizeof(VringUsedElem);
      const size_t used_bytes = sizeof(VringUsed) + sizeof(VringUsedElem) * size + 2;
      std::vector<uint8_t> used_buf(used_bytes + kCanary, 0);
      std::memset(used_buf.data() + used_bytes, 0xa5, kCanary);
      std::vector<VringDesc> desc(size);
      std::vector<uint16_t> avail_buf(3 + size, 0);
      SplitRingAddrs addrs{desc.data(), reinterpret_cast<VringAvail*>(avail_buf.data()),
                           reinterpret_cast<VringUsed*>(used_buf.data()), size};
      SplitRing ring;
      REQUIRE(ring.attach(addrs, start, start, false));
      const uint16_t staged = static_cast<uint16_t>(size + size / 4 + 64);
      for (uint16_t i = 0; i < staged; ++i) ring.put_used(i % size, i);
      ring.publish_used();
      CHECK(std::all_of(used_buf.begin() + static_cast<ptrdiff_t>(used_bytes), used_buf.end(),
                        [](uint8_t b) { return b == 0xa5; }));
      // The ring holds the last `size` entries, each in its slot.
      const auto* used = reinterpret_cast<const VringUsed*>(used_buf.data());
      CHECK(used->idx == static_cast<uint16_t>(start + staged));
      for (uint16_t k = 0; k < size; ++k) {
        const uint16_t n = static_cast<uint16_t>(staged - size + k);  // the entry's staging order
        const VringUsedElem e = used->ring[static_cast<uint16_t>(start + n) & (size - 1)];
        CHECK(e.len == n);
      }
    }
  }
}

TEST_CASE(
    "descriptor lines given back: each line once, heads outside the table skipped, the "
    "descriptors unchanged") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 64, 0};
  SplitRing ring = attach(guest);
  const VringDesc* table = guest.setup().addrs.desc;
  for (uint16_t i = 0; i < 64; ++i)
    const_cast<VringDesc*>(table)[i] = VringDesc{0x1000u * i, 100u + i, 0, 0};
  std::vector<VringDesc> before(table, table + 64);
  auto line_of = [&](uint16_t head) { return reinterpret_cast<uintptr_t>(&table[head]) / 64; };

  // A burst's heads in order: 16 descriptors span 4 or 5 lines, each given back once.
  std::vector<uint16_t> heads;
  for (uint16_t i = 8; i < 24; ++i) heads.push_back(i);
  const uint16_t lines = static_cast<uint16_t>(line_of(23) - line_of(8) + 1);
  CHECK(ring.release_descs(heads.data(), static_cast<uint16_t>(heads.size())) == lines);

  // A hostile guest's heads: past the table (64 and 0xffff) are not touched.
  const uint16_t hostile[] = {64, 0xffff, 5, 1000};
  CHECK(ring.release_descs(hostile, 4) == 1);
  CHECK(ring.release_descs(hostile, 2) == 0);
  CHECK(std::equal(before.begin(), before.end(), table, [](const VringDesc& a, const VringDesc& b) {
    return std::memcmp(&a, &b, sizeof(a)) == 0;
  }));
}

TEST_CASE(
    "which bursts give their descriptor lines back: off never, on always, auto for a far "
    "guest only") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 64, 0};
  SplitRing ring = attach(guest);
  CHECK(ring.line_release() == LineRelease::kOff);  // until the queue sets it
  CHECK_FALSE(ring.releases_lines());
  if (!line_release_supported()) {
    ring.set_line_release(LineRelease::kOn, 2000000000);
    CHECK(ring.line_release() == LineRelease::kOff);  // a CPU without CLFLUSHOPT: never
    return;
  }
  ring.set_line_release(LineRelease::kOn, 2000000000);
  CHECK(ring.releases_lines());
  CHECK_FALSE(ring.placement().enabled());  // nothing to decide: not probed

  ring.set_line_release(LineRelease::kAuto, 2000000000);
  CHECK(ring.placement().enabled());
  CHECK_FALSE(ring.placement().far());  // no crossing seen yet: near
  CHECK_FALSE(ring.releases_lines());

  // Polls sample the avail index; here the line never leaves this CPU, so the guest stays near.
  VringAvail* avail = guest.setup().addrs.avail;
  for (int i = 0; i < 64 * 100; ++i) {
    __atomic_store_n(&avail->idx, static_cast<uint16_t>(avail->idx + 1), __ATOMIC_RELEASE);
    ring.consume(ring.avail_count());
  }
  CHECK_FALSE(ring.broken());
  CHECK(ring.placement().samples() > 0);
  CHECK_FALSE(ring.placement().far());
  CHECK_FALSE(ring.releases_lines());
  const PlacementProbe::Reading reading = ring.placement().reading();
  CHECK(reading.measured);
  CHECK_FALSE(reading.far);
  CHECK(reading.line_ns > 0);

  // Detached (the guest stopped the ring), there is nothing to measure any more.
  SplitRing detached = ring;
  detached.detach();
  CHECK_FALSE(detached.placement().enabled());
  CHECK_FALSE(detached.placement().reading().measured);

  ring.set_line_release(LineRelease::kOff, 2000000000);
  CHECK_FALSE(ring.releases_lines());
  CHECK_FALSE(ring.placement().enabled());
}

TEST_CASE("buffer_release: its own mode, the same gate; auto probes even with desc_release off") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 64, 0};
  SplitRing ring = attach(guest);
  CHECK(ring.buffer_release() == LineRelease::kOff);
  CHECK_FALSE(ring.releases_buffer_lines(true, true));
  if (!line_release_supported()) {
    ring.set_line_release(LineRelease::kOff, 2000000000, nullptr, LineRelease::kOn);
    CHECK(ring.buffer_release() == LineRelease::kOff);
    return;
  }
  ring.set_line_release(LineRelease::kOff, 2000000000, nullptr, LineRelease::kOn);
  CHECK(ring.releases_buffer_lines(false, false));  // on: the sender gate is not asked
  CHECK_FALSE(ring.releases_lines());
  CHECK_FALSE(ring.placement().enabled());
  ring.set_line_release(LineRelease::kOff, 2000000000, nullptr, LineRelease::kAuto);
  CHECK(ring.placement().enabled());  // buffer_release auto needs the placement too
  CHECK_FALSE(ring.releases_buffer_lines(true, true));  // near until a far crossing is seen
  // Far: a burst that waited on a guest sending its own frames, and only that one.
  PlacementProbe far_guest;
  far_guest.start(2000000000);
  far_guest.add_sample(2 * 120);
  REQUIRE(far_guest.far());
  ring.set_line_release(LineRelease::kOff, 2000000000, &far_guest, LineRelease::kAuto);
  CHECK(ring.releases_buffer_lines(true, true));
  CHECK_FALSE(ring.releases_buffer_lines(true, false));  // a forwarding guest
  CHECK_FALSE(ring.releases_buffer_lines(false, true));  // the burst did not wait on the guest
  ring.set_line_release(LineRelease::kOn, 2000000000);   // buffers: off by default
  CHECK_FALSE(ring.releases_buffer_lines(true, true));
}

// The lines prefetch_used() fetches for writing: every line the burst's entries are written to,
// across the ring's end, and none outside the used ring's entries.
TEST_CASE("the used-ring lines of a burst's entries, wrapping at the ring's end") {
  for (uint16_t size = 2; size <= 256; size = static_cast<uint16_t>(size * 2)) {
    // Cache-line aligned, as a guest's used ring (the entries start 4 bytes into it).
    const size_t used_bytes = sizeof(VringUsed) + sizeof(VringUsedElem) * size + 2;
    std::vector<uint64_t> used_buf((used_bytes + 63) / 8 + 8, 0);
    auto* used = reinterpret_cast<VringUsed*>((reinterpret_cast<uintptr_t>(used_buf.data()) + 63) &
                                              ~uintptr_t{63});
    std::vector<VringDesc> desc(size);
    std::vector<uint16_t> avail_buf(3 + size, 0);
    SplitRingAddrs addrs{desc.data(), reinterpret_cast<VringAvail*>(avail_buf.data()), used, size};
    const auto entries_begin = reinterpret_cast<uintptr_t>(&used->ring[0]);
    const auto entries_end = reinterpret_cast<uintptr_t>(&used->ring[size]);
    for (const uint16_t start : {0, 1, 7, 8, 250, 255, 65535}) {
      for (const uint16_t count : {1, 7, 8, 9, 32, 64, 300}) {
        INFO("ring " << size << " used index at " << start << ", " << count << " entries");
        SplitRing ring;
        REQUIRE(ring.attach(addrs, 0, start, false));
        std::vector<uintptr_t> lines;
        ring.for_each_used_line(
            count, [&](const void* line) { lines.push_back(reinterpret_cast<uintptr_t>(line)); });
        for (const uintptr_t line : lines) {
          CHECK(line % 64 == 0);
          CHECK(line + 64 > entries_begin);  // overlaps the entries
          CHECK(line < entries_end);
        }
        const uint16_t written = count < size ? count : size;
        for (uint16_t k = 0; k < written; ++k) {
          const auto* e = &used->ring[static_cast<uint16_t>(start + k) & (size - 1)];
          const auto first = reinterpret_cast<uintptr_t>(e) & ~uintptr_t{63};
          const auto last = (reinterpret_cast<uintptr_t>(e + 1) - 1) & ~uintptr_t{63};
          CHECK(std::count(lines.begin(), lines.end(), first) >= 1);
          CHECK(std::count(lines.begin(), lines.end(), last) >= 1);
        }
        // No more than the lines of two runs of entries (before and after the ring's end).
        CHECK(lines.size() <= (written * sizeof(VringUsedElem)) / 64 + 4);
      }
    }
  }
}

TEST_CASE("a copied packet's head lines: its first 64 bytes, each line once") {
  alignas(64) uint8_t buffer[256];
  if (!line_release_supported()) return;  // CLFLUSHOPT would fault
  CHECK(release_packet_head(buffer, 60) == 1);
  CHECK(release_packet_head(buffer, 1500) == 1);     // the payload is left alone
  CHECK(release_packet_head(buffer + 12, 60) == 2);  // a head across two lines
  CHECK(release_packet_head(buffer + 12, 40) == 1);
  CHECK(release_packet_head(buffer + 63, 1) == 1);
  CHECK(release_packet_head(buffer + 64, 1500) == 1);
}

TEST_CASE("a guest RX ring follows its queue pair's TX ring's placement") {
  if (!line_release_supported()) return;
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 64, 0};
  SplitRing ring = attach(guest);
  PlacementProbe tx_placement;
  tx_placement.start(2000000000);
  ring.set_line_release(LineRelease::kAuto, 2000000000, &tx_placement);
  CHECK_FALSE(ring.placement().enabled());  // this ring's own loads are not timed
  CHECK_FALSE(ring.releases_lines());
  tx_placement.add_sample(2 * 120);  // the TX ring's loads crossed between dies
  CHECK(ring.releases_lines());      // whether or not a burst waited on the guest
  for (int i = 0; i < 40; ++i) tx_placement.add_sample(2 * 20);
  CHECK_FALSE(ring.releases_lines());
  // Attached again (a restart), the ring probes for itself until told otherwise.
  ring = attach(guest);
  ring.set_line_release(LineRelease::kAuto, 2000000000);
  CHECK(ring.placement().enabled());
}
