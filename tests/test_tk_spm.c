/* Id-for-id parity with the `sentencepiece` library for SentencePiece .model
 * files (model_type BPE): the fixtures of tests/data/tk_spm (made by
 * tests/ref/make_tk_spm_fixtures.py, one per option that changes encoding) on
 * the first 300 documents of every ../shared/corpus category cut to 100000
 * characters (count + sha256 of the ids, sha256 of the decoded text), on edge
 * cases (full ids and decode, invalid UTF-8 included) and on arbitrary id
 * sequences (decode). Also: loading by content (no .model suffix), refusals
 * (Unigram, malformed protobuf, inconsistent pieces) with the field named,
 * fingerprints, tk_count, batch encode and the streaming decoder.
 * The same checks run on the Unigram fixtures of tests/data/tk_unigram
 * (tests/ref/make_tk_unigram_fixtures.py) as test_tk_unigram.
 * argv[1]: shared dir (default MKS_SHARED_DIR); argv[2]: only this model
 * ("-": all); argv[3]: check every Nth document (default 1; 4 under ASan);
 * argv[4]: the fixtures' directory under tests/data (default tk_spm). */
#include "tk.h"
#include "test_check.h"
#include "test_corpus.h"

#include <jansson.h>
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PER_CAT 300
#define CUT 100000 /* characters */
static const char *CATS[] = {"web", "multi", "code", "en-books"};
static char *texts[4][PER_CAT];
static size_t tlen[4][PER_CAT];

static void keep_doc(void *cat, int i, const char *t, size_t tl) {
    int c = (int)(intptr_t)cat;
    size_t chars = 0, k = 0;
    for (; k < tl; k++) /* Python's d[:CUT] */
        if (((unsigned char)t[k] & 0xc0) != 0x80 && chars++ == CUT) break;
    texts[c][i] = malloc(k + 1);
    memcpy(texts[c][i], t, k);
    texts[c][i][k] = 0;
    tlen[c][i] = k;
}

static int load_corpus(const char *shared) {
    for (int c = 0; c < 4; c++)
        if (test_corpus_docs(shared, CATS[c], PER_CAT, keep_doc, (void *)(intptr_t)c) < 0) return -1;
    return 0;
}

static void hex32(const uint8_t *d, char *out) { /* first 16 bytes as 32 hex digits */
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void sha_ids(const tk_ids *v, char *out) {
    struct sha256_ctx c;
    sha256_init(&c);
    for (size_t i = 0; i < v->len; i++) {
        uint8_t b[4] = {(uint8_t)v->ids[i], (uint8_t)(v->ids[i] >> 8), (uint8_t)(v->ids[i] >> 16),
                        (uint8_t)(v->ids[i] >> 24)};
        sha256_update(&c, 4, b);
    }
    uint8_t d[32];
    sha256_digest(&c, 32, d);
    hex32(d, out);
}

static void sha_bytes(const uint8_t *p, size_t n, char *out) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, p);
    uint8_t d[32];
    sha256_digest(&c, 32, d);
    hex32(d, out);
}

static size_t unhex(const char *h, uint8_t *out) {
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

static bool ids_equal(const tk_ids *v, json_t *arr) {
    if (json_array_size(arr) != v->len) return false;
    for (size_t i = 0; i < v->len; i++)
        if ((json_int_t)v->ids[i] != json_integer_value(json_array_get(arr, i))) return false;
    return true;
}

static void print_ids(const char *what, const tk_ids *v, json_t *arr) {
    fprintf(stderr, "  %s ours:", what);
    for (size_t i = 0; i < v->len && i < 40; i++) fprintf(stderr, " %u", v->ids[i]);
    fprintf(stderr, "\n  %s ref: ", what);
    for (size_t i = 0; i < json_array_size(arr) && i < 40; i++)
        fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(arr, i)));
    fprintf(stderr, "\n");
}

static long n_docs, n_edges, n_decodes;

static bool same(const void *a, size_t an, const void *b, size_t bn) { return an == bn && (!an || !memcmp(a, b, an)); }

static void check_row(const char *model, tk_tokenizer *t, json_t *row, int every) {
    const char *kind = json_string_value(json_object_get(row, "kind"));
    tk_ids v = {0};
    tk_bytes b = {0};
    if (!strcmp(kind, "doc")) {
        const char *cat = json_string_value(json_object_get(row, "cat"));
        int i = (int)json_integer_value(json_object_get(row, "i")), c = 0;
        if (i % every) return;
        while (c < 4 && strcmp(CATS[c], cat)) c++;
        if (c == 4 || !texts[c][i]) return;
        CHECK(tk_encode(t, (const uint8_t *)texts[c][i], tlen[c][i], &v) == TK_OK);
        char sh[33];
        sha_ids(&v, sh);
        size_t want = (size_t)json_integer_value(json_object_get(row, "n"));
        CHECK(v.len == want && !strcmp(sh, json_string_value(json_object_get(row, "sha"))),
              "%s: %s doc %d: %zu ids, sentencepiece %zu", model, cat, i, v.len, want);
        CHECK(tk_decode(t, v.ids, v.len, &b) == TK_OK);
        sha_bytes(b.data, b.len, sh);
        const char *dsha = json_string_value(json_object_get(row, "dsha")); /* absent: HF file, ids only */
        CHECK(!dsha || !strcmp(sh, dsha), "%s: %s doc %d: decode differs", model, cat, i);
        size_t cnt = 0;
        CHECK(tk_count(t, (const uint8_t *)texts[c][i], tlen[c][i], &cnt) == TK_OK && cnt == v.len);
        n_docs++;
    } else if (!strcmp(kind, "edge")) {
        const char *h = json_string_value(json_object_get(row, "hex"));
        uint8_t *s = malloc(strlen(h) / 2 + 1);
        size_t n = unhex(h, s);
        json_t *ids = json_object_get(row, "ids");
        CHECK(tk_encode(t, s, n, &v) == TK_OK);
        bool ok = ids_equal(&v, ids);
        CHECK(ok, "%s: edge case %s", model, h);
        if (!ok) print_ids("ids", &v, ids);
        const char *dh = json_string_value(json_object_get(row, "dec"));
        if (dh) {
            CHECK(tk_decode(t, v.ids, v.len, &b) == TK_OK);
            uint8_t *d = malloc(strlen(dh) / 2 + 1);
            size_t dn = unhex(dh, d);
            CHECK(same(b.data, b.len, d, dn), "%s: decode of edge case %s", model, h);
            free(d);
        }
        free(s);
        n_edges++;
    } else if (!strcmp(kind, "decode")) {
        json_t *ids = json_object_get(row, "ids");
        v.cap = json_array_size(ids) + 1;
        v.ids = malloc(v.cap * sizeof *v.ids);
        for (size_t i = 0; i < json_array_size(ids); i++)
            v.ids[v.len++] = (uint32_t)json_integer_value(json_array_get(ids, i));
        CHECK(tk_decode(t, v.ids, v.len, &b) == TK_OK);
        const char *dh = json_string_value(json_object_get(row, "dec"));
        uint8_t *d = malloc(strlen(dh) / 2 + 1);
        size_t dn = unhex(dh, d);
        bool ok = same(b.data, b.len, d, dn);
        CHECK(ok, "%s: decode of ids", model);
        if (!ok) {
            print_ids("ids", &v, ids);
            fprintf(stderr, "  ours: %.*s\n  ref:  %.*s\n", (int)b.len, b.data, (int)dn, d);
        }
        free(d);
        n_decodes++;
    }
    tk_ids_free(&v);
    tk_bytes_free(&b);
}

/* ---- hand-built models for the refusals ---------------------------------- */

typedef struct {
    uint8_t b[4096];
    size_t n;
} buf;

static void put_varint(buf *o, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        o->b[o->n++] = c | (v ? 0x80 : 0);
    } while (v);
}
static void put_bytes(buf *o, unsigned field, const void *p, size_t n) {
    put_varint(o, field << 3 | 2);
    put_varint(o, n);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put_int(buf *o, unsigned field, uint64_t v) {
    put_varint(o, field << 3);
    put_varint(o, v);
}
static void put_piece(buf *o, const char *s, size_t sl, int type) {
    buf p = {.n = 0};
    put_bytes(&p, 1, s, sl);
    p.b[p.n++] = 2 << 3 | 5; /* score 0.0f */
    memset(p.b + p.n, 0, 4);
    p.n += 4;
    put_int(&p, 3, (uint64_t)type);
    put_bytes(o, 1, p.b, p.n);
}

static void put_piece_scored(buf *o, const char *s, size_t sl, int type, float score) {
    buf p = {.n = 0};
    put_bytes(&p, 1, s, sl);
    p.b[p.n++] = 2 << 3 | 5;
    memcpy(p.b + p.n, &score, 4); /* little endian, as protobuf's fixed32 */
    p.n += 4;
    put_int(&p, 3, (uint64_t)type);
    put_bytes(o, 1, p.b, p.n);
}

static const char *tmpdir;

/* Writes the model, loads it; returns the status, err receives the message. */
static int try_load(const buf *m, const char *name, char *err, size_t errlen) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    fwrite(m->b, 1, m->n, f);
    fclose(f);
    tk_tokenizer *t = NULL;
    int rc = tk_load(p, TK_PAT_NONE, &t, err, errlen);
    if (rc == TK_OK) {
        tk_ids v = {0};
        tk_bytes b = {0};
        CHECK(tk_encode(t, (const uint8_t *)" hello wörld \xff", 15, &v) == TK_OK);
        CHECK(tk_decode(t, v.ids, v.len, &b) == TK_OK);
        tk_ids_free(&v);
        tk_bytes_free(&b);
        tk_free(t);
    }
    return rc;
}

static void base_model(buf *m, bool with_unk, int model_type, bool byte_fallback) {
    m->n = 0;
    if (with_unk) put_piece(m, "<unk>", 5, 2);
    put_piece(m, "<s>", 3, 3);
    put_piece(m, "\xe2\x96\x81", 3, 1);
    put_piece(m, "h", 1, 1);
    put_piece(m, "e", 1, 1);
    put_piece(m, "he", 2, 1);
    buf tr = {.n = 0};
    put_int(&tr, 3, (uint64_t)model_type);
    if (byte_fallback) put_int(&tr, 35, 1);
    put_bytes(m, 2, tr.b, tr.n);
}

static void refusals(void) {
    char err[512];
    buf m;
    base_model(&m, true, 2, false);
    CHECK(try_load(&m, "ok.model", err, sizeof err) == TK_OK, "%s", err);
    CHECK(try_load(&m, "ok_no_suffix", err, sizeof err) == TK_OK, "by content: %s", err);
    base_model(&m, false, 2, false);
    CHECK(try_load(&m, "nounk.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "UNKNOWN"), "%s", err);
    base_model(&m, true, 3, false);
    CHECK(try_load(&m, "word.model", err, sizeof err) == TK_ERR_UNSUPPORTED && strstr(err, "trainer_spec.model_type") &&
              strstr(err, "WORD"),
          "%s", err);
    base_model(&m, true, 4, false);
    CHECK(try_load(&m, "char.model", err, sizeof err) == TK_ERR_UNSUPPORTED && strstr(err, "CHAR"), "%s", err);
    base_model(&m, true, 2, true); /* byte_fallback without the 256 byte pieces */
    CHECK(try_load(&m, "nobytes.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "<0x00>"), "%s", err);
    base_model(&m, true, 2, false);
    put_piece(&m, "<0x41>", 6, 6);
    CHECK(try_load(&m, "bytepiece.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "byte_fallback"), "%s", err);
    base_model(&m, true, 2, false);
    put_piece(&m, "he", 2, 1);
    CHECK(try_load(&m, "dup.model", err, sizeof err) == TK_ERR_DUP_RANK && strstr(err, "already defined"), "%s", err);
    base_model(&m, true, 2, false);
    put_piece(&m, "a\0b", 3, 1);
    CHECK(try_load(&m, "nul.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "NUL"), "%s", err);
    /* a piece that is one NUL byte: refused without byte fallback, as sentencepiece 0.2.3 does, unless it is
     * UNUSED (then left out of the piece maps; with byte fallback: bpe_nul_piece.model's parity rows) */
    base_model(&m, true, 2, false);
    put_piece(&m, "\0", 1, 1);
    CHECK(try_load(&m, "nul1.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "NUL"), "%s", err);
    base_model(&m, true, 2, false);
    put_piece(&m, "\0", 1, 5);
    CHECK(try_load(&m, "nul1_unused.model", err, sizeof err) == TK_OK, "%s", err);
    base_model(&m, true, 2, false);
    put_piece(&m, "", 0, 1);
    CHECK(try_load(&m, "empty.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "empty"), "%s", err);
    base_model(&m, true, 2, false);
    put_piece(&m, "<unk2>", 6, 2);
    CHECK(try_load(&m, "unk2.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "unk is already"), "%s", err);
    base_model(&m, true, 2, false);
    { /* a charsmap whose trie size exceeds the blob */
        buf ns = {.n = 0};
        uint8_t blob[8] = {0xff, 0xff, 0, 0, 1, 2, 3, 4};
        put_bytes(&ns, 2, blob, sizeof blob);
        put_bytes(&m, 3, ns.b, ns.n);
    }
    CHECK(try_load(&m, "cmap.model", err, sizeof err) == TK_ERR_FORMAT &&
              strstr(err, "normalizer_spec.precompiled_charsmap"),
          "%s", err);
    base_model(&m, true, 2, false);
    { /* a charsmap of random units: loads, encodes without reading outside it */
        buf ns = {.n = 0};
        uint8_t blob[4 + 64 + 10];
        blob[0] = 64;
        blob[1] = blob[2] = blob[3] = 0;
        for (int i = 4; i < (int)sizeof blob; i++) blob[i] = (uint8_t)(i * 37 + 11);
        put_bytes(&ns, 2, blob, sizeof blob);
        put_bytes(&m, 3, ns.b, ns.n);
    }
    CHECK(try_load(&m, "cmap_rand.model", err, sizeof err) == TK_OK, "%s", err);
    base_model(&m, true, 2, false);
    m.n -= 3; /* cut inside the trainer_spec */
    CHECK(try_load(&m, "cut.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "malformed protobuf"), "%s", err);
    m.n = 0;
    for (int i = 0; i < 11; i++) m.b[m.n++] = 0xff; /* an 11-byte varint */
    CHECK(try_load(&m, "varint.model", err, sizeof err) == TK_ERR_FORMAT, "%s", err);
    base_model(&m, true, 1, false); /* Unigram: an infinite score is refused (sentencepiece's Model does) */
    {
        buf p = {.n = 0};
        put_bytes(&p, 1, "hex", 3);
        p.b[p.n++] = 2 << 3 | 5;
        uint8_t inf[4] = {0x00, 0x00, 0x80, 0xff}; /* -inf, little endian */
        memcpy(p.b + p.n, inf, 4);
        p.n += 4;
        put_bytes(&m, 1, p.b, p.n);
    }
    CHECK(try_load(&m, "inf.model", err, sizeof err) == TK_ERR_FORMAT && strstr(err, "Unigram model with an infinite"),
          "%s", err);
    base_model(&m, true, 1, false);
    CHECK(try_load(&m, "uni.model", err, sizeof err) == TK_OK, "%s", err);
    { /* Unigram's word cache splits the text at each '▁' only when no piece
       * holds one past its first byte: here "a▁b" does, and the best path of
       * "a b" ("▁a▁b") is [▁][a▁b] (-1.5), not the word by word [▁a][▁b] (-2) */
        m.n = 0;
        put_piece_scored(&m, "<unk>", 5, 2, 0.0f);
        put_piece_scored(&m, "\xe2\x96\x81", 3, 1, -1.0f);
        put_piece_scored(&m, "a", 1, 1, -1.0f);
        put_piece_scored(&m, "b", 1, 1, -1.0f);
        put_piece_scored(&m,
                         "\xe2\x96\x81"
                         "a",
                         4, 1, -1.0f);
        put_piece_scored(&m,
                         "\xe2\x96\x81"
                         "b",
                         4, 1, -1.0f);
        put_piece_scored(&m,
                         "a\xe2\x96\x81"
                         "b",
                         5, 1, -0.5f);
        char p[512];
        snprintf(p, sizeof p, "%s/cross.model", tmpdir);
        FILE *f = fopen(p, "wb");
        fwrite(m.b, 1, m.n, f);
        fclose(f);
        tk_tokenizer *t = NULL;
        CHECK(tk_load(p, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "%s", err);
        tk_ids v = {0};
        for (int rep = 0; t && rep < 2; rep++) { /* the second time from the cache, if it (wrongly) held words */
            v.len = 0;
            CHECK(tk_encode(t, (const uint8_t *)"a b", 3, &v) == TK_OK);
            CHECK(v.len == 2 && v.ids[0] == 1 && v.ids[1] == 6, "a piece across '▁': %zu ids, [%u %u]", v.len,
                  v.len ? v.ids[0] : 0, v.len > 1 ? v.ids[1] : 0);
        }
        tk_ids_free(&v);
        tk_free(t);
    }
    m.n = 0;
    put_piece(&m, "<unk>", 5, 2); /* no trainer_spec: model_type defaults to UNIGRAM, which loads */
    CHECK(try_load(&m, "notrainer.model", err, sizeof err) == TK_OK, "%s", err);
    tk_tokenizer *t = NULL;
    CHECK(tk_load(MKS_TEST_DATA "/tk_spm/unigram.model", TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "%s", err);
    if (t) {
        char d[256];
        tk_describe(t, d, sizeof d);
        CHECK(strstr(d, "Unigram") != NULL, "%s", d);
        tk_free(t);
        t = NULL;
    }
    CHECK(tk_load(MKS_TEST_DATA "/tk_spm/bpe_nmt.model", TK_PAT_CL100K, &t, err, sizeof err) == TK_ERR_PATTERN);
}

/* The normalizer copies runs of printable ASCII 16 bytes at a time: a
 * letter that starts a charsmap key ('e' + U+0301 -> U+00E9 in nmt_nfkc)
 * must still combine with the mark after it wherever the letter falls in
 * those 16 bytes (the last of a full step included), so the decomposed and
 * the composed spellings give the same ids. */
static void combining_after_runs(const char *dir, const char *mname) {
    char err[512], mp[1024];
    snprintf(mp, sizeof mp, "%s/%s/%s.model", MKS_TEST_DATA, dir, mname);
    tk_tokenizer *t = NULL;
    CHECK(tk_load(mp, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "%s", err);
    if (!t) return;
    static const char *const tails[] = {" q", "", "xyz abc"};
    for (int k = 0; k <= 48; k++)
        for (size_t ti = 0; ti < sizeof tails / sizeof *tails; ti++) {
            char a[128], b[128];
            int an = snprintf(a, sizeof a, "%.*se\xcc\x81%s", k,
                              "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", tails[ti]);
            int bn = snprintf(b, sizeof b, "%.*s\xc3\xa9%s", k,
                              "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", tails[ti]);
            tk_ids va = {0}, vb = {0};
            CHECK(tk_encode(t, (const uint8_t *)a, (size_t)an, &va) == TK_OK);
            CHECK(tk_encode(t, (const uint8_t *)b, (size_t)bn, &vb) == TK_OK);
            CHECK(same(va.ids, va.len * 4, vb.ids, vb.len * 4),
                  "%s: %d letters, then e + U+0301, then \"%s\": %zu ids, %zu composed", mname, k, tails[ti], va.len,
                  vb.len);
            tk_ids_free(&va);
            tk_ids_free(&vb);
        }
    tk_free(t);
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : MKS_SHARED_DIR;
    const char *only = argc > 2 && argv[2][0] && strcmp(argv[2], "-") ? argv[2] : NULL;
    const char *dir = argc > 4 ? argv[4] : "tk_spm";
    bool uni = !strcmp(dir, "tk_unigram");
#if defined(__SANITIZE_ADDRESS__)
    int every = argc > 3 ? atoi(argv[3]) : 4; /* ASan/UBSan builds: every 4th document */
#else
    int every = argc > 3 ? atoi(argv[3]) : 1;
#endif
    if (every < 1) every = 1;
    char tmpl[] = "/tmp/test_tk_spm.XXXXXX";
    tmpdir = mkdtemp(tmpl);
    refusals();
    if (!only || !strcmp(only, uni ? "uni_nmt" : "bpe_nmt")) combining_after_runs(dir, uni ? "uni_nmt" : "bpe_nmt");
    size_t rn;
    char refs_path[1024];
    snprintf(refs_path, sizeof refs_path, "%s/%s/refs.jsonl.zst", MKS_TEST_DATA, dir);
    char *refs = test_read_zst(refs_path, &rn);
    if (!refs) {
        fprintf(stderr, "no %s\n", refs_path);
        return 1;
    }
    bool corpus = load_corpus(shared) == 0;
    if (!corpus) fprintf(stderr, "test_tk_spm: no corpus under %s: documents not checked\n", shared);
    char cur[64] = "";
    tk_tokenizer *t = NULL;
    uint8_t fps[16][32];
    int nfp = 0;
    for (char *line = refs; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *row = json_loads(line, 0, &je);
        const char *model = json_string_value(json_object_get(row, "model"));
        if (strcmp(model, cur)) {
            tk_free(t);
            t = NULL;
            snprintf(cur, sizeof cur, "%s", model);
            if (!only || !strcmp(only, model)) {
                char p[1024], err[512];
                snprintf(p, sizeof p, "%s/%s/%s.%s", MKS_TEST_DATA, dir, model,
                         strncmp(model, "hf_", 3) ? "model" : "json");
                CHECK(tk_load(p, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "%s", err);
                if (t) {
                    char d[256];
                    tk_describe(t, d, sizeof d);
                    fprintf(stderr, "%s: %s\n", model, d);
                    if (nfp < 16) {
                        tk_fingerprint(t, fps[nfp]);
                        for (int k = 0; k < nfp; k++)
                            CHECK(memcmp(fps[k], fps[nfp], 32), "%s: same fingerprint", model);
                        nfp++;
                    }
                    CHECK(tk_lossless(t) == 0);
                    if (!strncmp(model, "hf_", 3) && !uni) CHECK(strstr(d, "Precompiled") != NULL, "%s", d);
                    if (uni) CHECK(strstr(d, "Unigram") != NULL, "%s", d);
                }
            }
        }
        if (t) check_row(model, t, row, every);
        json_decref(row);
        line = nl ? nl + 1 : NULL;
    }
    tk_free(t);
    /* batch on two threads, streaming decoder, same file twice */
    for (int mi = 0; corpus && mi < 2; mi++) {
        /* bpe_llama, uni_bf: byte pieces split between feeds */
        const char *mname = uni ? (mi ? "uni_bf" : "uni_nmt") : mi ? "bpe_llama" : "bpe_nmt";
        if (only && strcmp(only, mname)) continue;
        char err[512], mp[1024];
        snprintf(mp, sizeof mp, "%s/%s/%s.model", MKS_TEST_DATA, dir, mname);
        CHECK(tk_load(mp, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "%s", err);
        tk_tokenizer *t2 = NULL;
        CHECK(tk_load(mp, TK_PAT_NONE, &t2, err, sizeof err) == TK_OK);
        uint8_t f1[32], f2[32];
        tk_fingerprint(t, f1);
        tk_fingerprint(t2, f2);
        CHECK(!memcmp(f1, f2, 32));
        tk_free(t2);
        enum { NB = 24 };
        tk_span sp[NB];
        tk_ids outs[NB];
        memset(outs, 0, sizeof outs);
        for (int i = 0; i < NB; i++) sp[i] = (tk_span){(const uint8_t *)texts[(i + mi) % 3][i], tlen[(i + mi) % 3][i]};
        CHECK(tk_encode_batch(t, sp, NB, 2, outs) == TK_OK);
        for (int i = 0; i < NB; i++) {
            tk_ids v = {0};
            tk_bytes a = {0}, b = {0};
            tk_encode(t, sp[i].text, sp[i].len, &v);
            CHECK(same(v.ids, v.len * 4, outs[i].ids, outs[i].len * 4), "%s: batch doc %d", mname, i);
            tk_decode(t, v.ids, v.len, &a);
            tk_decoder *dec;
            tk_decoder_create(t, &dec);
            for (size_t k = 0; k < v.len; k += 7) tk_decoder_feed(dec, v.ids + k, v.len - k < 7 ? v.len - k : 7, &b);
            tk_decoder_finish(dec, &b);
            tk_decoder_free(dec);
            CHECK(same(a.data, a.len, b.data, b.len), "%s: streaming decode of doc %d", mname, i);
            tk_ids_free(&v);
            tk_ids_free(&outs[i]);
            tk_bytes_free(&a);
            tk_bytes_free(&b);
        }
        tk_free(t);
    }
    for (int c = 0; c < 4; c++)
        for (int i = 0; i < PER_CAT; i++) free(texts[c][i]);
    free(refs);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
    fprintf(stderr, "test_tk_spm (%s): %ld documents, %ld edge cases, %ld decodes checked, %d failures\n", dir, n_docs,
            n_edges, n_decodes, failures);
    return failures ? 1 : 0;
}
