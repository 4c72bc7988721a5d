/* test_llama_reserve.c - the CPU Llama model's memory (train/llama_model.h):
 * tr_llama_memory's figures are what tr_llama_reserve allocates (one block
 * of acts + scratch bytes, seen by a malloc hook), a forward/backward after
 * the reserve allocates nothing large, every allocation of a forward +
 * backward after it is a kernel's per-thread workspace no larger than the
 * planner counts (kernels/kn_cpu_size.h: the matmul's panels, the
 * attention's buffer), a block left dirty by an earlier, larger batch
 * gives the bitwise result of a fresh model (nothing relies on zeroed
 * memory), and sizes that overflow are refused. The hook replaces glibc's
 * malloc family in this executable, so it is compiled out under ASan (which
 * owns malloc); the other checks still run there. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cpu_size.h"
#include "llama_model.h"

#include "malloc_hook.h"

/* allocations of at least BIG bytes while counting: their number and the
 * largest size */
#define BIG ((size_t)512 << 10)
static volatile int counting;
static volatile size_t n_big, max_big;
static size_t max_any; /* the largest allocation of any size (threads race: atomic max) */

#if HOOK
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static void note(size_t n) {
    if (counting) {
        size_t m = __atomic_load_n(&max_any, __ATOMIC_RELAXED);
        while (n > m && !__atomic_compare_exchange_n(&max_any, &m, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
    }
    if (counting && n >= BIG) {
        __atomic_add_fetch(&n_big, 1, __ATOMIC_RELAXED);
        if (n > max_big) max_big = n;
    }
}
void *malloc(size_t n) {
    note(n);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    note(a * b);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    note(n);
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n) {
    note(n);
    return __libc_memalign(al, n);
}
void free(void *p) { __libc_free(p); }
#endif

static int fails;
#define CHECK(cond, ...)                                                                                               \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fails++;                                                                                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                                \
            printf(__VA_ARGS__);                                                                                       \
            printf("\n");                                                                                              \
        }                                                                                                              \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
}

static tr_llama *make(const tr_llama_config *c) {
    tr_llama *m = NULL;
    if (tr_llama_create(c, &m)) return NULL;
    rng = 88172645463325252ull;
    float *p = tr_llama_params(m);
    for (size_t i = 0, P = tr_llama_param_count(c); i < P; i++) p[i] = 0.1f * frand();
    return m;
}

static void run_config(const tr_llama_config *c, const char *what) {
    enum { B = 4, T = 64 };
    tr_llama_mem mem;
    CHECK(tr_llama_memory(c, B, T, &mem) == TR_OK, "%s: tr_llama_memory", what);
    size_t P = tr_llama_param_count(c);
    CHECK(mem.params == 4 * P && mem.grads == 4 * P && mem.total == mem.params + mem.grads + mem.acts + mem.scratch,
          "%s: params/grads/total", what);
    uint32_t x[B * T];
    int32_t y[B * T], doc[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (uint32_t)(i * 7919 % c->vocab), y[i] = (i * 104729 + 3) % c->vocab;
    for (int i = 0; i < B * T; i++) doc[i] = (i % T) / 20;

    tr_llama *m = make(c), *fresh = make(c);
    CHECK(m && fresh, "%s: create", what);
    if (!m || !fresh) return;
    n_big = max_big = 0;
    counting = 1;
    int rc = tr_llama_reserve(m, B, T);
    counting = 0;
    CHECK(rc == 0, "%s: reserve", what);
    if (HOOK)
        CHECK(n_big == 1 && max_big == mem.acts + mem.scratch,
              "%s: reserve allocated %zu block(s), largest %zu; "
              "tr_llama_memory says one of %zu",
              what, (size_t)n_big, (size_t)max_big, mem.acts + mem.scratch);
    double loss = 0, loss2 = 0;
    /* dirty the block: a first pass over other tokens with another mask */
    for (int i = 0; i < B * T; i++) x[i] ^= 1u;
    CHECK(tr_llama_fwd_bwd(m, B, T, x, y, NULL, doc, NULL, &loss) == 0, "%s: first pass", what);
    for (int i = 0; i < B * T; i++) x[i] ^= 1u;
    memset(tr_llama_grads(m), 0, 4 * P);
    n_big = 0;
    max_any = 0;
    counting = 1;
    rc = tr_llama_fwd_bwd(m, B, T / 2, x, y, NULL, NULL, NULL, &loss); /* smaller: the same block */
    counting = 0;
    CHECK(rc == 0, "%s: fwd_bwd", what);
    if (HOOK) CHECK(n_big == 0, "%s: fwd_bwd after reserve made %zu allocation(s) >= 512 KiB", what, (size_t)n_big);
    /* a piece of the per-thread workspace the planner counts: the matmul's
     * panels (A + B) or the attention's buffer, whichever numerics run */
    size_t ws_mm = kn_cpu_matmul_workspace_bytes(),
           ws_att = kn_cpu_gqa_attention_workspace_bytes(T / 2, (size_t)(c->d_model / c->n_head));
    if (HOOK)
        CHECK(max_any <= (ws_mm > ws_att ? ws_mm : ws_att),
              "%s: fwd_bwd allocated %zu bytes at once; the planned kernel workspace is %zu (matmul) and %zu "
              "(attention) per thread",
              what, max_any, ws_mm, ws_att);
    CHECK(tr_llama_fwd_bwd(fresh, B, T / 2, x, y, NULL, NULL, NULL, &loss2) == 0, "%s: fresh fwd_bwd", what);
    CHECK(loss == loss2, "%s: loss %.9g on a reused block, %.9g fresh", what, loss, loss2);
    CHECK(!memcmp(tr_llama_grads(m), tr_llama_grads(fresh), 4 * P),
          "%s: gradients on a reused block differ from a fresh model's", what);
    tr_llama_free(m);
    tr_llama_free(fresh);
    printf("%s: acts %zu B, scratch %zu B, reserve one block, fwd_bwd no allocation >= 512 KiB%s\n", what, mem.acts,
           mem.scratch, HOOK ? "" : " (hook off: sanitizer build)");
}

int main(void) {
    tr_llama_config c = {2, 4, 2, 64, 128, 2048, 128, 10000.f, 1e-5f, {0, 0, 0, 0}, 1, 0};
    run_config(&c, "llama tied gqa");
    tr_llama_config q = c;
    q.qkv_bias = 1, q.tied = 0, q.n_kv_head = 1;
    run_config(&q, "qwen2 bias untied");
    /* head size 256 (Gemma-class): the FMA attention's backward tiles
     * (3 x 256 x 128 + 24 x 128 floats, 396 KiB) outgrow the matmul's panels */
    tr_llama_config h = c;
    h.n_head = 1, h.n_kv_head = 1, h.d_model = 256, h.d_ff = 256;
    run_config(&h, "head size 256");

    /* refusals: no block sized from a product that wrapped */
    tr_llama_mem mem;
    CHECK(tr_llama_memory(&c, 0, 8, &mem) == TR_ERR_ARG, "B 0 accepted");
    CHECK(tr_llama_memory(&c, 1, c.max_seq + 1, &mem) == TR_ERR_ARG, "T > max_seq accepted");
    tr_llama_config big = c;
    big.max_seq = 1 << 24; /* TR_MAX_ROW_LEN */
    CHECK(tr_llama_memory(&big, INT32_MAX, 1 << 24, &mem) == TR_ERR_ARG, "overflowing B*H*T*T accepted");
    CHECK(tr_llama_memory(&big, 1, 1 << 24, &mem) == TR_OK && mem.acts > ((size_t)1 << 52),
          "B 1 x T 2^24: %zu activation bytes", mem.acts);
    if (HOOK) { /* under ASan an allocation this large aborts instead of failing */
        tr_llama *m = make(&c);
        CHECK(m && tr_llama_reserve(m, INT32_MAX, c.max_seq) != 0, "reserve of an impossible batch succeeded");
        tr_llama_free(m);
    }
    if (fails) return 1;
    printf("test_llama_reserve: all checks passed\n");
    return 0;
}
