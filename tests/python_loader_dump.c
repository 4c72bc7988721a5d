/* python_loader_dump - prints llmtrain's micro-batches (train/loader.c) for the
 * Python package's tests (tests/python/test_torch_data.py compares them with
 * mkshards.data.TokenBudgetBatches + llm_batch, i.e. the PyTorch sampler's
 * order and layout).
 *
 * Usage: python_loader_dump DIR T micro_rows rows_per_step seed doc_mask start_row n_batches
 * Output, per micro-batch: "batch STEP MICRO N_MICRO ROWS FIRST_ROW", then per
 * row four lines: "in ...", "tgt ..." (-1 = no loss), "pos ...", "seg ...". */
#include <stdio.h>
#include <stdlib.h>

#include "tr.h"

static void line(const char *tag, const int32_t *v, const uint32_t *u, int n) {
    fputs(tag, stdout);
    for (int j = 0; j < n; j++) printf(" %lld", u ? (long long)u[j] : (long long)v[j]);
    fputc('\n', stdout);
}

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: %s DIR T micro_rows rows_per_step seed doc_mask start_row n_batches\n", argv[0]);
        return 64;
    }
    tr_rows rows;
    char err[512] = "";
    if (tr_rows_open_shards_ex(&rows, argv[1], 0, err, sizeof err) != TR_OK) {
        fprintf(stderr, "open %s: %s\n", argv[1], err);
        return 2;
    }
    tr_loader_opts o;
    tr_loader_opts_init(&o);
    o.seq_len = atoi(argv[2]);
    o.micro_rows = atoi(argv[3]);
    o.rows_per_step = atoi(argv[4]);
    o.seed = strtoull(argv[5], NULL, 10);
    o.doc_mask = atoi(argv[6]);
    o.start_row = strtoull(argv[7], NULL, 10);
    int nb = atoi(argv[8]);
    tr_loader *l = NULL;
    int rc = tr_loader_open(&rows, &o, &l);
    if (rc != TR_OK) {
        fprintf(stderr, "tr_loader_open: %s\n", tr_strerror(rc));
        tr_rows_close(&rows);
        return 1;
    }
    for (int k = 0; k < nb && rc == TR_OK; k++) {
        const tr_batch *b;
        rc = tr_loader_next(l, &b, NULL);
        if (rc != TR_OK) break;
        printf("batch %llu %d %d %d %llu\n", (unsigned long long)b->step, b->micro, b->n_micro, b->rows,
               (unsigned long long)b->first_row);
        for (int r = 0; r < b->rows; r++) {
            size_t off = (size_t)r * (size_t)b->T;
            line("in", NULL, b->inputs + off, b->T);
            line("tgt", b->targets + off, NULL, b->T);
            line("pos", b->pos + off, NULL, b->T);
            line("seg", b->seg + off, NULL, b->T);
        }
        tr_loader_release(l);
    }
    tr_loader_close(l);
    tr_rows_close(&rows);
    if (rc != TR_OK) {
        fprintf(stderr, "tr_loader_next: %s\n", tr_strerror(rc));
        return 1;
    }
    return 0;
}
