# SPDX-License-Identifier: Apache-2.0
"""gpuqctl in scripts: '-' for stdin and stdout, and --json on every command.

usage: ctl_script.py MODE GPUQCTL SOCKET WORKDIR
  roundtrip  every op form with '-' (an input from a pipe, the result to a
             pipe) gives the same array as with files: normalize (small,
             and large enough for shared memory), haversine, grid,
             pairwise, knn (each output to stdout in turn); numpy writes
             and reads the pipes
  json       every gpuqctl command with --json prints one JSON value on one
             line of stdout (or, if it refuses --json, exits 2 with nothing
             on stdout); op summaries say path, shape, dtype, transport and
             timing; a failure prints no JSON; ends with drain
  shutdown   shutdown --json (on a daemon of its own: it ends it)

Exits 0 when every check passes; otherwise prints each failure and exits 1.
"""
import io
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

MODE, CTL, SOCK, WORK = sys.argv[1:5]
PY = sys.executable
failures = []
rng = np.random.default_rng()


def path(name):
    return os.path.join(WORK, name)


def run(args, stdin=None, check=True, env=None):
    p = subprocess.run([CTL, "--socket", SOCK, *args], input=stdin, capture_output=True,
                       timeout=120, env=env)
    if check and p.returncode != 0:
        failures.append(f"gpuqctl {' '.join(args)}: exit {p.returncode}: "
                        f"{p.stderr.decode(errors='replace').strip()}")
    return p


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def load_bytes(data):
    # np.load needs a seekable file: a pipe's bytes go through BytesIO
    return np.load(io.BytesIO(data))


def arena_opens():
    p = run(["status", "--json"])
    return json.loads(p.stdout)["requests"]["arena_open"]


def same(name, got, want):
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        failures.append(f"{name}: piped result differs from the file result "
                        f"({got.dtype}{got.shape} vs {want.dtype}{want.shape})")


# ---- roundtrip ----

def roundtrip():
    small = rng.uniform(0.5, 10, (37, 11))
    big = rng.uniform(0.5, 10, (700, 301))  # 1.7 MB: auto goes by shared memory
    pts = np.column_stack([rng.uniform(-90, 90, 5000), rng.uniform(-180, 180, 5000)])
    X = rng.uniform(-1, 1, (41, 7)).astype(np.float32)
    Y = rng.uniform(-1, 1, (300, 7)).astype(np.float32)
    for name, a in (("small", small), ("big", big), ("pts", pts), ("X", X), ("Y", Y)):
        np.save(path(name + ".npy"), a)

    # the pipeline, through a shell: numpy | gpuqctl | numpy
    for name in ("small", "big"):
        before = arena_opens()
        run(["normalize", "--method", "l2", path(name + ".npy"), "-o", path("f.npy")])
        mid = arena_opens()
        sh = (f"'{PY}' -c 'import sys, numpy as np; np.save(sys.stdout.buffer, "
              f"np.load(sys.argv[1]))' '{path(name + '.npy')}' | "
              f"'{CTL}' --socket '{SOCK}' normalize --method l2 - -o - | "
              f"'{PY}' -c 'import io, sys, numpy as np; "
              f"np.save(sys.argv[1], np.load(io.BytesIO(sys.stdin.buffer.read())))' "
              f"'{path('p.npy')}'")
        p = subprocess.run(["/bin/sh", "-c", "set -e; " + sh], capture_output=True, timeout=120)
        after = arena_opens()
        if p.returncode != 0:
            failures.append(f"pipeline {name}: exit {p.returncode}: {p.stderr.decode().strip()}")
            continue
        same(f"normalize {name} pipeline", np.load(path("p.npy")), np.load(path("f.npy")))
        want = 1 if name == "big" else 0  # the same transport either way
        if mid - before != want or after - mid != want:
            failures.append(f"normalize {name}: arenas {mid - before} by file, {after - mid} "
                            f"by pipe, want {want} each")

    # each form: files, then '-' in and out (input bytes through a pipe)
    forms = [
        ("normalize zscore big", ["normalize", "--method", "zscore", "IN"], "big"),
        ("normalize flat", ["normalize", "--flat", "IN"], "small"),
        ("haversine to", ["distance", "haversine", "--to", "30,101", "IN"], "pts"),
        ("haversine pair A", ["distance", "haversine", "IN", path("pts.npy")], "pts"),
        ("haversine pair B", ["distance", "haversine", path("pts.npy"), "IN"], "pts"),
        ("pairwise", ["distance", "pairwise", "--metric", "cosine", "IN", path("Y.npy")], "X"),
        ("pairwise B", ["distance", "pairwise", path("X.npy"), "IN"], "Y"),
    ]
    for name, args, src in forms:
        fargs = [path(src + ".npy") if a == "IN" else a for a in args]
        run(fargs + ["-o", path("f.npy")])
        pargs = ["-" if a == "IN" else a for a in args]
        p = run(pargs + ["-o", "-"], stdin=npy_bytes(np.load(path(src + ".npy"))))
        if p.returncode == 0:
            same(name, load_bytes(p.stdout), np.load(path("f.npy")))
        # an input from a pipe, the output to a file
        run(pargs + ["-o", path("g.npy")], stdin=npy_bytes(np.load(path(src + ".npy"))))
        if os.path.exists(path("g.npy")):
            same(name + " (to a file)", np.load(path("g.npy")), np.load(path("f.npy")))
            os.unlink(path("g.npy"))

    # grid: no input; big enough for shared memory
    gargs = ["distance", "grid", "--lat", "-80:80:600", "--lon", "-170:170:500"]
    run(gargs + ["-o", path("f.npy")])
    p = run(gargs + ["-o", "-"])
    if p.returncode == 0:
        same("grid", load_bytes(p.stdout), np.load(path("f.npy")))

    # knn: distances to stdout, then indices to stdout; X from stdin too
    kargs = ["distance", "knn", "--k", "5", "--metric", "manhattan"]
    run(kargs + [path("X.npy"), path("Y.npy"), "-o", path("kd.npy"), "-i", path("ki.npy")])
    p = run(kargs + ["-", path("Y.npy"), "-o", "-", "-i", path("ki2.npy")],
            stdin=npy_bytes(X))
    if p.returncode == 0:
        same("knn distances", load_bytes(p.stdout), np.load(path("kd.npy")))
        same("knn indices (file)", np.load(path("ki2.npy")), np.load(path("ki.npy")))
    p = run(kargs + [path("X.npy"), "-", "-o", path("kd2.npy"), "-i", "-"], stdin=npy_bytes(Y))
    if p.returncode == 0:
        got = load_bytes(p.stdout)
        same("knn indices", got, np.load(path("ki.npy")))
        if got.dtype != np.int64:
            failures.append(f"knn indices on stdout: dtype {got.dtype}")
        same("knn distances (file)", np.load(path("kd2.npy")), np.load(path("kd.npy")))

    # a big input through stdin, each transport, and a result to stdout
    for t in ("shm", "socket", "auto"):
        p = run(["--transport", t, "normalize", "-", "-o", "-"], stdin=npy_bytes(big))
        if p.returncode == 0:
            run(["normalize", path("big.npy"), "-o", path("f.npy")])
            same(f"normalize big by {t}", load_bytes(p.stdout), np.load(path("f.npy")))


# ---- json ----

def one_json(name, p):
    """p's stdout is one line of JSON: the value, or None (failure noted)."""
    out = p.stdout.decode(errors="replace")
    if p.returncode == 2:
        if out or not p.stderr.startswith(b"gpuqctl: usage:"):
            failures.append(f"{name}: refused --json without a usage line or with stdout: "
                            f"{out!r} {p.stderr!r}")
        return None
    if p.returncode != 0:
        failures.append(f"{name}: exit {p.returncode}: {p.stderr.decode().strip()}")
        return None
    if not out.endswith("\n") or out.count("\n") != 1:
        failures.append(f"{name}: not one line: {out[:200]!r}")
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        failures.append(f"{name}: not JSON ({e}): {out[:200]!r}")
        return None


def check_summary(name, v, command, outs, transport=None, server_timing=False):
    if not isinstance(v, dict):
        failures.append(f"{name}: summary is not an object: {v!r}")
        return
    if v.get("command") != command:
        failures.append(f"{name}: command {v.get('command')!r}, want {command!r}")
    if v.get("transport") not in ("shm", "socket") or (transport and v["transport"] != transport):
        failures.append(f"{name}: transport {v.get('transport')!r}")
    got = v.get("outputs", [])
    if len(got) != len(outs):
        failures.append(f"{name}: {len(got)} outputs, want {len(outs)}")
    for o, (p, shape, dtype) in zip(got, outs):
        a = np.load(p)
        if o.get("path") != p or o.get("shape") != list(shape) or o.get("dtype") != dtype \
                or list(a.shape) != list(shape) or a.dtype.name != dtype \
                or o.get("bytes") != a.nbytes:
            failures.append(f"{name}: output {o!r}, file {a.dtype}{a.shape}, want "
                            f"{p} {shape} {dtype}")
    t = v.get("timing", {})
    if not isinstance(t.get("wall_us"), (int, float)) or not t["wall_us"] > 0:
        failures.append(f"{name}: timing.wall_us {t.get('wall_us')!r}")
    if server_timing != ("server" in t):
        failures.append(f"{name}: timing.server {'missing' if server_timing else 'present'}: {t}")
    if server_timing and not all(isinstance(t["server"].get(k), (int, float)) for k in
                                 ("queue_us", "h2d_us", "kernel_us", "d2h_us", "total_us")):
        failures.append(f"{name}: timing.server {t['server']!r}")


def commands_in_help():
    """Command names in gpuqctl --help: 'ping', 'distance knn', ..."""
    p = subprocess.run([CTL, "--help"], capture_output=True, timeout=30)
    names = set()
    in_list = False
    for line in p.stdout.decode(errors="replace").splitlines():
        if line == "commands:":
            in_list = True
            continue
        if in_list and not line.strip():
            break
        # "  distance grid           Great-circle ..." ("help [COMMAND]" too)
        m = re.match(r"  ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?(?: \[[A-Z]+\])?(?=  |$)", line)
        if in_list and m:
            names.add(" ".join(g for g in m.groups() if g))
    return names


def json_all():
    x = rng.uniform(0.5, 10, (37, 11))
    big = rng.uniform(0.5, 10, (700, 301))
    pts = np.column_stack([rng.uniform(-90, 90, 50), rng.uniform(-180, 180, 50)])
    X = rng.uniform(-1, 1, (41, 7))
    Y = rng.uniform(-1, 1, (300, 7))
    for name, a in (("x", x), ("big", big), ("pts", pts), ("X", X), ("Y", Y)):
        np.save(path(name + ".npy"), a)
    covered = set()

    def cmd(name, args, **kw):
        covered.add(name)
        return one_json(f"{name} --json", run(args, check=False, **kw))

    # informational commands
    v = cmd("ping", ["ping", "--json", "--count", "3"])
    if v is not None and (v.get("count") != 3 or len(v.get("rtt_us", [])) != 3):
        failures.append(f"ping --json: {v!r}")
    v = cmd("status", ["--json", "status"])  # the global spelling
    if v is not None and "requests" not in v:
        failures.append(f"status --json: {str(v)[:200]}")
    v = cmd("sessions", ["sessions", "--json"])
    if v is not None and not (isinstance(v, list) and any(s.get("self") for s in v)):
        failures.append(f"sessions --json: {v!r}")
    text = run(["metrics"]).stdout.decode()
    v = cmd("metrics", ["metrics", "--json"])
    if v is not None:
        names = {s.get("name") for s in v} if isinstance(v, list) else set()
        ok = isinstance(v, list) and all(isinstance(s.get("labels"), dict) and
                                         isinstance(s.get("value"), (int, float, str)) for s in v)
        if not ok or "gpuq_sessions" not in names or "gpuq_requests_total" not in names:
            failures.append(f"metrics --json: {str(v)[:300]}")
        # every sample of the text just before (series only grow in number)
        samples = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
        text_names = {re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", ln).group(0) for ln in samples}
        if isinstance(v, list) and (len(v) < len(samples) or not text_names <= names):
            failures.append(f"metrics --json: {len(v)} samples, the text had {len(samples)}; "
                            f"names missing: {sorted(text_names - names)}")
        bucket = [s for s in v if s.get("name") == "gpuq_request_duration_seconds_bucket"
                  and s["labels"].get("le") == "+Inf"] if ok else []
        if ok and not bucket:
            failures.append("metrics --json: no bucket with le=\"+Inf\"")

    # ops
    v = cmd("normalize", ["normalize", "--json", path("x.npy"), "-o", path("o1.npy")])
    check_summary("normalize", v, "normalize", [(path("o1.npy"), (37, 11), "float64")], "socket")
    if v is not None and v.get("inputs") != [{"path": path("x.npy"), "shape": [37, 11],
                                              "dtype": "float64", "bytes": 37 * 11 * 8}]:
        failures.append(f"normalize --json inputs: {v.get('inputs')!r}")
    v = one_json("normalize big --timing --json",
                 run(["normalize", path("big.npy"), "-o", path("o2.npy"), "--timing", "--json"],
                     check=False))
    check_summary("normalize big", v, "normalize", [(path("o2.npy"), (700, 301), "float64")],
                  "shm", server_timing=True)
    p = run(["normalize", "--json", "-", "-o", path("o3.npy")], stdin=npy_bytes(x), check=False)
    v = one_json("normalize stdin --json", p)
    check_summary("normalize stdin", v, "normalize", [(path("o3.npy"), (37, 11), "float64")])
    if v is not None and v.get("inputs", [{}])[0].get("path") != "-":
        failures.append(f"normalize stdin --json inputs: {v.get('inputs')!r}")
    v = cmd("distance haversine", ["distance", "haversine", "--to", "30,101", path("pts.npy"),
                                   "-o", path("o4.npy"), "--json"])
    check_summary("haversine", v, "distance haversine", [(path("o4.npy"), (50,), "float64")])
    v = cmd("distance grid", ["--json", "distance", "grid", "--lat", "0:10:7", "--lon", "0:10:9",
                              "--dtype", "f32", "-o", path("o5.npy")])
    check_summary("grid", v, "distance grid", [(path("o5.npy"), (7, 9), "float32")])
    v = cmd("distance pairwise", ["distance", "pairwise", path("X.npy"), path("Y.npy"),
                                  "-o", path("o6.npy"), "--json", "--timing"])
    check_summary("pairwise", v, "distance pairwise", [(path("o6.npy"), (41, 300), "float64")],
                  server_timing=True)
    v = cmd("distance knn", ["distance", "knn", "--k", "4", path("X.npy"), path("Y.npy"),
                             "-o", path("o7.npy"), "-i", path("o8.npy"), "--json"])
    check_summary("knn", v, "distance knn", [(path("o7.npy"), (41, 4), "float64"),
                                             (path("o8.npy"), (41, 4), "int64")])
    # resident arrays: put, an op with @NAME, get, ls, rm, and a failure
    v = cmd("put", ["put", "--json", "base", path("Y.npy")])
    if v is not None and (v.get("command") != "put" or v.get("outputs") != [
            {"path": "@base", "resident": "base", "shape": [300, 7], "dtype": "float64",
             "bytes": 300 * 7 * 8}]):
        failures.append(f"put --json: {v!r}")
    v = one_json("knn @base --json",
                 run(["distance", "knn", "--k", "4", path("X.npy"), "@base", "-o", path("o9.npy"),
                      "-i", path("o10.npy"), "--json"], check=False))
    check_summary("knn @base", v, "distance knn", [(path("o9.npy"), (41, 4), "float64"),
                                                   (path("o10.npy"), (41, 4), "int64")])
    if v is not None and v.get("inputs", [{}, {}])[1].get("resident") != "base":
        failures.append(f"knn @base --json inputs: {v.get('inputs')!r}")
    same("knn @base", np.load(path("o9.npy")), np.load(path("o7.npy")))
    v = cmd("get", ["get", "--json", "base", "-o", path("o11.npy")])
    check_summary("get", v, "get", [(path("o11.npy"), (300, 7), "float64")])
    same("get", np.load(path("o11.npy")), Y)
    v = cmd("ls", ["ls", "--json"])
    if v is not None and not (isinstance(v, list) and [a.get("name") for a in v] == ["base"]
                              and v[0].get("shape") == [300, 7] and v[0].get("dtype") == "f64"):
        failures.append(f"ls --json: {v!r}")
    v = cmd("rm", ["rm", "--json", "base"])
    if v != {"command": "rm", "ok": True, "name": "base", "message": "removed base"}:
        failures.append(f"rm --json: {v!r}")
    p = run(["get", "--json", "base", "-o", path("o12.npy")], check=False)
    if p.returncode != 1 or p.stdout or not p.stderr.startswith(b"gpuqctl: not_found:"):
        failures.append(f"get of no array with --json: exit {p.returncode}, stdout {p.stdout!r}, "
                        f"stderr {p.stderr!r}")
    # --timing --json: the timing is in the JSON, not a line on stderr
    p = run(["normalize", path("x.npy"), "-o", path("o1.npy"), "--timing", "--json"])
    if p.stderr:
        failures.append(f"--timing --json wrote to stderr: {p.stderr!r}")
    # a failure: its line on stderr, no JSON
    np.save(path("zero.npy"), np.zeros((3, 4)))
    p = run(["normalize", "--json", path("zero.npy"), "-o", path("oz.npy")], check=False)
    if p.returncode != 1 or p.stdout or not p.stderr.startswith(b"gpuqctl: zero_norm:"):
        failures.append(f"failing op with --json: exit {p.returncode}, stdout {p.stdout!r}, "
                        f"stderr {p.stderr!r}")
    # '-' for stdout and --json both want stdout: a usage error, before anything is read
    for args in (["normalize", "--json", path("x.npy"), "-o", "-"],
                 ["--json", "distance", "knn", "--k", "2", path("X.npy"), path("Y.npy"),
                  "-o", path("kd.npy"), "-i", "-"]):
        p = run(args, check=False)
        if p.returncode != 2 or p.stdout or b"--json" not in p.stderr:
            failures.append(f"{' '.join(args)}: exit {p.returncode}, {p.stdout[:50]!r}, "
                            f"{p.stderr!r}")

    # admin commands: set-limit, kill-session (of a gpuqctl waiting on its
    # stdin, connected already), and a failure of each kind
    v = cmd("set-limit", ["set-limit", "--json", "max_inflight", "32"])
    if v is not None and (v.get("name") != "max_inflight" or v.get("new") != 32
                          or not isinstance(v.get("old"), int) or v.get("ok") is not True):
        failures.append(f"set-limit --json: {v!r}")
    p = run(["set-limit", "--json", "no_such_limit", "1"], check=False)
    if p.returncode != 1 or p.stdout:
        failures.append(f"set-limit of an unknown limit with --json: {p.returncode} {p.stdout!r}")
    waiter = subprocess.Popen([CTL, "--socket", SOCK, "normalize", "-", "-o", path("w.npy")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    head = npy_bytes(big)
    waiter.stdin.write(head[:128])  # the header: gpuqctl connects and waits for the data
    waiter.stdin.flush()
    victim = None
    for _ in range(200):
        rows = json.loads(run(["sessions", "--json"]).stdout)
        others = [s for s in rows if not s.get("self")]
        if others:
            victim = others[0]["id"]
            break
        time.sleep(0.05)
    if victim is None:
        failures.append("kill-session: the waiting gpuqctl never showed in sessions")
    else:
        v = cmd("kill-session", ["kill-session", str(victim), "--json"])
        if v is not None and (v.get("session") != victim or v.get("command") != "kill-session"):
            failures.append(f"kill-session --json: {v!r}")
    try:
        waiter.stdin.write(head[128:])
        waiter.stdin.close()
    except BrokenPipeError:
        pass
    waiter.wait(timeout=60)
    p = run(["kill-session", "--json", "999999"], check=False)
    if p.returncode != 1 or p.stdout:
        failures.append(f"kill-session of no session with --json: {p.returncode} {p.stdout!r}")

    # bench: one object for the whole run (test_e2e_bench checks its fields)
    v = cmd("bench", ["bench", "--json", "--clients", "2", "--duration", "0.2", "--warmup", "0"])
    if v is not None and (v.get("command") != "bench" or v.get("errors") != 0
                          or not v.get("requests") or v.get("first_error") is not None
                          or not v["p50_us"] <= v["p99_us"] <= v["max_us"]):
        failures.append(f"bench --json: {v!r}")

    # help pages are text only; --version is honoured
    for args in (["help", "ping", "--json"], ["--json", "help"], ["ping", "--help", "--json"]):
        p = run(args, check=False)
        if p.returncode != 2 or p.stdout or b"--json" not in p.stderr:
            failures.append(f"{' '.join(args)}: exit {p.returncode}, {p.stdout[:50]!r}, "
                            f"{p.stderr!r}")
    covered.add("help")
    v = one_json("--json --version", run(["--json", "--version"], check=False))
    if v is not None and (v.get("command") != "version" or not v.get("version")):
        failures.append(f"--json --version: {v!r}")

    # the slowlog after the ops above: a list of records, slowest first
    v = cmd("slowlog", ["slowlog", "--json"])
    if v is not None and not (isinstance(v, list) and all(
            isinstance(r, dict) and "op" in r for r in v) and
            all(a.get("total_us", 0) >= b.get("total_us", 0) for a, b in zip(v, v[1:]))):
        failures.append(f"slowlog --json: {str(v)[:300]}")
    # every command --help lists is covered here (shutdown: mode "shutdown";
    # monitor streams until stopped: test_e2e_monitor checks its --json lines)
    covered.update({"drain", "shutdown", "monitor"})
    listed = commands_in_help()
    if not {"ping", "normalize", "distance knn"} <= listed:
        failures.append(f"gpuqctl --help: cannot read its list of commands (got {sorted(listed)})")
    missing = listed - covered
    if missing:
        failures.append(f"commands without a --json check: {sorted(missing)}")
    v = cmd("drain", ["drain", "--json"])
    if v is not None and (v.get("command") != "drain" or v.get("ok") is not True
                          or not v.get("message")):
        failures.append(f"drain --json: {v!r}")


def shutdown():
    v = one_json("shutdown --json", run(["--json", "shutdown"], check=False))
    if v is not None and (v.get("command") != "shutdown" or v.get("ok") is not True):
        failures.append(f"shutdown --json: {v!r}")


{"roundtrip": roundtrip, "json": json_all, "shutdown": shutdown}[MODE]()
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
