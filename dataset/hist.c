/* hist.c - token-count statistics: percentiles, log-binned histogram,
 * over-long policy simulation, terminal/JSON/SVG output. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_internal.h"

static size_t bin_of(uint64_t t) {
    if (t == 0) return 0;
    size_t b = 1;
    while (b < DS_HIST_MAX_BINS - 1 && (t >> b) != 0) b++;
    return b; /* [2^(b-1), 2^b) */
}

/* Reset h for a new run, keeping tokenizer, bytes and skipped (filled by
 * the caller). */
void ds_hist_begin(ds_hist *h, uint64_t seq_len) {
    char tok[sizeof h->tokenizer];
    memcpy(tok, h->tokenizer, sizeof tok);
    uint64_t bytes = h->bytes, skipped = h->skipped;
    memset(h, 0, sizeof *h);
    memcpy(h->tokenizer, tok, sizeof tok);
    h->bytes = bytes;
    h->skipped = skipped;
    h->seq_len = seq_len;
}

/* One document: every sum, bin and policy is exact and streamed; only the
 * percentiles need the distribution (lh). */
int ds_hist_add(ds_hist *h, ds_lenhist *lh, uint64_t t) {
    if (ds_lenhist_add(lh, t)) return DS_ERR_NOMEM;
    uint64_t L = h->seq_len;
    if (!h->docs || t < h->min) h->min = t;
    if (t > h->max) h->max = t;
    h->docs++;
    h->tokens += t;
    size_t b = bin_of(t);
    h->bin_docs[b]++;
    h->bin_tokens[b] += t;
    if (b + 1 > h->n_bins) h->n_bins = b + 1;
    if (L) {
        if (t > L) {
            h->docs_over++;
            h->tokens_over += t;
            h->trunc_lost += t - L;
            h->drop_docs++;
            h->drop_tokens += t;
        }
        h->chunk_rows += t ? (t + L - 1) / L : 0;
        h->pad_rows++;
        h->pad_waste += t < L ? L - t : 0;
    }
    return DS_OK;
}

/* Nearest-rank percentile: the smallest value with at least q*n values <= it. */
static uint64_t rank_of(uint64_t n, double q) {
    double r = ceil(q * (double)n);
    uint64_t k = r < 1 ? 1 : (uint64_t)r;
    return k > n ? n : k;
}

int ds_hist_end(ds_hist *h, const ds_lenhist *lh) {
    uint64_t n = h->docs;
    if (!n) return DS_OK;
    h->mean = (double)h->tokens / (double)n;
    uint64_t ranks[4] = {rank_of(n, 0.50), rank_of(n, 0.90), rank_of(n, 0.99), rank_of(n, 0.999)}, v[4];
    if (ds_lenhist_ranks(lh, ranks, v, 4)) return DS_ERR_NOMEM;
    h->p50 = v[0];
    h->p90 = v[1];
    h->p99 = v[2];
    h->p999 = v[3];
    h->approximate = lh->coarse;
    uint64_t L = h->seq_len;
    if (L) {
        uint64_t packed = h->tokens + n; /* one separator token per document */
        h->pack_rows = (packed + L - 1) / L;
        h->pack_util = (double)packed / ((double)h->pack_rows * (double)L);
    }
    return DS_OK;
}

int ds_hist_compute(ds_hist *h, const uint32_t *counts, size_t n, uint64_t seq_len) {
    if (!h || (n && !counts)) return DS_ERR_ARG;
    ds_hist_begin(h, seq_len);
    ds_lenhist lh;
    memset(&lh, 0, sizeof lh);
    int rc = DS_OK;
    for (size_t i = 0; i < n && rc == DS_OK; i++) rc = ds_hist_add(h, &lh, counts[i]);
    if (rc == DS_OK) rc = ds_hist_end(h, &lh);
    ds_lenhist_free(&lh);
    return rc;
}

static double share(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

static void bin_range(size_t b, char *buf, size_t n) {
    if (b == 0) snprintf(buf, n, "0");
    else if (b == 1) snprintf(buf, n, "1");
    else snprintf(buf, n, "%llu-%llu", 1ULL << (b - 1), (1ULL << b) - 1);
}

int ds_hist_print(const ds_hist *h, FILE *f, int width) {
    if (width < 20) width = 50;
    fprintf(f, "documents   %llu (%llu records skipped)   tokenizer %s\n", (unsigned long long)h->docs,
            (unsigned long long)h->skipped, h->tokenizer[0] ? h->tokenizer : "-");
    if (h->refused)
        fprintf(f,
                "refused     %llu document(s) over a tokenizer limit, not counted (first: %s; `mkshards lint` "
                "lists them)\n",
                (unsigned long long)h->refused, h->refused_first);
    fprintf(f, "tokens      %llu   bytes %llu   (%.2f bytes/token)\n", (unsigned long long)h->tokens,
            (unsigned long long)h->bytes, h->tokens ? (double)h->bytes / (double)h->tokens : 0.0);
    fprintf(f, "per doc     mean %.1f  p50 %llu  p90 %llu  p99 %llu  p99.9 %llu  max %llu\n", h->mean,
            (unsigned long long)h->p50, (unsigned long long)h->p90, (unsigned long long)h->p99,
            (unsigned long long)h->p999, (unsigned long long)h->max);
    if (h->approximate)
        fprintf(f,
                "            (approximate: over %zu distinct counts >= %llu, so percentiles >= %llu are within 1/64 "
                "below the exact value)\n",
                DS_LH_SPARSE_MAX, (unsigned long long)DS_LH_DENSE, (unsigned long long)DS_LH_DENSE);
    if (h->chat) /* conversations: the rendered tokens above; their targets here */
        fprintf(f,
                "loss        %llu target tokens (%.2f%% of tokens), per conversation min %llu max %llu; %llu "
                "without a target (build drops them)\n",
                (unsigned long long)h->loss_tokens, share(h->loss_tokens, h->tokens), (unsigned long long)h->loss_min,
                (unsigned long long)h->loss_max, (unsigned long long)h->no_loss_docs);
    uint64_t peak = 0;
    for (size_t b = 0; b < h->n_bins; b++)
        if (h->bin_docs[b] > peak) peak = h->bin_docs[b];
    size_t first = 0;
    while (first < h->n_bins && !h->bin_docs[first]) first++;
    fprintf(f, "\n%15s %10s %7s  %s\n", "tokens", "docs", "%docs", "histogram (log2 bins)");
    for (size_t b = first; b < h->n_bins; b++) {
        char r[48];
        bin_range(b, r, sizeof r);
        int bar = peak ? (int)((double)h->bin_docs[b] * width / (double)peak + 0.5) : 0;
        if (h->bin_docs[b] && bar == 0) bar = 1;
        fprintf(f, "%15s %10llu %6.2f%%  ", r, (unsigned long long)h->bin_docs[b], share(h->bin_docs[b], h->docs));
        for (int i = 0; i < bar; i++) fputc('#', f);
        if (h->seq_len && b == bin_of(h->seq_len))
            fprintf(f, "%s<- L=%llu", bar ? " " : "", (unsigned long long)h->seq_len);
        fputc('\n', f);
    }
    if (h->seq_len) {
        uint64_t L = h->seq_len;
        fprintf(f, "\nover L=%llu: %llu docs (%.2f%%), %llu tokens in them (%.2f%% of tokens)\n", (unsigned long long)L,
                (unsigned long long)h->docs_over, share(h->docs_over, h->docs), (unsigned long long)h->tokens_over,
                share(h->tokens_over, h->tokens));
        fprintf(f, "policy at L=%llu:\n", (unsigned long long)L);
        fprintf(f, "  truncate  %llu tokens lost (%.2f%%)\n", (unsigned long long)h->trunc_lost,
                share(h->trunc_lost, h->tokens));
        fprintf(f, "  chunk     %llu rows (%.2f%% of row slots filled)\n", (unsigned long long)h->chunk_rows,
                share(h->tokens, h->chunk_rows * L));
        fprintf(f, "  drop      %llu docs (%.2f%%) and %llu tokens (%.2f%%) lost\n", (unsigned long long)h->drop_docs,
                share(h->drop_docs, h->docs), (unsigned long long)h->drop_tokens, share(h->drop_tokens, h->tokens));
        fprintf(f, "  pad-to-L  %llu rows, %llu pad tokens (%.2f%% waste)\n", (unsigned long long)h->pad_rows,
                (unsigned long long)h->pad_waste, share(h->pad_waste, h->pad_rows * L));
        fprintf(f, "  pack      %llu rows, %.2f%% utilisation (1 separator token per doc)\n",
                (unsigned long long)h->pack_rows, 100.0 * h->pack_util);
        if (h->chat)
            fprintf(f, "  drop-turns  %llu conversations fit after dropping %llu turn(s); %llu do not (dropped)\n",
                    (unsigned long long)h->turns_docs, (unsigned long long)h->turns_dropped,
                    (unsigned long long)h->turns_fail);
    }
    return ferror(f) ? DS_ERR_IO : DS_OK;
}

int ds_hist_write_json(const ds_hist *h, FILE *f) {
    fprintf(f, "{\"tokenizer\":\"%s\",\"docs\":%llu,\"skipped\":%llu,\"tokens\":%llu,\"bytes\":%llu,\"mean\":%.4f,",
            h->tokenizer, (unsigned long long)h->docs, (unsigned long long)h->skipped, (unsigned long long)h->tokens,
            (unsigned long long)h->bytes, h->mean);
    if (h->refused) fprintf(f, "\"refused\":%llu,", (unsigned long long)h->refused); /* only when there are any */
    fprintf(f, "\"min\":%llu,\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p99_9\":%llu,\"max\":%llu,",
            (unsigned long long)h->min, (unsigned long long)h->p50, (unsigned long long)h->p90,
            (unsigned long long)h->p99, (unsigned long long)h->p999, (unsigned long long)h->max);
    if (h->approximate) fprintf(f, "\"percentiles_approximate\":true,");
    if (h->chat)
        fprintf(f,
                "\"loss_tokens\":%llu,\"no_loss_docs\":%llu,\"loss_min\":%llu,\"loss_max\":%llu,"
                "\"drop_turns\":{\"docs\":%llu,\"turns\":%llu,\"unfit\":%llu},",
                (unsigned long long)h->loss_tokens, (unsigned long long)h->no_loss_docs,
                (unsigned long long)h->loss_min, (unsigned long long)h->loss_max, (unsigned long long)h->turns_docs,
                (unsigned long long)h->turns_dropped, (unsigned long long)h->turns_fail);
    fprintf(f, "\"bins\":[");
    for (size_t b = 0; b < h->n_bins; b++) {
        uint64_t lo = b ? 1ULL << (b - 1) : 0, hi = b ? (1ULL << b) - 1 : 0;
        fprintf(f, "%s{\"lo\":%llu,\"hi\":%llu,\"docs\":%llu,\"tokens\":%llu}", b ? "," : "", (unsigned long long)lo,
                (unsigned long long)hi, (unsigned long long)h->bin_docs[b], (unsigned long long)h->bin_tokens[b]);
    }
    fprintf(f, "]");
    if (h->seq_len) {
        fprintf(f,
                ",\"seq_len\":%llu,\"docs_over\":%llu,\"tokens_over\":%llu,\"docs_over_share\":%.6f,"
                "\"tokens_over_share\":%.6f,",
                (unsigned long long)h->seq_len, (unsigned long long)h->docs_over, (unsigned long long)h->tokens_over,
                share(h->docs_over, h->docs) / 100, share(h->tokens_over, h->tokens) / 100);
        fprintf(f,
                "\"policies\":{\"truncate\":{\"tokens_lost\":%llu},\"chunk\":{\"rows\":%llu},"
                "\"drop\":{\"docs_lost\":%llu,\"tokens_lost\":%llu},\"pad\":{\"rows\":%llu,\"pad_tokens\":%llu},"
                "\"pack\":{\"rows\":%llu,\"utilisation\":%.6f}}",
                (unsigned long long)h->trunc_lost, (unsigned long long)h->chunk_rows, (unsigned long long)h->drop_docs,
                (unsigned long long)h->drop_tokens, (unsigned long long)h->pad_rows, (unsigned long long)h->pad_waste,
                (unsigned long long)h->pack_rows, h->pack_util);
    }
    fprintf(f, "}\n");
    return ferror(f) ? DS_ERR_IO : DS_OK;
}

static void fmt_count(char *buf, size_t n, uint64_t v) {
    if (v >= 1000000000ULL && v % 1000000000ULL == 0)
        snprintf(buf, n, "%lluG", (unsigned long long)(v / 1000000000ULL));
    else if (v >= 1000000 && v % 1000000 == 0) snprintf(buf, n, "%lluM", (unsigned long long)(v / 1000000));
    else if (v >= 1000 && v % 1000 == 0) snprintf(buf, n, "%lluk", (unsigned long long)(v / 1000));
    else snprintf(buf, n, "%llu", (unsigned long long)v);
}
static void fmt_pow2(char *buf, size_t n, unsigned k) {
    uint64_t v = 1ULL << k;
    if (k >= 30) snprintf(buf, n, "%lluG", (unsigned long long)(v >> 30));
    else if (k >= 20) snprintf(buf, n, "%lluM", (unsigned long long)(v >> 20));
    else if (k >= 10) snprintf(buf, n, "%lluk", (unsigned long long)(v >> 10));
    else snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* Bar chart: x = log2 token bins, y = documents (linear), L marked. */
int ds_hist_write_svg(const ds_hist *h, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) {
        ds_set_err(err, errlen, "%s: %s", path, strerror(errno));
        return DS_ERR_IO;
    }
    const int W = 900, H = 480, ml = 80, mr = 30, mt = 60, mb = 70;
    const int pw = W - ml - mr, ph = H - mt - mb;
    size_t first = 1, last = h->n_bins ? h->n_bins - 1 : 1;
    while (first < last && !h->bin_docs[first]) first++;
    if (h->bin_docs[0]) first = 0;
    size_t lbin = h->seq_len ? 1 : 0;
    if (h->seq_len) {
        while (lbin < DS_HIST_MAX_BINS - 1 && (h->seq_len >> lbin)) lbin++;
        if (lbin + 1 > last) last = lbin + 1 < DS_HIST_MAX_BINS ? lbin + 1 : last;
        if (lbin < first) first = lbin;
    }
    size_t nb = last - first + 1;
    uint64_t peak = 1;
    for (size_t b = first; b <= last; b++)
        if (h->bin_docs[b] > peak) peak = h->bin_docs[b];
    /* nice y max */
    double step = pow(10, floor(log10((double)peak)));
    double ymax = ceil((double)peak / step) * step;
    if (ymax / step <= 2) step /= 5;
    else if (ymax / step <= 5) step /= 2;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H, W, H);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"16\" font-weight=\"bold\">Tokens per document (%s)</text>\n", ml,
            h->tokenizer[0] ? h->tokenizer : "tokenizer");
    fprintf(f, "<text x=\"%d\" y=\"42\" fill=\"#555\">%llu documents, %llu tokens; p50 %llu, p99 %llu, max %llu", ml,
            (unsigned long long)h->docs, (unsigned long long)h->tokens, (unsigned long long)h->p50,
            (unsigned long long)h->p99, (unsigned long long)h->max);
    if (h->seq_len) fprintf(f, "; %.2f%% of docs over L", share(h->docs_over, h->docs));
    fprintf(f, "</text>\n");
    /* grid + y axis */
    for (double y = 0; y <= ymax + 1e-9; y += step) {
        double py = mt + ph - y / ymax * ph;
        char lab[32];
        if (ymax >= 10000) fmt_count(lab, sizeof lab, (uint64_t)(y + 0.5));
        else snprintf(lab, sizeof lab, "%llu", (unsigned long long)(y + 0.5));
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", ml, py, ml + pw, py);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", ml - 6, py + 4, lab);
    }
    double bw = (double)pw / (double)nb;
    for (size_t b = first; b <= last; b++) {
        double x = ml + (double)(b - first) * bw;
        double bh = (double)h->bin_docs[b] / ymax * ph;
        char r[48];
        bin_range(b, r, sizeof r);
        uint64_t lo = b ? 1ULL << (b - 1) : 0;
        int over = h->seq_len && lo >= h->seq_len; /* (nearly) all of the bin is over L */
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>%s tokens: %llu docs "
                "(%.2f%%)</title></rect>\n",
                x + 1, mt + ph - bh, bw - 2, bh, over ? "#e07b39" : "#4a7fb5", r, (unsigned long long)h->bin_docs[b],
                share(h->bin_docs[b], h->docs));
        /* tick at the left edge of bin b: 2^(b-1) */
        if (b >= 1) {
            char lab[32];
            fmt_pow2(lab, sizeof lab, (unsigned)(b - 1));
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#333\"/>\n", x, mt + ph, x,
                    mt + ph + 5);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x, mt + ph + 18, lab);
        } else {
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">0</text>\n", x + bw / 2, mt + ph + 18);
        }
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", ml, mt + ph, ml + pw, mt + ph);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", ml, mt, ml, mt + ph);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">tokens per document (log2 bins)</text>\n", ml + pw / 2,
            H - 24);
    fprintf(f, "<text transform=\"translate(20,%d) rotate(-90)\" text-anchor=\"middle\">documents</text>\n",
            mt + ph / 2);
    if (h->seq_len) {
        /* position of L on the log axis: inside bin lbin = [2^(lbin-1), 2^lbin) */
        double lo = (double)(1ULL << (lbin - 1));
        double frac = log2((double)h->seq_len / lo);
        double x = ml + ((double)(lbin - first) + frac) * bw;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#c0392b\" stroke-width=\"2\" "
                "stroke-dasharray=\"6,4\"/>\n",
                x, mt - 4, x, mt + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"#c0392b\" font-weight=\"bold\">L = %llu</text>\n", x + 4, mt + 10,
                (unsigned long long)h->seq_len);
    }
    if (h->seq_len) { /* legend */
        int lx = ml + pw - 170;
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#4a7fb5\"/>"
                "<text x=\"%d\" y=\"%d\">up to L</text>\n",
                lx, mt - 2, lx + 16, mt + 8);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"#e07b39\"/>"
                "<text x=\"%d\" y=\"%d\">over L</text>\n",
                lx + 80, mt - 2, lx + 96, mt + 8);
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        ds_set_err(err, errlen, "%s: write failed", path);
        return DS_ERR_IO;
    }
    return DS_OK;
}
