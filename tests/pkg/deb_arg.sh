# SPDX-License-Identifier: Apache-2.0
# tests/pkg/deb_arg.sh - sourced by the package tests that take a .deb:
# deb_arg NAME ARG sets deb to the absolute path of ARG, a .deb or a folder
# holding exactly one gpuq_*.deb; on anything else it prints why, as NAME,
# and exits 2.
# shellcheck shell=bash
deb_arg() {
    local name=$1 arg=$2 debs
    if [[ -d "$arg" ]]; then
        debs=("$arg"/gpuq_*.deb)
        [[ ${#debs[@]} -eq 1 && -f "${debs[0]}" ]] ||
            { echo "$name: want exactly one gpuq_*.deb in $arg" >&2; exit 2; }
        arg=${debs[0]}
    fi
    deb=$(cd "$(dirname "$arg")" && pwd)/$(basename "$arg")
    [[ -f "$deb" ]] || { echo "$name: no $deb" >&2; exit 2; }
}
