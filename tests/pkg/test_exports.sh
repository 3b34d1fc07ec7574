#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/pkg/test_exports.sh LIBGPUQ_SO SRC_DIR - libgpuq.so exports exactly
# the functions its installed headers declare (client/lib/gpuq.h, proto/errors.h):
# nothing internal (proto's gpuq_* helpers, gpuq_call/gpuq_submit/gpuq_wait of
# gpuq_internal.h) leaks into the ABI, and nothing declared is missing.
set -euo pipefail
so=${1:?usage: test_exports.sh LIBGPUQ_SO SRC_DIR}
src=${2:?usage: test_exports.sh LIBGPUQ_SO SRC_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuq-exports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$so" | awk '$2 ~ /^[TtWDdBbRrVviI]$/ {print $3}' | grep -v '^_' |
    sort -u >"$tmp/exported"
cat "$src/client/lib/gpuq.h" "$src/proto/errors.h" | grep -oE '\bgpuq_[a-z0-9_]+\(' | tr -d '(' |
    sort -u >"$tmp/declared"
if ! diff -u "$tmp/declared" "$tmp/exported" >"$tmp/diff"; then
    echo "FAIL: exported symbols of $so differ from the public declarations" >&2
    echo "(- declared, not exported; + exported, not declared):" >&2
    cat "$tmp/diff" >&2
    exit 1
fi
echo "test_exports: OK ($(wc -l <"$tmp/exported") functions)"
