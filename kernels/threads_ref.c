/* threads_ref.c - the reference kernels' thread count: the one object of the
 * kn helpers that calls into OpenMP's runtime, apart from kn_pad_vocab
 * (util_ref.c) so that what only sizes a model (the memory planner of
 * `mkshards plan`) does not link libgomp. */
#include "kn.h"
#include "kn_internal.h"

int kn_num_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
