// SPDX-License-Identifier: BSD-3-Clause
// Live migration as a frontend drives it, through our raw client against net_vqs in this
// process: the dirty log (SET_LOG_BASE, VHOST_F_LOG_ALL) and SEND_RARP. QEMU itself migrates
// Linux guests in the qemu_migration test.
#include <rte_cycles.h>
#include <rte_ether.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <cstring>

#include "port_pair.h"
#include "raw_frontend.h"

using namespace vqs::test;
using namespace vqs::test::vhost_user;

namespace {

constexpr uint64_t kLogPage = 4096;  // the vhost-user log: a bit per 4 KiB of guest memory
constexpr uint64_t kLogBytes = RawGuest::kMemSize / kLogPage / 8;

// The log as the frontend sees it.
struct SharedLog {
  SharedLog() : file(kLogPage, true) {
    void* p = mmap(nullptr, kLogPage, PROT_READ | PROT_WRITE, MAP_SHARED, file.fd, 0);
    REQUIRE(p != MAP_FAILED);
    bits = static_cast<uint8_t*>(p);
  }
  ~SharedLog() { munmap(bits, kLogPage); }
  bool page_marked(uint64_t gpa) const {
    return (__atomic_load_n(&bits[gpa / kLogPage / 8], __ATOMIC_ACQUIRE) >> (gpa / kLogPage % 8)) &
           1;
  }
  size_t marked_pages() const {
    size_t n = 0;
    for (uint64_t i = 0; i < kLogBytes; ++i) n += __builtin_popcount(bits[i]);
    return n;
  }
  void clear() { std::memset(bits, 0, kLogPage); }
  Memfd file;
  uint8_t* bits = nullptr;
};

// Whether `port`'s xstat `name` is `want` within a second (the frontend's messages are handled on
// librte_vhost's thread, after the test sent them).
bool xstat_becomes(uint16_t port, const char* name, uint64_t want) {
  for (int i = 0; i < 1000 && xstat(port, name) != want; ++i) rte_delay_ms(1);
  return xstat(port, name) == want;
}

// The guest sends `count` packets and the port receives them: the device writes the TX used ring.
void pass_packets(RawGuest& guest, uint16_t port, uint16_t count) {
  guest.send(count, 100);
  std::vector<rte_mbuf*> got = receive(port, 0, count);
  CHECK(got.size() == count);
  free_all(got);
}

}  // namespace

// Issue 19: a log at an offset would have librte_vhost 22.11 mark past its mapping (it maps from
// the offset and marks from the mapping plus the offset); a log past the end of its file, or in
// one that may still shrink, raises SIGBUS at a mark. All are refused; a sound log is taken, and
// with VHOST_F_LOG_ALL on every used-ring write of ours is marked in it.
TEST_CASE("dirty log: bad logs refused; with logging on the used ring's page is marked") {
  HostPort host(1);
  RawGuest guest(host.socket());
  REQUIRE(wait_link(host.port(), true));
  RawFrontend& frontend = guest.frontend();
  SharedLog log;

  frontend.send_log_base(log.file.fd, kLogPage, kLogPage, kNeedReply);
  CHECK(frontend.receive_reply(false).u64 != 0);
  {
    Memfd short_file(kLogBytes / 2, true);
    frontend.send_log_base(short_file.fd, kLogPage, 0, kNeedReply);
    CHECK(frontend.receive_reply(false).u64 != 0);
  }
  {
    // Long enough, but the frontend could truncate it under our marks: SIGBUS at the next one.
    Memfd unsealed(kLogPage);
    frontend.send_log_base(unsealed.fd, kLogPage, 0, kNeedReply);
    CHECK(frontend.receive_reply(false).u64 != 0);
  }
  CHECK(xstat(host.port(), "refused_messages") == 3);
  frontend.send_log_base(log.file.fd, kLogPage, 0, kNeedReply);
  CHECK(frontend.receive_reply(false).u64 == 0);
  REQUIRE(wait_link(host.port(), true));

  // The log is there but not on: nothing marked.
  pass_packets(guest, host.port(), 8);
  CHECK(log.marked_pages() == 0);

  CHECK(xstat(host.port(), "migrating") == 0);
  guest.set_logging(true);
  REQUIRE(wait_link(host.port(), true));
  CHECK(xstat_becomes(host.port(), "migrating", 1));
  pass_packets(guest, host.port(), 8);
  CHECK(log.page_marked(guest.used_ring_gpa(1)));
  // Only what we wrote: the TX used ring (the device does not write what the guest sends), and
  // the RX ring's notification suppression state, written when its vring restarted.
  CHECK(log.page_marked(guest.used_ring_gpa(0)));
  CHECK(log.marked_pages() == 2);

  // Guest RX: each buffer written (two 2 KiB buffers a page) and the RX used ring.
  log.clear();
  guest.post_rx(8);
  std::vector<rte_mbuf*> to_guest;
  for (uint32_t i = 0; i < 8; ++i) to_guest.push_back(make_packet(1000, i));
  CHECK(send_all(host.port(), 0, to_guest) == 8);
  CHECK(guest.rx_used() == 8);
  for (uint16_t slot = 0; slot < 8; ++slot) CHECK(log.page_marked(RawGuest::rx_buffer_gpa(slot)));
  CHECK(log.page_marked(guest.used_ring_gpa(0)));
  CHECK(log.marked_pages() == 5);

  guest.set_logging(false);
  REQUIRE(wait_link(host.port(), true));
  CHECK(xstat_becomes(host.port(), "migrating", 0));
  log.clear();
  pass_packets(guest, host.port(), 8);
  guest.post_rx(8);
  to_guest.clear();
  for (uint32_t i = 0; i < 8; ++i) to_guest.push_back(make_packet(1000, i));
  CHECK(send_all(host.port(), 0, to_guest) == 8);
  CHECK(log.marked_pages() == 0);
}

// A frontend that resets (RESET_OWNER) after giving a log: librte_vhost 22.11 unmaps the log but
// keeps its pointer to it, and marks through that pointer at every rte_vhost_log_* call. Set up
// again with VHOST_F_LOG_ALL and no new log, the device marks nothing (it used to write to the
// unmapped log: SEGV, found by vhost_message_fuzz); a new log is marked again.
TEST_CASE("dirty log: after RESET_OWNER nothing is marked until the frontend gives a new log") {
  HostPort host(1);
  RawGuest guest(host.socket());
  REQUIRE(wait_link(host.port(), true));
  RawFrontend& frontend = guest.frontend();
  SharedLog log;
  frontend.send_log_base(log.file.fd, kLogPage, 0, kNeedReply);
  REQUIRE(frontend.receive_reply(false).u64 == 0);

  guest.reset_owner_and_set_up(true);
  REQUIRE(wait_link(host.port(), true));
  CHECK(xstat_becomes(host.port(), "migrating", 1));
  pass_packets(guest, host.port(), 8);
  guest.post_rx(8);
  std::vector<rte_mbuf*> to_guest;
  for (uint32_t i = 0; i < 8; ++i) to_guest.push_back(make_packet(1000, i));
  CHECK(send_all(host.port(), 0, to_guest) == 8);
  CHECK(guest.rx_used() == 8);
  CHECK(log.marked_pages() == 0);

  frontend.send_log_base(log.file.fd, kLogPage, 0, kNeedReply);
  REQUIRE(frontend.receive_reply(false).u64 == 0);
  REQUIRE(wait_link(host.port(), true));
  pass_packets(guest, host.port(), 8);
  CHECK(log.page_marked(guest.used_ring_gpa(1)));
}

TEST_CASE("SEND_RARP: the port's next receive burst starts with the guest's RARP, once") {
  HostPort host(1);
  RawGuest guest(host.socket());
  REQUIRE(wait_link(host.port(), true));
  const uint8_t mac[RTE_ETHER_ADDR_LEN] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
  uint64_t payload = 0;
  std::memcpy(&payload, mac, sizeof(mac));  // QEMU: the MAC in the u64's first bytes
  guest.frontend().send_message(kSendRarp, 0, true, payload);

  guest.send(2, 100);
  std::vector<rte_mbuf*> got = receive(host.port(), 0, 3);
  REQUIRE(got.size() == 3);
  const auto* eth = rte_pktmbuf_mtod(got[0], const rte_ether_hdr*);
  CHECK(rte_be_to_cpu_16(eth->ether_type) == RTE_ETHER_TYPE_RARP);
  CHECK(std::memcmp(eth->src_addr.addr_bytes, mac, sizeof(mac)) == 0);
  CHECK(rte_is_broadcast_ether_addr(&eth->dst_addr));
  for (size_t i = 1; i < got.size(); ++i)
    CHECK(rte_be_to_cpu_16(rte_pktmbuf_mtod(got[i], const rte_ether_hdr*)->ether_type) !=
          RTE_ETHER_TYPE_RARP);
  free_all(got);
  CHECK(xstat(host.port(), "rarps_sent") == 1);
}
