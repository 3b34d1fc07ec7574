# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# tests/pkg/readme_c.sh - sourced: the README's C example and its compile
# command, as a user copies them (tests/pkg/test_readme_c.sh builds them
# against a `cmake --install --prefix` tree, tests/pkg/deb_install_test.sh
# against the installed .deb).
#
# readme_c_extract README DIR: from README's "## C API" section (up to the
# next "## " heading) takes the first ```c block that has
# `#include <gpuq/gpuq.h>` and `main(`, and the first line of a ```sh block
# that starts with `cc ` and names pkg-config and gpuq (the compile
# command). Writes the program to DIR/NAME.c, NAME.c being the .c file the
# command names, and sets README_C_CMD (the command), README_C_SRC (NAME.c)
# and README_C_OUT (what its -o names). Returns 1, with a message on
# stderr, when either is missing.
readme_c_extract() {
    local readme=$1 dir=$2 tok prev=
    awk -v out="$dir/example.c" -v cmdfile="$dir/command" '
        /^## / { in_api = ($0 ~ /^## C API/) }
        !in_api { next }
        /^```/ {
            if (fence == "") {
                fence = substr($0, 4)
                buf = ""
                next
            }
            if (fence == "c" && !done_c && buf ~ /#include <gpuq\/gpuq\.h>/ && buf ~ /main\(/) {
                printf "%s", buf >out
                done_c = 1
            }
            fence = ""
            next
        }
        fence == "c" { buf = buf $0 "\n" }
        fence == "sh" && !done_cmd && /^cc / && /pkg-config/ && /gpuq/ {
            print >cmdfile
            done_cmd = 1
        }
    ' "$readme"
    if [[ ! -s "$dir/example.c" ]]; then
        echo "readme_c: $readme's C API section has no C example with main()" >&2
        return 1
    fi
    if [[ ! -s "$dir/command" ]]; then
        echo "readme_c: $readme's C API section has no compile command" \
            "(a line 'cc ... \$(pkg-config --cflags --libs gpuq)' in a sh block)" >&2
        return 1
    fi
    README_C_CMD=$(cat "$dir/command")
    README_C_SRC=
    README_C_OUT=
    read -r -a toks <<<"$README_C_CMD"
    for tok in "${toks[@]}"; do
        [[ "$prev" == -o ]] && README_C_OUT=$tok
        [[ "$tok" == *.c && -z "$README_C_SRC" ]] && README_C_SRC=$tok
        prev=$tok
    done
    if [[ -z "$README_C_SRC" || -z "$README_C_OUT" || "$README_C_SRC$README_C_OUT" == */* ]]; then
        echo "readme_c: cannot tell the source file and the -o output of: $README_C_CMD" >&2
        return 1
    fi
    mv "$dir/example.c" "$dir/$README_C_SRC"
    rm -f "$dir/command"
}
