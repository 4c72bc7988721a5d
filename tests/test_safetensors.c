/* test_safetensors.c - the safetensors reader/writer (train/safetensors.c):
 * round trip of the writer's files (layout as the reference writer: size
 * word, compact JSON padded with spaces to 8, tensors by decreasing dtype
 * size then name), sharded folders with model.safetensors.index.json, and
 * every refusal of a hostile file or index, crafted here at test time. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "test_check.h"
#include "tr.h"

static char dir[256];

static void put(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* A file of header text h (declared size = strlen(h) unless size != ~0) and
 * data_len bytes of data. */
static void craft(const char *name, const char *h, uint64_t size, size_t data_len) {
    size_t hn = strlen(h);
    uint64_t n = size != ~0ull ? size : hn;
    uint8_t *b = calloc(1, 8 + hn + data_len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(n >> (8 * i));
    memcpy(b + 8, h, hn);
    put(name, b, 8 + hn + data_len);
    free(b);
}

/* Open dir/name and expect rc; the message must contain want (if given). */
static void expect(const char *name, int want_rc, const char *want) {
    char path[512], err[1024] = "";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tr_st_file f;
    int rc = tr_st_open(path, &f, err, sizeof err);
    CHECK(rc == want_rc, "%s: rc %d, expected %d (%s)", name, rc, want_rc, err);
    if (want) CHECK(strstr(err, want) != NULL, "%s: message \"%s\" lacks \"%s\"", name, err, want);
    if (!rc) tr_st_close(&f);
}

static void hostile(void) {
    const char *T1 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    craft("ok", T1, ~0ull, 4);
    expect("ok", TR_OK, NULL);
    /* a 1 GB (and a 100,000,001-byte) header declared in a small file:
     * refused from the size word, nothing allocated from it */
    craft("huge", "{}", 1000000000ull, 0);
    expect("huge", TR_ERR_CORRUPT, "over the 100,000,000-byte limit");
    craft("over_limit", "{}", TR_ST_MAX_HEADER + 1, 0);
    expect("over_limit", TR_ERR_CORRUPT, "over the 100,000,000-byte limit");
    craft("past_end", "{}", 64, 0);
    expect("past_end", TR_ERR_CORRUPT, "past the end of the file");
    put("short", "\x02\x00", 2);
    expect("short", TR_ERR_CORRUPT, "shorter than");
    craft("not_brace", " {}", ~0ull, 0);
    expect("not_brace", TR_ERR_CORRUPT, "does not start with '{'");
    craft("not_utf8", "{\"a\xff\":{}}", ~0ull, 0);
    expect("not_utf8", TR_ERR_CORRUPT, "not UTF-8");
    craft("overlong_utf8", "{\"\xc0\xaf\":{}}", ~0ull, 0);
    expect("overlong_utf8", TR_ERR_CORRUPT, "not UTF-8");
    craft("dtype", "{\"a\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", ~0ull, 4);
    expect("dtype", TR_ERR_CORRUPT, "unknown dtype");
    craft("size", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", ~0ull, 4);
    expect("size", TR_ERR_CORRUPT, "shape x dtype size is 8 bytes but data_offsets span 4");
    craft("overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967297],\"data_offsets\":[0,0]}}", ~0ull, 0);
    expect("overflow", TR_ERR_CORRUPT, "overflows 64 bits");
    craft("overflow_dt", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", ~0ull,
          0);
    expect("overflow_dt", TR_ERR_CORRUPT, "shape x dtype size overflows");
    craft("big_number", "{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],\"data_offsets\":[0,0]}}", ~0ull, 0);
    expect("big_number", TR_ERR_CORRUPT, "does not fit 64 bits");
    craft("neg", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", ~0ull, 0);
    expect("neg", TR_ERR_CORRUPT, "non-negative integer");
    craft("frac", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("frac", TR_ERR_CORRUPT, "expected an integer");
    craft("out_of_file", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", ~0ull, 4);
    expect("out_of_file", TR_ERR_CORRUPT, "cover 8 bytes but the byte buffer holds 4");
    craft("reversed", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", ~0ull, 4);
    expect("reversed", TR_ERR_CORRUPT, "end before they begin");
    craft("overlap",
          "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}",
          ~0ull, 8);
    expect("overlap", TR_ERR_CORRUPT, "overlaps");
    craft("hole", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", ~0ull, 8);
    expect("hole", TR_ERR_CORRUPT, "hole");
    craft("trailing_data", T1, ~0ull, 5);
    expect("trailing_data", TR_ERR_CORRUPT, "cover 4 bytes but the byte buffer holds 5");
    craft("dup",
          "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
          "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
          ~0ull, 2);
    expect("dup", TR_ERR_CORRUPT, "duplicate tensor name");
    /* the same name spelled with an escape is the same name */
    craft("dup_escaped",
          "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
          "\"\\u0061\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
          ~0ull, 2);
    expect("dup_escaped", TR_ERR_CORRUPT, "duplicate tensor name");
    craft("dup_meta", "{\"__metadata__\":{},\"__metadata__\":{}}", ~0ull, 0);
    expect("dup_meta", TR_ERR_CORRUPT, "duplicate __metadata__");
    craft("dup_meta_key", "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", ~0ull, 0);
    expect("dup_meta_key", TR_ERR_CORRUPT, "duplicate __metadata__ key");
    craft("meta_value", "{\"__metadata__\":{\"k\":1}}", ~0ull, 0);
    expect("meta_value", TR_ERR_CORRUPT, "not a string");
    craft("dup_key", "{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("dup_key", TR_ERR_CORRUPT, "duplicate key dtype");
    craft("unknown_key", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", ~0ull, 1);
    expect("unknown_key", TR_ERR_CORRUPT, "unknown key");
    craft("missing", "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("missing", TR_ERR_CORRUPT, "no shape");
    craft("rank9", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("rank9", TR_ERR_CORRUPT, "rank over 8");
    craft("empty_name", "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("empty_name", TR_ERR_CORRUPT, "empty tensor name");
    craft("nul_name", "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("nul_name", TR_ERR_CORRUPT, "NUL");
    craft("surrogate", "{\"\\ud800\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("surrogate", TR_ERR_CORRUPT, "lone surrogate");
    craft("after", "{} {}", ~0ull, 0);
    expect("after", TR_ERR_CORRUPT, "bytes after");
    craft("unterminated", "{\"a", ~0ull, 0);
    expect("unterminated", TR_ERR_CORRUPT, "unterminated string");
    craft("ctl_name", "{\"a\x1b[2J\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("ctl_name", TR_ERR_CORRUPT, "control byte");
    /* a name with an escape sequence in it is printed escaped */
    craft("esc_msg", "{\"\\u001b[2J\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,1]}}", ~0ull, 1);
    expect("esc_msg", TR_ERR_CORRUPT, "\\x1b[2J");
    /* padding: spaces after the object are the format's; a zero-size tensor
     * and a scalar are legal */
    craft("padded",
          "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
          "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]}}     ",
          ~0ull, 4);
    expect("padded", TR_OK, NULL);
    /* a FIFO is refused without blocking */
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    if (mkfifo(fifo, 0600) == 0) expect("fifo", TR_ERR_IO, NULL);
    expect("absent", TR_ERR_IO, NULL);
}

static void roundtrip(void) {
    float w[6] = {1, -2, 3.5f, 0.25f, -0.125f, 1e-3f};
    uint16_t h[3] = {0x3f80, 0xc000, 0x4049}; /* bf16 1, -2, 3.140625 */
    uint8_t u[5] = {1, 2, 3, 4, 5};
    tr_st_out t[3] = {{"u", TR_ST_U8, 1, {5}, u, NULL, 0},
                      {"w", TR_ST_F32, 2, {2, 3}, w, NULL, 0},
                      {"h", TR_ST_BF16, 1, {3}, h, NULL, 0}};
    const char *mk[1] = {"format"}, *mv[1] = {"pt"};
    char path[512], err[1024] = "";
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(tr_st_write(path, t, 3, mk, mv, 1, err, sizeof err) == TR_OK, "%s", err);
    FILE *f = fopen(path, "rb");
    uint8_t head[8];
    CHECK(f && fread(head, 1, 8, f) == 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | head[i];
    CHECK(n % 8 == 0, "header of %llu bytes is not padded to 8", (unsigned long long)n);
    char *js = calloc(1, n + 1);
    CHECK(fread(js, 1, n, f) == n);
    fclose(f);
    /* the reference layout: metadata first, then F32 (4 bytes) before BF16 before U8 */
    CHECK(
        !strncmp(
            js,
            "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"h\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},"
            "\"u\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[30,35]}}",
            strlen(
                "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                "\"h\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[24,30]},"
                "\"u\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[30,35]}}")),
        "header %s", js);
    free(js);
    tr_st_file sf;
    CHECK(tr_st_open(path, &sf, err, sizeof err) == TR_OK, "%s", err);
    CHECK(sf.n == 3 && sf.n_meta == 1 && !strcmp(tr_st_meta(&sf, "format"), "pt"));
    const tr_st_tensor *tw = tr_st_find(&sf, "w"), *th = tr_st_find(&sf, "h");
    CHECK(tw && tw->rank == 2 && tw->shape[0] == 2 && tw->shape[1] == 3 && tw->numel == 6);
    float got[6] = {0};
    CHECK(tr_st_read_f32(&sf, tw, got, 6, err, sizeof err) == TR_OK && !memcmp(got, w, sizeof w));
    CHECK(tr_st_read_f32(&sf, th, got, 3, err, sizeof err) == TR_OK && got[0] == 1 && got[1] == -2 &&
          got[2] == 3.140625f);
    CHECK(tr_st_read_f32(&sf, th, got, 4, err, sizeof err) == TR_ERR_CORRUPT, "count mismatch refused");
    CHECK(tr_st_read_f32(&sf, tr_st_find(&sf, "u"), got, 5, err, sizeof err) == TR_ERR_CORRUPT &&
          strstr(err, "dtype U8"));
    CHECK(!tr_st_find(&sf, "x"));
    tr_st_close(&sf);
    /* duplicate names are refused by the writer too */
    tr_st_out d[2] = {{"a", TR_ST_U8, 1, {1}, u, NULL, 0}, {"a", TR_ST_U8, 1, {1}, u, NULL, 0}};
    CHECK(tr_st_write(path, d, 2, NULL, NULL, 0, err, sizeof err) == TR_ERR_ARG);
}

static void index_file(const char *json) { put("model.safetensors.index.json", json, strlen(json)); }

static void sharded(void) {
    char path[512], err[1024] = "";
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    tr_st_out ta = {"a", TR_ST_F32, 1, {2}, a, NULL, 0}, tb = {"b", TR_ST_F32, 1, {3}, b, NULL, 0};
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    CHECK(tr_st_write(path, &ta, 1, NULL, NULL, 0, err, sizeof err) == TR_OK, "%s", err);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    CHECK(tr_st_write(path, &tb, 1, NULL, NULL, 0, err, sizeof err) == TR_OK, "%s", err);
    tr_st_out tcd[2] = {{"c", TR_ST_F32, 1, {2}, a, NULL, 0}, {"d", TR_ST_F32, 1, {3}, b, NULL, 0}};
    snprintf(path, sizeof path, "%s/extra.safetensors", dir);
    CHECK(tr_st_write(path, tcd, 2, NULL, NULL, 0, err, sizeof err) == TR_OK, "%s", err);
    index_file("{\"metadata\":{\"total_size\":20},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
               "\"b\":\"model-00002-of-00002.safetensors\"}}");
    tr_st_set s;
    CHECK(tr_st_set_open(dir, &s, err, sizeof err) == TR_OK, "%s", err);
    if (s.files) {
        const tr_st_file *fb = NULL;
        const tr_st_tensor *t = tr_st_set_find(&s, "b", &fb);
        float got[3];
        CHECK(t && tr_st_read_f32(fb, t, got, 3, err, sizeof err) == TR_OK && got[2] == 5);
        CHECK(tr_st_set_count(&s) == 2 && s.n_files == 2);
        tr_st_set_close(&s);
    }
    struct {
        const char *json, *want;
    } bad[] = {
        {"{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00001-of-00002.safetensors\"}}",
         "not in its file"},
        {"{\"weight_map\":{\"c\":\"extra.safetensors\"}}", "not in the index"},
        {"{\"weight_map\":{\"a\":\"../model-00001-of-00002.safetensors\"}}", "not a file in the folder"},
        {"{\"weight_map\":{\"a\":\"..\"}}", "not a file in the folder"},
        {"{\"weight_map\":{\"a\":1}}", "not a string"},
        {"{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"a\":\"model-00001-of-00002.safetensors\"}}",
         "duplicate"},
        {"{\"weight_map\":[]}", "no \"weight_map\""},
        {"{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"absent.safetensors\"}}", "cannot open"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        index_file(bad[i].json);
        int rc = tr_st_set_open(dir, &s, err, sizeof err);
        CHECK(rc != TR_OK && strstr(err, bad[i].want), "index %zu: rc %d \"%s\" lacks \"%s\"", i, rc, err, bad[i].want);
        if (!rc) tr_st_set_close(&s);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unlink(path);
}

/* Streamed tensors (tr_st_out.src, what `llmtrain export` writes from the
 * checkpoint's buffer without a copy): fp32 and bf16 conversion and the
 * transposed layout, across several TR_ST_CHUNK chunks, byte for byte what a
 * caller-converted data buffer gives. */
static void streamed(void) {
    const uint64_t R = 700, Cc = 1000; /* 700k elements: 3 chunks in order, 374 output rows per transposed chunk */
    float *src = malloc(R * Cc * sizeof *src), *tr = malloc(R * Cc * sizeof *tr);
    uint16_t *hb = malloc(R * Cc * sizeof *hb), *htr = malloc(R * Cc * sizeof *htr);
    CHECK(src && tr && hb && htr);
    if (!src || !tr || !hb || !htr) return;
    for (uint64_t i = 0; i < R * Cc; i++) src[i] = (float)((i * 2654435761u) % 100003) * 1e-3f - 50.0f;
    src[7] = NAN;
    for (uint64_t i = 0; i < R; i++)
        for (uint64_t j = 0; j < Cc; j++) tr[j * R + i] = src[i * Cc + j];
    for (uint64_t i = 0; i < R * Cc; i++) hb[i] = tr_st_f32_to_bf16(src[i]), htr[i] = tr_st_f32_to_bf16(tr[i]);
    tr_st_out a[4] = {{"f", TR_ST_F32, 2, {R, Cc}, src, NULL, 0},
                      {"ft", TR_ST_F32, 2, {Cc, R}, tr, NULL, 0},
                      {"h", TR_ST_BF16, 2, {R, Cc}, hb, NULL, 0},
                      {"ht", TR_ST_BF16, 2, {Cc, R}, htr, NULL, 0}};
    tr_st_out b[4] = {{"f", TR_ST_F32, 2, {R, Cc}, NULL, src, 0},
                      {"ft", TR_ST_F32, 2, {Cc, R}, NULL, src, R},
                      {"h", TR_ST_BF16, 2, {R, Cc}, NULL, src, 0},
                      {"ht", TR_ST_BF16, 2, {Cc, R}, NULL, src, R}};
    char pa[512], pb[512], err[1024] = "";
    snprintf(pa, sizeof pa, "%s/data.safetensors", dir);
    snprintf(pb, sizeof pb, "%s/src.safetensors", dir);
    CHECK(tr_st_write(pa, a, 4, NULL, NULL, 0, err, sizeof err) == TR_OK, "%s", err);
    CHECK(tr_st_write(pb, b, 4, NULL, NULL, 0, err, sizeof err) == TR_OK, "%s", err);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", pa, pb);
    CHECK(system(cmd) == 0, "streamed tensors differ from the converted buffers");
    /* a src tensor of a type the writer does not convert, or rows that do not divide it: refused */
    tr_st_out bad = {"u", TR_ST_U8, 1, {4}, NULL, src, 0}, bad2 = {"x", TR_ST_F32, 1, {10}, NULL, src, 3};
    CHECK(tr_st_write(pb, &bad, 1, NULL, NULL, 0, err, sizeof err) == TR_ERR_ARG);
    CHECK(tr_st_write(pb, &bad2, 1, NULL, NULL, 0, err, sizeof err) == TR_ERR_ARG);
    free(src);
    free(tr);
    free(hb);
    free(htr);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", "/tmp/test_safetensors_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    hostile();
    roundtrip();
    streamed();
    sharded();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("test_safetensors: ok\n");
    return failures ? 1 : 0;
}
