// SPDX-License-Identifier: BSD-3-Clause
// What one busy CPU costs the other on this machine, second by second: a diagnostic for reading
// the benchmarks (two pollers, host and guest, always share the machine's two CPUs).
//
//   build/scripts/bench/vqs-cpu-share [SECONDS]
//
// Each second: the rate of a compute loop on CPU 0 while CPU 1 sleeps, then while CPU 1 runs the
// same loop (their ratio: 1.0 when the two CPUs do not share execution resources, 0.5 when they
// take turns on one), then the one-way latency of a cache line passed between them.
//
//   build/scripts/bench/vqs-cpu-share --bounce
//
// Only the line's one-way latency, once, in ~1 ms (a few ms when lines cross slowly): what
// pvp_interleaved.sh --cpu-state samples during its periods, with both testpmds frozen.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { kIdle, kBusy, kPingPong, kStop };
std::atomic<Phase> g_phase{Phase::kIdle};
alignas(64) std::atomic<uint32_t> g_ball{0};

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Iterations of a fixed compute block in `ms` milliseconds.
uint64_t compute_rate(int ms) {
  volatile uint64_t x = 0;
  uint64_t blocks = 0;
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < end) {
    for (int i = 0; i < 1000; ++i) x = x * 3 + 1;
    ++blocks;
  }
  return blocks;
}

// CPU 1: as the phase says.
void partner() {
  pin(1);
  volatile uint64_t x = 0;
  while (true) {
    const Phase phase = g_phase.load();
    if (phase == Phase::kStop) return;
    if (phase == Phase::kBusy) {
      for (int i = 0; i < 1000; ++i) x = x * 3 + 1;
    } else if (phase == Phase::kPingPong) {
      const uint32_t v = g_ball.load();
      if (v & 1) g_ball.store(v + 1);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// One-way latency of the ball's line between CPU 0 and CPU 1, in ns (CPU 1 in kPingPong).
double bounce_ns(int rounds) {
  const auto start = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    const uint32_t v = g_ball.load();
    g_ball.store(v + 1);
    while (g_ball.load() == v + 1) {
    }
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / rounds / 2;
}

// --bounce: CPU 1 only answers; the first rounds wait for it to be scheduled and are not timed.
int bounce_once() {
  g_phase = Phase::kPingPong;
  std::thread other(partner);
  pin(0);
  bounce_ns(200);
  const double ns = bounce_ns(2000);
  g_phase = Phase::kStop;
  other.join();
  std::printf("%.0f\n", ns);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--bounce") return bounce_once();
  const int seconds = argc > 1 ? std::atoi(argv[1]) : 30;
  std::thread other(partner);
  pin(0);
  for (int s = 0; s < seconds; ++s) {
    g_phase = Phase::kIdle;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t alone = compute_rate(200);
    g_phase = Phase::kBusy;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const uint64_t beside = compute_rate(200);
    g_phase = Phase::kPingPong;
    const double ns = bounce_ns(20000);
    std::printf("%3d  compute beside a busy CPU 1: %.2f of alone  line bounce %.0f ns\n", s,
                static_cast<double>(beside) / static_cast<double>(alone), ns);
    std::fflush(stdout);
  }
  g_phase = Phase::kStop;
  other.join();
  return 0;
}
