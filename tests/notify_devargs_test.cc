// SPDX-License-Identifier: BSD-3-Clause
// net_vqs devargs for the guest RX notify policy (parse_devargs is compiled in from the PMD).
#include <catch2/catch.hpp>
#include <string>

#include "vqs/devargs.h"

using namespace vqs;

namespace {

std::optional<VhostDeviceOptions> parse(const std::string& args, std::string* error) {
  return parse_devargs(args.c_str(), error);
}

}  // namespace

TEST_CASE("devargs: notify policy defaults to coalescing off and an automatic threshold") {
  std::string error;
  const auto options = parse("iface=/tmp/x.sock", &error);
  REQUIRE(options);
  CHECK(options->notify.coalesce_packets == 0);
  CHECK(options->notify.coalesce_usecs == 0);
  CHECK(options->notify.refill_threshold == 0);
  CHECK_FALSE(options->notify.coalescing());
}

TEST_CASE("devargs: notify policy values at their limits") {
  std::string error;
  const auto options = parse(
      "iface=/tmp/x.sock,notify_coalesce_packets=1024,notify_coalesce_usecs=1000000,"
      "refill_threshold=32768",
      &error);
  REQUIRE(options);
  CHECK(options->notify.coalesce_packets == 1024);
  CHECK(options->notify.coalesce_usecs == 1000000);
  CHECK(options->notify.refill_threshold == 32768);
  CHECK(options->notify.valid());
  const auto zero = parse(
      "iface=/tmp/x.sock,notify_coalesce_packets=0,notify_coalesce_usecs=0,refill_threshold=0",
      &error);
  REQUIRE(zero);
  CHECK_FALSE(zero->notify.coalescing());
  CHECK(zero->notify.refill_threshold == 0);
}

TEST_CASE("devargs: notify policy errors name the key") {
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"notify_coalesce_packets=1025",
       "devarg 'notify_coalesce_packets': must be 0..1024, got '1025'"},
      {"notify_coalesce_packets=-1", "devarg 'notify_coalesce_packets': must be 0..1024, got '-1'"},
      {"notify_coalesce_usecs=1000001",
       "devarg 'notify_coalesce_usecs': must be 0..1000000, got '1000001'"},
      {"notify_coalesce_usecs=1ms",
       "devarg 'notify_coalesce_usecs': must be 0..1000000, got '1ms'"},
      {"refill_threshold=32769",
       "devarg 'refill_threshold': must be 0..32768 (0: ring size / 2), got '32769'"},
      {"refill_threshold=", "devarg 'refill_threshold': must be 0..32768"},
      {"refill_threshold=8,refill_threshold=8", "devarg 'refill_threshold' given twice"},
      {"notify_coalesce=4", "unknown devarg 'notify_coalesce' (valid: "},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    std::string error;
    CHECK_FALSE(parse(std::string("iface=/tmp/x.sock,") + c.args, &error));
    CHECK(error.rfind(c.message, 0) == 0);
  }
  std::string error;
  CHECK_FALSE(parse("iface=/tmp/x.sock,bogus=1", &error));
  CHECK(error.find("notify_coalesce_packets, notify_coalesce_usecs, refill_threshold") !=
        std::string::npos);
}

// Issue 16, hole 5: who may connect to a server socket.
TEST_CASE("devargs: socket_mode and socket_group") {
  std::string error;
  auto options = parse("iface=/tmp/x.sock,socket_mode=0660,socket_group=root", &error);
  INFO(error);
  REQUIRE(options);
  CHECK(options->access.mode == mode_t{0660});
  CHECK(options->access.group == gid_t{0});
  options = parse("iface=/tmp/x.sock,socket_mode=600,socket_group=0", &error);
  REQUIRE(options);
  CHECK(options->access.mode == mode_t{0600});
  CHECK(options->access.group == gid_t{0});
  options = parse("iface=/tmp/x.sock", &error);
  REQUIRE(options);
  CHECK_FALSE(options->access.mode);
  CHECK_FALSE(options->access.group);

  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"socket_mode=0888", "devarg 'socket_mode': must be octal permission bits"},
      {"socket_mode=4755", "devarg 'socket_mode': must be octal permission bits"},
      {"socket_mode=", "devarg 'socket_mode': must be octal permission bits"},
      {"socket_mode=rw", "devarg 'socket_mode': must be octal permission bits"},
      {"socket_group=no-such-group-here", "devarg 'socket_group': no group \"no-such-group-here\""},
      {"socket_group=", "devarg 'socket_group': must be a group name or id"},
      {"client=1,socket_mode=0660", "devarg 'socket_mode' applies to server mode only"},
      {"client=1,socket_group=root", "devarg 'socket_group' applies to server mode only"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    CHECK_FALSE(parse(std::string("iface=/tmp/x.sock,") + c.args, &error));
    CHECK(error.rfind(c.message, 0) == 0);
  }
}
