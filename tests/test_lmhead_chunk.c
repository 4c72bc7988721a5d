/* test_lmhead_chunk.c - the lm head's row chunks on the host (issue 31 item
 * 3; train/gpu_lmhead.h): the switch MKS_LMHEAD_CHUNK as parsed, the rows
 * "auto" picks, the logits buffer's rows, the chunk table (every row of
 * [0, N) in exactly one chunk, in order, only the last short) and the
 * planner's logits rows for GPT-2 (train/plan.c) and the Llama family
 * (train/gpu_llama_plan.c) in both settings: whole (per row, as before) and
 * chunked (one chunk's bytes, fixed).  The device side runs the same table
 * (train/gpu_lmhead.cuh); test_gpu_plan_carve holds the rows equal to the
 * models' carves.  Label cpu. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_llama.h"
#include "gpu_lmhead.h"
#include "model.h"
#include "optim.h"
#include "test_check.h"
#include "tr.h"

static void parse_cases(void) {
    static const struct {
        const char *s;
        long want;
    } cases[] = {
        {NULL, 0},         {"", 0},
        {"0", 0},          {"1", 1},
        {"40", 40},        {"0256", 256},
        {"auto", -1},      {"AUTO", 0},
        {"auto ", 0},      {"autox", 0},
        {"-5", 0},         {"+5", 0},
        {" 5", 0},         {"5 ", 0},
        {"0x10", 0},       {"1e3", 0},
        {"12a", 0},        {"1073741824", 1L << 30},
        {"1073741825", 0}, {"99999999999999999999999", 0},
        {"4096", 4096},    {"au", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long got = tr_lmhead_chunk_parse(cases[i].s);
        CHECK(got == cases[i].want, "parse(\"%s\") = %ld, want %ld", cases[i].s ? cases[i].s : "(null)", got,
              cases[i].want);
    }
    CHECK(TR_LMHEAD_AUTO == -1);
    setenv("MKS_LMHEAD_CHUNK", "384", 1);
    CHECK(tr_lmhead_chunk_request() == 384);
    unsetenv("MKS_LMHEAD_CHUNK");
    CHECK(tr_lmhead_chunk_request() == 0);
}

static void auto_cases(void) {
    /* R >= 5 C, a multiple of 128, at least 256 (gpu_lmhead.h says why) */
    CHECK(tr_lmhead_chunk_auto(64) == 384, "tiny: %zu", tr_lmhead_chunk_auto(64));
    CHECK(tr_lmhead_chunk_auto(768) == 3840, "d12: %zu", tr_lmhead_chunk_auto(768));
    CHECK(tr_lmhead_chunk_auto(1024) == 5120, "d24: %zu", tr_lmhead_chunk_auto(1024));
    CHECK(tr_lmhead_chunk_auto(2048) == 10240, "1B: %zu", tr_lmhead_chunk_auto(2048));
    CHECK(tr_lmhead_chunk_auto(8) == 256 && tr_lmhead_chunk_auto(0) == 256);
    for (size_t C = 1; C <= 5000; C += 7) {
        size_t r = tr_lmhead_chunk_auto(C);
        CHECK(r % 128 == 0 && r >= 256 && r >= 5 * C && r < 5 * C + 128 + 256, "C %zu: %zu", C, r);
    }
    /* the buffer's rows: the capacity when whole or when the chunk covers it */
    CHECK(tr_lmhead_chunk_rows(0, 16384, 768) == 16384);
    CHECK(tr_lmhead_chunk_rows(-1, 16384, 768) == 3840);
    CHECK(tr_lmhead_chunk_rows(-1, 1024, 768) == 1024);
    CHECK(tr_lmhead_chunk_rows(40, 144, 64) == 40);
    CHECK(tr_lmhead_chunk_rows(144, 144, 64) == 144 && tr_lmhead_chunk_rows(145, 144, 64) == 144);
    CHECK(tr_lmhead_chunk_rows(-7, 144, 64) == 144); /* no other negative request exists: whole */
    CHECK(tr_lmhead_chunk_rows(40, 0, 64) == 0);
}

/* every row in exactly one chunk, in order, chunks of R but the last */
static void table_cases(void) {
    const size_t Ns[] = {1, 2, 7, 40, 41, 135, 144, 16384, 16385};
    const size_t Rs[] = {1, 2, 3, 40, 64, 143, 144, 145, 3840, 100000};
    for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
        for (size_t b = 0; b < sizeof Rs / sizeof Rs[0]; b++) {
            size_t N = Ns[a], R = Rs[b], next = 0, r0 = 0, r1 = 0, i = 0;
            int ok = 1;
            for (; tr_lmhead_chunk_at(N, R, i, &r0, &r1); i++) {
                if (r0 != next || r1 <= r0 || r1 > N) ok = 0;
                if (r1 - r0 != R && r1 != N) ok = 0; /* only the last may be short */
                next = r1;
            }
            CHECK(ok && next == N && i == tr_lmhead_chunk_count(N, R) && i == (N + R - 1) / R,
                  "N %zu R %zu: %zu chunks, covered %zu", N, R, i, next);
        }
    size_t r0 = 0, r1 = 0;
    CHECK(!tr_lmhead_chunk_at(10, 0, 0, &r0, &r1) && tr_lmhead_chunk_count(10, 0) == 0);
    CHECK(!tr_lmhead_chunk_at(0, 4, 0, &r0, &r1) && tr_lmhead_chunk_count(0, 4) == 0);
}

static const tr_plan_item *find_row(const tr_plan_out *o, const char *prefix) {
    for (int i = 0; i < o->n_items; i++)
        if (!strncmp(o->items[i].name, prefix, strlen(prefix))) return &o->items[i];
    return NULL;
}

/* GPT-2's GPU plan at (B forced, T): its logits row, and the device total */
static void gpt2_plan(const char *env, int L, int NH, int C, int V, int T, int B, tr_precision prec) {
    if (env) setenv("MKS_LMHEAD_CHUNK", env, 1);
    else unsetenv("MKS_LMHEAD_CHUNK");
    tr_plan_in in;
    memset(&in, 0, sizeof in);
    in.n_layer = L, in.n_head = NH, in.n_embd = C, in.vocab_size = (uint32_t)V;
    in.seq_len = T, in.max_seq = T, in.batch_tokens = (uint64_t)B * (uint64_t)T;
    in.device = TR_DEV_CUDA, in.precision = prec, in.force_micro_rows = B;
    tr_plan_out o;
    int rc = tr_plan(&in, &o);
    CHECK(rc == TR_OK, "tr_plan %d", rc);
    tr_model_config mc;
    CHECK(tr_model_config_make(L, NH, C, T, V, &mc) == TR_MODEL_OK);
    uint64_t ab = prec == TR_FP32 ? 4 : 2, N = (uint64_t)B * (uint64_t)T, Vp = (uint64_t)mc.vocab_padded;
    long req = tr_lmhead_chunk_parse(env);
    uint64_t rows = req == 0 ? N : req == TR_LMHEAD_AUTO ? tr_lmhead_chunk_auto((size_t)C) : (uint64_t)req;
    if (rows > N) rows = N;
    const tr_plan_item *lg = find_row(&o, "logits (Vp) + dlogits in place");
    CHECK(lg && lg->bytes == rows * Vp * ab && !strcmp(lg->where, "device"),
          "GPT-2 C%d T%d B%d %s MKS_LMHEAD_CHUNK=%s: the logits row %" PRIu64 " bytes, want %" PRIu64 " rows x %" PRIu64
          " x %" PRIu64,
          C, T, B, tr_precision_name(prec), env ? env : "(unset)", lg ? lg->bytes : 0, rows, Vp, ab);
    /* whole: per row, as the plan has always printed it; chunked: fixed */
    if (lg) CHECK(rows == N ? lg->per_row == lg->bytes : lg->per_row == 0, "per_row %" PRIu64, lg->per_row);
    unsetenv("MKS_LMHEAD_CHUNK");
}

static void llama_rows(const char *env, const tr_llama_config *c, int B, int T, int esz) {
    if (env) setenv("MKS_LMHEAD_CHUNK", env, 1);
    else unsetenv("MKS_LMHEAD_CHUNK");
    tr_llama_gpu_row rows[TR_LLAMA_GPU_ROWS];
    int n = tr_llama_gpu_plan_rows(c, B, T, esz, tr_optim_layout_default(), rows);
    CHECK(n > 0);
    uint64_t N = (uint64_t)B * (uint64_t)T;
    long req = tr_lmhead_chunk_parse(env);
    uint64_t r = req == 0 ? N : req == TR_LMHEAD_AUTO ? tr_lmhead_chunk_auto((size_t)c->d_model) : (uint64_t)req;
    if (r > N) r = N;
    /* the logits' bytes the rows hold: with the whole buffer inside the final-norm row, else their own row */
    uint64_t C = (uint64_t)c->d_model, V = (uint64_t)c->vocab, e = (uint64_t)esz, lg = 0;
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (!strncmp(rows[i].name, "activations: final norm", 23)) {
            lg += rows[i].fixed + (uint64_t)B * rows[i].per_row - N * (3 * C * e + 8);
            found++;
        } else if (!strncmp(rows[i].name, "logits / dlogits (V): one chunk", 31)) {
            CHECK(rows[i].per_row == 0);
            lg += rows[i].fixed;
            found++;
        }
    }
    CHECK(found == (r == N ? 1 : 2) && lg == r * V * e,
          "Llama C%d V%d B%d T%d esz %d MKS_LMHEAD_CHUNK=%s: logits %" PRIu64 " bytes, want %" PRIu64 " rows",
          c->d_model, c->vocab, B, T, esz, env ? env : "(unset)", lg, r);
    unsetenv("MKS_LMHEAD_CHUNK");
}

int main(void) {
    parse_cases();
    auto_cases();
    table_cases();
    const char *envs[] = {NULL, "0", "40", "auto", "100000", "junk"};
    int n = 0;
    for (size_t k = 0; k < sizeof envs / sizeof envs[0]; k++) {
        for (int prec = TR_FP32; prec <= TR_FP16; prec++) {
            gpt2_plan(envs[k], 2, 2, 64, 512, 48, 3, (tr_precision)prec);
            gpt2_plan(envs[k], 12, 12, 768, 50257, 1024, 16, (tr_precision)prec);
            gpt2_plan(envs[k], 12, 12, 768, 50257, 64, 1, (tr_precision)prec);
            n += 3;
        }
        tr_llama_config c = {2, 4, 2, 256, 344, 300, 64, 10000.0f, 1e-5f, {0, 0, 0, 0}, 0, 0};
        tr_llama_config l3 = {16, 32, 8, 2048, 8192, 128256, 1024, 500000.0f, 1e-5f, {32.0f, 1.0f, 4.0f, 8192}, 1, 0};
        for (int esz = 2; esz <= 4; esz += 2) {
            llama_rows(envs[k], &c, 3, 45, esz);
            llama_rows(envs[k], &c, 1, 17, esz);
            llama_rows(envs[k], &l3, 16, 1024, esz);
            n += 3;
        }
    }
    printf("test_lmhead_chunk: parse, auto, chunk table, %d plans: %s\n", n, failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
