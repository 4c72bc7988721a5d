/* trainer.c - the training run (see tr.h, tr_train; docs/trainer.md).
 *
 * tr_train is a short loop over a run object, one function per phase:
 *   run_open      options, backend (probe), row source, --seq-len, outputs
 *                 never over inputs, tokenizer fingerprint
 *   run_plan      the memory plan (pure; refusal before any allocation) and
 *                 the --resume checkpoint's header checks
 *   run_allocate  host model, checkpoint payload, backend, loader, the
 *                 validation batch, log
 *   run_step      one optimiser step: micro-batches, (reduce), step, log,
 *                 validation, checkpoint
 *   run_finish    summary, memory report, --sample
 *   run_close     everything, in reverse
 * The math runs in a backend (train/backend.h: backend_cpu.c, and
 * backend_cuda.cu in CUDA builds), selected by --device from the table the
 * build generates; this file knows no particular backend, nor optimizer
 * (train/optim.h: the run's is --optim's, by default the table's first). The host model (fp32
 * params + the optimizer's state tensors, model.h layout) is the
 * checkpoint's layout and the sampler's model; the CPU backend computes on
 * it directly. */
#include "mks_common.h"
#include "tr.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "export.h"
#include "hf_import.h"
#include "dist.h"
#include "ds.h"
#include "kn.h"
#include "family.h"
#include "model.h"
#include "optim.h"
#include "tk.h"

static int zero32(const uint8_t *f) {
    for (int i = 0; i < 32; i++)
        if (f[i]) return 0;
    return 1;
}

static void hex8(const uint8_t *f, char *out) {
    for (int i = 0; i < 8; i++) sprintf(out + 2 * i, "%02x", f[i]);
}

/* The lines of the log at `in` of steps <= last_step into fd. */
typedef struct {
    FILE *in;
    uint64_t last_step;
} log_fill_ctx;

static int log_fill(int fd, void *vctx, char *err, size_t errlen) {
    (void)err, (void)errlen;
    const log_fill_ctx *c = vctx;
    int dfd = dup(fd);
    FILE *w = dfd >= 0 ? fdopen(dfd, "w") : NULL;
    if (!w) {
        if (dfd >= 0) close(dfd);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, c->in)) > 0) {
        const char *p = strstr(line, "\"step\":");
        if (p && strtoull(p + 7, NULL, 10) > c->last_step) continue;
        if (line[n - 1] != '\n') continue; /* a line cut by a kill */
        fwrite(line, 1, (size_t)n, w);
    }
    free(line);
    return fclose(w) ? -1 : 0;
}

/* Keep only the JSON lines of steps <= last_step (the common layer's
 * atomic rewrite: path.tmp fresh, fsync, rename, fsync of the folder). */
static void truncate_log(const char *path, uint64_t last_step) {
    FILE *in = ds_fopen_regular(path, NULL, 0); /* a FIFO / device log is not rewritten */
    if (!in) return;
    log_fill_ctx c = {in, last_step};
    mc_atomic_write_fn(path, NULL, 0644, log_fill, &c, NULL, 0);
    fclose(in);
}

/* Model text as it may reach a terminal: line breaks and tabs as they are,
 * every other control byte (C0, DEL, C1), bytes that are not UTF-8, '"' and
 * '\\' as \xNN (tk_escape_text), so a sampled token cannot send terminal
 * escapes. Runs of at most 1 KiB, cut at a character boundary, fit buf
 * whole (tk_escape_text writes at most 4 bytes per input byte). */
static void put_text(FILE *f, const uint8_t *p, size_t n) {
    char buf[4 * 1024 + 8];
    size_t i = 0;
    while (i < n) {
        if (p[i] == '\n' || p[i] == '\t') {
            fputc(p[i++], f);
            continue;
        }
        size_t j = i;
        while (j < n && j - i < 1024 && p[j] != '\n' && p[j] != '\t') j++;
        size_t k = j; /* back to the lead byte of a character the cut would split */
        while (k < n && k > i && j - k < 3 && (p[k] & 0xC0) == 0x80) k--;
        if (k == i || (k < n && (p[k] & 0xC0) == 0x80)) k = j;
        fputs(tk_escape_text(p + i, k - i, buf, sizeof buf), f);
        i = k;
    }
}

static void sample(FILE *f, tr_model *m, tr_rows *rows, const tk_tokenizer *tok, int T, int n_tokens, float temp,
                   tr_rng *rng) {
    const tr_model_config *c = tr_model_get_config(m);
    uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)(n_tokens + 1));
    double *p = malloc(sizeof(double) * (size_t)c->vocab);
    if (!ids || !p) {
        free(ids);
        free(p);
        return;
    }
    /* the model saw every document after its BOS (else after the previous
     * document's EOS): start there, stop at the EOS */
    int64_t start = rows->eot_id, stop = rows->eot_id;
    if (rows->frame_known) {
        start = rows->bos_id >= 0 ? rows->bos_id : rows->eos_id >= 0 ? rows->eos_id : (int64_t)rows->eot_id;
        stop = rows->eos_id;
    }
    int n = 0;
    ids[n++] = start >= 0 && start < c->vocab ? (uint32_t)start : 0;
    for (int g = 0; g < n_tokens; g++) {
        int start = n > T ? n - T : 0, len = n - start;
        if (tr_model_forward(m, 1, len, ids + start, NULL, NULL, NULL, NULL, NULL)) break;
        const float *lg = tr_model_logits(m) + (size_t)(len - 1) * (size_t)c->vocab_padded;
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < c->vocab; v++)
            if (lg[v] > mx) mx = lg[v];
        for (int v = 0; v < c->vocab; v++) sum += (p[v] = exp(((double)lg[v] - mx) / (temp > 0 ? temp : 1.0f)));
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
        if (pick == stop) break;
    }
    if (tok) {
        tk_bytes b = {0};
        if (tk_decode(tok, ids + 1, (size_t)(n - 1), &b) == 0) {
            fprintf(f, "--- sample (%d tokens) ---\n", n - 1);
            put_text(f, b.data, b.len);
            fprintf(f, "\n--- end of sample ---\n");
        }
        tk_bytes_free(&b);
    } else {
        fprintf(f, "--- sample (%d token ids; pass --tokenizer to decode) ---\n", n - 1);
        for (int i = 1; i < n; i++) fprintf(f, "%s%u", i > 1 ? " " : "", ids[i]);
        fprintf(f, "\n");
    }
    free(ids);
    free(p);
}

/* The options a library caller (or the CLI) passes: every number finite and
 * in range before anything is opened. */
static int check_opts(const tr_train_opts *o, char *err, size_t errlen) {
    const char *bad = NULL;
    if (o->steps < 1 || o->steps > TR_MAX_STEPS) bad = "steps must be 1..1000000000";
    else if (!isfinite(o->lr) || o->lr <= 0) bad = "lr must be a finite number > 0";
    else if (!isfinite(o->lr_min) || o->lr_min > o->lr) bad = "lr_min must be finite and <= lr (negative: lr / 10)";
    else if (o->warmup != UINT64_MAX && o->warmup > o->steps) bad = "warmup must be <= steps";
    else if (!isfinite(o->weight_decay) || o->weight_decay < 0 || !isfinite(o->grad_clip) || o->grad_clip < 0 ||
             !isfinite(o->beta1) || o->beta1 < 0 || o->beta1 >= 1 || !isfinite(o->beta2) || o->beta2 < 0 ||
             o->beta2 >= 1 || !isfinite(o->eps) || o->eps <= 0)
        bad = "weight decay, grad clip, betas and eps must be finite and in range";
    else if (o->seq_len < 0 || (uint32_t)o->seq_len > TR_MAX_SEQ_LEN || o->val_rows < 0 || o->sample_tokens < 0 ||
             o->sample_tokens > (1 << 20) || o->log_every < 0 || (o->nbuf && (o->nbuf < 2 || o->nbuf > 64)))
        bad = "seq_len, val_rows, sample_tokens, log_every or nbuf out of range";
    else if (o->optim && !tr_optim_find(o->optim))
        bad = "optim: no optimizer of that name in this build (tr_optim_name)";
    if (bad) {
        snprintf(err, errlen, "%s", bad);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

/* Outputs never land on inputs. Every file or folder llmtrain writes (the
 * log, the checkpoint folder and its ckpt.bin / ckpt.tmp) is checked with
 * ds_check_output, the check every mkshards command and the Python package
 * use: not inside the shard set's folder nor another name of one of its
 * files (manifest, shards, rejects.jsonl that merge and verify read), not
 * the tokenizer or its sidecar. The log is not the checkpoint either (the
 * same resolved path for one not written yet). TR_ERR_ARG (a usage error)
 * with the reason, before anything is written. */
static int check_outputs(const tr_train_opts *o, tr_rows *rows, char *err, size_t errlen) {
    char ck[2][4200];
    if (o->ckpt_dir) {
        snprintf(ck[0], sizeof ck[0], "%s/ckpt.bin", o->ckpt_dir);
        snprintf(ck[1], sizeof ck[1], "%s/ckpt.tmp", o->ckpt_dir);
    }
    const char *set = rows->set_dir ? rows->set_dir : o->data_dir;
    ds_read_paths in = {.tokenizer = o->tokenizer, .sets = &set, .n_sets = set ? 1 : 0, .set_what = "the data folder"};
    /* the --init-from folder is an input too (--export never writes over it) */
    in.inputs = &o->init_from;
    in.n_inputs = o->init_from ? 1 : 0;
    in.in_what = "the --init-from folder";
    const char *outs[5] = {o->log_path, o->ckpt_dir, o->ckpt_dir ? ck[0] : NULL, o->ckpt_dir ? ck[1] : NULL,
                           o->export_dir};
    const char *labels[5] = {"--log", "--ckpt-dir", "--ckpt-dir", "--ckpt-dir", "--export"};
    for (int i = 0; i < 5; i++) {
        char e[9000];
        if (outs[i] && ds_check_output(labels[i], outs[i], &in, e, sizeof e) != DS_OK) {
            snprintf(err, errlen, "refusing to overwrite an input: %s", e);
            return TR_ERR_ARG;
        }
    }
    if (o->log_path && o->ckpt_dir &&
        (ds_same_file(o->log_path, ck[0]) || ds_path_within(o->log_path, ck[0]) == 1 ||
         ds_path_within(o->log_path, ck[1]) == 1)) {
        snprintf(err, errlen, "--log %s is the checkpoint: refusing to overwrite an input; log somewhere else",
                 o->log_path);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

/* The JSONL log: a regular file (created or truncated), or a FIFO / device
 * that a reader already holds open; opened without blocking so a FIFO with
 * no reader fails instead of hanging. */
static FILE *open_log(const char *path, int append) {
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
    if (fd < 0) return NULL;
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, &st) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) ||
        (!append && S_ISREG(st.st_mode) && ftruncate(fd, 0))) {
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) close(fd);
    return f;
}

/* ================================================================ the run */

typedef struct {
    const tr_train_opts *o;
    tr_train_result *res;
    char *err;
    size_t errlen;
    FILE *out;
    /* run_open */
    const tr_backend_ops *ops;
    tr_backend_info dev;
    tr_rows own_rows, *rows;
    tk_tokenizer *tok;
    int T;
    /* run_plan */
    int B, R;
    int resuming;
    tr_ckpt_meta cm; /* the checkpoint's header (resuming) */
    /* run_allocate */
    tr_model_config mc;
    tr_model *m; /* host model */
    const tr_optim_ops *optim;
    size_t P;
    tr_backend *be;
    tr_rng rng;
    uint64_t step0, pos0, seed;
    uint64_t extra[TR_BACKEND_EXTRA]; /* the backend's optimiser words (checkpoint section gpu_opt) */
    tr_loader *ld;
    int val_rows;
    tr_batch vb;
    uint32_t *st, *sp;
    uint8_t *sm;
    FILE *logf;
    /* steps */
    uint64_t warm, end;
    double lr_min, t_run;
    float lscale;
    int skipped;
} tr_run;

/* One optimiser step's sums. */
typedef struct {
    double t0, wait, lsum, lr, loss, dt, tps, vl;
    uint64_t ntgt, ntok;
    int nm;
    float gnorm;
} tr_step_acc;

const tr_backend_ops *tr_backend_find(tr_device d) {
    for (int i = 0; tr_backend_table[i]; i++)
        if (tr_backend_table[i]->device == d) return tr_backend_table[i];
    return NULL;
}

/* --device: the build's backend for it, then its probe (device present,
 * options it cannot do). */
static int select_backend(tr_run *r) {
    r->ops = tr_backend_find(r->o->device);
    if (!r->ops) {
        const char *d = tr_device_name(r->o->device);
        char up[16];
        size_t i = 0;
        for (; d[i] && i + 1 < sizeof up; i++) up[i] = (char)toupper((unsigned char)d[i]);
        up[i] = 0;
        snprintf(r->err, r->errlen,
                 "--device %s: this build has no %s backend (built without %s or no GPU); "
                 "use --device cpu, or --plan to see the GPU memory plan",
                 d, up, up);
        return TR_ERR_NODEVICE;
    }
    /* more than one rank (mpirun / srun): the data-parallel wrapper */
    int rc = tr_dist_backend(r->o, r->ops, &r->ops, r->err, r->errlen);
    if (rc) return rc;
    return r->ops->probe(r->o, &r->dev, r->err, r->errlen);
}

/* The row source (borrowed or the shard set) and T. */
static int open_rows(tr_run *r) {
    const tr_train_opts *o = r->o;
    r->rows = o->rows;
    if (!r->rows) {
        if (!o->data_dir) {
            snprintf(r->err, r->errlen, "no --data directory given");
            return TR_ERR_ARG;
        }
        char e[512];
        int rc = tr_rows_open_shards_ex(&r->own_rows, o->data_dir, !o->no_verify, e, sizeof e);
        if (rc) {
            snprintf(r->err, r->errlen, "cannot use shard set %s: %s", o->data_dir, e);
            return rc;
        }
        r->rows = &r->own_rows;
    }
    tr_rows *rows = r->rows;
    if (rows->n_rows[TR_SPLIT_TRAIN] == 0) {
        snprintf(r->err, r->errlen, "%s has no training rows", rows->desc);
        return TR_ERR_DATA;
    }
    int T = o->seq_len ? o->seq_len : rows->row_len;
    if (T > (int)TR_MAX_SEQ_LEN) {
        snprintf(r->err, r->errlen, "rows in %s hold %d tokens, more than the trainer's %u: pass --seq-len <= %u",
                 rows->desc, T, TR_MAX_SEQ_LEN, TR_MAX_SEQ_LEN);
        return TR_ERR_DATA;
    }
    if (T < 1 || T > rows->row_len) {
        snprintf(r->err, r->errlen, "--seq-len %d: rows in %s hold %d tokens; use --seq-len <= %d", T, rows->desc,
                 rows->row_len, rows->row_len);
        return TR_ERR_DATA;
    }
    r->T = T;
    return TR_OK;
}

/* --tokenizer must match the shards' fingerprint; without it, samples are
 * decoded with the tokenizer the shards name when it loads and matches. */
static int open_tokenizer(tr_run *r) {
    const tr_train_opts *o = r->o;
    tr_rows *rows = r->rows;
    if (o->tokenizer) {
        char e[512];
        if (tk_load(o->tokenizer, TK_PAT_NONE, &r->tok, e, sizeof e)) {
            r->tok = NULL;
            snprintf(r->err, r->errlen, "cannot load tokenizer %s: %s", o->tokenizer, e);
            return TR_ERR_IO;
        }
        uint8_t fp[32];
        tk_fingerprint(r->tok, fp);
        if (!zero32(rows->fingerprint) && memcmp(fp, rows->fingerprint, 32)) {
            char a[17], b[17];
            hex8(fp, a);
            hex8(rows->fingerprint, b);
            snprintf(r->err, r->errlen,
                     "tokenizer %s (fingerprint %s...) is not the one %s was built with (%s...): "
                     "rebuild the shards or pass the matching --tokenizer",
                     o->tokenizer, a, rows->desc, b);
            return TR_ERR_FINGERPRINT;
        }
    }
    if (!r->tok && o->sample_tokens > 0 && rows->tokenizer[0] && strcmp(rows->tokenizer, "custom") &&
        strspn(rows->tokenizer, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
            strlen(rows->tokenizer)) {
        /* only a plain name: an untrusted manifest does not choose a path to open */
        uint8_t fp[32];
        if (tk_load(rows->tokenizer, TK_PAT_NONE, &r->tok, NULL, 0) == 0) {
            tk_fingerprint(r->tok, fp);
            if (memcmp(fp, rows->fingerprint, 32)) {
                tk_free(r->tok);
                r->tok = NULL;
            }
        } else {
            r->tok = NULL;
        }
    }
    return TR_OK;
}

static int run_open(tr_run *r) {
    int rc = check_opts(r->o, r->err, r->errlen);
    if (!rc) rc = select_backend(r);
    if (!rc) rc = open_rows(r);
    if (!rc) rc = check_outputs(r->o, r->rows, r->err, r->errlen);
    if (!rc) rc = open_tokenizer(r);
    return rc;
}

/* --resume: whether there is a checkpoint, and that its header fits this
 * run (tokenizer, model shape, T); the payload is read by run_allocate. */
static int resume_meta(tr_run *r) {
    const tr_train_opts *o = r->o;
    const tr_plan_in *pi = &r->res->plan_in;
    memset(&r->cm, 0, sizeof r->cm);
    if (!o->resume) return TR_OK;
    if (!o->ckpt_dir) {
        snprintf(r->err, r->errlen, "--resume needs --ckpt-dir");
        return TR_ERR_ARG;
    }
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/ckpt.bin", o->ckpt_dir);
    r->resuming = access(ck, F_OK) == 0;
    if (!r->resuming) {
        if (!o->quiet) fprintf(r->out, "--resume: no checkpoint in %s yet: starting from step 0\n", o->ckpt_dir);
        return TR_OK;
    }
    int rc = tr_ckpt_load(o->ckpt_dir, &r->cm, NULL, 0, r->err, r->errlen);
    if (rc) return rc;
    const tr_ckpt_meta *cm = &r->cm;
    tr_rows *rows = r->rows;
    if (memcmp(cm->fingerprint, rows->fingerprint, 32)) {
        char a[17], b[17];
        hex8(cm->fingerprint, a);
        hex8(rows->fingerprint, b);
        snprintf(r->err, r->errlen,
                 "checkpoint in %s was trained with tokenizer %s..., but %s has %s...: refusing "
                 "to mix tokenizers",
                 o->ckpt_dir, a, rows->desc, b);
        return TR_ERR_FINGERPRINT;
    }
    if (cm->n_layer != pi->n_layer || cm->n_embd != pi->n_embd || cm->n_head != pi->n_head || cm->seq_len != r->T ||
        cm->max_seq != r->T || cm->vocab_size != rows->vocab_size) {
        snprintf(r->err, r->errlen,
                 "checkpoint in %s is for a different model or --seq-len (%dL H=%d C=%d T=%d V=%u; this run: "
                 "%dL H=%d C=%d T=%d V=%u)",
                 o->ckpt_dir, cm->n_layer, cm->n_head, cm->n_embd, cm->seq_len, cm->vocab_size, pi->n_layer, pi->n_head,
                 pi->n_embd, r->T, rows->vocab_size);
        return TR_ERR_DATA;
    }
    /* the family and its whole configuration (rope, norms, biases ...): model.txt */
    tr_model_config kc;
    int have = 0, rc2 = tr_family_ckpt_read(o->ckpt_dir, &kc, &have, r->err, r->errlen);
    if (rc2) return rc2;
    char a[1024] = "", b[1024] = "";
    tr_model_config run;
    memset(&run, 0, sizeof run);
    if (pi->model_family != TR_FAMILY_GPT2) {
        memcpy(&run, pi->model_cfg, sizeof run);
        tr_family_config_to_text(&run, b, sizeof b);
    }
    if (have) tr_family_config_to_text(&kc, a, sizeof a);
    if (have != (pi->model_family != TR_FAMILY_GPT2) || strcmp(a, b)) {
        snprintf(r->err, r->errlen, "checkpoint in %s is for another model (%s family%s; this run: %s family)",
                 o->ckpt_dir, have ? tr_family_of(&kc)->name : "gpt2",
                 have && pi->model_family == kc.family ? " of another configuration, model.txt" : "",
                 pi->model_family ? tr_family_of(&run)->name : "gpt2");
        return TR_ERR_DATA;
    }
    return TR_OK;
}

uint64_t tr_backend_budget(const tr_backend_info *info, uint64_t asked, FILE *note) {
    uint64_t b = asked ? asked : info->device_total, cap = info->device_capacity;
    if (!cap || b <= cap) return b;
    if (note)
        fprintf(note,
                "note: memory budget %.2f GiB is more than %s can give now (free memory after the CUDA "
                "context, plus the plan's context line, less 256 MiB): planning for %.2f GiB\n",
                (double)b / 1073741824.0, info->device_name[0] ? info->device_name : "this device",
                (double)cap / 1073741824.0);
    return cap;
}

/* --init-from DIR of the Llama family (config.json model_type llama, qwen2,
 * mistral): its configuration into the plan's input and the folder's
 * tokenizer checked against the shards'. TR_ERR_DATA with model_family 0:
 * another model_type (the GPT-2 reader's to judge). */
static int init_from_llama(tr_run *r) {
    tr_plan_in *pi = &r->res->plan_in;
    char cj[4200], e[1024] = "";
    snprintf(cj, sizeof cj, "%s/config.json", r->o->init_from);
    int rc = tr_family_plan_in(cj, (int)r->rows->vocab_size, r->T, pi, e, sizeof e);
    /* another family's folder, or no readable config.json: GPT-2's reader says */
    if (rc == TR_ERR_IO || (rc == TR_ERR_DATA && strstr(e, "model_type"))) return TR_ERR_DATA;
    if (!rc) {
        pi->model_family = TR_FAMILY_LLAMA;
        rc = tr_hf_import_check_tokenizer(r->o->init_from, r->rows, e, sizeof e);
    }
    if (rc) {
        pi->model_family = 0;
        snprintf(r->err, r->errlen, "--init-from %s: %s", r->o->init_from, e);
        return rc == TR_ERR_DATA ? TR_ERR_CORRUPT : rc; /* a Llama folder we cannot take: not GPT-2's either */
    }
    return TR_OK;
}

/* The Llama folder's weights into the host model (the same tensor order,
 * checked: the config the folder gives is the plan's). */
static int import_llama_weights(tr_run *r) {
    tr_llama *lm = NULL;
    tr_llama_arch arch;
    int rc = tr_llama_import_hf(r->o->init_from, r->T, &lm, &arch, r->err, r->errlen);
    if (rc) return rc;
    size_t P = tr_model_param_count(&r->mc);
    if (tr_llama_param_count(tr_llama_get_config(lm)) != P) {
        snprintf(r->err, r->errlen, "--init-from %s: the weights are not of config.json's model", r->o->init_from);
        rc = TR_ERR_CORRUPT;
    } else memcpy(tr_model_params(r->m), tr_llama_params(lm), P * sizeof(float));
    tr_llama_free(lm);
    return rc;
}

/* The memory plan (pure): refused before anything is allocated. */
static int run_plan(tr_run *r) {
    const tr_train_opts *o = r->o;
    tr_train_result *res = r->res;
    tr_plan_in *pi = &res->plan_in;
    memset(pi, 0, sizeof *pi);
    if (o->init_from) { /* the folder's config.json defines the model (train/hf_import.h) */
        int rc = init_from_llama(r);
        if (rc == TR_ERR_DATA && !pi->model_family) /* not a Llama-family model_type: GPT-2's reader says */
            rc = tr_hf_import_shape(o->init_from, r->rows, r->T, &pi->n_layer, &pi->n_head, &pi->n_embd, r->err,
                                    r->errlen);
        if (rc) return rc;
    } else { /* a preset of any family or a config.json (train/family.h) */
        int rc = tr_family_plan_in(o->model, (int)r->rows->vocab_size, r->T, pi, r->err, r->errlen);
        if (rc) return rc;
    }
    pi->vocab_size = r->rows->vocab_size;
    pi->seq_len = r->T;
    pi->max_seq = r->T;
    pi->batch_tokens = o->batch_tokens ? o->batch_tokens : (uint64_t)r->T;
    pi->token_budget = o->token_budget ? o->token_budget : pi->batch_tokens;
    pi->mem_budget = tr_backend_budget(&r->dev, o->mem_budget, o->quiet ? NULL : r->out);
    pi->device = r->ops->device;
    pi->precision = o->precision; /* the backend's probe refused what it cannot train */
    /* GPU activation recompute (the probe refused levels over TR_GPU_RECOMPUTE_MAX); the CPU
     * reference stores everything */
    pi->recompute = pi->device == TR_DEV_CUDA ? o->recompute : 0;
    pi->nbuf = o->nbuf;
    pi->doc_mask = o->doc_mask;
    pi->cpu_threads = kn_num_threads();
    pi->world = tr_dist_world(o); /* the plan is per rank */
    pi->zero = o->zero;
    pi->optim = o->optim;
    int rc = tr_plan(pi, &res->plan);
    if (rc) {
        /* a refusal with a reason (the family's GPU model cannot run the shape or level) says it */
        snprintf(r->err, r->errlen, "%s",
                 rc == TR_ERR_NOFIT || res->plan.reason[0] ? res->plan.reason : "bad model/plan configuration");
        return rc;
    }
    r->B = res->plan.micro_rows;
    r->R = res->plan.rows_per_step;
    if (r->ops->device_memory && !o->quiet) {
        fprintf(r->out, "device: %s, %.1f GiB; precision %s\n", r->dev.device_name,
                (double)r->dev.device_total / 1073741824.0, tr_precision_name(o->precision));
        tr_plan_print(r->out, pi, &res->plan); /* the plan, before step 1 */
        fflush(r->out); /* seen before anything slow (a d48 host model takes seconds to initialise) */
    }
    return resume_meta(r);
}

/* Host model (+ the checkpoint's payload on --resume), then the backend. */
static int alloc_model(tr_run *r) {
    const tr_train_opts *o = r->o;
    const tr_plan_in *pi = &r->res->plan_in;
    if (pi->model_family != TR_FAMILY_GPT2) memcpy(&r->mc, pi->model_cfg, sizeof r->mc); /* tr_plan checked it */
    else if (tr_model_config_make(pi->n_layer, pi->n_head, pi->n_embd, r->T, (int)r->rows->vocab_size, &r->mc)) {
        snprintf(r->err, r->errlen, "bad model configuration");
        return TR_ERR_ARG;
    }
    /* the layout tr_plan counted (check_opts found the name) */
    r->optim = o->optim ? tr_optim_find(o->optim) : tr_optim_default();
    int mr = tr_model_create(&r->mc, o->seed, &r->m);
    if (!mr && !r->ops->own_moments) /* else the backend keeps them (ZeRO-1 shards) */
        mr = tr_optim_host_init(r->optim, r->m);
    if (mr) {
        snprintf(r->err, r->errlen, "cannot allocate the model");
        return tr_backend_model_err(mr);
    }
    if (o->init_from && !r->resuming) { /* a checkpoint, when resuming, has the weights */
        int rc = r->mc.family == TR_FAMILY_LLAMA ? import_llama_weights(r)
                                                 : tr_hf_import_weights(o->init_from, r->m, r->err, r->errlen);
        if (rc) return rc;
    }
    r->P = tr_model_param_count(&r->mc);
    tr_rng_seed(&r->rng, o->seed ^ 0x5a5a5a5a5a5a5a5aULL);
    r->seed = o->seed;
    /* a backend with optimiser words writes them in a last section
     * (gpu_opt); either device resumes from either kind */
    int have_extra = 0;
    if (r->resuming) {
        tr_ckpt_section sec[TR_OPTIM_MAX_SECTIONS];
        int ns = tr_optim_ckpt_sections(r->optim, r->m, r->P, r->extra, sizeof r->extra, 1, sec);
        have_extra = r->cm.n_sections == (uint64_t)ns;
        int rc = tr_ckpt_load(o->ckpt_dir, &r->cm, sec, have_extra ? ns : ns - 1, r->err, r->errlen);
        if (rc) return rc;
        r->step0 = r->cm.step;
        r->pos0 = r->cm.loader_pos;
        r->rng = r->cm.rng;
        r->seed = r->cm.seed; /* the data order is the checkpointed run's */
        if (!o->quiet)
            fprintf(r->out, "resumed from %s/ckpt.bin at step %" PRIu64 " (loader position %" PRIu64 " rows)\n",
                    o->ckpt_dir, r->step0, r->pos0);
    }
    tr_backend_args ba = {o, r->m, &r->mc, r->B, r->T, &r->res->plan, r->optim};
    int rc = r->ops->create(&ba, &r->be, r->err, r->errlen);
    if (rc) return rc;
    if (r->resuming) {
        rc = r->ops->set_state(r->be, r->m, have_extra ? r->extra : NULL, r->step0, r->err, r->errlen);
        if (rc) return rc;
    }
    if (r->ops->device_memory && !o->quiet) {
        tr_backend_mem mem;
        r->ops->mem_report(r->be, &mem);
        fprintf(r->out, "device arena %.1f MiB (model + input batch need %.1f MiB)\n",
                (double)mem.arena_bytes / 1048576.0, (double)mem.arena_need / 1048576.0);
    }
    return TR_OK;
}

/* Loader, validation batch + row scratch (counted by the planner), log. */
static int alloc_io(tr_run *r) {
    const tr_train_opts *o = r->o;
    tr_rows *rows = r->rows;
    tr_loader_opts lo;
    tr_loader_opts_init(&lo);
    lo.seq_len = r->T;
    lo.micro_rows = r->B;
    lo.rows_per_step = r->R;
    lo.nbuf = o->nbuf;
    lo.seed = r->seed;
    lo.start_row = r->pos0;
    lo.doc_mask = o->doc_mask;
    if (r->ops->loader_hooks) r->ops->loader_hooks(r->be, &lo);
    int rc = tr_loader_open(rows, &lo, &r->ld);
    if (rc) {
        r->ld = NULL;
        snprintf(r->err, r->errlen, "cannot start the loader: %s", tr_strerror(rc));
        return rc;
    }
    if (o->val_every && rows->n_rows[TR_SPLIT_VAL]) {
        r->val_rows = o->val_rows ? o->val_rows : 8 * r->B;
        if ((uint64_t)r->val_rows > rows->n_rows[TR_SPLIT_VAL]) r->val_rows = (int)rows->n_rows[TR_SPLIT_VAL];
    }
    if (tr_batch_alloc(&r->vb, r->B, r->T)) return TR_ERR_NOMEM;
    r->st = malloc((size_t)rows->row_len * 4);
    r->sp = malloc((size_t)rows->row_len * 4);
    r->sm = malloc((size_t)rows->row_len);
    if (!r->st || !r->sp || !r->sm) return TR_ERR_NOMEM;
    if (o->log_path) {
        if (r->resuming) truncate_log(o->log_path, r->step0); /* drop steps logged after the checkpoint (killed run) */
        r->logf = open_log(o->log_path, r->resuming);
        if (!r->logf) {
            snprintf(r->err, r->errlen, "cannot write log %s: %s", o->log_path, strerror(errno));
            return TR_ERR_IO;
        }
    }
    return TR_OK;
}

static int run_allocate(tr_run *r) {
    const tr_train_opts *o = r->o;
    tr_train_result *res = r->res;
    res->baseline_rss = tr_cur_rss();
    int rc = alloc_model(r);
    if (!rc) rc = alloc_io(r);
    if (rc) return rc;
    if (!o->quiet)
        fprintf(r->out,
                "training %s (%zu params) on %s: T=%d, micro-batch %d rows (%d tokens <= budget %" PRIu64
                "), %d micro-batches/step, %" PRIu64 " tokens/step, plan %.1f MiB\n",
                o->init_from ? o->init_from : o->model, r->P, r->rows->desc, r->T, r->B, r->B * r->T,
                res->plan_in.token_budget, res->plan.n_micro, (uint64_t)r->R * (uint64_t)r->T,
                (double)res->plan.total_bytes / 1048576.0);
    r->warm = o->warmup;
    if (r->warm == UINT64_MAX) {
        r->warm = o->steps / 20;
        if (r->warm < 1) r->warm = 1;
    }
    r->lr_min = o->lr_min >= 0 ? o->lr_min : o->lr / 10;
    r->end = o->steps;
    if (o->stop_after && o->stop_after < r->end) r->end = o->stop_after;
    r->lscale = 1.0f;
    r->t_run = mc_now_s();
    return TR_OK;
}

/* The micro-batches of one step: each adds the gradient of its summed loss. */
static int accumulate(tr_run *r, tr_step_acc *a) {
    tr_train_result *res = r->res;
    for (;;) {
        const tr_batch *b;
        double w;
        int rc = tr_loader_next(r->ld, &b, &w);
        if (rc) {
            snprintf(r->err, r->errlen, "reading %s: %s", r->rows->desc,
                     r->rows->read_err[TR_SPLIT_TRAIN][0] ? r->rows->read_err[TR_SPLIT_TRAIN] : tr_strerror(rc));
            return rc;
        }
        a->wait += w;
        uint64_t mt = (uint64_t)b->rows * (uint64_t)b->T;
        if (mt > res->plan_in.token_budget) { /* cannot happen: the loader cuts at B rows */
            tr_loader_release(r->ld);
            snprintf(r->err, r->errlen, "internal: micro-batch of %" PRIu64 " tokens over the budget", mt);
            return TR_ERR_INTERNAL;
        }
        if (mt > res->max_micro_tokens) res->max_micro_tokens = mt;
        double l = 0;
        uint64_t k = 0;
        a->nm = b->n_micro;
        int last = b->micro == b->n_micro - 1;
        rc = r->ops->micro(r->be, r->ld, b, r->o->doc_mask, &l, &k, &a->wait, r->err, r->errlen);
        if (rc) return rc;
        a->lsum += l;
        a->ntgt += k;
        a->ntok += mt;
        if (last) return TR_OK;
    }
}

/* Mean validation loss over val_rows rows of the validation split. With
 * several ranks each evaluates its block of the batches and the sums are
 * added in batch order (train/dist.h): the one-process value. On failure
 * `why` holds the backend's or the communicator's reason ("" if none). */
static int validate(tr_run *r, double *out, char *why, size_t whylen) {
    why[0] = 0;
    double ls = 0, l[TR_DIST_VAL_GROUP];
    uint64_t nt = 0, k[TR_DIST_VAL_GROUP];
    int nb = (r->val_rows + r->B - 1) / r->B;
    for (int g0 = 0; g0 < nb; g0 += TR_DIST_VAL_GROUP) {
        int ng = nb - g0 < TR_DIST_VAL_GROUP ? nb - g0 : TR_DIST_VAL_GROUP;
        for (int i = 0; i < ng; i++) {
            int r0 = (g0 + i) * r->B;
            int n = r->val_rows - r0 < r->B ? r->val_rows - r0 : r->B;
            l[i] = 0;
            k[i] = 0;
            if (!tr_dist_val_mine(r->o, g0 + i, nb)) continue;
            int rc =
                tr_fill_rows(r->rows, TR_SPLIT_VAL, (uint64_t)r0, n, r->T, r->o->doc_mask, &r->vb, r->st, r->sp, r->sm);
            if (rc) return rc;
            rc = r->ops->eval(r->be, &r->vb, r->o->doc_mask, &l[i], &k[i], why, whylen);
            if (rc) return rc;
        }
        int rc = tr_dist_val_sum(r->o, l, k, ng, &ls, &nt, why, whylen);
        if (rc) return rc;
    }
    *out = nt ? ls / (double)nt : NAN;
    return TR_OK;
}

/* The step line on stdout and the JSON line of the log. */
static void log_step(tr_run *r, uint64_t step, const tr_step_acc *a) {
    const tr_train_opts *o = r->o;
    int BT = r->B * r->T;
    if (!o->quiet &&
        (o->log_every <= 1 || (step + 1) % (uint64_t)o->log_every == 0 || step + 1 == r->end || step == r->step0))
        fprintf(r->out,
                "step %5" PRIu64 "/%" PRIu64 " | loss %.4f | lr %.2e | gnorm %.3f | tokens %" PRIu64 " (%" PRIu64
                " targets, %d x %d) | %.0f tok/s | wait %.2f ms\n",
                step + 1, o->steps, a->loss, a->lr, a->gnorm, a->ntok, a->ntgt, a->nm, BT, a->tps, a->wait * 1e3);
}

static void log_json(tr_run *r, uint64_t step, const tr_step_acc *a) {
    if (!r->logf) return;
    /* one object per step; validation steps carry val_loss too.  A skipped
     * fp16 step has no gradient norm (NaN): JSON has no nan, so null */
    char gn[32];
    if (isfinite(a->gnorm)) snprintf(gn, sizeof gn, "%.9g", (double)a->gnorm);
    else snprintf(gn, sizeof gn, "null");
    fprintf(r->logf,
            "{\"step\":%" PRIu64 ",\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%s,\"tokens\":%" PRIu64
            ",\"target_tokens\":%" PRIu64 ",\"micro_batches\":%d,\"micro_tokens\":%d,\"tok_per_s\":%.1f,"
            "\"wait_ms\":%.3f,\"step_ms\":%.3f,\"epoch\":%.4f",
            step + 1, isnan(a->loss) ? 0.0 : a->loss, a->lr, gn, a->ntok, a->ntgt, a->nm, r->B * r->T, a->tps,
            a->wait * 1e3, a->dt * 1e3, (double)tr_loader_position(r->ld) / (double)r->rows->n_rows[TR_SPLIT_TRAIN]);
    if (!isnan(a->vl)) fprintf(r->logf, ",\"val_loss\":%.9g,\"val_rows\":%d", a->vl, r->val_rows);
    if (!a->ntgt) fprintf(r->logf, ",\"update_skipped\":\"no loss targets\""); /* loss 0 above means none */
    if (r->ops->loss_scale) fprintf(r->logf, ",\"loss_scale\":%.9g,\"skipped\":%d", (double)r->lscale, r->skipped);
    fprintf(r->logf, "}\n");
    fflush(r->logf);
}

/* The backend's state -> host model -> DIR/ckpt.bin (atomic). */
static int checkpoint(tr_run *r, uint64_t step) {
    tr_ckpt_meta km;
    memset(&km, 0, sizeof km);
    km.step = step + 1;
    km.loader_pos = tr_loader_position(r->ld);
    km.seed = r->seed;
    km.rng = r->rng;
    memcpy(km.fingerprint, r->rows->fingerprint, 32);
    km.n_layer = r->mc.n_layer;
    km.n_head = r->mc.n_head;
    km.n_embd = r->mc.d_model;
    km.max_seq = r->mc.max_seq;
    km.seq_len = r->T;
    km.vocab_size = r->rows->vocab_size;
    int rc = r->ops->get_state(r->be, r->m, 1, r->extra, r->err, r->errlen);
    if (rc) return rc;
    tr_ckpt_section sec[TR_OPTIM_MAX_SECTIONS];
    int ns = tr_optim_ckpt_sections(r->optim, r->m, r->P, r->extra, sizeof r->extra, r->ops->ckpt_extra, sec);
    /* rank 0 writes (a backend with its own moments gathers them to it);
     * every rank waits for the outcome, so the checkpoint on disk is one
     * that every rank has reached */
    if (r->mc.family != TR_FAMILY_GPT2 && tr_dist_rank(r->o) == 0) /* the family's record, first */
        rc = tr_family_ckpt_write(r->o->ckpt_dir, &r->mc, r->err, r->errlen);
    if (!rc && r->ops->save_ckpt) rc = r->ops->save_ckpt(r->be, r->o->ckpt_dir, &km, sec, ns, r->err, r->errlen);
    else if (!rc && tr_dist_rank(r->o) == 0) rc = tr_ckpt_save(r->o->ckpt_dir, &km, sec, ns, r->err, r->errlen);
    return tr_dist_agree(r->o, rc, "writing the checkpoint", r->err, r->errlen);
}

/* The backend's state -> host model -> a Hugging Face folder (--export,
 * train/export.h), written by rank 0. The tokenizer: --tokenizer, else the
 * one the shard set names when it loads with their fingerprint; the
 * framing: the shard set's. */
static int export_model(tr_run *r, uint64_t step) {
    const tr_train_opts *o = r->o;
    int rc = r->ops->get_state(r->be, r->m, 0, r->extra, r->err, r->errlen);
    if (rc) return rc;
    if (tr_dist_rank(o) == 0) {
        tk_tokenizer *own = NULL;
        const tk_tokenizer *tok = r->tok;
        const char *spec = o->tokenizer;
        if (!tok && r->rows->tokenizer[0] && strcmp(r->rows->tokenizer, "custom") &&
            tk_load(r->rows->tokenizer, TK_PAT_NONE, &own, NULL, 0) == 0) {
            uint8_t fp[32];
            tk_fingerprint(own, fp);
            if (memcmp(fp, r->rows->fingerprint, 32) == 0) tok = own, spec = r->rows->tokenizer;
        }
        int64_t bos = r->rows->frame_known ? r->rows->bos_id : -1;
        int64_t eos = r->rows->frame_known ? r->rows->eos_id : (int64_t)r->rows->eot_id;
        rc = tr_export_hf(o->export_dir, &r->mc, tr_model_params(r->m), o->export_bf16, tok, spec, bos, eos, r->err,
                          r->errlen);
        tk_free(own);
        if (!rc && !o->quiet)
            fprintf(r->out, "exported step %" PRIu64 " to %s%s\n", step + 1, o->export_dir,
                    tok ? "" : " (no tokenizer: pass --tokenizer)");
    }
    return tr_dist_agree(o, rc, "exporting the model", r->err, r->errlen);
}

/* One optimiser step (0-based index step). */
static int run_step(tr_run *r, uint64_t step) {
    const tr_train_opts *o = r->o;
    tr_train_result *res = r->res;
    tr_step_acc a;
    memset(&a, 0, sizeof a);
    a.t0 = mc_now_s();
    a.vl = NAN;
    int rc = r->ops->zero_grad(r->be, r->err, r->errlen);
    if (!rc) rc = accumulate(r, &a);
    if (!rc && r->ops->reduce) rc = r->ops->reduce(r->be, &a.lsum, &a.ntgt, r->err, r->errlen);
    if (rc) return rc;
    a.lr = tr_lr_at(step, r->warm, o->steps, o->lr, r->lr_min);
    tr_optim_hparams h = {(float)a.lr, o->beta1, o->beta2, o->eps, o->weight_decay};
    if (a.ntgt == 0) {
        /* Not one loss token in the whole step (a.ntgt is global after
         * reduce, so every rank agrees): the gradient is zero, yet an update
         * would still apply weight decay and move the optimiser's moments.
         * Skip it: parameters and optimiser state stay bit-identical. The
         * step still counts, as an fp16 overflow skip does: the schedule,
         * the loader, logs and checkpoints move on (docs/training.md). */
        a.gnorm = 0.0f;
        if (!o->quiet)
            fprintf(r->out, "step %5" PRIu64 ": no loss targets (every token masked): update skipped\n", step + 1);
    } else {
        rc = r->ops->step(r->be, &h, o->grad_clip, a.ntgt, step + 1, &a.gnorm, &r->skipped, &r->lscale, r->err,
                          r->errlen);
        if (rc) return rc;
        if (r->skipped && !o->quiet)
            fprintf(r->out, "step %5" PRIu64 ": non-finite gradient at loss scale %.0f: update skipped\n", step + 1,
                    (double)r->lscale);
    }
    a.loss = a.ntgt ? a.lsum / (double)a.ntgt : NAN;
    a.dt = mc_now_s() - a.t0;
    if (res->steps_done == 0) res->first_loss = a.loss;
    res->last_loss = a.loss;
    res->last_grad_norm = a.gnorm;
    res->steps_done++;
    res->total_wait_s += a.wait;
    res->last_step = step + 1;
    a.tps = a.dt > 0 ? (double)a.ntok / a.dt : 0;
    log_step(r, step, &a);
    if (r->val_rows && (step + 1) % o->val_every == 0) {
        char why[512];
        rc = validate(r, &a.vl, why, sizeof why);
        if (rc) {
            snprintf(r->err, r->errlen, "validation on %s failed: %s", r->rows->desc,
                     r->rows->read_err[TR_SPLIT_VAL][0] ? r->rows->read_err[TR_SPLIT_VAL]
                     : why[0]                           ? why
                                                        : tr_strerror(rc));
            return rc;
        }
        res->last_val_loss = a.vl;
        if (!o->quiet) fprintf(r->out, "step %5" PRIu64 " | val loss %.4f (%d rows)\n", step + 1, a.vl, r->val_rows);
    }
    log_json(r, step, &a);
    if (o->ckpt_dir && ((o->ckpt_every && (step + 1) % o->ckpt_every == 0) || step + 1 == r->end)) {
        int rc = checkpoint(r, step);
        if (rc) return rc;
    }
    if (o->export_dir && ((o->export_every && (step + 1) % o->export_every == 0) || step + 1 == r->end))
        return export_model(r, step);
    return TR_OK;
}

/* Device memory: planned vs measured (backends with device memory). */
static void report_device_memory(tr_run *r) {
    tr_train_result *res = r->res;
    tr_backend_mem mem;
    r->ops->mem_report(r->be, &mem);
    uint64_t dev_plan = res->plan.device_bytes ? res->plan.device_bytes : res->plan.total_bytes;
    if (!r->o->quiet)
        fprintf(r->out,
                "device memory: planned %.1f MiB, measured peak %.1f MiB in use after step 1 (%s; "
                "%+.1f%%; %.1f MiB before the arena), arena %.1f MiB\n",
                (double)dev_plan / 1048576.0, (double)mem.peak_bytes / 1048576.0, mem.source ? mem.source : "?",
                dev_plan ? 100.0 * ((double)mem.peak_bytes - (double)dev_plan) / (double)dev_plan : 0.0,
                (double)mem.baseline_bytes / 1048576.0, (double)mem.arena_bytes / 1048576.0);
    if (r->logf) {
        fprintf(r->logf,
                "{\"planned_bytes\":%" PRIu64 ",\"peak_bytes\":%" PRIu64 ",\"arena_bytes\":%" PRIu64
                ",\"baseline_bytes\":%" PRIu64 "}\n",
                dev_plan, mem.peak_bytes, mem.arena_bytes, mem.baseline_bytes);
        fflush(r->logf);
    }
}

/* Summary, memory report, --sample (on the host model). */
static int run_finish(tr_run *r) {
    const tr_train_opts *o = r->o;
    tr_train_result *res = r->res;
    if (res->steps_done) res->mean_wait_s = res->total_wait_s / (double)res->steps_done;
    if (!o->quiet && res->steps_done)
        fprintf(r->out, "done: %" PRIu64 " steps in %.1f s, loss %.4f -> %.4f, input wait %.3f ms/step\n",
                res->steps_done, mc_now_s() - r->t_run, res->first_loss, res->last_loss, res->mean_wait_s * 1e3);
    if (r->ops->device_memory && res->steps_done) report_device_memory(r);
    if (o->sample_tokens > 0) {
        int rc = r->ops->get_state(r->be, r->m, 0, NULL, r->err, r->errlen); /* the trained params */
        if (rc) return rc;
    }
    res->peak_rss = tr_peak_rss();
    if (!o->quiet && r->ops->device_memory && res->peak_rss && res->baseline_rss)
        fprintf(r->out, "host memory: plan %.2f MiB (host lines), measured peak RSS growth %.2f MiB\n",
                (double)res->plan.host_bytes / 1048576.0, (double)(res->peak_rss - res->baseline_rss) / 1048576.0);
    else if (!o->quiet && res->peak_rss && res->baseline_rss)
        fprintf(r->out, "memory: plan %.2f MiB, measured peak RSS growth %.2f MiB (%+.1f%%)\n",
                (double)res->plan.total_bytes / 1048576.0, (double)(res->peak_rss - res->baseline_rss) / 1048576.0,
                100.0 * ((double)(res->peak_rss - res->baseline_rss) - (double)res->plan.total_bytes) /
                    (double)res->plan.total_bytes);
    if (o->sample_tokens > 0) sample(r->out, r->m, r->rows, r->tok, r->T, o->sample_tokens, o->sample_temp, &r->rng);
    return TR_OK;
}

static void run_close(tr_run *r) {
    if (r->ld) tr_loader_close(r->ld); /* before the backend: its buffers may be the backend's (pinned) */
    if (r->be) r->ops->destroy(r->be);
    if (r->logf) fclose(r->logf);
    tr_batch_free(&r->vb);
    free(r->st);
    free(r->sp);
    free(r->sm);
    tr_model_free(r->m);
    if (r->tok) tk_free(r->tok);
    if (r->rows == &r->own_rows) tr_rows_close(&r->own_rows);
}

int tr_train(const tr_train_opts *o, tr_train_result *res, char *err, size_t errlen) {
    tr_run r;
    memset(&r, 0, sizeof r);
    memset(res, 0, sizeof *res);
    err[0] = 0;
    tr_train_opts quiet_rank;
    if (tr_dist_rank(o) != 0) {
        /* data-parallel ranks other than 0: no messages, log or sample */
        quiet_rank = *o;
        quiet_rank.quiet = 1;
        quiet_rank.log_path = NULL;
        quiet_rank.sample_tokens = 0;
        o = &quiet_rank;
    }
    r.o = o;
    r.res = res;
    r.err = err;
    r.errlen = errlen;
    r.out = o->out ? o->out : stdout;
    tr_threads_bound(); /* before the first parallel region: a huge OMP_NUM_THREADS crashed libgomp */
    int rc = run_open(&r);
    if (!rc) rc = run_plan(&r);
    if (!rc) rc = run_allocate(&r);
    for (uint64_t step = r.step0; !rc && step < r.end; step++) rc = run_step(&r, step);
    if (!rc) rc = run_finish(&r);
    run_close(&r);
    return rc;
}
