/* launch_env.c - the launcher's environment (launch_env.h). */
#include "launch_env.h"

#include "mks_common.h"

#include <stdlib.h>

#define RANK_MAX (1u << 30) /* no launch has more ranks; keeps every value an int */

/* The launcher's number NAME (mc_env_uint, the one parser part_env.c uses
 * too), else -1: unset and malformed both mean "not launched this way". */
static int env_int(const char *name) {
    uint64_t v;
    return mc_env_uint(name, RANK_MAX, &v) == 1 ? (int)v : -1;
}

/* The first number of a Slurm tasks-per-node list ("4(x2),3" -> 4), else -1. */
static int env_first_int(const char *name) {
    uint64_t v;
    return mc_env_first_uint(name, RANK_MAX, &v) == 1 ? (int)v : -1;
}

/* The tasks of this Slurm step (a batch script's allocation when no step). */
static int slurm_world(void) {
    int n = env_int("SLURM_STEP_NUM_TASKS");
    return n >= 0 ? n : env_int("SLURM_NTASKS");
}

void tr_launch_env_read(tr_launch_env *e) {
    e->source = "none";
    e->rank = e->world = e->local_rank = e->local_size = -1;
    int sworld = slurm_world();
    int slsize = env_first_int("SLURM_STEP_TASKS_PER_NODE");
    if (slsize < 0) slsize = env_first_int("SLURM_NTASKS_PER_NODE");
    if (env_int("OMPI_COMM_WORLD_RANK") >= 0) {
        e->source = "openmpi";
        e->rank = env_int("OMPI_COMM_WORLD_RANK");
        e->world = env_int("OMPI_COMM_WORLD_SIZE");
        e->local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
        e->local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    } else if (env_int("PMI_RANK") >= 0) {
        e->source = "pmi";
        e->rank = env_int("PMI_RANK");
        e->world = env_int("PMI_SIZE");
    } else if (env_int("PMIX_RANK") >= 0) {
        e->source = "pmix";
        e->rank = env_int("PMIX_RANK");
        e->world = sworld;
    } else if (env_int("SLURM_PROCID") >= 0) {
        e->source = "slurm";
        e->rank = env_int("SLURM_PROCID");
        e->world = sworld;
    }
    if (e->local_rank < 0) {
        e->local_rank = env_int("MPI_LOCALRANKID");
        e->local_size = env_int("MPI_LOCALNRANKS");
    }
    if (e->local_rank < 0) {
        e->local_rank = env_int("SLURM_LOCALID");
        e->local_size = slsize;
    }
    if (e->local_rank < 0) e->local_size = -1;
}

int tr_launch_detected(void) {
    /* variables MPI_Init reads whatever their value: present is enough */
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
                                        "MPI_LOCALNRANKS",      NULL};
    for (const char *const *n = names; *n; n++) {
        const char *v = getenv(*n);
        if (v && *v) return 1;
    }
    return env_int("SLURM_PROCID") >= 0 && slurm_world() > 1;
}
