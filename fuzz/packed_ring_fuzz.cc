// SPDX-License-Identifier: BSD-3-Clause
// Packed virtqueues from the device's side over a descriptor ring of the fuzzer's bytes, which the
// "driver" keeps rewriting between steps: chains found available are read in either direction,
// consumed and marked used, notifications decided both ways. Invariants: every buffer handed out
// lies inside one guest region; no chain takes more descriptors than its bound nor fewer than
// one; positions stay inside the ring; the device writes only the descriptor ring and its own
// event area (each flush against a guard page).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "guarded_memory.h"
#include "ring/packed_batch.h"
#include "ring/packed_ring.h"

using namespace vqs;
using vqs::fuzz::GuardedMemory;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint16_t ring_size = in.ConsumeIntegralInRange<uint16_t>(1, 1024);  // any size
  const bool indirect = in.ConsumeBool();
  const bool event_idx = in.ConsumeBool();
  const bool in_order = in.ConsumeBool();
  const uint16_t avail_base = in.ConsumeIntegral<uint16_t>();
  const uint16_t used_base = in.ConsumeIntegral<uint16_t>();
  // Region 0: the descriptor ring, flush against its end. Region 1: buffers and indirect tables.
  // Region 2: the two event areas, ours flush against the end.
  static GuardedMemory memory({16 << 10, 16 << 10, 4 << 10});
  const uint64_t ring_bytes = 16ull * ring_size;
  uint8_t* ring = memory.tail(0, ring_bytes);
  std::memset(ring, 0, ring_bytes);
  const std::vector<uint8_t> ring_init = in.ConsumeBytes<uint8_t>(ring_bytes);
  if (!ring_init.empty()) std::memcpy(ring, ring_init.data(), ring_init.size());
  fuzz::relocate_packed(ring, ring_size, memory, 1);
  std::memset(memory.host(1), 0, memory.size(1));
  const std::vector<uint8_t> extra =
      in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 4096));
  if (!extra.empty()) std::memcpy(memory.host(1), extra.data(), extra.size());
  auto* events = reinterpret_cast<VringPackedEvent*>(memory.tail(2, 2 * sizeof(VringPackedEvent)));
  events[0] = {in.ConsumeIntegral<uint16_t>(), in.ConsumeIntegral<uint16_t>()};  // the driver's
  events[1] = {};

  PackedRing device;
  const PackedRingAddrs addrs{reinterpret_cast<VringPackedDesc*>(ring), &events[0], &events[1],
                              ring_size};
  if (!device.attach(addrs, avail_base, used_base, event_idx, in_order)) {
    VQS_FUZZ_CHECK((avail_base & 0x7fff) >= ring_size || (used_base & 0x7fff) >= ring_size);
    return 0;
  }
  static PackedBatch batch;
  batch.bind(&memory.table(), indirect);
  const uint32_t bound = ring_size < IoVecList::kCapacity ? ring_size : IoVecList::kCapacity;
  static IoVecList iov;
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    switch (in.ConsumeIntegralInRange(0, 4)) {
      case 0:
      case 1: {  // a burst: copy up to n chains, read them, take some, mark them used
        batch.begin(device);
        const uint16_t n = batch.fill(in.ConsumeIntegralInRange<uint16_t>(1, 300));
        VQS_FUZZ_CHECK(n <= PackedBatch::kMaxChains && batch.slots(n) <= ring_size);
        const ChainAccess access =
            in.ConsumeBool() ? ChainAccess::kDeviceWrites : ChainAccess::kDeviceReads;
        for (uint16_t i = 0; i < n; ++i) {
          const PackedBatch::Chain& chain = batch.chain(i);
          VQS_FUZZ_CHECK(chain.descs >= 1 && chain.descs <= ring_size);
          VQS_FUZZ_CHECK(chain.copied <= chain.descs && chain.copied <= bound);
          iov.clear();
          uint32_t visited = 0;
          batch.read(i, access, iov, &visited);
          VQS_FUZZ_CHECK(visited <= bound);
          for (uint32_t k = 0; k < iov.count(); ++k)
            VQS_FUZZ_CHECK(iov[k].len > 0 && memory.contains(iov[k].base, iov[k].len));
          uint32_t len = 0;
          if (uint8_t* single = batch.single_buffer(i, access, &len))
            VQS_FUZZ_CHECK(len > 0 && memory.contains(single, len));
        }
        const uint16_t taken = n == 0 ? 0 : in.ConsumeIntegralInRange<uint16_t>(0, n);
        device.consume(batch.slots(taken));
        for (uint16_t i = 0; i < taken; ++i)
          device.put_used(batch.chain(i).id, in.ConsumeIntegral<uint32_t>(), batch.chain(i).descs);
        VQS_FUZZ_CHECK(device.count_available(ring_size) <= ring_size);
        break;
      }
      case 2:
        device.publish_used();
        device.guest_wants_interrupt();
        break;
      case 3:
        device.set_kicks_enabled(in.ConsumeBool());
        break;
      case 4: {  // the driver rewrites a descriptor (flags, chaining, address) or its event area
        const uint16_t slot = in.ConsumeIntegralInRange<uint16_t>(0, ring_size - 1);
        const std::vector<uint8_t> bytes = in.ConsumeBytes<uint8_t>(16);
        if (!bytes.empty()) std::memcpy(ring + 16ull * slot, bytes.data(), bytes.size());
        fuzz::relocate_packed(ring + 16ull * slot, 1, memory, 1);
        events[0].flags = in.ConsumeIntegral<uint16_t>();
        events[0].off_wrap = in.ConsumeIntegral<uint16_t>();
        break;
      }
    }
    VQS_FUZZ_CHECK(device.next_avail().slot < ring_size && device.next_used().slot < ring_size);
  }
  device.publish_used();
  return 0;
}
