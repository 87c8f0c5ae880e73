// SPDX-License-Identifier: BSD-3-Clause
// Catch2 runner for the switch against real peers in this process: EAL on hugepages (virtio_user
// shares its memory with the switch by file descriptor), lcore 1 forwarding, lcore 0 the guests'.
#include <rte_eal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "catch_session.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  const std::string tag = "vqs-switch-" + std::to_string(getpid());
  const fs::path dir = fs::path("/run") / tag;
  fs::create_directories(dir);
  chmod(dir.c_str(), 0700);
  setenv("VQS_TEST_RUN_DIR", dir.c_str(), 1);
  setenv("VQS_TEST_FILE_PREFIX", tag.c_str(), 1);

  std::vector<std::string> args = {
      argv[0], "-l",  "0,1",      "--main-lcore",           "0",           "--file-prefix", tag,
      "-m",    "512", "--no-pci", "--single-file-segments", "--log-level", "*:warning"};
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed (hugepages reserved? run scripts/setup.sh)\n");
    fs::remove_all(dir);
    return 2;
  }
  const int failed = vqs::test::run_catch_session(argc, argv);
  rte_eal_cleanup();
  fs::remove_all(dir);
  return failed;
}
