// SPDX-License-Identifier: BSD-3-Clause
// Our own mapping of guest memory and its DMA registration: each region registered while the
// mapping lives, unregistered (before it is unmapped) when the last reference goes; lent
// segments carry an IOVA only from memory that is registered.
#include <rte_memory.h>
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <set>

#include "datapath/eal_dma_registrar.h"
#include "datapath/zero_copy_tracker.h"
#include "datapath_fixture.h"
#include "ring/guest_mapping.h"

using namespace vqs;
using namespace vqs::test;

namespace {

constexpr uint64_t kRegionSize = 1 << 20;

// Guest regions as a vhost-user frontend sends them: each a memfd, the region at an offset.
class MemfdRegions {
 public:
  explicit MemfdRegions(int count) {
    for (int i = 0; i < count; ++i) {
      const int fd = memfd_create("guest", MFD_CLOEXEC);
      REQUIRE(fd >= 0);
      REQUIRE(ftruncate(fd, kRegionSize) == 0);
      regions_.push_back({0x100000000ull * (i + 1), kRegionSize - 4096, fd, kRegionSize, 4096});
    }
  }
  ~MemfdRegions() {
    for (const auto& r : regions_) close(r.fd);
  }
  const std::vector<GuestMapping::Region>& get() const { return regions_; }

 private:
  std::vector<GuestMapping::Region> regions_;
};

// Registers what it is given, refusing the region at `refuse` (its address order), and keeps
// what is registered.
class RecordingRegistrar final : public DmaRegistrar {
 public:
  int refuse = -1;
  std::set<void*> registered;
  int calls = 0;
  bool register_memory(void* addr, uint64_t len, uint64_t page_size) override {
    CHECK(len == kRegionSize);
    CHECK(page_size == static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
    if (calls++ == refuse) return false;
    registered.insert(addr);
    return true;
  }
  void unregister_memory(void* addr, uint64_t) override {
    // Before the memory goes: it is still readable.
    CHECK(registered.erase(addr) == 1);
    CHECK(*static_cast<volatile uint8_t*>(addr) == 0);
  }
};

// The host address of guest-physical `gpa`.
uint8_t* host(const GuestMemory& memory, uint64_t gpa) {
  return static_cast<uint8_t*>(memory.translate(gpa, 1));
}

}  // namespace

TEST_CASE("guest mapping: every region registered while the mapping lives, until the last ref") {
  MemfdRegions regions(2);
  RecordingRegistrar registrar;
  GuestMemory memory;
  std::string error;
  GuestMapping* mapping = GuestMapping::create(regions.get(), &memory, &registrar, &error);
  REQUIRE(mapping != nullptr);
  CHECK(mapping->dma_ready());
  CHECK(registrar.registered.size() == 2);
  mapping->retain();  // a tracker's
  mapping->release();
  CHECK(registrar.registered.size() == 2);
  mapping->release();
  CHECK(registrar.registered.empty());
}

// A region reaching past the end of its file maps fine and raises SIGBUS when that part is
// touched (issue 16, hole 7): refused with the table, nothing left mapped.
TEST_CASE("guest mapping: a region whose file is shorter than it is refused") {
  for (const uint64_t file_size : {kRegionSize - 1, kRegionSize / 2, uint64_t{0}}) {
    INFO("file of " << file_size << " bytes");
    MemfdRegions regions(2);
    REQUIRE(ftruncate(regions.get()[1].fd, static_cast<off_t>(file_size)) == 0);
    RecordingRegistrar registrar;
    GuestMemory memory;
    std::string error;
    CHECK(GuestMapping::create(regions.get(), &memory, &registrar, &error) == nullptr);
    CHECK(error.find("region 1") != std::string::npos);
    CHECK(error.find("file") != std::string::npos);
    CHECK(registrar.registered.empty());
    CHECK(memory.translate(regions.get()[0].guest_phys_addr, 1) == nullptr);
  }
  // Exactly as long as the region's end: fine.
  MemfdRegions regions(1);
  GuestMemory memory;
  std::string error;
  GuestMapping* mapping = GuestMapping::create(regions.get(), &memory, nullptr, &error);
  REQUIRE(mapping != nullptr);
  mapping->release();
}

TEST_CASE("guest mapping: an empty region is refused, wherever it points") {
  MemfdRegions regions(1);
  std::string why;
  CHECK_FALSE(region_fits_file(regions.get()[0].fd, 0, 0, &why));
  CHECK(why == "it is empty");
  CHECK_FALSE(region_fits_file(regions.get()[0].fd, 4096, 0, &why));
  CHECK(region_fits_file(regions.get()[0].fd, 0, 4096, &why));
}

TEST_CASE("guest mapping: a region the registrar refuses leaves the memory usable, not dma_ready") {
  MemfdRegions regions(3);
  RecordingRegistrar registrar;
  registrar.refuse = 1;
  GuestMemory memory;
  std::string error;
  GuestMapping* mapping = GuestMapping::create(regions.get(), &memory, &registrar, &error);
  REQUIRE(mapping != nullptr);
  CHECK_FALSE(mapping->dma_ready());
  CHECK(registrar.registered.size() == 2);
  CHECK(host(memory, regions.get()[1].guest_phys_addr) != nullptr);
  mapping->release();  // unregisters only the two it registered
  CHECK(registrar.registered.empty());

  mapping = GuestMapping::create(regions.get(), &memory, nullptr, &error);
  REQUIRE(mapping != nullptr);
  CHECK_FALSE(mapping->dma_ready());
  mapping->release();
}

TEST_CASE("guest mapping: EAL registration makes each region external memory until released") {
  MemfdRegions regions(2);
  EalDmaRegistrar registrar({});  // no device: external memory only
  GuestMemory memory;
  std::string error;
  GuestMapping* mapping = GuestMapping::create(regions.get(), &memory, &registrar, &error);
  REQUIRE(mapping != nullptr);
  CHECK(mapping->dma_ready());
  std::vector<uint8_t*> inside;
  for (const auto& r : regions.get()) inside.push_back(host(memory, r.guest_phys_addr + 100));
  for (uint8_t* addr : inside) {
    const rte_memseg_list* msl = rte_mem_virt2memseg_list(addr);
    REQUIRE(msl != nullptr);
    CHECK(msl->external == 1);
    CHECK(msl->page_sz == static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  }
  mapping->release();
  for (uint8_t* addr : inside) CHECK(rte_mem_virt2memseg_list(addr) == nullptr);
}

TEST_CASE("zero-copy: lent segments carry their address as IOVA only from registered memory") {
  MemfdRegions regions(1);
  for (const bool registered : {true, false}) {
    INFO("registered " << registered);
    RecordingRegistrar registrar;
    registrar.refuse = registered ? -1 : 0;
    GuestMemory mapped;
    std::string error;
    GuestMapping* mapping = GuestMapping::create(regions.get(), &mapped, &registrar, &error);
    REQUIRE(mapping != nullptr);
    {
      Device dev(kModernFeatures, 256);
      ZeroCopyTracker tracker;
      dev.lending.tracker = &tracker;
      tracker.start(256);
      // The chains lend from the fixture's memory; the tracker answers for the mapping's state.
      tracker.set_mapping(mapping);
      SimPacket p;
      p.data = make_frame(1500, 3);
      REQUIRE(dev.tx.send(p) != UINT16_MAX);
      const auto pkts = dev.dequeue();
      REQUIRE(pkts.size() == 1);
      REQUIRE(pkts[0]->nb_segs > 1);
      for (const rte_mbuf* seg = pkts[0]->next; seg != nullptr; seg = seg->next) {
        REQUIRE(RTE_MBUF_HAS_EXTBUF(seg));
        const rte_iova_t va = reinterpret_cast<uintptr_t>(seg->buf_addr);
        CHECK(seg->buf_iova == (registered ? va : RTE_BAD_IOVA));
      }
      dev.free_all();
      tracker.reap_orphans_only();
      tracker.set_mapping(nullptr);
    }
    mapping->release();
    CHECK(registrar.registered.empty());
  }
}
