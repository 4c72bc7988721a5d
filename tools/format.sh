#!/usr/bin/env bash
# One style for the project's C, C++ and CUDA sources (.clang-format at the root).
#   tools/format.sh            rewrite every tracked source in place
#   tools/format.sh --check    list the files that differ from the style; exit 1 if any do
#   tools/format.sh FILE...    rewrite just these (C, C++ and CUDA sources only; others are left alone)
# Generated files (their generator owns their layout) are left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not found (apt-get install clang-format)" >&2; exit 2; }
generated='^tokenizer/(ucd_categories\.[ch]|ucd_scripts\.c|hf_ucd_data\.c)$'
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
if [ $# -gt 0 ]; then
    # only the sources .clang-format is for: clang-format rewrites any file it is given (a Python
    # script passed by mistake came back mangled)
    files=()
    for f in "$@"; do
        case "$f" in
        *.c | *.h | *.cu | *.cuh | *.cpp | *.cc) files+=("$f") ;;
        *) echo "format.sh: $f is not a C/C++/CUDA source: left alone" >&2 ;;
        esac
    done
    [ ${#files[@]} -gt 0 ] || exit 0
else
    mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' '*.cc' | grep -Ev "$generated")
fi
if [ $check = 0 ]; then clang-format -i --style=file "${files[@]}"; exit 0; fi
bad=0
for f in "${files[@]}"; do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then echo "needs format: $f"; bad=1; fi
done
[ $bad = 0 ] && echo "format.sh: ${#files[@]} files in style"
exit $bad
