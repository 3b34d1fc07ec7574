#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/test_targets.sh PYTHON - bench/targets.py reads the two tables of a
# run and judges every target (ctest: test_targets, label bench). Fixtures:
# a run that meets every target (exit 0, 7 of 7), the same run with one row
# slower than its bound and one row failed (exit 1, those two NO, the failed
# one n/a), and a missing file (exit 2).
set -uo pipefail
PY=${1:?usage: test_targets.sh PYTHON}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-test-targets-XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

cat >"$T/bench.txt" <<'TXT'
| gpuq_bench                                     | gpuq (cuda) | in-process | ratio | errors |
|---|---|---|---:|---:|
| normalize f32 sum, n = 16777216                | 20.00 ms, 6.7 GB/s | 2.50 ms, 53 GB/s | 0.13 | 0 |
| normalize f32 sum, n = 16777216, socket vs echo | 25.00 ms, 5.4 GB/s | 21.00 ms, 6.4 GB/s | 0.84 | 0 |
| normalize f32 sum, n = 16777216, shm           | 2.60 ms, 51 GB/s | 2.50 ms, 53 GB/s | 0.96 | 0 |
| normalize f32 l2 rows, 4096x4096, shm          | 1.50 ms, 89 GB/s | 2.50 ms, 53 GB/s | 1.67 | 0 |
| haversine f64 to a point, n = 1000000, shm     | 0.40 ms, 60 GB/s | 0.50 ms, 48 GB/s | 1.25 | 0 |
| pairwise euclidean f32, 4096x4096, d = 64, shm | 1.50 ms, 45 GB/s | 1.60 ms, 44 GB/s | 1.07 | 0 |
| grid f64, 1000x1000, shm                       | 0.24 ms, 33 GB/s | 0.18 ms, 44 GB/s | 0.75 | 0 |
| normalize f32 sum, n = 16777216, 4 clients x 2 in flight, shm | 47.0 GB/s | 53.0 GB/s, pinned H2D | 0.89 | 0 |
bench: 0 errors in 0 of 8 rows
TXT
cat >"$T/peer.txt" <<'TXT'
| PyTorch 2.11 in-process (H100) | PyTorch | errors |
|---|---|---:|
| normalize f32 sum, n = 16777216 | p50 2.57 ms, p99 2.70 ms | 0 |
| normalize f32 l2 rows, 4096x4096 | p50 2.60 ms, p99 2.70 ms | 0 |
| haversine f64 to a point, n = 1000000 | p50 700.0 us, p99 800.0 us | 0 |
| pairwise euclidean f32, 4096x4096, d = 64 (cdist's matmul form) | p50 1.58 ms, p99 1.93 ms, max abs err 3.4e-03 | 0 |
TXT

"$PY" "$HERE/targets.py" "$T/bench.txt" "$T/peer.txt" >"$T/ok.out"
rc=$?
cat "$T/ok.out"
[[ $rc -eq 0 ]] || fail "all met: exit $rc, want 0"
grep -qx 'targets: 7 of 7 met' "$T/ok.out" || fail "all met: no '7 of 7 met'"
grep -q '| normalize 16M f32 flat sum, shm | 2.60 ms, 51 GB/s | p50 2.57 ms, p99 2.70 ms | 1.01 | <= 1.05x torch | yes |' \
    "$T/ok.out" || fail "all met: the normalize row's ratio"
grep -q '| normalize 16M f32 over the socket | .* | 0.84 | >= 0.80x socket echo | yes |' "$T/ok.out" ||
    fail "all met: the socket row is the echo's time over gpuq's"

# l2 rows now slower than 0.6x torch, the grid over 245 us, the 4-client row failed
sed -e 's/| 1.50 ms, 89 GB\/s |/| 1.70 ms, 79 GB\/s |/' -e 's/| 0.24 ms, 33 GB\/s/| 0.30 ms, 27 GB\/s/' \
    -e 's/| 47.0 GB\/s | 53.0 GB\/s, pinned H2D | 0.89 | 0 |/| n\/a | 53.0 GB\/s, pinned H2D | n\/a | 32 |/' \
    "$T/bench.txt" >"$T/bench2.txt"
"$PY" "$HERE/targets.py" "$T/bench2.txt" "$T/peer.txt" >"$T/miss.out"
rc=$?
cat "$T/miss.out"
[[ $rc -eq 1 ]] || fail "missed: exit $rc, want 1"
grep -qx 'targets: 4 of 7 met' "$T/miss.out" || fail "missed: no '4 of 7 met'"
grep -q '| normalize 4096x4096 f32 row-wise l2, shm | 1.70 ms, 79 GB/s | .* | 0.65 | <= 0.60x torch | NO |' \
    "$T/miss.out" || fail "missed: the l2 row"
grep -q '| grid 1000x1000 f64, shm output | 0.30 ms, 27 GB/s | - | 1.22 of target | <= 245 us | NO |' \
    "$T/miss.out" || fail "missed: the grid row"
grep -q '| 4 clients x 2 in flight, 64 MiB normalize, shm | n/a | .* | n/a | >= 0.85x pinned H2D | NO |' \
    "$T/miss.out" || fail "missed: the failed row is n/a and not met"

"$PY" "$HERE/targets.py" "$T/none.txt" "$T/peer.txt" >/dev/null 2>"$T/err.out"
rc=$?
[[ $rc -eq 2 ]] || fail "missing file: exit $rc, want 2"

if [[ $fails -ne 0 ]]; then
    echo "test_targets: $fails failures"
    exit 1
fi
echo "test_targets: ok"
