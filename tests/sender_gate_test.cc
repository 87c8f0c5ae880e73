// SPDX-License-Identifier: BSD-3-Clause
// buffer_release auto's second gate: a guest that sends its own frames against one that forwards.
#include "ring/sender_gate.h"

#include <catch2/catch.hpp>

using namespace vqs;

namespace {

constexpr uint64_t kWindow = SenderGate::kWindow;

}  // namespace

TEST_CASE("sender gate: no verdict before a window, then by what the pair's RX ring received") {
  uint64_t received = 1000;  // counters that ran before this session
  uint64_t sent = 5000;
  SenderGate gate;
  gate.start(&received, sent);
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
  gate.start(nullptr, 0);
  gate.update(kWindow / 2);
  CHECK_FALSE(gate.sends_own());
  gate.update(kWindow);
  CHECK(gate.sends_own());

  uint64_t received = 0;
  gate.start(&received, kWindow);  // the ring restarted: no verdict until its first window
  CHECK_FALSE(gate.sends_own());
  received = 3 * kWindow;  // a burst of received frames, all in the next window
  gate.update(2 * kWindow);
  CHECK_FALSE(gate.sends_own());
}
