/* gpu_session.cu - a GPU training session (train/gpu_session.h): the loop of
 * tests/bench_train_gpu.cu behind a small C interface, which the CUDA
 * backend (train/backend_cuda.cu) adapts to train/backend.h.  The model is
 * the configuration's family's GPU model (train/family.h gpu, a
 * train/gpu_family.h table): nothing here knows a family.
 *
 * The micro-step (issue 31 item 3): no host wait for the device in it (the
 * step's loss is summed on the device and read once per optimizer step,
 * tr_gpu_step_loss; the target count comes from the host batch), the next
 * batch's copy overlaps the current compute (two device batches,
 * gpu_arena.h), and with MKS_CUDA_GRAPH=1 the forward + backward is a CUDA
 * graph captured once per (rows, T, doc mask, device batch, dloss factor)
 * and replayed (train/gpu_step.h). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "model.h"
#include "tr.h"
#include "family.h"
#include "gpu_arena.h"
#include "gpu_family.h"
#include "gpu_model.h"
#include "gpu_session.h"
#include "gpu_step.h"
}
#include "kn_cuda_check.h" /* KN_CU_CHECK, kn_cuda_err.h */

struct tr_gpu {
    tr_cuda_arena arena;
    int arena_ok;
    cudaStream_t s;
    const tr_gpu_model_ops *mo; /* the family's GPU model */
    void *m;
    tr_cuda_input *in;
    kn_dtype dt;
    int T;
    int micro_tokens; /* B x T: the fp16 dloss divisor (gpu_model.h) */
    tr_loss_scaler scaler;
    uint64_t opt_step; /* optimiser steps taken (t of the next step - 1) */
    /* the step's loss when the model cannot sum it on the device
     * (mo->step_loss NULL): each micro-batch's, read and added here */
    double host_loss;
    uint64_t host_targets;
    int hook_armed; /* a gradient hook is set: no graphs (host callbacks mid-backward) */
    /* MKS_CUDA_GRAPH=1: captured micro-steps, keyed by what they depend on */
    int graph_on;
    int n_graphs, graph_evict;
    tr_gpu_graph_key gkey[TR_GPU_GRAPHS];
    cudaGraphExec_t gexec[TR_GPU_GRAPHS];
    uint64_t gcount[3]; /* captures, replays, in-place updates */
};

static kn_dtype dtype_of(tr_precision p) { return p == TR_FP32 ? KN_F32 : (p == TR_FP16 ? KN_F16 : KN_BF16); }

/* The message for a failed GPU call: the first error recorded since the
 * call began (kernels/kn_cuda_err.h: call text, file:line, error name and
 * text, where it was called from); when nothing was recorded, the pending
 * CUDA error with its name; never "no error". */
static const char *cuda_msg(void) {
    static __thread char buf[KN_ERR_MSG_MAX];
    cudaError_t e = cudaPeekAtLastError();
    return kn_cuda_failure_message(buf, sizeof buf, (int)e, e != cudaSuccess ? cudaGetErrorName(e) : NULL,
                                   e != cudaSuccess ? cudaGetErrorString(e) : NULL);
}

static int stream_create(cudaStream_t *s) {
    KN_CU_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), return TR_ERR_NODEVICE);
    return TR_OK;
}

extern "C" const char *tr_gpu_last_error(void) { return cuda_msg(); }

extern "C" int tr_gpu_device(char *name, size_t name_len, uint64_t *total, uint64_t *free_bytes, char *why,
                             size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        if (e != cudaSuccess)
            snprintf(why, why_len, "cudaGetDeviceCount: %s (%d): %s", cudaGetErrorName(e), (int)e,
                     cudaGetErrorString(e));
        else snprintf(why, why_len, "no CUDA device found");
        cudaGetLastError(); /* clear it */
        return TR_ERR_NODEVICE;
    }
    kn_cuda_clear_error();
    int rc = tr_cuda_device_info(name, name_len, total, free_bytes);
    if (rc != TR_OK) snprintf(why, why_len, "device 0 is not usable: %s", cuda_msg());
    return rc;
}

extern "C" int tr_gpu_mem_used(uint64_t *used) { return tr_cuda_mem_used(used); }

extern "C" int tr_gpu_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear it */
        return 0;
    }
    return n;
}

extern "C" int tr_gpu_select(int device, char *why, size_t why_len) {
    int n = tr_gpu_count();
    if (device < 0 || device >= n) {
        snprintf(why, why_len, "GPU %d requested, %d visible", device, n);
        return TR_ERR_NODEVICE;
    }
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "cudaSetDevice(%d): %s (%d): %s", device, cudaGetErrorName(e), (int)e,
                 cudaGetErrorString(e));
        cudaGetLastError();
        return TR_ERR_NODEVICE;
    }
    return TR_OK;
}

static uint64_t input_bytes(int B, int T) { return (uint64_t)tr_cuda_input_arena_bytes(B, T); }

/* The GPU model of c's family; NULL (why says so) when it has none. */
static const tr_gpu_model_ops *model_ops(const tr_model_config *c, char *why, size_t whylen) {
    const tr_family_ops *f = tr_family_of(c);
    if (f && f->gpu) return f->gpu;
    if (why)
        snprintf(why, whylen, "the %s model family has no GPU model in this build; use --device cpu",
                 f ? f->name : "unknown");
    return NULL;
}

extern "C" int tr_gpu_model_check(const tr_model_config *c, int recompute, char *err, size_t errlen) {
    const tr_gpu_model_ops *mo = model_ops(c, err, errlen);
    if (!mo) return TR_ERR_ARG;
    if (recompute > mo->recompute_max) {
        snprintf(err, errlen, "--recompute %d: the GPU %s model recomputes up to level %d; use --recompute %d",
                 recompute, mo->name, mo->recompute_max, mo->recompute_max);
        return TR_ERR_ARG;
    }
    return TR_OK;
}

extern "C" uint64_t tr_gpu_arena_need(const tr_model_config *c, int B, int T, tr_precision p, int recompute,
                                      const tr_optim_ops *opt) {
    const tr_gpu_model_ops *mo = model_ops(c, NULL, 0);
    size_t mb = mo ? mo->arena_bytes(c, B, T, dtype_of(p), recompute, opt) : 0;
    return mb ? (uint64_t)mb + input_bytes(B, T) : 0;
}

static void graphs_drop(tr_gpu *g) {
    for (int i = 0; i < g->n_graphs; i++)
        if (g->gexec[i]) cudaGraphExecDestroy(g->gexec[i]);
    g->n_graphs = 0;
}

extern "C" void tr_gpu_close(tr_gpu *g) {
    if (!g) return;
    if (g->s) cudaStreamSynchronize(g->s);
    graphs_drop(g);
    if (g->in) tr_cuda_input_destroy(g->in);
    if (g->m) g->mo->destroy(g->m);
    if (g->arena_ok) tr_cuda_arena_destroy(&g->arena);
    if (g->s) cudaStreamDestroy(g->s);
    free(g);
}

extern "C" int tr_gpu_open(tr_gpu **out, const tr_model_config *c, int B, int T, tr_precision p,
                           const tr_plan_out *plan, const float *host_params, uint64_t *arena_bytes, char *err,
                           size_t errlen, int recompute, const tr_optim_ops *opt) {
    *out = NULL;
    const tr_gpu_model_ops *mo = model_ops(c, err, errlen);
    if (!mo) return TR_ERR_ARG;
    tr_gpu *g = (tr_gpu *)calloc(1, sizeof *g);
    if (!g) return TR_ERR_NOMEM;
    g->mo = mo;
    kn_cuda_clear_error();
    g->dt = dtype_of(p);
    g->T = T;
    g->micro_tokens = B * T;
    tr_loss_scaler_init(&g->scaler, g->micro_tokens);
    /* the plan's device lines, unless the exact carve is larger (then the
     * plan under-counts: allocate what is needed, the caller reports it) */
    uint64_t need = tr_gpu_arena_need(c, B, T, p, recompute, opt);
    if (!need) {
        snprintf(err, errlen, "the GPU %s model cannot run this configuration at %d x %d tokens (recompute %d)",
                 mo->name, B, T, recompute);
        free(g);
        return TR_ERR_ARG;
    }
    static tr_plan_out exact;  /* large struct: not on the stack; only read by arena_create */
    static tr_plan_out inside; /* the plan without its lines outside the arena (NCCL's own buffers) */
    const tr_plan_out *ap = plan;
    if (plan) {
        inside = *plan;
        inside.n_items = 0;
        for (int i = 0; i < plan->n_items; i++)
            if (!plan->items[i].name || !strstr(plan->items[i].name, "outside the arena"))
                inside.items[inside.n_items++] = plan->items[i];
        ap = &inside;
    }
    if (!plan || tr_cuda_arena_bytes(ap) < need) {
        memset(&exact, 0, sizeof exact);
        exact.n_items = 2;
        exact.items[0].name = "model";
        exact.items[0].bytes = need - input_bytes(B, T);
        exact.items[0].where = "device";
        exact.items[1].name = "device input batch";
        exact.items[1].bytes = input_bytes(B, T);
        exact.items[1].where = "device";
        ap = &exact;
    }
    int rc = tr_cuda_arena_create(&g->arena, ap);
    if (rc != TR_OK) {
        snprintf(err, errlen, "cannot allocate the device arena (%.1f MiB): %s",
                 (double)tr_cuda_arena_bytes(ap) / 1048576.0, cuda_msg());
        free(g);
        return rc;
    }
    g->arena_ok = 1;
    if (arena_bytes) *arena_bytes = g->arena.size;
    if (stream_create(&g->s) != TR_OK) {
        snprintf(err, errlen, "cannot create a CUDA stream: %s", cuda_msg());
        g->s = NULL;
        tr_gpu_close(g);
        return TR_ERR_NODEVICE;
    }
    if ((rc = mo->create(&g->m, c, B, T, g->dt, &g->arena, (tr_cuda_stream)g->s, recompute, opt)) != TR_OK ||
        (rc = tr_cuda_input_create(&g->in, &g->arena, B, T, (tr_cuda_stream)g->s)) != TR_OK) {
        snprintf(err, errlen, "GPU setup failed: %s", g->arena.last_error[0] ? g->arena.last_error : cuda_msg());
        tr_gpu_close(g);
        return rc;
    }
    tr_cuda_arena_seal(&g->arena); /* nothing is allocated on the device after this */
    g->graph_on = tr_gpu_graph_wanted(kn_cuda_sync_debug(), 0) && mo->step_loss;
    if (host_params && (rc = mo->set_state(g->m, host_params, NULL)) != TR_OK) {
        snprintf(err, errlen, "cannot copy the parameters to the GPU: %s", cuda_msg());
        tr_gpu_close(g);
        return rc;
    }
    *out = g;
    return TR_OK;
}

extern "C" void tr_gpu_loader_hooks(tr_loader_opts *lo) {
    lo->alloc = tr_cuda_pinned_alloc;
    lo->free = tr_cuda_pinned_free;
    lo->alloc_user = NULL;
}

extern "C" int tr_gpu_zero_grad(tr_gpu *g) {
    kn_cuda_clear_error();
    g->host_loss = 0;
    g->host_targets = 0;
    return g->mo->zero_grad(g->m);
}

/* The dloss factor of every micro-batch: 1 (the summed loss) outside fp16;
 * in fp16 scale / (B x T), the scale on the per-token mean loss, so the
 * dlogits are bounded by TR_FP16_DLOGIT_MAX (gpu_model.h). */
static float dloss_factor(const tr_gpu *g) {
    return g->dt == KN_F16 ? tr_loss_scaler_dloss(&g->scaler, g->micro_tokens) : 1.0f;
}

/* A failed capture: leave capture mode, drop what it recorded, clear the
 * errors it raised; graphs stay off for the session (one warning). */
static void graph_give_up(tr_gpu *g, const char *why) {
    char msg[KN_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", cuda_msg()); /* the first error recorded, before it is cleared */
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(g->s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
        cudaGraph_t junk = NULL;
        if (cudaStreamEndCapture(g->s, &junk) == cudaSuccess && junk) cudaGraphDestroy(junk);
    }
    (void)cudaGetLastError();
    kn_cuda_clear_error();
    fprintf(stderr,
            "warning: MKS_CUDA_GRAPH: capturing the micro-step failed (%s: %s); running it eagerly from now on\n", why,
            msg);
    g->graph_on = 0;
}

/* The micro-step's forward + backward as a graph: replay the one captured
 * for this key, or capture it (a new entry; or, when only the dloss factor
 * changed, the entry of the same shape updated in place). TR_OK when the
 * graph was launched; 1 when graphs are off now (the caller runs it
 * eagerly); a negative tr_err when the launch itself failed. */
static int micro_graph(tr_gpu *g, int rows, int T, const tr_cuda_batch *dev, const int32_t *doc, float factor) {
    tr_gpu_graph_key k;
    memset(&k, 0, sizeof k);
    k.rows = rows;
    k.T = T;
    k.doc = doc != NULL;
    k.inputs = dev->inputs;
    memcpy(&k.factor_bits, &factor, sizeof factor);
    int exact = 0, i = tr_gpu_graph_find(g->gkey, g->n_graphs, &k, &exact);
    if (i < 0 || !exact) {
        cudaGraph_t gr = NULL;
        cudaError_t e = cudaStreamBeginCapture(g->s, cudaStreamCaptureModeThreadLocal);
        if (e != cudaSuccess) {
            graph_give_up(g, "cudaStreamBeginCapture");
            return 1;
        }
        /* loss pointers NULL: nothing is read back (a wait is illegal while capturing) */
        int rc = g->mo->fwd_bwd(g->m, rows, T, dev->inputs, dev->targets, dev->pos, doc, factor, NULL, NULL);
        if (rc != TR_OK) {
            graph_give_up(g, "the model's forward/backward under capture");
            return 1;
        }
        e = cudaStreamEndCapture(g->s, &gr);
        if (e != cudaSuccess || !gr) {
            if (gr) cudaGraphDestroy(gr);
            graph_give_up(g, "cudaStreamEndCapture");
            return 1;
        }
        int done = 0;
        if (i >= 0) { /* same kernels and pointers, another factor: update the executable graph */
#if CUDART_VERSION >= 12000
            cudaGraphExecUpdateResultInfo info;
            e = cudaGraphExecUpdate(g->gexec[i], gr, &info);
#else
            cudaGraphNode_t bad = NULL;
            cudaGraphExecUpdateResult res;
            e = cudaGraphExecUpdate(g->gexec[i], gr, &bad, &res);
#endif
            if (e == cudaSuccess) {
                done = 1;
                g->gcount[2]++;
            } else {
                (void)cudaGetLastError(); /* not updatable: instantiate it afresh below */
                cudaGraphExecDestroy(g->gexec[i]);
                g->gexec[i] = NULL;
            }
        } else if (g->n_graphs < TR_GPU_GRAPHS) {
            i = g->n_graphs++;
            g->gexec[i] = NULL;
        } else { /* full: replace the entries in turn */
            i = g->graph_evict;
            g->graph_evict = (g->graph_evict + 1) % TR_GPU_GRAPHS;
            cudaGraphExecDestroy(g->gexec[i]);
            g->gexec[i] = NULL;
        }
        if (!done) {
            e = cudaGraphInstantiateWithFlags(&g->gexec[i], gr, 0);
            if (e != cudaSuccess) {
                g->gexec[i] = NULL;
                cudaGraphDestroy(gr);
                /* the entry is unusable: keep the table dense */
                g->gkey[i] = g->gkey[g->n_graphs - 1];
                g->gexec[i] = g->gexec[g->n_graphs - 1];
                g->n_graphs--;
                g->graph_evict = 0;
                graph_give_up(g, "cudaGraphInstantiate");
                return 1;
            }
        }
        cudaGraphDestroy(gr);
        g->gkey[i] = k;
        g->gcount[0]++;
    } else {
        g->gcount[1]++;
    }
    KN_CU_CHECK(cudaGraphLaunch(g->gexec[i], g->s), return TR_ERR_NODEVICE);
    return TR_OK;
}

extern "C" int tr_gpu_micro(tr_gpu *g, tr_loader *ld, const tr_batch *b, int doc_mask, double *loss_sum,
                            uint64_t *n_targets, double *wait_s, char *err, size_t errlen) {
    tr_cuda_batch dev;
    double w = 0;
    kn_cuda_clear_error();
    int rc = tr_cuda_input_upload(g->in, b, &dev);
    if (rc == TR_OK) rc = tr_cuda_input_host_done(g->in, &w);
    int rows = b->rows, T = b->T;
    /* deferred: the step's loss stays on the device; the target count is
     * the host batch's, counted before the buffer goes back */
    int deferred = loss_sum == NULL;
    uint64_t host_k = deferred ? tr_gpu_count_targets(b->targets, (size_t)rows * (size_t)T) : 0;
    if (ld) tr_loader_release(ld); /* the copy is done: the host buffer goes back */
    if (wait_s) *wait_s += w;
    if (rc != TR_OK) {
        snprintf(err, errlen, "input upload failed: %s", cuda_msg());
        return rc;
    }
    const int32_t *doc = doc_mask ? dev.seg : NULL;
    float f = dloss_factor(g);
    if (deferred && !g->mo->step_loss) { /* the model cannot sum the step's loss: read this one */
        double l = 0;
        uint64_t k = 0;
        rc = g->mo->fwd_bwd(g->m, rows, T, dev.inputs, dev.targets, dev.pos, doc, f, &l, &k);
        g->host_loss += l;
        g->host_targets += k;
    } else if (deferred && g->graph_on && !g->hook_armed) {
        rc = micro_graph(g, rows, T, &dev, doc, f);
        if (rc == 1) rc = g->mo->fwd_bwd(g->m, rows, T, dev.inputs, dev.targets, dev.pos, doc, f, NULL, NULL);
    } else {
        rc = g->mo->fwd_bwd(g->m, rows, T, dev.inputs, dev.targets, dev.pos, doc, f, loss_sum,
                            deferred ? NULL : n_targets);
    }
    if (deferred && n_targets) *n_targets = host_k;
    int rc2 = tr_cuda_input_consumed(g->in);
    if (rc == TR_OK) rc = rc2;
    if (rc != TR_OK) snprintf(err, errlen, "GPU forward/backward failed: %s", cuda_msg());
    return rc;
}

extern "C" int tr_gpu_step_loss(tr_gpu *g, double *loss_sum, uint64_t *n_targets) {
    if (!g->mo->step_loss) {
        if (loss_sum) *loss_sum = g->host_loss;
        if (n_targets) *n_targets = g->host_targets;
        return TR_OK;
    }
    kn_cuda_clear_error();
    return g->mo->step_loss(g->m, loss_sum, n_targets);
}

extern "C" void tr_gpu_graph_counts(const tr_gpu *g, uint64_t out[3]) {
    out[0] = g->gcount[0];
    out[1] = g->gcount[1];
    out[2] = g->gcount[2];
}

extern "C" int tr_gpu_graph_active(const tr_gpu *g) { return g->graph_on; }

extern "C" int tr_gpu_eval(tr_gpu *g, const tr_batch *b, int doc_mask, double *loss_sum, uint64_t *n_targets, char *err,
                           size_t errlen) {
    tr_cuda_batch dev;
    double w = 0;
    kn_cuda_clear_error();
    int rc = tr_cuda_input_upload(g->in, b, &dev);
    if (rc == TR_OK) rc = tr_cuda_input_host_done(g->in, &w);
    if (rc == TR_OK)
        rc = g->mo->fwd_bwd(g->m, b->rows, b->T, dev.inputs, dev.targets, dev.pos, doc_mask ? dev.seg : NULL, 0.0f,
                            loss_sum, n_targets);
    int rc2 = tr_cuda_input_consumed(g->in);
    if (rc == TR_OK) rc = rc2;
    if (rc != TR_OK) snprintf(err, errlen, "GPU validation forward failed: %s", cuda_msg());
    return rc;
}

extern "C" int tr_gpu_step(tr_gpu *g, const tr_optim_hparams *h, float grad_clip, uint64_t n_targets, float *gnorm,
                           int *skipped, float *scale, char *err, size_t errlen) {
    kn_cuda_clear_error();
    int fp16 = g->dt == KN_F16;
    int sk = 0;
    if (scale) *scale = fp16 ? g->scaler.scale : 1.0f;
    /* "scale by 1/targets, then clip": the factor is folded into the
     * optimizer's step; in fp16 it also undoes the dloss factor
     * (tr_loss_scaler_unscale) */
    float factor =
        fp16 ? tr_loss_scaler_unscale(&g->scaler, g->micro_tokens, n_targets) : (n_targets ? (float)n_targets : 1.0f);
    int rc = g->mo->step_scaled(g->m, h, (int)(g->opt_step + 1), grad_clip, factor, gnorm, &sk);
    if (rc != TR_OK) {
        snprintf(err, errlen, "GPU optimiser step failed: %s", cuda_msg());
        return rc;
    }
    if (g->dt == KN_F16) tr_loss_scaler_update(&g->scaler, sk);
    if (!sk) g->opt_step++;
    if (skipped) *skipped = sk;
    return TR_OK;
}

extern "C" int tr_gpu_grads(tr_gpu *g, float **dgrads, size_t *n) {
    kn_cuda_clear_error();
    KN_CU_CHECK(cudaStreamSynchronize(g->s), return TR_ERR_INTERNAL);
    *dgrads = g->mo->grads(g->m, n);
    return TR_OK;
}

extern "C" float *tr_gpu_grads_nowait(tr_gpu *g, size_t *n) { return g->mo->grads(g->m, n); }
extern "C" void *tr_gpu_stream(tr_gpu *g) { return (void *)g->s; }
extern "C" int tr_gpu_has_grad_hook(const tr_gpu *g) { return g->mo->set_grad_hook != NULL; }
extern "C" void tr_gpu_set_grad_hook(tr_gpu *g, tr_model_grad_hook fn, void *ctx) {
    g->hook_armed = fn != NULL;
    if (g->mo->set_grad_hook) g->mo->set_grad_hook(g->m, fn, ctx);
}

extern "C" int tr_gpu_get_state(tr_gpu *g, float *params, void *const state[], uint64_t extra[TR_GPU_EXTRA]) {
    int rc = g->mo->get(g->m, params, NULL, state);
    if (extra) {
        uint32_t bits;
        memcpy(&bits, &g->scaler.scale, 4);
        extra[0] = bits;
        extra[1] = (uint64_t)g->scaler.clean_steps;
        extra[2] = g->scaler.skipped_total;
        extra[3] = g->opt_step;
    }
    return rc;
}

extern "C" int tr_gpu_set_state(tr_gpu *g, const float *params, void *const state[], const uint64_t extra[TR_GPU_EXTRA],
                                uint64_t opt_step) {
    tr_loss_scaler_init(&g->scaler, g->micro_tokens);
    g->opt_step = opt_step;
    if (extra) {
        uint32_t bits = (uint32_t)extra[0];
        float s;
        memcpy(&s, &bits, 4);
        if (s > 0.0f) g->scaler.scale = s;
        g->scaler.clean_steps = (int)extra[1];
        g->scaler.skipped_total = extra[2];
        g->opt_step = extra[3];
        tr_loss_scaler_clamp(&g->scaler);
    }
    return g->mo->set_state(g->m, params, state);
}
