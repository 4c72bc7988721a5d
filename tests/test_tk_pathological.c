/* Long pieces: the linear-time BPE must give exactly what the textbook
 * quadratic merge loop gives (tiktoken's algorithm, written here
 * independently on top of tk_rank_of), and 1 MiB pathological inputs must
 * encode, count and round-trip. Long pieces are merged as independent
 * chunks whose junctions are checked and repaired (bpe.c); the chunk size is
 * forced to 1..64 bytes here so that nearly every junction needs a
 * repair and some pieces need the whole-piece fallback. Correctness only:
 * speed is measured by tools/bench/bench_encode.py, never in a unit test. */
#include "ref_bpe.h"
#include "tk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

/* from tk_internal.h: the long-piece path with an explicit chunk size, and
 * the choice of vector code (0 baseline, 1 AVX2, 2 AVX-512) */
int tk_bpe_chunked(const tk_tokenizer *t, const uint8_t *p, size_t n, size_t chunk, tk_ids *out);
int tk_simd_level(int force);

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { return test_rnd(&rng); }

static void compare(const tk_tokenizer *t, const char *name, const uint8_t *p, size_t n, const char *what) {
    tk_ids ids = {0};
    uint32_t *ref = malloc(n * sizeof *ref);
    tk_encode(t, p, n, &ids);
    size_t m = reference_bpe(t, p, n, ref);
    if (m != ids.len || memcmp(ref, ids.ids, m * 4) != 0) {
        fprintf(stderr, "FAIL %s %s (%zu bytes): %zu tokens vs reference %zu\n", name, what, n, ids.len, m);
        failures++;
    }
    free(ref);
    tk_ids_free(&ids);
}

/* One piece through every chunk size against one reference run. */
static void compare_chunked(const tk_tokenizer *t, const char *name, const uint8_t *p, size_t n, const char *what) {
    static const size_t chunks[] = {1, 2, 3, 5, 8, 13, 16, 31, 32, 47, 64};
    uint32_t *ref = malloc(n * sizeof *ref);
    size_t m = reference_bpe(t, p, n, ref);
    int top = tk_simd_level(-1);
    for (int level = 0; level <= top; level++) { /* every vector path this CPU can run */
        tk_simd_level(level);
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            tk_ids ids = {0};
            int rc = tk_bpe_chunked(t, p, n, chunks[c], &ids);
            if (rc || m != ids.len || memcmp(ref, ids.ids, m * 4) != 0) {
                size_t k = 0;
                while (k < m && k < ids.len && ref[k] == ids.ids[k]) k++;
                fprintf(stderr,
                        "FAIL %s %s (%zu bytes, chunk %zu, simd level %d): rc %d, %zu tokens vs reference %zu, first "
                        "difference at token %zu\n",
                        name, what, n, chunks[c], level, rc, ids.len, m, k);
                failures++;
            }
            tk_ids_free(&ids);
        }
    }
    tk_simd_level(-1);
    free(ref);
}

/* reps pieces of min + rnd() % spread bytes drawn from each alphabet, through fn */
typedef void (*piece_check)(const tk_tokenizer *, const char *, const uint8_t *, size_t, const char *);
static void random_pieces(const tk_tokenizer *t, const char *name, const char *const *sets, int n_sets, int reps,
                          size_t min, size_t spread, uint8_t *buf, piece_check fn) {
    for (int a = 0; a < n_sets; a++) {
        size_t al = strlen(sets[a]);
        for (int rep = 0; rep < reps; rep++) {
            size_t n = min + rnd() % spread;
            for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)sets[a][rnd() % al];
            fn(t, name, buf, n, sets[a]);
        }
    }
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

int main(void) {
    const char *names[] = {"gpt2", "cl100k_base", "o200k_base"};
    char p[4096], err[512];
    snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    if (access(p, R_OK)) return 77;
    size_t big = 1 << 20;
    uint8_t *buf = malloc(big);
    for (int e = 0; e < 3; e++) {
        tk_tokenizer *t;
        snprintf(p, sizeof p, "%s/vocab/%s.tiktoken", MKS_SHARED_DIR, names[e]);
        if (tk_load(p, TK_PAT_NONE, &t, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        /* single long pieces (letters only: one piece in every pattern) */
        static const char *alphabets[] = {"a",
                                          "ab",
                                          "abc",
                                          "aab",
                                          "etaoinshrdlu",
                                          "abcdefghijklmnopqrstuvwxyz",
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"};
        random_pieces(t, names[e], alphabets, 7, 4, 97, 3000, buf, compare);
        /* runs of one character and of spaces, digits (gpt2: one piece) */
        memset(buf, 'z', 5000);
        compare(t, names[e], buf, 5000, "z*5000");
        memset(buf, ' ', 5000);
        compare(t, names[e], buf, 5000, "space*5000");
        if (e == 0) { /* cl100k/o200k cut digit runs into threes */
            for (size_t k = 0; k < 4000; k++) buf[k] = (uint8_t)('0' + rnd() % 10);
            compare(t, names[e], buf, 4000, "digits");
        }
        /* CJK run (one Lo piece in o200k and cl100k) */
        const char *cjk = "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6\xe6\xb5\x8b\xe8\xaf\x95";
        size_t n = 0;
        while (n + 18 <= 3000) {
            memcpy(buf + n, cjk + 3 * (rnd() % 6), 3);
            n += 3;
        }
        compare(t, names[e], buf, n, "cjk");
        /* chunked merging with tiny chunks: small alphabets, runs, digits,
         * arbitrary bytes and stretches of real text taken as one piece */
        static const char *sets[] = {"a",
                                     "ab",
                                     "aab",
                                     "0123456789",
                                     " ",
                                     "  \n",
                                     "abcdefghijklmnopqrstuvwxyz",
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz 0123456789"};
        random_pieces(t, names[e], sets, 8, 3, 40, 1500, buf, compare_chunked);
        for (int rep = 0; rep < 6; rep++) {
            size_t len = 40 + rnd() % 1200;
            for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)rnd();
            compare_chunked(t, names[e], buf, len, "random bytes");
            size_t per = 1 + rnd() % 7; /* periodic text, period not a power of two */
            for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)("xyzzy pq"[k % per]);
            compare_chunked(t, names[e], buf, len, "periodic");
        }
        snprintf(p, sizeof p, "%s/../../README.md", MKS_TEST_DATA); /* English prose, code, tables */
        size_t text_n = read_file(p, buf, big);
        if (!text_n) {
            fprintf(stderr, "FAIL cannot read %s\n", p);
            failures++;
        }
        for (int rep = 0; rep < 12 && text_n > 2000; rep++) {
            size_t len = 200 + rnd() % 1800, at = rnd() % (text_n - len);
            compare_chunked(t, names[e], buf + at, len, "real text");
        }
        /* 1 MiB pathological inputs: encode, count, round trip */
        for (int kind = 0; kind < 4; kind++) {
            for (size_t k = 0; k < big; k++)
                buf[k] = kind == 0   ? 'a'
                         : kind == 1 ? (uint8_t)((rnd() & 1 ? 'a' : 'A') + rnd() % 26)
                         : kind == 2 ? ' '
                                     : (uint8_t)('0' + rnd() % 10);
            tk_ids ids = {0};
            tk_bytes back = {0};
            size_t cnt = 0;
            int ok = tk_encode(t, buf, big, &ids) == TK_OK && tk_count(t, buf, big, &cnt) == TK_OK && cnt == ids.len &&
                     tk_decode(t, ids.ids, ids.len, &back) == TK_OK && back.len == big &&
                     memcmp(back.data, buf, big) == 0;
            if (!ok) {
                fprintf(stderr, "FAIL %s pathological kind %d\n", names[e], kind);
                failures++;
            }
            tk_ids_free(&ids);
            tk_bytes_free(&back);
        }
        printf("%s: long pieces identical to the reference merge loop (vector levels 0..%d); 1 MiB inputs round-trip\n",
               names[e], tk_simd_level(-1));
        tk_free(t);
    }
    free(buf);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
