#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""resident_bench.py - resident arrays (issue 29) beside PyTorch in-process.

    bench/resident_bench.py [--gpuqd PATH] [--device auto|cuda|cpu] [--quick]
                            [--n N] [--d D] [--k K] [--reps R] [--clients C]

Starts its own gpuqd on a temporary socket and, with the Python client:

  put    the base (N x D float32, 1M x 128 = 512 MB by default) from an
         arena array (c.asarray): seconds and GB/s, beside a pinned host to
         device copy of the same bytes in PyTorch (the ceiling).
         Target: >= 0.8x the ceiling's GB/s.
  knn64  64 queries x D against the resident base, k = K (10), euclidean,
         one request at a time: p50 of c.knn(q, c.resident("base"), K),
         beside PyTorch with the base already on the GPU: the mm form of
         the distances + topk (and cdist + topk, shown). Target: <= 1.2x
         the mm form.
  knn1   the same with 1 query. Target: <= 1.5x.
  c32    C (32) client processes, one 1-query knn each in flight, against
         the same base: queries/s over all of them (cross-session batching
         is for a later part of the issue: this is its baseline).

Every gpuq result is checked against the peer's (the distances to within
float32 rounding of the larger one's; the CPU backend without torch: against
numpy). --quick: a small base (N 20000), few repetitions, for the CPU
backend and CI; the peer then is numpy on the CPU. Exit 1 when a result
is wrong or a call failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import benchutil  # noqa: E402
import gpuq  # noqa: E402


def p50(xs):
    return statistics.median(xs)


def fmt_s(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} us"


def worker(sock: str, q: np.ndarray, k: int, n_calls: int, start, out):
    c = gpuq.connect(sock, name="resident-bench")
    c.knn(q, c.resident("base"), k)  # warm
    start.wait()
    t0 = time.perf_counter()
    for _ in range(n_calls):
        c.knn(q, c.resident("base"), k)
    out.put((time.perf_counter() - t0, n_calls))
    c.close()


def torch_peer(base: np.ndarray, qs, k: int, reps: int):
    """The peer's figures, or None without torch and CUDA."""
    try:
        import torch
    except Exception:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    res = {}
    h = torch.from_numpy(base).pin_memory()
    d_base = torch.empty_like(h, device=dev)
    ts = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        d_base.copy_(h, non_blocking=True)
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
    res["h2d_s"] = min(ts)
    b2 = (d_base * d_base).sum(1)
    for name, q in qs.items():
        hq = torch.from_numpy(q).pin_memory()

        def mm_form():
            dq = hq.to(dev, non_blocking=True)
            dd = (dq * dq).sum(1, keepdim=True) - 2.0 * dq @ d_base.T + b2[None, :]
            v, i = torch.topk(dd.clamp_min_(0), k, dim=1, largest=False)
            return v.sqrt().cpu(), i.cpu()

        def cdist_form():
            dq = hq.to(dev, non_blocking=True)
            v, i = torch.topk(torch.cdist(dq, d_base), k, dim=1, largest=False)
            return v.cpu(), i.cpu()

        for form, fn in (("mm", mm_form), ("cdist", cdist_form)):
            for _ in range(5):
                fn()
            ts = []
            for _ in range(reps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                v, i = fn()
                ts.append(time.perf_counter() - t0)
            res[f"{name}_{form}_s"] = p50(ts)
            res[f"{name}_{form}_d"] = v.numpy()
    return res


def numpy_peer(base: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    d = ((q.astype(np.float64)[:, None, :] - base.astype(np.float64)[None, :, :]) ** 2).sum(2)
    return np.sqrt(np.sort(d, axis=1)[:, :k])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpuqd", default=os.path.join(ROOT, "build", "server", "gpuqd"))
    ap.add_argument("--device", default="auto")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--clients", type=int, default=32)
    a = ap.parse_args()
    n = a.n or (20000 if a.quick else 1 << 20)
    reps = a.reps or (10 if a.quick else 200)
    if n < a.k or a.d < 1 or reps < 1 or a.clients < 1:
        print("resident_bench: bad sizes", file=sys.stderr)
        return 2
    rng = np.random.default_rng(29)
    base = rng.standard_normal((n, a.d), dtype=np.float32)
    qs = {"knn64": rng.standard_normal((64, a.d), dtype=np.float32),
          "knn1": rng.standard_normal((1, a.d), dtype=np.float32)}
    tmp = tempfile.mkdtemp(prefix="gpuq-resident-")
    sock = os.path.join(tmp, "gpuqd.sock")
    p = benchutil.start_daemon("resident_bench", a.gpuqd, a.device, sock)
    bad = 0
    rows = []
    try:
        c = gpuq.connect(sock, name="resident-bench")
        backend = c.backend
        # put from an arena array
        ab = c.asarray(base)
        ts = []
        for _ in range(1 if a.quick else 3):
            t0 = time.perf_counter()
            info = c.put("base", ab)
            ts.append(time.perf_counter() - t0)
        put_s = min(ts)
        if info.get("bytes") != base.nbytes:
            print(f"resident_bench: put says {info}", file=sys.stderr)
            bad += 1
        got = c.get("base")
        if not np.array_equal(got, base):
            print("resident_bench: get differs from what was put", file=sys.stderr)
            bad += 1
        del got, ab
        ours = {}
        for name, q in qs.items():
            for _ in range(3):
                c.knn(q, c.resident("base"), a.k)
            tl = []
            for _ in range(reps):
                t0 = time.perf_counter()
                d, i = c.knn(q, c.resident("base"), a.k)
                tl.append(time.perf_counter() - t0)
            ours[name] = (p50(tl), d, i)
        peer = torch_peer(base, qs, a.k, reps) if backend == "cuda" else None
        gb = base.nbytes / 1e9
        if peer:
            ceil = gb / peer["h2d_s"]
            rows.append(("put 512 MB from an arena" if n == 1 << 20 else f"put {gb:.2f} GB",
                         f"{gb / put_s:.1f} GB/s", f"{ceil:.1f} GB/s (pinned H2D)",
                         (gb / put_s) / ceil, ">= 0.8x", (gb / put_s) / ceil >= 0.8))
        else:
            rows.append(("put from an arena", f"{gb / put_s:.2f} GB/s", "n/a", None, "", None))
        for name, lim in (("knn64", 1.2), ("knn1", 1.5)):
            t, d, _ = ours[name]
            if peer:
                ref = peer[f"{name}_mm_d"]
                tp = peer[f"{name}_mm_s"]
                rows.append((f"{name} vs resident base, p50", fmt_s(t),
                             f"{fmt_s(tp)} (mm+topk; cdist {fmt_s(peer[name + '_cdist_s'])})",
                             t / tp, f"<= {lim}x", t / tp <= lim))
            else:
                ref = numpy_peer(base, qs[name], a.k)
                rows.append((f"{name} vs resident base, p50", fmt_s(t), "n/a", None, "", None))
            tol = 1e-3 * max(1.0, float(np.max(np.abs(ref))))
            if not np.allclose(d, ref, rtol=1e-3, atol=tol):
                print(f"resident_bench: {name} distances differ from the peer's (max "
                      f"{float(np.max(np.abs(d - ref))):.3g})", file=sys.stderr)
                bad += 1
        # C clients, one query each in flight
        calls = 20 if a.quick else 200
        start = mp.Event()
        out = mp.Queue()
        procs = [mp.Process(target=worker, args=(sock, qs["knn1"], a.k, calls, start, out))
                 for _ in range(a.clients)]
        for pr in procs:
            pr.start()
        time.sleep(1.0)
        t0 = time.perf_counter()
        start.set()
        res = [out.get(timeout=600) for _ in procs]
        wall = time.perf_counter() - t0
        for pr in procs:
            pr.join()
            bad += pr.exitcode != 0
        qps = sum(r[1] for r in res) / wall
        rows.append((f"{a.clients} clients x 1 query in flight", f"{qps:,.0f} q/s",
                     "(cross-session batching: not yet)", None, "", None))
        c.remove("base")
        c.close()
    except gpuq.Error as e:
        print(f"resident_bench: {e}", file=sys.stderr)
        bad += 1
    finally:
        benchutil.stop_daemon("resident_bench", p)
    print(f"resident arrays, {backend if 'backend' in dir() else '?'} backend, base {n} x {a.d} "
          f"float32, k {a.k}, {reps} reps")
    print(f"{'row':<36} {'gpuq':>14}  {'peer':<44} {'ratio':>6}  target")
    for r in rows:
        ratio = f"{r[3]:.2f}" if r[3] is not None else "-"
        met = "" if r[5] is None else ("met" if r[5] else "MISSED")
        print(f"{r[0]:<36} {r[1]:>14}  {r[2]:<44} {ratio:>6}  {r[4]} {met}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
