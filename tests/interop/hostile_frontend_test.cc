// SPDX-License-Identifier: BSD-3-Clause
// A frontend that sends what QEMU and virtio_user never would, through our own raw client on the
// port's socket: the process must neither crash nor keep what it refused.
#include <grp.h>
#include <rte_cycles.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "port_pair.h"
#include "raw_frontend.h"

using namespace vqs::test;
using namespace vqs::test::vhost_user;

namespace {

constexpr uint64_t kRegionSize = 2 << 20;

// Up to the memory table, as QEMU gets there; REPLY_ACK when `reply_ack`.
void handshake(RawFrontend& frontend, bool reply_ack) {
  frontend.send_message(kGetFeatures);
  const uint64_t features = frontend.receive_reply().u64;
  REQUIRE((features & kFProtocolFeatures) != 0);
  frontend.send_message(kGetProtocolFeatures);
  const uint64_t protocol = frontend.receive_reply().u64;
  REQUIRE((protocol & kProtocolFReplyAck) != 0);
  frontend.send_message(kSetProtocolFeatures, 0, true, reply_ack ? kProtocolFReplyAck : 0);
  frontend.send_message(kSetOwner);
  frontend.send_message(kSetFeatures, 0, true, features & ((1ull << 32) | kFProtocolFeatures));
}

// Waits up to a second for `port`'s xstat `name` to reach `want`.
bool xstat_reaches(uint16_t port, const char* name, uint64_t want) {
  const uint64_t end = rte_get_timer_cycles() + rte_get_timer_hz();
  while (xstat(port, name) < want && rte_get_timer_cycles() < end) rte_delay_ms(1);
  return xstat(port, name) == want;
}

// Whether the process's open fds come back to `count` within a second (librte_vhost frees a
// connection's on its own thread).
bool fds_return_to(int count) {
  const uint64_t end = rte_get_timer_cycles() + rte_get_timer_hz();
  while (open_fd_count() != count && rte_get_timer_cycles() < end) rte_delay_ms(1);
  return open_fd_count() == count;
}

}  // namespace

// Issue 16, hole 7: a region reaching past the end of its file maps fine, and the first touch of
// that part raises SIGBUS in the whole process (librte_vhost's own thread translating ring
// addresses, or an lcore). The table is refused before it is mapped and its fds are closed.
TEST_CASE("a memory table whose region reaches past the end of its file is refused") {
  HostPort host(1);
  const int fds_before = open_fd_count();
  {
    // With REPLY_ACK: a failure reply, the connection stays.
    RawFrontend frontend(host.socket());
    handshake(frontend, true);
    {
      Memfd whole(kRegionSize);  // the control: the same table with a file long enough
      frontend.send_mem_table({{0, kRegionSize - 4096, 0x7f0000000000, 4096, whole.fd}},
                              kNeedReply);
      const RawMessage ack = frontend.receive_reply();
      CHECK(ack.request == kSetMemTable);
      CHECK(ack.u64 == 0);
    }
    {
      Memfd short_file(kRegionSize / 2);
      frontend.send_mem_table({{0, kRegionSize - 4096, 0x7f0000000000, 4096, short_file.fd}},
                              kNeedReply);
      const RawMessage ack = frontend.receive_reply();
      CHECK(ack.request == kSetMemTable);
      CHECK(ack.u64 != 0);
    }
    CHECK(xstat_reaches(host.port(), "refused_memory_tables", 1));
  }
  {
    // Without REPLY_ACK: the frontend is disconnected.
    RawFrontend frontend(host.socket());
    handshake(frontend, false);
    Memfd short_file(4096);
    frontend.send_mem_table({{0, kRegionSize, 0x7f0000000000, 0, short_file.fd}});
    CHECK(frontend.closed_by_peer());
    CHECK(xstat_reaches(host.port(), "refused_memory_tables", 2));
  }
  // Every fd that came with the messages is closed (librte_vhost closes the accepted table's
  // when its connection goes).
  CHECK(fds_return_to(fds_before));

  // The port still serves a real guest afterwards.
  GuestPort guest(host);
  CHECK(wait_link(host.port(), true));
}

// librte_vhost 22.11 leaks the fd of a region it fails to map (one of 0 bytes; found by
// fuzz/vhost_message_fuzz). Our pre-hook refuses such a table and closes its fds; the frontend is
// counted and disconnected.
TEST_CASE("a memory table with an empty region is refused and its fd closed") {
  HostPort host(1);
  const int fds_before = open_fd_count();
  for (int i = 0; i < 3; ++i) {
    RawFrontend frontend(host.socket());
    handshake(frontend, false);
    Memfd file(kRegionSize);
    frontend.send_mem_table({{0, 0, 0x7f0000000000, 0, file.fd}});
    CHECK(frontend.closed_by_peer());
  }
  CHECK(xstat_reaches(host.port(), "refused_memory_tables", 3));
  CHECK(fds_return_to(fds_before));
}

// librte_vhost 22.11 serves GET_INFLIGHT_FD whatever was negotiated, allocating and clearing
// num_queues x (a ring's inflight area) bytes: up to tens of GiB for one message (found by
// fuzz/vhost_message_fuzz: the process grew and stalled). We do not offer INFLIGHT_SHMFD; the
// request, like every one outside what we negotiate, is refused in our pre-hook and counted.
TEST_CASE("a request outside what we negotiate (GET_INFLIGHT_FD) is refused, counted") {
  HostPort host(1);
  const int fds_before = open_fd_count();
  {
    RawFrontend frontend(host.socket());
    handshake(frontend, false);
    // mmap_size, mmap_offset, num_queues 2, queue_size 256: a small one, answered before.
    std::vector<uint8_t> inflight(24, 0);
    inflight[16] = 2;
    inflight[19] = 1;
    frontend.send_payload(kGetInflightFd, 0, inflight);
    CHECK(frontend.closed_by_peer());
  }
  CHECK(xstat_reaches(host.port(), "refused_messages", 1));
  CHECK(fds_return_to(fds_before));
  // The port serves a real guest afterwards.
  GuestPort guest(host);
  CHECK(wait_link(host.port(), true));
}

// Issue 16, hole 5: a newer frontend used to take the port over from the one being served. It is
// refused at its first message while the first is connected (and counted); once that one is
// gone, a frontend is served again.
TEST_CASE("a second frontend is refused while one is connected") {
  HostPort host(1);
  {
    GuestPort guest(host);
    REQUIRE(wait_link(host.port(), true));
    {
      RawFrontend intruder(host.socket());
      intruder.send_message(kGetFeatures);
      CHECK(intruder.closed_by_peer());
    }
    CHECK(xstat(host.port(), "refused_frontends") == 1);
    CHECK(wait_link(host.port(), true, 100));
    // The guest keeps its port: a packet still goes through.
    REQUIRE(send_all(guest.port(), 0, {make_packet(100, 7)}) == 1);
    const std::vector<rte_mbuf*> got = receive(host.port(), 0, 1);
    CHECK(got.size() == 1);
    free_all(got);
  }
  CHECK(wait_link(host.port(), false));
  RawFrontend next(host.socket());
  next.send_message(kGetFeatures);
  CHECK(next.receive_reply().request == kGetFeatures);
  CHECK(xstat(host.port(), "refused_frontends") == 1);
}

TEST_CASE("devargs socket_mode and socket_group are the server socket's from the start") {
  HostPort host(1, "socket_mode=0620,socket_group=nogroup");
  struct stat st {};
  REQUIRE(stat(host.socket().c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == 0620);
  const group* nogroup = getgrnam("nogroup");
  REQUIRE(nogroup != nullptr);
  CHECK(st.st_gid == nogroup->gr_gid);
}

namespace {

// Where a lent packet's payload segment sits relative to its guest buffer (RawGuest gives each
// TX descriptor slot its own buffer, kBufferStride apart): equal for two packets only if both
// were lent from the same mapping of guest memory.
uintptr_t lent_mapping_base(const rte_mbuf* m, uint16_t slot) {
  REQUIRE(m->nb_segs > 1);
  REQUIRE(RTE_MBUF_HAS_EXTBUF(m->next));
  return rte_pktmbuf_mtod(m->next, uintptr_t) - uintptr_t{slot} * 2048;
}

double elapsed_ms(uint64_t since) {
  return static_cast<double>(rte_get_timer_cycles() - since) * 1000.0 /
         static_cast<double>(rte_get_timer_hz());
}

}  // namespace

// Issue 16, hole 3: ring-changing messages used to reload all guest memory and wait for lent
// chains on librte_vhost's one thread, stalling every other guest. Now a suspend does not wait and
// memory is reloaded only when the table changed. See docs/architecture.md, "Dequeue zero-copy".
TEST_CASE("ring-changing messages while chains are lent: answered at once, memory kept") {
  HostPort host(1, "zerocopy=1");
  RawGuest guest(host.socket());
  REQUIRE(wait_link(host.port(), true));
  guest.send(8, 1000);
  std::vector<rte_mbuf*> lent = receive(host.port(), 0, 8);
  REQUIRE(lent.size() == 8);
  const uintptr_t base = lent_mapping_base(lent[0], 0);

  for (uint32_t vring : {0u, 1u}) {
    INFO("SET_VRING_CALL on vring " << vring);
    const uint64_t start = rte_get_timer_cycles();
    CHECK(guest.replace_vring_fd(vhost_user::kSetVringCall, vring) == 0);
    CHECK(elapsed_ms(start) < 40.0);  // the wait for lent chains was 50 ms
  }
  {
    const uint64_t start = rte_get_timer_cycles();
    CHECK(guest.resend_mem_table() == 0);  // the same table
    CHECK(elapsed_ms(start) < 40.0);
  }
  REQUIRE(wait_link(host.port(), true));

  // Still served, from the same mapping, and the chains lent before come back.
  guest.send(1, 1000);
  std::vector<rte_mbuf*> after = receive(host.port(), 0, 1);
  REQUIRE(after.size() == 1);
  CHECK(lent_mapping_base(after[0], 8) == base);
  free_all(lent);
  free_all(after);
  const uint64_t end = rte_get_timer_cycles() + rte_get_timer_hz();
  while (guest.tx_used() != 9 && rte_get_timer_cycles() < end) {
    rte_mbuf* none[4];
    CHECK(rte_eth_rx_burst(host.port(), 0, none, 4) == 0);
    rte_delay_ms(1);
  }
  CHECK(guest.tx_used() == 9);
}

// Issue 16, soak: for 60 s a frontend sends SET_VRING_CALL every 1 ms and SET_MEM_TABLE every
// 100 ms while its guest sends, beside a virtio_user guest that must keep flowing and a port
// whose new frontends are answered within 100 ms. Then every chain is back, the mbuf pool full
// and no mapping left.
TEST_CASE("soak: a frontend storming ring-changing messages for 60 s beside a working guest",
          "[soak]") {
  {
    HostPort stormed(1, "zerocopy=1");
    HostPort quiet(1);
    HostPort third(1);
    GuestPort guest(quiet);
    RawGuest storm(stormed.socket());
    REQUIRE(wait_link(stormed.port(), true));
    REQUIRE(wait_link(quiet.port(), true));
    const int maps_before = mapping_count();
    const uint64_t hz = rte_get_timer_hz();
    const uint64_t end = rte_get_timer_cycles() + 60 * hz;
    uint64_t next_table = 0, next_probe = 0, calls = 0, tables = 0, probes = 0;
    uint64_t quiet_sent = 0, quiet_received = 0, storm_sent = 0;
    double slowest_probe_ms = 0;
    while (rte_get_timer_cycles() < end) {
      const uint64_t now = rte_get_timer_cycles();
      CHECK(storm.replace_vring_fd(vhost_user::kSetVringCall, calls++ % 2) == 0);
      if (now >= next_table) {
        CHECK(storm.resend_mem_table() == 0);
        ++tables;
        next_table = now + hz / 10;
      }
      if (now >= next_probe) {  // a new frontend on another port: answered at once
        const uint64_t start = rte_get_timer_cycles();
        RawFrontend probe(third.socket());
        probe.send_message(vhost_user::kGetFeatures);
        CHECK(probe.receive_reply().request == vhost_user::kGetFeatures);
        slowest_probe_ms = std::max(slowest_probe_ms, elapsed_ms(start));
        ++probes;
        next_probe = now + hz;
      }
      // The storming guest keeps sending; the host drains and frees.
      if (storm.tx_outstanding() < 64) {
        storm.send(8, 600);
        storm_sent += 8;
      }
      rte_mbuf* pkts[32];
      rte_pktmbuf_free_bulk(pkts, rte_eth_rx_burst(stormed.port(), 0, pkts, 32));
      // The quiet guest's traffic.
      quiet_sent +=
          send_all(guest.port(), 0, {make_packet(200, static_cast<uint32_t>(quiet_sent))});
      const uint16_t n = rte_eth_rx_burst(quiet.port(), 0, pkts, 32);
      quiet_received += n;
      rte_pktmbuf_free_bulk(pkts, n);
      rte_delay_us_sleep(1000);
    }
    INFO("SET_VRING_CALL " << calls << ", SET_MEM_TABLE " << tables << ", probes " << probes
                           << ", slowest probe " << slowest_probe_ms << " ms, quiet guest "
                           << quiet_received << "/" << quiet_sent << ", storm sent " << storm_sent);
    std::printf("storm: %" PRIu64 " SET_VRING_CALL, %" PRIu64 " SET_MEM_TABLE, %" PRIu64
                " probes (slowest %.1f ms), quiet guest %" PRIu64 "/%" PRIu64
                " received, storming guest sent %" PRIu64 "\n",
                calls, tables, probes, slowest_probe_ms, quiet_received, quiet_sent, storm_sent);
    CHECK(slowest_probe_ms < 100.0);
    CHECK(calls > 10000);
    CHECK(quiet_received + 64 >= quiet_sent);  // at most what is still in flight
    // Every chain the storming guest posted comes back.
    const uint64_t drain_end = rte_get_timer_cycles() + 2 * hz;
    while (storm.tx_outstanding() > 0 && rte_get_timer_cycles() < drain_end) {
      rte_mbuf* pkts[32];
      rte_pktmbuf_free_bulk(pkts, rte_eth_rx_burst(stormed.port(), 0, pkts, 32));
      rte_delay_ms(1);
    }
    CHECK(storm.tx_outstanding() == 0);
    // No mapping left behind by 600 memory tables (a remap per message would add them while
    // lent chains keep the old ones).
    CHECK(mapping_count() == maps_before);
  }
  CHECK(pool_full());
}

// Issue 19: a packed ring whose event areas lie outside guest memory. librte_vhost cannot map
// them and the vrings are never started (nothing of ours reads or writes them); once the
// frontend gives addresses inside its memory, the port serves the packed rings.
TEST_CASE("packed: event areas outside guest memory leave the vrings unserved until fixed") {
  constexpr uint64_t kPacked = 1ull << 34, kVersion1 = 1ull << 32;
  constexpr uint64_t kMem = 2 << 20, kArea = 64 << 10;
  HostPort host(1);
  RawFrontend frontend(host.socket());
  frontend.send_message(kGetFeatures);
  const uint64_t offered = frontend.receive_reply().u64;
  REQUIRE((offered & kPacked) != 0);
  frontend.send_message(kGetProtocolFeatures);
  REQUIRE((frontend.receive_reply().u64 & kProtocolFReplyAck) != 0);
  frontend.send_message(kSetProtocolFeatures, 0, true, kProtocolFReplyAck);
  frontend.send_message(kSetOwner);
  frontend.send_message(kSetFeatures, 0, true, kVersion1 | kPacked | kFProtocolFeatures);
  const int memfd = memfd_create("packed-guest", MFD_CLOEXEC);
  REQUIRE(memfd >= 0);
  REQUIRE(ftruncate(memfd, kMem) == 0);
  auto* mem =
      static_cast<uint8_t*>(mmap(nullptr, kMem, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
  REQUIRE(mem != MAP_FAILED);
  std::memset(mem, 0, kMem);
  frontend.send_mem_table({{0, kMem, reinterpret_cast<uint64_t>(mem), 0, memfd}}, kNeedReply);
  REQUIRE(frontend.receive_reply().u64 == 0);
  const uint64_t base = reinterpret_cast<uint64_t>(mem);
  const uint64_t outside = base + kMem + 4096;  // the frontend's address space, not the guest's
  int fds[4];
  for (uint32_t i = 0; i < 2; ++i) {
    frontend.send_vring_state(kSetVringNum, i, 256);
    frontend.send_vring_state(kSetVringBase, i, 0x8000);  // slot 0, wrap counter 1
    // desc, then "used" = our (device) event area, "avail" = the driver's.
    frontend.send_vring_addr(i, base + i * kArea, outside, base + i * kArea + 4096);
    fds[2 * i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    fds[2 * i + 1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    frontend.send_vring_fd(kSetVringKick, i, fds[2 * i]);
    frontend.send_vring_fd(kSetVringCall, i, fds[2 * i + 1]);
  }
  for (uint32_t i = 0; i < 2; ++i) frontend.send_vring_state(kSetVringEnable, i, 1);
  CHECK_FALSE(wait_link(host.port(), true, 500));
  CHECK(std::all_of(mem, mem + 2 * kArea, [](uint8_t b) { return b == 0; }));  // nothing written
  // Device event areas inside guest memory now: served, and ours is written (kicks disabled
  // while the port polls: flags 1).
  for (uint32_t i = 0; i < 2; ++i)
    frontend.send_vring_addr(i, base + i * kArea, base + i * kArea + 8192, base + i * kArea + 4096);
  CHECK(wait_link(host.port(), true));
  uint16_t device_flags = 0;
  for (int tries = 0; tries < 1000 && device_flags == 0; ++tries) {
    rte_delay_ms(1);
    std::memcpy(&device_flags, mem + 8192 + 2, 2);
  }
  CHECK(device_flags == 1);
  munmap(mem, kMem);
  close(memfd);
  for (int fd : fds) close(fd);
}
