// SPDX-License-Identifier: BSD-3-Clause
// net_vqs dequeue zero-copy against DPDK's virtio_user in this process: packets intact whether
// lent or copied, a consumer that holds its mbufs never stalls the guest, a guest that goes
// away while its buffers are lent leaves nothing broken, and a host asleep on its rx interrupt
// is woken when another thread frees lent buffers.
#include <rte_cycles.h>
#include <rte_epoll.h>
#include <rte_ethdev.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "port_pair.h"

using namespace vqs::test;

namespace {

// Sends `count` packets of `size` bytes (seeds from `seed`) from the guest and receives them on
// the host, checking every byte; returns the host's mbufs, still held.
std::vector<rte_mbuf*> guest_to_host(uint16_t guest, uint16_t host, uint32_t count, uint32_t size,
                                     uint32_t seed) {
  std::vector<rte_mbuf*> got;
  for (uint32_t done = 0; done < count;) {
    const uint32_t n = std::min<uint32_t>(32, count - done);
    std::vector<rte_mbuf*> pkts;
    std::vector<std::vector<uint8_t>> sent;
    for (uint32_t i = 0; i < n; ++i) {
      pkts.push_back(make_packet(size, seed + done + i));
      sent.push_back(packet_bytes(pkts.back()));
    }
    REQUIRE(send_all(guest, 0, pkts) == n);
    const auto burst = receive(host, 0, n);
    REQUIRE(burst.size() == n);
    for (uint32_t i = 0; i < n; ++i) CHECK(packet_bytes(burst[i]) == sent[i]);
    got.insert(got.end(), burst.begin(), burst.end());
    done += n;
  }
  return got;
}

// Lets the host's next rx burst reap completions (nothing new arrives).
void poll_host(uint16_t host) {
  rte_mbuf* none[4];
  CHECK(rte_eth_rx_burst(host, 0, none, 4) == 0);
}

}  // namespace

TEST_CASE("zero-copy: guest TX 60..9018 bytes intact, lent from zerocopy_min_len on") {
  HostPort host(1, "zerocopy=1,zerocopy_min_len=300");
  auto guest = std::make_unique<GuestPort>(host);
  CHECK(xstat(host.port(), "rx_q0_zerocopy_limit") == 64);  // ring of 256: a quarter
  CHECK(xstat(host.port(), "rx_q0_zerocopy_min_len") == 300);
  uint64_t lent = 0;
  for (uint32_t size : {60u, 128u, 299u, 300u, 1000u, 1514u, 4000u, 9018u}) {
    INFO("size " << size);
    auto got = guest_to_host(guest->port(), host.port(), 4, size, size);
    if (size >= 300) lent += 4;
    CHECK(xstat(host.port(), "rx_q0_zerocopy_packets") == lent);
    CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == (size >= 300 ? 4 : 0));
    free_all(got);
    poll_host(host.port());
    CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 0);
  }
  CHECK(xstat(host.port(), "rx_q0_zerocopy_copied") == 12);
  CHECK(xstat(host.port(), "rx_q0_zerocopy_limit_copies") == 0);
  guest.reset();  // virtio_user frees its sent mbufs lazily: all are back once it is gone
  CHECK(pool_full());
}

TEST_CASE("zero-copy: a consumer that holds every mbuf never stalls the guest") {
  HostPort host(1, "zerocopy=1");
  auto guest = std::make_unique<GuestPort>(host);
  // Nothing is freed: beyond the limit packets are copied, and the guest's ring keeps moving.
  auto held = guest_to_host(guest->port(), host.port(), 600, 1000, 1);
  CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 64);
  CHECK(xstat(host.port(), "rx_q0_zerocopy_packets") == 64);
  CHECK(xstat(host.port(), "rx_q0_zerocopy_limit_copies") == 600 - 64);
  // Released: lent again.
  free_all(held);
  poll_host(host.port());
  CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 0);
  free_all(guest_to_host(guest->port(), host.port(), 10, 1000, 700));
  CHECK(xstat(host.port(), "rx_q0_zerocopy_packets") == 74);
  guest.reset();
  CHECK(pool_full());
}

TEST_CASE("zero-copy: a guest that leaves with buffers lent; they stay readable, then it returns") {
  HostPort host(1, "zerocopy=1");
  std::vector<rte_mbuf*> held;
  std::vector<std::vector<uint8_t>> expected;
  {
    GuestPort guest(host);
    held = guest_to_host(guest.port(), host.port(), 32, 1500, 50);
    for (rte_mbuf* m : held) expected.push_back(packet_bytes(m));
    CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 32);
  }  // the guest disconnects: its memory is unmapped by librte_vhost, not ours
  REQUIRE(wait_link(host.port(), false));
  for (size_t i = 0; i < held.size(); ++i) CHECK(packet_bytes(held[i]) == expected[i]);
  free_all(held);
  CHECK(pool_full());
  // A new guest: traffic flows and is lent again.
  {
    GuestPort again(host);
    free_all(guest_to_host(again.port(), host.port(), 40, 1500, 90));
    poll_host(host.port());
    CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 0);
    CHECK(xstat(host.port(), "rx_q0_zerocopy_packets") == 72);
    // The first session's chains completed as orphans: none went into the new guest's ring.
    CHECK(xstat(host.port(), "rx_q0_zerocopy_orphans") == 32);
  }
  CHECK(pool_full());
}

TEST_CASE("zero-copy: a host asleep on its rx interrupt is woken when another thread frees") {
  HostPort host(1, "zerocopy=1", /*rx_interrupts=*/true);
  REQUIRE(rte_eth_dev_rx_intr_ctl_q(host.port(), 0, RTE_EPOLL_PER_THREAD, RTE_INTR_EVENT_ADD,
                                    nullptr) == 0);
  GuestPort guest(host);
  for (int round = 0; round < 5; ++round) {
    INFO("round " << round);
    auto held = guest_to_host(guest.port(), host.port(), 16, 1500, 100 * round);
    CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 16);
    rte_epoll_event event[1];
    REQUIRE(rte_eth_dev_rx_intr_enable(host.port(), 0) == 0);
    CHECK(rte_epoll_wait(RTE_EPOLL_PER_THREAD, event, 1, 50) == 0);  // nothing to wake for
    // The consumer on another thread lets go while this one sleeps: the first free wakes it.
    std::thread consumer([&held] {
      rte_delay_ms(20);
      free_all(held);
    });
    CHECK(rte_epoll_wait(RTE_EPOLL_PER_THREAD, event, 1, 5000) == 1);
    consumer.join();
    REQUIRE(rte_eth_dev_rx_intr_disable(host.port(), 0) == 0);
    poll_host(host.port());  // the woken poll hands every chain back to the guest
    CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 0);
  }
  // Armed with completions already waiting: no sleep at all.
  auto held = guest_to_host(guest.port(), host.port(), 4, 1500, 900);
  free_all(held);
  rte_epoll_event event[1];
  REQUIRE(rte_eth_dev_rx_intr_enable(host.port(), 0) == 0);
  CHECK(rte_epoll_wait(RTE_EPOLL_PER_THREAD, event, 1, 0) == 1);
  REQUIRE(rte_eth_dev_rx_intr_disable(host.port(), 0) == 0);
  poll_host(host.port());
  CHECK(xstat(host.port(), "rx_q0_zerocopy_in_flight") == 0);
  CHECK(rte_eth_dev_rx_intr_ctl_q(host.port(), 0, RTE_EPOLL_PER_THREAD, RTE_INTR_EVENT_DEL,
                                  nullptr) == 0);
}
