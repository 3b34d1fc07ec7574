#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""plot_bench.py - a latency/throughput plot of `gpuqctl bench --csv` runs.

    gpuqctl bench --op knn --input X.npy --k 10 --concurrency-range 1:8:1 --csv > knn.csv
    bench/plot_bench.py knn.csv [more.csv ...] -o bench.png [--title TEXT]

Two panels, one line a CSV (its label the file's name, or NAME=PATH):
left, p50 and p99 latency against throughput (req/s), a point a level (the
p50 points labelled with their concurrency), so the knee where latency
climbs while throughput stops growing shows; right,
throughput against concurrency (requests in flight). The PNG is drawn with
matplotlib's Agg backend (no display needed; Debian's python3-matplotlib).

A CSV must have gpuqctl bench's header (concurrency, req_s, p50_us, p99_us
at least); a row whose latency is empty (no request finished) is left out
of the latency panel. Exit 0 with the PNG written; 1 for a file that
cannot be read or is no bench CSV, or no row to plot; 2 for usage errors.
"""
import argparse
import csv
import os
import sys

NEED = ("concurrency", "req_s", "p50_us", "p99_us")


def num(s):
    """A CSV field as a float, None when empty (no request finished)."""
    s = s.strip()
    return float(s) if s else None


def read_csv(path):
    """The rows of a bench CSV: a list of dicts of floats (None: empty)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [k for k in NEED if k not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not gpuqctl bench --csv output (no {', '.join(missing)})")
        rows = []
        for i, row in enumerate(reader, start=2):
            try:
                rows.append({k: num(v) for k, v in row.items() if k is not None})
            except (ValueError, AttributeError) as e:
                raise ValueError(f"{path}:{i}: {e}") from None
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def label_path(arg):
    """NAME=PATH, or PATH labelled by its base name."""
    if "=" in arg and not os.path.exists(arg):
        name, path = arg.split("=", 1)
        return name, path
    return os.path.splitext(os.path.basename(arg))[0], arg


def plot(series, out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (lat, thr) = plt.subplots(1, 2, figsize=(9, 3.6), dpi=80)
    for k, (name, rows) in enumerate(series):
        color = f"C{k % 10}"
        pts = [r for r in rows if r["p50_us"] is not None and r["req_s"] is not None]
        x = [r["req_s"] for r in pts]
        lat.plot(x, [r["p50_us"] / 1e3 for r in pts], "o-", color=color, label=f"{name} p50")
        lat.plot(x, [r["p99_us"] / 1e3 for r in pts], "s--", color=color, label=f"{name} p99")
        for r in pts:  # each point's concurrency: past the knee the points bunch up
            lat.annotate(f"{r['concurrency']:g}", (r["req_s"], r["p50_us"] / 1e3),
                         textcoords="offset points", xytext=(4, -9), fontsize=7, color=color)
        thr.plot([r["concurrency"] for r in rows], [r["req_s"] or 0 for r in rows], "o-",
                 color=color, label=name)
    lat.set_xlabel("throughput (req/s)")
    lat.set_ylabel("latency (ms)")
    lat.set_title("latency vs throughput")
    lat.set_ylim(bottom=0)
    lat.grid(alpha=0.3)
    lat.legend(fontsize=7)
    thr.set_xlabel("concurrency (requests in flight)")
    thr.set_ylabel("throughput (req/s)")
    thr.set_title("throughput vs concurrency")
    thr.set_ylim(bottom=0)
    thr.grid(alpha=0.3)
    thr.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, format="png")
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Plot gpuqctl bench --csv output as a PNG.")
    ap.add_argument("csv", nargs="+", help="a CSV of gpuqctl bench --csv (NAME=PATH to label it)")
    ap.add_argument("-o", "--output", required=True, help="the PNG to write")
    ap.add_argument("--title", default="", help="a title over both panels")
    args = ap.parse_args(argv)
    series = []
    try:
        for arg in args.csv:
            name, path = label_path(arg)
            series.append((name, read_csv(path)))
    except (OSError, ValueError) as e:
        print(f"plot_bench: {e}", file=sys.stderr)
        return 1
    tmp = args.output + ".tmp"
    try:
        plot(series, tmp, args.title)
        os.replace(tmp, args.output)
    except OSError as e:
        print(f"plot_bench: {args.output}: {e}", file=sys.stderr)
        if os.path.exists(tmp):
            os.unlink(tmp)
        return 1
    print(f"plot_bench: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
