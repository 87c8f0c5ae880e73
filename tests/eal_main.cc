// SPDX-License-Identifier: BSD-3-Clause
// Catch2 runner for tests that need mbufs: EAL without hugepages, shared config or PCI, so unit
// tests run anywhere (and in parallel: each process has its own file prefix).
#include <rte_eal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "catch_session.h"

int main(int argc, char** argv) {
  const std::string prefix = "vqs-unit-" + std::to_string(getpid());
  std::vector<std::string> args = {
      argv[0], "--no-huge", "--no-shconf",   "--no-pci", "-m",          "256",
      "-l",    "0",         "--file-prefix", prefix,     "--log-level", "*:warning"};
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed\n");
    return 2;
  }
  const int failed = vqs::test::run_catch_session(argc, argv);
  rte_eal_cleanup();
  return failed;
}
