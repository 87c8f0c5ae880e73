// SPDX-License-Identifier: BSD-3-Clause
// One forwarding lcore, run to completion: visit each rx queue under its weights, forward what
// it yields (xconnect or bridge) into per-port tx buffers, flush them after each visit; when
// idle for busy_poll_us, arm the queues' wake-ups and sleep until a packet or a stop arrives.
#pragma once

#include <rte_interrupts.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "bridge/l2_bridge.h"
#include "core/weighted_poller.h"
#include "ports/tx_buffer.h"

namespace vqs::app {

// How packets leave: a cross-connect peer per input port, or the bridge.
struct Forwarding {
  ForwardingMode mode = ForwardingMode::kXconnect;
  std::vector<int> xconnect_peer;  // by input port index; -1: nowhere
  L2Bridge* bridge = nullptr;
};

struct alignas(64) LcoreCounters {
  uint64_t iterations = 0;
  uint64_t busy_iterations = 0;  // found at least one packet
  uint64_t packets = 0;
  uint64_t sleeps = 0;
  uint64_t wakeups = 0;       // sleeps ended by a kick, an rx interrupt or a stop (not the timeout)
  uint64_t kick_wakeups = 0;  // ... by a guest's kick, or a completion of its lent buffers
  uint64_t rx_interrupt_wakeups = 0;  // ... by a NIC rx interrupt
  uint64_t busy_cycles = 0;           // TSC cycles in iterations that found work
  uint64_t idle_cycles = 0;
  // Requests to free sent mbufs (a guest ring stopping with buffers lent) carried out on this
  // lcore's NIC tx queues, the packets that freed, and the queues whose device cannot do it.
  uint64_t tx_release_requests = 0;
  uint64_t tx_release_packets = 0;
  uint64_t tx_release_unsupported = 0;
  // Packets NIC tx queues freed when asked just before the lcore would sleep (a NIC frees sent
  // mbufs lazily, in later tx bursts; an idle lcore would keep lent guest buffers from going
  // back), and the sleeps put off because that freed some.
  uint64_t tx_released_before_sleep = 0;
  uint64_t sleeps_put_off = 0;
  // Times a guest queue at its zero-copy in-flight limit had this lcore's NIC tx queues asked to
  // free what they have sent (a NIC that frees lazily holds lent buffers until its ring runs
  // low; queues whose device answered -ENOTSUP are no longer asked), whether or not that freed
  // any, and the packets it freed.
  uint64_t lent_reclaims = 0;
  uint64_t lent_reclaimed_packets = 0;
};

// What the switch asks of every lcore; an lcore looks at `epoch` once per pass and at the rest
// only when it moved.
struct LcoreSignals {
  alignas(64) std::atomic<uint64_t> epoch{0};  // bumped after any of the below
  // Ask the NIC tx queues to free what they have sent (TxBufferSet::release_sent).
  std::atomic<uint64_t> release_requests{0};
};

// A change the control thread makes to one running lcore, applied by it between two passes (so
// nothing is buffered and no table lookup is in flight), in the order of the fields.
struct LcoreChange {
  std::vector<std::pair<uint16_t, Weight>> weights;     // rx slot index -> its weight from now
  std::optional<std::optional<uint32_t>> busy_poll_us;  // set: the new busy-poll (inner nullopt:
                                                        // poll forever)
  // Runtime ports (docs/architecture.md, "Runtime ports").
  std::optional<uint16_t> stop_polling;  // a port index: its rx queues leave the lcore
  // Rx queues (port index, queue) that move to another lcore: their slots, counters and all,
  // are moved into `released` (its capacity reserved: the lcore allocates nothing).
  std::vector<std::pair<uint16_t, uint16_t>> release_rx;
  std::vector<RxSlot>* released = nullptr;
  std::optional<uint16_t> drop_output;  // a port index: nothing is sent to it any more
  std::vector<std::pair<uint16_t, TxBufferSet::Output>> add_outputs;  // by port index
  const Forwarding* forwarding = nullptr;  // forward by this table from now on
  const VlanMap* vlans = nullptr;          // bridge: ... and by this VLAN map
  std::vector<RxSlot> add_rx;              // rx queues the lcore polls from now on
};

class LcoreLoop {
 public:
  // `signals` (optional): the switch's requests to every lcore (see LcoreSignals).
  LcoreLoop(unsigned lcore, uint16_t slot, std::vector<RxSlot> rx, TxBufferSet tx,
            const Forwarding* forwarding, std::optional<uint32_t> busy_poll_us, uint16_t burst,
            LcoreSignals* signals = nullptr);
  ~LcoreLoop();
  LcoreLoop(const LcoreLoop&) = delete;
  LcoreLoop& operator=(const LcoreLoop&) = delete;

  unsigned lcore() const { return lcore_; }
  uint16_t slot() const { return slot_; }
  // Runs until `stop` is set (then wake() it so a sleeping loop notices).
  void run(const std::atomic<bool>& stop);
  // One pass over every rx queue, after a release request that came since the last pass, and
  // before a reclaim of lent buffers when a guest queue reached its zero-copy limit; returns the
  // packets taken (tests drive the loop with it, and on their thread leave loop_clock's reading
  // from its last visit that took packets).
  uint32_t poll_once(uint64_t now_tsc);
  void wake();  // async-signal-safe
  // Control thread: has the loop apply `change` at its next pass (woken if asleep) and waits for
  // it. False when it has not within `timeout_ms` (the loop is not running): the change then
  // waits for the loop's next pass, and a later apply() first waits for it. Needs `signals`.
  bool apply(LcoreChange change, int timeout_ms);
  // apply() in two halves, so that one control thread can hand changes to several lcores and
  // then wait for them all: post() returns false (nothing posted) when the previous change was
  // not taken within `timeout_ms`; wait_applied() whether the posted one was taken in time.
  bool post(LcoreChange change, int timeout_ms);
  bool wait_applied(int timeout_ms);

  const WeightedPoller& poller() const { return poller_; }
  // As last set (constructor or apply); read by the control thread.
  const std::optional<uint32_t>& busy_poll_us() const { return busy_poll_us_shown_; }
  const LcoreCounters& counters() const { return counters_; }

 private:
  void forward(RxSlot& slot, rte_mbuf** pkts, uint16_t count, uint64_t now_tsc);
  // Returns without sleeping when freeing sent mbufs first may have completed lent buffers.
  void sleep_until_woken();
  void take_signals(uint64_t epoch);
  bool wait_taken(uint64_t posted, int timeout_ms);  // control thread
  void release_sent(uint64_t requests);
  void apply_change(const LcoreChange& change);
  void watch_wakeups();         // the epoll fd and what it watches, before the first sleep
  void watch_queues(bool add);  // every rx queue's wake-up in (or out of) the epoll fd
  void change_ports(const LcoreChange& change);
  void reclaim_lent(uint64_t now_tsc);

  const unsigned lcore_;
  const uint16_t slot_;
  WeightedPoller poller_;
  TxBufferSet tx_;
  const Forwarding* forwarding_;          // swapped by a change, between passes
  std::optional<uint32_t> busy_poll_us_;  // the lcore's own copy
  uint64_t busy_poll_cycles_ = 0;
  std::optional<uint32_t> busy_poll_us_shown_;  // the control thread's
  int epoll_fd_ = -1;  // wake-ups of every rx queue, and wake_fd_: see rte_epoll_wait
  int wake_fd_ = -1;
  rte_epoll_event wake_event_{};
  bool wake_watched_ = false;
  std::vector<bool> watched_;  // by slot: its wake-up is in epoll_fd_
  bool every_queue_can_wake_ = false;
  LcoreSignals* const signals_;
  uint64_t epoch_seen_ = 0;
  uint64_t release_seen_ = 0;
  // apply(): the control thread fills `change_`, bumps `changes_posted_` and signals_->epoch;
  // the loop applies it and stores `changes_done_`.
  std::mutex apply_mutex_;  // control threads, one post at a time
  LcoreChange change_;
  std::atomic<uint64_t> changes_posted_{0};
  std::atomic<uint64_t> changes_done_{0};
  const uint64_t reclaim_interval_cycles_;
  uint64_t next_reclaim_tsc_ = 0;
  LcoreCounters counters_;
};

}  // namespace vqs::app
