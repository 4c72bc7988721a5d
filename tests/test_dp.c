/* test_dp: the data-parallel policy (train/dp.h), the one the CPU wrapper
 * (train/dist.c) and the CUDA backend (train/backend_cuda.cu) both follow:
 *   - dealing: tr_dp_owner gives contiguous blocks covering every rank in
 *     order, tr_dp_last_of_rank marks each rank's last item;
 *   - overlap: MKS_DP_BUCKET_MB (default 25 MiB, 0 = no overlap for the CPU
 *     and the GPU alike, junk = default), MKS_GPU_OVERLAP (the GPU's
 *     opt-in), the capabilities;
 *   - buckets: they tile the gradient exactly, none over the size, sorted
 *     by the group that makes them final;
 *   - ZeRO-1 shards: whole gradient-norm parts, covering [0, P) in order;
 *   - the loss reduction at world 1 leaves the values as they are. */
#include "comm.h"
#include "dp.h"
#include "model.h"
#include "tr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_check.h"

static void test_dealing(void) {
    for (int W = 1; W <= 5; W++)
        for (int n = 0; n <= 13; n++) {
            int prev = 0, ok = 1, lasts = 0;
            for (int j = 0; j < n; j++) {
                int r = tr_dp_owner(j, n, W);
                ok &= r >= 0 && r < W && r >= prev;
                prev = r;
                lasts += tr_dp_last_of_rank(j, n, W);
                /* the last of a rank: the next item is another rank's */
                ok &= tr_dp_last_of_rank(j, n, W) == (j + 1 == n || tr_dp_owner(j + 1, n, W) != r);
            }
            /* every rank with work has exactly one last item */
            int ranks = 0;
            for (int r = 0; r < W; r++) {
                int has = 0;
                for (int j = 0; j < n; j++) has |= tr_dp_owner(j, n, W) == r;
                ranks += has;
            }
            CHECK(ok && lasts == ranks, "dealing W=%d n=%d", W, n);
            if (n >= W) CHECK(ranks == W, "W=%d n=%d: every rank gets work", W, n);
        }
    CHECK(tr_dp_owner(0, 0, 4) == 0, "no items");
}

static size_t overlap(const char *mb, const char *gpu_opt, int hook, int async, int opt_in) {
    if (mb) setenv("MKS_DP_BUCKET_MB", mb, 1);
    else unsetenv("MKS_DP_BUCKET_MB");
    if (gpu_opt) setenv("MKS_GPU_OVERLAP", gpu_opt, 1);
    else unsetenv("MKS_GPU_OVERLAP");
    tr_dp_caps caps = {hook, async, opt_in};
    return tr_dp_overlap_bucket(&caps);
}

static void test_overlap(void) {
    const size_t def = (size_t)25 << 18; /* 25 MiB of floats */
    /* CPU: hook + serialized communicator, no opt-in */
    CHECK(overlap(NULL, NULL, 1, 1, 0) == def, "cpu default: %zu", overlap(NULL, NULL, 1, 1, 0));
    CHECK(overlap("0", NULL, 1, 1, 0) == 0, "cpu MKS_DP_BUCKET_MB=0: no overlap");
    CHECK(overlap("1", NULL, 1, 1, 0) == (size_t)1 << 18, "cpu 1 MiB");
    CHECK(overlap("0.002", NULL, 1, 1, 0) == 524, "cpu 2 KB: %zu", overlap("0.002", NULL, 1, 1, 0));
    CHECK(overlap("1e-12", NULL, 1, 1, 0) == 1, "a bucket holds one element at least");
    CHECK(overlap("x", NULL, 1, 1, 0) == def && overlap("-1", NULL, 1, 1, 0) == def &&
              overlap("", NULL, 1, 1, 0) == def && overlap("2e6", NULL, 1, 1, 0) == def,
          "junk: the default");
    CHECK(overlap(NULL, NULL, 0, 1, 0) == 0 && overlap(NULL, NULL, 1, 0, 0) == 0, "no hook / not async: no overlap");
    /* GPU: opt-in with MKS_GPU_OVERLAP, then the same bucket rules: 0 is
     * no overlap there too (it was read as the default, 25 MiB) */
    CHECK(overlap(NULL, NULL, 1, 1, 1) == 0 && overlap(NULL, "0", 1, 1, 1) == 0, "gpu: opt-in");
    CHECK(overlap(NULL, "1", 1, 1, 1) == def, "gpu default");
    CHECK(overlap("0", "1", 1, 1, 1) == 0, "gpu MKS_DP_BUCKET_MB=0: no overlap, got %zu buckets' elements",
          overlap("0", "1", 1, 1, 1));
    CHECK(overlap("0.002", "1", 1, 1, 1) == overlap("0.002", NULL, 1, 1, 0), "gpu and cpu buckets alike");
    unsetenv("MKS_DP_BUCKET_MB");
    unsetenv("MKS_GPU_OVERLAP");
}

static void test_buckets(void) {
    tr_model_config mc;
    CHECK(tr_model_config_preset("tiny", 300, 64, &mc) == 0, "tiny config");
    size_t P = tr_model_param_count(&mc);
    size_t els[] = {1000, 4096, 20000, P, 10 * P};
    for (size_t k = 0; k < sizeof els / sizeof *els; k++) {
        tr_dp_bucket *bk = NULL;
        int n = 0;
        CHECK(tr_dp_buckets(&mc, els[k], &bk, &n) == 0 && n > 0, "buckets of %zu", els[k]);
        unsigned char *seen = calloc(P, 1);
        int ok = seen != NULL;
        for (int i = 0; ok && i < n; i++) {
            ok &= bk[i].a < bk[i].b && bk[i].b <= P && bk[i].b - bk[i].a <= els[k];
            ok &= i == 0 || bk[i - 1].group <= bk[i].group;
            for (size_t e = bk[i].a; ok && e < bk[i].b; e++) ok &= seen[e]++ == 0;
        }
        for (size_t e = 0; ok && e < P; e++) ok &= seen[e] == 1;
        CHECK(ok, "buckets of %zu elements tile the %zu-element gradient once, sorted by group", els[k], P);
        free(seen);
        free(bk);
    }
    tr_dp_bucket *bk = NULL;
    int n = -1;
    CHECK(tr_dp_buckets(&mc, 0, &bk, &n) == TR_ERR_ARG && !bk && n == 0, "bucket of 0 elements refused");
}

static void test_zero_shard(void) {
    size_t Ps[] = {1, 255, 256, 257, 1000003};
    for (size_t k = 0; k < sizeof Ps / sizeof *Ps; k++)
        for (int W = 1; W <= 7; W++) {
            size_t P = Ps[k], unit = tr_dp_zero_unit(P), next = 0;
            int ok = unit == (P + TR_DP_NORM_PARTS - 1) / TR_DP_NORM_PARTS;
            for (int r = 0; r < W; r++) {
                size_t lo, hi, ulo, uhi;
                tr_dp_zero_shard(P, W, r, &lo, &hi);
                tr_comm_shard_units(P, unit, W, r, &ulo, &uhi);
                ok &= lo == next && hi >= lo && lo == ulo && hi == uhi && (lo % unit == 0 || lo == P);
                next = hi;
            }
            CHECK(ok && next == P, "ZeRO-1 shards of P=%zu over %d ranks", P, W);
        }
}

static void test_loss_world1(void) {
    tr_comm *c = NULL;
    char err[256];
    CHECK(tr_comm_open("single", &c, err, sizeof err) == 0, "single: %s", err);
    if (!c) return;
    double ml[3] = {1, 2, 3}, ls = 0.25;
    uint64_t nt = 7;
    CHECK(tr_dp_reduce_loss(c, ml, 3, tr_dp_exact_loss(3, 1), &ls, &nt, err, sizeof err) == 0 && ls == 0.25 && nt == 7,
          "world 1: loss and targets as they are");
    /* n x 8 bytes x world within the 4 MiB communication buffer, n <= 4096 */
    CHECK(tr_dp_exact_loss(4096, 128) && !tr_dp_exact_loss(4097, 2) && !tr_dp_exact_loss(4096, 129) &&
              tr_dp_exact_loss(1, 524288) && !tr_dp_exact_loss(2, 524288),
          "exact loss: the small reductions' limits");
    tr_comm_close(c);
}

int main(void) {
    test_dealing();
    test_overlap();
    test_buckets();
    test_zero_shard();
    test_loss_world1();
    setenv("MKS_DP_STATS", "1", 1);
    CHECK(tr_dp_stats(), "MKS_DP_STATS=1");
    setenv("MKS_DP_STATS", "0", 1);
    CHECK(!tr_dp_stats(), "MKS_DP_STATS=0");
    setenv("MKS_GPU_NCCL", "1", 1);
    CHECK(tr_dp_device_world1(), "MKS_GPU_NCCL=1");
    unsetenv("MKS_GPU_NCCL");
    CHECK(!tr_dp_device_world1(), "MKS_GPU_NCCL unset");
    printf("test_dp: %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
