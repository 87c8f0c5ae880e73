#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Renders docs/data/TABLE.tsv (written by switch_vs_ovs.sh) as docs/img/TABLE.png: for each
# scenario and frame size, the ratio of vqswitch's rate to OVS-DPDK's against the variant (a
# sweep's values, in the order run), one line over all periods (solid) and one per CPU
# placement class seen (near dashed, far dotted), with parity marked.
#
#   scripts/bench/plot.sh TABLE
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
table=${1:?usage: plot.sh TABLE}
tsv=$top/docs/data/$table.tsv
png=$top/docs/img/$table.png
[ -f "$tsv" ] || { echo "no $tsv" >&2; exit 1; }
command -v gnuplot >/dev/null ||
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
mkdir -p "$(dirname "$png")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# gp_header PNG TITLE: the lines every plot here starts with.
gp_header() {
  echo "set terminal pngcairo size 1000,600 font 'sans,10' noenhanced"
  echo "set output '$1'"
  echo "set datafile separator '\\t'"
  echo "set title '$2'"
  echo "set grid"
  echo "set key outside right"
}

# The share scenario (TABLE-shares.tsv): per variant and guest port, the share of packets and of
# bytes the switch took from it, beside the share its weights ask for.
shares_tsv=$top/docs/data/$table-shares.tsv
if [ -f "$shares_tsv" ]; then
  # Label: variant, port, its frame size and the run's sizes ("p1:2:4 vm0 64B of 64/512/1500").
  awk -F'\t' 'NR > 1 {n = split($2, z, ","); k = substr($3, 3) + 1; if (k > n) k = n
      all = $2; gsub(",", "/", all)
      print $1 " " $3 " " z[k] "B of " all "\t" $4 "\t" $5 "\t" $6}' "$shares_tsv" >"$work/shares"
  {
    gp_header "${png%.png}-shares.png" "Shares of one switch lcore under overload ($table, $(date -u -r "$shares_tsv" +%F))"
    echo "set style data histograms"
    echo "set style histogram clustered gap 1"
    echo "set style fill solid 0.8 border -1"
    echo "set ylabel 'share of what the lcore took (%)'"
    echo "set yrange [0:100]"
    echo "set xtics rotate by -30"
    echo "plot '$work/shares' using 2:xticlabels(1) title 'expected (weights)', '' using 3 title 'packets', '' using 4 title 'bytes'"
  } >"$work/shares.gp"
  gnuplot "$work/shares.gp"
  echo "plot: ${png%.png}-shares.png"
fi

# One variant (no sweep): the ratio per scenario and size, all periods and each class apart.
if [ "$(awk -F'\t' 'NR > 1 {print $3}' "$tsv" | sort -u | wc -l)" -eq 1 ]; then
  awk -F'\t' 'NR > 1 {
      key = $1 " " $2 "B"
      if (!(key in pos)) { pos[key] = n++; name[pos[key]] = key }
      r[pos[key], $4] = $7
    }
    END {
      for (i = 0; i < n; i++) {
        printf "%d\t%s", i, name[i]
        split("all near far mixed", cls, " ")
        for (c = 1; c <= 4; c++) printf "\t%s", ((i, cls[c]) in r) ? r[i, cls[c]] : "NaN"
        printf "\n"
      }
    }' "$tsv" >"$work/by_scenario"
  {
    gp_header "$png" "vqswitch / OVS-DPDK, guest-side rate, median of rounds ($table, $(date -u -r "$tsv" +%F))"
    echo "set ylabel 'ratio'"
    echo "set yrange [0:*]"
    echo "set xtics rotate by -30"
    echo "set xrange [-0.5:$(($(wc -l <"$work/by_scenario") - 1)).5]"
    echo "plot 1 with lines lc rgb 'black' dt 2 title 'parity', \\"
    echo "  '$work/by_scenario' using 1:3:xticlabels(2) with points pt 7 ps 2 title 'all periods', \\"
    echo "  '' using 1:4 with points pt 6 ps 1.5 title 'near', \\"
    echo "  '' using 1:5 with points pt 4 ps 1.5 title 'far', \\"
    echo "  '' using 1:6 with points pt 2 ps 1.5 title 'mixed'"
  } >"$work/plot.gp"
  gnuplot "$work/plot.gp"
  echo "plot: $png"
  exit 0
fi

# One gnuplot data block per (scenario, size, class), blocks separated by two blank lines; each
# row: variant position, ratio, variant label.
awk -F'\t' -v dir="$work" 'NR > 1 && $4 != "mixed" {
    if (!($3 in pos)) { pos[$3] = n++; label[pos[$3]] = $3 }
    key = $1 " " $2 "B " $4
    if (!(key in seen)) { seen[key] = 1; keys[k++] = key }
    rows[key] = rows[key] pos[$3] "\t" $7 "\t" $3 "\n"
  }
  END {
    for (i = 0; i < k; i++) {
      printf "%s", rows[keys[i]] > (dir "/data")
      printf "\n\n" > (dir "/data")
      print keys[i] > (dir "/titles")
    }
    for (i = 0; i < n; i++) print i "\t" label[i] > (dir "/labels")
  }' "$tsv"

{
  gp_header "$png" "vqswitch / OVS-DPDK, guest-side rate ($table, $(date -u -r "$tsv" +%F))"
  echo "set datafile separator whitespace"
  echo "set ylabel 'ratio (median of rounds)'"
  echo "set xlabel 'variant'"
  echo "set yrange [0:*]"
  printf "set xtics ("
  awk -F'\t' '{printf "%s\"%s\" %s", (NR > 1) ? ", " : "", $2, $1}' "$work/labels"
  echo ")"
  echo "set xrange [-0.5:$(($(wc -l <"$work/labels") - 1)).5]"
  printf "plot 1 with lines lc rgb 'black' dt 2 title 'parity'"
  i=0
  declare -A color=()
  while read -r title; do
    series=${title% *}
    [ -n "${color[$series]:-}" ] || color[$series]=$((${#color[@]} + 1))
    case "$title" in
      *" all") dt=1 ;;
      *" near") dt=2 ;;
      *) dt=3 ;;
    esac
    printf ", '%s' index %d using 1:2 with linespoints lc %d dt %d lw 2 title '%s'" \
      "$work/data" "$i" "${color[$series]}" "$dt" "$title"
    i=$((i + 1))
  done <"$work/titles"
  echo
} >"$work/plot.gp"
gnuplot "$work/plot.gp"
echo "plot: $png"

# With losses recorded (intr-rx): the loss against the variant, one line per offered load,
# vqswitch solid and OVS-DPDK dashed.
if awk -F'\t' 'NR > 1 && $17 != "-" && $17 != "" {found = 1} END {exit !found}' "$tsv"; then
  loss_png=${png%.png}-loss.png
  awk -F'\t' -v dir="$work" 'NR > 1 && $17 != "-" && $17 != "" && $4 == "all" {
      if (!($3 in pos)) { pos[$3] = n++; print pos[$3] "\t" $3 > (dir "/loss_labels") }
      if (!($1 in seen)) { seen[$1] = 1; keys[k++] = $1 }
      rows[$1] = rows[$1] pos[$3] "\t" $17 "\t" $18 "\n"
    }
    END {
      for (i = 0; i < k; i++) {
        printf "%s\n\n", rows[keys[i]] > (dir "/loss")
        print keys[i] > (dir "/loss_titles")
      }
    }' "$tsv"
  {
    gp_header "$loss_png" "Frames lost on the way to a receiver that sleeps until notified ($table)"
    echo "set datafile separator whitespace"
    echo "set ylabel 'lost (%), median of periods'"
    echo "set xlabel 'variant'"
    echo "set yrange [0:*]"
    printf "set xtics ("
    awk -F'\t' '{printf "%s\"%s\" %s", (NR > 1) ? ", " : "", $2, $1}' "$work/loss_labels"
    echo ")"
    echo "set xrange [-0.5:$(($(wc -l <"$work/loss_labels") - 1)).5]"
    printf "plot 0 with lines lc rgb 'black' notitle"
    i=0
    while read -r title; do
      printf ", '%s' index %d using 1:3 with linespoints lc %d lw 2 title 'vqswitch %s'" "$work/loss" "$i" $((i + 1)) "$title"
      printf ", '%s' index %d using 1:2 with lines lc %d lw 1 dt 2 title 'OVS-DPDK %s'" "$work/loss" "$i" $((i + 1)) "$title"
      i=$((i + 1))
    done <"$work/loss_titles"
    echo
  } >"$work/loss.gp"
  gnuplot "$work/loss.gp"
  echo "plot: $loss_png"
fi

# The noisy neighbour's probe: p50 and p99 latency against the variant, vqswitch's and
# OVS-DPDK's (the first scenario and size with probes).
awk -F'\t' 'NR > 1 && $11 != "-" && $11 != "" {found = 1} END {exit !found}' "$tsv" || exit 0
latency_png=${png%.png}-latency.png
awk -F'\t' 'NR > 1 && $11 != "-" && $11 != "" && $4 == "all" {
    if (first == "") first = $1 " " $2
    if ($1 " " $2 != first) next
    if (!($3 in pos)) pos[$3] = n++
    print pos[$3] "\t" $11 "\t" $12 "\t" $13 "\t" $14 "\t" $3
  }' "$tsv" >"$work/latency"
{
  gp_header "$latency_png" "Probe one-way latency beside noisy neighbours ($table)"
  echo "set ylabel 'latency (us), median of periods'"
  echo "set logscale y"
  echo "set xlabel 'variant'"
  echo "set xrange [-0.5:$(($(wc -l <"$work/latency") - 1)).5]"
  echo "plot '$work/latency' using 1:3:xticlabels(6) with linespoints lc 1 lw 2 title 'vqswitch p50', \\"
  echo "     '$work/latency' using 1:2 with linespoints lc 1 lw 2 dt 2 title 'OVS-DPDK p50', \\"
  echo "     '$work/latency' using 1:5 with linespoints lc 2 lw 2 title 'vqswitch p99', \\"
  echo "     '$work/latency' using 1:4 with linespoints lc 2 lw 2 dt 2 title 'OVS-DPDK p99'"
} >"$work/latency.gp"
gnuplot "$work/latency.gp"
echo "plot: $latency_png"

# With CPU use recorded (the probe scenario): the switch's CPU against the probe's p99, a point
# per variant and offered load.
awk -F'\t' 'NR > 1 && $1 ~ /^probe@/ && $15 != "-" && $15 != "" {found = 1} END {exit !found}' "$tsv" || exit 0
cpu_png=${png%.png}-cpu.png
awk -F'\t' 'NR > 1 && $1 ~ /^probe@/ && $15 != "-" && $15 != "" && $4 == "all" {
    print $16 "\t" $14 "\t" $12 "\t" $3 " " $1
    if (!(($1 $2) in ovs)) { ovs[$1 $2] = 1; print $15 "\t" $13 "\t" $11 "\tOVS-DPDK " $1 > "/dev/stderr" }
  }' "$tsv" >"$work/cpu" 2>"$work/cpu_ovs"
{
  gp_header "$cpu_png" "Switch CPU use against the probe latency ($table)"
  echo "set xlabel 'switch process CPU (% of one CPU), median of periods'"
  echo "set ylabel 'probe latency (us): p99 filled, p50 open'"
  echo "set logscale y"
  echo "set xrange [0:*]"
  echo "plot '$work/cpu' using 1:2 with points lc 1 pt 7 ps 1.5 title 'vqswitch p99', \\"
  echo "     '' using 1:3 with points lc 1 pt 6 ps 1.5 title 'vqswitch p50', \\"
  echo "     '' using 1:3:4 with labels offset 0,-1 font 'sans,7' notitle, \\"
  echo "     '$work/cpu_ovs' using 1:2 with points lc 2 pt 5 ps 1.5 title 'OVS-DPDK p99', \\"
  echo "     '' using 1:3 with points lc 2 pt 4 ps 1.5 title 'OVS-DPDK p50'"
} >"$work/cpu.gp"
gnuplot "$work/cpu.gp"
echo "plot: $cpu_png"
