/* bench_train_gpu.cu - trains GPT-2 on a shard set with the GPU model
 * (train/gpu_model.h): the loader on its thread filling pinned buffers,
 * copies on their own stream ordered by events, one arena allocated before
 * step 1 and sealed.  Stands in for `llmtrain --device cuda` until the
 * trainer calls the GPU model; run.sh uses it for the "ours" numbers when
 * llmtrain has no CUDA backend.
 *
 *   bench_train_gpu --data DIR [--model d12] [--seq-len 1024] [--batch 32]
 *                   [--steps 40] [--precision bf16|fp16|fp32] [--doc-mask]
 *                   [--log FILE] [--seed 1] [--fast-init] [--sync-debug]
 *
 * --sync-debug: every kernel launch is waited for (as MKS_SYNC_DEBUG=1), so a
 * fault names its kernel (kernels/kn_cuda_err.h).
 * --fast-init: parameters initialised on the device (tr_cuda_model_init_random)
 * instead of by the CPU model (seconds saved for the big models of the sweep).
 *
 * --log: one JSON object per step (step, loss, tokens, tok_per_s, wait_ms,
 * step_ms - llmtrain's keys) and a last line with planned_bytes (the
 * planner's device total for the same run), peak_bytes (device memory in use
 * after the first step, cudaMemGetInfo: the arena + the CUDA context +
 * library handles) and arena_bytes.  Exit 0 ok, 2 bad input / no GPU, 1
 * failure. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

extern "C" {
#include "model.h"
#include "tr.h"
#include "gpu_arena.h"
#include "gpu_model.h"
}
#include "kn_cuda_err.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *data = NULL, *model = "d12", *logp = NULL, *prec = "bf16";
    int T = 1024, B = 32, steps = 40, docmask = 0, fast_init = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--doc-mask")) {
            docmask = 1;
            continue;
        }
        if (!strcmp(a, "--fast-init")) {
            fast_init = 1;
            continue;
        }
        if (!strcmp(a, "--sync-debug")) {
            kn_cuda_set_sync_debug(1);
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_train_gpu: %s needs a value\n", a);
            return 64;
        }
        if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--seq-len")) T = atoi(v);
        else if (!strcmp(a, "--batch")) B = atoi(v);
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--precision")) prec = v;
        else if (!strcmp(a, "--log")) logp = v;
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "bench_train_gpu: unknown option %s\n", a);
            return 64;
        }
        i++;
    }
    if (!data || T <= 0 || B <= 0 || steps <= 0) {
        fprintf(stderr, "bench_train_gpu: --data DIR required\n");
        return 64;
    }
    kn_dtype dt = !strcmp(prec, "fp32") ? KN_F32 : (!strcmp(prec, "fp16") ? KN_F16 : KN_BF16);
    char name[256];
    uint64_t total = 0, fr = 0, used0 = 0, used1 = 0;
    if (tr_cuda_device_info(name, sizeof name, &total, &fr) != TR_OK) {
        fprintf(stderr, "bench_train_gpu: no GPU\n");
        return 2;
    }
    tr_cuda_mem_used(&used0);

    tr_rows rows;
    char err[512];
    if (tr_rows_open_shards(&rows, data, err, sizeof err)) {
        fprintf(stderr, "bench_train_gpu: %s\n", err);
        return 2;
    }
    if (T > rows.row_len) {
        fprintf(stderr, "bench_train_gpu: rows hold %d tokens\n", rows.row_len);
        return 2;
    }
    tr_model_config cfg;
    if (tr_model_config_preset(model, (int)rows.vocab_size, T, &cfg) != TR_MODEL_OK) {
        fprintf(stderr, "bad model\n");
        return 2;
    }

    /* the planner's view of the same run, for planned vs measured */
    tr_plan_in pi;
    memset(&pi, 0, sizeof pi);
    tr_model_preset(model, &pi.n_layer, &pi.n_head, &pi.n_embd);
    pi.vocab_size = rows.vocab_size;
    pi.seq_len = pi.max_seq = T;
    pi.batch_tokens = pi.token_budget = (uint64_t)B * T;
    pi.device = TR_DEV_CUDA;
    pi.precision = dt == KN_F32 ? TR_FP32 : (dt == KN_F16 ? TR_FP16 : TR_BF16);
    pi.mem_budget = total;
    pi.doc_mask = docmask;
    pi.force_micro_rows = B;
    tr_plan_out po;
    tr_plan(&pi, &po);

    /* the arena: the model + the device batch, allocated once */
    tr_plan_out ao;
    memset(&ao, 0, sizeof ao);
    ao.n_items = 2;
    ao.items[0].name = "model";
    ao.items[0].bytes = tr_cuda_model_arena_bytes(&cfg, B, T, dt, 0, NULL);
    ao.items[0].where = "device";
    ao.items[1].name = "device input batch";
    ao.items[1].bytes = tr_cuda_input_arena_bytes(B, T);
    ao.items[1].where = "device";
    tr_cuda_arena arena;
    int rc = tr_cuda_arena_create(&arena, &ao);
    if (rc != TR_OK) {
        fprintf(stderr, "bench_train_gpu: arena: %s\n", arena.last_error);
        return 1;
    }
    cudaStream_t compute;
    cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
    tr_cuda_model *g = NULL;
    tr_cuda_input *in = NULL;
    if ((rc = tr_cuda_model_create(&g, &cfg, B, T, dt, &arena, compute, 0, NULL)) != TR_OK ||
        (rc = tr_cuda_input_create(&in, &arena, B, T, compute)) != TR_OK) {
        fprintf(stderr, "bench_train_gpu: setup %d: %s %s\n", rc, arena.last_error, kn_cuda_last_error());
        return 1;
    }
    tr_cuda_arena_seal(&arena); /* nothing is allocated on the device after this */
    if (fast_init) {
        if (tr_cuda_model_init_random(g, seed) != TR_OK) {
            fprintf(stderr, "device init failed\n");
            return 1;
        }
    } else {
        tr_model *cpu = NULL;
        if (tr_model_create(&cfg, seed, &cpu) != TR_MODEL_OK) {
            fprintf(stderr, "model init failed\n");
            return 1;
        }
        tr_cuda_model_set_params(g, tr_model_params(cpu));
        tr_model_free(cpu);
    }
    tr_loader_opts lo;
    tr_loader_opts_init(&lo);
    lo.seq_len = T;
    lo.micro_rows = B;
    lo.rows_per_step = B;
    lo.nbuf = 2;
    lo.seed = seed;
    lo.doc_mask = docmask;
    lo.alloc = tr_cuda_pinned_alloc;
    lo.free = tr_cuda_pinned_free;
    tr_loader *ld = NULL;
    if (tr_loader_open(&rows, &lo, &ld) != TR_OK) {
        fprintf(stderr, "bench_train_gpu: loader\n");
        return 1;
    }
    FILE *logf = logp ? fopen(logp, "w") : NULL;
    printf("bench_train_gpu: %s; %s (%zu params) %s, %d x %d tokens/step, arena %.1f MiB, plan %.1f MiB\n", name, model,
           tr_model_param_count(&cfg), prec, B, T, arena.size / 1048576.0, po.total_bytes / 1048576.0);
    tr_adamw_hparams h = {6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    tr_loss_scaler scaler; /* fp16: the scale is on the per-token mean loss (gpu_model.h) */
    tr_loss_scaler_init(&scaler, B * T);
    int opt_step = 0;
    for (int step = 1; step <= steps; step++) {
        double t0 = now_s(), w1 = 0, w2 = 0;
        const tr_batch *b = NULL;
        if (tr_loader_next(ld, &b, &w1) != TR_OK) {
            fprintf(stderr, "loader failed\n");
            return 1;
        }
        tr_cuda_batch dev;
        if (tr_cuda_input_upload(in, b, &dev) != TR_OK || tr_cuda_input_host_done(in, &w2) != TR_OK) {
            fprintf(stderr, "upload failed\n");
            return 1;
        }
        uint64_t ntg = b->n_targets;
        int rowsb = b->rows;
        tr_loader_release(ld);
        tr_cuda_model_zero_grad(g);
        double ls = 0;
        uint64_t n = 0;
        /* fp16: dloss g = scale / (B*T), undone with g * targets in the step; else 1/targets */
        float dloss = dt == KN_F16 ? tr_loss_scaler_dloss(&scaler, B * T) : (ntg ? 1.0f / (float)ntg : 0.0f);
        rc = tr_cuda_model_fwd_bwd(g, rowsb, T, dev.inputs, dev.targets, docmask ? dev.pos : NULL,
                                   docmask ? dev.seg : NULL, dloss, &ls, &n);
        tr_cuda_input_consumed(in);
        float gn = 0;
        int skipped = 0;
        if (rc == TR_OK && dt == KN_F16) {
            rc = tr_cuda_model_step_scaled(g, &h, opt_step + 1, 1.0f, tr_loss_scaler_unscale(&scaler, B * T, ntg), &gn,
                                           &skipped);
            if (skipped) printf("step %d: non-finite gradient at loss scale %.0f: skipped\n", step, scaler.scale);
            tr_loss_scaler_update(&scaler, skipped);
        } else if (rc == TR_OK) {
            rc = tr_cuda_model_step(g, &h, opt_step + 1, 1.0f, &gn);
        }
        if (!skipped) opt_step++;
        if (rc != TR_OK) {
            char mb[KN_ERR_MSG_MAX];
            cudaError_t pe = cudaPeekAtLastError();
            fprintf(stderr, "bench_train_gpu: step %d failed: %s\n", step,
                    kn_cuda_failure_message(mb, sizeof mb, (int)pe, pe ? cudaGetErrorName(pe) : NULL,
                                            pe ? cudaGetErrorString(pe) : NULL));
            return 1;
        }
        cudaStreamSynchronize(compute);
        double dt_s = now_s() - t0, loss = n ? ls / n : 0;
        if (step == 1) tr_cuda_mem_used(&used1);
        double tps = rowsb * (double)T / dt_s;
        printf("step %4d/%d | loss %.4f | gnorm %.3f | %.0f tok/s | step %.1f ms | wait %.3f ms\n", step, steps, loss,
               gn, tps, dt_s * 1e3, (w1 + w2) * 1e3);
        if (logf) {
            char gns[32];
            if (isfinite(gn)) snprintf(gns, sizeof gns, "%.6f", gn);
            else snprintf(gns, sizeof gns, "null"); /* a skipped fp16 step: no norm (JSON has no nan) */
            fprintf(logf,
                    "{\"step\":%d,\"loss\":%.6f,\"grad_norm\":%s,\"tokens\":%d,\"tok_per_s\":%.1f,\"wait_ms\":%.4f,"
                    "\"step_ms\":%.4f,\"loss_scale\":%.1f,\"skipped\":%d}\n",
                    step, loss, gns, rowsb * T, tps, (w1 + w2) * 1e3, dt_s * 1e3,
                    dt == KN_F16 ? (double)scaler.scale : 1.0, skipped);
        }
    }
    printf("memory: planned %.1f MiB (planner, device total), peak %.1f MiB in use after step 1 (cudaMemGetInfo; "
           "%.1f MiB before the arena), arena %.1f MiB\n",
           po.total_bytes / 1048576.0, used1 / 1048576.0, used0 / 1048576.0, arena.size / 1048576.0);
    if (logf) {
        fprintf(logf, "{\"planned_bytes\":%llu,\"peak_bytes\":%llu,\"arena_bytes\":%llu,\"baseline_bytes\":%llu}\n",
                (unsigned long long)po.total_bytes, (unsigned long long)used1, (unsigned long long)arena.size,
                (unsigned long long)used0);
        fclose(logf);
    }
    tr_loader_close(ld);
    tr_cuda_input_destroy(in);
    tr_cuda_model_destroy(g);
    tr_cuda_arena_destroy(&arena);
    tr_rows_close(&rows);
    return 0;
}
