/* tr_cli_run.c - `llmtrain` without --plan: the training run (tr_train's
 * status -> message and exit status). Apart from tr_cli.c so that
 * `mkshards plan` (tr_plan_cli_main) does not link the trainer, MPI or
 * OpenMP's runtime: each costs start-up time in every mkshards command. */
#include "tr.h"

#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "export.h"
#include "kn.h"
#include "tr_cli_internal.h"

/* llmtrain --plan --device cuda: where this build has the CUDA backend and
 * the machine a GPU, the budget is what training would use (the device's
 * memory, lowered to what it can give now: tr_backend_budget, as the run
 * does), so the rows --plan prints are rows that train. */
static int plan_gpu_budget(const tr_train_opts *o, int json, uint64_t *budget) {
    const tr_backend_ops *ops = tr_backend_find(TR_DEV_CUDA);
    tr_backend_info info;
    char err[512];
    if (!ops || ops->probe(o, &info, err, sizeof err) != TR_OK) return -1;
    *budget = tr_backend_budget(&info, *budget, json ? NULL : stdout);
    return 0;
}

/* The training run: tr_train's status -> message and exit status. */
static int train_cli(const char *prog, const cli_args *a) {
    const tr_train_opts *o = &a->o;
    if (a->world)
        return tr_cli_uerr(prog, "%s",
                           "--world is a --plan option: a run's world size is the launcher's (mpirun -np N, "
                           "srun; docs/cluster.md)");
    if (!o->data_dir) return tr_cli_uerr(prog, "%s", "missing --data DIR (a shard set from 'mkshards build')");
    if (o->resume && !o->ckpt_dir) return tr_cli_uerr(prog, "%s", "--resume needs --ckpt-dir");
    tr_train_result res;
    char err[1024];
    int rc = tr_train(o, &res, err, sizeof err);
    if (rc == TR_OK) return X_OK;
    if (rc == TR_ERR_NOFIT) {
        tr_plan_print(stderr, &res.plan_in, &res.plan);
        fprintf(stderr, "%s: refusing to start: %s; would fit with: %s\n", prog, res.plan.reason, res.plan.advice);
        return X_NOFIT;
    }
    fprintf(stderr, "%s: %s\n", prog, err[0] ? err : tr_strerror(rc));
    switch (rc) {
    case TR_ERR_CORRUPT:
    case TR_ERR_FINGERPRINT:
    case TR_ERR_NODEVICE:
    case TR_ERR_DATA:
    case TR_ERR_IO: return X_INPUT;
    case TR_ERR_ARG: return X_USAGE;
    default: return X_FAIL;
    }
}

int tr_cli_main(const char *prog, int argc, char **argv, int plan_only) {
    if (!plan_only && argc > 1 && !strcmp(argv[1], "export")) /* llmtrain export (train/export.h) */
        return tr_cli_export(prog, argc - 1, argv + 1);
    cli_args a;
    int x = tr_cli_parse(prog, argc, argv, plan_only, &a);
    if (x >= 0) return x;
    tr_cli_threads(prog); /* the warning over TR_MAX_THREADS */
    a.cpu_threads = tr_threads_bound();
    return a.plan ? tr_cli_plan(prog, &a, plan_gpu_budget) : train_cli(prog, &a);
}
