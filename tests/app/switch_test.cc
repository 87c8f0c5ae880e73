// Tx buffers, weighted polling and the lcore loop (xconnect), over fake ports.
#include <rte_mbuf.h>

#include <catch2/catch.hpp>
#include <memory>

#include "fake_port.h"
#include "lcore_loop.h"
#include "tx_buffer.h"
#include "weighted_poller.h"

namespace vqs::app::test {
namespace {

class Pool {
 public:
  explicit Pool(unsigned n = 8191) {
    static int serial = 0;
    const std::string name = "switch_test_" + std::to_string(serial++);
    pool_ = rte_pktmbuf_pool_create(name.c_str(), n, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    REQUIRE(pool_ != nullptr);
  }
  ~Pool() { rte_mempool_free(pool_); }
  rte_mempool* get() const { return pool_; }
  unsigned available() const { return rte_mempool_avail_count(pool_); }
  rte_mbuf* packet(uint16_t len, uint8_t fill = 0) const {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    REQUIRE(m != nullptr);
    memset(rte_pktmbuf_append(m, len), fill, len);
    return m;
  }

 private:
  rte_mempool* pool_;
};

TxBufferSet one_output(Port* port, uint32_t retries_max = 8, uint16_t burst = 32) {
  TxBufferSet::Output out;
  out.port = port;
  out.retries_max = retries_max;
  return TxBufferSet({out}, burst);
}

TEST_CASE("tx buffer flushes when full and on demand, counting bytes") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort port("p", 0, 1, 1, false);
    TxBufferSet tx = one_output(&port, 8, 4);
    for (int i = 0; i < 3; ++i) tx.push(0, pool.packet(100));
    CHECK(port.sent(0).empty());
    tx.push(0, pool.packet(100));  // the fourth fills the burst
    CHECK(port.sent(0).size() == 4);
    tx.push(0, pool.packet(60));
    tx.flush();
    CHECK(port.sent(0).size() == 5);
    CHECK(port.tx_counters(0).tx_packets == 5);
    CHECK(port.tx_counters(0).tx_bytes == 460);
    tx.flush();  // nothing pending: no-op
    CHECK(port.sent(0).size() == 5);
  }
  CHECK(pool.available() == full);
}

TEST_CASE("a full guest queue is retried while it takes packets, then the rest is counted") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort guest("vm", 0, 1, 1, true);
    guest.tx_capacity = 10;
    TxBufferSet tx = one_output(&guest, 8);
    for (int i = 0; i < 32; ++i) tx.push(0, pool.packet(64));
    tx.flush();
    CHECK(guest.sent(0).size() == 10);
    const PortQueueCounters& c = guest.tx_counters(0);
    CHECK(c.tx_packets == 10);
    CHECK(c.drops[static_cast<int>(SwitchDrop::kTxGuestFull)] == 22);
    CHECK(c.tx_retries == 1);  // one retry found the queue still full: no more
  }
  CHECK(pool.available() == full);
}

TEST_CASE("a full NIC queue counts tx_queue_full; a port that is down counts link_down") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort nic("nic", 0, 1, 1, false);
    nic.tx_capacity = 0;
    TxBufferSet tx = one_output(&nic, 0);
    for (int i = 0; i < 5; ++i) tx.push(0, pool.packet(64));
    tx.flush();
    CHECK(nic.tx_counters(0).drops[static_cast<int>(SwitchDrop::kTxQueueFull)] == 5);
    CHECK(nic.tx_counters(0).tx_retries == 0);
    nic.up = false;
    nic.tx_capacity = UINT32_MAX;
    for (int i = 0; i < 3; ++i) tx.push(0, pool.packet(64));
    tx.flush();
    CHECK(nic.tx_counters(0).drops[static_cast<int>(SwitchDrop::kLinkDown)] == 3);
    CHECK(nic.sent(0).empty());
  }
  CHECK(pool.available() == full);
}

// A port whose queue takes `per_call` packets per tx burst: each retry makes progress.
TEST_CASE("retries stop at tx_retries_max") {
  Pool pool;
  const unsigned full = pool.available();
  {
    class Trickle final : public Port {
     public:
      Trickle() : Port("trickle", 0) { init_queues(1, 1); }
      bool is_guest() const override { return true; }
      uint16_t rx_queue_count() const override { return 1; }
      uint16_t tx_queue_count() const override { return 1; }
      bool link_up() const override { return true; }
      uint16_t rx_ring_size(uint16_t) const override { return 0; }
      BurstResult rx_burst(uint16_t, rte_mbuf**, uint16_t, uint32_t) override { return {}; }
      uint16_t tx_burst(uint16_t, rte_mbuf** pkts, uint16_t count) override {
        const uint16_t n = count < 2 ? count : 2;
        rte_pktmbuf_free_bulk(pkts, n);
        calls++;
        return n;
      }
      bool tx_ready(uint16_t) const override { return true; }
      bool watch_rx_wake(uint16_t, int, bool, void*) override { return false; }
      bool arm_rx_wake(uint16_t, bool) override { return false; }
      int calls = 0;
    } port;
    TxBufferSet tx = one_output(&port, 3);
    for (int i = 0; i < 32; ++i) tx.push(0, pool.packet(64));
    tx.flush();
    CHECK(port.calls == 4);  // the first try and 3 retries
    CHECK(port.tx_counters(0).tx_packets == 8);
    CHECK(port.tx_counters(0).tx_retries == 3);
    CHECK(port.tx_counters(0).drops[static_cast<int>(SwitchDrop::kTxGuestFull)] == 24);
  }
  CHECK(pool.available() == full);
}

// Serves two always-full queues for `rounds` rounds; returns packets and bytes each delivered.
struct Shares {
  double packets[2];
  double bytes[2];
};
Shares serve_overloaded(Pool& pool, Weight w0, Weight w1, uint16_t len0, uint16_t len1,
                        int rounds) {
  FakePort a("a", 0, 1, 1, true), b("b", 1, 1, 1, true);
  a.generate(0, pool.get(), len0);
  b.generate(0, pool.get(), len1);
  std::vector<RxSlot> slots(2);
  slots[0].port = &a;
  slots[0].weight = w0;
  slots[1].port = &b;
  slots[1].weight = w1;
  WeightedPoller poller(std::move(slots), 32);
  for (int r = 0; r < rounds; ++r)
    for (RxSlot& s : poller.slots())
      poller.visit(s, [](RxSlot&, rte_mbuf** pkts, uint16_t n) { rte_pktmbuf_free_bulk(pkts, n); });
  const double p = a.rx_counters(0).rx_packets + b.rx_counters(0).rx_packets;
  const double by = a.rx_counters(0).rx_bytes + b.rx_counters(0).rx_bytes;
  for (const RxSlot& s : poller.slots()) {
    CHECK(s.visits_ended_by_weight == static_cast<uint64_t>(rounds));
    CHECK(s.visits_ended_empty == 0);
  }
  return {{a.rx_counters(0).rx_packets / p, b.rx_counters(0).rx_packets / p},
          {a.rx_counters(0).rx_bytes / by, b.rx_counters(0).rx_bytes / by}};
}

TEST_CASE("under overload, packet weights set each queue's share of packets") {
  Pool pool;
  const Shares s = serve_overloaded(pool, {64, 1 << 30}, {192, 1 << 30}, 64, 64, 200);
  CHECK(s.packets[0] == Approx(0.25).epsilon(0.10));
  CHECK(s.packets[1] == Approx(0.75).epsilon(0.10));
}

TEST_CASE("under overload, byte weights set each queue's share of bytes, whatever the sizes") {
  Pool pool;
  // Queue a sends 1500-byte packets, b 64-byte ones; byte weights 2:1.
  const Shares s = serve_overloaded(pool, {65536, 64 << 10}, {65536, 32 << 10}, 1500, 64, 300);
  CHECK(s.bytes[0] == Approx(2.0 / 3).epsilon(0.10));
  CHECK(s.bytes[1] == Approx(1.0 / 3).epsilon(0.10));
}

TEST_CASE("a flood of small packets cannot starve a queue of large ones (packet weight)") {
  Pool pool;
  // Equal weights: the byte weight would give b (64 B) 23x the packets of a (1500 B); the packet
  // weight caps b's visits first.
  const Shares s = serve_overloaded(pool, {128, 512 << 10}, {128, 512 << 10}, 1500, 64, 200);
  CHECK(s.packets[0] == Approx(0.5).epsilon(0.10));
  CHECK(s.packets[1] == Approx(0.5).epsilon(0.10));
}

TEST_CASE("a visit ends on an empty queue and forgets its byte debt") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort a("a", 0, 1, 1, true);
    for (int i = 0; i < 10; ++i) a.inject(0, pool.packet(1000));
    std::vector<RxSlot> slots(1);
    slots[0].port = &a;
    slots[0].weight = {64, 4000};  // 4 packets cross the byte weight (4000 B, owed 0)
    WeightedPoller poller(std::move(slots), 32);
    auto drop = [](RxSlot&, rte_mbuf** pkts, uint16_t n) { rte_pktmbuf_free_bulk(pkts, n); };
    RxSlot& slot = poller.slots()[0];
    CHECK(poller.visit(slot, drop) == 4);
    CHECK(slot.visits_ended_by_weight == 1);
    CHECK(poller.visit(slot, drop) == 4);
    CHECK(poller.visit(slot, drop) == 2);
    CHECK(slot.visits_ended_empty == 1);
    CHECK(slot.byte_debt == 0);
    CHECK(poller.visit(slot, drop) == 0);
    CHECK(slot.visits_ended_empty == 2);
  }
  CHECK(pool.available() == full);
}

TEST_CASE("xconnect lcore loop forwards both ways and counts unrouted input") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort a("a", 0, 1, 1, true), b("b", 1, 1, 1, false), c("c", 2, 1, 1, false);
    for (int i = 0; i < 40; ++i) a.inject(0, pool.packet(64, 0xa));
    for (int i = 0; i < 7; ++i) b.inject(0, pool.packet(128, 0xb));
    for (int i = 0; i < 3; ++i) c.inject(0, pool.packet(64, 0xc));
    Forwarding forwarding;
    forwarding.xconnect_peer = {1, 0, -1};
    std::vector<RxSlot> rx(3);
    rx[0].port = &a;
    rx[1].port = &b;
    rx[2].port = &c;
    std::vector<TxBufferSet::Output> outs(3);
    outs[0].port = &a;
    outs[1].port = &b;
    outs[2].port = &c;
    LcoreLoop loop(0, 0, std::move(rx), TxBufferSet(std::move(outs), 32), &forwarding, std::nullopt,
                   32);
    CHECK(loop.poll_once(0) == 50);
    CHECK(b.sent(0).size() == 40);
    CHECK(a.sent(0).size() == 7);
    CHECK(*rte_pktmbuf_mtod(a.sent(0)[0], uint8_t*) == 0xb);
    CHECK(c.rx_counters(0).drops[static_cast<int>(SwitchDrop::kNoRoute)] == 3);
    CHECK(loop.poll_once(0) == 0);
  }
  CHECK(pool.available() == full);
}

}  // namespace
}  // namespace vqs::app::test
