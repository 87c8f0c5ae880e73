// SPDX-License-Identifier: BSD-3-Clause
#include <rte_ether.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

TEST_CASE("enqueue to a guest without buffers returns what it could not place") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  auto pkts = make_packets(10, 1000);
  CHECK(dev.enqueue(pkts) == 0);
  dev.rx.post_rx(4, 1536);
  CHECK(dev.enqueue(pkts) == 4);
  CHECK(dev.rx.receive().size() == 4);
  CHECK(dev.rxq.stats().packets == 4);
  CHECK(dev.rxq.stats().dropped(DropReason::kTooLarge) == 0);
  free_packets(pkts, 4);
}

TEST_CASE("mergeable buffers: num_buffers and used lengths") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  dev.rx.post_rx(8, 1000);
  auto pkts = make_packets(1, 2500);  // 12 + 2500 bytes: 1000 + 1000 + 512
  REQUIRE(dev.enqueue(pkts) == 1);
  const auto used = dev.rx.take_used();
  REQUIRE(used.size() == 3);
  CHECK(used[0].len == 1000);
  CHECK(used[1].len == 1000);
  CHECK(used[2].len == 512);
  CHECK(dev.rxq.avail_count() == 5);
}

TEST_CASE("mergeable: a packet larger than all posted buffers waits, consuming none") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  dev.rx.post_rx(2, 1000);
  auto pkts = make_packets(2, 3000);
  CHECK(dev.enqueue(pkts) == 0);
  CHECK(dev.rxq.avail_count() == 2);
  CHECK(dev.rx.take_used().empty());
  dev.rx.post_rx(6, 1000);
  CHECK(dev.enqueue(pkts) == 2);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == 2);
  CHECK(got[0].buffers == 4);
  CHECK(got[1].buffers == 4);
}

TEST_CASE("mergeable: buffers posted since the index was last loaded are found mid-burst") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  dev.rx.post_rx(4, 1000);
  auto small = make_packets(1, 500);
  REQUIRE(dev.enqueue(small) == 1);  // loads the index: 4 posted, 3 left
  dev.rx.post_rx(6, 1000);
  // Two packets, four buffers each: the 3 known are more than the 2 packets asked for, so the
  // burst starts from them without a load, and has to load the index when they run out.
  auto big = make_packets(2, 3000);
  CHECK(dev.enqueue(big) == 2);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == 3);
  CHECK(got[1].buffers == 4);
  CHECK(got[2].buffers == 4);
  CHECK(dev.rxq.avail_count() == 1);
}

TEST_CASE("without mergeable buffers a packet larger than the chain is dropped, chain kept") {
  Device dev(kModernFeatures);
  dev.rx.post_rx(2, 1526);
  std::vector<rte_mbuf*> pkts = {make_mbuf(make_frame(9000, 1)), make_mbuf(make_frame(1514, 2))};
  CHECK(dev.enqueue(pkts) == 2);
  CHECK(dev.rxq.stats().dropped(DropReason::kTooLarge) == 1);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == 1);
  CHECK(got[0].data == make_frame(1514, 2));
  CHECK(dev.rxq.avail_count() == 1);   // the 9000-byte packet did not use a chain
  CHECK(got[0].hdr.num_buffers == 1);  // VERSION_1 without MRG_RXBUF: num_buffers is 1
}

TEST_CASE("legacy header without mergeable buffers is 10 bytes") {
  Device dev(0);
  dev.rx.post_rx(1, 1600);
  auto pkts = make_packets(1, 100);
  REQUIRE(dev.enqueue(pkts) == 1);
  const auto used = dev.rx.take_used();
  REQUIRE(used.size() == 1);
  CHECK(used[0].len == 110);
}

TEST_CASE("chained mbufs are written whole") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  const auto frame = make_frame(9018, 7);
  rte_mbuf* m = make_mbuf(frame);
  REQUIRE(m->nb_segs > 1);
  dev.rx.post_rx(10, 1536);
  REQUIRE(dev.enqueue({m}) == 1);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == 1);
  CHECK(got[0].data == frame);
}

TEST_CASE("a burst mixing one-buffer and merged packets gives them back in ring order, whole") {
  // One-buffer packets are copied after the headers of up to 32 are written; a merged packet
  // (the slow path) and the burst's end must find them all copied and used, in ring order.
  for (const uint64_t in_order : {uint64_t{0}, bit(kFInOrder)}) {
    Device dev(kModernFeatures | bit(kNetFMrgRxbuf) | in_order);
    dev.rx.post_rx(120, 1536);
    std::vector<std::vector<uint8_t>> frames;
    std::vector<rte_mbuf*> pkts;
    for (uint32_t i = 0; i < 80; ++i) {
      // 40 one-buffer packets, a 3000-byte one (two buffers), then one-buffer ones again.
      frames.push_back(make_frame(i == 40 ? 3000 : 60 + i, i));
      pkts.push_back(make_mbuf(frames.back()));
    }
    REQUIRE(dev.enqueue(pkts) == 80);
    INFO("in_order " << in_order);
    const auto got = dev.rx.receive();
    REQUIRE(got.size() == 80);
    for (uint32_t i = 0; i < 80; ++i) {
      INFO("packet " << i);
      CHECK(got[i].data == frames[i]);
      CHECK(got[i].hdr.num_buffers == (i == 40 ? 2 : 1));
    }
    CHECK(dev.rxq.stats().packets == 80);
  }
}

TEST_CASE("a broadcast whose first mbuf segment is shorter than a MAC is counted as broadcast") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  dev.rx.post_rx(4, 1536);
  std::vector<uint8_t> frame = make_frame(100, 3);
  std::memset(frame.data(), 0xff, RTE_ETHER_ADDR_LEN);
  rte_mbuf* head = make_mbuf({frame.begin(), frame.begin() + 2});
  rte_mbuf* tail = make_mbuf({frame.begin() + 2, frame.end()});
  // What lies past the head's 2 bytes is not the frame: reading it there would see no broadcast.
  std::memset(rte_pktmbuf_mtod_offset(head, uint8_t*, 2), 0, 4);
  REQUIRE(rte_pktmbuf_chain(head, tail) == 0);
  REQUIRE(dev.enqueue({head}) == 1);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == 1);
  CHECK(got[0].data == frame);
  CHECK(dev.rxq.stats().broadcast == 1);
  CHECK(dev.rxq.stats().multicast == 0);
}

TEST_CASE("packets above the frame limit are dropped and counted") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  dev.rx.post_rx(64, 1536);
  std::vector<rte_mbuf*> pkts = {make_mbuf(make_frame(kMaxFrameLen + 1, 1)),
                                 make_mbuf(make_frame(kMaxFrameLen, 2))};
  CHECK(dev.enqueue(pkts) == 2);
  CHECK(dev.rxq.stats().dropped(DropReason::kTooLarge) == 1);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == 1);
  CHECK(got[0].data.size() == kMaxFrameLen);
}

TEST_CASE("guest interrupts after RX follow the guest's suppression") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf) | bit(kRingFEventIdx));
  dev.rx.post_rx(32, 1536);
  dev.rx.set_used_event(0);
  CHECK(dev.enqueue(make_packets(4, 100)) == 4);
  CHECK(dev.rx.take_interrupts() == 1);
  dev.rx.set_used_event(20);
  CHECK(dev.enqueue(make_packets(4, 100)) == 4);  // used 4 -> 8
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.enqueue(make_packets(16, 100)) == 16);  // 8 -> 24 passes 20
  CHECK(dev.rx.take_interrupts() == 1);
  CHECK(dev.enqueue(make_packets(4, 100)) == 4);  // no buffers were asked for
  CHECK(dev.rx.take_interrupts() == 0);
  CHECK(dev.rxq.stats().guest_notifications == 2);
}

TEST_CASE("the virtio-net header is right whatever the buffer held before", "[split]") {
  // The fast path writes the header only where the guest's copy differs: both cases must end
  // with the same bytes.
  for (const uint64_t features :
       {uint64_t{0}, kModernFeatures, kModernFeatures | bit(kNetFMrgRxbuf)}) {
    for (const bool junk : {true, false}) {
      for (const bool chained : {false, true}) {
        Device dev(features);
        SimGuest& g = dev.rx;
        const uint32_t hdr_size = g.hdr_size();
        const uint64_t gpa = g.memory().alloc(1536);
        uint8_t* buf = g.memory().host(gpa, 1536);
        VirtioNetHdrMrgRxbuf want{};
        want.num_buffers = 1;
        if (junk)
          std::memset(buf, 0xab, hdr_size);
        else
          std::memcpy(buf, &want, hdr_size);
        const uint16_t id = g.alloc_desc();
        g.desc(id) = VringDesc{gpa, 1536, kVringDescFWrite, 0};
        g.post_head(id);
        g.publish();
        const auto frame = make_frame(chained ? 1400 : 64, 7);
        rte_mbuf* m = make_mbuf(frame);
        if (chained) {  // as a lent guest frame: a copied head, then the payload
          rte_mbuf* tail = make_mbuf({frame.begin() + 128, frame.end()});
          REQUIRE(rte_pktmbuf_trim(m, frame.size() - 128) == 0);
          REQUIRE(rte_pktmbuf_chain(m, tail) == 0);
        }
        REQUIRE(dev.enqueue({m}) == 1);
        INFO("features " << features << " junk " << junk << " chained " << chained);
        CHECK(std::memcmp(buf, &want, hdr_size) == 0);
        CHECK(std::memcmp(buf + hdr_size, frame.data(), frame.size()) == 0);
        const auto used = g.take_used();
        REQUIRE(used.size() == 1);
        CHECK(used[0].len == hdr_size + frame.size());
        CHECK(dev.rxq.stats().packets == 1);
        CHECK(dev.rxq.stats().bytes == frame.size());
      }
    }
  }
}
