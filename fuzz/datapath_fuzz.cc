// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer harness: the datapath under a hostile guest owning both rings (split or packed),
// buffers, ring size, features, zero-copy and the order of bursts, completions and memory
// rewrites. Checks beyond no crash: a dequeue burst writes at most a ring of used entries; only
// enqueue writes buffers (and, split, descriptors or avail rings); the pool ends full. See
// docs/security.md, "Fuzzing".
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "datapath/dequeue.h"
#include "datapath/enqueue.h"
#include "datapath/net_offload.h"
#include "datapath/zero_copy_tracker.h"
#include "guarded_memory.h"
#include "queue_teardown.h"
#include "ring/virtqueue.h"

using namespace vqs;
using vqs::fuzz::GuardedMemory;
using vqs::fuzz::place_rings;
using vqs::fuzz::Rings;

namespace {

rte_mempool* pool = nullptr;
constexpr unsigned kPoolSize = 8191;

constexpr uint64_t kBufferBytes = 32 << 10;
constexpr uint64_t kRingRegionBytes = 64 << 10;  // the largest ring (1024) takes 28 KiB

void fill(FuzzedDataProvider& in, uint8_t* p, uint64_t len) {
  const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(len);
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string prefix = "--file-prefix=vqs-fuzz-" + std::to_string(getpid());
  const char* args[] = {"datapath_fuzz", "--no-huge",     "--no-shconf", "--no-pci", "-m",
                        "256",           "--log-level=0", prefix.c_str()};
  if (rte_eal_init(static_cast<int>(std::size(args)), const_cast<char**>(args)) < 0) std::abort();
  pool = rte_pktmbuf_pool_create("fuzz", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (pool == nullptr) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint16_t n = static_cast<uint16_t>(1u << in.ConsumeIntegralInRange(1, 10));
  const uint16_t feature_bits = in.ConsumeIntegral<uint16_t>();
  const unsigned kFeatureList[] = {
      kFVersion1,     kNetFMrgRxbuf,  kRingFIndirectDesc, kRingFEventIdx, kFInOrder,    kNetFCsum,
      kNetFGuestCsum, kNetFGuestTso4, kNetFGuestTso6,     kNetFHostTso4,  kNetFHostTso6};
  uint64_t features = 0;
  for (size_t i = 0; i < std::size(kFeatureList); ++i)
    if (feature_bits & (1u << i)) features |= 1ull << kFeatureList[i];
  // The feature word's next bit: packed rings (descriptor ring and driver event area from the
  // input, our event area flush against a guard page).
  const bool packed = feature_bits & (1u << std::size(kFeatureList));
  if (packed) features |= 1ull << kFRingPacked;
  const bool zero_copy = in.ConsumeBool();
  const uint32_t zero_copy_min_len = in.ConsumeIntegralInRange<uint32_t>(64, 2048);
  const uint16_t start_idx = in.ConsumeIntegral<uint16_t>();
  // The operations' own bytes, taken before the memory contents can use them all up.
  const std::vector<uint8_t> script =
      in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 512));
  FuzzedDataProvider ops(script.data(), script.size());

  static GuardedMemory memory({kRingRegionBytes, kRingRegionBytes, kBufferBytes});
  const Rings tx = place_rings(memory, 0, n);
  const Rings rx = place_rings(memory, 1, n);
  // Cleared where this input's rings lie (the rest of their regions is never read), and the
  // buffers.
  for (const Rings& r : {tx, rx}) {
    std::memset(r.desc, 0, r.desc_avail_bytes);
    std::memset(r.used, 0, 6 + 8ull * n);
  }
  std::memset(memory.host(2), 0, memory.size(2));
  fill(in, reinterpret_cast<uint8_t*>(tx.desc), tx.desc_avail_bytes);
  fill(in, reinterpret_cast<uint8_t*>(rx.desc), rx.desc_avail_bytes);
  // Packed: the descriptor ring where the split one is, the driver's event area after it (in
  // what the input filled), ours flush against the region's end.
  auto packed_addrs = [n](const Rings& r, size_t region) {
    auto* events = reinterpret_cast<VringPackedEvent*>(r.avail);
    auto* ours = reinterpret_cast<VringPackedEvent*>(memory.tail(region, 4));
    *ours = {};
    return PackedRingAddrs{reinterpret_cast<VringPackedDesc*>(r.desc), events, ours, n};
  };
  if (packed) {
    fuzz::relocate_packed(reinterpret_cast<uint8_t*>(tx.desc), n, memory, 2);
    fuzz::relocate_packed(reinterpret_cast<uint8_t*>(rx.desc), n, memory, 2);
  } else {
    fuzz::relocate_descs(reinterpret_cast<uint8_t*>(tx.desc), n, memory, 2);
    fuzz::relocate_descs(reinterpret_cast<uint8_t*>(rx.desc), n, memory, 2);
  }
  tx.used->idx = rx.used->idx = start_idx;
  fill(in, memory.host(2), in.ConsumeIntegralInRange<uint64_t>(0, 4096));

  ZeroCopyTracker tracker;
  tracker.start(n);
  VirtQueue txq, rxq;
  VirtQueue::Setup setup;
  setup.features = features;
  setup.memory = &memory.table();
  setup.addrs = SplitRingAddrs{tx.desc, tx.avail, tx.used, n};
  setup.packed_addrs = packed_addrs(tx, 0);
  // Packed: a slot inside the ring and a wrap counter.
  const uint16_t base =
      packed ? static_cast<uint16_t>((start_idx & 0x7fff) % n | (start_idx & 0x8000)) : start_idx;
  setup.last_avail_idx = setup.last_used_idx = base;
  LendPolicy lending;  // copies all unless zero_copy
  if (zero_copy) {
    lending.tracker = &tracker;
    lending.min_len = zero_copy_min_len;
  }
  if (!txq.start(setup)) std::abort();
  setup.addrs = SplitRingAddrs{rx.desc, rx.avail, rx.used, n};
  setup.packed_addrs = packed_addrs(rx, 1);
  if (!rxq.start(setup)) std::abort();

  // What only the guest and enqueue may write: buffers, and split descriptor tables and avail
  // rings (a packed ring's descriptors take used entries in place). Kept as a snapshot (static:
  // no allocation per input) and compared after every operation.
  const std::pair<const uint8_t*, uint64_t> guest_side[] = {
      {memory.host(2), memory.size(2)},
      {reinterpret_cast<const uint8_t*>(tx.desc), packed ? 0 : tx.desc_avail_bytes},
      {reinterpret_cast<const uint8_t*>(rx.desc), packed ? 0 : rx.desc_avail_bytes}};
  static std::vector<uint8_t> snapshot(kBufferBytes + 2 * kRingRegionBytes);
  auto take_snapshot = [&] {
    uint8_t* to = snapshot.data();
    for (const auto& [from, len] : guest_side)
      to = static_cast<uint8_t*>(std::memcpy(to, from, len)) + len;
  };
  auto snapshot_matches = [&] {
    const uint8_t* was = snapshot.data();
    for (const auto& [now, len] : guest_side) {
      if (std::memcmp(was, now, len) != 0) return false;
      was += len;
    }
    return true;
  };
  take_snapshot();
  std::vector<rte_mbuf*> held;
  rte_mbuf* burst[1024];
  for (int op = 0; op < 24 && ops.remaining_bytes() > 0; ++op) {
    switch (ops.ConsumeIntegralInRange(0, 5)) {
      case 0: {  // guest TX burst
        const uint16_t max = ops.ConsumeIntegralInRange<uint16_t>(1, 1024);
        const uint32_t max_bytes = ops.ConsumeIntegralInRange<uint32_t>(1, 1u << 20);
        const uint16_t used_before = tx.used->idx;
        const BurstResult r = dequeue_burst(txq, pool, burst, max, max_bytes, lending);
        if (!packed) VQS_FUZZ_CHECK(static_cast<uint16_t>(tx.used->idx - used_before) <= n);
        if (packed) VQS_FUZZ_CHECK(txq.packed_ring().next_used().slot < n);
        VQS_FUZZ_CHECK(r.packets <= max);
        held.insert(held.end(), burst, burst + r.packets);
        break;
      }
      case 1: {  // a consumer frees one packet: lent chains complete in any order
        if (held.empty()) break;
        const size_t i = ops.ConsumeIntegralInRange<size_t>(0, held.size() - 1);
        rte_pktmbuf_free(held[i]);
        held.erase(held.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
      case 2: {  // forwarding step, then software checksums where nothing else would do them
        if (held.empty()) break;
        rte_mbuf* m = held[ops.ConsumeIntegralInRange<size_t>(0, held.size() - 1)];
        rx_offload_to_tx_request(m);
        if (RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1 &&
            !(m->ol_flags & (RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_UDP_SEG)))
          (void)complete_tx_checksum(m);
        break;
      }
      case 3: {  // guest RX burst of held packets (consumed ones are freed)
        if (held.empty()) break;
        const uint16_t count = static_cast<uint16_t>(
            ops.ConsumeIntegralInRange<size_t>(1, std::min<size_t>(held.size(), 256)));
        for (uint16_t i = 0; i < count; ++i) rx_offload_to_tx_request(held[i]);
        const BurstResult r = enqueue_burst(rxq, held.data(), count);
        VQS_FUZZ_CHECK(r.packets <= count);
        rte_pktmbuf_free_bulk(held.data(), r.packets);
        held.erase(held.begin(), held.begin() + r.packets);
        take_snapshot();
        break;
      }
      case 4: {  // the guest rewrites part of its memory, as it may at any time
        const size_t region = ops.ConsumeIntegralInRange<size_t>(0, 2);
        const uint64_t len =
            std::min<uint64_t>(ops.ConsumeIntegralInRange<uint64_t>(1, 512), memory.size(region));
        const uint64_t at = ops.ConsumeIntegralInRange<uint64_t>(0, memory.size(region) - len);
        fill(in, memory.host(region) + at, len);
        take_snapshot();
        break;
      }
      case 5: {  // the guest posts more: avail index moves (any value: a corrupt one included)
        if (packed) {  // or descriptors made available, in the lap of either wrap counter
          auto* ring = reinterpret_cast<VringPackedDesc*>((ops.ConsumeBool() ? tx : rx).desc);
          const uint16_t from = ops.ConsumeIntegralInRange<uint16_t>(0, n - 1);
          const uint16_t count = ops.ConsumeIntegralInRange<uint16_t>(1, n);
          const bool wrap = ops.ConsumeBool();
          for (uint16_t k = 0; k < count; ++k) {
            VringPackedDesc& d = ring[(from + k) % n];
            d.flags = static_cast<uint16_t>(
                (d.flags & ~(kVringPackedDescFAvail | kVringPackedDescFUsed)) |
                (wrap ? kVringPackedDescFAvail : kVringPackedDescFUsed));
          }
          take_snapshot();
          break;
        }
        const uint16_t idx = ops.ConsumeIntegral<uint16_t>();
        (ops.ConsumeBool() ? tx : rx).avail->idx = idx;
        take_snapshot();
        break;
      }
    }
    VQS_FUZZ_CHECK(snapshot_matches());
  }
  for (rte_mbuf* m : held) rte_pktmbuf_free(m);
  fuzz::stop_and_reap(txq, rxq, tracker);
  VQS_FUZZ_CHECK(rte_mempool_avail_count(pool) == kPoolSize);
  return 0;
}
