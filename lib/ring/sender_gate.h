// SPDX-License-Identifier: BSD-3-Clause
// buffer_release's second gate at kAuto: whether a guest's TX ring carries frames the guest wrote
// or frames we wrote into its RX buffers and it forwards. A sender (a traffic generator, a
// server) writes the headers of its TX buffers again next, so giving their lines back once copied
// spares it a crossing per line (guest-tx 64 B far: +18 % to +90 %). A forwarder (PVP, a router VM)
// transmits the buffers we filled and posts them back for us to fill next: giving the lines back
// only moves where our next write finds them, and cost PVP 3-5 % (docs/benchmarks.md, "Packet
// heads given back (guest TX)"). Told apart by what the queue pair's RX ring was given while this
// ring sent kWindow packets: a sender received less than a quarter as many. Neither number was
// swept: the guests measured receive none (guest-tx) or as many as they send (PVP, VM-to-VM),
// so any fraction between splits them; a quarter leaves a sender room for replies (ACKs). A guest
// that receives on one queue pair and sends on another is taken for a sender. No EAL here.
#pragma once

#include <cstdint>

namespace vqs {

class SenderGate {
 public:
  static constexpr uint64_t kWindow = 4096;  // packets sent: ~0.4 ms at 10 Mpps

  // From now on, with `received` the packet counter of the queue pair's RX ring (written by
  // whichever lcore serves that ring; nullptr: none, the guest only sends) and `sent` this ring's.
  // No verdict before the first window: not a sender.
  void start(const uint64_t* received, uint64_t sent) {
    received_ = received;
    sent_mark_ = sent;
    received_mark_ = load_received();
    __atomic_store_n(&sends_own_, false, __ATOMIC_RELAXED);
  }
  // After a burst, with this ring's packet counter: a window complete, the verdict is renewed.
  void update(uint64_t sent) {
    const uint64_t sent_in_window = sent - sent_mark_;
    if (sent_in_window < kWindow) return;
    const uint64_t received = load_received();
    __atomic_store_n(&sends_own_, (received - received_mark_) * 4 < sent_in_window,
                     __ATOMIC_RELAXED);
    sent_mark_ = sent;
    received_mark_ = received;
  }
  // Whether the last window's frames were mostly the guest's own. From any thread.
  bool sends_own() const { return __atomic_load_n(&sends_own_, __ATOMIC_RELAXED); }

 private:
  uint64_t load_received() const {
    return received_ != nullptr ? __atomic_load_n(received_, __ATOMIC_RELAXED) : 0;
  }

  const uint64_t* received_ = nullptr;
  uint64_t sent_mark_ = 0;
  uint64_t received_mark_ = 0;
  bool sends_own_ = false;
};

}  // namespace vqs
