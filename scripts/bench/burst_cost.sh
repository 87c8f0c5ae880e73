#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What one datapath burst costs per packet, on one CPU, with the unit tests' simulated guest
# (vqs-burst-cost): instructions (callgrind, counted inside dequeue_burst or enqueue_burst only)
# and TSC cycles (median of --runs native runs), for each ring format, direction and size.
#
# Instruction counts repeat exactly from run to run, so they judge a change to the burst code
# where rates on these shared two-CPU machines cannot; they do not see cache misses across CPUs
# (the guest here is on the same CPU), which only interleaved pairs (pvp_interleaved.sh) measure.
#
#   scripts/bench/burst_cost.sh [--binary PATH] [--rings "split packed"] [--directions "tx rx"]
#                               [--sizes "64 1500"] [--bursts N] [--runs N] [--in-order]
#                               [--top N] [--table burst-cost|none]
#
# --binary: the vqs-burst-cost to measure (default build/scripts/bench/vqs-burst-cost); with
# another build the docs are not written. --top N: also print the N functions with the most
# instructions in each packed/split pair (callgrind_annotate, inclusive of nothing: self cost).
# --table: the block of docs/benchmarks.md to rewrite (default burst-cost; none: print only).
# Installs valgrind if missing (root). Never asserts a time.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$top/scripts/bench/common.sh"
binary=$top/build/scripts/bench/vqs-burst-cost
rings="split packed"
directions="tx rx"
sizes="64 1500"
bursts=2000
runs=5
in_order=""
top_n=0
table=burst-cost
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; table=none; shift 2 ;;
    --rings) rings=$2; shift 2 ;;
    --directions) directions=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --bursts) bursts=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --in-order) in_order=--in-order; shift ;;
    --top) top_n=$2; shift 2 ;;
    --table) table=$2; shift 2 ;;
    *) echo "burst_cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$binary" ] || { echo "burst_cost.sh: no $binary (build first: ninja -C build)" >&2; exit 1; }
need_valgrind burst_cost.sh

work=$(mktemp -d /tmp/vqs-burst-cost.XXXXXX)
trap 'rm -rf "$work"' EXIT
lines=()
header=$(printf '%-7s %-9s %6s  %14s  %16s' ring direction size "instr/packet" "cycles/packet")
lines+=("$header")
for dir in $directions; do
  [ "$dir" = tx ] && fn='vqs::dequeue_burst(*' || fn='vqs::enqueue_burst(*'
  for size in $sizes; do
    [ "$dir" = rx ] && [ "$size" -gt 2048 ] && continue
    for ring in $rings; do
      args=(--ring "$ring" --direction "$dir" --size "$size" $in_order)
      out=$work/cg.$ring.$dir.$size
      valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
        "$binary" "${args[@]}" --bursts "$bursts" >"$out.log" 2>&1 ||
        { cat "$out.log" >&2; exit 1; }
      instr=$(grep -a -oE "Collected : [0-9]+" "$out.log" | awk '{print $3}')
      packets=$(grep -a -oE "packets=[0-9]+" "$out.log" | cut -d= -f2)
      cyc=()
      for _ in $(seq "$runs"); do
        cyc+=("$("$binary" "${args[@]}" | grep -oE "cycles_per_packet=[0-9.]+" | cut -d= -f2)")
      done
      line=$(awk -v r="$ring" -v d="$dir" -v s="$size" -v i="$instr" -v p="$packets" \
        -v c="$(echo "${cyc[*]}" | median)" \
        'BEGIN {printf "%-7s %-9s %5sB  %14.1f  %16.1f", r, d, s, i / p, c}')
      echo "$line"
      lines+=("$line")
      if [ "$top_n" -gt 0 ]; then
        # file:function, without the signature; lines of one function in several files apart.
        { callgrind_annotate --inclusive=no "$out" 2>/dev/null || true; } |
          grep -E "^ *[0-9,]+ \(" | grep -v "PROGRAM TOTALS" |
          sed -E 's/\(anonymous namespace\):://g; s/<[^<>]*>//g' |
          sed -E 's/^ *([0-9,]+) \( *([0-9.]+%)\) +([^:]*\/)?([^/:]+):([^(]*).*/    \2  \4: \5/; s/: .* ([^ ]+)$/: \1/' |
          awk -v n="$top_n" 'NR <= n'
      fi
    done
  done
done
lines+=("" "vqs-burst-cost: --bursts $bursts x 32 packets ${in_order:-(in_order off)}, ring of 1024;" \
  "instructions counted in the datapath call only (callgrind), cycles: median of $runs native runs" \
  "$(uname -m), $(nproc) CPUs, $(dpdk_version), $(date -u +%F)")
[ "$table" = none ] || write_table "$table" "${lines[@]}"
