// SPDX-License-Identifier: BSD-3-Clause
// Shared set-up for datapath tests: an mbuf pool and a device with one guest TX and one guest RX
// queue, both served by our datapath.
#pragma once

#include <rte_mbuf.h>

#include <catch2/catch.hpp>
#include <vector>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "sim_guest.h"

namespace vqs::test {

constexpr uint64_t bit(unsigned b) { return 1ull << b; }
constexpr uint64_t kModernFeatures = bit(kFVersion1);
constexpr uint32_t kNoByteLimit = UINT32_MAX;

// One pool per process (EAL is up for the whole run): 2 KiB data room, so large packets chain.
rte_mempool* test_pool();
// A pool of `size` mbufs for exhaustion tests.
rte_mempool* small_pool(unsigned size);

// The ring format the datapath tests run on: VIRTIO_F_RING_PACKED when VQS_TEST_RING=packed
// (meson runs the suite once per format; tests of split-ring layouts are tagged [split]), else 0.
uint64_t test_ring_format();

struct Device {
  explicit Device(uint64_t features, uint16_t ring_size = 256, uint16_t start_idx = 0,
                  const std::vector<uint64_t>& region_sizes = {32 << 20, 32 << 20, 8 << 20})
      : mem(region_sizes),
        tx(mem, ring_size, features | test_ring_format()),
        rx(mem, ring_size, features | test_ring_format()) {
    tx.start_at(start_idx);
    rx.start_at(start_idx);
    REQUIRE(txq.start(tx.setup()));
    REQUIRE(rxq.start(rx.setup()));
  }
  ~Device() { free_all(); }

  // Guest TX -> mbufs.
  std::vector<rte_mbuf*> dequeue(uint16_t max = 256, uint32_t max_bytes = kNoByteLimit,
                                 rte_mempool* pool = test_pool()) {
    std::vector<rte_mbuf*> pkts(max);
    const BurstResult r = dequeue_burst(txq, pool, pkts.data(), max, max_bytes, lending);
    last_dequeue = r;
    pkts.resize(r.packets);
    held.insert(held.end(), pkts.begin(), pkts.end());
    return pkts;
  }
  // mbufs -> guest RX; frees what was consumed, returns how many were.
  uint16_t enqueue(const std::vector<rte_mbuf*>& pkts) {
    const BurstResult r = enqueue_burst(rxq, pkts.data(), static_cast<uint16_t>(pkts.size()));
    for (uint16_t i = 0; i < r.packets; ++i) release(pkts[i]);
    return r.packets;
  }
  void release(rte_mbuf* m) {
    for (auto& h : held)
      if (h == m) h = nullptr;
    rte_pktmbuf_free(m);
  }
  void free_all() {
    for (rte_mbuf* m : held) rte_pktmbuf_free(m);
    held.clear();
  }

  SimMemory mem;
  SimGuest tx;
  SimGuest rx;
  VirtQueue txq;
  VirtQueue rxq;
  LendPolicy lending;           // how dequeue() lends (copies all by default)
  std::vector<rte_mbuf*> held;  // mbufs the test has not handed back yet
  BurstResult last_dequeue;     // what the last dequeue() returned
};

// The packet's bytes, across segments.
std::vector<uint8_t> mbuf_bytes(const rte_mbuf* m);
// A single- or multi-segment mbuf holding `data`.
rte_mbuf* make_mbuf(const std::vector<uint8_t>& data, rte_mempool* pool = test_pool());
// `n` packets of `size` bytes (make_frame patterns, seeds 0..n-1).
std::vector<rte_mbuf*> make_packets(int n, uint32_t size = 100);
// Frees pkts[from..]: what an enqueue did not consume.
void free_packets(const std::vector<rte_mbuf*>& pkts, size_t from);

}  // namespace vqs::test
