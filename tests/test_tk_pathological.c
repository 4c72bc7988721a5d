/* Long pieces: the linear-time bucket-queue BPE must give exactly what the
 * textbook quadratic merge loop gives (tiktoken's algorithm, written here
 * independently on top of tk_rank_of), and 1 MiB pathological inputs must
 * encode, count and round-trip. Correctness only: speed is measured by
 * tools/bench/bench_encode.py, never in a unit test. */
#include "tk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

/* Reference: repeatedly merge the lowest-rank adjacent pair, leftmost first. */
static size_t reference_bpe(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t *out) {
    size_t *start = malloc((n + 1) * sizeof *start), m = n;
    for (size_t k = 0; k <= n; k++) start[k] = k;
    for (;;) {
        int64_t best = -1;
        size_t bi = 0;
        for (size_t k = 0; k + 1 < m; k++) {
            int64_t r = tk_rank_of(t, p + start[k], start[k + 2] - start[k]);
            if (r >= 0 && (best < 0 || r < best)) {
                best = r;
                bi = k;
            }
        }
        if (best < 0) break;
        memmove(start + bi + 1, start + bi + 2, (m - bi - 1) * sizeof *start);
        m--;
    }
    for (size_t k = 0; k < m; k++) out[k] = (uint32_t)tk_rank_of(t, p + start[k], start[k + 1] - start[k]);
    free(start);
    return m;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

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
        static const char *alphabets[] = {"a", "ab", "abc", "aab", "etaoinshrdlu", "abcdefghijklmnopqrstuvwxyz",
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"};
        for (int a = 0; a < 7; a++) {
            size_t al = strlen(alphabets[a]);
            for (int rep = 0; rep < 4; rep++) {
                size_t n = 97 + rnd() % 3000;
                for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)alphabets[a][rnd() % al];
                compare(t, names[e], buf, n, alphabets[a]);
            }
        }
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
            int ok = tk_encode(t, buf, big, &ids) == TK_OK && tk_count(t, buf, big, &cnt) == TK_OK &&
                     cnt == ids.len && tk_decode(t, ids.ids, ids.len, &back) == TK_OK && back.len == big &&
                     memcmp(back.data, buf, big) == 0;
            if (!ok) {
                fprintf(stderr, "FAIL %s pathological kind %d\n", names[e], kind);
                failures++;
            }
            tk_ids_free(&ids);
            tk_bytes_free(&back);
        }
        printf("%s: long pieces identical to the reference merge loop; 1 MiB inputs round-trip\n", names[e]);
        tk_free(t);
    }
    free(buf);
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
