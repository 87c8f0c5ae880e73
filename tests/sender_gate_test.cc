// SPDX-License-Identifier: BSD-3-Clause
// buffer_release auto's second gate: a guest that sends its own frames against one that forwards.
#include "ring/sender_gate.h"

#include <catch2/catch.hpp>
#include <cstring>

using namespace vqs;

namespace {

constexpr uint64_t kWindow = SenderGate::kWindow;

}  // namespace

TEST_CASE("sender gate: no verdict before a window, then by what the pair's RX ring received") {
  uint64_t received = 1000;  // counters that ran before this session
  uint64_t sent = 5000;
  SenderGate gate;
  gate.start(&received, nullptr, sent);
  CHECK_FALSE(gate.sends_own());

  sent += kWindow - 1;  // one packet short of a window: no verdict yet
  gate.update(sent);
  CHECK_FALSE(gate.sends_own());

  sent += 1;  // a window sent, nothing received: a sender
  gate.update(sent);
  CHECK(gate.sends_own());

  // A forwarder: as much received as sent.
  sent += kWindow;
  received += kWindow;
  gate.update(sent);
  CHECK_FALSE(gate.sends_own());

  // The boundary: a quarter as many received is a forwarder; one fewer, a sender.
  sent += kWindow;
  received += kWindow / 4;
  gate.update(sent);
  CHECK_FALSE(gate.sends_own());
  sent += kWindow;
  received += kWindow / 4 - 1;
  gate.update(sent);
  CHECK(gate.sends_own());

  // Windows do not overlap: what was received in the last one is not counted again.
  sent += kWindow;
  gate.update(sent);
  CHECK(gate.sends_own());
}

TEST_CASE("sender gate: a guest without an RX ring to count sends its own; a restart forgets") {
  SenderGate gate;
  gate.start(nullptr, nullptr, 0);
  gate.update(kWindow / 2);
  CHECK_FALSE(gate.sends_own());
  gate.update(kWindow);
  CHECK(gate.sends_own());

  uint64_t received = 0;
  gate.start(&received, nullptr, kWindow);  // the ring restarted: no verdict until its first window
  CHECK_FALSE(gate.sends_own());
  received = 3 * kWindow;  // a burst of received frames, all in the next window
  gate.update(2 * kWindow);
  CHECK_FALSE(gate.sends_own());
}

namespace {

// A 64-byte frame whose bytes from ForwardSample::kFrom on start with `tag`.
struct Frame {
  uint8_t bytes[64] = {};
  explicit Frame(uint8_t tag) { std::memset(bytes + ForwardSample::kFrom, tag, 16); }
};

}  // namespace

TEST_CASE("sender gate: a guest receiving as much as it sends, told apart by its frames' bytes") {
  uint64_t received = 0;
  uint64_t sent = 0;
  ForwardSample sample;
  SenderGate gate;
  gate.start(&received, &sample, sent);
  CHECK(gate.watched() == nullptr);
  uint8_t buffer[64] = {};  // a guest RX buffer, as we map it
  const Frame ours(0x11);
  const Frame its_own(0x22);

  // Nothing recorded until kEvery packets were received; then one frame.
  CHECK_FALSE(sample.due(ForwardSample::kEvery - 1));
  REQUIRE(sample.due(ForwardSample::kEvery));
  sample.record(buffer, ours.bytes + ForwardSample::kFrom, ForwardSample::kEvery);
  CHECK_FALSE(sample.due(2 * ForwardSample::kEvery - 1));
  CHECK(gate.watched() == buffer);
  // A window of as many frames received as sent: the counts alone say forwarder.
  auto window_each_way = [&] {
    sent += SenderGate::kWindow;
    received += SenderGate::kWindow;
    gate.update(sent);
  };

  SECTION("it sends the frame back as we wrote it: a forwarder") {
    gate.vote(buffer, ours.bytes, 64);
    CHECK(gate.watched() == nullptr);  // taken
    CHECK(gate.votes() == 1);
    gate.vote(buffer, ours.bytes, 64);  // the buffer again in the same burst: no second vote
    CHECK(gate.votes() == 1);
    window_each_way();
    CHECK_FALSE(gate.sends_own());
  }
  SECTION("it wrote a frame of its own into the buffer: a sender, and it stays one") {
    gate.vote(buffer, its_own.bytes, 64);
    window_each_way();
    CHECK(gate.sends_own());
    // A window without a vote keeps the verdict; a forwarded frame's vote turns it.
    window_each_way();
    CHECK(gate.sends_own());
    sample.record(buffer, ours.bytes + ForwardSample::kFrom, 2 * ForwardSample::kEvery);
    gate.vote(buffer, ours.bytes, 64);
    window_each_way();
    CHECK_FALSE(gate.sends_own());
  }
  SECTION("votes expire after kVoteWindows windows without one") {
    gate.vote(buffer, its_own.bytes, 64);
    for (uint32_t w = 0; w < SenderGate::kVoteWindows; ++w) {
      window_each_way();
      CHECK(gate.sends_own());
    }
    window_each_way();
    CHECK_FALSE(gate.sends_own());  // the counts decide again
  }
  SECTION("a frame too short to compare is no vote, and leaves the sample") {
    gate.vote(buffer, its_own.bytes, ForwardSample::kFrom + ForwardSample::kLen - 1);
    CHECK(gate.watched() == buffer);
    window_each_way();
    CHECK_FALSE(gate.sends_own());
  }
  SECTION("a sample replaced before the vote is left in place, and no vote is cast") {
    uint8_t other[64] = {};
    sample.record(other, its_own.bytes + ForwardSample::kFrom, 2 * ForwardSample::kEvery);
    CHECK(sample.take(buffer, ours.bytes + ForwardSample::kFrom) == ForwardSample::Vote::kNone);
    CHECK(gate.watched() == other);
    gate.vote(buffer, its_own.bytes, 64);
    CHECK(gate.votes() == 0);
  }
  SECTION("a ring restarted forgets its sample") {
    sample.reset(5 * ForwardSample::kEvery);
    CHECK(gate.watched() == nullptr);
    CHECK_FALSE(sample.due(6 * ForwardSample::kEvery - 1));
    CHECK(sample.due(6 * ForwardSample::kEvery));
  }
  SECTION("a restart forgets the votes") {
    gate.vote(buffer, its_own.bytes, 64);
    gate.start(&received, &sample, sent);
    window_each_way();
    CHECK_FALSE(gate.sends_own());
  }
}
