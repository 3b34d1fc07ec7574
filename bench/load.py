#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""load.py - issue 28's load table (and issue 12's rows it keeps), every
figure and every ratio from this one run.

    bench/load.py [--gpuqctl PATH] [--gpuqd PATH] [--peer PATH]
                  [--device auto|cuda|cpu] [--socket PATH] [--quick]
                  [--gpuqd-arg ARG]...

Starts its own gpuqd (--gpuqd, default build/server/gpuqd; --device, default
auto; each --gpuqd-arg added to its command line) on a temporary socket, or
uses the one at --socket. Rows, each with our figure, the peer's or the
baseline's from this run, their ratio (ours / theirs: lower is faster), the
target and whether it was met:

  1. normalize of 1024 float32 by socket, 1 client, 1 in flight: p50 against
     PyTorch's in-process p50 (bench/peer_torch.py --small-only; <= 1.0x);
  2. 1 client x 8 in flight (req/s, no target);
  3. 16 clients x 8 in flight: >= 300k req/s;
  4. 64 clients x 8 in flight: >= 300k req/s;
  5. isolation: a high-priority client's p99 (1024 f32, 1 in flight) beside
     4 low-priority streamers of 16 MiB normalizes over the socket, 2 in
     flight each, divided by its p99 with the streamers idle (gpuqctl bench
     --bulk 4 --baseline: both measured in one command): <= 2x;
  6. the same with the streamers' arrays in arenas (--bulk-transport shm):
     <= 1.5x;
  7. the same as 5 with every session at normal priority: <= 4x (fair share);
  8. ping round trip of a high-priority session beside the 4 socket
     streamers (gpuqctl bench --op ping): p50 / its unloaded p50 <= 2x (<= 4x
     on a machine of 2 cores or fewer);
  9. the same pings' p99: <= 3 ms;
 10. libgpuq's blocking gpuq_normalize_1d of 16M float32 in the caller's own
     malloc'ed memory, transport auto (bench/py_bench.py --rows load, its
     gpuq_py_peer --mode auto), against PyTorch in-process from pinned memory
     (peer_torch.py --sum-n): <= 2x;
 11. the same of 1M float32: <= 2.5x;
 12. Python c.normalize(x), x a plain 16M float32 ndarray, against row 10's
     libgpuq figure (py_bench.py, the same run): <= 1.15x;
 13. Python c.normalize(x) of 1024 float32 in an arena array (c.asarray)
     against the same with a plain ndarray: <= 1.0x.

PyTorch's rows need a CUDA gpuqd and torch with a GPU: otherwise the peer
is "n/a (no GPU)" (or "n/a (no torch)") and the row's target is not judged.
--quick: short runs, 1 MiB streamers and 1M/256k libgpuq and Python rows
(CPU backend, CI). Prints a Markdown table (load, ours, peer or baseline,
ratio, target, met, errors) and a last line "load: ok" or "load: FAILED".
Exit status: 0; 1 when any run failed (an error reply, a wrong result, a
non-zero exit, a tool missing: each said on stderr); 2 on bad usage or when
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

from benchutil import start_daemon, stop_daemon  # bench/, the script's directory

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
NO_GPU = "n/a (no GPU)"


def num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def fmt_us(v) -> str:
    if not num(v):
        return "n/a"
    return f"{v:.1f} us" if v < 1e4 else f"{v / 1e3:.2f} ms"


def fmt_rate(v) -> str:
    return f"{v:,.0f}" if num(v) else "n/a"


class Table:
    """The rows and the failures of the run."""

    def __init__(self):
        self.rows: list = []
        self.failures: list = []

    def add(self, what, ours, peer="", ratio=None, target="", ok=None, errors=0, judged=True):
        """ratio: ours / theirs (None: none); ok: the target met (None: no
        target, or not judged when judged is False)."""
        rt = f"x{ratio:.2f}" if num(ratio) else ("n/a" if peer else "")
        if not target:
            met = ""
        elif not judged or ok is None:
            met = "n/a"
        else:
            met = "yes" if ok else "NO"
        self.rows.append((what, ours, peer, rt, target, met, errors))

    def print(self):
        print("| load | ours | peer or baseline (same run) | ratio | target | met | errors |")
        print("|---|---:|---:|---:|---|---|---:|")
        for r in self.rows:
            print("| " + " | ".join(str(c) for c in r) + " |")


class Bench:
    """gpuqctl --json bench runs against one socket (bench/scale.py uses it
    too); each failed run is said in the table's failures."""

    def __init__(self, ctl: str, sock: str, table: Table = None):
        self.ctl, self.sock = ctl, sock
        self.t = table if table is not None else Table()

    @property
    def failures(self) -> list:
        return self.t.failures

    def run(self, what: str, args: list, glob=()) -> dict:
        cmd = [self.ctl, "--socket", self.sock, "--json", *glob, "bench", *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        try:
            res = json.loads(r.stdout)
        except ValueError:
            res = None
        if not isinstance(res, dict):
            res = {}
        if r.returncode != 0 or "req_s" not in res:
            last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
            self.t.failures.append(f"{what}: gpuqctl exit {r.returncode}: {last}")
            res.setdefault("errors", 1)
            res["failed"] = True
        return res


def errors_of(res: dict) -> int:
    """Every error of a gpuqctl bench run: the measured clients', alone and
    beside the streamers, and the streamers'; at least 1 for a failed run."""
    n = res.get("errors", 0) or 0
    for k in ("alone", "bulk"):
        if isinstance(res.get(k), dict):
            n += res[k].get("errors", 0) or 0
    return max(n, 1) if res.get("failed") else n


def torch_figures(quick: bool, sizes: list, table: Table):
    """PyTorch's in-process p50s (us) and errors by row name
    (peer_torch.py --small-only --sum-n ...), or (None, why) when it
    cannot run (no torch, no GPU: exit 3)."""
    cmd = [sys.executable, os.path.join(HERE, "peer_torch.py"), "--small-only"]
    for n in sizes:
        cmd += ["--sum-n", str(n)]
    if quick:
        cmd.append("--quick")
    r = subprocess.run(cmd, capture_output=True, text=True)
    first = (r.stdout.strip().splitlines() or [""])[0]
    if r.returncode == 3:
        return None, "n/a (no torch)" if "no torch" in first else NO_GPU
    figs = {}
    for m in re.finditer(r"^\| (normalize [^|]+?) \| p50 ([\d.]+) (us|ms)[^|]*\| (\d+) \|$",
                         r.stdout, re.M):
        figs[m.group(1)] = (float(m.group(2)) * (1000.0 if m.group(3) == "ms" else 1.0),
                            int(m.group(4)))
    if r.returncode != 0 or not figs:
        err = (r.stderr.strip().splitlines() or [first])[-1]
        table.failures.append(f"PyTorch peer: peer_torch.py exit {r.returncode}: {err}")
    return figs, ""


def py_figures(a, sock: str, large_n: int, mid_n: int, table: Table) -> dict:
    """bench/py_bench.py --rows load --json on this daemon: libgpuq's and the
    Python client's figures by name ({} when it could not run: said)."""
    cmd = [sys.executable, os.path.join(HERE, "py_bench.py"), "--rows", "load", "--json",
           "--socket", sock, "--peer", a.peer, "--large-n", str(large_n), "--mid-n", str(mid_n)]
    if a.quick:
        cmd += ["--quick", "--rounds", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {}
    if r.returncode != 0 or not isinstance(res, dict) or "figures" not in res:
        last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        table.failures.append(f"libgpuq and Python rows: py_bench.py exit {r.returncode}: {last}")
    return res.get("figures", {}) if isinstance(res, dict) else {}


def isolation_row(t: Table, what: str, res: dict, key: str, target: float, absolute=None):
    """A --baseline run's row: its key figure (p50_us or p99_us) beside the
    streamers over the same alone; absolute: a limit in us instead."""
    alone = res.get("alone") if isinstance(res.get("alone"), dict) else {}
    bulk = res.get("bulk") if isinstance(res.get("bulk"), dict) else {}
    ours, base = res.get(key), alone.get(key)
    mb = bulk.get("mb_s")
    label = f"{what} (streamers {mb:,.0f} MB/s)" if num(mb) and absolute is None else what
    if absolute is not None:
        t.add(label, fmt_us(ours), "", None, f"<= {absolute / 1e3:g} ms",
              ours <= absolute if num(ours) else None, errors_of(res))
        return
    ratio = ours / base if num(ours) and num(base) and base > 0 else None
    t.add(label, fmt_us(ours), f"alone {fmt_us(base)}", ratio, f"<= {target}x",
          ratio <= target if ratio is not None else None, errors_of(res))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuqctl", default=os.path.join(REPO, "build", "client", "cli", "gpuqctl"))
    ap.add_argument("--gpuqd", default=os.path.join(REPO, "build", "server", "gpuqd"))
    ap.add_argument("--peer", default=os.path.join(REPO, "build", "bench", "gpuq_py_peer"),
                    help="libgpuq's side of the blocking-call rows (py_bench.py's)")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--socket", help="use the gpuqd listening here")
    ap.add_argument("--quick", action="store_true", help="short runs (CPU backend, CI)")
    ap.add_argument("--gpuqd-arg", action="append", default=[], help="added to gpuqd's flags")
    a = ap.parse_args()
    for path, what in ((a.gpuqctl, "gpuqctl, or --gpuqctl"), (a.peer, "gpuq_py_peer, or --peer")):
        if not os.access(path, os.X_OK):
            print(f"load: no {path} (build {what})", file=sys.stderr)
            return 2
    dur, warm = ("0.5", "0.2") if a.quick else ("3", "0.5")
    bulk = 1 << 18 if a.quick else 1 << 22  # float32 values: 1 MiB or 16 MiB
    large_n, mid_n = (1 << 20, 1 << 18) if a.quick else (1 << 24, 1 << 20)

    proc = None
    sock = a.socket
    if sock is None:
        sock = os.path.join(tempfile.mkdtemp(prefix="gpuq-load-"), "gpuqd.sock")
        proc = start_daemon("load", a.gpuqd, a.device, sock, a.gpuqd_arg)
    t = Table()
    b = Bench(a.gpuqctl, sock, t)
    status = 0
    try:
        probe = subprocess.run([a.gpuqctl, "--socket", sock, "ping"], capture_output=True,
                               text=True)
        if probe.returncode == 3:
            print(f"load: {probe.stderr.strip()}", file=sys.stderr)
            return 2
        small = ["--size", "1024", "--duration", dur, "--warmup", warm]
        serial = b.run("1 client x 1 in flight", small + ["--clients", "1", "--depth", "1"])
        cuda = serial.get("backend") == "cuda"
        torch, why = torch_figures(a.quick, [large_n, mid_n], t) if cuda else (None, NO_GPU)

        def torch_row(what, name, ours, errors, target):
            """ours (us) against PyTorch's row name."""
            fig = torch.get(name) if torch is not None else None
            if fig is None:
                t.add(what, fmt_us(ours), why if torch is None else "n/a", None,
                      f"<= {target}x", None, errors, judged=False)
                return
            ratio = ours / fig[0] if num(ours) and fig[0] > 0 else None
            t.add(what, fmt_us(ours), f"PyTorch {fmt_us(fig[0])}", ratio, f"<= {target}x",
                  ratio <= target if ratio is not None else None, errors + fig[1])

        torch_row("normalize 1024 f32, 1 client x 1 in flight, p50 (PyTorch in-process)",
                  "normalize 4 KiB f32, 1 in flight", serial.get("p50_us"), errors_of(serial),
                  1.0)
        for what, c, target in (("1 client x 8 in flight", 1, None),
                                ("16 clients x 8 in flight", 16, 300e3),
                                ("64 clients x 8 in flight", 64, 300e3)):
            r = b.run(what, small + ["--clients", str(c), "--depth", "8"])
            rate = r.get("req_s")
            t.add(f"normalize 1024 f32, {what}", f"{fmt_rate(rate)} req/s" if num(rate) else "n/a",
                  "", None,
                  f">= {target / 1e3:.0f}k req/s" if target else "",
                  r.get("req_s", 0) >= target if target and num(r.get("req_s")) else None,
                  errors_of(r))

        # isolation: the measured client alone, then beside 4 streamers
        streamers = ["--bulk", "4", "--bulk-size", str(bulk), "--bulk-depth", "2", "--baseline"]
        mib = bulk * 4 >> 20
        for what, prio, bprio, btr, target in (
                (f"high-priority 1024 f32 p99 beside 4 low x 2 of {mib} MiB, socket", "high",
                 "low", "socket", 2.0),
                ("the same, the streamers in arenas", "high", "low", "shm", 1.5),
                ("the same, every session normal priority, socket", "normal", "normal", "socket",
                 4.0)):
            r = b.run(what, small + streamers + ["--bulk-priority", bprio, "--bulk-transport",
                                                 btr], ("--priority", prio))
            isolation_row(t, what, r, "p99_us", target)
        ping = b.run("pings beside the streamers",
                     ["--op", "ping", "--duration", dur, "--warmup", warm, *streamers,
                      "--bulk-transport", "socket"], ("--priority", "high"))
        cores = os.cpu_count() or 1
        isolation_row(t, f"high-priority ping p50 beside the 4 socket streamers ({cores} cores)",
                      ping, "p50_us", 4.0 if cores <= 2 else 2.0)
        isolation_row(t, "  the same pings' p99", ping, "p99_us", 0, absolute=3000.0)

        # libgpuq's blocking calls and the Python client (py_bench.py --rows load)
        py = py_figures(a, sock, large_n, mid_n, t)

        def fig(k):
            f = py.get(k, {})
            return f.get("p50_us"), (f.get("errors", 1) if f else 1)

        for n, k, target in ((large_n, "libgpuq_auto_large", 2.0),
                             (mid_n, "libgpuq_auto_mid", 2.5)):
            p50, err = fig(k)
            torch_row(f"blocking gpuq_normalize_1d, {n} f32, malloc'ed, auto (PyTorch pinned)",
                      f"normalize f32 sum, n = {n}", p50, err, target)
        for what, k, base, bname, target in (
                (f"Python c.normalize(x), plain {large_n} f32 ndarray", "python_auto_large",
                 "libgpuq_auto_large", "libgpuq", 1.15),
                ("Python c.normalize(x), 1024 f32 in an arena (c.asarray)", "python_small_arena",
                 "python_small_plain", "plain ndarray", 1.0)):
            (ours, e1), (theirs, e2) = fig(k), fig(base)
            ratio = ours / theirs if num(ours) and num(theirs) and theirs > 0 else None
            t.add(what, fmt_us(ours), f"{bname} {fmt_us(theirs)}", ratio, f"<= {target}x",
                  ratio <= target if ratio is not None else None, e1 + e2)
    finally:
        if proc is not None and not stop_daemon("load", proc):
            status = 1

    t.print()
    for f in t.failures:
        print(f"load: {f}", file=sys.stderr)
    if t.failures:
        status = 1
    print(f"load: {'FAILED (errors above)' if status else 'ok'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
