#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Instructions a frame in the L2 bridge (vqs-bridge-cost under callgrind, counted in its measured
# bursts only: L2Bridge::forward and the flush into the ports), for bursts of one flow and of
# --flows interleaved flows. The counts repeat exactly run after run: a change to the bridge is
# judged by them before rates.
#
#   scripts/bench/bridge_cost.sh [--binary PATH] [--flows "1 32"] [--bursts 2000]
#
# Prints one line per flow count; never asserts anything. Installs valgrind if missing (root).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$top/scripts/bench/common.sh"
binary=$top/build/scripts/bench/vqs-bridge-cost
flows="1 32"
bursts=2000
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --flows) flows=$2; shift 2 ;;
    --bursts) bursts=$2; shift 2 ;;
    *) echo "bridge_cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || { echo "bridge_cost.sh: no $binary (build first: ninja -C build)" >&2; exit 1; }
need_valgrind bridge_cost.sh
work=$(mktemp -d /tmp/vqs-bridge-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
for f in $flows; do
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.$f" \
    --toggle-collect='*forward_measured*' "$binary" --flows "$f" --bursts "$bursts" \
    >"$work/log.$f" 2>&1 || { cat "$work/log.$f" >&2; exit 1; }
  instr=$(grep -a -oE "Collected : [0-9]+" "$work/log.$f" | awk '{print $3}')
  packets=$(grep -a -oE "packets=[0-9]+" "$work/log.$f" | cut -d= -f2)
  awk -v f="$f" -v i="$instr" -v p="$packets" \
    'BEGIN {printf "bridge, bursts of 32, %3s flow(s): %8.1f instructions a frame\n", f, i / p}'
done
