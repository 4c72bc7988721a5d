#!/usr/bin/env bash
# tests/gpu/pack_deps.sh - run HERE (not on the GPU machine) before a device call:
# packs the headers, static libraries and pkg-config files of the project's C
# dependencies (utf8proc, zstd, jansson, xxhash, nettle) into tmp/gpu-deps/, an
# ignored path to name in the device tool's `carry`. tests/gpu/run.sh uses it
# when the GPU machine's image lacks those -dev packages (static libraries: no
# LD_LIBRARY_PATH needed there). Also copies GPT-2's vocabulary to tmp/vocab/.
#
#   bash tests/gpu/pack_deps.sh      then carry ["tmp/gpu-deps", "tmp/vocab"]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=tmp/gpu-deps
rm -rf "$OUT"
mkdir -p "$OUT/include" "$OUT/lib/pkgconfig"
for m in libutf8proc libzstd jansson libxxhash nettle; do
    pkg-config --exists "$m" || { echo "pack_deps: pkg-config does not know $m here" >&2; exit 2; }
    lib=$(pkg-config --libs-only-l "$m" | sed 's/^ *-l//; s/ .*//')
    a=$(gcc -print-file-name="lib$lib.a")
    [ -f "$a" ] || { echo "pack_deps: no static lib$lib.a here" >&2; exit 2; }
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
done
inc=$(pkg-config --variable=includedir libzstd)
for h in utf8proc.h jansson.h jansson_config.h zstd.h zstd_errors.h zdict.h xxhash.h xxh3.h; do
    [ -f "$inc/$h" ] && cp "$inc/$h" "$OUT/include/"
done
[ -f "$inc/xxh_x86dispatch.h" ] && cp "$inc/xxh_x86dispatch.h" "$OUT/include/"
cp -r "$(pkg-config --variable=includedir nettle)/nettle" "$OUT/include/"
du -sh "$OUT"
if [ -f ../shared/vocab/gpt2.tiktoken ]; then
    mkdir -p tmp/vocab
    cp ../shared/vocab/gpt2.tiktoken tmp/vocab/
    echo "pack_deps: tmp/vocab/gpt2.tiktoken"
fi
echo "pack_deps: carry [\"tmp/gpu-deps\", \"tmp/vocab\"]"
