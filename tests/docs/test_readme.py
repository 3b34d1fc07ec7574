#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Run the README's console examples against a CPU gpuqd and compare output.

    test_readme.py --bindir DIR [--gpuqd DIR] [--python PY] [README.md]
    test_readme.py ... --update        rewrite README.md's output blocks
    test_readme.py ... --self-test     prove that a wrong block fails

What is checked: every fenced block whose info string is `console`
(```console). Such a block is a terminal session:

  $ COMMAND           a command, run with `bash -c` in a scratch directory
  > MORE              continues the command on the next line (bash's PS2),
                      e.g. a multi-line `python3 -c '...'`
  OUTPUT              every following line up to the next `$ ` line or the
                      end of the block is the command's expected output
                      (stdout and stderr together, as a terminal shows them)
  (exit status N)     as the output's last line: the command exits with N
                      (a terminal does not print this line). Without it the
                      command must exit 0.

The comparison is exact line by line, with trailing blanks ignored and blank
lines at the end of an output (the gaps between examples) not counted. A
field that varies from run to run (times, pids, ids, uptime, versions) is
written `...` in the README: within a line `...` matches any text, and a
line that is only `...` matches any number of lines (doctest's ELLIPSIS). In
a line with a `...`, a run of spaces matches any run of spaces, so that a
table row can keep its columns aligned under its header.
Blocks with another info string (```sh, ```c, plain ```) are not run: use
```sh for commands shown without output. A `$ ` line in such a block is an
error, so that no terminal session in the README escapes the test.

All blocks of the README form one session, top to bottom: one scratch
directory (files made by one example are there for the next) and one gpuqd
that the test starts before the first command with

    gpuqd --device cpu --socket SCRATCH/gpuqd.sock [--admin-group GROUP]

(--admin-group names the caller's group when the test does not run as root,
so that the README's admin examples work). GPUQ_SOCKET points at it, PATH
starts with the build's gpuqctl and gpuqd and a `python3` with numpy (the
build's GPUQ_PYTHON), PYTHONPATH is the tree's client/python (the `gpuq`
package; no bytecode is written there), XDG_RUNTIME_DIR is unset, LC_ALL=C.

--update runs the README three times (each with a fresh daemon and directory)
and rewrites every output block that does not match: a line that still
matches its old README line keeps it (with its `...`), a new or changed line
is written as printed, with `...` for each word or number that differs between
the runs, and the exit status line follows the command's. Review the diff
(git diff README.md), put `...` where a field varies that the runs happened
to agree on, and run the test again.
"""

import argparse
import difflib
import grp
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CMD_TIMEOUT = 60  # seconds per README command
# The Python client of this tree (the README's `import gpuq` examples).
PYTHON_CLIENT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "client", "python")
UPDATE_RUNS = 3  # --update: a token that differs between these runs becomes `...`
EXIT_RE = re.compile(r"^\(exit status (\d+)\)$")


class Example:
    """One `$ command` of a console block and its expected output."""

    def __init__(self, line_no, cmd, out_start):
        self.line_no = line_no  # 1-based README line of the `$ `
        self.cmd = cmd
        self.out_start = out_start  # 0-based index of the first output line
        self.out_end = out_start  # one past the last line (before the gap)
        self.gap_end = out_start  # one past the trailing blank lines
        self.expected = []  # output lines, exit status line removed
        self.status = 0

    def __repr__(self):
        return "README.md:%d: $ %s" % (self.line_no, self.cmd.splitlines()[0])


def parse(lines):
    """The examples of every ```console block of lines (no newlines)."""
    examples = []
    fence = None  # the open fence's marker, e.g. "```"
    checked = False
    cur = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence is None:
            m = re.match(r"^(`{3,}|~{3,})\s*(\S*)", line)
            if m:
                fence = m.group(1)
                checked = m.group(2) == "console"
            i += 1
            continue
        if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
            if cur:
                examples.append(cur)
                cur = None
            fence = None
            i += 1
            continue
        if not checked:
            if line.startswith("$ "):
                raise SystemExit("README.md:%d: a '$ ' line outside a ```console block: make the "
                                 "block ```console (it is run then), or drop the '$ '" % (i + 1))
            i += 1
            continue
        if line.startswith("$ "):
            if cur:
                examples.append(cur)
            cmd = [line[2:]]
            j = i + 1
            while j < len(lines) and (lines[j].startswith("> ") or lines[j] == ">"):
                cmd.append(lines[j][2:])
                j += 1
            cur = Example(i + 1, "\n".join(cmd), j)
            i = j
            continue
        if cur is None:
            if line.strip():
                raise SystemExit("README.md:%d: a console block's text before its first '$ '" %
                                 (i + 1))
        i += 1
    if fence is not None:
        raise SystemExit("README.md: a code block is not closed")
    for ex in examples:
        ex.gap_end = _block_end(lines, ex)
        end = ex.gap_end
        while end > ex.out_start and not lines[end - 1].strip():
            end -= 1
        ex.out_end = end
        out = [l.rstrip() for l in lines[ex.out_start:end]]
        if out and EXIT_RE.match(out[-1]):
            ex.status = int(EXIT_RE.match(out[-1]).group(1))
            out = out[:-1]
        ex.expected = out
    return examples


def _block_end(lines, ex):
    """One past the last line of ex's output region (next `$ ` or the fence)."""
    j = ex.out_start
    while j < len(lines) and not lines[j].startswith("$ ") and not re.match(r"^\s*(`{3,}|~{3,})\s*$",
                                                                             lines[j]):
        j += 1
    return j


def line_regex(pattern):
    """`...` matches any text; in such a line a run of spaces matches any run
    of spaces, so that a table row keeps its columns under its header."""
    parts = [" +".join(re.escape(w) for w in re.split(" +", p)) for p in pattern.split("...")]
    return re.compile("^" + ".*".join(parts) + "$")


def line_matches(pattern, text):
    if "..." not in pattern:
        return pattern == text
    return line_regex(pattern).match(text) is not None


def matches(expected, actual):
    """True when the actual lines match the expected (with `...`) lines."""
    memo = {}

    def go(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(expected):
            r = j == len(actual)
        elif expected[i].strip() == "...":
            r = go(i + 1, j) or (j < len(actual) and go(i, j + 1))
        else:
            r = j < len(actual) and line_matches(expected[i], actual[j]) and go(i + 1, j + 1)
        memo[key] = r
        return r

    return go(0, 0)


def output_lines(text):
    out = [l.rstrip() for l in text.split("\n")]
    while out and not out[-1]:
        out.pop()
    return out


class Session:
    """A scratch directory, a CPU gpuqd on a socket in it, and the env."""

    def __init__(self, args):
        self.dir = tempfile.mkdtemp(prefix="gpuq-readme-")
        self.sock = os.path.join(self.dir, "gpuqd.sock")
        shim = os.path.join(self.dir, ".bin")
        os.mkdir(shim)
        # a wrapper, not a symlink: a venv's or pyenv's python finds its
        # packages from its own path
        py = os.path.join(shim, "python3")
        with open(py, "w") as f:
            f.write("#!/bin/sh\nexec '%s' \"$@\"\n" % args.python.replace("'", "'\\''"))
        os.chmod(py, 0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "GPUQ_SOCKET")}
        env.update(PATH=":".join([shim, args.bindir, args.gpuqd_dir, "/usr/bin", "/bin"]),
                   GPUQ_SOCKET=self.sock, LC_ALL="C", HOME=self.dir,
                   PYTHONPATH=PYTHON_CLIENT, PYTHONDONTWRITEBYTECODE="1")
        env.pop("TERM", None)
        self.env = env
        gpuqd = os.path.join(args.gpuqd_dir, "gpuqd")
        argv = [gpuqd, "--device", "cpu", "--socket", self.sock]
        if os.geteuid() != 0:
            argv += ["--admin-group", grp.getgrgid(os.getegid()).gr_name]
        self.log_path = os.path.join(self.dir, ".gpuqd.log")
        self.log = open(self.log_path, "w")
        self.daemon = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                       stderr=self.log, env=env, cwd=self.dir)
        # Wait for the log line, not a connection: a probe would count as a
        # session and change the numbers `gpuqctl status` shows.
        deadline = time.time() + 20
        while "listening on" not in self.log_text():
            if self.daemon.poll() is not None or time.time() > deadline:
                self.close()
                raise SystemExit("test_readme: gpuqd did not start:\n" + self.log_text())
            time.sleep(0.02)

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def run(self, cmd):
        """(exit status, output lines) of cmd; status None on a timeout."""
        try:
            p = subprocess.run(["bash", "-c", cmd], cwd=self.dir, env=self.env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=CMD_TIMEOUT)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode("utf-8", "replace") if e.stdout else ""
            return None, output_lines(out) + ["(killed after %d s)" % CMD_TIMEOUT]
        return p.returncode, output_lines(p.stdout.decode("utf-8", "replace"))

    def close(self):
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_all(args, examples):
    """[(status, lines)] of every example, in one session."""
    s = Session(args)
    try:
        return [s.run(ex.cmd) for ex in examples]
    finally:
        s.close()


def check(args, lines, quiet=False):
    """Indices of the examples whose output or status differs."""
    examples = parse(lines)
    if not examples:
        raise SystemExit("test_readme: no ```console examples in the README")
    results = run_all(args, examples)
    failed = []
    for k, (ex, (status, out)) in enumerate(zip(examples, results)):
        ok_out = matches(ex.expected, out)
        ok_status = status == ex.status
        if ok_out and ok_status:
            continue
        failed.append(k)
        if quiet:
            continue
        print("FAIL %r" % ex)
        if not ok_out:
            for d in difflib.unified_diff(ex.expected, out, "README.md", "actual", lineterm="", n=2):
                print("    " + d)
        if not ok_status:
            print("    exit status %s, the README says %d" % (status, ex.status))
    if not quiet:
        print("test_readme: %d examples, %d failed" % (len(examples), len(failed)))
    return failed


TOKEN = re.compile(r"\s+|[/,;:()\[\]{}=\"']|[^\s/,;:()\[\]{}=\"']+")


def merge_line(old, new, others):
    """new (a printed line) with `...` for each token that another run
    printed differently (others: those runs' lines at the same place), and
    with old's `...` kept where it still covers the same text."""
    nt = TOKEN.findall(new)
    varies = [False] * len(nt)
    for other in others:
        sm = difflib.SequenceMatcher(None, nt, TOKEN.findall(other), autojunk=False)
        for op, a0, a1, _, _ in sm.get_opcodes():
            if op != "equal":
                for k in range(a0, a1):
                    varies[k] = True
    out = []
    for k, t in enumerate(nt):
        if not varies[k]:
            out.append(t)
        elif not (out and out[-1] == "..."):
            out.append("...")
    nt = out
    new = "".join(nt)
    if old is None or "..." not in old:
        return new
    ot = TOKEN.findall(old)
    sm = difflib.SequenceMatcher(None, ot, nt, autojunk=False)
    out = []
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        seg_old, seg_new = "".join(ot[a0:a1]), "".join(nt[b0:b1])
        if op != "equal" and "..." in seg_old and line_matches(seg_old, seg_new):
            out.append(seg_old)
        else:
            out.append(seg_new)
    return "".join(out)


def align(expected, actual):
    """For each actual line, the expected line it keeps, or None (DP: keep
    as many README lines as still match, in order)."""
    n, m = len(expected), len(actual)
    # best[i][j]: most kept lines aligning expected[i:] with actual[j:]
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            b = max(best[i + 1][j], best[i][j + 1] if j < m else 0)
            if j < m and expected[i].strip() != "..." and line_matches(expected[i], actual[j]):
                b = max(b, 1 + best[i + 1][j + 1])
            best[i][j] = b
    keep = [None] * m
    i = j = 0
    while i < n and j < m:
        if (expected[i].strip() != "..." and line_matches(expected[i], actual[j]) and
                best[i][j] == 1 + best[i + 1][j + 1]):
            keep[j] = expected[i]
            i += 1
            j += 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    # An unmatched printed line takes the old line at its place as a model.
    return keep


def update(args, lines):
    examples = parse(lines)
    runs = [run_all(args, examples) for _ in range(UPDATE_RUNS)]
    new_lines = list(lines)
    changed = 0
    for k in reversed(range(len(examples))):
        ex = examples[k]
        st1, out1 = runs[0][k]
        if matches(ex.expected, out1) and st1 == ex.status:
            continue
        changed += 1
        if st1 is None:
            print("test_readme: %r timed out; its block is left as it was" % ex, file=sys.stderr)
            continue
        statuses = sorted(set(str(r[k][0]) for r in runs))
        if len(statuses) > 1:
            print("test_readme: %r exits %s in different runs" % (ex, ", ".join(statuses)),
                  file=sys.stderr)
        if matches(ex.expected, out1):
            block = [l.rstrip() for l in lines[ex.out_start:ex.out_end]]
            if block and EXIT_RE.match(block[-1]):
                block.pop()
        else:
            keep = align(ex.expected, out1)
            olds = [l for l in ex.expected if l.strip() != "..."]
            others = [r[k][1] for r in runs[1:] if len(r[k][1]) == len(out1)]
            block = []
            for j, line in enumerate(out1):
                if keep[j] is not None:
                    block.append(keep[j])
                    continue
                model = olds[j] if len(olds) == len(out1) else None
                block.append(merge_line(model, line, [o[j] for o in others]))
        if st1:
            block.append("(exit status %d)" % st1)
        new_lines[ex.out_start:ex.out_end] = block
        print("test_readme: updated %r" % ex)
    print("test_readme: %d of %d examples updated" % (changed, len(examples)))
    return new_lines


def self_test(args, lines):
    """A README with one wrong output line, and one with a wrong exit
    status, each fail exactly that example."""
    examples = parse(lines)
    wrong_line = next(k for k, ex in enumerate(examples)
                      if any(l and "..." not in l for l in ex.expected))
    wrong_status = next(k for k, ex in enumerate(examples) if ex.status != 0)
    ok = True
    for k, what in ((wrong_line, "output line"), (wrong_status, "exit status")):
        ex = examples[k]
        bad = list(lines)
        if what == "output line":
            i = next(i for i in range(ex.out_start, ex.out_end) if lines[i] and "..." not in lines[i])
            bad[i] = lines[i][:-1] + ("X" if lines[i][-1] != "X" else "Y")
        else:
            i = next(i for i in range(ex.out_start, ex.out_end) if EXIT_RE.match(lines[i].rstrip()))
            bad[i] = "(exit status %d)" % (ex.status + 1)
        failed = check(args, bad, quiet=True)
        verdict = "ok" if failed == [k] else "WRONG"
        ok &= failed == [k]
        print("self-test: a wrong %s in %r: failed examples %s, want [%d]: %s" %
              (what, ex, failed, k, verdict))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("readme", nargs="?", default=os.path.join(os.path.dirname(__file__), "..",
                                                              "..", "README.md"))
    ap.add_argument("--bindir", required=True, help="folder of gpuqctl (build/client/cli)")
    ap.add_argument("--gpuqd", dest="gpuqd_dir", help="folder of gpuqd (build/server; "
                    "default: BINDIR/../../server)")
    ap.add_argument("--python", default="/usr/bin/python3", help="python3 with numpy")
    ap.add_argument("--update", action="store_true", help="rewrite README's output blocks")
    ap.add_argument("--self-test", action="store_true", help="check that wrong blocks fail")
    args = ap.parse_args()
    args.bindir = os.path.abspath(args.bindir)
    args.gpuqd_dir = os.path.abspath(args.gpuqd_dir or os.path.join(args.bindir, "..", "..", "server"))
    for prog in (os.path.join(args.bindir, "gpuqctl"), os.path.join(args.gpuqd_dir, "gpuqd")):
        if not os.access(prog, os.X_OK):
            raise SystemExit("test_readme: %s is missing (build gpuqctl and gpuqd)" % prog)
    with open(args.readme) as f:
        lines = f.read().split("\n")
    if args.self_test:
        return self_test(args, lines)
    if args.update:
        new = update(args, lines)
        if new != lines:
            with open(args.readme, "w") as f:
                f.write("\n".join(new))
        return 0
    return 1 if check(args, lines) else 0


if __name__ == "__main__":
    sys.exit(main())
