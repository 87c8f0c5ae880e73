// SPDX-License-Identifier: BSD-3-Clause
#include "config/reload_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "config/plan.h"

namespace vqs::app {
namespace {

std::string text(const std::optional<unsigned>& v) {
  return v ? std::to_string(*v) : std::string("unset");
}

// The first setting fixed at start that `next` changes: its key and what changed.
std::optional<std::pair<std::string, std::string>> fixed_change(const Config& now,
                                                                const Config& next) {
  auto change = [](const std::string& key, const std::string& was, const std::string& is) {
    return std::optional<std::pair<std::string, std::string>>({key, "was " + was + ", now " + is});
  };
  const EalConfig& a = now.eal;
  const EalConfig& b = next.eal;
  if (a.cores != b.cores) return change("eal.cores", a.cores, b.cores);
  if (a.main_lcore != b.main_lcore)
    return change("eal.main_lcore", text(a.main_lcore), text(b.main_lcore));
  if (a.memory_mb != b.memory_mb)
    return change("eal.memory_mb", std::to_string(a.memory_mb), std::to_string(b.memory_mb));
  if (a.file_prefix != b.file_prefix)
    return change("eal.file_prefix", a.file_prefix, b.file_prefix);
  if (a.huge != b.huge)
    return change("eal.huge", a.huge ? "true" : "false", b.huge ? "true" : "false");
  if (a.args != b.args) return change("eal.args", "other arguments", "these");
  if (now.mbufs != next.mbufs)
    return change("mbufs", std::to_string(now.mbufs), std::to_string(next.mbufs));
  if (now.burst != next.burst)
    return change("burst", std::to_string(now.burst), std::to_string(next.burst));
  if (now.stats_interval_s != next.stats_interval_s)
    return change("stats_interval_s", std::to_string(now.stats_interval_s),
                  std::to_string(next.stats_interval_s));
  if (now.control_socket() != next.control_socket())
    return change("control.socket", now.control_socket(), next.control_socket());
  if (!(now.control.access == next.control.access))
    return change("control", "other socket access", "this");
  if (now.rxq_assign != next.rxq_assign) return change("rxq_assign", "other", "this");
  if (!(now.auto_balance.enabled == next.auto_balance.enabled &&
        now.auto_balance.threshold_pct == next.auto_balance.threshold_pct &&
        now.auto_balance.interval_s == next.auto_balance.interval_s))
    return change("auto_balance", "other settings", "these");
  if (now.forwarding.mode != next.forwarding.mode)
    return change("forwarding.mode", forwarding_mode_name(now.forwarding.mode),
                  forwarding_mode_name(next.forwarding.mode));
  if (now.forwarding.mac_table_size != next.forwarding.mac_table_size)
    return change("forwarding.mac_table_size", std::to_string(now.forwarding.mac_table_size),
                  std::to_string(next.forwarding.mac_table_size));
  if (now.forwarding.mac_aging_s != next.forwarding.mac_aging_s)
    return change("forwarding.mac_aging_s", std::to_string(now.forwarding.mac_aging_s),
                  std::to_string(next.forwarding.mac_aging_s));
  return std::nullopt;
}

// A port's settings apart from its weight and where it was written.
PortConfig settings_of(PortConfig port) {
  port.weight = Weight{};
  port.line = 0;
  return port;
}

std::set<std::pair<std::string, std::string>> pair_set(
    const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::set<std::pair<std::string, std::string>> set;
  for (const auto& [a, b] : pairs) set.insert(a < b ? std::pair(a, b) : std::pair(b, a));
  return set;
}

}  // namespace

std::optional<ReloadPlan> plan_reload(const RunningSwitch& now, const Config& next,
                                      std::string* error) {
  auto refuse = [&](const std::string& key, const std::string& what) {
    *error = next.error_at(key, "cannot change while vqswitch runs (restart it to): " + what);
    return std::nullopt;
  };
  if (const auto change = fixed_change(now.config, next))
    return refuse(change->first, change->second);
  const std::optional<Plan> plan = make_plan(next, error);
  if (!plan) return std::nullopt;

  // The forwarding lcores, and which of them take queues of ports added at run time.
  std::vector<unsigned> lcores_now, lcores_next;
  for (const auto& [lcore, us] : now.busy_poll) lcores_now.push_back(lcore);
  for (const PlannedLcore& l : plan->lcores) lcores_next.push_back(l.lcore);
  std::sort(lcores_now.begin(), lcores_now.end());
  std::sort(lcores_next.begin(), lcores_next.end());
  if (lcores_now != lcores_next)
    return refuse("lcores", "forwarding lcores " + format_core_list(lcores_now) + ", now " +
                                format_core_list(lcores_next));
  auto auto_rx = [](const Config& c, unsigned lcore) {
    if (c.lcores.empty()) return true;
    for (const LcoreConfig& l : c.lcores)
      if (l.lcore == lcore) return l.auto_rx;
    return false;
  };
  for (size_t i = 0; i < next.lcores.size(); ++i) {
    if (auto_rx(now.config, next.lcores[i].lcore) != next.lcores[i].auto_rx)
      return refuse("lcores[" + std::to_string(i) + "].rx", "rx: auto on this lcore or not");
  }

  ReloadPlan out;
  std::set<std::string> recreated;
  for (const PortConfig& p : now.config.ports) {
    const PortConfig* n = next.find_port(p.name);
    if (n == nullptr) {
      out.removed.push_back(p.name);
    } else if (!(settings_of(p) == settings_of(*n))) {
      out.removed.push_back(p.name);
      out.recreated.push_back(p.name);
      recreated.insert(p.name);
    }
  }
  // Queues the file places on an lcore of its own choosing.
  std::map<std::pair<std::string, uint16_t>, std::pair<unsigned, std::string>> listed;
  for (size_t i = 0; i < next.lcores.size(); ++i)
    for (size_t j = 0; j < next.lcores[i].rx.size(); ++j) {
      const RxQueueRef& r = next.lcores[i].rx[j];
      listed[{r.port, r.queue}] = {
          next.lcores[i].lcore, "lcores[" + std::to_string(i) + "].rx[" + std::to_string(j) + "]"};
    }
  for (const PortConfig& p : next.ports) {
    if (now.config.find_port(p.name) != nullptr && recreated.count(p.name) == 0) continue;
    ReloadPlan::Added added{p, {}};
    for (uint16_t q = 0; q < p.queues; ++q) {
      const auto it = listed.find({p.name, q});
      added.rx_lcores.push_back(it == listed.end() ? std::nullopt
                                                   : std::optional<unsigned>(it->second.first));
    }
    out.added.push_back(std::move(added));
  }
  // Kept ports: their queues stay where they are polled; only weights change.
  for (const PolledQueue& q : now.queues) {
    if (next.find_port(q.port) == nullptr || recreated.count(q.port) != 0) continue;
    const auto it = listed.find({q.port, q.queue});
    if (it != listed.end() && it->second.first != q.lcore)
      return refuse(it->second.second, q.port + ":" + std::to_string(q.queue) +
                                           " is polled by lcore " + std::to_string(q.lcore) +
                                           "; moving a queue");
    for (const PlannedLcore& l : plan->lcores)
      for (const PlannedRxQueue& r : l.rx)
        if (next.ports[r.port].name == q.port && r.queue == q.queue && !(r.weight == q.weight))
          out.weights.push_back({q.port, q.queue, q.lcore, r.weight});
  }
  for (const PlannedLcore& l : plan->lcores)
    for (const auto& [lcore, us] : now.busy_poll)
      if (lcore == l.lcore && us != l.busy_poll_us)
        out.busy_poll.emplace_back(lcore, l.busy_poll_us);
  // xconnect: the pairs are set again after ports come and go (a recreated port lost its peer).
  out.pairs = next.forwarding.pairs;
  out.pairs_change = next.forwarding.mode == ForwardingMode::kXconnect &&
                     (pair_set(now.config.forwarding.pairs) != pair_set(next.forwarding.pairs) ||
                      !out.removed.empty() || !out.added.empty());
  return out;
}

}  // namespace vqs::app
