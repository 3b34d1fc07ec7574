#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pipeline.sh - gpuqctl in shell pipelines: arrays through stdin and stdout,
# a resident base made by one command and used by the next, --json for the
# script's own decisions, and exit statuses checked.
#
#   examples/pipeline.sh [OUTDIR]          # OUTDIR: where the .npy go (.)
#
# gpuqd is found as gpuqctl finds it ($GPUQ_SOCKET, ...); $PYTHON (default
# python3) has numpy and makes the data. Steps:
#   1. 2000 random places (lat, lon) -> places.npy; the km from each to Paris
#      straight through a pipe (python | gpuqctl ... - -o - | python) into
#      km.npy, and the three nearest printed;
#   2. 5000 x 48 random embeddings piped into `gpuqctl normalize --method l2
#      - -o @NAME`: the unit rows stay in gpuqd as the resident array NAME,
#      the raw rows are saved as base.npy;
#   3. `gpuqctl --json ls` read by python: NAME's shape and bytes;
#   4. cosine kNN (k 4) of 64 queries (queries.npy) against @NAME ->
#      dist.npy and idx.npy, the base not sent again;
#   5. the failures a script must tell apart: k = 0 (exit 1, gpuqd's
#      bad_argument), an unknown option (exit 2), no gpuqd at a socket
#      path (exit 3);
#   6. `gpuqctl rm NAME` (also on any failure: the trap).
# Exit 0 and "pipeline ok" when every step did what it says; else the
# failing step's message and exit 1.
set -euo pipefail

PYTHON=${PYTHON:-python3}
out=${1:-.}
mkdir -p "$out"
name="pipeline-base-$$"
stored=0
cleanup() {
    if [[ $stored -eq 1 ]]; then
        gpuqctl rm "$name" >/dev/null || echo "pipeline: could not remove $name" >&2
    fi
}
trap cleanup EXIT
fail() {
    echo "pipeline: $*" >&2
    exit 1
}

# 1. places to Paris, through a pipe both ways (tee keeps the input).
"$PYTHON" -c '
import sys, numpy as np
rng = np.random.default_rng(3)
lat = np.degrees(np.arcsin(rng.uniform(-1, 1, 2000)))
np.save(sys.stdout.buffer, np.stack([lat, rng.uniform(-180, 180, 2000)], axis=1))' |
    tee "$out/places.npy" |
    gpuqctl distance haversine --to 48.8566,2.3522 - -o - |
    tee "$out/km.npy" |
    "$PYTHON" -c '
import io, sys, numpy as np
km = np.load(io.BytesIO(sys.stdin.buffer.read()))
near = np.argsort(km, kind="stable")[:3]
print(f"{km.size} places: nearest to Paris", ", ".join(f"#{i} {km[i]:.1f} km" for i in near))'

# 2. the base, normalized on the way in, kept in gpuqd.
"$PYTHON" -c '
import sys, numpy as np
rng = np.random.default_rng(5)
base = rng.standard_normal((5000, 48)).astype(np.float32)
np.save(sys.argv[1], base)
q = base[rng.choice(5000, 64, replace=False)] + 0.05 * rng.standard_normal((64, 48))
np.save(sys.argv[2], q.astype(np.float32))
np.save(sys.stdout.buffer, base)' "$out/base.npy" "$out/queries.npy" |
    gpuqctl normalize --method l2 - -o "@$name"
stored=1

# 3. what gpuqd holds, from --json.
gpuqctl --json ls | "$PYTHON" -c '
import json, sys
name = sys.argv[1]
mine = [a for a in json.load(sys.stdin) if a["name"] == name]
if len(mine) != 1 or mine[0]["shape"] != [5000, 48] or mine[0]["dtype"] not in ("f32", "float32"):
    sys.exit(f"ls: want one {name} float32 (5000, 48), got {mine}")
a = mine[0]
print("resident %s: %s %s, %d bytes" % (name, a["dtype"], tuple(a["shape"]), a["bytes"]))' "$name" ||
    fail "step 3 (gpuqctl --json ls)"

# 4. the queries against the resident base.
gpuqctl distance knn --k 4 --metric cosine "$out/queries.npy" "@$name" \
    -o "$out/dist.npy" -i "$out/idx.npy"
"$PYTHON" -c '
import sys, numpy as np
d, i = np.load(sys.argv[1] + "/dist.npy"), np.load(sys.argv[1] + "/idx.npy")
print(f"knn: {i.shape[0]} queries x k {i.shape[1]}, {d.dtype}; query 0: rows {i[0].tolist()} at",
      " ".join(f"{v:.4f}" for v in d[0]))' "$out"

# 5. exit statuses: 1 refused by gpuqd, 2 usage, 3 no gpuqd.
expect_status() {
    local want=$1
    shift
    local rc=0
    "$@" 2>"$out/stderr.txt" >/dev/null || rc=$?
    [[ $rc -eq $want ]] || fail "$* exited $rc, not $want: $(cat "$out/stderr.txt")"
    echo "exit $rc: $(head -1 "$out/stderr.txt")"
}
expect_status 1 gpuqctl distance knn --k 0 "$out/queries.npy" "@$name" -o "$out/d0.npy" -i "$out/i0.npy"
expect_status 2 gpuqctl distance knn --k 4 --no-such-option "$out/queries.npy" "@$name" \
    -o "$out/d0.npy" -i "$out/i0.npy"
expect_status 3 gpuqctl --socket "$out/no-gpuqd-here.sock" ping
[[ ! -e "$out/d0.npy" && ! -e "$out/i0.npy" ]] || fail "a failed knn wrote its outputs"

# 6. remove it (the trap would too).
gpuqctl rm "$name"
stored=0
echo "pipeline ok"
