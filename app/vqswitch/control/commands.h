// SPDX-License-Identifier: BSD-3-Clause
// What vqswitchctl can ask: each command builds its answer as JSON (`--json` prints it as it is)
// and renders its text from that same JSON, so the two never disagree. Runs on the control
// thread. The commands and the OVS commands they replace: docs/operations.md.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "control/control_server.h"
#include "control/load_sampler.h"
#include "control/rxq_balancer.h"
#include "core/switch.h"

namespace vqs::app {

class ControlCommands {
 public:
  ControlCommands(Switch& sw, const LoadSampler& load, RxqBalancer& balancer)
      : switch_(sw), load_(load), balancer_(balancer) {}

  // `args`: the command and its arguments, as vqswitchctl got them (`--json` anywhere after the
  // command asks for JSON).
  ControlReply run(const std::vector<std::string>& args);
  // One line per command, for `vqswitchctl help` and errors.
  static std::string usage();

 private:
  using Json = nlohmann::ordered_json;

  Json show() const;
  Json lcore_show() const;
  Json rxq_show() const;
  // nullopt with `error` for an unknown port.
  std::optional<Json> stats(const std::string& port, bool clear, std::string* error);
  Json fdb_show() const;
  Json fdb_flush();
  // nullopt with `error` for a bad argument, or an lcore that did not take the change.
  std::optional<Json> set_weight(const std::vector<std::string>& operands, std::string* error);
  std::optional<Json> set_busy_poll(const std::vector<std::string>& operands, std::string* error);

  // add-port MAPPING [--peer PORT], del-port PORT, add-pair PORT PORT.
  std::optional<Json> add_port(const std::vector<std::string>& operands, std::string* error);
  std::optional<Json> del_port(const std::vector<std::string>& operands, std::string* error);
  std::optional<Json> add_pair(const std::vector<std::string>& operands, std::string* error);
  // Re-reads the config file and applies the difference (plan_reload).
  std::optional<Json> reload(std::string* error);
  std::optional<Json> rxq_rebalance(std::string* error);

  Json port_stats(uint16_t port) const;

  Switch& switch_;
  const LoadSampler& load_;
  RxqBalancer& balancer_;
  std::vector<Json> cleared_;  // by port: the stats `stats --clear` took as zero (null: none)
};

// Text renderings of the commands' JSON.
std::string show_text(const nlohmann::ordered_json& j);
std::string lcore_show_text(const nlohmann::ordered_json& j);
std::string rxq_show_text(const nlohmann::ordered_json& j);
std::string stats_text(const nlohmann::ordered_json& j);
std::string fdb_show_text(const nlohmann::ordered_json& j);
std::string set_weight_text(const nlohmann::ordered_json& j);
std::string set_busy_poll_text(const nlohmann::ordered_json& j);
std::string topology_text(const nlohmann::ordered_json& j);
std::string reload_text(const nlohmann::ordered_json& j);
std::string rxq_rebalance_text(const nlohmann::ordered_json& j);

}  // namespace vqs::app
