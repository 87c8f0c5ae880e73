// Catch2 runner for tests that need no EAL.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
