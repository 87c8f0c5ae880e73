#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds vqswitch twice — optimised, and with ASan+UBSan —
# and runs every test: the whole suite in the optimised build, the unit suite in the sanitizer
# build. Ends with one line "N passed, N failed" summing every test case of every suite.
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

configure build
configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug \
  -Dcpp_args=-fno-sanitize-recover=all

status=0
meson test -C build --print-errorlogs || status=1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  meson test -C build-asan --suite unit --print-errorlogs || status=1

python3 "$top/scripts/count_tests.py" build/meson-logs/testlog.json \
  build-asan/meson-logs/testlog.json || status=1
exit $status
