/* tr_cli_threads.c - the CPU kernels' thread count where OpenMP's runtime is
 * not linked (`mkshards plan`), and its bound (tr.h: TR_MAX_THREADS).  Apart
 * from tr_cli.c: <unistd.h>'s X_OK would collide with tr_cli_internal.h's
 * exit statuses. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tr.h"

int tr_cli_threads(const char *prog); /* declared in tr_cli_internal.h */

/* The CPUs this process may run on, at most TR_MAX_THREADS: what OpenMP's
 * runtime takes when OMP_NUM_THREADS is unset. */
static int cpus(void) {
    cpu_set_t set;
    long n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
    return n <= 0 ? 1 : n > TR_MAX_THREADS ? TR_MAX_THREADS : (int)n;
}

/* What omp_get_max_threads() answers in a fresh process once tr_threads_bound
 * has run, for `mkshards plan`, which does not link OpenMP's runtime (~0.15 ms
 * of start-up in every mkshards command): OMP_NUM_THREADS's first value when
 * it is 1..TR_MAX_THREADS, else the CPUs (as the runtime does for a value it
 * cannot read, and as tr_threads_bound does above the bound). */
int tr_threads_default(long *over) {
    if (over) *over = 0;
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && *e) {
        char *end;
        errno = 0;
        long n = strtol(e, &end, 10);
        int whole = end != e && (*end == 0 || *end == ',');
        if (whole && n > 0 && n <= TR_MAX_THREADS && errno == 0) return (int)n;
        if (whole && n > TR_MAX_THREADS && over) *over = n; /* LONG_MAX when it overflowed */
    }
    return cpus();
}

/* The thread count of a command line, with a warning on stderr when
 * OMP_NUM_THREADS asked for more than TR_MAX_THREADS. */
int tr_cli_threads(const char *prog) {
    long over;
    int n = tr_threads_default(&over);
    if (over)
        fprintf(stderr,
                "%s: warning: OMP_NUM_THREADS=%ld is above %d threads: using %d (the CPUs this process may "
                "run on)\n",
                prog, over, TR_MAX_THREADS, n);
    return n;
}
