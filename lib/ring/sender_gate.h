// SPDX-License-Identifier: BSD-3-Clause
// buffer_release's second gate at kAuto: whether a guest's TX ring carries frames the guest wrote
// or frames we wrote into its RX buffers and it forwards. A sender (a traffic generator, a
// server, a VM talking to another) writes the headers of its TX buffers again next, so giving
// their lines back once copied spares it a crossing per line (guest-tx 64 B far: +18 % to +90 %;
// VM-to-VM 64 B far +8-11 %, the guest's rate, for 1.10-1.16x our busy cycles a packet). A
// forwarder (PVP, a router VM) transmits the buffers we filled and posts them back for us to fill
// next: there the flush cost a guest-bound far PVP 6-20 % (docs/benchmarks.md, "Packet heads given
// back (guest TX)").
//
// Two signs, renewed every kWindow packets sent. The queue pair's RX ring was given less than a
// quarter as many: a sender (a quarter leaves it room for replies). Or, when it was given as
// many, the guest's frames: a frame we wrote into an RX buffer (a ForwardSample) that comes back
// out of the TX ring from the same buffer with other bytes past its addresses was written by the
// guest. Both guests that receive as much as they send recycle their RX buffers for TX (testpmd's
// macswap forwards the received mbuf; a VM-to-VM guest frees it and takes it again from its
// pool's cache), so only the bytes tell them apart. Two guests that send each other frames with
// the same addresses and ports both ways look like forwarders. A guest that receives on one
// queue pair and sends on another is taken for a sender. No EAL here.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace vqs {

// One frame we wrote into a guest RX buffer: where it starts in our mapping of guest memory, and
// kLen bytes from kFrom (an IPv4 frame's addresses and ports: a router leaves them as they are,
// a guest writing a frame of its own to a peer does not). Recorded by the lcore that fills the
// RX ring, at most every kEvery packets (a frame on the enqueue's fast path, with kFrom + kLen
// bytes in its first segment); watched for by the one that polls the TX ring, whose fast path
// (one descriptor, copied) takes it when the guest sends that buffer. Relaxed atomics: a sample
// recorded while another is being taken can give one wrong vote. Its own cache line: the two
// lcores share nothing else here.
class alignas(64) ForwardSample {
 public:
  static constexpr uint32_t kFrom = 26;
  static constexpr uint32_t kLen = 16;
  // Longer than a guest usually holds unread in its RX ring (1024 in the benchmarks), so that a
  // forwarder sends the sampled buffer back before the next sample replaces it. Larger rings
  // (up to 32768) may lose samples: no vote, and the counts decide. Not swept (one record a
  // sample, nothing per packet).
  static constexpr uint64_t kEvery = 2048;
  enum class Vote : uint8_t { kForwarded, kOwn, kNone };

  // The ring (re)started: no sample, the next one after kEvery packets from `rx_packets`.
  void reset(uint64_t rx_packets) {
    frame_.store(nullptr, std::memory_order_relaxed);
    recorded_at_ = rx_packets;
  }

  // RX: whether a frame of this burst is to be recorded (`rx_packets`: the ring's counter).
  bool due(uint64_t rx_packets) const { return rx_packets - recorded_at_ >= kEvery; }
  // RX: the frame at `in_guest` (our mapping of the guest's buffer) holds `bytes`' kLen at kFrom.
  void record(const uint8_t* in_guest, const uint8_t* bytes, uint64_t rx_packets) {
    uint64_t words[2];
    std::memcpy(words, bytes, sizeof(words));
    words_[0].store(words[0], std::memory_order_relaxed);
    words_[1].store(words[1], std::memory_order_relaxed);
    frame_.store(in_guest, std::memory_order_release);
    recorded_at_ = rx_packets;
  }
  // TX: the frame watched for (nullptr: none). Once a burst.
  const uint8_t* watched() const { return frame_.load(std::memory_order_acquire); }
  // TX: the watched frame left the TX ring holding `bytes` (kLen at kFrom). The sample is taken
  // and votes, unless it was taken already (the buffer twice in a burst) or replaced.
  Vote take(const uint8_t* watched, const uint8_t* bytes) {
    uint64_t words[2];
    std::memcpy(words, bytes, sizeof(words));
    const bool same = words[0] == words_[0].load(std::memory_order_relaxed) &&
                      words[1] == words_[1].load(std::memory_order_relaxed);
    if (!frame_.compare_exchange_strong(watched, nullptr, std::memory_order_relaxed))
      return Vote::kNone;
    return same ? Vote::kForwarded : Vote::kOwn;
  }

 private:
  static_assert(kLen == 2 * sizeof(uint64_t));
  std::atomic<const uint8_t*> frame_{nullptr};
  std::atomic<uint64_t> words_[2] = {0, 0};
  uint64_t recorded_at_ = 0;  // the RX lcore's own
};

class SenderGate {
 public:
  static constexpr uint64_t kWindow = 4096;  // packets sent: ~0.4 ms at 10 Mpps
  // Windows without a vote after which the last votes no longer count (samples stop when the
  // guest's frames leave the fast paths). Not swept: a VM-to-VM guest votes in nearly every
  // window, and 8 (~3 ms at 10 Mpps) bounds how long a forwarder can be flushed by mistake.
  static constexpr uint32_t kVoteWindows = 8;

  // From now on, with `received` the packet counter of the queue pair's RX ring (written by
  // whichever lcore serves that ring; nullptr: none, the guest only sends), `sample` that ring's
  // ForwardSample (nullptr: none) and `sent` this ring's counter. No verdict before the first
  // window: not a sender.
  void start(const uint64_t* received, ForwardSample* sample, uint64_t sent) {
    received_ = received;
    sample_ = sample;
    sent_mark_ = sent;
    received_mark_ = load_received();
    own_votes_ = forwarded_votes_ = 0;
    votes_ = 0;
    voted_own_ = false;
    windows_unvoted_ = 0;
    __atomic_store_n(&sends_own_, false, __ATOMIC_RELAXED);
  }
  // The frame a burst looks out for (nullptr: none). Once a burst.
  const uint8_t* watched() const { return sample_ != nullptr ? sample_->watched() : nullptr; }
  // The watched frame was sent, `len` bytes copied to `frame`.
  void vote(const uint8_t* watched, const uint8_t* frame, uint32_t len) {
    if (len < ForwardSample::kFrom + ForwardSample::kLen) return;  // too short to tell
    switch (sample_->take(watched, frame + ForwardSample::kFrom)) {
      case ForwardSample::Vote::kForwarded:
        ++forwarded_votes_;
        break;
      case ForwardSample::Vote::kOwn:
        ++own_votes_;
        break;
      case ForwardSample::Vote::kNone:
        return;
    }
    ++votes_;
  }
  // Votes cast since start().
  uint64_t votes() const { return votes_; }
  // After a burst, with this ring's packet counter: a window complete, the verdict is renewed.
  void update(uint64_t sent) {
    const uint64_t sent_in_window = sent - sent_mark_;
    if (sent_in_window < kWindow) return;
    const uint64_t received = load_received();
    // A window without a vote keeps the last verdict, for kVoteWindows.
    if (own_votes_ + forwarded_votes_ != 0) {
      voted_own_ = own_votes_ > forwarded_votes_;
      windows_unvoted_ = 0;
    } else if (++windows_unvoted_ >= kVoteWindows) {
      voted_own_ = false;
    }
    own_votes_ = forwarded_votes_ = 0;
    __atomic_store_n(&sends_own_, (received - received_mark_) * 4 < sent_in_window || voted_own_,
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
  ForwardSample* sample_ = nullptr;
  uint64_t sent_mark_ = 0;
  uint64_t received_mark_ = 0;
  uint32_t own_votes_ = 0;
  uint32_t forwarded_votes_ = 0;
  uint64_t votes_ = 0;
  uint32_t windows_unvoted_ = 0;
  bool voted_own_ = false;
  bool sends_own_ = false;
};

}  // namespace vqs
