/* test_arrow_pipeline.c FILE - the reader -> workers pipeline on a Parquet
 * / Arrow IPC input (pipeline.c, batch_cap): with max_bytes 32 MiB, batch k
 * (k < 4) holds at most 2 << k MiB of text (plus the document that crossed
 * the cap), so the workers start once the first page is decoded instead
 * of after ~32 MB; and every record arrives exactly once, in order (the
 * count and indices ds_reader_next gives alone). Run by cli_arrow.sh on its
 * onepage.parquet fixture (one 4.9 MB page); exit 0 ok, 1 a check failed,
 * 2 the file could not be read. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ds.h"
#include "pipeline_internal.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_arrow_pipeline FILE\n");
        return 2;
    }
    const char *const *in = (const char *const *)&argv[1];
    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    char err[512];
    ds_reader *r;
    if (ds_reader_open(in, 1, &ro, &r, err, sizeof err) != DS_OK) {
        fprintf(stderr, "open: %s\n", err);
        return 2;
    }
    /* the records as the reader gives them alone */
    uint64_t n = 0, total = 0;
    size_t maxlen = 0;
    ds_record rec;
    int rc;
    while ((rc = ds_reader_next(r, &rec, err, sizeof err)) == 1) {
        n++;
        total += rec.len;
        if (rec.len > maxlen) maxlen = rec.len;
    }
    ds_reader_free(r);
    if (rc < 0) {
        fprintf(stderr, "read: %s\n", err);
        return 2;
    }
    if (ds_reader_open(in, 1, &ro, &r, err, sizeof err) != DS_OK) return 2;
    ds_pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.rd = r;
    pl.max_bytes = (uint64_t)32 << 20;
    pl.max_docs = (size_t)1 << 18;
    pl.keep_bad = 1;
    if (ds_pipeline_start(&pl) != DS_OK) return 2;
    int fails = 0;
    uint64_t got = 0;
    unsigned k;
    for (k = 0;; k++) {
        ds_batch *b = ds_pipeline_next(&pl);
        uint64_t cap = k < 4 ? ((uint64_t)2 << 20) << k : pl.max_bytes;
        printf("batch %u: %zu records, %zu bytes (cap %" PRIu64 ")\n", k, b->n, b->used, cap);
        if (b->fatal) {
            printf("FAIL - batch %u: %s\n", k, b->errmsg);
            fails++;
        }
        if (b->used > cap + maxlen) {
            printf("FAIL - batch %u holds %zu bytes, more than its cap %" PRIu64 " + one document (%zu)\n", k, b->used,
                   cap, maxlen);
            fails++;
        }
        for (size_t i = 0; i < b->n; i++)
            if (b->recs[i].index != got + i) {
                printf("FAIL - batch %u record %zu has index %" PRIu64 ", expected %" PRIu64 "\n", k, i,
                       b->recs[i].index, got + i);
                fails++;
                break;
            }
        got += b->n;
        int last = b->eof || b->fatal;
        ds_pipeline_release(&pl);
        if (last) break;
    }
    ds_pipeline_end(&pl);
    ds_reader_free(r);
    if (got != n) {
        printf("FAIL - the pipeline gave %" PRIu64 " records, the reader %" PRIu64 "\n", got, n);
        fails++;
    }
    if (total > ((uint64_t)2 << 20) + maxlen && k == 0) {
        printf("FAIL - %" PRIu64 " bytes of text in one batch\n", total);
        fails++;
    }
    printf("%" PRIu64 " records, %" PRIu64 " bytes, %u batches: %s\n", n, total, k + 1, fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
