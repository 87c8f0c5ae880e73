// SPDX-License-Identifier: BSD-3-Clause
// The learning L2 bridge over fake ports: learning, flooding, aging, a full table, VLANs, frame
// sharing and copies, and several lcores learning while the control thread ages.
#include <rte_lcore.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "bridge_fixture.h"

namespace vqs::app::test {
namespace {

using Counts = std::vector<size_t>;
using Frames = std::vector<std::vector<uint8_t>>;

uint64_t seconds(double s) {
  return static_cast<uint64_t>(s * static_cast<double>(rte_get_tsc_hz()));
}

TEST_CASE("bridge: unknown unicast floods to every other port, then the learned port alone") {
  BridgeFixture fx({unaware(), unaware(), unaware()});
  const Mac a = host(1), b = host(2);

  fx.send(0, frame(b, a));
  CHECK(fx.take(0).empty());
  CHECK(fx.take(1) == Frames{frame(b, a)});
  CHECK(fx.take(2) == Frames{frame(b, a)});
  CHECK(fx.bridge->counters().flooded == 1);
  CHECK(fx.bridge->counters().learned == 1);

  fx.send(1, frame(a, b));  // the reply: a is known
  CHECK(fx.take_counts() == Counts{1, 0, 0});
  fx.send(0, frame(b, a));  // and now b is too
  CHECK(fx.take(1) == Frames{frame(b, a)});
  CHECK(fx.take_counts() == Counts{0, 0, 0});

  const BridgeCounters c = fx.bridge->counters();
  CHECK(c.learned == 2);
  CHECK(c.flooded == 1);
  CHECK(c.entries == 2);
  CHECK(c.moved == 0);
}

TEST_CASE("bridge: broadcast and multicast flood, sharing one mbuf") {
  BridgeFixture fx({unaware(), unaware(), unaware(), unaware()});
  const Mac a = host(1);
  fx.send(1, frame(a, host(9)));  // learn something, so known entries do not matter
  fx.take_counts();
  for (const Mac& dst : {kBroadcast, kMulticast}) {
    fx.send(0, frame(dst, a));
    REQUIRE(fx.sent(1).size() == 1);
    REQUIRE(fx.sent(2).size() == 1);
    REQUIRE(fx.sent(3).size() == 1);
    // Unchanged frames: one mbuf, three references.
    CHECK(fx.sent(1)[0] == fx.sent(2)[0]);
    CHECK(fx.sent(2)[0] == fx.sent(3)[0]);
    CHECK(rte_mbuf_refcnt_read(fx.sent(1)[0]) == 3);
    CHECK(fx.take(1) == Frames{frame(dst, a)});
    CHECK(fx.take_counts() == Counts{0, 0, 1, 1});
  }
  CHECK(fx.bridge->counters().flooded == 3);
}

TEST_CASE("bridge: a destination behind the input port is dropped as no_route") {
  BridgeFixture fx({unaware(), unaware()});
  const Mac a = host(1), b = host(2);
  fx.send(0, frame(kBroadcast, b));
  fx.take_counts();
  fx.send(0, frame(b, a));
  CHECK(fx.take_counts() == Counts{0, 0});
  CHECK(fx.drops(0, SwitchDrop::kNoRoute) == 1);
}

TEST_CASE("bridge: a flood with no other port in the VLAN is dropped as no_route") {
  BridgeFixture fx({unaware(), access(10)});
  fx.send(0, frame(kBroadcast, host(1)));
  fx.send(1, frame(host(5), host(2)));
  CHECK(fx.take_counts() == Counts{0, 0});
  CHECK(fx.drops(0, SwitchDrop::kNoRoute) == 1);
  CHECK(fx.drops(1, SwitchDrop::kNoRoute) == 1);
  CHECK(fx.bridge->counters().flooded == 0);
}

TEST_CASE("bridge: a MAC seen on another port moves") {
  BridgeFixture fx({unaware(), unaware(), unaware()});
  const Mac a = host(1), b = host(2);
  fx.send(0, frame(kBroadcast, a));
  fx.send(1, frame(kBroadcast, a));  // a moved to port 1
  fx.take_counts();
  fx.send(2, frame(a, b));
  CHECK(fx.take_counts() == Counts{0, 1, 0});
  const BridgeCounters c = fx.bridge->counters();
  CHECK(c.moved == 1);
  CHECK(c.learned == 2);
  CHECK(c.entries == 2);
}

TEST_CASE("bridge: a port deleted at run time: its entries go, floods skip it; a new one joins") {
  BridgeFixture fx({unaware(), unaware(), unaware()});
  const Mac a = host(1), b = host(2), c = host(3);
  fx.send(0, frame(b, a));
  fx.send(1, frame(a, b));
  fx.send(2, frame(a, c));
  (void)fx.take_counts();
  REQUIRE(fx.bridge->counters().entries == 3);

  // Port 1 leaves: its entry goes (b is unknown again), and floods no longer reach it.
  CHECK(fx.bridge->flush_port(1) == 1);
  std::string error;
  const VlanConfig none = unaware();
  std::optional<VlanMap> without =
      VlanMap::create(std::vector<const VlanConfig*>{&none, nullptr, &none}, &error);
  REQUIRE(without);
  fx.bridge->use_vlans(0, fx.bridge->publish_vlans(std::move(*without)));
  fx.bridge->retire_vlans();
  fx.send(0, frame(b, a));
  CHECK(fx.take_counts() == Counts{0, 0, 1});
  fx.send(0, frame(c, a));  // the others are still known
  CHECK(fx.take_counts() == Counts{0, 0, 1});
  CHECK(fx.bridge->counters().entries == 2);

  // A port at index 1 again, in VLAN 5 this time: unaware ports' floods do not reach it.
  const VlanConfig vlan5 = access(5);
  std::optional<VlanMap> with =
      VlanMap::create(std::vector<const VlanConfig*>{&none, &vlan5, &none}, &error);
  REQUIRE(with);
  fx.bridge->use_vlans(0, fx.bridge->publish_vlans(std::move(*with)));
  fx.bridge->retire_vlans();
  fx.send(0, frame(kBroadcast, a));
  CHECK(fx.take_counts() == Counts{0, 0, 1});
}

TEST_CASE("bridge: runt frames are dropped as no_route") {
  BridgeFixture fx({unaware(), unaware()});
  std::vector<uint8_t> runt = frame(host(2), host(1));
  runt.resize(13);
  std::vector<uint8_t> tagged_runt = frame(host(2), host(1), tci(5));
  tagged_runt.resize(17);
  fx.forward(0, {fx.mbuf(runt), fx.mbuf(tagged_runt)});
  CHECK(fx.take_counts() == Counts{0, 0});
  CHECK(fx.drops(0, SwitchDrop::kNoRoute) == 2);
  CHECK(fx.bridge->counters().entries == 0);
}

TEST_CASE("bridge: aging removes idle entries; a refreshed entry stays; aging 0 never ages") {
  SECTION("aging 10 s") {
    BridgeFixture fx({unaware(), unaware(), unaware()}, 1024, 10);
    const Mac a = host(1), b = host(2), c = host(3);
    fx.send(0, frame(kBroadcast, a), kT0);
    fx.send(1, frame(kBroadcast, b), kT0);
    fx.send(1, frame(kBroadcast, b), kT0 + seconds(8));  // b refreshed (stale by > 1 s)
    fx.take_counts();

    fx.bridge->age(kT0 + seconds(5));
    CHECK(fx.bridge->counters().aged == 0);
    fx.bridge->age(kT0 + seconds(12));  // a idle 12 s, b 4 s
    BridgeCounters counters = fx.bridge->counters();
    CHECK(counters.aged == 1);
    CHECK(counters.entries == 1);

    fx.send(2, frame(a, c), kT0 + seconds(12));  // a is unknown again: flooded
    CHECK(fx.take_counts() == Counts{1, 1, 0});
    fx.send(2, frame(b, c), kT0 + seconds(12));  // b still known
    CHECK(fx.take_counts() == Counts{0, 1, 0});

    fx.bridge->age(kT0 + seconds(100));
    counters = fx.bridge->counters();
    CHECK(counters.aged == 3);  // a was never relearned; b and c now
    CHECK(counters.entries == 0);
    fx.send(2, frame(b, c), kT0 + seconds(100));
    CHECK(fx.take_counts() == Counts{1, 1, 0});
  }
  SECTION("aging 0") {
    BridgeFixture fx({unaware(), unaware()}, 1024, 0);
    fx.send(0, frame(kBroadcast, host(1)), kT0);
    fx.take_counts();
    fx.bridge->age(kT0 + seconds(1e6));
    CHECK(fx.bridge->counters().aged == 0);
    CHECK(fx.bridge->counters().entries == 1);
    fx.send(1, frame(host(1), host(2)), kT0 + seconds(1e6));
    CHECK(fx.take_counts() == Counts{1, 0});
  }
}

TEST_CASE("bridge: a full table counts table_full and floods to the unlearned") {
  BridgeFixture fx({unaware(), unaware(), unaware()}, 8);
  constexpr int kHosts = 40;
  std::vector<rte_mbuf*> burst;
  for (int i = 0; i < kHosts; ++i) burst.push_back(fx.mbuf(frame(kBroadcast, host(i + 1))));
  fx.forward(0, burst);
  fx.take_counts();
  const BridgeCounters c = fx.bridge->counters();
  CHECK(c.entries == 8);
  CHECK(c.learned == 8);
  CHECK(c.table_full == kHosts - 8);

  // Replies: to a learned host unicast, to one the table had no room for flooded.
  int unicast = 0, flooded = 0;
  for (int i = 0; i < kHosts; ++i) {
    fx.send(1, frame(host(i + 1), host(200)));
    const Counts counts = fx.take_counts();
    if (counts == Counts{1, 0, 0}) ++unicast;
    if (counts == Counts{1, 0, 1}) ++flooded;
  }
  CHECK(unicast == 8);
  CHECK(flooded == kHosts - 8);
  CHECK(fx.bridge->counters().table_full == kHosts - 8 + kHosts);  // host(200) never fit
}

TEST_CASE("bridge: bursts longer than a lookup batch") {
  BridgeFixture fx({unaware(), unaware()});
  std::vector<rte_mbuf*> burst;
  for (int i = 0; i < 100; ++i) burst.push_back(fx.mbuf(frame(kBroadcast, host(i + 1))));
  fx.forward(0, burst);
  CHECK(fx.take_counts() == Counts{0, 100});
  CHECK(fx.bridge->counters().learned == 100);
  CHECK(fx.bridge->counters().flooded == 100);
  // One new source many times in a burst: one entry.
  burst.clear();
  for (int i = 0; i < 40; ++i) burst.push_back(fx.mbuf(frame(host(1), host(200))));
  fx.forward(1, burst);
  CHECK(fx.take_counts() == Counts{40, 0});
  CHECK(fx.bridge->counters().learned == 101);
  CHECK(fx.bridge->counters().entries == 101);
  CHECK(fx.bridge->counters().moved == 0);
}

TEST_CASE("bridge: frames of one flow in a row share a lookup; each still reaches its own port") {
  BridgeFixture fx({unaware(), unaware(), unaware(), unaware()});
  const Mac a = host(1), b = host(2), c = host(3), x = host(11), y = host(12), z = host(13);
  const Mac nobody = host(99);
  fx.send(1, frame(kBroadcast, x));
  fx.send(2, frame(kBroadcast, y));
  fx.send(3, frame(kBroadcast, z));
  fx.take_counts();
  // Runs of equal sources and destinations, broken and resumed, and an unknown destination.
  const std::vector<std::pair<Mac, Mac>> burst = {{x, a}, {x, a}, {x, a}, {y, b},      {y, b},
                                                  {x, a}, {z, c}, {y, a}, {nobody, a}, {x, a}};
  std::vector<rte_mbuf*> pkts;
  for (const auto& [dst, src] : burst) pkts.push_back(fx.mbuf(frame(dst, src)));
  fx.forward(0, pkts);
  const Frames to_x(5, frame(x, a));
  CHECK(fx.take(1) == [&] {
    Frames f = to_x;
    f.insert(f.end() - 1, frame(nobody, a));  // the flood came before the last frame to x
    return f;
  }());
  CHECK(fx.take(2) == Frames{frame(y, b), frame(y, b), frame(y, a), frame(nobody, a)});
  CHECK(fx.take(3) == Frames{frame(z, c), frame(nobody, a)});
  CHECK(fx.take(0).empty());
  const BridgeCounters counters = fx.bridge->counters();
  CHECK(counters.learned == 6);  // x, y, z, then a, b, c
  CHECK(counters.flooded == 4);
  CHECK(counters.moved == 0);
  // a's run, then b's, then a again on another port: a moves once.
  fx.forward(
      2, {fx.mbuf(frame(x, a)), fx.mbuf(frame(x, a)), fx.mbuf(frame(x, b)), fx.mbuf(frame(x, a))});
  CHECK(fx.take_counts() == Counts{0, 4, 0, 0});
  CHECK(fx.bridge->counters().moved == 2);  // a and b, each once
  fx.send(1, frame(a, x));
  CHECK(fx.take_counts() == Counts{0, 0, 1, 0});
}

// Ports of the VLAN tests.
enum : uint16_t {
  kAccess10a,  // access 10
  kAccess10b,  // access 10
  kAccess20,   // access 20
  kTrunk,      // trunk 10, 20; no native VLAN
  kNative10,   // trunk 20, 30, native 10
  kUnawareA,
  kUnawareB,
  kVlanPorts,
};

TEST_CASE("bridge VLANs: access ports") {
  BridgeFixture fx({access(10), access(10), access(20), trunk({10, 20}), trunk({20, 30}, 10),
                    unaware(), unaware()});
  const Mac a = host(1), b = host(2);

  SECTION("same VLAN: flooded untagged to access, tagged to trunk, untagged on native") {
    fx.send(kAccess10a, frame(kBroadcast, a));
    CHECK(fx.take(kAccess10b) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(10))});
    CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  }
  SECTION("the untagged outputs share the frame; the tagged one gets a copy") {
    fx.send(kAccess10a, frame(kBroadcast, a));
    REQUIRE(fx.sent(kAccess10b).size() == 1);
    REQUIRE(fx.sent(kNative10).size() == 1);
    REQUIRE(fx.sent(kTrunk).size() == 1);
    CHECK(fx.sent(kAccess10b)[0] == fx.sent(kNative10)[0]);
    CHECK(fx.sent(kTrunk)[0] != fx.sent(kNative10)[0]);
    fx.take_counts();
  }
  SECTION("different VLANs are isolated") {
    fx.send(kAccess20, frame(kBroadcast, a));
    CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(20))});
    CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a, tci(20))});
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
    // The same MAC is another station in another VLAN.
    fx.send(kAccess10a, frame(kBroadcast, a));
    fx.take_counts();
    fx.send(kAccess10b, frame(a, b));
    CHECK(fx.take(kAccess10a).size() == 1);
    fx.send(kTrunk, frame(a, b, tci(20)));
    CHECK(fx.take(kAccess20) == Frames{frame(a, b)});
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  }
  SECTION("tagged frames on an access port are dropped, priority tags accepted") {
    fx.send(kAccess10a, frame(kBroadcast, a, tci(10)));
    fx.send(kAccess10a, frame(kBroadcast, a, tci(20)));
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
    CHECK(fx.drops(kAccess10a, SwitchDrop::kVlanFiltered) == 2);
    fx.send(kAccess10a, frame(kBroadcast, a, tci(0, 5)));
    CHECK(fx.take(kAccess10b) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(10, 5))});
    CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a)});
  }
  SECTION("unicast across a trunk: tag pushed and popped") {
    fx.send(kAccess10a, frame(kBroadcast, a));
    fx.send(kTrunk, frame(kBroadcast, b, tci(10)));
    fx.take_counts();
    fx.send(kAccess10a, frame(b, a));
    CHECK(fx.take(kTrunk) == Frames{frame(b, a, tci(10))});
    fx.send(kTrunk, frame(a, b, tci(10, 7)));
    CHECK(fx.take(kAccess10a) == Frames{frame(a, b)});
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  }
}

TEST_CASE("bridge VLANs: trunks") {
  BridgeFixture fx({access(10), access(10), access(20), trunk({10, 20}), trunk({20, 30}, 10),
                    unaware(), unaware()});
  const Mac a = host(1);

  SECTION("tagged frames leave access ports untagged") {
    fx.send(kTrunk, frame(kBroadcast, a, tci(10)));
    CHECK(fx.take(kAccess10a) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kAccess10b) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a)});  // native: untagged
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  }
  SECTION("native VLAN: untagged in, and tagged in too") {
    fx.send(kNative10, frame(kBroadcast, a));
    CHECK(fx.take(kAccess10a) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kAccess10b) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(10))});
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
    fx.send(kNative10, frame(kBroadcast, a, tci(10, 2)));
    CHECK(fx.take(kAccess10a) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(10, 2))});
    fx.take_counts();
  }
  SECTION("PCP and DEI are kept between trunks; VID 0 on a trunk is its native VLAN") {
    fx.send(kTrunk, frame(kBroadcast, a, tci(20, 6, true)));
    CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a, tci(20, 6, true))});
    CHECK(fx.take(kAccess20) == Frames{frame(kBroadcast, a)});
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
    fx.send(kNative10, frame(kBroadcast, a, tci(0, 3)));
    CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(10, 3))});
    CHECK(fx.take(kAccess10a) == Frames{frame(kBroadcast, a)});
    fx.take_counts();
  }
  SECTION("disallowed tags, and untagged frames without a native VLAN, are dropped") {
    fx.send(kTrunk, frame(kBroadcast, a, tci(30)));
    fx.send(kTrunk, frame(kBroadcast, a, tci(4095)));
    fx.send(kTrunk, frame(kBroadcast, a));
    fx.send(kTrunk, frame(kBroadcast, a, tci(0, 1)));
    fx.send(kNative10, frame(kBroadcast, a, tci(40)));
    CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
    CHECK(fx.drops(kTrunk, SwitchDrop::kVlanFiltered) == 4);
    CHECK(fx.drops(kNative10, SwitchDrop::kVlanFiltered) == 1);
    CHECK(fx.bridge->counters().entries == 0);
  }
}

TEST_CASE("bridge VLANs: VLAN-unaware ports pass frames unchanged, only among themselves") {
  BridgeFixture fx({access(10), access(10), access(20), trunk({10, 20}), trunk({20, 30}, 10),
                    unaware(), unaware()});
  const Mac a = host(1);
  fx.send(kUnawareA, frame(kBroadcast, a));
  CHECK(fx.take(kUnawareB) == Frames{frame(kBroadcast, a)});
  fx.send(kUnawareA, frame(kBroadcast, a, tci(10, 4)));
  CHECK(fx.take(kUnawareB) == Frames{frame(kBroadcast, a, tci(10, 4))});
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  fx.send(kAccess10a, frame(kBroadcast, host(2)));
  CHECK(fx.take(kUnawareA).empty());
  CHECK(fx.take(kUnawareB).empty());
  fx.take_counts();
  // A MAC learned on a VLAN port is not a destination from an unaware one.
  fx.send(kUnawareA, frame(host(2), a));
  CHECK(fx.take(kUnawareB).size() == 1);
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
}

TEST_CASE("bridge VLANs: a tag the NIC stripped into the mbuf") {
  BridgeFixture fx({access(10), access(10), access(20), trunk({10, 20}), trunk({20, 30}, 10),
                    unaware(), unaware()});
  const Mac a = host(1);
  auto stripped = [&](uint16_t tag) {
    rte_mbuf* m = fx.mbuf(frame(kBroadcast, a));
    m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
    m->vlan_tci = tag;
    return m;
  };
  fx.forward(kTrunk, {stripped(tci(20, 5))});
  CHECK(fx.take(kAccess20) == Frames{frame(kBroadcast, a)});
  CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a, tci(20, 5))});
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  fx.forward(kUnawareA, {stripped(tci(77))});  // unaware: the frame as it was on the wire
  CHECK(fx.take(kUnawareB) == Frames{frame(kBroadcast, a, tci(77))});
  fx.forward(kAccess10a, {stripped(tci(10))});
  CHECK(fx.drops(kAccess10a, SwitchDrop::kVlanFiltered) == 1);
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
}

TEST_CASE("bridge VLANs: frames in a row that differ only in their tag are classified apart") {
  // A frame whose head equals the previous one's shares its verdict: the tag's TCI and a tag the
  // NIC stripped into the mbuf are part of what must be equal.
  BridgeFixture fx({access(10), access(10), access(20), trunk({10, 20}), trunk({20, 30}, 10),
                    unaware(), unaware()});
  const Mac a = host(1);
  rte_mbuf* stripped = fx.mbuf(frame(kBroadcast, a));
  stripped->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  stripped->vlan_tci = tci(10);
  fx.forward(kTrunk,
             {fx.mbuf(frame(kBroadcast, a, tci(10))), fx.mbuf(frame(kBroadcast, a, tci(20))),
              fx.mbuf(frame(kBroadcast, a, tci(30))), fx.mbuf(frame(kBroadcast, a)), stripped,
              fx.mbuf(frame(kBroadcast, a, tci(20, 5)))});
  const Frames untagged{frame(kBroadcast, a), frame(kBroadcast, a)};
  CHECK(fx.take(kAccess10a) == untagged);
  CHECK(fx.take(kAccess10b) == untagged);
  CHECK(fx.take(kAccess20) == untagged);
  CHECK(fx.take(kNative10) == Frames{frame(kBroadcast, a), frame(kBroadcast, a, tci(20)),
                                     frame(kBroadcast, a), frame(kBroadcast, a, tci(20, 5))});
  CHECK(fx.drops(kTrunk, SwitchDrop::kVlanFiltered) == 2);  // VLAN 30; untagged, no native VLAN
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  // The same bytes, untagged into the native VLAN, then with a stripped tag of VLAN 20.
  stripped = fx.mbuf(frame(kBroadcast, a));
  stripped->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  stripped->vlan_tci = tci(20, 5);
  fx.forward(kNative10, {fx.mbuf(frame(kBroadcast, a)), stripped});
  CHECK(fx.take(kAccess10a) == Frames{frame(kBroadcast, a)});
  CHECK(fx.take(kAccess10b) == Frames{frame(kBroadcast, a)});
  CHECK(fx.take(kTrunk) == Frames{frame(kBroadcast, a, tci(10)), frame(kBroadcast, a, tci(20, 5))});
  CHECK(fx.take(kAccess20) == Frames{frame(kBroadcast, a)});
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
  // A run of unicast frames that each need their tag removed, then one to send as it is.
  const Mac b = host(2);
  fx.send(kAccess10a, frame(kBroadcast, b));
  fx.send(kTrunk, frame(kBroadcast, b, tci(20)));
  fx.take_counts();
  fx.forward(kTrunk, {fx.mbuf(frame(b, a, tci(10))), fx.mbuf(frame(b, a, tci(10))),
                      fx.mbuf(frame(b, a, tci(10)))});
  CHECK(fx.take(kAccess10a) == Frames(3, frame(b, a)));
  fx.forward(kNative10, {fx.mbuf(frame(b, a, tci(20))), fx.mbuf(frame(b, a, tci(20)))});
  CHECK(fx.take(kTrunk) == Frames(2, frame(b, a, tci(20))));
  CHECK(fx.take_counts() == Counts(kVlanPorts, 0));
}

TEST_CASE("bridge VLANs: frames the bridge may not edit are copied") {
  BridgeFixture fx({access(10), trunk({10})});
  const Mac a = host(1);
  // An indirect mbuf (like one attached to a guest's buffer) is never edited in place.
  rte_mbuf* original = fx.mbuf(frame(kBroadcast, a));
  rte_mbuf* clone = rte_pktmbuf_clone(original, fx.pool);
  REQUIRE(clone != nullptr);
  fx.forward(0, {clone});
  CHECK(fx.take(1) == Frames{frame(kBroadcast, a, tci(10))});
  CHECK(bytes_of(original) == frame(kBroadcast, a));
  rte_pktmbuf_free(original);
  // A shared one neither.
  rte_mbuf* shared = fx.mbuf(frame(kBroadcast, a));
  rte_mbuf_refcnt_update(shared, 1);
  fx.forward(0, {shared});
  CHECK(fx.take(1) == Frames{frame(kBroadcast, a, tci(10))});
  CHECK(bytes_of(shared) == frame(kBroadcast, a));
  rte_pktmbuf_free(shared);
}

TEST_CASE("bridge VLANs: no mbuf for a copy drops that output, counted mbuf_exhausted") {
  BridgeFixture fx({access(10), access(10), trunk({10}), trunk({10})});
  fx.send(2, frame(kBroadcast, host(2), tci(10)));  // host(2) behind port 2
  fx.take_counts();
  rte_mbuf* flooded = fx.mbuf(frame(kBroadcast, host(1)));
  rte_mbuf* unicast = fx.mbuf(frame(host(2), host(1)));
  std::vector<rte_mbuf*> hoard;
  while (rte_mbuf* x = rte_pktmbuf_alloc(fx.pool)) hoard.push_back(x);

  fx.forward(0, {flooded});
  CHECK(fx.take(1) == Frames{frame(kBroadcast, host(1))});  // the untagged output: as it is
  CHECK(fx.take_counts() == Counts{0, 0, 0, 0});
  CHECK(fx.drops(0, SwitchDrop::kMbufExhausted) == 2);
  // Unicast to a trunk needs no mbuf: the tag is pushed in place when the frame is ours alone.
  fx.forward(0, {unicast});
  CHECK(fx.take(2) == Frames{frame(host(2), host(1), tci(10))});
  CHECK(fx.drops(0, SwitchDrop::kMbufExhausted) == 2);
  rte_pktmbuf_free_bulk(hoard.data(), static_cast<unsigned>(hoard.size()));
}

TEST_CASE("bridge: create refuses VLAN ids out of range") {
  std::string error;
  CHECK(L2Bridge::create({access(0)}, 64, 0, 1, &error) == nullptr);
  CHECK(error.find("access VLAN 0") != std::string::npos);
  CHECK(L2Bridge::create({trunk({10, 4095})}, 64, 0, 1, &error) == nullptr);
  CHECK(error.find("4095") != std::string::npos);
  CHECK(L2Bridge::create({trunk({10}, 5000)}, 64, 0, 1, &error) == nullptr);
  CHECK(L2Bridge::create({unaware()}, 64, 0, 0, &error) == nullptr);
}

TEST_CASE("bridge: two lcores learn and forward while the control thread ages") {
  // Sources drift over time, so entries go idle and age while others are learned, moved (each
  // burst comes in on a random port) and looked up, on a table small enough to fill up.
  constexpr uint16_t kPorts = 3;
  constexpr uint16_t kLcores = 2;
  constexpr int kIterations = 1500;
  constexpr uint32_t kTableSize = 32;
  BridgeFixture fx({unaware(), unaware(), unaware()}, kTableSize, 1, kLcores);
  // A pool per lcore: on an oversubscribed machine, threads sharing one mempool ring spin through
  // each other's preemptions.
  std::vector<rte_mempool*> pools;
  for (uint16_t i = 0; i < kLcores; ++i) {
    const std::string name = "br_lcore_pool_" + std::to_string(i);
    pools.push_back(rte_pktmbuf_pool_create(name.c_str(), kPoolSize, 0, 0,
                                            RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY));
    REQUIRE(pools.back() != nullptr);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> now{kT0};
  std::atomic<int> failures{0};  // Catch2 assertions are not for other threads

  auto lcore = [&](uint16_t slot) {
    if (rte_thread_register() != 0) ++failures;
    PortQueueCounters in_counters;
    uint32_t seed = 12345 + slot;
    auto random = [&seed](uint32_t n) {
      seed = seed * 1103515245 + 12345;
      return (seed >> 16) % n;
    };
    for (int it = 0; it < kIterations; ++it) {
      const uint32_t first = static_cast<uint32_t>(it / 100 * 4);  // the hosts of this phase
      std::vector<rte_mbuf*> burst;
      for (int i = 0; i < 16; ++i) {
        const Mac src = host(static_cast<uint8_t>(first + random(8)), static_cast<uint8_t>(slot));
        const Mac dst = random(8) == 0 ? kBroadcast
                                       : host(static_cast<uint8_t>(first + random(12)),
                                              static_cast<uint8_t>(random(kLcores)));
        rte_mbuf* m = rte_pktmbuf_alloc(pools[slot]);
        if (m == nullptr) {
          ++failures;
          break;
        }
        const std::vector<uint8_t> bytes = frame(dst, src);
        std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(bytes.size())), bytes.data(),
                    bytes.size());
        burst.push_back(m);
      }
      const uint16_t in_port = static_cast<uint16_t>(random(kPorts));
      fx.bridge->forward(slot, in_port, burst.data(), static_cast<uint16_t>(burst.size()),
                         now.fetch_add(seconds(0.001)), *fx.tx[slot], in_counters);
      fx.tx[slot]->flush();
      fx.bridge->quiescent(slot);
      for (uint16_t p = 0; p < kPorts; ++p) {
        for (rte_mbuf* m : fx.sent(p, slot)) rte_pktmbuf_free(m);
        fx.sent(p, slot).clear();
      }
    }
    fx.bridge->offline(slot);
    rte_thread_unregister();
  };
  std::thread aging([&] {
    if (rte_thread_register() != 0) ++failures;
    while (!stop.load()) {
      fx.bridge->age(now.load());
      (void)fx.bridge->counters();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    rte_thread_unregister();
  });
  std::vector<std::thread> lcores;
  for (uint16_t slot = 0; slot < kLcores; ++slot) lcores.emplace_back(lcore, slot);
  for (std::thread& t : lcores) t.join();
  stop = true;
  aging.join();

  CHECK(failures == 0);
  const BridgeCounters c = fx.bridge->counters();
  INFO("learned " << c.learned << " moved " << c.moved << " aged " << c.aged << " full "
                  << c.table_full << " flooded " << c.flooded << " entries " << c.entries);
  CHECK(c.learned > kTableSize);
  CHECK(c.table_full > 0);
  CHECK(c.moved > 0);
  CHECK(c.aged > 0);
  CHECK(c.entries <= kTableSize);
  for (rte_mempool* pool : pools) {
    CHECK(rte_mempool_avail_count(pool) == kPoolSize);
    rte_mempool_free(pool);
  }

  // With the lcores offline, everything ages out and the table fills again.
  fx.bridge->age(now.load() + seconds(10));
  CHECK(fx.bridge->counters().entries == 0);
  const uint64_t learned = fx.bridge->counters().learned;
  std::vector<rte_mbuf*> burst;
  for (uint32_t i = 0; i < kTableSize; ++i)
    burst.push_back(fx.mbuf(frame(kBroadcast, host(static_cast<uint8_t>(i + 1), 9))));
  fx.forward(0, burst, now.load() + seconds(10));
  fx.take_counts();
  const BridgeCounters after = fx.bridge->counters();
  CHECK(after.learned - learned >= kTableSize * 3 / 4);
  CHECK(after.entries == after.learned - learned);
}

}  // namespace
}  // namespace vqs::app::test
