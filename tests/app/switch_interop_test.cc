// SPDX-License-Identifier: BSD-3-Clause
// vqswitch in this process against real peers: virtio_user guests (bridge and xconnect, bytes
// compared), the kernel through net_tap (ping, also with the lcore asleep) and af_packet on veth
// (TSO cut for a NIC without it), hundreds of guests, telemetry.
// See docs/architecture.md, "Testing".
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <rte_arp.h>
#include <rte_cycles.h>
#include <rte_eth_ring.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "../interop/port_pair.h"
#include "config/config.h"
#include "config/plan.h"
#include "control/commands.h"
#include "control/load_sampler.h"
#include "control/rxq_balancer.h"
#include "core/switch.h"
#include "core/telemetry.h"
#include "datapath/dequeue.h"
#include "datapath/eal_dma_registrar.h"
#include "fake_numa_topology.h"
#include "ports/guest_port.h"
#include "ring/line_release.h"
#include "ring/sender_gate.h"
#include "ring_tx_cleanup.h"

namespace vqs::app::test {
namespace {

using vqs::test::free_all;
using vqs::test::make_packet;
using vqs::test::packet_bytes;
using vqs::test::receive;
using vqs::test::send_all;
using vqs::test::start_vdev_port;
using vqs::test::stop_vdev_port;

std::string run_dir() { return std::getenv("VQS_TEST_RUN_DIR"); }

int serial = 0;

// A switch from YAML text, its loops running on lcore 1 until destroyed.
class RunningSwitch {
 public:
  // `topology`: where lcores and devices are (the machine's when not given).
  explicit RunningSwitch(const std::string& yaml,
                         const NumaTopology& topology = system_numa_topology()) {
    std::string error;
    auto config = parse_config(yaml, "test.yaml", &error);
    INFO(error);
    REQUIRE(config.has_value());
    auto plan = make_plan(*config, topology, &error);
    INFO(error);
    REQUIRE(plan.has_value());
    sw_ = Switch::create(*config, *plan, &error);
    INFO(error);
    REQUIRE(sw_ != nullptr);
    current = this;
    runner_ = std::thread([this] {
      sw_->run(stop_, [this] {
        while (!stop_.load()) {
          sw_->housekeeping();
          {
            std::lock_guard lock(tick_mutex_);
            if (tick_) tick_(now_ms());
          }
          rte_delay_ms(5);
        }
      });
    });
  }
  // What the control thread runs besides housekeeping, every 5 ms (as vqswitch's control loop
  // samples the load and ticks the balancer); nullptr: nothing.
  void on_control(std::function<void(uint64_t now_ms)> tick) {
    std::lock_guard lock(tick_mutex_);
    tick_ = std::move(tick);
  }
  static uint64_t now_ms() {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }
  ~RunningSwitch() {
    current = nullptr;
    stop();
  }
  // Stops forwarding (counters hold still from now on); the switch and its ports stay.
  void stop() {
    if (!runner_.joinable()) return;
    stop_.store(true);
    sw_->wake_all();
    runner_.join();
  }
  Switch& get() { return *sw_; }
  static inline RunningSwitch* current = nullptr;  // for diagnostics
  bool wait_link(uint16_t port, int timeout_ms = 5000) {
    const uint64_t end = rte_get_timer_cycles() + rte_get_timer_hz() * timeout_ms / 1000;
    while (rte_get_timer_cycles() < end) {
      if (sw_->ports()[port]->link_up()) return true;
      rte_delay_ms(1);
    }
    return false;
  }

 private:
  std::unique_ptr<Switch> sw_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
  std::mutex tick_mutex_;
  std::function<void(uint64_t)> tick_;
};

// A telemetry command over DPDK's socket, as dpdk-telemetry.py sends it; the reply.
std::string telemetry(const std::string& command) {
  const std::string path =
      std::string("/var/run/dpdk/") + std::getenv("VQS_TEST_FILE_PREFIX") + "/dpdk_telemetry.v2";
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  std::string buf(65536, '\0');
  REQUIRE(read(fd, buf.data(), buf.size()) > 0);  // the greeting
  REQUIRE(write(fd, command.data(), command.size()) == static_cast<ssize_t>(command.size()));
  const ssize_t n = read(fd, buf.data(), buf.size());
  close(fd);
  REQUIRE(n > 0);
  return buf.substr(0, static_cast<size_t>(n));
}

std::string socket_path(const std::string& name) { return run_dir() + "/" + name + ".sock"; }

std::string vhost_port_yaml(const std::string& name, const std::string& extra = "") {
  return "  - {name: " + name + ", type: vhost, socket: " + socket_path(name) + extra + "}\n";
}

// A DPDK virtio_user guest on a switch socket.
class Guest {
 public:
  explicit Guest(const std::string& port_name, bool mrg = true, uint64_t tx_offloads = 0,
                 uint16_t queues = 1, bool rx_interrupts = false) {
    name_ = "net_virtio_user" + std::to_string(serial++);
    // Without mergeable buffers a frame must fit one mbuf: standard MTU.
    port_ = start_vdev_port(name_,
                            "path=" + socket_path(port_name) + ",queues=" + std::to_string(queues) +
                                ",queue_size=256,mrg_rxbuf=" + (mrg ? "1" : "0"),
                            queues, 0, tx_offloads, mrg ? 9000 : 1500, rx_interrupts);
  }
  ~Guest() { stop_vdev_port(port_, name_); }
  uint16_t port() const { return port_; }

 private:
  std::string name_;
  uint16_t port_;
};

void set_macs(rte_mbuf* m, const rte_ether_addr& dst, const rte_ether_addr& src) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  eth->dst_addr = dst;
  eth->src_addr = src;
}

const rte_ether_addr kMacA = {{0x02, 0, 0, 0, 0xa, 1}};
const rte_ether_addr kMacB = {{0x02, 0, 0, 0, 0xb, 1}};

// Sends `sizes` from guest `from` (on its queue `from_queue`) to guest `to` (arriving on its queue
// `to_queue`) and checks every byte arrives unchanged.
void exchange(const Guest& from, const Guest& to, const rte_ether_addr& dst,
              const rte_ether_addr& src, const std::vector<uint32_t>& sizes, uint32_t seed,
              uint16_t from_queue = 0, uint16_t to_queue = 0) {
  std::vector<rte_mbuf*> pkts;
  std::vector<std::vector<uint8_t>> expected;
  for (size_t i = 0; i < sizes.size(); ++i) {
    rte_mbuf* m = make_packet(sizes[i], seed + static_cast<uint32_t>(i));
    set_macs(m, dst, src);
    expected.push_back(packet_bytes(m));
    pkts.push_back(m);
  }
  std::vector<rte_mbuf*> got;
  // Few at a time: the receiving guest's ring holds 256 buffers.
  for (size_t i = 0; i < pkts.size(); i += 32) {
    const size_t n = std::min<size_t>(32, pkts.size() - i);
    REQUIRE(send_all(from.port(), from_queue, {pkts.begin() + i, pkts.begin() + i + n}) == n);
    auto burst = receive(to.port(), to_queue, n);
    got.insert(got.end(), burst.begin(), burst.end());
  }
  if (got.size() != expected.size()) {
    for (const auto& port : RunningSwitch::current->get().ports()) {
      const PortTotals t = RunningSwitch::current->get().totals(port->index());
      if (port->index() > 2 && port->index() < 254) continue;
      UNSCOPED_INFO("port " << port->name() << " link " << port->link_up() << " rx " << t.rx_packets
                            << " tx " << t.tx_packets << " drops " << t.total_drops());
    }
  }
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("packet " << i << " of " << sizes[i] << " bytes");
    CHECK(packet_bytes(got[i]) == expected[i]);
  }
  free_all(got);
}

std::vector<uint32_t> all_sizes() {
  std::vector<uint32_t> sizes;
  for (uint32_t len = 60; len <= 9018; len += len < 200 ? 1 : 97) sizes.push_back(len);
  sizes.push_back(9018);
  return sizes;
}

TEST_CASE("bridge: two virtio_user guests exchange frames of 60..9018 bytes, every byte intact") {
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("br0a") +
                   vhost_port_yaml("br0b") +
                   "lcores: [{lcore: 1, rx: auto}]\nforwarding: {mode: bridge}\n");
  Guest a("br0a"), b("br0b");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  // Unknown destination: flooded (to b, the only other port); then both MACs are learned.
  exchange(a, b, kMacB, kMacA, {60}, 1);
  exchange(b, a, kMacA, kMacB, {60}, 2);
  const std::vector<uint32_t> sizes = all_sizes();
  exchange(a, b, kMacB, kMacA, sizes, 100);
  exchange(b, a, kMacA, kMacB, sizes, 200);
  // Broadcast reaches the other guest.
  exchange(a, b, {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}, kMacA, {60, 1514}, 300);
  const BridgeCounters c = sw.get().bridge()->counters();
  CHECK(c.learned == 2);
  CHECK(c.entries == 2);
  const PortTotals ta = sw.get().totals(0), tb = sw.get().totals(1);
  CHECK(ta.total_drops() == 0);
  CHECK(tb.total_drops() == 0);
  CHECK(ta.rx_packets == 1 + sizes.size() + 2);
  CHECK(tb.tx_packets == ta.rx_packets);

  // What vqswitchctl would show: both MACs learned on their ports; the guests' features; the
  // counters. A flush empties the table (no traffic now to learn again).
  LoadSampler load(sw.get());
  RxqBalancer balancer(sw.get(), load);
  ControlCommands commands(sw.get(), load, balancer);
  auto run = [&](std::vector<std::string> args) {
    const ControlReply reply = commands.run(args);
    INFO(reply.text);
    REQUIRE(reply.ok);
    return nlohmann::json::parse(reply.text);
  };
  const nlohmann::json fdb = run({"fdb-show", "--json"});
  REQUIRE(fdb["entries"].size() == 2);
  std::map<std::string, std::string> port_of;
  for (const auto& e : fdb["entries"]) {
    CHECK(e["vlan"] == 0);
    CHECK(e["age_s"] <= 60);
    port_of[e["mac"]] = e["port"];
  }
  CHECK(port_of["02:00:00:00:0a:01"] == "br0a");
  CHECK(port_of["02:00:00:00:0b:01"] == "br0b");
  const nlohmann::json show = run({"show", "--json"});
  CHECK(show["ports"][0]["link"] == "up");
  CHECK(show["ports"][0]["features"] != "0x0000000000000000");
  const nlohmann::json stats = run({"stats", "br0a", "--json"});
  CHECK(stats["ports"][0]["rx_packets"] == ta.rx_packets);
  CHECK(stats["ports"][0]["drops"] == 0);
  CHECK(run({"fdb-flush", "--json"})["flushed"] == 2);
  CHECK(run({"fdb-show", "--json"})["entries"].empty());
  CHECK(sw.get().bridge()->counters().entries == 0);
}

TEST_CASE("NUMA: a pool per node; a guest's queue moves to an lcore on its memory's node") {
  // Lcore 0 on node 1, lcore 1 on node 0: a fake topology (this machine has one node, where
  // the guests' memory really is). Both guests' nodes are unknown until they connect, so the
  // plan deals their queues in turn: a's to lcore 0, on the wrong node once a connects.
  const FakeNumaTopology topology({1, 0});
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("nu0a") +
                       vhost_port_yaml("nu0b") +
                       "lcores:\n"
                       "  - {lcore: 0, rx: auto, busy_poll_us: 100}\n"
                       "  - {lcore: 1, rx: auto, busy_poll_us: 100}\n"
                       "forwarding: {mode: xconnect, pairs: [[nu0a, nu0b]]}\n",
                   topology);
  Switch& s = sw.get();
  // A pool per node (node 1's from wherever there is memory), a's from lcore 0's node.
  REQUIRE(s.pools().size() == 2);
  CHECK(s.pools()[0].node == 0);
  CHECK(s.pools()[1].node == 1);
  const auto& a_port = static_cast<const GuestPort&>(*s.ports()[0]);
  CHECK(a_port.pool() == s.pool_for_node(1));
  CHECK(s.lcores()[0]->poller().slots().size() == 1);
  CHECK(a_port.numa_node() == -1);

  Guest a("nu0a"), b("nu0b");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  // Its memory is on node 0: it takes mbufs from node 0's pool, and housekeeping moves its
  // queue to lcore 1, the lcore with rx: auto on node 0.
  bool moved = false;
  for (int i = 0; i < 400 && !moved; ++i) {
    rte_delay_ms(5);
    std::shared_lock lock(s.topology_mutex());
    moved = s.lcores()[0]->poller().slots().empty() &&
            s.lcores()[1]->poller().slots().size() == 2 && a_port.pool() == s.pool_for_node(0);
  }
  CHECK(a_port.numa_node() == 0);
  REQUIRE(moved);
  exchange(a, b, kMacB, kMacA, {60, 1514}, 11);
  exchange(b, a, kMacA, kMacB, {60, 1514}, 12);
  CHECK(s.totals(0).total_drops() == 0);
  CHECK(s.totals(1).total_drops() == 0);

  // What vqswitchctl shows: each port's and lcore's node, a pool per node, no queue across.
  LoadSampler load(s);
  RxqBalancer balancer(s, load);
  ControlCommands commands(s, load, balancer);
  const ControlReply reply = commands.run({"show", "--json"});
  REQUIRE(reply.ok);
  const nlohmann::json show = nlohmann::json::parse(reply.text);
  CHECK(show["ports"][0]["numa_node"] == 0);
  CHECK(show["lcores"][0]["numa_node"] == 1);
  CHECK(show["lcores"][1]["numa_node"] == 0);
  REQUIRE(show["mbufs"].size() == 2);
  CHECK(show["mbufs"][1]["numa_node"] == 1);
  const ControlReply rxq = commands.run({"rxq-show", "--json"});
  REQUIRE(rxq.ok);
  const nlohmann::json queues = nlohmann::json::parse(rxq.text);  // outlives the loop
  REQUIRE(queues["rx_queues"].size() == 2);
  for (const auto& q : queues["rx_queues"]) {
    CHECK(q["lcore"] == 1);
    CHECK(q["cross_numa"] == false);
  }
}

TEST_CASE("auto_balance: two busy queues on one lcore are spread over two, by measured cycles") {
  // Four NICs in port order busy0, idle0, busy1, idle1 (net_null: the busy ones generate frames
  // as fast as they are polled, the idle ones receive nothing), dealt in turn over lcores 0 and
  // 1 at start: both busy queues on lcore 0. Each busy one is forwarded to an idle one.
  RunningSwitch sw(
      "version: 1\neal: {cores: \"0-1\"}\nports:\n"
      "  - {name: busy0, type: ethdev, device: \"net_null10,size=64\"}\n"
      "  - {name: idle0, type: ethdev, device: \"net_null11,no-rx=1\"}\n"
      "  - {name: busy1, type: ethdev, device: \"net_null12,size=64\"}\n"
      "  - {name: idle1, type: ethdev, device: \"net_null13,no-rx=1\"}\n"
      "lcores: [{lcore: 0, rx: auto}, {lcore: 1, rx: auto}]\n"
      "rxq_assign: cycles\n"
      "auto_balance: {enabled: true, threshold_pct: 25, interval_s: 10}\n"
      "forwarding: {mode: xconnect, pairs: [[busy0, idle0], [busy1, idle1]]}\n");
  Switch& s = sw.get();
  auto busy_on = [&](size_t lcore) {
    std::shared_lock lock(s.topology_mutex());
    size_t n = 0;
    for (const RxSlot& slot : s.lcores()[lcore]->poller().slots())
      n += slot.port->name().rfind("busy", 0) == 0;
    return n;
  };
  REQUIRE(busy_on(0) == 2);
  LoadSampler load(s);
  RxqBalancer balancer(s, load);
  sw.on_control([&](uint64_t now) {
    load.sample(now);
    balancer.tick(now);
  });
  struct StopTicks {
    RunningSwitch& sw;
    ~StopTicks() { sw.on_control(nullptr); }  // before the balancer and the sampler go
  } stop_ticks{sw};
  // The first interval (5 s) measures, the balancer looks every 10 s: within 30 s it moved one.
  const uint64_t end = RunningSwitch::now_ms() + 30000;
  while (balancer.rebalances() == 0 && RunningSwitch::now_ms() < end) rte_delay_ms(50);
  REQUIRE(balancer.rebalances() == 1);
  CHECK(busy_on(0) == 1);
  CHECK(busy_on(1) == 1);
  // Even now: the next looks move nothing.
  rte_delay_ms(11000);
  CHECK(balancer.rebalances() == 1);
  CHECK(s.totals(1).tx_packets > 0);
  CHECK(s.totals(3).tx_packets > 0);
}

TEST_CASE("xconnect: guest to guest both ways, without mergeable buffers on one side") {
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("xc0a") +
                   vhost_port_yaml("xc0b") +
                   "lcores: [{lcore: 1, rx: auto}]\n"
                   "forwarding: {mode: xconnect, pairs: [[xc0a, xc0b]]}\n");
  Guest a("xc0a"), b("xc0b", /*mrg=*/false);
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  std::vector<uint32_t> sizes;
  for (uint32_t len = 60; len <= 1514; len += 41) sizes.push_back(len);
  exchange(a, b, kMacB, kMacA, sizes, 7);
  exchange(b, a, kMacA, kMacB, sizes, 8);
  CHECK(sw.get().totals(0).total_drops() == 0);
  CHECK(sw.get().totals(1).total_drops() == 0);
}

TEST_CASE("bridge: a guest's checksum offload is finished for a guest that did not negotiate it") {
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("cs0a") +
                   vhost_port_yaml("cs0b") +
                   "lcores: [{lcore: 1, rx: auto}]\nforwarding: {mode: bridge}\n");
  Guest a("cs0a", true, RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM);
  Guest b("cs0b");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  for (bool tcp : {true, false}) {
    for (uint32_t len : {100u, 1400u, 5000u}) {
      rte_mbuf* m = make_packet(len, len, tcp);
      set_macs(m, kMacB, kMacA);
      // As an application asks for the offload: pseudo-header sum in the field, tx flags.
      m->l2_len = 14;
      m->l3_len = 20;
      m->ol_flags = RTE_MBUF_F_TX_IPV4 | (tcp ? RTE_MBUF_F_TX_TCP_CKSUM : RTE_MBUF_F_TX_UDP_CKSUM);
      auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, 14);
      const uint16_t phdr = rte_ipv4_phdr_cksum(ip, m->ol_flags);
      std::memcpy(rte_pktmbuf_mtod_offset(m, uint8_t*, 34 + (tcp ? 16 : 6)), &phdr, 2);
      REQUIRE(send_all(a.port(), 0, {m}) == 1);
      auto got = receive(b.port(), 0, 1);
      REQUIRE(got.size() == 1);
      INFO((tcp ? "tcp " : "udp ") << len);
      const std::vector<uint8_t> bytes = packet_bytes(got[0]);
      REQUIRE(bytes.size() == len);
      // The whole L4 checksum over the pseudo-header verifies to 0xffff.
      const auto* rip = reinterpret_cast<const rte_ipv4_hdr*>(bytes.data() + 14);
      const uint32_t l4_len = len - 34;
      uint32_t sum = rte_raw_cksum(bytes.data() + 34, l4_len);
      sum += rte_ipv4_phdr_cksum(rip, 0);
      sum = (sum & 0xffff) + (sum >> 16);
      sum = (sum & 0xffff) + (sum >> 16);
      CHECK(sum == 0xffff);
      free_all(got);
    }
  }
  CHECK(sw.get().totals(0).total_drops() == 0);
  CHECK(sw.get().totals(1).total_drops() == 0);
}

TEST_CASE("one switch serves 256 guests; the first and the last exchange traffic") {
  std::string yaml = "version: 1\neal: {cores: \"0-1\"}\nports:\n";
  for (int i = 0; i < 256; ++i) yaml += vhost_port_yaml("many" + std::to_string(i));
  yaml += "lcores: [{lcore: 1, rx: auto}]\nforwarding: {mode: bridge}\n";
  RunningSwitch sw(yaml);
  REQUIRE(sw.get().ports().size() == 256);
  Guest a("many0"), b("many255");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(255));
  exchange(a, b, kMacB, kMacA, {60, 1000, 1514}, 11);
  exchange(b, a, kMacA, kMacB, {60, 1000, 1514}, 12);
  // Until b spoke, its MAC was unknown: a's 3 frames were flooded to 255 ports, 254 of them
  // without a guest.
  uint64_t link_down = 0;
  for (uint16_t p = 1; p < 255; ++p)
    link_down += sw.get().totals(p).switch_drops[static_cast<int>(SwitchDrop::kLinkDown)];
  CHECK(link_down == 3 * 254);
  // Telemetry lists every port and queue in one reply.
  telemetry_attach(&sw.get());
  const std::string ports = telemetry("/vqswitch/ports");
  const std::string queues = telemetry("/vqswitch/queues");
  telemetry_attach(nullptr);
  CHECK(ports.find("\"many0\",\"many1\",") != std::string::npos);
  CHECK(ports.find("\"many255\"]}") != std::string::npos);
  CHECK(queues.find("\"many255:0\"]}") != std::string::npos);
}

TEST_CASE("busy_poll_us: an idle lcore sleeps, and a guest's kick wakes it for each frame") {
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("bp0a") +
                   vhost_port_yaml("bp0b") +
                   "lcores: [{lcore: 1, rx: auto, busy_poll_us: 200}]\n"
                   "forwarding: {mode: bridge}\n");
  Guest a("bp0a"), b("bp0b");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  const LcoreCounters& lcore = sw.get().lcores()[0]->counters();
  for (int round = 0; round < 20; ++round) {
    rte_delay_ms(5);  // long enough to fall asleep
    const uint64_t sleeps = lcore.sleeps;
    CHECK(sleeps > 0);
    exchange(a, b, kMacB, kMacA, {60, 1514}, 40 + round);
    exchange(b, a, kMacA, kMacB, {1000}, 80 + round);
  }
  CHECK(lcore.sleeps >= 20);
  // Each round's first frame found the lcore asleep: a kick woke it, not the sleep's timeout.
  CHECK(lcore.wakeups >= 20);
  CHECK(lcore.kick_wakeups >= 20);
  CHECK(lcore.rx_interrupt_wakeups == 0);
  CHECK(sw.get().totals(0).total_drops() == 0);
  CHECK(sw.get().totals(1).total_drops() == 0);
}

TEST_CASE("a guest that enables fewer queue pairs: every lcore's frames reach an enabled queue") {
  // b has 2 queue pairs but its guest enables one: lcore 1 (slot 1) sends on b's queue 1, which
  // must stand in for queue 0. The lcores sleep when idle, for the test thread's CPU.
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" +
                   vhost_port_yaml("mq0a", ", queues: 2") + vhost_port_yaml("mq0b", ", queues: 2") +
                   "lcores:\n"
                   "  - {lcore: 0, rx: [\"mq0a:0\", \"mq0b:0\"], busy_poll_us: 100}\n"
                   "  - {lcore: 1, rx: [\"mq0a:1\", \"mq0b:1\"], busy_poll_us: 100}\n"
                   "forwarding: {mode: xconnect, pairs: [[mq0a, mq0b]]}\n");
  Guest a("mq0a", true, 0, 2), b("mq0b", true, 0, 1);
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  for (int round = 0; round < 4; ++round) {
    exchange(a, b, kMacB, kMacA, {60, 1514, 9018}, 200 + round, 1, 0);  // via lcore 1
    exchange(a, b, kMacB, kMacA, {60, 1514, 9018}, 300 + round, 0, 0);  // via lcore 0
    exchange(b, a, kMacA, kMacB, {60, 1514}, 400 + round, 0, 0);
  }
  const Port& port_b = *sw.get().ports()[1];
  CHECK(port_b.tx_queue_in_use(0) == 0);
  CHECK(port_b.tx_queue_in_use(1) == 0);
  CHECK(sw.get().totals(1).tx_packets == 24);
  CHECK(sw.get().totals(1).total_drops() == 0);
  CHECK(sw.get().totals(0).total_drops() == 0);
}

// Two guests xconnected through the switch; `b` sleeps on its rx interrupt when asked (DPDK's rx
// interrupt mode: rte_eth_dev_rx_intr_enable, then an epoll wait).
struct SleepingGuestPair {
  SleepingGuestPair(const std::string& prefix, const std::string& b_options)
      : sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml(prefix + "a") +
           vhost_port_yaml(prefix + "b", b_options) +
           "lcores: [{lcore: 1, rx: auto}]\nforwarding: {mode: xconnect, pairs: [[" + prefix +
           "a, " + prefix + "b]]}\n"),
        a(prefix + "a"),
        b(prefix + "b", true, 0, 1, /*rx_interrupts=*/true) {
    REQUIRE(sw.wait_link(0));
    REQUIRE(sw.wait_link(1));
    REQUIRE(rte_eth_dev_rx_intr_ctl_q(b.port(), 0, RTE_EPOLL_PER_THREAD, RTE_INTR_EVENT_ADD,
                                      nullptr) == 0);
  }
  ~SleepingGuestPair() {
    (void)rte_eth_dev_rx_intr_ctl_q(b.port(), 0, RTE_EPOLL_PER_THREAD, RTE_INTR_EVENT_DEL, nullptr);
  }
  // One frame from `a` while `b` sleeps: whether its interrupt woke `b` within 2 s. `b` then
  // takes the frame, polling.
  bool frame_wakes_b(uint32_t seed) {
    REQUIRE(rte_eth_dev_rx_intr_enable(b.port(), 0) == 0);
    REQUIRE(send_all(a.port(), 0, {make_packet(200, seed)}) == 1);
    rte_epoll_event event;
    const bool woken = rte_epoll_wait(RTE_EPOLL_PER_THREAD, &event, 1, 2000) == 1;
    REQUIRE(rte_eth_dev_rx_intr_disable(b.port(), 0) == 0);
    free_all(receive(b.port(), 0, 1));
    return woken;
  }

  RunningSwitch sw;
  Guest a, b;
};

TEST_CASE("notify_coalesce: a guest asleep on its rx interrupt gets the deferred notification") {
  SleepingGuestPair pair("nc0", ", notify_coalesce: {packets: 32, usecs: 200}");
  for (uint32_t round = 0; round < 5; ++round) {
    INFO("round " << round);
    // One frame, fewer than 32: its notification is deferred, then sent by the lcore's
    // housekeeping once 200 us have passed. The guest sleeps until then.
    CHECK(pair.frame_wakes_b(round));
  }
  const PortTotals t = pair.sw.get().totals(1);
  CHECK(t.tx_packets == 5);
  CHECK(t.guest.guest_notifications_coalesced >= 5);
  CHECK(t.guest.guest_notifications >= 5);
}

TEST_CASE("interrupt_recheck_us: a guest that polled, then sleeps on its rx interrupt, is woken") {
  // 1 ms: the guest's "no interrupts", read while it polled, stands that long; what it asked
  // meanwhile is settled by the lcore's housekeeping once no burst has come (none will here).
  SleepingGuestPair pair("ir0", ", interrupt_recheck_us: 1000");
  const uint64_t notified_before = pair.sw.get().totals(1).guest.guest_notifications;
  for (uint32_t round = 0; round < 5; ++round) {
    INFO("round " << round);
    // Polling (interrupts off: VRING_AVAIL_F_NO_INTERRUPT), the guest takes a frame; the
    // switch's decision after it reads the flag.
    REQUIRE(send_all(pair.a.port(), 0, {make_packet(200, 2 * round)}) == 1);
    free_all(receive(pair.b.port(), 0, 1));
    // Then it asks for interrupts and sleeps: the next frame's decision stands on what was read.
    CHECK(pair.frame_wakes_b(2 * round + 1));
  }
  const PortTotals t = pair.sw.get().totals(1);
  CHECK(t.tx_packets == 10);
  CHECK(t.total_drops() == 0);
  CHECK(t.guest.guest_notifications - notified_before >= 5);
  // Frame 2's decision came within the interval of frame 1's read (it is read at once when it
  // did not, so a slow round still wakes the guest): at least once is a decision that stood.
  CHECK(t.guest.guest_notifications_late >= 1);
}

// --- Zero-copy: the head-of-line case that made Linux add its copy fallback. ---

// An ethdev that holds what it is sent: a net_ring port whose tx ring only the test drains.
class HoldingPort {
 public:
  explicit HoldingPort(const std::string& name) : name_(name) {
    rx_ =
        rte_ring_create((name + "_rx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx_ =
        rte_ring_create((name + "_tx").c_str(), 8192, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    REQUIRE(rx_ != nullptr);
    REQUIRE(tx_ != nullptr);
    port_id_ = rte_eth_from_rings(name.c_str(), &rx_, 1, &tx_, 1, SOCKET_ID_ANY);
    REQUIRE(port_id_ >= 0);
  }
  // From now on it frees what it holds when rte_eth_tx_done_cleanup asks, as a NIC frees what
  // it has sent; then only the sending lcore may take from it (not release()).
  void free_on_request() { give_tx_done_cleanup(static_cast<uint16_t>(port_id_), tx_); }
  ~HoldingPort() {
    forget_tx_done_cleanup(static_cast<uint16_t>(port_id_));
    release();
    rte_mbuf* m;
    while (rte_ring_dequeue(rx_, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
    rte_ring_free(rx_);
    rte_ring_free(tx_);
  }
  // A frame from `mac` arrives on the port (so the bridge learns where `mac` is).
  void receive_from(const rte_ether_addr& mac) {
    rte_mbuf* m = make_packet(60, 1);
    set_macs(m, kBroadcastMac, mac);
    REQUIRE(rte_ring_enqueue(rx_, m) == 0);
  }
  // Frees everything sent to it; returns how many.
  unsigned release() {
    unsigned n = 0;
    rte_mbuf* m;
    while (rte_ring_dequeue(tx_, reinterpret_cast<void**>(&m)) == 0) {
      rte_pktmbuf_free(m);
      ++n;
    }
    return n;
  }
  unsigned held() const { return rte_ring_count(tx_); }
  // Waits (up to 2 s) until it holds `n` frames.
  void wait_held(unsigned n) const {
    for (int i = 0; i < 2000 && held() < n; ++i) rte_delay_ms(1);
    REQUIRE(held() == n);
  }
  std::string device() const { return "net_ring_" + name_; }  // as rte_eth_from_rings names it

 private:
  static constexpr rte_ether_addr kBroadcastMac = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  std::string name_;
  int port_id_ = -1;
  rte_ring* rx_ = nullptr;
  rte_ring* tx_ = nullptr;
};

// `count` frames of 1500 bytes (lent with zero-copy) from `guest`, seeds from `seed`.
void send_large(const Guest& guest, int count, uint32_t seed) {
  std::vector<rte_mbuf*> pkts;
  for (int i = 0; i < count; ++i) pkts.push_back(make_packet(1500, seed + i));
  REQUIRE(send_all(guest.port(), 0, pkts) == static_cast<size_t>(count));
}

TEST_CASE("zero-copy: a consumer that holds one flow's buffers does not slow the guest's other") {
  const rte_ether_addr kHeld = {{0x02, 0, 0, 0, 0xc, 1}};
  HoldingPort slow("zchold" + std::to_string(serial++));
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" +
                   vhost_port_yaml("zc0src", ", zerocopy: true") + vhost_port_yaml("zc0fast") +
                   "  - {name: slow, type: ethdev, device: " + slow.device() +
                   "}\nlcores: [{lcore: 1, rx: auto}]\nforwarding: {mode: bridge}\n");
  Guest src("zc0src"), fast("zc0fast");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  // virtio_user asks for IN_ORDER by default: only the guest without zero-copy gets it (lent
  // chains come back in the order they are freed).
  auto features = [&](int i) {
    return static_cast<const GuestPort&>(*sw.get().ports()[i]).device().negotiated_features();
  };
  CHECK((features(0) & (1ull << kFInOrder)) == 0);
  CHECK((features(1) & (1ull << kFInOrder)) != 0);
  // The large flow's destination is behind `slow` (its frame is flooded to both guests), the
  // small flow's behind `fast`.
  slow.receive_from(kHeld);
  free_all(receive(src.port(), 0, 1));
  free_all(receive(fast.port(), 0, 1));
  exchange(fast, src, kMacA, kMacB, {60}, 1);
  const PortTotals before = sw.get().totals(0);
  slow.release();  // what the setup flooded to it

  // Rounds of 32 frames of the small flow (to `fast`, 300 bytes: lent too) and, from `with_large`
  // on, 32 of the large one (to `slow`, 1500 bytes, never freed); returns the seconds taken.
  // The small flow is received in full each round, every byte compared.
  auto run = [&](int rounds, bool with_large, uint32_t seed) {
    const uint64_t start = rte_get_timer_cycles();
    for (int r = 0; r < rounds; ++r) {
      if (with_large) {
        std::vector<rte_mbuf*> large;
        for (int i = 0; i < 32; ++i) {
          large.push_back(make_packet(1500, seed + 100 + i));
          set_macs(large.back(), kHeld, kMacA);
        }
        REQUIRE(send_all(src.port(), 0, large) == 32);
      }
      exchange(src, fast, kMacB, kMacA, std::vector<uint32_t>(32, 300), seed + r * 64);
    }
    return static_cast<double>(rte_get_timer_cycles() - start) / rte_get_timer_hz();
  };
  const double alone = run(50, false, 1000);
  const double beside = run(50, true, 5000);
  const PortTotals t = sw.get().totals(0);
  // Every small frame arrived (exchange checks it); the large flow filled its share of slots and
  // was copied beyond it, so the guest never waited for the held buffers.
  CHECK(t.zerocopy_in_flight == 64);  // ring of 256: a quarter, all held by `slow`
  CHECK(t.guest.zero_copy_limit_copies > 0);
  CHECK(slow.held() == 50 * 32);
  UNSCOPED_INFO("small flow: " << 50 * 32 / alone << " pps alone, " << 50 * 32 / beside
                               << " pps beside the held large flow");
  // Timing here is noise-prone (2 shared CPUs): the bound is loose, the stall it guards against
  // is not (without the copy fallback the guest's ring would fill with held buffers).
  CHECK(beside < alone * 4 + 0.5);
  // The consumer lets go: the held chains go back to the guest and lending resumes.
  CHECK(slow.release() == 50 * 32);
  run(2, true, 9000);
  const PortTotals after = sw.get().totals(0);
  CHECK(after.guest.zero_copy_packets > t.guest.zero_copy_packets);
  CHECK(after.total_drops() == before.total_drops());
  // Before the switch goes: a device torn down with chains still lent leaves their tracker and
  // mappings allocated on purpose (a consumer may still read them), which LeakSanitizer reports.
  CHECK(slow.release() == 2 * 32);
}

// A switch with the zero-copy guest `guest` cross-connected with `holder`, both on lcore 1
// (`lcore_keys`: more keys for that lcore).
std::string zero_copy_xconnect_yaml(const std::string& guest, const HoldingPort& holder,
                                    const std::string& lcore_keys = "") {
  return "version: 1\neal: {cores: \"0-1\"}\nports:\n" +
         vhost_port_yaml(guest, ", zerocopy: true") +
         "  - {name: holder, type: ethdev, device: " + holder.device() +
         "}\nlcores: [{lcore: 1, rx: auto" + lcore_keys +
         "}]\nforwarding: {mode: xconnect, pairs: [[" + guest + ", holder]]}\n";
}

TEST_CASE("zero-copy: a NIC that frees lazily is asked to when a guest queue reaches its limit") {
  // Holds what it sends until rte_eth_tx_done_cleanup (a NIC freeing on its ring's threshold,
  // which 320 frames do not reach).
  HoldingPort nic("zclazy" + std::to_string(serial++));
  nic.free_on_request();
  RunningSwitch sw(zero_copy_xconnect_yaml("zc3src", nic));
  const LcoreCounters& lcore = sw.get().lcores()[0]->counters();
  Guest src("zc3src");
  REQUIRE(sw.wait_link(0));
  // Ring of 256: 64 lent at most. Each time the queue copies for its limit, the lcore has the NIC
  // free what it sent, those chains complete, and lending resumes.
  for (int round = 0; round < 10; ++round) {
    send_large(src, 32, 100 * round);
    for (int i = 0; i < 2000 && sw.get().totals(0).rx_packets < 32u * (round + 1); ++i)
      rte_delay_ms(1);
  }
  // The last frames may still be on their way to the ring, or in a reclaim: then forwarding
  // stops, so that no reclaim is halfway through the checks.
  for (int i = 0; i < 2000 && nic.held() + lcore.lent_reclaimed_packets < 320; ++i) rte_delay_ms(1);
  sw.stop();
  const PortTotals t = sw.get().totals(0);
  CHECK(t.rx_packets == 320);
  CHECK(t.total_drops() == 0);
  CHECK(lcore.lent_reclaims > 0);
  CHECK(lcore.lent_reclaimed_packets >= 64);
  UNSCOPED_INFO("lent " << t.guest.zero_copy_packets << ", copied for the limit "
                        << t.guest.zero_copy_limit_copies << ", reclaims " << lcore.lent_reclaims
                        << " freeing " << lcore.lent_reclaimed_packets);
  // Without the reclaim, 64 would be lent and the other 256 copied.
  CHECK(t.guest.zero_copy_packets >= 160);
  CHECK(t.guest.zero_copy_packets + t.guest.zero_copy_copied == 320);
  CHECK(nic.held() + lcore.lent_reclaimed_packets == 320);
}

TEST_CASE("zero-copy: a guest lends only while one of its outputs takes lent buffers as they are") {
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" +
                   vhost_port_yaml("zc4src", ", zerocopy: true") + vhost_port_yaml("zc4dst") +
                   "lcores: [{lcore: 1, rx: auto}]\nforwarding: {mode: bridge}\n");
  Guest src("zc4src"), dst("zc4dst");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  auto lending = [&] {
    return static_cast<const GuestPort&>(*sw.get().ports()[0]).device().lending();
  };
  // Toward the other guest every frame is copied whatever src does: it copies at once.
  CHECK_FALSE(lending());
  exchange(dst, src, kMacA, kMacB, {60}, 1);
  exchange(src, dst, kMacB, kMacA, std::vector<uint32_t>(32, 1500), 2);
  PortTotals t = sw.get().totals(0);
  CHECK(t.guest.zero_copy_packets == 0);
  CHECK(t.guest.zero_copy_copied >= 32);

  // A NIC joins the bridge (net_ring: takes lent buffers as they are): src lends, to it.
  const rte_ether_addr kHeld = {{0x02, 0, 0, 0, 0xc, 4}};
  HoldingPort nic("zcjoin" + std::to_string(serial++));
  std::string error;
  const std::optional<PortConfig> port =
      parse_port(sw.get().running_config(),
                 "{name: held, type: ethdev, device: " + nic.device() + "}", "add-port", &error);
  INFO(error);
  REQUIRE(port.has_value());
  REQUIRE(sw.get().add_port(*port, "", &error).has_value());
  CHECK(lending());
  nic.receive_from(kHeld);
  for (int i = 0; i < 2000 && sw.get().totals(2).rx_packets == 0; ++i) rte_delay_ms(1);
  free_all(receive(src.port(), 0, 1));  // the flood of nic's frame
  free_all(receive(dst.port(), 0, 1));
  const uint64_t lent_before = sw.get().totals(0).guest.zero_copy_packets;
  std::vector<rte_mbuf*> large;
  for (int i = 0; i < 32; ++i) {
    large.push_back(make_packet(1500, 100 + i));
    set_macs(large.back(), kHeld, kMacA);
  }
  REQUIRE(send_all(src.port(), 0, large) == 32);
  nic.wait_held(32);
  CHECK(sw.get().totals(0).guest.zero_copy_packets == lent_before + 32);
  CHECK(nic.release() == 32);

  // It leaves: copying again.
  REQUIRE(sw.get().del_port(
      "held", [](uint16_t) {}, &error));
  CHECK_FALSE(lending());
  const uint64_t lent_after = sw.get().totals(0).guest.zero_copy_packets;
  exchange(src, dst, kMacB, kMacA, std::vector<uint32_t>(32, 1500), 3);
  t = sw.get().totals(0);
  CHECK(t.guest.zero_copy_packets == lent_after);
  CHECK(t.total_drops() == 0);
}

TEST_CASE("zero-copy: a guest leaving while a NIC holds its buffers wakes the lcore to free them") {
  HoldingPort slow("zcleave" + std::to_string(serial++));
  RunningSwitch sw(zero_copy_xconnect_yaml("zc1src", slow, ", busy_poll_us: 100"));
  const LcoreCounters& lcore = sw.get().lcores()[0]->counters();
  auto src = std::make_unique<Guest>("zc1src");
  REQUIRE(sw.wait_link(0));
  send_large(*src, 32, 1);
  slow.wait_held(32);  // every frame lent, and held by the ring nobody drains
  CHECK(sw.get().totals(0).zerocopy_in_flight == 32);
  CHECK(lcore.tx_release_requests == 0);
  rte_delay_ms(20);  // the lcore falls asleep
  REQUIRE(lcore.sleeps > 0);
  const uint64_t woken_by_eventfd = lcore.wakeups - lcore.kick_wakeups;

  // The guest goes (GET_VRING_BASE, then the device is destroyed): its TX ring waits, bounded,
  // for the held buffers, asking the switch meanwhile to have them released.
  const uint64_t start = rte_get_timer_cycles();
  src.reset();
  const double seconds = static_cast<double>(rte_get_timer_cycles() - start) / rte_get_timer_hz();
  CHECK(seconds < 2);  // bounded: 50 ms per stopping ring, not forever
  // Asked while the guest was stopping, so carried out at once: the lcore was woken for it.
  CHECK(lcore.tx_release_requests > 0);
  CHECK(lcore.wakeups - lcore.kick_wakeups > woken_by_eventfd);
  // net_ring frees nothing on request (no tx_done_cleanup in DPDK 22.11): counted, and the held
  // chains are orphaned when the wait expires.
  CHECK(lcore.tx_release_unsupported == lcore.tx_release_requests);
  CHECK(lcore.tx_release_packets == 0);
  CHECK(sw.get().totals(0).zerocopy_in_flight == 32);

  // The holder lets go late: the switch's housekeeping reaps the orphans (the guest's memory
  // goes) without waiting for the guest; then it comes back and lends again.
  CHECK(slow.release() == 32);
  for (int i = 0; i < 1000 && sw.get().totals(0).zerocopy_in_flight > 0; ++i) rte_delay_ms(1);
  CHECK(sw.get().totals(0).zerocopy_in_flight == 0);
  CHECK(sw.get().totals(0).zerocopy_orphans == 32);
  Guest again("zc1src");
  REQUIRE(sw.wait_link(0));
  send_large(again, 1, 100);
  slow.wait_held(1);
  CHECK(sw.get().totals(0).zerocopy_in_flight == 1);
  CHECK(slow.release() == 1);
  for (int i = 0; i < 1000 && sw.get().totals(0).zerocopy_in_flight > 0; ++i) rte_delay_ms(1);
  CHECK(sw.get().totals(0).zerocopy_in_flight == 0);
}

TEST_CASE("zero-copy: a sleeping lcore is woken when a consumer frees lent buffers") {
  HoldingPort slow("zcwake" + std::to_string(serial++));
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" +
                   vhost_port_yaml("zc2src", ", zerocopy: true") +
                   "  - {name: slow, type: ethdev, device: " + slow.device() +
                   "}\n"
                   // The guest's queue alone on lcore 1, so that it sleeps until woken (net_ring
                   // has no rx interrupt: an lcore polling it looks again every millisecond).
                   "lcores:\n"
                   "  - {lcore: 1, rx: [\"zc2src:0\"], busy_poll_us: 100}\n"
                   "  - {lcore: 0, rx: [\"slow:0\"], busy_poll_us: 100}\n"
                   "forwarding: {mode: xconnect, pairs: [[zc2src, slow]]}\n");
  const LcoreCounters& lcore = sw.get().lcores()[0]->counters();
  REQUIRE(sw.get().lcores()[0]->lcore() == 1);
  Guest src("zc2src");
  REQUIRE(sw.wait_link(0));
  std::vector<double> latencies_ms;
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    send_large(src, 16, 100 * round);
    slow.wait_held(16);
    CHECK(sw.get().totals(0).zerocopy_in_flight == 16);
    // Just fallen asleep (for up to 100 ms): the consumer, on this thread, frees everything.
    const uint64_t sleeps = lcore.sleeps;
    for (int i = 0; i < 2000 && lcore.sleeps == sleeps; ++i) rte_delay_us_sleep(100);
    REQUIRE(lcore.sleeps > sleeps);
    const uint64_t start = rte_get_timer_cycles();
    CHECK(slow.release() == 16);
    // Back in the guest's used ring once the woken lcore has polled its queue.
    while (sw.get().totals(0).zerocopy_in_flight > 0 &&
           rte_get_timer_cycles() - start < rte_get_timer_hz())
      rte_delay_us_sleep(100);
    CHECK(sw.get().totals(0).zerocopy_in_flight == 0);
    latencies_ms.push_back(1000.0 * (rte_get_timer_cycles() - start) / rte_get_timer_hz());
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  UNSCOPED_INFO("completion to used ring: median " << latencies_ms[2] << " ms");
  // Without the wake-up the lcore would sleep on to its 100 ms timeout.
  CHECK(latencies_ms[2] < 30);
  CHECK(sw.get().totals(0).zerocopy_wakeups >= 5);
  CHECK(sw.get().totals(0).total_drops() == 0);
}

// Eight 1500-byte frames `guest` sent (seeds from `seed`), taken from `device`'s guest TX vring
// with dequeue_burst as an lcore takes them, what they should hold, and the vring's counters.
struct Dequeued {
  std::vector<rte_mbuf*> got;
  std::vector<std::vector<uint8_t>> expected;
  QueueStats stats;
};
Dequeued send_and_dequeue(VhostDevice& device, const Guest& guest, uint32_t seed) {
  Dequeued d;
  std::vector<rte_mbuf*> sent;
  for (uint32_t i = 0; i < 8; ++i) {
    sent.push_back(make_packet(1500, seed + i));
    d.expected.push_back(packet_bytes(sent.back()));
  }
  REQUIRE(send_all(guest.port(), 0, sent) == 8);
  d.got.resize(8);
  uint16_t n = 0;
  for (int i = 0; i < 2000 && n < 8; ++i) {
    n += device
             .receive_burst(0, vqs::test::interop_pool(), d.got.data() + n,
                            static_cast<uint16_t>(8 - n), UINT32_MAX)
             .packets;
    if (n < 8) rte_delay_ms(1);
  }
  REQUIRE(n == 8);
  d.stats = device.stats(guest_tx_vring(0));
  return d;
}

TEST_CASE(
    "zero-copy: a guest's memory is external memory while lent from, until the last is back") {
  // The switch registers guest memory only for NICs that DMA (none here): the device is driven
  // directly, with a registrar for no device (external memory only).
  EalDmaRegistrar registrar({});
  VhostDeviceOptions options;
  options.path = socket_path("zcdma0");
  options.zero_copy = true;
  options.dma_registrar = &registrar;
  std::string error;
  auto device = VhostDevice::create(options, nullptr, &error);
  INFO(error);
  REQUIRE(device != nullptr);
  device->set_datapath_enabled(true);
  auto guest = std::make_unique<Guest>("zcdma0");
  for (int i = 0; i < 5000 && !device->vring_ready(1); ++i) rte_delay_ms(1);
  REQUIRE(device->vring_ready(1));

  const Dequeued d = send_and_dequeue(*device, *guest, 70);
  const std::vector<rte_mbuf*>& got = d.got;
  // Guest memory is hugepages (EAL's own, shared by virtio_user): registered page by huge page.
  const uint64_t huge_page = rte_mem_virt2memseg_list(got[0])->page_sz;
  std::vector<void*> lent;
  for (const rte_mbuf* m : got) {
    REQUIRE(m->nb_segs > 1);
    for (const rte_mbuf* seg = m->next; seg != nullptr; seg = seg->next) {
      REQUIRE(RTE_MBUF_HAS_EXTBUF(seg));
      CHECK(seg->buf_iova == reinterpret_cast<uintptr_t>(seg->buf_addr));
      const rte_memseg_list* msl = rte_mem_virt2memseg_list(seg->buf_addr);
      REQUIRE(msl != nullptr);
      CHECK(msl->external == 1);
      CHECK(msl->page_sz == huge_page);
      lent.push_back(seg->buf_addr);
    }
  }

  // The guest goes with every chain lent: they are orphaned, the memory stays mapped and
  // registered, readable as it was.
  guest.reset();
  CHECK_FALSE(device->link_up());
  CHECK(device->reap_orphans() == 8);
  for (void* addr : lent) CHECK(rte_mem_virt2memseg_list(addr) != nullptr);
  for (size_t i = 0; i < got.size(); ++i) CHECK(packet_bytes(got[i]) == d.expected[i]);
  // The last lent mbuf freed and reaped: unregistered (and unmapped).
  free_all(got);
  CHECK(device->reap_orphans() == 0);
  for (void* addr : lent) CHECK(rte_mem_virt2memseg_list(addr) == nullptr);
  device.reset();
}

// A registrar that refuses every region (a device that cannot map external memory).
struct RefusingRegistrar final : DmaRegistrar {
  bool register_memory(void*, uint64_t, uint64_t) override {
    ++asked;
    return false;
  }
  void unregister_memory(void*, uint64_t) override { ++unregistered; }
  int asked = 0;
  int unregistered = 0;
};

TEST_CASE("zero-copy: memory the registrar refused is lent without an IOVA, or not at all") {
  // lend_only_dma_ready false: the switch's way (it copies toward devices that DMA itself);
  // true: the PMD's (the application may send anywhere), everything copied.
  for (const bool lend_only_dma_ready : {false, true}) {
    INFO("lend_only_dma_ready " << lend_only_dma_ready);
    RefusingRegistrar registrar;
    const std::string name = "zcdma" + std::to_string(serial++);
    VhostDeviceOptions options;
    options.path = socket_path(name);
    options.zero_copy = true;
    options.dma_registrar = &registrar;
    options.lend_only_dma_ready = lend_only_dma_ready;
    std::string error;
    auto device = VhostDevice::create(options, nullptr, &error);
    INFO(error);
    REQUIRE(device != nullptr);
    device->set_datapath_enabled(true);
    auto guest = std::make_unique<Guest>(name);
    for (int i = 0; i < 5000 && !device->vring_ready(1); ++i) rte_delay_ms(1);
    REQUIRE(device->vring_ready(1));
    CHECK(registrar.asked > 0);

    const Dequeued d = send_and_dequeue(*device, *guest, 90);
    const std::vector<rte_mbuf*>& got = d.got;
    const QueueStats& stats = d.stats;
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(packet_bytes(got[i]) == d.expected[i]);
      bool lent = false;
      for (const rte_mbuf* seg = got[i]; seg != nullptr; seg = seg->next) {
        if (!RTE_MBUF_HAS_EXTBUF(seg)) continue;
        lent = true;
        CHECK(seg->buf_iova == RTE_BAD_IOVA);
      }
      CHECK(lent == !lend_only_dma_ready);
    }
    CHECK(stats.zero_copy_packets == (lend_only_dma_ready ? 0u : 8u));
    CHECK(stats.zero_copy_copied == (lend_only_dma_ready ? 8u : 0u));
    free_all(got);
    guest.reset();
    device.reset();
    CHECK(registrar.unregistered == 0);
  }
}

// --- The kernel through net_tap: ping answered by a guest. ---

uint16_t ip_checksum(const void* data, size_t len) {
  return static_cast<uint16_t>(~rte_raw_cksum(data, len));
}

// Answers ARP requests and ICMP echo requests for `ip` with `mac` on the guest, until `stop`.
void responder(uint16_t port, rte_ether_addr mac, uint32_t ip, std::atomic<bool>* stop,
               std::atomic<int>* echoes) {
  while (!stop->load()) {
    rte_mbuf* pkts[32];
    const uint16_t n = rte_eth_rx_burst(port, 0, pkts, 32);
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
      bool reply = false;
      if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_ARP)) {
        auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
        if (arp->arp_opcode == rte_cpu_to_be_16(RTE_ARP_OP_REQUEST) &&
            arp->arp_data.arp_tip == rte_cpu_to_be_32(ip)) {
          arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
          arp->arp_data.arp_tha = arp->arp_data.arp_sha;
          arp->arp_data.arp_tip = arp->arp_data.arp_sip;
          arp->arp_data.arp_sha = mac;
          arp->arp_data.arp_sip = rte_cpu_to_be_32(ip);
          reply = true;
        }
      } else if (eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
        auto* ipv4 = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
        const size_t ihl = (ipv4->version_ihl & 0xf) * 4;
        auto* icmp = reinterpret_cast<uint8_t*>(ipv4) + ihl;
        if (ipv4->next_proto_id == IPPROTO_ICMP && ipv4->dst_addr == rte_cpu_to_be_32(ip) &&
            icmp[0] == 8) {
          const rte_be32_t from = ipv4->src_addr;
          ipv4->src_addr = ipv4->dst_addr;
          ipv4->dst_addr = from;
          ipv4->hdr_checksum = 0;
          ipv4->hdr_checksum = ip_checksum(ipv4, ihl);
          icmp[0] = 0;  // echo reply
          icmp[2] = icmp[3] = 0;
          const size_t icmp_len = rte_be_to_cpu_16(ipv4->total_length) - ihl;
          const uint16_t sum = ip_checksum(icmp, icmp_len);
          std::memcpy(icmp + 2, &sum, 2);
          reply = true;
          echoes->fetch_add(1);
        }
      }
      if (!reply) {
        rte_pktmbuf_free(m);
        continue;
      }
      eth->dst_addr = eth->src_addr;
      eth->src_addr = mac;
      if (rte_eth_tx_burst(port, 0, &m, 1) != 1) rte_pktmbuf_free(m);
    }
    if (n == 0) rte_delay_us_sleep(100);
  }
}

int shell(const std::string& cmd) {
  INFO(cmd);
  return std::system(cmd.c_str());
}

// The kernel pings a guest on `sw`, a bridge of the guest port tapvm and a net_tap port `tap`,
// with `payload` bytes of ICMP data.
void ping_guest_through_tap(RunningSwitch& sw, const std::string& tap, int payload = 56) {
  Guest guest("tapvm");
  REQUIRE(sw.wait_link(0));
  REQUIRE(shell("ip addr add 10.213.0.1/24 dev " + tap + " && ip link set " + tap + " up") == 0);
  const rte_ether_addr guest_mac = {{0x02, 0x42, 0, 0, 0, 7}};
  std::atomic<bool> stop{false};
  std::atomic<int> echoes{0};
  std::thread answer(responder, guest.port(), guest_mac, 0x0ad50002u, &stop, &echoes);
  // ping compares each reply's data with what it sent, but only says so ("wrong data byte"):
  // read what it prints.
  std::string output;
  FILE* ping = popen(
      ("ping -c 3 -i 0.2 -W 2 -s " + std::to_string(payload) + " -I " + tap + " 10.213.0.2 2>&1")
          .c_str(),
      "r");
  REQUIRE(ping != nullptr);
  char buf[512];
  while (std::fgets(buf, sizeof(buf), ping) != nullptr) output += buf;
  const int rc = pclose(ping);
  stop.store(true);
  answer.join();
  INFO(output);
  CHECK(rc == 0);
  CHECK(output.find("3 received") != std::string::npos);
  CHECK(output.find("wrong data") == std::string::npos);
  CHECK(echoes.load() >= 3);
  CHECK(sw.get().totals(0).tx_packets >= 4);  // ARP and 3 echo requests reached the guest
}

std::string tap_bridge_yaml(const std::string& tap, const std::string& lcore,
                            const std::string& guest_extra = "") {
  return "version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("tapvm", guest_extra) +
         "  - {name: kernel, type: ethdev, device: \"net_tap" + std::to_string(serial++) +
         ",iface=" + tap + "\"}\nlcores: [" + lcore + "]\nforwarding: {mode: bridge}\n";
}

TEST_CASE("the kernel pings a guest through a net_tap port and the bridge") {
  const std::string tap = "vqst" + std::to_string(getpid() % 100000);
  RunningSwitch sw(tap_bridge_yaml(tap, "{lcore: 1, rx: auto}"));
  ping_guest_through_tap(sw, tap);
}

TEST_CASE("busy_poll_us: a sleeping lcore is woken by the net_tap rx interrupt for each ping") {
  const std::string tap = "vqsi" + std::to_string(getpid() % 100000);
  RunningSwitch sw(tap_bridge_yaml(tap, "{lcore: 1, rx: auto, busy_poll_us: 100}"));
  const LcoreCounters& lcore = sw.get().lcores()[0]->counters();
  ping_guest_through_tap(sw, tap);
  // Pings 200 ms apart each find the lcore asleep: the tap queue's interrupt, not the sleep's
  // timeout, woke it for the ARP request and each echo request.
  CHECK(lcore.sleeps >= 3);
  CHECK(lcore.rx_interrupt_wakeups >= 3);
  CHECK(sw.get().totals(1).total_drops() == 0);
}

TEST_CASE("zerocopy: a guest's echo replies lent to net_tap reach the kernel intact") {
  const std::string tap = "vqsz" + std::to_string(getpid() % 100000);
  RunningSwitch sw(tap_bridge_yaml(tap, "{lcore: 1, rx: auto}", ", zerocopy: true"));
  // 1400 bytes of data: each reply is a lent chain (a head mbuf with the first 128 bytes, the
  // rest the guest's own buffer), which net_tap writes to the kernel from both segments; ping
  // compares each reply's data with what it sent (a segment one byte off fails it).
  ping_guest_through_tap(sw, tap, 1400);
  const PortTotals guest = sw.get().totals(0);
  CHECK(guest.guest.zero_copy_packets >= 3);
  for (uint64_t dropped : guest.guest.drops) CHECK(dropped == 0);
  // Nothing toward the kernel was refused (a chained mbuf, segments in guest memory).
  CHECK(sw.get().totals(1).total_drops() == 0);
  // net_tap frees each chain once written: every lent buffer went back to the guest.
  for (int i = 0; i < 100 && sw.get().totals(0).zerocopy_in_flight != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(sw.get().totals(0).zerocopy_in_flight == 0);
}

// --- A guest's TSO toward a NIC without TSO: cut by rte_gso, seen by the kernel. ---

// A veth pair for the test's lifetime, IPv6 off (no stray router solicitations), GRO off on the
// receiving end so the kernel shows the frames as they arrived.
class VethPair {
 public:
  explicit VethPair(const std::string& name) : a_(name + "a"), b_(name + "b") {
    REQUIRE(shell("ip link add " + a_ + " type veth peer name " + b_) == 0);
    for (const std::string& dev : {a_, b_})
      REQUIRE(shell("sysctl -qw net.ipv6.conf." + dev + ".disable_ipv6=1 && ip link set " + dev +
                    " up") == 0);
    (void)shell("ethtool -K " + b_ + " gro off >/dev/null 2>&1");
  }
  ~VethPair() { (void)std::system(("ip link del " + a_ + " 2>/dev/null").c_str()); }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
};

// Frames arriving on `ifname`, read with a packet socket.
class FrameTap {
 public:
  explicit FrameTap(const std::string& ifname) {
    fd_ = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    REQUIRE(fd_ >= 0);
    sockaddr_ll addr{};
    addr.sll_family = AF_PACKET;
    addr.sll_protocol = htons(ETH_P_ALL);
    addr.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    timeval tv{0, 100000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~FrameTap() { close(fd_); }
  // Frames of IPv4/TCP from 10.0.0.1 until `payload_bytes` of TCP payload arrived or 3 s passed.
  std::vector<std::vector<uint8_t>> tcp_frames(size_t payload_bytes) {
    std::vector<std::vector<uint8_t>> frames;
    size_t got = 0;
    const uint64_t end = rte_get_timer_cycles() + 3 * rte_get_timer_hz();
    std::vector<uint8_t> buf(65536);
    while (got < payload_bytes && rte_get_timer_cycles() < end) {
      const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n < 54) continue;
      const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(buf.data() + 14);
      if (buf[12] != 0x08 || buf[13] != 0x00 || ip->next_proto_id != IPPROTO_TCP ||
          ip->src_addr != rte_cpu_to_be_32(0x0a000001))
        continue;
      frames.emplace_back(buf.begin(), buf.begin() + n);
      got += static_cast<size_t>(n) - 54;
    }
    return frames;
  }

 private:
  int fd_ = -1;
};

TEST_CASE("a guest's TSO toward a NIC without TSO (af_packet) leaves as checksummed segments") {
  VethPair veth("vqsg" + std::to_string(getpid() % 10000));
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" +
                   vhost_port_yaml("gso0", ", tso: true") +
                   "  - {name: wire, type: ethdev, device: \"net_af_packet" +
                   std::to_string(serial++) + ",iface=" + veth.a() +
                   "\"}\nlcores: [{lcore: 1, rx: auto}]\n"
                   "forwarding: {mode: xconnect, pairs: [[gso0, wire]]}\n");
  Guest guest("gso0", true, RTE_ETH_TX_OFFLOAD_TCP_TSO | RTE_ETH_TX_OFFLOAD_TCP_CKSUM);
  REQUIRE(sw.wait_link(0));
  FrameTap tap(veth.b());
  constexpr uint32_t kLen = 20000;
  constexpr uint16_t kMss = 1400;
  rte_mbuf* m = make_packet(kLen, 77, true);
  set_macs(m, kMacB, kMacA);
  const std::vector<uint8_t> sent = packet_bytes(m);
  m->l2_len = 14;
  m->l3_len = 20;
  m->l4_len = 20;
  m->tso_segsz = kMss;
  // As an application asks virtio for TSO (it has no IPv4 checksum offload: the segments' IPv4
  // headers are the device's to finish).
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM | RTE_MBUF_F_TX_TCP_SEG;
  REQUIRE(rte_eth_tx_prepare(guest.port(), 0, &m, 1) == 1);
  REQUIRE(send_all(guest.port(), 0, {m}) == 1);

  const size_t payload = kLen - 54;
  const auto frames = tap.tcp_frames(payload);
  REQUIRE(frames.size() == (payload + kMss - 1) / kMss);
  uint32_t first_seq = 0;
  std::vector<uint8_t> joined(sent.begin(), sent.begin() + 54);
  for (size_t i = 0; i < frames.size(); ++i) {
    INFO("segment " << i);
    const std::vector<uint8_t>& f = frames[i];
    CHECK(f.size() <= 54 + kMss);
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(f.data() + 14);
    const auto* tcp = reinterpret_cast<const rte_tcp_hdr*>(f.data() + 34);
    CHECK(rte_be_to_cpu_16(ip->total_length) == f.size() - 14);
    CHECK(rte_ipv4_cksum(ip) == 0);  // a valid header sums to 0xffff, complemented: 0
    uint32_t sum = rte_raw_cksum(f.data() + 34, f.size() - 34) + rte_ipv4_phdr_cksum(ip, 0);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    CHECK(sum == 0xffff);
    if (i == 0) first_seq = rte_be_to_cpu_32(tcp->sent_seq);
    CHECK(rte_be_to_cpu_32(tcp->sent_seq) - first_seq == i * kMss);
    joined.insert(joined.end(), f.begin() + 54, f.end());
  }
  // The payload arrived whole and in order.
  REQUIRE(joined.size() == sent.size());
  CHECK(std::equal(joined.begin() + 54, joined.end(), sent.begin() + 54));
  // The kernel has the frames during the lcore's tx burst, before the lcore counts them.
  for (int i = 0; i < 1000 && sw.get().totals(1).tx_packets < frames.size(); ++i) rte_delay_ms(1);
  CHECK(sw.get().totals(1).tx_packets == frames.size());
  CHECK(sw.get().totals(0).total_drops() == 0);
  CHECK(sw.get().totals(1).total_drops() == 0);
}

// --- Telemetry over DPDK's socket, as dpdk-telemetry.py speaks it. ---

TEST_CASE("telemetry: /vqswitch/ports, /vqswitch/lcores and /vqswitch/queues answer") {
  RunningSwitch sw("version: 1\neal: {cores: \"0-1\"}\nports:\n" + vhost_port_yaml("tel0a") +
                   vhost_port_yaml("tel0b") +
                   "lcores: [{lcore: 1, rx: auto}]\n"
                   "forwarding: {mode: xconnect, pairs: [[tel0a, tel0b]]}\n");
  telemetry_attach(&sw.get());
  Guest a("tel0a"), b("tel0b");
  REQUIRE(sw.wait_link(0));
  REQUIRE(sw.wait_link(1));
  exchange(a, b, kMacB, kMacA, {60, 60, 60}, 5);
  const std::string list = telemetry("/vqswitch/ports");
  CHECK(list == "{\"/vqswitch/ports\":[\"tel0a\",\"tel0b\"]}");
  const std::string port = telemetry("/vqswitch/ports,tel0a");
  CHECK(port.find("\"rx_packets\":3") != std::string::npos);
  CHECK(port.find("\"link\":\"up\"") != std::string::npos);
  CHECK(port.find("\"no_guest_buffer\":0") != std::string::npos);
  CHECK(telemetry("/vqswitch/lcores") == "{\"/vqswitch/lcores\":[1]}");
  CHECK(telemetry("/vqswitch/lcores,1").find("{\"/vqswitch/lcores\":{\"rx_queues\":2,") == 0);
  CHECK(telemetry("/vqswitch/lcores,1").find("\"tx_release_requests\":0,") != std::string::npos);
  CHECK(telemetry("/vqswitch/lcores,7") == "{\"/vqswitch/lcores\":null}");
  CHECK(telemetry("/vqswitch/queues") == "{\"/vqswitch/queues\":[\"tel0a:0\",\"tel0b:0\"]}");
  const std::string queues = telemetry("/vqswitch/queues,tel0b");
  INFO(queues);
  CHECK(queues.find("{\"/vqswitch/queues\":{\"rxq0\":{\"lcore\":1,") == 0);
  CHECK(queues.find("tel0a") == std::string::npos);
  const std::string one = telemetry("/vqswitch/queues,tel0a:0");
  INFO(one);
  CHECK(one.find("{\"/vqswitch/queues\":{\"port\":\"tel0a\",\"queue\":0,\"lcore\":1,") == 0);
  CHECK(one.find("\"rx_packets\":3") != std::string::npos);
  // Where tel0a's guest runs, by desc_release auto's probe: one timed load in 64 polls, counted
  // when the guest moved its index since the lcore's previous load. Frames one at a time.
  std::string placed = one;
  for (uint32_t i = 0;
       i < 5000 && placed.find("\"guest_cache\":\"unmeasured\"") != std::string::npos; ++i) {
    exchange(a, b, kMacB, kMacA, {60}, 100 + i);
    placed = telemetry("/vqswitch/queues,tel0a:0");
  }
  INFO(placed);
  // vqswitchctl's commands, as the control socket runs them.
  LoadSampler load(sw.get());
  RxqBalancer balancer(sw.get(), load);
  ControlCommands commands(sw.get(), load, balancer);
  if (line_release_supported()) {  // else auto is off: nothing measured
    CHECK((placed.find("\"guest_cache\":\"near\"") != std::string::npos ||
           placed.find("\"guest_cache\":\"far\"") != std::string::npos));
    CHECK(placed.find("\"guest_line_ns\":0,") == std::string::npos);
    CHECK(placed.find("\"guest_line_ns\":0}") == std::string::npos);
    // vqswitchctl rxq-show tells the same.
    const ControlReply rxq = commands.run({"rxq-show", "--json"});
    REQUIRE(rxq.ok);
    const nlohmann::json queues_json = nlohmann::json::parse(rxq.text);
    bool shown = false;
    for (const auto& q : queues_json["rx_queues"]) {
      if (q["port"] != "tel0a") continue;
      shown = true;
      CHECK((q["guest_cache"] == "near" || q["guest_cache"] == "far"));
      CHECK(q["guest_line_ns"].get<uint64_t>() > 0);
    }
    CHECK(shown);
    const ControlReply text = commands.run({"rxq-show"});
    INFO(text.text);
    CHECK((text.text.find(" guest cache near (") != std::string::npos ||
           text.text.find(" guest cache far (") != std::string::npos));
  } else {
    CHECK(placed.find("\"guest_cache\":\"unmeasured\"") != std::string::npos);
  }
  // tel0a's guest only sends: after a window of its frames, it is taken for a sender
  // (buffer_release auto's gate); tel0b's only receives.
  const std::vector<uint32_t> burst(32, 60);
  for (uint32_t i = 0; i <= SenderGate::kWindow / 32; ++i) exchange(a, b, kMacB, kMacA, burst, i);
  CHECK(telemetry("/vqswitch/queues,tel0a:0").find("\"guest_sends_own\":1") != std::string::npos);
  CHECK(telemetry("/vqswitch/queues,tel0b:0").find("\"guest_sends_own\":0") != std::string::npos);
  const ControlReply sends = commands.run({"rxq-show", "--json"});
  REQUIRE(sends.ok);
  const nlohmann::json sends_json = nlohmann::json::parse(sends.text);
  for (const auto& q : sends_json["rx_queues"])
    CHECK(q["guest_sends_own"] == (q["port"] == "tel0a"));
  const ControlReply sends_text = commands.run({"rxq-show"});
  INFO(sends_text.text);
  CHECK(sends_text.text.find(" guest sends own frames") != std::string::npos);
  telemetry_attach(nullptr);
  CHECK(telemetry("/vqswitch/ports") == "{\"/vqswitch/ports\":[]}");
}

}  // namespace
}  // namespace vqs::app::test
