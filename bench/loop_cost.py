#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""loop_cost.py - issue 28's 300k row: what each small request costs gpuqd's
event loop thread, and whether moving its socket writes to the I/O threads
pays, one run.

    bench/loop_cost.py [--gpuqctl PATH] [--gpuqd PATH] [--device cuda|cpu]
                       [--clients N ...] [--duration S] [--quick]

For each way of running gpuqd it starts one on a temporary socket, warms it
up, then runs `gpuqctl --json bench --size 1024 --clients N --depth 8`
(normalize of 1024 float32 over the socket) and reads, from
/proc/PID/task/*/stat, the CPU time each of gpuqd's threads used meanwhile:

    default          gpuqd as installed (replies of 64 KiB or more on the
                     I/O threads, the rest written by the loop);
    cuda spin off    GPUQ_CUDA_SPIN_US=0 (CUDA only): the loop sleeps
                     between completions instead of polling them;
    replies on N io  --io-bulk-min 1024 --io-threads N (N = 2, 4): every
                     reply group written by an I/O thread;
    ... no io spin   the same with GPUQ_IO_SPIN_US=0: each job wakes its
                     thread.

Prints a Markdown table: the way, clients, req/s, its ratio to the default
at the same clients (same run), the loop thread's user and system
microseconds per request, the other threads' per request, errors. The
loop thread is the one whose id is gpuqd's pid. Then "loop_cost: ok" or
"loop_cost: FAILED". --quick: short runs and 4 clients (CI checks the script
on the CPU backend). Exit status: 0; 1 when a run failed or had errors; 2 on
bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from benchutil import start_daemon, stop_daemon  # bench/, the script's directory
from load import Bench, fmt_rate

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TICK = os.sysconf("SC_CLK_TCK")


def thread_ticks(pid: int) -> dict:
    """{tid: (utime, stime)} of pid's threads, in clock ticks."""
    out = {}
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        out[int(tid)] = (int(fields[11]), int(fields[12]))
    return out


def ways(device: str) -> list:
    """(label, environment, gpuqd flags) of each way measured."""
    w = [("default", {}, [])]
    if device == "cuda":
        w.append(("cuda spin off", {"GPUQ_CUDA_SPIN_US": "0"}, []))
    for n in (2, 4):
        w.append((f"replies on {n} io", {}, ["--io-bulk-min", "1024", "--io-threads", str(n)]))
    w.append(("replies on 4 io, no io spin", {"GPUQ_IO_SPIN_US": "0"},
              ["--io-bulk-min", "1024", "--io-threads", "4"]))
    return w


def measure(a, label: str, env: dict, flags: list) -> list:
    """One way: a row (dict) per client count."""
    tmp = tempfile.mkdtemp(prefix="gpuq-loop-cost-")
    sock = os.path.join(tmp, "gpuqd.sock")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        proc = start_daemon("loop_cost", a.gpuqd, a.device, sock, flags)
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    b = Bench(a.gpuqctl, sock)
    rows = []
    try:
        for clients in a.clients:
            args = ["--size", "1024", "--clients", str(clients), "--depth", "8"]
            b.run(f"{label} warm-up", args + ["--duration", a.warmup, "--warmup", "0"])
            t0 = thread_ticks(proc.pid)
            res = b.run(f"{label}, {clients} clients", args + ["--duration", a.duration,
                                                                "--warmup", "0"])
            t1 = thread_ticks(proc.pid)
            n = res.get("requests") or 0
            us = 1e6 / TICK / n if n else 0.0
            loop = [t1.get(proc.pid, (0, 0))[i] - t0.get(proc.pid, (0, 0))[i] for i in (0, 1)]
            other = sum(sum(v) - sum(t0.get(t, (0, 0))) for t, v in t1.items() if t != proc.pid)
            rows.append({"way": label, "clients": clients, "req_s": res.get("req_s"),
                         "loop_user": loop[0] * us, "loop_sys": loop[1] * us,
                         "other": other * us, "errors": res.get("errors", 1)})
    finally:
        ok = stop_daemon("loop_cost", proc)
    for f in b.failures:
        print(f"loop_cost: {f}", file=sys.stderr)
    if not ok or b.failures:
        for r in rows:
            r["errors"] = max(r["errors"] or 0, 1)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuqctl", default=os.path.join(REPO, "build", "client", "cli", "gpuqctl"))
    ap.add_argument("--gpuqd", default=os.path.join(REPO, "build", "server", "gpuqd"))
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="short runs, 4 clients (CPU, CI)")
    a = ap.parse_args()
    for p in (a.gpuqctl, a.gpuqd):
        if not os.access(p, os.X_OK):
            print(f"loop_cost: no {p} (build it, or --gpuqctl/--gpuqd)", file=sys.stderr)
            return 2
    if a.quick:
        a.clients, a.duration = [4], 0.5
    a.warmup, a.duration = ("0.2" if a.quick else "1"), str(a.duration)
    rows = []
    for label, env, flags in ways(a.device):
        rows += measure(a, label, env, flags)
    base = {r["clients"]: r["req_s"] for r in rows if r["way"] == "default"}
    print(f"normalize 1024 f32 over the socket, {a.device}, depth 8, {a.duration} s a run; "
          "CPU per request by thread")
    print("| way | clients | req/s | vs default | loop user us/req | loop sys us/req | "
          "other threads us/req | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    bad = 0
    for r in rows:
        d, v = base.get(r["clients"]), r["req_s"]
        ratio = f"x{v / d:.2f}" if isinstance(v, (int, float)) and d else "n/a"
        print(f"| {r['way']} | {r['clients']} | {fmt_rate(v)} | {ratio} | {r['loop_user']:.2f} | "
              f"{r['loop_sys']:.2f} | {r['other']:.2f} | {r['errors']} |")
        bad += 1 if r["errors"] else 0
    print(f"loop_cost: {'ok' if not bad else 'FAILED (errors above)'}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
