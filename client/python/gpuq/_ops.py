# SPDX-License-Identifier: Apache-2.0
"""The ops as requests: one builder per op, and the text each op's method shows.

A builder checks and converts its arguments (``_convert``) and returns a
:class:`Call`: the op's header keys, its input arrays as the wire carries
them, the shapes and types of its outputs, the caller's ``out=`` arrays,
and how the received arrays become the method's return value. Sending it
(by socket or by arena reference) is the session's business
(``_session``). The keys, defaults and checks are those of ``ops/*.c``;
where the client checks before sending, it raises the class and message the
server would send.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _convert as cv
from . import errors

EARTH_RADIUS_KM = 6371.0088
KNN_K_MAX = 1024
DEADLINE_MAX_MS = 86_400_000  # a day: PROTOCOL.md 3.1 "deadline_ms"

METHODS = ("sum", "l1", "l2", "minmax", "zscore")
ON_ZERO = ("error", "zero")
# scipy.spatial.distance's names (and their aliases) -> the protocol's.
METRICS = {
    "euclidean": "euclidean", "euclid": "euclidean", "eu": "euclidean", "e": "euclidean",
    "l2": "euclidean",
    "sqeuclidean": "sqeuclidean", "sqe": "sqeuclidean", "sqeuclid": "sqeuclidean",
    "cosine": "cosine", "cos": "cosine",
    "cityblock": "manhattan", "manhattan": "manhattan", "cblock": "manhattan", "cb": "manhattan",
    "c": "manhattan", "l1": "manhattan", "taxicab": "manhattan",
}


class Timing(NamedTuple):
    """Where a request's time went, in microseconds (PROTOCOL.md section 4).

    On the CUDA backend ``h2d_us``, ``kernel_us`` and ``d2h_us`` are the
    request's upload, kernels and download; on the CPU backend the copies
    are 0 and ``kernel_us`` is the run. ``queue_us`` is the wait before it,
    ``total_us`` the whole. ``extra`` holds keys a newer server adds.
    """
    queue_us: float = 0.0
    h2d_us: float = 0.0
    kernel_us: float = 0.0
    d2h_us: float = 0.0
    total_us: float = 0.0
    extra: dict = {}

    @classmethod
    def from_reply(cls, t: Any) -> "Timing":
        if not isinstance(t, dict):
            return cls()
        known = {k: float(t[k]) for k in cls._fields[:5] if isinstance(t.get(k), (int, float))}
        extra = {k: v for k, v in t.items() if k not in cls._fields}
        return cls(**known, extra=extra)


class Timed(NamedTuple):
    """What an op returns with ``timing=True``: ``(value, timing)``, value
    being what it returns without (an array, or ``(dist, idx)`` for knn)."""
    value: Any
    timing: Timing


# What an op returns: its array, or (array, Timing) with timing=True.
Result = Union[np.ndarray, Timed]
KnnResult = Union[Tuple[np.ndarray, np.ndarray], Timed]


class Out:
    """One output as it comes on the wire."""

    __slots__ = ("shape", "dtype", "wshape", "dname", "nbytes")

    def __init__(self, shape: Tuple[int, ...], dtype: np.dtype):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.wshape = list(self.shape)  # as the reply's "shape" decodes
        self.dname = cv.NAME[dtype]
        n = dtype.itemsize
        for d in self.shape:
            n *= d
        self.nbytes = n


class Call:
    """One compute request, ready for the session to send."""

    __slots__ = ("op", "keys", "dtype", "inputs", "outs", "user_out", "finish", "timing",
                 "deadline_ms")

    def __init__(self, op: str, keys: dict, dtype: Optional[np.dtype], inputs: List[np.ndarray],
                 outs: List[Out], user_out: List[Optional[np.ndarray]],
                 finish: Callable[[List[np.ndarray]], Any], timing: bool):
        self.op = op
        self.keys = keys
        self.dtype = dtype
        self.inputs = inputs
        self.outs = outs
        self.user_out = user_out  # per output: the caller's out= array (its own shape) or None
        # per output the caller's out= array once filled, else a new array of
        # the wire shape -> the return value
        self.finish = finish
        self.timing = timing
        self.deadline_ms = 0  # sent when not 0 (the client sets it: deadline())

    def header(self) -> dict:
        h = {"op": self.op}
        if self.dtype is not None:
            h["dtype"] = cv.NAME[self.dtype]
        if self.inputs:
            h["shape"] = list(self.inputs[0].shape)
        if len(self.inputs) > 1:
            h["shape_b"] = list(self.inputs[1].shape)
        h.update(self.keys)
        if self.timing:
            h["timing"] = True
        if self.deadline_ms:
            h["deadline_ms"] = self.deadline_ms
        return h


# ---- argument checks shared by the builders ----

def _enum(key: str, value: Any, names: Sequence[str]) -> str:
    if value in names and isinstance(value, str):
        return value
    alts = ", ".join(names[:-1]) + " or " + names[-1]
    raise errors.BadArgumentError(f'{key} "{value}" is not {alts}')


def _metric(value: Any) -> str:
    if isinstance(value, str) and value.lower() in METRICS:
        return METRICS[value.lower()]
    raise errors.BadArgumentError(
        f'metric "{value}" is not euclidean, sqeuclidean, cosine or cityblock '
        f'(scipy\'s names; manhattan, l1 and l2 work too)')


def _number(key: str, v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise errors.BadArgumentError(f"{key} must be a number, not {v!r}") from None


def _uint(key: str, v: Any) -> int:
    if isinstance(v, bool):
        raise errors.BadArgumentError(f"{key} must be an integer, not {v!r}")
    try:
        n = operator.index(v)
    except TypeError:
        raise errors.BadArgumentError(f"{key} must be an integer, not {v!r}") from None
    if n < 0 or n >= 1 << 64:
        raise errors.BadArgumentError(f"{key}={n} is outside 0 .. 2**64-1")
    return n


def deadline(v: Any) -> int:
    """A deadline_ms argument, checked: an int of milliseconds, 0 (no
    deadline) to DEADLINE_MAX_MS. Not an int: TypeError; out of range:
    BadArgumentError (a ValueError), as gpuqd answers over a day."""
    if isinstance(v, bool):
        raise TypeError(f"deadline_ms must be an int of milliseconds, not {v!r}")
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError(f"deadline_ms must be an int of milliseconds, not "
                        f"{type(v).__name__} {v!r}") from None
    if n < 0 or n > DEADLINE_MAX_MS:
        raise errors.BadArgumentError(f"deadline_ms={n} is outside 1 .. {DEADLINE_MAX_MS} "
                                      f"(a day; 0 or None: no deadline)")
    return n


def _pair(key: str, v: Any) -> List[float]:
    try:
        seq = list(v)
    except TypeError:
        raise errors.BadArgumentError(f"{key} must be (lat, lon), not {v!r}") from None
    if len(seq) != 2:
        raise errors.BadArgumentError(f"{key} must be (lat, lon): 2 numbers, not {len(seq)}")
    return [_number(key, seq[0]), _number(key, seq[1])]


def _range(key: str, v: Any) -> list:
    try:
        seq = list(v)
    except TypeError:
        raise errors.BadArgumentError(f"{key} must be (start, stop, n), not {v!r}") from None
    if len(seq) != 3:
        raise errors.BadArgumentError(f"{key} must be (start, stop, n): 3 values, not {len(seq)}")
    return [_number(key, seq[0]), _number(key, seq[1]), _uint(f"{key} n", seq[2])]


def _radius(v: Any) -> float:
    r = _number("radius", v)
    if not (math.isfinite(r) and r > 0):
        raise errors.BadArgumentError(f"radius {r:g} must be finite and > 0")
    return r


def _inputs(arrays: Sequence[Any], names: Sequence[str], dtype: Any):
    arrs = [a if type(a) is np.ndarray else cv.asarray(a, n) for a, n in zip(arrays, names)]
    if dtype is None and len(arrs) == 1:
        return arrs, cv.natural(arrs[0], names[0])
    dt = cv.target(arrs, names, dtype)
    return arrs, dt


def _outs(out: Any, n: int) -> List[Optional[np.ndarray]]:
    if out is None:
        return [None] * n
    if n == 1:
        return [out]
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise errors.BadArgumentError(f"out must be a tuple of {n} arrays")
    return list(out)


# Input types that the wire carries as they are.
_PLAIN = {cv.F32: cv.F32, cv.F64: cv.F64}


def _first(res: List[np.ndarray]) -> np.ndarray:
    return res[0]


def _shaped(r: np.ndarray, shape: tuple) -> np.ndarray:
    return r if r.shape == shape else r.reshape(shape)


# ---- the ops ----

def normalize(a: Any, method: str = "sum", flat: bool = False, on_zero: str = "error",
              dtype: Any = None, out: Any = None, timing: bool = False) -> Call:
    if method not in METHODS or not isinstance(method, str):
        _enum("method", method, METHODS)
    if on_zero != "error":
        on_zero = _enum("on_zero", on_zero, ON_ZERO)
    keys = {"method": method}
    if flat:
        keys["flat"] = True
    if on_zero != "error":
        keys["on_zero"] = on_zero
    dt = _PLAIN.get(a.dtype) if type(a) is np.ndarray and dtype is None else None
    if dt is not None and 1 <= a.ndim <= 2 and a.flags.c_contiguous and a.flags.aligned and (
            out is None or (type(out) is np.ndarray and out.shape == a.shape and
                            out.dtype == dt and out.flags.writeable)):
        # the common case: the array goes on the wire as it is (and out= can
        # take the result as it comes)
        return Call("normalize", keys, dt, [a], [Out(a.shape, dt)], [out], _first, timing)
    (arr,), dt = _inputs([a], ["a"], dtype)
    shape = arr.shape
    if arr.ndim == 0:
        raise errors.BadShapeError("normalize needs an array of 1 or more dimensions, not a scalar")
    if arr.ndim > 2:  # rows along the last axis, as numpy reductions with axis=-1
        arr = arr.reshape(-1, shape[-1])
    wire = cv.to_wire(arr, dt)
    uo = _outs(out, 1)[0]
    if uo is not None:
        uo = cv.check_out(uo, shape, dt)

    def finish(res):
        return _shaped(res[0], shape)

    return Call("normalize", keys, dt, [wire], [Out(wire.shape, dt)], [uo], finish, timing)


def haversine(a: Any, b: Any = None, to: Any = None, radius: float = EARTH_RADIUS_KM,
              dtype: Any = None, out: Any = None, timing: bool = False) -> Call:
    if (b is None) == (to is None):
        raise errors.BadArgumentError("haversine takes either \"to\" or \"shape_b\", not both"
                                      if b is not None else
                                      "haversine needs to=(lat, lon) or a second array b")
    arrays, names = ([a], ["points"]) if b is None else ([a, b], ["a", "b"])
    arrs, dt = _inputs(arrays, names, dtype)
    for x, n in zip(arrs, names):
        if x.ndim == 0 or x.shape[-1] != 2:
            raise errors.BadShapeError(f"haversine needs {n} of shape (n, 2), rows of (lat, lon) "
                                       f"in degrees; got {x.shape}")
    if b is not None and arrs[0].shape != arrs[1].shape:
        raise errors.BadShapeError(f"haversine needs a and b of the same shape; got "
                                   f"{arrs[0].shape} and {arrs[1].shape}")
    shape = arrs[0].shape[:-1]
    wire = [cv.to_wire(x.reshape(-1, 2) if x.ndim != 2 else x, dt) for x in arrs]
    keys = {"radius": _radius(radius)}
    if to is not None:
        keys["to"] = _pair("to", to)
    uo = _outs(out, 1)[0]
    if uo is not None:
        uo = cv.check_out(uo, shape, dt)

    def finish(res):
        return _shaped(res[0], shape)

    return Call("haversine", keys, dt, wire, [Out((wire[0].shape[0],), dt)], [uo], finish, timing)


def grid(lat: Any = (-90.0, 90.0, 1000), lon: Any = (-180.0, 180.0, 1000),
         to: Any = (30.0, 101.0), radius: float = EARTH_RADIUS_KM, dtype: Any = np.float64,
         out: Any = None, timing: bool = False) -> Call:
    dt = cv.parse_dtype(dtype)
    la, lo = _range("lat", lat), _range("lon", lon)
    keys = {"lat": la, "lon": lo, "to": _pair("to", to), "radius": _radius(radius)}
    shape = (la[2], lo[2])
    uo = _outs(out, 1)[0]
    if uo is not None:
        uo = cv.check_out(uo, shape, dt)
    return Call("grid", keys, dt, [], [Out(shape, dt)], [uo], _first, timing)


def _xy(x: Any, y: Any, dtype: Any, op: str):
    same = y is None
    arrs, dt = _inputs([x] if same else [x, y], ["x"] if same else ["x", "y"], dtype)
    for a, n in zip(arrs, ("x", "y")):
        if a.ndim != 2:
            raise errors.BadShapeError(f"{op} needs {n} of shape (rows, d), 2-D as in "
                                       f"scipy.spatial.distance.cdist; got {a.shape}")
    if not same and arrs[0].shape[1] != arrs[1].shape[1]:
        raise errors.BadShapeError(f"shape_b has d={arrs[1].shape[1]} but shape has "
                                   f"d={arrs[0].shape[1]}")
    wx = cv.to_wire(arrs[0], dt)
    wy = wx if same else cv.to_wire(arrs[1], dt)
    return wx, wy, dt


def pairwise(x: Any, y: Any = None, metric: str = "euclidean", on_zero: str = "error",
             dtype: Any = None, out: Any = None, timing: bool = False) -> Call:
    metric = _metric(metric)
    on_zero = _enum("on_zero", on_zero, ON_ZERO)
    wx, wy, dt = _xy(x, y, dtype, "pairwise")
    keys = {"metric": metric}
    if on_zero != "error":
        keys["on_zero"] = on_zero
    shape = (wx.shape[0], wy.shape[0])
    uo = _outs(out, 1)[0]
    if uo is not None:
        uo = cv.check_out(uo, shape, dt)
    return Call("pairwise", keys, dt, [wx, wy], [Out(shape, dt)], [uo], _first, timing)


def knn(x: Any, y: Any, k: int, metric: str = "euclidean", on_zero: str = "error",
        dtype: Any = None, out: Any = None, timing: bool = False) -> Call:
    metric = _metric(metric)
    on_zero = _enum("on_zero", on_zero, ON_ZERO)
    k = _uint("k", k)
    wx, wy, dt = _xy(x, y, dtype, "knn")
    keys = {"metric": metric, "k": k}
    if on_zero != "error":
        keys["on_zero"] = on_zero
    shape = (wx.shape[0], k)
    uo = _outs(out, 2)
    if uo[0] is not None:
        uo[0] = cv.check_out(uo[0], shape, dt, "out[0]")
    if uo[1] is not None:
        uo[1] = cv.check_out(uo[1], shape, cv.I64, "out[1]")

    def finish(res):
        return res[0], res[1]

    return Call("knn", keys, dt, [wx, wy], [Out(shape, dt), Out(shape, cv.I64)], uo, finish,
                timing)
