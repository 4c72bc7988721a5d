/* test_train_hostile.c - the trainer library on hostile inputs (issue 12):
 *  - tr_parse_bytes is strict (no sign, nan/inf, exponent, junk; overflow of
 *    value x unit refused);
 *  - checkpoints: a FIFO as ckpt.bin fails at once (no hang), trailing bytes,
 *    truncation, oversized / wrapping section sizes and absurd model fields
 *    are refused before any payload is read;
 *  - tr_train refuses non-finite / out-of-range options (TR_ERR_ARG), a --log
 *    that is the checkpoint, and rows holding an id >= the vocabulary
 *    (TR_ERR_CORRUPT naming the row) from the loader thread and validation. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_check.h"
#include "tr.h"

static void put64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void parse_bytes(void) {
    static const char *bad[] = {"",          "-1",
                                "+1",        " 1",
                                "1 ",        "nan",
                                "inf",       "1e3",
                                "0x10",      "1.",
                                ".5",        "1Q",
                                "1KB2",      "18446744073709551616",
                                "16777216T", "99999999999999999999",
                                "1.5.G"};
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(tr_parse_bytes(bad[i], &v) == TR_ERR_ARG, "'%s' accepted", bad[i]);
    CHECK(tr_parse_bytes("64M", &v) == 0 && v == 64ull << 20);
    CHECK(tr_parse_bytes("2GiB", &v) == 0 && v == 2ull << 30);
    CHECK(tr_parse_bytes("1.5G", &v) == 0 && v == 3ull << 29);
    CHECK(tr_parse_bytes("123", &v) == 0 && v == 123);
    CHECK(tr_parse_bytes("7B", &v) == 0 && v == 7);
    CHECK(tr_parse_bytes("16777215T", &v) == 0 && v == 16777215ull << 40);
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 64);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *b, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fwrite(b, 1, len, f) == len);
        fclose(f);
    }
}

static void checkpoints(const char *dir) {
    char err[1024], ck[4096];
    float p[64], am[64], av[64];
    for (int i = 0; i < 64; i++) p[i] = am[i] = av[i] = (float)i;
    tr_ckpt_meta m;
    memset(&m, 0, sizeof m);
    m.step = 3;
    m.n_layer = 1;
    m.n_head = 1;
    m.n_embd = 4;
    m.max_seq = m.seq_len = 8;
    m.vocab_size = 8;
    tr_ckpt_section sec[3] = {{"params", p, sizeof p}, {"adam_m", am, sizeof am}, {"adam_v", av, sizeof av}};
    CHECK(tr_ckpt_save(dir, &m, sec, 3, err, sizeof err) == TR_OK, "%s", err);
    tr_ckpt_meta r;
    CHECK(tr_ckpt_load(dir, &r, sec, 3, err, sizeof err) == TR_OK, "%s", err);
    snprintf(ck, sizeof ck, "%s/ckpt.bin", dir);
    size_t len = 0;
    uint8_t *good = slurp(ck, &len);
    CHECK(good != NULL && len == 128 + 3 * 40 + 3 * sizeof p + 8, "size %zu", len);
    if (!good) return;
    uint8_t *c = malloc(len + 64);

    /* trailing bytes after the checksum: refused by size, meta-only too */
    memcpy(c, good, len);
    memset(c + len, 0, 8);
    spit(ck, c, len + 8);
    CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "trailing"), "%s", err);
    CHECK(tr_ckpt_load(dir, &r, sec, 3, err, sizeof err) == TR_ERR_CORRUPT, "%s", err);
    /* truncated */
    spit(ck, good, len - 1);
    CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "truncated"), "%s", err);
    spit(ck, good, 100);
    CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT, "%s", err);
    /* section count and sizes */
    uint64_t bad_counts[] = {0, 17, 1ull << 32, UINT64_MAX};
    for (size_t i = 0; i < sizeof bad_counts / sizeof bad_counts[0]; i++) {
        memcpy(c, good, len);
        put64le(c + 120, bad_counts[i]);
        spit(ck, c, len);
        CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT, "n_sections %llu: %s",
              (unsigned long long)bad_counts[i], err);
    }
    uint64_t bad_sizes[] = {UINT64_MAX, UINT64_MAX - 200, 1ull << 62, sizeof p + 8};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        memcpy(c, good, len);
        put64le(c + 128 + 32, bad_sizes[i]);
        spit(ck, c, len);
        CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT, "size %llu: %s",
              (unsigned long long)bad_sizes[i], err);
        CHECK(tr_ckpt_load(dir, &r, sec, 3, err, sizeof err) == TR_ERR_CORRUPT);
    }
    /* model fields out of range: refused as corrupt, not passed on */
    int32_t bad_i32[][2] = {{0, 0}, {0, -1}, {1, 0}, {2, 1 << 30}, {5, -7}, {4, 9}};
    for (size_t i = 0; i < sizeof bad_i32 / sizeof bad_i32[0]; i++) {
        memcpy(c, good, len);
        int32_t v = bad_i32[i][1];
        memcpy(c + 96 + 4 * bad_i32[i][0], &v, 4);
        spit(ck, c, len);
        CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT, "field %d = %d: %s", bad_i32[i][0], v,
              err);
    }
    /* step beyond TR_MAX_STEPS */
    memcpy(c, good, len);
    put64le(c + 8, UINT64_MAX);
    spit(ck, c, len);
    CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_CORRUPT, "%s", err);
    /* a flipped payload byte: the checksum */
    memcpy(c, good, len);
    c[300] ^= 1;
    spit(ck, c, len);
    CHECK(tr_ckpt_load(dir, &r, sec, 3, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "checksum"), "%s", err);
    /* a FIFO in place of ckpt.bin: refused at once */
    unlink(ck);
    CHECK(mkfifo(ck, 0600) == 0);
    CHECK(tr_ckpt_load(dir, &r, NULL, 0, err, sizeof err) == TR_ERR_IO && strstr(err, "not a regular file"), "%s", err);
    /* a FIFO planted as ckpt.tmp does not block the save */
    unlink(ck);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/ckpt.tmp", dir);
    CHECK(mkfifo(tmp, 0600) == 0);
    CHECK(tr_ckpt_save(dir, &m, sec, 3, err, sizeof err) == TR_OK, "%s", err);
    CHECK(tr_ckpt_load(dir, &r, sec, 3, err, sizeof err) == TR_OK, "%s", err);
    free(c);
    free(good);
}

static void options_and_rows(const char *dir) {
    enum { NT = 16, NV = 4, L = 8, V = 32 };
    uint32_t tok[(NT + NV) * L];
    for (int i = 0; i < (NT + NV) * L; i++) tok[i] = (uint32_t)(i % (V - 1));
    tr_rows rows;
    char err[1024];
    CHECK(tr_rows_mem(&rows, NT, NV, L, V, tok, NULL, NULL) == TR_OK);
    CHECK(tr_rows_mem(&(tr_rows){0}, UINT64_MAX, 2, L, V, tok, NULL, NULL) == TR_ERR_ARG, "row count overflow");
    tr_train_opts o;
    tr_train_result res;
    tr_train_opts_init(&o);
    o.rows = &rows;
    o.steps = 2;
    o.batch_tokens = 2 * L;
    o.quiet = 1;
    /* options */
    double lrs[] = {NAN, INFINITY, -1, 0};
    for (size_t i = 0; i < sizeof lrs / sizeof lrs[0]; i++) {
        tr_train_opts b = o;
        b.lr = lrs[i];
        CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG && strstr(err, "lr"), "lr %g: %s", lrs[i], err);
    }
    tr_train_opts b = o;
    b.steps = 0;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG);
    b = o;
    b.steps = UINT64_MAX;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG);
    b = o;
    b.warmup = 3;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG && strstr(err, "warmup"), "%s", err);
    b = o;
    b.grad_clip = NAN;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG);
    /* --log naming the checkpoint of this run */
    char ckd[4096], logp[4200];
    snprintf(ckd, sizeof ckd, "%s/ck", dir);
    snprintf(logp, sizeof logp, "%s/ck/ckpt.bin", dir);
    b = o;
    b.ckpt_dir = ckd;
    b.log_path = logp;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG && strstr(err, "checkpoint"), "%s", err);
    b.log_path = NULL;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_OK, "%s", err);
    b.log_path = logp; /* exists now */
    b.resume = 1;
    CHECK(tr_train(&b, &res, err, sizeof err) == TR_ERR_ARG && strstr(err, "checkpoint"), "%s", err);
    /* a clean run */
    CHECK(tr_train(&o, &res, err, sizeof err) == TR_OK, "%s", err);
    tr_rows_close(&rows);

    /* an id >= V in train row 5: the loader thread reports it */
    tok[5 * L + 3] = V + 100;
    CHECK(tr_rows_mem(&rows, NT, NV, L, V, tok, NULL, NULL) == TR_OK);
    o.rows = &rows;
    o.steps = 20;
    CHECK(tr_train(&o, &res, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "train row 5") &&
              strstr(err, "outside the vocabulary"),
          "%s", err);
    tr_rows_close(&rows);
    /* in a validation row */
    tok[5 * L + 3] = 1;
    tok[(NT + 1) * L] = UINT32_MAX;
    CHECK(tr_rows_mem(&rows, NT, NV, L, V, tok, NULL, NULL) == TR_OK);
    o.rows = &rows;
    o.steps = 2;
    o.val_every = 1;
    CHECK(tr_train(&o, &res, err, sizeof err) == TR_ERR_CORRUPT && strstr(err, "val row 1"), "%s", err);
    tr_rows_close(&rows);
}

int main(void) {
    char dir[] = "/tmp/test_train_hostileXXXXXX";
    if (!mkdtemp(dir)) return 1;
    parse_bytes();
    checkpoints(dir);
    options_and_rows(dir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
    if (failures) fprintf(stderr, "%d failures\n", failures);
    else printf("ok\n");
    return failures ? 1 : 0;
}
