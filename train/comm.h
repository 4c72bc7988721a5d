/* comm.h - the host communicator of data-parallel training (internal header
 * of the train module; issue 16).
 *
 * One object, two engines:
 *   single  world 1, every collective is a no-op (plain `llmtrain`, no MPI
 *           initialised, behaves exactly as before);
 *   mpi     one rank per process, started by mpirun / mpiexec / srun (rank,
 *           world size and local rank come from MPI; built only when CMake
 *           finds MPI: MKS_HAVE_MPI, train/comm_mpi.c).
 * The GPU engine (NCCL, train/comm_nccl.h) is bootstrapped over this one.
 *
 * Determinism. Every float reduction is a left fold in rank order:
 *     out = ((x_0 + x_1) + x_2) + ... + x_{W-1}
 * computed by exactly one rank per element and then copied, so the result is
 * identical on every rank, independent of the MPI library's algorithms, and
 * equal bit for bit to one process that adds the ranks' buffers in that order.
 * The all-reduce is a reduce-scatter (each rank folds its shard) followed by
 * an all-gather, both over point-to-point messages in fixed-size buckets: a
 * rank's communication buffer is tr_comm_buffer_bytes() and is allocated when
 * the communicator is opened (never during training).
 *
 * Shards (ZeRO-1 and the reduce-scatter): n elements in W shards of
 * ceil(n / W) elements, the last ones shorter or empty (tr_comm_shard). NCCL's
 * equal-count layout is the same on a buffer padded to W * ceil(n / W).
 *
 * Failure. Every collective has a deadline (default 60 s, env
 * MKS_COMM_TIMEOUT or tr_comm_set_timeout): when a peer has not delivered its
 * part by then, or MPI reports an error on the link to it, the call returns
 * TR_ERR_IO and tr_comm_error() names the collective, the peer rank(s) and
 * the cause. MPI errors are returned (MPI_ERRORS_RETURN), never fatal inside
 * the library; the caller ends the job with tr_comm_abort (MPI_Abort: every
 * rank exits non-zero).
 *
 * Functions return TR_OK or a negative TR_ERR_* of tr.h and never exit.
 * Collectives are called by every rank in the same order, by one thread at
 * a time: with tr_comm_serialized() that thread may change (the
 * data-parallel backend's communication thread reduces gradient buckets
 * while the main thread runs backward, and hands the communicator back
 * before the main thread's next call); otherwise always the opening thread.
 */
#ifndef TR_COMM_H
#define TR_COMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_comm tr_comm;

enum { TR_COMM_AUTO = -1, TR_COMM_SINGLE = 0, TR_COMM_MPI = 1 };

/* 1 when the process was started by an MPI / PMI launcher (mpirun, mpiexec,
 * srun): OMPI_COMM_WORLD_SIZE, PMI_RANK, PMI_SIZE, PMIX_RANK or
 * MPI_LOCALNRANKS is set, or a Slurm step of more than one task
 * (SLURM_PROCID with SLURM_STEP_NUM_TASKS or SLURM_NTASKS > 1; a batch
 * script's single task is not a launch). */
int tr_comm_launched(void);

/* What the launcher's environment says about this process, before MPI is
 * initialised (GPU choice, messages) and as the fallback for the local rank
 * when MPI cannot tell. Fields are -1 when unknown. Read, first match wins:
 *   OpenMPI  OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
 *   MPICH (Hydra), Intel MPI, srun --mpi=pmi2
 *            PMI_RANK / PMI_SIZE, MPI_LOCALRANKID / MPI_LOCALNRANKS
 *   PMIx     PMIX_RANK (world and local from the others when present)
 *   Slurm    SLURM_PROCID / SLURM_STEP_NUM_TASKS (or SLURM_NTASKS),
 *            SLURM_LOCALID / SLURM_STEP_TASKS_PER_NODE's first number
 *            (or SLURM_NTASKS_PER_NODE)
 * Local rank and size are taken from whichever family sets them (MPICH's
 * MPI_LOCALRANKID, then Slurm's SLURM_LOCALID) when the rank's family has
 * none. source: "openmpi", "pmi", "pmix", "slurm" or "none". Malformed
 * numbers count as unset. */
typedef struct {
    const char *source;
    int rank, world, local_rank, local_size;
} tr_comm_env;
void tr_comm_env_read(tr_comm_env *out);
/* 1 when this build has the MPI engine. */
int tr_comm_have_mpi(void);

/* kind TR_COMM_AUTO: MPI when built with it and tr_comm_launched(), else
 * single. Under MPI, a launcher environment naming a world of N > 1 that
 * differs from MPI's world is refused (TR_ERR_ARG: e.g. srun without the
 * PMI plugin this MPI needs starts N singletons). TR_COMM_MPI without MPI in the build: TR_ERR_ARG. MPI is
 * initialised here (MPI_THREAD_FUNNELED: only the calling thread talks to
 * MPI) unless the program already did; the communication buffer is
 * allocated here. */
int tr_comm_open(int kind, tr_comm **out, char *err, size_t errlen);
/* MPI_Finalize when tr_comm_open initialised MPI (call after the last
 * collective, on success paths; after a failure use tr_comm_abort). */
void tr_comm_close(tr_comm *c);
/* End the whole job now: MPI_Abort(code) under MPI (every rank exits
 * non-zero; Open MPI's mpirun exits with code), returns for the single
 * engine (the caller exits). */
void tr_comm_abort(tr_comm *c, int code);
/* A failed run's exit status (code != 0), agreed by every rank: when all
 * ranks call this within timeout_s seconds (they refused the same run: bad
 * usage, a plan that does not fit, a corrupt checkpoint), the highest of
 * their codes; the caller then closes the communicator (MPI_Finalize) and
 * exits with it, so the launcher reports the documented status and no
 * abort. -1 when some rank did not come (it is still running, or stuck):
 * the caller ends the job with tr_comm_abort(code). Uses MPI_COMM_WORLD, not
 * the collectives' duplicate, so it cannot match a collective another rank
 * is waiting in. The single engine: code. */
int tr_comm_exit_agree(tr_comm *c, int code, double timeout_s);

int tr_comm_kind(const tr_comm *c);
const char *tr_comm_kind_name(const tr_comm *c); /* "single" / "mpi" */
int tr_comm_rank(const tr_comm *c);
int tr_comm_world(const tr_comm *c);
/* Rank among the ranks on this host: MPI_Comm_split_type(SHARED), or the
 * launcher's environment (tr_comm_env_read) when that split fails. */
int tr_comm_local_rank(const tr_comm *c);
int tr_comm_local_size(const tr_comm *c);
/* 1 when another thread than the opening one may drive the collectives
 * (MPI_THREAD_SERIALIZED or better; always 1 for the single engine). */
int tr_comm_serialized(const tr_comm *c);
/* Message of the last failure ("" if none). */
const char *tr_comm_error(const tr_comm *c);
/* Deadline of each collective in seconds (> 0). */
void tr_comm_set_timeout(tr_comm *c, double seconds);
double tr_comm_timeout(const tr_comm *c);

/* Elements per bucket of the float collectives (default
 * TR_COMM_DEFAULT_BUCKET); reallocates the communication buffer. */
#define TR_COMM_DEFAULT_BUCKET ((size_t)1 << 20)
int tr_comm_set_bucket(tr_comm *c, size_t elems);
/* Bytes of communication buffer a rank holds for (world, bucket elements):
 * what the planner counts; 0 for world 1. */
uint64_t tr_comm_buffer_bytes(int world, size_t bucket);

/* Shard r of n elements over world ranks: [*lo, *hi). */
void tr_comm_shard(size_t n, int world, int r, size_t *lo, size_t *hi);
/* Shards of whole units: n elements in U = ceil(n / unit) units of `unit`
 * elements (the last one may be short), rank r holds units
 * [r*U/W, (r+1)*U/W) (floor). unit 0: the layout of tr_comm_shard. Used by
 * ZeRO-1 on the CPU with the gradient norm's 256 fixed parts as units, so a
 * rank's shard holds whole parts (the norm is then exact). */
void tr_comm_shard_units(size_t n, size_t unit, int world, int r, size_t *lo, size_t *hi);

/* buf[0..n) on every rank becomes the rank-order fold of all ranks' buf. */
int tr_comm_allreduce_f32(tr_comm *c, float *buf, size_t n);
/* Only this rank's shard of buf becomes the fold; the rest of buf is left
 * as it was (this rank's own values). */
int tr_comm_reduce_scatter_f32(tr_comm *c, float *buf, size_t n);
/* Every rank's shard of buf is copied into all the others' buf. */
int tr_comm_allgather_f32(tr_comm *c, float *buf, size_t n);
/* The same two on the layout of tr_comm_shard_units. */
int tr_comm_reduce_scatter_units_f32(tr_comm *c, float *buf, size_t n, size_t unit);
int tr_comm_allgather_units_f32(tr_comm *c, float *buf, size_t n, size_t unit);
/* The same on the range [a, b) of buf only (gradient buckets started while
 * backward runs). all-reduce: [a, b) is cut into W shards of its own;
 * units: each element of [a, b) is folded by its owner in the units layout
 * of the whole buffer of n elements (so ZeRO-1 shards get their folds
 * bucket by bucket). The folds are the rank-order folds of the whole-buffer
 * calls: the same bits whatever the buckets. */
int tr_comm_allreduce_range_f32(tr_comm *c, float *buf, size_t a, size_t b);
int tr_comm_reduce_scatter_units_range_f32(tr_comm *c, float *buf, size_t n, size_t unit, size_t a, size_t b);
/* Point-to-point floats (checkpoint shards to rank 0): blocking, against
 * the deadline, in pieces of the bucket. Every send has its matching
 * receive, in the same order between two ranks; they do not count as
 * collectives (ranks may make different numbers of them). */
int tr_comm_send_f32(tr_comm *c, const float *buf, size_t n, int peer);
int tr_comm_recv_f32(tr_comm *c, float *buf, size_t n, int peer);
/* Small reductions (loss sums, token counts): rank-order fold, identical on
 * every rank (n <= 4096). */
int tr_comm_allreduce_f64(tr_comm *c, double *buf, size_t n);
int tr_comm_allreduce_u64(tr_comm *c, uint64_t *buf, size_t n);
/* Every rank's bytes of `mine` into all[r * bytes ...] (bytes <= 64 KiB). */
int tr_comm_allgather_bytes(tr_comm *c, const void *mine, void *all, size_t bytes);
int tr_comm_bcast(tr_comm *c, void *buf, size_t bytes, int root);
int tr_comm_barrier(tr_comm *c);

#ifdef __cplusplus
}
#endif
#endif
