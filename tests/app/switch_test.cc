// SPDX-License-Identifier: BSD-3-Clause
// Tx buffers, weighted polling and the lcore loop (xconnect), over fake ports.
#include <rte_bus_vdev.h>
#include <rte_eth_ring.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include "core/lcore_loop.h"
#include "core/rxq_balance.h"
#include "core/weighted_poller.h"
#include "counting_dma_vdev.h"
#include "datapath/eal_dma_registrar.h"
#include "fake_port.h"
#include "ports/ethdev_port.h"
#include "ports/tx_buffer.h"
#include "ring_tx_offloads.h"

namespace vqs::app::test {
namespace {

class Pool {
 public:
  explicit Pool(unsigned n = 8191, uint16_t data_room = RTE_MBUF_DEFAULT_BUF_SIZE) {
    static int serial = 0;
    const std::string name = "switch_test_" + std::to_string(serial++);
    pool_ = rte_pktmbuf_pool_create(name.c_str(), n, 0, 0, data_room, 0);
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

// An EthdevPort "nic" on the net_ring device created by rte_eth_from_rings(`name`, ...).
std::unique_ptr<EthdevPort> ring_ethdev_port(const std::string& name, rte_mempool* pool) {
  PortConfig config;
  config.name = "nic";
  config.type = PortType::kEthdev;
  config.device = "net_ring_" + name;
  config.rx_descriptors = config.tx_descriptors = 64;
  std::string error;
  auto port = EthdevPort::create(config, 0, 1, 32, false, pool, &error);
  INFO(error);
  REQUIRE(port != nullptr);
  return port;
}

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

// An IPv4/TCP train of `len` bytes (54 bytes of headers) asking for TSO with `mss`.
rte_mbuf* tcp_train(const Pool& pool, uint16_t len, uint16_t mss) {
  rte_mbuf* m = pool.packet(len);
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  ip->version_ihl = 0x45;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(len - 14));
  ip->next_proto_id = IPPROTO_TCP;
  reinterpret_cast<rte_tcp_hdr*>(ip + 1)->data_off = 5 << 4;
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 20;
  m->tso_segsz = mss;
  m->ol_flags =
      RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM | RTE_MBUF_F_TX_TCP_SEG;
  return m;
}

TEST_CASE("a TSO train is cut for a port without TSO; a port sharing it still gets it whole") {
  Pool pool(1023, RTE_PKTMBUF_HEADROOM + 8192);
  rte_mempool* indirect = rte_pktmbuf_pool_create("switch_test_indirect", 1023, 0, 0, 0, 0);
  REQUIRE(indirect != nullptr);
  const unsigned full = pool.available();
  {
    FakePort nic("nic", 0, 1, 1, false), guest("guest", 1, 1, 1, true);
    nic.segments_tcp = false;
    TxBufferSet::Output a, b;
    a.port = &nic;
    b.port = &guest;
    TxBufferSet tx({a, b}, 32, {pool.get(), indirect});
    PortQueueCounters input;
    tx.set_input(&input);
    rte_mbuf* m = tcp_train(pool, 54 + 4000, 1000);
    rte_mbuf_refcnt_update(m, 1);  // flooded to both
    tx.push(0, m);
    tx.push(1, m);
    tx.flush();
    REQUIRE(nic.sent(0).size() == 4);
    for (rte_mbuf* s : nic.sent(0)) {
      CHECK(s->pkt_len == 54 + 1000);
      CHECK((s->ol_flags & RTE_MBUF_F_TX_TCP_SEG) == 0);
      CHECK((s->ol_flags & RTE_MBUF_F_TX_TCP_CKSUM) != 0);  // each segment's sum still to do
    }
    REQUIRE(guest.sent(0).size() == 1);
    CHECK(guest.sent(0)[0] == m);
    CHECK((m->ol_flags & RTE_MBUF_F_TX_TCP_SEG) != 0);
    // A train that fits one segment is passed on with its checksum requests only.
    rte_mbuf* small = tcp_train(pool, 54 + 900, 1000);
    tx.push(0, small);
    tx.flush();
    REQUIRE(nic.sent(0).size() == 5);
    CHECK(nic.sent(0)[4] == small);
    CHECK((small->ol_flags & RTE_MBUF_F_TX_TCP_SEG) == 0);
    CHECK(input.drops[static_cast<int>(SwitchDrop::kMbufExhausted)] == 0);
  }
  CHECK(pool.available() == full);
  CHECK(rte_mempool_avail_count(indirect) == 1023);
  rte_mempool_free(indirect);
}

TEST_CASE("ethdev names: vdev arguments cut, PCI addresses in EAL's full form") {
  CHECK(ethdev_name("net_tap0,iface=t0") == "net_tap0");
  CHECK(ethdev_name("net_null0") == "net_null0");
  CHECK(ethdev_name("0000:03:00.0") == "0000:03:00.0");
  CHECK(ethdev_name("03:00.1") == "0000:03:00.1");
  CHECK(ethdev_name("0000:81:00.0,rx_low_latency=1") == "0000:81:00.0");
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

TEST_CASE("the default packet weight is a fixed count, not the ring's size") {
  Pool pool;
  FakePort a("a", 0, 1, 1, true);
  a.generate(0, pool.get(), 64);
  std::vector<RxSlot> slots(1);
  slots[0].port = &a;  // weight: the default
  WeightedPoller poller(std::move(slots), 32);
  RxSlot& slot = poller.slots()[0];
  const uint32_t taken = poller.visit(
      slot, [](RxSlot&, rte_mbuf** pkts, uint16_t n) { rte_pktmbuf_free_bulk(pkts, n); });
  CHECK(taken == kDefaultPacketWeight);
  CHECK(slot.visits_ended_by_weight == 1);
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

// An lcore forwarding a guest (which holds nothing) to a NIC, on the lcore's own tx queue
// `nic_queue` of `nic_queues`, and with a second NIC that cannot free on request (-ENOTSUP).
struct CleanupRig {
  CleanupRig(uint16_t nic_queues, uint16_t nic_queue, LcoreSignals* signals = nullptr)
      : nic("n", 1, 1, nic_queues, false) {
    old.cleanup_result = -ENOTSUP;
    forwarding.xconnect_peer = {1, -1, -1};
    std::vector<RxSlot> rx(1);
    rx[0].port = &guest;
    std::vector<TxBufferSet::Output> outs(3);
    outs[0].port = &guest;
    outs[1].port = &nic;
    outs[1].queue = nic_queue;
    outs[2].port = &old;
    loop =
        std::make_unique<LcoreLoop>(0, nic_queue, std::move(rx), TxBufferSet(std::move(outs), 32),
                                    &forwarding, std::nullopt, 32, signals);
  }
  FakePort guest{"g", 0, 1, 1, true};
  FakePort nic;
  FakePort old{"o", 2, 1, 1, false};
  Forwarding forwarding;
  std::unique_ptr<LcoreLoop> loop;
};

TEST_CASE("a release request: each NIC tx queue of the lcore is cleaned once at its next pass") {
  Pool pool;
  const unsigned full = pool.available();
  {
    LcoreSignals signals;
    signals.release_requests = 7;
    signals.epoch = 7;
    CleanupRig rig(3, 2, &signals);
    FakePort &guest = rig.guest, &nic = rig.nic, &old = rig.old;
    LcoreLoop& loop = *rig.loop;
    nic.cleanup_result = 5;  // frees 5 sent packets
    for (int i = 0; i < 4; ++i) guest.inject(0, pool.packet(64, 0xa));
    CHECK(loop.poll_once(0) == 4);
    CHECK(nic.cleaned.empty());  // no request yet
    signals.release_requests.fetch_add(1);
    signals.epoch.fetch_add(1);
    CHECK(loop.poll_once(0) == 0);
    CHECK(nic.cleaned == std::vector<uint16_t>{2});
    CHECK(old.cleaned == std::vector<uint16_t>{0});
    CHECK(guest.cleaned.empty());
    CHECK(loop.counters().tx_release_requests == 1);
    CHECK(loop.counters().tx_release_packets == 5);
    CHECK(loop.counters().tx_release_unsupported == 1);
    loop.poll_once(0);  // the same request is not carried out twice
    CHECK(nic.cleaned.size() == 1);
    CHECK(nic.sent(0).size() + nic.sent(1).size() + nic.sent(2).size() == 4);
  }
  CHECK(pool.available() == full);
}

TEST_CASE("before sleeping an lcore frees what its NIC queues sent; it polls again if any was") {
  Pool pool;
  // A NIC whose queue frees 5 sent packets the first time it is asked, nothing afterwards.
  FakePort guest("g", 0, 1, 1, true), nic("n", 1, 1, 1, false);
  nic.cleanup_results = {5};
  Forwarding forwarding;
  forwarding.xconnect_peer = {1, 0};
  std::vector<RxSlot> rx(1);
  rx[0].port = &guest;
  std::vector<TxBufferSet::Output> outs(2);
  outs[0].port = &guest;
  outs[1].port = &nic;
  LcoreLoop loop(1, 0, std::move(rx), TxBufferSet(std::move(outs), 32), &forwarding,
                 /*busy_poll_us=*/0, 32);
  std::atomic<bool> stop{false};
  std::thread runner([&] { loop.run(stop); });
  // Neither port can wake it: it sleeps a millisecond at a time.
  while (loop.counters().sleeps < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop.store(true);
  loop.wake();
  runner.join();
  const LcoreCounters& c = loop.counters();
  CHECK(c.tx_released_before_sleep == 5);
  CHECK(c.sleeps_put_off == 1);
  // Asked once per time it was about to sleep; the guest's queue never.
  CHECK(nic.cleaned.size() == c.sleeps + c.sleeps_put_off);
  CHECK(guest.cleaned.empty());
  CHECK(c.tx_release_requests == 0);  // not a release request: counted apart
}

// Slots polling a:0, then b:0; outputs to both.
struct TwoPorts {
  TwoPorts(FakePort& a, FakePort& b) : rx(2), outs(2) {
    rx[0].port = outs[0].port = &a;
    rx[1].port = outs[1].port = &b;
  }
  std::vector<RxSlot> rx;
  std::vector<TxBufferSet::Output> outs;
};

// Waits until `port` has been polled `polls` more times by an lcore running elsewhere (10 s at
// most: a starved runner fails the checks after it, not the wait).
void wait_for_polls(const FakePort& port, uint64_t polls) {
  const uint64_t until = port.rx_polls + polls;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (port.rx_polls < until && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

TEST_CASE("the lcore loop's clock: its own TSC readings, for the timed decisions of its rings") {
  Pool pool;
  const unsigned full = pool.available();
  {
    // a: 64 frames, then nothing; b: nothing. a's frames go to b, whose queue defers work.
    FakePort a("a", 0, 1, 1, true), b("b", 1, 1, 1, true);
    for (int i = 0; i < 64; ++i) a.inject(0, pool.packet(64));
    std::vector<FakePort::ClockRead> rx_clocks;
    std::vector<std::pair<uint64_t, uint64_t>> housekeeping_clocks;
    a.rx_clocks = b.rx_clocks = &rx_clocks;
    b.housekeeping_clocks = &housekeeping_clocks;
    Forwarding forwarding;
    forwarding.xconnect_peer = {1, 0};
    TwoPorts ports(a, b);
    ports.rx[0].weight.packets = 32;  // one burst a visit: the first two passes take a's frames
    ports.outs[1].housekeeping = true;
    LcoreLoop loop(1, 0, std::move(ports.rx), TxBufferSet(std::move(ports.outs), 32), &forwarding,
                   std::nullopt, 32);
    std::atomic<bool> stop{false};
    uint64_t clock_after_run = 1;
    std::thread runner([&] {
      loop.run(stop);
      clock_after_run = loop_tsc;
    });
    // Passes before and after 2 ms: the clock must have moved that much between them.
    wait_for_polls(a, 1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    wait_for_polls(a, 1000);
    stop.store(true);
    runner.join();
    REQUIRE(rx_clocks.size() >= 4000);
    REQUIRE(rx_clocks[0].port == 0);
    REQUIRE(rx_clocks[1].port == 1);
    REQUIRE(rx_clocks[2].port == 0);
    REQUIRE(rx_clocks[3].port == 1);
    // Read after a's visits that took frames: b's clock is later than a's in those passes.
    CHECK(rx_clocks[1].clock > rx_clocks[0].clock);
    CHECK(rx_clocks[3].clock > rx_clocks[2].clock);
    // Never 0, never back, never ahead of the TSC, and it moves pass by pass.
    size_t backwards = 0, ahead = 0;
    for (size_t i = 0; i < rx_clocks.size(); ++i) {
      backwards += i > 0 && rx_clocks[i].clock < rx_clocks[i - 1].clock;
      ahead += rx_clocks[i].clock > rx_clocks[i].tsc;
    }
    CHECK(backwards == 0);
    CHECK(ahead == 0);
    CHECK(rx_clocks[0].clock > 0);
    CHECK(rx_clocks.back().clock - rx_clocks[4].clock > rte_get_tsc_hz() / 1000);
    // The housekeeping of b's deferred work reads the very TSC it is given.
    size_t timed = 0, other = 0;
    for (const auto& [clock, now] : housekeeping_clocks) {
      if (now == GuestNotifier::kFlushNow) continue;
      ++(clock == now ? timed : other);
    }
    CHECK(timed >= 1);
    CHECK(other == 0);
    // Once the loop returns, the thread reads the TSC itself again.
    CHECK(clock_after_run == 0);
    b.free_sent();
  }
  CHECK(pool.available() == full);
}

TEST_CASE("the lcore loop's clock after a sleep: read again on waking, not a millisecond old") {
  // Nothing to forward and neither port can wake the loop: it sleeps 1 ms after every pass.
  FakePort a("a", 0, 1, 1, true), b("b", 1, 1, 1, false);
  std::vector<FakePort::ClockRead> rx_clocks;
  a.rx_clocks = &rx_clocks;
  Forwarding forwarding;
  forwarding.xconnect_peer = {1, 0};
  TwoPorts ports(a, b);
  LcoreLoop loop(1, 0, std::move(ports.rx), TxBufferSet(std::move(ports.outs), 32), &forwarding,
                 /*busy_poll_us=*/0, 32);
  std::atomic<bool> stop{false};
  std::thread runner([&] { loop.run(stop); });
  wait_for_polls(a, 20);
  stop.store(true);
  loop.wake();
  runner.join();
  REQUIRE(loop.counters().sleeps >= 19);
  // A pass after a wake-up that saw the reading from before the sleep would be 1 ms behind the
  // TSC; only a runner preempted between the loop's reading and the visit may be here.
  size_t stale = 0;
  for (const FakePort::ClockRead& r : rx_clocks) stale += r.tsc - r.clock > rte_get_tsc_hz() / 2000;
  CHECK(stale < rx_clocks.size() / 2);
}

// An lcore (id 1, slot 0) polling a:0 and b:0 and sending to both, for apply() tests.
std::unique_ptr<LcoreLoop> loop_over(FakePort& a, FakePort& b, const Forwarding* forwarding,
                                     LcoreSignals* signals) {
  TwoPorts ports(a, b);
  return std::make_unique<LcoreLoop>(1, 0, std::move(ports.rx),
                                     TxBufferSet(std::move(ports.outs), 32), forwarding,
                                     std::nullopt, 32, signals);
}

LcoreChange weight_change(uint16_t slot, Weight weight) {
  LcoreChange change;
  change.weights.emplace_back(slot, weight);
  return change;
}

LcoreChange busy_poll_change(std::optional<uint32_t> us) {
  LcoreChange change;
  change.busy_poll_us = us;
  return change;
}

TEST_CASE("a running lcore takes new weights and busy-poll from apply(), between two passes") {
  Pool pool;
  FakePort a("a", 0, 1, 1, true), b("b", 1, 1, 1, true);
  Forwarding forwarding;
  forwarding.xconnect_peer = {1, 0};
  LcoreSignals signals;
  const std::unique_ptr<LcoreLoop> owner = loop_over(a, b, &forwarding, &signals);
  LcoreLoop& loop = *owner;
  // Not running: nothing takes the change yet; the loop applies it at its first pass.
  CHECK_FALSE(loop.apply(weight_change(0, Weight{7, 700}), 20));
  CHECK(loop.poller().slots()[0].weight.packets == kDefaultPacketWeight);
  CHECK_FALSE(loop.apply(weight_change(0, Weight{8, 800}), 20));  // the first is pending

  std::atomic<bool> stop{false};
  std::thread runner([&] { loop.run(stop); });
  REQUIRE(loop.apply(weight_change(1, Weight{7, 700}), 2000));
  CHECK(loop.poller().slots()[1].weight.packets == 7);
  CHECK(loop.poller().slots()[1].weight.bytes == 700);
  CHECK(loop.poller().slots()[0].weight.packets == 7);  // the change made before it ran
  // Polling always until told to sleep after 100 us idle; then it sleeps (neither fake port can
  // wake it: a millisecond at a time), and stops sleeping once told to poll always again.
  CHECK(loop.counters().sleeps == 0);
  REQUIRE(loop.apply(busy_poll_change(std::optional<uint32_t>(100)), 2000));
  CHECK(loop.busy_poll_us() == std::optional<uint32_t>(100));
  while (loop.counters().sleeps < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(loop.apply(busy_poll_change(std::optional<uint32_t>()), 2000));
  CHECK_FALSE(loop.busy_poll_us());
  const uint64_t sleeps = loop.counters().sleeps;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(loop.counters().sleeps == sleeps);
  stop.store(true);
  loop.wake();
  runner.join();

  // The weight holds: a pass (driven here, the loop stopped) takes 7 of b's 20 packets.
  for (int i = 0; i < 20; ++i) b.inject(0, pool.packet(64, 0xb));
  CHECK(loop.poll_once(rte_rdtsc()) == 7);
  CHECK(a.sent(0).size() == 7);
  a.free_sent();
  CHECK(loop.poll_once(rte_rdtsc()) == 7);
  a.free_sent();
  CHECK(loop.poll_once(rte_rdtsc()) == 6);
  a.free_sent();
}

TEST_CASE("a running lcore takes a port added and then removed, between two passes") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort a("a", 0, 1, 1, true), b("b", 1, 1, 1, true), c("c", 2, 2, 1, true);
    Forwarding ab;
    ab.xconnect_peer = {1, 0};
    LcoreSignals signals;
    const std::unique_ptr<LcoreLoop> owner = loop_over(a, b, &ab, &signals);
    LcoreLoop& loop = *owner;
    std::atomic<bool> stop{false};
    auto run = [&] { return std::thread([&] { loop.run(stop); }); };
    auto halt = [&](std::thread& t) {
      stop.store(true);
      loop.wake();
      t.join();
      stop.store(false);
    };

    // c joins: an output, a table pairing it with a (b left alone), and its two rx queues.
    Forwarding ac;
    ac.xconnect_peer = {2, -1, 0};
    std::thread runner = run();
    LcoreChange join;
    TxBufferSet::Output to_c;
    to_c.port = &c;
    join.add_outputs.emplace_back(2, to_c);
    join.forwarding = &ac;
    for (uint16_t q = 0; q < 2; ++q) {
      RxSlot slot;
      slot.port = &c;
      slot.queue = q;
      join.add_rx.push_back(slot);
    }
    REQUIRE(loop.apply(std::move(join), 2000));
    halt(runner);
    REQUIRE(loop.poller().slots().size() == 4);
    for (int i = 0; i < 5; ++i) a.inject(0, pool.packet(64, 0xa));
    for (int i = 0; i < 3; ++i) b.inject(0, pool.packet(64, 0xb));
    c.inject(0, pool.packet(64, 0xc));
    c.inject(1, pool.packet(64, 0xc));
    CHECK(loop.poll_once(rte_rdtsc()) == 10);
    CHECK(c.sent(0).size() == 5);
    CHECK(a.sent(0).size() == 2);
    CHECK(b.rx_counters(0).drops[static_cast<int>(SwitchDrop::kNoRoute)] == 3);

    // c leaves: its queues are not polled and nothing is sent to it; a and b pair again.
    runner = run();
    LcoreChange leave;
    leave.stop_polling = 2;
    leave.drop_output = 2;
    leave.forwarding = &ab;
    REQUIRE(loop.apply(std::move(leave), 2000));
    halt(runner);
    CHECK(loop.poller().slots().size() == 2);
    c.inject(0, pool.packet(64, 0xc));
    a.inject(0, pool.packet(64, 0xa));
    CHECK(loop.poll_once(rte_rdtsc()) == 1);
    CHECK(b.sent(0).size() == 1);
    CHECK(c.sent(0).size() == 5);  // as before
    a.free_sent();
    b.free_sent();
    c.free_sent();
  }
  CHECK(pool.available() == full);
}

TEST_CASE("tx buffers: an output added past the end and removed with work deferred") {
  Pool pool;
  FakePort a("a", 0, 1, 1, true), z("z", 5, 1, 1, true);
  TxBufferSet tx = one_output(&a);
  TxBufferSet::Output out;
  out.port = &z;
  out.housekeeping = true;
  tx.set_output(5, out);
  CHECK(tx.port_count() == 6);
  CHECK(tx.port(3) == nullptr);
  tx.push(5, pool.packet(64));
  tx.flush();
  CHECK(z.sent(0).size() == 1);
  tx.remove_output(5);  // sends the deferred work now
  CHECK(z.housekeeping_calls == 1);
  CHECK(tx.port(5) == nullptr);
  tx.housekeeping(rte_rdtsc());  // z is no longer visited
  CHECK(z.housekeeping_calls == 1);
  (void)tx.release_sent();  // skips the holes
  z.free_sent();
}

TEST_CASE("rx queues by cycles: largest first onto the least loaded lcore; pinned ones stay") {
  // Five queues of known cost, all on lcore 0 of two.
  std::vector<QueueLoad> queues = {
      {100, 0, false}, {60, 0, false}, {40, 0, false}, {30, 0, false}, {10, 0, false}};
  const std::vector<bool> both = {true, true};
  const std::vector<size_t> placed = assign_by_cycles(queues, both);
  CHECK(placed == std::vector<size_t>{0, 1, 1, 0, 1});
  CHECK(lcore_loads(queues, placed, 2) == std::vector<uint64_t>{130, 110});
  const std::vector<size_t> now(5, 0);
  CHECK(improvement_pct(lcore_loads(queues, now, 2), lcore_loads(queues, placed, 2)) ==
        Approx(100.0 * (14400 - 100) / 14400));
  // Already even: no improvement, and ties keep each queue where it is.
  queues = {{50, 0, false}, {50, 1, false}};
  CHECK(assign_by_cycles(queues, both) == std::vector<size_t>{0, 1});
  CHECK(improvement_pct({50, 50}, {50, 50}) == 0);
  // A queue pinned on lcore 1 (an lcore without rx: auto) stays and counts there; lcore 1 takes
  // no other queue.
  queues = {{100, 1, true}, {70, 0, false}, {20, 0, false}};
  CHECK(assign_by_cycles(queues, {true, false}) == std::vector<size_t>{1, 0, 0});
  queues[0].pinned = false;  // on an auto lcore now: the 70 and 20 go to lcore 0 beside nothing
  CHECK(assign_by_cycles(queues, both) == std::vector<size_t>{1, 0, 0});
  // In turn: movable queues dealt over the lcores that take them.
  queues = {{1, 0, false}, {1, 0, false}, {1, 1, true}, {1, 0, false}};
  CHECK(assign_round_robin(queues, {true, true}) == std::vector<size_t>{0, 1, 1, 0});
}

TEST_CASE("rx queues and NUMA: placed again on their node; a guest's moved there once known") {
  // Lcores 0 and 1 on node 0, 2 on node 1, all rx: auto.
  const std::vector<bool> all = {true, true, true};
  const std::vector<int> nodes = {0, 0, 1};
  // Queues of a node-1 port (on lcore 0), of a node-0 one, and of one whose node is not known.
  std::vector<QueueLoad> queues = {
      {100, 0, false, 1}, {90, 0, false, 1}, {50, 0, false, 0}, {10, 0, false, -1}};
  // By cycles: both node-1 queues onto lcore 2, the only one there; the rest spread over all.
  CHECK(assign_by_cycles(queues, all, nodes) == std::vector<size_t>{2, 2, 0, 1});
  // In turn: the same split, dealt.
  CHECK(assign_round_robin(queues, all, nodes) == std::vector<size_t>{2, 2, 0, 1});
  // Without node information, as before.
  CHECK(assign_by_cycles(queues, all) == std::vector<size_t>{0, 1, 2, 2});
  // No lcore of node 1 takes queues: they may go anywhere.
  CHECK(assign_by_cycles(queues, {true, true, false}, nodes) == std::vector<size_t>{0, 1, 1, 0});

  // Only what NUMA asks: the node-1 queues move to lcore 2, the others stay where they are.
  CHECK(assign_to_nodes(queues, all, nodes) == std::vector<size_t>{2, 2, 0, 0});
  // A queue the file placed (pinned) stays even on the wrong node.
  queues[0].pinned = true;
  CHECK(assign_to_nodes(queues, all, nodes) == std::vector<size_t>{0, 2, 0, 0});
  // Among several lcores on its node, the one polling the fewest queues (counting the moves
  // before it; the first on a tie): lcore 2 (none) twice, not lcore 1 (two); then lcore 0, left
  // with none, before lcore 3.
  queues = {{0, 0, false, 1}, {0, 0, false, 1}, {0, 1, false, 1}, {0, 1, false, 0}};
  CHECK(assign_to_nodes(queues, {true, true, true, true}, {0, 1, 1, 0}) ==
        std::vector<size_t>{2, 2, 1, 0});
}

TEST_CASE("an rx queue moves between two running lcores with its slot and counters") {
  Pool pool;
  const unsigned full = pool.available();
  {
    FakePort a("a", 0, 2, 2, true), b("b", 1, 1, 2, true);
    Forwarding forwarding;
    forwarding.xconnect_peer = {1, 0};
    auto make = [&](unsigned lcore, uint16_t slot, std::vector<RxSlot> rx, LcoreSignals* signals) {
      std::vector<TxBufferSet::Output> outs(2);
      outs[0].port = &a;
      outs[0].queue = slot;
      outs[1].port = &b;
      outs[1].queue = slot;
      return std::make_unique<LcoreLoop>(lcore, slot, std::move(rx),
                                         TxBufferSet(std::move(outs), 32), &forwarding,
                                         std::nullopt, 32, signals);
    };
    std::vector<RxSlot> rx0(2), rx1(1);
    rx0[0].port = &a;
    rx0[1].port = &a;
    rx0[1].queue = 1;
    rx0[1].weight = Weight{5, 5000};
    rx0[1].visits_ended_empty = 42;  // a counter that must move with it
    rx1[0].port = &b;
    LcoreSignals signals;
    std::unique_ptr<LcoreLoop> l0 = make(1, 0, std::move(rx0), &signals);
    std::unique_ptr<LcoreLoop> l1 = make(2, 1, std::move(rx1), &signals);
    std::atomic<bool> stop{false};
    std::thread t0([&] { l0->run(stop); }), t1([&] { l1->run(stop); });

    std::vector<RxSlot> released;
    released.reserve(1);
    LcoreChange leave;
    leave.release_rx.emplace_back(0, 1);
    leave.released = &released;
    REQUIRE(l0->apply(std::move(leave), 2000));
    REQUIRE(released.size() == 1);
    LcoreChange join;
    join.add_rx = released;
    REQUIRE(l1->apply(std::move(join), 2000));
    stop.store(true);
    l0->wake();
    l1->wake();
    t0.join();
    t1.join();

    REQUIRE(l0->poller().slots().size() == 1);
    REQUIRE(l1->poller().slots().size() == 2);
    const RxSlot& moved = l1->poller().slots()[1];
    CHECK(moved.port == &a);
    CHECK(moved.queue == 1);
    CHECK(moved.weight.packets == 5);
    CHECK(moved.visits_ended_empty >= 42);
    // Polled by lcore 2 now: its packets reach b on lcore 2's tx queue (1).
    for (int i = 0; i < 7; ++i) a.inject(1, pool.packet(64, 0xa));
    CHECK(l0->poll_once(rte_rdtsc()) == 0);
    CHECK(l1->poll_once(rte_rdtsc()) == 5);  // its weight
    CHECK(b.sent(1).size() == 5);
    CHECK(l1->poll_once(rte_rdtsc()) == 2);
    b.free_sent();
  }
  CHECK(pool.available() == full);
}

TEST_CASE("a guest queue at its zero-copy limit has the lcore's NIC queues free what they sent") {
  Pool pool;
  const unsigned full = pool.available();
  {
    CleanupRig rig(2, 1);
    FakePort &guest = rig.guest, &nic = rig.nic, &old = rig.old;
    LcoreLoop& loop = *rig.loop;
    nic.cleanup_result = 3;  // frees 3 sent packets each time it is asked
    auto pass = [&](uint64_t now_tsc) {
      for (int i = 0; i < 4; ++i) guest.inject(0, pool.packet(64, 0xa));
      CHECK(loop.poll_once(now_tsc) == 4);
    };
    const uint64_t t0 = 1000000000;
    pass(t0);  // lending not full: nobody is asked
    CHECK(nic.cleaned.empty());
    guest.lending_full = true;
    pass(t0);
    CHECK(nic.cleaned == std::vector<uint16_t>{1});  // the lcore's own queue on the NIC
    CHECK(old.cleaned == std::vector<uint16_t>{0});
    CHECK(guest.cleaned.empty());
    CHECK(loop.counters().lent_reclaims == 1);
    CHECK(loop.counters().lent_reclaimed_packets == 3);
    // Reported within 10 us of the last reclaim: kept until it is due, even if the queue then
    // reports nothing more.
    const uint64_t us = rte_get_tsc_hz() / 1000000;
    pass(t0 + us);
    CHECK(nic.cleaned.size() == 1);
    guest.lending_full = false;
    pass(t0 + 1000 * us);
    CHECK(nic.cleaned.size() == 2);
    CHECK(old.cleaned.size() == 1);  // -ENOTSUP once: never asked again
    CHECK(loop.counters().lent_reclaims == 2);
    CHECK(loop.counters().lent_reclaimed_packets == 6);
    pass(t0 + 2000 * us);  // the report was used up
    CHECK(nic.cleaned.size() == 2);
    // Once every NIC queue has answered -ENOTSUP, a report asks nobody and counts nothing.
    nic.cleanup_result = -ENOTSUP;
    guest.lending_full = true;
    pass(t0 + 3000 * us);
    CHECK(nic.cleaned.size() == 3);
    pass(t0 + 4000 * us);
    CHECK(nic.cleaned.size() == 3);
    CHECK(loop.counters().lent_reclaims == 3);
    CHECK(loop.counters().tx_release_requests == 0);  // not a release request: counted apart
    CHECK(nic.sent(1).size() == 28);
  }
  CHECK(pool.available() == full);
}

TEST_CASE("lent guest buffers: as they are to a vdev, copied where DMA is impossible") {
  // dma, multi_segs, dma_mappable
  CHECK(lent_policy(false, true, false) == LentPolicy::kAsIs);
  CHECK(lent_policy(false, true, true) == LentPolicy::kAsIs);
  CHECK(lent_policy(false, false, false) == LentPolicy::kCopy);
  CHECK(lent_policy(true, false, true) == LentPolicy::kCopy);
  CHECK(lent_policy(true, true, false) == LentPolicy::kCopy);  // IOVA as PA, or no dma map
  CHECK(lent_policy(true, true, true) == LentPolicy::kAsIsIfDmaReady);
}

// A lent packet as zero-copy dequeue builds it: a head of ours, then a guest buffer attached as
// an external buffer, with `iova` as its buf_iova.
struct LentPacket {
  static void on_free(void*, void* opaque) { ++*static_cast<int*>(opaque); }
  LentPacket(rte_mempool* pool, rte_iova_t iova, int* freed) {
    std::memset(guest, 0x5a, sizeof(guest));
    shinfo.free_cb = on_free;
    shinfo.fcb_opaque = freed;
    rte_mbuf_ext_refcnt_set(&shinfo, 1);
    head = rte_pktmbuf_alloc(pool);
    rte_mbuf* seg = rte_pktmbuf_alloc(pool);
    REQUIRE((head != nullptr && seg != nullptr));
    std::memset(rte_pktmbuf_append(head, 64), 0x11, 64);
    rte_pktmbuf_attach_extbuf(seg, guest, iova == 0 ? reinterpret_cast<uintptr_t>(guest) : iova,
                              sizeof(guest), &shinfo);
    seg->data_len = sizeof(guest);
    REQUIRE(rte_pktmbuf_chain(head, seg) == 0);
  }
  alignas(64) uint8_t guest[1024];
  rte_mbuf_ext_shared_info shinfo{};
  rte_mbuf* head = nullptr;
};

std::vector<uint8_t> packet_data(const rte_mbuf* m) {
  std::vector<uint8_t> bytes(m->pkt_len);
  const auto* data = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, m->pkt_len, bytes.data()));
  return std::vector<uint8_t>(data, data + m->pkt_len);
}

bool holds_external(const rte_mbuf* m) {
  for (; m != nullptr; m = m->next)
    if (RTE_MBUF_HAS_EXTBUF(m)) return true;
  return false;
}

TEST_CASE("lent guest buffers toward a port that DMAs: copied unless they carry an IOVA") {
  Pool pool;
  const unsigned full = pool.available();
  rte_ring* rx = rte_ring_create("lent_rx", 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  rte_ring* tx = rte_ring_create("lent_tx", 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  REQUIRE((rx != nullptr && tx != nullptr));
  REQUIRE(rte_eth_from_rings("lent", &rx, 1, &tx, 1, SOCKET_ID_ANY) >= 0);
  {
    auto port = ring_ethdev_port("lent", pool.get());
    CHECK_FALSE(port->dma());  // a vdev: as they are
    CHECK(port->multi_segs());
    CHECK(port->lent() == LentPolicy::kAsIs);
    // The vdev bus accepts rte_dev_dma_map (there is nothing to map for a CPU reader): the
    // probe says so, and a registrar for the device registers memory as external memory and
    // maps it, until unregistered.
    CHECK(EalDmaRegistrar::can_map(port->device()));
    {
      EalDmaRegistrar registrar({port->device()});
      const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      void* mem =
          mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      REQUIRE(mem != MAP_FAILED);
      CHECK_FALSE(registrar.register_memory(mem, 4 * page - 1, page));  // not whole pages
      CHECK(rte_mem_virt2memseg_list(mem) == nullptr);
      REQUIRE(registrar.register_memory(mem, 4 * page, page));
      const rte_memseg_list* msl = rte_mem_virt2memseg_list(static_cast<char*>(mem) + page);
      REQUIRE(msl != nullptr);
      CHECK(msl->external == 1);
      registrar.unregister_memory(mem, 4 * page);
      CHECK(rte_mem_virt2memseg_list(mem) == nullptr);
      munmap(mem, 4 * page);
    }

    int freed = 0;
    struct Case {
      LentPolicy policy;
      rte_iova_t iova;  // 0: the buffer's address
      bool copied;
    };
    for (const Case& c :
         {Case{LentPolicy::kAsIs, RTE_BAD_IOVA, false}, Case{LentPolicy::kAsIsIfDmaReady, 0, false},
          Case{LentPolicy::kAsIsIfDmaReady, RTE_BAD_IOVA, true},
          Case{LentPolicy::kCopy, 0, true}}) {
      INFO("policy " << static_cast<int>(c.policy) << " iova " << c.iova);
      port->set_lent(c.policy);
      LentPacket lent(pool.get(), c.iova, &freed);
      const std::vector<uint8_t> bytes = packet_data(lent.head);
      rte_mbuf* pkts[1] = {lent.head};
      const int freed_before = freed;
      REQUIRE(port->tx_prepare(0, pkts, 1) == 1);
      CHECK(holds_external(pkts[0]) == !c.copied);
      // A copy frees the original at once: the guest's buffer is returned.
      CHECK(freed - freed_before == (c.copied ? 1 : 0));
      CHECK(packet_data(pkts[0]) == bytes);
      rte_pktmbuf_free(pkts[0]);
      CHECK(freed - freed_before == 1);
    }
  }
  rte_ring_free(rx);
  rte_ring_free(tx);
  CHECK(pool.available() == full);
}

TEST_CASE("tx_prepare refusing packet i drops packet i only, counted; the rest are sent") {
  Pool pool;
  const unsigned full = pool.available();
  rte_ring* rx = rte_ring_create("prep_rx", 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  rte_ring* tx = rte_ring_create("prep_tx", 64, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  REQUIRE((rx != nullptr && tx != nullptr));
  const int port_id = rte_eth_from_rings("prep", &rx, 1, &tx, 1, SOCKET_ID_ANY);
  REQUIRE(port_id >= 0);
  give_tx_offloads(static_cast<uint16_t>(port_id));
  {
    auto port = ring_ethdev_port("prep", pool.get());
    // Checksum requests the device takes: rte_eth_tx_prepare runs on the burst.
    const uint16_t lens[] = {
        100, kRefusedByTxPrepareLen, 101, 102, kRefusedByTxPrepareLen, kRefusedByTxPrepareLen, 103};
    constexpr uint16_t kCount = sizeof(lens) / sizeof(lens[0]);
    rte_mbuf* pkts[kCount];
    for (uint16_t i = 0; i < kCount; ++i) {
      pkts[i] = pool.packet(lens[i], static_cast<uint8_t>(i));
      pkts[i]->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM;
      pkts[i]->l2_len = RTE_ETHER_HDR_LEN;
      pkts[i]->l3_len = sizeof(rte_ipv4_hdr);
    }
    const uint16_t kept = port->tx_prepare(0, pkts, kCount);
    REQUIRE(kept == 4);
    for (uint16_t i = 0; i < kept; ++i) CHECK(pkts[i]->pkt_len == 100u + i);  // in order
    CHECK(port->tx_counters(0).drops[static_cast<int>(SwitchDrop::kTxUnsupported)] == 3);
    rte_pktmbuf_free_bulk(pkts, kept);
  }
  rte_ring_free(rx);
  rte_ring_free(tx);
  CHECK(pool.available() == full);
}

TEST_CASE("DMA registrar: a device gone before the memory is unregistered is not touched") {
  // As when EAL's cleanup frees a bus's devices before a guest's mapping goes, or a device is
  // detached. A device whose driver counts the maps and unmaps it is asked for.
  DmaCalls& calls = counted_dma_calls();
  const DmaCalls before = calls;
  rte_device* device = create_counting_dma_device("vqs_dma_counter0");
  REQUIRE(device != nullptr);
  EalDmaRegistrar registrar({device});
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  // With the device there, both reach it.
  REQUIRE(registrar.register_memory(mem, 2 * page, page));
  registrar.unregister_memory(mem, 2 * page);
  CHECK(calls.maps - before.maps == 1);
  CHECK(calls.unmaps - before.unmaps == 1);
  // The device goes (its rte_device freed) while the memory is registered: not unmapped through
  // it, and the memory is still unregistered.
  REQUIRE(registrar.register_memory(mem, 2 * page, page));
  REQUIRE(rte_vdev_uninit("vqs_dma_counter0") == 0);
  registrar.unregister_memory(mem, 2 * page);
  CHECK(calls.unmaps - before.unmaps == 1);
  CHECK(rte_mem_virt2memseg_list(mem) == nullptr);
  // Registered while it is gone: external memory, nothing to map.
  CHECK(registrar.register_memory(mem, 2 * page, page));
  CHECK(calls.maps - before.maps == 2);
  registrar.unregister_memory(mem, 2 * page);
  CHECK(rte_mem_virt2memseg_list(mem) == nullptr);
  munmap(mem, 2 * page);
}

}  // namespace
}  // namespace vqs::app::test
