// SPDX-License-Identifier: BSD-3-Clause
// The YAML configuration loader and planner on arbitrary text. Invariants: it returns (no crash,
// no hang: yaml-cpp's own recursion and the loader's limits), and a refusal is one message that
// names the file ("t.yaml:LINE:COL: KEY: ..." or "t.yaml: ...").
#include <cstdint>
#include <string>

#include "config/config.h"
#include "guarded_memory.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > vqs::app::kMaxConfigBytes) return 0;  // load_config refuses these by size
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string error;
  const auto config = vqs::app::parse_config(text, "t.yaml", &error);
  if (!config) {
    VQS_FUZZ_CHECK(error.rfind("t.yaml", 0) == 0);
  }
  return 0;
}
