# SPDX-License-Identifier: Apache-2.0
"""Result buffers for copies out of the arena, recycled within the process.

A result that gpuqd wrote into an arena block is copied out into private
memory (arena memory is pinned by gpuqd and counts against its limits).
Fresh memory page-faults once per 4 KiB page as it is first written, which
for a large result costs far more than the copy itself; a buffer that an
earlier result gave back has its pages already. :func:`empty` hands out
arrays backed by a :class:`Buffer`, an anonymous private mapping
(``mmap.mmap(-1, size, MAP_PRIVATE)``, page-aligned) exposed through
``__array_interface__`` as ``_arena.Block`` exposes arena bytes: every
array made from it, and every view of those, keeps it alive, and when the
last of them is garbage its region goes back to the cache's free list. A
request takes a free region of its page-rounded size, else the smallest
larger one of at most twice the size, else maps a new one.

The cache holds at most ``GPUQ_RESULT_CACHE`` bytes of free regions (a
whole number of bytes, read at the first use and by :func:`reset`; 0: no
cache, :func:`empty` is ``np.empty``; default 256 MiB); a region given back
that does not fit is unmapped. A child after ``fork`` starts with an empty
cache of its own: what it inherited stays valid memory (private,
copy-on-write), and is unmapped, never recycled, when the child frees it.
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import mmap
import os
import threading
from typing import Dict, List, Optional, Tuple

import numpy as np

DEFAULT_CAP = 256 << 20
PAGE = mmap.PAGESIZE
_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)

Region = Tuple[mmap.mmap, int]  # a mapping and its address


def _cap_from_env() -> int:
    env = os.environ.get("GPUQ_RESULT_CACHE", "").strip()
    return int(env) if env.isdigit() else DEFAULT_CAP


def _new_region(size: int) -> Region:
    """A new private anonymous mapping of size bytes (a multiple of PAGE).
    MAP_PRIVATE, not mmap's default MAP_SHARED: a shared mapping would stay
    shared with a child after fork, unlike np.empty's memory."""
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    if _MADV_HUGEPAGE is not None:
        try:
            mm.madvise(_MADV_HUGEPAGE)  # fewer faults on first use where THP is madvise
        except (OSError, ValueError):
            pass
    c = ctypes.c_char.from_buffer(mm)
    addr = ctypes.addressof(c)
    del c  # no buffer export outlives this line
    return mm, addr


class Buffer:
    """A region of the cache, owned by the arrays made from it."""

    __slots__ = ("cache", "region", "__array_interface__", "__weakref__")

    def __init__(self, cache: "_Cache", region: Region, nbytes: int):
        self.cache = cache
        self.region = region  # keeps the mapping alive
        self.__array_interface__ = {"data": (region[1], False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self):
        # The last array made from the buffer is gone.
        self.cache.give_back(self.region)

    def array(self, shape, dtype: np.dtype) -> np.ndarray:
        """The buffer as an array of shape and dtype (its nbytes), made once."""
        if dtype.fields is None and dtype.subdtype is None:  # the array's base is the buffer
            self.__array_interface__ = {"data": self.__array_interface__["data"],
                                        "shape": tuple(shape), "typestr": dtype.str,
                                        "version": 3}
            return np.asarray(self)
        return np.asarray(self).view(dtype).reshape(shape)


class _Cache:
    """Free regions by size, at most cap bytes of them.

    give_back() runs wherever garbage is made, possibly on a thread that
    holds the lock already (a collection inside take()): it never waits for
    the lock, it leaves the region in _returned for the holder (or the next
    call) to file. Mappings are unmapped outside the lock.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.lock = threading.Lock()
        self.dead = False  # dropped (reset, or the parent's cache in a child after fork)
        self.sizes: List[int] = []  # sorted sizes that have free regions
        self.free: Dict[int, List[Region]] = {}
        self.free_bytes = 0
        self.hits = 0
        self.misses = 0
        self.unmapped = 0
        self._returned: collections.deque = collections.deque()  # appended by give_back

    def take(self, nbytes: int) -> Buffer:
        """A buffer of nbytes (> 0): a free region of the same page-rounded
        size, else the smallest larger one of at most twice it, else a new one."""
        need = (nbytes + PAGE - 1) // PAGE * PAGE
        region = None
        with self.lock:
            drop = self._file_returned()
            i = bisect.bisect_left(self.sizes, need)
            if i < len(self.sizes) and self.sizes[i] <= 2 * need:
                size = self.sizes[i]
                lst = self.free[size]
                region = lst.pop()
                if not lst:
                    del self.free[size]
                    del self.sizes[i]
                self.free_bytes -= size
                self.hits += 1
            else:
                self.misses += 1
        _unmap(drop)
        self.settle()
        if region is None:
            region = _new_region(need)  # OSError when no mapping can be had
        return Buffer(self, region, nbytes)

    def give_back(self, region: Region) -> None:
        if self.dead:
            return  # the mapping goes with the buffer
        self._returned.append(region)
        self.settle()

    def settle(self) -> None:
        """File the regions given back, unless the lock is held: every holder
        calls this after letting go, so none is left behind for long."""
        while self._returned and self.lock.acquire(blocking=False):
            try:
                drop = self._file_returned()
            finally:
                self.lock.release()
            _unmap(drop)

    def _file_returned(self) -> List[Region]:
        """Under the lock: the regions given back since, into the free list;
        those that do not fit under the cap are returned, to be unmapped."""
        drop = []
        while self._returned:
            region = self._returned.popleft()
            size = len(region[0])
            if self.dead or self.free_bytes + size > self.cap:
                drop.append(region)
                self.unmapped += 1
                continue
            if size not in self.free:
                bisect.insort(self.sizes, size)
                self.free[size] = []
            self.free[size].append(region)
            self.free_bytes += size
        return drop

    def drop_all(self) -> List[Region]:
        """The cache is no longer used: its free regions (to be unmapped)."""
        self.dead = True
        regions = [r for lst in self.free.values() for r in lst]
        while self._returned:
            regions.append(self._returned.popleft())
        self.free, self.sizes, self.free_bytes = {}, [], 0
        return regions


def _unmap(regions: List[Region]) -> None:
    for mm, _ in regions:
        try:
            mm.close()
        except BufferError:  # pragma: no cover - no export is kept; never unmap one in use
            pass


_lock = threading.Lock()
_cache: Optional[_Cache] = None


def _current() -> _Cache:
    global _cache
    c = _cache
    if c is None:
        with _lock:
            if _cache is None:
                _cache = _Cache(_cap_from_env())
            c = _cache
    return c


def empty(shape, dtype) -> np.ndarray:
    """A writable C-contiguous array of shape and dtype, in private memory
    from the cache (np.empty when the cache is off or the array holds
    objects or no bytes). Its contents are undefined."""
    dt = np.dtype(dtype)
    c = _current()
    if c.cap <= 0 or dt.hasobject:
        return np.empty(shape, dt)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if nbytes <= 0:
        return np.empty(shape, dt)
    try:
        buf = c.take(nbytes)
    except OSError:  # no mapping to be had: np.empty's own MemoryError, or its memory
        return np.empty(shape, dt)
    return buf.array(shape, dt)


def stats() -> dict:
    """The cache's figures: cap, hits, misses, free_bytes, free_regions,
    unmapped (regions given back over the cap)."""
    c = _current()
    c.settle()
    with c.lock:
        out = {"cap": c.cap, "hits": c.hits, "misses": c.misses, "free_bytes": c.free_bytes,
               "free_regions": sum(len(v) for v in c.free.values()), "unmapped": c.unmapped}
    c.settle()
    return out


def reset() -> None:
    """Drop the cache (its free regions are unmapped; live buffers stay
    valid and are unmapped when freed) and read GPUQ_RESULT_CACHE again."""
    global _cache
    with _lock:
        old, _cache = _cache, _Cache(_cap_from_env())
    if old is not None:
        with old.lock:
            drop = old.drop_all()
        _unmap(drop)


def _forget_cache() -> None:
    """In a child after fork: the parent's free regions are not recycled
    here (and its locks may have been held by a thread that is not here)."""
    global _lock, _cache
    old = _cache
    _lock = threading.Lock()
    _cache = None
    if old is not None:
        old.dead = True
        old.free, old.sizes, old.free_bytes = {}, [], 0  # unmapped in the child only


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_cache)
