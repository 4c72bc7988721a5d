/* test_trainer.c - the trainer system (train/tr.h) on in-memory rows:
 *  - loader: the token budget is never exceeded over random shard sets,
 *    every step has exactly rows_per_step rows, per-epoch permutation is a
 *    bijection, order is deterministic for a seed, resume position exact,
 *    masks/positions/segments as documented;
 *  - planner: budgets honoured, refusal with reasons, monotone in B;
 *  - training: loss falls, gradient accumulation is normalised by the
 *    target tokens of the whole step (B=1 x R == B=R), bit-exact resume,
 *    checkpoint corruption and tokenizer fingerprint refusal. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tr.h"
#include "test_check.h"

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

/* Synthetic learnable rows: documents of random length, each an arithmetic
 * progression mod (V-1), EOT = V-1 at the end; pos restarts per document;
 * a tail of some rows is padding (mask 0). Row r's first token encodes r so
 * tests can recover the row index. */
static int make_rows(tr_rows *out, uint64_t n_train, uint64_t n_val, int L, uint32_t V, int pad) {
    uint64_t n = n_train + n_val;
    uint32_t *tok = malloc(sizeof(uint32_t) * n * (size_t)L);
    uint32_t *pos = malloc(sizeof(uint32_t) * n * (size_t)L);
    uint8_t *mask = malloc(n * (size_t)L);
    for (uint64_t r = 0; r < n; r++) {
        int j = 0;
        uint32_t p = 0, a = 1 + (uint32_t)(rnd() % 3), x = (uint32_t)(rnd() % (V - 1));
        int doclen = 3 + (int)(rnd() % (uint64_t)L);
        int valid = pad && (r % 3 == 0) ? L - 1 - (int)(rnd() % (uint64_t)(L / 2)) : L;
        for (j = 0; j < L; j++) {
            size_t o = (size_t)r * (size_t)L + (size_t)j;
            if (j >= valid) {
                tok[o] = V - 1;
                pos[o] = 0;
                mask[o] = 0;
                continue;
            }
            if ((int)p == doclen - 1) {
                tok[o] = V - 1;
                pos[o] = p;
                p = 0;
                doclen = 3 + (int)(rnd() % (uint64_t)L);
                a = 1 + (uint32_t)(rnd() % 3);
                x = (uint32_t)(rnd() % (V - 1));
            } else {
                tok[o] = x;
                x = (x + a) % (V - 1);
                pos[o] = p++;
            }
            mask[o] = 1;
        }
    }
    int rc = tr_rows_mem(out, n_train, n_val, L, V, tok, pos, mask);
    free(tok);
    free(pos);
    free(mask);
    return rc;
}

/* ------------------------------------------------------------ loader */
static void test_permutation(void) {
    for (uint64_t n = 1; n < 300; n += 7) {
        uint8_t *seen = calloc(n, 1);
        for (uint64_t e = 0; e < 3; e++) {
            memset(seen, 0, n);
            for (uint64_t i = 0; i < n; i++) {
                uint64_t r = tr_row_at(e * n + i, n, 42, 1);
                CHECK(r < n, "row %llu >= %llu", (unsigned long long)r, (unsigned long long)n);
                if (r < n) {
                    CHECK(!seen[r], "row %llu twice in epoch %llu (n=%llu)", (unsigned long long)r,
                          (unsigned long long)e, (unsigned long long)n);
                    seen[r] = 1;
                }
            }
        }
        free(seen);
    }
    /* different epochs / seeds differ */
    int diff = 0;
    for (uint64_t i = 0; i < 100; i++) diff += tr_row_at(i, 100, 1, 1) != tr_row_at(100 + i, 100, 1, 1);
    CHECK(diff > 50, "epochs not reshuffled (%d)", diff);
}

/* Random shard sets: token budget never exceeded, geometry, determinism,
 * resume. */
static void test_loader_random(void) {
    for (int trial = 0; trial < 60; trial++) {
        int L = 2 + (int)(rnd() % 64);
        uint64_t ntr = 1 + rnd() % 50;
        tr_rows rows;
        CHECK(make_rows(&rows, ntr, 0, L, 97, 1) == TR_OK, "rows");
        int T = 1 + (int)(rnd() % (uint64_t)L);
        uint64_t budget = (uint64_t)T * (1 + rnd() % 6) + rnd() % (uint64_t)T;
        uint64_t bt = (uint64_t)T * (1 + rnd() % 20);
        /* what llmtrain does: the planner picks B */
        tr_plan_in pi;
        memset(&pi, 0, sizeof pi);
        pi.n_layer = 1;
        pi.n_head = 1;
        pi.n_embd = 8;
        pi.vocab_size = 97;
        pi.seq_len = T;
        pi.max_seq = T;
        pi.token_budget = budget;
        pi.batch_tokens = bt;
        pi.mem_budget = (trial % 3 == 0) ? 300000 + rnd() % 400000 : 0;
        tr_plan_out po;
        int prc = tr_plan(&pi, &po);
        if (prc == TR_ERR_NOFIT) {
            CHECK(po.reason[0] && po.advice[0], "refusal without reasons");
            tr_rows_close(&rows);
            continue;
        }
        CHECK(prc == TR_OK, "plan rc %d", prc);
        CHECK((uint64_t)po.micro_rows * (uint64_t)T <= budget, "plan over budget");
        if (pi.mem_budget) CHECK(po.total_bytes <= pi.mem_budget, "plan over memory budget");
        tr_loader_opts o;
        tr_loader_opts_init(&o);
        o.seq_len = T;
        o.micro_rows = po.micro_rows;
        o.rows_per_step = po.rows_per_step;
        o.seed = (uint64_t)trial;
        o.nbuf = 2 + trial % 3;
        o.doc_mask = trial & 1;
        tr_loader *ld;
        CHECK(tr_loader_open(&rows, &o, &ld) == TR_OK, "open");
        uint64_t nsteps = 5, firsts[64];
        int nf = 0;
        for (uint64_t s = 0; s < nsteps; s++) {
            int got = 0;
            for (;;) {
                const tr_batch *b;
                CHECK(tr_loader_next(ld, &b, NULL) == TR_OK, "next");
                CHECK((uint64_t)b->rows * (uint64_t)b->T <= budget, "micro-batch %d x %d over budget %llu", b->rows,
                      b->T, (unsigned long long)budget);
                CHECK(b->step == s, "step %llu != %llu", (unsigned long long)b->step, (unsigned long long)s);
                got += b->rows;
                if (nf < 64) firsts[nf++] = b->first_row;
                /* masks and targets */
                uint64_t nt = 0;
                for (int i = 0; i < b->rows * b->T; i++) {
                    nt += b->tmask[i];
                    CHECK((b->targets[i] < 0) == !b->tmask[i], "target/mask disagree");
                    if (!o.doc_mask) CHECK(b->pos[i] == i % b->T && b->seg[i] == 0, "positions without doc mask");
                    else if (i % b->T == 0) CHECK(b->pos[i] == 0 && b->seg[i] == 0, "row start");
                }
                CHECK(nt == b->n_targets, "n_targets");
                int last = b->micro == b->n_micro - 1;
                tr_loader_release(ld);
                if (last) break;
            }
            CHECK(got == po.rows_per_step, "step rows %d != %d", got, po.rows_per_step);
        }
        uint64_t pos = tr_loader_position(ld);
        CHECK(pos == nsteps * (uint64_t)po.rows_per_step, "position");
        tr_loader_close(ld);
        /* resume at step 2 replays the same batches */
        o.start_row = 2 * (uint64_t)po.rows_per_step;
        CHECK(tr_loader_open(&rows, &o, &ld) == TR_OK, "reopen");
        int nm = (po.rows_per_step + po.micro_rows - 1) / po.micro_rows;
        for (int k = 2 * nm; k < nf; k++) {
            const tr_batch *b;
            CHECK(tr_loader_next(ld, &b, NULL) == TR_OK, "next");
            CHECK(b->first_row == firsts[k], "resume replays a different stream");
            tr_loader_release(ld);
        }
        tr_loader_close(ld);
        tr_rows_close(&rows);
    }
}

/* doc_mask: segments/positions follow the row's document starts. */
static void test_docmask(void) {
    uint32_t tok[8] = {1, 2, 3, 9, 4, 5, 9, 9};
    uint32_t pos[8] = {5, 6, 7, 8, 0, 1, 2, 0};
    uint8_t mask[8] = {1, 1, 1, 1, 1, 1, 1, 0};
    tr_rows rows;
    CHECK(tr_rows_mem(&rows, 1, 0, 8, 10, tok, pos, mask) == TR_OK, "mem");
    tr_batch b;
    tr_batch_alloc(&b, 1, 8);
    uint32_t st[8], sp[8];
    uint8_t sm[8];
    CHECK(tr_fill_rows(&rows, TR_SPLIT_TRAIN, 0, 1, 8, 1, &b, st, sp, sm) == TR_OK, "fill");
    int32_t wpos[8] = {0, 1, 2, 3, 0, 1, 2, 0}, wseg[8] = {0, 0, 0, 0, 1, 1, 1, 2};
    int32_t wtgt[8] = {2, 3, 9, 4, 5, 9, -1, -1};
    for (int j = 0; j < 8; j++) {
        CHECK(b.pos[j] == wpos[j], "pos[%d] = %d", j, b.pos[j]);
        CHECK(b.seg[j] == wseg[j], "seg[%d] = %d", j, b.seg[j]);
        CHECK(b.targets[j] == wtgt[j], "target[%d] = %d", j, b.targets[j]);
    }
    CHECK(b.n_targets == 6, "n_targets %llu", (unsigned long long)b.n_targets);
    tr_batch_free(&b);
    tr_rows_close(&rows);
}

/* ------------------------------------------------------------ planner */
static void test_plan(void) {
    tr_plan_in pi;
    memset(&pi, 0, sizeof pi);
    tr_model_preset("d12", &pi.n_layer, &pi.n_head, &pi.n_embd);
    pi.vocab_size = 50257;
    pi.seq_len = 1024;
    pi.max_seq = 1024;
    pi.token_budget = 1u << 20;
    pi.batch_tokens = 1u << 19;
    pi.device = TR_DEV_CUDA;
    pi.mem_budget = 80ull << 30;
    tr_plan_out a, b;
    CHECK(tr_plan(&pi, &a) == TR_OK, "d12 fits 80 GiB");
    CHECK(a.total_bytes <= pi.mem_budget, "over budget");
    /* the optimizer by name (tr_optim_name's list): the default's name plans the same, another is refused */
    {
        tr_plan_out n;
        pi.optim = tr_optim_name(0);
        CHECK(pi.optim && tr_plan(&pi, &n) == TR_OK && n.total_bytes == a.total_bytes, "optim by its name");
        pi.optim = "no-such-optimizer";
        CHECK(tr_plan(&pi, &n) == TR_ERR_ARG, "unknown optim planned");
        CHECK(tr_optim_name(-1) == NULL, "optim name -1");
        pi.optim = NULL;
    }
    pi.precision = TR_BF16;
    CHECK(tr_plan(&pi, &b) == TR_OK, "bf16");
    CHECK(b.micro_rows >= a.micro_rows, "bf16 should allow more rows (%d < %d)", b.micro_rows, a.micro_rows);
    pi.recompute = 2;
    tr_plan_out c;
    CHECK(tr_plan(&pi, &c) == TR_OK, "recompute");
    CHECK(c.per_row_bytes < b.per_row_bytes, "recompute saves per row");
    /* a budget lowered to the device's capacity (tr_plan_device_capacity of the
     * free memory after the CUDA context) gives an arena - the plan's device
     * total without its context line - that fits in that free memory with
     * 256 MiB to spare; the H200's figures first (cudaMemGetInfo after the
     * context: 142645 MiB free of 143157), then smaller cards */
    const uint64_t frees[] = {142645ull << 20, 80ull << 30, 16ull << 30, 5ull << 30};
    for (int i = 0; i < 4; i++) {
        tr_plan_in q = pi;
        q.precision = TR_BF16;
        q.recompute = 0;
        q.token_budget = q.batch_tokens = 1ull << 30;
        q.mem_budget = tr_plan_device_capacity(frees[i]);
        tr_plan_out d;
        CHECK(tr_plan(&q, &d) == TR_OK, "d12 at capacity %d", i);
        uint64_t ctx = 0;
        for (int k = 0; k < d.n_items; k++)
            if (strstr(d.items[k].name, "CUDA context")) ctx = d.items[k].bytes;
        CHECK(ctx > 0, "no context line");
        CHECK(d.device_bytes - ctx + (256ull << 20) <= frees[i], "arena %llu over free %llu less 256 MiB",
              (unsigned long long)(d.device_bytes - ctx), (unsigned long long)frees[i]);
        CHECK(d.device_bytes > frees[i] / 100 * 95, "capacity too cautious: %llu of %llu",
              (unsigned long long)d.device_bytes, (unsigned long long)frees[i]);
    }
    CHECK(tr_plan_device_capacity(1ull << 30) < tr_plan_device_capacity(2ull << 30), "capacity grows with free");
    /* d48 fp32 on 16 GiB cannot fit: refused with reasons and advice */
    tr_model_preset("d48", &pi.n_layer, &pi.n_head, &pi.n_embd);
    pi.precision = TR_FP32;
    pi.recompute = 0;
    pi.mem_budget = 16ull << 30;
    CHECK(tr_plan(&pi, &c) == TR_ERR_NOFIT, "d48 must not fit 16 GiB");
    CHECK(strstr(c.reason, "GiB") != NULL, "reason: %s", c.reason);
    CHECK(strstr(c.advice, "smaller model") != NULL, "advice: %s", c.advice);
    /* token budget below one row */
    tr_model_preset("tiny", &pi.n_layer, &pi.n_head, &pi.n_embd);
    pi.mem_budget = 0;
    pi.token_budget = 100;
    CHECK(tr_plan(&pi, &c) == TR_ERR_NOFIT, "row over token budget");
    CHECK(strstr(c.reason, "token budget") != NULL, "reason: %s", c.reason);
    /* the CPU total is exactly linear in B apart from 64-byte rounding,
     * and the gradient accumulator (P floats) that a step of one
     * micro-batch does not need (fixed_bytes counts it) */
    pi.device = TR_DEV_CPU;
    pi.token_budget = 0;
    pi.seq_len = pi.max_seq = 64;
    pi.batch_tokens = 64 * 16;
    for (int B = 1; B <= 16; B++) {
        pi.force_micro_rows = B;
        CHECK(tr_plan(&pi, &c) == TR_OK, "forced B");
        CHECK(c.micro_rows == B, "B");
        int64_t lin = (int64_t)(c.fixed_bytes + (uint64_t)B * c.per_row_bytes);
        if (c.n_micro == 1) lin -= 4 * (int64_t)c.params;
        CHECK(llabs((int64_t)c.total_bytes - lin) < 4096, "not linear at B=%d", B);
    }
}

/* ------------------------------------------------------------ training */
typedef struct {
    double loss[512];
    int n;
} losses;

static void read_log(const char *path, losses *l) {
    l->n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f) && l->n < 512) {
        const char *p = strstr(line, "\"loss\":");
        if (p) l->loss[l->n++] = strtod(p + 7, NULL);
    }
    fclose(f);
}

static void base_opts(tr_train_opts *o, tr_rows *rows, const char *dir) {
    tr_train_opts_init(o);
    o->rows = rows;
    o->model = "tiny";
    o->seq_len = 32;
    o->steps = 12;
    o->token_budget = 32 * 4;
    o->batch_tokens = 32 * 8;
    o->lr = 3e-3;
    o->quiet = 1;
    o->ckpt_dir = dir;
    static FILE *null;
    if (!null) null = fopen("/dev/null", "w");
    o->out = null;
}

static void test_train(const char *tmp) {
    tr_rows rows;
    CHECK(make_rows(&rows, 200, 20, 33, 64, 1) == TR_OK, "rows");
    memset(rows.fingerprint, 0xab, 32);
    char d1[512], d2[512], l1[512], l2[512];
    snprintf(d1, sizeof d1, "%s/a", tmp);
    snprintf(d2, sizeof d2, "%s/b", tmp);
    snprintf(l1, sizeof l1, "%s/a.jsonl", tmp);
    snprintf(l2, sizeof l2, "%s/b.jsonl", tmp);
    char err[1024];
    tr_train_opts o;
    tr_train_result r;

    /* uninterrupted */
    base_opts(&o, &rows, d1);
    o.log_path = l1;
    o.val_every = 4;
    int rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_OK, "train: %s", err);
    CHECK(r.steps_done == 12, "steps %llu", (unsigned long long)r.steps_done);
    CHECK(r.max_micro_tokens <= 128, "micro tokens %llu", (unsigned long long)r.max_micro_tokens);
    CHECK(r.last_loss < r.first_loss, "loss did not fall: %f -> %f", r.first_loss, r.last_loss);
    CHECK(isfinite(r.last_val_loss), "val loss");

    /* interrupted at 5 + resumed: bit-identical losses */
    base_opts(&o, &rows, d2);
    o.log_path = l2;
    o.val_every = 4;
    o.stop_after = 5;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_OK && r.steps_done == 5, "first half: %s", err);
    base_opts(&o, &rows, d2);
    o.log_path = l2;
    o.val_every = 4;
    o.resume = 1;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_OK && r.steps_done == 7, "resume: %s (%llu steps)", err, (unsigned long long)r.steps_done);
    losses a, b;
    read_log(l1, &a);
    read_log(l2, &b);
    CHECK(a.n == 12 && b.n == 12, "log lines %d %d", a.n, b.n);
    for (int i = 0; i < a.n && i < b.n; i++)
        CHECK(a.loss[i] == b.loss[i], "step %d: %.9g != %.9g after resume", i + 1, a.loss[i], b.loss[i]);

    /* checkpoint corruption is refused */
    char ck[600];
    snprintf(ck, sizeof ck, "%s/ckpt.bin", d2);
    FILE *f = fopen(ck, "r+b");
    CHECK(f != NULL, "open ckpt");
    if (f) {
        fseek(f, 4000, SEEK_SET);
        int ch = fgetc(f);
        fseek(f, 4000, SEEK_SET);
        fputc(ch ^ 0x40, f);
        fclose(f);
    }
    base_opts(&o, &rows, d2);
    o.resume = 1;
    o.steps = 14;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_ERR_CORRUPT, "corrupt checkpoint accepted (rc %d)", rc);
    CHECK(strstr(err, "checksum") != NULL, "message: %s", err);

    /* a different tokenizer fingerprint is refused on resume */
    memset(rows.fingerprint, 0xcd, 32);
    base_opts(&o, &rows, d1);
    o.resume = 1;
    o.steps = 14;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_ERR_FINGERPRINT, "fingerprint mismatch accepted (rc %d)", rc);
    CHECK(strstr(err, "tokenizer") != NULL, "message: %s", err);
    memset(rows.fingerprint, 0xab, 32);

    /* gradient accumulation normalised by the step's target tokens: 8 rows
     * as 8 micro-batches of 1 == one micro-batch of 8 (rows have different
     * numbers of targets, so a mean of micro-batch means would differ) */
    char d3[512], d4[512];
    snprintf(d3, sizeof d3, "%s/c", tmp);
    snprintf(d4, sizeof d4, "%s/d", tmp);
    base_opts(&o, &rows, d3);
    o.steps = 1;
    o.token_budget = 32;
    o.weight_decay = 0;
    o.grad_clip = 0;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_OK && r.plan.micro_rows == 1 && r.plan.n_micro == 8, "B=1: %s", err);
    double l_small = r.last_loss, g_small = r.last_grad_norm;
    base_opts(&o, &rows, d4);
    o.steps = 1;
    o.token_budget = 32 * 8;
    o.weight_decay = 0;
    o.grad_clip = 0;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_OK && r.plan.micro_rows == 8 && r.plan.n_micro == 1, "B=8: %s", err);
    CHECK(fabs(l_small - r.last_loss) < 1e-5, "loss %f vs %f", l_small, r.last_loss);
    CHECK(fabs(g_small - r.last_grad_norm) < 1e-5 * r.last_grad_norm, "grad norm %.9g vs %.9g", g_small,
          r.last_grad_norm);
    /* compare the updated parameters */
    tr_ckpt_meta m3;
    CHECK(tr_ckpt_load(d3, &m3, NULL, 0, err, sizeof err) == TR_OK, "meta");
    size_t np = 0;
    {
        /* read the params section sizes via a meta load, then whole files */
        char p3[600], p4[600];
        snprintf(p3, sizeof p3, "%s/ckpt.bin", d3);
        snprintf(p4, sizeof p4, "%s/ckpt.bin", d4);
        FILE *f3 = fopen(p3, "rb"), *f4 = fopen(p4, "rb");
        CHECK(f3 && f4, "open ckpts");
        if (f3 && f4) {
            fseek(f3, 0, SEEK_END);
            long n3 = ftell(f3);
            fseek(f4, 0, SEEK_END);
            long n4 = ftell(f4);
            CHECK(n3 == n4, "ckpt sizes");
            /* header: 8 magic + 7*8 + 32 + 24 + 8 = 128, 3 section heads of 40 */
            long off = 128 + 3 * 40;
            np = (size_t)(n3 - off - 8) / 12;
            float *a3 = malloc(np * 4), *a4 = malloc(np * 4);
            fseek(f3, off, SEEK_SET);
            fseek(f4, off, SEEK_SET);
            CHECK(fread(a3, 4, np, f3) == np && fread(a4, 4, np, f4) == np, "read params");
            double maxd = 0;
            for (size_t i = 0; i < np; i++) {
                double dd = fabs((double)a3[i] - (double)a4[i]);
                if (dd > maxd) maxd = dd;
            }
            CHECK(maxd < 3e-4, "params differ by %g between B=1x8 and B=8x1", maxd);
            free(a3);
            free(a4);
        }
        if (f3) fclose(f3);
        if (f4) fclose(f4);
    }

    /* a memory budget that cannot hold the model is refused before allocation */
    base_opts(&o, &rows, NULL);
    o.mem_budget = 1 << 20;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_ERR_NOFIT, "1 MiB budget accepted (rc %d)", rc);
    CHECK(r.baseline_rss == 0, "allocated before refusing");
    /* a smaller budget shrinks the micro-batch instead */
    base_opts(&o, &rows, NULL);
    o.token_budget = 32 * 8;
    tr_plan_out full;
    rc = tr_train(&o, &r, err, sizeof err);
    full = r.plan;
    base_opts(&o, &rows, NULL);
    o.token_budget = 32 * 8;
    o.mem_budget = full.fixed_bytes + 3 * full.per_row_bytes + 4096;
    rc = tr_train(&o, &r, err, sizeof err);
    CHECK(rc == TR_OK && r.plan.micro_rows == 3, "budgeted B = %d (%s)", r.plan.micro_rows, err);
    CHECK(r.max_micro_tokens <= 3 * 32, "max micro tokens");
    tr_rows_close(&rows);
}

int main(void) {
    char tmp[] = "/tmp/test_trainer.XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    test_permutation();
    test_docmask();
    test_loader_random();
    test_plan();
    test_train(tmp);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) {}
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_trainer: all checks passed\n");
    return 0;
}
