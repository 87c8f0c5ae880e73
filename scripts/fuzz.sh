#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the libFuzzer harnesses (fuzz/, clang with ASan+UBSan, in build-fuzz/) and runs them.
#   scripts/fuzz.sh --smoke            each harness for 400,000 executions or 60 s, whichever
#                                      comes first (vhost_message_fuzz, a connection per input: 60 s)
#   scripts/fuzz.sh --long [SECONDS]   each harness for SECONDS (default 600)
#   scripts/fuzz.sh --one NAME --build DIR --smoke | --runs N | --seconds S    one harness (meson's
#                                      fuzz suite runs each with --smoke)
# Every run first replays fuzz/regressions/NAME (inputs that once failed), then fuzzes from the
# seeds in fuzz/corpus/NAME (config_fuzz: also config/*.yaml) in a scratch corpus. One line per
# harness: "NAME execs=N crashes=N cov=N secs=N"; a crash's input is kept under
# build-fuzz/fuzz-artifacts/ (add it to fuzz/regressions/NAME once fixed). Exit 1 on any crash.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly kHarnesses=(desc_chain_fuzz packed_ring_fuzz datapath_fuzz offload_fuzz config_fuzz vhost_message_fuzz)

# The smoke run's limit of a harness: 400,000 executions or 60 s, whichever comes first (the
# slow harnesses took 150-200 s for 400,000 under ASan; vhost_message_fuzz, a connection served
# by librte_vhost's thread per input, makes ~500 a second and always stops at 60 s). CI runs it on
# every change (the suite stays well under 30 minutes); depth comes from --long.
smoke_limit() { echo "-runs=400000 -max_total_time=60"; }

run_one() {  # NAME BUILD_DIR LIMIT_OPTION
  local name=$1 build=$2 limit=$3
  local bin="$build/fuzz/$name" work artifacts
  [ -x "$bin" ] || { echo "$name: not built ($bin)"; return 1; }
  work=$(mktemp -d "${TMPDIR:-/tmp}/vqs-fuzz-$name.XXXXXX")
  artifacts="$build/fuzz-artifacts/$name"
  mkdir -p "$work/corpus" "$artifacts"
  local seeds=("$top/fuzz/corpus/$name")
  [ "$name" = config_fuzz ] && seeds+=("$top/config")
  local start crashes=0 rc=0
  start=$(date +%s)
  # Inputs that failed once: replayed as they are.
  if compgen -G "$top/fuzz/regressions/$name/*" >/dev/null; then
    "$bin" "$top/fuzz/regressions/$name"/* >"$work/regressions.log" 2>&1 || {
      crashes=$((crashes + 1))
      tail -n 20 "$work/regressions.log"
    }
  fi
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$bin" $limit -print_final_stats=1 -artifact_prefix="$artifacts/" -rss_limit_mb=4096 \
    "$work/corpus" "${seeds[@]}" >"$work/fuzz.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    crashes=$((crashes + 1))
    grep -E "ERROR|invariant|runtime error|SUMMARY" "$work/fuzz.log" | head -n 10
  fi
  local execs cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' "$work/fuzz.log" | tail -n 1 | cut -d' ' -f2)
  echo "$name execs=${execs:-0} crashes=$crashes cov=${cov:-0} secs=$(($(date +%s) - start))"
  rm -rf "$work"
  [ "$crashes" -eq 0 ]
}

build_fuzz() {  # BUILD_DIR
  local dir=$1
  "$top/scripts/setup.sh" >/dev/null
  if [ ! -f "$dir/build.ninja" ]; then
    CC=clang-14 CXX=clang++-14 meson setup "$dir" -Dfuzz=true -Dtests=false \
      -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
  fi
  ninja -C "$dir" >/dev/null
}

mode=${1:-}
case "$mode" in
  --one)
    name=$2 build=$4 limit_kind=$5 limit=${6:-}
    case "$limit_kind" in
      --smoke) run_one "$name" "$build" "$(smoke_limit)" ;;
      --runs) run_one "$name" "$build" "-runs=$limit" ;;
      *) run_one "$name" "$build" "-max_total_time=$limit" ;;
    esac
    ;;
  --smoke | --long)
    build="$top/build-fuzz"
    build_fuzz "$build"
    long_limit="-max_total_time=${2:-600}"
    status=0
    # Two at a time: two CPUs.
    outs=()
    for name in "${kHarnesses[@]}"; do
      out=$(mktemp)
      outs+=("$out")
      limit=$long_limit
      [ "$mode" = --smoke ] && limit=$(smoke_limit)
      run_one "$name" "$build" "$limit" >"$out" 2>&1 &
      while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 1; done
    done
    wait || true
    for out in "${outs[@]}"; do
      cat "$out"
      grep -q ' crashes=0 ' "$out" || status=1
      rm -f "$out"
    done
    exit $status
    ;;
  *)
    sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
