# SPDX-License-Identifier: Apache-2.0
"""The text of each op's method, shared by gpuq.Client and gpuq.aio.AsyncClient."""

_INPUTS = """\
    Inputs: anything NumPy accepts (lists, views, any byte order). float32
    and float64 keep their type, float16 becomes float32, integers and
    booleans float64; complex, float128, strings and objects are refused
    (BadDtypeError, a TypeError). dtype= (numpy.float32/"f32",
    numpy.float64/"f64") computes in that type instead. With two inputs the
    op computes in the type NumPy promotes both to."""

_COMMON = """\
    out: an array of the result's shape to write into (returned). When it
    lives in this session's arena (Client.empty), gpuqd writes it in place.
    timing: return Timed(value, Timing) instead of value: the server's
    queue, upload, kernel, download and total microseconds.
    deadline_ms: the request must be answered within this many ms of gpuqd
    reading it (1 .. 86400000), else DeadlineExceededError (a TimeoutError)
    and no result; None takes the client's deadline_ms, 0 means none.
    progress: a callable that gets a gpuq.Progress (phase, elapsed_s,
    bytes_left) as the request goes: "sending" (bytes of it still to write),
    "queued" (written), "running" (gpuqd's device took it) and "receiving"
    (bytes of the reply still to read), in that order; it runs between the
    client's reads and writes (keep it short), and when it raises the call
    fails with that exception once the reply is in.

    Arrays made by Client.empty/Client.asarray (and views of them) are not
    sent: gpuqd reads them in the shared arena, and the result is returned
    as an arena array too (zero-copy both ways).

    Resident arrays (Client.put): c.resident(name) as an input names the
    array gpuqd keeps (nothing is sent for it; its shape and dtype are the
    array's, and the other inputs must have its dtype: dtype= casts them);
    as out= (knn: either or both of the pair) the output is kept in gpuqd
    under that name instead of coming back, with access= ("private", the
    default, or "all"), and the value has None in its place.
    persist=True: the kept outputs are written to gpuqd's state directory
    too and survive a restart of gpuqd (see Client.put; StorageError, an
    OSError, when gpuqd cannot write them or has no state directory). A
    result whose shape depends on resident inputs only comes by socket."""

NORMALIZE = f"""Normalize each row of a: a 1-D array is one row, a 2-D array's rows
    are normalized each on its own (flat=True: the whole array as one row),
    and an array of more dimensions is normalized along its last axis.

    axis: the axis to normalize along, as numpy's and scikit-learn's
    normalize: -1 (or ndim - 1) the rows, the default; 0 (or -2) each
    column of a 2-D array (sklearn.preprocessing.normalize(a, axis=0); bit
    for bit the rows of a.T); any axis of an array of more dimensions (that
    axis moved last, normalized, moved back). An axis out of range raises
    BadArgumentError; flat=True (numpy's axis=None) excludes it.

    method:
      "sum"     a / sum(a)
      "l1"      a / sum(|a|)
      "l2"      a / sqrt(sum(a**2))
      "minmax"  (a - min(a)) / (max(a) - min(a))
      "zscore"  (a - mean(a)) / std(a), population std (ddof=0)

    Every sum is accumulated in float64, compensated (Neumaier), whatever
    the dtype; float64 rows are scaled as LAPACK's dnrm2 does, so nothing
    overflows or underflows on the way. NaN and Inf propagate by IEEE rules.

    on_zero: a zero denominator (zero sum or norm, a constant row for
    minmax, std 0 for zscore) raises ZeroNormError ("error", the default),
    or gives that row all zeros ("zero") or all NaN ("nan": every value of
    the row, where numpy's a / 0 would give +-inf for a nonzero value). A sum-normalized value beyond the
    dtype's range raises OutOfRangeError.

{_INPUTS}

    Returns an array of a's shape and the computed dtype.

{_COMMON}

    Example:
        >>> c.normalize([[1, 2, 3, 4], [10, 20, 30, 40]], method="l2")
        array([[0.18257419, 0.36514837, 0.54772256, 0.73029674],
               [0.18257419, 0.36514837, 0.54772256, 0.73029674]])
    """

HAVERSINE = f"""Great-circle distances: haversine(points, to=(lat, lon)) from every
    point to one point, or haversine(a, b) from row i of a to row i of b.

    points, a, b: arrays of shape (n, 2) (or (..., 2)), rows of (latitude,
    longitude) in degrees; a and b of the same shape. Exactly one of b and
    to. radius: the sphere's radius, > 0 (default 6371.0088, the mean
    Earth radius in km); the result is in its unit.

        d = 2 R asin(sqrt(sin^2((phi2 - phi1)/2)
                          + cos(phi1) cos(phi2) sin^2((lambda2 - lambda1)/2)))

    A coordinate that is not finite, or a latitude beyond +-90, raises
    OutOfRangeError for the whole request (as does such a point to).

{_INPUTS}

    Returns an array of shape (n,) (points' shape without its last axis).

{_COMMON}

    Example (Paris, London, New York to 30N 101E, km):
        >>> c.haversine([[48.8566, 2.3522], [51.5074, -0.1278],
        ...              [40.7128, -74.0060]], to=(30, 101))
        array([ 8127.32480494,  8150.91340943, 12135.38640565])
    """

GRID = """Distances from every point of a latitude x longitude grid to one point:
    result[i, j] = haversine((lat_i, lon_j), to), computed by gpuqd (nothing
    is sent but the grid's description).

    lat, lon: (start, stop, n), as numpy.linspace: n points, stop
    included (n = 1 gives start alone). Defaults: lat (-90, 90, 1000), lon
    (-180, 180, 1000). lat's ends within [-90, 90], lon's finite, else
    OutOfRangeError; n = 0 raises EmptyError.
    to: the point (lat, lon) in degrees, default (30, 101).
    radius: as for haversine (default 6371.0088 km).
    dtype: numpy.float64 (default) or numpy.float32.

    Returns an array of shape (lat n, lon n).

    out, timing, deadline_ms, progress, access, persist: as for the other ops.

    Example:
        >>> g = c.grid(lat=(-90, 90, 1000), lon=(-180, 180, 1000), to=(30, 101))
        >>> print(g.shape, g.min().round(3), g.max().round(3))
        (1000, 1000) 7.808 20005.571
    """

PAIRWISE = f"""Distances between the rows of x and the rows of y, as
    scipy.spatial.distance.cdist(x, y, metric): result[i, j] = dist(x[i], y[j]).

    x: (m, d), y: (n, d) (the same d); y=None compares x with itself.
    metric (scipy's names; their aliases and manhattan/l1/l2 work too):
      "euclidean"    sqrt(sum((u - v)**2))   (the default)
      "sqeuclidean"  sum((u - v)**2)
      "cityblock"    sum(|u - v|)            (the protocol's "manhattan")
      "cosine"       1 - u.v / (|u| |v|)
      "chebyshev"    max(|u - v|)
      "minkowski"    sum(|u - v|**p)**(1/p)
    p: minkowski's exponent, a number > 0 (default 2; p=1 is cityblock,
    p=2 euclidean, p=inf chebyshev, as in scipy); BadArgumentError for
    p <= 0, NaN, or p with another metric (as scipy's cdist refuses it).
    Within ((d + 2) / p + 7) units of float64's last place of the exact
    distance (then rounded to the dtype). A NaN coordinate makes a
    chebyshev distance NaN (scipy's cdist skips it; numpy's
    abs(u - v).max() gives NaN).
    on_zero: a zero vector under "cosine" raises ZeroNormError ("error",
    the default; the message names the row), or gives 1.0 for that pair
    ("zero": what it returns) or NaN ("nan", as scipy's cdist).

{_INPUTS}

    Returns an array of shape (m, n).

{_COMMON}

    Example:
        >>> c.pairwise([[0, 0], [3, 4]], [[0, 0]], metric="euclidean")
        array([[0.],
               [5.]])
    """

KNN = f"""The k nearest rows of y to each row of x: (dist, idx).

    x: (m, d) queries, y: (n, d) rows to search (the same d); 1 <= k <=
    n (else BadArgumentError; the result must fit gpuqd's max_output).
    metric, p and on_zero as for pairwise, with the same distances (a
    cosine zero vector fails the whole request with ZeroNormError, or
    counts as distance 1.0 with on_zero="zero", or NaN, sorted last, with
    on_zero="nan").

    dist: (m, k) of the computed dtype, nearest first; idx: (m, k) int64 row
    numbers of y in the same order. Exactly equal distances come lowest
    index first; NaN distances after every number. out=(dist, idx) writes
    into two arrays of those shapes.

{_INPUTS}

{_COMMON}

    Example:
        >>> d, i = c.knn([[0.0, 0.0]], [[5, 5], [1, 0], [0, 2]], k=2)
        >>> d, i
        (array([[1., 2.]]), array([[1, 2]]))
    """

PUT = """Store an array in gpuqd under name, as a resident array: sent once,
    then named by many requests of any connection (c.resident(name) as an
    op's input) until removed or gpuqd stops (persist=True: across a
    restart too).

    name: 1 to 128 bytes of UTF-8, no "/", no control character (else
    BadArgumentError with gpuqd's message, before anything is sent). a: converted as any op's
    input (float32/float64, C order; dtype= to cast), of 1 or 2 dimensions;
    or c.resident(other) to copy that resident array. It travels as an op's
    input does: by socket, or through the shared arena (an arena array is
    not sent; a large one is staged).
    access: "private" (the default: you and admins may read it) or "all"
    (every connection may). An existing name is replaced when it is yours
    (PermissionDeniedError otherwise); requests already using the old array
    finish with it.
    persist: False (the default): the array lives in gpuqd's memory only
    and is gone when gpuqd stops (replacing a persisted array deletes its
    file). True: it is also written to gpuqd's state directory (gpuqd
    --state-dir, default /var/lib/gpuq) before the reply, and gpuqd loads
    it back (owner and access too) when it starts again. StorageError (an
    OSError) when that write fails (a full disk, an I/O error) or gpuqd
    has no state directory (--state-dir '', or one it cannot write: "no
    state directory" in the message); nothing is stored then, and an array
    of that name stays as it was.

    Returns gpuqd's info: {"name", "bytes", "dtype", "shape", "device",
    "replaced"}. Quotas: the hello's limits["resident_bytes"] per user
    (TooLargeError), and gpuqd's total (BusyError: retry after a remove).

    Example:
        >>> c.put("put-example", [[1.0, 2.0], [3.0, 4.0]])["bytes"]
        32
        >>> c.remove("put-example")["name"]
        'put-example'
    """

GET = """The resident array name, as an array of its dtype and shape
    (float32, float64, or int64 for a knn index output kept).

    NotFoundError (a LookupError) when there is no such array,
    PermissionDeniedError when it is another user's and private. out=: an
    array of its shape to write into (returned), or c.resident(other) to
    copy it to that name (returns None; access= and persist= as for put).
    The array comes by socket.

    Example:
        >>> _ = c.put("get-example", np.arange(3.0))
        >>> c.get("get-example")
        array([0., 1., 2.])
        >>> _ = c.remove("get-example")
    """

LIST = """The resident arrays you may read (an admin: all), sorted by name:
    one dict each with "name", "owner" (uid), "access" ("private" or "all"),
    "dtype", "shape", "bytes", "device" (-1 on the CPU backend), "users"
    (requests using it now) and "persist" (True when it has a file in
    gpuqd's state directory: stored with persist=True, it survives a
    restart)."""

REMOVE = """Remove the resident array name (yours, or as an admin): the name is
    gone at once (NotFoundError from then on), requests using the array
    finish with it. A persisted array's file is deleted first (StorageError
    if that fails, and nothing is removed). Returns {"name", "bytes"}."""
