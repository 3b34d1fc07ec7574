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

Resident arrays (PROTOCOL.md 3.5, ``_resident``): an input given as a
:class:`Resident` is not carried; the call names it (``Call.wire_in``) and
sends no shape key for it (gpuqd takes the array's). An ``out=`` given as a
Resident is kept in gpuqd (``Call.wire_out``) and is None in the value;
``persist=True`` (sent as ``"persist": true``, never when false) has gpuqd
write what it keeps to its state directory too.
Outputs whose shape depends on a resident input only are "lazy": their
shape (and dtype, when no carried input or ``dtype=`` gives it) comes from
the reply. ``put`` and ``get`` are compute requests built here too.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _convert as cv
from . import errors
from ._resident import Resident, check_access, check_name, check_persist

EARTH_RADIUS_KM = 6371.0088
KNN_K_MAX = 1 << 29  # PROTOCOL.md 3.1 "k": at most n, and 2^29
DEADLINE_MAX_MS = 86_400_000  # a day: PROTOCOL.md 3.1 "deadline_ms"

METHODS = ("sum", "l1", "l2", "minmax", "zscore")
ON_ZERO = ("error", "zero", "nan")
# scipy.spatial.distance's names (and their aliases) -> the protocol's.
METRICS = {
    "euclidean": "euclidean", "euclid": "euclidean", "eu": "euclidean", "e": "euclidean",
    "l2": "euclidean",
    "sqeuclidean": "sqeuclidean", "sqe": "sqeuclidean", "sqeuclid": "sqeuclidean",
    "cosine": "cosine", "cos": "cosine",
    "cityblock": "manhattan", "manhattan": "manhattan", "cblock": "manhattan", "cb": "manhattan",
    "c": "manhattan", "l1": "manhattan", "taxicab": "manhattan",
    "chebyshev": "chebyshev", "chebychev": "chebyshev", "cheby": "chebyshev",
    "cheb": "chebyshev", "ch": "chebyshev",
    "minkowski": "minkowski", "mi": "minkowski", "m": "minkowski", "pnorm": "minkowski",
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
    """One output as it comes on the wire. pos: which of the op's outputs it
    is (1: knn's indices, the reply's "dtype_b"/"shape_b"). A lazy output
    (shape None, or dtype None) is one whose shape or type the client cannot
    know before the reply (it depends on resident arrays only): resolve()
    takes them from each reply; nbytes is 0 until then."""

    __slots__ = ("shape", "dtype", "wshape", "dname", "nbytes", "pos", "lazy", "want")

    def __init__(self, shape: Optional[Tuple[int, ...]], dtype: Optional[np.dtype], pos: int = 0):
        self.pos = pos
        if shape is None or dtype is None:
            self.lazy = True
            self.want = dtype  # the dtype the reply must say, when known
            self.shape = self.wshape = self.dname = None
            self.dtype = dtype
            self.nbytes = 0
            return
        self.lazy = False
        self.shape = tuple(shape)
        self.dtype = dtype
        self.wshape = list(self.shape)  # as the reply's "shape" decodes
        self.dname = cv.NAME[dtype]
        n = dtype.itemsize
        for d in self.shape:
            n *= d
        self.nbytes = n

    def resolve(self, dname: Any, shape: Any) -> Optional[str]:
        """A lazy output's dtype and shape from a reply (its "dtype" and
        "shape", or the _b keys): None when they are an array's, else what
        is wrong."""
        dt = cv.WIRE.get(dname) if isinstance(dname, str) else None
        if dt is None or (self.want is not None and dt != self.want):
            return f"dtype {dname!r}" + (f", expected {cv.NAME[self.want]}" if self.want else "")
        if not isinstance(shape, list) or not 1 <= len(shape) <= 2 or \
                any(type(d) is not int or d < 0 for d in shape):
            return f"shape {shape!r}"
        self.shape = tuple(shape)
        self.wshape = shape
        self.dtype = dt
        self.dname = dname
        n = dt.itemsize
        for d in shape:
            n *= d
        self.nbytes = n
        return None


class Call:
    """One compute request, ready for the session to send.

    inputs are the arrays the request carries (in the payload or by arena
    reference) and outs the outputs that come back (in the reply's payload or
    an arena), in order. A special call (``special``) names resident arrays
    or is put or get: ``wire_in`` holds per input of the op the resident
    array's name, or None for the next of inputs; ``wire_out`` per output of
    the op the name it is kept under, or None for the next of outs (each None
    when nothing is named); ``lazy``: some of outs are lazy (Out); ``info``:
    the value is the reply's ``info`` map (put)."""

    __slots__ = ("op", "keys", "dtype", "inputs", "outs", "user_out", "finish", "timing",
                 "deadline_ms", "wire_in", "wire_out", "special", "lazy", "info", "progress")

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
        self.progress = None  # the caller's progress= callback (_progress.py), or None
        self.wire_in: Optional[List[Optional[str]]] = None
        self.wire_out: Optional[List[Optional[str]]] = None
        self.special = False
        self.lazy = False
        self.info = False

    def header(self) -> dict:
        h = {"op": self.op}
        if self.dtype is not None:
            h["dtype"] = cv.NAME[self.dtype]
        if self.wire_in is None:
            if self.inputs:
                h["shape"] = list(self.inputs[0].shape)
            if len(self.inputs) > 1:
                h["shape_b"] = list(self.inputs[1].shape)
        else:  # a named input's shape is the array's (gpuqd's)
            k = 0
            for pos, name in enumerate(self.wire_in):
                if name is None:
                    h["shape" if pos == 0 else "shape_b"] = list(self.inputs[k].shape)
                    k += 1
        h.update(self.keys)
        if self.timing:
            h["timing"] = True
        if self.deadline_ms:
            h["deadline_ms"] = self.deadline_ms
        if self.progress is not None:
            h["progress"] = True  # the started notice (PROTOCOL.md 4.1) marks "running"
        return h

    def in_entries(self, carried: List[Any]) -> List[Any]:
        """The "in" of a call with wire_in: the names, and carried's entries
        (arena references, or None: in the payload) for the others."""
        it = iter(carried)
        return [name if name is not None else next(it) for name in self.wire_in]

    def out_entries(self, travel: List[Any]) -> List[Any]:
        """The "out" of a call with wire_out, as in_entries."""
        it = iter(travel)
        return [name if name is not None else next(it) for name in self.wire_out]


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
        f'metric "{value}" is not euclidean, sqeuclidean, cosine, cityblock, chebyshev '
        f'or minkowski (scipy\'s names; manhattan, l1 and l2 work too)')


def _metric_keys(metric: str, p: Any, on_zero: Any) -> Dict[str, Any]:
    """The wire keys of pairwise's and knn's metric, p and on_zero, checked
    as gpuqd checks them (PROTOCOL.md 3.1 "p"): p only with minkowski
    (scipy's cdist refuses it for the others too), a number > 0, inf
    meaning chebyshev; None: minkowski's default, p = 2."""
    keys: Dict[str, Any] = {"metric": metric}
    if p is not None:
        if metric != "minkowski":
            raise errors.BadArgumentError(
                f'p is minkowski\'s exponent; metric "{metric}" takes none')
        if isinstance(p, bool):
            raise errors.BadArgumentError(f"p must be a number, not {p!r}")
        p = _number("p", p)
        if not p > 0:  # NaN too
            raise errors.BadArgumentError(
                f"p={p}: minkowski needs p > 0 (a number; inf means chebyshev)")
        keys["p"] = p
    on_zero = _enum("on_zero", on_zero, ON_ZERO)
    if on_zero != "error":
        keys["on_zero"] = on_zero
    return keys


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


def _named_inputs(arrays: Sequence[Any], names: Sequence[str], dtype: Any):
    """_inputs, where inputs may be Residents: (per input the converted array
    or None for a Resident, the dtype, wire_in or None when none is). The
    dtype is the carried inputs' (or dtype=); with none carried and no
    dtype=, None: the request leaves it to gpuqd (the arrays')."""
    wire_in = None
    for k, a in enumerate(arrays):
        if type(a) is Resident:
            if wire_in is None:
                wire_in = [None] * len(arrays)
            wire_in[k] = check_name(f"in[{k}]", a.name)
    if wire_in is None:
        arrs, dt = _inputs(arrays, names, dtype)
        return arrs, dt, None
    carried = [(cv.asarray(a, n), n) for a, n, w in zip(arrays, names, wire_in) if w is None]
    if carried:
        dt = cv.target([x for x, _ in carried], [n for _, n in carried], dtype)
    else:
        dt = None if dtype is None else cv.parse_dtype(dtype)
    it = iter([x for x, _ in carried])
    return [None if w is not None else next(it) for w in wire_in], dt, wire_in


def _outs(out: Any, n: int) -> List[Any]:
    if out is None:
        return [None] * n
    if n == 1:
        return [out]
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise errors.BadArgumentError(f"out must be a tuple of {n} arrays (or gpuq.Resident, "
                                      f"or None)")
    return list(out)


def _outputs(out: Any, specs: Sequence[Tuple[Optional[tuple], Optional[np.dtype],
                                             Optional[tuple]]]):
    """The outputs of a call from out= and, per output of the op, (its wire
    shape, its dtype, the caller's shape; None where a resident input hides
    it): the Outs that come back, the caller's out= array for each (checked
    now, or for a lazy Out once the reply says its shape), and wire_out (the
    names of the outputs given as Residents, kept in gpuqd; None when
    none is)."""
    n = len(specs)
    outs: List[Out] = []
    user: List[Optional[np.ndarray]] = []
    wire_out = None
    for j, (uo, (wshape, dt, ushape)) in enumerate(zip(_outs(out, n), specs)):
        if type(uo) is Resident:
            if wire_out is None:
                wire_out = [None] * n
            wire_out[j] = check_name(f"out[{j}]", uo.name)
            continue
        o = Out(wshape, dt, j)
        if uo is not None:
            what = "out" if n == 1 else f"out[{j}]"
            if o.lazy:
                if not isinstance(uo, np.ndarray):
                    raise errors.BadArgumentError(f"{what} must be a numpy.ndarray, not "
                                                  f"{type(uo).__name__}")
            else:
                uo = cv.check_out(uo, ushape, dt, what)
        outs.append(o)
        user.append(uo)
    return outs, user, wire_out


def check_lazy_out(call: Call) -> None:
    """Once a reply has resolved call's lazy outputs: the caller's out=
    arrays against them (as _outputs checks the others before sending)."""
    n = len(call.wire_out) if call.wire_out is not None else len(call.outs)
    for o, uo in zip(call.outs, call.user_out):
        if uo is not None and o.lazy:
            cv.check_out(uo, o.shape, o.dtype, "out" if n == 1 else f"out[{o.pos}]")


def _call(op: str, keys: dict, dt: Optional[np.dtype], wire: List[np.ndarray], outs: List[Out],
          user: List[Optional[np.ndarray]], finish: Callable[[list], Any], timing: bool,
          wire_in: Optional[list], wire_out: Optional[list], access: Any, nout: int,
          persist: Any = False) -> Call:
    """The Call of a builder's general path: special when it names resident
    arrays or has lazy outputs. With outputs kept, finish gets None in
    their places. persist is sent whenever true (gpuqd ignores it when the
    request keeps nothing), never when false (the default)."""
    if access is not None:
        keys["access"] = check_access(access)
    if check_persist(persist):
        keys["persist"] = True
    call = Call(op, keys, dt, wire, outs, user, finish, timing)
    lazy = False
    for o in outs:
        lazy = lazy or o.lazy
    if wire_in is None and wire_out is None and not lazy:
        return call
    call.special = True
    call.wire_in = wire_in
    call.wire_out = wire_out
    call.lazy = lazy
    if wire_out is not None:
        poses = [o.pos for o in outs]

        def finish_kept(res):
            full: List[Any] = [None] * nout
            for pos, r in zip(poses, res):
                full[pos] = r
            return finish(full)
        call.finish = finish_kept
    return call


# Input types that the wire carries as they are.
_PLAIN = {cv.F32: cv.F32, cv.F64: cv.F64}


def _first(res: List[np.ndarray]) -> np.ndarray:
    return res[0]


def _shaped(r: np.ndarray, shape: tuple) -> np.ndarray:
    return r if r.shape == shape else r.reshape(shape)


# ---- the ops ----

def _axis(v: Any) -> int:
    if isinstance(v, bool):
        raise errors.BadArgumentError(f"axis must be an integer, not {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise errors.BadArgumentError(f"axis must be an integer, not {v!r}") from None


def normalize(a: Any, method: str = "sum", flat: bool = False, on_zero: str = "error",
              dtype: Any = None, out: Any = None, timing: bool = False,
              access: Any = None, persist: Any = False, axis: Any = None) -> Call:
    if method not in METHODS or not isinstance(method, str):
        _enum("method", method, METHODS)
    if on_zero != "error":
        on_zero = _enum("on_zero", on_zero, ON_ZERO)
    keys = {"method": method}
    if flat:
        keys["flat"] = True
    if on_zero != "error":
        keys["on_zero"] = on_zero
    if axis is not None:
        axis = _axis(axis)
        if flat:
            raise errors.BadArgumentError('normalize takes axis or flat, not both')
        if not isinstance(a, (Resident, np.ndarray)) and not hasattr(a, "ndim"):
            a = np.asarray(a)  # a list or other sequence: its rank decides
        nd = getattr(a, "ndim", None) if not isinstance(a, Resident) else None
        if isinstance(nd, int) and nd >= 1:
            if not -nd <= axis < nd:
                raise errors.BadArgumentError(f"axis={axis} is out of range for an array of "
                                              f"{nd} dimension{'s' if nd > 1 else ''}")
            axis %= nd
            if axis == nd - 1:
                axis = None  # the last axis: the rows, the default
            elif nd == 2:
                keys["axis"] = 0  # gpuqd's column path
                axis = None
            else:
                return _normalize_moved(a, axis, keys, dtype, out, timing, access, persist)
        else:  # a resident array (its rank is gpuqd's) or an unknown kind: gpuqd checks
            keys["axis"] = axis
            axis = None
    dt = _PLAIN.get(a.dtype) if type(a) is np.ndarray and dtype is None else None
    if dt is not None and 1 <= a.ndim <= 2 and a.flags.c_contiguous and a.flags.aligned and (
            out is None or (type(out) is np.ndarray and out.shape == a.shape and
                            out.dtype == dt and out.flags.writeable)) and access is None and \
            persist is False:
        # the common case: the array goes on the wire as it is (and out= can
        # take the result as it comes)
        return Call("normalize", keys, dt, [a], [Out(a.shape, dt)], [out], _first, timing)
    (arr,), dt, wire_in = _named_inputs([a], ["a"], dtype)
    if arr is None:  # resident: its shape is gpuqd's
        shape, wire, spec = None, [], (None, dt, None)
    else:
        shape = arr.shape
        if arr.ndim == 0:
            raise errors.BadShapeError("normalize needs an array of 1 or more dimensions, "
                                       "not a scalar")
        if arr.ndim > 2:  # rows along the last axis, as numpy reductions with axis=-1
            arr = arr.reshape(-1, shape[-1])
        wire = [cv.to_wire(arr, dt)]
        spec = (wire[0].shape, dt, shape)
    outs, user, wire_out = _outputs(out, [spec])

    def finish(res):
        r = res[0]
        return r if r is None or shape is None else _shaped(r, shape)

    return _call("normalize", keys, dt, wire, outs, user, finish, timing, wire_in, wire_out,
                 access, 1, persist)


def _normalize_moved(a: Any, axis: int, keys: dict, dtype: Any, out: Any, timing: bool,
                     access: Any, persist: Any) -> Call:
    """normalize along axis (not the last) of an N-D array, N > 2, as numpy
    and scikit-learn mean it: the axis moved last, the array reshaped to
    rows of that axis, the rows normalized, the result moved back (a copy
    of the array on the way out and one on the way back)."""
    if isinstance(out, Resident) or persist is not False:
        raise errors.BadArgumentError("normalize along an axis other than the last of an "
                                      "array of 3 or more dimensions cannot keep its result "
                                      "(out= a Resident, persist)")
    (arr,), dt, wire_in = _named_inputs([a], ["a"], dtype)
    moved = np.moveaxis(arr, axis, -1)
    user_out = None if out is None else cv.check_out(out, arr.shape, dt, "out")
    wire = [cv.to_wire(np.ascontiguousarray(moved).reshape(-1, moved.shape[-1]), dt)]
    outs, user, wire_out = _outputs(None, [(wire[0].shape, dt, wire[0].shape)])

    def finish(res):
        r = np.moveaxis(res[0].reshape(moved.shape), -1, axis)
        if user_out is None:
            return np.ascontiguousarray(r)
        np.copyto(user_out, r, casting="same_kind")
        return user_out

    return _call("normalize", keys, dt, wire, outs, user, finish, timing, wire_in, wire_out,
                 access, 1, persist)


def haversine(a: Any, b: Any = None, to: Any = None, radius: float = EARTH_RADIUS_KM,
              dtype: Any = None, out: Any = None, timing: bool = False,
              access: Any = None, persist: Any = False) -> Call:
    if (b is None) == (to is None):
        raise errors.BadArgumentError("haversine takes either \"to\" or \"shape_b\", not both"
                                      if b is not None else
                                      "haversine needs to=(lat, lon) or a second array b")
    arrays, names = ([a], ["points"]) if b is None else ([a, b], ["a", "b"])
    arrs, dt, wire_in = _named_inputs(arrays, names, dtype)
    for x, n in zip(arrs, names):
        if x is not None and (x.ndim == 0 or x.shape[-1] != 2):
            raise errors.BadShapeError(f"haversine needs {n} of shape (n, 2), rows of (lat, lon) "
                                       f"in degrees; got {x.shape}")
    carried = [x for x in arrs if x is not None]
    if len(carried) == 2 and carried[0].shape != carried[1].shape:
        raise errors.BadShapeError(f"haversine needs a and b of the same shape; got "
                                   f"{carried[0].shape} and {carried[1].shape}")
    wire = [cv.to_wire(x.reshape(-1, 2) if x.ndim != 2 else x, dt) for x in carried]
    keys = {"radius": _radius(radius)}
    if to is not None:
        keys["to"] = _pair("to", to)
    if carried:  # a resident a has the shape of a carried b (gpuqd checks)
        shape = carried[0].shape[:-1]
        spec = ((wire[0].shape[0],), dt, shape)
    else:
        shape, spec = None, (None, dt, None)
    outs, user, wire_out = _outputs(out, [spec])

    def finish(res):
        r = res[0]
        return r if r is None or shape is None else _shaped(r, shape)

    return _call("haversine", keys, dt, wire, outs, user, finish, timing, wire_in, wire_out,
                 access, 1, persist)


def grid(lat: Any = (-90.0, 90.0, 1000), lon: Any = (-180.0, 180.0, 1000),
         to: Any = (30.0, 101.0), radius: float = EARTH_RADIUS_KM, dtype: Any = np.float64,
         out: Any = None, timing: bool = False, access: Any = None,
         persist: Any = False) -> Call:
    dt = cv.parse_dtype(dtype)
    la, lo = _range("lat", lat), _range("lon", lon)
    keys = {"lat": la, "lon": lo, "to": _pair("to", to), "radius": _radius(radius)}
    shape = (la[2], lo[2])
    outs, user, wire_out = _outputs(out, [(shape, dt, shape)])
    return _call("grid", keys, dt, [], outs, user, _first, timing, None, wire_out, access, 1,
                 persist)


def _xy(x: Any, y: Any, dtype: Any, op: str):
    """pairwise's and knn's inputs: (x's wire array, y's, dtype, wire_in),
    a wire array None where the input is resident."""
    same = y is None
    arrs, dt, wire_in = _named_inputs([x] if same else [x, y],
                                      ["x"] if same else ["x", "y"], dtype)
    for a, n in zip(arrs, ("x", "y")):
        if a is not None and a.ndim != 2:
            raise errors.BadShapeError(f"{op} needs {n} of shape (rows, d), 2-D as in "
                                       f"scipy.spatial.distance.cdist; got {a.shape}")
    if not same and arrs[0] is not None and arrs[1] is not None and \
            arrs[0].shape[1] != arrs[1].shape[1]:
        raise errors.BadShapeError(f"y has d={arrs[1].shape[1]}, x has d={arrs[0].shape[1]}")
    wx = None if arrs[0] is None else cv.to_wire(arrs[0], dt)
    wy = wx if same else (None if arrs[1] is None else cv.to_wire(arrs[1], dt))
    if same and wire_in is not None:
        wire_in = wire_in * 2  # y is x: the same array named twice
    return wx, wy, dt, wire_in


def pairwise(x: Any, y: Any = None, metric: str = "euclidean", on_zero: str = "error",
             dtype: Any = None, out: Any = None, timing: bool = False,
             access: Any = None, persist: Any = False, p: Any = None) -> Call:
    keys = _metric_keys(_metric(metric), p, on_zero)
    wx, wy, dt, wire_in = _xy(x, y, dtype, "pairwise")
    shape = None if wx is None or wy is None else (wx.shape[0], wy.shape[0])
    outs, user, wire_out = _outputs(out, [(shape, dt, shape)])
    wire = [w for w in (wx, wy) if w is not None]
    return _call("pairwise", keys, dt, wire, outs, user, _first, timing, wire_in, wire_out,
                 access, 1, persist)


def knn(x: Any, y: Any, k: int, metric: str = "euclidean", on_zero: str = "error",
        dtype: Any = None, out: Any = None, timing: bool = False, access: Any = None,
        persist: Any = False, p: Any = None) -> Call:
    keys = _metric_keys(_metric(metric), p, on_zero)
    k = _uint("k", k)
    wx, wy, dt, wire_in = _xy(x, y, dtype, "knn")
    keys["k"] = k
    shape = None if wx is None else (wx.shape[0], k)  # a resident y's rows do not count
    outs, user, wire_out = _outputs(out, [(shape, dt, shape), (shape, cv.I64, shape)])

    def finish(res):
        return res[0], res[1]

    wire = [w for w in (wx, wy) if w is not None]
    return _call("knn", keys, dt, wire, outs, user, finish, timing, wire_in, wire_out, access, 2,
                 persist)


# ---- resident arrays (PROTOCOL.md 3.5) ----

def put(name: str, a: Any, access: Any = "private", persist: Any = False, dtype: Any = None,
        timing: bool = False) -> Call:
    """Store a (converted as any op's input; rank 1 or 2), or a copy of the
    resident array a (a Resident), under name (persist: in gpuqd's state
    directory too); the value is the reply's info."""
    keys = {"name": check_name("name", name)}
    (arr,), dt, wire_in = _named_inputs([a], ["a"], dtype)
    wire = []
    if arr is not None:
        if not 1 <= arr.ndim <= 2:
            raise errors.BadShapeError(f'put needs "shape" of rank 1 or 2; got an array of '
                                       f'shape {arr.shape}')
        wire = [cv.to_wire(arr, dt)]
    call = _call("put", keys, dt, wire, [], [], _first, timing, wire_in, None, access, 0,
                 persist)
    call.special = True
    call.info = True
    return call


def get(name: str, out: Any = None, access: Any = None, timing: bool = False,
        persist: Any = False) -> Call:
    """The resident array name's bytes, as an array of its dtype and shape
    (out=: into that array; a Resident: copied to that name, None; persist:
    the copy in gpuqd's state directory too)."""
    keys = {"name": check_name("name", name)}
    outs, user, wire_out = _outputs(out, [(None, None, None)])
    call = _call("get", keys, None, [], outs, user, _first, timing, None, wire_out, access, 1,
                 persist)
    call.special = True
    return call
