#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""py_bench.py - the Python client's figures beside libgpuq's (issue 13's targets).

    bench/py_bench.py [--gpuqd PATH] [--device auto|cuda|cpu] [--socket PATH]
                      [--peer PATH] [--quick] [--small-n N] [--large-n N]
                      [--small-reps R] [--large-reps R] [--rows issue13|load] [--json]

Starts its own gpuqd (--gpuqd, default build/server/gpuqd; --device, default
auto) on a temporary socket, or uses the one at --socket. Rows, each beside
libgpuq's figure for the same work on the same daemon in the same run
(bench/py_peer.c, built as build/bench/gpuq_py_peer; --peer):

  1. float32 sum normalize of 1024 values, one request at a time, by socket:
     p50 of gpuq.Client.normalize(x) against libgpuq's gpuq_normalize_1d.
     Target: <= 1.3x libgpuq's p50. (Also shown: with out= given.)
  2. the same of 2^24 values (64 MiB) with input and output in the session's
     arena (Client.asarray / Client.empty, out=): no array byte on the
     socket. Target: <= 1.1x libgpuq's p50 with its arrays in an arena.
     (Also shown: without out=, the result a new arena array each time.)

--rows load: issue 28's rows instead (bench/load.py runs them):

  a. libgpuq's blocking gpuq_normalize_1d of 2^24 float32 values (--large-n)
     in the caller's own malloc'ed memory, libgpuq's default transport
     (auto: its staging arena), and the same of 2^20 values (--mid-n): the
     figures load.py sets beside PyTorch's;
  b. Python c.normalize(x), x a plain ndarray of --large-n float32, the
     default transport (auto), against a.'s libgpuq figure. Target: <= 1.15x;
  c. Python c.normalize(x) of --small-n float32 with x in the session's arena
     (c.asarray), against the same with x a plain ndarray (both transport
     auto). Target: <= 1.0x.

--json: one JSON object on stdout instead of the table (each figure's p50s
of its rounds, the median, its errors), for load.py.

Ours and libgpuq's samples are taken in alternating rounds (--rounds, 8),
so drift on a shared machine hits both. Each round of either side is a new
process with its own connection (ours: this script run as --worker), so
both sides get as many fresh placements on the machine's cores, and each
side's figure is the median of its rounds' p50s. Repetitions in all
(--small-reps 8000, --large-reps 48) are split over the rounds. --quick:
fewer repetitions and a 2^20-value large row (for the CPU backend and CI).
Every result is checked (its sum is 1 to within float32 rounding); the
exit status is 1 when any call of either side failed or returned a wrong
result, 2 on bad usage or no daemon. The table says, per target row,
whether it was met on this run.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "client", "python"))

import numpy as np  # noqa: E402

import gpuq  # noqa: E402
from benchutil import start_daemon, stop_daemon  # noqa: E402  (bench/, the script's directory)


def samples(cmd, what: str):
    """One round's summary from a sampling process (libgpuq's peer or our
    --worker): dict of p50_us, ..., errors."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.stderr:
        sys.stderr.write(r.stderr)
    vals = dict(re.findall(r"(\w+)=(\S+)", r.stdout))
    if r.returncode not in (0, 1) or "p50_us" not in vals:
        return {"errors": 1, "failed": f"{what} exit {r.returncode}: {r.stdout.strip()}"}
    out = {k: float(v) for k, v in vals.items() if k != "backend"}
    out["backend"] = vals.get("backend", "?")
    out["errors"] = int(out.get("errors", 0)) + (1 if r.returncode else 0)
    return out


def peer(exe: str, sock: str, mode: str, n: int, reps: int, warmup: int):
    return samples([exe, "--socket", sock, "--mode", mode, "--n", str(n), "--reps", str(reps),
                    "--warmup", str(warmup)], "gpuq_py_peer")


def ours(mode: str, sock: str, n: int, reps: int, warmup: int):
    return samples([sys.executable, os.path.abspath(__file__), "--worker", mode, "--socket",
                    sock, "--n", str(n), "--reps", str(reps), "--warmup", str(warmup)],
                   "py_bench --worker")


def check(y: np.ndarray) -> bool:
    return abs(float(np.sum(y, dtype=np.float64)) - 1.0) < 1e-3


def timed(fn, reps: int, warmup: int, errors: list, prep=None):
    ts = []
    for k in range(-warmup, reps):
        if prep is not None:
            prep()
        t0 = time.perf_counter_ns()
        try:
            y = fn()
        except gpuq.Error as e:
            errors.append(str(e))
            continue
        dt = (time.perf_counter_ns() - t0) / 1e3
        if not check(y):
            errors.append("wrong result")
            continue
        if k >= 0:
            ts.append(dt)
    return ts


def summary(ts):
    if not ts:
        return {"p50_us": float("nan")}
    a = np.sort(np.asarray(ts))
    return {"p50_us": float(a[len(a) // 2]), "p10_us": float(a[len(a) // 10]),
            "p90_us": float(a[len(a) * 9 // 10]), "min_us": float(a[0]), "ok": len(a)}


WORKER_MODES = ("small", "small-out", "shm", "shm-new", "auto", "small-plain", "small-arena")


def worker(mode: str, sock: str, n: int, reps: int, warmup: int) -> int:
    """One round of our samples, in this process: prints one line as
    gpuq_py_peer does (p50_us=... errors=E); exit 1 when a call failed."""
    try:
        c = gpuq.connect(sock, name="py_bench", transport="socket" if mode in ("small", "small-out")
                         else "auto")
    except gpuq.Error as e:
        print(f"py_bench --worker: {e}", file=sys.stderr)
        return 2
    errs: list = []
    with c:
        data = (1 + np.arange(n) % 1000).astype(np.float32)
        if mode in ("small", "small-plain", "auto"):  # a plain ndarray
            ts = timed(lambda: c.normalize(data), reps, warmup, errs)
        elif mode == "small-out":
            out = np.empty_like(data)
            ts = timed(lambda: c.normalize(data, out=out), reps, warmup, errs)
        elif not c.shm:
            ts, errs = [], ["gpuqd offers this session no arenas"]
        else:
            xs = c.asarray(data)
            if not c.in_arena(xs):
                errs.append("the input is not in an arena")
            if mode == "small-arena":
                ts = timed(lambda: c.normalize(xs), reps, warmup, errs)
            elif mode == "shm":
                ys = c.empty(n, np.float32, strict=True)
                # cleared before each call with the C library's memset, as
                # gpuq_py_peer clears its own (the same stores, so the same
                # cache state for the download that follows)
                ts = timed(lambda: c.normalize(xs, out=ys), reps, warmup, errs,
                           prep=lambda: ctypes.memset(ys.ctypes.data, 0, ys.nbytes))
            else:
                ts = timed(lambda: c.normalize(xs), reps, warmup, errs)
        backend = c.backend
    for e in errs[:3]:
        print(f"py_bench --worker {mode}: {e}", file=sys.stderr)
    line = " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in summary(ts).items())
    print(f"{line} errors={len(errs)} backend={backend}")
    return 1 if errs else 0


def median_p50(rounds) -> float:
    p50s = [t["p50_us"] for t in rounds if "p50_us" in t]
    return float(np.median(p50s)) if p50s else float("nan")


def fmt_us(v: float) -> str:
    if v != v:
        return "n/a"
    return f"{v:.1f} us" if v < 1e4 else f"{v / 1e3:.2f} ms"


def figure(rounds) -> dict:
    """One figure of --rows load: its rounds' p50s, their median, errors."""
    return {"p50_us": median_p50(rounds), "rounds_p50_us": [t.get("p50_us") for t in rounds],
            "errors": sum(int(t.get("errors", 0)) for t in rounds),
            "failed": [t["failed"] for t in rounds if "failed" in t][:3]}


def load_rows(a, sock: str, backend: str, large_n: int, small_reps: int, large_reps: int) -> int:
    """Issue 28's rows (--rows load), in alternating rounds: the table, or
    one JSON object with --json. Exit 1 when any call failed."""
    mid_n = a.mid_n or (1 << 18 if a.quick else 1 << 20)
    rounds = max(1, a.rounds)
    per_large = max(1, large_reps // rounds)
    per_mid = max(1, 4 * large_reps // rounds)
    per_small = max(1, small_reps // rounds)
    r = {k: [] for k in ("libgpuq_auto_large", "libgpuq_auto_mid", "python_auto_large",
                         "python_small_plain", "python_small_arena")}
    for _ in range(rounds):
        r["libgpuq_auto_large"].append(peer(a.peer, sock, "auto", large_n, per_large, 2))
        r["python_auto_large"].append(ours("auto", sock, large_n, per_large, 2))
        r["libgpuq_auto_mid"].append(peer(a.peer, sock, "auto", mid_n, per_mid, 2))
        r["python_small_plain"].append(ours("small-plain", sock, a.small_n, per_small, 50))
        r["python_small_arena"].append(ours("small-arena", sock, a.small_n, per_small, 50))
    figs = {k: figure(v) for k, v in r.items()}
    for k, n in (("libgpuq_auto_large", large_n), ("python_auto_large", large_n),
                 ("libgpuq_auto_mid", mid_n), ("python_small_plain", a.small_n),
                 ("python_small_arena", a.small_n)):
        figs[k]["n"] = n
    nerr = sum(f["errors"] for f in figs.values())
    for k, f in figs.items():
        for why in f["failed"]:
            print(f"py_bench: {k}: {why}", file=sys.stderr)
    if a.json:
        import json
        print(json.dumps({"rows": "load", "backend": backend, "quick": a.quick,
                          "figures": figs, "errors": nerr}))
    else:
        def ratio(x, y):
            return x / y if x == x and y == y and y else float("nan")

        print(f"| py_bench --rows load ({backend}) | p50 | against | its p50 | ratio | target "
              f"| met |")
        print("|---|---:|---|---:|---:|---:|---|")
        L, M = figs["libgpuq_auto_large"], figs["libgpuq_auto_mid"]
        P, S, A = figs["python_auto_large"], figs["python_small_plain"], figs["python_small_arena"]
        for what, f, base, bname, target in (
                (f"libgpuq gpuq_normalize_1d, n = {large_n}, malloc, auto", L, None, "", None),
                (f"libgpuq gpuq_normalize_1d, n = {mid_n}, malloc, auto", M, None, "", None),
                (f"Python c.normalize(x), plain ndarray, n = {large_n}", P, L, "libgpuq", 1.15),
                (f"Python, n = {a.small_n} in an arena (c.asarray)", A, S, "plain ndarray", 1.0)):
            rt = ratio(f["p50_us"], base["p50_us"]) if base else float("nan")
            met = "" if target is None else ("yes" if rt <= target else "NO")
            print(f"| {what} | {fmt_us(f['p50_us'])} | {bname} | "
                  f"{fmt_us(base['p50_us']) if base else ''} | "
                  f"{f'{rt:.2f}x' if base else ''} | {f'<= {target}x' if target else ''} | {met} |")
        print(f"py_bench: {'FAILED (errors above)' if nerr else 'ok'}")
    return 1 if nerr else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuqd", default=os.path.join(REPO, "build", "server", "gpuqd"))
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--socket", help="use the gpuqd listening here")
    ap.add_argument("--peer", default=os.path.join(REPO, "build", "bench", "gpuq_py_peer"))
    ap.add_argument("--quick", action="store_true", help="small sizes and counts (CPU, CI)")
    ap.add_argument("--small-n", type=int, default=1024)
    ap.add_argument("--large-n", type=int)
    ap.add_argument("--small-reps", type=int)
    ap.add_argument("--large-reps", type=int)
    ap.add_argument("--mid-n", type=int, help="--rows load: libgpuq's second size (2^20)")
    ap.add_argument("--rounds", type=int, default=8, help="alternating rounds per row (default 8)")
    ap.add_argument("--rows", choices=("issue13", "load"), default="issue13",
                    help="issue 13's rows (default) or issue 28's (bench/load.py)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ap.add_argument("--worker", choices=WORKER_MODES, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        if not a.socket or not a.n or not a.reps or a.warmup is None:
            ap.error("--worker needs --socket, --n, --reps and --warmup")
        return worker(a.worker, a.socket, a.n, a.reps, a.warmup)
    large_n = a.large_n or (1 << 20 if a.quick else 1 << 24)
    small_reps = a.small_reps or (400 if a.quick else 8000)
    large_reps = a.large_reps or (4 if a.quick else 48)
    if not os.access(a.peer, os.X_OK):
        print(f"py_bench: no {a.peer} (cmake --build build --target gpuq_py_peer, or --peer)",
              file=sys.stderr)
        return 2

    tmp = None
    proc = None
    sock = a.socket
    if sock is None:
        tmp = tempfile.mkdtemp(prefix="gpuq-pybench-")
        sock = os.path.join(tmp, "gpuqd.sock")
        proc = start_daemon("py_bench", a.gpuqd, a.device, sock)
    status = 0
    try:
        with gpuq.connect(sock, name="py_bench") as c:
            backend = c.backend
    except gpuq.Error as e:
        print(f"py_bench: {e}", file=sys.stderr)
        if proc is not None:
            proc.kill()
            proc.wait()
        return 2
    if a.rows == "load":
        rc = 1
        try:
            rc = load_rows(a, sock, backend, large_n, small_reps, large_reps)
        finally:
            if proc is not None and not stop_daemon("py_bench", proc):
                rc = 1  # said on stderr
        return rc
    rows = []
    try:
        rounds = max(1, a.rounds)
        # ---- 1: small serial normalize, socket ----
        mine, mine_out, theirs = [], [], []
        per = max(1, small_reps // rounds)
        for _ in range(rounds):
            theirs.append(peer(a.peer, sock, "small", a.small_n, per, 50))
            mine.append(ours("small", sock, a.small_n, per, 50))
            mine_out.append(ours("small-out", sock, a.small_n, per, 50))
        rows.append(("normalize f32 sum, n = %d, 1 in flight, socket" % a.small_n,
                     mine, theirs, 1.3))
        rows.append(("  the same with out=", mine_out, theirs, None))

        # ---- 2: large normalize through arenas ----
        mine, mine_new, theirs = [], [], []
        per = max(1, large_reps // rounds)
        for _ in range(rounds):
            theirs.append(peer(a.peer, sock, "shm", large_n, per, 2))
            mine.append(ours("shm", sock, large_n, per, 2))
            mine_new.append(ours("shm-new", sock, large_n, per, 2))
        rows.append((f"normalize f32 sum, n = {large_n}, shm (out= in the arena)",
                     mine, theirs, 1.1))
        rows.append(("  the same, result a new arena array", mine_new, theirs, None))
    finally:
        if proc is not None and not stop_daemon("py_bench", proc):
            status = 1

    print(f"| py_bench{' --quick' if a.quick else ''} ({backend}) | gpuq Python p50 | "
          f"libgpuq p50 | Python / libgpuq | target | met | errors |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for what, mine, theirs, target in rows:
        our_p50, peer_p50 = median_p50(mine), median_p50(theirs)
        ratio = our_p50 / peer_p50 if peer_p50 == peer_p50 and peer_p50 else float("nan")
        met = "" if target is None else ("yes" if ratio <= target else "NO")
        nerr = sum(int(t.get("errors", 0)) for t in mine + theirs)
        print(f"| {what} | {fmt_us(our_p50)} | {fmt_us(peer_p50)} | "
              f"{ratio:.2f}x | {'' if target is None else f'<= {target}x'} | {met} | {nerr} |")
        for t in mine + theirs:
            if "failed" in t:
                print(f"py_bench: {what.strip()}: {t['failed']}", file=sys.stderr)
        if nerr:
            status = 1
    for what, mine, theirs, target in rows:
        if target is not None:
            pairs = [f"{m.get('p50_us', float('nan')):.1f}/{t.get('p50_us', float('nan')):.1f}"
                     for m, t in zip(mine, theirs)]
            print(f"rounds' p50s, ours/libgpuq (us), {what}: {' '.join(pairs)}")
    print("Each side's p50: the median of its rounds' p50s (a new process and connection "
          "per round). Ratios are of times (lower is faster).")
    print(f"py_bench: {'FAILED (errors above)' if status else 'ok'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
