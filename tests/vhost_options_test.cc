// SPDX-License-Identifier: BSD-3-Clause
// A vhost port's options are declared once (vhost/vhost_port_options.h): the PMD's devargs and the
// switch's YAML must take each numeric option within the same limits and apply the same rules.
#include <catch2/catch.hpp>

#include <string>

#include "config/config.h"
#include "vhost/vhost_port_options.h"
#include "vqs/devargs.h"

using namespace vqs;

namespace {

struct NumericOption {
  const char* devarg;        // key=value
  const char* yaml;          // a flow mapping entry with VALUE in it
  const char* needs_devarg;  // devargs it applies with
  const char* needs_yaml;    // YAML keys it applies with
  OptionLimits limits;
};

bool devargs_take(const NumericOption& o, uint64_t value, std::string* error) {
  const std::string args =
      std::string("iface=/tmp/opt.sock,") + o.needs_devarg + o.devarg + "=" + std::to_string(value);
  return parse_devargs(args.c_str(), error).has_value();
}

bool yaml_takes(const NumericOption& o, uint64_t value, std::string* error) {
  std::string entry = o.yaml;
  entry.replace(entry.find("VALUE"), 5, std::to_string(value));
  const std::string text = std::string("version: 1\nports:\n  - {name: vm0, type: vhost, ") +
                           "socket: /tmp/opt.sock, " + o.needs_yaml + entry +
                           "}\nforwarding: {mode: bridge}\n";
  return app::parse_config(text, "t.yaml", error).has_value();
}

}  // namespace

TEST_CASE("vhost options: devargs and YAML take the same ranges, from one declaration") {
  const NumericOption options[] = {
      {"queues", "queues: VALUE", "", "", vhost_limits::kQueues},
      {"notify_coalesce_packets", "notify_coalesce: {packets: VALUE}", "", "",
       vhost_limits::kNotifyCoalescePackets},
      {"notify_coalesce_usecs", "notify_coalesce: {usecs: VALUE}", "", "",
       vhost_limits::kNotifyCoalesceUsecs},
      {"refill_threshold", "refill_threshold: VALUE", "", "", vhost_limits::kRefillThreshold},
      {"zerocopy_min_len", "zerocopy_min_len: VALUE", "zerocopy=1,", "zerocopy: true, ",
       vhost_limits::kZeroCopyMinLen},
      {"interrupt_recheck_us", "interrupt_recheck_us: VALUE", "", "",
       vhost_limits::kInterruptRecheckUs},
  };
  for (const NumericOption& o : options) {
    INFO(o.devarg);
    std::string error;
    for (const uint64_t inside : {o.limits.min, o.limits.max}) {
      INFO(inside);
      CHECK(devargs_take(o, inside, &error));
      CHECK(yaml_takes(o, inside, &error));
    }
    std::vector<uint64_t> outside{o.limits.max + 1};
    if (o.limits.min > 0) outside.push_back(o.limits.min - 1);
    for (const uint64_t value : outside) {
      INFO(value);
      CHECK_FALSE(devargs_take(o, value, &error));
      CHECK(error.find("must be " + o.limits.range()) != std::string::npos);
      CHECK_FALSE(yaml_takes(o, value, &error));
      CHECK(error.find("must be " + o.limits.range()) != std::string::npos);
    }
  }
}

TEST_CASE("vhost options: devargs and YAML refuse the same combinations") {
  struct Rule {
    const char* devargs;  // after iface=
    const char* yaml;     // mapping entries after the socket
  };
  const Rule refused[] = {
      {"reconnect=1", "reconnect: true"},
      {"client=1,socket_mode=0660", "mode: client, socket_mode: \"0660\""},
      {"client=1,socket_group=root", "mode: client, socket_group: root"},
      {"zerocopy_min_len=512", "zerocopy_min_len: 512"},
  };
  for (const Rule& r : refused) {
    INFO(r.devargs);
    std::string error;
    CHECK_FALSE(parse_devargs((std::string("iface=/tmp/opt.sock,") + r.devargs).c_str(), &error));
    CHECK(error.find("applies") != std::string::npos);
    const std::string text = std::string("version: 1\nports:\n  - {name: vm0, type: vhost, ") +
                             "socket: /tmp/opt.sock, " + r.yaml + "}\nforwarding: {mode: bridge}\n";
    CHECK_FALSE(app::parse_config(text, "t.yaml", &error));
    CHECK(error.find("only with") != std::string::npos);
  }
}

TEST_CASE(
    "vhost options: desc_release and buffer_release take auto, on and off in devargs and YAML "
    "alike") {
  const struct {
    const char* word;
    LineRelease mode;
  } words[] = {{"auto", LineRelease::kAuto}, {"on", LineRelease::kOn}, {"off", LineRelease::kOff}};
  std::string error;
  const auto defaults = parse_devargs("iface=/tmp/opt.sock", &error);
  REQUIRE(defaults);
  CHECK(defaults->desc_release == LineRelease::kAuto);
  CHECK(defaults->buffer_release == LineRelease::kAuto);
  for (const std::string key : {"desc_release", "buffer_release"}) {
    auto mode_of = [&](const VhostPortOptions& o) {
      return key == "desc_release" ? o.desc_release : o.buffer_release;
    };
    for (const auto& w : words) {
      INFO(key << " " << w.word);
      const auto d = parse_devargs(("iface=/tmp/opt.sock," + key + "=" + w.word).c_str(), &error);
      REQUIRE(d);
      CHECK(mode_of(*d) == w.mode);
      const std::string text = std::string("version: 1\nports:\n  - {name: vm0, type: vhost, ") +
                               "socket: /tmp/opt.sock, " + key + ": " + w.word +
                               "}\nforwarding: {mode: bridge}\n";
      const auto c = app::parse_config(text, "t.yaml", &error);
      REQUIRE(c);
      CHECK(mode_of(c->ports[0].vhost) == w.mode);
      CHECK(line_release_name(w.mode) == std::string(w.word));
    }
    CHECK_FALSE(parse_devargs(("iface=/tmp/opt.sock," + key + "=1").c_str(), &error));
    CHECK(error.find(key) != std::string::npos);
    CHECK(error.find("auto, on or off") != std::string::npos);
    CHECK_FALSE(app::parse_config(
        "version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/opt.sock, " + key +
            ": yes}\nforwarding: {mode: bridge}\n",
        "t.yaml", &error));
    CHECK(error.find(key) != std::string::npos);
    CHECK(error.find("t.yaml") != std::string::npos);
  }
}

TEST_CASE("vhost options: interrupt_recheck_us is off in the PMD and on in the switch by default") {
  std::string error;
  const auto devargs = parse_devargs("iface=/tmp/opt.sock", &error);
  REQUIRE(devargs);
  CHECK(devargs->interrupt_recheck_us == 0);
  const auto config = app::parse_config(
      "version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/opt.sock}\n"
      "  - {name: vm1, type: vhost, socket: /tmp/opt1.sock, interrupt_recheck_us: 0}\n"
      "forwarding: {mode: bridge}\n",
      "t.yaml", &error);
  REQUIRE(config);
  CHECK(config->ports[0].vhost.interrupt_recheck_us == app::kDefaultInterruptRecheckUs);
  CHECK(config->ports[1].vhost.interrupt_recheck_us == 0);
  CHECK_FALSE(
      app::parse_config("version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/opt.sock, "
                        "interrupt_recheck_us: 1001}\nforwarding: {mode: bridge}\n",
                        "t.yaml", &error));
  CHECK(error.find("t.yaml:3") != std::string::npos);
  CHECK(error.find("interrupt_recheck_us") != std::string::npos);
}
