# SPDX-License-Identifier: Apache-2.0
"""Turning what NumPy users pass into what the wire carries.

gpuqd computes on float32 and float64 arrays, little-endian, C order. Any
input NumPy accepts is converted to that or refused; nothing is sent wrong:

* float32 and float64 arrays keep their type; float16 becomes float32 (it
  holds every float16 exactly);
* integers and booleans become float64, as NumPy's true division and
  ``scipy.spatial.distance.cdist`` do (integers beyond 2**53 round, as
  there);
* lists, tuples and scalars go through ``numpy.asarray`` first, so
  ``[[1, 2], [3, 4]]`` is float64;
* big-endian arrays are byte-swapped and non-contiguous views (slices,
  transposes, Fortran order) copied into C order, once, in the same copy;
* complex numbers, long double (float128: it would lose precision), strings,
  objects, datetimes: :class:`gpuq.BadDtypeError` (also a ``TypeError``)
  naming the type and what to do.

With ``dtype=`` the caller picks the type instead (``numpy.float32`` or
``"f32"``, ``numpy.float64`` or ``"f64"``); the inputs are cast to it as
``ndarray.astype(dtype, casting="same_kind")`` allows (float64 to float32
is allowed: the caller asked). An op with two inputs computes in the type
NumPy promotes both to (float32 with float64 gives float64).
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import errors

F32 = np.dtype("<f4")
F64 = np.dtype("<f8")
I64 = np.dtype("<i8")
WIRE = {"f32": F32, "f64": F64, "i64": I64}
NAME = {F32: "f32", F64: "f64", I64: "i64"}


def parse_dtype(dtype: Any, what: str = "dtype") -> np.dtype:
    """float32/float64 from a NumPy type, a dtype, or 'f32'/'f64'."""
    if isinstance(dtype, str) and dtype in ("f32", "f64"):
        return WIRE[dtype]
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise errors.BadDtypeError(f"{what} {dtype!r} is not float32 or float64") from None
    if dt.kind == "f" and dt.itemsize in (4, 8):
        return F32 if dt.itemsize == 4 else F64
    raise errors.BadDtypeError(f"{what} {dt} is not float32 or float64 (gpuq computes in those)")


_NATURAL = {np.dtype(t): w for t, w in (("<f4", F32), ("<f8", F64), (">f4", F32),
                                         (">f8", F64), ("<f2", F32), (">f2", F32))}


def natural(arr: np.ndarray, name: str) -> np.dtype:
    """The wire type an array converts to on its own (see the module text)."""
    dt = arr.dtype
    w = _NATURAL.get(dt)
    if w is not None:
        return w
    k = dt.kind
    if k == "f":
        if dt.itemsize == 4:
            return F32
        if dt.itemsize == 8:
            return F64
        if dt.itemsize == 2:
            return F32
        raise errors.BadDtypeError(
            f"{name} is {dt} ({dt.itemsize * 8}-bit float): gpuq computes in float32 or float64 "
            f"and converting would lose precision; pass {name}.astype(numpy.float64) or "
            f"dtype=numpy.float64 if that is what you want")
    if k in "iub":
        return F64
    if k == "c":
        raise errors.BadDtypeError(
            f"{name} is complex ({dt}): gpuq computes on real float32/float64 arrays; pass "
            f"{name}.real or abs({name}) as you mean it")
    raise errors.BadDtypeError(f"{name} has dtype {dt} ({_kind_name(k)}): gpuq needs numbers "
                               f"(float32/float64, or integers, which become float64)")


def _kind_name(k: str) -> str:
    return {"O": "Python objects", "U": "strings", "S": "bytes", "M": "datetimes",
            "m": "timedeltas", "V": "raw or structured data"}.get(k, "not numbers")


def asarray(x: Any, name: str) -> np.ndarray:
    """numpy.asarray with a clear refusal for what NumPy cannot read."""
    if isinstance(x, np.ndarray):
        return x
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged lists and the like
        raise errors.BadShapeError(f"{name} is not an array NumPy can read: {e}") from None
    return arr


def target(arrays, names, dtype: Optional[Any]) -> np.dtype:
    """The type the op computes in: dtype= if given, else the promotion of
    each input's natural type."""
    if dtype is not None:
        dt = parse_dtype(dtype)
        for a, n in zip(arrays, names):
            if not np.can_cast(a.dtype, dt, casting="same_kind"):
                if a.dtype.kind == "c":
                    natural(a, n)  # raises the complex message
                raise errors.BadDtypeError(f"{n} of dtype {a.dtype} cannot be cast to {dt} "
                                           f"(numpy casting 'same_kind')")
        return dt
    dt = natural(arrays[0], names[0])
    for a, n in zip(arrays[1:], names[1:]):
        dt = np.promote_types(dt, natural(a, n)).newbyteorder("<")
    return F32 if dt.itemsize == 4 else F64


def to_wire(arr: np.ndarray, dt: np.dtype) -> np.ndarray:
    """arr as C-ordered little-endian dt: arr itself when it already is, else
    one copy (which byte-swaps, casts and gathers a view at once)."""
    if arr.dtype == dt and arr.flags.c_contiguous and arr.flags.aligned:
        return arr
    out = np.empty(arr.shape, dtype=dt)
    np.copyto(out, arr, casting="unsafe")  # the casts were checked by target()
    return out


def check_out(out: Any, shape: tuple, dt: np.dtype, what: str = "out") -> np.ndarray:
    """A caller's out= array: an ndarray of the result's shape whose dtype
    the result casts to safely, writeable."""
    if not isinstance(out, np.ndarray):
        raise errors.BadArgumentError(f"{what} must be a numpy.ndarray, not {type(out).__name__}")
    if out.shape != tuple(shape):
        raise errors.BadShapeError(f"{what} has shape {out.shape}, the result has {tuple(shape)}")
    if not np.can_cast(dt, out.dtype, casting="same_kind"):
        raise errors.BadDtypeError(f"{what} has dtype {out.dtype}; the result is {dt}")
    if not out.flags.writeable:
        raise errors.BadArgumentError(f"{what} is read-only")
    return out


def receivable(out: np.ndarray, dt: np.dtype) -> bool:
    """Whether result bytes can be received straight into out."""
    return out.dtype == dt and out.flags.c_contiguous and out.flags.aligned
