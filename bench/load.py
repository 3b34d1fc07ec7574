#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""load.py - issue 12's load table, measured with gpuqctl bench.

    bench/load.py [--gpuqctl PATH] [--gpuqd PATH] [--device auto|cuda|cpu]
                  [--socket PATH] [--quick] [--gpuqd-arg ARG]...

Starts its own gpuqd (--gpuqd, default build/server/gpuqd; --device, default
auto; each --gpuqd-arg added to its command line) on a temporary socket, or
uses the one at --socket, and runs `gpuqctl --json bench` (--gpuqctl,
default build/client/cli/gpuqctl) for each row:

  1. normalize of 1024 float32 by socket, 1 client, 1 in flight (the serial
     round trip; on a CUDA gpuqd its p50 is set beside PyTorch's in-process,
     bench/peer_torch.py --small-only run by this Python: target <= 1.0x);
  2. the same, 1 client x 8 in flight;
  3. 16 clients x 8 in flight (target: >= 150k req/s);
  4. 64 clients x 8 in flight (target: >= 150k req/s);
  5. isolation: one high-priority client's p99 (1 in flight, 1024 values)
     while 4 low-priority clients stream 16 MiB normalizes (2 in flight
     each), divided by its p99 with nothing else running (target: <= 2x).

--quick: short runs and a 1 MiB bulk load (CPU backend, CI). Prints a
Markdown table (load, req/s, p50, p99, errors, target, met) and a last line
"load: ok" or "load: FAILED". Exit status: 0; 1 when any bench run failed
(an error reply, a wrong result, a non-zero exit); 2 on bad usage or when
no daemon answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from benchutil import start_daemon, stop_daemon  # bench/, the script's directory

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


class Bench:
    def __init__(self, ctl: str, sock: str):
        self.ctl = ctl
        self.sock = sock
        self.failures: list = []

    def cmd(self, args: list) -> list:
        return [self.ctl, "--socket", self.sock, "--json", "bench", *args]

    def parse(self, what: str, rc: int, out: str, err: str) -> dict:
        try:
            res = json.loads(out)
        except ValueError:
            res = {}
        if rc != 0 or not isinstance(res, dict) or "req_s" not in res:
            first = (err.strip().splitlines() or [f"exit {rc}"])[-1]
            self.failures.append(f"{what}: exit {rc}: {first}")
            if not isinstance(res, dict):
                res = {}
            res.setdefault("errors", res.get("errors", 1) or 1)
        return res

    def run(self, what: str, args: list) -> dict:
        r = subprocess.run(self.cmd(args), capture_output=True, text=True)
        return self.parse(what, r.returncode, r.stdout, r.stderr)


def torch_serial_p50():
    """PyTorch's p50 (us) for the same serial normalize, in-process
    (bench/peer_torch.py --small-only); None without torch or a GPU."""
    r = subprocess.run([sys.executable, os.path.join(HERE, "peer_torch.py"), "--small-only"],
                       capture_output=True, text=True)
    m = re.search(r"^\| normalize 4 KiB f32, 1 in flight \| p50 ([\d.]+) (us|ms)", r.stdout,
                  re.M)
    if r.returncode != 0 or not m:
        print(f"load: no PyTorch figure (peer_torch.py exit {r.returncode}: "
              f"{(r.stdout.strip().splitlines() or [''])[0]})", file=sys.stderr)
        return None
    return float(m.group(1)) * (1000.0 if m.group(2) == "ms" else 1.0)


def fmt_us(v) -> str:
    if not isinstance(v, (int, float)):
        return "n/a"
    return f"{v:.1f} us" if v < 1e4 else f"{v / 1e3:.2f} ms"


def fmt_rate(v) -> str:
    return f"{v:,.0f}" if isinstance(v, (int, float)) else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuqctl", default=os.path.join(REPO, "build", "client", "cli", "gpuqctl"))
    ap.add_argument("--gpuqd", default=os.path.join(REPO, "build", "server", "gpuqd"))
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--socket", help="use the gpuqd listening here")
    ap.add_argument("--quick", action="store_true", help="short runs (CPU backend, CI)")
    ap.add_argument("--gpuqd-arg", action="append", default=[], help="added to gpuqd's flags")
    a = ap.parse_args()
    if not os.access(a.gpuqctl, os.X_OK):
        print(f"load: no {a.gpuqctl} (build gpuqctl, or --gpuqctl)", file=sys.stderr)
        return 2
    dur, warm = ("0.5", "0.2") if a.quick else ("3", "0.5")
    bulk = str(1 << 18) if a.quick else str(1 << 22)  # float32 values: 1 MiB or 16 MiB

    tmp = None
    proc = None
    sock = a.socket
    if sock is None:
        tmp = tempfile.mkdtemp(prefix="gpuq-load-")
        sock = os.path.join(tmp, "gpuqd.sock")
        proc = start_daemon("load", a.gpuqd, a.device, sock, a.gpuqd_arg)
    b = Bench(a.gpuqctl, sock)
    rows = []
    status = 0
    try:
        probe = subprocess.run([a.gpuqctl, "--socket", sock, "ping"], capture_output=True,
                               text=True)
        if probe.returncode == 3:
            print(f"load: {probe.stderr.strip()}", file=sys.stderr)
            return 2
        small = ["--size", "1024", "--duration", dur, "--warmup", warm]
        r = b.run("1 client x 1 in flight", small + ["--clients", "1", "--depth", "1"])
        torch_p50 = torch_serial_p50() if r.get("backend") == "cuda" else None
        if torch_p50 is None:
            rows.append(("normalize 1024 f32, 1 client x 1 in flight", r, "", None))
        else:
            ratio = r["p50_us"] / torch_p50 if isinstance(r.get("p50_us"), (int, float)) else None
            rows.append((f"normalize 1024 f32, 1 client x 1 in flight (PyTorch in-process "
                         f"p50 {torch_p50:.1f} us; x{ratio:.2f})" if ratio is not None else
                         "normalize 1024 f32, 1 client x 1 in flight", r,
                         "p50 <= 1.0x PyTorch", None if ratio is None else ratio <= 1.0))
        for what, c, d, target in (("1 client x 8 in flight", 1, 8, None),
                                   ("16 clients x 8 in flight", 16, 8, 150e3),
                                   ("64 clients x 8 in flight", 64, 8, 150e3)):
            r = b.run(what, small + ["--clients", str(c), "--depth", str(d)])
            met = None if target is None else (r.get("req_s", 0) >= target)
            rows.append((f"normalize 1024 f32, {what}", r, f">= {target / 1e3:.0f}k req/s"
                         if target else "", met))

        # isolation: the high-priority client alone, then beside the bulk load
        hi = small + ["--priority", "high"]
        alone = b.run("high priority alone", hi)
        bulk_cmd = b.cmd(["--size", bulk, "--clients", "4", "--depth", "2", "--priority", "low",
                          "--transport", "auto", "--warmup", "0",
                          "--duration", str(float(dur) + float(warm) + 1.5)])
        bg = subprocess.Popen(bulk_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the bulk clients are connected and streaming
        loaded = b.run("high priority under load", hi)
        bout, berr = bg.communicate(timeout=600)
        bulk_res = b.parse("low-priority bulk", bg.returncode, bout, berr)
        ratio = None
        if isinstance(alone.get("p99_us"), (int, float)) and alone["p99_us"] > 0 and \
                isinstance(loaded.get("p99_us"), (int, float)):
            ratio = loaded["p99_us"] / alone["p99_us"]
        rows.append(("high priority 1024 f32, alone", alone, "", None))
        rows.append((f"the same beside 4 low x 2 of {int(bulk) * 4 >> 20} MiB "
                     f"(p99 x{ratio:.1f} of alone)" if ratio is not None else
                     "the same beside the low-priority bulk load", loaded, "p99 <= 2x alone",
                     None if ratio is None else ratio <= 2.0))
        rows.append((f"  the low-priority bulk load ({bulk_res.get('transport', '?')})", bulk_res,
                     "", None))
    finally:
        if proc is not None and not stop_daemon("load", proc):
            status = 1

    print("| load | req/s | p50 | p99 | errors | target | met |")
    print("|---|---:|---:|---:|---:|---|---|")
    for what, r, target, met in rows:
        print(f"| {what} | {fmt_rate(r.get('req_s'))} | {fmt_us(r.get('p50_us'))} | "
              f"{fmt_us(r.get('p99_us'))} | {r.get('errors', '?')} | {target} | "
              f"{'' if met is None else ('yes' if met else 'NO')} |")
    for f in b.failures:
        print(f"load: {f}", file=sys.stderr)
    if b.failures:
        status = 1
    print(f"load: {'FAILED (errors above)' if status else 'ok'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
