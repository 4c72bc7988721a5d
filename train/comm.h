/* comm.h - the communicator of data-parallel training (internal header of
 * the train module; issue 16).
 *
 * One object, several engines behind it (train/comm_engine.h; the
 * dispatcher is train/comm.c, and the engines this build has are listed in
 * the table train/CMakeLists.txt generates):
 *   single  world 1, every collective is a no-op (plain `llmtrain`, no MPI
 *           initialised, behaves exactly as before; train/comm_single.c);
 *   mpi     one rank per process, started by mpirun / mpiexec / srun (rank,
 *           world size and local rank come from MPI; built only when CMake
 *           finds MPI; train/comm_mpi.c);
 *   nccl    the GPU engine (train/comm_nccl.cu, built when CMake finds
 *           NCCL): the same object and calls on DEVICE buffers, opened over
 *           a host communicator (tr_comm_open_device), see "Device engines".
 *
 * Determinism (host engines). Every float reduction is a left fold in rank
 * order:
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
 * equal-count layout is the same on a buffer padded to tr_comm_padded(n, W).
 *
 * Device engines (nccl). Buffers are device memory; the calls are the ones
 * below with these differences (the split): sums are NCCL's, not the rank-order
 * fold (GPU runs are reproducible per world size, not bit-identical across
 * world sizes); they are made at world 1 too (a one-rank NCCL communicator:
 * the call orders with the GPU streams); reduce-scatter and all-gather take
 * the whole buffer in the plain layout (unit 0) padded to tr_comm_padded(n,
 * W) floats; the small reductions, byte all-gather, point-to-point and barrier
 * are not there (TR_ERR_ARG: they run on the host communicator). The
 * asynchronous all-reduce (tr_comm_allreduce_range_async_f32 + tr_comm_wait)
 * is theirs; a host engine runs it at once.
 *
 * Failure. Every collective has a deadline (default 60 s, env
 * MKS_COMM_TIMEOUT or tr_comm_set_timeout; a device communicator starts with
 * its host's): when a peer has not delivered its part by then, or MPI (NCCL)
 * reports an error on the link to it, the call returns TR_ERR_IO and
 * tr_comm_error() names the collective, the peer rank(s) and the cause. MPI
 * errors are returned (MPI_ERRORS_RETURN), never fatal inside the library;
 * the caller ends the job with tr_comm_abort (MPI_Abort: every rank exits
 * non-zero).
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

/* 1 when this build has the engine of that name ("single", "mpi", "nccl"). */
int tr_comm_have(const char *engine);

/* A host communicator. engine NULL (auto): the first engine of the build
 * that says this process was launched for it (mpi: tr_launch_detected,
 * train/launch_env.h), else "single". A launched engine whose world differs
 * from a launcher environment naming a world of N > 1 is refused
 * (TR_ERR_ARG: e.g. srun without the PMI plugin this MPI needs starts N
 * singletons). An engine this build lacks: TR_ERR_ARG, with what to
 * configure. MPI is initialised here (MPI_THREAD_SERIALIZED asked) unless
 * the program already did; the communication buffer is allocated here. */
int tr_comm_open(const char *engine, tr_comm **out, char *err, size_t errlen);
/* A device communicator (engine "nccl") over the ranks of host, which
 * bootstraps it (a collective call: every rank of host calls it), on GPU
 * `device` (usually tr_comm_local_rank). No such engine in the build:
 * TR_ERR_NODEVICE with what to configure. */
int tr_comm_open_device(tr_comm *host, const char *engine, int device, tr_comm **out, char *err, size_t errlen);
/* MPI_Finalize when tr_comm_open initialised MPI (call after the last
 * collective, on success paths; after a failure use tr_comm_abort). A
 * device communicator is closed before its host. */
void tr_comm_close(tr_comm *c);
/* End the whole job now: MPI_Abort(code) under MPI (every rank exits
 * non-zero; Open MPI's mpirun exits with code), returns for the single and
 * device engines (the caller exits, or aborts the host communicator). */
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

/* The engine's name: "single", "mpi", "nccl". */
const char *tr_comm_engine_name(const tr_comm *c);
/* 1 when the buffers of the collectives are device memory (nccl). */
int tr_comm_on_device(const tr_comm *c);
int tr_comm_rank(const tr_comm *c);
int tr_comm_world(const tr_comm *c);
/* Rank among the ranks on this host: MPI_Comm_split_type(SHARED), or the
 * launcher's environment (tr_launch_env_read) when that split fails. */
int tr_comm_local_rank(const tr_comm *c);
int tr_comm_local_size(const tr_comm *c);
/* 1 when another thread than the opening one may drive the collectives
 * (MPI_THREAD_SERIALIZED or better; always 1 for the single engine and a
 * device communicator). */
int tr_comm_serialized(const tr_comm *c);
/* Message of the last failure ("" if none). */
const char *tr_comm_error(const tr_comm *c);
/* A failed call's message for the caller: "what: " and the communicator's
 * message (or rc's text) into err; returns the status to pass on: rc when
 * it is TR_ERR_NOMEM or TR_ERR_ARG, else TR_ERR_INTERNAL (so the CLI exits
 * 1: a failure, not bad input). */
int tr_comm_failed(tr_comm *c, int rc, const char *what, char *err, size_t errlen);
/* Deadline of each collective in seconds (> 0). */
void tr_comm_set_timeout(tr_comm *c, double seconds);
double tr_comm_timeout(const tr_comm *c);

/* Elements per bucket of the float collectives (default
 * TR_COMM_DEFAULT_BUCKET); reallocates the communication buffer (host
 * engines). */
#define TR_COMM_DEFAULT_BUCKET ((size_t)1 << 20)
int tr_comm_set_bucket(tr_comm *c, size_t elems);
/* Bytes of communication buffer a rank holds for (world, bucket elements):
 * what the planner counts; 0 for world 1. */
uint64_t tr_comm_buffer_bytes(int world, size_t bucket);

/* Elements a device engine's reduce-scatter / all-gather buffer holds for
 * n: world * ceil(n / world). */
size_t tr_comm_padded(size_t n, int world);
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
/* The all-reduce of [a, b) started without waiting: a device engine
 * enqueues it on its stream after the work enqueued so far on `after` (a
 * cudaStream_t as void *, NULL: none); tr_comm_wait then waits for every
 * call started, against the deadline. A host engine (after NULL) completes
 * it here and tr_comm_wait has nothing to wait for. */
int tr_comm_allreduce_range_async_f32(tr_comm *c, float *buf, size_t a, size_t b, void *after);
int tr_comm_wait(tr_comm *c);
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
