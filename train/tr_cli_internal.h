/* tr_cli_internal.h - shared by tr_cli.c (options, --plan) and
 * tr_cli_run.c (the training run). */
#ifndef TR_CLI_INTERNAL_H
#define TR_CLI_INTERNAL_H

#include <stdint.h>

#include "tr.h"

enum { X_OK = 0, X_FAIL = 1, X_INPUT = 2, X_NOFIT = 3, X_USAGE = 64 };

/* The parsed command line: training options plus what only the CLI uses. */
typedef struct {
    tr_train_opts o;
    int plan, json, sample;
    uint64_t vocab, world, zero;
    int cpu_threads; /* the CPU kernels' threads, for the plan: set by the caller after tr_cli_parse */
} cli_args;

/* "PROG: " + fmt (one %s: a) on stderr; returns X_USAGE. */
int tr_cli_uerr(const char *prog, const char *fmt, const char *a);
/* An exported model's dtype (--export-dtype, export --dtype): fp32 or bf16
 * by the precision names' one table (tr_precision_parse); fp16 and anything
 * else is a usage error naming the option. 0 with *bf16 set, or X_USAGE. */
int tr_cli_export_dtype(const char *prog, const char *option, const char *arg, int *bf16);
/* -1: go on with a; otherwise the exit status (help printed: 0). */
int tr_cli_parse(const char *prog, int argc, char **argv, int plan_only, cli_args *a);
/* --device cuda's budget for --plan: lowers (or, when 0, sets) *budget to
 * what the machine's GPU can give; 0 when it probed a GPU, -1 when there is
 * none (then --plan assumes 80 GiB unless --mem-budget was given). */
typedef int (*tr_cli_gpu_budget_fn)(const tr_train_opts *o, int json, uint64_t *budget);
/* --plan: print the plan; 0 fits, 3 does not.  gpu_budget: NULL in `mkshards
 * plan` (which must not link the backends: cudart and cuBLASLt cost ~50 ms of
 * start-up in every mkshards command of a CUDA build), llmtrain's probe
 * (tr_cli_run.c) in `llmtrain --plan`. */
int tr_cli_plan(const char *prog, const cli_args *a, tr_cli_gpu_budget_fn gpu_budget);
/* tr_threads_default (what omp_get_max_threads() answers once tr_threads_bound
 * has run), warning on stderr when OMP_NUM_THREADS is above TR_MAX_THREADS. */
int tr_cli_threads(const char *prog);

#endif
