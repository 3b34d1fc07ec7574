# SPDX-License-Identifier: Apache-2.0
"""Copies into and out of arena blocks, spread over a few threads.

Staging a plain array (into an arena block before the request, out of one
after the reply) is a memory copy that one thread does at a few GB/s; NumPy
releases the GIL while it copies, so several threads each copying a slice
move several times that. :func:`copy` is ``np.copyto`` with that split:
arrays of :data:`MIN_BYTES` or more are cut into slices (:func:`slice_bytes`: a
multiple of :data:`CHUNK_MIN`, at most :data:`CHUNK`) that the caller and the
process's copy threads take in turn (a thread that starts late finds fewer
slices left, or none, and nobody waits for it); smaller ones, and any whose
layout does not split into slices cheaply, are one ``np.copyto`` on the
caller's thread. The bytes are ``np.copyto``'s either way. :func:`copy_of`
copies a result out of its block into memory of the process's result cache
(:mod:`._results`) when it is :data:`MIN_BYTES` or more.

Threads that copy (the caller counted): ``min(16, usable CPUs - 2)``, at
least 1; the environment's ``GPUQ_COPY_THREADS`` (1..64) when the first
large copy starts the pool overrides it, as for libgpuq (1: never a
thread). A child after ``fork`` starts a pool of its own when it needs one.
When no thread can be had (interpreter shutdown, threads refused) the copy
is done on the caller's thread.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional, Tuple

import numpy as np

from . import _results

# Slices are nbytes / (2 x threads), rounded down to a multiple of
# CHUNK_MIN and kept within [CHUNK_MIN, CHUNK]: 2 MiB slices measured
# fastest for 64 MiB on 8 threads (1.55 ms against 1.9 ms with 1 MiB ones and
# 1.9 ms with 4 MiB ones: fewer GIL hand-offs, still balanced), and smaller
# arrays still reach every thread.
CHUNK = 2 << 20  # bytes of a slice at most
CHUNK_MIN = 256 << 10  # bytes of a slice at least, and what slices are multiples of
MIN_BYTES = 1 << 20  # below: np.copyto on the caller's thread
PER_THREAD = 512 << 10  # a copy takes one thread per this many bytes at most
MAX_THREADS = 64

_lock = threading.Lock()
_pool: Optional[ThreadPoolExecutor] = None
_nthreads = 0  # threads that copy, the caller counted (0: not decided yet)


def threads() -> int:
    """The threads a copy uses, the caller counted (GPUQ_COPY_THREADS, else
    min(16, usable CPUs - 2), at least 1)."""
    env = os.environ.get("GPUQ_COPY_THREADS", "")
    if env.isdigit() and 1 <= int(env) <= MAX_THREADS:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(16, cpus - 2))


def _executor() -> Tuple[Optional[ThreadPoolExecutor], int]:
    global _pool, _nthreads
    with _lock:
        if _nthreads == 0:
            _nthreads = threads()
            if _nthreads > 1:
                _pool = ThreadPoolExecutor(_nthreads - 1, thread_name_prefix="gpuq-copy")
        return _pool, _nthreads


def _forget_pool() -> None:
    """In a child after fork: the parent's threads are not here."""
    global _lock, _pool, _nthreads
    _lock = threading.Lock()
    _pool = None
    _nthreads = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class _Job:
    """One copy's slices, taken by the caller and the threads in turn."""

    __slots__ = ("it", "cv", "active", "closed", "error")

    def __init__(self, pieces: List[Tuple[np.ndarray, np.ndarray]]):
        self.it = iter(pieces)  # next() on a list iterator is atomic under the GIL
        self.cv = threading.Condition(threading.Lock())
        self.active = 0  # threads inside the job
        self.closed = False  # the caller is done taking: no thread may join
        self.error: Optional[BaseException] = None

    def take(self, casting: str) -> None:
        for d, s in self.it:
            np.copyto(d, s, casting=casting)

    def helper(self, casting: str) -> None:
        with self.cv:
            if self.closed:
                return
            self.active += 1
        try:
            self.take(casting)
        except BaseException as e:  # handed to the caller
            self.error = e
        finally:
            with self.cv:
                self.active -= 1
                if self.active == 0:
                    self.cv.notify()


def slice_bytes(nbytes: int, nthreads: int) -> int:
    """Bytes of dst in one slice of a copy of nbytes over nthreads."""
    b = nbytes // (2 * nthreads) // CHUNK_MIN * CHUNK_MIN
    return min(CHUNK, max(CHUNK_MIN, b))


def _slices(dst: np.ndarray, src: np.ndarray,
            nthreads: int) -> Optional[List[Tuple[np.ndarray, np.ndarray]]]:
    """dst and src cut into matching slices of about slice_bytes() of dst,
    or None when they do not cut cheaply (views only, never a copy)."""
    if dst.shape != src.shape or dst.ndim == 0:
        return None
    want = slice_bytes(dst.nbytes, nthreads)
    if dst.flags.c_contiguous and src.flags.c_contiguous:
        d, s = dst.reshape(-1), src.reshape(-1)  # views of contiguous arrays
        step = max(1, want // dst.itemsize)
    elif dst.shape[0] > 1:
        d, s = dst, src  # rows of possibly strided arrays
        row = dst.nbytes // dst.shape[0]
        step = max(1, want // max(1, row))
    else:
        return None
    n = d.shape[0]
    return [(d[i:i + step], s[i:i + step]) for i in range(0, n, step)]


def copy(dst: np.ndarray, src: np.ndarray, casting: str = "same_kind") -> None:
    """np.copyto(dst, src, casting=casting) for src of dst's shape (the
    same bytes), on several threads when dst is large."""
    if dst.nbytes < MIN_BYTES or not np.can_cast(src.dtype, dst.dtype, casting):
        np.copyto(dst, src, casting=casting)  # small, or np.copyto's own error
        return
    pool, n = _executor()
    pieces = _slices(dst, src, n) if pool is not None else None
    if pieces is None or len(pieces) < 2:
        np.copyto(dst, src, casting=casting)
        return
    job = _Job(pieces)
    try:
        # one thread per PER_THREAD bytes at most, as libgpuq's pool
        helpers = min(n - 1, len(pieces) - 1, (dst.nbytes + PER_THREAD - 1) // PER_THREAD - 1)
        for _ in range(helpers):
            pool.submit(job.helper, casting)
    except RuntimeError:  # interpreter shutdown, or no thread to be had: the caller copies
        pass
    try:
        job.take(casting)
    finally:
        with job.cv:
            job.closed = True
            while job.active:
                job.cv.wait()
    if job.error is not None:
        raise job.error


def copy_of(a: np.ndarray) -> np.ndarray:
    """A new C-contiguous array equal to a (np.array(a)), copied as copy() does;
    of MIN_BYTES or more, in a buffer of the process's result cache (_results:
    memory an earlier result gave back is written without page faults)."""
    out = _results.empty(a.shape, a.dtype) if a.nbytes >= MIN_BYTES else \
        np.empty(a.shape, a.dtype)
    copy(out, a, "no")
    return out
