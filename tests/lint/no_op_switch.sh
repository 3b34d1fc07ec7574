#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# no_op_switch.sh - ops are described once, in ops/ (see ops/op_list.h):
# outside ops/, no code in server/ proto/ client/ kernels/, bench/ or the
# tests' helpers may switch over ops ("case GPUQ_OP_") or compare with a
# compute op ("== GPUQ_OP_NORMALIZE" ...), and no source file there or in
# ops/ may exceed 800 lines. The tests' helpers are every file of tests/
# but the suites themselves (test_*.c; for the op rule, also the fuzz
# targets).
# Allowed exceptions are listed here, by file, with why.
# Usage: no_op_switch.sh [SOURCE_ROOT]
root=${1:-$(dirname "$0")/../..}
cd "$root" || exit 2
# No exceptions: the server's control-op handlers are a table indexed by op
# (server/request/control.c), not a switch.
allow_case='^$'
# The compute ops: every ops/<name>.c but the shared files and control.c.
compute=$(ls ops/*.c | sed -E 's#ops/##; s#\.c$##' | grep -vE '^(op_.*|control)$' |
          tr 'a-z' 'A-Z' | paste -sd'|')
[ -n "$compute" ] || { echo "no_op_switch: no op files in ops/"; exit 2; }
# Files allowed over 800 lines: none.
allow_long='^$'
fail=0
# bench/ and the tests' helpers too; not the tests themselves (test_*.c, and
# the fuzz targets, which build each op's inputs from the fuzzer's bytes).
helpers=$(find bench tests -name '*.c' -o -name '*.h' | grep -v '/test_[^/]*\.c$' |
          xargs grep -L 'LLVMFuzzerTestOneInput' 2>/dev/null)
# shellcheck disable=SC2086 # helpers is a list of paths without spaces
hits=$(grep -rnE 'case[[:space:]]+GPUQ_OP_' server proto client kernels $helpers 2>/dev/null |
       grep -vE "$allow_case")
# shellcheck disable=SC2086
hits="$hits
$(grep -rnE '[!=]=[[:space:]]*GPUQ_OP_('"$compute"')\b|GPUQ_OP_('"$compute"')[[:space:]]*[!=]=' \
       server proto client kernels $helpers 2>/dev/null)"
hits=$(printf '%s\n' "$hits" | sed '/^$/d')
if [ -n "$hits" ]; then
    echo "no_op_switch: op switches or compute-op comparisons outside ops/ (use the op table):"
    printf '%s\n' "$hits"
    fail=1
fi
for f in $(find server proto client kernels ops bench tests \
             \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.py' -o -name '*.sh' \) \
             ! -path 'tests/*/test_*.c' ! -path 'tests/test_*.c'); do
    printf '%s\n' "$f" | grep -qE "$allow_long" && continue
    n=$(wc -l < "$f")
    if [ "$n" -gt 800 ]; then
        echo "no_op_switch: $f has $n lines (> 800): split it"
        fail=1
    fi
done
[ "$fail" -eq 0 ] && echo "no_op_switch: ok"
exit $fail
