// SPDX-License-Identifier: BSD-3-Clause
// The number of queue pairs we announce to the frontend (VHOST_USER_GET_QUEUE_NUM), asked by a raw
// vhost-user client as QEMU asks it, and what is counted when a frontend enables more anyway.
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "port_pair.h"
#include "raw_frontend.h"

using namespace vqs::test;
using namespace vqs::test::vhost_user;

TEST_CASE("GET_QUEUE_NUM answers the queue pairs the port serves") {
  HostPort host(2);
  {
    // QEMU's order: features, protocol features, then the queue count (before SET_OWNER).
    RawFrontend frontend(host.socket());
    frontend.send_message(kGetFeatures);
    RawMessage reply = frontend.receive_reply();
    CHECK(reply.request == kGetFeatures);
    REQUIRE((reply.u64 & kFProtocolFeatures) != 0);

    frontend.send_message(kGetProtocolFeatures);
    reply = frontend.receive_reply();
    CHECK(reply.request == kGetProtocolFeatures);
    REQUIRE((reply.u64 & kProtocolFMq) != 0);
    REQUIRE((reply.u64 & kProtocolFReplyAck) != 0);

    frontend.send_message(kSetProtocolFeatures, kNeedReply, true,
                          kProtocolFMq | kProtocolFReplyAck);
    reply = frontend.receive_reply();  // the REPLY_ACK
    CHECK(reply.request == kSetProtocolFeatures);
    CHECK(reply.u64 == 0);

    // NEED_REPLY on a message that has a reply: that reply is the only one sent.
    frontend.send_message(kGetQueueNum, kNeedReply);
    reply = frontend.receive_reply();
    CHECK(reply.request == kGetQueueNum);
    CHECK(reply.u64 == 2);  // librte_vhost itself would say 128

    frontend.send_message(kGetQueueNum);
    reply = frontend.receive_reply();
    CHECK(reply.request == kGetQueueNum);
    CHECK(reply.u64 == 2);
  }
  CHECK(wait_link(host.port(), false, 100));
  CHECK(xstat(host.port(), "unserved_vring_enables") == 0);

  // The port still serves a guest as usual after the raw frontend.
  GuestPort guest(host, {.queues = 2});
  CHECK(wait_link(host.port(), true));
  CHECK(xstat(host.port(), "unserved_vring_enables") == 0);
}

TEST_CASE("unserved vring enables are counted and survive an xstats reset") {
  // virtio_user never asks GET_QUEUE_NUM: its pairs 2 and 3 are enabled but not served.
  HostPort host(2);
  GuestPort guest(host, {.queues = 4});
  REQUIRE(wait_link(host.port(), true));
  // The guest enables pairs beyond the first after the device runs; librte_vhost handles those
  // messages on its own thread.
  const uint64_t end = rte_get_timer_cycles() + 2 * rte_get_timer_hz();
  while (xstat(host.port(), "unserved_vring_enables") < 4 && rte_get_timer_cycles() < end)
    rte_delay_ms(1);
  CHECK(xstat(host.port(), "unserved_vring_enables") == 4);
  REQUIRE(rte_eth_xstats_reset(host.port()) == 0);
  CHECK(xstat(host.port(), "unserved_vring_enables") == 4);
}

// RESET_OWNER (a guest's reboot): librte_vhost 22.11 clears its vrings' state without telling the
// backend they are disabled. A pair enabled before and only set up after must not be served.
TEST_CASE("after RESET_OWNER a queue pair is served only once the frontend enables it again") {
  HostPort host(2);
  RawGuest guest(host.socket(), 2);
  REQUIRE(wait_link(host.port(), true));
  guest.send(4, 100, 1);
  free_all(receive(host.port(), 1, 4));
  CHECK(guest.tx_used(1) == 4);

  guest.reset_owner_and_set_up(false, /*enabled_pairs=*/1);
  REQUIRE(wait_link(host.port(), true));
  guest.send(4, 100, 1);
  const std::vector<rte_mbuf*> early = receive(host.port(), 1, 4, 200);
  CHECK(early.empty());
  free_all(early);
  CHECK(guest.tx_used(1) == 0);
  // The first pair is served as before.
  guest.send(2, 100, 0);
  const std::vector<rte_mbuf*> first = receive(host.port(), 0, 2);
  CHECK(first.size() == 2);
  free_all(first);

  guest.enable_pair(1);
  const std::vector<rte_mbuf*> late = receive(host.port(), 1, 4);
  CHECK(late.size() == 4);
  free_all(late);
  CHECK(guest.tx_used(1) == 4);
}
