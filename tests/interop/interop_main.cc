// SPDX-License-Identifier: BSD-3-Clause
// Catch2 runner for tests against real virtio drivers: EAL on hugepages (virtio_user shares memory
// by fd), our PMD loaded with -d as dpdk-testpmd does. EAL refuses a plugin below a
// world-writable directory, so it is first copied to a private directory under /run.
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
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PLUGIN.so [catch2 options]\n", argv[0]);
    return 2;
  }
  const std::string tag = "vqs-interop-" + std::to_string(getpid());
  const fs::path dir = fs::path("/run") / tag;
  fs::create_directories(dir);
  chmod(dir.c_str(), 0700);
  const fs::path plugin = dir / "librte_net_vqs.so";
  fs::copy_file(argv[1], plugin, fs::copy_options::overwrite_existing);
  setenv("VQS_TEST_RUN_DIR", dir.c_str(), 1);

  std::vector<std::string> args = {argv[0], "-l", "0,1", "--main-lcore", "0", "--file-prefix", tag,
                                   "-m", "256", "--no-pci", "--single-file-segments",
                                   // virtio_user's AVX-512 packed paths, where the CPU has them
                                   "--force-max-simd-bitwidth", "512", "-d", plugin.string(),
                                   "--log-level", "*:warning", "--log-level", "pmd.net.vqs:info"};
  std::vector<char*> eal_argv;
  for (std::string& a : args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed (hugepages reserved? run scripts/setup.sh)\n");
    fs::remove_all(dir);
    return 2;
  }
  // Catch2 sees the arguments after the plugin path.
  std::vector<char*> catch_argv = {argv[0]};
  for (int i = 2; i < argc; ++i) catch_argv.push_back(argv[i]);
  const int failed =
      vqs::test::run_catch_session(static_cast<int>(catch_argv.size()), catch_argv.data());
  rte_eal_cleanup();
  fs::remove_all(dir);
  return failed;
}
