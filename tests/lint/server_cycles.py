#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""server_cycles.py - fail when gpuqd's server modules call each other in a
cycle (ARCHITECTURE.md: inside server/, dependencies point one way;
completions come back through callbacks the lower layer was handed).

The graph: one node per server/X.c; an edge X -> Y when X.c has
`#include "Y.h"` and server/Y.c exists (Y.h is another module's header).
Type-only headers (*_defs.h) and interfaces without a .c of their own
(backend.h: backends are reached through its ops table) are not edges.
Call cycles follow include edges here because each server module includes
the header of every module it calls, and only those: server_defs.h pulls in
some module headers for their types, so a call could compile without the
direct include; the server's .c files name each callee's header anyway (so
when this test was written; keep it so). Calls back up the layers go through
function pointers (server_defs.h: session_events, server_hooks) and are no
edges, which is the point: callbacks handed down, never calls up.

usage: server_cycles.py [SERVER_DIR]   (default: server/ next to tests/)
       server_cycles.py --self-test     (a planted cycle must be found)
Exit 0: no cycle (the graph is printed); 1: a cycle (printed).
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)


def graph(server_dir):
    mods = sorted(f[:-2] for f in os.listdir(server_dir) if f.endswith(".c"))
    g = {}
    for m in mods:
        with open(os.path.join(server_dir, m + ".c"), encoding="utf-8") as f:
            text = f.read()
        deps = set()
        for inc in INCLUDE.findall(text):
            if inc == m or inc.endswith("_defs") or inc not in mods:
                continue
            deps.add(inc)
        g[m] = sorted(deps)
    return g


def find_cycle(g):
    """A cycle as a list of modules (first == last), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = {m: WHITE for m in g}
    stack = []

    def visit(m):
        color[m] = GREY
        stack.append(m)
        for d in g[m]:
            if color[d] == GREY:
                return stack[stack.index(d):] + [d]
            if color[d] == WHITE:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        color[m] = BLACK
        return None

    for m in g:
        if color[m] == WHITE:
            c = visit(m)
            if c:
                return c
    return None


def check(server_dir, quiet=False):
    g = graph(server_dir)
    c = find_cycle(g)
    if c:
        print("server module cycle: " + " -> ".join(c))
        return 1
    if not quiet:
        for m in g:
            print("%s -> %s" % (m, ", ".join(g[m]) if g[m] else "-"))
    return 0


def self_test():
    """The checker must find a planted cycle (a -> b -> c -> a) and accept
    the same tree once the cycle is cut, while ignoring *_defs.h and
    headers without a module."""
    with tempfile.TemporaryDirectory() as d:
        files = {
            "a.c": '#include "a.h"\n#include "b.h"\n#include "x_defs.h"\n',
            "b.c": '#include "c.h"\n#include "iface.h"\n',
            "c.c": '#include "a.h"\n',
            "x_defs.c": '#include "a.h"\n',
        }
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        if check(d, quiet=True) != 1:
            print("self-test: the planted cycle a -> b -> c -> a was not found")
            return 1
        with open(os.path.join(d, "c.c"), "w") as f:
            f.write('#include "c.h"\n')
        if check(d, quiet=True) != 0:
            print("self-test: a cycle reported in an acyclic tree")
            return 1
    print("self-test: ok")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    server_dir = argv[1] if len(argv) > 1 else os.path.join(here, "..", "..", "server")
    return check(server_dir)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
