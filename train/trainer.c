/* trainer.c - the CPU training run (see tr.h, tr_train).
 *
 * Order of events, so that nothing is allocated before the plan is known to
 * fit: open rows -> check tokenizer fingerprints -> plan (pure) -> refuse or
 * allocate model/optimiser/loader -> (resume) -> steps -> checkpoint ->
 * sample. Gradient accumulation: every micro-batch adds the gradient of its
 * summed per-token loss; before clipping the step's gradient is divided by
 * the number of target tokens in the whole step (token-mean loss of the
 * step, not the mean of micro-batch means). */
#include "tr.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ds.h"
#include "kn.h"
#include "model.h"
#include "tk.h"
#ifdef MKS_HAVE_CUDA
#include "tr_gpu.h" /* the GPU step (train/trainer_cuda.cu): plain C interface */
#endif

void tr_train_opts_init(tr_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = "tiny";
    o->steps = 100;
    o->seed = 1337;
    o->lr = 1e-3;
    o->lr_min = -1;
    o->warmup = UINT64_MAX;
    o->weight_decay = 0.1f;
    o->grad_clip = 1.0f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->sample_temp = 0.8f;
    o->log_every = 1;
    o->nbuf = 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int zero32(const uint8_t *f)
{
    for (int i = 0; i < 32; i++)
        if (f[i])
            return 0;
    return 1;
}

static void hex8(const uint8_t *f, char *out)
{
    for (int i = 0; i < 8; i++)
        sprintf(out + 2 * i, "%02x", f[i]);
}

/* Keep only the JSON lines of steps <= last_step (atomic rewrite). */
static void truncate_log(const char *path, uint64_t last_step)
{
    FILE *in = ds_fopen_regular(path, NULL, 0); /* a FIFO / device log is not rewritten */
    if (!in)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp); /* never write through a FIFO or link planted as path.tmp */
    int wfd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    FILE *w = wfd >= 0 ? fdopen(wfd, "w") : NULL;
    if (!w) {
        if (wfd >= 0)
            close(wfd);
        fclose(in);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, in)) > 0) {
        const char *p = strstr(line, "\"step\":");
        if (p && strtoull(p + 7, NULL, 10) > last_step)
            continue;
        if (line[n - 1] != '\n')
            continue; /* a line cut by a kill */
        fwrite(line, 1, (size_t)n, w);
    }
    free(line);
    fclose(in);
    if (fclose(w) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}

static int mrc(int rc)
{
    return rc == TR_MODEL_ENOMEM ? TR_ERR_NOMEM : rc == TR_MODEL_EINVAL ? TR_ERR_ARG : TR_ERR_INTERNAL;
}

/* Mean validation loss over val_rows rows of the validation split. */
static int validate(tr_model *m, void *gpu, tr_rows *rows, int B, int T, int val_rows, int doc_mask, tr_batch *vb,
                    uint32_t *st, uint32_t *sp, uint8_t *sm, double *out)
{
#ifndef MKS_HAVE_CUDA
    (void)gpu;
#endif
    double ls = 0;
    uint64_t nt = 0;
    for (int r0 = 0; r0 < val_rows; r0 += B) {
        int n = val_rows - r0 < B ? val_rows - r0 : B;
        int rc = tr_fill_rows(rows, TR_SPLIT_VAL, (uint64_t)r0, n, T, doc_mask, vb, st, sp, sm);
        if (rc)
            return rc;
        double l = 0;
        uint64_t k = 0;
#ifdef MKS_HAVE_CUDA
        if (gpu) {
            char e[256];
            rc = tr_gpu_eval((tr_gpu *)gpu, vb, doc_mask, &l, &k, e, sizeof e);
            if (rc)
                return rc;
        } else
#endif
        {
            rc = tr_model_forward(m, n, T, vb->inputs, vb->targets, vb->pos, doc_mask ? vb->seg : NULL, &l, &k);
            if (rc)
                return mrc(rc);
        }
        ls += l;
        nt += k;
    }
    *out = nt ? ls / (double)nt : NAN;
    return TR_OK;
}

static void sample(FILE *f, tr_model *m, tr_rows *rows, const tk_tokenizer *tok, int T, int n_tokens, float temp,
                   tr_rng *rng)
{
    const tr_model_config *c = tr_model_get_config(m);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)(n_tokens + 1));
    double *p = malloc(sizeof(double) * (size_t)c->vocab);
    if (!ids || !p) {
        free(ids);
        free(p);
        return;
    }
    int n = 0;
    ids[n++] = rows->eot_id < (uint32_t)c->vocab ? rows->eot_id : 0;
    for (int g = 0; g < n_tokens; g++) {
        int start = n > T ? n - T : 0, len = n - start;
        if (tr_model_forward(m, 1, len, ids + start, NULL, NULL, NULL, NULL, NULL))
            break;
        const float *lg = tr_model_logits(m) + (size_t)(len - 1) * (size_t)c->vocab_padded;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < c->vocab; v++)
            if (lg[v] > mx)
                mx = lg[v];
        for (int v = 0; v < c->vocab; v++)
            sum += (p[v] = exp(((double)lg[v] - mx) / (temp > 0 ? temp : 1.0f)));
        double u = tr_rng_f64(rng) * sum, acc = 0;
        int pick = c->vocab - 1;
        for (int v = 0; v < c->vocab; v++) {
            acc += p[v];
            if (acc > u) {
                pick = v;
                break;
            }
        }
        ids[n++] = (uint32_t)pick;
        if ((uint32_t)pick == rows->eot_id)
            break;
    }
    if (tok) {
        tk_bytes b = {0};
        if (tk_decode(tok, ids + 1, (size_t)(n - 1), &b) == 0) {
            fprintf(f, "--- sample (%d tokens) ---\n", n - 1);
            fwrite(b.data, 1, b.len, f);
            fprintf(f, "\n--- end of sample ---\n");
        }
        tk_bytes_free(&b);
    } else {
        fprintf(f, "--- sample (%d token ids; pass --tokenizer to decode) ---\n", n - 1);
        for (int i = 1; i < n; i++)
            fprintf(f, "%s%u", i > 1 ? " " : "", ids[i]);
        fprintf(f, "\n");
    }
    free(ids);
    free(p);
}

/* The options a library caller (or the CLI) passes: every number finite and
 * in range before anything is opened. */
static int check_opts(const tr_train_opts *o, char *err, size_t errlen)
{
    const char *bad = NULL;
    if (o->steps < 1 || o->steps > TR_MAX_STEPS)
        bad = "steps must be 1..1000000000";
    else if (!isfinite(o->lr) || o->lr <= 0)
        bad = "lr must be a finite number > 0";
    else if (!isfinite(o->lr_min) || o->lr_min > o->lr)
        bad = "lr_min must be finite and <= lr (negative: lr / 10)";
    else if (o->warmup != UINT64_MAX && o->warmup > o->steps)
        bad = "warmup must be <= steps";
    else if (!isfinite(o->weight_decay) || o->weight_decay < 0 || !isfinite(o->grad_clip) || o->grad_clip < 0 ||
             !isfinite(o->beta1) || o->beta1 < 0 || o->beta1 >= 1 || !isfinite(o->beta2) || o->beta2 < 0 ||
             o->beta2 >= 1 || !isfinite(o->eps) || o->eps <= 0)
        bad = "weight decay, grad clip, betas and eps must be finite and in range";
    else if (o->seq_len < 0 || (uint32_t)o->seq_len > TR_MAX_SEQ_LEN || o->val_rows < 0 || o->sample_tokens < 0 ||
             o->sample_tokens > (1 << 20) || o->log_every < 0 || (o->nbuf && (o->nbuf < 2 || o->nbuf > 64)))
        bad = "seq_len, val_rows, sample_tokens, log_every or nbuf out of range";
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

/* Outputs never land on inputs: the log must not be the manifest, a shard,
 * the checkpoint or the tokenizer (device + inode, or the same resolved
 * path for a checkpoint not written yet), and checkpoints are not written
 * into the shard folder. TR_ERR_ARG (a usage error) with the reason. */
static int check_outputs(const tr_train_opts *o, tr_rows *rows, char *err, size_t errlen)
{
    char ck[2][4200];
    if (o->ckpt_dir) {
        snprintf(ck[0], sizeof ck[0], "%s/ckpt.bin", o->ckpt_dir);
        snprintf(ck[1], sizeof ck[1], "%s/ckpt.tmp", o->ckpt_dir);
    }
    if (o->log_path) {
        const char *clash = NULL;
        if (rows->is_input && rows->is_input(rows->ctx, o->log_path))
            clash = "a file of the shard set (manifest or shard)";
        else if (o->data_dir && ds_same_file(o->log_path, o->data_dir))
            clash = "the data folder";
        else if (o->tokenizer && ds_same_file(o->log_path, o->tokenizer))
            clash = "the tokenizer file";
        else if (o->ckpt_dir && (ds_same_file(o->log_path, ck[0]) || ds_path_within(o->log_path, ck[0]) == 1 ||
                                 ds_path_within(o->log_path, ck[1]) == 1))
            clash = "the checkpoint";
        if (o->tokenizer && !clash) {
            char side[4200];
            snprintf(side, sizeof side, "%s.meta.json", o->tokenizer);
            if (ds_same_file(o->log_path, side))
                clash = "the tokenizer's sidecar file";
        }
        if (clash) {
            snprintf(err, errlen, "--log %s is %s: refusing to overwrite an input; log somewhere else", o->log_path,
                     clash);
            return TR_ERR_ARG;
        }
    }
    if (o->ckpt_dir && o->data_dir && ds_path_within(o->ckpt_dir, o->data_dir) == 1) {
        snprintf(err, errlen, "--ckpt-dir %s is (inside) the data folder %s: refusing to write checkpoints among "
                              "the shards; use a folder of its own",
                 o->ckpt_dir, o->data_dir);
        return TR_ERR_ARG;
    }
    if (o->ckpt_dir && rows->is_input && (rows->is_input(rows->ctx, ck[0]) || rows->is_input(rows->ctx, ck[1]))) {
        snprintf(err, errlen, "--ckpt-dir %s: its ckpt.bin / ckpt.tmp is a file of the shard set", o->ckpt_dir);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

/* The JSONL log: a regular file (created or truncated), or a FIFO / device
 * that a reader already holds open; opened without blocking so a FIFO with
 * no reader fails instead of hanging. */
static FILE *open_log(const char *path, int append)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
    if (fd < 0)
        return NULL;
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) ||
        (!append && S_ISREG(st.st_mode) && ftruncate(fd, 0))) {
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f)
        close(fd);
    return f;
}

int tr_train(const tr_train_opts *o, tr_train_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    err[0] = 0;
    FILE *out = o->out ? o->out : stdout;
    tr_rows own_rows, *rows = o->rows;
    tk_tokenizer *tok = NULL;
    tr_model *m = NULL;
    tr_loader *ld = NULL;
    FILE *logf = NULL;
    tr_batch vb = {0};
    uint32_t *st = NULL, *sp = NULL;
    uint8_t *sm = NULL;
    int rc = TR_OK;
    memset(&own_rows, 0, sizeof own_rows);
    const int cuda = o->device == TR_DEV_CUDA;
    uint64_t dev_total = 0;
    rc = check_opts(o, err, errlen);
    if (rc)
        return rc;
#ifdef MKS_HAVE_CUDA
    tr_gpu *gpu = NULL;
    char dev_name[256] = "";
    uint64_t dev_used0 = 0, dev_used1 = 0, arena_bytes = 0;
    float *ck_params = NULL; /* host staging of the GPU state for checkpoints (the CPU model's buffers) */
    if (cuda) {
        uint64_t fr = 0;
        char why[256] = "";
        if (tr_gpu_device(dev_name, sizeof dev_name, &dev_total, &fr, why, sizeof why) != TR_OK) {
            snprintf(err, errlen, "--device cuda: no usable CUDA GPU on this machine (%s); use --device cpu, or "
                                  "--plan to see the GPU memory plan", why);
            return TR_ERR_NODEVICE;
        }
        if (o->recompute) {
            snprintf(err, errlen, "--recompute %d: the GPU model stores every activation (recompute is not "
                                  "implemented on the GPU yet); drop --recompute", o->recompute);
            return TR_ERR_ARG;
        }
    }
#else
    if (cuda) {
        snprintf(err, errlen, "--device cuda: this build has no CUDA backend (built without CUDA or no GPU); "
                              "use --device cpu, or --plan to see the GPU memory plan");
        return TR_ERR_NODEVICE;
    }
#endif
    if (!cuda && o->precision != TR_FP32) {
        snprintf(err, errlen, "--precision %s: the CPU reference trains in fp32 (bf16/fp16 are GPU precisions; "
                              "--plan accounts for them)", tr_precision_name(o->precision));
        return TR_ERR_ARG;
    }
    if (!rows) {
        if (!o->data_dir) {
            snprintf(err, errlen, "no --data directory given");
            return TR_ERR_ARG;
        }
        char e[512];
        rc = tr_rows_open_shards_ex(&own_rows, o->data_dir, !o->no_verify, e, sizeof e);
        if (rc) {
            snprintf(err, errlen, "cannot use shard set %s: %s", o->data_dir, e);
            return rc;
        }
        rows = &own_rows;
    }
    if (rows->n_rows[TR_SPLIT_TRAIN] == 0) {
        snprintf(err, errlen, "%s has no training rows", rows->desc);
        rc = TR_ERR_DATA;
        goto done;
    }
    int T = o->seq_len ? o->seq_len : rows->row_len;
    if (T > (int)TR_MAX_SEQ_LEN) {
        snprintf(err, errlen, "rows in %s hold %d tokens, more than the trainer's %u: pass --seq-len <= %u", rows->desc,
                 T, TR_MAX_SEQ_LEN, TR_MAX_SEQ_LEN);
        rc = TR_ERR_DATA;
        goto done;
    }
    if (T < 1 || T > rows->row_len) {
        snprintf(err, errlen, "--seq-len %d: rows in %s hold %d tokens; use --seq-len <= %d", T, rows->desc,
                 rows->row_len, rows->row_len);
        rc = TR_ERR_DATA;
        goto done;
    }
    rc = check_outputs(o, rows, err, errlen);
    if (rc)
        goto done;
    if (o->tokenizer) {
        char e[512];
        if (tk_load(o->tokenizer, TK_PAT_NONE, &tok, e, sizeof e)) {
            snprintf(err, errlen, "cannot load tokenizer %s: %s", o->tokenizer, e);
            rc = TR_ERR_IO;
            goto done;
        }
        uint8_t fp[32];
        tk_fingerprint(tok, fp);
        if (!zero32(rows->fingerprint) && memcmp(fp, rows->fingerprint, 32)) {
            char a[17], b[17];
            hex8(fp, a);
            hex8(rows->fingerprint, b);
            snprintf(err, errlen, "tokenizer %s (fingerprint %s...) is not the one %s was built with (%s...): "
                                  "rebuild the shards or pass the matching --tokenizer",
                     o->tokenizer, a, rows->desc, b);
            rc = TR_ERR_FINGERPRINT;
            goto done;
        }
    }
    if (!tok && o->sample_tokens > 0 && rows->tokenizer[0] && strcmp(rows->tokenizer, "custom") &&
        strspn(rows->tokenizer, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
            strlen(rows->tokenizer)) {
        /* decode samples with the tokenizer the shards name (gpt2, ...) when
         * it loads and its fingerprint matches; ids otherwise. Only a plain
         * name: an untrusted manifest does not choose a path to open. */
        uint8_t fp[32];
        if (tk_load(rows->tokenizer, TK_PAT_NONE, &tok, NULL, 0) == 0) {
            tk_fingerprint(tok, fp);
            if (memcmp(fp, rows->fingerprint, 32)) {
                tk_free(tok);
                tok = NULL;
            }
        } else {
            tok = NULL;
        }
    }
    /* ------------------------------------------------------------ plan */
    tr_plan_in *pi = &res->plan_in;
    memset(pi, 0, sizeof *pi);
    if (tr_model_preset(o->model, &pi->n_layer, &pi->n_head, &pi->n_embd)) {
        snprintf(err, errlen, "unknown --model '%s' (tiny, d12, d24, d36, d48)", o->model);
        rc = TR_ERR_ARG;
        goto done;
    }
    pi->vocab_size = rows->vocab_size;
    pi->seq_len = T;
    pi->max_seq = T;
    pi->batch_tokens = o->batch_tokens ? o->batch_tokens : (uint64_t)T;
    pi->token_budget = o->token_budget ? o->token_budget : pi->batch_tokens;
    pi->mem_budget = o->mem_budget ? o->mem_budget : (cuda ? dev_total : 0);
    pi->device = cuda ? TR_DEV_CUDA : TR_DEV_CPU;
    pi->precision = cuda ? o->precision : TR_FP32;
    pi->nbuf = o->nbuf;
    pi->doc_mask = o->doc_mask;
    pi->cpu_threads = kn_num_threads();
    rc = tr_plan(pi, &res->plan);
    if (rc) {
        snprintf(err, errlen, "%s", rc == TR_ERR_NOFIT ? res->plan.reason : "bad model/plan configuration");
        goto done;
    }
    int B = res->plan.micro_rows, R = res->plan.rows_per_step;
#ifdef MKS_HAVE_CUDA
    if (cuda && !o->quiet) {
        fprintf(out, "device: %s, %.1f GiB; precision %s\n", dev_name, (double)dev_total / 1073741824.0,
                tr_precision_name(o->precision));
        tr_plan_print(out, pi, &res->plan); /* the plan, before step 1 */
    }
#endif

    /* ------------------------------------------------------------ resume meta */
    tr_ckpt_meta cm;
    memset(&cm, 0, sizeof cm);
    int resuming = 0;
    if (o->resume) {
        if (!o->ckpt_dir) {
            snprintf(err, errlen, "--resume needs --ckpt-dir");
            rc = TR_ERR_ARG;
            goto done;
        }
        char ck[4096];
        snprintf(ck, sizeof ck, "%s/ckpt.bin", o->ckpt_dir);
        resuming = access(ck, F_OK) == 0;
        if (!resuming && !o->quiet)
            fprintf(out, "--resume: no checkpoint in %s yet: starting from step 0\n", o->ckpt_dir);
    }
    if (resuming) {
        rc = tr_ckpt_load(o->ckpt_dir, &cm, NULL, 0, err, errlen);
        if (rc)
            goto done;
        if (memcmp(cm.fingerprint, rows->fingerprint, 32)) {
            char a[17], b[17];
            hex8(cm.fingerprint, a);
            hex8(rows->fingerprint, b);
            snprintf(err, errlen, "checkpoint in %s was trained with tokenizer %s..., but %s has %s...: refusing "
                                  "to mix tokenizers",
                     o->ckpt_dir, a, rows->desc, b);
            rc = TR_ERR_FINGERPRINT;
            goto done;
        }
        if (cm.n_layer != pi->n_layer || cm.n_embd != pi->n_embd || cm.n_head != pi->n_head ||
            cm.seq_len != T || cm.max_seq != T || cm.vocab_size != rows->vocab_size) {
            snprintf(err, errlen,
                     "checkpoint in %s is for a different model or --seq-len (%dL H=%d C=%d T=%d V=%u; this run: "
                     "%dL H=%d C=%d T=%d V=%u)",
                     o->ckpt_dir, cm.n_layer, cm.n_head, cm.n_embd, cm.seq_len, cm.vocab_size, pi->n_layer,
                     pi->n_head, pi->n_embd, T, rows->vocab_size);
            rc = TR_ERR_DATA;
            goto done;
        }
    }

    /* ------------------------------------------------------------ allocate */
    res->baseline_rss = tr_cur_rss();
    tr_model_config mc;
    if (tr_model_config_make(pi->n_layer, pi->n_head, pi->n_embd, T, (int)rows->vocab_size, &mc)) {
        snprintf(err, errlen, "bad model configuration");
        rc = TR_ERR_ARG;
        goto done;
    }
    int mr = tr_model_create(&mc, o->seed, &m);
    if (!mr)
        mr = tr_model_adamw_init(m); /* GPU: host staging of params/m/v for checkpoints */
    if (!mr && !cuda)
        mr = tr_model_reserve(m, B, T);
    if (mr) {
        snprintf(err, errlen, "cannot allocate the model");
        rc = mrc(mr);
        goto done;
    }
    size_t P = tr_model_param_count(&mc);
    tr_rng rng;
    tr_rng_seed(&rng, o->seed ^ 0x5a5a5a5a5a5a5a5aULL);
    uint64_t step0 = 0, pos0 = 0, seed = o->seed;
    /* GPU runs add a 4th section: the optimiser counters (fp16 loss scaler,
     * AdamW step); either device resumes from either kind */
    uint64_t gpu_extra[4] = {0, 0, 0, 0};
    int have_extra = 0;
    if (resuming) {
        tr_ckpt_section sec[4] = {{"params", tr_model_params(m), P * 4},
                                  {"adam_m", tr_model_adam_m(m), P * 4},
                                  {"adam_v", tr_model_adam_v(m), P * 4},
                                  {"gpu_opt", gpu_extra, sizeof gpu_extra}};
        have_extra = cm.n_sections == 4;
        rc = tr_ckpt_load(o->ckpt_dir, &cm, sec, have_extra ? 4 : 3, err, errlen);
        if (rc)
            goto done;
        step0 = cm.step;
        pos0 = cm.loader_pos;
        rng = cm.rng;
        seed = cm.seed; /* the data order is the checkpointed run's */
        if (!o->quiet)
            fprintf(out, "resumed from %s/ckpt.bin at step %" PRIu64 " (loader position %" PRIu64 " rows)\n",
                    o->ckpt_dir, step0, pos0);
    }
#ifdef MKS_HAVE_CUDA
    if (cuda) {
        tr_gpu_mem_used(&dev_used0);
        uint64_t need = tr_gpu_arena_need(&mc, B, T, o->precision);
        rc = tr_gpu_open(&gpu, &mc, B, T, o->precision, &res->plan, tr_model_params(m), &arena_bytes, err, errlen);
        if (rc)
            goto done;
        if (resuming) {
            rc = tr_gpu_set_state(gpu, tr_model_params(m), tr_model_adam_m(m), tr_model_adam_v(m),
                                  have_extra ? gpu_extra : NULL, step0);
            if (rc) {
                snprintf(err, errlen, "cannot restore the checkpoint on the GPU: %s", tr_gpu_last_error());
                goto done;
            }
        }
        if (!o->quiet)
            fprintf(out, "device arena %.1f MiB (model + input batch need %.1f MiB)\n",
                    (double)arena_bytes / 1048576.0, (double)need / 1048576.0);
        ck_params = tr_model_params(m);
    }
#endif
    tr_loader_opts lo;
    tr_loader_opts_init(&lo);
    lo.seq_len = T;
    lo.micro_rows = B;
    lo.rows_per_step = R;
    lo.nbuf = o->nbuf;
    lo.seed = seed;
    lo.start_row = pos0;
    lo.doc_mask = o->doc_mask;
#ifdef MKS_HAVE_CUDA
    if (cuda)
        tr_gpu_loader_hooks(&lo); /* pinned host buffers: asynchronous copies */
#endif
    rc = tr_loader_open(rows, &lo, &ld);
    if (rc) {
        snprintf(err, errlen, "cannot start the loader: %s", tr_strerror(rc));
        goto done;
    }
    int val_rows = 0;
    if (o->val_every && rows->n_rows[TR_SPLIT_VAL]) {
        val_rows = o->val_rows ? o->val_rows : 8 * B;
        if ((uint64_t)val_rows > rows->n_rows[TR_SPLIT_VAL])
            val_rows = (int)rows->n_rows[TR_SPLIT_VAL];
    }
    /* val batch + row scratch: counted by the planner in every run */
    if (tr_batch_alloc(&vb, B, T)) {
        rc = TR_ERR_NOMEM;
        goto done;
    }
    st = malloc((size_t)rows->row_len * 4);
    sp = malloc((size_t)rows->row_len * 4);
    sm = malloc((size_t)rows->row_len);
    if (!st || !sp || !sm) {
        rc = TR_ERR_NOMEM;
        goto done;
    }
    if (o->log_path) {
        if (resuming)
            truncate_log(o->log_path, step0); /* drop steps logged after the checkpoint (killed run) */
        logf = open_log(o->log_path, resuming);
        if (!logf) {
            snprintf(err, errlen, "cannot write log %s: %s", o->log_path, strerror(errno));
            rc = TR_ERR_IO;
            goto done;
        }
    }
    if (!o->quiet)
        fprintf(out,
                "training %s (%zu params) on %s: T=%d, micro-batch %d rows (%d tokens <= budget %" PRIu64
                "), %d micro-batches/step, %" PRIu64 " tokens/step, plan %.1f MiB\n",
                o->model, P, rows->desc, T, B, B * T, pi->token_budget, res->plan.n_micro,
                (uint64_t)R * (uint64_t)T, (double)res->plan.total_bytes / 1048576.0);

    uint64_t warm = o->warmup;
    if (warm == UINT64_MAX) {
        warm = o->steps / 20;
        if (warm < 1)
            warm = 1;
    }
    double lr_min = o->lr_min >= 0 ? o->lr_min : o->lr / 10;
    uint64_t end = o->steps;
    if (o->stop_after && o->stop_after < end)
        end = o->stop_after;
    float *grads = tr_model_grads(m);
    float lscale = 1.0f;
    int skipped = 0;
    double t_run = now_s();
    for (uint64_t step = step0; step < end; step++) {
        double t0 = now_s(), wait = 0, lsum = 0;
        uint64_t ntgt = 0, ntok = 0;
#ifdef MKS_HAVE_CUDA
        if (gpu)
            tr_gpu_zero_grad(gpu);
        else
#endif
            tr_model_zero_grad(m);
        int nm = 0;
        do {
            const tr_batch *b;
            double w;
            rc = tr_loader_next(ld, &b, &w);
            if (rc) {
                snprintf(err, errlen, "reading %s: %s", rows->desc,
                         rows->read_err[TR_SPLIT_TRAIN][0] ? rows->read_err[TR_SPLIT_TRAIN] : tr_strerror(rc));
                goto done;
            }
            wait += w;
            uint64_t mt = (uint64_t)b->rows * (uint64_t)b->T;
            if (mt > pi->token_budget) { /* cannot happen: the loader cuts at B rows */
                tr_loader_release(ld);
                snprintf(err, errlen, "internal: micro-batch of %" PRIu64 " tokens over the budget", mt);
                rc = TR_ERR_INTERNAL;
                goto done;
            }
            if (mt > res->max_micro_tokens)
                res->max_micro_tokens = mt;
            double l = 0;
            uint64_t k = 0;
            nm = b->n_micro;
            int last = b->micro == b->n_micro - 1;
#ifdef MKS_HAVE_CUDA
            if (gpu) {
                /* upload, hand the buffer back, forward + backward (summed loss) */
                rc = tr_gpu_micro(gpu, ld, b, o->doc_mask, &l, &k, &wait, err, errlen);
                if (rc)
                    goto done;
                mr = 0;
            } else
#endif
            {
                mr = tr_model_fwd_bwd(m, b->rows, b->T, b->inputs, b->targets, b->pos,
                                      o->doc_mask ? b->seg : NULL, 1.0f, &l, &k);
                tr_loader_release(ld);
            }
            if (mr) {
                snprintf(err, errlen, "model step failed");
                rc = mrc(mr);
                goto done;
            }
            lsum += l;
            ntgt += k;
            ntok += mt;
            if (last)
                break;
        } while (1);
        float gnorm = 0;
        double lr = tr_lr_at(step, warm, o->steps, o->lr, lr_min);
        tr_adamw_hparams h = {(float)lr, o->beta1, o->beta2, o->eps, o->weight_decay};
#ifdef MKS_HAVE_CUDA
        if (gpu) {
            /* 1/targets and the clip folded into AdamW; fp16: loss scaling */
            rc = tr_gpu_step(gpu, &h, o->grad_clip, ntgt, &gnorm, &skipped, &lscale, err, errlen);
            if (rc)
                goto done;
            if (skipped && !o->quiet)
                fprintf(out, "step %5" PRIu64 ": non-finite gradient at loss scale %.0f: update skipped\n",
                        step + 1, (double)lscale);
            if (res->steps_done == 0)
                tr_gpu_mem_used(&dev_used1); /* measured peak: device memory in use after step 1 */
            mr = 0;
        } else
#endif
        {
            if (ntgt)
                kn_scale_ref(grads, P, (float)(1.0 / (double)ntgt));
            tr_model_clip_grad_norm(m, o->grad_clip, &gnorm);
            mr = tr_model_adamw_step(m, &h, (int)(step + 1), NULL);
        }
        if (mr) {
            snprintf(err, errlen, "optimiser step failed");
            rc = mrc(mr);
            goto done;
        }
        double loss = ntgt ? lsum / (double)ntgt : NAN;
        double dt = now_s() - t0;
        if (res->steps_done == 0)
            res->first_loss = loss;
        res->last_loss = loss;
        res->last_grad_norm = gnorm;
        res->steps_done++;
        res->total_wait_s += wait;
        res->last_step = step + 1;
        double tps = dt > 0 ? (double)ntok / dt : 0;
        if (!o->quiet && (o->log_every <= 1 || (step + 1) % (uint64_t)o->log_every == 0 || step + 1 == end ||
                          step == step0))
            fprintf(out,
                    "step %5" PRIu64 "/%" PRIu64 " | loss %.4f | lr %.2e | gnorm %.3f | tokens %" PRIu64
                    " (%" PRIu64 " targets, %d x %d) | %.0f tok/s | wait %.2f ms\n",
                    step + 1, o->steps, loss, lr, gnorm, ntok, ntgt, nm, B * T, tps, wait * 1e3);
        double vl = NAN;
        if (val_rows && (step + 1) % o->val_every == 0) {
#ifdef MKS_HAVE_CUDA
            void *vg = gpu;
#else
            void *vg = NULL;
#endif
            rc = validate(m, vg, rows, B, T, val_rows, o->doc_mask, &vb, st, sp, sm, &vl);
            if (rc) {
                snprintf(err, errlen, "validation on %s failed: %s", rows->desc,
                         rows->read_err[TR_SPLIT_VAL][0] ? rows->read_err[TR_SPLIT_VAL] : tr_strerror(rc));
                goto done;
            }
            res->last_val_loss = vl;
            if (!o->quiet)
                fprintf(out, "step %5" PRIu64 " | val loss %.4f (%d rows)\n", step + 1, vl, val_rows);
        }
        if (logf) {
            /* one object per step; validation steps carry val_loss too */
            fprintf(logf,
                    "{\"step\":%" PRIu64 ",\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"tokens\":%" PRIu64
                    ",\"target_tokens\":%" PRIu64 ",\"micro_batches\":%d,\"micro_tokens\":%d,\"tok_per_s\":%.1f,"
                    "\"wait_ms\":%.3f,\"step_ms\":%.3f,\"epoch\":%.4f",
                    step + 1, isnan(loss) ? 0.0 : loss, lr, (double)gnorm, ntok, ntgt, nm, B * T, tps, wait * 1e3,
                    dt * 1e3, (double)tr_loader_position(ld) / (double)rows->n_rows[TR_SPLIT_TRAIN]);
            if (!isnan(vl))
                fprintf(logf, ",\"val_loss\":%.9g,\"val_rows\":%d", vl, val_rows);
            if (cuda)
                fprintf(logf, ",\"loss_scale\":%.9g,\"skipped\":%d", (double)lscale, skipped);
            fprintf(logf, "}\n");
            fflush(logf);
        }
        int ck = o->ckpt_dir && ((o->ckpt_every && (step + 1) % o->ckpt_every == 0) || step + 1 == end);
        if (ck) {
            tr_ckpt_meta km;
            memset(&km, 0, sizeof km);
            km.step = step + 1;
            km.loader_pos = tr_loader_position(ld);
            km.seed = seed;
            km.rng = rng;
            memcpy(km.fingerprint, rows->fingerprint, 32);
            km.n_layer = mc.n_layer;
            km.n_head = mc.n_head;
            km.n_embd = mc.d_model;
            km.max_seq = mc.max_seq;
            km.seq_len = T;
            km.vocab_size = rows->vocab_size;
#ifdef MKS_HAVE_CUDA
            if (gpu) {
                /* device -> the host model's buffers (master fp32 params, m, v) */
                rc = tr_gpu_get_state(gpu, ck_params, tr_model_adam_m(m), tr_model_adam_v(m), gpu_extra);
                if (rc) {
                    snprintf(err, errlen, "cannot read the GPU state for the checkpoint: %s", tr_gpu_last_error());
                    goto done;
                }
            }
#endif
            tr_ckpt_section sec[4] = {{"params", tr_model_params(m), P * 4},
                                      {"adam_m", tr_model_adam_m(m), P * 4},
                                      {"adam_v", tr_model_adam_v(m), P * 4},
                                      {"gpu_opt", gpu_extra, sizeof gpu_extra}};
            rc = tr_ckpt_save(o->ckpt_dir, &km, sec, cuda ? 4 : 3, err, errlen);
            if (rc)
                goto done;
        }
    }
    if (res->steps_done)
        res->mean_wait_s = res->total_wait_s / (double)res->steps_done;
    if (!o->quiet && res->steps_done)
        fprintf(out, "done: %" PRIu64 " steps in %.1f s, loss %.4f -> %.4f, input wait %.3f ms/step\n",
                res->steps_done, now_s() - t_run, res->first_loss, res->last_loss, res->mean_wait_s * 1e3);
#ifdef MKS_HAVE_CUDA
    if (gpu && res->steps_done) {
        uint64_t dev_plan = res->plan.device_bytes ? res->plan.device_bytes : res->plan.total_bytes;
        if (!o->quiet)
            fprintf(out,
                    "device memory: planned %.1f MiB, measured peak %.1f MiB in use after step 1 (cudaMemGetInfo; "
                    "%+.1f%%; %.1f MiB before the arena), arena %.1f MiB\n",
                    (double)dev_plan / 1048576.0, (double)dev_used1 / 1048576.0,
                    dev_plan ? 100.0 * ((double)dev_used1 - (double)dev_plan) / (double)dev_plan : 0.0,
                    (double)dev_used0 / 1048576.0, (double)arena_bytes / 1048576.0);
        if (logf) {
            fprintf(logf,
                    "{\"planned_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64 ",\"arena_bytes\":%" PRIu64
                    ",\"baseline_bytes\":%" PRIu64 "}\n",
                    dev_plan, dev_used1, arena_bytes, dev_used0);
            fflush(logf);
        }
    }
    if (gpu && o->sample_tokens > 0) {
        /* sample on the CPU model with the trained parameters */
        rc = tr_gpu_get_state(gpu, tr_model_params(m), NULL, NULL, NULL);
        if (rc) {
            snprintf(err, errlen, "cannot read the GPU parameters: %s", tr_gpu_last_error());
            goto done;
        }
    }
#endif
    res->peak_rss = tr_peak_rss();
    if (!o->quiet && cuda && res->peak_rss && res->baseline_rss)
        fprintf(out, "host memory: plan %.2f MiB (host lines), measured peak RSS growth %.2f MiB\n",
                (double)res->plan.host_bytes / 1048576.0,
                (double)(res->peak_rss - res->baseline_rss) / 1048576.0);
    else if (!o->quiet && res->peak_rss && res->baseline_rss)
        fprintf(out, "memory: plan %.2f MiB, measured peak RSS growth %.2f MiB (%+.1f%%)\n",
                (double)res->plan.total_bytes / 1048576.0, (double)(res->peak_rss - res->baseline_rss) / 1048576.0,
                100.0 * ((double)(res->peak_rss - res->baseline_rss) - (double)res->plan.total_bytes) /
                    (double)res->plan.total_bytes);
    if (o->sample_tokens > 0)
        sample(out, m, rows, tok, T, o->sample_tokens, o->sample_temp, &rng);
done:
    if (ld)
        tr_loader_close(ld); /* before the GPU: its buffers may be pinned */
#ifdef MKS_HAVE_CUDA
    tr_gpu_close(gpu);
#endif
    if (logf)
        fclose(logf);
    tr_batch_free(&vb);
    free(st);
    free(sp);
    free(sm);
    tr_model_free(m);
    if (tok)
        tk_free(tok);
    if (rows == &own_rows)
        tr_rows_close(&own_rows);
    return rc;
}
