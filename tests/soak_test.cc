// SPDX-License-Identifier: BSD-3-Clause
// Soak: a second thread writes random bytes over descriptors, avail entries and index and buffers
// while the device serves 10^6 bursts each way, zero-copy on and off. Checked: no crash or access
// outside guest memory (ASan), broken queues set up again, the pool full once lent chains are
// reaped. See docs/security.md, "Tests".
#include <rte_mbuf.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "datapath/zero_copy_tracker.h"
#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

constexpr uint16_t kRing = 64;
constexpr int kBursts = 1000000;

// Random rewrites of a queue's rings and of the buffer memory, until stopped. Plain stores, as a
// guest's are: the device copies each value once before it checks and uses it.
std::atomic<uint64_t> mutations{0};

void mutate(SimGuest& tx, SimGuest& rx, uint8_t* buffers, uint64_t buffer_bytes,
            const std::atomic<bool>& stop) {
  std::mt19937_64 rng(42);
  SimGuest* guests[2] = {&tx, &rx};
  const uint64_t buffer_gpa = tx.memory().region_start(0);
  while (!stop.load(std::memory_order_relaxed)) {
    ++mutations;
    // A guest's pace, not a spinning thread's: between rounds of rewrites the device reads
    // lines that stay put, as it does most of the time with a real guest.
    if (mutations % 32 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    SimGuest& g = *guests[rng() & 1];
    const VirtQueue::Setup s = g.setup();
    const uint64_t r = rng();
    switch (r % 6) {
      case 0: {  // a descriptor: mostly inside the buffers, sometimes anything
        VringDesc d;
        d.addr = (r >> 8) % 8 == 0 ? rng() : buffer_gpa + rng() % buffer_bytes;
        d.len = static_cast<uint32_t>((r >> 16) % 8 == 0 ? rng() : rng() % 4096);
        d.flags = static_cast<uint16_t>(rng() & 0x7);
        d.next = static_cast<uint16_t>(rng() % (kRing + 2));
        std::memcpy(&s.addrs.desc[rng() % kRing], &d, sizeof(d));
        break;
      }
      case 1:  // an avail entry
        __atomic_store_n(&s.addrs.avail->ring[rng() % kRing],
                         static_cast<uint16_t>(rng() % (kRing + 2)), __ATOMIC_RELAXED);
        break;
      case 2:
      case 3:
      case 4: {  // the avail index: moves ahead within the ring (as a guest posts), rarely anything
        const uint16_t used = __atomic_load_n(&s.addrs.used->idx, __ATOMIC_ACQUIRE);
        const uint16_t cur = __atomic_load_n(&s.addrs.avail->idx, __ATOMIC_RELAXED);
        const auto room = static_cast<uint16_t>(used + kRing - cur);
        uint16_t idx;
        if ((r >> 8) % 4096 == 0)
          idx = static_cast<uint16_t>(rng());  // corrupt: the device stops serving the ring
        else if (room > kRing)
          idx = static_cast<uint16_t>(used + rng() % (kRing + 1));  // after a corrupt one
        else
          idx = static_cast<uint16_t>(cur + rng() % (room + 1u));
        __atomic_store_n(&s.addrs.avail->idx, idx, __ATOMIC_RELEASE);
        break;
      }
      default: {  // buffer bytes: headers and packets
        const uint64_t at = rng() % (buffer_bytes - 8);
        const uint64_t v = rng();
        std::memcpy(buffers + at, &v, sizeof(v));
        break;
      }
    }
  }
}

// A queue the guest broke (avail index beyond the ring) or left: set up again from where the
// guest's indices stand, as after a device reset.
int restarts = 0;

void restart_if_broken(VirtQueue& q, SimGuest& g, ZeroCopyTracker* zero_copy) {
  if (q.ready()) return;
  ++restarts;
  q.stop();
  VirtQueue::Setup s = g.setup();
  s.last_avail_idx = s.last_used_idx = __atomic_load_n(&s.addrs.used->idx, __ATOMIC_RELAXED);
  // Lent chains of the old session go back to no ring.
  if (zero_copy != nullptr) zero_copy->orphan_lent();
  if (!q.start(s)) FAIL("restart failed");
}

}  // namespace

TEST_CASE("soak: a guest rewriting its rings during 10^6 bursts each way", "[split]") {
  for (const bool zero_copy : {false, true}) {
    INFO("zero-copy " << zero_copy);
    rte_mempool* pool = small_pool(2047);
    {
      Device dev(
          kModernFeatures | bit(kNetFMrgRxbuf) | bit(kRingFIndirectDesc) | bit(kRingFEventIdx),
          kRing);
      ZeroCopyTracker tracker;
      ZeroCopyTracker* zc = zero_copy ? &tracker : nullptr;
      const LendPolicy lending{zc, 256, true};
      if (zc != nullptr) tracker.start(kRing);
      const uint64_t buffer_bytes = 64 << 10;
      uint8_t* buffers = dev.mem.host(dev.mem.region_start(0), buffer_bytes);
      std::atomic<bool> stop{false};
      std::thread guest(mutate, std::ref(dev.tx), std::ref(dev.rx), buffers, buffer_bytes,
                        std::cref(stop));
      std::mt19937 rng(7);
      std::vector<rte_mbuf*> held;
      rte_mbuf* pkts[32];
      uint64_t moved = 0;
      // Bursts that took at least one chain from the guest: an idle burst is nothing to soak.
      int bursts = 0;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (bursts < kBursts && std::chrono::steady_clock::now() < deadline) {
        restart_if_broken(dev.txq, dev.tx, zc);
        restart_if_broken(dev.rxq, dev.rx, nullptr);
        const uint16_t avail_before = dev.txq.ring().last_avail_idx();
        const BurstResult got = dequeue_burst(dev.txq, pool, pkts, 4, 1u << 20, lending);
        if (dev.txq.ring().last_avail_idx() != avail_before) ++bursts;
        held.insert(held.end(), pkts, pkts + got.packets);
        moved += got.packets;
        if (!held.empty()) {
          // Some go to the guest's RX ring, some are freed out of order (lent chains complete
          // in any order), the rest wait.
          const uint16_t n = static_cast<uint16_t>(std::min<size_t>(held.size(), rng() % 33));
          const BurstResult sent = enqueue_burst(dev.rxq, held.data(), n);
          rte_pktmbuf_free_bulk(held.data(), sent.packets);
          held.erase(held.begin(), held.begin() + sent.packets);
          if (!held.empty() && rng() % 2 == 0) {
            const size_t k = rng() % held.size();
            rte_pktmbuf_free(held[k]);
            held.erase(held.begin() + static_cast<ptrdiff_t>(k));
          }
          if (held.size() > 512) {
            rte_pktmbuf_free_bulk(held.data(), static_cast<unsigned>(held.size()));
            held.clear();
          }
        }
      }
      stop = true;
      guest.join();
      for (rte_mbuf* m : held) rte_pktmbuf_free(m);
      dev.txq.stop();
      dev.rxq.stop();
      tracker.reap_orphans_only();
      CHECK(tracker.in_flight() == 0);
      const QueueStats& st = dev.txq.stats();
      INFO("bursts " << bursts << ", packets dequeued " << moved << ", dropped " << st.total_drops()
                     << ", restarts " << restarts << ", mutations " << mutations.load());
      CHECK(bursts == kBursts);
      CHECK(moved > 0);
    }
    CHECK(rte_mempool_avail_count(pool) == pool->size);
    rte_mempool_free(pool);
  }
}
