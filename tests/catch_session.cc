// SPDX-License-Identifier: BSD-3-Clause
// Catch2's implementation, compiled once for every test binary (each has its own main). Compiling
// it into each runner cost about 40 s of CPU per binary and build.
#define CATCH_CONFIG_RUNNER
#include "catch_session.h"

#include <catch2/catch.hpp>

namespace vqs::test {

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace vqs::test
