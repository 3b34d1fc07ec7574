#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/test_bench.sh GPUQD GPUQ_BENCH - the benchmark tells failures from
# figures (ctest: test_bench, labels e2e;bench; CPU backend, --quick).
#
#  1. a normal daemon (started by the benchmark): exit 0, every row 0 errors,
#     every figure present, positive and finite, p50 <= p99, a ratio per row;
#  2. a daemon that refuses every data request with an error reply
#     (--max-output 1: each result is over the limit, too_large; ping has no
#     result and still works): exit 1, every data row n/a with all of its
#     requests counted as errors, the daemon still serving afterwards;
#  3. no daemon at all (connect fails): exit 1, every row n/a and errors;
#  4. a daemon that takes 2 sessions (--max-sessions 2): the benchmark's own
#     connection and one client fit at a time; of 4 clients at least one is
#     refused at connect (all but one, unless a client ends before a sibling
#     connects), its requests are errors and not counted as done: exit 1.
set -uo pipefail
GPUQD=${1:?usage: test_bench.sh GPUQD GPUQ_BENCH}
BENCH=${2:?usage: test_bench.sh GPUQD GPUQ_BENCH}
T=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-test-bench-XXXXXX")
DPID=
fails=0
cleanup() {
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# The data rows of a benchmark output: "what|ours|peer|ratio|errors", one a line.
rows() {
    grep -E '^\|' "$1" | sed 1,2d | sed -E 's/^\| *//; s/ *\|$//; s/ *\| */|/g'
}

start_daemon() { # start_daemon NAME FLAGS...: sets DPID and SOCK
    SOCK=$T/$1.sock
    shift
    "$GPUQD" --device cpu --socket "$SOCK" --log-level warn "$@" 2>"$T/gpuqd.err" &
    DPID=$!
    for _ in $(seq 200); do [[ -S $SOCK ]] && return 0; sleep 0.05; done
    fail "gpuqd $* did not start: $(cat "$T/gpuqd.err")"
    return 1
}

stop_daemon() {
    kill "$DPID"
    wait "$DPID"
    local rc=$?
    DPID=
    [[ $rc -eq 0 ]] || fail "gpuqd exited with status $rc"
}

# Run the benchmark: RC, OUTPUT file ($T/NAME.out, stderr in $T/NAME.err).
run_bench() { # run_bench NAME ARGS...
    local name=$1
    shift
    timeout 120 "$BENCH" --quick "$@" >"$T/$name.out" 2>"$T/$name.err"
    RC=$?
    OUTPUT=$T/$name.out
    # a sanitizer build exits 1 on a report too: tell them apart
    ! grep -qE 'Sanitizer|runtime error' "$T/$name.err" || fail "$name: sanitizer report"
    echo "---- $name: exit $RC"
    cat "$OUTPUT"
    head -5 "$T/$name.err"
}

# Every figure of a successful row: present, positive, finite; p50 <= p99.
check_figure() { # check_figure WHAT FIGURE
    local what=$1 fig=$2
    if [[ $fig =~ ^p50\ ([0-9.]+)\ us,\ p99\ ([0-9.]+)\ us$ ]]; then
        awk -v a="${BASH_REMATCH[1]}" -v b="${BASH_REMATCH[2]}" \
            'BEGIN { exit !(a > 0 && b >= a && b < 1e7) }' ||
            fail "$what: latency '$fig' not sane"
    elif [[ $fig =~ ^([0-9.]+)\ GB/s(,\ [a-zA-Z0-9\ ]+)?$ ]]; then
        awk -v b="${BASH_REMATCH[1]}" 'BEGIN { exit !(b > 0 && b < 1000) }' ||
            fail "$what: rate '$fig' not sane"
    elif [[ $fig =~ ^([0-9]+)\ req/s(,\ 1\ thread)?$ ]]; then
        [[ ${BASH_REMATCH[1]} -gt 0 ]] || fail "$what: rate '$fig' not positive"
    elif [[ $fig =~ ^([0-9.]+)\ ms,\ ([0-9.]+)\ GB/s$ ]]; then
        # 1 TB/s is far above any copy this machine can make: a figure over
        # it counts something that did not happen
        awk -v a="${BASH_REMATCH[1]}" -v b="${BASH_REMATCH[2]}" \
            'BEGIN { exit !(a > 0 && b > 0 && b < 1000) }' ||
            fail "$what: '$fig' not sane"
    else
        fail "$what: figure '$fig' not understood"
    fi
}

# 1. normal daemon, started by the benchmark itself
run_bench normal --gpuqd "$GPUQD" --device cpu
[[ $RC -eq 0 ]] || fail "normal: exit $RC, want 0"
n=0
while IFS='|' read -r what ours peer ratio errors; do
    n=$((n + 1))
    [[ $errors == 0 ]] || fail "normal: $what: $errors errors"
    check_figure "$what (gpuq)" "$ours"
    check_figure "$what (in-process)" "$peer"
    if ! [[ $ratio =~ ^[0-9]+\.[0-9]+$ ]] || ! awk -v r="$ratio" 'BEGIN { exit !(r > 0) }'; then
        fail "normal: $what: ratio '$ratio'"
    fi
done < <(rows "$OUTPUT")
[[ $n -eq 19 ]] || fail "normal: $n rows, want 19"
grep -qx 'bench: 0 errors in 0 of 19 rows' "$OUTPUT" || fail "normal: no 'bench: 0 errors' line"
# the target rows bench/targets.py reads, each by socket and by arena
for want in "normalize f32 sum, n = 100000" "normalize f32 sum, n = 100000, shm" \
    "normalize f32 sum, n = 100000, socket vs echo" "normalize f32 sum, n = 100000, auto" \
    "normalize f32 l2 rows, 64x512, shm" \
    "haversine f64 to a point, n = 10000, shm" "pairwise euclidean f32, 256x256, d = 16, shm" \
    "grid f64, 200x200, shm" "normalize f32 sum, n = 100000, 4 clients x 2 in flight, shm"; do
    rows "$OUTPUT" | cut -d'|' -f1 | grep -qxF "$want" || fail "normal: no row '$want'"
done

# 2. every data request refused with an error reply
if start_daemon refuse --max-output 1; then
    run_bench refuse --socket "$SOCK"
    [[ $RC -eq 1 ]] || fail "refuse: exit $RC, want 1"
    while IFS='|' read -r what ours peer ratio errors; do
        case $what in
        "ping round trip") want=0 ;; # no result: max_output does not apply
        "normalize 4 KiB f32, 1 in flight") want=200 ;;
        "normalize 4 KiB f32, 1 client x 8 in flight") want=300 ;;
        "normalize 4 KiB f32, 4 clients x 8 in flight") want=1200 ;;
        "normalize f32 sum, n = 100000, 4 clients x 2 in flight, shm") want=16 ;;
        "normalize f32 "* | haversine* | pairwise* | grid* | knn*) want=3 ;;
        *)
            fail "refuse: unexpected row '$what'"
            continue
            ;;
        esac
        [[ $errors == "$want" ]] || fail "refuse: $what: $errors errors, want $want"
        if [[ $want != 0 ]]; then
            [[ $ours == n/a && $ratio == n/a ]] ||
                fail "refuse: $what: figure '$ours', ratio '$ratio' from failed requests"
        fi
    done < <(rows "$OUTPUT")
    grep -qE '^bench: [1-9][0-9]* errors in 18 of 19 rows$' "$OUTPUT" || fail "refuse: no error total"
    grep -q 'too_large' "$T/refuse.err" || fail "refuse: the error reply is not shown"
    # the daemon still serves
    run_bench refuse_after --socket "$SOCK"
    [[ $(rows "$OUTPUT" | head -1 | cut -d'|' -f5) == 0 ]] || fail "refuse: ping failed afterwards"
    stop_daemon
fi

# 3. no daemon
run_bench nodaemon --socket "$T/none.sock"
[[ $RC -eq 1 ]] || fail "nodaemon: exit $RC, want 1"
while IFS='|' read -r what ours peer ratio errors; do
    [[ $errors =~ ^[1-9][0-9]*$ && $ours == n/a ]] || fail "nodaemon: $what: '$ours', $errors errors"
done < <(rows "$OUTPUT")
grep -qE '^bench: [1-9][0-9]* errors in 19 of 19 rows$' "$OUTPUT" || fail "nodaemon: no error total"

# 4. clients refused at connect
if start_daemon sessions --max-sessions 2; then
    run_bench sessions --socket "$SOCK"
    [[ $RC -eq 1 ]] || fail "sessions: exit $RC, want 1"
    line=$(rows "$OUTPUT" | grep '^normalize 4 KiB f32, 4 clients')
    e=$(cut -d'|' -f5 <<<"$line")
    # One session is the benchmark's own, so at most one client is in at a
    # time; but a client that finished (300 requests: a few ms) frees its
    # session, and on a loaded machine a sibling that connects only then is
    # let in too. So: whole refused clients (multiples of 300), at least one.
    [[ $e =~ ^[0-9]+$ && $e -ge 300 && $e -le 1200 && $((e % 300)) -eq 0 ]] ||
        fail "sessions: 4 clients: $e errors, want 300, 600, 900 or 1200 (whole refused clients)"
    e1=$(rows "$OUTPUT" | grep '^normalize 4 KiB f32, 1 client' | cut -d'|' -f5)
    [[ $e1 == 0 ]] || fail "sessions: 1 client: $e1 errors, want 0"
    stop_daemon
fi

if [[ $fails -ne 0 ]]; then
    echo "test_bench: $fails failures"
    exit 1
fi
echo "test_bench: ok"
