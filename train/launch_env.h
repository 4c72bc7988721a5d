/* launch_env.h - what the launcher's environment says about this process
 * (internal header of the train module): the one place that reads the
 * variables mpirun / mpiexec / srun set, for the communicator (which engine
 * auto picks, the world the launcher started, the local rank when MPI
 * cannot tell) and the GPU backend (which GPU a rank takes). Plain C, no
 * dependency: it reads getenv only.
 *
 * The families, first match wins for rank and world:
 *   OpenMPI  OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
 *   MPICH (Hydra), Intel MPI, srun --mpi=pmi2
 *            PMI_RANK / PMI_SIZE, MPI_LOCALRANKID / MPI_LOCALNRANKS
 *   PMIx     PMIX_RANK (world and local from the others when present)
 *   Slurm    SLURM_PROCID / SLURM_STEP_NUM_TASKS (or SLURM_NTASKS),
 *            SLURM_LOCALID / SLURM_STEP_TASKS_PER_NODE's first number
 *            (or SLURM_NTASKS_PER_NODE)
 * Local rank and size are taken from whichever family sets them (MPICH's
 * MPI_LOCALRANKID, then Slurm's SLURM_LOCALID) when the rank's family has
 * none. Numbers are plain non-negative decimals up to 2^30; anything else
 * counts as unset. */
#ifndef TR_LAUNCH_ENV_H
#define TR_LAUNCH_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

/* Fields are -1 when unknown. source: "openmpi", "pmi", "pmix", "slurm" or
 * "none". */
typedef struct {
    const char *source;
    int rank, world, local_rank, local_size;
} tr_launch_env;
void tr_launch_env_read(tr_launch_env *out);

/* 1 when the process was started by an MPI / PMI launcher, i.e. when
 * MPI_Init would join a launched world: a variable that MPI_Init itself
 * reads is set (OMPI_COMM_WORLD_SIZE, PMI_RANK, PMI_SIZE, PMIX_RANK,
 * MPI_LOCALNRANKS; any value, even one tr_launch_env_read finds malformed),
 * or a Slurm step of more than one task (SLURM_PROCID with
 * SLURM_STEP_NUM_TASKS or SLURM_NTASKS > 1; a batch script's single task is
 * not a launch). */
int tr_launch_detected(void);

#ifdef __cplusplus
}
#endif
#endif
