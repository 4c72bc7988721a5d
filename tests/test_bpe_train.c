/* test_bpe_train.c - BPE trainer vs a brute-force reference, determinism
 * across thread counts, the "aaabdaaabac" check and bad inputs.
 *
 * usage: test_bpe_train [quick|full]   (full adds the 100 MB no-whitespace document) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "tk.h"
#include "tk_train.h"
#include "test_check.h"

/* ------------------------------------------------------------------------
 * Brute-force reference: words are lists of token ids into a table of byte
 * strings; after every merge all pairs are recounted from scratch. */

typedef struct {
    uint8_t *b;
    uint32_t len;
} rstr;

typedef struct {
    rstr *tok;
    size_t ntok;
    uint32_t **w; /* symbols */
    uint32_t *wn;
    uint64_t *wc;
    size_t nw;
} ref_t;

typedef struct {
    uint32_t a, b;
    uint64_t c;
} rpair;

static int rstr_cmp(const rstr *x, const rstr *y) {
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->b, y->b, m);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

static int rpair_key_cmp(const void *x, const void *y) {
    const rpair *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    return 0;
}

static uint32_t ref_tok(ref_t *R, const uint8_t *b, uint32_t len) {
    for (size_t i = 0; i < R->ntok; i++)
        if (R->tok[i].len == len && memcmp(R->tok[i].b, b, len) == 0) return (uint32_t)i;
    R->tok = realloc(R->tok, (R->ntok + 1) * sizeof *R->tok);
    R->tok[R->ntok].b = malloc(len ? len : 1);
    memcpy(R->tok[R->ntok].b, b, len);
    R->tok[R->ntok].len = len;
    return (uint32_t)R->ntok++;
}

/* pieces: n pieces with counts; out: merges as (left rank, right rank, result) */
static size_t ref_train(const uint8_t *const *pieces, const uint32_t *plen, const uint64_t *pcnt, size_t n,
                        uint32_t target, uint64_t minf, uint32_t maxtok, tk_merge **out, ref_t *R) {
    memset(R, 0, sizeof *R);
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        ref_tok(R, &c, 1);
    }
    R->w = calloc(n, sizeof *R->w);
    R->wn = calloc(n, sizeof *R->wn);
    R->wc = calloc(n, sizeof *R->wc);
    for (size_t i = 0; i < n; i++) {
        R->w[i] = malloc((plen[i] + 1) * sizeof(uint32_t));
        for (uint32_t k = 0; k < plen[i]; k++) R->w[i][k] = pieces[i][k];
        R->wn[i] = plen[i];
        R->wc[i] = pcnt[i];
    }
    R->nw = n;
    size_t nm = 0;
    tk_merge *m = NULL;
    if (minf == 0) minf = 1;
    uint8_t *buf = malloc(1 << 20);
    while (R->ntok < target) {
        size_t cap = 0;
        for (size_t i = 0; i < n; i++) cap += R->wn[i];
        rpair *ps = malloc((cap + 1) * sizeof *ps);
        size_t np = 0;
        for (size_t i = 0; i < n; i++)
            for (uint32_t k = 0; k + 1 < R->wn[i]; k++) {
                uint32_t a = R->w[i][k], b = R->w[i][k + 1];
                if (maxtok && R->tok[a].len + R->tok[b].len > maxtok) continue;
                ps[np++] = (rpair){a, b, R->wc[i]};
            }
        qsort(ps, np, sizeof *ps, rpair_key_cmp);
        int have = 0;
        rpair best = {0, 0, 0};
        for (size_t i = 0; i < np;) {
            size_t j = i;
            uint64_t c = 0;
            while (j < np && ps[j].a == ps[i].a && ps[j].b == ps[i].b) c += ps[j++].c;
            rpair cand = {ps[i].a, ps[i].b, c};
            int better = 0;
            if (!have || cand.c > best.c) better = 1;
            else if (cand.c == best.c) {
                int x = rstr_cmp(&R->tok[cand.a], &R->tok[best.a]);
                if (!x) x = rstr_cmp(&R->tok[cand.b], &R->tok[best.b]);
                better = x < 0;
            }
            if (better) {
                best = cand;
                have = 1;
            }
            i = j;
        }
        free(ps);
        if (!have || best.c < minf) break;
        uint32_t la = R->tok[best.a].len, lb = R->tok[best.b].len;
        memcpy(buf, R->tok[best.a].b, la);
        memcpy(buf + la, R->tok[best.b].b, lb);
        uint32_t C = ref_tok(R, buf, la + lb);
        m = realloc(m, (nm + 1) * sizeof *m);
        m[nm++] = (tk_merge){best.a, best.b, C};
        for (size_t i = 0; i < n; i++) {
            uint32_t j = 0;
            for (uint32_t k = 0; k < R->wn[i];) {
                if (k + 1 < R->wn[i] && R->w[i][k] == best.a && R->w[i][k + 1] == best.b) {
                    R->w[i][j++] = C;
                    k += 2;
                } else R->w[i][j++] = R->w[i][k++];
            }
            R->wn[i] = j;
        }
    }
    free(buf);
    *out = m;
    return nm;
}

static void ref_free(ref_t *R) {
    for (size_t i = 0; i < R->ntok; i++) free(R->tok[i].b);
    free(R->tok);
    for (size_t i = 0; i < R->nw; i++) free(R->w[i]);
    free(R->w);
    free(R->wn);
    free(R->wc);
}

/* Train both ways from the same pieces and compare. */
static int compare_with_ref(const uint8_t *const *pieces, const uint32_t *plen, const uint64_t *pcnt, size_t n,
                            uint32_t vocab, uint64_t minf, uint32_t maxtok, const char *what) {
    tk_train_opts o;
    tk_train_opts_init(&o);
    o.vocab_size = vocab;
    o.min_frequency = minf;
    o.max_token_bytes = maxtok;
    o.max_piece_bytes = 1u << 20;
    o.threads = 3;
    o.par_min_words = 8; /* exercise the parallel merge path on small corpora */
    tk_piece_counts *pc = NULL;
    CHECK(tk_piece_counts_create(&o, &pc) == TK_OK);
    for (size_t i = 0; i < n; i++) CHECK(tk_piece_counts_add_piece(pc, pieces[i], plen[i], pcnt[i]) == TK_OK);
    tk_train_result res;
    char err[256];
    int rc = tk_train_merges(pc, &o, &res, err, sizeof err);
    CHECK(rc == TK_OK);
    tk_piece_counts_free(pc);
    if (rc) {
        fprintf(stderr, "%s: %s\n", what, err);
        return 1;
    }
    ref_t R;
    tk_merge *rm = NULL;
    size_t nrm = ref_train(pieces, plen, pcnt, n, vocab, minf, maxtok, &rm, &R);
    int bad = 0;
    if (nrm != res.n_merges || R.ntok != res.n_ranks) {
        fprintf(stderr, "%s: ref %zu merges/%zu ranks, ours %u merges/%u ranks\n", what, nrm, R.ntok, res.n_merges,
                res.n_ranks);
        bad = 1;
    }
    for (size_t i = 0; !bad && i < nrm; i++) {
        if (rm[i].left != res.merges[i].left || rm[i].right != res.merges[i].right ||
            rm[i].result != res.merges[i].result) {
            fprintf(stderr, "%s: merge %zu differs: ref (%u,%u)->%u ours (%u,%u)->%u\n", what, i, rm[i].left,
                    rm[i].right, rm[i].result, res.merges[i].left, res.merges[i].right, res.merges[i].result);
            bad = 1;
        }
    }
    for (size_t r = 0; !bad && r < R.ntok; r++) {
        if (R.tok[r].len != res.lens[r] || memcmp(R.tok[r].b, res.tokens[r], res.lens[r])) {
            fprintf(stderr, "%s: token %zu differs\n", what, r);
            bad = 1;
        }
    }
    CHECK(!bad);
    free(rm);
    ref_free(&R);
    tk_train_result_free(&res);
    return bad;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_random(void) {
    int cases = 0, bad = 0;
    for (int t = 0; t < 60; t++) {
        size_t n = 5 + rnd() % 80;
        int alpha = 2 + (int)(rnd() % 5);
        int highbytes = t % 3 == 0;
        uint8_t **p = calloc(n, sizeof *p);
        uint32_t *pl = calloc(n, sizeof *pl);
        uint64_t *pcn = calloc(n, sizeof *pcn);
        for (size_t i = 0; i < n; i++) {
            pl[i] = 1 + (uint32_t)(rnd() % 16);
            p[i] = malloc(pl[i]);
            for (uint32_t k = 0; k < pl[i]; k++)
                p[i][k] = highbytes ? (uint8_t)(0xE0 + rnd() % alpha) : (uint8_t)('a' + rnd() % alpha);
            pcn[i] = 1 + rnd() % (t % 2 ? 3 : 1000);
            if (t % 7 == 0) pcn[i] += 1ull << 40; /* 64-bit counts */
        }
        uint32_t vocab = 256 + (uint32_t)(rnd() % 120);
        uint64_t minf = (t % 4 == 1) ? 3 : 0;
        uint32_t maxtok = (t % 5 == 2) ? 3 : (t % 5 == 3) ? 5 : 0;
        char what[64];
        snprintf(what, sizeof what, "random case %d", t);
        bad += compare_with_ref((const uint8_t *const *)p, pl, pcn, n, vocab, minf, maxtok, what);
        cases++;
        for (size_t i = 0; i < n; i++) free(p[i]);
        free(p);
        free(pl);
        free(pcn);
    }
    printf("random: %d cases, %d mismatches\n", cases, bad);
}

static void test_aaab(void) {
    const uint8_t *piece = (const uint8_t *)"aaabdaaabac";
    tk_train_opts o;
    tk_train_opts_init(&o);
    o.vocab_size = 259;
    tk_piece_counts *pc = NULL;
    CHECK(tk_piece_counts_create(&o, &pc) == TK_OK);
    CHECK(tk_piece_counts_add_piece(pc, piece, 11, 1) == TK_OK);
    tk_train_result res;
    char err[256];
    CHECK(tk_train_merges(pc, &o, &res, err, sizeof err) == TK_OK);
    tk_piece_counts_free(pc);
    CHECK(res.n_ranks == 259 && res.n_merges == 3);
    if (res.n_ranks == 259) {
        CHECK(res.lens[256] == 2 && !memcmp(res.tokens[256], "aa", 2));
        CHECK(res.lens[257] == 2 && !memcmp(res.tokens[257], "ab", 2));
        CHECK(res.lens[258] == 4 && !memcmp(res.tokens[258], "aaab", 4));
    }
    /* compare with reference too */
    uint32_t l = 11;
    uint64_t c = 1;
    compare_with_ref(&piece, &l, &c, 1, 259, 0, 0, "aaabdaaabac");
    /* encode through the real encoder */
    tk_tokenizer *tok = NULL;
    int rc = tk_train_result_tokenizer(&res, &o, &tok);
    CHECK(rc == TK_OK);
    if (!rc) {
        tk_ids ids = {0};
        CHECK(tk_encode(tok, piece, 11, &ids) == TK_OK);
        uint32_t want[] = {258, 100, 258, 97, 99};
        CHECK(ids.len == 5 && !memcmp(ids.ids, want, sizeof want));
        tk_ids_free(&ids);
        tk_free(tok);
    }
    /* same through the document path (pre-tokenizer: one piece) */
    tk_span d = {piece, 11};
    tk_train_result r2;
    CHECK(tk_train(&d, 1, &o, &r2, err, sizeof err) == TK_OK);
    CHECK(r2.n_ranks == 259 && r2.n_merges == 3);
    tk_train_result_free(&r2);
    tk_train_result_free(&res);
    printf("aaabdaaabac: ok\n");
}

/* ---------------------------------------------------------- real corpus */

/* First `want` bytes of document text from a .jsonl.zst file. */
static size_t load_docs(const char *path, size_t want, tk_span **docs_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    ZSTD_DStream *z = ZSTD_createDStream();
    ZSTD_initDStream(z);
    size_t inCap = ZSTD_DStreamInSize();
    uint8_t *in = malloc(inCap);
    size_t lcap = 1 << 20, llen = 0;
    char *line = malloc(lcap);
    size_t got = 0, nd = 0, dcap = 0;
    tk_span *docs = NULL;
    uint8_t outb[1 << 16];
    size_t r;
    while (got < want && (r = fread(in, 1, inCap, f)) > 0) {
        ZSTD_inBuffer ib = {in, r, 0};
        while (ib.pos < ib.size && got < want) {
            ZSTD_outBuffer ob = {outb, sizeof outb, 0};
            if (ZSTD_isError(ZSTD_decompressStream(z, &ob, &ib))) goto done;
            for (size_t i = 0; i < ob.pos && got < want; i++) {
                if (outb[i] != '\n') {
                    if (llen + 1 >= lcap) line = realloc(line, lcap *= 2);
                    line[llen++] = (char)outb[i];
                    continue;
                }
                line[llen] = 0;
                json_t *j = json_loads(line, 0, NULL);
                llen = 0;
                if (!j) continue;
                json_t *t = json_object_get(j, "text");
                if (json_is_string(t)) {
                    size_t len = json_string_length(t);
                    if (len > want - got) len = want - got;
                    uint8_t *c = malloc(len + 1);
                    memcpy(c, json_string_value(t), len);
                    if (nd == dcap) docs = realloc(docs, (dcap = dcap ? dcap * 2 : 64) * sizeof *docs);
                    docs[nd++] = (tk_span){c, len};
                    got += len;
                }
                json_decref(j);
            }
        }
    }
done:
    free(in);
    free(line);
    ZSTD_freeDStream(z);
    fclose(f);
    *docs_out = docs;
    return nd;
}

static void free_docs(tk_span *d, size_t n) {
    for (size_t i = 0; i < n; i++) free((void *)d[i].text);
    free(d);
}

/* naive piece counting for the reference: collect, sort, count */
typedef struct {
    rstr *v;
    size_t n, cap;
} plist;
static int collect_cb(void *u, const uint8_t *p, size_t len) {
    plist *l = u;
    if (l->n == l->cap) l->v = realloc(l->v, (l->cap = l->cap ? l->cap * 2 : 1024) * sizeof *l->v);
    l->v[l->n].b = (uint8_t *)p;
    l->v[l->n].len = (uint32_t)len;
    l->n++;
    return 0;
}
static int rstr_qcmp(const void *a, const void *b) { return rstr_cmp(a, b); }

static void test_real(void) {
    const char *files[] = {"web.jsonl.zst", "multi.jsonl.zst", "code.jsonl.zst"};
    for (int fi = 0; fi < 3; fi++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/corpus/%s", MKS_SHARED_DIR, files[fi]);
        tk_span *docs = NULL;
        size_t nd = load_docs(path, 120000, &docs);
        if (!nd) {
            printf("real: %s not found, skipped\n", path);
            continue;
        }
        plist l = {0};
        for (size_t i = 0; i < nd; i++) tk_pretokenize(TK_PAT_O200K, docs[i].text, docs[i].len, collect_cb, &l);
        qsort(l.v, l.n, sizeof *l.v, rstr_qcmp);
        const uint8_t **p = malloc(l.n * sizeof *p);
        uint32_t *pl = malloc(l.n * sizeof *pl);
        uint64_t *pcn = malloc(l.n * sizeof *pcn);
        size_t np = 0;
        for (size_t i = 0; i < l.n;) {
            size_t j = i;
            while (j < l.n && !rstr_cmp(&l.v[i], &l.v[j])) j++;
            p[np] = l.v[i].b;
            pl[np] = l.v[i].len;
            pcn[np] = j - i;
            np++;
            i = j;
        }
        char what[128];
        snprintf(what, sizeof what, "real %s", files[fi]);
        int bad = compare_with_ref(p, pl, pcn, np, 256 + 400, 0, 0, what);
        snprintf(what, sizeof what, "real %s maxtok 4 minf 3", files[fi]);
        bad += compare_with_ref(p, pl, pcn, np, 256 + 300, 3, 4, what);
        /* the document path must agree with the piece path */
        tk_train_opts o;
        tk_train_opts_init(&o);
        o.vocab_size = 256 + 400;
        o.max_piece_bytes = 1u << 20;
        tk_train_result a;
        char err[256];
        CHECK(tk_train(docs, nd, &o, &a, err, sizeof err) == TK_OK);
        ref_t R;
        tk_merge *rm = NULL;
        size_t nrm = ref_train(p, pl, pcn, np, 256 + 400, 0, 0, &rm, &R);
        CHECK(nrm == a.n_merges && !memcmp(rm, a.merges, nrm * sizeof *rm));
        free(rm);
        ref_free(&R);
        tk_train_result_free(&a);
        printf("real %s: %zu docs, %zu distinct pieces, %s\n", files[fi], nd, np, bad ? "MISMATCH" : "ok");
        free(p);
        free(pl);
        free(pcn);
        free(l.v);
        free_docs(docs, nd);
    }
}

static int read_file(const char *path, uint8_t **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc((size_t)n + 1);
    *len = fread(*buf, 1, (size_t)n, f);
    fclose(f);
    return 0;
}

static void test_threads(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/corpus/multi.jsonl.zst", MKS_SHARED_DIR);
    tk_span *docs = NULL;
    size_t nd = load_docs(path, 3000000, &docs);
    if (!nd) {
        printf("threads: corpus missing, skipped\n");
        return;
    }
    const char *specials[] = {"<|endoftext|>", "<|pad|>"};
    tk_train_result r[3];
    int threads[3] = {1, 2, 8};
    uint8_t *files[3][2] = {{0}};
    size_t flen[3][2] = {{0}};
    for (int k = 0; k < 3; k++) {
        tk_train_opts o;
        tk_train_opts_init(&o);
        o.vocab_size = 2000;
        o.threads = threads[k];
        o.par_min_words = k == 2 ? 16 : 0; /* 8 threads: split even short word lists */
        o.specials = specials;
        o.n_specials = 2;
        o.pattern = TK_PAT_CL100K;
        char err[256];
        int rc = tk_train(docs, nd, &o, &r[k], err, sizeof err);
        CHECK(rc == TK_OK);
        if (rc) return;
        tk_tokenizer *tok = NULL;
        rc = tk_train_result_tokenizer(&r[k], &o, &tok);
        CHECK(rc == TK_OK);
        if (!rc) {
            char p1[256], p2[256];
            snprintf(p1, sizeof p1, "%s/bpe_train_t%d.tiktoken", MKS_BINARY_DIR, threads[k]);
            snprintf(p2, sizeof p2, "%s/bpe_train_t%d.json", MKS_BINARY_DIR, threads[k]);
            CHECK(tk_save_tiktoken(tok, p1) == TK_OK);
            CHECK(tk_save_hf_json(tok, p2) == TK_OK);
            read_file(p1, &files[k][0], &flen[k][0]);
            read_file(p2, &files[k][1], &flen[k][1]);
            uint32_t id;
            CHECK(tk_eot_id(tok, &id) == TK_OK && id == r[k].n_ranks);
            /* round trip and compression sanity */
            tk_ids ids = {0};
            CHECK(tk_encode(tok, docs[0].text, docs[0].len, &ids) == TK_OK);
            tk_bytes back = {0};
            CHECK(tk_decode(tok, ids.ids, ids.len, &back) == TK_OK);
            CHECK(back.len == docs[0].len && !memcmp(back.data, docs[0].text, back.len));
            tk_bytes_free(&back);
            CHECK(ids.len * 2 < docs[0].len); /* compresses */
            tk_ids_free(&ids);
            tk_free(tok);
        }
    }
    for (int k = 1; k < 3; k++) {
        CHECK(r[k].n_merges == r[0].n_merges && r[k].n_ranks == r[0].n_ranks);
        CHECK(!memcmp(r[k].merges, r[0].merges, r[0].n_merges * sizeof *r[0].merges));
        for (int f = 0; f < 2; f++)
            CHECK(files[k][f] && files[0][f] && flen[k][f] == flen[0][f] &&
                  !memcmp(files[k][f], files[0][f], flen[0][f]));
    }
    CHECK(r[0].n_ranks == 1998);
    for (int k = 0; k < 3; k++) {
        tk_train_result_free(&r[k]);
        free(files[k][0]);
        free(files[k][1]);
    }
    printf("threads 1/2/8: identical (%zu docs)\n", nd);
    free_docs(docs, nd);
}

static void test_bad(int full) {
    tk_train_opts o;
    tk_train_opts_init(&o);
    const char *specials[] = {"<|endoftext|>"};
    o.specials = specials;
    o.n_specials = 1;
    o.vocab_size = 256; /* below 256 + 1 special */
    tk_span d = {(const uint8_t *)"hello world", 11};
    tk_train_result res;
    char err[256];
    CHECK(tk_train(&d, 1, &o, &res, err, sizeof err) == TK_ERR_ARG);
    CHECK(strstr(err, "below") != NULL);
    o.vocab_size = 257; /* exactly bytes + specials: no merges */
    CHECK(tk_train(&d, 1, &o, &res, err, sizeof err) == TK_OK);
    CHECK(res.n_ranks == 256 && res.n_merges == 0);
    tk_train_result_free(&res);
    /* empty corpus */
    o.vocab_size = 1000;
    CHECK(tk_train(NULL, 0, &o, &res, err, sizeof err) == TK_ERR_ARG);
    CHECK(strstr(err, "empty") != NULL);
    tk_span e = {(const uint8_t *)"", 0};
    CHECK(tk_train(&e, 1, &o, &res, err, sizeof err) == TK_ERR_ARG);
    /* corpus too small for the vocabulary: stops early, says so */
    CHECK(tk_train(&d, 1, &o, &res, err, sizeof err) == TK_OK);
    CHECK(res.hit_limit && res.n_ranks < 999);
    tk_train_result_free(&res);
    /* a long document with no whitespace: bounded work */
    size_t big = full ? (size_t)100 << 20 : (size_t)8 << 20;
    uint8_t *t = malloc(big);
    for (size_t i = 0; i < big; i++) t[i] = (uint8_t)('a' + rnd() % 26);
    tk_span bd = {t, big};
    o.vocab_size = 1000;
    o.threads = 2;
    clock_t c0 = clock();
    int rc = tk_train(&bd, 1, &o, &res, err, sizeof err);
    CHECK(rc == TK_OK);
    if (!rc) {
        CHECK(res.n_ranks == 999);
        for (uint32_t r = 0; r < res.n_ranks; r++) CHECK(res.lens[r] <= TK_TRAIN_DEFAULT_MAX_PIECE);
        tk_train_result_free(&res);
    }
    printf("no-whitespace %zu MB: %.1fs cpu\n", big >> 20, (double)(clock() - c0) / CLOCKS_PER_SEC);
    free(t);
}

int main(int argc, char **argv) {
    int full = argc > 1 && !strcmp(argv[1], "full");
    setvbuf(stdout, NULL, _IONBF, 0);
    test_aaab();
    test_random();
    test_real();
    test_threads();
    test_bad(full);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all ok\n");
    return 0;
}
