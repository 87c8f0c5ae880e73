#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Sums the test cases of meson test logs and prints 'N passed, N failed'.

A Catch2 binary counts as its test cases (from its closing summary); any other test, or a Catch2
binary that died before its summary, counts as one test case. Exits 1 when anything failed or
nothing ran. Before the total, each failed test's telling lines (Catch2's FAILED blocks, a
script's FAIL lines, sanitizer reports), so that a CI log cut in the middle still shows why.
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
SOME_FAILED = re.compile(r"test cases:\s+(\d+) \|\s+(\d+) passed \|\s+(\d+) failed")


MAX_DIGEST_LINES = 60


def failure_digest(out):
    """The lines that say why a test failed: each Catch2 failure with the test case's name above
    it and the expansion below, a script's FAIL lines, sanitizer and UBSan reports."""
    lines = out.splitlines()
    keep = set()
    for i, line in enumerate(lines):
        if "FAILED:" in line or "REQUIRE" in line and "threw" in line:
            keep.update(range(max(0, i - 6), min(len(lines), i + 14)))
        elif line.startswith("FAIL") or "runtime error" in line or "SUMMARY:" in line:
            keep.add(i)
        elif "ERROR: AddressSanitizer" in line or "ERROR: LeakSanitizer" in line:
            keep.update(range(i, min(len(lines), i + 8)))
    digest = [lines[i] for i in sorted(keep)]
    if not digest:
        digest = lines[-15:]
    return digest[:MAX_DIGEST_LINES]


def count(log_path, digests):
    passed = failed = 0
    with open(log_path, encoding="utf-8") as log:
        for line in log:
            test = json.loads(line)
            ok = test["result"] == "OK"
            out = test.get("stdout") or ""
            all_passed = ALL_PASSED.search(out)
            some_failed = SOME_FAILED.search(out)
            if ok and all_passed:
                passed += int(all_passed.group(2))
            elif some_failed:
                passed += int(some_failed.group(2))
                failed += max(int(some_failed.group(3)), 0 if ok else 1)
            elif ok:
                passed += 1
            else:
                failed += 1
            print(f"  {test['name']:<32} {test['result']}")
            if not ok:
                digests.append((f"{log_path}: {test['name']}",
                                failure_digest(out + "\n" + (test.get("stderr") or ""))))
    return passed, failed


def main():
    passed = failed = 0
    digests = []
    for path in sys.argv[1:]:
        print(f"{path}:")
        p, f = count(path, digests)
        passed += p
        failed += f
    for name, lines in digests:
        print(f"--- why {name} failed")
        for line in lines:
            print(f"  {line}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
