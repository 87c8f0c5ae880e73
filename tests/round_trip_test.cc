// SPDX-License-Identifier: BSD-3-Clause
// Guest TX -> dequeue -> mbufs -> enqueue -> guest RX, every byte compared, across the feature
// combinations and descriptor layouts real drivers use.
#include <catch2/catch.hpp>

#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

// From the smallest Ethernet frame up; shorter guest packets are runts (see below).
const uint32_t kSizes[] = {14,   15,   16,   59,   60,    64,    65,    128,
                           255,  256,  1000, 1500, 1514,  1518,  2047,  2048,
                           2049, 4096, 9000, 9018, 16384, 32768, 65000, 65535};

struct Combo {
  const char* name;
  uint64_t features;
};

const Combo kCombos[] = {
    {"legacy", 0},
    {"legacy+mrg", bit(kNetFMrgRxbuf)},
    {"1.x", kModernFeatures},
    {"1.x+mrg", kModernFeatures | bit(kNetFMrgRxbuf)},
    {"1.x+indirect", kModernFeatures | bit(kRingFIndirectDesc)},
    {"1.x+mrg+indirect+event_idx",
     kModernFeatures | bit(kNetFMrgRxbuf) | bit(kRingFIndirectDesc) | bit(kRingFEventIdx)},
    {"1.x+event_idx", kModernFeatures | bit(kRingFEventIdx)},
};

// Receive buffers as Linux's virtio_net posts them: 1536-byte buffers with mergeable buffers,
// else one chain big enough for any packet (header + 64 KiB in 17 pieces).
void post_rx_for(SimGuest& rx, uint16_t count) {
  if ((rx.features() >> kNetFMrgRxbuf) & 1)
    rx.post_rx(count, 1536);
  else
    rx.post_rx(count, 17 * 4096, 17, (rx.features() >> kRingFIndirectDesc) & 1);
}

// One burst of `count` frames of 60 + step * i bytes each way, compared in order; `rx_buffers`
// posted first (post_rx_for's kind).
void burst_each_way(Device& dev, int count, uint32_t step, uint16_t rx_buffers, uint32_t* seed) {
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < count; ++i) {
    SimPacket p;
    p.data = make_frame(60 + step * i, ++*seed);
    sent.push_back(p.data);
    dev.tx.send(p);
  }
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == size_t(count));
  REQUIRE(dev.tx.take_used().size() == size_t(count));
  post_rx_for(dev.rx, rx_buffers);
  REQUIRE(dev.enqueue(pkts) == count);
  const auto got = dev.rx.receive();
  REQUIRE(got.size() == size_t(count));
  for (int i = 0; i < count; ++i) CHECK(got[i].data == sent[i]);
}

// One burst of `count` 60-byte frames from the guest and none to it: a guest that only sends.
void burst_from_guest(Device& dev, int count, uint32_t* seed) {
  for (int i = 0; i < count; ++i) {
    SimPacket p;
    p.data = make_frame(60, ++*seed);
    dev.tx.send(p);
  }
  REQUIRE(dev.dequeue().size() == size_t(count));
  REQUIRE(dev.tx.take_used().size() == size_t(count));
  dev.free_all();
}

void round_trip(Device& dev, uint32_t size, uint32_t seed, const TxLayout& layout) {
  SimPacket sent;
  sent.data = make_frame(size, seed);
  dev.tx.send(sent, layout);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 1);
  CHECK(pkts[0]->pkt_len == size);
  CHECK(mbuf_bytes(pkts[0]) == sent.data);
  const auto used = dev.tx.take_used();
  REQUIRE(used.size() == 1);
  CHECK(used[0].len == 0);

  const bool mrg = (dev.rx.features() >> kNetFMrgRxbuf) & 1;
  const uint16_t need = mrg ? static_cast<uint16_t>((dev.rx.hdr_size() + size + 1535) / 1536) : 1;
  post_rx_for(dev.rx, need);
  REQUIRE(dev.enqueue(pkts) == 1);
  const auto received = dev.rx.receive();
  REQUIRE(received.size() == 1);
  CHECK(received[0].data == sent.data);
  CHECK(received[0].buffers == need);
  CHECK(received[0].hdr.hdr.flags == 0);
  CHECK(received[0].hdr.hdr.gso_type == kNetHdrGsoNone);
}

}  // namespace

TEST_CASE("round trips for sizes 0..65535 over every feature combination and layout") {
  for (const Combo& combo : kCombos) {
    // 0: one descriptor (the fast path); 1: header apart; 2: data in pieces; 3: one descriptor
    // crossing regions; 4: header apart, data crossing regions.
    for (int layout_kind = 0; layout_kind < 5; ++layout_kind) {
      TxLayout layout;
      layout.indirect = (combo.features >> kRingFIndirectDesc) & 1;
      layout.separate_header = layout_kind == 1 || layout_kind == 4;
      layout.data_pieces = layout_kind == 2 ? 3 : 1;
      layout.cross_region = layout_kind >= 3;
      Device dev(combo.features);
      uint32_t seed = 0;
      for (uint32_t size : kSizes) {
        INFO(combo.name << " layout " << layout_kind << " size " << size);
        round_trip(dev, size, ++seed, layout);
      }
      CHECK(dev.txq.stats().packets == std::size(kSizes));
      CHECK(dev.rxq.stats().packets == std::size(kSizes));
      CHECK(dev.txq.stats().total_drops() == 0);
      CHECK(dev.rxq.stats().total_drops() == 0);
    }
  }
}

TEST_CASE("bursts across the 16-bit index wrap-around") {
  for (uint64_t features :
       {kModernFeatures, kModernFeatures | bit(kNetFMrgRxbuf) | bit(kRingFEventIdx)}) {
    Device dev(features, 512, 65500);
    uint32_t seed = 0;
    const bool mrg = (features >> kNetFMrgRxbuf) & 1;
    for (int burst = 0; burst < 10; ++burst)              // 10 x 20 entries: the indices pass 65535
      burst_each_way(dev, 20, 97, mrg ? 40 : 20, &seed);  // mergeable: the larger ones take two
    // Where the device stands: a split ring's index, or a packed ring's position (the same
    // count of one-descriptor chains, in laps of 512 slots).
    CHECK(dev.txq.used_base() == (dev.txq.packed() ? PackedPos{}.advanced(65500 + 200, 512).base()
                                                   : static_cast<uint16_t>(65500 + 200)));
  }
}

TEST_CASE(
    "guest packets of 0..13 bytes (header-only chains too) are consumed and counted as runts") {
  for (uint64_t features : {uint64_t{0}, kModernFeatures | bit(kNetFMrgRxbuf)}) {
    Device dev(features);
    for (uint32_t size = 0; size < 14; ++size) {
      SimPacket p;
      p.data = make_frame(size, size);
      dev.tx.send(p, {.separate_header = size % 2 == 0});
    }
    SimPacket good;
    good.data = make_frame(60, 99);
    dev.tx.send(good);
    const auto pkts = dev.dequeue();
    REQUIRE(pkts.size() == 1);
    CHECK(mbuf_bytes(pkts[0]) == good.data);
    CHECK(dev.txq.stats().dropped(DropReason::kRunt) == 14);
    CHECK(dev.tx.take_used().size() == 15);
  }
}

TEST_CASE("round trips with the descriptor lines of every burst given back (desc_release on)",
          "[split]") {
  for (uint64_t features : {kModernFeatures | bit(kNetFMrgRxbuf),
                            kModernFeatures | bit(kNetFMrgRxbuf) | bit(kRingFEventIdx)}) {
    Device dev(features);
    VirtQueue::Setup tx_setup = dev.tx.setup(), rx_setup = dev.rx.setup();
    tx_setup.line_release = rx_setup.line_release = LineRelease::kOn;
    dev.txq.stop();
    dev.rxq.stop();
    REQUIRE(dev.txq.start(tx_setup));
    REQUIRE(dev.rxq.start(rx_setup));
    uint32_t seed = 0;
    for (int burst = 0; burst < 40; ++burst)   // 40 x 30 packets: the 256-entry rings wrap
      burst_each_way(dev, 30, 37, 30, &seed);  // up to 1133 bytes: one 1536-byte buffer each
    CHECK(dev.txq.stats().total_drops() == 0);
    CHECK(dev.rxq.stats().total_drops() == 0);
    if (line_release_supported()) {  // 30 descriptors a burst: 8 lines or more, each direction
      CHECK(dev.txq.stats().desc_lines_released >= 40 * 8);
      CHECK(dev.rxq.stats().desc_lines_released >= 40 * 8);
    }
    CHECK(dev.txq.stats().buffer_lines_released == 0);  // buffer_release: off in the setup
  }
}

TEST_CASE("round trips with every copied packet's head given back (buffer_release on)", "[split]") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  VirtQueue::Setup tx_setup = dev.tx.setup(), rx_setup = dev.rx.setup();
  tx_setup.line_release = rx_setup.line_release = LineRelease::kOff;
  tx_setup.buffer_release = LineRelease::kOn;
  dev.txq.stop();
  dev.rxq.stop();
  REQUIRE(dev.txq.start(tx_setup));
  REQUIRE(dev.rxq.start(rx_setup));
  uint32_t seed = 0;
  for (int burst = 0; burst < 40; ++burst) burst_each_way(dev, 30, 37, 30, &seed);
  CHECK(dev.txq.stats().total_drops() == 0);
  CHECK(dev.rxq.stats().total_drops() == 0);
  CHECK(dev.txq.stats().desc_lines_released == 0);
  CHECK(dev.rxq.stats().buffer_lines_released == 0);  // guest RX: never
  if (line_release_supported()) {
    // One or two lines a packet (its first 64 bytes), bytes intact (burst_each_way compares).
    CHECK(dev.txq.stats().buffer_lines_released >= 40 * 30);
    CHECK(dev.txq.stats().buffer_lines_released <= 40 * 30 * 2);
  } else {
    CHECK(dev.txq.stats().buffer_lines_released == 0);
  }
}

TEST_CASE(
    "buffer_release auto: heads given back for a far guest sending its own frames, not for "
    "one forwarding ours",
    "[split]") {
  PlacementProbe far_guest;  // where a real ring's probe would have found the guest
  far_guest.start(2000000000);
  far_guest.add_sample(2 * 120);
  REQUIRE(far_guest.far());
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  VirtQueue::Setup tx_setup = dev.tx.setup();
  tx_setup.line_release = LineRelease::kOff;
  tx_setup.buffer_release = LineRelease::kAuto;
  tx_setup.placement_from = &far_guest;
  tx_setup.pair_rx_stats = &dev.rxq.stats();
  dev.txq.stop();
  REQUIRE(dev.txq.start(tx_setup));
  const int kBursts = static_cast<int>(2 * SenderGate::kWindow / 32);  // two windows' worth

  // A forwarder: every frame it sends, it received first.
  uint32_t seed = 0;
  for (int burst = 0; burst < kBursts; ++burst) burst_each_way(dev, 32, 0, 32, &seed);
  CHECK(dev.txq.stats().packets == 2 * SenderGate::kWindow);
  CHECK_FALSE(dev.txq.sender_gate().sends_own());
  CHECK(dev.txq.stats().buffer_lines_released == 0);

  // Then a sender: nothing received. After a window the copied heads go back.
  for (int burst = 0; burst < kBursts; ++burst) burst_from_guest(dev, 32, &seed);
  CHECK(dev.txq.sender_gate().sends_own());
  if (line_release_supported()) {
    // At least the second window's packets, one line or two each.
    CHECK(dev.txq.stats().buffer_lines_released >= SenderGate::kWindow);
    CHECK(dev.txq.stats().buffer_lines_released <= 2 * 2 * SenderGate::kWindow);
  } else {
    CHECK(dev.txq.stats().buffer_lines_released == 0);
  }
}

// Frames to the guest, then from it out of the very buffers it received them in: as received
// but for the MAC addresses swapped (testpmd's macswap), or with frames of its own written there,
// replies from the receiver's address (a VM-to-VM guest whose pool hands the freed RX mbuf out
// again for TX).
void receive_and_send_back(Device& dev, bool own_frames, uint32_t* seed) {
  std::vector<rte_mbuf*> pkts;
  for (int i = 0; i < 32; ++i) pkts.push_back(make_mbuf(make_frame(60, ++*seed)));
  post_rx_for(dev.rx, 32);
  REQUIRE(dev.enqueue(pkts) == 32);
  for (SimPacket& p : dev.rx.receive()) {
    REQUIRE(p.gpa != 0);
    if (own_frames) {  // a reply: its own addresses first
      p.data = make_frame(60, ++*seed);
      for (int b = 0; b < 4; ++b) std::swap(p.data[26 + b], p.data[30 + b]);
    } else {
      for (int b = 0; b < 6; ++b) std::swap(p.data[b], p.data[6 + b]);
    }
    TxLayout at_buffer;
    at_buffer.at_gpa = p.gpa;
    dev.tx.send(p, at_buffer);
  }
  REQUIRE(dev.dequeue().size() == 32);
  REQUIRE(dev.tx.take_used().size() == 32);
  dev.free_all();
}

TEST_CASE("the sender gate: a guest receiving as much as it sends, told apart by its frames",
          "[split]") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf), 1024);
  VirtQueue::Setup tx_setup = dev.tx.setup();
  tx_setup.pair_rx_stats = &dev.rxq.stats();
  tx_setup.pair_rx_sample = &dev.rxq.forward_sample();
  tx_setup.buffer_release = LineRelease::kAuto;  // where the verdict is used
  dev.txq.stop();
  REQUIRE(dev.txq.start(tx_setup));
  const int kBursts = static_cast<int>(2 * SenderGate::kWindow / 32);  // two windows' worth
  // A sample at each kEvery received, the first after kEvery: none at the very end.
  const uint64_t kSamples = 2 * SenderGate::kWindow / ForwardSample::kEvery - 1;
  uint32_t seed = 0;
  SECTION("a forwarder") {
    for (int burst = 0; burst < kBursts; ++burst) receive_and_send_back(dev, false, &seed);
    CHECK(dev.txq.sender_gate().votes() == kSamples);  // each sample came back and voted
    CHECK_FALSE(dev.txq.sender_gate().sends_own());
  }
  SECTION("a guest writing its own frames into the buffers it received in") {
    for (int burst = 0; burst < kBursts; ++burst) receive_and_send_back(dev, true, &seed);
    CHECK(dev.txq.sender_gate().votes() == kSamples);
    CHECK(dev.txq.sender_gate().sends_own());
  }
  SECTION("without the RX ring's samples, or with buffer_release not auto, both look alike") {
    const bool no_samples = GENERATE(true, false);
    if (no_samples)
      tx_setup.pair_rx_sample = nullptr;
    else
      tx_setup.buffer_release = LineRelease::kOn;
    dev.txq.stop();
    REQUIRE(dev.txq.start(tx_setup));
    for (int burst = 0; burst < kBursts; ++burst) receive_and_send_back(dev, true, &seed);
    CHECK(dev.txq.sender_gate().votes() == 0);
    CHECK_FALSE(dev.txq.sender_gate().sends_own());
  }
  SECTION("the RX ring restarted: its sample from before is gone") {
    for (int burst = 0; burst < 64; ++burst) receive_and_send_back(dev, true, &seed);
    // 2048 packets in: one more burst records a sample; the guest does not send it back.
    std::vector<rte_mbuf*> pkts;
    for (int i = 0; i < 32; ++i) pkts.push_back(make_mbuf(make_frame(60, ++seed)));
    post_rx_for(dev.rx, 32);
    REQUIRE(dev.enqueue(pkts) == 32);
    REQUIRE(dev.rxq.forward_sample().watched() != nullptr);
    dev.rxq.stop();
    CHECK(dev.rxq.forward_sample().watched() == nullptr);
    dev.rx.receive();
  }
}

TEST_CASE("the sender gate's verdict on either ring format: a forwarder, then a sender") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf));
  VirtQueue::Setup tx_setup = dev.tx.setup();
  tx_setup.pair_rx_stats = &dev.rxq.stats();
  dev.txq.stop();
  REQUIRE(dev.txq.start(tx_setup));
  const int kBursts = static_cast<int>(SenderGate::kWindow / 32) + 1;  // a window and a burst
  uint32_t seed = 0;
  for (int burst = 0; burst < kBursts; ++burst) burst_each_way(dev, 32, 0, 32, &seed);
  CHECK_FALSE(dev.txq.sender_gate().sends_own());
  for (int burst = 0; burst < kBursts; ++burst) burst_from_guest(dev, 32, &seed);
  CHECK(dev.txq.sender_gate().sends_own());
  // Stopped and started again (a new session): no verdict until a window is seen.
  dev.txq.stop();
  REQUIRE(dev.txq.start(tx_setup));
  CHECK_FALSE(dev.txq.sender_gate().sends_own());
}
