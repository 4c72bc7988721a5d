/* part_env.c - `--part auto`: which part K of N this process builds, from
 * the launcher's environment (ds_part_from_env, ds.h). */
#include "ds.h"
#include "mks_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PART_MAX 1000000ull /* as DS_BUILD_MAX_PARTS */

/* 1: NAME is set to a plain decimal integer <= PART_MAX * PART_MAX (into
 * *v); 0: unset or empty; -1: set to something else. The parser is the
 * common layer's (launch_env.c reads the same variables with it); the policy
 * (a malformed variable is an error here, "not launched" there) is ours. */
static int env_u64(const char *name, unsigned long long *v) {
    uint64_t x = 0;
    int r = mc_env_uint(name, PART_MAX * PART_MAX, &x);
    if (r == 1) *v = x;
    return r;
}

/* A rank/size pair: 1 found (0 <= rank < size), 0 not set, -1 malformed. */
static int pair(const char *rname, const char *sname, unsigned long long *r, unsigned long long *s, char *err,
                size_t errlen) {
    int a = env_u64(rname, r), b = env_u64(sname, s);
    if (a == 0 && b == 0) return 0;
    if (a != 1 || b != 1 || *s < 1 || *r >= *s) {
        snprintf(err, errlen, "--part auto: %s=%s and %s=%s are not a rank below a size", rname,
                 getenv(rname) ? getenv(rname) : "(unset)", sname, getenv(sname) ? getenv(sname) : "(unset)");
        return -1;
    }
    return 1;
}

int ds_part_from_env(uint32_t *part_k, uint32_t *part_n, char *src, size_t srclen, char *err, size_t errlen) {
    unsigned long long r = 0, s = 1, a = 0, c = 1;
    char who[160] = "", arr[200] = "";
    if (srclen) src[0] = 0;
    if (errlen) err[0] = 0;
    /* the process's rank in its launch: MPI first, then a Slurm step */
    static const char *const ranks[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                           {"PMI_RANK", "PMI_SIZE"},
                                           {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}};
    int found = 0;
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks && !found; i++) {
        int f = pair(ranks[i][0], ranks[i][1], &r, &s, err, errlen);
        if (f < 0) {
            /* SLURM_PROCID is set in a batch script without a step: only a
             * malformed pair of the MPI variables is an error */
            if (i == 2 && !getenv("SLURM_STEP_NUM_TASKS")) {
                err[0] = 0;
                r = 0;
                s = 1;
                continue;
            }
            return DS_ERR_ARG;
        }
        if (f) {
            found = 1;
            snprintf(who, sizeof who, "%s=%llu of %s=%llu", ranks[i][0], r, ranks[i][1], s);
        }
    }
    /* PMIx (prterun, srun --mpi=pmix) puts the rank in PMIX_RANK but the job
     * size in no variable (a PMIx_Get query), so it gives no part alone; its
     * launchers that also export a size are read above (mpirun:
     * OMPI_COMM_WORLD_*, srun: SLURM_PROCID/SLURM_STEP_NUM_TASKS). A rank
     * without one must not fall through to a job array or to "no launcher"
     * unnamed: beside an array every rank would build the same part. */
    unsigned long long pr = 0;
    if (!found && env_u64("PMIX_RANK", &pr) != 0) {
        const char *v = getenv("PMIX_RANK");
        char shown[64];
        snprintf(err, errlen,
                 "--part auto: PMIX_RANK=%s is a rank without a size (PMIx exports none; mpirun's "
                 "OMPI_COMM_WORLD_RANK/SIZE or srun's SLURM_PROCID/SLURM_STEP_NUM_TASKS are read when set): "
                 "give --part K/N",
                 mc_escape_text(v, strlen(v), shown, sizeof shown));
        return DS_ERR_ARG;
    }
    /* a Slurm job array: tasks MIN .. MIN + COUNT - 1, step 1 */
    unsigned long long id = 0, mn = 0, st = 1;
    int fi = env_u64("SLURM_ARRAY_TASK_ID", &id), fc = env_u64("SLURM_ARRAY_TASK_COUNT", &c);
    if (fi || fc) {
        int fm = env_u64("SLURM_ARRAY_TASK_MIN", &mn), fs = env_u64("SLURM_ARRAY_TASK_STEP", &st);
        if (fi != 1 || fc != 1 || fm < 0 || fs < 0 || c < 1 || id < mn || (fs == 1 && st != 1) || id - mn >= c) {
            snprintf(err, errlen,
                     "--part auto: the job array (SLURM_ARRAY_TASK_ID=%s, _MIN=%s, _COUNT=%s, _STEP=%s) "
                     "is not tasks MIN..MIN+COUNT-1 in steps of 1: use --array=0-%s or --part K/N",
                     getenv("SLURM_ARRAY_TASK_ID") ? getenv("SLURM_ARRAY_TASK_ID") : "(unset)",
                     getenv("SLURM_ARRAY_TASK_MIN") ? getenv("SLURM_ARRAY_TASK_MIN") : "(unset)",
                     getenv("SLURM_ARRAY_TASK_COUNT") ? getenv("SLURM_ARRAY_TASK_COUNT") : "(unset)",
                     getenv("SLURM_ARRAY_TASK_STEP") ? getenv("SLURM_ARRAY_TASK_STEP") : "(unset)", "<N-1>");
            return DS_ERR_ARG;
        }
        a = id - mn;
        snprintf(arr, sizeof arr, "SLURM_ARRAY_TASK_ID=%llu (task %llu of SLURM_ARRAY_TASK_COUNT=%llu)", id, a + 1, c);
        found = 1;
    }
    if (!found) {
        snprintf(err, errlen,
                 "--part auto: no launcher in the environment (mpirun: OMPI_COMM_WORLD_RANK/SIZE; "
                 "MPICH or srun with PMI: PMI_RANK/PMI_SIZE; srun: SLURM_PROCID/SLURM_STEP_NUM_TASKS; "
                 "sbatch --array: SLURM_ARRAY_TASK_ID/COUNT): give --part K/N");
        return DS_ERR_ARG;
    }
    /* array task a of c, rank r of s inside it: part a*s + r of c*s */
    unsigned long long n = c * s, k = a * s + r + 1;
    if (c > PART_MAX || s > PART_MAX || n > PART_MAX) {
        snprintf(err, errlen, "--part auto: %llu parts (more than %llu)", n, PART_MAX);
        return DS_ERR_ARG;
    }
    *part_k = (uint32_t)k;
    *part_n = (uint32_t)n;
    snprintf(src, srclen, "%s%s%s", who, who[0] && arr[0] ? ", " : "", arr);
    return DS_OK;
}
