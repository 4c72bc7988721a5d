/* gpu_arena.cu - the device memory of a GPU run: the one device arena,
 * pinned loader buffers, the input copy stream with its events (see
 * gpu_arena.h). */
#include "mks_common.h"
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "gpu_arena.h"
#include "gpu_step.h"
}
#include "kn_cuda_check.h" /* KN_CU_CHECK: call text, file:line, error name and text */

/* every CUDA call below: a failure is recorded (kernels/kn_cuda_err.h) and
 * returns `code` */
#define CUR(call, code) KN_CU_CHECK(call, return (code))

extern "C" int tr_cuda_device_info(char *name, size_t name_len, uint64_t *total_bytes, uint64_t *free_bytes) {
    int n = 0;
    CUR(cudaGetDeviceCount(&n), TR_ERR_NODEVICE);
    if (n == 0) {
        kn_cuda_set_error("cudaGetDeviceCount: 0 devices");
        return TR_ERR_NODEVICE;
    }
    cudaDeviceProp p;
    CUR(cudaGetDeviceProperties(&p, 0), TR_ERR_NODEVICE);
    if (name && name_len)
        snprintf(name, name_len, "%s (sm_%d%d, %d SMs)", p.name, p.major, p.minor, p.multiProcessorCount);
    size_t fr = 0, tot = 0;
    CUR(cudaMemGetInfo(&fr, &tot), TR_ERR_NODEVICE);
    if (total_bytes) *total_bytes = tot;
    if (free_bytes) *free_bytes = fr;
    return TR_OK;
}

extern "C" int tr_cuda_mem_used(uint64_t *used) {
    size_t fr = 0, tot = 0;
    if (!used) return TR_ERR_ARG;
    CUR(cudaMemGetInfo(&fr, &tot), TR_ERR_NODEVICE);
    *used = (uint64_t)(tot - fr);
    return TR_OK;
}

/* ---- arena ------------------------------------------------------------------------------ */
extern "C" size_t tr_cuda_arena_bytes(const tr_plan_out *plan) {
    if (!plan) return 0;
    size_t sum = 0;
    for (int i = 0; i < plan->n_items; i++) {
        const tr_plan_item *it = &plan->items[i];
        if (!it->where || strcmp(it->where, "device")) continue;
        if (it->name && strstr(it->name, "CUDA context")) continue; /* outside the arena */
        sum += (size_t)it->bytes + TR_CUDA_ALIGN;
    }
    return sum;
}

extern "C" int tr_cuda_arena_create(tr_cuda_arena *a, const tr_plan_out *plan) {
    if (!a || !plan) return TR_ERR_ARG;
    memset(a, 0, sizeof *a);
    size_t bytes = tr_cuda_arena_bytes(plan);
    if (bytes == 0) return TR_ERR_ARG;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        snprintf(a->last_error, sizeof a->last_error, "no CUDA device");
        return TR_ERR_NODEVICE;
    }
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        snprintf(a->last_error, sizeof a->last_error, "cudaMalloc(%zu) for the arena: %s (%s)", bytes,
                 cudaGetErrorName(e), cudaGetErrorString(e));
        kn_cuda_record("CUDA", "cudaMalloc(arena)", __FILE__, __LINE__, (int)e, cudaGetErrorName(e),
                       cudaGetErrorString(e));
        cudaGetLastError(); /* clear */
        return e == cudaErrorMemoryAllocation ? TR_ERR_NOMEM : TR_ERR_NODEVICE;
    }
    a->base = (char *)p;
    a->size = bytes;
    return TR_OK;
}

extern "C" void *tr_cuda_arena_take(tr_cuda_arena *a, size_t bytes, const char *what) {
    if (!a || !a->base) return nullptr;
    if (a->sealed) {
        snprintf(a->last_error, sizeof a->last_error, "arena sealed: '%s' (%zu bytes) asked for after step 1",
                 what ? what : "?", bytes);
        return nullptr;
    }
    size_t off = (a->used + TR_CUDA_ALIGN - 1) & ~(size_t)(TR_CUDA_ALIGN - 1);
    if (off > a->size || bytes > a->size - off) {
        snprintf(a->last_error, sizeof a->last_error,
                 "arena exhausted: '%s' needs %zu bytes, %zu of %zu left (the plan is short)", what ? what : "?", bytes,
                 off > a->size ? (size_t)0 : a->size - off, a->size);
        return nullptr;
    }
    a->used = off + bytes;
    a->n_takes++;
    return a->base + off;
}

extern "C" void tr_cuda_arena_seal(tr_cuda_arena *a) {
    if (a) a->sealed = 1;
}

extern "C" void tr_cuda_arena_destroy(tr_cuda_arena *a) {
    if (!a) return;
    if (a->base) cudaFree(a->base);
    a->base = nullptr;
    a->size = a->used = 0;
}

/* ---- pinned host buffers ---------------------------------------------------------------- */
extern "C" void *tr_cuda_pinned_alloc(size_t bytes, void *user) {
    (void)user;
    void *p = nullptr;
    CUR(cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault), nullptr);
    return p;
}

extern "C" void tr_cuda_pinned_free(void *p, void *user) {
    (void)user;
    if (p) cudaFreeHost(p);
}

/* ---- input upload ------------------------------------------------------------------------- */
/* TR_CUDA_INPUT_SLOTS device batches used in turn: batch k+1 is copied into
 * the other slot while the compute stream still reads batch k, so neither
 * the copy nor the host's wait for it (before the pinned buffer goes back to
 * the loader) waits for batch k's forward + backward. */
struct tr_cuda_input {
    cudaStream_t copy, compute;
    cudaEvent_t copied[TR_CUDA_INPUT_SLOTS];   /* recorded on copy after the slot's H2D copies */
    cudaEvent_t consumed[TR_CUDA_INPUT_SLOTS]; /* recorded on compute after the slot's last use */
    int consumed_recorded[TR_CUDA_INPUT_SLOTS];
    int n_events; /* events created (destroy: only those) */
    int nslots;   /* slots in use: TR_CUDA_INPUT_SLOTS, 1 with MKS_GPU_STEP_SYNC=1 (carved either way) */
    int next;     /* slot of the next upload */
    int last;     /* slot of the last upload (-1: none yet) */
    int max_rows, T;
    tr_cuda_batch dev[TR_CUDA_INPUT_SLOTS];
};

extern "C" size_t tr_cuda_input_arena_bytes(int max_rows, int T) {
    if (max_rows <= 0 || T <= 0) return 0;
    return (size_t)TR_CUDA_INPUT_SLOTS * ((size_t)max_rows * (size_t)T * 16 + 4 * TR_CUDA_ALIGN);
}

static void input_free(tr_cuda_input *in) {
    for (int k = 0; k < in->n_events; k++) {
        cudaEventDestroy(in->copied[k]);
        cudaEventDestroy(in->consumed[k]);
    }
    if (in->copy) cudaStreamDestroy(in->copy);
    free(in);
}

extern "C" int tr_cuda_input_create(tr_cuda_input **out, tr_cuda_arena *a, int max_rows, int T,
                                    tr_cuda_stream compute) {
    if (!out || !a || max_rows <= 0 || T <= 0) return TR_ERR_ARG;
    tr_cuda_input *in = (tr_cuda_input *)calloc(1, sizeof *in);
    if (!in) return TR_ERR_NOMEM;
    size_t n = (size_t)max_rows * T;
    for (int k = 0; k < TR_CUDA_INPUT_SLOTS; k++) {
        tr_cuda_batch *d = &in->dev[k];
        d->inputs = (uint32_t *)tr_cuda_arena_take(a, n * 4, "device input batch: inputs");
        d->targets = (int32_t *)tr_cuda_arena_take(a, n * 4, "device input batch: targets");
        d->pos = (int32_t *)tr_cuda_arena_take(a, n * 4, "device input batch: pos");
        d->seg = (int32_t *)tr_cuda_arena_take(a, n * 4, "device input batch: seg");
        d->slot = k;
        if (!d->inputs || !d->targets || !d->pos || !d->seg) {
            free(in);
            return TR_ERR_NOMEM;
        }
    }
    KN_CU_CHECK(cudaStreamCreateWithFlags(&in->copy, cudaStreamNonBlocking), free(in); return TR_ERR_NODEVICE);
    for (int k = 0; k < TR_CUDA_INPUT_SLOTS; k++) {
        KN_CU_CHECK(cudaEventCreateWithFlags(&in->copied[k], cudaEventDisableTiming), input_free(in);
                    return TR_ERR_NODEVICE);
        KN_CU_CHECK(cudaEventCreateWithFlags(&in->consumed[k], cudaEventDisableTiming), cudaEventDestroy(in->copied[k]);
                    input_free(in); return TR_ERR_NODEVICE);
        in->n_events = k + 1;
    }
    in->compute = (cudaStream_t)compute;
    in->max_rows = max_rows;
    in->T = T;
    in->last = -1;
    in->nslots = tr_gpu_step_sync_wanted() ? 1 : TR_CUDA_INPUT_SLOTS;
    *out = in;
    return TR_OK;
}

extern "C" int tr_cuda_input_upload(tr_cuda_input *in, const tr_batch *b, tr_cuda_batch *dev) {
    if (!in || !b || b->rows <= 0 || b->rows > in->max_rows || b->T != in->T) return TR_ERR_ARG;
    size_t bytes = (size_t)b->rows * b->T * 4;
    int k = in->next;
    const tr_cuda_batch *d = &in->dev[k];
    /* the slot is reused: wait until compute released the batch it held
     * (two uploads ago; the last one's is in the other slot) */
    if (in->consumed_recorded[k]) CUR(cudaStreamWaitEvent(in->copy, in->consumed[k], 0), TR_ERR_NODEVICE);
    CUR(cudaMemcpyAsync(d->inputs, b->inputs, bytes, cudaMemcpyHostToDevice, in->copy), TR_ERR_NODEVICE);
    CUR(cudaMemcpyAsync(d->targets, b->targets, bytes, cudaMemcpyHostToDevice, in->copy), TR_ERR_NODEVICE);
    CUR(cudaMemcpyAsync(d->pos, b->pos, bytes, cudaMemcpyHostToDevice, in->copy), TR_ERR_NODEVICE);
    CUR(cudaMemcpyAsync(d->seg, b->seg, bytes, cudaMemcpyHostToDevice, in->copy), TR_ERR_NODEVICE);
    CUR(cudaEventRecord(in->copied[k], in->copy), TR_ERR_NODEVICE);
    CUR(cudaStreamWaitEvent(in->compute, in->copied[k], 0), TR_ERR_NODEVICE);
    in->consumed_recorded[k] = 0;
    in->last = k;
    in->next = (k + 1) % in->nslots;
    if (dev) {
        *dev = *d;
        dev->rows = b->rows;
        dev->T = b->T;
    }
    return TR_OK;
}

extern "C" int tr_cuda_input_host_done(tr_cuda_input *in, double *wait_s) {
    if (!in || in->last < 0) return TR_ERR_ARG;
    double t0 = mc_now_s();
    cudaError_t e = cudaEventSynchronize(in->copied[in->last]);
    if (wait_s) *wait_s = mc_now_s() - t0;
    if (e != cudaSuccess) {
        kn_cuda_record("CUDA", "cudaEventSynchronize(in->copied)", __FILE__, __LINE__, (int)e, cudaGetErrorName(e),
                       cudaGetErrorString(e));
        cudaGetLastError();
        return TR_ERR_NODEVICE;
    }
    return TR_OK;
}

extern "C" int tr_cuda_input_consumed(tr_cuda_input *in) {
    if (!in || in->last < 0) return TR_ERR_ARG;
    CUR(cudaEventRecord(in->consumed[in->last], in->compute), TR_ERR_NODEVICE);
    in->consumed_recorded[in->last] = 1;
    return TR_OK;
}

extern "C" void tr_cuda_input_destroy(tr_cuda_input *in) {
    if (!in) return;
    cudaStreamSynchronize(in->copy);
    input_free(in);
}
