// SPDX-License-Identifier: BSD-3-Clause
// What the benchmark guests (vqs-noisy-guest, vqs-share-guest, vqs-intr-guest, vqs-zc-guest)
// share besides their ports: the testpmd commands switch_vs_ovs.sh and zerocopy_stall.sh send
// them on stdin, the hand-over of the active ports from the main lcore to the worker, and the
// interval between two reports.
#pragma once

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_spinlock.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace vqs::bench {

// The ports a worker drives, in the order "set portlist" named them; empty: stopped.
using PortList = std::vector<uint16_t>;

// A value the main lcore publishes and a worker lcore picks up between two iterations: the
// worker pays one atomic load per iteration; the copy is locked (a report may publish while the
// worker copies).
template <typename T>
class Published {
 public:
  void publish(const T& value) {
    rte_spinlock_lock(&lock_);
    value_ = value;
    rte_spinlock_unlock(&lock_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  // Copies the value into *out if it changed since *seen; returns whether it did.
  bool take(uint32_t* seen, T* out) {
    const uint32_t g = generation_.load(std::memory_order_acquire);
    if (g == *seen) return false;
    *seen = g;
    rte_spinlock_lock(&lock_);
    *out = value_;
    rte_spinlock_unlock(&lock_);
    return true;
  }

 private:
  rte_spinlock_t lock_ = RTE_SPINLOCK_INITIALIZER;
  T value_{};
  std::atomic<uint32_t> generation_{0};
};

struct GuestCommands {
  size_t ports = 0;                            // how many "set portlist" must name (0: 1..8)
  std::function<void(const PortList&)> start;  // "start", with the last valid portlist
  std::function<void()> stop;                  // "stop"
  std::function<void()> show;                  // "show port stats all"
};

// Answers the commands on stdin, prompting "testpmd> " as testpmd does, until "quit", the end of
// input or `stop`. A portlist of the wrong length or naming a port that does not exist is
// ignored (the previous one stays selected).
inline void run_guest_commands(const GuestCommands& commands, const std::atomic<bool>& stop) {
  PortList selected;
  char line[256];
  std::printf("testpmd> ");
  std::fflush(stdout);
  while (!stop.load() && std::fgets(line, sizeof(line), stdin) != nullptr) {
    if (std::strncmp(line, "set portlist ", 13) == 0) {
      PortList ports;
      bool valid = true;
      for (char* p = line + 13; valid;) {
        char* end;
        const unsigned long port = std::strtoul(p, &end, 10);
        valid = end != p && port < RTE_MAX_ETHPORTS && rte_eth_dev_is_valid_port(port) &&
                ports.size() < 8;
        if (valid) ports.push_back(static_cast<uint16_t>(port));
        if (*end != ',') break;
        p = end + 1;
      }
      if (valid && (commands.ports == 0 || ports.size() == commands.ports)) selected = ports;
    } else if (std::strncmp(line, "start", 5) == 0) {
      commands.start(selected);
    } else if (std::strncmp(line, "stop", 4) == 0) {
      commands.stop();
    } else if (std::strncmp(line, "show port stats all", 19) == 0) {
      commands.show();
    } else if (std::strncmp(line, "quit", 4) == 0) {
      break;
    }
    std::printf("testpmd> ");
    std::fflush(stdout);
  }
}

// The rest of a guest's life once its ports are up: `worker` on lcore `worker_lcore`, the
// commands answered until "quit", the end of input or `stop` (which the caller's SIGINT and
// SIGTERM handlers set), then `stop` set for the worker and the worker waited for.
inline void serve_commands(lcore_function_t* worker, void* arg, unsigned worker_lcore,
                           const GuestCommands& commands, std::atomic<bool>& stop) {
  rte_eal_remote_launch(worker, arg, worker_lcore);
  run_guest_commands(commands, stop);
  stop.store(true);
  rte_eal_wait_lcore(worker_lcore);
}

// Seconds between two reports (0 at the first).
class ReportInterval {
 public:
  double next() {
    const uint64_t now = rte_get_tsc_cycles();
    const double seconds =
        last_ == 0 ? 0 : static_cast<double>(now - last_) / static_cast<double>(rte_get_tsc_hz());
    last_ = now;
    return seconds;
  }
  // Events per second over `seconds` (0 when there is no interval yet).
  static unsigned long rate(uint64_t events, double seconds) {
    return seconds > 0 ? static_cast<unsigned long>(static_cast<double>(events) / seconds) : 0UL;
  }

 private:
  uint64_t last_ = 0;
};

// The rates of N running totals between two reports.
template <size_t N>
class CounterRates {
 public:
  std::array<unsigned long, N> next(const std::array<uint64_t, N>& totals) {
    const double seconds = interval_.next();
    std::array<unsigned long, N> rates;
    for (size_t k = 0; k < N; ++k) {
      rates[k] = ReportInterval::rate(totals[k] - last_[k], seconds);
      last_[k] = totals[k];
    }
    return rates;
  }

 private:
  ReportInterval interval_;
  std::array<uint64_t, N> last_{};
};

}  // namespace vqs::bench
