// SPDX-License-Identifier: BSD-3-Clause
// vqswitch: `vqswitch --check FILE` validates a configuration and prints the plan;
// `vqswitch --config FILE` runs the switch until SIGINT/SIGTERM (or --duration).
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/plan.h"
#include "core/stats_report.h"
#include "core/switch.h"
#include "core/telemetry.h"

namespace {

using vqs::app::Config;
using vqs::app::Plan;
using vqs::app::Switch;

std::atomic<bool> stop_requested{false};

// SIGINT and SIGTERM are blocked in every thread (EAL's included: they inherit the mask) and taken
// synchronously by the control loop with sigtimedwait, so no handler runs on an lcore or races
// the switch's destruction. Once the first has been taken, they are unblocked with the default
// action: a second one ends a shutdown that hangs.
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

struct Options {
  std::string config;
  bool check = false;
  bool stats = false;     // live stats even when stdout is not a terminal
  double duration_s = 0;  // 0: until a signal
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: vqswitch --config FILE [--stats] [--duration SECONDS]\n"
               "       vqswitch --check FILE\n"
               "  --config FILE       run the switch described by FILE (YAML)\n"
               "  --check FILE        validate FILE and print the plan; start nothing\n"
               "  --stats             print live statistics even when not on a terminal\n"
               "  --duration SECONDS  stop after this long (default: at SIGINT/SIGTERM)\n");
}

bool parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--config" && value(&o->config)) {
    } else if (arg == "--check" && value(&o->config)) {
      o->check = true;
    } else if (arg == "--stats") {
      o->stats = true;
    } else if (arg == "--duration" && value(&v)) {
      char* end = nullptr;
      o->duration_s = std::strtod(v.c_str(), &end);
      if (*end != '\0' || o->duration_s <= 0) {
        std::fprintf(stderr, "vqswitch: --duration: not a positive number: %s\n", v.c_str());
        return false;
      }
    } else if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    } else {
      std::fprintf(stderr, "vqswitch: unknown or incomplete option: %s\n", arg.c_str());
      return false;
    }
  }
  if (o->config.empty()) {
    usage(stderr);
    return false;
  }
  return true;
}

std::vector<std::string> eal_args(const Config& config, const Plan& plan, const char* argv0) {
  std::vector<std::string> args = {argv0,
                                   "-l",
                                   config.eal.cores,
                                   "--main-lcore",
                                   std::to_string(plan.main_lcore),
                                   "--file-prefix",
                                   config.eal.file_prefix,
                                   "-m",
                                   std::to_string(config.eal.memory_mb)};
  if (!config.eal.huge) args.push_back("--no-huge");
  for (const std::string& a : config.eal.args) args.push_back(a);
  return args;
}

// The control side while the lcores forward: live statistics, bridge aging, the run's end.
void control(Switch& sw, const Options& options) {
  vqs::app::StatsReport report(sw);
  const bool live = sw.config().stats_interval_s > 0 && (options.stats || isatty(STDOUT_FILENO));
  const auto start = std::chrono::steady_clock::now();
  auto last_stats = start;
  auto last_aging = start;
  const sigset_t signals = stop_signals();
  while (!stop_requested.load()) {
    const timespec tick{0, 50 * 1000 * 1000};
    const int signal = sigtimedwait(&signals, nullptr, &tick);
    if (signal == SIGINT || signal == SIGTERM) {
      std::printf("vqswitch: %s, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stdout);
      stop_requested.store(true);
      sw.wake_all();
      pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
      break;
    }
    const auto now = std::chrono::steady_clock::now();
    if (options.duration_s > 0 &&
        std::chrono::duration<double>(now - start).count() >= options.duration_s) {
      stop_requested.store(true);
      sw.wake_all();
      break;
    }
    if (live && now - last_stats >= std::chrono::seconds(sw.config().stats_interval_s)) {
      report.print_rates(stdout);
      last_stats = now;
    }
    if (now - last_aging >= std::chrono::seconds(1)) {
      sw.housekeeping();
      last_aging = now;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, &options)) return 2;

  std::string error;
  const std::optional<Config> config = vqs::app::load_config(options.config, &error);
  if (!config) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  const std::optional<Plan> plan = vqs::app::make_plan(*config, &error);
  if (!plan) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  if (options.check) {
    std::fputs(vqs::app::format_plan(*config, *plan).c_str(), stdout);
    return 0;
  }

  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::vector<std::string> args = eal_args(*config, *plan, argv[0]);
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "vqswitch: %s: EAL initialisation failed: %s\n", options.config.c_str(),
                 rte_strerror(rte_errno));
    return 1;
  }

  int status = 0;
  {
    std::unique_ptr<Switch> sw = Switch::create(*config, *plan, &error);
    if (sw == nullptr) {
      std::fprintf(stderr, "vqswitch: %s\n", error.c_str());
      status = 1;
    } else {
      vqs::app::telemetry_attach(sw.get());
      std::printf("vqswitch: %zu ports, %zu forwarding lcores, running%s\n", sw->ports().size(),
                  sw->lcores().size(), options.duration_s > 0 ? "" : " until SIGINT/SIGTERM");
      std::fflush(stdout);
      sw->run(stop_requested, [&] { control(*sw, options); });
      pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);  // a signal now ends the clean-up
      // After every loop has flushed and stopped: nothing is counted any more.
      vqs::app::StatsReport(*sw).print_totals(stdout);
      vqs::app::telemetry_attach(nullptr);
    }
  }
  rte_eal_cleanup();
  return status;
}
