#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/test_load.py GPUQD GPUQCTL - bench/load.py tells failures from
figures (ctest: test_load; CPU backend, --quick; its targets are not
checked: figures of a shared CI machine mean nothing).

 1. a normal daemon (started by load.py): exit 0, 7 rows, every row with
    req/s, p50 and p99 figures and 0 errors, the target rows marked;
 2. a daemon whose every result is over --max-output: exit 1, "FAILED", and
    every row's errors counted;
 3. no daemon: exit 2.
"""

import os
import re
import subprocess
import sys

GPUQD, GPUQCTL = sys.argv[1], sys.argv[2]
LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load.py")
fails = []


def run(*args):
    r = subprocess.run([sys.executable, LOAD, "--quick", "--device", "cpu", "--gpuqd", GPUQD,
                        "--gpuqctl", GPUQCTL, *args], capture_output=True, text=True,
                       timeout=600)
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in r.stdout.splitlines() if line.startswith("| ")][1:]
    return r, rows


def check(cond, what, r):
    if not cond:
        fails.append(f"{what}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}")


r, rows = run()
check(r.returncode == 0 and r.stdout.rstrip().endswith("load: ok"), "normal: exit 0, ok", r)
check(len(rows) == 7, f"normal: 7 rows, got {len(rows)}", r)
for what, rate, p50, p99, errors, target, met in rows:
    check(re.fullmatch(r"[\d,]+", rate) and rate != "0", f"normal: {what}: req/s {rate}", r)
    for v in (p50, p99):
        check(re.fullmatch(r"[\d.]+ (us|ms)", v), f"normal: {what}: latency {v}", r)
    check(errors == "0", f"normal: {what}: errors {errors}", r)
    check((target == "") == (met == ""), f"normal: {what}: target {target!r} met {met!r}", r)
check(sum(1 for row in rows if row[6] in ("yes", "NO")) == 3, "normal: 3 target rows", r)

r, rows = run("--gpuqd-arg=--max-output=16")
check(r.returncode == 1 and "load: FAILED" in r.stdout, "refusing daemon: exit 1, FAILED", r)
check(len(rows) == 7 and all(row[4] not in ("0", "?") for row in rows),
      "refusing daemon: every row's errors counted", r)
check("max_output" in r.stderr or "too_large" in r.stderr, "refusing daemon: the error named", r)

r, _ = run("--socket", "/nonexistent-gpuq-dir/gpuqd.sock")
check(r.returncode == 2, "no daemon: exit 2", r)

for f in fails:
    print("FAIL:", f)
print(f"test_load: {len(fails)} failure(s)")
sys.exit(1 if fails else 0)
