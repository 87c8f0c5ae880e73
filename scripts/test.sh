#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Sets up the machine (scripts/setup.sh), builds vqswitch three times — release (GCC -O3), debug with
# ASan+UBSan, and the clang fuzz harnesses (debugoptimized, the project's default build type) — and
# runs every test: the whole suite in the release and in the sanitizer build, a smoke run of each
# fuzz harness. Ends with one line
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

status=0
meson test -C build-release --print-errorlogs || status=1
# Every suite again under ASan+UBSan: unit and integration (virtio_user guests, testpmd with
# the sanitized plugin, the switch against real peers, the demo).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs || status=1

# Each harness replays its regressions, then fuzzes for 400,000 executions (scripts/fuzz.sh).
meson test -C build-fuzz --suite fuzz --print-errorlogs || status=1

python3 "$top/scripts/count_tests.py" build-release/meson-logs/testlog.json \
  build-asan/meson-logs/testlog.json build-fuzz/meson-logs/testlog.json || status=1
exit $status
