/* test_gpu_step.c - the host logic of the GPU step (issue 31 item 3), no
 * GPU needed (label cpu):
 *  - the multi-tensor AdamW layout (kernels/kn_cuda_size.h): over tables with
 *    odd sizes, empty tensors, a single element, sizes at and around the
 *    block size and gaps between tensors, every element of every tensor is
 *    covered by exactly one block, by kn_adamw_multi_find /
 *    kn_adamw_multi_range (the functions the kernel runs), no block reaches
 *    past its tensor or lands on an empty one, and the grid is the sum of
 *    the blocks; refusals (negative count, a grid over 2^31 - 1);
 *  - the switches (MKS_ADAMW_MULTI / MKS_ADAMW_PER_TENSOR, MKS_CUDA_GRAPH with
 *    sync debug and a gradient hook), the host target count, the graph
 *    cache's lookup;
 *  - the planner's device input row: TR_CUDA_INPUT_SLOTS device batches
 *    (gpu_arena.h), 16 bytes a token each. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_arena.h"
#include "gpu_step.h"
#include "kn_cuda_size.h"
#include "test_check.h"
#include "tr.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return rng_state >> 33;
}

/* one table: coverage of every element exactly once through the kernel's mapping */
static void check_layout(int nt, const size_t *n, const char *what) {
    size_t *off = (size_t *)calloc((size_t)(nt ? nt : 1), sizeof(size_t));
    int *decay = (int *)calloc((size_t)(nt ? nt : 1), sizeof(int));
    kn_adamw_tensor *tab = (kn_adamw_tensor *)malloc(sizeof(kn_adamw_tensor) * (size_t)(nt ? nt : 1));
    uint32_t *bstart = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(nt + 1));
    size_t total = 0, expect_blocks = 0;
    for (int k = 0; k < nt; k++) {
        total += rnd() % 3; /* gaps: tensors need not be contiguous */
        off[k] = total;
        total += n[k];
        decay[k] = (int)(rnd() & 1);
        expect_blocks += (n[k] + KN_ADAMW_MULTI_ELEMS - 1) / KN_ADAMW_MULTI_ELEMS;
    }
    size_t blocks = kn_adamw_multi_layout(nt, off, n, decay, tab, bstart);
    CHECK(blocks == expect_blocks, "%s: grid %zu, expected %zu", what, blocks, expect_blocks);
    unsigned char *hit = (unsigned char *)calloc(total ? total : 1, 1);
    int bad_block = 0;
    for (size_t b = 0; b < blocks && hit; b++) {
        int k = kn_adamw_multi_find(bstart, nt, (uint32_t)b);
        uint64_t j0, j1;
        if (k < 0 || k >= nt || tab[k].n == 0 || bstart[k] > b || bstart[k + 1] <= b) {
            bad_block++;
            continue;
        }
        kn_adamw_multi_range(bstart, tab, k, (uint32_t)b, &j0, &j1);
        if (j0 >= j1 || j1 > tab[k].n || j1 - j0 > KN_ADAMW_MULTI_ELEMS) bad_block++;
        for (uint64_t j = j0; j < j1 && j < tab[k].n; j++) hit[tab[k].off + j]++;
    }
    CHECK(bad_block == 0, "%s: %d blocks on no tensor, an empty one or past its end", what, bad_block);
    size_t twice = 0, missed = 0;
    for (int k = 0; k < nt && hit; k++) {
        CHECK(tab[k].off == off[k] && tab[k].n == n[k] && tab[k].decay == (uint32_t)decay[k], "%s: entry %d", what, k);
        for (size_t j = 0; j < n[k]; j++) {
            twice += hit[off[k] + j] > 1;
            missed += hit[off[k] + j] == 0;
            hit[off[k] + j] = 0;
        }
    }
    size_t stray = 0; /* the gaps between tensors: never touched */
    for (size_t i = 0; i < total && hit; i++) stray += hit[i] != 0;
    CHECK(twice == 0 && missed == 0 && stray == 0, "%s: %zu elements twice, %zu missed, %zu outside a tensor", what,
          twice, missed, stray);
    free(hit);
    free(off);
    free(decay);
    free(tab);
    free(bstart);
}

static void layouts(void) {
    const size_t E = KN_ADAMW_MULTI_ELEMS;
    {
        size_t n[] = {1};
        check_layout(1, n, "one element");
    }
    {
        size_t n[] = {E - 1, E, E + 1, 0, 2 * E, 0, 0, 3, 5 * E + 7, 0};
        check_layout(10, n, "around the block size, empty tensors");
    }
    {
        size_t n[] = {0, 0, 0};
        check_layout(3, n, "all empty");
    }
    {
        /* GPT-2 d12's 16 tensors (vocabulary 50304, 1024 positions, C 768, 12 layers) */
        size_t V = 50304, C = 768, L = 12, T = 1024;
        size_t n[] = {V * C, T * C, L * C,         L * C,     L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                      L * C, L * C, L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C,     C,         C};
        check_layout(16, n, "GPT-2 d12");
    }
    for (int trial = 0; trial < 200; trial++) {
        int nt = 1 + (int)(rnd() % 150); /* a Llama d12 table has ~110 tensors */
        size_t *n = (size_t *)malloc(sizeof(size_t) * (size_t)nt);
        for (int k = 0; k < nt; k++) {
            uint64_t r = rnd() % 10;
            n[k] = r == 0 ? 0 : r < 4 ? rnd() % 8 : r < 8 ? rnd() % (3 * E) : E * (1 + rnd() % 4) + rnd() % 3;
        }
        char what[48];
        snprintf(what, sizeof what, "random table %d (%d tensors)", trial, nt);
        check_layout(nt, n, what);
        free(n);
    }
    check_layout(0, NULL, "no tensor");
    /* refusals */
    {
        size_t off[2] = {0, 0}, n[2] = {(size_t)INT32_MAX * E, E};
        int decay[2] = {0, 0};
        kn_adamw_tensor tab[2];
        uint32_t bstart[3];
        CHECK(kn_adamw_multi_layout(2, off, n, decay, tab, bstart) == (size_t)-1, "a grid over 2^31 - 1 blocks");
        CHECK(kn_adamw_multi_layout(-1, off, n, decay, tab, bstart) == (size_t)-1, "a negative count");
    }
    CHECK(kn_adamw_multi_table_bytes(16) == 16 * sizeof(kn_adamw_tensor) + 17 * 4);
    CHECK(sizeof(kn_adamw_tensor) == 24, "the device table's entry is 24 bytes");
    CHECK(tr_gpu_tail_small_bytes(16) == 48 + kn_adamw_multi_table_bytes(16));
}

static void switches(void) {
    unsetenv("MKS_ADAMW_MULTI");
    unsetenv("MKS_ADAMW_PER_TENSOR");
    CHECK(!tr_gpu_adamw_multi_wanted(), "multi-tensor AdamW is opt-in");
    setenv("MKS_ADAMW_MULTI", "1", 1);
    CHECK(tr_gpu_adamw_multi_wanted());
    setenv("MKS_ADAMW_PER_TENSOR", "1", 1);
    CHECK(!tr_gpu_adamw_multi_wanted(), "MKS_ADAMW_PER_TENSOR=1 wins");
    setenv("MKS_ADAMW_PER_TENSOR", "0", 1);
    CHECK(tr_gpu_adamw_multi_wanted());
    setenv("MKS_ADAMW_MULTI", "0", 1);
    CHECK(!tr_gpu_adamw_multi_wanted());
    unsetenv("MKS_ADAMW_MULTI");
    unsetenv("MKS_ADAMW_PER_TENSOR");

    unsetenv("MKS_GPU_STEP_SYNC");
    CHECK(!tr_gpu_step_sync_wanted(), "no wait per micro-step by default");
    setenv("MKS_GPU_STEP_SYNC", "1", 1);
    CHECK(tr_gpu_step_sync_wanted());
    unsetenv("MKS_GPU_STEP_SYNC");

    unsetenv("MKS_CUDA_GRAPH");
    CHECK(!tr_gpu_graph_wanted(0, 0), "graphs are opt-in");
    setenv("MKS_CUDA_GRAPH", "1", 1);
    CHECK(tr_gpu_graph_wanted(0, 0));
    CHECK(!tr_gpu_graph_wanted(1, 0), "no graphs under MKS_SYNC_DEBUG");
    CHECK(!tr_gpu_graph_wanted(0, 1), "no graphs with a gradient hook");
    setenv("MKS_CUDA_GRAPH", "", 1);
    CHECK(!tr_gpu_graph_wanted(0, 0));
    unsetenv("MKS_CUDA_GRAPH");
}

static void targets_and_keys(void) {
    int32_t t[] = {5, -1, 0, 7, -1, -2, 3};
    CHECK(tr_gpu_count_targets(t, 7) == 4);
    CHECK(tr_gpu_count_targets(t, 0) == 0);
    CHECK(tr_gpu_count_targets(NULL, 7) == 0);

    static int buf[2];
    tr_gpu_graph_key keys[3];
    memset(keys, 0, sizeof keys);
    keys[0] = (tr_gpu_graph_key){16, 1024, 0, &buf[0], 0x3f800000u};
    keys[1] = (tr_gpu_graph_key){16, 1024, 0, &buf[1], 0x3f800000u};
    keys[2] = (tr_gpu_graph_key){16, 1024, 1, &buf[0], 0x3f800000u};
    int exact = -1;
    tr_gpu_graph_key k = {16, 1024, 0, &buf[1], 0x3f800000u};
    CHECK(tr_gpu_graph_find(keys, 3, &k, &exact) == 1 && exact == 1, "exact match");
    k.factor_bits = 0x3f000000u; /* fp16: the dloss factor halved */
    CHECK(tr_gpu_graph_find(keys, 3, &k, &exact) == 1 && exact == 0, "same shape, another factor: update in place");
    k.rows = 7; /* the short last micro-batch */
    CHECK(tr_gpu_graph_find(keys, 3, &k, &exact) == -1 && exact == 0, "another shape: a new capture");
    k = keys[2];
    k.inputs = &buf[1];
    CHECK(tr_gpu_graph_find(keys, 3, &k, &exact) == -1, "the other device batch: its own graph");
    CHECK(tr_gpu_graph_find(keys, 0, &k, &exact) == -1);
}

/* the GPU plan's input row: TR_CUDA_INPUT_SLOTS x 16 bytes a token */
static void input_row(void) {
    tr_plan_in in;
    memset(&in, 0, sizeof in);
    in.n_layer = 2, in.n_head = 2, in.n_embd = 64, in.vocab_size = 512, in.seq_len = 64, in.max_seq = 64;
    in.device = TR_DEV_CUDA;
    in.precision = TR_BF16;
    in.force_micro_rows = 3;
    in.batch_tokens = 3 * 64;
    tr_plan_out o;
    CHECK(tr_plan(&in, &o) == TR_OK);
    const tr_plan_item *r = NULL;
    for (int i = 0; i < o.n_items; i++)
        if (o.items[i].name && strstr(o.items[i].name, "device input batch")) r = &o.items[i];
    CHECK(r && r->bytes == (uint64_t)3 * 64 * 16 * TR_CUDA_INPUT_SLOTS, "device input row %" PRIu64, r ? r->bytes : 0);
}

int main(void) {
    layouts();
    switches();
    targets_and_keys();
    input_row();
    printf("test_gpu_step: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
