#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/peer_torch.py - the PyTorch peer: gpuq_bench's GPU rows done by a
user's own process with PyTorch on the same GPU, in the same run.

Each row is what a PyTorch user pays for one request of the same shape as
gpuq_bench's row of the same name: the input already in (pinned) host
memory, copied to the device, the op, the result copied back, synchronized.
Times are wall clock per request (perf_counter around the whole round trip,
after warm-up); p50 and p99 over the repetitions. Results are checked
against numpy in float64 on the CPU; a wrong result or any exception makes
the row an error and the script exit 1. Without torch or a GPU it prints
why and exits 3 (bench/gpu_run.sh marks the step skipped).

  python3 bench/peer_torch.py [--quick] [--small-only] [--sum-n N]...

--small-only: the first row alone (the 4 KiB serial normalize; bench/load.py
sets it beside gpuqctl bench's serial row), and a flat float32 sum normalize
of N values ("normalize f32 sum, n = N", pinned host memory, as the large
row of that name) for each --sum-n N (bench/load.py: 2^20 and 2^24, beside
libgpuq's blocking gpuq_normalize_1d).
"""
import sys
import time

import numpy as np


def pct(ts, q):
    ts = sorted(ts)
    return ts[min(len(ts) - 1, int(q * len(ts)))]


def fmt_us(t):
    return f"{t * 1e6:.1f} us" if t < 1e-3 else f"{t * 1e3:.2f} ms"


def sum_sizes(argv):
    """The N of each --sum-n N (or --sum-n=N); exits 2 on a bad one."""
    out = []
    for k, arg in enumerate(argv):
        v = arg[len("--sum-n="):] if arg.startswith("--sum-n=") else \
            (argv[k + 1] if arg == "--sum-n" and k + 1 < len(argv) else None)
        if arg.startswith("--sum-n"):
            if v is None or not v.isdigit() or int(v) < 1:
                print(f"peer_torch: bad --sum-n {v!r} (a count of values, 1 or more)",
                      file=sys.stderr)
                sys.exit(2)
            out.append(int(v))
    return out


def main():
    quick = "--quick" in sys.argv[1:]
    small_only = "--small-only" in sys.argv[1:]
    sums = sum_sizes(sys.argv[1:])
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no peer
        print(f"peer_torch: no torch: {e}")
        return 3
    if not torch.cuda.is_available():
        print("peer_torch: torch has no CUDA device")
        return 3
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    errors = 0
    rows = []

    def run(what, reps, step, check, note=None):
        nonlocal errors
        try:
            out = step()  # warm-up: allocator, kernels, cuBLAS handles
            torch.cuda.synchronize()
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                out = step()
                torch.cuda.synchronize()
                ts.append(time.perf_counter() - t0)
            bad = check(out)
            if bad:
                raise ValueError(bad)
            fig = f"p50 {fmt_us(pct(ts, 0.5))}, p99 {fmt_us(pct(ts, 0.99))}"
            rows.append((what, fig + (f", {note(out)}" if note else ""), 0))
        except Exception as e:  # noqa: BLE001 - every failure is a counted error
            errors += 1
            print(f"peer_torch: {what}: {e}", file=sys.stderr)
            rows.append((what, "n/a", 1))

    def close(got, want, tol, floor=0.0):
        got = np.asarray(got, dtype=np.float64)
        err = (np.abs(got - want) / np.maximum(np.abs(want), floor if floor else 1e-300)).ravel()
        i = int(np.argmax(err))
        return "" if err[i] <= tol else f"element {i}: {got.flat[i]!r} vs {want.flat[i]!r}"

    def normalize_row(what, n, reps, rows=1):
        # rows == 1: x / x.sum() over the whole array; else each row by its
        # l2 norm, x / x.norm(dim=1, keepdim=True)
        x = (1.0 + (np.arange(n) % 997)).astype(np.float32).reshape(rows, n // rows)
        h = torch.from_numpy(x).pin_memory()
        o = torch.empty_like(h).pin_memory()

        def step():
            d = h.to(dev, non_blocking=True)
            if rows == 1:
                o.copy_(d / d.sum(dtype=torch.float64).to(torch.float32), non_blocking=True)
            else:
                o.copy_(d / torch.linalg.vector_norm(d, dim=1, keepdim=True), non_blocking=True)
            return o

        xd = x.astype(np.float64)
        want = xd / xd.sum() if rows == 1 else xd / np.sqrt((xd * xd).sum(1, keepdims=True))
        run(what, reps, step, lambda r: close(r.numpy(), want, 1e-5))

    def haversine_row(n, reps):
        # gpuq_bench's points (bench_gpuq.c job_init), to (30, 101) on a
        # sphere of 6371.0088 km, the haversine formula in torch ops
        i = np.arange(n, dtype=np.uint64)
        lat = -90.0 + 180.0 * ((i * np.uint64(2654435761)) % np.uint64(100003)).astype(np.float64) / 100003.0
        lon = -180.0 + 360.0 * (((i * np.uint64(40503)) ^ (i >> np.uint64(3))) % np.uint64(100019)).astype(np.float64) / 100019.0
        pts = np.stack([lat, lon], axis=1)
        h = torch.from_numpy(pts).pin_memory()
        o = torch.empty(n, dtype=torch.float64).pin_memory()
        tlat, tlon, rad = np.deg2rad(30.0), np.deg2rad(101.0), 6371.0088

        def step():
            p = torch.deg2rad(h.to(dev, non_blocking=True))
            a = torch.sin((tlat - p[:, 0]) * 0.5) ** 2 + torch.cos(p[:, 0]) * np.cos(tlat) * torch.sin((tlon - p[:, 1]) * 0.5) ** 2
            o.copy_(2.0 * rad * torch.asin(torch.sqrt(a.clamp(0.0, 1.0))), non_blocking=True)
            return o

        la, lo = np.deg2rad(lat), np.deg2rad(lon)
        a = np.sin((tlat - la) * 0.5) ** 2 + np.cos(la) * np.cos(tlat) * np.sin((tlon - lo) * 0.5) ** 2
        want = 2.0 * rad * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
        run(f"haversine f64 to a point, n = {n}", reps, step, lambda r: close(r.numpy(), want, 1e-9, 1.0))

    def pairwise_row(n, d, reps, mode, tol):
        i = np.arange(n * d, dtype=np.uint64)
        x = (((i * np.uint64(2654435761)) % np.uint64(1000)).astype(np.float32) / 1000.0).reshape(n, d)
        h = torch.from_numpy(x).pin_memory()
        o = torch.empty((n, n), dtype=torch.float32).pin_memory()

        def step():
            a = h.to(dev, non_blocking=True)
            b = h.to(dev, non_blocking=True)  # gpuq's request carries y = x as a second array
            o.copy_(torch.cdist(a, b, compute_mode=mode), non_blocking=True)
            return o

        xs = x.astype(np.float64)[: min(n, 64)]
        want = np.sqrt(((xs[:, None, :] - x.astype(np.float64)[None, :, :]) ** 2).sum(-1))
        how = "" if mode.startswith("donot") else " (cdist's matmul form)"
        note = None
        if how:
            def note(r):
                return f"max abs err {np.abs(r.numpy()[: len(xs)] - want).max():.1e}"
        run(f"pairwise euclidean f32, {n}x{n}, d = {d}{how}", reps, step,
            lambda r: close(r.numpy()[: len(xs)], want, tol, 1.0), note)

    def pairwise_kernel_row(n, d, reps, mode, tol):
        # torch.cdist alone, timed with CUDA events, the input already on
        # the device: the figure to set beside gpuq_bench_kernels' rows
        # (bench/bench_kernels.c times gpuq's kernels the same way).
        nonlocal errors
        how = "direct" if mode.startswith("donot") else "matmul form"
        what = f"pairwise euclidean f32, {n}x{n}, d = {d}, kernel only (cdist, {how})"
        try:
            i = np.arange(n * d, dtype=np.uint64)
            x = (((i * np.uint64(2654435761)) % np.uint64(1000)).astype(np.float32) / 1000.0).reshape(n, d)
            a = torch.from_numpy(x).to(dev)
            b = a.clone()
            torch.cdist(a, b, compute_mode=mode)  # warm-up
            torch.cuda.synchronize()
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            ts = []
            for _ in range(reps):
                e0.record()
                out = torch.cdist(a, b, compute_mode=mode)
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1) / 1e3)
            xs = x.astype(np.float64)[: min(n, 64)]
            want = np.sqrt(((xs[:, None, :] - x.astype(np.float64)[None, :, :]) ** 2).sum(-1))
            bad = close(out[: len(xs)].cpu().numpy(), want, tol, 1.0)
            if bad:
                raise ValueError(bad)
            rows.append((what, f"p50 {fmt_us(pct(ts, 0.5))}, min {fmt_us(min(ts))}", 0))
        except Exception as e:  # noqa: BLE001 - every failure is a counted error
            errors += 1
            print(f"peer_torch: {what}: {e}", file=sys.stderr)
            rows.append((what, "n/a", 1))

    def grid_row(n, reps):
        lat0, lat1, lon0, lon1, tlat, tlon, rad = -90.0, 90.0, -180.0, 180.0, 30.0, 101.0, 6371.0088
        o = torch.empty((n, n), dtype=torch.float64).pin_memory()

        def step():
            la = torch.deg2rad(torch.linspace(lat0, lat1, n, dtype=torch.float64, device=dev))[:, None]
            lo = torch.deg2rad(torch.linspace(lon0, lon1, n, dtype=torch.float64, device=dev))[None, :]
            p2, l2 = np.deg2rad(tlat), np.deg2rad(tlon)
            a = torch.sin((p2 - la) * 0.5) ** 2 + torch.cos(la) * np.cos(p2) * torch.sin((l2 - lo) * 0.5) ** 2
            o.copy_(2.0 * rad * torch.asin(torch.sqrt(a.clamp(0.0, 1.0))), non_blocking=True)
            return o

        la = np.deg2rad(np.linspace(lat0, lat1, n))[:, None]
        lo = np.deg2rad(np.linspace(lon0, lon1, n))[None, :]
        p2, l2 = np.deg2rad(tlat), np.deg2rad(tlon)
        a = np.sin((p2 - la) * 0.5) ** 2 + np.cos(la) * np.cos(p2) * np.sin((l2 - lo) * 0.5) ** 2
        want = 2.0 * rad * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
        run(f"grid f64, {n}x{n}", reps, step, lambda r: close(r.numpy(), want, 1e-9, 1.0))

    def knn_row(m, n, d, k, reps):
        # X is m rows of Y with a small offset, so the nearest neighbour of
        # query i is row i * (n // m) of Y: the check does not need the full
        # numpy matrix, only the distances of a few queries to all of Y.
        rng = np.random.default_rng(7)
        y = rng.standard_normal((n, d), dtype=np.float32)
        x = y[:: n // m][:m] + np.float32(1e-3)
        hx = torch.from_numpy(x).pin_memory()
        hy = torch.from_numpy(y).pin_memory()
        od = torch.empty((m, k), dtype=torch.float32).pin_memory()
        oi = torch.empty((m, k), dtype=torch.int64).pin_memory()

        def step():
            a = hx.to(dev, non_blocking=True)
            b = hy.to(dev, non_blocking=True)
            full = torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist_if_necessary")
            v, i = torch.topk(full, k, dim=1, largest=False, sorted=True)
            del full
            od.copy_(v, non_blocking=True)
            oi.copy_(i, non_blocking=True)
            return od, oi

        def check(r):
            dist, idx = r[0].numpy(), r[1].numpy()
            for q in (0, 1, m // 2, m - 1):
                ref = np.sqrt(((y.astype(np.float64) - x[q].astype(np.float64)) ** 2).sum(1))
                kth = np.sort(ref)[k - 1]
                if idx[q, 0] != q * (n // m):
                    return f"query {q}: nearest {idx[q, 0]}, want {q * (n // m)}"
                if np.any(ref[idx[q]] > kth + 1e-3):
                    return f"query {q}: a returned neighbour is not among the {k} nearest"
                bad = close(dist[q], ref[idx[q]], 1e-2, 1.0)
                if bad:
                    return f"query {q}: {bad}"
            return ""

        run(f"knn euclidean f32, m = {m}, n = {n}, d = {d}, k = {k} (cdist + topk)", reps, step,
            check)

    normalize_row("normalize 4 KiB f32, 1 in flight", 1024, 200 if quick else 2000)
    for n in sums:  # 25 repetitions as the large rows; more of the small ones
        normalize_row(f"normalize f32 sum, n = {n}", n, 25 if n >= (1 << 22) else 100)
    if not small_only:
        # gpuq_bench's large rows, by the same names (bench/targets.py joins them)
        n = 100000 if quick else 16777216
        # 25 repetitions of the data-plane rows, as gpuq_bench's: p50 of 7 moved by
        # up to 20% between runs on an H200 guest
        normalize_row(f"normalize f32 sum, n = {n}", n, 3 if quick else 25)
        r, c = (64, 512) if quick else (4096, 4096)
        normalize_row(f"normalize f32 l2 rows, {r}x{c}", r * c, 3 if quick else 25, rows=r)
        haversine_row(10000 if quick else 1000000, 3 if quick else 25)
        # cdist's direct form (as accurate as gpuq's tiled kernel: the row that
        # compares), and its default for large inputs, the matmul identity
        # |x|^2 + |y|^2 - 2 x.y: faster, with float32 cancellation (0.003 for a
        # zero distance on this data on an H100; checked to 1e-2, the error shown).
        pn, pd = (256, 16) if quick else (4096, 64)
        pairwise_row(pn, pd, 3, "donot_use_mm_for_euclid_dist", 1e-4)
        pairwise_row(pn, pd, 3 if quick else 7, "use_mm_for_euclid_dist_if_necessary", 1e-2)
        pairwise_kernel_row(pn, pd, 3 if quick else 20, "donot_use_mm_for_euclid_dist", 1e-4)
        pairwise_kernel_row(pn, pd, 3 if quick else 20, "use_mm_for_euclid_dist_if_necessary", 1e-2)
        grid_row(200 if quick else 1000, 3 if quick else 25)
        if quick:
            knn_row(256, 20000, 16, 10, 3)
        else:
            knn_row(4096, 1000000, 64, 10, 3)

    name = torch.cuda.get_device_name(0)
    print(f"| PyTorch {torch.__version__} in-process ({name}) | PyTorch | errors |")
    print("|---|---|---:|")
    for what, fig, err in rows:
        print(f"| {what} | {fig} | {err} |")
    print(f"peer_torch: {errors} errors in {len(rows)} rows")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
