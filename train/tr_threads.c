/* tr_threads.c - the bound on the OpenMP runtime's thread count (tr.h:
 * tr_threads_bound). In tr, not tr_plan: it calls into OpenMP's runtime. */
#include "tr.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* libgomp reads OMP_NUM_THREADS when it is loaded, before main, but starts no
 * thread until the first parallel region, where it allocates per-thread
 * start data on the caller's stack: OMP_NUM_THREADS=100000 overflowed it in
 * GOMP_parallel (SIGSEGV, issue 32). Lowering the calling thread's
 * nthreads-var before that region is enough; the trainer's parallel regions
 * all run on the thread that calls tr_train (the loader and communication
 * threads run none). */
int tr_threads_bound(void) {
#ifdef _OPENMP
    int n = omp_get_max_threads();
    if (n >= 1 && n <= TR_MAX_THREADS) return n;
    n = tr_threads_default(NULL);
    omp_set_num_threads(n);
    return n;
#else
    return 1;
#endif
}
