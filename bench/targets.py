#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/targets.py - the data-plane issue's targets, from one run.

  python3 bench/targets.py BENCH_OUTPUT PEER_TORCH_OUTPUT

BENCH_OUTPUT is gpuq_bench's table (CUDA backend), PEER_TORCH_OUTPUT
bench/peer_torch.py's, both from the same run on the same GPU. Prints one
Markdown row per target: gpuq's figure, the peer's or the ceiling's, the
ratio the target is about, the target, and whether it is met. A row whose
figures are missing (a failed row, a peer that did not run) is "n/a" and
not met. Exit 0 when every target is met, 1 when one is not, 2 on bad
usage or unreadable files.
"""
import re
import sys


def table(path):
    """{row name: [cells after the name]} of a Markdown table's rows."""
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("|") or line.startswith("|---"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.setdefault(cells[0], cells[1:])
    return rows


def ms(fig):
    """A figure's p50 in ms: "2.21 ms, 36 GB/s", "p50 1.70 ms, ...", "p50 450.6 us, ..."."""
    m = re.match(r"^(?:p50 )?([0-9.]+) (ms|us)\b", fig or "")
    if not m:
        return None
    v = float(m.group(1))
    return v if m.group(2) == "ms" else v / 1e3


def gbs(fig):
    m = re.match(r"^([0-9.]+) GB/s", fig or "")
    return float(m.group(1)) if m else None


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        bench, torch = table(argv[1]), table(argv[2])
    except OSError as e:
        print(f"targets: {e}", file=sys.stderr)
        return 2

    def ours(name):
        r = bench.get(name)
        return r[0] if r else None

    def peer(name):
        r = torch.get(name)
        return r[0] if r else None

    n16 = "normalize f32 sum, n = 16777216"
    pw = "pairwise euclidean f32, 4096x4096, d = 64"
    mc = "normalize f32 sum, n = 16777216, 4 clients x 2 in flight, shm"
    # (what, gpuq figure, peer figure, peer's name, kind, bound)
    # kind "le": gpuq time / peer time <= bound; "abs": gpuq ms <= bound;
    # "ge_rate": gpuq GB/s / peer GB/s >= bound; "ge_time": peer time / gpuq time >= bound
    specs = [
        ("normalize 16M f32 flat sum, shm", ours(n16 + ", shm"), peer(n16), "torch", "le", 1.05),
        ("normalize 4096x4096 f32 row-wise l2, shm", ours("normalize f32 l2 rows, 4096x4096, shm"),
         peer("normalize f32 l2 rows, 4096x4096"), "torch", "le", 0.6),
        ("haversine 1M f64 to a point, shm", ours("haversine f64 to a point, n = 1000000, shm"),
         peer("haversine f64 to a point, n = 1000000"), "torch", "le", 0.6),
        ("grid 1000x1000 f64, shm output", ours("grid f64, 1000x1000, shm"), None, "-", "abs", 0.245),
        ("pairwise 4096x4096x64 f32 euclidean, shm", ours(pw + ", shm"),
         peer(pw + " (cdist's matmul form)"), "torch.cdist", "le", 1.0),
        ("4 clients x 2 in flight, 64 MiB normalize, shm", ours(mc),
         bench.get(mc, [None, None])[1], "pinned H2D", "ge_rate", 0.85),
        ("normalize 16M f32 over the socket", ours(n16 + ", socket vs echo"),
         bench.get(n16 + ", socket vs echo", [None, None])[1], "socket echo", "ge_time", 0.8),
    ]
    print("| target row | gpuq | peer / ceiling | ratio | target | met? |")
    print("|---|---|---|---:|---|---|")
    missed = 0
    for what, o, p, pname, kind, bound in specs:
        ratio, met, show = None, False, "n/a"
        if kind == "le" and ms(o) and ms(p):
            ratio = ms(o) / ms(p)
            met = ratio <= bound
            target = f"<= {bound:.2f}x {pname}"
        elif kind == "abs":
            target = f"<= {bound * 1e3:.0f} us"
            if ms(o):
                ratio = ms(o) / bound
                met = ms(o) <= bound
        elif kind == "ge_rate" and gbs(o) and gbs(p):
            ratio = gbs(o) / gbs(p)
            met = ratio >= bound
            target = f">= {bound:.2f}x {pname}"
        elif kind == "ge_time" and ms(o) and ms(p):
            ratio = ms(p) / ms(o)
            met = ratio >= bound
            target = f">= {bound:.2f}x {pname}"
        else:
            target = {"le": f"<= {bound:.2f}x {pname}", "ge_rate": f">= {bound:.2f}x {pname}",
                      "ge_time": f">= {bound:.2f}x {pname}"}[kind]
        if ratio is not None:
            show = f"{ratio:.2f}" + ("" if kind != "abs" else " of target")
        missed += not met
        print(f"| {what} | {o or 'n/a'} | {p or ('-' if kind == 'abs' else 'n/a')} | {show} | "
              f"{target} | {'yes' if met else 'NO'} |")
    print(f"targets: {len(specs) - missed} of {len(specs)} met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
