# SPDX-License-Identifier: BSD-3-Clause
# Shared by the benchmark scripts (sourced): medians, testpmd's counters, and the tables in
# docs/benchmarks.md.

# The median of the numbers on stdin (separated by spaces or newlines).
median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{v[NR]=$1} END {printf "%.3f", (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }

# median_rate LOG KEY WARMUP: the median of testpmd's one-second KEY samples (Tx-pps, Rx-pps)
# after the first WARMUP, in Mpps.
median_rate() {
  grep -a -oE "$2: +[0-9]+" "$1" | awk '{print $2}' | tail -n +$(($3 + 1)) |
    sort -n | awk '{v[NR]=$1} END {if (NR == 0) print 0; else printf "%.3f\n", v[int((NR+1)/2)] / 1e6}'
}

# TSC cycles per packet that a testpmd spent in forwarding iterations that found packets (rx
# burst, then tx burst; --record-core-cycles), over the whole run: its cost per packet, without
# the time it waited for the other side.
busy_cycles() { grep -a -oE "CPU cycles/packet=[0-9.]+" "$1" | tail -1 | cut -d= -f2; }

load() { cut -d' ' -f1-3 /proc/loadavg; }

# need_valgrind SCRIPT: valgrind, installed from Debian if missing (root), or exit naming SCRIPT.
need_valgrind() {
  command -v valgrind >/dev/null && return
  [ "$(id -u)" -eq 0 ] || { echo "$1: needs valgrind (or root to install it)" >&2; exit 1; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
}

# scenario_lines MODE SIZE BASELINE BASE_RATES CANDIDATE CAND_RATES RATIOS LABEL BASE_CYC CAND_CYC
#   [TSC_MHZ]:
# a scenario's result, one line per line: the medians of both backends' rates and of the ratios
# (listed after LABEL); then, but for guest-rx or when no cycles are given (where the host
# forwards, and drops, far more than the guest takes, so its cycles per packet say nothing about
# the guest's rate), the medians of the host's busy cycles per packet, and what they make of the
# host: the rate it could forward if it were never idle (TSC_MHZ / cycles), and how busy it was
# at the median rate. A host busy well short of 100% was waiting for the guest, which then set
# the rate.
scenario_lines() {
  local mode=$1 size=$2 base=$3 base_rates=$4 cand=$5 cand_rates=$6 ratios=$7 label=$8
  printf '%-9s %5sB  %s %7s Mpps  %s %7s Mpps  ratio %5sx  (%s:%s)\n' "$mode" "$size" "$base" \
    "$(echo "$base_rates" | median)" "$cand" "$(echo "$cand_rates" | median)" \
    "$(echo "$ratios" | median)" "$label" "$ratios"
  [ "$mode" = guest-rx ] || [ -z "${9// /}${10// /}" ] ||
    printf '%17s host busy TSC cycles/packet (medians): %s %s, %s %s\n' "" "$base" \
      "$(echo "$9" | median)" "$cand" "$(echo "${10}" | median)"
  [ "$mode" = guest-rx ] || [ -z "${9// /}${10// /}" ] || [ -z "${11:-}" ] ||
    awk -v mhz="${11}" -v b="$base" -v c="$cand" -v br="$(echo "$base_rates" | median)" \
      -v cr="$(echo "$cand_rates" | median)" -v bc="$(echo "$9" | median)" \
      -v cc="$(echo "${10}" | median)" 'BEGIN {
        if (bc <= 0 || cc <= 0) exit
        printf "%17s host capacity (TSC / busy cycles): %s %.2f Mpps, %s %.2f Mpps, ratio %.2fx; host busy at the median rates: %.0f%%, %.0f%%\n",
          "", b, mhz / bc, c, mhz / cc, bc / cc, 100 * br * bc / mhz, 100 * cr * cc / mhz }'
}

# tsc_mhz LOG: the TSC frequency testpmd printed with its cycle counts (--record-core-cycles).
tsc_mhz() { grep -a -oE "at [0-9]+ MHz Clock" "$1" | tail -1 | awk '{print $2}'; }

# write_table NAME LINE...: replaces the block between <!-- NAME:begin --> and <!-- NAME:end -->
# in docs/benchmarks.md with the lines (the script's; the rest of the file is prose). The tree is
# $VQS_TOP if set (a script running from a copy of itself), else the one holding this file.
write_table() {
  local table=$1 doc
  shift
  doc=${VQS_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/docs/benchmarks.md
  [ -f "$doc" ] && grep -q "<!-- $table:begin -->" "$doc" || return 0
  {
    sed "/<!-- $table:begin -->/q" "$doc"
    echo '```'
    printf '%s\n' "$@"
    echo '```'
    sed -n "/<!-- $table:end -->/,\$p" "$doc"
  } >"$doc.new" && mv "$doc.new" "$doc"
}

# line_crossings SECONDS PROBE PID...: one-way line latencies (ns) sampled every 0.5 s for
# SECONDS by PROBE (vqs-cpu-share), each with the processes PID... frozen so that the probe has
# the two CPUs to itself.
line_crossings() {
  local until=$(($(date +%s%N) + $1 * 1000000000)) probe=$2 samples=""
  shift 2
  while :; do
    sleep 0.5
    kill -STOP "$@"
    samples+=" $("$probe" --bounce)"
    kill -CONT "$@"
    [ "$(date +%s%N)" -lt "$until" ] || break
  done
  echo "$samples"
}

# crossing_class: near if every latency on stdin is under 150 ns, far if every one is above,
# else mixed.
crossing_class() {
  awk '{for (i = 1; i <= NF; i++) if ($i < 150) n++; else f++}
    END {print f ? (n ? "mixed" : "far") : "near"}'
}

# crossing_state: "CLASS/NS" for the latencies on stdin: their class (crossing_class) and their
# median in ns, printed to compare the far modes, whose rates differ by up to 2x (so far the
# median has not separated them either); "none" without samples.
crossing_state() {
  local samples
  samples=$(cat)
  if [ -z "${samples// /}" ]; then echo none; return; fi
  echo "$(echo "$samples" | crossing_class)/$(echo "$samples" | median | cut -d. -f1)"
}

# class_lines BASELINE CANDIDATE RATES CYCLES RATIOS [CYCLES_LABEL [DROPPED]]: a scenario's
# results per placement class, from associative arrays named by RATES, CYCLES, RATIOS (and
# DROPPED): RATES, CYCLES and DROPPED keyed "a.CLASS" (candidate) and "b.CLASS" (baseline),
# RATIOS keyed by the pair's class; values are space-separated numbers. CYCLES_LABEL names the
# cycles (default "host cycles"; empty: none printed); DROPPED, the percentages of offered frames
# dropped, gets a line of its own.
class_lines() {
  local -n rates_of=$3 cycles_of=$4 ratios_of=$5
  local cycles_label=${6-host cycles} c
  if [ -n "${7:-}" ]; then local -n dropped_of=$7; fi
  # "median (count)", or "-" for none
  of() { if [ -n "${1// /}" ]; then echo "$(echo "$1" | median) ($(echo "$1" | wc -w))"; else echo -; fi; }
  for c in near far mixed; do
    [ -n "${rates_of[a.$c]:-}${rates_of[b.$c]:-}" ] || continue
    local cycles=""
    [ -z "$cycles_label" ] ||
      cycles="; $cycles_label $(of "${cycles_of[b.$c]:-}"), $(of "${cycles_of[a.$c]:-}")"
    printf '%17s %-5s Mpps %s %s, %s %s%s; pairs: ratio %s\n' "" "$c" \
      "$1" "$(of "${rates_of[b.$c]:-}")" "$2" "$(of "${rates_of[a.$c]:-}")" "$cycles" \
      "$(of "${ratios_of[$c]:-}")"
    [ -z "${7:-}" ] || [ -z "${dropped_of[a.$c]:-}${dropped_of[b.$c]:-}" ] ||
      printf '%17s %-5s dropped at the guest'"'"'s full ring, %% of the frames offered: %s %s, %s %s\n' \
        "" "$c" "$1" "$(of "${dropped_of[b.$c]:-}")" "$2" "$(of "${dropped_of[a.$c]:-}")"
  done
}

dpdk_version() { dpkg-query -W -f='DPDK ${Version}' libdpdk-dev; }
