// SPDX-License-Identifier: BSD-3-Clause
// Descriptor chains over guest memory: a table and indirect tables of the fuzzer's bytes, read in
// both directions. Invariants: every buffer handed out lies inside one guest region, no more
// descriptors are visited than the chain bound, and the single-buffer fast path never accepts a
// chain the full reader would refuse.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "guarded_memory.h"
#include "ring/desc_chain.h"

using namespace vqs;
using vqs::fuzz::GuardedMemory;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const uint16_t ring_size = static_cast<uint16_t>(1u << in.ConsumeIntegralInRange(1, 10));
  const bool indirect = in.ConsumeBool();
  // The chains to read come first, so that the memory contents below cannot leave none.
  struct Read {
    uint16_t head;
    ChainAccess access;
  };
  std::vector<Read> reads;
  for (int i = in.ConsumeIntegralInRange(1, 4); i > 0; --i)
    reads.push_back({in.ConsumeIntegral<uint16_t>(),
                     in.ConsumeBool() ? ChainAccess::kDeviceWrites : ChainAccess::kDeviceReads});
  // Region 0: the descriptor table, flush against its end; regions 1-2 touch nothing else and
  // hold what indirect descriptors and buffers point at (the fuzzer's bytes too).
  static GuardedMemory memory({64 << 10, 16 << 10, 16 << 10});
  const uint64_t table_bytes = 16ull * ring_size;
  uint8_t* table = memory.tail(0, table_bytes);
  std::memset(table, 0, table_bytes);
  const std::vector<uint8_t> desc_bytes = in.ConsumeBytes<uint8_t>(table_bytes);
  if (!desc_bytes.empty()) std::memcpy(table, desc_bytes.data(), desc_bytes.size());
  fuzz::relocate_descs(table, ring_size, memory, 1);
  std::memset(memory.host(1), 0, memory.size(1));
  const std::vector<uint8_t> extra = in.ConsumeBytes<uint8_t>(memory.size(1));
  if (!extra.empty()) std::memcpy(memory.host(1), extra.data(), extra.size());

  const DescChainReader reader(reinterpret_cast<const VringDesc*>(table), ring_size,
                               &memory.table(), indirect);
  const uint32_t bound = ring_size < IoVecList::kCapacity ? ring_size : IoVecList::kCapacity;
  static IoVecList iov;
  for (const auto& [head, access] : reads) {
    iov.clear();
    uint32_t visited = 0;
    const ChainError error = reader.read(head, access, iov, &visited);
    VQS_FUZZ_CHECK(visited <= bound);
    for (uint32_t k = 0; k < iov.count(); ++k)
      VQS_FUZZ_CHECK(iov[k].len > 0 && memory.contains(iov[k].base, iov[k].len));
    uint32_t single_len = 0;
    const uint8_t* single = reader.single_buffer(head, access, &single_len);
    if (single != nullptr) {
      VQS_FUZZ_CHECK(memory.contains(single, single_len));
      VQS_FUZZ_CHECK(error == ChainError::kNone && iov.count() == 1 && iov[0].base == single &&
                     iov[0].len == single_len);
    }
    // Read once for a burst's hints, the first buffer gives single_buffer()'s answer.
    const FirstBuffer first = reader.first_buffer(head);
    uint32_t first_len = 0;
    VQS_FUZZ_CHECK(DescChainReader::single_buffer(first, access, &first_len) == single);
    if (single != nullptr) VQS_FUZZ_CHECK(first_len == single_len);
    if (first.host != nullptr) VQS_FUZZ_CHECK(memory.contains(first.host, first.desc.len));
    hint_tx_buffer(memory.table(), first.desc.addr, first.desc.len, first.host, 12, 256);
    hint_rx_buffer(memory.table(), first.desc.addr, first.desc.len, first.host, 256, 12);
  }
  return 0;
}
