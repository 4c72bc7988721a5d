/* test_dist_part: ds_part_from_env (`mkshards build --part auto`) - the part
 * K/N from mpirun, PMI, srun and Slurm job-array variables, their
 * combination, and the refusals (no launcher, malformed, sparse array). */
#include "ds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static const char *const vars[] = {"OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_SIZE",
                                   "PMI_RANK",
                                   "PMI_SIZE",
                                   "SLURM_PROCID",
                                   "SLURM_STEP_NUM_TASKS",
                                   "SLURM_ARRAY_TASK_ID",
                                   "SLURM_ARRAY_TASK_MIN",
                                   "SLURM_ARRAY_TASK_COUNT",
                                   "SLURM_ARRAY_TASK_STEP",
                                   "PMIX_RANK",
                                   NULL};

/* env: "NAME=V NAME=V"; want_k 0: expect DS_ERR_ARG */
static void t(const char *env, unsigned want_k, unsigned want_n) {
    for (int i = 0; vars[i]; i++) unsetenv(vars[i]);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        setenv(tok, eq + 1, 1);
    }
    uint32_t k = 0, n = 0;
    char src[256], err[512];
    int rc = ds_part_from_env(&k, &n, src, sizeof src, err, sizeof err);
    int ok = want_k ? rc == DS_OK && k == want_k && n == want_n : rc == DS_ERR_ARG && err[0];
    if (!ok) failures++;
    printf("%-4s [%s] -> rc %d, %u/%u (%s)\n", ok ? "ok" : "FAIL", env, rc, k, n, rc ? err : src);
}

int main(void) {
    t("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2", 1, 2);
    t("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", 2, 2);
    t("PMI_RANK=3 PMI_SIZE=4", 4, 4);
    t("SLURM_PROCID=2 SLURM_STEP_NUM_TASKS=8", 3, 8);
    /* MPI wins over the Slurm step it runs in */
    t("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3 SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=3", 2, 3);
    /* a batch script: SLURM_PROCID without a step is not a launch */
    t("SLURM_PROCID=0", 0, 0);
    t("SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=16 SLURM_ARRAY_TASK_MIN=0 SLURM_PROCID=0", 1, 16);
    t("SLURM_ARRAY_TASK_ID=5 SLURM_ARRAY_TASK_COUNT=8 SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_STEP=1", 5, 8);
    /* array task 2 of 4, srun rank 1 of 3 inside it: part 2*3+1+1 = 8 of 12 */
    t("SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=4 SLURM_PROCID=1 SLURM_STEP_NUM_TASKS=3", 8, 12);
    t("", 0, 0);
    t("OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=2", 0, 0);
    t("OMPI_COMM_WORLD_RANK=-1 OMPI_COMM_WORLD_SIZE=2", 0, 0);
    t("OMPI_COMM_WORLD_RANK=0x1 OMPI_COMM_WORLD_SIZE=2", 0, 0);
    t("OMPI_COMM_WORLD_RANK=0", 0, 0);
    t("PMI_RANK=0 PMI_SIZE=0", 0, 0);
    t("SLURM_ARRAY_TASK_ID=4 SLURM_ARRAY_TASK_COUNT=4", 0, 0);
    t("SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=4 SLURM_ARRAY_TASK_STEP=2", 0, 0);
    t("SLURM_ARRAY_TASK_ID=1", 0, 0);
    t("PMI_RANK=0 PMI_SIZE=2000000", 0, 0);
    t("SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2000 SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1000", 0, 0);
    t("PMI_RANK=99999999999999999999 PMI_SIZE=2", 0, 0);
    /* PMIx: its rank with the size of the launcher that set it (OpenMPI, srun --mpi=pmix); alone, no size:
     * refused, also beside a job array (each rank would build the array task's same part) */
    t("PMIX_RANK=1 OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", 2, 2);
    t("PMIX_RANK=2 SLURM_PROCID=2 SLURM_STEP_NUM_TASKS=4", 3, 4);
    t("PMIX_RANK=1", 0, 0);
    t("PMIX_RANK=1 SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2", 0, 0);
    t("PMIX_RANK=1 SLURM_PROCID=1", 0, 0);
    t("PMIX_RANK=x\033[31m SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_COUNT=2", 0, 0);
    printf("test_dist_part: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
