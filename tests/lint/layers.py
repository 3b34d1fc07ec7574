#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""layers.py - fail when gpuqd's layers call or include against their order,
or when modules call each other in a cycle.

1. Layers (server/README.md draws them). Each folder of server/ is a layer
   and may use only the folders LAYERS names for it (and itself):
   - an `#include "X.h"` of a server header is allowed when X.h's folder is;
     a type-only header (*_defs.h) may be included anywhere and may include
     anything, and must declare no function (types only: checked);
   - a call to a function (or function-like macro) that a server header
     declares is allowed when that header's folder is. This catches a call
     reached through another header's includes, which an include rule alone
     would miss. Calls through function pointers (`x->f(`, `x.f(`) are not
     calls into a layer: they are how lower layers hand events back up
     (server_defs.h: session_events, sched.run, server_hooks), which is the
     point.
   - headers of kernels/ and ops/op_backend.h (how a kernel is launched) are
     the backends' alone.
   A folder under server/ that LAYERS does not name fails: say where a new
   layer sits before adding it.
2. No cycles. One node per X.c of a folder; an edge X -> Y when X.c calls a
   function Y.c defines (whatever header declares it) or includes Y.h, Y.c
   being a module of the same group (type-only *_defs.h and interfaces
   without a .c of their own are no edges). Groups: server/ (all
   its layers together), client/lib, client/cli, bench, and the tests'
   helper folders.

usage: layers.py [ROOT]        (default: the checkout holding this script)
       layers.py --self-test    (planted faults must be found)
Exit 0: ok (the layers' edges are printed); 1: a fault (printed).
"""
import os
import re
import sys
import tempfile

# folder (relative to server/; "" is server/ itself: main.c and server.c,
# which build every layer) -> the folders it may use besides itself.
LAYERS = {
    "": ["request", "sched", "planes", "transport", "backends", "backends/cpu", "backends/cuda",
         "service"],
    "request": ["sched", "planes", "transport", "backends", "service"],
    "sched": ["backends", "service"],
    "planes": ["backends", "service"],
    "transport": ["service"],
    "backends": ["service"],
    "backends/cpu": ["backends", "service"],
    "backends/cuda": ["backends", "service"],
    "service": [],
}
BACKEND_ONLY_DIRS = ("kernels",)
BACKEND_ONLY_HEADERS = ("op_backend.h",)
CYCLE_GROUPS = ["server", "client/lib", "client/cli", "bench", "tests", "tests/e2e", "tests/gpu",
                "tests/fuzz"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CALL = re.compile(r'(->|\.)?\s*\b([A-Za-z_]\w*)\s*\(')
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined", "_Alignof", "_Static_assert",
            "__attribute__", "typeof", "__typeof__", "_Generic"}


def strip(text):
    """Text without comments, string and character literals (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def declared(text):
    """Functions and function-like macros a header declares or defines."""
    text = strip(text)
    names = set(re.findall(r'^\s*#\s*define\s+(\w+)\(', text, re.M))
    text = re.sub(r'^\s*#.*$', "", text, flags=re.M)
    # drop brace bodies (structs, enums, inline functions' bodies)
    flat, depth = [], 0
    for c in text:
        if c == "{":
            depth += 1
            if depth == 1:
                flat.append(";")
        elif c == "}":
            depth -= 1
        elif depth == 0:
            flat.append(c)
    for stmt in "".join(flat).split(";"):
        if re.match(r'\s*typedef\b', stmt):
            continue
        depth = 0
        for m in re.finditer(r'[()]|\b([A-Za-z_]\w*)\s*(?=\()', stmt):
            tok = m.group(0)
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
            elif depth == 0 and m.group(1) not in KEYWORDS and not m.group(1).isupper():
                names.add(m.group(1))
                break
    return names


def server_files(server_dir):
    """(folder relative to server/, file name) of every .c and .h."""
    for dirpath, _, files in os.walk(server_dir):
        rel = os.path.relpath(dirpath, server_dir)
        rel = "" if rel == "." else rel
        for f in sorted(files):
            if f.endswith((".c", ".h")):
                yield rel, f


def check_layers(root, quiet=False):
    server_dir = os.path.join(root, "server")
    errors = []
    header_dir, text = {}, {}
    for d, f in server_files(server_dir):
        if d not in LAYERS:
            errors.append("server/%s/%s: server/%s/ is not a layer (add it to LAYERS in "
                          "tests/lint/layers.py and to server/README.md)" % (d, f, d))
            continue
        with open(os.path.join(server_dir, d, f), encoding="utf-8") as fh:
            text[(d, f)] = fh.read()
        if f.endswith(".h"):
            if f in header_dir:
                errors.append("server: two headers named %s" % f)
            header_dir[f] = d
    owner = {}  # function name -> folders of the headers declaring it
    for (d, f), t in text.items():
        if not f.endswith(".h"):
            continue
        names = declared(t)
        if f.endswith("_defs.h") and names:
            errors.append("server/%s: a *_defs.h holds types only, but declares %s" %
                          (os.path.join(d, f), ", ".join(sorted(names))))
        for name in names:
            owner.setdefault(name, set()).add(d)
    edges = {}
    for (d, f), t in sorted(text.items()):
        where = os.path.join("server", d, f)
        allowed = set(LAYERS[d]) | {d}
        backend = d == "backends" or d.startswith("backends/")
        for inc in INCLUDE.findall(t):
            base = os.path.basename(inc)
            if base in header_dir and not base.endswith("_defs.h") and not f.endswith("_defs.h"):
                hd = header_dir[base]
                if hd not in allowed:
                    errors.append("%s includes %s (server/%s): %s may not use %s" %
                                  (where, base, hd, d or "server/", hd))
                elif hd != d:
                    edges.setdefault(d, set()).add(hd)
            if not backend and (base in BACKEND_ONLY_HEADERS or any(
                    os.path.exists(os.path.join(root, k, base)) for k in BACKEND_ONLY_DIRS)):
                errors.append("%s includes %s: only the backends know how kernels are launched" %
                              (where, base))
        if f.endswith("_defs.h"):
            continue
        own = declared(t) if f.endswith(".h") else set()
        body = strip(t)
        # the file's own definitions are not calls into another layer
        own |= set(re.findall(r'^\w[\w\s\*]*?\b(\w+)\s*\([^;]*?\)\s*\{', body, re.M | re.S))
        for m in CALL.finditer(body):
            if m.group(1):
                continue
            name = m.group(2)
            if name in own or name not in owner:
                continue
            if not owner[name] & allowed:
                errors.append("%s calls %s (server/%s): %s may not use %s" %
                              (where, name, "/".join(sorted(owner[name])), d or "server/",
                               ", ".join(sorted(owner[name]))))
    for e in errors:
        print("layers: " + e)
    if not errors and not quiet:
        for d in sorted(edges):
            print("layer %s -> %s" % (d or "(top)", ", ".join(sorted(edges[d]))))
    return 1 if errors else 0


DEFINE = re.compile(r'^(?!static\b)[A-Za-z_][\w \t\*]*?\b(\w+)\s*\([^;{}]*\)\s*\{', re.M)


def module_graph(group_dir, recursive):
    """One node per X.c; an edge X -> Y when X.c calls a function that Y.c
    defines (not static), whichever header declares it (a public header such
    as gpuq.h declares functions of many files), or includes Y.h. A name
    that several files define (main, a fuzz target's entry point) belongs to
    separate programs and makes no edge."""
    files = []
    if recursive:
        for dirpath, _, names in os.walk(group_dir):
            files += [os.path.join(dirpath, f) for f in names if f.endswith(".c")]
    else:
        files = [os.path.join(group_dir, f) for f in os.listdir(group_dir) if f.endswith(".c")]
    mods, defined_by = {}, {}
    for p in files:
        m = os.path.basename(p)[:-2]
        with open(p, encoding="utf-8") as fh:
            mods[m] = fh.read()
        for name in DEFINE.findall(strip(mods[m])):
            defined_by.setdefault(name, set()).add(m)
    g = {}
    for m, text in sorted(mods.items()):
        deps = {os.path.basename(i)[:-2] for i in INCLUDE.findall(text) if i.endswith(".h")}
        deps = {d for d in deps if d in mods and not d.endswith("_defs")}
        for c in CALL.finditer(strip(text)):
            owners = defined_by.get(c.group(2), set())
            if not c.group(1) and len(owners) == 1:  # several: separate programs
                deps |= owners
        deps.discard(m)
        g[m] = sorted(deps)
    return g


def find_cycle(g):
    """A cycle as a list of modules (first == last), or None."""
    color = {m: 0 for m in g}
    stack = []

    def visit(m):
        color[m] = 1
        stack.append(m)
        for d in g[m]:
            if color[d] == 1:
                return stack[stack.index(d):] + [d]
            if color[d] == 0:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        color[m] = 2
        return None

    for m in g:
        if color[m] == 0:
            c = visit(m)
            if c:
                return c
    return None


def check_cycles(root, groups):
    bad = 0
    for grp in groups:
        path = os.path.join(root, grp)
        if not os.path.isdir(path):
            continue
        c = find_cycle(module_graph(path, recursive=(grp == "server")))
        if c:
            print("layers: module cycle in %s/: %s" % (grp, " -> ".join(c)))
            bad = 1
    # the layer table itself must point one way
    c = find_cycle({d: [x for x in LAYERS[d] if x in LAYERS] for d in LAYERS})
    if c:
        print("layers: LAYERS has a cycle: " + " -> ".join(c))
        bad = 1
    return bad


def check(root, quiet=False):
    rc = check_layers(root, quiet) | check_cycles(root, CYCLE_GROUPS)
    if rc == 0 and not quiet:
        print("layers: ok")
    return rc


def self_test():
    """Each planted fault must be found, and the clean tree pass."""
    clean = {
        "server/main.c": '#include "request.h"\nint main(void) { return request_go(); }\n',
        "server/server_defs.h": '#include "session.h"\ntypedef struct srv { int (*hook)(void); } srv;\n',
        "server/request/request.h": '#include "server_defs.h"\nint request_go(void);\n',
        "server/request/request.c": ('#include "request.h"\n#include "session.h"\n'
                                     'int request_go(void) { return session_send(0); }\n'),
        "server/transport/session.h": '#define SESSION_MAX(a) (a)\nint session_send(int x);\n',
        "server/transport/session.c": ('#include "session.h"\n#include "server_defs.h"\n'
                                       'int session_send(int x) { srv *s = 0; '
                                       '/* request_go() */ return s->hook(); }\n'),
        "server/service/log.h": 'void log_msg(const char *m);\n',
        "server/service/log.c": '#include "log.h"\nvoid log_msg(const char *m) { (void)m; }\n',
        "bench/a.c": '#include "b.h"\n', "bench/b.c": '#include "x_defs.h"\n',
        "bench/pub.h": 'int c_fn(void);\nint d_fn(void);\n',
        "bench/c.c": '#include "pub.h"\nint c_fn(void) { return d_fn(); }\n',
        "bench/d.c": '#include "pub.h"\nint d_fn(void) { return 0; }\n',
        "kernels/gpuq_kernels.h": 'int k(void);\n',
    }
    faults = {
        "an upward include": ("server/transport/session.c", '#include "request.h"\n'),
        "an upward call through a defs header": (
            "server/transport/session.c", 'static int f(void) { return request_go(); }\n'),
        "a macro from a layer above": ("server/service/log.c",
                                       'static int g(void) { return SESSION_MAX(1); }\n'),
        "a function in a *_defs.h": ("server/server_defs.h", 'int defs_fn(int a);\n'),
        "a folder that is no layer": ("server/extra/x.c", 'int x;\n'),
        "a kernel header outside the backends": ("server/request/request.c",
                                                 '#include "gpuq_kernels.h"\n'),
        "a module cycle": ("bench/b.c", '#include "a.h"\n'),
        "a call cycle through a public header": ("bench/d.c",
                                                 'int e_fn(void) { return c_fn(); }\n'),
    }
    ok = True
    for what, plant in [(None, None)] + sorted(faults.items()):
        with tempfile.TemporaryDirectory() as d:
            for name, t in clean.items():
                if plant and plant[1] and name == plant[0]:
                    t += plant[1]
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                with open(os.path.join(d, name), "w") as fh:
                    fh.write(t)
            if plant and plant[0] not in clean:
                os.makedirs(os.path.dirname(os.path.join(d, plant[0])), exist_ok=True)
                with open(os.path.join(d, plant[0]), "w") as fh:
                    fh.write(plant[1])
            rc = check_layers(d, quiet=True) | check_cycles(d, ["server", "bench"])
        want = 0 if what is None else 1
        if rc != want:
            print("self-test: %s: exit %d, want %d" % (what or "the clean tree", rc, want))
            ok = False
    print("self-test: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    return check(argv[1] if len(argv) > 1 else os.path.join(here, "..", ".."))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
