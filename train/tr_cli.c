/* tr_cli.c - the llmtrain command line (also `mkshards plan`): option
 * parsing and --plan; the training run is in tr_cli_run.c, so that a
 * program that only plans (mkshards) links neither the trainer nor MPI.
 * Returns the process exit status:
 *   0 ok / plan fits, 1 runtime failure, 2 bad input (corrupt shard, wrong
 *   tokenizer, missing file, --device cuda unavailable), 3 plan does not fit,
 *   64 usage error. */
#include "tr.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "family.h"
#include "kn.h"
#include "model.h"
#include "tr_cli_internal.h"

static const char *usage_text =
    "Usage: %s --data DIR --model tiny|d12|d24|d36|d48 --seq-len L --steps N\n"
    "          --token-budget N --batch-tokens M [options]\n"
    "       %s --plan [same options] [--mem-budget BYTES|NGiB] [--json]\n"
    "\n"
    "Trains a GPT-2 on a shard set (mkshards build) without ever exceeding the\n"
    "memory it planned before step 1.\n"
    "\n"
    "Data and batch:\n"
    "  --data DIR            shard set (manifest.json + shards); every file's checksum is\n"
    "                        verified on open (--no-verify: header/size checks only)\n"
    "  --seq-len L           tokens per row fed to the model (default: the rows' length)\n"
    "  --token-budget N      max tokens per micro-batch: rows x L <= N, always\n"
    "  --batch-tokens M      tokens per optimiser step (gradient accumulation)\n"
    "  --doc-mask            attention does not cross documents; positions restart\n"
    "  --nbuf K              loader host buffers (default 2)\n"
    "Model and optimiser:\n"
    "  --model NAME          tiny, d12, d24, d36, d48 (default tiny)\n"
    "  --init-from DIR       start from a Hugging Face folder (GPT-2 family: config.json defines\n"
    "                        the model, safetensors weights, its tokenizer = the shards'; fresh optimizer)\n"
    "  --steps N             optimiser steps (default 100)\n"
    "  --lr X  --lr-min X    peak / final learning rate (1e-3, lr/10), warmup + cosine\n"
    "  --warmup N            warmup steps (default steps/20)\n"
    "  --weight-decay X      AdamW decay on 2-D weights (0.1; none on biases/norms)\n"
    "  --grad-clip X         global gradient norm clip (1.0; 0 = off)\n"
    "  --optim NAME          the optimizer: %s (this build's; the first is the default)\n"
    "  --seed S              init, data order and sampling seed (1337)\n"
    "Device and memory:\n"
    "  --device cpu|cuda     (cuda: exit 2 when this build or machine has none)\n"
    "  --precision fp32|bf16|fp16\n"
    "  --recompute 0|1|2     GPU activation recompute (1: GELU output; 2: planned only)\n"
    "  --mem-budget SIZE     memory budget (bytes or 64M / 2GiB); default none on\n"
    "                        the CPU, 80GiB for --device cuda\n"
    "  --plan                print the memory plan and exit (0 fits, 3 does not)\n"
    "  --json                plan as JSON\n"
    "  --world N             plan one rank of N data-parallel ranks (a run's N is the\n"
    "                        launcher's: mpirun -np N llmtrain ..., srun; docs/cluster.md)\n"
    "  --zero 0|1            ZeRO-1 with more than one rank: the optimizer update sharded over\n"
    "                        the ranks (plan and run)\n"
    "  --vocab-size V        vocabulary for --plan without --data (50257)\n"
    "Checkpoints, logs, evaluation:\n"
    "  --log FILE            JSON lines, one per step (step, loss, tokens, lr, ...)\n"
    "  --log-every K         print every K-th step (1)\n"
    "  --ckpt-dir DIR  --ckpt-every K  --resume\n"
    "  --export DIR          write a Hugging Face folder at the end (llmtrain export --help)\n"
    "  --export-every K      ... and every K steps  --export-dtype fp32|bf16 (fp32)\n"
    "  --val-every K  --val-rows N\n"
    "  --sample [N]          print N generated tokens at the end (default 200)\n"
    "  --tokenizer SPEC      decode samples; must match the shards' fingerprint\n"
    "  --quiet\n"
    "\n"
    "\n"
    "Numbers are checked whole and in range, else exit 64 naming the option:\n"
    "  --steps 1..1000000000, --warmup 0..steps, --lr (0, 10], --lr-min [0, lr],\n"
    "  --seq-len 1..1048576, --token-budget/--batch-tokens 1..2^40, --mem-budget <= 1 EiB,\n"
    "  --weight-decay [0, 10], --grad-clip [0, 1e6], --nbuf 2..64, --val-rows 0..2^24.\n"
    "--log and --ckpt-dir never lie inside the data folder or name one of its files\n"
    "(manifest, shards, rejects.jsonl), the tokenizer or its sidecar, and --log is never\n"
    "the checkpoint: refused with exit 64 before anything is written.\n"
    "\n"
    "Exit codes: 0 ok, 1 failure, 2 bad input/data/device, 3 plan does not fit, 64 usage.\n";

int tr_cli_uerr(const char *prog, const char *fmt, const char *a) {
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\nTry '%s --help' for the list of options.\n", prog);
    return X_USAGE;
}

int tr_cli_export_dtype(const char *prog, const char *option, const char *arg, int *bf16) {
    tr_precision p;
    if (tr_precision_parse(arg, &p) == 0 && (p == TR_FP32 || p == TR_BF16)) {
        *bf16 = p == TR_BF16;
        return 0;
    }
    char fmt[96];
    snprintf(fmt, sizeof fmt, "%s takes fp32 or bf16, not '%%s'", option);
    return tr_cli_uerr(prog, fmt, arg);
}

/* Strict numbers: the whole string, digits only for integers (no sign,
 * space, hex or exponent surprises), no ERANGE, finite floats, and each
 * option's documented range; a refusal names the option and the value. */
static int pu64(const char *prog, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    int digits = s && *s;
    for (const char *p = s; digits && *p; p++) digits = *p >= '0' && *p <= '9';
    errno = 0;
    unsigned long long v = digits ? strtoull(s, NULL, 10) : 0;
    if (!digits || errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "%s: %s '%s': want an integer %" PRIu64 "..%" PRIu64 "\n", prog, opt, s ? s : "", lo, hi);
        fprintf(stderr, "Try '%s --help' for the list of options.\n", prog);
        return X_USAGE;
    }
    *out = v;
    return 0;
}

/* lo_open: the value must be > lo (else >= lo). */
static int pdbl(const char *prog, const char *opt, const char *s, double lo, int lo_open, double hi, double *out) {
    char *e = NULL;
    errno = 0;
    double v = s && *s && !isspace((unsigned char)*s) ? strtod(s, &e) : NAN;
    if (!e || e == s || *e || errno == ERANGE || !isfinite(v) || (lo_open ? v <= lo : v < lo) || v > hi) {
        fprintf(stderr, "%s: %s '%s': want a finite number %s %g and <= %g\n", prog, opt, s ? s : "",
                lo_open ? ">" : ">=", lo, hi);
        fprintf(stderr, "Try '%s --help' for the list of options.\n", prog);
        return X_USAGE;
    }
    *out = v;
    return 0;
}

#define TB_MAX (1ull << 40)  /* --token-budget / --batch-tokens: tokens */
#define MEM_MAX (1ull << 60) /* --mem-budget: 1 EiB */

enum {
    O_DATA = 256,
    O_MODEL,
    O_SEQ,
    O_STEPS,
    O_TB,
    O_BT,
    O_PREC,
    O_DEV,
    O_SEED,
    O_LOG,
    O_CKD,
    O_CKE,
    O_RES,
    O_PLAN,
    O_MEM,
    O_JSON,
    O_REC,
    O_DOC,
    O_LR,
    O_LRMIN,
    O_WARM,
    O_WD,
    O_CLIP,
    O_VALE,
    O_VALR,
    O_SAMPLE,
    O_TOK,
    O_NBUF,
    O_STOP,
    O_LOGE,
    O_QUIET,
    O_VOCAB,
    O_NOVERIFY,
    O_HELP,
    O_WORLD,
    O_ZERO,
    O_OPTIM,
    O_INIT,
    O_EXP,
    O_EXPE,
    O_EXPD
};
static const struct option long_opts[] = {{"data", required_argument, 0, O_DATA},
                                          {"model", required_argument, 0, O_MODEL},
                                          {"seq-len", required_argument, 0, O_SEQ},
                                          {"steps", required_argument, 0, O_STEPS},
                                          {"token-budget", required_argument, 0, O_TB},
                                          {"batch-tokens", required_argument, 0, O_BT},
                                          {"precision", required_argument, 0, O_PREC},
                                          {"device", required_argument, 0, O_DEV},
                                          {"seed", required_argument, 0, O_SEED},
                                          {"log", required_argument, 0, O_LOG},
                                          {"ckpt-dir", required_argument, 0, O_CKD},
                                          {"ckpt-every", required_argument, 0, O_CKE},
                                          {"resume", no_argument, 0, O_RES},
                                          {"plan", no_argument, 0, O_PLAN},
                                          {"mem-budget", required_argument, 0, O_MEM},
                                          {"json", no_argument, 0, O_JSON},
                                          {"recompute", required_argument, 0, O_REC},
                                          {"doc-mask", no_argument, 0, O_DOC},
                                          {"lr", required_argument, 0, O_LR},
                                          {"lr-min", required_argument, 0, O_LRMIN},
                                          {"warmup", required_argument, 0, O_WARM},
                                          {"weight-decay", required_argument, 0, O_WD},
                                          {"grad-clip", required_argument, 0, O_CLIP},
                                          {"val-every", required_argument, 0, O_VALE},
                                          {"val-rows", required_argument, 0, O_VALR},
                                          {"sample", optional_argument, 0, O_SAMPLE},
                                          {"tokenizer", required_argument, 0, O_TOK},
                                          {"nbuf", required_argument, 0, O_NBUF},
                                          {"stop-after", required_argument, 0, O_STOP},
                                          {"log-every", required_argument, 0, O_LOGE},
                                          {"quiet", no_argument, 0, O_QUIET},
                                          {"vocab-size", required_argument, 0, O_VOCAB},
                                          {"no-verify", no_argument, 0, O_NOVERIFY},
                                          {"help", no_argument, 0, O_HELP},
                                          {"world", required_argument, 0, O_WORLD},
                                          {"zero", required_argument, 0, O_ZERO},
                                          {"optim", required_argument, 0, O_OPTIM},
                                          {"init-from", required_argument, 0, O_INIT},
                                          {"export", required_argument, 0, O_EXP},
                                          {"export-every", required_argument, 0, O_EXPE},
                                          {"export-dtype", required_argument, 0, O_EXPD},
                                          {0, 0, 0, 0}};

static void print_help(const char *prog, int plan_only) {
    char names[128]; /* the optimizers of this build */
    if (plan_only)
        printf("Usage: %s --model tiny|d12|d24|d36|d48 --seq-len L --token-budget N --batch-tokens M\n"
               "          [--data DIR | --vocab-size V] [--device cpu|cuda] [--precision fp32|bf16|fp16]\n"
               "          [--recompute 0|1|2] [--mem-budget BYTES|NGiB] [--nbuf K] [--json]\n"
               "          [--world N] [--zero 0|1] [--optim NAME]\n\n"
               "The trainer's memory plan (same as llmtrain --plan): exact bytes per item, the\n"
               "largest micro-batch under the token and memory budgets. Table: docs/memory-plan.md.\n"
               "Exit codes: 0 fits, 3 does not fit (with the reasons and what would fit),\n"
               "2 unreadable shard set, 64 usage.\n",
               prog);
    else printf(usage_text, prog, prog, ds_names_list(tr_optim_name, names, sizeof names));
}

/* One option c (getopt_long's optarg / optind); 0, or the exit status of
 * a refusal (named option and value). */
static int set_option(const char *prog, cli_args *a, int c, int argc, char **argv) {
    tr_train_opts *o = &a->o;
    uint64_t u;
    double d;
    int r = 0;
    char names[64], msg[128]; /* an enum's names and the usage message naming them */
    switch (c) {
    case O_DATA: o->data_dir = optarg; break;
    case O_MODEL: o->model = optarg; break;
    case O_SEQ:
        r = pu64(prog, "--seq-len", optarg, 1, TR_MAX_SEQ_LEN, &u);
        o->seq_len = (int)u;
        break;
    case O_STEPS: r = pu64(prog, "--steps", optarg, 1, TR_MAX_STEPS, &o->steps); break;
    case O_TB: r = pu64(prog, "--token-budget", optarg, 1, TB_MAX, &o->token_budget); break;
    case O_BT: r = pu64(prog, "--batch-tokens", optarg, 1, TB_MAX, &o->batch_tokens); break;
    case O_PREC:
        if (tr_precision_parse(optarg, &o->precision)) {
            snprintf(msg, sizeof msg, "unknown --precision '%%s' (%s)",
                     ds_names_list(tr_precision_name, names, sizeof names));
            r = tr_cli_uerr(prog, msg, optarg);
        }
        break;
    case O_DEV:
        if (tr_device_parse(optarg, &o->device)) {
            snprintf(msg, sizeof msg, "unknown --device '%%s' (%s)",
                     ds_names_list(tr_device_name, names, sizeof names));
            r = tr_cli_uerr(prog, msg, optarg);
        }
        break;
    case O_SEED: r = pu64(prog, "--seed", optarg, 0, UINT64_MAX, &o->seed); break;
    case O_OPTIM: {
        int i = 0;
        while (tr_optim_name(i) && strcmp(tr_optim_name(i), optarg)) i++;
        if (!tr_optim_name(i)) {
            snprintf(msg, sizeof msg, "unknown --optim '%%s' (%s)", ds_names_list(tr_optim_name, names, sizeof names));
            r = tr_cli_uerr(prog, msg, optarg);
        }
        o->optim = optarg;
        break;
    }
    case O_INIT: o->init_from = optarg; break;
    case O_EXP: o->export_dir = optarg; break;
    case O_EXPE: r = pu64(prog, "--export-every", optarg, 0, TR_MAX_STEPS, &o->export_every); break;
    case O_EXPD: r = tr_cli_export_dtype(prog, "--export-dtype", optarg, &o->export_bf16); break;
    case O_LOG: o->log_path = optarg; break;
    case O_CKD: o->ckpt_dir = optarg; break;
    case O_CKE: r = pu64(prog, "--ckpt-every", optarg, 0, TR_MAX_STEPS, &o->ckpt_every); break;
    case O_RES: o->resume = 1; break;
    case O_PLAN: a->plan = 1; break;
    case O_MEM:
        if (tr_parse_bytes(optarg, &o->mem_budget) || o->mem_budget > MEM_MAX)
            r = tr_cli_uerr(prog, "--mem-budget '%s': want bytes, or a number with K/M/G/T[iB], at most 1 EiB", optarg);
        break;
    case O_JSON: a->json = 1; break;
    case O_REC:
        r = pu64(prog, "--recompute", optarg, 0, 2, &u);
        o->recompute = (int)u;
        break;
    case O_DOC: o->doc_mask = 1; break;
    case O_LR: r = pdbl(prog, "--lr", optarg, 0, 1, 10, &o->lr); break;
    case O_LRMIN: r = pdbl(prog, "--lr-min", optarg, 0, 0, 10, &o->lr_min); break;
    case O_WARM: r = pu64(prog, "--warmup", optarg, 0, TR_MAX_STEPS, &o->warmup); break;
    case O_WD:
        r = pdbl(prog, "--weight-decay", optarg, 0, 0, 10, &d);
        o->weight_decay = (float)d;
        break;
    case O_CLIP:
        r = pdbl(prog, "--grad-clip", optarg, 0, 0, 1e6, &d);
        o->grad_clip = (float)d;
        break;
    case O_VALE: r = pu64(prog, "--val-every", optarg, 0, TR_MAX_STEPS, &o->val_every); break;
    case O_VALR:
        r = pu64(prog, "--val-rows", optarg, 0, 1u << 24, &u);
        o->val_rows = (int)u;
        break;
    case O_SAMPLE:
        a->sample = 200;
        if (!optarg && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
            optarg = argv[optind++]; /* --sample N */
        if (optarg) {
            r = pu64(prog, "--sample", optarg, 0, 1u << 20, &u);
            a->sample = (int)u;
        }
        break;
    case O_TOK: o->tokenizer = optarg; break;
    case O_NBUF:
        r = pu64(prog, "--nbuf", optarg, 2, 64, &u);
        o->nbuf = (int)u;
        break;
    case O_STOP: r = pu64(prog, "--stop-after", optarg, 0, TR_MAX_STEPS, &o->stop_after); break;
    case O_LOGE:
        r = pu64(prog, "--log-every", optarg, 1, TR_MAX_STEPS, &u);
        o->log_every = (int)u;
        break;
    case O_QUIET: o->quiet = 1; break;
    case O_NOVERIFY: o->no_verify = 1; break;
    case O_VOCAB: r = pu64(prog, "--vocab-size", optarg, 1, TR_MAX_VOCAB, &a->vocab); break;
    case O_WORLD: r = pu64(prog, "--world", optarg, 1, 1u << 20, &a->world); break;
    case O_ZERO:
        r = pu64(prog, "--zero", optarg, 0, 1, &a->zero);
        a->o.zero = (int)a->zero;
        break;
    case ':': return tr_cli_uerr(prog, "option '%s' needs a value", argv[optind - 1]);
    default: return tr_cli_uerr(prog, "unknown option '%s'", argv[optind - 1]);
    }
    return r;
}

/* -1: go on with a; otherwise the exit status (help printed: 0). */
int tr_cli_parse(const char *prog, int argc, char **argv, int plan_only, cli_args *a) {
    memset(a, 0, sizeof *a);
    tr_train_opts_init(&a->o);
    a->plan = plan_only;
    tr_train_opts *o = &a->o;
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
        if (c == 'h' || c == O_HELP) {
            print_help(prog, plan_only);
            return X_OK;
        }
        int r = set_option(prog, a, c, argc, argv);
        if (r) return r;
    }
    if (optind < argc) return tr_cli_uerr(prog, "unexpected argument '%s'", argv[optind]);
    o->sample_tokens = a->sample;
    if (o->warmup != UINT64_MAX && o->warmup > o->steps) {
        fprintf(stderr, "%s: --warmup %" PRIu64 " is longer than --steps %" PRIu64 "\n", prog, o->warmup, o->steps);
        return X_USAGE;
    }
    if (o->lr_min >= 0 && o->lr_min > o->lr) {
        fprintf(stderr, "%s: --lr-min %g is above --lr %g\n", prog, o->lr_min, o->lr);
        return X_USAGE;
    }
    if (o->export_every && !o->export_dir) return tr_cli_uerr(prog, "%s", "--export-every needs --export DIR");
    if (a->plan && o->init_from)
        return tr_cli_uerr(prog, "%s",
                           "--plan does not read --init-from's config.json yet: plan with the --model "
                           "of the same shape");
    if (o->batch_tokens && o->token_budget == 0) o->token_budget = o->batch_tokens;
    return -1;
}

/* --plan with --data: the shard set's vocabulary and row length (*T when
 * not given). -1: go on; otherwise the exit status. */
static int plan_rows(const char *prog, const tr_train_opts *o, uint32_t *V, int *T) {
    tr_rows rows;
    char e[512];
    int rc = tr_rows_open_shards_ex(&rows, o->data_dir, 0, e, sizeof e);
    if (rc) {
        fprintf(stderr, "%s: cannot use shard set %s: %s\n", prog, o->data_dir, e);
        return X_INPUT;
    }
    *V = rows.vocab_size;
    if (!*T) *T = rows.row_len;
    int x = -1;
    if (*T > (int)TR_MAX_SEQ_LEN) {
        fprintf(stderr, "%s: rows in %s hold %d tokens, more than the trainer's %u: pass --seq-len\n", prog,
                o->data_dir, *T, TR_MAX_SEQ_LEN);
        x = X_INPUT;
    } else if (*T > rows.row_len) {
        fprintf(stderr, "%s: --seq-len %d: rows in %s hold %d tokens; use --seq-len <= %d\n", prog, *T, o->data_dir,
                rows.row_len, rows.row_len);
        x = X_INPUT;
    }
    tr_rows_close(&rows);
    return x;
}

/* --plan (and mkshards plan): print the plan; 0 fits, 3 does not. */
int tr_cli_plan(const char *prog, const cli_args *a, tr_cli_gpu_budget_fn gpu_budget) {
    const tr_train_opts *o = &a->o;
    tr_plan_in pi;
    memset(&pi, 0, sizeof pi);
    uint32_t V = a->vocab ? (uint32_t)a->vocab : 50257;
    int T = o->seq_len;
    if (o->data_dir) {
        int x = plan_rows(prog, o, &V, &T);
        if (x >= 0) return x;
    }
    if (!T) return tr_cli_uerr(prog, "%s needs --seq-len (or --data)", "--plan");
    char ferr[512];
    int frc = tr_family_plan_in(o->model, (int)V, T, &pi, ferr, sizeof ferr); /* any family, or a config.json */
    if (frc == TR_ERR_ARG) return tr_cli_uerr(prog, "%s", ferr);
    if (frc) {
        fprintf(stderr, "%s: %s\n", prog, ferr);
        return X_INPUT;
    }
    pi.vocab_size = V;
    pi.seq_len = T;
    pi.max_seq = T;
    pi.batch_tokens = o->batch_tokens ? o->batch_tokens : (uint64_t)T;
    pi.token_budget = o->token_budget ? o->token_budget : pi.batch_tokens;
    pi.mem_budget = o->mem_budget;
    pi.device = o->device;
    pi.precision = o->precision;
    pi.recompute = o->recompute;
    pi.nbuf = o->nbuf;
    pi.doc_mask = o->doc_mask;
    pi.cpu_threads = a->cpu_threads;
    pi.world = (int)a->world;
    pi.zero = (int)a->zero;
    pi.optim = o->optim;
    if (o->device == TR_DEV_CUDA && !(gpu_budget && gpu_budget(o, a->json, &pi.mem_budget) == 0) && !pi.mem_budget) {
        pi.mem_budget = 80ull << 30;
        if (!a->json) printf("note: no --mem-budget given and no GPU probed: assuming an 80 GiB device\n");
    }
    tr_plan_out po;
    int rc = tr_plan(&pi, &po);
    if (rc != TR_OK && rc != TR_ERR_NOFIT && po.reason[0]) /* the family's GPU model refuses the shape or level */
        return tr_cli_uerr(prog, "%s", po.reason);
    if (rc != TR_OK && rc != TR_ERR_NOFIT) return tr_cli_uerr(prog, "%s", "bad model/plan configuration");
    if (a->json) tr_plan_print_json(stdout, &pi, &po);
    else tr_plan_print(stdout, &pi, &po);
    if (!po.fits) {
        fprintf(stderr, "%s: plan does not fit: %s; would fit with: %s\n", prog, po.reason, po.advice);
        return X_NOFIT;
    }
    return X_OK;
}

int tr_plan_cli_main(const char *prog, int argc, char **argv) {
    cli_args a;
    int x = tr_cli_parse(prog, argc, argv, 1, &a);
    if (x >= 0) return x;
    a.cpu_threads = tr_cli_threads(prog);
    return tr_cli_plan(prog, &a, NULL);
}
