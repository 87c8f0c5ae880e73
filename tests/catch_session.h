// SPDX-License-Identifier: BSD-3-Clause
// The test binaries' runners call Catch2 through this, not through its header: Catch::Session is
// declared only where Catch2's implementation is compiled (catch_session.cc, once for all).
#pragma once

namespace vqs::test {

// Runs the test cases Catch2's command line selects; returns the number that failed.
int run_catch_session(int argc, char** argv);

}  // namespace vqs::test
