// SPDX-License-Identifier: BSD-3-Clause
#include <catch2/catch.hpp>

#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

void send_n(SimGuest& guest, int n, uint32_t size) {
  for (int i = 0; i < n; ++i) {
    SimPacket p;
    p.data = make_frame(size, i);
    guest.send(p);
  }
}

}  // namespace

TEST_CASE("dequeue stops at the packet limit and at the byte limit") {
  Device dev(kModernFeatures);
  send_n(dev.tx, 100, 1000);
  CHECK(dev.dequeue(32).size() == 32);
  CHECK(dev.txq.avail_count() == 68);
  // The byte limit ends the burst after the packet that reaches it.
  CHECK(dev.dequeue(32, 2500).size() == 3);
  CHECK(dev.dequeue(32, 1).size() == 1);
  CHECK(dev.dequeue(256).size() == 64);
  CHECK(dev.txq.stats().packets == 100);
  CHECK(dev.txq.stats().bytes == 100000);
  CHECK(dev.tx.take_used().size() == 100);
}

TEST_CASE("dequeue reports what it consumed, for weights") {
  Device dev(kModernFeatures);
  send_n(dev.tx, 10, 300);
  std::vector<rte_mbuf*> pkts(16);
  const BurstResult r = dequeue_burst(dev.txq, test_pool(), pkts.data(), 16, kNoByteLimit);
  CHECK(r.packets == 10);
  CHECK(r.bytes == 3000);
  rte_pktmbuf_free_bulk(pkts.data(), r.packets);
}

TEST_CASE("an empty mbuf pool leaves packets in the guest's ring, counted, none lost") {
  Device dev(kModernFeatures);
  rte_mempool* pool = small_pool(8);
  send_n(dev.tx, 12, 100);
  auto first = dev.dequeue(32, kNoByteLimit, pool);
  CHECK(first.size() == 8);
  CHECK(dev.txq.stats().mbuf_alloc_failures == 1);
  CHECK(dev.txq.avail_count() == 4);
  dev.free_all();
  CHECK(dev.dequeue(32, kNoByteLimit, pool).size() == 4);
  dev.free_all();

  SECTION("a large packet that needs more segments than the pool has free right now") {
    rte_mbuf* held[4];  // mbufs in use elsewhere (a NIC's tx ring, say)
    REQUIRE(rte_pktmbuf_alloc_bulk(pool, held, 4) == 0);
    send_n(dev.tx, 1, 16000);  // 8 segments: fits the pool, not what is free of it
    CHECK(dev.dequeue(32, kNoByteLimit, pool).empty());
    CHECK(dev.txq.stats().mbuf_alloc_failures == 2);
    CHECK(dev.txq.avail_count() == 1);
    CHECK(rte_mempool_avail_count(pool) == 4);  // what was taken went back
    rte_pktmbuf_free_bulk(held, 4);
    const auto got = dev.dequeue(32, kNoByteLimit, pool);
    REQUIRE(got.size() == 1);
    CHECK(got[0]->pkt_len == 16000);
    CHECK(got[0]->nb_segs == 8);
  }
  dev.free_all();
  rte_mempool_free(pool);
}

TEST_CASE("dequeue of a stopped queue does nothing") {
  Device dev(kModernFeatures);
  const VirtQueue::Setup fresh = dev.tx.setup();
  send_n(dev.tx, 3, 100);
  dev.txq.stop();
  CHECK(dev.dequeue().empty());
  REQUIRE(dev.txq.start(fresh));
  CHECK(dev.dequeue().size() == 3);
}

TEST_CASE("resuming from a vring base continues where the previous device stopped") {
  Device dev(kModernFeatures);
  send_n(dev.tx, 5, 100);
  CHECK(dev.dequeue(2).size() == 2);
  const uint16_t last_avail = dev.txq.avail_base();
  const uint16_t last_used = dev.txq.used_base();
  dev.txq.stop();
  VirtQueue::Setup s = dev.tx.setup();
  s.last_avail_idx = last_avail;
  s.last_used_idx = last_used;
  REQUIRE(dev.txq.start(s));
  CHECK(dev.dequeue().size() == 3);
  CHECK(dev.tx.take_used().size() == 5);
}

TEST_CASE("guest interrupts after TX completions follow the guest's suppression") {
  SECTION("without EVENT_IDX") {
    Device dev(kModernFeatures);
    send_n(dev.tx, 4, 100);
    dev.dequeue();
    CHECK(dev.tx.take_interrupts() == 1);  // one per burst, not per packet
    dev.tx.set_avail_flags(kVringAvailFNoInterrupt);
    send_n(dev.tx, 4, 100);
    dev.dequeue();
    CHECK(dev.tx.take_interrupts() == 0);
    CHECK(dev.txq.stats().guest_notifications == 1);
  }
  SECTION("with EVENT_IDX") {
    Device dev(kModernFeatures | bit(kRingFEventIdx));
    send_n(dev.tx, 4, 100);
    dev.dequeue();
    CHECK(dev.tx.take_interrupts() == 1);
    dev.tx.take_used();
    dev.tx.set_used_event(10);  // interrupt me once used idx passes 10
    send_n(dev.tx, 4, 100);
    dev.dequeue();  // used idx 4 -> 8
    CHECK(dev.tx.take_interrupts() == 0);
    send_n(dev.tx, 4, 100);
    dev.dequeue();  // 8 -> 12: crosses 10
    CHECK(dev.tx.take_interrupts() == 1);
  }
}

TEST_CASE("a packet larger than the whole mbuf pool is dropped, not left blocking the ring") {
  Device dev(kModernFeatures);
  rte_mempool* pool = small_pool(8);
  send_n(dev.tx, 1, 30000);  // 15 segments of 2 KiB: more than the pool has
  send_n(dev.tx, 1, 100);
  auto got = dev.dequeue(32, kNoByteLimit, pool);
  REQUIRE(got.size() == 1);
  CHECK(got[0]->pkt_len == 100);
  CHECK(dev.txq.stats().dropped(DropReason::kTooLarge) == 1);
  CHECK(dev.tx.take_used().size() == 2);
  dev.free_all();
  CHECK(rte_mempool_avail_count(pool) == 8);
  rte_mempool_free(pool);
}

TEST_CASE("a burst cut short by its byte limit takes few mbufs from the pool") {
  Device dev(kModernFeatures);
  rte_mempool* pool = small_pool(40);
  send_n(dev.tx, 200, 1000);
  // Before: a 200-packet burst allocated 200 mbufs up front and failed on this pool.
  CHECK(dev.dequeue(200, 1, pool).size() == 1);
  CHECK(dev.txq.stats().mbuf_alloc_failures == 0);
  dev.free_all();
  rte_mempool_free(pool);
}
