/* tr.h - the trainer system: data loader, memory planner, checkpoints,
 * logging, LR schedule and the training driver (llmtrain).
 *
 * The model math (GPT-2 forward/backward) lives in train/model.h and the
 * optimizer behind its seam, train/optim.h (AdamW today); this header is
 * everything around them. Library functions return int status codes
 * (TR_OK == 0, negative TR_ERR_* on failure; see tr_strerror) and never exit.
 */
#ifndef TR_H
#define TR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TR_OK = 0,
    TR_ERR_NOMEM = -1,
    TR_ERR_IO = -2,          /* cannot open/read/write a file */
    TR_ERR_ARG = -3,         /* bad argument / configuration */
    TR_ERR_CORRUPT = -4,     /* corrupt shard or checkpoint (bad magic, checksum, sizes) */
    TR_ERR_FINGERPRINT = -5, /* tokenizer fingerprint differs from the run's */
    TR_ERR_NOFIT = -6,       /* the memory plan does not fit the budget */
    TR_ERR_NODEVICE = -7,    /* --device cuda without a CUDA build / GPU */
    TR_ERR_DATA = -8,        /* data cannot serve the request (no rows, rows too short) */
    TR_ERR_INTERNAL = -9
};
const char *tr_strerror(int err);

/* ================================================================ rows
 * A row source is the loader's view of a shard set: a train split and a
 * validation split of fixed-length rows. Row i of a split is read into caller
 * buffers of row_len entries:
 *   tokens[j]  token id (< vocab_size)
 *   pos[j]     position of token j inside its document (0 = the document
 *              starts here); NULL when the caller does not need it
 *   mask[j]    1 when token j is real data and may be a prediction target,
 *              0 for padding / masked tokens (never carries loss); may be NULL
 * The shard-set adapter (tr_rows_open_shards) fills this from dataset/ds.h;
 * tests use tr_rows_mem. read_row must be callable from the loader thread
 * (one caller at a time per source). */
enum { TR_SPLIT_TRAIN = 0, TR_SPLIT_VAL = 1 };

typedef struct tr_rows {
    void *ctx;
    uint64_t n_rows[2]; /* rows in the train / val split */
    int row_len;        /* tokens per row */
    uint32_t vocab_size;
    uint8_t fingerprint[32]; /* tokenizer fingerprint (all zero: unknown) */
    int has_pos;             /* 1: pos[] carries document boundaries */
    uint32_t eot_id;         /* end-of-text id (sampling prompt and stop without framing) */
    /* framing of each document, when frame_known (shard sets): BOS / EOS id,
     * -1 none. --sample starts from the BOS (else the EOS) and stops at the
     * EOS; a source that does not know (frame_known 0) uses eot_id for both. */
    int frame_known;
    int64_t bos_id, eos_id;
    char tokenizer[64]; /* tokenizer name recorded with the data ("" unknown) */
    /* why (whylen bytes): the reason of a TR_ERR_CORRUPT, or left "" */
    int (*read_row)(void *ctx, int split, uint64_t i, uint32_t *tokens, uint32_t *pos, uint8_t *mask, char *why,
                    size_t whylen);
    void (*close)(void *ctx);
    char desc[256]; /* human description (path) for messages */
    /* Optional (NULL: none). where: names the file and row that hold row i
     * of a split ("shard DIR/x.mks row 17"), for messages. set_dir: the
     * shard set's folder (valid until close), so that no output is written
     * into it or over one of its files (ds_check_output). */
    void (*where)(void *ctx, int split, uint64_t i, char *buf, size_t len);
    const char *set_dir;
    /* Message of the last failed read per split, written by the reader of
     * that split only (loader thread: train; validation: val); "" if none. */
    char read_err[2][512];
} tr_rows;

/* Limits on what a row source may declare (a hostile manifest cannot make
 * the trainer allocate more): tokens per row and vocabulary size. */
#define TR_MAX_ROW_LEN (1u << 24)
#define TR_MAX_VOCAB (1u << 24)
/* Longest T the model is trained on (--seq-len; rows may be longer and are
 * cut): keeps every plan product (B x L x NH x T^2 ...) inside 64 bits. */
#define TR_MAX_SEQ_LEN (1u << 20)
/* Longest schedule: an optimizer counts its steps in an int (train/optim.h, t). */
#define TR_MAX_STEPS 1000000000ull

/* In-memory rows (tests, synthetic data): tokens/pos/mask are n_train+n_val
 * rows of row_len, train rows first; pos/mask may be NULL (pos = j, mask = 1).
 * The arrays are copied. */
int tr_rows_mem(tr_rows *out, uint64_t n_train, uint64_t n_val, int row_len, uint32_t vocab_size,
                const uint32_t *tokens, const uint32_t *pos, const uint8_t *mask);
/* Open a shard set directory (manifest written by `mkshards build`).
 * TR_ERR_CORRUPT with a message in err for corrupt shards, a row length over
 * TR_MAX_ROW_LEN or a vocabulary over TR_MAX_VOCAB. Every row read is
 * checked by the loader: an id >= vocab_size fails with TR_ERR_CORRUPT and
 * read_err naming the shard file and its row. */
int tr_rows_open_shards(tr_rows *out, const char *dir, char *err, size_t errlen);
/* verify = 0: only the cheap checks on open (header, sizes, manifest
 * agreement); tr_rows_open_shards hashes every file (verify = 1). */
int tr_rows_open_shards_ex(tr_rows *out, const char *dir, int verify, char *err, size_t errlen);
void tr_rows_close(tr_rows *r);

/* ================================================================ loader
 * Rows are cut to seq_len T <= row_len: inputs are tokens[0..T), targets
 * tokens[1..T] (a target beyond the row, T == row_len, carries no loss).
 * Background thread, nbuf >= 2 host buffers (pinned on the GPU backend via
 * the alloc/free hooks), deterministic order for a seed, epochs, exact
 * resume. The stream is a sequence of optimiser steps; step s consists of
 * rows_per_step rows cut into micro-batches of at most micro_rows rows
 * (the last one may be shorter). Every micro-batch has rows * seq_len <=
 * micro_rows * seq_len tokens. Row order: epoch e visits every train row
 * once in a pseudo-random permutation keyed by (seed, e); the loader
 * position is the number of rows consumed so far. */
typedef struct {
    int seq_len;       /* T: tokens per row fed to the model (T <= row_len) */
    int micro_rows;    /* B: max rows per micro-batch */
    int rows_per_step; /* R: rows per optimiser step */
    int nbuf;          /* host buffers (>= 2); 0 = 2 */
    uint64_t seed;
    uint64_t start_row;                       /* resume position: rows consumed before */
    int doc_mask;                             /* 1: pos/seg restart at document boundaries */
    int shuffle;                              /* 1 (default via tr_loader_opts_init): permute rows per epoch */
    void *(*alloc)(size_t bytes, void *user); /* NULL: malloc */
    void (*free)(void *p, void *user);
    void *alloc_user;
} tr_loader_opts;
void tr_loader_opts_init(tr_loader_opts *o);

/* One micro-batch, rows x T, row-major. */
typedef struct {
    int rows, T;
    uint32_t *inputs;   /* [rows*T] */
    int32_t *targets;   /* [rows*T] next token, -1 where the target carries no loss */
    uint8_t *tmask;     /* [rows*T] 1: this target carries loss */
    int32_t *pos;       /* [rows*T] position ids (restart per document with doc_mask) */
    int32_t *seg;       /* [rows*T] document index within the row (0 everywhere without doc_mask) */
    uint64_t n_targets; /* sum of tmask */
    uint64_t step;      /* optimiser step index (0-based, since the start of the run) */
    int micro, n_micro; /* index of this micro-batch in its step, micro-batches in the step */
    uint64_t first_row; /* loader position of this batch's first row */
} tr_batch;

/* Bytes one host buffer takes for micro_rows x seq_len (what the planner
 * counts, per buffer). */
size_t tr_loader_buffer_bytes(int micro_rows, int seq_len);

typedef struct tr_loader tr_loader;
int tr_loader_open(tr_rows *rows, const tr_loader_opts *o, tr_loader **out);
/* Next micro-batch (blocks until ready); valid until tr_loader_release.
 * *wait_s (may be NULL) gets the seconds spent waiting for the producer. */
int tr_loader_next(tr_loader *l, const tr_batch **b, double *wait_s);
void tr_loader_release(tr_loader *l);
/* Position (rows consumed by released batches): checkpoint this. */
uint64_t tr_loader_position(const tr_loader *l);
void tr_loader_close(tr_loader *l);

/* Validation rows (synchronous): fill b (allocated by tr_batch_alloc) with
 * val rows [first, first + rows), wrapping. */
int tr_batch_alloc(tr_batch *b, int rows, int T);
void tr_batch_free(tr_batch *b);
int tr_fill_rows(tr_rows *src, int split, uint64_t first, int rows, int T, int doc_mask, tr_batch *b,
                 uint32_t *scratch_tok, uint32_t *scratch_pos, uint8_t *scratch_mask);

/* Train row visited at loader position p (epoch p / n, permuted). */
uint64_t tr_row_at(uint64_t p, uint64_t n, uint64_t seed, int shuffle);

/* ================================================================ planner
 * Pure function: no allocation, no I/O. See docs/memory-plan.md for the
 * table the CUDA backend follows when it carves its single device arena. */
typedef enum { TR_DEV_CPU = 0, TR_DEV_CUDA = 1 } tr_device;
typedef enum { TR_FP32 = 0, TR_BF16 = 1, TR_FP16 = 2 } tr_precision;
/* Recompute levels (GPU): 0 none (the attention never stores its
 * probabilities: flash-style, at every level), 1 the GELU output is
 * recomputed from the fc output in backward, 2 keep only each block's input
 * (whole block recomputed). The CPU reference stores everything (level 0).
 * The planner sizes all three; the CUDA backend runs levels up to
 * TR_GPU_RECOMPUTE_MAX (it refuses the others), and a refused plan's advice
 * names only levels it runs. */
#define TR_GPU_RECOMPUTE_MAX 1

typedef struct {
    int n_layer, n_head, n_embd, max_seq; /* model config */
    uint32_t vocab_size;                  /* as stored (may be padded) */
    int seq_len;                          /* T */
    uint64_t token_budget;                /* max rows*T per micro-batch; 0 = unlimited */
    uint64_t batch_tokens;                /* tokens per optimiser step */
    uint64_t mem_budget;                  /* bytes; 0 = unlimited (CPU) / device memory (GPU) */
    tr_device device;
    tr_precision precision;
    int recompute; /* 0, 1, 2 */
    int nbuf;      /* loader buffers (0 = 2) */
    int doc_mask;
    int force_micro_rows; /* >0: evaluate exactly this B (no search) */
    int cpu_threads;      /* kernel threads (CPU workspaces); 0 = 1 */
    int world;            /* data-parallel ranks (0 = 1): the plan is per rank */
    int zero;             /* 1: ZeRO-1, the optimizer's state (and mixed-precision master weights) sharded */
    const char *optim;    /* the optimizer whose state is counted (tr_optim_name); NULL: the default */
    /* Another model family than GPT-2 (issue 30): model_family != 0 and
     * model_cfg holds its whole configuration, a tr_model_config
     * (train/model.h, train/family.h) by value; n_layer, n_head, n_embd,
     * max_seq mirror it. 0: GPT-2 of the shape above. */
    int model_family;
    uint64_t model_cfg[40];
} tr_plan_in;

enum { TR_PLAN_MAX_ITEMS = 32 };
typedef struct {
    const char *name;
    uint64_t bytes;    /* total for the chosen micro-batch */
    uint64_t per_row;  /* part of bytes that scales with rows (0 = fixed) */
    const char *where; /* "host" or "device" */
} tr_plan_item;

typedef struct {
    int fits;               /* 1: the plan fits both budgets */
    int micro_rows;         /* B chosen */
    int rows_per_step;      /* R */
    int n_micro;            /* ceil(R / B) */
    uint64_t micro_tokens;  /* B*T */
    uint64_t step_tokens;   /* R*T */
    uint64_t fixed_bytes;   /* total that does not depend on B */
    uint64_t per_row_bytes; /* bytes per micro-batch row */
    uint64_t total_bytes;   /* total for the chosen B on the budgeted side */
    uint64_t host_bytes, device_bytes;
    uint64_t budget; /* effective memory budget (0 = none) */
    uint64_t params; /* parameter count */
    int n_items;
    tr_plan_item items[TR_PLAN_MAX_ITEMS];
    int rank_micro;    /* micro-batches per step of the busiest rank (world > 1) */
    char reason[512];  /* why it does not fit */
    char advice[1024]; /* what would make it fit */
} tr_plan_out;

int tr_plan(const tr_plan_in *in, tr_plan_out *out);
/* Human table / JSON. */
/* The largest mem_budget a GPU with free_bytes free (read after its CUDA
 * context exists) can honour: the plan counts the context as a fixed line
 * outside the arena, so the arena must fit in what is free, less what the
 * process still maps after the probe (lazily loaded kernels, library
 * handles: +21 MiB measured on an H200) with a margin.  A budget above this
 * (nvidia-smi's total, say: 143771 MiB on an H200, of which CUDA can give
 * 143157 MiB) would plan an arena that cudaMalloc refuses. */
uint64_t tr_plan_device_capacity(uint64_t free_bytes);
void tr_plan_print(FILE *f, const tr_plan_in *in, const tr_plan_out *out);
void tr_plan_print_json(FILE *f, const tr_plan_in *in, const tr_plan_out *out);
/* The one spelling of tr_precision and tr_device (--precision, --device, the
 * plan's table and JSON): *_name(v) the name, NULL past the last value;
 * *_parse(name, &v) 0 with v set, -1 for an unknown name ("gpu" is taken
 * for "cuda"). ds_names_list (ds.h) lists them for a message. */
const char *tr_precision_name(int p);
int tr_precision_parse(const char *name, tr_precision *out);
const char *tr_device_name(int d);
int tr_device_parse(const char *name, tr_device *out);
/* The optimizers of this build (train/optims.c.in, TR_OPTIMIZERS; the first
 * is the default): the i-th one's name, NULL past the last. */
const char *tr_optim_name(int i);

/* Named model configs: tiny, d12, d24, d36, d48. */
int tr_model_preset(const char *name, int *n_layer, int *n_head, int *n_embd);

/* ================================================================ schedule */
/* Linear warmup to lr_max over warmup steps, cosine decay to lr_min at
 * total steps. */
double tr_lr_at(uint64_t step, uint64_t warmup, uint64_t total, double lr_max, double lr_min);

/* ================================================================ rng */
typedef struct {
    uint64_t s[4];
} tr_rng;
void tr_rng_seed(tr_rng *r, uint64_t seed);
uint64_t tr_rng_u64(tr_rng *r);
double tr_rng_f64(tr_rng *r); /* [0, 1) */

/* ================================================================ checkpoints
 * One file per checkpoint, written to DIR/ckpt.tmp, fsynced and renamed to
 * DIR/ckpt.bin (atomic: a crash leaves the previous checkpoint intact). The
 * payload is checksummed (XXH64); a bad checksum is TR_ERR_CORRUPT. */
typedef struct {
    uint64_t step;       /* optimiser steps done */
    uint64_t loader_pos; /* rows consumed */
    uint64_t seed;
    tr_rng rng;
    uint8_t fingerprint[32];
    int n_layer, n_head, n_embd, max_seq, seq_len;
    uint32_t vocab_size;
    uint64_t n_sections;
} tr_ckpt_meta;

typedef struct {
    const char *name;
    void *data;
    uint64_t bytes;
} tr_ckpt_section;

int tr_ckpt_save(const char *dir, const tr_ckpt_meta *m, const tr_ckpt_section *s, int n, char *err, size_t errlen);
/* Sections not held in one buffer (ZeRO-1: the optimizer's state in shards
 * over the ranks): io[i].fn set replaces s[i].data. Save calls fn(ctx, off, &len)
 * for the bytes at offset off and writes the *len bytes (1 .. bytes - off)
 * it returns a pointer to (NULL: failure, the save fails); load calls it
 * for where bytes [off, off + *len) go (fn may lower *len; a scratch
 * pointer skips them). Calls cover the section in increasing off; save
 * makes every call even after a write error, so whoever serves the bytes is
 * never left waiting. io NULL: tr_ckpt_save / tr_ckpt_load. On load,
 * s[i].data NULL without fn reads (and checksums) the section without
 * storing it. */
typedef struct {
    void *(*fn)(void *ctx, uint64_t off, uint64_t *len);
    void *ctx;
} tr_ckpt_io;
int tr_ckpt_save_io(const char *dir, const tr_ckpt_meta *m, const tr_ckpt_section *s, const tr_ckpt_io *io, int n,
                    char *err, size_t errlen);
int tr_ckpt_load_io(const char *dir, tr_ckpt_meta *m, tr_ckpt_section *s, const tr_ckpt_io *io, int n, char *err,
                    size_t errlen);
/* Load DIR/ckpt.bin into preallocated sections (names and sizes must match).
 * meta may be read first with s == NULL, n == 0. A checkpoint is untrusted:
 * only a regular file is opened (a FIFO is refused without blocking), the
 * header fields are range-checked (model shape, at most TR_CKPT_MAX_SECTIONS
 * sections, step <= TR_MAX_STEPS), the section sizes are summed with
 * overflow checks and the file size must equal exactly what the header
 * describes (no trailing bytes) before any payload is read; nothing is
 * allocated from header values. The meta-only call checks all of that but
 * not the payload checksum (the full load does). TR_ERR_IO: cannot open /
 * not a regular file; TR_ERR_CORRUPT: anything else wrong. */
#define TR_CKPT_MAX_SECTIONS 16
int tr_ckpt_load(const char *dir, tr_ckpt_meta *m, tr_ckpt_section *s, int n, char *err, size_t errlen);
/* The same on the file PATH itself. */
int tr_ckpt_load_path(const char *path, tr_ckpt_meta *m, tr_ckpt_section *s, int n, char *err, size_t errlen);

/* ================================================================ training
 * The whole CPU training run behind llmtrain. Messages (one line, say what
 * to do) go to err; per-step lines to opts.out, JSON lines to opts.log_path. */
typedef struct {
    const char *data_dir;  /* shard set (or rows != NULL) */
    tr_rows *rows;         /* borrowed row source (tests); NULL: open data_dir */
    const char *model;     /* tiny|d12|d24|d36|d48 */
    int seq_len;           /* T (0: the rows' length) */
    uint64_t steps;        /* optimiser steps (schedule length) */
    uint64_t stop_after;   /* >0: stop (checkpointing) after this step, as if interrupted */
    uint64_t token_budget; /* max rows*T per micro-batch (0: batch_tokens) */
    uint64_t batch_tokens; /* tokens per optimiser step */
    uint64_t mem_budget;   /* bytes, 0 = unlimited */
    tr_precision precision;
    tr_device device;
    int recompute;
    uint64_t seed;
    double lr, lr_min; /* lr_min < 0: lr / 10 */
    uint64_t warmup;   /* UINT64_MAX: automatic (steps / 20, >= 1) */
    float weight_decay, grad_clip, beta1, beta2, eps;
    const char *log_path; /* JSONL, one object per step */
    const char *ckpt_dir;
    uint64_t ckpt_every; /* 0: only at the end / stop */
    int resume;
    uint64_t val_every; /* 0: never */
    int val_rows;       /* rows per validation (0: min(n_val, 8 micro-batches)) */
    int doc_mask;
    int nbuf;
    int no_verify;         /* 1: skip hashing the shard files on open */
    const char *tokenizer; /* for --sample decoding and the fingerprint check */
    int sample_tokens;     /* 0: no sample */
    float sample_temp;
    int log_every; /* print every K steps (1) */
    int quiet;
    FILE *out; /* step lines (stdout) */
    /* Data parallelism (train/dist.h, docs/cluster.md): comm is a tr_comm *
     * (train/comm.h), NULL = the process's (mpirun/srun) or world 1; zero 1:
     * ZeRO-1 (the optimiser update sharded over the ranks). */
    void *comm;
    int zero;
    const char *optim;      /* --optim: a name of tr_optim_name's list; NULL: the first (the default) */
    const char *init_from;  /* --init-from: a Hugging Face folder whose config.json and weights start the
                                 run (train/hf_import.h); NULL: --model, random init */
    const char *export_dir; /* --export: a Hugging Face folder written at the end (train/export.h) */
    uint64_t export_every;  /* --export-every K: also every K steps (0: only at the end) */
    int export_bf16;        /* --export-dtype bf16 */
} tr_train_opts;
void tr_train_opts_init(tr_train_opts *o);

typedef struct {
    uint64_t steps_done; /* steps completed in this process */
    uint64_t last_step;  /* global step count at the end */
    double first_loss, last_loss, last_val_loss;
    double last_grad_norm; /* pre-clip norm of the last step's (token-normalised) gradient */
    double mean_wait_s, total_wait_s;
    uint64_t max_micro_tokens;       /* largest rows*T fed to the model */
    uint64_t baseline_rss, peak_rss; /* VmRSS before allocating, VmHWM at the end */
    tr_plan_in plan_in;
    tr_plan_out plan;
} tr_train_result;
/* TR_ERR_NOFIT: the plan (res->plan) does not fit; nothing was allocated. */
int tr_train(const tr_train_opts *o, tr_train_result *res, char *err, size_t errlen);

/* ================================================================ threads */
/* The CPU kernels' OpenMP threads: at most TR_MAX_THREADS. OpenMP's runtime
 * starts a team of OMP_NUM_THREADS threads at its first parallel region, and
 * libgomp overflowed its stack there at 100000 (issue 32); above the bound
 * the count is the CPUs this process may run on, as for an unset variable. */
#define TR_MAX_THREADS 4096
/* The count a fresh process runs with (no OpenMP runtime needed: `mkshards
 * plan`); *over (may be NULL): OMP_NUM_THREADS's first value when it is a
 * number above TR_MAX_THREADS (LONG_MAX if it overflowed), else 0. */
int tr_threads_default(long *over);
/* Bounds the OpenMP runtime's thread count (of the calling thread, before its
 * first parallel region) to TR_MAX_THREADS: above it, omp_set_num_threads(
 * tr_threads_default()). Returns the count. tr_train calls it first; a
 * caller running the kn kernels itself calls it before them. */
int tr_threads_bound(void);

/* The llmtrain command line (plan_only = 1: only --plan is possible).
 * Returns the exit status: 0 ok, 1 failure, 2 bad input/data/device,
 * 3 plan does not fit, 64 usage. */
int tr_cli_main(const char *prog, int argc, char **argv, int plan_only);
/* `mkshards plan`: tr_cli_main(prog, argc, argv, 1) without linking the
 * training run (tr_train, the communicator, MPI) into the caller. */
int tr_plan_cli_main(const char *prog, int argc, char **argv);

/* The process's launcher communicator (train/dist.c, docs/cluster.md): a
 * program that trains (llmtrain's main) calls tr_dist_init before anything
 * else (MPI when started by mpirun / srun, world 1 otherwise: then nothing
 * changes) and exits with tr_dist_finish(its status); tr_train takes this
 * communicator unless tr_train_opts.comm names another.
 * tr_dist_init: open it (idempotent); 0, or nonzero with err set.
 * tr_dist_finish: returns the status to exit with. 0: close the communicator
 * (MPI_Finalize). Else, with more than one rank: when every rank fails alike
 * within TR_DIST_EXIT_AGREE_S (the same refusal) they agree on the highest
 * status and close; otherwise the whole job ends with MPI_Abort(status), so
 * no rank waits for this one. Either way the launcher (Open MPI's mpirun)
 * exits with the documented status (2, 3, 64) that the same command gives
 * alone, not 1. */
#define TR_DIST_EXIT_AGREE_S 5.0
int tr_dist_init(char *err, size_t errlen);
int tr_dist_finish(int status);

/* ================================================================ memory */
/* Peak resident set (VmHWM) and current resident set (VmRSS) in bytes, 0 if
 * unknown. */
uint64_t tr_peak_rss(void);
uint64_t tr_cur_rss(void);
/* Parse "123", "64M", "2GiB", "1.5G" (binary units), strictly: digits with an
 * optional fraction and unit, nothing else; TR_ERR_ARG when the value does
 * not fit in 64 bits. */
int tr_parse_bytes(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
