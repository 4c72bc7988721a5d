/* test_loss_mask_train.c - the loss bit from the shard to the trainer (issue
 * 28 item 3): rows with a per-token loss mask (about half of the tokens
 * masked out, one row without any target) are written into a version-2
 * shard set through the packer (ds_packer_add_loss), read back by
 * llmtrain's loader (tr_rows_open_shards + tr_fill_rows) and run through the
 * tiny GPT-2 (train/model.c on the CPU reference kernels). The loader's
 * targets must be the reference labels (-1 where PyTorch has -100), and the
 * loss (sum / targets) and every parameter gradient (grad_scale =
 * 1/targets) must equal PyTorch's F.cross_entropy(..., ignore_index=-100)
 * mean and its gradients (tests/ref/make_loss_mask_fixture.py ->
 * tests/data/ref/loss_mask_ref.bin; float64 reference). A batch made only
 * of the zero-target row gives loss sum 0 over 0 targets and zero, finite
 * gradients. Criterion as test_model_ref: |a - r| <= 1e-5 max(|a|, |r|,
 * 0.1 max|r|). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_internal.h"
#include "ds.h"
#include "model.h"
#include "tr.h"

#define RTOL 1e-5
#define FLOOR_FRAC 0.1

typedef struct {
    char name[64];
    uint32_t dims[8];
    int ndim;
    size_t n;
    void *data;
} fx_t;
static fx_t fx[32];
static int nfx, failures;

static int load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char magic[8];
    uint32_t count;
    int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, "MKSREF01", 8) && fread(&count, 4, 1, f) == 1 && count <= 32;
    for (uint32_t i = 0; ok && i < count; i++) {
        uint32_t nl, dt, nd;
        ok = fread(&nl, 4, 1, f) == 1 && nl < sizeof fx[i].name && fread(fx[i].name, 1, nl, f) == nl &&
             fread(&dt, 4, 1, f) == 1 && fread(&nd, 4, 1, f) == 1 && nd <= 8 && fread(fx[i].dims, 4, nd, f) == nd;
        if (!ok) break;
        fx[i].name[nl] = 0;
        fx[i].ndim = (int)nd;
        fx[i].n = 1;
        for (uint32_t d = 0; d < nd; d++) fx[i].n *= fx[i].dims[d];
        fx[i].data = malloc(fx[i].n * 4 + 1);
        ok = fx[i].data && fread(fx[i].data, 4, fx[i].n, f) == fx[i].n;
        nfx++;
    }
    fclose(f);
    return ok ? 0 : -1;
}

static const fx_t *get(const char *name) {
    for (int i = 0; i < nfx; i++)
        if (!strcmp(fx[i].name, name)) return &fx[i];
    fprintf(stderr, "fixture %s missing\n", name);
    exit(1);
}

static void compare(const char *what, const float *a, const float *r, size_t n) {
    double mx = 0, worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(r[i]));
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]), s = fmax(fmax(fabs(a[i]), fabs(r[i])), FLOOR_FRAC * mx);
        double rel = s > 0 ? d / s : d;
        if (!(rel <= RTOL)) bad = 1;
        if (!(rel <= worst)) worst = rel, wi = i;
    }
    printf("%s %-28s worst rel %.2e at %zu (%g vs %g)\n", bad ? "FAIL" : "ok  ", what, worst, wi, a[wi], r[wi]);
    failures += bad;
}

/* The fixture's rows as one document each into a version-2 set (pack none,
 * no framing, no shuffle: row r of the set is row r of the fixture). */
static int write_set(const char *dir, const uint32_t *tok, const uint32_t *bits, const uint32_t *valid, int R,
                     uint32_t row_len, uint32_t vocab) {
    ds_build_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.tokenizer_spec, sizeof cfg.tokenizer_spec, "fixture");
    snprintf(cfg.tokenizer_name, sizeof cfg.tokenizer_name, "fixture");
    cfg.vocab_size = vocab;
    cfg.eot_id = vocab - 1;
    cfg.framed = 1;
    cfg.bos_id = cfg.eos_id = -1;
    cfg.seq_len = row_len;
    cfg.pack = DS_PACK_NONE;
    cfg.over_long = DS_OL_TRUNCATE;
    cfg.bfd_window = 1;
    cfg.shard_tokens = 1u << 20;
    snprintf(cfg.field, sizeof cfg.field, "text");
    snprintf(cfg.doc_sep, sizeof cfg.doc_sep, "file");
    cfg.part_k = cfg.part_n = 1;
    cfg.loss_bits = 1;
    ds_shard_rec *recs = NULL;
    size_t n_recs = 0, cap = 0;
    ds_build_account acc;
    memset(&acc, 0, sizeof acc);
    ds_shard_writer wr;
    ds_packer pk;
    ds_shard_writer_init(&wr, &cfg, 0, dir, &recs, &n_recs, &cap);
    int rc = ds_packer_init(&pk, &cfg, &wr, &acc);
    uint8_t m[64];
    for (int r = 0; r < R && rc == DS_OK; r++) {
        for (uint32_t i = 0; i < valid[r]; i++) m[i] = (uint8_t)bits[(size_t)r * row_len + i];
        int dropped = 0;
        rc = ds_packer_add_loss(&pk, tok + (size_t)r * row_len, m, valid[r], &dropped);
        acc.records++, acc.docs_split[0]++;
    }
    if (rc == DS_OK) rc = ds_packer_flush(&pk);
    if (rc == DS_OK) rc = ds_shard_writer_finish(&wr, &acc);
    char err[512] = "";
    if (rc == DS_OK) rc = ds_manifest_write(dir, &cfg, &acc, recs, n_recs, err, sizeof err);
    if (rc != DS_OK) fprintf(stderr, "write_set: %d %s %s\n", rc, wr.err, err);
    ds_packer_free(&pk);
    ds_shard_writer_free(&wr);
    free(recs);
    return rc;
}

/* The file's bytes (*n), NULL when unreadable. */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    long sz = -1;
    if (f && !fseek(f, 0, SEEK_END) && (sz = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) && (p = malloc((size_t)sz)) &&
        fread(p, 1, (size_t)sz, f) != (size_t)sz)
        free(p), p = NULL;
    if (f) fclose(f);
    *n = p ? (size_t)sz : 0;
    return p;
}

/* llmtrain on the CPU backend: 1 step on the fixture's set (targets), then
 * resumed for 2 steps on the same rows with every loss bit clear. A step
 * without one target must not update: weight decay and Adam's moments would
 * move parameters and state with a zero gradient. The checkpoints after
 * step 1 and after step 3 must hold the same parameter and optimiser bytes
 * (everything past the header; the header's step and loader position
 * differ), and the run must have reached step 3. */
static int zero_target_steps(const char *dir, const uint32_t *tok, const uint32_t *valid, int R, uint32_t row_len,
                             uint32_t vocab) {
    char zdir[] = "/tmp/test_loss_mask_zero_XXXXXX", ck[] = "/tmp/test_loss_mask_ck_XXXXXX";
    if (!mkdtemp(zdir) || !mkdtemp(ck)) return 1;
    uint32_t *none = calloc((size_t)R * row_len, 4);
    int bad = !none || write_set(zdir, tok, none, valid, R, row_len, vocab) != DS_OK;
    free(none);
    char err[512] = "", path[128], log[128];
    snprintf(path, sizeof path, "%s/ckpt.bin", ck);
    snprintf(log, sizeof log, "%s/log.jsonl", ck);
    tr_train_opts o;
    tr_train_opts_init(&o);
    o.model = "tiny";
    o.steps = 3;
    o.stop_after = 1;
    o.batch_tokens = (uint64_t)R * (row_len - 1);
    o.weight_decay = 0.1f;
    o.warmup = 1;
    o.ckpt_dir = ck;
    o.no_verify = 1;
    o.quiet = 1;
    o.out = stdout;
    o.data_dir = dir;
    tr_train_result res;
    size_t n1 = 0, n3 = 0;
    unsigned char *c1 = NULL, *c3 = NULL;
    if (!bad && tr_train(&o, &res, err, sizeof err) != TR_OK) bad = 1, fprintf(stderr, "step 1: %s\n", err);
    if (!bad) c1 = slurp(path, &n1);
    o.data_dir = zdir, o.stop_after = 0, o.resume = 1, o.log_path = log;
    if (!bad && tr_train(&o, &res, err, sizeof err) != TR_OK) bad = 1, fprintf(stderr, "steps 2-3: %s\n", err);
    if (!bad) c3 = slurp(path, &n3);
    size_t hdr = 1024, diff = 0;
    if (!c1 || !c3 || n1 != n3 || n1 < hdr + 8) bad = 1;
    else
        for (size_t i = hdr; i < n1 - 8; i++) diff += c1[i] != c3[i];
    size_t nl = 0;
    unsigned char *lg = slurp(log, &nl);
    char *lgs = lg ? calloc(nl + 1, 1) : NULL;
    if (lgs) memcpy(lgs, lg, nl);
    int skips = 0;
    for (const char *q = lgs; q && (q = strstr(q, "\"update_skipped\":\"no loss targets\"")); q++) skips++;
    bad += diff != 0 || res.last_step != 3 || skips != 2;
    printf("%s zero-target steps 2-3        %zu of %zu checkpoint bytes past the header changed, at step %llu, %d "
           "logged skips\n",
           bad ? "FAIL" : "ok  ", diff, n1 > hdr + 8 ? n1 - hdr - 8 : 0, (unsigned long long)res.last_step, skips);
    free(c1), free(c3), free(lg), free(lgs);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", zdir, ck);
    if (system(cmd) != 0) bad = 1;
    return bad != 0;
}

int main(void) {
    if (load(MKS_TEST_DATA "/ref/loss_mask_ref.bin")) {
        fprintf(stderr, "cannot read %s\n", MKS_TEST_DATA "/ref/loss_mask_ref.bin");
        return 1;
    }
    const int32_t *cf = get("config")->data;
    tr_model_config c;
    if (tr_model_config_make(cf[0], cf[1], cf[2], cf[3], cf[4], &c) || c.vocab_padded != cf[5]) return 1;
    const fx_t *ft = get("row_tokens");
    int R = (int)ft->dims[0], ROW = (int)ft->dims[1], T = ROW - 1;
    const uint32_t *tok = ft->data, *bits = get("row_bits")->data, *valid = get("row_valid")->data;
    const int32_t *labels = get("labels")->data;
    const float *loss_ref = get("loss")->data, *grads_ref = get("grads")->data;

    char dir[] = "/tmp/test_loss_mask_train_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    if (write_set(dir, tok, bits, valid, R, (uint32_t)ROW, (uint32_t)c.vocab) != DS_OK) return 1;
    tr_rows rows;
    char err[512] = "";
    if (tr_rows_open_shards(&rows, dir, err, sizeof err) != TR_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 1;
    }
    tr_batch b;
    uint32_t *st = malloc((size_t)ROW * 4), *sp = malloc((size_t)ROW * 4);
    uint8_t *sm = malloc((size_t)ROW);
    if (tr_batch_alloc(&b, R, T) != TR_OK || !st || !sp || !sm ||
        tr_fill_rows(&rows, TR_SPLIT_TRAIN, 0, R, T, 0, &b, st, sp, sm) != TR_OK) {
        fprintf(stderr, "loader failed\n");
        return 1;
    }
    /* the loader's targets: the reference labels, -1 for -100 */
    int lab_bad = 0;
    uint64_t nref = 0;
    for (int i = 0; i < R * T; i++) {
        int32_t want = labels[i] == -100 ? -1 : labels[i];
        nref += labels[i] != -100;
        if (b.targets[i] != want || b.tmask[i] != (labels[i] != -100) || b.inputs[i] != tok[(i / T) * ROW + i % T])
            lab_bad++;
    }
    printf("%s loader targets = labels     %d of %d differ; %llu targets (ref %llu) of %d real tokens\n",
           lab_bad ? "FAIL" : "ok  ", lab_bad, R * T, (unsigned long long)b.n_targets, (unsigned long long)nref,
           (int)(valid[0] + valid[1] + valid[2] + valid[3]));
    failures += lab_bad || b.n_targets != nref || (double)nref != loss_ref[1];

    tr_model *m;
    if (tr_model_create(&c, 1, &m)) return 1;
    size_t P = tr_model_param_count(&c);
    memcpy(tr_model_params(m), get("params0")->data, P * sizeof(float));
    tr_model_zero_grad(m);
    double ls = 0;
    uint64_t n = 0;
    if (tr_model_fwd_bwd(m, R, T, b.inputs, b.targets, b.pos, NULL, 1.0f / (float)b.n_targets, &ls, &n)) return 1;
    float loss = (float)(ls / (double)n);
    compare("loss (mean over targets)", &loss, &loss_ref[0], 1);
    compare("every gradient", tr_model_grads(m), grads_ref, P);

    /* the zero-target row alone: nothing to learn, nothing NaN */
    tr_batch z;
    if (tr_batch_alloc(&z, 1, T) != TR_OK || tr_fill_rows(&rows, TR_SPLIT_TRAIN, 1, 1, T, 0, &z, st, sp, sm) != TR_OK)
        return 1;
    tr_model_zero_grad(m);
    if (tr_model_fwd_bwd(m, 1, T, z.inputs, z.targets, z.pos, NULL, 1.0f, &ls, &n)) return 1;
    int zbad = z.n_targets != 0 || n != 0 || ls != 0.0;
    for (size_t i = 0; i < P; i++) zbad += !(tr_model_grads(m)[i] == 0.0f);
    printf("%s zero-target row              %llu targets, loss sum %g, %d nonzero or NaN gradients\n",
           zbad ? "FAIL" : "ok  ", (unsigned long long)z.n_targets, ls, zbad);
    failures += zbad != 0;

    tr_batch_free(&b);
    tr_batch_free(&z);
    tr_model_free(m);
    tr_rows_close(&rows);
    failures += zero_target_steps(dir, tok, valid, R, (uint32_t)ROW, (uint32_t)c.vocab);
    free(st), free(sp), free(sm);
    for (int i = 0; i < nfx; i++) free(fx[i].data);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failures++;
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
