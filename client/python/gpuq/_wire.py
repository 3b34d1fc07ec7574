# SPDX-License-Identifier: Apache-2.0
"""Frames of the gpuq protocol (PROTOCOL.md section 1), without any I/O.

A frame is a 20-byte little-endian prefix (``GPUQ``, version 1, kind,
flags 0, header_len u32, payload_len u64), a msgpack map, then raw payload.
:func:`encode_head` builds a request's prefix and header; :class:`Reader`
turns the bytes of a reply stream back into frames. The reader owns no
socket: the caller asks it where the next received bytes should go
(:meth:`Reader.target`), receives into that buffer, and reports how many
bytes came (:meth:`Reader.feed`). A payload goes straight into the buffers
the caller chose for it when the reply's header was read (normally the
result arrays), so a large result is received without an extra copy.
"""

from __future__ import annotations

import struct
from typing import Callable, List, Optional

import msgpack

from . import errors

MAGIC = b"GPUQ"
VERSION = 1
KIND_REQUEST = 1
KIND_REPLY = 2
PREFIX = struct.Struct("<4sBBHIQ")
PREFIX_SIZE = PREFIX.size  # 20
# Reply headers are small (info maps are capped by the protocol's limits:
# 64 entries, 4 levels, 256-byte strings); this bounds a broken stream.
MAX_REPLY_HEADER = 1 << 20
# Below this many bytes still to come, a payload is received through the
# scratch buffer (one recv may then bring several small replies at once).
DIRECT_MIN = 64 * 1024

_packb = msgpack.Packer(use_bin_type=True).pack
_unpackb = msgpack.unpackb


def encode_head(header: dict, payload_len: int) -> bytes:
    """The prefix and msgpack header of a request frame."""
    h = _packb(header)
    return PREFIX.pack(MAGIC, VERSION, KIND_REQUEST, 0, len(h), payload_len) + h


def decode_header(buf) -> dict:
    hdr = msgpack.unpackb(buf, raw=False, strict_map_key=False)
    if not isinstance(hdr, dict):
        raise errors.ProtocolError("reply header is not a msgpack map")
    return hdr


# on_head(header, payload_len) -> list of writable byte memoryviews whose
# lengths add up to payload_len (where the payload goes); on_frame() is called
# once that payload has arrived.
HeadFn = Callable[[dict, int], List[memoryview]]
FrameFn = Callable[[], None]


class Reader:
    """Reply frames out of a byte stream; see the module's text."""

    __slots__ = ("_buf", "_mv", "_start", "_end", "_dests", "_di", "_doff", "_left",
                 "_direct", "_on_head", "_on_frame", "_armed")

    def __init__(self, on_head: HeadFn, on_frame: FrameFn, size: int = 256 * 1024):
        self._buf = bytearray(size)
        self._mv = memoryview(self._buf)
        self._start = 0  # unread bytes are _buf[_start:_end]
        self._end = 0
        self._dests: Optional[List[memoryview]] = None  # payload being filled
        self._di = 0
        self._doff = 0
        self._left = 0  # payload bytes still to come
        self._direct = False  # the last target() was a payload buffer
        self._on_head = on_head
        self._on_frame = on_frame
        self._armed = False  # arm() came, and no feed() since

    def target(self) -> memoryview:
        """Where the next bytes received should be written."""
        if self._dests is not None and self._left >= DIRECT_MIN and self._start == self._end:
            self._direct = True
            return self._dests[self._di][self._doff:]
        self._direct = False
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._end < 4096:
            n = self._end - self._start
            self._mv[:n] = self._mv[self._start:self._end]
            self._start, self._end = 0, n
        return self._mv[self._end:]

    def arm(self) -> None:
        """Before a receive that an interrupt may cut off from its feed():
        afterwards untouched() tells whether bytes may have come into
        target() that feed() never took. A reader holding no byte of an
        unfinished frame receives at its buffer's start, where every frame
        begins with MAGIC: that first byte is cleared here."""
        self._armed = True
        if self._dests is None and self._start == self._end:
            self._buf[0] = 0

    def untouched(self) -> bool:
        """True when, since arm(), nothing was received into target() and
        feed() was not called: the reader is as it was and the stream in
        step. False when unsure."""
        return self._armed and self._dests is None and self._start == self._end and \
            self._buf[0] != MAGIC[0]

    def whole(self, n: int):
        """n bytes were received into target() of a reader holding nothing:
        when they are exactly one whole, well-formed reply frame, return its
        (header, payload memoryview) without taking them (the reader stays
        empty; the view holds until the next receive). Otherwise None:
        feed(n) then takes the bytes (and reports what is wrong with them)."""
        if self._dests is not None or self._end != 0 or n < PREFIX_SIZE:
            return None
        magic, ver, kind, flags, hlen, plen = PREFIX.unpack_from(self._buf, 0)
        h1 = PREFIX_SIZE + hlen
        if magic != MAGIC or ver != VERSION or kind != KIND_REPLY or flags != 0 or \
                hlen == 0 or h1 + plen != n:
            return None
        try:
            hdr = _unpackb(self._mv[PREFIX_SIZE:h1])  # str keys only (else: None)
        except Exception:
            return None
        if type(hdr) is not dict:
            return None
        return hdr, self._mv[h1:n]

    def payload_left(self) -> int:
        """The bytes of the reply payload being filled still to come (0
        between frames)."""
        return self._left if self._dests is not None else 0

    def feed(self, n: int) -> None:
        """n bytes were received into the last target(); parse what is complete.
        Raises ProtocolError on a broken stream (the connection is then unusable)."""
        self._armed = False
        if self._direct:
            self._direct = False
            self._advance_dest(n)
            if self._left == 0:
                self._finish()
        else:
            self._end += n
        self._parse()

    def _advance_dest(self, n: int) -> None:
        self._left -= n
        self._doff += n
        while self._di < len(self._dests) and self._doff >= len(self._dests[self._di]):
            self._doff -= len(self._dests[self._di])
            self._di += 1

    def _finish(self) -> None:
        self._dests = None
        self._on_frame()

    def _parse(self) -> None:
        while True:
            if self._dests is not None:
                avail = self._end - self._start
                if avail == 0:
                    return
                while avail and self._left:
                    d = self._dests[self._di]
                    k = min(avail, len(d) - self._doff)
                    d[self._doff:self._doff + k] = self._mv[self._start:self._start + k]
                    self._start += k
                    avail -= k
                    self._advance_dest(k)
                if self._left:
                    return
                self._finish()
                continue
            avail = self._end - self._start
            if avail < PREFIX_SIZE:
                return
            magic, ver, kind, flags, hlen, plen = PREFIX.unpack_from(self._buf, self._start)
            if magic != MAGIC or kind != KIND_REPLY or flags != 0:
                raise errors.ProtocolError("malformed reply frame prefix")
            if ver != VERSION:
                raise errors.VersionError(f"the server speaks protocol version {ver}, not 1")
            if hlen == 0 or hlen > MAX_REPLY_HEADER:
                raise errors.ProtocolError(f"reply header length {hlen} out of bounds")
            if avail < PREFIX_SIZE + hlen:
                if PREFIX_SIZE + hlen > len(self._buf):
                    self._grow(PREFIX_SIZE + hlen)
                return
            h0 = self._start + PREFIX_SIZE
            try:
                hdr = _unpackb(self._mv[h0:h0 + hlen], raw=False, strict_map_key=False)
            except Exception as e:  # msgpack's errors (ValueError, ExtraData, ...)
                raise errors.ProtocolError(f"bad reply header: {e}") from None
            if type(hdr) is not dict:
                raise errors.ProtocolError("reply header is not a msgpack map")
            self._start = p0 = h0 + hlen
            dests = self._on_head(hdr, plen)
            if plen == 0:
                self._on_frame()
                continue
            if len(dests) == 1 and avail - PREFIX_SIZE - hlen >= plen:
                # the whole payload is here, for one array: one copy
                dests[0][:] = self._mv[p0:p0 + plen]
                self._start = p0 + plen
                self._on_frame()
                continue
            self._dests = [d for d in dests if len(d)]
            self._di = 0
            self._doff = 0
            self._left = plen

    def _grow(self, need: int) -> None:
        n = self._end - self._start
        nb = bytearray(max(need, 2 * len(self._buf)))
        nb[:n] = self._mv[self._start:self._end]
        self._buf = nb
        self._mv = memoryview(nb)
        self._start, self._end = 0, n
