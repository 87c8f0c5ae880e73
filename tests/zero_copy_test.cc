// SPDX-License-Identifier: BSD-3-Clause
// Dequeue zero-copy: lending guest TX buffers as external mbuf buffers, the in-flight limit and
// its copy fallback, completions in any order and from any thread, the used ring afterwards,
// and the completion wake-up of a sleeping owner.
#include <fcntl.h>
#include <poll.h>
#include <rte_mbuf.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "datapath/zero_copy_lend.h"
#include "datapath/zero_copy_tracker.h"
#include "datapath_fixture.h"

using namespace vqs;
using namespace vqs::test;

namespace {

// A device whose TX queue lends packets of at least `min_len` bytes through `tracker`.
struct ZeroCopyDevice : Device {
  explicit ZeroCopyDevice(uint16_t ring_size = 256, uint32_t min_len = kDefaultZeroCopyMinLen,
                          bool fallback = true, uint16_t start_idx = 0)
      : Device(kModernFeatures, ring_size, start_idx) {
    lending = LendPolicy{&tracker, min_len, fallback};
    tracker.start(ring_size);
  }
  ~ZeroCopyDevice() {
    free_all();
    tracker.reap_orphans_only();
  }
  // Sends `n` frames of `size` bytes (seeds from `seed`), each laid out as `layout` says.
  void send(int n, uint32_t size, uint32_t seed = 0, const TxLayout& layout = {}) {
    for (int i = 0; i < n; ++i) {
      SimPacket p;
      p.data = make_frame(size, seed + static_cast<uint32_t>(i));
      REQUIRE(tx.send(p, layout) != UINT16_MAX);
    }
  }
  static bool lent(const rte_mbuf* m) { return m->nb_segs > 1 && RTE_MBUF_HAS_EXTBUF(m->next); }

  ZeroCopyTracker tracker;
};

}  // namespace

TEST_CASE("zero-copy: packets from the minimum length on are lent, shorter ones copied") {
  ZeroCopyDevice dev;
  dev.send(3, 100, 0);
  dev.send(3, 1000, 10);
  dev.send(1, 255, 20);
  dev.send(1, 256, 30);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 8);
  for (size_t i = 0; i < pkts.size(); ++i) {
    INFO("packet " << i);
    const uint32_t seed = i < 3    ? static_cast<uint32_t>(i)
                          : i < 6  ? 10 + (i - 3)
                          : i == 6 ? 20
                                   : 30;
    CHECK(mbuf_bytes(pkts[i]) == make_frame(pkts[i]->pkt_len, seed));
    const bool should_lend = pkts[i]->pkt_len >= 256;
    CHECK(ZeroCopyDevice::lent(pkts[i]) == should_lend);
    if (should_lend) {
      // The head is ours (headers copied, direct), the payload the guest's buffer.
      CHECK(RTE_MBUF_DIRECT(pkts[i]));
      CHECK(pkts[i]->data_len == kZeroCopyHeadLen);
    }
  }
  CHECK(dev.txq.stats().zero_copy_packets == 4);
  CHECK(dev.txq.stats().zero_copy_copied == 4);
  CHECK(dev.txq.stats().zero_copy_limit_copies == 0);
  CHECK_FALSE(dev.last_dequeue.lending_full);  // copied for their length, not for the limit
  CHECK(dev.tracker.in_flight() == 4);
  // Only the copies' chains are back with the guest.
  CHECK(dev.tx.take_used().size() == 4);

  // Freed in another order than lent: each chain comes back once, with the next burst (which
  // finds nothing new to take).
  for (size_t i : {7u, 4u, 3u, 5u}) dev.release(pkts[i]);
  CHECK(dev.tracker.completions_waiting());
  CHECK(dev.dequeue().empty());
  const auto used = dev.tx.take_used();
  CHECK(used.size() == 4);
  for (const VringUsedElem& u : used) CHECK(u.len == 0);
  CHECK(dev.tracker.in_flight() == 0);
  CHECK_FALSE(dev.tracker.completions_waiting());
}

TEST_CASE("zero-copy: a chain returns only when the last of its mbufs is freed") {
  ZeroCopyDevice dev;
  TxLayout layout;
  layout.separate_header = true;
  layout.data_pieces = 4;
  dev.send(1, 3000, 5, layout);
  auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 1);
  rte_mbuf* m = pkts[0];
  CHECK(mbuf_bytes(m) == make_frame(3000, 5));
  // The head, then one external segment per data descriptor (the header descriptor is not part
  // of the packet).
  REQUIRE(m->nb_segs == 5);
  std::vector<rte_mbuf*> segs;
  for (rte_mbuf* s = m; s != nullptr; s = s->next) segs.push_back(s);
  for (auto& h : dev.held) h = nullptr;  // freed segment by segment below
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    segs[i]->next = nullptr;
    rte_pktmbuf_free_seg(segs[i]);
    CHECK(dev.dequeue().empty());
    CHECK(dev.tx.take_used().empty());
  }
  rte_pktmbuf_free_seg(segs.back());
  CHECK(dev.dequeue().empty());
  CHECK(dev.tx.take_used().size() == 1);
}

TEST_CASE("zero-copy: buffers crossing guest memory regions are lent piece by piece") {
  ZeroCopyDevice dev;
  TxLayout layout;
  layout.cross_region = true;
  dev.send(1, 4000, 9, layout);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 1);
  CHECK(ZeroCopyDevice::lent(pkts[0]));
  CHECK(pkts[0]->nb_segs >= 3);  // head, then at least a piece in each region
  CHECK(mbuf_bytes(pkts[0]) == make_frame(4000, 9));
}

TEST_CASE("zero-copy: an offload request whose headers reach past the copied head is copied",
          "[split]") {
  // The device rewrites what a request names (checksum fields, headers of segments); that must
  // be in the copied head, never in the guest's buffer.
  const struct {
    uint8_t flags;
    uint16_t csum_start;
    uint16_t csum_offset;
    uint8_t gso_type;
    bool lent;
    bool dropped = false;
  } cases[] = {
      {0, 0, 0, kNetHdrGsoNone, true},                     // no request
      {kNetHdrFNeedsCsum, 34, 16, kNetHdrGsoNone, true},   // IPv4/TCP
      {kNetHdrFNeedsCsum, 68, 16, kNetHdrGsoNone, true},   // a 60-byte TCP header still fits
      {kNetHdrFNeedsCsum, 69, 16, kNetHdrGsoNone, false},  // it would not
      {kNetHdrFNeedsCsum, 34, 92, kNetHdrGsoNone, true},   // field in the head's last two bytes
      {kNetHdrFNeedsCsum, 34, 94, kNetHdrGsoNone, false},  // field past the head
      // Segmentation without a checksum start: copied, then dropped as a bad request.
      {0, 0, 0, kNetHdrGsoTcpv4, false, true},
  };
  for (const auto& c : cases) {
    INFO("flags " << int(c.flags) << " csum_start " << c.csum_start << " csum_offset "
                  << c.csum_offset << " gso " << int(c.gso_type));
    ZeroCopyDevice dev;
    SimPacket p;
    p.data = make_frame(1000, 7);
    p.hdr.hdr.flags = c.flags;
    p.hdr.hdr.csum_start = c.csum_start;
    p.hdr.hdr.csum_offset = c.csum_offset;
    p.hdr.hdr.gso_type = c.gso_type;
    p.hdr.hdr.gso_size = c.gso_type != kNetHdrGsoNone ? 500 : 0;
    const uint16_t head = dev.tx.send(p);
    REQUIRE(head != UINT16_MAX);
    const VringDesc d = dev.tx.desc(head);
    const std::vector<uint8_t> before(dev.tx.memory().host(d.addr, d.len),
                                      dev.tx.memory().host(d.addr, d.len) + d.len);
    const auto pkts = dev.dequeue();
    CHECK(dev.txq.stats().dropped(DropReason::kBadOffloadRequest) == (c.dropped ? 1u : 0u));
    if (c.dropped) {
      CHECK(pkts.empty());
      CHECK(dev.tx.take_used().size() == 1);
      continue;
    }
    REQUIRE(pkts.size() == 1);
    CHECK(ZeroCopyDevice::lent(pkts[0]) == c.lent);
    CHECK(dev.txq.stats().zero_copy_packets == (c.lent ? 1u : 0u));
    CHECK(dev.txq.stats().zero_copy_copied == (c.lent ? 0u : 1u));
    CHECK(dev.txq.stats().zero_copy_limit_copies == 0);
    // Whatever was completed, it was not in the guest's buffer.
    const std::vector<uint8_t> after(dev.tx.memory().host(d.addr, d.len),
                                     dev.tx.memory().host(d.addr, d.len) + d.len);
    CHECK(after == before);
  }
}

// Issue 16, hole 1: lent chains coming back plus a full ring posted anew (a hostile guest reusing
// descriptors) make one burst stage more used entries than the ring holds: they must wrap, never
// be written past the ring's end.
TEST_CASE("zero-copy: completions plus a full ring in one burst stay inside the used ring",
          "[split]") {
  for (uint16_t ring : {uint16_t{4}, uint16_t{8}, uint16_t{16}, uint16_t{32}}) {
    for (uint16_t start :
         {uint16_t{0}, static_cast<uint16_t>(ring / 2), static_cast<uint16_t>(ring - 1)}) {
      INFO("ring " << ring << " used index at " << start);
      ZeroCopyDevice dev(ring, kDefaultZeroCopyMinLen, true, start);
      const uint16_t limit = dev.tracker.limit();
      REQUIRE(limit >= 1);
      dev.send(limit, 1000);
      std::vector<rte_mbuf*> lent = dev.dequeue();
      REQUIRE(lent.size() == limit);
      REQUIRE(dev.tracker.in_flight() == limit);
      // The guest fills its avail ring with short packets: the free descriptors, then one of
      // them again for the entries it has no descriptors for.
      std::vector<uint16_t> heads;
      for (int i = 0; i < ring - limit; ++i) {
        SimPacket p;
        p.data = make_frame(100, static_cast<uint32_t>(i));
        heads.push_back(dev.tx.send(p, {}, false));
        REQUIRE(heads.back() != UINT16_MAX);
      }
      for (int i = 0; i < limit; ++i) dev.tx.post_head(heads[0]);
      dev.tx.publish();
      // Canary: what follows the used ring (and its avail_event), as far as an overrun reaches.
      auto* after = reinterpret_cast<uint8_t*>(&dev.tx.setup().addrs.used->ring[ring]) + 2;
      const size_t canary = 8u * (limit + 1);
      std::memset(after, 0xa5, canary);
      const std::vector<uint8_t> before(after, after + canary);
      for (rte_mbuf* m : lent) dev.release(m);
      // The guest claims a full ring while `limit` chains were lent when the burst began: the
      // burst takes ring - limit of them, so its used entries (completions included) stay within
      // the ring's size; the rest wait for the next burst.
      const auto pkts = dev.dequeue(ring);
      CHECK(pkts.size() == static_cast<size_t>(ring - limit));
      CHECK(std::vector<uint8_t>(after, after + canary) == before);
      CHECK(dev.tx.used_idx() == static_cast<uint16_t>(start + ring));
      CHECK(dev.tracker.in_flight() == 0);
      CHECK(dev.dequeue(ring).size() == limit);
      CHECK(dev.tx.used_idx() == static_cast<uint16_t>(start + ring + limit));
    }
  }
}

TEST_CASE("zero-copy: never more than min(128, ring/4) in flight; beyond it packets are copied") {
  for (uint16_t ring : {uint16_t{64}, uint16_t{256}, uint16_t{1024}}) {
    INFO("ring " << ring);
    ZeroCopyDevice dev(ring);
    const uint16_t limit = std::min<uint16_t>(128, ring / 4);
    CHECK(dev.tracker.limit() == limit);
    // A consumer that frees nothing: the guest keeps sending, all of it flows.
    uint32_t taken = 0;
    for (int round = 0; round < 4; ++round) {
      dev.send(ring / 2, 600, static_cast<uint32_t>(round * 1000));
      const auto pkts = dev.dequeue(ring);
      CHECK(pkts.size() == ring / 2u);
      CHECK(dev.last_dequeue.lending_full);  // copies for the limit, reported
      taken += static_cast<uint32_t>(pkts.size());
      CHECK(dev.tracker.in_flight() == limit);
      dev.tx.take_used();  // the copies come back at once
    }
    CHECK(dev.txq.stats().zero_copy_packets == limit);
    CHECK(dev.txq.stats().zero_copy_copied == taken - limit);
    CHECK(dev.txq.stats().zero_copy_limit_copies == taken - limit);
    // Once released, lending resumes.
    dev.free_all();
    dev.send(4, 600);
    CHECK(dev.dequeue().size() == 4);
    CHECK_FALSE(dev.last_dequeue.lending_full);
    CHECK(dev.txq.stats().zero_copy_packets == limit + 4u);
  }
}

TEST_CASE("zero-copy without the copy fallback (benchmarks): at the limit the ring waits") {
  ZeroCopyDevice dev(64, kDefaultZeroCopyMinLen, false);  // limit 16
  const unsigned pool_before = rte_mempool_avail_count(test_pool());
  dev.send(20, 600);
  dev.send(4, 64, 100);  // short ones behind them, copied when their turn comes
  auto pkts = dev.dequeue(256);
  // The 17th large packet finds no slot: it and everything behind it stay in the ring, and the
  // owner hears of it (it asks lazy NIC tx queues to free what they hold).
  CHECK(pkts.size() == 16);
  CHECK(dev.last_dequeue.lending_full);
  CHECK(dev.tracker.in_flight() == 16);
  CHECK(dev.txq.stats().zero_copy_limit_waits == 1);
  CHECK(dev.txq.stats().zero_copy_limit_copies == 0);
  CHECK(dev.dequeue(256).empty());
  CHECK(dev.txq.stats().zero_copy_limit_waits == 2);
  // Two chains come back: two more are lent, the ring still waits behind the third.
  dev.release(pkts[0]);
  dev.release(pkts[1]);
  const auto next = dev.dequeue(256);
  CHECK(next.size() == 2);
  for (rte_mbuf* m : next) CHECK(ZeroCopyDevice::lent(m));
  // All back: the rest flows, the short ones copied.
  dev.free_all();
  const auto rest = dev.dequeue(256);
  REQUIRE(rest.size() == 6);
  for (size_t i = 0; i < 2; ++i) CHECK(ZeroCopyDevice::lent(rest[i]));
  for (size_t i = 2; i < 6; ++i) {
    CHECK_FALSE(ZeroCopyDevice::lent(rest[i]));
    CHECK(mbuf_bytes(rest[i]) == make_frame(64, 100 + static_cast<uint32_t>(i - 2)));
  }
  CHECK(dev.txq.stats().zero_copy_copied == 4);
  dev.free_all();
  CHECK(rte_mempool_avail_count(test_pool()) == pool_before);  // no mbuf kept by a wait
}

TEST_CASE("zero-copy without the copy fallback: a ring too small to lend from still flows") {
  ZeroCopyDevice dev(2, kDefaultZeroCopyMinLen, false);  // limit min(128, 2 / 4) = 0
  REQUIRE(dev.tracker.limit() == 0);
  for (int round = 0; round < 3; ++round) {
    dev.send(2, 600, static_cast<uint32_t>(10 * round));
    const auto pkts = dev.dequeue(256);
    REQUIRE(pkts.size() == 2);  // copied: no lent chain could ever end a wait
    for (rte_mbuf* m : pkts) CHECK_FALSE(ZeroCopyDevice::lent(m));
    dev.tx.take_used();
  }
  CHECK(dev.txq.stats().zero_copy_limit_waits == 0);
  CHECK(dev.txq.stats().zero_copy_limit_copies == 6);
}

TEST_CASE("zero-copy: a copy forced by the limit is counted once, when it is made") {
  ZeroCopyDevice dev(64);  // limit 16
  dev.send(16, 600);
  REQUIRE(dev.dequeue().size() == 16);
  REQUIRE(dev.tracker.in_flight() == 16);
  // At the limit, a packet needing two mbufs from a pool that has one: it waits in the ring.
  rte_mempool* pool = small_pool(4);
  std::vector<rte_mbuf*> held(3);
  REQUIRE(rte_pktmbuf_alloc_bulk(pool, held.data(), 3) == 0);
  dev.send(1, 3000, 100);
  for (int attempt = 0; attempt < 3; ++attempt) CHECK(dev.dequeue(256, kNoByteLimit, pool).empty());
  CHECK(dev.txq.stats().zero_copy_limit_copies == 0);
  CHECK(dev.txq.stats().mbuf_alloc_failures == 3);
  // Once mbufs are back, it is copied and counted once.
  rte_pktmbuf_free_bulk(held.data(), 3);
  const auto pkts = dev.dequeue(256, kNoByteLimit, pool);
  REQUIRE(pkts.size() == 1);
  CHECK(pkts[0]->nb_segs == 2);
  CHECK(!ZeroCopyDevice::lent(pkts[0]));
  CHECK(dev.txq.stats().zero_copy_limit_copies == 1);
  CHECK(dev.txq.stats().zero_copy_copied == 1);
  dev.free_all();
  rte_mempool_free(pool);
}

TEST_CASE("zero-copy: completions from another thread in random order; each chain back once") {
  ZeroCopyDevice dev(1024);
  std::atomic<bool> done{false};
  std::vector<rte_mbuf*> handed;
  std::mutex handed_mutex;
  // The consumer: frees what it is handed, shuffled, from its own thread.
  std::thread consumer([&] {
    std::mt19937 rng(7);
    while (true) {
      std::vector<rte_mbuf*> batch;
      {
        std::lock_guard lock(handed_mutex);
        batch.swap(handed);
      }
      if (batch.empty()) {
        if (done.load()) break;
        std::this_thread::yield();
        continue;
      }
      std::shuffle(batch.begin(), batch.end(), rng);
      for (rte_mbuf* m : batch) rte_pktmbuf_free(m);
    }
  });
  std::multiset<uint16_t> returned;
  uint32_t sent = 0;
  for (int round = 0; round < 200; ++round) {
    if (dev.tx.free_descs() >= 64) {
      dev.send(32, 300 + round % 700, static_cast<uint32_t>(round));
      sent += 32;
    }
    auto pkts = dev.dequeue(64);
    CHECK(dev.tracker.in_flight() <= dev.tracker.limit());
    dev.held.clear();  // the consumer owns them now
    {
      std::lock_guard lock(handed_mutex);
      handed.insert(handed.end(), pkts.begin(), pkts.end());
    }
    for (const VringUsedElem& u : dev.tx.take_used()) returned.insert(static_cast<uint16_t>(u.id));
  }
  done.store(true);
  consumer.join();
  // Whatever completed after the last burst comes back with the next ones.
  for (int i = 0; i < 3; ++i) {
    dev.dequeue();
    for (const VringUsedElem& u : dev.tx.take_used()) returned.insert(static_cast<uint16_t>(u.id));
  }
  CHECK(returned.size() == sent);
  // Slots were reused: more were lent than the limit allows at once.
  CHECK(dev.txq.stats().zero_copy_packets > dev.tracker.limit());
  CHECK(dev.tracker.in_flight() == 0);
  CHECK(dev.tx.free_descs() == 1024);  // every descriptor is the guest's again
}

TEST_CASE("zero-copy: chains still lent when the ring stops are orphaned, never returned to it") {
  ZeroCopyDevice dev;
  dev.send(3, 1000);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 3);
  dev.txq.stop();
  dev.tracker.orphan_lent();
  dev.free_all();
  CHECK(dev.tracker.completions_waiting());
  dev.tracker.reap_orphans_only();
  CHECK(dev.tracker.in_flight() == 0);
  CHECK(dev.tracker.orphans_reaped() == 3);
  CHECK(dev.tx.take_used().empty());
}

namespace {

// Whether `fd` is readable now; if so, reads it and returns its count in *count.
bool readable(int fd, uint64_t* count) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return false;
  eventfd_t value = 0;
  REQUIRE(eventfd_read(fd, &value) == 0);
  *count = value;
  return true;
}

}  // namespace

TEST_CASE("zero-copy: an armed owner is woken once by the first completion, from any thread") {
  ZeroCopyDevice dev;
  const int fd = dev.tracker.wake_fd();
  REQUIRE(fd >= 0);
  CHECK(dev.tracker.wake_fd() == fd);  // one fd for the tracker's life
  uint64_t count = 0;
  dev.send(8, 1000);
  std::vector<rte_mbuf*> pkts = dev.dequeue();
  REQUIRE(pkts.size() == 8);
  dev.held.clear();  // freed below
  // Not armed (the owner polls): completions are reaped by its bursts, no wake-up.
  rte_pktmbuf_free(pkts[0]);
  CHECK_FALSE(readable(fd, &count));
  dev.dequeue();
  CHECK(dev.tracker.in_flight() == 7);
  // Armed with nothing waiting: asleep until another thread frees; its first free writes once.
  dev.tracker.arm_wake(true);
  CHECK_FALSE(readable(fd, &count));
  std::thread([&pkts] {
    for (int i = 1; i < 5; ++i) rte_pktmbuf_free(pkts[i]);
  }).join();
  REQUIRE(readable(fd, &count));
  CHECK(count == 1);
  CHECK(dev.tracker.wakes() == 1);
  dev.tracker.arm_wake(false);
  dev.dequeue();
  CHECK(dev.tracker.in_flight() == 3);
  // Armed with a completion already waiting: written at once, so the owner does not sleep.
  rte_pktmbuf_free(pkts[5]);
  dev.tracker.arm_wake(true);
  REQUIRE(readable(fd, &count));
  CHECK(count == 1);
  // Disarmed after waking: later completions write nothing, and arming again drains a stale
  // write (here one left on purpose) before it looks.
  dev.tracker.arm_wake(false);
  rte_pktmbuf_free(pkts[6]);
  CHECK_FALSE(readable(fd, &count));
  dev.dequeue();
  REQUIRE(eventfd_write(fd, 1) == 0);
  dev.tracker.arm_wake(true);
  CHECK_FALSE(readable(fd, &count));
  rte_pktmbuf_free(pkts[7]);
  CHECK(readable(fd, &count));
  dev.tracker.arm_wake(false);
  dev.dequeue();
  CHECK(dev.tracker.in_flight() == 0);
  CHECK(dev.tracker.wakes() == 3);
}

TEST_CASE("zero-copy: a completion racing the owner's arming is never slept through") {
  // The owner arms while another thread frees the chain's mbuf: either the owner sees the
  // completion when it arms, or the completer sees it armed. In both cases the fd is written.
  ZeroCopyDevice dev;
  const int fd = dev.tracker.wake_fd();
  REQUIRE(fd >= 0);
  int missed = 0;
  for (int round = 0; round < 2000; ++round) {
    dev.send(1, 1000, static_cast<uint32_t>(round));
    std::vector<rte_mbuf*> pkts = dev.dequeue();
    REQUIRE(pkts.size() == 1);
    dev.held.clear();
    std::atomic<bool> go{false};
    std::thread completer([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      rte_pktmbuf_free(pkts[0]);
    });
    go.store(true, std::memory_order_release);
    dev.tracker.arm_wake(true);
    completer.join();
    uint64_t count = 0;
    if (!readable(fd, &count)) ++missed;
    dev.tracker.arm_wake(false);
    dev.dequeue();  // reaps it
    CHECK(dev.tx.take_used().size() == 1);
  }
  CHECK(missed == 0);
  CHECK(dev.tracker.in_flight() == 0);
}

TEST_CASE("zero-copy: a device's tracker is reused, never freed, and comes back as new") {
  // A completer may read its tracker just after the owner saw its chain back (see
  // zero_copy_tracker.h, Lifetime): the memory must stay a tracker, with its eventfd open.
  ZeroCopyTracker* first = nullptr;
  int fd = -1;
  {
    ZeroCopyTracker::Handle t = ZeroCopyTracker::acquire();
    first = t.get();
    fd = t->wake_fd();
    REQUIRE(fd >= 0);
    t->start(256);
    rte_mbuf_ext_shared_info* shinfo = t->lend(7, 1, 1);
    REQUIRE(shinfo != nullptr);
    t->orphan_lent();
    shinfo->free_cb(nullptr, shinfo->fcb_opaque);  // the chain's last mbuf freed
    t->arm_wake(true);                             // a completion waits: wakes at once
    t->reap_orphans_only();
    CHECK(t->in_flight() == 0);
    CHECK(t->orphans_reaped() == 1);
    CHECK(t->wakes() == 1);
  }
  ZeroCopyTracker::Handle again = ZeroCopyTracker::acquire();
  CHECK(again.get() == first);
  CHECK(again->wake_fd() == fd);
  CHECK(fcntl(fd, F_GETFD) != -1);  // still open
  CHECK(again->in_flight() == 0);
  CHECK(again->limit() == 0);
  CHECK(again->orphans_reaped() == 0);
  CHECK(again->wakes() == 0);
  pollfd p{fd, POLLIN, 0};
  CHECK(poll(&p, 1, 0) == 0);  // the previous device's wake was drained
  CHECK_FALSE(again->completions_waiting());
  again->start(64);
  std::vector<rte_mbuf_ext_shared_info*> lent;
  for (uint16_t i = 0; i < 16; ++i) lent.push_back(again->lend(i, 1, 1));
  for (auto* shinfo : lent) CHECK(shinfo != nullptr);
  CHECK(again->lend(16, 1, 1) == nullptr);  // the new limit
  // Completed, so that the handle may give the tracker back.
  again->orphan_lent();
  for (auto* shinfo : lent)
    if (shinfo != nullptr) shinfo->free_cb(nullptr, shinfo->fcb_opaque);
  again->reap_orphans_only();
  CHECK(again->in_flight() == 0);
}

TEST_CASE("zero-copy: segmentation is asked for only with the headers in the first segment") {
  // IPv4 and TCP headers of 60 bytes each: they end at byte 134, past the 128-byte
  // head of a lent packet. rte_gso (and a NIC's TSO) read them from the first segment.
  std::vector<uint8_t> frame = make_frame(1000, 3);
  frame[12] = 0x08;
  frame[13] = 0x00;
  frame[14] = 0x4f;  // IPv4, 60-byte header
  frame[16] = static_cast<uint8_t>((1000 - 14) >> 8);
  frame[17] = static_cast<uint8_t>(1000 - 14);
  frame[20] = frame[21] = 0;  // not a fragment
  frame[23] = 6;              // TCP
  frame[74 + 12] = 0xf0;      // 60-byte TCP header
  const struct {
    uint16_t csum_start;
    bool lent;
    bool segmentation;
  } cases[] = {
      {34, true, false},  // a guest that misstates csum_start to have it lent: lent, dropped
      {74, false, true},  // the true one: copied (the headers pass the head), cut
  };
  for (const auto& c : cases) {
    INFO("csum_start " << c.csum_start);
    ZeroCopyDevice dev;
    SimPacket p;
    p.data = frame;
    p.hdr.hdr.flags = kNetHdrFNeedsCsum;
    p.hdr.hdr.csum_start = c.csum_start;
    p.hdr.hdr.csum_offset = 16;
    p.hdr.hdr.gso_type = kNetHdrGsoTcpv4;
    p.hdr.hdr.gso_size = 300;
    REQUIRE(dev.tx.send(p) != UINT16_MAX);
    const auto pkts = dev.dequeue();
    if (c.lent) {
      // Lent, then refused (csum_start is not where TCP starts): the mbuf is freed at once, the
      // chain goes back to the guest with the next burst, the drop is counted.
      CHECK(pkts.empty());
      CHECK(dev.txq.stats().zero_copy_packets == 0);
      CHECK(dev.txq.stats().dropped(DropReason::kBadOffloadRequest) == 1);
      CHECK(dev.dequeue().empty());
      CHECK(dev.tracker.in_flight() == 0);
      CHECK(dev.tx.take_used().size() == 1);
      continue;
    }
    REQUIRE(pkts.size() == 1);
    CHECK(((pkts[0]->ol_flags & RTE_MBUF_F_RX_LRO) != 0) == c.segmentation);
    if (c.segmentation) {
      CHECK(pkts[0]->l2_len + pkts[0]->l3_len + pkts[0]->l4_len == 134);
      CHECK(pkts[0]->tso_segsz == 300);
    }
  }
}

// Found by the soak test (ASan build): a lent packet's payload is guest memory, and a hostile guest
// may post a receive buffer overlapping it; the copy into it then had overlapping source and
// destination (memcpy: undefined). The ASan build fails this test without the fix.
TEST_CASE("zero-copy: a lent packet copied into a receive buffer that overlaps it", "[split]") {
  ZeroCopyDevice dev(256);
  dev.send(1, 1000, 3);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 1);
  REQUIRE(ZeroCopyDevice::lent(pkts[0]));
  // The TX buffer's guest address: the lent segment's data, located in guest memory.
  const VringDesc tx_desc = dev.tx.desc(0);
  // An RX buffer starting 64 bytes into the TX buffer: the packet written there overlaps its
  // source, the lent payload.
  const uint16_t d = dev.rx.alloc_desc();
  dev.rx.desc(d) = VringDesc{tx_desc.addr + 64, 2048, kVringDescFWrite, 0};
  dev.rx.post_head(d);
  dev.rx.publish();
  const BurstResult r = enqueue_burst(dev.rxq, pkts.data(), 1);
  CHECK(r.packets == 1);
  CHECK(dev.rxq.stats().packets == 1);
  dev.release(pkts[0]);  // what arrived is the guest's own business: it overwrote its packet
}

// Live migration: a lent chain goes back to the guest when its mbufs are freed, bursts later; the
// used entry written then is logged like any other.
TEST_CASE("zero-copy: a lent chain's used entry, written when it completes, is logged") {
  // Split rings report used-ring writes by offset; packed ones every write by address, which
  // must then lie in the descriptor ring (guest TX buffers are only read).
  struct UsedLog final : DirtyLog {
    void guest_written(uint64_t gpa, uint64_t len) override {
      if (gpa >= ring_start && gpa + len <= ring_end)
        ++used;
      else if (gpa == event && len == sizeof(VringPackedEvent))
        ++events;
      else
        ++guest;
    }
    void used_written(uint64_t, uint64_t) override { ++used; }
    uint64_t ring_start = 0, ring_end = 0, event = 0;
    int events = 0;
    int guest = 0;
    int used = 0;
  } log;
  ZeroCopyDevice dev;
  dev.txq.stop();
  VirtQueue::Setup setup = dev.tx.setup();
  setup.dirty_log = &log;
  if (dev.tx.packed()) {
    REQUIRE(dev.mem.table().guest_phys_of(reinterpret_cast<const uint8_t*>(setup.packed_addrs.desc),
                                          &log.ring_start));
    log.ring_end = log.ring_start + 16ull * setup.packed_addrs.size;
    REQUIRE(dev.mem.table().guest_phys_of(
        reinterpret_cast<const uint8_t*>(setup.packed_addrs.device_event), &log.event));
  }
  REQUIRE(dev.txq.start(setup));
  dev.send(4, 1000);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 4);
  for (const rte_mbuf* m : pkts) REQUIRE(ZeroCopyDevice::lent(m));
  const int used_at_lending = log.used;
  CHECK(dev.tx.take_used().empty());
  for (rte_mbuf* m : pkts) dev.release(m);
  CHECK(dev.dequeue().empty());  // reaps the completions
  CHECK(dev.tx.take_used().size() == 4);
  CHECK(log.used > used_at_lending);
  CHECK(log.guest == 0);  // guest TX buffers are only read
}

// A packed ring resumes from one base for both positions: a ring stopping for good with chains
// still lent writes their used entries first (VhostDevice::return_lent_locked).
TEST_CASE("zero-copy: a packed ring stopping for good gives its lent chains back, once") {
  ZeroCopyDevice dev;
  if (!dev.txq.packed()) return;  // packed rings only: datapath_packed runs it
  dev.send(4, 1000);
  dev.send(1, 100, 10);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 5);
  CHECK(dev.tx.take_used().size() == 1);  // the copied one
  CHECK(dev.tracker.in_flight() == 4);
  const uint16_t before = dev.txq.used_token();
  CHECK(dev.tracker.give_back_lent(dev.txq.packed_ring()) == 4);
  CHECK(dev.tracker.give_back_lent(dev.txq.packed_ring()) == 0);  // orphans now
  dev.txq.complete_burst(before);
  CHECK(dev.txq.used_base() == dev.txq.avail_base());
  CHECK(dev.tx.take_used().size() == 4);
  // Their mbufs complete later: freed, never returned a second time.
  dev.free_all();
  CHECK(dev.dequeue().empty());
  CHECK(dev.tx.take_used().empty());
  CHECK(dev.tracker.in_flight() == 0);
}

// A packed ring's lent chain holds each of its descriptors' slots: what is lent is bounded in
// slots as well (a quarter of the ring), so chains of many descriptors cannot hold it all.
TEST_CASE("zero-copy: on a packed ring, lent chains hold at most a quarter of the slots") {
  ZeroCopyDevice dev(256);
  if (!dev.txq.packed()) return;  // packed rings only: datapath_packed runs it
  TxLayout layout;
  layout.data_pieces = 8;  // 8 slots a chain
  dev.send(20, 1400, 0, layout);
  const auto pkts = dev.dequeue();
  REQUIRE(pkts.size() == 20);
  CHECK(dev.tracker.in_flight() == 256 / 4 / 8);  // 8 chains of 8 slots
  CHECK(dev.txq.stats().zero_copy_packets == 8);
  CHECK(dev.txq.stats().zero_copy_limit_copies == 12);
  CHECK(dev.tx.take_used().size() == 12);
  dev.free_all();
  CHECK(dev.dequeue().empty());
  CHECK(dev.tx.take_used().size() == 8);
  CHECK(dev.tracker.in_flight() == 0);
  dev.send(8, 1400, 100, layout);  // the slots are lendable again
  CHECK(dev.dequeue().size() == 8);
  CHECK(dev.tracker.in_flight() == 8);
}
