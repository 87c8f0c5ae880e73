// SPDX-License-Identifier: BSD-3-Clause
// A hostile guest: every malformed ring must be consumed or refused, counted, and survived —
// without touching memory outside the guest's regions (the sanitizer build checks that part).
#include <catch2/catch.hpp>
#include <chrono>
#include <random>

#include "datapath_fixture.h"
#include "ring/ring_burst.h"

using namespace vqs;
using namespace vqs::test;

namespace {

constexpr uint64_t kFeatures = kModernFeatures | bit(kRingFIndirectDesc);

uint16_t add_desc(SimGuest& g, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next = 0) {
  const uint16_t i = g.alloc_desc();
  g.desc(i) = VringDesc{addr, len, flags, next};
  return i;
}

uint64_t table_gpa(SimGuest& g, uint32_t entries, VringDesc** out) {
  const uint64_t gpa = g.memory().alloc_ring_memory(16ull * entries, 16);
  *out = reinterpret_cast<VringDesc*>(g.memory().host(gpa, 16ull * entries));
  return gpa;
}

// Posts a bad TX chain built by `make`, then a good packet; dequeue must drop the first and
// deliver the second.
template <typename Make>
void bad_tx_chain_is_consumed(Make make, DropReason reason = DropReason::kInvalidDescriptor) {
  Device dev(kFeatures, 16);
  const uint16_t bad = make(dev.tx);
  dev.tx.post_head(bad);
  SimPacket good;
  good.data = make_frame(100, 1);
  dev.tx.send(good);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 1);
  CHECK(mbuf_bytes(pkts[0]) == good.data);
  CHECK(dev.txq.stats().dropped(reason) == 1);
  const auto used = dev.tx.take_used();
  REQUIRE(used.size() == 2);
  CHECK(used[0].id == bad);
  CHECK(used[0].len == 0);
}

}  // namespace

TEST_CASE("hostile TX chains are consumed, counted and the queue goes on", "[split]") {
  SECTION("address outside every region") {
    bad_tx_chain_is_consumed([](SimGuest& g) { return add_desc(g, 0x10, 100, 0); });
  }
  SECTION("address + length overflows") {
    bad_tx_chain_is_consumed([](SimGuest& g) { return add_desc(g, UINT64_MAX - 50, 100, 0); });
  }
  SECTION("buffer running past the end of a region into a gap") {
    bad_tx_chain_is_consumed(
        [](SimGuest& g) { return add_desc(g, g.memory().region_end(1) - 10, 100, 0); });
  }
  SECTION("descriptor loop") {
    bad_tx_chain_is_consumed([](SimGuest& g) {
      const uint64_t a = g.memory().alloc(64);
      const uint16_t d0 = g.alloc_desc(), d1 = g.alloc_desc();
      g.desc(d0) = VringDesc{a, 20, kVringDescFNext, d1};
      g.desc(d1) = VringDesc{a, 20, kVringDescFNext, d0};
      return d0;
    });
  }
  SECTION("chain longer than the ring (through an indirect table)") {
    bad_tx_chain_is_consumed([](SimGuest& g) {
      VringDesc* t;
      const uint64_t gpa = table_gpa(g, 40, &t);
      const uint64_t a = g.memory().alloc(64);
      for (uint16_t i = 0; i < 40; ++i)
        t[i] = VringDesc{a, 1, uint16_t(i < 39 ? kVringDescFNext : 0), uint16_t(i + 1)};
      return add_desc(g, gpa, 40 * 16, kVringDescFIndirect);
    });
  }
  SECTION("nested indirect") {
    bad_tx_chain_is_consumed([](SimGuest& g) {
      VringDesc* t;
      const uint64_t gpa = table_gpa(g, 2, &t);
      t[0] = VringDesc{g.memory().alloc(64), 20, kVringDescFNext, 1};
      t[1] = VringDesc{gpa, 32, kVringDescFIndirect, 0};
      return add_desc(g, gpa, 32, kVringDescFIndirect);
    });
  }
  SECTION("indirect table not a multiple of 16 bytes") {
    bad_tx_chain_is_consumed([](SimGuest& g) {
      VringDesc* t;
      const uint64_t gpa = table_gpa(g, 2, &t);
      t[0] = VringDesc{g.memory().alloc(64), 20, 0, 0};
      return add_desc(g, gpa, 24, kVringDescFIndirect);
    });
  }
  SECTION("next index out of range") {
    bad_tx_chain_is_consumed(
        [](SimGuest& g) { return add_desc(g, g.memory().alloc(64), 20, kVringDescFNext, 16); });
  }
  SECTION("head index out of range") {
    bad_tx_chain_is_consumed([](SimGuest&) { return uint16_t(200); });
  }
  SECTION("device-writable buffer in a TX chain") {
    bad_tx_chain_is_consumed(
        [](SimGuest& g) { return add_desc(g, g.memory().alloc(64), 64, kVringDescFWrite); });
  }
  SECTION("chain shorter than the virtio-net header") {
    bad_tx_chain_is_consumed([](SimGuest& g) { return add_desc(g, g.memory().alloc(64), 5, 0); });
  }
  SECTION("zero-length chain") {
    bad_tx_chain_is_consumed([](SimGuest& g) { return add_desc(g, g.memory().alloc(64), 0, 0); });
  }
  SECTION("packet larger than the frame limit") {
    bad_tx_chain_is_consumed(
        [](SimGuest& g) {
          const uint32_t len = 12 + kMaxFrameLen + 1;
          return add_desc(g, g.memory().alloc(len), len, 0);
        },
        DropReason::kTooLarge);
  }
}

TEST_CASE("a split burst takes the first descriptors it read for its hints, not later writes",
          "[split]") {
  // The hint pass reads each first descriptor once and translates its buffer; single_buffer()
  // answers from that copy (what is checked is what is used). Chains past the hinted ones are
  // read when taken.
  Device dev(kFeatures, 16);
  SimGuest& g = dev.tx;
  const uint64_t buf = g.memory().alloc(4 * 128);
  uint16_t heads[4];
  for (uint16_t c = 0; c < 4; ++c) {
    heads[c] = add_desc(g, buf + 128 * c, 80, 0);
    g.post_head(heads[c]);
  }
  g.publish();
  SplitBurst burst(dev.txq);
  REQUIRE(burst.available(32) == 4);
  burst.prefetch_tx(3, 64);
  for (uint16_t c = 0; c < 4; ++c) g.desc(heads[c]) = VringDesc{0x10, 1u << 30, 0, 0};
  for (uint16_t c = 0; c < 3; ++c) {
    INFO("chain " << c);
    uint32_t len = 0;
    CHECK(burst.single_buffer(burst.handle(c), ChainAccess::kDeviceReads, &len) ==
          g.memory().host(buf + 128 * c, 80));
    CHECK(len == 80);
    CHECK(burst.id(burst.handle(c)) == heads[c]);
  }
  // Past the hinted chains, the head is read once, when the handle is taken.
  const SplitBurst::Handle h3 = burst.handle(3);
  g.setup().addrs.avail->ring[3] = heads[0];  // too late
  uint32_t len = 0;
  CHECK(burst.single_buffer(h3, ChainAccess::kDeviceReads, &len) == nullptr);
  CHECK(burst.id(h3) == heads[3]);
}

TEST_CASE("an avail index jumping more than the ring size breaks the queue, counted", "[split]") {
  Device dev(kFeatures, 16);
  SimPacket p;
  p.data = make_frame(64, 1);
  dev.tx.send(p);
  dev.tx.set_avail_idx(static_cast<uint16_t>(dev.tx.avail_idx() + 40));
  CHECK(dev.dequeue().empty());
  CHECK(dev.txq.stats().ring_broken == 1);
  CHECK_FALSE(dev.txq.ready());
  CHECK(dev.dequeue().empty());
  CHECK(dev.txq.stats().ring_broken == 1);
  dev.rx.set_avail_idx(17);
  rte_mbuf* m = make_mbuf(make_frame(64, 2));
  CHECK(dev.enqueue({m}) == 0);
  CHECK(dev.rxq.stats().ring_broken == 1);
  rte_pktmbuf_free(m);
}

TEST_CASE("hostile RX chains are consumed with length 0 and the packet goes on", "[split]") {
  for (bool mrg : {false, true}) {
    Device dev(kFeatures | (mrg ? bit(kNetFMrgRxbuf) : 0), 64);
    SimGuest& g = dev.rx;
    // Bad chains, each followed by good ones.
    g.post_head(add_desc(g, g.memory().alloc(2048), 2048, 0));            // read-only
    g.post_head(add_desc(g, 0x10, 2048, kVringDescFWrite));               // outside memory
    g.post_head(add_desc(g, g.memory().alloc(64), 4, kVringDescFWrite));  // shorter than header
    g.post_head(999);                                                     // bad head
    g.publish();
    g.post_rx(4, 1536);
    const auto frame = make_frame(1000, 3);
    REQUIRE(dev.enqueue({make_mbuf(frame)}) == 1);
    INFO("mrg " << mrg);
    const auto used = g.take_used();
    if (mrg) {
      REQUIRE(used.size() == 5);
      for (int i = 0; i < 4; ++i) CHECK(used[i].len == 0);
      CHECK(used[4].len == 12 + 1000);
      CHECK(dev.rxq.stats().invalid_rx_chains == 4);
      CHECK(dev.rxq.stats().total_drops() == 0);  // the packet itself was delivered
      CHECK(dev.rxq.stats().packets == 1);
    } else {
      // The 4-byte chain is valid but too small for the packet: the packet is dropped and the
      // chain stays posted.
      REQUIRE(used.size() == 2);
      CHECK(dev.rxq.stats().invalid_rx_chains == 2);
      CHECK(dev.rxq.stats().dropped(DropReason::kTooLarge) == 1);
      CHECK(dev.rxq.stats().total_drops() == 1);
      CHECK(dev.rxq.stats().packets == 0);
    }
  }
}

TEST_CASE("mergeable: an invalid chain behind gathered buffers when the ring runs dry", "[split]") {
  Device dev(kFeatures | bit(kNetFMrgRxbuf), 64);
  SimGuest& g = dev.rx;
  g.post_rx(1, 1000);
  g.post_head(add_desc(g, 0x10, 2048, kVringDescFWrite));
  g.publish();
  // 3000 bytes need more than the one valid buffer: the invalid chain after it must be consumed,
  // so the valid one before it goes back empty too (the avail ring is consumed in order).
  rte_mbuf* m = make_mbuf(make_frame(3000, 1));
  CHECK(dev.enqueue({m}) == 0);
  const auto used = g.take_used();
  REQUIRE(used.size() == 2);
  CHECK(used[0].len == 0);
  CHECK(used[1].len == 0);
  CHECK(dev.rxq.avail_count() == 0);
  g.post_rx(4, 1000);
  CHECK(dev.enqueue({m}) == 1);
  CHECK(g.receive().size() == 1);
}

TEST_CASE("mergeable with IN_ORDER: an invalid chain among gathered buffers keeps ring order",
          "[split]") {
  for (bool in_order : {false, true}) {
    Device dev(kFeatures | bit(kNetFMrgRxbuf) | (in_order ? bit(kFInOrder) : 0), 64);
    SimGuest& g = dev.rx;
    auto valid = [&g]() { return add_desc(g, g.memory().alloc(1000), 1000, kVringDescFWrite); };
    const uint16_t first = valid();
    const uint16_t bad = add_desc(g, 0x10, 2048, kVringDescFWrite);
    uint16_t rest[4];
    for (uint16_t& id : rest) id = valid();
    g.post_head(first);
    g.post_head(bad);
    for (uint16_t id : rest) g.post_head(id);
    g.publish();
    // 3000 bytes + header take four 1000-byte buffers: the first is gathered, then the invalid
    // chain is met.
    REQUIRE(dev.enqueue({make_mbuf(make_frame(3000, 1))}) == 1);
    INFO("in_order " << in_order);
    const auto used = g.take_used();
    CHECK(dev.rxq.stats().invalid_rx_chains == 1);
    CHECK(dev.rxq.stats().packets == 1);
    if (in_order) {
      // Ring order: the gathered buffer goes back empty, then the invalid chain, then the packet
      // in the next four buffers.
      REQUIRE(used.size() == 6);
      CHECK(used[0].id == first);
      CHECK(used[0].len == 0);
      CHECK(used[1].id == bad);
      CHECK(used[1].len == 0);
      for (int i = 0; i < 4; ++i) CHECK(used[2 + i].id == rest[i]);
      CHECK(used[2].len + used[3].len + used[4].len + used[5].len == 12 + 3000);
      CHECK(dev.rxq.avail_count() == 0);
    } else {
      // The invalid chain's entry goes first; the packet keeps the buffer gathered before it.
      REQUIRE(used.size() == 5);
      CHECK(used[0].id == bad);
      CHECK(used[1].id == first);
      CHECK(used[1].len == 1000);
      CHECK(dev.rxq.avail_count() == 1);
    }
  }
}

TEST_CASE("random rings: whatever the guest writes, the device survives and counts", "[split]") {
  std::mt19937_64 rng(20261130);
  for (int round = 0; round < 400; ++round) {
    const bool mrg = round & 1;
    Device dev(kFeatures | (mrg ? bit(kNetFMrgRxbuf) : 0) | ((round & 2) ? bit(kRingFEventIdx) : 0),
               32, 0, {4 << 20, 4 << 20, 1 << 20});
    const SimMemory& mem = dev.mem;
    auto addr = [&]() -> uint64_t {
      switch (rng() % 6) {
        case 0:
          return rng();  // anywhere
        case 1:
          return mem.region_end(0) - rng() % 64;  // near a boundary
        case 2:
          return mem.region_end(1) - rng() % 4096;  // into the gap
        case 3:
          return mem.region_start(2) + rng() % (1 << 20);  // ring region
        default:
          return mem.region_start(0) + rng() % (8 << 20);  // buffers
      }
    };
    for (SimGuest* g : {&dev.tx, &dev.rx}) {
      for (uint16_t i = 0; i < 32; ++i) {
        uint16_t flags = rng() & 7;
        g->desc(i) = VringDesc{addr(), static_cast<uint32_t>(rng() % 4 == 0 ? rng() : rng() % 5000),
                               flags, static_cast<uint16_t>(rng() % 40)};
      }
      for (int i = 0; i < 32; ++i) g->post_head(static_cast<uint16_t>(rng() % 40));
      g->set_avail_idx(static_cast<uint16_t>(rng() % 40));
    }
    for (int burst = 0; burst < 3; ++burst) {
      dev.dequeue(32);
      std::vector<rte_mbuf*> pkts;
      for (int i = 0; i < 8; ++i) pkts.push_back(make_mbuf(make_frame(rng() % 9000, i)));
      const uint16_t sent = dev.enqueue(pkts);
      for (size_t i = sent; i < pkts.size(); ++i) rte_pktmbuf_free(pkts[i]);
      dev.free_all();
    }
    const QueueStats& s = dev.txq.stats();
    CHECK(s.packets + s.total_drops() <= 96);
  }
  CHECK(rte_mempool_avail_count(test_pool()) + rte_mempool_in_use_count(test_pool()) ==
        test_pool()->size);
  CHECK(rte_mempool_in_use_count(test_pool()) == 0);
}

TEST_CASE("a ring full of invalid chains costs one burst a bounded amount of work", "[split]") {
  // Every chain a self-loop of empty descriptors: before the descriptor budget each took the
  // whole ring size to reject, and one packet walked every chain in the ring.
  for (bool mrg : {false, true}) {
    Device dev(kFeatures | (mrg ? bit(kNetFMrgRxbuf) : 0), 32768, 0, {4 << 20, 4 << 20, 2 << 20});
    SimGuest& g = dev.rx;
    const uint64_t a = g.memory().alloc(64);
    for (uint32_t i = 0; i < 32768; ++i) {
      const uint16_t d = g.alloc_desc();
      g.desc(d) = VringDesc{a, 0, kVringDescFWrite | kVringDescFNext, d};
      g.post_head(d);
    }
    g.publish();
    rte_mbuf* m = make_mbuf(make_frame(100, 1));
    const auto start = std::chrono::steady_clock::now();
    CHECK(dev.enqueue({m}) == 0);  // no valid buffer within this burst's descriptor budget
    const auto elapsed = std::chrono::steady_clock::now() - start;
    INFO("mrg " << mrg);
    // A one-packet burst may read 64 + 1024 descriptors: one chain (1024) is rejected and
    // consumed, the next one overruns the budget and stays posted.
    CHECK(dev.rxq.stats().invalid_rx_chains == 1);
    CHECK(dev.rxq.stats().rx_descriptor_budget_bursts == 1);
    CHECK(dev.rxq.avail_count() == 32768 - 1);
    CHECK(elapsed < std::chrono::milliseconds(50));  // 2 x 1024 descriptor reads, not 32768^2
    rte_pktmbuf_free(m);
  }
}

// Issue 16, hole 2: valid chains of 1023 empty descriptors and one header-sized one, every avail
// entry naming the same chain. The burst's descriptor budget must cut mergeable RX's gathering
// and count the cut. See docs/architecture.md, "Enqueue (guest RX)".
TEST_CASE("mergeable RX: chains of empty descriptors cost a burst a bounded number of reads",
          "[split]") {
  Device dev(kFeatures | bit(kNetFMrgRxbuf), 1024, 0, {4 << 20, 4 << 20, 2 << 20});
  SimGuest& g = dev.rx;
  const uint64_t empty = g.memory().alloc(64);
  const uint64_t hdr = g.memory().alloc(64);
  uint16_t next = g.alloc_desc();
  const uint16_t head = next;
  for (int i = 0; i < 1023; ++i) {
    const uint16_t d = next;
    next = g.alloc_desc();
    g.desc(d) = VringDesc{empty, 0, kVringDescFWrite | kVringDescFNext, next};
  }
  g.desc(next) = VringDesc{hdr, 12, kVringDescFWrite, 0};
  for (int i = 0; i < 1024; ++i) g.post_head(head);
  g.publish();
  std::vector<rte_mbuf*> pkts;
  for (int i = 0; i < 32; ++i) pkts.push_back(make_mbuf(make_frame(1500, i)));
  const auto start = std::chrono::steady_clock::now();
  const uint16_t sent = dev.enqueue(pkts);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  // 126 chains of 1024 descriptors a packet are far over 32 x 64 + 1024 reads.
  CHECK(sent == 0);
  CHECK(dev.rxq.stats().rx_descriptor_budget_bursts == 1);
  CHECK(dev.rxq.avail_count() == 1024);  // nothing consumed: the chains stay posted
  CHECK(elapsed < std::chrono::milliseconds(50));
  free_packets(pkts, sent);

  // A guest with sane buffers is served as before, right after.
  Device sane(kFeatures | bit(kNetFMrgRxbuf), 1024);
  sane.rx.post_rx(256, 1536);
  CHECK(sane.enqueue(make_packets(32, 1500)) == 32);
  CHECK(sane.rxq.stats().rx_descriptor_budget_bursts == 0);
}

// librte_vhost checks a ring's areas against guest memory when it translates their addresses,
// but a SET_VRING_NUM afterwards changes the size without a new translation (vhost_message_fuzz
// found a packed ring of 32768 entries read past a region set up for 256). The queue checks
// the areas at the size it is started with.
TEST_CASE("a ring whose size reaches past its memory region is not started") {
  // Ring memory comes from the last region: 64 KiB, room for the 256-entry rings but not for
  // descriptors of 8192 entries (128 KiB).
  SimMemory mem({1 << 20, 1 << 20, 64 << 10});
  SimGuest guest(mem, 256, kFeatures | bit(kRingFEventIdx) | test_ring_format());
  VirtQueue queue;
  VirtQueue::Setup setup = guest.setup();
  REQUIRE(queue.start(setup));
  queue.stop();
  for (uint16_t size : {uint16_t{8192}, uint16_t{32768}}) {
    setup.addrs.size = setup.packed_addrs.size = size;
    CHECK_FALSE(queue.start(setup));
    CHECK_FALSE(queue.ready());
  }
  // A ring area outside every region, a used ring here.
  setup = guest.setup();
  static uint8_t outside[8192];
  setup.addrs.used = reinterpret_cast<VringUsed*>(outside);
  setup.packed_addrs.device_event = reinterpret_cast<VringPackedEvent*>(outside);
  CHECK_FALSE(queue.start(setup));
  setup = guest.setup();
  CHECK(queue.start(setup));
}
