/* comm_single.c - the communicator's dispatch, its arithmetic (shards, rank
 * order folds, buffer sizes) and the world-1 engine (see comm.h). The MPI
 * engine is train/comm_mpi.c. */
#include "comm_internal.h"

#include "tr.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env_any(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* A non-negative decimal int from the environment, else -1. */
static int env_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > (1L << 30))
        return -1;
    return (int)x;
}

/* The first number of a Slurm tasks-per-node list ("4(x2),3" -> 4). */
static int env_first_int(const char *name)
{
    const char *v = getenv(name);
    if (!v || *v < '0' || *v > '9')
        return -1;
    char *end;
    long x = strtol(v, &end, 10);
    if ((*end && *end != '(' && *end != ',') || x < 0 || x > (1L << 30))
        return -1;
    return (int)x;
}

void tr_comm_env_read(tr_comm_env *e)
{
    e->source = "none";
    e->rank = e->world = e->local_rank = e->local_size = -1;
    int slurm_world = env_int("SLURM_STEP_NUM_TASKS");
    if (slurm_world < 0)
        slurm_world = env_int("SLURM_NTASKS");
    int slurm_lsize = env_first_int("SLURM_STEP_TASKS_PER_NODE");
    if (slurm_lsize < 0)
        slurm_lsize = env_first_int("SLURM_NTASKS_PER_NODE");
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
        e->world = slurm_world;
    } else if (env_int("SLURM_PROCID") >= 0) {
        e->source = "slurm";
        e->rank = env_int("SLURM_PROCID");
        e->world = slurm_world;
    }
    if (e->local_rank < 0) {
        e->local_rank = env_int("MPI_LOCALRANKID");
        e->local_size = env_int("MPI_LOCALNRANKS");
    }
    if (e->local_rank < 0) {
        e->local_rank = env_int("SLURM_LOCALID");
        e->local_size = slurm_lsize;
    }
    if (e->local_rank < 0)
        e->local_size = -1;
}

int tr_comm_launched(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "PMIX_RANK",
                                        "MPI_LOCALNRANKS", NULL};
    if (env_any(names))
        return 1;
    int n = env_int("SLURM_STEP_NUM_TASKS");
    if (n < 0)
        n = env_int("SLURM_NTASKS");
    return env_int("SLURM_PROCID") >= 0 && n > 1;
}

int tr_comm_have_mpi(void)
{
#ifdef MKS_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

/* The environment's deadline, or 60 s. */
static double env_timeout(void)
{
    const char *v = getenv("MKS_COMM_TIMEOUT");
    if (v && *v) {
        char *end;
        double t = strtod(v, &end);
        if (*end == 0 && isfinite(t) && t > 0 && t <= 1e7)
            return t;
    }
    return 60.0;
}

static int alloc_scratch(tr_comm *c, size_t bucket)
{
    if (c->world > 1) {
        if (bucket > (size_t)1 << 28)
            return TR_ERR_ARG;
        float *s = malloc(bucket * sizeof(float));
        if (!s)
            return TR_ERR_NOMEM;
        free(c->scratch);
        c->scratch = s;
    }
    c->bucket = bucket;
    return TR_OK;
}

int tr_comm_open(int kind, tr_comm **out, char *err, size_t errlen)
{
    *out = NULL;
    if (errlen)
        err[0] = 0;
    if (kind == TR_COMM_AUTO)
        kind = tr_comm_have_mpi() && tr_comm_launched() ? TR_COMM_MPI : TR_COMM_SINGLE;
    if (kind != TR_COMM_SINGLE && kind != TR_COMM_MPI) {
        snprintf(err, errlen, "unknown communicator kind %d", kind);
        return TR_ERR_ARG;
    }
#ifndef MKS_HAVE_MPI
    if (kind == TR_COMM_MPI) {
        snprintf(err, errlen, "this build has no MPI (configure with MPI installed, e.g. Debian's libopenmpi-dev)");
        return TR_ERR_ARG;
    }
#endif
    tr_comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return TR_ERR_NOMEM;
    }
    c->kind = kind;
    c->world = c->local_size = 1;
    c->serialized = 1;
    c->timeout = env_timeout();
#ifdef MKS_HAVE_MPI
    if (kind == TR_COMM_MPI) {
        /* the launcher's word, before MPI_Init adds its own variables (a
         * singleton OpenMPI sets PMIX_RANK) */
        tr_comm_env e;
        tr_comm_env_read(&e);
        int rc = tr_comm_mpi_open(c, err, errlen);
        if (rc) {
            free(c);
            return rc;
        }
        /* a launcher this MPI does not speak to (srun without the PMI plugin
         * OpenMPI was built with, another MPI's mpiexec) leaves every
         * process a world of its own: N copies of one run, not one run */
        if (e.world > 1 && e.world != c->world) {
            snprintf(err, errlen,
                     "the launcher (%s environment) started %d processes but MPI sees a world of %d: this MPI library "
                     "does not understand the launcher (srun: pass --mpi=pmix or --mpi=pmi2, whichever this MPI was "
                     "built with, see srun --mpi=list; or use this MPI's own mpirun)",
                     e.source, e.world, c->world);
            tr_comm_close(c);
            return TR_ERR_ARG;
        }
    }
#endif
    int rc = alloc_scratch(c, TR_COMM_DEFAULT_BUCKET);
    if (rc) {
        snprintf(err, errlen, "cannot allocate the communication buffer (%zu bytes)",
                 TR_COMM_DEFAULT_BUCKET * sizeof(float));
        tr_comm_close(c);
        return rc;
    }
    *out = c;
    return TR_OK;
}

void tr_comm_close(tr_comm *c)
{
    if (!c)
        return;
#ifdef MKS_HAVE_MPI
    if (c->kind == TR_COMM_MPI)
        tr_comm_mpi_close(c);
#endif
    free(c->scratch);
    free(c);
}

void tr_comm_abort(tr_comm *c, int code)
{
#ifdef MKS_HAVE_MPI
    if (c && c->kind == TR_COMM_MPI)
        tr_comm_mpi_abort(c, code);
#else
    (void)c;
    (void)code;
#endif
}

int tr_comm_exit_agree(tr_comm *c, int code, double timeout_s)
{
#ifdef MKS_HAVE_MPI
    if (c && c->kind == TR_COMM_MPI)
        return tr_comm_mpi_exit_agree(c, code, timeout_s);
#endif
    (void)c;
    (void)timeout_s;
    return code;
}

int tr_comm_kind(const tr_comm *c) { return c->kind; }
const char *tr_comm_kind_name(const tr_comm *c) { return c->kind == TR_COMM_MPI ? "mpi" : "single"; }
int tr_comm_rank(const tr_comm *c) { return c->rank; }
int tr_comm_world(const tr_comm *c) { return c->world; }
int tr_comm_local_rank(const tr_comm *c) { return c->local_rank; }
int tr_comm_local_size(const tr_comm *c) { return c->local_size; }
int tr_comm_serialized(const tr_comm *c) { return c->serialized; }
const char *tr_comm_error(const tr_comm *c) { return c->err; }
double tr_comm_timeout(const tr_comm *c) { return c->timeout; }

void tr_comm_set_timeout(tr_comm *c, double seconds)
{
    if (isfinite(seconds) && seconds > 0)
        c->timeout = seconds;
}

int tr_comm_set_bucket(tr_comm *c, size_t elems)
{
    if (elems < (size_t)c->world || elems < 1) {
        snprintf(c->err, sizeof c->err, "bucket of %zu elements is smaller than the world (%d)", elems, c->world);
        return TR_ERR_ARG;
    }
    int rc = alloc_scratch(c, elems);
    if (rc)
        snprintf(c->err, sizeof c->err, "cannot allocate a %zu-element communication buffer", elems);
    return rc;
}

int tr_comm_allreduce_f32(tr_comm *c, float *buf, size_t n)
{
    c->err[0] = 0;
    if (c->world == 1 || n == 0)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_reduce_scatter(c, buf, n, 0, 1);
#else
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_reduce_scatter_units_f32(tr_comm *c, float *buf, size_t n, size_t unit)
{
    c->err[0] = 0;
    if (c->world == 1 || n == 0)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_reduce_scatter(c, buf, n, unit, 0);
#else
    (void)unit;
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_allgather_units_f32(tr_comm *c, float *buf, size_t n, size_t unit)
{
    c->err[0] = 0;
    if (c->world == 1 || n == 0)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_allgather(c, buf, n, unit);
#else
    (void)unit;
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_allreduce_range_f32(tr_comm *c, float *buf, size_t a, size_t b)
{
    c->err[0] = 0;
    if (c->world == 1 || a >= b)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_reduce_range(c, buf, b, 0, a, b, 1);
#else
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_reduce_scatter_units_range_f32(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b)
{
    c->err[0] = 0;
    if (b > n || a > b) {
        snprintf(c->err, sizeof c->err, "range [%zu, %zu) of %zu elements", a, b, n);
        return TR_ERR_ARG;
    }
    if (c->world == 1 || a == b)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_reduce_range(c, buf, n, unit, a, b, 0);
#else
    (void)unit;
    return TR_ERR_INTERNAL;
#endif
}

static int p2p(tr_comm *c, int is_send, float *buf, size_t n, int peer)
{
    c->err[0] = 0;
    if (peer < 0 || peer >= c->world || peer == c->rank) {
        snprintf(c->err, sizeof c->err, "point-to-point with rank %d (world %d, this rank %d)", peer, c->world,
                 c->rank);
        return TR_ERR_ARG;
    }
    if (n == 0)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_p2p(c, is_send, buf, n, peer);
#else
    (void)is_send;
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_send_f32(tr_comm *c, const float *buf, size_t n, int peer)
{
    return p2p(c, 1, (float *)(uintptr_t)buf, n, peer);
}

int tr_comm_recv_f32(tr_comm *c, float *buf, size_t n, int peer) { return p2p(c, 0, buf, n, peer); }

int tr_comm_reduce_scatter_f32(tr_comm *c, float *buf, size_t n)
{
    return tr_comm_reduce_scatter_units_f32(c, buf, n, 0);
}

int tr_comm_allgather_f32(tr_comm *c, float *buf, size_t n)
{
    return tr_comm_allgather_units_f32(c, buf, n, 0);
}

int tr_comm_allgather_bytes(tr_comm *c, const void *mine, void *all, size_t bytes)
{
    c->err[0] = 0;
    if (bytes > 65536 || (bytes && (!mine || !all))) {
        snprintf(c->err, sizeof c->err, "allgather of %zu bytes (limit 65536)", bytes);
        return TR_ERR_ARG;
    }
    if (c->world == 1) {
        if (bytes)
            memmove(all, mine, bytes);
        return TR_OK;
    }
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_allgather_bytes(c, mine, all, bytes, "allgather");
#else
    return TR_ERR_INTERNAL;
#endif
}

/* Small folds: every rank gathers everyone's values and folds them in rank
 * order, so every rank computes the same bits. */
enum { SMALL_MAX = 4096 };

#ifdef MKS_HAVE_MPI
/* The world's copies of a small array go to the communication buffer (no
 * allocation during training); NULL when they do not fit. */
static void *small_buffer(tr_comm *c, size_t bytes)
{
    if (bytes > c->bucket * sizeof(float) / (size_t)c->world) {
        snprintf(c->err, sizeof c->err, "small reduction of %zu bytes x %d ranks over the %zu-byte buffer", bytes,
                 c->world, c->bucket * sizeof(float));
        return NULL;
    }
    return c->scratch;
}
#endif

int tr_comm_allreduce_f64(tr_comm *c, double *buf, size_t n)
{
    c->err[0] = 0;
    if (c->world == 1 || n == 0)
        return TR_OK;
    if (n > SMALL_MAX) {
        snprintf(c->err, sizeof c->err, "allreduce_f64 of %zu values (limit %d)", n, SMALL_MAX);
        return TR_ERR_ARG;
    }
#ifdef MKS_HAVE_MPI
    double *all = small_buffer(c, n * sizeof(double));
    if (!all)
        return TR_ERR_ARG;
    int rc = tr_comm_mpi_allgather_bytes(c, buf, all, n * sizeof(double), "allreduce(f64)");
    if (!rc)
        for (size_t i = 0; i < n; i++) {
            double s = all[i];
            for (int r = 1; r < c->world; r++)
                s += all[(size_t)r * n + i];
            buf[i] = s;
        }
    return rc;
#else
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_allreduce_u64(tr_comm *c, uint64_t *buf, size_t n)
{
    c->err[0] = 0;
    if (c->world == 1 || n == 0)
        return TR_OK;
    if (n > SMALL_MAX) {
        snprintf(c->err, sizeof c->err, "allreduce_u64 of %zu values (limit %d)", n, SMALL_MAX);
        return TR_ERR_ARG;
    }
#ifdef MKS_HAVE_MPI
    uint64_t *all = small_buffer(c, n * sizeof(uint64_t));
    if (!all)
        return TR_ERR_ARG;
    int rc = tr_comm_mpi_allgather_bytes(c, buf, all, n * sizeof(uint64_t), "allreduce(u64)");
    if (!rc)
        for (size_t i = 0; i < n; i++) {
            uint64_t s = 0;
            for (int r = 0; r < c->world; r++)
                s += all[(size_t)r * n + i];
            buf[i] = s;
        }
    return rc;
#else
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_bcast(tr_comm *c, void *buf, size_t bytes, int root)
{
    c->err[0] = 0;
    if (root < 0 || root >= c->world) {
        snprintf(c->err, sizeof c->err, "broadcast from rank %d of a world of %d", root, c->world);
        return TR_ERR_ARG;
    }
    if (c->world == 1 || bytes == 0)
        return TR_OK;
    if (!buf)
        return TR_ERR_ARG;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_bcast(c, buf, bytes, root);
#else
    return TR_ERR_INTERNAL;
#endif
}

int tr_comm_barrier(tr_comm *c)
{
    c->err[0] = 0;
    if (c->world == 1)
        return TR_OK;
#ifdef MKS_HAVE_MPI
    return tr_comm_mpi_allgather_bytes(c, NULL, NULL, 0, "barrier");
#else
    return TR_ERR_INTERNAL;
#endif
}
