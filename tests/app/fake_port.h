// SPDX-License-Identifier: BSD-3-Clause
// A port for switch unit tests: rx from a packet source the test fills (or an endless
// generator), tx into a list the test inspects, with a tx capacity to simulate a full queue.
#pragma once

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "core/loop_clock.h"
#include "ports/port.h"

namespace vqs::app::test {

class FakePort final : public Port {
 public:
  FakePort(std::string name, uint16_t index, uint16_t rx_queues, uint16_t tx_queues, bool guest)
      : Port(std::move(name), index), rx_(rx_queues), tx_(tx_queues), guest_(guest) {
    init_queues(rx_queues, tx_queues);
  }
  ~FakePort() override {
    for (auto& q : rx_)
      for (rte_mbuf* m : q) rte_pktmbuf_free(m);
    for (auto& q : tx_)
      for (rte_mbuf* m : q) rte_pktmbuf_free(m);
  }

  // Test side.
  void inject(uint16_t queue, rte_mbuf* m) { rx_[queue].push_back(m); }
  // Endless rx on `queue`: packets of `len` bytes from `pool` whenever polled.
  void generate(uint16_t queue, rte_mempool* pool, uint16_t len) {
    gen_pool_ = pool;
    gen_len_.resize(rx_.size(), 0);
    gen_len_[queue] = len;
  }
  std::vector<rte_mbuf*>& sent(uint16_t queue) { return tx_[queue]; }
  void free_sent() {
    for (auto& q : tx_) {
      for (rte_mbuf* m : q) rte_pktmbuf_free(m);
      q.clear();
    }
  }
  uint32_t tx_capacity = UINT32_MAX;  // packets accepted before the queue is "full"
  bool up = true;
  bool segments_tcp = true;           // false: TSO trains are cut before tx (a NIC without TSO)
  std::atomic<uint64_t> rx_polls{0};  // read by tests while an lcore runs
  bool lending_full = false;          // a guest's bursts report its zero-copy limit reached
  // tx_done_cleanup: the queues asked, and what the device answers (packets freed, or -ENOTSUP):
  // the next of cleanup_results, once they are used up cleanup_result.
  std::vector<uint16_t> cleaned;
  std::deque<int> cleanup_results;
  int cleanup_result = 0;
  // tx_housekeeping: its calls (it never leaves work deferred).
  uint64_t housekeeping_calls = 0;
  // Set: each rx_burst appends what loop_clock() and the TSC read then (one log may serve
  // several ports), each tx_housekeeping {loop_clock(), its now_tsc}.
  struct ClockRead {
    uint16_t port;
    uint64_t clock;
    uint64_t tsc;
  };
  std::vector<ClockRead>* rx_clocks = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>>* housekeeping_clocks = nullptr;

  // Port.
  bool is_guest() const override { return guest_; }
  uint16_t rx_queue_count() const override { return static_cast<uint16_t>(rx_.size()); }
  uint16_t tx_queue_count() const override { return static_cast<uint16_t>(tx_.size()); }
  bool link_up() const override { return up; }
  BurstResult rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t max_packets,
                       uint32_t max_bytes) override {
    ++rx_polls;
    if (rx_clocks != nullptr) rx_clocks->push_back({index(), loop_clock(), rte_rdtsc()});
    BurstResult r;
    while (r.packets < max_packets && r.bytes < max_bytes) {
      rte_mbuf* m = nullptr;
      if (!rx_[queue].empty()) {
        m = rx_[queue].front();
        rx_[queue].pop_front();
      } else if (queue < gen_len_.size() && gen_len_[queue] > 0) {
        m = rte_pktmbuf_alloc(gen_pool_);
        if (m == nullptr) break;
        char* data = rte_pktmbuf_append(m, gen_len_[queue]);
        std::memset(data, 0, gen_len_[queue]);
      } else {
        break;
      }
      m->port = index();
      pkts[r.packets++] = m;
      r.bytes += m->pkt_len;
    }
    r.lending_full = lending_full && r.packets > 0;
    return r;
  }
  uint16_t tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t count) override {
    uint16_t n = 0;
    while (n < count && tx_[queue].size() < tx_capacity) tx_[queue].push_back(pkts[n++]);
    return n;
  }
  bool tx_ready(uint16_t) const override { return up; }
  int tx_done_cleanup(uint16_t queue) override {
    cleaned.push_back(queue);
    if (cleanup_results.empty()) return cleanup_result;
    const int result = cleanup_results.front();
    cleanup_results.pop_front();
    return result;
  }
  bool needs_tcp_segmentation() const override { return !segments_tcp; }
  bool tx_housekeeping(uint16_t, uint64_t now_tsc) override {
    ++housekeeping_calls;
    if (housekeeping_clocks != nullptr) housekeeping_clocks->emplace_back(loop_clock(), now_tsc);
    return false;  // all done
  }
  bool watch_rx_wake(uint16_t, int, bool, void*) override { return false; }
  bool arm_rx_wake(uint16_t, bool) override { return false; }

 private:
  std::vector<std::deque<rte_mbuf*>> rx_;
  std::vector<std::vector<rte_mbuf*>> tx_;
  bool guest_;
  rte_mempool* gen_pool_ = nullptr;
  std::vector<uint16_t> gen_len_;
};

}  // namespace vqs::app::test
