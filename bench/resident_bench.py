#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""resident_bench.py - resident arrays (issue 29) beside PyTorch in-process.

    bench/resident_bench.py [--gpuqd PATH] [--device auto|cuda|cpu] [--quick]
                            [--n N] [--d D] [--k K] [--reps R] [--clients C]
                            [--restart-bytes N] [--state-dir-parent DIR]

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
  c32    C (32) client processes, one 1-query knn each in flight (each
         client its own query, from a fixed seed), against the same base:
         queries/s over all of them, twice: on that gpuqd (batch_max at
         its default, so cross-session batching of knn against a resident
         array is on) and on a second one started with --batch-max 0
         (each request alone), the peer column. Every client's results,
         distances bit for bit and indices, must be identical between the
         two runs (and over a client's own calls). The batched daemon's
         status counters "batches" and "batched" over the run are shown.
         Target: >= 8x the queries/s of --batch-max 0.
  restart
         a third gpuqd with --state-dir (a fresh directory under
         --state-dir-parent, default the temporary directory; removed at
         the end): --restart-bytes (4 GiB; 64 MiB with --quick; 0: no
         such row) of float32 (rows x 128) arrays, 8 of 512 MiB, put with
         persist=True (each generated from a seed, its blake2b and first
         and last rows kept, then freed), then SIGTERM and the same
         command again: the seconds from starting it until a ping is
         answered and until c.list() shows every array (persisted, of its
         bytes), and of the first c.get, every array then read back and
         checked against its hash. A second row shows the state directory's
         write throughput over the persisted puts (bytes / their seconds)
         and its filesystem. Target: every array listed within 10 s.

Every gpuq result is checked against the peer's (the distances to within
float32 rounding of the larger one's; the CPU backend without torch: against
numpy). --quick: a small base (N 20000), few repetitions, for the CPU
backend and CI; the peer then is numpy on the CPU. Rows with a target end
in " met" or " MISSED" (bench/gpu_run.sh counts them); a target missed never
changes the exit status. Exit 1 when a result is wrong or a call failed, 2
on bad usage.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import multiprocessing as mp
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))

import benchutil  # noqa: E402
import gpuq  # noqa: E402

GIB = 1 << 30
RESIDENT_BYTES_DEFAULT = 8 * GIB   # gpuqd's resident_bytes (PROTOCOL.md 6)
TOTAL_RESIDENT_DEFAULT = 32 * GIB  # and total_resident
STATE_DIR_MAX = 186                # gpuqd --help: --state-dir, at most 186 bytes
RESTART_COLS = 128
RESTART_PIECE = 512 << 20          # at most this many bytes an array


def p50(xs):
    return statistics.median(xs)


def fmt_s(s: float) -> str:
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.0f} us"


def fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def size_arg(s: str) -> int:
    """A byte count: digits with an optional K, M or G (1K = 1024)."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    try:
        v = int(s[:-1] if mult > 1 else s) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"not a size: {s!r}")
    return v


def fs_type(path: str) -> str:
    """The filesystem type path is on (from /proc/self/mountinfo), or '?'."""
    path = os.path.realpath(path)
    best, typ = "", "?"
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields = left.split()
                if len(fields) < 5 or not right:
                    continue
                mnt = fields[4].replace("\\040", " ")
                under = path == mnt or path.startswith(mnt.rstrip("/") + "/")
                if under and len(mnt) >= len(best):
                    best, typ = mnt, right.split()[0]
    except OSError:
        pass
    return typ


def worker(sock: str, idx: int, q: np.ndarray, k: int, n_calls: int, ready, start, out):
    """One client: its query's result first (the reference, and a warm
    call), then n_calls more once start is set, each compared with the
    first bit for bit. Puts (idx, seconds, calls, d, i, calls that
    differed, error or None) on out whatever happens."""
    said_ready = False
    try:
        c = gpuq.connect(sock, name="resident-bench")
        d0, i0 = c.knn(q, c.resident("base"), k)
        ready.put(idx)
        said_ready = True
        start.wait()
        differ = 0
        t0 = time.perf_counter()
        for _ in range(n_calls):
            d, i = c.knn(q, c.resident("base"), k)
            differ += d.dtype != d0.dtype or d.tobytes() != d0.tobytes() or \
                not np.array_equal(i, i0)
        out.put((idx, time.perf_counter() - t0, n_calls, d0, i0, differ, None))
        c.close()
    except BaseException as e:  # the parent must not wait for this one
        if not said_ready:
            ready.put(idx)
        out.put((idx, 0.0, 0, None, None, 0, f"{type(e).__name__}: {e}"))


def run_clients(sock: str, queries, k: int, n_calls: int):
    """len(queries) client processes, one each, one query in flight each;
    returns (queries/s, {idx: (d, i)}, errors: a list of strings)."""
    ready, out, start = mp.Queue(), mp.Queue(), mp.Event()
    procs = [mp.Process(target=worker, args=(sock, j, q, k, n_calls, ready, start, out))
             for j, q in enumerate(queries)]
    for pr in procs:
        pr.start()
    errs = []
    res = []
    try:
        for _ in procs:
            ready.get(timeout=120)
        t0 = time.perf_counter()
        start.set()
        res = [out.get(timeout=600) for _ in procs]
        wall = time.perf_counter() - t0
    except queue.Empty:
        errs.append("a client process did not answer in time")
        wall = float("inf")
        for pr in procs:
            if pr.is_alive():
                pr.kill()
    for pr in procs:
        pr.join()
        if pr.exitcode != 0:
            errs.append(f"client process {pr.pid} exited {pr.exitcode}")
    got = {}
    calls = 0
    for idx, _, n, d, i, differ, err in res:
        if err:
            errs.append(f"client {idx}: {err}")
            continue
        if differ:
            errs.append(f"client {idx}: {differ} of {n} calls differ from its first result")
        got[idx] = (d, i)
        calls += n
    return calls / wall, got, errs


def counters(c) -> tuple:
    st = c.status()
    return int(st.get("batches", 0)), int(st.get("batched", 0))


def c32_rows(a, base: np.ndarray, tmp: str, sock: str, c, rows, notes, daemons) -> int:
    """The c32 rows: the clients on the running gpuqd (sock, c: its
    client, "base" put; batch_max at its default), then on one with
    --batch-max 0. Returns the errors found; removes "base" and closes c."""
    bad = 0
    calls = 20 if a.quick else 200
    queries = [np.random.default_rng(1000 + j).standard_normal((1, a.d), dtype=np.float32)
               for j in range(a.clients)]
    b0 = counters(c)
    qps_b, got_b, errs = run_clients(sock, queries, a.k, calls)
    b1 = counters(c)
    c.remove("base")
    c.close()
    for e in errs:
        print(f"resident_bench: c32 (batched): {e}", file=sys.stderr)
    bad += len(errs)
    # the same clients, each request alone
    sock0 = os.path.join(tmp, "gpuqd-nobatch.sock")
    p0 = benchutil.start_daemon("resident_bench", a.gpuqd, a.device, sock0, ["--batch-max", "0"])
    daemons.append(p0)
    c0 = gpuq.connect(sock0, name="resident-bench")
    info = c0.put("base", base)
    if info.get("bytes") != base.nbytes:
        print(f"resident_bench: put (--batch-max 0) says {info}", file=sys.stderr)
        bad += 1
    u0 = counters(c0)
    qps_u, got_u, errs = run_clients(sock0, queries, a.k, calls)
    u1 = counters(c0)
    c0.remove("base")
    c0.close()
    daemons.remove(p0)
    bad += not benchutil.stop_daemon("resident_bench", p0)
    for e in errs:
        print(f"resident_bench: c32 (--batch-max 0): {e}", file=sys.stderr)
    bad += len(errs)
    same = 0
    for j in range(a.clients):
        if j not in got_b or j not in got_u:
            continue
        (db, ib), (du, iu) = got_b[j], got_u[j]
        if db.dtype == du.dtype and db.shape == du.shape and db.tobytes() == du.tobytes() \
                and np.array_equal(ib, iu):
            same += 1
        else:
            how = (f"distances max diff {float(np.max(np.abs(db.astype(np.float64) - du))):.3g}, "
                   f"indices {int(np.sum(ib != iu))} of {ib.size} differ"
                   if db.shape == du.shape and ib.shape == iu.shape else
                   f"shapes {db.shape} {ib.shape} against {du.shape} {iu.shape}")
            print(f"resident_bench: c32 client {j}: batched results differ from --batch-max 0's "
                  f"({how})", file=sys.stderr)
            bad += 1
    ratio = qps_b / qps_u if qps_u > 0 and math.isfinite(qps_b) else 0.0
    rows.append((f"{a.clients} clients x 1 query in flight", f"{qps_b:,.0f} q/s",
                 f"{qps_u:,.0f} q/s (--batch-max 0)", ratio, ">= 8x", ratio >= 8))
    notes.append(f"c32: results of {same} of {a.clients} clients identical with and without "
                 f"batching ({calls} calls each); batched gpuqd: batches {b1[0] - b0[0]}, "
                 f"batched {b1[1] - b0[1]} over the run (--batch-max 0: {u1[0] - u0[0]}, "
                 f"{u1[1] - u0[1]})")
    return bad


def relaunch(p: subprocess.Popen, sock: str) -> subprocess.Popen:
    """gpuqd again with p's command line (benchutil.start_daemon's), its
    log appended to sock + ".log"; does not wait."""
    log = open(sock + ".log", "ab")
    q = subprocess.Popen(p.args, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return q


def digest(arr: np.ndarray) -> str:
    return hashlib.blake2b(memoryview(np.ascontiguousarray(arr)).cast("B"),
                           digest_size=16).hexdigest()


def restart_rows(a, tmp: str, rows, notes, daemons, dirs) -> int:
    """The restart rows (see the docstring); returns the errors found."""
    bad = 0
    total = a.restart_bytes
    row_bytes = RESTART_COLS * 4
    n_arr = max(8, -(-total // RESTART_PIECE))
    n_rows = total // row_bytes
    per = [n_rows // n_arr + (j < n_rows % n_arr) for j in range(n_arr)]
    per = [r for r in per if r]
    parent = os.path.abspath(a.state_dir_parent or tempfile.gettempdir())
    state = tempfile.mkdtemp(prefix="gpuq-state-", dir=parent)
    dirs.append(state)
    if len(os.fsencode(state)) > STATE_DIR_MAX:
        print(f"resident_bench: the state directory {state} is over {STATE_DIR_MAX} bytes",
              file=sys.stderr)
        return 1
    extra = ["--state-dir", state]
    if total > RESIDENT_BYTES_DEFAULT:
        extra += ["--resident-bytes", str(total),
                  "--total-resident", str(max(total, TOTAL_RESIDENT_DEFAULT))]
    rsock = os.path.join(tmp, "gpuqd-restart.sock")
    p = benchutil.start_daemon("resident_bench", a.gpuqd, a.device, rsock, extra)
    daemons.append(p)
    c = gpuq.connect(rsock, name="resident-bench")
    kept = {}
    put_s = 0.0
    put_bytes = 0
    for j, r in enumerate(per):
        name = f"persist-{j}"
        arr = np.random.default_rng(2900 + j).random((r, RESTART_COLS), dtype=np.float32)
        kept[name] = ((r, RESTART_COLS), digest(arr), arr[0].copy(), arr[-1].copy())
        t0 = time.perf_counter()
        info = c.put(name, arr, persist=True)
        put_s += time.perf_counter() - t0
        put_bytes += int(info.get("bytes", 0))
        del arr
    if put_bytes != total:
        print(f"resident_bench: restart: the persisted puts stored {put_bytes} bytes, "
              f"not {total}", file=sys.stderr)
        bad += 1
    listed = {e["name"]: e for e in c.list()}
    if any(not listed.get(n, {}).get("persist") for n in kept):
        print("resident_bench: restart: list before the restart does not show every array "
              "persisted", file=sys.stderr)
        bad += 1
    c.close()
    daemons.remove(p)
    if not benchutil.stop_daemon("resident_bench", p):
        return bad + 1

    def complete(listing) -> bool:
        by = {e["name"]: e for e in listing}
        return all(n in by and by[n].get("persist") and by[n].get("bytes") == s[0] * s[1] * 4
                   and list(by[n].get("shape", ())) == list(s) and by[n].get("dtype") == "f32"
                   for n, (s, *_) in kept.items())

    limit = 60 if a.quick else 300
    t0 = time.perf_counter()
    p = relaunch(p, rsock)
    daemons.append(p)
    c = None
    serve_s = list_s = None
    while time.perf_counter() - t0 < limit and p.poll() is None:
        try:
            c = gpuq.connect(rsock, name="resident-bench", timeout=limit)
            c.ping()
            serve_s = time.perf_counter() - t0
            break
        except (gpuq.Error, OSError):
            if c is not None:
                c.close()
                c = None
            time.sleep(0.005)
    if serve_s is None:
        print(f"resident_bench: restart: gpuqd did not answer a ping within {limit} s "
              f"(exit {p.poll()}; log {rsock}.log)", file=sys.stderr)
        return bad + 1
    while time.perf_counter() - t0 < limit:
        if complete(c.list()):
            list_s = time.perf_counter() - t0
            break
        time.sleep(0.005)
    if list_s is None:
        print(f"resident_bench: restart: list did not show every array within {limit} s: "
              f"{[(e['name'], e.get('bytes')) for e in c.list()]}", file=sys.stderr)
        c.close()
        return bad + 1
    get_s = None
    for name, (shape, h, first, last) in kept.items():
        t1 = time.perf_counter()
        got = c.get(name)
        if get_s is None:
            get_s = time.perf_counter() - t1
        if got.dtype != np.float32 or got.shape != shape or not np.array_equal(got[0], first) \
                or not np.array_equal(got[-1], last) or digest(got) != h:
            print(f"resident_bench: restart: {name} read back differs from what was put",
                  file=sys.stderr)
            bad += 1
        del got
    c.close()
    daemons.remove(p)
    bad += not benchutil.stop_daemon("resident_bench", p)
    rows.append((f"restart, {fmt_bytes(total)} persisted", fmt_s(serve_s),
                 f"list complete {fmt_s(list_s)}; 1st get {fmt_s(get_s)}", None, "<= 10 s",
                 list_s <= 10))
    rows.append(("persisted puts (state dir writes)", f"{total / 1e9 / put_s:.2f} GB/s",
                 f"{len(per)} arrays, {fmt_s(put_s)}; {fs_type(state)}", None, "", None))
    notes.append(f"restart: {len(per)} arrays of {fmt_bytes(per[0] * row_bytes)} under "
                 f"{parent}; serving again (ping) {serve_s:.3f} s, every array listed "
                 f"{list_s:.3f} s after the start; each read back intact")
    return bad


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
    ap.add_argument("--restart-bytes", type=size_arg, default=None,
                    help="bytes persisted for the restart row (K/M/G; default 4G, "
                         "64M with --quick; 0: no restart row)")
    ap.add_argument("--state-dir-parent", default=None,
                    help="where the restart row's state directory is made (default: "
                         "the temporary directory)")
    a = ap.parse_args()
    n = a.n or (20000 if a.quick else 1 << 20)
    reps = a.reps or (10 if a.quick else 200)
    if a.restart_bytes is None:
        a.restart_bytes = (64 << 20) if a.quick else 4 * GIB
    if n < a.k or a.d < 1 or reps < 1 or a.clients < 1:
        print("resident_bench: bad sizes", file=sys.stderr)
        return 2
    if a.restart_bytes % (RESTART_COLS * 4):
        print(f"resident_bench: --restart-bytes must be a multiple of {RESTART_COLS * 4} "
              "(rows of 128 float32)", file=sys.stderr)
        return 2
    if a.state_dir_parent is not None and not os.path.isdir(a.state_dir_parent):
        print(f"resident_bench: --state-dir-parent {a.state_dir_parent}: not a directory",
              file=sys.stderr)
        return 2
    parent = os.path.abspath(a.state_dir_parent or tempfile.gettempdir())
    if a.restart_bytes and len(os.fsencode(parent)) + len("/gpuq-state-12345678") > STATE_DIR_MAX:
        print(f"resident_bench: a state directory under {parent} would be over {STATE_DIR_MAX} "
              "bytes (gpuqd's --state-dir limit): --state-dir-parent a shorter one",
              file=sys.stderr)
        return 2
    rng = np.random.default_rng(29)
    base = rng.standard_normal((n, a.d), dtype=np.float32)
    qs = {"knn64": rng.standard_normal((64, a.d), dtype=np.float32),
          "knn1": rng.standard_normal((1, a.d), dtype=np.float32)}
    tmp = tempfile.mkdtemp(prefix="gpuq-resident-")
    sock = os.path.join(tmp, "gpuqd.sock")
    daemons = []  # the gpuqd processes running now
    dirs = []  # state directories, removed at the end
    done = False  # tmp (gpuqd's logs) is kept unless all went well
    bad = 0
    rows = []
    notes = []
    try:
        p = benchutil.start_daemon("resident_bench", a.gpuqd, a.device, sock)
        daemons.append(p)
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
            # where one call's time goes, as the server saw it (PROTOCOL.md 4)
            (_, tm) = c.knn(q, c.resident("base"), a.k, timing=True)
            t0 = time.perf_counter()
            c.ping()
            ping_s = time.perf_counter() - t0
            notes.append(f"{name}: one call with timing: queue {tm.queue_us:.0f} us, h2d "
                         f"{tm.h2d_us:.0f} us, kernels {tm.kernel_us:.0f} us, d2h "
                         f"{tm.d2h_us:.0f} us, server total {tm.total_us:.0f} us; a ping "
                         f"{ping_s * 1e6:.0f} us round trip")
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
        # C clients, one query each in flight: batched here, then alone
        bad += c32_rows(a, base, tmp, sock, c, rows, notes, daemons)
        daemons.remove(p)
        bad += not benchutil.stop_daemon("resident_bench", p)
        # restart with persisted arrays
        if a.restart_bytes:
            bad += restart_rows(a, tmp, rows, notes, daemons, dirs)
        done = True
    except (gpuq.Error, OSError) as e:
        print(f"resident_bench: {type(e).__name__}: {e}", file=sys.stderr)
        bad += 1
    finally:
        for p in daemons:
            benchutil.stop_daemon("resident_bench", p)
        for dr in dirs:
            shutil.rmtree(dr, ignore_errors=True)
        if done and not bad:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"resident_bench: gpuqd's logs kept in {tmp}", file=sys.stderr)
    print(f"resident arrays, {backend if 'backend' in dir() else '?'} backend, base {n} x {a.d} "
          f"float32, k {a.k}, {reps} reps")
    print(f"{'row':<36} {'gpuq':>14}  {'peer':<44} {'ratio':>6}  target")
    for r in rows:
        ratio = f"{r[3]:.2f}" if r[3] is not None else "-"
        met = "" if r[5] is None else ("met" if r[5] else "MISSED")
        print(f"{r[0]:<36} {r[1]:>14}  {r[2]:<44} {ratio:>6}  {r[4]} {met}")
    for line in notes:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
