# SPDX-License-Identifier: Apache-2.0
"""Exceptions of the gpuq client: one class per error name of the protocol.

Every error that gpuqd can send (PROTOCOL.md section 5) has its own class, a
subclass of :class:`gpuq.Error`; where a built-in exception means the same
thing, the class derives from it too, so ``except ValueError`` catches a
``BadShapeError``. Errors the client finds before sending (an input it
cannot convert, a bad metric name) raise the class and code the server
would have sent, so one ``except`` clause covers both.

Each error has ``.code`` (the negative protocol code), ``.name`` (its stable
name, e.g. ``"zero_norm"``), ``.message`` (the server's one-line message)
and ``.request_id`` (the id of the failed request, or None). ``str(err)`` is
``"name: message"``.
"""

from __future__ import annotations

import builtins
import concurrent.futures
from typing import Dict, List, Optional, Tuple, Type

__all__ = [
    "Error",
    "ConnectError",
    "ProtocolError",
    "VersionError",
    "BadHeaderError",
    "UnknownOpError",
    "BadArgumentError",
    "BadDtypeError",
    "BadShapeError",
    "EmptyError",
    "OutOfRangeError",
    "ZeroNormError",
    "TooLargeError",
    "SizeMismatchError",
    "BusyError",
    "NoMemoryError",
    "DeviceError",
    "DeviceLostError",
    "ShuttingDownError",
    "PermissionDeniedError",
    "NoHelloError",
    "InternalError",
    "IoError",
    "ClosedError",
    "NeedMoreError",
    "DuplicateIdError",
    "TimeoutError",
    "DeadlineExceededError",
    "CancelledError",
    "NotFoundError",
    "StorageError",
    "error_class",
]


class Error(Exception):
    """A gpuq error: a server error reply, or a client-side refusal with the
    code the server would give.

    Attributes: ``code`` (int < 0), ``name`` (str), ``message`` (str),
    ``request_id`` (int or None).
    """

    code: int = -20
    name: str = "internal"

    def __init__(self, message: str = "", *, code: Optional[int] = None,
                 name: Optional[str] = None, request_id: Optional[int] = None):
        if code is not None:
            self.code = code
        if name is not None:
            self.name = name
        self.message = message
        self.request_id = request_id
        super().__init__(f"{self.name}: {message}" if message else self.name)

    def __str__(self) -> str:  # OSError subclasses would print errno otherwise
        return f"{self.name}: {self.message}" if self.message else self.name

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.code, self.name, self.request_id))


def _rebuild(cls, message, code, name, request_id):
    return cls(message, code=code, name=name, request_id=request_id)


def _make(cname: str, code: int, name: str, doc: str, *bases: type) -> Type[Error]:
    cls = type(cname, (Error,) + bases, {"code": code, "name": name, "__doc__": doc,
                                         "__module__": "gpuq"})
    return cls


ProtocolError = _make("ProtocolError", -1, "protocol",
                      "A broken frame (bad magic, kind or flags); the server closed the "
                      "connection.", builtins.ConnectionError)
VersionError = _make("VersionError", -2, "version",
                     "The server speaks another protocol version.")
BadHeaderError = _make("BadHeaderError", -3, "bad_header",
                       "The request header was not a valid msgpack map of known shape.",
                       builtins.ValueError)
UnknownOpError = _make("UnknownOpError", -4, "unknown_op", "The server does not know the op.",
                       builtins.ValueError)
BadArgumentError = _make("BadArgumentError", -5, "bad_argument",
                         "A missing or invalid argument (method, metric, k, radius, ...).",
                         builtins.ValueError)
BadDtypeError = _make("BadDtypeError", -6, "bad_dtype",
                      "An element type other than float32/float64 that the client could not "
                      "convert.", builtins.TypeError)
BadShapeError = _make("BadShapeError", -7, "bad_shape",
                      "Wrong rank, wrong number of columns or mismatched shapes.",
                      builtins.ValueError)
EmptyError = _make("EmptyError", -8, "empty", "An array with zero elements (or a grid n of 0).",
                   builtins.ValueError)
OutOfRangeError = _make("OutOfRangeError", -9, "out_of_range",
                        "A latitude beyond +-90, a non-finite coordinate, or a normalize "
                        "result too large for the dtype.", builtins.ValueError)
ZeroNormError = _make("ZeroNormError", -10, "zero_norm",
                      "A zero denominator: zero sum or norm, constant row, zero vector under "
                      "cosine. Pass on_zero=\"zero\" to get zeros instead.",
                      builtins.ZeroDivisionError)
TooLargeError = _make("TooLargeError", -11, "too_large",
                      "A header, payload, result or arena over a configured limit.",
                      builtins.ValueError)
SizeMismatchError = _make("SizeMismatchError", -12, "size_mismatch",
                          "The payload length differs from what the header implies.",
                          builtins.ValueError)
BusyError = _make("BusyError", -13, "busy",
                  "Too many requests in flight, too many sessions, or arena memory busy: "
                  "retry later.")
NoMemoryError = _make("NoMemoryError", -14, "no_memory",
                      "A host or device allocation failed in gpuqd.")
DeviceError = _make("DeviceError", -15, "device", "A device (CUDA) error failed this request.")
DeviceLostError = _make("DeviceLostError", -16, "device_lost",
                        "A sticky device error: gpuqd is going down.")
ShuttingDownError = _make("ShuttingDownError", -17, "shutting_down",
                          "gpuqd is shutting down and accepts no new work.")
PermissionDeniedError = _make("PermissionDeniedError", -18, "permission_denied",
                              "An admin-only op from a peer that is not an admin, or a "
                              "resident array the caller may not read (or replace or remove).")
NoHelloError = _make("NoHelloError", -19, "no_hello", "A request came before the hello.")
InternalError = _make("InternalError", -20, "internal", "A bug in gpuqd (or in this client).")
IoError = _make("IoError", -21, "io", "A socket error on the client side.",
                builtins.ConnectionError)
ClosedError = _make("ClosedError", -22, "closed", "The connection is closed.",
                    builtins.ConnectionError)
NeedMoreError = _make("NeedMoreError", -23, "need_more",
                      "Decoder internal: more bytes needed (never on the wire).")
DuplicateIdError = _make("DuplicateIdError", -24, "duplicate_id",
                         "Reserved: a request id already in flight.")
TimeoutError = _make("TimeoutError", -25, "timeout",  # noqa: A001 - the protocol's name
                     "The client was too slow (no hello, a stalled frame, idle); the server "
                     "closed the connection. Also raised by Future.result(timeout=...) when "
                     "the time runs out.", builtins.TimeoutError)
DeadlineExceededError = _make("DeadlineExceededError", -26, "deadline_exceeded",
                              "The request did not finish within its deadline_ms; it has no "
                              "result (work not started was dropped). The connection goes on.",
                              builtins.TimeoutError)
# Not asyncio.CancelledError (a BaseException that asyncio takes as the
# awaiting task being cancelled): concurrent.futures', an Exception, which
# gpuq.Future.result() raises after Future.cancel() as concurrent.futures does.
CancelledError = _make("CancelledError", -27, "cancelled",
                       "The request was cancelled (a cancel op, or Future.cancel()); it has no "
                       "result. The connection goes on.", concurrent.futures.CancelledError)
NotFoundError = _make("NotFoundError", -28, "not_found",
                      "The name is not a resident array (none was put under it, or it was "
                      "removed).", builtins.LookupError)
# An OSError, as a failed write to disk is in Python; errno stays None (gpuqd
# sends a message, not an errno), so str() is Error's "storage: message".
StorageError = _make("StorageError", -29, "storage",
                     "gpuqd could not keep a persisted resident array in its state "
                     "directory (persist=True): a full disk, an I/O error, or no state "
                     "directory (gpuqd --state-dir ''). Nothing was stored or removed.",
                     builtins.OSError)


class ConnectError(IoError):
    """No gpuqd answered. ``attempts`` lists ``(path, errno, reason)`` for every
    socket path tried; the message names each with its reason and what to
    do next."""

    def __init__(self, message: str = "", *, attempts: Optional[List[Tuple[str, int, str]]] = None,
                 **kw):
        super().__init__(message, **kw)
        self.attempts = list(attempts or [])

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (ConnectError, (self.message,), {"attempts": self.attempts})


ConnectError.__module__ = "gpuq"

_BY_CODE: Dict[int, Type[Error]] = {}
_BY_NAME: Dict[str, Type[Error]] = {}
for _cls in (ProtocolError, VersionError, BadHeaderError, UnknownOpError, BadArgumentError,
             BadDtypeError, BadShapeError, EmptyError, OutOfRangeError, ZeroNormError,
             TooLargeError, SizeMismatchError, BusyError, NoMemoryError, DeviceError,
             DeviceLostError, ShuttingDownError, PermissionDeniedError, NoHelloError,
             InternalError, IoError, ClosedError, NeedMoreError, DuplicateIdError, TimeoutError,
             DeadlineExceededError, CancelledError, NotFoundError, StorageError):
    _BY_CODE[_cls.code] = _cls
    _BY_NAME[_cls.name] = _cls


def error_class(code: Optional[int] = None, name: Optional[str] = None) -> Type[Error]:
    """The exception class of a protocol code or name (:class:`Error` itself
    for one this client does not know, e.g. from a newer server)."""
    if code is not None and code in _BY_CODE:
        return _BY_CODE[code]
    if name is not None and name in _BY_NAME:
        return _BY_NAME[name]
    return Error


def from_reply(hdr: dict) -> Error:
    """The exception for an error reply header (code, error, message, id)."""
    code = hdr.get("code")
    name = hdr.get("error")
    if not isinstance(code, int) or isinstance(code, bool):
        code = _BY_NAME[name].code if isinstance(name, str) and name in _BY_NAME else None
    if not isinstance(name, str):
        name = None
    cls = error_class(code, name)
    msg = hdr.get("message")
    return cls(msg if isinstance(msg, str) else "", code=code if code is not None else cls.code,
               name=name or cls.name, request_id=hdr.get("id"))
