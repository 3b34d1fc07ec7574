#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/test_load.py GPUQD GPUQCTL GPUQ_PY_PEER - bench/load.py tells
failures from figures (ctest: test_load; CPU backend, --quick; its targets
are not checked: figures of a shared CI machine mean nothing).

 1. a normal daemon (started by load.py): exit 0, issue 28's 13 rows in
    order, each with a figure of ours that parses (a latency or a rate) and
    0 errors; the isolation rows beside their alone figure with a ratio, the
    Python rows beside theirs with a ratio, PyTorch's rows "n/a (no GPU)"
    and not judged; every row with a target marked yes, NO or n/a;
 2. a daemon whose every result is over --max-output: exit 1, "FAILED", and
    every row's errors counted;
 3. no daemon: exit 2.
"""

import os
import re
import subprocess
import sys

GPUQD, GPUQCTL, PEER = sys.argv[1], sys.argv[2], sys.argv[3]
LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load.py")
fails = []
LAT = r"[\d.]+ (us|ms)"
RATIO = r"x[\d.]+"
# each row's name, how its ours and peer cells read, and whether a ratio and
# a judged target are expected (on a CPU daemon without PyTorch)
ROWS = [
    (r"normalize 1024 f32, 1 client x 1 in flight, p50 \(PyTorch", LAT, r"n/a \(no GPU\)", False),
    (r"normalize 1024 f32, 1 client x 8 in flight", r"[\d,]+ req/s", "", None),
    (r"normalize 1024 f32, 16 clients x 8 in flight", r"[\d,]+ req/s", "", True),
    (r"normalize 1024 f32, 64 clients x 8 in flight", r"[\d,]+ req/s", "", True),
    (r"high-priority 1024 f32 p99 beside 4 low x 2 of 1 MiB, socket \(streamers [\d,]+ MB/s\)",
     LAT, "alone " + LAT, True),
    (r"the same, the streamers in arenas \(streamers", LAT, "alone " + LAT, True),
    (r"the same, every session normal priority, socket \(streamers", LAT, "alone " + LAT, True),
    (r"high-priority ping p50 beside the 4 socket streamers", LAT, "alone " + LAT, True),
    (r"the same pings' p99", LAT, "", True),
    (r"blocking gpuq_normalize_1d, 1048576 f32, malloc'ed, auto", LAT, r"n/a \(no GPU\)", False),
    (r"blocking gpuq_normalize_1d, 262144 f32, malloc'ed, auto", LAT, r"n/a \(no GPU\)", False),
    (r"Python c.normalize\(x\), plain 1048576 f32 ndarray", LAT, "libgpuq " + LAT, True),
    (r"Python c.normalize\(x\), 1024 f32 in an arena", LAT, "plain ndarray " + LAT, True),
]


def run(*args):
    r = subprocess.run([sys.executable, LOAD, "--quick", "--device", "cpu", "--gpuqd", GPUQD,
                        "--gpuqctl", GPUQCTL, "--peer", PEER, *args], capture_output=True,
                       text=True, timeout=600)
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in r.stdout.splitlines() if line.startswith("| ")][1:]
    return r, rows


def check(cond, what, r):
    if not cond:
        fails.append(f"{what}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}")


r, rows = run()
check(r.returncode == 0 and r.stdout.rstrip().endswith("load: ok"), "normal: exit 0, ok", r)
check(len(rows) == len(ROWS), f"normal: {len(ROWS)} rows, got {len(rows)}", r)
for row, (name, ours_re, peer_re, judged) in zip(rows, ROWS):
    if len(row) != 7:
        check(False, f"normal: 7 cells: {row}", r)
        continue
    what, ours, peer, ratio, target, met, errors = row
    check(re.match(name, what), f"normal: row {what!r} is not {name!r}", r)
    check(re.fullmatch(ours_re, ours), f"normal: {what}: ours {ours!r}", r)
    check(re.fullmatch(peer_re, peer), f"normal: {what}: peer {peer!r}", r)
    check(errors == "0", f"normal: {what}: errors {errors}", r)
    if judged is None:
        check(target == "" and met == "", f"normal: {what}: no target, got {target!r}", r)
    elif judged:
        check(target != "" and met in ("yes", "NO"), f"normal: {what}: met {met!r}", r)
    else:
        check(target != "" and met == "n/a", f"normal: {what}: not judged, got {met!r}", r)
    want_ratio = RATIO if peer_re and not peer_re.startswith("n/a") else ("n/a" if peer_re else "")
    check(re.fullmatch(want_ratio, ratio), f"normal: {what}: ratio {ratio!r}", r)

r, rows = run("--gpuqd-arg=--max-output=16")
check(r.returncode == 1 and "load: FAILED" in r.stdout, "refusing daemon: exit 1, FAILED", r)
check(len(rows) == len(ROWS) and all(row[-1] not in ("0", "?") for row in rows),
      "refusing daemon: every row's errors counted", r)
check("max_output" in r.stderr or "too_large" in r.stderr, "refusing daemon: the error named", r)

r, _ = run("--socket", "/nonexistent-gpuq-dir/gpuqd.sock")
check(r.returncode == 2, "no daemon: exit 2", r)

for f in fails:
    print("FAIL:", f)
print(f"test_load: {len(fails)} failure(s)")
sys.exit(1 if fails else 0)
