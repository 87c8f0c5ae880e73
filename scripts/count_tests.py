#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Sums the test cases of meson test logs and prints 'N passed, N failed'.

A Catch2 binary counts as its test cases (from its closing summary); any other test, or a Catch2
binary that died before its summary, counts as one test case. Exits 1 when anything failed or
nothing ran.
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
SOME_FAILED = re.compile(r"test cases:\s+(\d+) \|\s+(\d+) passed \|\s+(\d+) failed")


def count(log_path):
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
    return passed, failed


def main():
    passed = failed = 0
    for path in sys.argv[1:]:
        print(f"{path}:")
        p, f = count(path)
        passed += p
        failed += f
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
