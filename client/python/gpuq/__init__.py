# SPDX-License-Identifier: Apache-2.0
"""gpuq: NumPy arrays to a GPU daemon (gpuqd) and back.

    import gpuq, numpy as np
    with gpuq.connect() as c:                       # finds gpuqd's socket
        y = c.normalize(np.random.rand(4, 1024), method="l2")
        d = c.pairwise(x, y, metric="cosine")       # scipy's cdist, on the GPU
        dist, idx = c.knn(queries, points, k=10)

Ops: normalize, haversine, grid, pairwise, knn (Client methods; each
method's help text says what it computes). Pipelining: Client.submit()
returns a Future. asyncio: gpuq.aio.connect(). Zero-copy: arrays from
Client.empty()/Client.asarray() live in memory gpuqd shares. Resident
arrays: Client.put(name, a) keeps an array in gpuqd (persist=True: across
a restart too), Client.resident(name) names it as an op's input or out=,
get/list/remove. Progress: an op's progress=fn gets gpuq.Progress
reports (sending, queued, running, receiving). Errors:
gpuq.Error and one subclass per protocol error (ZeroNormError, BusyError,
...).
"""

from .client import Client, Future, connect
from ._ops import Timed, Timing
from ._progress import Progress
from ._resident import Resident
from .errors import *  # noqa: F401,F403 - the exception classes
from .errors import __all__ as _errors_all

__version__ = "0.1.0"
PROTOCOL_VERSION = 1

__all__ = ["connect", "Client", "Future", "Progress", "Resident", "Timed", "Timing", "aio",
           "__version__"] + _errors_all


def __getattr__(name):
    if name == "aio":  # imported on first use: asyncio costs import time
        import importlib
        return importlib.import_module(".aio", __name__)
    raise AttributeError(f"module 'gpuq' has no attribute {name!r}")
