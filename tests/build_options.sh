#!/usr/bin/env bash
# build_options.sh [ROOT] - configure and compile every documented build option
# that the other CI stages do not build (issue 32: -DMKS_NATIVE=ON did not
# compile on an AVX2 machine without AVX-512). .ci/run already builds the
# Release default (make test), MKS_SANITIZE (make asan), MKS_ENABLE_CUDA=ON
# with the default CMAKE_CUDA_ARCHITECTURES (make cuda-compile) and MKS_FUZZ
# (run_fuzz.sh); this builds the rest, each in ROOT/NAME (default
# build-options/), from scratch:
#   native   MKS_NATIVE=ON (-march=native), MKS_ENABLE_MPI=ON
#   haswell  -march=haswell: an AVX2 machine without AVX-512; MKS_STATIC_EXE=OFF
#   x86-64   -march=x86-64: the baseline (SSE2); MKS_STATIC_DEPS=OFF, MKS_ENABLE_MPI=OFF,
#            MKS_ENABLE_ISAL=OFF (gzip through zlib: its gzip tests run),
#            MKS_ENABLE_ARROW=OFF (.parquet / .arrow refused: cli_arrow checks it)
#   python   MKS_PYTHON=ON: the extension module, imported
#   presets  cmake --preset cpu / asan / cuda (configure; cuda where nvcc is)
#   cuda-arch  MKS_ENABLE_CUDA AUTO with CMAKE_CUDA_ARCHITECTURES=90 (where nvcc is;
#              configured and its compile flags checked: make cuda-compile
#              compiles every .cu for 80 and 90)
# The three -march builds compile everything (tests included) and run the
# tokenizer tests that force each SIMD level (ids identical at every level).
# Prints each stage's time. ~2 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=${1:-build-options}
J=$(nproc 2>/dev/null || echo 2)
export PATH="$PATH:/usr/local/cuda/bin"
mkdir -p "$ROOT"
summary=()
t_all=$(date +%s)

# stage NAME CMAKE_ARGS... : configure ROOT/NAME from scratch and build it all
stage() {
    local name=$1 t0 t1
    shift
    echo "== $name: cmake $*"
    t0=$(date +%s)
    rm -rf "${ROOT:?}/$name"
    cmake -S . -B "$ROOT/$name" -DCMAKE_BUILD_TYPE=Release "$@" > "$ROOT/$name.configure.log" 2>&1 ||
        { tail -30 "$ROOT/$name.configure.log"; echo "FAIL $name: configure"; exit 1; }
    cmake --build "$ROOT/$name" -j"$J" > "$ROOT/$name.build.log" 2>&1 ||
        { grep -E -m20 'error|Error' "$ROOT/$name.build.log"; echo "FAIL $name: build (log: $ROOT/$name.build.log)"; exit 1; }
    t1=$(date +%s)
    summary+=("$(printf '%-10s configure + build %4ds' "$name" $((t1 - t0)))")
}

# simd NAME: the tokenizer tests that run every SIMD level this build has
simd() {
    local t0 t1
    t0=$(date +%s)
    ctest --test-dir "$ROOT/$1" -R '^(test_bpe_chars|test_tk_parity|test_tk_pathological|test_tk_unit)$' \
        --output-on-failure -j"$J" > "$ROOT/$1.test.log" 2>&1 ||
        { tail -30 "$ROOT/$1.test.log"; echo "FAIL $1: tokenizer tests"; exit 1; }
    t1=$(date +%s)
    summary[${#summary[@]} - 1]+="$(printf ', tokenizer tests %3ds' $((t1 - t0)))"
}

stage native -DMKS_ENABLE_CUDA=OFF -DMKS_NATIVE=ON -DMKS_ENABLE_MPI=ON
simd native
stage haswell -DMKS_ENABLE_CUDA=OFF -DCMAKE_C_FLAGS=-march=haswell -DMKS_STATIC_EXE=OFF
simd haswell
grep -q "dynamic executable" "$ROOT/haswell.configure.log" || { echo "FAIL haswell: MKS_STATIC_EXE=OFF not applied"; exit 1; }
stage x86-64 -DMKS_ENABLE_CUDA=OFF -DCMAKE_C_FLAGS=-march=x86-64 -DMKS_STATIC_DEPS=OFF -DMKS_ENABLE_MPI=OFF \
    -DMKS_ENABLE_ISAL=OFF -DMKS_ENABLE_ARROW=OFF
simd x86-64
grep -q "MPI communicator OFF" "$ROOT/x86-64.configure.log" || { echo "FAIL x86-64: MKS_ENABLE_MPI=OFF not applied"; exit 1; }
# the zlib inflate (the other builds use ISA-L where make deps installed it)
grep -q "gzip inflate with ISA-L OFF" "$ROOT/x86-64.configure.log" || { echo "FAIL x86-64: MKS_ENABLE_ISAL=OFF not applied"; exit 1; }
grep -q "Parquet / Arrow IPC inputs OFF" "$ROOT/x86-64.configure.log" || { echo "FAIL x86-64: MKS_ENABLE_ARROW=OFF not applied"; exit 1; }
ctest --test-dir "$ROOT/x86-64" -R '^(test_reader_hostile|cli_gzip|test_replay_reader|cli_arrow)$' --output-on-failure \
    > "$ROOT/x86-64.gzip.log" 2>&1 || { tail -30 "$ROOT/x86-64.gzip.log"; echo "FAIL x86-64: gzip tests with zlib"; exit 1; }
stage python -DMKS_ENABLE_CUDA=OFF -DMKS_PYTHON=ON -DBUILD_TESTING=OFF
PYTHONPATH="$ROOT/python/python" python3 -c 'import mkshards, mkshards._core' ||
    { echo "FAIL python: the module does not import"; exit 1; }

# presets: configure each into ROOT (-B overrides the preset's binaryDir, so
# build/, build-asan/ and build-cuda/ of the other stages are left alone)
t0=$(date +%s)
presets="cpu asan"
command -v nvcc > /dev/null && presets+=" cuda"
for p in $presets; do
    rm -rf "${ROOT:?}/preset-$p"
    cmake --preset "$p" -B "$ROOT/preset-$p" > "$ROOT/preset-$p.log" 2>&1 ||
        { tail -20 "$ROOT/preset-$p.log"; echo "FAIL preset $p: configure"; exit 1; }
done
summary+=("$(printf '%-10s configure %ds (%s)' presets $(($(date +%s) - t0)) "$presets")")

if command -v nvcc > /dev/null; then
    # MKS_ENABLE_CUDA left at AUTO: nvcc is found, so CUDA is on. Configure
    # only: make cuda-compile (stage 3 of .ci/run) already compiles every .cu
    # for "80;90", sm_90 included, with the same flags but the arch list;
    # compiling them again for 90 alone took 198 s CPU (672 s wall on a loaded
    # 2-core machine) and could find nothing that stage does not. What only
    # this stage checks is configure-time: AUTO turns CUDA on, and a given
    # CMAKE_CUDA_ARCHITECTURES reaches the compile lines unchanged.
    t0=$(date +%s)
    rm -rf "${ROOT:?}/cuda-arch"
    cmake -S . -B "$ROOT/cuda-arch" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF \
        > "$ROOT/cuda-arch.configure.log" 2>&1 || { tail -30 "$ROOT/cuda-arch.configure.log"; echo "FAIL cuda-arch: configure"; exit 1; }
    grep -q "CUDA backend ON" "$ROOT/cuda-arch.configure.log" || { echo "FAIL cuda-arch: AUTO did not enable CUDA"; exit 1; }
    flags=$(cat "$ROOT"/cuda-arch/kernels/CMakeFiles/kn_cuda.dir/flags.make "$ROOT"/cuda-arch/train/CMakeFiles/*.dir/flags.make 2> /dev/null |
        grep '^CUDA_FLAGS' || true)
    { grep -q 'arch=compute_90,code=\[compute_90,sm_90\]' <<< "$flags" && ! grep -q 'compute_80' <<< "$flags"; } ||
        { echo "FAIL cuda-arch: CMAKE_CUDA_ARCHITECTURES=90 is not what nvcc gets: $flags" | head -c 2000; exit 1; }
    summary+=("$(printf '%-10s configure %ds (arch 90 on the compile lines; the .cu are compiled by make cuda-compile)' \
        cuda-arch $(($(date +%s) - t0)))")
else
    summary+=("cuda-arch  skipped: no nvcc")
fi

echo
printf '%s\n' "${summary[@]}"
echo "build options: all built in $(($(date +%s) - t_all))s"
