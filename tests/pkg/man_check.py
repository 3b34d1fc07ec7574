#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""man_check.py - the man pages say what the programs say.

  gpuqd(8)       every option `gpuqd --help` lists, and the flag of every
                 [server]/[limits]/[policy] key of server/service/config_keys.c
  gpuqctl(1)     every option and command `gpuqctl --help` lists, and every
                 option of each command's own help (`gpuqctl help CMD`,
                 where gpuqctl has it)
  gpuqd.conf(5)  every key of server/service/config_keys.c, and its section

An option is a word like --name or -x; a man page mentions it when the
word occurs in its scdoc source with no letter, digit or '-' on either side.
Keys are matched the same way (socket_mode does not count for socket).

usage: man_check.py GPUQD GPUQCTL CONFIG_KEYS_C MAN_DIR
       man_check.py --self-test   (a page missing an option must fail)
Exit 0: all mentioned (what was checked is printed); 1: some are missing.
"""
import os
import re
import subprocess
import sys
import tempfile

LONG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
SHORT = re.compile(r"(?<![\w-])-[A-Za-z](?![\w-])")
KEY = re.compile(r'\{\s*KEY_\w+\s*,\s*"(\w+)"\s*,\s*"(\w+)"')


def mentions(text, word):
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None


def options(help_text):
    return set(LONG.findall(help_text)) | set(SHORT.findall(help_text))


def run(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def ctl_commands(help_text):
    """Command names of gpuqctl --help's "commands:" list: each row's first
    words that look like a command ("distance knn"), with or without a
    leading "gpuqctl"."""
    cmds, inside = [], False
    for line in help_text.splitlines():
        if re.match(r"^commands:", line):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            break
        if not inside or not re.match(r"^  \S", line):
            continue
        words = re.split(r"\s{2,}", line.strip())[0].split()
        if words and words[0] == "gpuqctl":
            words = words[1:]
        name = []
        for w in words:
            if not re.fullmatch(r"[a-z][a-z-]*", w):
                break
            name.append(w)
        if name:
            cmds.append(" ".join(name))
    return cmds


def check(gpuqd, gpuqctl, keys_c, man_dir, quiet=False):
    missing = []

    def page(name):
        with open(os.path.join(man_dir, name + ".scd"), encoding="utf-8") as f:
            return f.read()

    def need(where, text, words, what):
        for w in sorted(words):
            if not mentions(text, w):
                missing.append(f"{where}: {what} {w}")
        if not quiet:
            print(f"{where}: {len(words)} checked ({what})")

    with open(keys_c, encoding="utf-8") as f:
        keys = KEY.findall(f.read())
    if not keys:
        missing.append(f"{keys_c}: no keys found (has its table changed?)")

    # gpuqd(8)
    rc, out = run([gpuqd, "--help"])
    if rc != 0:
        missing.append(f"gpuqd --help exits {rc}")
    d8 = page("gpuqd.8")
    need("gpuqd.8", d8, options(out), "options of gpuqd --help")
    need("gpuqd.8", d8, {"--" + k.replace("_", "-") for s, k in keys if s != "rule"},
         "flags of config keys")

    # gpuqctl(1)
    rc, out = run([gpuqctl, "--help"])
    if rc != 0:
        missing.append(f"gpuqctl --help exits {rc}")
    c1 = page("gpuqctl.1")
    opts = options(out)
    cmds = ctl_commands(out)
    if not cmds:
        missing.append("gpuqctl --help: no commands found")
    for c in cmds:
        rc, sub = run([gpuqctl, "help"] + c.split())
        if rc == 0:
            opts |= options(sub)
    need("gpuqctl.1", c1, opts, "options of gpuqctl's help pages")
    need("gpuqctl.1", c1, set(cmds), "commands")

    # gpuqd.conf(5)
    c5 = page("gpuqd.conf.5")
    need("gpuqd.conf.5", c5, {k for s, k in keys}, "config keys")
    sections = {s for s, k in keys}
    need("gpuqd.conf.5", c5, {f"[{s}]" for s in sections if s != "rule"}, "sections")
    if "rule" in sections:
        need("gpuqd.conf.5", c5, {"[user NAME]", "[group NAME]"}, "rule sections")

    if not quiet:
        for m in missing:
            print("MISSING: " + m)
    return 1 if missing else 0


def self_test():
    """Fake programs and pages: complete pages pass; dropping one option,
    one command's option or one key from a page fails."""
    with tempfile.TemporaryDirectory() as d:
        def write(name, text, mode=0o644):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(text)
            os.chmod(p, mode)
            return p

        gpuqd = write("gpuqd", "#!/bin/sh\necho 'usage: gpuqd [--socket PATH] [--max-inflight N] [-h]'\n",
                      0o755)
        gpuqctl = write("gpuqctl", "#!/bin/sh\n"
                        'if [ "$1" = help ]; then echo "usage: gpuqctl $2 [--count N]"; exit 0; fi\n'
                        "printf 'usage: gpuqctl [--json] COMMAND\\ncommands:\\n"
                        "  ping        Round trip.\\n  distance knn  Neighbours.\\n'\n", 0o755)
        keys = write("keys.c", '{KEY_SOCKET, "server", "socket", K, 0, 0},\n'
                     '{KEY_MAX_INFLIGHT, "limits", "max_inflight", K, 0, 0},\n')
        mand = os.path.join(d, "man")
        os.mkdir(mand)
        pages = {
            "gpuqd.8": "*--socket* *--max-inflight* *-h*",
            "gpuqctl.1": "*--json* *ping* *distance knn* *--count*",
            "gpuqd.conf.5": "*[server]* *[limits]* *socket* *max_inflight*",
        }
        for n, t in pages.items():
            write(os.path.join("man", n + ".scd"), t)
        if check(gpuqd, gpuqctl, keys, mand, quiet=True) != 0:
            print("self-test: complete pages were refused")
            return 1
        drops = [("gpuqd.8", "*--max-inflight*"), ("gpuqctl.1", "*--count*"),
                 ("gpuqctl.1", "*distance knn*"), ("gpuqd.conf.5", "*socket*"),
                 ("gpuqd.8", "*-h*")]
        for n, word in drops:
            write(os.path.join("man", n + ".scd"), pages[n].replace(word, "*--socket-mode*"))
            if check(gpuqd, gpuqctl, keys, mand, quiet=True) != 1:
                print(f"self-test: {n} without {word} passed")
                return 1
            write(os.path.join("man", n + ".scd"), pages[n])
    print("self-test: ok")
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    rc = check(*argv[1:])
    print("man_check: " + ("FAIL" if rc else "ok"))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
