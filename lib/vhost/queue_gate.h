// SPDX-License-Identifier: BSD-3-Clause
// The handshake between the control plane and the one lcore that polls a virtqueue: the lcore
// enters before a burst and leaves after it; the control plane closes the gate and waits for the
// lcore to leave before it changes or unmaps what the queue points to. Dekker-style, no lock.
// See docs/architecture.md, "Control plane".
#pragma once

#include <rte_pause.h>

#include <atomic>

namespace vqs {

class QueueGate {
 public:
  // Datapath: true when the queue may be used until leave(); false (and nothing to leave) if not.
  bool enter() {
    busy_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // Acquire: pairs with open()'s release, so the lcore sees the queue state set up before it.
    if (open_.load(std::memory_order_acquire)) return true;
    busy_.store(false, std::memory_order_release);
    return false;
  }
  void leave() { busy_.store(false, std::memory_order_release); }

  // Control plane.
  void open() { open_.store(true, std::memory_order_release); }
  // Returns once no lcore is inside; from then on enter() fails until open().
  void close() {
    open_.store(false, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (busy_.load(std::memory_order_acquire)) rte_pause();
  }
  bool is_open() const { return open_.load(std::memory_order_acquire); }

  // enter() for a scope: leaves at its end if it got in.
  class Entry {
   public:
    explicit Entry(QueueGate& gate) : gate_(gate), inside_(gate.enter()) {}
    ~Entry() {
      if (inside_) gate_.leave();
    }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    explicit operator bool() const { return inside_; }

   private:
    QueueGate& gate_;
    const bool inside_;
  };

 private:
  alignas(64) std::atomic<bool> busy_{false};  // written by the lcore
  alignas(64) std::atomic<bool> open_{false};  // written by the control plane
};

}  // namespace vqs
