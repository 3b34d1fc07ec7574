#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scale.py - issue 12's several-GPU row: one compute-bound load on every GPU
gpuqd sees, then on the first GPU alone, measured with gpuqctl bench.

    bench/scale.py [--gpuqctl PATH] [--gpuqd PATH] [--device cuda|cpu]
                   [--clients N] [--duration S] [--quick]

Starts gpuqd twice on a temporary socket: first as it is (every device),
then with CUDA_VISIBLE_DEVICES set to the first device only. Each time
`gpuqctl --json bench --op pairwise --size 4096 --dim 64 --dtype f32
--clients 32 --depth 2 --transport shm` runs (euclidean, 4096 x 4096 x 64:
a 64 MiB result per request, by shared memory, so the copies run at PCIe
speed and the kernels decide). gpuqd spreads sessions over its devices
(each new session goes to the device with the fewest).

Prints a Markdown table (devices, req/s, p50, p99, errors), then the ratio
of the two rates against the target (>= 1.8x with two GPUs) and a last line
"scale: ok" or "scale: FAILED". With one device the ratio is not a target.
--device cpu --quick: small sizes, the CPU backend (its one device both
times; CI checks the script with it). Exit status: 0; 1 when a bench run
failed; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from benchutil import start_daemon, stop_daemon  # bench/, the script's directory
from load import Bench, fmt_rate, fmt_us

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def devices(ctl: str, sock: str) -> int:
    """Devices the daemon at sock reports (gpuqctl --json status)."""
    r = subprocess.run([ctl, "--socket", sock, "--json", "status"], capture_output=True,
                       text=True)
    try:
        return len(json.loads(r.stdout).get("devices", []))
    except ValueError:
        return 0


def measure(a, env_devices, args) -> tuple:
    """Start gpuqd (CUDA_VISIBLE_DEVICES=env_devices unless None), run the
    bench; (devices, result, ok)."""
    tmp = tempfile.mkdtemp(prefix="gpuq-scale-")
    sock = os.path.join(tmp, "gpuqd.sock")
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env_devices is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = env_devices
    try:
        proc = start_daemon("scale", a.gpuqd, a.device, sock)
    finally:
        if env_devices is not None:
            if old is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = old
    b = Bench(a.gpuqctl, sock)
    try:
        ndev = devices(a.gpuqctl, sock)
        res = b.run(f"{env_devices or 'all'} devices", args)
    finally:
        ok = stop_daemon("scale", proc)
    for f in b.failures:
        print(f"scale: {f}", file=sys.stderr)
    return ndev, res, ok and not b.failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuqctl", default=os.path.join(REPO, "build", "client", "cli", "gpuqctl"))
    ap.add_argument("--gpuqd", default=os.path.join(REPO, "build", "server", "gpuqd"))
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--quick", action="store_true", help="small sizes and short runs (CPU, CI)")
    a = ap.parse_args()
    if not os.access(a.gpuqctl, os.X_OK):
        print(f"scale: no {a.gpuqctl} (build gpuqctl, or --gpuqctl)", file=sys.stderr)
        return 2
    size, dim, dur, clients = ("256", "16", "0.5", "4") if a.quick else \
        ("4096", "64", str(a.duration), str(a.clients))
    args = ["--op", "pairwise", "--size", size, "--dim", dim, "--dtype", "f32", "--clients",
            clients, "--depth", "2", "--transport", "shm", "--duration", dur, "--warmup",
            "0.2" if a.quick else "1"]
    n_all, r_all, ok_all = measure(a, None, args)
    n_one, r_one, ok_one = measure(a, "0", args)
    what = f"pairwise {size} x {size} x {dim} f32, {clients} clients x 2 in flight, shm"
    print("| load | devices | req/s | p50 | p99 | errors |")
    print("|---|---:|---:|---:|---:|---:|")
    for n, r in ((n_all, r_all), (n_one, r_one)):
        print(f"| {what} | {n} | {fmt_rate(r.get('req_s'))} | {fmt_us(r.get('p50_us'))} | "
              f"{fmt_us(r.get('p99_us'))} | {r.get('errors', '?')} |")
    rate_all, rate_one = r_all.get("req_s"), r_one.get("req_s")
    if isinstance(rate_all, (int, float)) and isinstance(rate_one, (int, float)) and rate_one > 0:
        ratio = rate_all / rate_one
        if n_all >= 2 and a.device == "cuda":
            print(f"scaling: x{ratio:.2f} with {n_all} devices against 1 (target >= 1.8x with "
                  f"2: {'yes' if ratio >= 1.8 else 'NO'})")
        else:
            print(f"scaling: x{ratio:.2f} ({n_all} device(s): not a target)")
    ok = ok_all and ok_one
    print(f"scale: {'ok' if ok else 'FAILED (errors above)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
