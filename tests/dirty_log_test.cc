// SPDX-License-Identifier: BSD-3-Clause
// Live migration's dirty log: every guest byte the datapath writes lies in a page it reported,
// checked against a byte-for-byte comparison of guest memory before and after.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <vector>

#include "datapath_fixture.h"
#include "ring/dirty_log.h"

using namespace vqs;
using namespace vqs::test;

namespace {

constexpr uint64_t kPage = 4096;  // the vhost-user log's page (VHOST_LOG_PAGE)

// Pages reported, used-ring offsets turned into guest-physical addresses as librte_vhost does
// with the ring's log address.
class PageLog final : public DirtyLog {
 public:
  // Packed rings report every write by address (used_written() is not called for them).
  PageLog(const GuestMemory& memory, const VirtQueue::Setup& setup) {
    if (setup.addrs.used != nullptr)
      REQUIRE(memory.guest_phys_of(reinterpret_cast<const uint8_t*>(setup.addrs.used), &used_gpa_));
  }
  void guest_written(uint64_t gpa, uint64_t len) override {
    ++calls;
    mark(gpa, len);
  }
  void used_written(uint64_t offset, uint64_t len) override {
    REQUIRE(used_gpa_ != 0);
    ++calls;
    ++used_calls;
    mark(used_gpa_ + offset, len);
  }
  std::set<uint64_t> pages;
  int calls = 0;
  int used_calls = 0;

 private:
  void mark(uint64_t gpa, uint64_t len) {
    REQUIRE(len > 0);
    for (uint64_t p = gpa / kPage; p * kPage < gpa + len; ++p) pages.insert(p);
  }
  uint64_t used_gpa_ = 0;
};

// All of guest memory, region by region.
std::vector<std::vector<uint8_t>> snapshot(const SimMemory& memory) {
  std::vector<std::vector<uint8_t>> regions;
  for (uint32_t i = 0; i < memory.table().region_count(); ++i) {
    regions.emplace_back(memory.region_end(i) - memory.region_start(i));
    memory.read(memory.region_start(i), regions.back().data(), regions.back().size());
  }
  return regions;
}

// Pages with a byte that changed since `before`.
std::set<uint64_t> changed_pages(const SimMemory& memory,
                                 const std::vector<std::vector<uint8_t>>& before) {
  std::set<uint64_t> pages;
  const auto after = snapshot(memory);
  for (uint32_t r = 0; r < after.size(); ++r)
    for (uint64_t off = 0; off < after[r].size(); ++off)
      if (after[r][off] != before[r][off]) pages.insert((memory.region_start(r) + off) / kPage);
  return pages;
}

// Restarts `queue` where `guest` stands, logging into `log`.
void restart_logging(VirtQueue& queue, SimGuest& guest, DirtyLog* log) {
  queue.stop();
  VirtQueue::Setup setup = guest.setup();
  setup.dirty_log = log;
  REQUIRE(queue.start(setup));
}

const std::vector<uint64_t> kSmallRegions = {1 << 20, 1 << 20, 1 << 20};

}  // namespace

TEST_CASE("dirty log: every page a guest RX burst writes is reported") {
  const uint64_t features =
      GENERATE(kModernFeatures | bit(kNetFMrgRxbuf),
               kModernFeatures | bit(kNetFMrgRxbuf) | bit(kRingFEventIdx), kModernFeatures);
  // Near the end of the index space and of the ring: the used entries wrap, from the used
  // ring's second page (8 KiB of entries) to its first.
  Device dev(features, 1024, 65530, kSmallRegions);
  PageLog log(dev.mem.table(), dev.rx.setup());
  restart_logging(dev.rxq, dev.rx, &log);
  const bool mergeable = features & bit(kNetFMrgRxbuf);
  dev.rx.post_rx(40, mergeable ? 1024 : 9000, mergeable ? 1 : 3);
  const auto before = snapshot(dev.mem);  // after the guest's own writes
  // Small frames take the one-buffer fast path, 3000-byte ones the gathering path (several
  // buffers when mergeable, several descriptors of one chain otherwise).
  std::vector<rte_mbuf*> pkts = make_packets(10, 60);
  for (rte_mbuf* m : make_packets(6, 3000)) pkts.push_back(m);
  REQUIRE(dev.enqueue(pkts) == pkts.size());
  dev.rxq.set_kicks_enabled(true);  // the suppression state is the ring's too

  const std::set<uint64_t> changed = changed_pages(dev.mem, before);
  REQUIRE(!changed.empty());
  for (uint64_t page : changed) {
    INFO("page 0x" << std::hex << page * kPage << " written, not logged");
    CHECK(log.pages.count(page) == 1);
  }
  CHECK((dev.rxq.packed() ? log.calls : log.used_calls) > 0);
  CHECK(dev.rx.receive().size() == pkts.size());
}

TEST_CASE("dirty log: guest TX bursts report their used-ring writes") {
  Device dev(kModernFeatures | bit(kRingFEventIdx), 256, 65530, kSmallRegions);
  PageLog log(dev.mem.table(), dev.tx.setup());
  restart_logging(dev.txq, dev.tx, &log);
  for (int i = 0; i < 20; ++i) dev.tx.send(SimPacket{{}, make_frame(200, i)});
  const auto before = snapshot(dev.mem);
  CHECK(dev.dequeue().size() == 20);

  const std::set<uint64_t> changed = changed_pages(dev.mem, before);
  REQUIRE(!changed.empty());  // the used ring
  for (uint64_t page : changed) CHECK(log.pages.count(page) == 1);
  // The device reads TX buffers and writes nothing else: only used-ring writes are reported
  // (a packed ring's by address, in the last region, where the rings are).
  if (dev.txq.packed()) {
    CHECK(log.used_calls == 0);
    const uint32_t rings = dev.mem.table().region_count() - 1;
    for (uint64_t page : log.pages) {
      CHECK(page * kPage >= dev.mem.region_start(rings) / kPage * kPage);
      CHECK(page * kPage < dev.mem.region_end(rings));
    }
  } else {
    CHECK(log.used_calls == log.calls);
  }
}

TEST_CASE("dirty log: a queue started without one reports nothing, and stop forgets it") {
  Device dev(kModernFeatures | bit(kNetFMrgRxbuf), 256, 0, kSmallRegions);
  PageLog log(dev.mem.table(), dev.rx.setup());
  restart_logging(dev.rxq, dev.rx, &log);
  CHECK(dev.rxq.dirty_log() == &log);
  restart_logging(dev.rxq, dev.rx, nullptr);  // logging turned off (SET_FEATURES)
  CHECK(dev.rxq.dirty_log() == nullptr);
  const int calls = log.calls;
  dev.rx.post_rx(8, 1024);
  auto pkts = make_packets(8, 500);
  CHECK(dev.enqueue(pkts) == 8);
  CHECK(log.calls == calls);
}
