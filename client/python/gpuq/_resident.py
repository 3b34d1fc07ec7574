# SPDX-License-Identifier: Apache-2.0
"""Resident arrays (PROTOCOL.md 3.5) on the client side: the marker that
names one, and the checks gpuqd makes of a name, of ``access`` and of
``persist``.

A resident array is an array gpuqd keeps by name between requests (in
device memory; host memory on the CPU backend), sent once and used by many
requests of many connections. :class:`Resident` stands for one wherever an
op takes an input array (the request then names it in ``in``) or an
``out=`` (the output is kept under that name instead of coming back). It
holds only the name: names are the daemon's, not a connection's, and
nothing is checked until a request carries it. There, a name gpuqd would
refuse raises what gpuqd would before anything is sent:
:class:`gpuq.BadArgumentError` (empty, over 128 bytes, with a "/" or a
control character) or :class:`gpuq.BadHeaderError` (not UTF-8: a str with
a lone surrogate, which gpuqd judges as any string of a header), with
gpuqd's message; whether the array exists, and whether the caller
may read it, only gpuqd can say (``NotFoundError``, ``PermissionDeniedError``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import errors

NAME_MAX = 128  # bytes of UTF-8 (GPUQ_RES_NAME_MAX)
ACCESS = ("private", "all")


class Resident:
    """A resident array of gpuqd, by name: pass it as an op's input (the
    request names the array instead of carrying it) or as ``out=`` (the
    result is kept under that name, the op returning None in its place).
    ``Client.resident(name)`` makes one; so does ``gpuq.Resident(name)``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise errors.BadArgumentError(f"a resident array's name is a str, not "
                                          f"{type(name).__name__} {name!r}")
        self.name = name

    def __eq__(self, other: Any) -> bool:
        return type(other) is Resident and other.name == self.name

    def __hash__(self) -> int:
        return hash((Resident, self.name))

    def __repr__(self) -> str:
        return f"gpuq.Resident({self.name!r})"


Resident.__module__ = "gpuq"


def check_name(what: str, name: Any) -> str:
    """name, when gpuqd takes it as a resident array's name (1 to 128 bytes
    of UTF-8, no "/", no control character U+0000..U+001F, U+007F..U+009F);
    else the error gpuqd sends, in gpuqd's order of checks: not UTF-8,
    BadHeaderError naming the header key ('"in" is not valid UTF-8');
    otherwise BadArgumentError led by what gave the name ("name", "in[1]",
    "out[0]")."""
    if not isinstance(name, str):
        raise errors.BadArgumentError(f"{what}: a resident array's name is a str, not "
                                      f"{type(name).__name__}")
    try:
        b = name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: gpuqd checks every string first
        raise errors.BadHeaderError(f'"{what.split("[")[0]}" is not valid UTF-8') from None
    if not b:
        raise errors.BadArgumentError(f"{what}: the name is empty")
    if len(b) > NAME_MAX:
        raise errors.BadArgumentError(f"{what}: the name has {len(b)} bytes; at most {NAME_MAX}")
    n = len(b)
    for k, c in enumerate(b):
        if c == 0x2F:
            raise errors.BadArgumentError(f'{what}: the name contains "/" (byte {k})')
        # C0 and DEL; C1 (U+0080..U+009F) is C2 80..C2 9F in UTF-8
        if c < 0x20 or c == 0x7F or (c == 0xC2 and k + 1 < n and b[k + 1] < 0xA0):
            raise errors.BadArgumentError(f"{what}: the name contains a control character "
                                          f"(byte {k})")
    return name


def check_access(access: Any) -> str:
    """access, when it is "private" or "all"; else gpuqd's BadArgumentError."""
    if isinstance(access, str) and access in ACCESS:
        return access
    raise errors.BadArgumentError(f'access "{access}" is not private or all')


def check_persist(persist: Any) -> bool:
    """persist as a bool (numpy.bool_ too), when it is one; else gpuqd's
    BadHeaderError for a "persist" of another msgpack type (1 and "yes"
    included: gpuqd takes no other type for a bool key)."""
    if isinstance(persist, (bool, np.bool_)):
        return bool(persist)
    raise errors.BadHeaderError('"persist" must be a bool')
