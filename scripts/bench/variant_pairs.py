#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Paired ratios between two variants of a switch_vs_ovs.sh run, round by round.

switch_vs_ovs.sh reports each variant against OVS-DPDK; for an A/B of two vqswitch variants
(two builds, or one build with and without something around it), this takes the guest rate and
the switch's cycles per packet of A and B from the same round (periods seconds apart) and gives
the median of A/B per CPU placement class (a round whose two periods differ in class is "mixed").

  scripts/bench/variant_pairs.py LOG A/B [A/B ...]
"""
import re
import statistics
import sys

ROUND = re.compile(
    r"^\s+(\S+) (\d+)B round (\d+): (\S+) ([\d.]+) Mpps, (\d+) cycles/packet(?:, busy \S+ %)? \((\w+)")


def main():
    rounds = {}
    with open(sys.argv[1], encoding="utf-8") as log:
        for line in log:
            m = ROUND.match(line)
            if m:
                scenario, size, n, variant, mpps, cycles, placement = m.groups()
                rounds.setdefault((scenario, size, int(n)), {})[variant] = (
                    float(mpps), int(cycles), placement)
    for pair in sys.argv[2:]:
        a, b = pair.split("/")
        by_class = {}
        for (scenario, size, _), v in sorted(rounds.items()):
            if a not in v or b not in v:
                continue
            placement = v[a][2] if v[a][2] == v[b][2] else "mixed"
            by_class.setdefault((scenario, size, placement), []).append(
                (v[a][0] / v[b][0], v[a][1] / v[b][1]))
        for (scenario, size, placement), r in sorted(by_class.items()):
            rates = " ".join(f"{x:.2f}" for x, _ in r)
            print(f"{scenario} {size}B {a}/{b} {placement:5} n={len(r)}: rate "
                  f"{statistics.median(x for x, _ in r):.3f} [{rates}], cycles/packet "
                  f"{statistics.median(y for _, y in r):.3f}")


if __name__ == "__main__":
    main()
