#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ctest_calls.py - every script that runs ctest passes --no-tests=error.

A ctest run that finds no test prints "No tests were found!!!" and exits 0,
so a build whose tests were configured off (tests/dev.sh daemon caches
GPUQ_BUILD_TESTS=OFF) passes any check. With --no-tests=error it fails.

Looked at: the source tree's shell scripts (*.sh, or a #!...sh first line,
as .ci/run) and Python files, build directories and .git left out. In
shell, a `ctest` word outside quotes and comments, with its continuation
lines, is a call; in Python, a "ctest" string literal inside a list or call
(subprocess's argv) is one, up to the closing bracket. A call that only
lists tests (-N, --show-only) is fine without the flag.

usage: ctest_calls.py [SOURCE_DIR]   (default: the tree this file is in)
       ctest_calls.py --self-test     (planted calls must be judged right)
Exit 0: every call has the flag (the calls are printed); 1: some lack it.
"""
import os
import re
import sys
import tempfile

FLAG = "--no-tests=error"
LIST_ONLY = re.compile(r"(^|\s|['\"])(-N|--show-only(=\S*)?)($|\s|['\"])")
SKIP_DIRS = {".git", "__pycache__", "node_modules"}


def is_shell(path, first_line):
    return path.endswith(".sh") or re.match(r"#!.*\b(ba|da|z)?sh\b", first_line) is not None


def shell_lines(text):
    """Logical lines (continuations joined) with comments and quoted text
    blanked out, each with its first physical line number."""
    out, cur, start = [], "", 1
    for no, raw in enumerate(text.split("\n"), 1):
        if not cur:
            start = no
        if raw.endswith("\\"):
            cur += raw[:-1] + " "
            continue
        cur += raw
        out.append((start, cur))
        cur = ""
    if cur:
        out.append((start, cur))
    return out


def unquoted(line):
    """The line with quoted text and a trailing comment replaced by spaces."""
    res, q, i = [], None, 0
    while i < len(line):
        ch = line[i]
        if q:
            if ch == "\\" and q == '"' and i + 1 < len(line):
                res.append("  ")
                i += 2
                continue
            if ch == q:
                q = None
            res.append(" ")
        elif ch in "'\"":
            q = ch
            res.append(" ")
        elif ch == "#" and (i == 0 or line[i - 1] in " \t;(|&"):
            break
        else:
            res.append(ch)
        i += 1
    return "".join(res)


CTEST_WORD = re.compile(r"(^|[\s;&|(`])ctest($|[\s;&|)`])")
# what may precede a command: a separator, then variable assignments
COMMAND_POS = re.compile(r"(^|[;&|(`])\s*([A-Za-z_]\w*=\S*\s+)*$")


def shell_calls(text):
    """A ctest word at a command's place, or given options (`run X ctest -R
    ...`, a wrapper's argv); not one that is a plain argument (`want
    ctest`)."""
    for no, line in shell_lines(text):
        u = unquoted(line)
        for m in CTEST_WORD.finditer(u):
            start = m.start() + len(m.group(1))
            after = line[start + len("ctest") :].split()
            if COMMAND_POS.search(u[:start]) or (after and after[0].startswith("-")):
                yield no, line.strip()
                break


PY_CTEST = re.compile(r"""(["'])ctest\1""")


def python_calls(text):
    for m in PY_CTEST.finditer(text):
        # the bracket that holds the literal, back to its match
        depth, i = 0, m.start() - 1
        while i >= 0:
            c = text[i]
            if c in ")]":
                depth += 1
            elif c in "([":
                if depth == 0:
                    break
                depth -= 1
            i -= 1
        if i < 0:
            continue
        close = {"(": ")", "[": "]"}[text[i]]
        depth, j = 0, i
        while j < len(text):
            c = text[j]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if text[j : j + 1] != close:
            continue
        yield text.count("\n", 0, m.start()) + 1, " ".join(text[i : j + 1].split())


def files(root):
    for dirpath, dirnames, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS and not (rel == "." and d.startswith("build"))
        )
        for n in sorted(names):
            yield os.path.join(dirpath, n)


def check(root, quiet=False):
    bad = 0
    for path in files(root):
        if os.path.samefile(path, __file__):
            continue  # its self-test's planted calls
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        first = text.split("\n", 1)[0]
        if path.endswith(".py"):
            calls = python_calls(text)
        elif is_shell(path, first):
            calls = shell_calls(text)
        else:
            continue
        for no, call in calls:
            ok = FLAG in call or LIST_ONLY.search(call) is not None
            where = f"{os.path.relpath(path, root)}:{no}"
            if not ok:
                bad += 1
                if not quiet:
                    print(f"{where}: ctest without {FLAG}: {call}")
            elif not quiet:
                print(f"{where}: ok: {call}")
    return 1 if bad else 0


def self_test():
    """Planted calls: the ones without the flag are found, the rest pass."""
    cases = {
        # file: (text, expected exit)
        "bad.sh": ('#!/bin/sh\n(cd b && ctest -L x \\\n  --output-on-failure)\n', 1),
        "good.sh": ('#!/bin/sh\n(cd b && ctest -L x \\\n  --no-tests=error)\n', 0),
        "list.sh": ("#!/bin/sh\nctest -N -L x | wc -l\n", 0),
        "quoted.sh": ('#!/bin/sh\necho "== ctest -L x"  # ctest here\nmv ctest.log x\n', 0),
        "run": ('#!/usr/bin/env bash\nrun "$t" ctest --test-dir b\n', 1),
        "env.sh": ("#!/bin/sh\nA=1 B=2 ctest\n", 1),
        "arg.sh": ("#!/bin/sh\nif want ctest; then :; fi\n", 0),
        "bad.py": ('import subprocess\nsubprocess.run(["ctest", "-R", r,\n    "-j", "2"])\n', 1),
        "good.py": ('run(["ctest", "-R", r,\n     "--no-tests=error"], b)\n', 0),
        "list.py": ('run(["ctest", "-N", "-LE", "fuzz"], b)\n', 0),
    }
    for name, (text, want) in cases.items():
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            got = check(d, quiet=True)
            if got != want:
                print(f"self-test: {name}: exit {got}, expected {want}")
                return 1
    print("self-test: ok")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    root = argv[1] if len(argv) > 1 else os.path.join(here, "..", "..")
    rc = check(root)
    print("ctest_calls: " + ("FAIL" if rc else "ok"))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
