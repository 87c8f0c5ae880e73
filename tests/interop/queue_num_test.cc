// The number of queue pairs we announce to the frontend (VHOST_USER_GET_QUEUE_NUM), asked by a raw
// vhost-user client as QEMU asks it, and what is counted when a frontend enables more anyway.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

#include "port_pair.h"

using namespace vqs::test;

namespace {

// vhost-user specification: requests, header flags, feature bits.
constexpr uint32_t kGetFeatures = 1;
constexpr uint32_t kGetProtocolFeatures = 15;
constexpr uint32_t kSetProtocolFeatures = 16;
constexpr uint32_t kGetQueueNum = 17;
constexpr uint32_t kVersion = 0x1;
constexpr uint32_t kReplyFlag = 1u << 2;
constexpr uint32_t kNeedReply = 1u << 3;
constexpr uint64_t kFProtocolFeatures = 1ull << 30;
constexpr uint64_t kProtocolFMq = 1ull << 0;
constexpr uint64_t kProtocolFReplyAck = 1ull << 3;

struct [[gnu::packed]] Message {
  uint32_t request = 0;
  uint32_t flags = kVersion;
  uint32_t size = 0;
  uint64_t u64 = 0;
};
constexpr size_t kHeaderSize = 12;

// A frontend speaking the protocol over the socket by hand.
class RawFrontend {
 public:
  explicit RawFrontend(const std::string& path) : fd_(socket(AF_UNIX, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    const timeval timeout{2, 0};  // a missing reply fails the test instead of hanging it
    REQUIRE(setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) == 0);
  }
  ~RawFrontend() { close(fd_); }

  void send_message(uint32_t request, uint32_t flags = 0, bool with_u64 = false, uint64_t u64 = 0) {
    Message m;
    m.request = request;
    m.flags = kVersion | flags;
    m.size = with_u64 ? sizeof(uint64_t) : 0;
    m.u64 = u64;
    const size_t len = kHeaderSize + m.size;
    REQUIRE(send(fd_, &m, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len));
  }

  // A reply with a u64 payload (every reply this test expects has one).
  Message receive_reply() {
    Message m;
    REQUIRE(recv(fd_, &m, kHeaderSize, MSG_WAITALL) == static_cast<ssize_t>(kHeaderSize));
    REQUIRE(m.size == sizeof(uint64_t));
    uint64_t u64 = 0;
    REQUIRE(recv(fd_, &u64, sizeof(u64), MSG_WAITALL) == sizeof(u64));
    m.u64 = u64;
    CHECK(m.flags == (kVersion | kReplyFlag));
    return m;
  }

 private:
  int fd_;
};

}  // namespace

TEST_CASE("GET_QUEUE_NUM answers the queue pairs the port serves") {
  HostPort host(2);
  {
    // QEMU's order: features, protocol features, then the queue count (before SET_OWNER).
    RawFrontend frontend(host.socket());
    frontend.send_message(kGetFeatures);
    Message reply = frontend.receive_reply();
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
