// SPDX-License-Identifier: BSD-3-Clause
#include "core/lcore_loop.h"

#include <rte_cycles.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/loop_clock.h"
#include "ring/guest_notifier.h"

namespace vqs::app {
namespace {

// Deferred tx work (coalesced guest notifications) is checked this often while busy.
constexpr uint64_t kHousekeepingUs = 10;
// While a guest queue is at its zero-copy limit, NIC tx queues are asked to free what they have
// sent at most this often (a consumer that holds buffers keeps the queue there).
constexpr uint64_t kReclaimUs = 10;
// A sleeping lcore with a queue that cannot wake it looks again after this long.
constexpr int kShortSleepMs = 1;
constexpr int kLongSleepMs = 100;

}  // namespace

LcoreLoop::LcoreLoop(unsigned lcore, uint16_t slot, std::vector<RxSlot> rx, TxBufferSet tx,
                     const Forwarding* forwarding, std::optional<uint32_t> busy_poll_us,
                     uint16_t burst, LcoreSignals* signals)
    : lcore_(lcore),
      slot_(slot),
      poller_(std::move(rx), burst),
      tx_(std::move(tx)),
      forwarding_(forwarding),
      busy_poll_us_(busy_poll_us),
      busy_poll_cycles_(busy_poll_us ? rte_get_tsc_hz() * *busy_poll_us / 1000000 : 0),
      busy_poll_us_shown_(busy_poll_us),
      signals_(signals),
      reclaim_interval_cycles_(rte_get_tsc_hz() * kReclaimUs / 1000000) {
  if (signals_ != nullptr) {
    epoch_seen_ = signals_->epoch.load(std::memory_order_relaxed);
    release_seen_ = signals_->release_requests.load(std::memory_order_relaxed);
  }
  // Made now, whether or not the loop sleeps yet: wake() may be called from any thread at any time.
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (busy_poll_us_) watch_wakeups();
}

void LcoreLoop::watch_wakeups() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_event_.epdata.event = EPOLLIN;
  wake_watched_ = epoll_fd_ >= 0 && wake_fd_ >= 0 &&
                  rte_epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake_event_) == 0;
  watch_queues(true);
}

void LcoreLoop::watch_queues(bool add) {
  std::vector<RxSlot>& slots = poller_.slots();
  if (!add) {
    for (size_t i = 0; i < watched_.size(); ++i)
      if (watched_[i]) slots[i].port->watch_rx_wake(slots[i].queue, epoll_fd_, false, nullptr);
    watched_.clear();
    return;
  }
  every_queue_can_wake_ = wake_watched_;
  watched_.assign(slots.size(), false);
  for (size_t i = 0; i < slots.size() && epoll_fd_ >= 0; ++i) {
    RxSlot& s = slots[i];
    watched_[i] = s.port->watch_rx_wake(s.queue, epoll_fd_, true, &s);
    every_queue_can_wake_ &= watched_[i];
  }
}

LcoreLoop::~LcoreLoop() {
  watch_queues(false);
  if (wake_watched_) rte_epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, wake_fd_, &wake_event_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void LcoreLoop::wake() {
  if (wake_fd_ >= 0) (void)eventfd_write(wake_fd_, 1);
}

void LcoreLoop::forward(RxSlot& slot, rte_mbuf** pkts, uint16_t count, uint64_t now_tsc) {
  const uint16_t in_port = slot.port->index();
  tx_.set_input(&slot.port->rx_counters(slot.queue));
  if (forwarding_->mode == ForwardingMode::kBridge) {
    forwarding_->bridge->forward(slot_, in_port, pkts, count, now_tsc, tx_,
                                 slot.port->rx_counters(slot.queue));
    return;
  }
  const int peer = forwarding_->xconnect_peer[in_port];
  if (peer < 0) {
    slot.port->rx_counters(slot.queue).count_drop(SwitchDrop::kNoRoute, count);
    rte_pktmbuf_free_bulk(pkts, count);
    return;
  }
  for (uint16_t i = 0; i < count; ++i) tx_.push(static_cast<uint16_t>(peer), pkts[i]);
}

bool LcoreLoop::wait_taken(uint64_t posted, int timeout_ms) {
  for (int waited_ms = 0; changes_done_.load(std::memory_order_acquire) < posted; ++waited_ms) {
    if (waited_ms >= timeout_ms) return false;
    wake();
    rte_delay_us_sleep(1000);
  }
  return true;
}

bool LcoreLoop::post(LcoreChange change, int timeout_ms) {
  if (signals_ == nullptr) return false;
  std::lock_guard lock(apply_mutex_);
  // The loop reads change_ until it has taken the last one: never overwritten before.
  if (!wait_taken(changes_posted_.load(std::memory_order_relaxed), timeout_ms)) return false;
  if (change.busy_poll_us) busy_poll_us_shown_ = *change.busy_poll_us;
  change_ = std::move(change);
  changes_posted_.store(changes_posted_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_release);
  signals_->epoch.fetch_add(1, std::memory_order_release);
  wake();
  return true;
}

bool LcoreLoop::wait_applied(int timeout_ms) {
  // Not taken in time: it stays handed over, and the loop applies it at its next pass.
  return wait_taken(changes_posted_.load(std::memory_order_acquire), timeout_ms);
}

bool LcoreLoop::apply(LcoreChange change, int timeout_ms) {
  return post(std::move(change), timeout_ms) && wait_applied(timeout_ms);
}

void LcoreLoop::apply_change(const LcoreChange& change) {
  for (const auto& [index, weight] : change.weights) {
    RxSlot& slot = poller_.slots()[index];
    slot.weight = weight;
    slot.byte_debt = 0;
  }
  if (change.busy_poll_us) {
    busy_poll_us_ = *change.busy_poll_us;
    busy_poll_cycles_ = busy_poll_us_ ? rte_get_tsc_hz() * *busy_poll_us_ / 1000000 : 0;
    if (busy_poll_us_ && epoll_fd_ < 0) watch_wakeups();
  }
  change_ports(change);
}

void LcoreLoop::change_ports(const LcoreChange& change) {
  const bool rx_changes =
      change.stop_polling.has_value() || !change.release_rx.empty() || !change.add_rx.empty();
  if (rx_changes && epoll_fd_ >= 0) watch_queues(false);  // the slots move: data pointers change
  std::vector<RxSlot>& slots = poller_.slots();
  if (change.stop_polling) {
    std::erase_if(slots, [&](const RxSlot& s) { return s.port->index() == *change.stop_polling; });
  }
  if (!change.release_rx.empty()) {
    std::erase_if(slots, [&](const RxSlot& s) {
      const bool moves = std::find(change.release_rx.begin(), change.release_rx.end(),
                                   std::pair<uint16_t, uint16_t>(s.port->index(), s.queue)) !=
                         change.release_rx.end();
      if (moves && change.released != nullptr) change.released->push_back(s);
      return moves;
    });
  }
  if (change.drop_output) tx_.remove_output(*change.drop_output);
  for (const auto& [port, output] : change.add_outputs) tx_.set_output(port, output);
  if (change.forwarding != nullptr) forwarding_ = change.forwarding;
  if (change.vlans != nullptr && forwarding_->bridge != nullptr)
    forwarding_->bridge->use_vlans(slot_, change.vlans);
  slots.insert(slots.end(), change.add_rx.begin(), change.add_rx.end());
  if (rx_changes && epoll_fd_ >= 0) watch_queues(true);
}

void LcoreLoop::take_signals(uint64_t epoch) {
  epoch_seen_ = epoch;
  const uint64_t requests = signals_->release_requests.load(std::memory_order_relaxed);
  if (requests != release_seen_) release_sent(requests);
  const uint64_t posted = changes_posted_.load(std::memory_order_acquire);
  if (posted != changes_done_.load(std::memory_order_relaxed)) {
    apply_change(change_);
    changes_done_.store(posted, std::memory_order_release);
  }
}

void LcoreLoop::release_sent(uint64_t requests) {
  release_seen_ = requests;
  const TxBufferSet::Released r = tx_.release_sent();
  ++counters_.tx_release_requests;
  counters_.tx_release_packets += r.packets;
  counters_.tx_release_unsupported += r.unsupported;
}

void LcoreLoop::reclaim_lent(uint64_t now_tsc) {
  next_reclaim_tsc_ = now_tsc + reclaim_interval_cycles_;
  const TxBufferSet::Released r = tx_.reclaim_sent();
  if (r.asked == 0) return;  // every NIC queue here answered -ENOTSUP before: nothing done
  ++counters_.lent_reclaims;
  counters_.lent_reclaimed_packets += r.packets;
}

uint32_t LcoreLoop::poll_once(uint64_t now_tsc) {
  // Once per pass, not per packet: a request is rare (a guest ring stopping with buffers lent, a
  // change from the control socket).
  if (signals_ != nullptr) {
    const uint64_t epoch = signals_->epoch.load(std::memory_order_acquire);
    if (epoch != epoch_seen_) [[unlikely]]
      take_signals(epoch);
  }
  uint32_t taken = 0;
  // A queue's cycles are read only after a visit that took packets: an idle pass reads no clock.
  uint64_t mark = now_tsc;
  for (RxSlot& slot : poller_.slots()) {
    const uint32_t n = poller_.visit(slot, [&](RxSlot& s, rte_mbuf** pkts, uint16_t count) {
      forward(s, pkts, count, now_tsc);
    });
    tx_.flush();
    if (n > 0) {
      const uint64_t after = rte_rdtsc();
      loop_tsc = after;
      slot.busy_cycles += after - mark;
      mark = after;
      taken += n;
    }
  }
  // A guest queue copied at its in-flight limit: its lent buffers may sit in a lazy NIC tx queue;
  // freed now, lending resumes at its next visit (a report within the interval waits till due).
  if (now_tsc >= next_reclaim_tsc_ && poller_.take_lending_full()) [[unlikely]]
    reclaim_lent(now_tsc);
  if (forwarding_->bridge != nullptr) forwarding_->bridge->quiescent(slot_);
  return taken;
}

void LcoreLoop::run(const std::atomic<bool>& stop) {
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t housekeeping_cycles = hz * kHousekeepingUs / 1000000;
  uint64_t now = rte_rdtsc();
  uint64_t last_work = now;
  uint64_t last_housekeeping = now;
  while (!stop.load(std::memory_order_relaxed)) {
    const uint32_t taken = poll_once(now);
    const uint64_t after = rte_rdtsc();
    ++counters_.iterations;
    if (taken > 0) {
      ++counters_.busy_iterations;
      counters_.packets += taken;
      counters_.busy_cycles += after - now;
      last_work = after;
    } else {
      counters_.idle_cycles += after - now;
    }
    now = loop_tsc = after;
    if (now - last_housekeeping >= housekeeping_cycles) {
      tx_.housekeeping(now);
      last_housekeeping = now;
    }
    if (busy_poll_us_ && now - last_work >= busy_poll_cycles_) {
      sleep_until_woken();
      now = last_work = last_housekeeping = loop_tsc = rte_rdtsc();
    }
  }
  loop_tsc = 0;  // what this thread runs next reads the TSC again
  tx_.flush();
  tx_.housekeeping(GuestNotifier::kFlushNow);
  if (forwarding_->bridge != nullptr) forwarding_->bridge->offline(slot_);
}

void LcoreLoop::sleep_until_woken() {
  // Nothing deferred may wait for the next packet: send coalesced notifications now.
  tx_.housekeeping(GuestNotifier::kFlushNow);
  // Lent guest buffers that our NIC tx queues have sent go back now, not at the next packet:
  // when some were freed, poll again so they reach their guests' used rings.
  const TxBufferSet::Released released = tx_.release_sent();
  if (released.packets > 0) {
    counters_.tx_released_before_sleep += released.packets;
    ++counters_.sleeps_put_off;
    return;
  }
  // A sleeping lcore must not hold up the bridge's aging (RCU): it goes offline until it forwards.
  if (forwarding_->bridge != nullptr) forwarding_->bridge->offline(slot_);
  // Arming a guest queue kicks ourselves if the guest posted before it saw the change, so no
  // packet that arrives from here on is slept through.
  for (RxSlot& s : poller_.slots()) s.port->arm_rx_wake(s.queue, true);
  ++counters_.sleeps;
  rte_epoll_event events[16];
  // rte_epoll_wait clears NIC rx interrupts as their driver needs; a guest's kickfd is drained
  // when kicks are next armed; our own eventfd is drained here.
  const int n =
      rte_epoll_wait(epoll_fd_, events, 16, every_queue_can_wake_ ? kLongSleepMs : kShortSleepMs);
  if (n > 0) ++counters_.wakeups;
  for (int i = 0; i < n; ++i) {
    const auto* slot = static_cast<const RxSlot*>(events[i].epdata.data);
    if (slot == nullptr) {
      eventfd_t ignored;
      (void)eventfd_read(wake_fd_, &ignored);
    } else if (slot->port->is_guest()) {
      ++counters_.kick_wakeups;
    } else {
      ++counters_.rx_interrupt_wakeups;
    }
  }
  for (RxSlot& s : poller_.slots()) s.port->arm_rx_wake(s.queue, false);
}

}  // namespace vqs::app
