// SPDX-License-Identifier: BSD-3-Clause
// Catch2 runner for tests that need no EAL.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
