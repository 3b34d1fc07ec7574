# SPDX-License-Identifier: Apache-2.0
"""gpuq.Future: a request of gpuq.Client in flight (Client.submit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional

from . import errors
from ._session import Pending

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client


class Future:
    """A request in flight: ``result()`` waits for its reply (reading the
    connection meanwhile) and returns the op's value or raises its error."""

    __slots__ = ("_client", "_done", "_value", "_exc", "_callbacks", "id", "_p")

    def __init__(self, client: "Client"):
        self._client = client
        self._done = False
        self._value: Any = None
        self._exc: Optional[BaseException] = None
        self._callbacks: List[Callable[["Future"], Any]] = []
        self.id = 0
        self._p: Optional[Pending] = None  # a compute request's queue entry, until answered

    def _set(self, value: Any, exc: Optional[BaseException]) -> None:
        self._value, self._exc, self._done = value, exc, True
        self._p = None
        if self._callbacks:
            self._client._ready.append(self)

    def done(self) -> bool:
        """Whether the reply has been read (this never reads the socket)."""
        return self._done

    def result(self, timeout: Optional[float] = None) -> Any:
        """The op's value, once the reply came; raises its error. timeout
        (seconds): gpuq.TimeoutError when it runs out (the request stays
        in flight, and a later result() may still get it)."""
        if not self._done:
            self._client._wait(self, timeout)
        if self._exc is not None:
            raise self._exc
        return self._value

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The error the request ended with, or None."""
        if not self._done:
            self._client._wait(self, timeout)
        return self._exc

    def add_done_callback(self, fn: Callable[["Future"], Any]) -> None:
        """Call fn(future) once the reply has been read (at once if it has);
        callbacks run in the thread that read it, outside the client's lock."""
        if self._done:
            fn(self)
        else:
            self._callbacks.append(fn)

    def cancel(self) -> bool:
        """Cancel the request: gpuqd drops it if it has not started, else
        discards its result; this future ends at once with
        gpuq.CancelledError (cancelled() is then True) and runs its
        callbacks. False, changing nothing, when the reply was read already.
        The cancel is best effort (sent when the socket takes it at once,
        never waited for); whatever the reply, it is read and dropped, and not
        written into out= unless it was already being received (an out= in
        an arena gpuqd may write)."""
        c = self._client
        with c._lock:
            if self._done:
                return False
            if self._p is not None:
                c._cancel(self._p)
            self._set(None, errors.CancelledError(f"request {self.id} was cancelled "
                                                  f"(Future.cancel())", request_id=self.id))
        c._run_callbacks()
        return True

    def cancelled(self) -> bool:
        """Whether the request ended cancelled (Future.cancel(), or a cancel
        op): result() then raises gpuq.CancelledError."""
        return self._done and isinstance(self._exc, errors.CancelledError)

    def __repr__(self) -> str:
        state = "pending" if not self._done else ("error" if self._exc else "done")
        return f"<gpuq.Future id={self.id} {state}>"
