#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/monitor_cost.sh [GPUQD [GPUQCTL]] - what watching requests costs
# (issue 31: "cost when nobody watches: none measurable"), one run.
#
# Starts a gpuqd (--device DEVICE: cpu unless set) three ways and measures small-request throughput with
# gpuqctl bench (f32 sum normalize of 64 values, 2 clients x depth 16,
# --csv) against each, the three interleaved for ROUNDS rounds so that
# drift hits each alike:
#   off      --slowlog-len 0: no record is ever built (one clock read and
#            a few compares per request);
#   idle     the defaults (slowlog_len 128, slowlog_min_us 10000), no
#            monitor: the recording machinery in place, nobody watching;
#   monitor  the defaults and one `gpuqctl monitor >/dev/null` attached:
#            every request's record built, encoded and sent.
# Prints each run's req/s, then the median of each way and the ratios
# idle/off and monitor/off. Exits 1 when a bench run fails or saw errors,
# or (MAX_IDLE_COST set, e.g. 0.05) when idle/off < 1 - MAX_IDLE_COST.
#
# Environment: ROUNDS (3), DURATION (seconds a run, 3), SIZE (64),
# CLIENTS (2), DEPTH (16), DEVICE (cpu; cuda on a GPU machine). Defaults: build/server/gpuqd, build/client/cli/gpuqctl.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
GPUQD=${1:-build/server/gpuqd}
CTL=${2:-build/client/cli/gpuqctl}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
SIZE=${SIZE:-64}
CLIENTS=${CLIENTS:-2}
DEPTH=${DEPTH:-16}
DEVICE=${DEVICE:-cpu}
for b in "$GPUQD" "$CTL"; do
    [[ -x $b ]] || { echo "monitor_cost: $b is not an executable (usage: $0 GPUQD GPUQCTL)"; exit 2; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-monitor-cost-XXXXXX")
DPID= MPID=
cleanup() {
    [[ -n $MPID ]] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
rc=0

start_daemon() { # start_daemon FLAGS...: sets DPID; socket $T/d.sock
    rm -f "$T/d.sock"
    "$GPUQD" --device "$DEVICE" --socket "$T/d.sock" --log-level warn "$@" 2>"$T/gpuqd.err" &
    DPID=$!
    for _ in $(seq 200); do [[ -S $T/d.sock ]] && return 0; sleep 0.05; done
    echo "monitor_cost: gpuqd $* did not start: $(cat "$T/gpuqd.err")"
    exit 1
}

stop_daemon() {
    kill "$DPID"
    wait "$DPID" || { echo "monitor_cost: gpuqd exited with status $?"; rc=1; }
    DPID=
}

# One measurement against the daemon now running: prints req/s.
measure() { # measure NAME
    local out=$T/$1.csv
    if ! "$CTL" --socket "$T/d.sock" bench --op normalize --size "$SIZE" --clients "$CLIENTS" \
        --depth "$DEPTH" --duration "$DURATION" --warmup 0.5 --csv >"$out" 2>"$T/$1.err"; then
        echo "monitor_cost: bench ($1) failed: $(head -3 "$T/$1.err")" >&2
        rc=1
        echo 0
        return
    fi
    # header: concurrency,clients,depth,requests,req_s,...,errors,bytes_s
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
             { if ($col["errors"] != 0) bad = 1; print $col["req_s"] }
             END { exit bad }' "$out" || { echo "monitor_cost: bench ($1) saw errors" >&2; rc=1; }
}

declare -A runs=([off]="" [idle]="" [monitor]="")
printf '%-8s %6s %12s\n' way round req_s
for r in $(seq "$ROUNDS"); do
    for way in off idle monitor; do
        case $way in
            off) start_daemon --slowlog-len 0 ;;
            *) start_daemon ;;
        esac
        if [[ $way == monitor ]]; then
            "$CTL" --socket "$T/d.sock" monitor >/dev/null 2>"$T/monitor.err" &
            MPID=$!
            sleep 0.3
            kill -0 "$MPID" 2>/dev/null || { echo "monitor_cost: gpuqctl monitor died: $(cat "$T/monitor.err")"; exit 1; }
        fi
        v=$(measure "$way-$r")
        if [[ -n $MPID ]]; then
            kill -INT "$MPID"
            wait "$MPID" || { echo "monitor_cost: gpuqctl monitor exited $?: $(cat "$T/monitor.err")"; rc=1; }
            MPID=
        fi
        stop_daemon
        printf '%-8s %6s %12.0f\n' "$way" "$r" "$v"
        runs[$way]+="$v "
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
off=$(median <<<"${runs[off]}")
idle=$(median <<<"${runs[idle]}")
mon=$(median <<<"${runs[monitor]}")
echo
printf 'median req/s: off %.0f, idle %.0f, monitor %.0f (%s rounds of %s s, normalize f32 %s, %s clients x depth %s, --device %s)\n' \
    "$off" "$idle" "$mon" "$ROUNDS" "$DURATION" "$SIZE" "$CLIENTS" "$DEPTH" "$DEVICE"
awk -v o="$off" -v i="$idle" -v m="$mon" 'BEGIN {
    if (o <= 0) { print "ratio: n/a (no successful run)"; exit }
    printf "ratio idle/off: %.3f   ratio monitor/off: %.3f\n", i / o, m / o }'
if [[ -n ${MAX_IDLE_COST:-} ]]; then
    awk -v o="$off" -v i="$idle" -v c="$MAX_IDLE_COST" 'BEGIN { exit !(o > 0 && i / o >= 1 - c) }' ||
        { echo "monitor_cost: idle costs more than $MAX_IDLE_COST of off's throughput"; rc=1; }
fi
exit $rc
