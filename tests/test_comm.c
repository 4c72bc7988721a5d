/* test_comm: the data-parallel communicator (train/comm.h).
 *
 * Run alone (world 1: every collective is the identity) or under
 * `mpirun -np N` (tests/dist.cmake):
 *   - all-reduce equals, bit for bit, the left fold in rank order
 *     ((x_0 + x_1) + x_2) ... computed locally, for sizes around the shard
 *     and bucket edges (small buckets: many rounds), and the values are
 *     chosen so another order gives other bits (the check is not vacuous);
 *   - reduce-scatter: own shard folded, the rest untouched; all-gather:
 *     every element comes from its shard's owner; reduce-scatter +
 *     all-gather == all-reduce;
 *   - f64/u64 reductions, byte all-gather, broadcast from every root,
 *     barrier; shard arithmetic;
 *   - ranges (overlap buckets): all-reduce / units reduce-scatter of
 *     [a, b) only, bucket order free; a collective from another thread;
 *     point-to-point sends to rank 0 (different call counts per rank);
 *   - the launcher's environment: OpenMPI, MPICH Hydra, PMIx, srun, sbatch
 *     and malformed variables simulated with setenv (tr_launch_env_read,
 *     tr_launch_detected, train/launch_env.h);
 *   - the dispatcher: engines by name, what a build lacks, a host engine's
 *     asynchronous all-reduce (done at once, same bits).
 * Failure modes (argv[1]): "kill" - the last rank kills itself (SIGKILL)
 * while the others are in an all-reduce; "stop" - it stops (SIGSTOP), so
 * only the deadline can end the job. The survivors print the communicator's
 * message and end the job with tr_comm_abort (tests/dist_kill.sh checks the
 * exit status, the time and the message). */
#include "comm.h"
#include "launch_env.h"
#include "tr.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures, rank_, world_;

#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            printf("rank %d FAIL %s:%d: ", rank_, __FILE__, __LINE__);                                                 \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

/* Value of element i on rank r: magnitudes spread over ~2^20 so that the
 * order of the additions changes the rounding. */
static float val(int r, size_t i) {
    uint64_t z = (uint64_t)r * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 12345;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    double u = (double)(z >> 11) / 9007199254740992.0; /* [0,1) */
    int e = (int)(z % 21) - 10;
    return (float)((u - 0.5) * ldexp(1.0, e));
}

static float fold(size_t i, int W) {
    float v = val(0, i);
    for (int r = 1; r < W; r++) v += val(r, i);
    return v;
}

static float fold_rev(size_t i, int W) {
    float v = val(W - 1, i);
    for (int r = W - 2; r >= 0; r--) v += val(r, i);
    return v;
}

static void test_shards(void) {
    for (int W = 1; W <= 9; W++)
        for (size_t n = 0; n < 40; n++) {
            size_t next = 0;
            for (int r = 0; r < W; r++) {
                size_t lo, hi;
                tr_comm_shard(n, W, r, &lo, &hi);
                CHECK(lo == next && lo <= hi && hi <= n, "shard n=%zu W=%d r=%d [%zu,%zu)", n, W, r, lo, hi);
                CHECK(hi - lo <= (n + (size_t)W - 1) / (size_t)W, "shard too long");
                next = hi;
            }
            CHECK(next == n, "shards of %zu over %d do not cover it", n, W);
        }
    for (int W = 1; W <= 9; W++)
        for (size_t n = 0; n < 60; n += 3)
            for (size_t unit = 1; unit < 9; unit += 3) {
                size_t next = 0;
                for (int r = 0; r < W; r++) {
                    size_t lo, hi;
                    tr_comm_shard_units(n, unit, W, r, &lo, &hi);
                    CHECK(lo == next && lo <= hi && hi <= n && (lo % unit == 0 || lo == n),
                          "units n=%zu unit=%zu W=%d r=%d [%zu,%zu)", n, unit, W, r, lo, hi);
                    next = hi;
                }
                CHECK(next == n, "unit shards of %zu over %d do not cover it", n, W);
            }
    size_t lo, hi;
    tr_comm_shard(SIZE_MAX, 3, 2, &lo, &hi);
    CHECK(hi == SIZE_MAX && lo < hi, "huge n");
}

static void test_float(tr_comm *c, size_t n, size_t bucket) {
    int W = world_, me = rank_;
    if (tr_comm_set_bucket(c, bucket)) {
        CHECK(0, "set_bucket %zu: %s", bucket, tr_comm_error(c));
        return;
    }
    float *b = malloc((n ? n : 1) * sizeof(float));
    float *g = malloc((n ? n : 1) * sizeof(float));
    size_t differ = 0, bad = 0;
    for (size_t i = 0; i < n; i++) b[i] = val(me, i);
    int rc = tr_comm_allreduce_f32(c, b, n);
    CHECK(rc == 0, "allreduce n=%zu bucket=%zu: %s", n, bucket, tr_comm_error(c));
    for (size_t i = 0; i < n; i++) {
        float e = fold(i, W);
        if (memcmp(&b[i], &e, sizeof e)) bad++;
        float r = fold_rev(i, W);
        differ += memcmp(&e, &r, sizeof e) != 0;
    }
    CHECK(bad == 0, "allreduce n=%zu bucket=%zu: %zu elements differ from the rank-order fold", n, bucket, bad);
    if (W > 2 && n >= 1000) CHECK(differ > 0, "values too tame: reverse order gives the same bits");

    /* reduce-scatter: own shard folded, the rest untouched */
    size_t lo, hi;
    tr_comm_shard(n, W, me, &lo, &hi);
    for (size_t i = 0; i < n; i++) b[i] = val(me, i);
    rc = tr_comm_reduce_scatter_f32(c, b, n);
    CHECK(rc == 0, "reduce_scatter: %s", tr_comm_error(c));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float e = i >= lo && i < hi ? fold(i, W) : val(me, i);
        bad += memcmp(&b[i], &e, sizeof e) != 0;
    }
    CHECK(bad == 0, "reduce_scatter n=%zu bucket=%zu: %zu wrong", n, bucket, bad);
    /* then all-gather: == all-reduce */
    for (size_t i = 0; i < n; i++)
        if (i < lo || i >= hi) b[i] = NAN;
    rc = tr_comm_allgather_f32(c, b, n);
    CHECK(rc == 0, "allgather: %s", tr_comm_error(c));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float e = fold(i, W);
        bad += memcmp(&b[i], &e, sizeof e) != 0;
    }
    CHECK(bad == 0, "reduce_scatter+allgather n=%zu bucket=%zu: %zu differ from allreduce", n, bucket, bad);
    /* the same on whole units (the CPU ZeRO-1 layout: 256 norm parts) */
    size_t unit = n / 256 + (n % 256 != 0);
    tr_comm_shard_units(n, unit, W, me, &lo, &hi);
    for (size_t i = 0; i < n; i++) b[i] = val(me, i);
    rc = tr_comm_reduce_scatter_units_f32(c, b, n, unit);
    CHECK(rc == 0, "reduce_scatter_units: %s", tr_comm_error(c));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float e = i >= lo && i < hi ? fold(i, W) : val(me, i);
        bad += memcmp(&b[i], &e, sizeof e) != 0;
        if (i < lo || i >= hi) b[i] = NAN;
    }
    rc = tr_comm_allgather_units_f32(c, b, n, unit);
    CHECK(rc == 0, "allgather_units: %s", tr_comm_error(c));
    for (size_t i = 0; i < n; i++) {
        float e = fold(i, W);
        bad += memcmp(&b[i], &e, sizeof e) != 0;
    }
    CHECK(bad == 0, "units layout n=%zu unit=%zu bucket=%zu: %zu wrong", n, unit, bucket, bad);
    (void)g;
    free(b);
    free(g);
}

/* Ranges (the overlap buckets): only [a, b) changes; all-reduce ranges
 * fold in rank order; units ranges leave each element's fold on its global
 * shard's owner. Ranges covering the buffer in any order == the whole call. */
static void test_range(tr_comm *c, size_t n, size_t bucket) {
    int W = world_, me = rank_;
    if (tr_comm_set_bucket(c, bucket)) {
        CHECK(0, "set_bucket %zu: %s", bucket, tr_comm_error(c));
        return;
    }
    float *b = malloc((n ? n : 1) * sizeof(float));
    size_t cuts[] = {0, n / 7, n / 3, n / 3 + 1 < n ? n / 3 + 1 : n, n / 2, n};
    size_t bad = 0;
    /* all-reduce of one middle range */
    for (size_t i = 0; i < n; i++) b[i] = val(me, i);
    size_t a = cuts[1], e = cuts[4];
    CHECK(tr_comm_allreduce_range_f32(c, b, a, e) == 0, "allreduce_range: %s", tr_comm_error(c));
    for (size_t i = 0; i < n; i++) {
        float x = i >= a && i < e ? fold(i, W) : val(me, i);
        bad += memcmp(&b[i], &x, sizeof x) != 0;
    }
    CHECK(bad == 0, "allreduce_range [%zu,%zu) of %zu, bucket %zu: %zu wrong", a, e, n, bucket, bad);
    /* the asynchronous form on a host engine: done at once, the same bits */
    for (size_t i = 0; i < n; i++) b[i] = val(me, i);
    CHECK(tr_comm_allreduce_range_async_f32(c, b, a, e, NULL) == 0 && tr_comm_wait(c) == 0, "allreduce_range_async: %s",
          tr_comm_error(c));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float x = i >= a && i < e ? fold(i, W) : val(me, i);
        bad += memcmp(&b[i], &x, sizeof x) != 0;
    }
    CHECK(bad == 0, "allreduce_range_async [%zu,%zu) of %zu, bucket %zu: %zu wrong", a, e, n, bucket, bad);
    /* units ranges, last range first */
    size_t unit = n / 256 + (n % 256 != 0), lo, hi;
    tr_comm_shard_units(n, unit, W, me, &lo, &hi);
    for (size_t i = 0; i < n; i++) b[i] = val(me, i);
    for (int k = 4; k >= 0; k--)
        CHECK(tr_comm_reduce_scatter_units_range_f32(c, b, n, unit, cuts[k], cuts[k + 1]) == 0,
              "reduce_scatter_units_range: %s", tr_comm_error(c));
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float x = i >= lo && i < hi ? fold(i, W) : val(me, i);
        bad += memcmp(&b[i], &x, sizeof x) != 0;
    }
    CHECK(bad == 0, "units ranges n=%zu bucket=%zu: %zu wrong", n, bucket, bad);
    CHECK(tr_comm_reduce_scatter_units_range_f32(c, b, n, unit, 1, 0) == TR_ERR_ARG &&
              tr_comm_reduce_scatter_units_range_f32(c, b, n, unit, 0, n + 1) == TR_ERR_ARG,
          "bad ranges refused");
    free(b);
}

/* Collectives driven from another thread (the overlap's communication
 * thread), then from the main thread again. */
typedef struct {
    tr_comm *c;
    float *b;
    size_t n;
    int rc;
} thr_arg;

static void *thr_main(void *p) {
    thr_arg *t = p;
    t->rc = tr_comm_allreduce_range_f32(t->c, t->b, 0, t->n);
    return NULL;
}

static void test_thread(tr_comm *c) {
    enum { N = 5000 };
    float b[N];
    for (size_t i = 0; i < N; i++) b[i] = val(rank_, i);
    thr_arg t = {c, b, N, -1};
    pthread_t th;
    if (!tr_comm_serialized(c)) {
        printf("rank %d: MPI without MPI_THREAD_SERIALIZED: thread test skipped\n", rank_);
        return;
    }
    CHECK(pthread_create(&th, NULL, thr_main, &t) == 0, "pthread_create");
    pthread_join(th, NULL);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        float x = fold(i, world_);
        bad += memcmp(&b[i], &x, sizeof x) != 0;
    }
    CHECK(t.rc == 0 && bad == 0, "all-reduce from another thread: rc %d, %zu wrong", t.rc, bad);
    CHECK(tr_comm_barrier(c) == 0, "barrier after the thread: %s", tr_comm_error(c));
}

/* Point-to-point (checkpoint shards): ranks make different numbers of
 * calls; the collectives after them still match. */
static void test_p2p(tr_comm *c) {
    enum { N = 3000 };
    float b[N];
    memset(b, 0, sizeof b);
    if (world_ == 1) {
        CHECK(tr_comm_send_f32(c, b, N, 0) == TR_ERR_ARG, "send to myself refused");
        return;
    }
    CHECK(tr_comm_set_bucket(c, 1000) == 0, "bucket");
    if (rank_ == 0) {
        for (int r = 1; r < world_; r++)
            for (int k = 0; k < 2; k++) {
                memset(b, 0, sizeof b);
                CHECK(tr_comm_recv_f32(c, b, N, r) == 0, "recv from %d: %s", r, tr_comm_error(c));
                int ok = 1;
                for (size_t i = 0; i < N; i++) ok &= b[i] == val(r, i + (size_t)k);
                CHECK(ok, "message %d from rank %d", k, r);
            }
    } else {
        for (int k = 0; k < 2; k++) {
            for (size_t i = 0; i < N; i++) b[i] = val(rank_, i + (size_t)k);
            CHECK(tr_comm_send_f32(c, b, N, 0) == 0, "send %d: %s", k, tr_comm_error(c));
        }
    }
    double d = rank_;
    CHECK(tr_comm_allreduce_f64(c, &d, 1) == 0 && d == (double)world_ * (world_ - 1) / 2,
          "collective after point-to-point: %s", tr_comm_error(c));
    CHECK(tr_comm_set_bucket(c, TR_COMM_DEFAULT_BUCKET) == 0, "bucket");
}

/* The launcher's environment (tr_launch_env_read, tr_launch_detected) under
 * simulated OpenMPI, MPICH (Hydra), PMIx, Slurm srun and sbatch settings;
 * the real environment is restored afterwards. */
static const char *const env_names[] = {"OMPI_COMM_WORLD_RANK",
                                        "OMPI_COMM_WORLD_SIZE",
                                        "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "OMPI_COMM_WORLD_LOCAL_SIZE",
                                        "PMI_RANK",
                                        "PMI_SIZE",
                                        "PMIX_RANK",
                                        "MPI_LOCALRANKID",
                                        "MPI_LOCALNRANKS",
                                        "SLURM_PROCID",
                                        "SLURM_NTASKS",
                                        "SLURM_STEP_NUM_TASKS",
                                        "SLURM_LOCALID",
                                        "SLURM_STEP_TASKS_PER_NODE",
                                        "SLURM_NTASKS_PER_NODE",
                                        NULL};

static void env_case(const char *what, const char *const *kv, const char *src, int rank, int world, int lr, int ls,
                     int launched) {
    for (int i = 0; env_names[i]; i++) unsetenv(env_names[i]);
    for (; kv && *kv; kv += 2) setenv(kv[0], kv[1], 1);
    tr_launch_env e;
    tr_launch_env_read(&e);
    CHECK(!strcmp(e.source, src) && e.rank == rank && e.world == world && e.local_rank == lr && e.local_size == ls,
          "env %s: %s %d/%d local %d/%d, want %s %d/%d local %d/%d", what, e.source, e.rank, e.world, e.local_rank,
          e.local_size, src, rank, world, lr, ls);
    CHECK(tr_launch_detected() == launched, "env %s: launched %d, want %d", what, tr_launch_detected(), launched);
}

static void test_env(void) {
    char *saved[32] = {0};
    for (int i = 0; env_names[i]; i++) {
        const char *v = getenv(env_names[i]);
        saved[i] = v ? strdup(v) : NULL;
    }
    env_case("none", NULL, "none", -1, -1, -1, -1, 0);
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK",
                          "3",
                          "OMPI_COMM_WORLD_SIZE",
                          "8",
                          "OMPI_COMM_WORLD_LOCAL_RANK",
                          "1",
                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "4",
                          NULL};
    env_case("mpirun (OpenMPI)", ompi, "openmpi", 3, 8, 1, 4, 1);
    const char *hydra[] = {"PMI_RANK", "5", "PMI_SIZE", "6", "MPI_LOCALRANKID", "2", "MPI_LOCALNRANKS", "3", NULL};
    env_case("mpiexec (MPICH Hydra)", hydra, "pmi", 5, 6, 2, 3, 1);
    const char *srun[] = {"SLURM_PROCID",
                          "7",
                          "SLURM_NTASKS",
                          "16",
                          "SLURM_STEP_NUM_TASKS",
                          "16",
                          "SLURM_LOCALID",
                          "3",
                          "SLURM_STEP_TASKS_PER_NODE",
                          "4(x4)",
                          NULL};
    env_case("srun", srun, "slurm", 7, 16, 3, 4, 1);
    const char *pmix[] = {"PMIX_RANK",
                          "2",
                          "SLURM_PROCID",
                          "2",
                          "SLURM_STEP_NUM_TASKS",
                          "4",
                          "SLURM_LOCALID",
                          "0",
                          "SLURM_STEP_TASKS_PER_NODE",
                          "1,3",
                          NULL};
    env_case("srun --mpi=pmix", pmix, "pmix", 2, 4, 0, 1, 1);
    const char *pmi2[] = {"PMI_RANK",
                          "9",
                          "PMI_SIZE",
                          "12",
                          "SLURM_PROCID",
                          "9",
                          "SLURM_NTASKS",
                          "12",
                          "SLURM_LOCALID",
                          "1",
                          "SLURM_NTASKS_PER_NODE",
                          "6",
                          NULL};
    env_case("srun --mpi=pmi2 (local rank from Slurm)", pmi2, "pmi", 9, 12, 1, 6, 1);
    const char *batch[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_LOCALID", "0", NULL};
    env_case("sbatch script (one task)", batch, "slurm", 0, 1, 0, -1, 0);
    const char *ompi_slurm[] = {"OMPI_COMM_WORLD_RANK",
                                "1",
                                "OMPI_COMM_WORLD_SIZE",
                                "2",
                                "SLURM_LOCALID",
                                "1",
                                "SLURM_NTASKS_PER_NODE",
                                "2",
                                NULL};
    env_case("OpenMPI rank, Slurm local id", ompi_slurm, "openmpi", 1, 2, 1, 2, 1);
    const char *junk[] = {"PMI_RANK", "x1", "SLURM_PROCID", "-3", "SLURM_NTASKS", "4", NULL};
    /* launched: a PMI variable is there (MPI_Init reads it), only its number is not one */
    env_case("malformed numbers", junk, "none", -1, -1, -1, -1, 1);
    for (int i = 0; env_names[i]; i++) {
        if (saved[i]) setenv(env_names[i], saved[i], 1);
        else unsetenv(env_names[i]);
        free(saved[i]);
    }
}

/* The dispatcher: engines by name, what this build lacks and why, host and
 * device engines kept apart. */
static void test_engines(tr_comm *c) {
    char err[512];
    tr_comm *x = NULL;
    CHECK(tr_comm_have("single") && !tr_comm_have("nope") && !tr_comm_have(NULL), "tr_comm_have");
    CHECK(!tr_comm_on_device(c), "a host communicator");
    CHECK(tr_comm_open("nope", &x, err, sizeof err) == TR_ERR_ARG && !x && strstr(err, "unknown host"),
          "unknown engine: %s", err);
    if (!tr_comm_have("mpi"))
        CHECK(tr_comm_open("mpi", &x, err, sizeof err) == TR_ERR_ARG && !x &&
                  strstr(err, "no mpi communicator engine (configure with MPI"),
              "mpi absent: %s", err);
    if (!tr_comm_have("nccl"))
        CHECK(tr_comm_open_device(c, "nccl", 0, &x, err, sizeof err) == TR_ERR_NODEVICE && !x &&
                  strstr(err, "no nccl communicator engine (configure with"),
              "nccl absent: %s", err);
    else
        CHECK(tr_comm_open("nccl", &x, err, sizeof err) == TR_ERR_ARG && !x && strstr(err, "runs on a device"),
              "nccl is a device engine: %s", err);
    CHECK(tr_comm_open_device(c, "single", 0, &x, err, sizeof err) == TR_ERR_ARG && !x && strstr(err, "host engine"),
          "single is a host engine: %s", err);
    /* a second world-1 communicator beside the process's */
    CHECK(tr_comm_open("single", &x, err, sizeof err) == 0 && x, "open single: %s", err);
    if (x) {
        float v[3] = {1.5f, -2.0f, 3.25f};
        CHECK(tr_comm_world(x) == 1 && tr_comm_rank(x) == 0 && !strcmp(tr_comm_engine_name(x), "single") &&
                  tr_comm_allreduce_f32(x, v, 3) == 0 && v[0] == 1.5f && v[1] == -2.0f && v[2] == 3.25f,
              "single engine");
        /* world 1 of a host engine is the identity; a stream to order
         * after is a device engine's */
        CHECK(tr_comm_allreduce_range_async_f32(x, v, 0, 3, (void *)v) == 0, "world 1: async is the identity");
        tr_comm_close(x);
    }
    if (world_ > 1) {
        float v[4] = {0};
        CHECK(tr_comm_allreduce_range_async_f32(c, v, 0, 4, (void *)v) == TR_ERR_ARG &&
                  strstr(tr_comm_error(c), "no asynchronous all-reduce after a stream"),
              "host engine refuses a stream: %s", tr_comm_error(c));
    }
}

static void test_small(tr_comm *c) {
    int W = world_, me = rank_;
    double d[3] = {0.1 * (me + 1), 1e16, -1e16 + me};
    CHECK(tr_comm_allreduce_f64(c, d, 3) == 0, "f64: %s", tr_comm_error(c));
    double e0 = 0.1, e1 = 1e16, e2 = -1e16;
    for (int r = 1; r < W; r++) {
        e0 += 0.1 * (r + 1);
        e1 += 1e16;
        e2 += -1e16 + r;
    }
    CHECK(memcmp(&d[0], &e0, 8) == 0 && memcmp(&d[1], &e1, 8) == 0 && memcmp(&d[2], &e2, 8) == 0,
          "f64 fold %.17g %.17g %.17g", d[0], d[1], d[2]);
    uint64_t u[2] = {(uint64_t)me + 1, UINT64_C(1) << 40};
    CHECK(tr_comm_allreduce_u64(c, u, 2) == 0, "u64");
    CHECK(u[0] == (uint64_t)W * (W + 1) / 2 && u[1] == (uint64_t)W << 40, "u64 sum %llu", (unsigned long long)u[0]);
    int mine[2] = {me, 1000 + me}, all[2 * 64];
    if (W <= 64) {
        CHECK(tr_comm_allgather_bytes(c, mine, all, sizeof mine) == 0, "allgather_bytes");
        for (int r = 0; r < W; r++) CHECK(all[2 * r] == r && all[2 * r + 1] == 1000 + r, "allgather_bytes slot %d", r);
    }
    for (int root = 0; root < W; root++) {
        char buf[300];
        memset(buf, me == root ? 'a' + root % 26 : 0, sizeof buf);
        CHECK(tr_comm_bcast(c, buf, sizeof buf, root) == 0, "bcast from %d: %s", root, tr_comm_error(c));
        int ok = 1;
        for (size_t i = 0; i < sizeof buf; i++) ok &= buf[i] == 'a' + root % 26;
        CHECK(ok, "bcast from %d", root);
    }
    CHECK(tr_comm_bcast(c, mine, 4, W) == TR_ERR_ARG, "bcast from a rank outside the world");
    CHECK(tr_comm_barrier(c) == 0, "barrier: %s", tr_comm_error(c));
    CHECK(tr_comm_allreduce_f64(c, d, 5000) == TR_ERR_ARG || W == 1, "f64 size limit");
}

/* The last rank dies (kill) or stops (stop) while the others reduce. */
static int failure_mode(tr_comm *c, const char *mode) {
    enum { N = 1 << 16 };
    float *b = calloc(N, sizeof(float));
    if (!b) return 1;
    if (tr_comm_barrier(c)) {
        fprintf(stderr, "%s\n", tr_comm_error(c));
        return 1;
    }
    if (rank_ == world_ - 1) {
        usleep(200000); /* the others are inside the all-reduce by now */
        fprintf(stderr, "rank %d: raising %s on myself\n", rank_, mode);
        fflush(stderr);
        raise(strcmp(mode, "stop") == 0 ? SIGSTOP : SIGKILL);
        pause();
    }
    for (int it = 0; it < 1000000; it++) {
        if (tr_comm_allreduce_f32(c, b, N)) {
            fprintf(stderr, "test_comm: %s\n", tr_comm_error(c));
            fflush(stderr);
            tr_comm_abort(c, 3);
            return 3;
        }
    }
    fprintf(stderr, "rank %d: all-reduce kept working without rank %d\n", rank_, world_ - 1);
    return 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    tr_comm *c;
    char err[512];
    if (tr_comm_open(NULL, &c, err, sizeof err)) {
        fprintf(stderr, "test_comm: %s\n", err);
        return 1;
    }
    rank_ = tr_comm_rank(c);
    world_ = tr_comm_world(c);
    if (argc > 1 && (strcmp(argv[1], "kill") == 0 || strcmp(argv[1], "stop") == 0)) return failure_mode(c, argv[1]);
    if (argc > 2 && strcmp(argv[1], "bench") == 0) {
        /* test_comm bench N: seconds per all-reduce of N floats (not a test) */
        size_t n = (size_t)strtoull(argv[2], NULL, 10);
        float *b = calloc(n ? n : 1, sizeof(float));
        int rc = b ? tr_comm_allreduce_f32(c, b, n) : 1; /* warm-up */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < 5 && !rc; i++) rc = tr_comm_allreduce_f32(c, b, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)) / 5;
        if (rank_ == 0)
            printf("all-reduce of %zu floats over %d ranks: %.3f s (%.2f GB/s of buffer)\n", n, world_, s,
                   (double)n * 4 / s / 1e9);
        free(b);
        tr_comm_close(c);
        return rc ? 1 : 0;
    }
    if (rank_ == 0)
        printf("test_comm: engine %s, world %d, local rank %d of %d, deadline %.0f s\n", tr_comm_engine_name(c), world_,
               tr_comm_local_rank(c), tr_comm_local_size(c), tr_comm_timeout(c));
    CHECK(tr_launch_detected() == (strcmp(tr_comm_engine_name(c), "mpi") == 0) || !tr_comm_have("mpi"),
          "launcher detection");
    test_shards();
    size_t W = (size_t)world_;
    size_t sizes[] = {0, 1, 2, W - 1 + 1, 3 * W + 1, 1000, 4099, 100003};
    size_t buckets[] = {W, 7 * W + 3, 4096, TR_COMM_DEFAULT_BUCKET};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t k = 0; k < sizeof buckets / sizeof *buckets; k++) {
            if (sizes[a] > 5000 && buckets[k] < 64) continue; /* 100k elements one per message: slow, nothing new */
            test_float(c, sizes[a], buckets[k]);
        }
    size_t rsizes[] = {0, 7, 1000, 100003};
    size_t rbuckets[] = {7 * W + 3, 4096, TR_COMM_DEFAULT_BUCKET};
    for (size_t a = 0; a < sizeof rsizes / sizeof *rsizes; a++)
        for (size_t k = 0; k < sizeof rbuckets / sizeof *rbuckets; k++)
            if (!(rsizes[a] > 5000 && rbuckets[k] < 64)) test_range(c, rsizes[a], rbuckets[k]);
    CHECK(tr_comm_set_bucket(c, 0) == TR_ERR_ARG, "bucket 0 refused");
    CHECK(tr_comm_set_bucket(c, TR_COMM_DEFAULT_BUCKET) == 0, "bucket");
    test_thread(c);
    test_p2p(c);
    test_env();
    test_engines(c);
    CHECK(tr_launch_detected() == (strcmp(tr_comm_engine_name(c), "mpi") == 0) || !tr_comm_have("mpi"),
          "environment restored");
    test_small(c);
    uint64_t fails = (uint64_t)failures;
    if (tr_comm_allreduce_u64(c, &fails, 1)) fails = 1;
    if (rank_ == 0)
        printf("test_comm: %s (%llu failures over %d ranks)\n", fails ? "FAILED" : "ok", (unsigned long long)fails,
               world_);
    tr_comm_close(c);
    return fails ? 1 : 0;
}
