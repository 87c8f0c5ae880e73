// SPDX-License-Identifier: BSD-3-Clause
// Catch2 runner for tests that need no EAL.
#include "catch_session.h"

int main(int argc, char** argv) { return vqs::test::run_catch_session(argc, argv); }
