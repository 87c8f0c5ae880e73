// SPDX-License-Identifier: BSD-3-Clause
#include "ring/desc_chain.h"

#include <catch2/catch.hpp>

#include "sim_guest.h"

using namespace vqs;
using vqs::test::SimGuest;
using vqs::test::SimMemory;

namespace {

constexpr uint64_t kIndirect = 1ull << kRingFIndirectDesc;

struct Fixture {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 16, kIndirect};
  IoVecList iov;

  DescChainReader reader(bool indirect = true) {
    return DescChainReader(&guest.desc(0), guest.ring_size(), &mem.table(), indirect);
  }
  uint16_t add(uint64_t addr, uint32_t len, uint16_t flags, uint16_t next = 0) {
    const uint16_t i = guest.alloc_desc();
    guest.desc(i) = VringDesc{addr, len, flags, next};
    return i;
  }
  // An indirect table of `n` entries in guest memory.
  std::pair<uint64_t, VringDesc*> table(uint32_t n) {
    const uint64_t gpa = mem.alloc_ring_memory(16 * n, 16);
    return {gpa, reinterpret_cast<VringDesc*>(mem.host(gpa, 16 * n))};
  }
  ChainError read(uint16_t head, ChainAccess access = ChainAccess::kDeviceReads,
                  bool indirect = true) {
    iov.clear();
    return reader(indirect).read(head, access, iov);
  }
};

}  // namespace

TEST_CASE_METHOD(Fixture, "direct chains: buffers in order, empty descriptors skipped") {
  const uint64_t a = mem.alloc(100), b = mem.alloc(200);
  const uint16_t d2 = add(b, 200, 0);
  const uint16_t d1 = add(a, 0, kVringDescFNext, d2);
  const uint16_t d0 = add(a, 100, kVringDescFNext, d1);
  REQUIRE(read(d0) == ChainError::kNone);
  REQUIRE(iov.count() == 2);
  CHECK(iov[0].base == mem.host(a, 100));
  CHECK(iov[0].len == 100);
  CHECK(iov[1].len == 200);
  CHECK(iov.total_len() == 300);
}

TEST_CASE_METHOD(Fixture, "a buffer crossing regions becomes two host buffers") {
  const uint64_t a = mem.alloc_across_boundary(100, 40);
  const uint16_t d0 = add(a, 100, 0);
  REQUIRE(read(d0) == ChainError::kNone);
  REQUIRE(iov.count() == 2);
  CHECK(iov[0].len == 40);
  CHECK(iov[1].len == 60);
}

TEST_CASE_METHOD(Fixture, "indirect tables") {
  auto [gpa, t] = table(3);
  const uint64_t a = mem.alloc(64);
  for (int i = 0; i < 3; ++i)
    t[i] = VringDesc{a, 10, uint16_t(i < 2 ? kVringDescFNext : 0), uint16_t(i + 1)};
  const uint16_t head = add(gpa, 48, kVringDescFIndirect);
  REQUIRE(read(head) == ChainError::kNone);
  CHECK(iov.count() == 3);
  CHECK(iov.total_len() == 30);

  SECTION("not negotiated") {
    CHECK(read(head, ChainAccess::kDeviceReads, false) == ChainError::kIndirectNotNegotiated);
  }
  SECTION("nested") {
    t[1] = VringDesc{gpa, 48, kVringDescFIndirect, 0};
    CHECK(read(head) == ChainError::kNestedIndirect);
  }
  SECTION("next out of the table") {
    t[2].flags = kVringDescFNext;
    t[2].next = 3;
    CHECK(read(head) == ChainError::kBadIndex);
  }
  SECTION("length not a multiple of 16") {
    guest.desc(head).len = 40;
    CHECK(read(head) == ChainError::kBadIndirectLength);
  }
  SECTION("length zero") {
    guest.desc(head).len = 0;
    CHECK(read(head) == ChainError::kBadIndirectLength);
  }
  SECTION("table outside guest memory") {
    guest.desc(head).addr = 0x10;
    CHECK(read(head) == ChainError::kBadAddress);
  }
  SECTION("table crossing the end of guest memory") {
    guest.desc(head).addr = mem.region_end(2) - 32;
    CHECK(read(head) == ChainError::kBadAddress);
  }
  SECTION("INDIRECT with NEXT") {
    guest.desc(head).flags = kVringDescFIndirect | kVringDescFNext;
    CHECK(read(head) == ChainError::kIndirectWithNext);
  }
  SECTION("an indirect table ends the chain it is reached from") {
    const uint16_t first = add(a, 5, kVringDescFNext, head);
    REQUIRE(read(first) == ChainError::kNone);
    CHECK(iov.total_len() == 35);
  }
}

TEST_CASE_METHOD(Fixture, "loops and over-long chains end as kTooLong") {
  const uint64_t a = mem.alloc(64);
  SECTION("two-descriptor loop") {
    const uint16_t d0 = guest.alloc_desc(), d1 = guest.alloc_desc();
    guest.desc(d0) = VringDesc{a, 1, kVringDescFNext, d1};
    guest.desc(d1) = VringDesc{a, 1, kVringDescFNext, d0};
    CHECK(read(d0) == ChainError::kTooLong);
  }
  SECTION("self loop") {
    const uint16_t d0 = guest.alloc_desc();
    guest.desc(d0) = VringDesc{a, 1, kVringDescFNext, d0};
    CHECK(read(d0) == ChainError::kTooLong);
  }
  SECTION("loop inside an indirect table") {
    auto [gpa, t] = table(2);
    t[0] = VringDesc{a, 1, kVringDescFNext, 1};
    t[1] = VringDesc{a, 1, kVringDescFNext, 0};
    CHECK(read(add(gpa, 32, kVringDescFIndirect)) == ChainError::kTooLong);
  }
  SECTION("indirect table longer than the ring") {
    auto [gpa, t] = table(20);
    for (int i = 0; i < 20; ++i)
      t[i] = VringDesc{a, 1, uint16_t(i < 19 ? kVringDescFNext : 0), uint16_t(i + 1)};
    CHECK(read(add(gpa, 20 * 16, kVringDescFIndirect)) == ChainError::kTooLong);
  }
}

// Found by desc_chain_fuzz (fuzz/regressions/desc_chain_fuzz/too-long-chain-visited-count): the
// count of descriptors read, which bounds a guest RX burst's work, came out one past the chain
// bound (an unsigned budget decremented past zero) when a chain was cut as too long.
TEST_CASE_METHOD(Fixture, "descriptors visited: at most the chain bound, also for a loop") {
  const uint64_t a = mem.alloc(64);
  const uint16_t d0 = guest.alloc_desc();
  guest.desc(d0) = VringDesc{a, 1, kVringDescFNext, d0};
  iov.clear();
  uint32_t visited = 0;
  CHECK(reader().read(d0, ChainAccess::kDeviceReads, iov, &visited) == ChainError::kTooLong);
  CHECK(visited == guest.ring_size());
  const uint16_t d1 = add(a, 8, 0);
  iov.clear();
  CHECK(reader().read(d1, ChainAccess::kDeviceReads, iov, &visited) == ChainError::kNone);
  CHECK(visited == guest.ring_size() + 1u);
}

TEST_CASE_METHOD(Fixture, "hostile addresses, indices and directions") {
  const uint64_t a = mem.alloc(64);
  CHECK(read(16) == ChainError::kBadIndex);
  CHECK(read(0xffff) == ChainError::kBadIndex);
  CHECK(read(add(a, 1, kVringDescFNext, 16)) == ChainError::kBadIndex);
  CHECK(read(add(0, 64, 0)) == ChainError::kBadAddress);
  CHECK(read(add(mem.region_end(0) + 0x100000, 64, 0)) == ChainError::kBadAddress);
  CHECK(read(add(UINT64_MAX - 8, 64, 0)) == ChainError::kBadAddress);
  CHECK(read(add(a, UINT32_MAX, 0)) == ChainError::kBadAddress);
  CHECK(read(add(mem.region_end(1) - 8, 64, 0)) == ChainError::kBadAddress);  // runs into a gap
  CHECK(read(add(a, 8, kVringDescFWrite)) == ChainError::kWrongDirection);
  CHECK(read(add(a, 8, 0), ChainAccess::kDeviceWrites) == ChainError::kWrongDirection);
  const uint16_t w = add(a, 8, kVringDescFWrite);
  CHECK(read(add(a, 8, kVringDescFWrite | kVringDescFNext, w), ChainAccess::kDeviceWrites) ==
        ChainError::kNone);
  // A device-writable descriptor after readable ones is still the wrong direction for TX.
  CHECK(read(add(a, 8, kVringDescFNext, w)) == ChainError::kWrongDirection);
}

TEST_CASE("chains beyond the scatter list's capacity are rejected") {
  SimMemory mem{{1 << 20, 1 << 20, 1 << 20}};
  SimGuest guest{mem, 2048, 0};
  auto build = [&](uint32_t n, uint64_t addr) {
    std::vector<uint16_t> ids;
    for (uint32_t i = 0; i < n; ++i) ids.push_back(guest.alloc_desc());
    for (uint32_t i = 0; i < n; ++i)
      guest.desc(ids[i]) = VringDesc{addr, 2, uint16_t(i + 1 < n ? kVringDescFNext : 0),
                                     i + 1 < n ? ids[i + 1] : uint16_t(0)};
    return ids[0];
  };
  IoVecList iov;
  DescChainReader reader(&guest.desc(0), 2048, &mem.table(), false);
  SECTION("more descriptors than the capacity, in a larger ring") {
    CHECK(reader.read(build(IoVecList::kCapacity + 1, mem.alloc(64)), ChainAccess::kDeviceReads,
                      iov) == ChainError::kTooLong);
  }
  SECTION("fewer descriptors, but each split over two regions") {
    const uint64_t across = mem.alloc_across_boundary(2, 1);
    CHECK(reader.read(build(600, across), ChainAccess::kDeviceReads, iov) ==
          ChainError::kTooManySegments);
  }
  CHECK(chain_error_name(ChainError::kTooManySegments) == std::string("too_many_segments"));
}

TEST_CASE_METHOD(Fixture, "single_buffer takes only a plain one-descriptor chain in one region") {
  const uint64_t a = mem.alloc(256);
  uint32_t len = 0;
  const DescChainReader r = reader();
  CHECK(r.single_buffer(add(a, 256, 0), ChainAccess::kDeviceReads, &len) == mem.host(a, 256));
  CHECK(len == 256);
  CHECK(r.single_buffer(add(a, 256, kVringDescFWrite), ChainAccess::kDeviceWrites, &len) !=
        nullptr);
  // Everything else is left to read(), which has the whole rule set.
  CHECK(r.single_buffer(add(a, 256, kVringDescFWrite), ChainAccess::kDeviceReads, &len) == nullptr);
  CHECK(r.single_buffer(add(a, 256, 0), ChainAccess::kDeviceWrites, &len) == nullptr);
  CHECK(r.single_buffer(add(a, 0, 0), ChainAccess::kDeviceReads, &len) == nullptr);
  CHECK(r.single_buffer(add(a, 16, kVringDescFNext, 0), ChainAccess::kDeviceReads, &len) ==
        nullptr);
  CHECK(r.single_buffer(add(a, 16, kVringDescFIndirect), ChainAccess::kDeviceReads, &len) ==
        nullptr);
  CHECK(r.single_buffer(add(mem.alloc_across_boundary(64, 8), 64, 0), ChainAccess::kDeviceReads,
                        &len) == nullptr);
  CHECK(r.single_buffer(add(mem.region_end(1) - 8, 64, 0), ChainAccess::kDeviceReads, &len) ==
        nullptr);
  CHECK(r.single_buffer(add(UINT64_MAX - 8, 64, 0), ChainAccess::kDeviceReads, &len) == nullptr);
  CHECK(r.single_buffer(16, ChainAccess::kDeviceReads, &len) == nullptr);
}

TEST_CASE("buffer_lines: a line holding only the header is read, the packet's lines written") {
  constexpr uintptr_t kBuf = 0x10000;  // a line boundary
  SECTION("DPDK's virtio: the 12-byte header fills the end of its line") {
    const BufferLines l = buffer_lines(kBuf + 116, 12 + 64, 12);
    CHECK(l.first == kBuf + 64);
    CHECK(l.first_written == kBuf + 128);
    CHECK(l.end == kBuf + 192);
  }
  SECTION("Linux's virtio-net: the header and the packet share the first line") {
    const BufferLines l = buffer_lines(kBuf, 12 + 64, 12);
    CHECK(l.first == kBuf);
    CHECK(l.first_written == kBuf);
    CHECK(l.end == kBuf + 128);
  }
  SECTION("a header across two lines, the packet starting in the second") {
    const BufferLines l = buffer_lines(kBuf + 60, 12 + 64, 12);
    CHECK(l.first == kBuf);
    CHECK(l.first_written == kBuf + 64);
    CHECK(l.end == kBuf + 192);
  }
  SECTION("nothing written: every line is read") {
    const BufferLines l = buffer_lines(kBuf + 10, 100, kBufferNotWritten);
    CHECK(l.first == kBuf);
    CHECK(l.first_written == l.end);
    CHECK(l.end == kBuf + 128);
  }
  SECTION("only the header fits the prefetched bytes") {
    const BufferLines l = buffer_lines(kBuf + 116, 12, 12);
    CHECK(l.first_written == l.end);
    CHECK(l.end == kBuf + 128);
  }
}

TEST_CASE("buffer_lines, guest TX: the header's line is not hinted unless the packet shares it") {
  constexpr uintptr_t kBuf = 0x10000;  // a line boundary
  auto tx_lines = [](uintptr_t start, uint32_t len) {
    return buffer_lines(start, len, kBufferNotWritten, tx_hints_from(len, 12));
  };
  SECTION("DPDK's virtio: the header ends its line, the lines before it are the guest's mbuf") {
    const BufferLines l = tx_lines(kBuf + 116, 12 + 64);
    CHECK(l.first == kBuf + 128);
    CHECK(l.end == kBuf + 192);
    CHECK(l.first_written == l.end);
  }
  SECTION("Linux's virtio-net: the header and the packet share the first line") {
    const BufferLines l = tx_lines(kBuf, 12 + 64);
    CHECK(l.first == kBuf);
    CHECK(l.end == kBuf + 128);
  }
  SECTION("a header across two lines: from the packet's first line") {
    const BufferLines l = tx_lines(kBuf + 60, 12 + 64);
    CHECK(l.first == kBuf + 64);
    CHECK(l.end == kBuf + 192);
  }
  SECTION("a buffer holding the header alone is hinted whole") {
    CHECK(tx_hints_from(12, 12) == 0);
    const BufferLines l = tx_lines(kBuf + 116, 12);
    CHECK(l.first == kBuf + 64);
    CHECK(l.end == kBuf + 128);
  }
}
