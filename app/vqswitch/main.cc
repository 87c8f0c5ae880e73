// SPDX-License-Identifier: BSD-3-Clause
// vqswitch: `vqswitch --check FILE` validates a configuration and prints the plan;
// `vqswitch --config FILE` runs the switch until SIGINT/SIGTERM (or --duration), answering
// vqswitchctl on its control socket.
#include <poll.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_version.h>
#include <sys/signalfd.h>
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
#include "control/commands.h"
#include "control/control_server.h"
#include "control/load_sampler.h"
#include "core/stats_report.h"
#include "core/switch.h"
#include "core/telemetry.h"

namespace {

using vqs::app::Config;
using vqs::app::Plan;
using vqs::app::Switch;

std::atomic<bool> stop_requested{false};

// SIGINT and SIGTERM are blocked in every thread (EAL's included: they inherit the mask) and taken
// synchronously by the control loop through a signalfd, so no handler runs on an lcore or races
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
  std::fprintf(
      out,
      "usage: vqswitch --config FILE [--stats] [--duration SECONDS]\n"
      "       vqswitch --check FILE\n"
      "  --config FILE       run the switch described by FILE (YAML, docs/configuration.md)\n"
      "  --check FILE        validate FILE and print the plan; start nothing\n"
      "  --stats             print live statistics even when stdout is not a terminal\n"
      "                      (default: only on a terminal, every stats_interval_s)\n"
      "  --duration SECONDS  stop after this long (default: run until SIGINT/SIGTERM)\n"
      "  --version           print the version and exit\n"
      "  -h, --help          print this and exit\n"
      "A running switch answers vqswitchctl on its control socket (docs/operations.md).\n");
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
    } else if (arg == "--version") {
      std::printf("vqswitch %s (%s)\n", VQS_VERSION, rte_version());
      std::exit(0);
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

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The control side while the lcores forward: live statistics, bridge aging, the control socket,
// the run's end. Waits in poll() on the signals (a signalfd), the control socket and its clients.
void control(Switch& sw, const Options& options, vqs::app::ControlServer& server,
             vqs::app::LoadSampler& load, vqs::app::RxqBalancer& balancer) {
  vqs::app::StatsReport report(sw);
  const bool live = sw.config().stats_interval_s > 0 && (options.stats || isatty(STDOUT_FILENO));
  const uint64_t start = now_ms();
  uint64_t last_stats = start;
  uint64_t last_aging = start;
  const sigset_t signals = stop_signals();
  const int signal_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  std::vector<pollfd> fds;
  while (!stop_requested.load()) {
    fds.clear();
    fds.push_back({signal_fd, POLLIN, 0});
    server.add_poll_fds(&fds);
    (void)poll(fds.data(), fds.size(), 50);
    signalfd_siginfo info{};
    if (signal_fd >= 0 && read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
      std::printf("vqswitch: %s, stopping\n", info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stdout);
      stop_requested.store(true);
      sw.wake_all();
      pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
      break;
    }
    const uint64_t now = now_ms();
    server.handle(fds, 1, now);
    load.sample(now);
    balancer.tick(now);
    if (options.duration_s > 0 && static_cast<double>(now - start) / 1000.0 >= options.duration_s) {
      stop_requested.store(true);
      sw.wake_all();
      break;
    }
    if (live && now - last_stats >= sw.config().stats_interval_s * 1000ull) {
      report.print_rates(stdout);
      last_stats = now;
    }
    if (now - last_aging >= 1000) {
      sw.housekeeping();
      last_aging = now;
    }
  }
  if (signal_fd >= 0) close(signal_fd);
}

// Builds the switch and its control socket, forwards until stopped, prints the final counters.
// Returns the exit status.
int run_switch(const Config& config, const Plan& plan, const Options& options) {
  std::string error;
  std::unique_ptr<Switch> sw = Switch::create(config, plan, &error);
  if (sw == nullptr) {
    std::fprintf(stderr, "vqswitch: %s\n", error.c_str());
    return 1;
  }
  vqs::app::LoadSampler load(*sw);
  vqs::app::RxqBalancer balancer(*sw, load);
  vqs::app::ControlCommands commands(*sw, load, balancer);
  const std::unique_ptr<vqs::app::ControlServer> server = vqs::app::ControlServer::create(
      config.control_socket(), config.control.access,
      [&](const std::vector<std::string>& args) { return commands.run(args); }, &error);
  if (server == nullptr) {
    std::fprintf(stderr, "vqswitch: %s\n", error.c_str());
    return 1;
  }
  vqs::app::telemetry_attach(sw.get());
  std::printf("vqswitch: %zu ports, %zu forwarding lcores, control socket %s, running%s\n",
              sw->ports().size(), sw->lcores().size(), server->path().c_str(),
              options.duration_s > 0 ? "" : " until SIGINT/SIGTERM");
  std::fflush(stdout);
  sw->run(stop_requested, [&] { control(*sw, options, *server, load, balancer); });
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);  // a signal now ends the clean-up
  // After every loop has flushed and stopped: nothing is counted any more.
  vqs::app::StatsReport(*sw).print_totals(stdout);
  vqs::app::telemetry_attach(nullptr);
  return 0;
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

  const int status = run_switch(*config, *plan, options);
  rte_eal_cleanup();
  return status;
}
