# SPDX-License-Identifier: Apache-2.0
"""A request's queue entry in a Session (_session.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

import numpy as np

from ._ops import Call
from ._progress import Tracker

if TYPE_CHECKING:  # pragma: no cover
    from ._gate import Gate

Resolve = Callable[[Any, Optional[BaseException]], None]


class Pending:
    """A request sent (or being sent) and not yet answered. The class
    attributes are the defaults (lists are set per instance where used)."""

    call: Optional[Call] = None
    results: List[Optional[np.ndarray]] = ()  # the arrays the value is made of
    dests: List[np.ndarray] = ()  # where the reply payload goes, in order
    copies: List[Tuple[np.ndarray, np.ndarray]] = ()  # (from, to) once answered
    copy_out: Optional[List[bool]] = None  # results[j] must leave its staging block
    keep: Any = None  # staged blocks and inputs, alive until answered
    by_ref_out = False
    hdr: Optional[dict] = None
    error: Optional[BaseException] = None
    payload: Optional[bytearray] = None
    want_fd = False
    fd: Optional[int] = None
    req: Optional[dict] = None  # a compute request's header, kept to send it again
    req_payload: List[memoryview] = ()
    tries = 0
    cancelled = False  # Session.cancel() gave it up
    control = False  # a non-compute request (ready, cancel, ...): never counted in flight
    gate: Optional["Gate"] = None  # a gated request's input still to copy and announce
    progress: Optional[Tracker] = None  # the call's progress= reports

    def __init__(self, rid: int, op: str, resolve: Resolve):
        self.id = rid
        self.op = op
        self.resolve = resolve
