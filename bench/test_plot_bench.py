#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_plot_bench.py - bench/plot_bench.py turns gpuqctl bench CSVs into a PNG.

    test_plot_bench.py [GPUQCTL GPUQD]

Without arguments: two CSVs of gpuqctl bench's header (one with a level
that finished nothing: an empty latency) make one PNG (its signature and a
size over 1 kB, decoded: 720 x 288, not blank); a file without the header,
one of no rows, a field not a number, a short row and a missing file exit 1
naming the file and leave no PNG; no -o is a usage error (2). With GPUQCTL and GPUQD: the CSV comes from a real
`gpuqctl bench --concurrency-range 1:3:1 --csv` on a CPU gpuqd first.
Exit 77 (ctest: skipped) when matplotlib does not import.
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.join(HERE, "plot_bench.py")
HEADER = "concurrency,clients,depth,requests,req_s,p50_us,p90_us,p99_us,max_us,errors,bytes_s\n"
PNG_SIG = b"\x89PNG\r\n\x1a\n"


def run_plot(*args):
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True, timeout=120)


def assert_png(path):
    """path is a PNG that decodes, of plot_bench's size (9 x 3.6 in at 80
    dpi: 720 x 288), and not blank: the lines drew pixels of several colours."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == PNG_SIG, f"{path}: no PNG signature: {data[:8]!r}"
    assert len(data) > 1000, f"{path}: {len(data)} bytes"
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import numpy as np
    img = mpimg.imread(path, format="png")
    assert img.shape[:2] == (288, 720), f"{path}: {img.shape}"
    colours = np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 20, f"{path}: {len(colours)} colours: blank?"


def real_csv(ctl, gpuqd, d):
    sock = os.path.join(d, "gpuqd.sock")
    daemon = subprocess.Popen([gpuqd, "--device", "cpu", "--socket", sock],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        r = subprocess.run([ctl, "--socket", sock, "bench", "--concurrency-range", "1:3:1",
                            "--csv", "--duration", "0.2", "--warmup", "0.05"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"gpuqctl bench: exit {r.returncode}: {r.stderr}"
        lines = r.stdout.splitlines()
        assert lines[0] + "\n" == HEADER and len(lines) == 4, r.stdout
        path = os.path.join(d, "real.csv")
        with open(path, "w") as f:
            f.write(r.stdout)
        return path
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def main():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("test_plot_bench: matplotlib does not import: skipped")
        return 77
    with tempfile.TemporaryDirectory() as d:
        a = os.path.join(d, "a.csv")
        b = os.path.join(d, "b.csv")
        with open(a, "w") as f:
            f.write(HEADER + "1,1,1,900,3000.5,300.1,350,400.2,900,0,1.2e6\n"
                    "2,2,1,1500,5000,380,420,500,1200,0,2e6\n"
                    "3,3,1,1600,5300,550,700,900,2500,0,2.1e6\n")
        with open(b, "w") as f:
            f.write(HEADER + "1,1,1,0,0,,,,,0,0\n2,2,1,10,20,90000,95000,99000,99000,0,800\n")
        png = os.path.join(d, "out.png")
        r = run_plot(a, "slow=" + b, "-o", png, "--title", "test")
        assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
        assert_png(png)
        if len(sys.argv) == 3:
            png2 = os.path.join(d, "real.png")
            r = run_plot(real_csv(sys.argv[1], sys.argv[2], d), "-o", png2)
            assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
            assert_png(png2)
        bads = {"bad.csv": ("x,y\n1,2\n", "not gpuqctl bench --csv output (no concurrency"),
                "empty.csv": (HEADER, "no rows"),
                "word.csv": (HEADER + "1,1,1,9,abc,1,2,3,4,0,5\n", "word.csv:2: "),
                "short.csv": (HEADER + "1,1,1\n", "short.csv:2: ")}
        cases = []
        for name, (text, want) in bads.items():
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            cases.append(([path], want))
        cases.append(([os.path.join(d, "missing.csv")], "missing.csv"))
        cases.append(([a, os.path.join(d, "bad.csv")], "bad.csv"))  # one bad of two: no PNG
        for args, want in cases:
            out = os.path.join(d, "no.png")
            r = run_plot(*args, "-o", out)
            assert r.returncode == 1 and r.stderr.startswith("plot_bench: ") and want in r.stderr, \
                (args, r.returncode, r.stderr)
            assert not os.path.exists(out), f"a PNG for {args}"
        r = run_plot(a)  # no -o: a usage error
        assert r.returncode == 2, (r.returncode, r.stderr)
    print("test_plot_bench: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
