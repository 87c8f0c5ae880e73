// SPDX-License-Identifier: BSD-3-Clause
// The device side of packed virtqueues against a small packed driver written here from the
// specification (virtio 1.1, 2.8): availability by wrap counters, chains, indirect tables,
// in-place used entries, event suppression both ways, and what a hostile driver may write.
#include "ring/packed_ring.h"

#include "ring/packed_batch.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <set>
#include <vector>

#include "sim_guest.h"

using namespace vqs;
using vqs::test::SimMemory;
using PackedChain = PackedBatch::Chain;

namespace {

constexpr uint16_t kAvailUsedMask = kVringPackedDescFAvail | kVringPackedDescFUsed;

// The driver's side: makes chains available at its position, reads used entries at its own.
class PackedDriver {
 public:
  // `in_order`: as a driver that negotiated VIRTIO_F_IN_ORDER, a used entry also returns every
  // chain posted before the one it names (virtio 1.1, 2.8.23).
  PackedDriver(SimMemory& memory, uint16_t size, bool in_order = false)
      : memory_(memory), size_(size), in_order_(in_order) {
    desc_gpa_ = memory.alloc_ring_memory(16ull * size, 16);
    driver_event_gpa_ = memory.alloc_ring_memory(4, 4);
    device_event_gpa_ = memory.alloc_ring_memory(4, 4);
    desc_ = reinterpret_cast<VringPackedDesc*>(memory.host(desc_gpa_, 16ull * size));
    driver_event_ = reinterpret_cast<VringPackedEvent*>(memory.host(driver_event_gpa_, 4));
    device_event_ = reinterpret_cast<VringPackedEvent*>(memory.host(device_event_gpa_, 4));
    std::memset(desc_, 0, 16ull * size);  // a driver starts from a zeroed ring
    *driver_event_ = {};
    *device_event_ = {};
    for (uint16_t id = 0; id < size; ++id) free_ids_.push_back(id);
  }

  PackedRingAddrs addrs() const { return {desc_, driver_event_, device_event_, size_}; }
  VringPackedEvent& driver_event() { return *driver_event_; }
  const VringPackedEvent& device_event() const { return *device_event_; }
  VringPackedDesc& desc(uint16_t slot) { return desc_[slot]; }
  PackedPos avail_pos() const { return avail_; }

  struct Buffer {
    uint64_t gpa;
    uint32_t len;
    bool device_writes;
  };
  // Makes a chain available (the head's flags written last); returns its id.
  uint16_t post(const std::vector<Buffer>& buffers) {
    REQUIRE(!free_ids_.empty());
    const uint16_t id = free_ids_.front();
    free_ids_.pop_front();
    const PackedPos head = avail_;
    uint16_t head_flags = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      uint16_t flags = (avail_.wrap ? kVringPackedDescFAvail : kVringPackedDescFUsed) |
                       (buffers[i].device_writes ? kVringDescFWrite : 0) |
                       (i + 1 < buffers.size() ? kVringDescFNext : 0);
      VringPackedDesc& d = desc_[avail_.slot];
      d.addr = buffers[i].gpa;
      d.len = buffers[i].len;
      d.id = id;
      if (i == 0) {
        head_flags = flags;
      } else {
        d.flags = flags;
      }
      avail_ = avail_.advanced(1, size_);
    }
    __atomic_store_n(&desc_[head.slot].flags, head_flags, __ATOMIC_RELEASE);
    in_flight_[id] = static_cast<uint16_t>(buffers.size());
    posted_.push_back(id);
    return id;
  }
  // A chain of one indirect descriptor naming a table of `buffers`.
  uint16_t post_indirect(const std::vector<Buffer>& buffers) {
    const uint64_t table_gpa = memory_.alloc(16ull * buffers.size(), 16);
    std::vector<VringPackedDesc> table;
    for (const Buffer& b : buffers)
      table.push_back(
          {b.gpa, b.len, 0, static_cast<uint16_t>(b.device_writes ? kVringDescFWrite : 0)});
    memory_.write(table_gpa, table.data(), 16ull * table.size());
    const uint16_t id = post({{table_gpa, static_cast<uint32_t>(16 * buffers.size()), false}});
    desc_[static_cast<uint16_t>((avail_.slot + size_ - 1) % size_)].flags |= kVringDescFIndirect;
    return id;
  }

  struct Used {
    uint16_t id;
    uint32_t len;
  };
  // Used entries the device published since the last call, in order.
  std::vector<Used> take_used() {
    std::vector<Used> out;
    for (;;) {
      const uint16_t flags = __atomic_load_n(&desc_[used_.slot].flags, __ATOMIC_ACQUIRE);
      const bool avail = flags & kVringPackedDescFAvail, used = flags & kVringPackedDescFUsed;
      if (avail != used || used != used_.wrap) break;
      const VringPackedDesc& d = desc_[used_.slot];
      REQUIRE(in_flight_.count(d.id) == 1);
      ++entries_read_;
      // In order, the chains posted before this one are used too, with length 0.
      std::vector<uint16_t> ids{d.id};
      if (in_order_) {
        const auto end = std::find(posted_.begin(), posted_.end(), d.id);
        REQUIRE(end != posted_.end());
        ids.assign(posted_.begin(), end + 1);
      }
      for (const uint16_t id : ids) {
        posted_.erase(std::find(posted_.begin(), posted_.end(), id));
        out.push_back({id, id == d.id ? d.len : 0});
        used_ = used_.advanced(in_flight_[id], size_);
        in_flight_.erase(id);
        free_ids_.push_back(id);
      }
    }
    return out;
  }
  // Used entries read so far (in order, one may return several chains).
  uint32_t entries_read() const { return entries_read_; }

 private:
  SimMemory& memory_;
  uint16_t size_;
  uint64_t desc_gpa_, driver_event_gpa_, device_event_gpa_;
  VringPackedDesc* desc_;
  VringPackedEvent* driver_event_;
  VringPackedEvent* device_event_;
  PackedPos avail_;
  PackedPos used_;
  bool in_order_;
  uint32_t entries_read_ = 0;
  std::deque<uint16_t> free_ids_;
  std::deque<uint16_t> posted_;             // in flight, in the order posted
  std::map<uint16_t, uint16_t> in_flight_;  // id -> slots
};

struct Fixture {
  explicit Fixture(uint16_t size, bool event_idx = false, bool indirect = true,
                   bool in_order = false)
      : memory({1 << 20, 1 << 20, 1 << 20}), driver(memory, size, in_order) {
    REQUIRE(ring.attach(driver.addrs(), 0x8000, 0x8000, event_idx, in_order));
    batch.bind(&memory.table(), indirect);
  }
  // Reads the next available chain (the test expects one).
  ChainError next(ChainAccess access, PackedChain* chain) {
    REQUIRE(ring.available(ring.next_avail()));
    batch.begin(ring);
    REQUIRE(batch.fill(1) == 1);
    iov.clear();
    const ChainError e = batch.read(0, access, iov);
    *chain = batch.chain(0);
    ring.consume(batch.slots(1));
    return e;
  }
  SimMemory memory;
  PackedDriver driver;
  PackedRing ring;
  PackedBatch batch;
  IoVecList iov;
};

}  // namespace

TEST_CASE("packed: attach takes librte_vhost's bases and rejects unusable rings") {
  SimMemory memory({1 << 20, 1 << 20, 1 << 20});
  PackedDriver driver(memory, 100);  // any size, not only powers of two
  PackedRing ring;
  PackedRingAddrs addrs = driver.addrs();
  CHECK(ring.attach(addrs, 0x8000 | 99, 5, false, false));
  CHECK(ring.next_avail() == PackedPos{99, true});
  CHECK(ring.next_used() == PackedPos{5, false});
  CHECK(ring.next_avail().base() == (0x8000 | 99));
  CHECK_FALSE(ring.attach(addrs, 100, 0, false, false));  // slot past the ring
  addrs.size = 0;
  CHECK_FALSE(ring.attach(addrs, 0x8000, 0x8000, false, false));
  addrs = driver.addrs();
  addrs.driver_event = nullptr;
  CHECK_FALSE(ring.attach(addrs, 0x8000, 0x8000, false, false));
}

TEST_CASE("packed: chains across many wraps come back used, in place, with their ids") {
  const uint16_t size = GENERATE(7, 64, 256);
  Fixture f(size);
  const uint64_t buf = f.memory.alloc(4096);
  uint32_t seq = 0;
  for (int round = 0; round < 40; ++round) {
    // As many chains of 1-3 buffers as fit, then the device takes them all.
    std::vector<uint16_t> ids;
    uint32_t slots = 0;
    for (uint32_t n = 1 + seq % 3; slots + n <= size; n = 1 + ++seq % 3) {
      std::vector<PackedDriver::Buffer> bufs;
      for (uint32_t k = 0; k < n; ++k) bufs.push_back({buf + 100 * k, 100, false});
      ids.push_back(f.driver.post(bufs));
      slots += n;
      if (ids.size() == 5) break;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      PackedChain chain;
      REQUIRE(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kNone);
      CHECK(chain.id == ids[i]);
      CHECK(f.iov.total_len() == 100u * chain.descs);
      f.ring.put_used(chain.id, static_cast<uint32_t>(i), chain.descs);
    }
    CHECK_FALSE(f.ring.available(f.ring.next_avail()));
    CHECK(f.driver.take_used().empty());  // nothing before publish
    f.ring.publish_used();
    const auto used = f.driver.take_used();
    REQUIRE(used.size() == ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      CHECK(used[i].id == ids[i]);
      CHECK(used[i].len == i);
    }
  }
}

TEST_CASE("packed: in order, a burst's sent chains go back in two used entries") {
  // Rounds of 1 to 9 chains of one or two slots across many laps of a ring of 16: each round's
  // sent chains (length 0) come back in two used entries, every chain accounted for in order,
  // and the slot behind the used position marked used when the last chain took one slot, so
  // that a restart at our own base is taken as it is. Received chains (lengths) keep one entry
  // each; without IN_ORDER, so do sent ones.
  const bool in_order = GENERATE(false, true);
  INFO("in_order " << in_order);
  const uint16_t size = 16;
  Fixture f(size, false, true, in_order);
  const uint64_t buf = f.memory.alloc(4096);
  uint32_t seq = 0;
  for (int round = 0; round < 60; ++round) {
    INFO("round " << round);
    const bool device_writes = round % 5 == 4;
    std::vector<uint16_t> ids;
    uint32_t slots = 0;
    for (uint32_t n = 1 + seq % 2; ids.size() < 1 + round % 9u && slots + n <= 10;
         n = 1 + ++seq % 2) {
      ids.push_back(f.driver.post(
          std::vector<PackedDriver::Buffer>(n, {buf + 64 * ids.size(), 64, device_writes})));
      slots += n;
    }
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(32) == ids.size());
    for (uint16_t i = 0; i < ids.size(); ++i)
      f.ring.put_used(f.batch.chain(i).id, device_writes ? 100u + i : 0u, f.batch.chain(i).descs);
    f.ring.consume(f.batch.slots(static_cast<uint16_t>(ids.size())));
    f.ring.publish_used();
    const uint32_t entries_before = f.driver.entries_read();
    const auto used = f.driver.take_used();
    REQUIRE(used.size() == ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      CHECK(used[i].id == ids[i]);
      CHECK(used[i].len == (device_writes ? 100u + i : 0u));
    }
    const uint32_t entries = f.driver.entries_read() - entries_before;
    CHECK(entries == (in_order && !device_writes && ids.size() > 2 ? 2u : ids.size()));
    // (A chain's own later slots are never marked used: after a chain of two, only the frontend's
    // base can say where the device stands.)
    if (f.batch.chain(static_cast<uint16_t>(ids.size() - 1)).descs == 1) {
      bool recovered = true;
      CHECK(PackedRing::resume_position(f.driver.addrs().desc, size, f.ring.next_used(),
                                        &recovered) == f.ring.next_used());
      CHECK_FALSE(recovered);
    }
  }
}

TEST_CASE("packed: sent one-slot chains given back as a run, across laps, after staged ones") {
  // PackedRing::put_used_sent: written in place at once, or in order as two entries; a chain
  // staged with put_used() before the run goes back first. Every chain comes back once, with
  // its id, and the slot behind the used position is marked used.
  const bool in_order = GENERATE(false, true);
  INFO("in_order " << in_order);
  const uint16_t size = 16;
  Fixture f(size, false, true, in_order);
  const uint64_t buf = f.memory.alloc(4096);
  for (int round = 0; round < 50; ++round) {
    INFO("round " << round);
    const bool staged_first = round % 3 == 1;
    const uint16_t run = static_cast<uint16_t>(1 + round % 7);
    std::vector<uint16_t> ids;
    for (uint16_t c = 0; c < run + (staged_first ? 1 : 0); ++c)
      ids.push_back(f.driver.post({{buf + 64 * c, 64, false}}));
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(32) == ids.size());
    REQUIRE(f.batch.singles() == ids.size());
    uint16_t from = 0;
    if (staged_first) {
      f.ring.put_used(f.batch.id(0), 0, 1);
      from = 1;
    }
    const uint16_t token = f.ring.used_token();
    f.ring.put_used_sent(f.batch.singles_descs() + from, run);
    CHECK(f.ring.used_token() == static_cast<uint16_t>(token + run));
    f.ring.consume(f.batch.slots(static_cast<uint16_t>(ids.size())));
    f.ring.publish_used();
    const auto used = f.driver.take_used();
    REQUIRE(used.size() == ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      CHECK(used[i].id == ids[i]);
      CHECK(used[i].len == 0u);
    }
    bool recovered = true;
    CHECK(PackedRing::resume_position(f.driver.addrs().desc, size, f.ring.next_used(),
                                      &recovered) == f.ring.next_used());
    CHECK_FALSE(recovered);
  }
}

TEST_CASE("packed: an indirect chain takes one slot and reads its whole table") {
  Fixture f(16);
  const uint64_t buf = f.memory.alloc(4096);
  const uint16_t id = f.driver.post_indirect({{buf, 12, true}, {buf + 12, 1500, true}});
  PackedChain chain;
  REQUIRE(f.next(ChainAccess::kDeviceWrites, &chain) == ChainError::kNone);
  CHECK(chain.id == id);
  CHECK(chain.descs == 1);
  CHECK(f.iov.total_len() == 1512);
  CHECK(f.ring.next_avail() == PackedPos{1, true});
}

TEST_CASE("packed: hostile drivers") {
  Fixture f(8);
  const uint64_t buf = f.memory.alloc(4096);
  PackedChain chain;

  SECTION("flags that lie about the wrap counter are not available") {
    f.driver.post({{buf, 64, false}});
    VringPackedDesc& d = f.driver.desc(0);
    d.flags |= kAvailUsedMask;  // AVAIL == USED: a used descriptor, not an available one
    CHECK_FALSE(f.ring.available(f.ring.next_avail()));
    d.flags &= ~kAvailUsedMask;  // the previous lap's marking
    CHECK_FALSE(f.ring.available(f.ring.next_avail()));
    d.flags |= kVringPackedDescFUsed;  // available in the next lap, not this one
    CHECK_FALSE(f.ring.available(f.ring.next_avail()));
  }
  SECTION("a chained descriptor the driver did not make available") {
    f.driver.post({{buf, 64, false}, {buf + 64, 64, false}});
    f.driver.desc(1).flags ^= kAvailUsedMask;
    CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kNotAvailable);
    CHECK(chain.descs == 1);  // the head is given back alone
  }
  SECTION("a chain refused part way goes back whole, with its id") {
    const uint16_t id = f.driver.post({{buf, 64, false}, {~0ull - 8, 64, false}, {buf, 64, false}});
    const uint16_t next = f.driver.post({{buf, 64, false}});
    CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kBadAddress);
    CHECK(chain.descs == 3);
    CHECK(chain.id == id);
    CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kNone);
    CHECK(chain.id == next);
  }
  SECTION("a chain longer than the ring") {
    for (uint16_t s = 0; s < 8; ++s) {
      VringPackedDesc& d = f.driver.desc(s);
      d = {buf, 8, 0, static_cast<uint16_t>(kVringPackedDescFAvail | kVringDescFNext)};
    }
    // Bounded by the ring size: the walk stops before it comes round to its head again.
    CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kTooLong);
    CHECK(chain.descs == 8);
  }
  SECTION("ids reused while in flight: both chains are read, each with the id it carries") {
    const uint16_t id = f.driver.post({{buf, 64, false}});
    f.driver.post({{buf, 64, false}});
    f.driver.desc(1).id = id;
    PackedChain a, b;
    CHECK(f.next(ChainAccess::kDeviceReads, &a) == ChainError::kNone);
    CHECK(f.next(ChainAccess::kDeviceReads, &b) == ChainError::kNone);
    CHECK(a.id == id);
    CHECK(b.id == id);  // the driver gets two used entries for one id: its own problem
  }
  SECTION("indirect descriptors in packed form") {
    SECTION("with NEXT") {
      f.driver.post({{buf, 32, false}, {buf, 32, false}});
      f.driver.desc(0).flags |= kVringDescFIndirect;
      CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kIndirectWithNext);
    }
    SECTION("a table of no whole descriptor") {
      f.driver.post({{buf, 24, false}});
      f.driver.desc(0).flags |= kVringDescFIndirect;
      CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kBadIndirectLength);
    }
    SECTION("a table outside guest memory") {
      f.driver.post({{0x10, 32, false}});
      f.driver.desc(0).flags |= kVringDescFIndirect;
      CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kBadAddress);
    }
    SECTION("not negotiated") {
      Fixture g(8, false, false);
      g.driver.post_indirect({{buf, 32, false}});
      CHECK(g.next(ChainAccess::kDeviceReads, &chain) == ChainError::kIndirectNotNegotiated);
    }
    SECTION("an entry of the table outside guest memory, or in the wrong direction") {
      f.driver.post_indirect({{buf, 32, false}, {~0ull - 8, 32, false}});
      CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kBadAddress);
      // A device-readable entry where the device writes is refused ...
      f.driver.post_indirect({{buf, 32, true}, {buf + 32, 32, false}});
      CHECK(f.next(ChainAccess::kDeviceWrites, &chain) == ChainError::kWrongDirection);
      // ... a device-writable one where it reads is read: DPDK's virtio driver marks its TX
      // tables' header entries so (PackedBatch::read_indirect).
      f.driver.post_indirect({{buf, 12, true}, {buf + 12, 60, false}});
      CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kNone);
      CHECK(f.iov.total_len() == 72);
    }
  }
  SECTION("a buffer outside guest memory, or wrapping") {
    f.driver.post({{~0ull - 16, 64, false}});
    CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kBadAddress);
  }
}

TEST_CASE("packed: the driver's event area decides interrupts") {
  SECTION("enable and disable") {
    Fixture f(8);
    const uint64_t buf = f.memory.alloc(4096);
    PackedChain chain;
    f.driver.post({{buf, 8, false}});
    f.next(ChainAccess::kDeviceReads, &chain);
    f.ring.put_used(chain.id, 0, chain.descs);
    f.ring.publish_used();
    f.driver.driver_event().flags = kVringPackedEventFDisable;
    CHECK_FALSE(f.ring.guest_wants_interrupt());
    CHECK_FALSE(f.ring.guest_wants_interrupt());  // nothing new
    f.driver.post({{buf, 8, false}});
    f.next(ChainAccess::kDeviceReads, &chain);
    f.ring.put_used(chain.id, 0, chain.descs);
    f.ring.publish_used();
    f.driver.driver_event().flags = kVringPackedEventFEnable;
    CHECK(f.ring.guest_wants_interrupt());
  }
  SECTION("with EVENT_IDX: once the used position passes off_wrap, across wraps") {
    Fixture f(8, true);
    const uint64_t buf = f.memory.alloc(4096);
    f.driver.driver_event().flags = kVringPackedEventFDesc;
    std::vector<int> interrupts;
    for (int i = 0; i < 40; ++i) {
      // The driver asks for an interrupt at used position i (slot i % 8, lap i / 8).
      const PackedPos want = PackedPos{}.advanced(static_cast<uint32_t>(i / 3 * 3), 8);
      f.driver.driver_event().off_wrap = want.base();
      PackedChain chain;
      f.driver.post({{buf, 8, false}});
      f.next(ChainAccess::kDeviceReads, &chain);
      f.ring.put_used(chain.id, 0, chain.descs);
      f.ring.publish_used();
      f.driver.take_used();
      if (f.ring.guest_wants_interrupt()) interrupts.push_back(i);
    }
    // Entry i goes to position i: an interrupt when it is the one asked for (every third),
    // and the first decision always.
    std::vector<int> want = {0};
    for (int i = 3; i < 40; i += 3) want.push_back(i);
    CHECK(interrupts == want);
  }
}

TEST_CASE("packed: our event area tells the driver when to kick") {
  Fixture plain(8);
  CHECK(plain.driver.device_event().flags == kVringPackedEventFDisable);  // polling at start
  plain.ring.set_kicks_enabled(true);
  CHECK(plain.driver.device_event().flags == kVringPackedEventFEnable);
  plain.ring.set_kicks_enabled(false);
  CHECK(plain.driver.device_event().flags == kVringPackedEventFDisable);

  Fixture idx(8, true);
  const uint64_t buf = idx.memory.alloc(4096);
  for (int i = 0; i < 9; ++i) {  // one lap and one slot on
    PackedChain chain;
    idx.driver.post({{buf, 8, false}});
    idx.next(ChainAccess::kDeviceReads, &chain);
    idx.ring.put_used(chain.id, 0, chain.descs);
    idx.ring.publish_used();
    idx.driver.take_used();
  }
  idx.ring.set_kicks_enabled(true);
  CHECK(idx.driver.device_event().flags == kVringPackedEventFDesc);
  CHECK(idx.driver.device_event().off_wrap == PackedPos{1, false}.base());
  // A burst while kicks stay wanted moves the offset on with us.
  PackedChain chain;
  idx.driver.post({{buf, 8, false}});
  idx.next(ChainAccess::kDeviceReads, &chain);
  idx.ring.put_used(chain.id, 0, chain.descs);
  idx.ring.publish_used();
  CHECK(idx.driver.device_event().off_wrap == PackedPos{2, false}.base());
}

TEST_CASE("packed: used entries and our event area are reported to the dirty log") {
  struct Log final : DirtyLog {
    void guest_written(uint64_t gpa, uint64_t len) override { writes.insert({gpa, len}); }
    void used_written(uint64_t, uint64_t) override { FAIL("packed rings log by address"); }
    std::set<std::pair<uint64_t, uint64_t>> writes;
  } log;
  Fixture f(8);
  f.ring.set_dirty_log(&log, &f.memory.table());
  const uint64_t buf = f.memory.alloc(4096);
  PackedChain chain;
  f.driver.post({{buf, 8, false}, {buf, 8, false}});
  f.next(ChainAccess::kDeviceReads, &chain);
  f.ring.put_used(chain.id, 0, chain.descs);
  f.ring.publish_used();
  f.ring.set_kicks_enabled(true);
  uint64_t desc_gpa = 0, event_gpa = 0;
  REQUIRE(f.memory.table().guest_phys_of(reinterpret_cast<const uint8_t*>(&f.driver.desc(0)),
                                         &desc_gpa));
  REQUIRE(f.memory.table().guest_phys_of(reinterpret_cast<const uint8_t*>(&f.driver.device_event()),
                                         &event_gpa));
  CHECK(log.writes == std::set<std::pair<uint64_t, uint64_t>>{{desc_gpa, 16}, {event_gpa, 4}});
}

TEST_CASE("packed: a batch copies chains up to what is asked, available, and fits") {
  Fixture f(16);
  const uint64_t buf = f.memory.alloc(4096);
  std::vector<uint16_t> ids;
  for (uint32_t n : {1u, 3u, 2u, 1u}) {
    std::vector<PackedDriver::Buffer> bufs;
    for (uint32_t k = 0; k < n; ++k) bufs.push_back({buf + 64 * k, 64, false});
    ids.push_back(f.driver.post(bufs));
  }
  f.batch.begin(f.ring);
  CHECK(f.batch.fill(2) == 2);
  CHECK(f.batch.slots(2) == 4);
  CHECK(f.batch.fill(10) == 4);  // the rest, then no more is available
  CHECK(f.batch.slots(4) == 7);
  CHECK(f.ring.count_available(10) == 4);
  CHECK(f.ring.count_available(3) == 3);
  for (uint16_t i = 0; i < 4; ++i) {
    f.iov.clear();
    CHECK(f.batch.read(i, ChainAccess::kDeviceReads, f.iov) == ChainError::kNone);
    CHECK(f.batch.chain(i).id == ids[i]);
    CHECK(f.iov.total_len() == 64u * f.batch.chain(i).descs);
  }
  uint32_t len = 0;
  CHECK(f.batch.single_buffer(0, ChainAccess::kDeviceReads, &len) != nullptr);
  CHECK(len == 64);
  CHECK(f.batch.single_buffer(0, ChainAccess::kDeviceWrites, &len) == nullptr);
  CHECK(f.batch.single_buffer(1, ChainAccess::kDeviceReads, &len) == nullptr);  // three buffers
  // Consuming the first two leaves the others for the next batch.
  f.ring.consume(f.batch.slots(2));
  CHECK(f.ring.count_available(10) == 2);
  f.batch.begin(f.ring);
  CHECK(f.batch.fill(10) == 2);
  CHECK(f.batch.chain(0).id == ids[2]);
}

TEST_CASE("packed: batches of one- and two-descriptor chains, round after round across laps") {
  // Ring of 16: rounds of singles with a two-descriptor chain among them, a fill that stops
  // mid-group, groups that would cross the ring's end; each fill compared with what was posted
  // (ids, slots, what is read).
  Fixture f(16);
  const uint64_t buf = f.memory.alloc(4096);
  for (int lap = 0; lap < 12; ++lap) {
    INFO("round " << lap);
    std::vector<uint16_t> ids, slots;
    // 13 slots: singles and a chain of 2 (its place moves round by round).
    const size_t pair_at = static_cast<size_t>(lap % 4) + 2;
    uint16_t posted_slots = 0;
    for (size_t c = 0; posted_slots < 13; ++c) {
      const uint16_t n = c == pair_at ? 2 : 1;
      std::vector<PackedDriver::Buffer> bufs(n, {buf + 64 * c, 64, false});
      ids.push_back(f.driver.post(bufs));
      slots.push_back(n);
      posted_slots = static_cast<uint16_t>(posted_slots + n);
    }
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(5) == 5);  // stops at what is asked, mid-group
    REQUIRE(f.batch.fill(32) == ids.size());
    CHECK(f.batch.slots(static_cast<uint16_t>(ids.size())) == posted_slots);
    uint32_t slot_sum = 0;
    for (uint16_t i = 0; i < ids.size(); ++i) {
      CHECK(f.batch.chain(i).id == ids[i]);
      CHECK(f.batch.chain(i).descs == slots[i]);
      slot_sum += slots[i];
      CHECK(f.batch.chain(i).slots_end == slot_sum);
      f.iov.clear();
      CHECK(f.batch.read(i, ChainAccess::kDeviceReads, f.iov) == ChainError::kNone);
      CHECK(f.iov.total_len() == 64u * slots[i]);
      CHECK(f.iov[0].base == f.memory.host(buf + 64 * i, 64));
    }
    for (uint16_t i = 0; i < ids.size(); ++i)
      f.ring.put_used(f.batch.chain(i).id, 0, f.batch.chain(i).descs);
    f.ring.consume(f.batch.slots(static_cast<uint16_t>(ids.size())));
    f.ring.publish_used();
    CHECK(f.driver.take_used().size() == ids.size());
    // Two more, posted one by one and each taken alone: 15 slots a round, so the next round's
    // groups of four sit elsewhere and one crosses the ring's end.
    for (int k = 0; k < 2; ++k) {
      const uint16_t id = f.driver.post({{buf, 64, false}});
      f.batch.begin(f.ring);
      REQUIRE(f.batch.fill(8) == 1);
      CHECK(f.batch.chain(0).id == id);
      f.ring.put_used(id, 0, 1);
      f.ring.consume(1);
      f.ring.publish_used();
      CHECK(f.driver.take_used().size() == 1);
    }
  }
}

TEST_CASE("packed: four one-slot chains are taken at once only when all four are fit to be") {
  // PackedBatch::copy_four_singles checks four slots' flags together; whatever it refuses, the
  // chain-by-chain path must still find exactly the chains the driver made available.
  Fixture f(16);
  const uint64_t buf = f.memory.alloc(4096);
  std::vector<uint16_t> ids;
  for (uint16_t c = 0; c < 4; ++c) ids.push_back(f.driver.post({{buf + 64 * c, 64, false}}));

  SECTION("all four, then their descriptors changed after the copy") {
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(8) == 4);
    for (uint16_t c = 0; c < 4; ++c) f.driver.desc(c).len = 1 << 30;  // too late
    for (uint16_t c = 0; c < 4; ++c) {
      CHECK(f.batch.id(c) == ids[c]);
      CHECK(f.batch.chain_slots(c) == 1);
      uint32_t len = 0;
      CHECK(f.batch.single_buffer(c, ChainAccess::kDeviceReads, &len) ==
            f.memory.host(buf + 64 * c, 64));
      CHECK(len == 64);
    }
    CHECK(f.batch.slots(4) == 4);
  }
  SECTION("the fourth lies about the wrap counter: three are taken") {
    f.driver.desc(3).flags |= kAvailUsedMask;
    f.batch.begin(f.ring);
    CHECK(f.batch.fill(8) == 3);
    CHECK(f.batch.slots(3) == 3);
  }
  SECTION("the first not yet made available: none are taken") {
    f.driver.desc(0).flags ^= kVringPackedDescFAvail | kVringPackedDescFUsed;
    f.batch.begin(f.ring);
    CHECK(f.batch.fill(8) == 0);
  }
  SECTION("the third chained on to a fourth that is not available: two, then a broken chain") {
    f.driver.desc(2).flags |= kVringDescFNext;
    f.driver.desc(3).flags &= static_cast<uint16_t>(~kAvailUsedMask);  // the previous lap's
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(8) == 3);
    CHECK(f.batch.slots(3) == 3);
    f.iov.clear();
    CHECK(f.batch.read(2, ChainAccess::kDeviceReads, f.iov) == ChainError::kNotAvailable);
    CHECK(f.batch.chain(2).slots_end == 3);
  }
  SECTION("the second chained on to the third: three chains, the middle one of two slots") {
    f.driver.desc(1).flags |= kVringDescFNext;
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(8) == 3);
    CHECK(f.batch.chain_slots(1) == 2);
    CHECK(f.batch.id(2) == ids[3]);
    CHECK(f.batch.slots(3) == 4);
    f.iov.clear();
    CHECK(f.batch.read(1, ChainAccess::kDeviceReads, f.iov) == ChainError::kNone);
    CHECK(f.iov.total_len() == 128);
  }
  SECTION("an indirect table among them is one slot, read as a table") {
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(4) == 4);
    f.ring.consume(f.batch.slots(4));
    const uint16_t table_id = f.driver.post_indirect({{buf, 12, false}, {buf + 12, 100, false}});
    for (uint16_t c = 0; c < 3; ++c) f.driver.post({{buf + 64 * c, 64, false}});
    f.batch.begin(f.ring);
    REQUIRE(f.batch.fill(4) == 4);
    CHECK(f.batch.id(0) == table_id);
    uint32_t len = 0;
    CHECK(f.batch.single_buffer(0, ChainAccess::kDeviceReads, &len) == nullptr);
    f.iov.clear();
    CHECK(f.batch.read(0, ChainAccess::kDeviceReads, f.iov) == ChainError::kNone);
    CHECK(f.iov.total_len() == 112);
  }
}

TEST_CASE("packed: the driver changing a descriptor after the copy changes nothing read") {
  Fixture f(8);
  const uint64_t buf = f.memory.alloc(4096);
  f.driver.post({{buf, 64, false}});
  f.batch.begin(f.ring);
  REQUIRE(f.batch.fill(1) == 1);
  f.driver.desc(0).addr = ~0ull - 8;  // after the copy: too late
  f.driver.desc(0).len = 1 << 30;
  f.iov.clear();
  CHECK(f.batch.read(0, ChainAccess::kDeviceReads, f.iov) == ChainError::kNone);
  CHECK(f.iov.total_len() == 64);
}

TEST_CASE("packed: a chain that does not fit a batch waits for the next one") {
  Fixture f(2048);
  const uint64_t buf = f.memory.alloc(4096);
  f.driver.post({{buf, 64, false}});
  std::vector<PackedDriver::Buffer> long_chain(PackedBatch::kMaxDescs, {buf, 8, false});
  const uint16_t long_id = f.driver.post(long_chain);
  f.batch.begin(f.ring);
  CHECK(f.batch.fill(10) == 1);  // the long one does not fit after the first
  f.ring.consume(f.batch.slots(1));
  f.batch.begin(f.ring);
  REQUIRE(f.batch.fill(10) == 1);  // alone it does (the bound is IoVecList's capacity)
  CHECK(f.batch.chain(0).id == long_id);
  CHECK(f.batch.chain(0).descs == PackedBatch::kMaxDescs);
  f.iov.clear();
  CHECK(f.batch.read(0, ChainAccess::kDeviceReads, f.iov) == ChainError::kNone);
  CHECK(f.iov.total_len() == 8u * PackedBatch::kMaxDescs);
}

TEST_CASE("packed: a chain longer than the bound goes back whole") {
  Fixture f(2048);
  const uint64_t buf = f.memory.alloc(4096);
  std::vector<PackedDriver::Buffer> too_long(PackedBatch::kMaxDescs + 5, {buf, 8, false});
  const uint16_t id = f.driver.post(too_long);
  const uint16_t next = f.driver.post({{buf, 64, false}});
  PackedChain chain;
  CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kTooLong);
  CHECK(chain.descs == PackedBatch::kMaxDescs + 5);
  CHECK(chain.id == id);
  CHECK(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kNone);
  CHECK(chain.id == next);
}

TEST_CASE("packed: a restart resumes at the frontend's base, or where the descriptors say") {
  const uint16_t size = 16;
  Fixture f(size);
  const uint64_t buf = f.memory.alloc(4096);
  bool recovered = true;
  // A fresh ring, the driver ahead by a few receive buffers: the base (0x8000) agrees.
  for (int i = 0; i < 3; ++i) f.driver.post({{buf, 64, true}});
  CHECK(PackedRing::resume_position(f.driver.addrs().desc, size, PackedPos{}, &recovered) ==
        PackedPos{});
  CHECK_FALSE(recovered);
  // Traffic over several laps; the device stops with `outstanding` chains posted, not taken.
  const uint32_t taken = GENERATE(3u, 16u, 21u, 40u, 47u);
  const uint32_t outstanding = GENERATE(0u, 1u, 5u, 16u);  // 16: a full ring
  INFO("taken " << taken << " outstanding " << outstanding);
  PackedChain chain;
  for (uint32_t i = 0; i < 3; ++i) {  // the three posted above
    REQUIRE(f.next(ChainAccess::kDeviceWrites, &chain) == ChainError::kNone);
    f.ring.put_used(chain.id, 0, chain.descs);
  }
  f.ring.publish_used();
  f.driver.take_used();
  for (uint32_t i = 3; i < taken; ++i) {
    f.driver.post({{buf, 64, false}});
    REQUIRE(f.next(ChainAccess::kDeviceReads, &chain) == ChainError::kNone);
    f.ring.put_used(chain.id, 0, chain.descs);
    f.ring.publish_used();
    f.driver.take_used();
  }
  for (uint32_t i = 0; i < outstanding; ++i) f.driver.post({{buf, 64, false}});
  const PackedPos now = f.ring.next_avail();
  REQUIRE(now == f.ring.next_used());
  // The right base agrees.
  CHECK(PackedRing::resume_position(f.driver.addrs().desc, size, now, &recovered) == now);
  CHECK_FALSE(recovered);
  // A stale one (the start, a slot behind, a lap behind) is corrected from the descriptors.
  for (const PackedPos stale : {PackedPos{}, now.before(size), now.advanced(size, size)}) {
    if (stale == now) continue;
    INFO("stale base 0x" << std::hex << stale.base());
    CHECK(PackedRing::resume_position(f.driver.addrs().desc, size, stale, &recovered) == now);
    CHECK(recovered);
  }
}
