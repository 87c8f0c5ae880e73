#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Splits a perf profile taken during pvp_interleaved.sh by the backend measured at each moment:
# the two backends alternate every few seconds in the same processes, so a profile of the whole
# run mixes them. Prints, per backend, the symbols with the largest share of its samples.
#
#   perf record -C CPU -F 2000 --clockid realtime -o perf.data -- sleep ... &
#   scripts/bench/pvp_interleaved.sh ... --marks marks.txt
#   scripts/bench/profile_by_period.sh perf.data marks.txt [--cpu CPU] [--top N] [--class C]
#
# --class near|far|mixed: only the periods of that CPU placement (pvp_interleaved.sh
# --cpu-state). Only samples inside a measured interval count (warm-up and switching are left
# out). Samples without a symbol are grouped by 256-byte blocks of their address; keep the run
# directory (VQS_BENCH_KEEP=1) so that perf finds the copy of our plugin the host loaded.
set -euo pipefail

[ $# -ge 2 ] || { sed -n 3,16p "$0" >&2; exit 2; }
data=$1 marks=$2
shift 2
cpu="" top=25 class=""
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) cpu=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --class) class=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

perf script -i "$data" -F cpu,time,ip,sym,dso --ns 2>/dev/null |
  awk -v marks="$marks" -v cpu="$cpu" -v top="$top" -v class="$class" '
    BEGIN {
      n = 0
      while ((getline line < marks) > 0) {
        split(line, f, " ")
        if (class != "" && f[6] != class) continue
        start[n] = f[1] + 0; stop[n] = f[2] + 0; backend[n] = f[3]; n++
      }
      names["a"] = "net_vqs"; names["b"] = "baseline"
    }
    {
      # "[001] 1764780000.123456789:  ffffffff8225295b sym (dso)"; sym may be "[unknown]"
      c = $1; gsub(/[\[\]]/, "", c)
      if (cpu != "" && c + 0 != cpu + 0) next
      t = $2; sub(/:$/, "", t); t += 0
      which = ""
      for (i = 0; i < n; i++) if (t >= start[i] && t < stop[i]) { which = backend[i]; break }
      if (which == "") next
      sym = $4
      for (i = 5; i < NF; i++) sym = sym " " $i
      # A stripped binary (Debian'"'"'s testpmd, its PMDs): the 256-byte block of the address, the
      # same in both backends'"'"' periods since they share the processes.
      if (sym == "[unknown]") sym = "0x" substr($3, 1, length($3) - 2) "00"
      dso = $NF; gsub(/[()]/, "", dso); sub(/.*\//, "", dso)
      key = which SUBSEP sym " [" dso "]"
      count[key]++; total[which]++
    }
    END {
      for (i = 0; i < n; i++) seconds[backend[i]] += stop[i] - start[i]
      for (w in total) {
        printf "%s: %d samples in %.1f s of measured periods\n", names[w], total[w], seconds[w]
        m = 0
        for (k in count) {
          split(k, parts, SUBSEP)
          if (parts[1] != w) continue
          keys[m] = parts[2]; vals[m] = count[k]; m++
        }
        # selection sort of the top entries
        for (j = 0; j < m && j < top; j++) {
          best = j
          for (l = j + 1; l < m; l++) if (vals[l] > vals[best]) best = l
          tk = keys[j]; tv = vals[j]; keys[j] = keys[best]; vals[j] = vals[best]
          keys[best] = tk; vals[best] = tv
          printf "  %6.2f%%  %s\n", 100 * vals[j] / total[w], keys[j]
        }
        delete keys; delete vals
      }
    }'
