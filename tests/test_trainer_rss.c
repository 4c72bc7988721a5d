/* test_trainer_rss.c - the planner's CPU total against the process's
 * measured peak RSS: a few steps of the tiny model; (VmHWM at the end) -
 * (VmRSS before the trainer allocates) must be within 5% of the plan's
 * total. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tr.h"

#if defined(__SANITIZE_ADDRESS__)
#define TR_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TR_SANITIZED 1
#endif
#endif

int main(int argc, char **argv) {
#ifdef TR_SANITIZED
    (void)argc;
    (void)argv;
    printf("skip: peak RSS is meaningless under AddressSanitizer\n");
    return 77;
#endif
    int T = 128, B = argc > 1 ? atoi(argv[1]) : 48;
    uint64_t ntr = 64, nval = 8;
    int L = T + 1;
    uint32_t V = 512;
    size_t n = (size_t)(ntr + nval) * (size_t)L;
    uint32_t *tok = malloc(n * 4);
    for (size_t i = 0; i < n; i++) tok[i] = (uint32_t)((i * 7 + i / 13) % V);
    tr_rows rows;
    if (tr_rows_mem(&rows, ntr, nval, L, V, tok, NULL, NULL)) {
        fprintf(stderr, "rows\n");
        return 1;
    }
    free(tok);
    tr_train_opts o;
    tr_train_opts_init(&o);
    o.rows = &rows;
    o.model = argc > 2 ? argv[2] : "tiny"; /* any family's preset (issue 30: llama-tiny) */
    o.seq_len = T;
    o.steps = 3;
    o.token_budget = (uint64_t)B * (uint64_t)T;
    o.batch_tokens = (uint64_t)B * (uint64_t)T * 2;
    o.val_every = 3;
    o.quiet = 1;
    tr_train_result r;
    char err[1024];
    int rc = tr_train(&o, &r, err, sizeof err);
    if (rc) {
        fprintf(stderr, "train: %s\n", err);
        return 1;
    }
    double used = (double)(r.peak_rss - r.baseline_rss), plan = (double)r.plan.total_bytes;
    double rel = (used - plan) / plan;
    tr_plan_print(stdout, &r.plan_in, &r.plan);
    printf("baseline VmRSS %.1f MiB, peak VmHWM %.1f MiB, measured %.2f MiB, plan %.2f MiB, diff %+.2f%%\n",
           r.baseline_rss / 1048576.0, r.peak_rss / 1048576.0, used / 1048576.0, plan / 1048576.0, rel * 100);
    tr_rows_close(&rows);
    if (r.baseline_rss == 0 || r.peak_rss == 0) {
        printf("no /proc/self/status: skipped\n");
        return 77;
    }
    if (fabs(rel) > 0.05) {
        fprintf(stderr, "FAIL: plan and measured peak RSS differ by %.2f%% (> 5%%)\n", rel * 100);
        return 1;
    }
    printf("test_trainer_rss: plan within 5%% of measured peak RSS\n");
    return 0;
}
