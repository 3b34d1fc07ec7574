#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/mutate/run.py - the mutation check: does the suite catch planted bugs?

Each mutation in tests/mutate/mutations.txt is a small, named bug (a
comparison flipped, a bound off by one, an error code swapped, a release
skipped, a check switched off). This script copies the working tree to a
scratch directory once, builds it once, checks that the named tests pass
there, then for each mutation: applies it to the scratch copy, rebuilds
(only what the mutated file touches), runs the tests the mutation names,
and puts the file back. A mutation the tests do not catch SURVIVES, and the
check fails. So does a mutation whose original text is no longer in its
file exactly once (STALE: when code moves, its mutations move with it) and
one that does not compile (a mutation must be a bug, not a typo).

  tests/mutate/run.py                 every CPU mutation (CI: tests/dev.sh ci)
  tests/mutate/run.py --list          the mutations, one line each
  tests/mutate/run.py --only NAME...  just these (a prefix matches)
  tests/mutate/run.py --gpu           also the mutations marked 'gpu: yes'
                                      (CUDA build; needs a GPU: bench/gpu_run.sh)
  tests/mutate/run.py --gpu-only      only those (bench/gpu_run.sh's mutate step)

The scratch tree and its build are kept under build-mutate/ (or --scratch)
and reused: a second run rebuilds only what changed.

Format of mutations.txt: blocks that start with '== NAME', then 'file:',
'tests:' (a ctest -R regex), optional 'gpu: yes' and 'why:' lines, then
the original text as lines starting with '- ' and the mutant as lines
starting with '+ ' (none: the original is deleted). '#' starts a comment
line outside the '- '/'+ ' lines.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIST = os.path.join(ROOT, "tests", "mutate", "mutations.txt")


class Mutation:
    def __init__(self, name, line):
        self.name = name
        self.line = line
        self.file = None
        self.tests = None
        self.gpu = False
        self.why = ""
        self.orig = []
        self.mut = []


def parse(path):
    muts, cur = [], None
    with open(path, encoding="utf-8") as f:
        for no, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("== "):
                cur = Mutation(line[3:].strip(), no)
                muts.append(cur)
                continue
            if line.startswith("- ") or line == "-":
                if cur is None:
                    raise SystemExit(f"{path}:{no}: '-' line outside a mutation")
                cur.orig.append(line[2:])
                continue
            if line.startswith("+ ") or line == "+":
                if cur is None:
                    raise SystemExit(f"{path}:{no}: '+' line outside a mutation")
                cur.mut.append(line[2:])
                continue
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"(file|tests|gpu|why):\s*(.*)$", line)
            if not m or cur is None:
                raise SystemExit(f"{path}:{no}: cannot read {line!r}")
            key, val = m.groups()
            if key == "file":
                cur.file = val
            elif key == "tests":
                cur.tests = val
            elif key == "gpu":
                cur.gpu = val.lower() in ("yes", "1", "true")
            else:
                cur.why = val
    names = set()
    for m in muts:
        if not m.file or not m.tests or not m.orig:
            raise SystemExit(f"{path}:{m.line}: mutation {m.name!r} needs file:, tests: and '-' lines")
        if m.name in names:
            raise SystemExit(f"{path}:{m.line}: mutation {m.name!r} named twice")
        if m.orig == m.mut:
            raise SystemExit(f"{path}:{m.line}: mutation {m.name!r} changes nothing")
        names.add(m.name)
    return muts


def run(cmd, cwd, timeout=None, env=None):
    """Runs cmd in its own process group; kills the group on timeout (a
    mutant that hangs a test, daemons the tests started). Returns (rc, out);
    rc None on timeout."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env=env, text=True, errors="replace")
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return None, out


def copy_tree(scratch):
    """The working tree as git sees it (tracked and untracked, not ignored)
    into scratch/src; files that did not change keep their mtime, so the
    scratch build stays incremental between runs. A file that differs gets
    the time of the copy, not the source's: after a run killed while a
    mutant was in place, the scratch object built from the mutant is newer
    than the source file, and a copy with the source's old time would leave
    that object in the build (the unmutated baseline then fails, as it did
    on the H200 on 2026-11-28)."""
    src = os.path.join(scratch, "src")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, check=True, capture_output=True).stdout.split(b"\0")
    want = set()
    for rel in (f.decode() for f in files if f):
        a = os.path.join(ROOT, rel)
        if not os.path.isfile(a):
            continue  # deleted in the working tree
        want.add(rel)
        b = os.path.join(src, rel)
        os.makedirs(os.path.dirname(b), exist_ok=True)
        if os.path.exists(b):
            with open(a, "rb") as fa, open(b, "rb") as fb:
                if fa.read() == fb.read():
                    continue
        shutil.copy(a, b)
    for dirpath, _, names in os.walk(src):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), src)
            if rel not in want:
                os.unlink(os.path.join(dirpath, n))
    return src


def ctest(build, regex, jobs, timeout, env):
    rc, out = run(["ctest", "-R", regex, "-LE", "fuzz", "--output-on-failure", "-j", str(jobs),
                   "--no-tests=error"], build, timeout=timeout, env=env)
    failed = re.findall(r"^\s*\d+ - (\S+) \(", out, re.M)
    return rc, out, failed


def main():
    ap = argparse.ArgumentParser(description="the mutation check (see the file's comment)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--gpu", action="store_true", help="also the gpu mutations (CUDA build)")
    ap.add_argument("--gpu-only", action="store_true", help="only the gpu mutations (CUDA build)")
    ap.add_argument("--cmake-arg", action="append", default=[],
                    help="passed to the scratch tree's cmake configure (repeatable)")
    ap.add_argument("--scratch", default=os.path.join(ROOT, "build-mutate"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()

    muts = parse(LIST)
    if a.list:
        for m in muts:
            print(f"{m.name:32} {m.file:28} {'gpu ' if m.gpu else ''}{m.tests}")
        return 0
    if a.only:
        muts = [m for m in muts if any(m.name.startswith(o) for o in a.only)]
        if not muts:
            print("mutate: --only matches no mutation", file=sys.stderr)
            return 2
    if a.gpu_only:
        a.gpu = True
        muts = [m for m in muts if m.gpu]
    if not a.gpu:
        skipped = [m.name for m in muts if m.gpu]
        muts = [m for m in muts if not m.gpu]
        if skipped:
            print(f"mutate: {len(skipped)} gpu mutation(s) left to --gpu: {', '.join(skipped)}")

    os.makedirs(a.scratch, exist_ok=True)
    src = copy_tree(a.scratch)
    build = os.path.join(a.scratch, "build-gpu" if a.gpu else "build")
    # No -Werror: a mutant may leave a variable unused; it must still run.
    cfg = ["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DGPUQ_WERROR=OFF"]
    if not a.gpu:
        cfg.append("-DGPUQ_WITH_CUDA=OFF")
    cfg += a.cmake_arg
    env = dict(os.environ)
    # pytest stops at its first failure: a mutant is killed by one failed
    # test, and the rest of the Python suite need not run (nor time out)
    env["PYTEST_ADDOPTS"] = (env.get("PYTEST_ADDOPTS", "") + " -x").strip()
    if a.gpu:
        env["GPUQ_REQUIRE_GPU"] = "1"
    for cmd in (cfg, ["cmake", "--build", build, "-j", str(a.jobs)]):
        rc, out = run(cmd, ROOT)
        if rc != 0:
            print(out[-4000:])
            print(f"mutate: {' '.join(cmd[:2])} of the unmutated scratch tree failed", file=sys.stderr)
            return 1

    # Unmutated, every named test must pass: a check that fails anyway kills
    # every mutation and proves nothing. Its time bounds each mutant's run.
    rc, out = run(["ctest", "-N", "-LE", "fuzz"], build)
    names = re.findall(r"^\s*Test\s+#\d+: (\S+)", out, re.M)
    union = set()
    for m in muts:
        hit = [n for n in names if re.search(m.tests, n)]
        if not hit:
            print(f"mutate: {m.name}: tests {m.tests!r} match no test", file=sys.stderr)
            return 1
        union.update(hit)
    t0 = time.time()
    rc, out, failed = ctest(build, "^(" + "|".join(sorted(union)) + ")$", a.jobs, 1800, env)
    base = time.time() - t0
    if rc != 0:
        print(out[-6000:])
        print(f"mutate: tests fail on the unmutated tree: {' '.join(failed)}", file=sys.stderr)
        return 1
    print(f"mutate: unmutated tree builds and passes ({base:.0f} s); "
          f"{len(muts)} mutation(s)", flush=True)

    results = []
    for m in muts:
        path = os.path.join(src, m.file)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        orig = "\n".join(m.orig) + "\n"
        mutant = "\n".join(m.mut) + "\n" if m.mut else ""
        n = text.count(orig)
        if n != 1:
            results.append((m, "STALE", f"original text found {n} times in {m.file}", 0))
            print(f"  {m.name:32} STALE ({n} matches)", flush=True)
            continue
        t = time.time()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(orig, mutant))
            rc, out = run(["cmake", "--build", build, "-j", str(a.jobs)], ROOT)
            if rc != 0:
                status, detail = "NO-BUILD", out[-3000:]
            else:
                limit = 3 * base + 60
                rc, out, failed = ctest(build, m.tests, a.jobs, limit, env)
                if rc is None:
                    status, detail = "killed", f"hung past {limit:.0f} s"
                elif rc != 0:
                    status, detail = "killed", " ".join(failed) or out[-800:]
                else:
                    status, detail = "SURVIVED", out[-1500:] if a.verbose else ""
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        dt = time.time() - t
        results.append((m, status, detail, dt))
        shown = detail if status == "killed" else ""
        print(f"  {m.name:32} {status:8} {dt:5.0f} s  {shown}", flush=True)
        if status in ("SURVIVED", "NO-BUILD") and detail:
            print(detail)
    # Leave the scratch build matching the tree for the next run.
    run(["cmake", "--build", build, "-j", str(a.jobs)], ROOT)

    bad = [r for r in results if r[1] != "killed"]
    print(f"\nmutate: {len(results) - len(bad)} of {len(results)} mutations killed")
    for m, status, _, _ in bad:
        print(f"  {status}: {m.name} ({m.file}; mutations.txt:{m.line}) {m.why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
