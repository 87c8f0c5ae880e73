// SPDX-License-Identifier: BSD-3-Clause
// The configuration loader and the planner: example configs, exact error messages, defaults,
// placement, core lists, xconnect peers, tx queue sharing.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/plan.h"
#include "config/reload_plan.h"
#include "fake_numa_topology.h"

namespace vqs::app {
namespace {

using test::FakeNumaTopology;

// Plans made on one node whatever the machine: the texts below do not depend on where they run.
const FakeNumaTopology kOneNode({0, 0, 0, 0});

Config parse_ok(const std::string& text) {
  std::string error;
  std::optional<Config> config = parse_config(text, "t.yaml", &error);
  INFO(error);
  REQUIRE(config);
  return *config;
}

Plan plan_ok(const Config& config, const NumaTopology& topology = kOneNode) {
  std::string error;
  std::optional<Plan> plan = make_plan(config, topology, &error);
  INFO(error);
  REQUIRE(plan);
  return *plan;
}

std::string parse_error(const std::string& text) {
  std::string error;
  std::optional<Config> config = parse_config(text, "t.yaml", &error);
  if (config) return "(loaded)";
  return error;
}

TEST_CASE("every example config loads and plans") {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(VQS_CONFIG_DIR))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  REQUIRE(files.size() >= 4);
  for (const auto& file : files) {
    INFO(file);
    std::string error;
    std::optional<Config> config = load_config(file.string(), &error);
    INFO(error);
    REQUIRE(config);
    std::optional<Plan> plan = make_plan(*config, &error);
    REQUIRE(plan);
    std::string text = format_plan(*config, *plan);
    for (const PortConfig& port : config->ports) CHECK(text.find(port.name + ": ") != text.npos);
  }
}

TEST_CASE("demo.yaml: two server-mode guests on a bridge, one forwarding lcore") {
  std::string error;
  std::optional<Config> config = load_config(std::string(VQS_CONFIG_DIR) + "/demo.yaml", &error);
  REQUIRE(config);
  REQUIRE(config->ports.size() == 2);
  CHECK(config->ports[0].name == "vm0");
  CHECK(config->ports[0].socket == "/tmp/vqs-demo-vm0.sock");
  CHECK(config->ports[1].socket == "/tmp/vqs-demo-vm1.sock");
  CHECK_FALSE(config->ports[0].vhost.client);
  CHECK(config->forwarding.mode == ForwardingMode::kBridge);
  Plan plan = plan_ok(*config);
  CHECK(plan.main_lcore == 0);
  REQUIRE(plan.lcores.size() == 1);
  CHECK(plan.lcores[0].lcore == 1);
  CHECK(plan.lcores[0].rx.size() == 2);
}

TEST_CASE("missing files are reported with their name") {
  std::string error;
  CHECK_FALSE(load_config("/nonexistent/x.yaml", &error));
  CHECK(error == "/nonexistent/x.yaml: cannot read: No such file or directory");
}

// Issue 16, hole 10: the file is read to at most 1 MiB; something larger (or endless, such as
// /dev/zero) is refused by its size, not read into memory.
TEST_CASE("a config file larger than 1 MiB is refused, an endless one too") {
  const std::string path = "/tmp/vqs-config-test-" + std::to_string(getpid()) + ".yaml";
  {
    std::ofstream out(path);
    out << "version: 1\n# " << std::string(1 << 20, 'x') << "\n";
  }
  std::string error;
  CHECK_FALSE(load_config(path, &error));
  CHECK(error == path + ": larger than 1048576 bytes; a configuration is far smaller");
  std::remove(path.c_str());
  CHECK_FALSE(load_config("/dev/zero", &error));
  CHECK(error == "/dev/zero: larger than 1048576 bytes; a configuration is far smaller");
}

struct BrokenCase {
  const char* yaml;
  const char* error;
};

// A minimal valid config is
//   version: 1
//   ports:
//     - {name: vm0, type: vhost, socket: /tmp/a.sock}
//   forwarding: {mode: bridge}
// and each case breaks one thing.
const BrokenCase kBroken[] = {
    // Schema: unknown, missing, mistyped keys.
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    sockt: /tmp/a.sock\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:5:5: ports[0].sockt: unknown key"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    queues: 0\nforwarding: {mode: bridge}\n",
     "t.yaml:6:13: ports[0].queues: must be 1..128, got 0"},
    {"ports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:1:1: version: required key missing"},
    {"version: 2\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:1:10: version: unsupported version 2, this vqswitch reads 1"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, queues: two}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:59: ports[0].queues: expected an integer, got \"two\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, queues: \"2\"}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:59: ports[0].queues: expected an integer, got the quoted string \"2\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost}\nforwarding: {mode: bridge}\n",
     "t.yaml:3:5: ports[0].socket: required key missing"},
    {"version: 1\nports:\n  - {name: vm0, type: vhots, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:23: ports[0].type: must be vhost or ethdev, got \"vhots\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, tso: yes}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:56: ports[0].tso: expected true or false, got \"yes\""},
    {"version: 1\nversion: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:2:1: version: duplicate key (first at line 1)"},
    {"version: 1\nports: {name: vm0}\nforwarding: {mode: bridge}\n",
     "t.yaml:2:8: ports: expected a sequence, got a mapping"},
    {"version: 1\nports: []\nforwarding: {mode: bridge}\n",
     "t.yaml:2:8: ports: must have 1..1024 entries, got 0"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n",
     "t.yaml:1:1: forwarding: required key missing"},
    {"- version: 1\n", "t.yaml:1:1: expected a mapping at the top level, got a sequence"},
    {"", "t.yaml:1:1: empty configuration (expected a mapping with version: 1)"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n---\nversion: 1\n",
     "t.yaml:5:1: a second YAML document; the configuration is one"},
    {",\n", "t.yaml:1:1: expected a mapping at the top level, got nothing"},
    {"# only a comment\n", "t.yaml:1:1: empty configuration (expected a mapping with version: 1)"},
    // YAML syntax.
    {"version: 1\nports: [vm0\nforwarding: {mode: bridge}\n",
     "t.yaml:3:11: invalid YAML: end of sequence flow not found"},
    {"version: 1\n  ports: 2\n", "t.yaml:2:8: invalid YAML: illegal map value"},
    // Top-level values.
    {"version: 1\nburst: 65\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:2:8: burst: must be 1..64, got 65"},
    {"version: 1\nmbufs: 100\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:2:8: mbufs: must be 0 (auto) or 1024..16777216, got 100"},
    {"version: 1\neal: {cores: \"0-\"}\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:2:14: eal.cores: must be lcore ids below 128 and ascending ranges like \"0-3,6\", "
     "each once, got \"0-\""},
    {"version: 1\neal: {cores: \"0-1\", main_lcore: 2}\nports:\n"
     "  - {name: vm0, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:2:33: eal.main_lcore: lcore 2 is not in eal.cores \"0-1\""},
    {"version: 1\neal:\n  args: [\"--no-pci\", \"-l\", \"0\"]\nports:\n"
     "  - {name: vm0, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:3:22: eal.args[1]: \"-l\" is set from eal.cores, not through eal.args"},
    {"version: 1\neal: {memory_mb: 32}\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:2:18: eal.memory_mb: must be 64..1048576, got 32"},
    // Ports.
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: vm0, type: vhost, socket: /tmp/b.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:4:12: ports[1].name: duplicate port name \"vm0\" (also ports[0])"},
    {"version: 1\nports:\n  - {name: \"vm 0\", type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:12: ports[0].name: must be 1..32 characters of A-Z a-z 0-9 _ . -, got \"vm 0\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: a.sock}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:38: ports[0].socket: must be an absolute path, got \"a.sock\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: vm1, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:4:38: ports[1].socket: duplicate socket \"/tmp/a.sock\" (also ports[0].socket)"},
    // The same file however it is spelled (issue 16, hole 10).
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: vm1, type: vhost, socket: /tmp//a.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:4:38: ports[1].socket: duplicate socket \"/tmp/a.sock\" (also ports[0].socket)"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/./x/../a.sock}\n"
     "  - {name: vm1, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n",
     "t.yaml:4:38: ports[1].socket: duplicate socket \"/tmp/a.sock\" (also ports[0].socket)"},
    // Who may connect (issue 16, hole 5).
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, socket_mode: "
     "\"0888\"}\nforwarding: {mode: bridge}\n",
     "t.yaml:3:64: ports[0].socket_mode: must be octal permission bits such as \"0660\" (at most "
     "0777), got \"0888\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, socket_group: "
     "no-such-group-here}\nforwarding: {mode: bridge}\n",
     "t.yaml:3:65: ports[0].socket_group: no group \"no-such-group-here\" on this host"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, mode: client, "
     "socket_mode: \"0660\"}\nforwarding: {mode: bridge}\n",
     "t.yaml:3:65: ports[0].socket_mode: only with mode: server (QEMU owns a client's socket)"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock/}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:38: ports[0].socket: must name a file, got \"/tmp/a.sock/\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, reconnect: false}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].reconnect: only with mode: client"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, mtu: 1500}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].mtu: only for ethdev ports"},
    {"version: 1\nports:\n  - {name: nic0, type: ethdev, device: net_null0, tso: true}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].tso: only for vhost ports"},
    {"version: 1\nports:\n  - {name: nic0, type: ethdev, device: net_null0, zerocopy: true}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].zerocopy: only for vhost ports"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, zerocopy_min_len: "
     "300}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].zerocopy_min_len: only with zerocopy: true"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, zerocopy: true,\n"
     "      zerocopy_min_len: 32}\nforwarding: {mode: bridge}\n",
     "t.yaml:4:25: ports[0].zerocopy_min_len: must be 64..65535, got 32"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, zerocopy_fallback: "
     "false}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].zerocopy_fallback: only with zerocopy: true"},
    {"version: 1\nports:\n  - {name: nic0, type: ethdev, device: net_null0, zerocopy_fallback: "
     "false}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:51: ports[0].zerocopy_fallback: only for vhost ports"},
    {"version: 1\nports:\n  - {name: nic0, type: ethdev}\nforwarding: {mode: bridge}\n",
     "t.yaml:3:5: ports[0].device: required key missing"},
    {"version: 1\nports:\n  - {name: nic0, type: ethdev, device: net_null0}\n"
     "  - {name: nic1, type: ethdev, device: \"net_null0,size=64\"}\nforwarding: {mode: bridge}\n",
     "t.yaml:4:40: ports[1].device: device \"net_null0\" is already ports[0]"},
    {"version: 1\nports:\n  - {name: nic0, type: ethdev, device: net_null0, rx_descriptors: 1000}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:3:67: ports[0].rx_descriptors: must be a power of two in 64..32768, got 1000"},
    {"version: 1\nports:\n  - name: nic0\n    type: ethdev\n    device: net_null0\n"
     "    rx_descriptors: 512\n    rx_free_thresh: 512\nforwarding: {mode: bridge}\n",
     "t.yaml:7:21: ports[0].rx_free_thresh: must be 1..511 (below rx_descriptors), got 512"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    weight: {packets: 0}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:23: ports[0].weight.packets: must be 1..65536, got 0"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    weight: {pkts: 10}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:14: ports[0].weight.pkts: unknown key"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    notify_coalesce: {usecs: 2000000}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:30: ports[0].notify_coalesce.usecs: must be 0..1000000, got 2000000"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket:\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:5:5: ports[0].socket: expected a string, got nothing"},
    // VLANs.
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    vlan: {mode: access, vlan: 10}\n  - {name: nic0, type: ethdev, device: net_null0}\n"
     "forwarding: {mode: xconnect, pairs: [[vm0, nic0]]}\n",
     "t.yaml:6:5: ports[0].vlan: only in bridge mode (forwarding.mode is xconnect)"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    vlan: {mode: access, vlan: 4095}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:32: ports[0].vlan.vlan: must be 1..4094, got 4095"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    vlan: {mode: trunk, vlans: [10, 20, 10]}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:41: ports[0].vlan.vlans[2]: duplicate VLAN 10 (also vlans[0])"},
    {"version: 1\nports:\n  - name: vm0\n    type: vhost\n    socket: /tmp/a.sock\n"
     "    vlan: {mode: access, vlans: [10]}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:26: ports[0].vlan.vlans: only with mode: trunk"},
    // Forwarding.
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: nic0, type: ethdev, device: net_null0}\n"
     "forwarding: {mode: xconnect, pairs: [[vm0, nic1]]}\n",
     "t.yaml:5:44: forwarding.pairs[0][1]: unknown port \"nic1\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: nic0, type: ethdev, device: net_null0}\n"
     "forwarding: {mode: xconnect, pairs: []}\n",
     "t.yaml:3:5: ports[0]: not forwarded: vm0 is in no forwarding.pairs entry"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: nic0, type: ethdev, device: net_null0}\n"
     "forwarding: {mode: xconnect, pairs: [[vm0, vm0]]}\n",
     "t.yaml:5:44: forwarding.pairs[0][1]: port vm0 paired with itself"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: nic0, type: ethdev, device: net_null0}\n"
     "  - {name: nic1, type: ethdev, device: net_null1}\n"
     "forwarding: {mode: xconnect, pairs: [[vm0, nic0], [nic1, vm0]]}\n",
     "t.yaml:6:58: forwarding.pairs[1][1]: port vm0 is already in forwarding.pairs[0]"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: nic0, type: ethdev, device: net_null0}\n"
     "forwarding: {mode: xconnect, pairs: [[vm0, nic0, nic0]]}\n",
     "t.yaml:5:38: forwarding.pairs[0]: must be a pair [port, port], got 3 entries"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge, pairs: []}\n",
     "t.yaml:4:28: forwarding.pairs: only in xconnect mode"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "  - {name: nic0, type: ethdev, device: net_null0}\n"
     "forwarding: {mode: xconnect, pairs: [[vm0, nic0]], mac_aging_s: 10}\n",
     "t.yaml:5:52: forwarding.mac_aging_s: only in bridge mode"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: bridge, mac_table_size: 8}\n",
     "t.yaml:4:44: forwarding.mac_table_size: must be 16..1048576, got 8"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "forwarding: {mode: hub}\n",
     "t.yaml:4:20: forwarding.mode: must be xconnect or bridge, got \"hub\""},
    // Lcores and placement.
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 5}\nforwarding: {mode: bridge}\n",
     "t.yaml:5:13: lcores[0].lcore: lcore 5 is not in eal.cores \"0-1\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 1}\n  - {lcore: 1}\nforwarding: {mode: bridge}\n",
     "t.yaml:6:13: lcores[1].lcore: lcore 1 is listed twice (also lcores[0])"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 0, rx: [\"vm0:0\"]}\n  - {lcore: 1, rx: [\"vm0:0\"]}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:6:21: lcores[1].rx[0]: vm0:0 is already polled by lcores[0] (lcore 0)"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, queues: 2}\n"
     "lcores:\n  - {lcore: 1, rx: [\"vm0:0\"]}\nforwarding: {mode: bridge}\n",
     "t.yaml:5:3: lcores: vm0:1 is polled by no lcore (list it in an lcore's rx, or give an lcore "
     "rx: auto)"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 1, rx: [vm0]}\nforwarding: {mode: bridge}\n",
     "t.yaml:5:21: lcores[0].rx[0]: expected \"port:queue\" like \"vm0:0\" or {port: vm0, queue: "
     "0}, "
     "got \"vm0\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 1, rx: [\"vm0:1\"]}\nforwarding: {mode: bridge}\n",
     "t.yaml:5:21: lcores[0].rx[0]: queue 1 out of range: vm0 has queues 0..0"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - lcore: 1\n    rx:\n      - {port: vm1, queue: 0}\n"
     "forwarding: {mode: bridge}\n",
     "t.yaml:7:16: lcores[0].rx[0].port: unknown port \"vm1\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 1, rx: manual}\nforwarding: {mode: bridge}\n",
     "t.yaml:5:20: lcores[0].rx: must be auto or a list of rx queues, got \"manual\""},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores:\n  - {lcore: 1, busy_poll_us: -1}\nforwarding: {mode: bridge}\n",
     "t.yaml:5:30: lcores[0].busy_poll_us: must be 0..10000000, got -1"},
    {"version: 1\nports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
     "lcores: []\nforwarding: {mode: bridge}\n",
     "t.yaml:4:9: lcores: must have 1..128 entries, got 0 (leave lcores out for the default "
     "placement)"},
};

TEST_CASE("broken configs are reported exactly") {
  STATIC_REQUIRE(std::size(kBroken) >= 25);
  for (const BrokenCase& c : kBroken) {
    INFO(c.yaml);
    CHECK(parse_error(c.yaml) == c.error);
  }
}

TEST_CASE("an error inside a long config points at the right line") {
  std::string text =
      "version: 1\n"
      "ports:\n"
      "  - name: vm0\n"
      "    type: vhost\n"
      "    socket: /tmp/vm0.sock\n"
      "  - name: nic0\n"
      "    type: ethdev\n"
      "    device: net_null0\n"
      "    queues: 0\n"
      "forwarding:\n"
      "  mode: xconnect\n"
      "  pairs: [[vm0, nic0]]\n";
  CHECK(parse_error(text) == "t.yaml:9:13: ports[1].queues: must be 1..128, got 0");
}

TEST_CASE("defaults are filled in") {
  Config c = parse_ok(
      "version: 1\n"
      "ports:\n"
      "  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
      "  - {name: nic0, type: ethdev, device: \"0000:01:00.0\"}\n"
      "forwarding: {mode: bridge}\n");
  CHECK(c.file == "t.yaml");
  CHECK(c.version == 1);
  CHECK(c.eal.cores == "0-1");
  CHECK_FALSE(c.eal.main_lcore);
  CHECK(c.eal.memory_mb == 1024);
  CHECK(c.eal.file_prefix == "vqswitch");
  CHECK(c.eal.huge);
  CHECK(c.eal.args.empty());
  CHECK(c.mbufs == 0);
  CHECK(c.burst == 32);
  CHECK(c.stats_interval_s == 1);
  CHECK(c.lcores.empty());
  CHECK(c.forwarding.mode == ForwardingMode::kBridge);
  CHECK(c.forwarding.mac_table_size == 4096);
  CHECK(c.forwarding.mac_aging_s == 300);

  REQUIRE(c.ports.size() == 2);
  const PortConfig& vm = c.ports[0];
  CHECK(vm.type == PortType::kVhost);
  CHECK(vm.queues == 1);
  CHECK(vm.weight.packets == vqs::app::kDefaultPacketWeight);
  CHECK(vm.weight.bytes == vqs::app::kDefaultByteWeight);
  CHECK(vqs::app::kDefaultByteWeight == 256 * 1024);
  CHECK(vm.vlan.mode == VlanMode::kNone);
  CHECK(vm.tx_retries_max == 8);
  CHECK_FALSE(vm.vhost.client);
  CHECK(vm.vhost.reconnect);
  CHECK_FALSE(vm.vhost.tso);
  CHECK(vm.vhost.notify.coalesce_packets == 0);
  CHECK(vm.vhost.notify.coalesce_usecs == 0);
  CHECK(vm.vhost.notify.refill_threshold == 0);
  CHECK_FALSE(vm.vhost.zero_copy);
  CHECK(vm.vhost.zero_copy_min_len == 256);
  CHECK(vm.vhost.zero_copy_fallback);
  CHECK(vm.line == 3);
  const PortConfig& nic = c.ports[1];
  CHECK(nic.type == PortType::kEthdev);
  CHECK(nic.device == "0000:01:00.0");
  CHECK(nic.rx_descriptors == 1024);
  CHECK(nic.tx_descriptors == 1024);
  CHECK(nic.rx_free_thresh == 0);
  CHECK(nic.mtu == 0);
  CHECK(nic.line == 4);

  // The default placement: every EAL lcore but main forwards with rx: auto.
  Plan plan = plan_ok(c);
  CHECK(plan.eal_lcores == std::vector<unsigned>{0, 1});
  CHECK(plan.main_lcore == 0);
  REQUIRE(plan.lcores.size() == 1);
  CHECK(plan.lcores[0].lcore == 1);
  CHECK_FALSE(plan.lcores[0].is_main);
  CHECK_FALSE(plan.lcores[0].busy_poll_us);
  CHECK(plan.lcores[0].rx.size() == 2);
  CHECK(plan.xconnect_peer == std::vector<int>{-1, -1});
}

TEST_CASE("socket_mode and socket_group: a server socket's mode and group") {
  Config c = parse_ok(
      "version: 1\nports:\n"
      "  - {name: vm0, type: vhost, socket: /tmp/a.sock, socket_mode: 0660, socket_group: root}\n"
      "  - {name: vm1, type: vhost, socket: /tmp/b.sock, socket_mode: \"600\", socket_group: 0}\n"
      "  - {name: vm2, type: vhost, socket: /tmp/c.sock}\n"
      "forwarding: {mode: bridge}\n");
  CHECK(c.ports[0].vhost.access.mode == mode_t{0660});
  CHECK(c.ports[0].vhost.access.group == gid_t{0});
  CHECK(c.ports[1].vhost.access.mode == mode_t{0600});
  CHECK(c.ports[1].vhost.access.group == gid_t{0});
  CHECK_FALSE(c.ports[2].vhost.access.mode);
  CHECK_FALSE(c.ports[2].vhost.access.group);
}

TEST_CASE("control: the socket's path, mode and group; the default from the file prefix") {
  Config c = parse_ok(
      "version: 1\neal: {file_prefix: sw7}\n"
      "ports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n");
  CHECK(c.control_socket() == "/run/vqswitch/sw7.ctl");
  CHECK_FALSE(c.control.access.mode);
  c = parse_ok(
      "version: 1\ncontrol: {socket: /var/run//x/../ctl.sock, mode: \"0660\", group: root}\n"
      "ports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n");
  CHECK(c.control_socket() == "/var/run/ctl.sock");
  CHECK(c.control.access.mode == mode_t{0660});
  CHECK(c.control.access.group == gid_t{0});
  CHECK(format_plan(c, plan_ok(c)).find("control socket /var/run/ctl.sock mode 660\n") !=
        std::string::npos);
  const std::string tail =
      "ports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock}\nforwarding: {mode: bridge}\n";
  CHECK(parse_error("version: 1\ncontrol: {socket: ctl.sock}\n" + tail) ==
        "t.yaml:2:19: control.socket: must be an absolute path, got \"ctl.sock\"");
  CHECK(parse_error("version: 1\ncontrol: {mode: \"1777\"}\n" + tail)
            .find("t.yaml:2:17: control.mode: ") == 0);
  CHECK(parse_error("version: 1\ncontrol: {sokcet: /a}\n" + tail)
            .find("t.yaml:2:11: control.sokcet: unknown key") == 0);
}

TEST_CASE("every key is read") {
  Config c = parse_ok(
      "version: 1\n"
      "eal: {cores: \"2-3\", main_lcore: 3, memory_mb: 64, file_prefix: t1, huge: false,\n"
      "      args: [\"--no-pci\", \"--log-level=8\"]}\n"
      "mbufs: 8192\n"
      "burst: 16\n"
      "stats_interval_s: 0\n"
      "ports:\n"
      "  - name: vm0\n"
      "    type: vhost\n"
      "    socket: /tmp/a.sock\n"
      "    mode: client\n"
      "    reconnect: false\n"
      "    queues: 4\n"
      "    tso: true\n"
      "    weight: {packets: 100, bytes: 65536}\n"
      "    notify_coalesce: {packets: 8, usecs: 50}\n"
      "    refill_threshold: 16\n"
      "    zerocopy: true\n"
      "    zerocopy_min_len: 512\n"
      "    zerocopy_fallback: false\n"
      "    tx_retries_max: 0\n"
      "    vlan: {mode: trunk, vlans: [30, 10], native: 5}\n"
      "  - name: nic0\n"
      "    type: ethdev\n"
      "    device: \"net_tap0,iface=t0\"\n"
      "    queues: 2\n"
      "    rx_descriptors: 512\n"
      "    tx_descriptors: 4096\n"
      "    rx_free_thresh: 32\n"
      "    mtu: 9000\n"
      "    vlan: {mode: access, vlan: 10}\n"
      "lcores:\n"
      "  - {lcore: 2, rx: auto, busy_poll_us: 0}\n"
      "forwarding: {mode: bridge, mac_table_size: 16, mac_aging_s: 0}\n");
  CHECK(c.eal.cores == "2-3");
  CHECK(c.eal.main_lcore == 3u);
  CHECK(c.eal.memory_mb == 64);
  CHECK(c.eal.file_prefix == "t1");
  CHECK_FALSE(c.eal.huge);
  CHECK(c.eal.args == std::vector<std::string>{"--no-pci", "--log-level=8"});
  CHECK(c.mbufs == 8192);
  CHECK(c.burst == 16);
  CHECK(c.stats_interval_s == 0);
  const PortConfig& vm = c.ports[0];
  CHECK(vm.vhost.client);
  CHECK_FALSE(vm.vhost.reconnect);
  CHECK(vm.queues == 4);
  CHECK(vm.vhost.tso);
  CHECK(vm.vhost.zero_copy);
  CHECK(vm.vhost.zero_copy_min_len == 512);
  CHECK_FALSE(vm.vhost.zero_copy_fallback);
  CHECK(vm.weight.packets == 100);
  CHECK(vm.weight.bytes == 65536);
  CHECK(vm.vhost.notify.coalesce_packets == 8);
  CHECK(vm.vhost.notify.coalesce_usecs == 50);
  CHECK(vm.vhost.notify.refill_threshold == 16);
  CHECK(vm.tx_retries_max == 0);
  CHECK(vm.vlan.mode == VlanMode::kTrunk);
  CHECK(vm.vlan.trunk_vlans == std::vector<uint16_t>{10, 30});
  CHECK(vm.vlan.native_vlan == 5);
  const PortConfig& nic = c.ports[1];
  CHECK(nic.device == "net_tap0,iface=t0");
  CHECK(nic.queues == 2);
  CHECK(nic.rx_descriptors == 512);
  CHECK(nic.tx_descriptors == 4096);
  CHECK(nic.rx_free_thresh == 32);
  CHECK(nic.mtu == 9000);
  CHECK(nic.vlan.mode == VlanMode::kAccess);
  CHECK(nic.vlan.access_vlan == 10);
  REQUIRE(c.lcores.size() == 1);
  CHECK(c.lcores[0].auto_rx);
  CHECK(c.lcores[0].busy_poll_us == 0u);
  CHECK(c.forwarding.mac_table_size == 16);
  CHECK(c.forwarding.mac_aging_s == 0);

  Plan plan = plan_ok(c);
  CHECK(plan.main_lcore == 3);
  REQUIRE(plan.lcores.size() == 1);
  CHECK(plan.lcores[0].rx.size() == 6);  // 4 guest queues + 2 NIC queues
}

TEST_CASE("rx auto placement: explicit first, the rest round-robin by port then queue") {
  Config c = parse_ok(
      "version: 1\n"
      "eal: {cores: \"0-3\"}\n"
      "ports:\n"
      "  - {name: a, type: vhost, socket: /tmp/a.sock, queues: 3, weight: {packets: 100}}\n"
      "  - {name: b, type: ethdev, device: net_null0, queues: 2}\n"
      "lcores:\n"
      "  - {lcore: 1, rx: auto}\n"
      "  - lcore: 2\n"
      "    rx: [\"a:1\", {port: b, queue: 1, weight: {bytes: 4096}}]\n"
      "  - {lcore: 3}\n"
      "forwarding: {mode: bridge}\n");
  Plan plan = plan_ok(c);
  REQUIRE(plan.lcores.size() == 3);
  auto rx_of = [&](size_t slot) {
    std::vector<std::pair<unsigned, unsigned>> out;
    for (const PlannedRxQueue& q : plan.lcores[slot].rx) out.emplace_back(q.port, q.queue);
    return out;
  };
  using Queues = std::vector<std::pair<unsigned, unsigned>>;
  // Left for auto: a:0, a:2, b:0 -> slots 0, 2, 0.
  CHECK(rx_of(0) == Queues{{0, 0}, {1, 0}});
  CHECK(rx_of(1) == Queues{{0, 1}, {1, 1}});
  CHECK(rx_of(2) == Queues{{0, 2}});
  for (size_t s = 0; s < 3; ++s) CHECK(plan.lcores[s].slot == s);
  // Weights: the port's, or overridden field by field.
  CHECK(plan.lcores[0].rx[0].weight.packets == 100);
  CHECK(plan.lcores[0].rx[0].weight.bytes == vqs::app::kDefaultByteWeight);
  CHECK(plan.lcores[1].rx[0].weight.packets == 100);
  CHECK(plan.lcores[1].rx[1].weight.packets == vqs::app::kDefaultPacketWeight);
  CHECK(plan.lcores[1].rx[1].weight.bytes == 4096);
}

TEST_CASE("default lcores: all but main, or main alone on a one-lcore EAL") {
  const char* ports =
      "ports:\n  - {name: vm0, type: vhost, socket: /tmp/a.sock, queues: 4}\n"
      "forwarding: {mode: bridge}\n";
  Plan three = plan_ok(
      parse_ok(std::string("version: 1\neal: {cores: \"0-2,5\", main_lcore: 2}\n") + ports));
  CHECK(three.eal_lcores == std::vector<unsigned>{0, 1, 2, 5});
  REQUIRE(three.lcores.size() == 3);
  CHECK(three.lcores[0].lcore == 0);
  CHECK(three.lcores[1].lcore == 1);
  CHECK(three.lcores[2].lcore == 5);
  CHECK(three.lcores[0].rx.size() == 2);  // queues 0 and 3
  CHECK(three.lcores[1].rx.size() == 1);
  CHECK(three.lcores[2].rx.size() == 1);

  Plan one = plan_ok(parse_ok(std::string("version: 1\neal: {cores: \"3\"}\n") + ports));
  CHECK(one.main_lcore == 3);
  REQUIRE(one.lcores.size() == 1);
  CHECK(one.lcores[0].lcore == 3);
  CHECK(one.lcores[0].is_main);
  CHECK(one.lcores[0].rx.size() == 4);
}

TEST_CASE("core lists") {
  using Ids = std::vector<unsigned>;
  CHECK(parse_core_list("0-3,6") == Ids{0, 1, 2, 3, 6});
  CHECK(parse_core_list("5") == Ids{5});
  CHECK(parse_core_list(" 8 , 1-2 ") == Ids{1, 2, 8});
  CHECK(parse_core_list("127") == Ids{127});
  CHECK(parse_core_list("0-127")->size() == 128);
  for (const char* bad : {"", " ", "128", "0-128", "3-1", "1,1", "0-2,2", "0-", "-1", "a", "1a",
                          "0,,1", "0,", ",0", "0-1-2", "1.5", "+1"}) {
    INFO(bad);
    CHECK_FALSE(parse_core_list(bad));
  }
  CHECK(format_core_list({0, 1, 2, 3, 6}) == "0-3,6");
  CHECK(format_core_list({1, 3, 4}) == "1,3-4");
  CHECK(format_core_list({7}) == "7");
}

TEST_CASE("xconnect peers") {
  Config c = parse_ok(
      "version: 1\n"
      "ports:\n"
      "  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
      "  - {name: vm1, type: vhost, socket: /tmp/b.sock}\n"
      "  - {name: nic0, type: ethdev, device: net_null0}\n"
      "  - {name: vm2, type: vhost, socket: /tmp/c.sock}\n"
      "forwarding:\n"
      "  mode: xconnect\n"
      "  pairs:\n"
      "    - [vm0, nic0]\n"
      "    - [vm2, vm1]\n");
  REQUIRE(c.forwarding.pairs.size() == 2);
  CHECK(c.forwarding.pairs[1] == std::pair<std::string, std::string>{"vm2", "vm1"});
  Plan plan = plan_ok(c);
  CHECK(plan.xconnect_peer == std::vector<int>{2, 3, 0, 1});
}

TEST_CASE("tx queues: one per lcore on an ethdev; on a guest shared or locked") {
  Config c = parse_ok(
      "version: 1\n"
      "eal: {cores: \"0-2\"}\n"
      "ports:\n"
      "  - {name: one, type: vhost, socket: /tmp/a.sock, queues: 1}\n"
      "  - {name: two, type: vhost, socket: /tmp/b.sock, queues: 2}\n"
      "  - {name: four, type: vhost, socket: /tmp/c.sock, queues: 4}\n"
      "  - {name: nic, type: ethdev, device: net_null0, queues: 1}\n"
      "lcores: [{lcore: 0}, {lcore: 1}, {lcore: 2}]\n"
      "forwarding: {mode: bridge}\n");
  Plan plan = plan_ok(c);
  REQUIRE(plan.lcores.size() == 3);
  CHECK(plan.lcores[0].is_main);
  CHECK(plan.tx_queues == std::vector<uint16_t>{1, 2, 4, 3});
  // A guest's queues are locked even when it has one per lcore: it may enable fewer.
  CHECK(plan.tx_shared == std::vector<bool>{true, true, true, false});
  CHECK(plan.tx_queue(0, 2) == 0);
  CHECK(plan.tx_queue(1, 2) == 0);
  CHECK(plan.tx_queue(1, 1) == 1);
  CHECK(plan.tx_queue(2, 2) == 2);
  CHECK(plan.tx_queue(3, 2) == 2);
  std::string text = format_plan(c, plan);
  CHECK(text.find("tx one:0 (shared), two:0 (shared), four:2 (locked), nic:2") != text.npos);
}

TEST_CASE("make_plan on a config built in code: errors without positions") {
  Config c;
  c.file = "code";
  PortConfig port;
  port.name = "vm0";
  port.socket = "/tmp/a.sock";
  port.queues = 2;
  c.ports.push_back(port);
  c.forwarding.mode = ForwardingMode::kBridge;
  LcoreConfig lcore;
  lcore.lcore = 1;
  lcore.rx.push_back({"vm0", 0, {}});
  c.lcores.push_back(lcore);
  std::string error;
  CHECK_FALSE(make_plan(c, &error));
  CHECK(error ==
        "code: lcores: vm0:1 is polled by no lcore (list it in an lcore's rx, or give an lcore rx: "
        "auto)");
  c.lcores[0].rx.push_back({"vm1", 0, {}});
  CHECK_FALSE(make_plan(c, &error));
  CHECK(error == "code: lcores[0].rx[1]: unknown port \"vm1\"");
  c.lcores[0].rx.pop_back();
  c.lcores[0].auto_rx = true;
  Plan plan = plan_ok(c);
  CHECK(plan.lcores[0].rx.size() == 2);
  c.eal.cores = "0-";
  CHECK_FALSE(make_plan(c, &error));
  CHECK(error == "code: eal.cores: malformed core list \"0-\"");
}

TEST_CASE("error_at falls back to the nearest parent with a position") {
  Config c = parse_ok(
      "version: 1\n"
      "ports:\n"
      "  - name: vm0\n"
      "    type: vhost\n"
      "    socket: /tmp/a.sock\n"
      "forwarding: {mode: bridge}\n");
  CHECK(c.error_at("ports[0].socket", "cannot listen") ==
        "t.yaml:5:13: ports[0].socket: cannot listen");
  CHECK(c.error_at("ports[0].mtu", "x") == "t.yaml:3:5: ports[0].mtu: x");
  CHECK(c.error_at("stats", "x") == "t.yaml: stats: x");
}

TEST_CASE("format_plan describes ports, lcores and forwarding") {
  std::string error;
  std::optional<Config> c = load_config(std::string(VQS_CONFIG_DIR) + "/vlan-trunk.yaml", &error);
  REQUIRE(c);
  std::string text = format_plan(*c, plan_ok(*c));
  CHECK(text.find("forwarding: bridge, MAC table 4096 entries, aging 300 s") != text.npos);
  CHECK(text.find("vm10: vhost /tmp/vqs-vm10.sock (server)") != text.npos);
  CHECK(text.find("vlan access 10") != text.npos);
  CHECK(text.find("vlan trunk 10,20, untagged dropped") != text.npos);
  CHECK(text.find("lcore 1 (slot 0), node 0, busy poll forever") != text.npos);
  CHECK(text.find("rx uplink:0, weight " + std::to_string(vqs::app::kDefaultPacketWeight) +
                  " pkts / 256 KiB") != text.npos);
}

TEST_CASE("format_plan says when zero-copy has no copy fallback") {
  Config c = parse_ok(
      "version: 1\n"
      "ports:\n"
      "  - {name: vm0, type: vhost, socket: /tmp/a.sock, zerocopy: true}\n"
      "  - {name: vm1, type: vhost, socket: /tmp/b.sock, zerocopy: true, zerocopy_fallback: "
      "false}\n"
      "forwarding: {mode: bridge}\n");
  const std::string text = format_plan(c, plan_ok(c));
  CHECK(text.find("zerocopy from 256 bytes\n") != text.npos);
  CHECK(text.find("zerocopy from 256 bytes, no copy fallback\n") != text.npos);
}

TEST_CASE(
    "a port mapping given at run time is read as a ports[] entry, against the running ports") {
  const Config running = parse_ok(R"(version: 1
ports:
  - {name: vm0, type: vhost, socket: /tmp/vm0.sock}
  - {name: nic, type: ethdev, device: "net_null0"}
forwarding: {mode: bridge}
)");
  std::string error;
  std::optional<PortConfig> port =
      parse_port(running,
                 "{name: vm1, type: vhost, socket: /tmp//vm1.sock, queues: 2, vlan: {mode: access, "
                 "vlan: 7}, weight: {packets: 16}}",
                 "add-port", &error);
  INFO(error);
  REQUIRE(port);
  CHECK(port->name == "vm1");
  CHECK(port->socket == "/tmp/vm1.sock");
  CHECK(port->queues == 2);
  CHECK(port->vlan.mode == VlanMode::kAccess);
  CHECK(port->weight.packets == 16);
  CHECK(port->weight.bytes == kDefaultByteWeight);

  auto error_of = [&](const std::string& text) {
    std::string e;
    return parse_port(running, text, "add-port", &e) ? std::string("(loaded)") : e;
  };
  CHECK(error_of("{name: vm0, type: vhost, socket: /tmp/x.sock}") ==
        "add-port:1:8: port.name: duplicate port name \"vm0\" (also ports[0])");
  CHECK(error_of("{name: x, type: vhost, socket: /tmp/vm0.sock}") ==
        "add-port:1:32: port.socket: duplicate socket \"/tmp/vm0.sock\" (also ports[0].socket)");
  CHECK(error_of("{name: n2, type: ethdev, device: \"net_null0,size=64\"}") ==
        "add-port:1:34: port.device: device \"net_null0\" is already ports[1]");
  CHECK(error_of("{name: x, type: vhost, socket: /tmp/x.sock, queues: 0}") ==
        "add-port:1:53: port.queues: must be 1..128, got 0");
  CHECK(error_of("{name: x, type: vhost, socket: /tmp/x.sock, device: d}") ==
        "add-port:1:45: port.device: only for ethdev ports");
  CHECK(error_of("[vm9]") == "add-port:1:1: port: expected a mapping, got a sequence");
  const std::string yaml_error = error_of("{name: x");
  INFO(yaml_error);
  CHECK(yaml_error.rfind("add-port:", 0) == 0);
  CHECK(yaml_error.find(": invalid YAML: ") != std::string::npos);

  Config xconnect = parse_ok(R"(version: 1
ports:
  - {name: a, type: ethdev, device: net_null0}
  - {name: b, type: ethdev, device: net_null1}
forwarding: {mode: xconnect, pairs: [[a, b]]}
)");
  CHECK(parse_port(xconnect, "{name: c, type: ethdev, device: net_null2, vlan: {mode: access}}",
                   "add-port", &error) == std::nullopt);
  CHECK(error == "add-port:1:44: port.vlan: only in bridge mode (forwarding.mode is xconnect)");
}

// The switch as started from `config`: each planned queue where the plan put it.
RunningSwitch running_from(const Config& config) {
  RunningSwitch now;
  now.config = config;
  const Plan plan = plan_ok(config);
  for (const PlannedLcore& l : plan.lcores) {
    now.busy_poll.emplace_back(l.lcore, l.busy_poll_us);
    for (const PlannedRxQueue& q : l.rx)
      now.queues.push_back({config.ports[q.port].name, q.queue, l.lcore, q.weight});
  }
  return now;
}

constexpr const char* kReloadBase = R"(version: 1
eal: {cores: "0-2", memory_mb: 256}
ports:
  - {name: a, type: ethdev, device: net_null0}
  - {name: b, type: ethdev, device: net_null1}
  - {name: c, type: vhost, socket: /tmp/c.sock}
  - {name: d, type: vhost, socket: /tmp/d.sock}
lcores:
  - {lcore: 1, rx: [a:0, c:0]}
  - {lcore: 2, rx: [b:0, d:0]}
forwarding: {mode: xconnect, pairs: [[a, b], [c, d]]}
)";

std::string edited(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

TEST_CASE("reload: ports added, removed and re-created, weights, busy-poll and pairs") {
  const Config started = parse_ok(R"(version: 1
eal: {cores: "0-2", memory_mb: 256}
ports:
  - {name: a, type: ethdev, device: net_null0}
  - {name: b, type: ethdev, device: net_null1}
  - {name: c, type: vhost, socket: /tmp/c.sock}
  - {name: a2, type: ethdev, device: net_null2}
lcores:
  - {lcore: 1, rx: [a:0, c:0]}
  - {lcore: 2, rx: [b:0, a2:0]}
forwarding: {mode: xconnect, pairs: [[a, b], [c, a2]]}
)");
  RunningSwitch now = running_from(started);
  std::string error;
  SECTION("the same file: nothing to do") {
    const std::optional<ReloadPlan> plan = plan_reload(now, started, &error);
    INFO(error);
    REQUIRE(plan);
    CHECK(plan->empty());
  }
  SECTION("a2 goes, d comes on lcore 2, c's notify settings change, b's weight too") {
    const Config next = parse_ok(R"(version: 1
eal: {cores: "0-2", memory_mb: 256}
ports:
  - {name: a, type: ethdev, device: net_null0}
  - {name: b, type: ethdev, device: net_null1, weight: {packets: 8}}
  - {name: c, type: vhost, socket: /tmp/c.sock, notify_coalesce: {packets: 4}}
  - {name: d, type: vhost, socket: /tmp/d.sock}
lcores:
  - {lcore: 1, rx: [a:0, c:0], busy_poll_us: 50}
  - {lcore: 2, rx: [b:0, d:0]}
forwarding: {mode: xconnect, pairs: [[a, b], [c, d]]}
)");
    const std::optional<ReloadPlan> plan = plan_reload(now, next, &error);
    INFO(error);
    REQUIRE(plan);
    CHECK(plan->removed == std::vector<std::string>{"c", "a2"});
    CHECK(plan->recreated == std::vector<std::string>{"c"});
    REQUIRE(plan->added.size() == 2);
    CHECK(plan->added[0].port.name == "c");
    CHECK(plan->added[0].rx_lcores == std::vector<std::optional<unsigned>>{1u});
    CHECK(plan->added[1].port.name == "d");
    CHECK(plan->added[1].rx_lcores == std::vector<std::optional<unsigned>>{2u});
    REQUIRE(plan->weights.size() == 1);
    CHECK(plan->weights[0].port == "b");
    CHECK(plan->weights[0].weight.packets == 8);
    CHECK(plan->busy_poll == std::vector<std::pair<unsigned, std::optional<uint32_t>>>{{1u, 50u}});
    CHECK(plan->pairs_change);
  }
}

TEST_CASE("reload: settings fixed at start are refused, naming their key and line") {
  const Config started = parse_ok(kReloadBase);
  const RunningSwitch now = running_from(started);
  auto refusal = [&](const std::string& text) {
    std::string error;
    Config next = parse_ok(text);
    next.file = "t.yaml";
    return plan_reload(now, next, &error) ? std::string("(planned)") : error;
  };
  CHECK(refusal(edited(kReloadBase, "memory_mb: 256", "memory_mb: 512")) ==
        "t.yaml:2:32: eal.memory_mb: cannot change while vqswitch runs (restart it to): was 256, "
        "now 512");
  CHECK(refusal(edited(kReloadBase, "version: 1\n", "version: 1\nburst: 16\n")) ==
        "t.yaml:2:8: burst: cannot change while vqswitch runs (restart it to): was 32, now 16");
  CHECK(
      refusal(edited(kReloadBase, "{lcore: 2, rx: [b:0, d:0]}", "{lcore: 0, rx: [b:0, d:0]}"))
          .find("lcores: cannot change while vqswitch runs (restart it to): forwarding lcores 1-2, "
                "now 0-1") != std::string::npos);
  CHECK(refusal(edited(edited(kReloadBase, "rx: [a:0, c:0]", "rx: [a:0]"), "rx: [b:0, d:0]",
                       "rx: [b:0, d:0, c:0]")) ==
        "t.yaml:10:31: lcores[1].rx[2]: cannot change while vqswitch runs (restart it to): c:0 is "
        "polled by lcore 1; moving a queue");
  CHECK(refusal(edited(kReloadBase, "mode: xconnect, pairs: [[a, b], [c, d]]", "mode: bridge"))
            .find("forwarding.mode: cannot change while vqswitch runs (restart it to): was "
                  "xconnect, now bridge") != std::string::npos);
}

TEST_CASE("rxq_assign and auto_balance") {
  const std::string base = R"(version: 1
ports:
  - {name: a, type: ethdev, device: net_null0}
forwarding: {mode: bridge}
)";
  const Config plain = parse_ok(base);
  CHECK(plain.rxq_assign == RxqAssign::kRoundRobin);
  CHECK_FALSE(plain.auto_balance.enabled);
  const Config cycles = parse_ok(base +
                                 "rxq_assign: cycles\nauto_balance: {enabled: true, "
                                 "threshold_pct: 10, interval_s: 30}\n");
  CHECK(cycles.rxq_assign == RxqAssign::kCycles);
  CHECK(cycles.auto_balance.enabled);
  CHECK(cycles.auto_balance.threshold_pct == 10);
  CHECK(cycles.auto_balance.interval_s == 30);
  CHECK(parse_error(base + "auto_balance: {enabled: true}\n") ==
        "t.yaml:5:25: auto_balance.enabled: needs rxq_assign: cycles (queues move by their "
        "measured load)");
  CHECK(parse_error(base + "rxq_assign: group\n") ==
        "t.yaml:5:13: rxq_assign: must be roundrobin or cycles, got \"group\"");
  CHECK(parse_error(base + "rxq_assign: cycles\nauto_balance: {interval_s: 1}\n") ==
        "t.yaml:6:28: auto_balance.interval_s: must be 10..86400, got 1");
}

TEST_CASE("PCI addresses in a port's device, for its NUMA node") {
  CHECK(pci_address_of("0000:81:00.0") == "0000:81:00.0");
  CHECK(pci_address_of("81:00.1") == "0000:81:00.1");
  CHECK(pci_address_of("0000:AF:00.0,rxq_cqe_comp_en=0") == "0000:af:00.0");
  CHECK(pci_address_of("net_null0") == "");
  CHECK(pci_address_of("net_tap0,iface=t0") == "");
  CHECK(pci_address_of("0000:81:00.8") == "");
  CHECK(pci_address_of("0000:81:0.0") == "");
}

// Two nodes: CPUs 0-1 on node 0, 2-3 on node 1; a NIC on each.
const FakeNumaTopology kTwoNodes({0, 0, 1, 1}, {{"0000:01:00.0", 0}, {"0000:81:00.0", 1}});

TEST_CASE("NUMA: rx: auto places a NIC's queues on its node's lcores, a pool per node") {
  const Config c = parse_ok(
      "version: 1\n"
      "eal: {cores: \"0-3\"}\n"
      "ports:\n"
      "  - {name: far, type: ethdev, device: \"0000:81:00.0\", queues: 2}\n"
      "  - {name: near, type: ethdev, device: \"01:00.0\", queues: 2}\n"
      "  - {name: vm0, type: vhost, socket: /tmp/a.sock}\n"
      "forwarding: {mode: bridge}\n");
  const Plan plan = plan_ok(c, kTwoNodes);
  REQUIRE(plan.lcores.size() == 3);  // 1 (node 0), 2 and 3 (node 1); 0 is the main lcore
  CHECK(plan.lcores[0].node == 0);
  CHECK(plan.lcores[1].node == 1);
  CHECK(plan.lcores[2].node == 1);
  CHECK(plan.port_nodes == std::vector<int>{1, 0, kAnyNode});
  auto polled = [&](size_t slot) {
    std::vector<std::string> names;
    for (const PlannedRxQueue& rx : plan.lcores[slot].rx)
      names.push_back(c.ports[rx.port].name + ":" + std::to_string(rx.queue));
    return names;
  };
  CHECK(polled(0) == std::vector<std::string>{"near:0", "near:1"});
  // The guest's node is its memory's, not known yet: it goes to the least given lcore.
  CHECK(polled(1) == std::vector<std::string>{"far:0", "vm0:0"});
  CHECK(polled(2) == std::vector<std::string>{"far:1"});
  // A pool per node, each port on its own node's, the guest on its lcore's.
  REQUIRE(plan.pools.size() == 2);
  CHECK(plan.pools[0].node == 0);
  CHECK(plan.pools[1].node == 1);
  CHECK(plan.port_pool_nodes == std::vector<int>{1, 0, 1});
  // Each sized for its own ports: near's 2 x 1024 rx descriptors and 3 x 1024 tx on node 0.
  const uint64_t caches = 4 * kMempoolCache * 3 / 2;
  CHECK(plan.pools[0].mbufs == std::max<uint64_t>(kMinMbufs, caches + 2048 + 3072 + 3 * 32));
  CHECK(plan.pools[1].mbufs ==
        std::max<uint64_t>(kMinMbufs, caches + 2048 + 3072 + 3 * 32 + 2 * 32 + 3 * 32));
  const std::string text = format_plan(c, plan);
  INFO(text);
  CHECK(text.find("far: ethdev 0000:81:00.0 (node 1)\n") != text.npos);
  CHECK(text.find("near: ethdev 01:00.0 (node 0)\n") != text.npos);
  CHECK(text.find("lcore 2 (slot 1), node 1, busy poll forever") != text.npos);
  CHECK(text.find("mbuf pools: node 0, ") != text.npos);
  CHECK(text.find(" mbufs (auto), for near; node 1, ") != text.npos);
  CHECK(text.find(" mbufs (auto), for far, vm0\n") != text.npos);
  CHECK(text.find("cross-NUMA") == text.npos);
}

TEST_CASE("NUMA: a queue with no lcore on its node is placed across, and the plan says so") {
  // Only node-0 lcores forward; the NIC is on node 1. One listed, one auto.
  const Config c = parse_ok(
      "version: 1\n"
      "eal: {cores: \"0-1\"}\n"
      "ports:\n"
      "  - {name: far, type: ethdev, device: \"0000:81:00.0\", queues: 2}\n"
      "lcores:\n"
      "  - {lcore: 0, rx: [\"far:0\"]}\n"
      "  - {lcore: 1, rx: auto}\n"
      "forwarding: {mode: bridge}\n"
      "mbufs: 20000\n");
  const Plan plan = plan_ok(c, kTwoNodes);
  CHECK(plan.cross_node(0, plan.lcores[0]));
  CHECK(plan.cross_node(0, plan.lcores[1]));
  // Its mbufs still come from its own node: a pool there, of the size given (each pool's).
  REQUIRE(plan.pools.size() == 2);
  CHECK(plan.pools[1].node == 1);
  CHECK(plan.pools[1].mbufs == 20000);
  CHECK(plan.port_pool_nodes == std::vector<int>{1});
  const std::string text = format_plan(c, plan);
  INFO(text);
  CHECK(text.find("rx far:0, weight 64 pkts / 256 KiB, cross-NUMA: the port is on node 1\n") !=
        text.npos);
  CHECK(text.find("rx far:1, weight 64 pkts / 256 KiB, cross-NUMA: the port is on node 1\n") !=
        text.npos);
  CHECK(text.find("mbuf pools: node 0, 20000 mbufs, for no port; node 1, 20000 mbufs, for far\n") !=
        text.npos);
}

TEST_CASE("NUMA: on one node, rx: auto is plain round robin") {
  const Config c = parse_ok(
      "version: 1\n"
      "eal: {cores: \"0-3\"}\n"
      "ports:\n"
      "  - {name: a, type: ethdev, device: \"0000:01:00.0\", queues: 3}\n"
      "  - {name: b, type: vhost, socket: /tmp/b.sock, queues: 2}\n"
      "forwarding: {mode: bridge}\n");
  const Plan plan = plan_ok(c, FakeNumaTopology({0, 0, 0, 0}, {{"0000:01:00.0", 0}}));
  std::vector<size_t> slots;
  for (uint16_t p = 0; p < 2; ++p)
    for (uint16_t q = 0; q < c.ports[p].queues; ++q)
      for (const PlannedLcore& l : plan.lcores)
        for (const PlannedRxQueue& rx : l.rx)
          if (rx.port == p && rx.queue == q) slots.push_back(l.slot);
  CHECK(slots == std::vector<size_t>{0, 1, 2, 0, 1});
  REQUIRE(plan.pools.size() == 1);
  CHECK(plan.port_pool_nodes == std::vector<int>{0, 0});
}

}  // namespace
}  // namespace vqs::app
