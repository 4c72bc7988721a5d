#!/usr/bin/env bash
# tools/fetch_cudnn_frontend.sh [DIR] - the cudnn-frontend C++ headers (header-only; NVIDIA's
# MIT-licensed graph API over cuDNN) into DIR/include (default tmp/cudnn-frontend), from PyPI's
# nvidia-cudnn-frontend wheel, which ships them under include/. The optional cuDNN attention
# (kernels/kn_attention_cudnn.cu, CMake MKS_CUDNN) compiles against them; `make cuda-compile`
# and tests/gpu/pack_deps.sh call this. A pinned version: the code is checked against it.
# Exit 0 with the headers in place (already there: nothing fetched), 1 when they cannot be had.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${1:-$ROOT/tmp/cudnn-frontend}
VERSION=1.32.0
[ -f "$DIR/include/cudnn_frontend.h" ] && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "nvidia-cudnn-frontend==$VERSION" \
    >"$tmp/pip.log" 2>&1; then
    echo "fetch_cudnn_frontend: cannot download nvidia-cudnn-frontend $VERSION: $(tail -1 "$tmp/pip.log")" >&2
    exit 1
fi
whl=$(ls "$tmp"/nvidia_cudnn_frontend-*.whl | head -1)
python3 - "$whl" "$DIR" <<'PY'
import os, sys, zipfile
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    if not any(n == "include/cudnn_frontend.h" for n in names):
        sys.exit("fetch_cudnn_frontend: the wheel has no include/cudnn_frontend.h")
    for n in names:
        z.extract(n, out)
print(f"fetch_cudnn_frontend: {len(names)} headers into {out}/include")
PY
