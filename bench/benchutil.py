# SPDX-License-Identifier: Apache-2.0
"""What bench/'s Python scripts share (imported from the scripts' own
directory)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time


def start_daemon(who: str, path: str, device: str, sock: str, extra=()) -> subprocess.Popen:
    """Start gpuqd (path) with --device and --socket (and extra flags),
    logging to sock + ".log", and wait until it accepts a connection;
    exits the script (its name: who) when it dies or does not listen
    within 60 s. Every client of a benchmark is the same user: the per-user
    session cap (a quarter of max_sessions by default) is lifted to
    max_sessions, as for root."""
    log = open(sock + ".log", "wb")
    p = subprocess.Popen([path, "--device", device, "--socket", sock, "--log-level", "warn",
                          "--max-sessions-per-user", "256", *extra],
                         stdout=log, stderr=subprocess.STDOUT)
    log.close()  # the child has it
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            sys.exit(f"{who}: gpuqd exited {p.returncode} (log {sock}.log)")
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit(f"{who}: gpuqd did not listen within 60 s")


def stop_daemon(who: str, p: subprocess.Popen) -> bool:
    """SIGTERM gpuqd and wait (killed after 60 s); True when it exited 0,
    else says so on stderr."""
    p.terminate()
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = -1
    if rc != 0:
        print(f"{who}: gpuqd exited {rc}", file=sys.stderr)
    return rc == 0
