/* tr_cli_threads.c - the plan's CPU thread count where OpenMP's runtime is not
 * linked (`mkshards plan`).  Apart from tr_cli.c: <unistd.h>'s X_OK would
 * collide with tr_cli_internal.h's exit statuses. */
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

int tr_cli_default_threads(void); /* declared in tr_cli_internal.h */

/* What omp_get_max_threads() answers in a fresh process, for `mkshards plan`,
 * which does not link OpenMP's runtime (~0.15 ms of start-up in every
 * mkshards command): OMP_NUM_THREADS's first value when set, else the CPUs
 * this process may run on.  (llmtrain asks the runtime: kn_num_threads.) */
int tr_cli_default_threads(void)
{
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && *e) {
        char *end;
        long n = strtol(e, &end, 10);
        if (n > 0 && n <= 4096 && (*end == 0 || *end == ',')) return (int)n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n <= 4096 ? (int)n : 1;
}

