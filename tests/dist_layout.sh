#!/usr/bin/env bash
# dist_layout: the shape that keeps data parallelism one policy over
# engines (train/dp.h, train/comm_engine.h), checked on the sources:
#   - the policy's environment knobs are read in train/dp.c only;
#   - the launcher's variables are read in train/launch_env.c only;
#   - the dispatcher train/comm.c has no preprocessor conditional, and no
#     train source tests for a communicator library (MKS_HAVE_MPI/NCCL);
#   - <mpi.h> is included by train/comm_mpi.c only, <nccl.h> by
#     train/comm_nccl.cu only (an engine's library stays in its file).
# usage: dist_layout.sh SOURCE_DIR
set -u
SRC=${1:?usage: dist_layout.sh SOURCE_DIR}
cd "$SRC" || exit 1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
srcs=$(ls train/*.c train/*.h train/*.cu train/*.in 2>/dev/null)
only() { # only FILE REGEX WHAT: REGEX matches in FILE and no other train source
    local hits
    hits=$(grep -lE "$2" $srcs | sort -u | tr '\n' ' ')
    [ "$hits" = "$1 " ] || bad "$3: found in '${hits}', want only $1"
}
only train/dp.c 'getenv\("MKS_(DP_BUCKET_MB|GPU_OVERLAP|GPU_NCCL|DP_STATS)"' "the data-parallel knobs"
only train/launch_env.c '"(OMPI_COMM_WORLD_RANK|PMI_RANK|PMIX_RANK|SLURM_PROCID|MPI_LOCALRANKID)"' \
    "the launcher's variables"
only train/comm_mpi.c '#[[:space:]]*include[[:space:]]*<mpi\.h>' "<mpi.h>"
only train/comm_nccl.cu '#[[:space:]]*include[[:space:]]*<nccl\.h>' "<nccl.h>"
grep -nE '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)' train/comm.c && bad "train/comm.c has a conditional"
grep -nE 'MKS_HAVE_(MPI|NCCL)' $srcs && bad "a train source tests for a communicator library"
[ $fail = 0 ] && echo "dist_layout: ok"
exit $fail
