# SPDX-License-Identifier: Apache-2.0
"""Shared-memory arenas on the client side (PROTOCOL.md section 3.4).

An arena is a memfd that gpuqd made (``arena_open``), mapped here too. The
pool carves NumPy arrays out of a session's arenas: each allocation is a
:class:`Block` that exposes its bytes through ``__array_interface__``, so
every array made from it (and every view of those) keeps the block alive,
and the block's bytes go back to the free list when the last of them is
garbage. Requests name an array that lives in a block by reference
``[arena, offset, length]`` instead of sending its bytes.

The bookkeeping lives here, never in the shared bytes (gpuqd writes
results there). A mapping is never unmapped while a block of it lives, even
after the session ended: the arrays stay valid memory, they just stop being
shared (a later request sends them by socket).
"""

from __future__ import annotations

import bisect
import collections
import ctypes
import mmap
import os
import threading
from typing import List, Optional, Tuple

import numpy as np

ALIGN = 64  # 64-byte aligned offsets copy fastest (PROTOCOL.md 3.4)
MAX_ARENAS = 16  # per session (PROTOCOL.md section 6)
FIRST_ARENA = 64 << 20  # the first arena opened, unless one call needs more


class Arena:
    """One mapped arena: its daemon id, the mapping and a first-fit free list."""

    def __init__(self, arena_id: int, fd: int, size: int):
        self.id = arena_id
        self.size = size
        self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        c = ctypes.c_char.from_buffer(self.mm)
        self.addr = ctypes.addressof(c)
        del c  # no buffer export outlives this line
        self.open = True  # still an arena of the live session
        # free segments: sorted offsets and their lengths
        self._free_off: List[int] = [0]
        self._free_len: List[int] = [size]

    def alloc(self, nbytes: int) -> Optional[int]:
        need = (nbytes + ALIGN - 1) // ALIGN * ALIGN
        for i, ln in enumerate(self._free_len):
            if ln >= need:
                off = self._free_off[i]
                if ln == need:
                    del self._free_off[i]
                    del self._free_len[i]
                else:
                    self._free_off[i] += need
                    self._free_len[i] -= need
                return off
        return None

    def free(self, off: int, nbytes: int) -> None:
        ln = (nbytes + ALIGN - 1) // ALIGN * ALIGN
        i = bisect.bisect_left(self._free_off, off)
        self._free_off.insert(i, off)
        self._free_len.insert(i, ln)
        if i + 1 < len(self._free_off) and off + ln == self._free_off[i + 1]:
            self._free_len[i] += self._free_len.pop(i + 1)
            del self._free_off[i + 1]
        if i > 0 and self._free_off[i - 1] + self._free_len[i - 1] == off:
            self._free_len[i - 1] += self._free_len.pop(i)
            del self._free_off[i]

    def largest_free(self) -> int:
        return max(self._free_len, default=0)


class Block:
    """nbytes of an arena, owned by the arrays made from it."""

    __slots__ = ("arena", "off", "nbytes", "pool", "__array_interface__", "__weakref__")

    def __init__(self, pool: "Pool", arena: Arena, off: int, nbytes: int):
        self.pool = pool
        self.arena = arena  # keeps the mapping alive
        self.off = off
        self.nbytes = nbytes
        self.__array_interface__ = {"data": (arena.addr + off, False), "shape": (nbytes,),
                                    "typestr": "|u1", "version": 3}

    def __del__(self):
        # The last array made from the block is gone: its bytes go back to
        # the free list at the pool's next alloc (no lock taken here: this
        # runs wherever the garbage was made). Cheaper than weakref.finalize,
        # which a small request's result block would pay for each time.
        self.pool._freed.append((self.arena, self.off, self.nbytes))

    def array(self, shape, dtype) -> np.ndarray:
        """The block as an array of shape and dtype (nbytes in all), made
        once per block."""
        dt = np.dtype(dtype)
        if dt.fields is None and dt.subdtype is None:  # one step: the array's base is the block
            self.__array_interface__ = {"data": self.__array_interface__["data"],
                                        "shape": tuple(shape), "typestr": dt.str, "version": 3}
            return np.asarray(self)
        return np.asarray(self).view(dtype).reshape(shape)


def block_of(arr: np.ndarray) -> Optional[Block]:
    """The block an array lives in, if it was made by a pool (or is a view of
    such an array)."""
    b = arr.base
    while isinstance(b, np.ndarray):
        b = b.base
    return b if isinstance(b, Block) else None


class Pool:
    """A session's arenas and the blocks carved from them.

    alloc() never does I/O: when no arena has room, the client opens one
    (:meth:`want` says how large) and hands it over with :meth:`add`.
    """

    def __init__(self, limit: int):
        self.limit = limit  # the session's session_arena
        self.arenas: List[Arena] = []
        self.total = 0
        self.refused_at: Optional[int] = None  # an arena_open of this size was refused
        self._freed: collections.deque = collections.deque()  # appended by finalizers
        self._lock = threading.Lock()
        self._next = FIRST_ARENA
        self.closed = False

    def _drain_freed(self) -> None:
        while self._freed:
            arena, off, nbytes = self._freed.popleft()
            arena.free(off, nbytes)

    def alloc(self, nbytes: int) -> Optional[Block]:
        """A block of nbytes (> 0) in an open arena, or None (no room). A
        block freed since the last call, of the same size, is taken as it
        is (a run of small requests on arena arrays frees a result's block
        and wants one of that size again)."""
        with self._lock:
            if self._freed:
                need = (nbytes + ALIGN - 1) // ALIGN * ALIGN
                reuse = None
                while self._freed:  # not iterated: a finalizer may append meanwhile
                    arena, off, n = self._freed.popleft()
                    if reuse is None and arena.open and (n + ALIGN - 1) // ALIGN * ALIGN == need:
                        reuse = arena, off
                    else:
                        arena.free(off, n)
                if reuse is not None:
                    return Block(self, reuse[0], reuse[1], nbytes)
            for a in self.arenas:
                if a.open:
                    off = a.alloc(nbytes)
                    if off is not None:
                        return Block(self, a, off, nbytes)
        return None

    def has_room(self, nbytes: int) -> bool:
        need = (nbytes + ALIGN - 1) // ALIGN * ALIGN
        with self._lock:
            if self._freed:
                # the block freed last is room enough: keep it for alloc to take
                arena, _, n = self._freed[-1]
                if arena.open and (n + ALIGN - 1) // ALIGN * ALIGN >= need:
                    return True
                self._drain_freed()
            for a in self.arenas:
                if a.open and a.largest_free() >= need:
                    return True
            return False

    def want(self, nbytes: int) -> Optional[int]:
        """The size of the arena to open for a need of nbytes, or None when
        the session's quota, its 16 arenas or an earlier refusal rule it out."""
        need = (nbytes + 4095) // 4096 * 4096
        left = self.limit - self.total
        if self.closed or need > left or len(self.arenas) >= MAX_ARENAS:
            return None
        if self.refused_at is not None and need >= self.refused_at:
            return None
        size = max(need, min(self._next, left))
        return size

    def add(self, arena_id: int, fd: int, size: int) -> Arena:
        try:
            a = Arena(arena_id, fd, size)
        finally:
            os.close(fd)
        with self._lock:
            self.arenas.append(a)
            self.total += size
            self._next = min(2 * self._next, 1 << 30)
        return a

    def lookup(self, arr: np.ndarray) -> Optional[Tuple[int, int]]:
        """(arena id, offset) of a C-contiguous array that lives in an open
        arena of this pool, else None."""
        b = arr.base  # block_of(arr), inline: every request on arena arrays asks
        while isinstance(b, np.ndarray):
            b = b.base
        if type(b) is not Block or b.pool is not self or not b.arena.open:
            return None
        if arr.nbytes == b.nbytes and arr.flags.c_contiguous:
            return b.arena.id, b.off  # all of the block (views stay inside it): its start
        off = arr.__array_interface__["data"][0] - b.arena.addr
        if off % arr.dtype.itemsize:
            return None  # the protocol wants element-aligned offsets
        return b.arena.id, off

    def close(self) -> None:
        """The session ended: its arenas are no longer shared. The mappings
        stay until the last array made from them is gone."""
        with self._lock:
            self.closed = True
            for a in self.arenas:
                a.open = False
            self.arenas = []
