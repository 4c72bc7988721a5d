/* test_hist.c - hist numbers against a brute-force count: same tokenizer
 * (tk_encode per document, not tk_count), same documents, straightforward
 * loops; plus a hand-checked small case and thread-count independence. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ds.h"
#include "tk.h"
#include "test_check.h"

#define EQ(a, b)                                                                                                       \
    CHECK((unsigned long long)(a) == (unsigned long long)(b), "%s=%llu vs %s=%llu", #a, (unsigned long long)(a), #b,   \
          (unsigned long long)(b))

static int cmp_u64(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static void small_case(void) {
    uint32_t c[] = {0, 1, 2, 3, 100, 5, 8};
    ds_hist h;
    memset(&h, 0, sizeof h);
    CHECK(ds_hist_compute(&h, c, 7, 4) == 0, "compute");
    EQ(h.docs, 7);
    EQ(h.tokens, 119);
    EQ(h.max, 100);
    EQ(h.min, 0);
    EQ(h.p50, 3);       /* sorted 0 1 2 3 5 8 100: ceil(3.5)=4th */
    EQ(h.p90, 100);     /* ceil(6.3)=7th */
    EQ(h.docs_over, 3); /* 5, 8, 100 */
    EQ(h.tokens_over, 113);
    EQ(h.trunc_lost, 1 + 4 + 96);
    EQ(h.chunk_rows, 0 + 1 + 1 + 1 + 25 + 2 + 2);
    EQ(h.drop_docs, 3);
    EQ(h.drop_tokens, 113);
    EQ(h.pad_rows, 7);
    EQ(h.pad_waste, 4 + 3 + 2 + 1);
    EQ(h.pack_rows, (119 + 7 + 3) / 4);
    EQ(h.bin_docs[0], 1); /* 0 */
    EQ(h.bin_docs[1], 1); /* 1 */
    EQ(h.bin_docs[2], 2); /* 2,3 */
    EQ(h.bin_docs[3], 1); /* 4..7: 5 */
    EQ(h.bin_docs[4], 1); /* 8..15 */
    EQ(h.bin_docs[7], 1); /* 64..127 */
    EQ(h.n_bins, 8);
}

int main(void) {
    small_case();
    char vocab[1024], corpus[1024];
    snprintf(vocab, sizeof vocab, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    snprintf(corpus, sizeof corpus, "%s/corpus/web.jsonl.zst", MKS_SHARED_DIR);
    if (access(vocab, R_OK) || access(corpus, R_OK)) {
        printf("skip: shared data not found in %s\n", MKS_SHARED_DIR);
        return failures ? 1 : 77;
    }
    tk_tokenizer *tok = NULL;
    char err[256] = "";
    if (tk_load(vocab, TK_PAT_NONE, &tok, err, sizeof err)) {
        fprintf(stderr, "tk_load: %s\n", err);
        return 1;
    }
    const uint64_t L = 1024;
    /* brute force */
    const char *in[] = {corpus, MKS_TEST_DATA "/clean"};
    ds_reader *r;
    CHECK(ds_reader_open(in, 2, NULL, &r, err, sizeof err) == 0, "open %s", err);
    size_t cap = 8192, n = 0;
    unsigned long long *cnt = malloc(cap * sizeof *cnt);
    unsigned long long tokens = 0, bytes = 0, over = 0, tover = 0, lost = 0, rows = 0, waste = 0;
    unsigned long long bins[DS_HIST_MAX_BINS] = {0};
    ds_record rec;
    tk_ids ids = {0};
    while (ds_reader_next(r, &rec, err, sizeof err) == 1) {
        if (rec.status != DS_REC_OK) continue;
        ids.len = 0;
        CHECK(tk_encode(tok, rec.text, rec.len, &ids) == 0, "encode");
        unsigned long long t = ids.len;
        if (n == cap) cnt = realloc(cnt, (cap *= 2) * sizeof *cnt);
        cnt[n++] = t;
        tokens += t;
        bytes += rec.len;
        if (t > L) over++, tover += t, lost += t - L;
        for (unsigned long long k = 0; k < t; k += L) rows++;
        if (t < L) waste += L - t;
        int b = 0;
        while ((1ULL << b) <= t) b++; /* t in [2^(b-1), 2^b) */
        bins[t ? b : 0]++;
    }
    ds_reader_free(r);
    tk_ids_free(&ids);
    qsort(cnt, n, sizeof *cnt, cmp_u64);
#define PCT(q) cnt[(size_t)ceil((q) * (double)n) - 1]
    /* web.jsonl.zst with gpt2: 5,170,498 tokens per the corpus README */
    CHECK(tokens > 5170498, "brute-force tokens %llu", tokens);

    for (int threads = 1; threads <= 3; threads += 2) {
        ds_analyze_opts ao;
        ds_analyze_opts_init(&ao);
        ao.tok = (const struct tk_tokenizer *)tok;
        ao.seq_len = L;
        ao.threads = threads;
        ao.batch_bytes = 1 << 20;
        ds_hist *h = NULL;
        CHECK(ds_analyze(in, 2, NULL, &ao, NULL, &h, err, sizeof err) == 0, "analyze: %s", err);
        if (!h) break;
        EQ(h->docs, n);
        EQ(h->tokens, tokens);
        EQ(h->bytes, bytes);
        EQ(h->max, cnt[n - 1]);
        EQ(h->min, cnt[0]);
        EQ(h->p50, PCT(0.5));
        EQ(h->p90, PCT(0.9));
        EQ(h->p99, PCT(0.99));
        EQ(h->p999, PCT(0.999));
        CHECK(fabs(h->mean - (double)tokens / (double)n) < 1e-6, "mean");
        EQ(h->docs_over, over);
        EQ(h->tokens_over, tover);
        EQ(h->trunc_lost, lost);
        EQ(h->chunk_rows, rows);
        EQ(h->drop_docs, over);
        EQ(h->drop_tokens, tover);
        EQ(h->pad_rows, n);
        EQ(h->pad_waste, waste);
        EQ(h->pack_rows, (tokens + n + L - 1) / L);
        for (int b = 0; b < DS_HIST_MAX_BINS; b++) EQ(h->bin_docs[b], bins[b]);
        /* outputs work */
        char svg[1024];
        snprintf(svg, sizeof svg, "%s/test_hist.svg", MKS_BINARY_DIR);
        CHECK(ds_hist_write_svg(h, svg, err, sizeof err) == 0, "svg: %s", err);
        FILE *f = fopen(svg, "r");
        static char buf[1 << 16];
        size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[k] = 0;
        if (f) fclose(f);
        CHECK(strstr(buf, "<svg") && strstr(buf, "L = 1024"), "svg content");
        unlink(svg);
        FILE *nul = fopen("/dev/null", "w");
        CHECK(ds_hist_print(h, nul, 40) == 0 && ds_hist_write_json(h, nul) == 0, "print");
        fclose(nul);
        if (threads == 1)
            printf("hist: %llu docs, %llu tokens, p50 %llu p99 %llu max %llu\n", (unsigned long long)h->docs,
                   (unsigned long long)h->tokens, (unsigned long long)h->p50, (unsigned long long)h->p99,
                   (unsigned long long)h->max);
        ds_hist_free(h);
    }
    free(cnt);
    tk_free(tok);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_hist: ok\n");
    return 0;
}
