// SPDX-License-Identifier: BSD-3-Clause
#include "ring/guest_memory.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

using vqs::GuestMemory;
using vqs::IoVecList;

TEST_CASE("add_region rejects empty, wrapping, overlapping regions and a full table") {
  std::vector<uint8_t> host(4096);
  GuestMemory mem;
  CHECK_FALSE(mem.add_region(0x1000, 0, host.data()));
  CHECK_FALSE(mem.add_region(UINT64_MAX - 10, 100, host.data()));
  CHECK_FALSE(mem.add_region(0, 1, nullptr));
  REQUIRE(mem.add_region(0x1000, 0x1000, host.data()));
  CHECK_FALSE(mem.add_region(0x1fff, 0x10, host.data()));    // overlaps the end
  CHECK_FALSE(mem.add_region(0x0800, 0x1000, host.data()));  // overlaps the start
  CHECK(mem.add_region(0x2000, 0x1000, host.data()));        // touches: fine
  for (uint32_t i = 2; i < GuestMemory::kMaxRegions; ++i)
    REQUIRE(mem.add_region(0x100000 * (i + 1), 0x1000, host.data()));
  CHECK_FALSE(mem.add_region(0x9000000, 0x1000, host.data()));
  CHECK(mem.region_count() == GuestMemory::kMaxRegions);
}

TEST_CASE("translate checks the whole range, with overflow") {
  std::vector<uint8_t> host(0x1000);
  GuestMemory mem;
  REQUIRE(mem.add_region(0x10000, 0x1000, host.data()));
  CHECK(mem.translate(0x10000, 0x1000) == host.data());
  CHECK(mem.translate(0x10ff0, 0x10) == host.data() + 0xff0);
  CHECK(mem.translate(0x10fff, 0) == host.data() + 0xfff);
  CHECK(mem.translate(0x10ff0, 0x11) == nullptr);  // one byte past the end
  CHECK(mem.translate(0xffff, 2) == nullptr);      // starts before
  CHECK(mem.translate(0x11000, 1) == nullptr);     // starts at the end
  CHECK(mem.translate(0x10010, UINT64_MAX) == nullptr);
  CHECK(mem.translate(0x10010, UINT64_MAX - 0x8) == nullptr);  // gpa + len wraps
  CHECK(mem.translate(UINT64_MAX, 1) == nullptr);
  CHECK(mem.translate(0, 0x10001) == nullptr);
}

TEST_CASE("map splits a buffer over adjacent regions and fails on gaps") {
  std::vector<uint8_t> a(0x1000), b(0x1000), c(0x1000);
  GuestMemory mem;
  REQUIRE(mem.add_region(0x10000, 0x1000, a.data()));
  REQUIRE(mem.add_region(0x11000, 0x1000, b.data()));
  REQUIRE(mem.add_region(0x20000, 0x1000, c.data()));
  IoVecList iov;
  REQUIRE(mem.map(0x10f00, 0x200, iov) == GuestMemory::MapResult::kOk);
  REQUIRE(iov.count() == 2);
  CHECK(iov[0].base == a.data() + 0xf00);
  CHECK(iov[0].len == 0x100);
  CHECK(iov[1].base == b.data());
  CHECK(iov[1].len == 0x100);
  CHECK(iov.total_len() == 0x200);

  iov.clear();
  CHECK(mem.map(0x11f00, 0x200, iov) ==
        GuestMemory::MapResult::kUnmapped);  // runs into the gap after region 1
  iov.clear();
  CHECK(mem.map(0x1ff00, 0x200, iov) == GuestMemory::MapResult::kUnmapped);  // starts in the gap
  iov.clear();
  CHECK(mem.map(UINT64_MAX - 0x10, 0x100, iov) == GuestMemory::MapResult::kUnmapped);  // wraps
  iov.clear();
  CHECK(mem.map(0x20000, 0x1000, iov) == GuestMemory::MapResult::kOk);
}

TEST_CASE("map fails when the scatter list is full") {
  std::vector<uint8_t> a(0x1000), b(0x1000);
  GuestMemory mem;
  REQUIRE(mem.add_region(0x10000, 0x1000, a.data()));
  REQUIRE(mem.add_region(0x11000, 0x1000, b.data()));
  IoVecList iov;
  for (uint32_t i = 0; i + 1 < IoVecList::kCapacity; ++i) REQUIRE(iov.push(a.data(), 1));
  CHECK(mem.map(0x10f00, 0x200, iov) == GuestMemory::MapResult::kListFull);  // one left
  CHECK(iov.count() == IoVecList::kCapacity);
  iov.truncate(3);
  CHECK(iov.count() == 3);
  CHECK(iov.total_len() == 3);
}
