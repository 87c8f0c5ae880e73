#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up the machine (scripts/setup.sh), builds vqswitch three times — release (GCC -O3), debug with
# ASan+UBSan, and the clang fuzz harnesses (debugoptimized, the project's default build type) — and
# runs every test: the whole suite in the release build, all of it but the QEMU live migrations in
# the sanitizer build, a smoke run of each fuzz harness. Ends with one line
# "N passed, N failed" summing every test case of every suite.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

"$top/scripts/setup.sh"

configure() {  # build dir, meson options...
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
  ninja -C "$dir"
}

# Its own directory, so that a developer's build/ keeps its build type.
configure build-release --buildtype=release
configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug \
  -Dcpp_args=-fno-sanitize-recover=all -Dbenches=false
# The fuzz harnesses: clang, ASan+UBSan, libFuzzer (docs/security.md).
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 meson setup build-fuzz -Dfuzz=true -Dtests=false \
    -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C build-fuzz
# Where the suite's time goes (CI's budget: well under 30 minutes).
phase() { echo "test.sh: $1 at $((SECONDS / 60)) min $((SECONDS % 60)) s"; }
phase "set up and built"

status=0
meson test -C build-release --print-errorlogs || status=1
phase "release suite done"
# Every suite again under ASan+UBSan: unit and integration (virtio_user guests, testpmd with
# the sanitized plugin, the switch against real peers, Linux guests, the demo), but the QEMU
# migrations (about 95 s of guests booting and moving; their dirty log and RARP paths run
# sanitized in interop_virtio_user and the unit tests).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  meson test -C build-asan --no-suite qemu_migration --print-errorlogs || status=1
phase "sanitizer suite done"

# Each harness replays its regressions, then fuzzes for 400,000 executions or
# 60 s, whichever comes first (scripts/fuzz.sh).
meson test -C build-fuzz --suite fuzz --print-errorlogs || status=1
phase "fuzz smoke done"

python3 "$top/scripts/count_tests.py" build-release/meson-logs/testlog.json \
  build-asan/meson-logs/testlog.json build-fuzz/meson-logs/testlog.json || status=1
exit $status
