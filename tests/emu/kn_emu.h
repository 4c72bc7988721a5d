/* kn_emu.h - run CUDA kernel source on the CPU, one thread block at a time,
 * so that the tensor-core kernels' index and fragment logic can be checked
 * against the C references where no GPU is lent (issue 31, item 5).
 *
 * Force-included (g++ -include) before a kernel file compiled as host C++
 * with -DKN_EMU, which drops the kernel files' inline PTX wrappers and host
 * launchers (each marked `#ifndef KN_EMU`) for the definitions below:
 *   - every thread of a block is a fiber (ucontext) on one OS thread, run by
 *     a round-robin scheduler that switches only at barriers: __syncthreads
 *     waits for the block, the warp-collective operations for the warp.
 *     __shared__ is `static`: blocks run one after another, so one copy is
 *     the block's shared memory;
 *   - mma.sync.m16n8k16 (bf16 x bf16 + fp32), ldmatrix .x4 with and without
 *     .trans and __shfl_xor_sync exchange values through a per-warp staging
 *     area and compute what each lane receives from the fragment layouts of
 *     the PTX ISA (mma.m16n8k16 A/B/C fragments; ldmatrix: lane i holds row
 *     i/4, columns 2(i%4) and 2(i%4)+1 of each 8x8 matrix, transposed with
 *     .trans).  A wrong layout assumption in a kernel therefore gives wrong
 *     numbers here, as on the GPU;
 *   - cp.async is a synchronous 16-byte copy (zero fill when invalid), so a
 *     kernel that reads a buffer after requesting its refill reads the new
 *     data here (caught), while a missing wait is not (the copy is never late).
 * What it does not model: timing, memory ordering between warps beyond the
 * barriers, and the exact accumulation order inside one mma (it sums in fp32
 * in k order).  Not a general emulator: what the attention kernels use. */
#ifndef KN_EMU_H
#define KN_EMU_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <functional>
#include <vector>

#undef __shared__
#define __shared__ static
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

using std::max;
using std::min;

struct kn_emu_fiber {
    ucontext_t ctx;
    uint3 tid;
    int lane, warp, done;
    std::vector<char> stack;
};

struct kn_emu_barrier {
    int size, count;
    unsigned gen;
};

struct kn_emu_warp {
    kn_emu_barrier bar;
    /* staging: what each lane brings to a collective operation */
    uint32_t a[32][4], b[32][2];
    float c[32][4];
    const void *addr[32];
};

struct kn_emu_block {
    dim3 grid, block, bid;
    std::vector<kn_emu_fiber> f;
    std::vector<kn_emu_warp> w;
    kn_emu_barrier bar;
    ucontext_t sched;
    kn_emu_fiber *cur;
    const std::function<void()> *body;
    unsigned long stalls;
};

inline kn_emu_block *&kn_emu_cur_block(void) {
    static kn_emu_block *b = nullptr;
    return b;
}

#define threadIdx (kn_emu_cur_block()->cur->tid)
#define blockIdx (kn_emu_cur_block()->bid)
#define blockDim (kn_emu_cur_block()->block)
#define gridDim (kn_emu_cur_block()->grid)

/* back to the scheduler; it resumes this fiber on its next round */
inline void kn_emu_yield(void) {
    kn_emu_block *b = kn_emu_cur_block();
    kn_emu_fiber *me = b->cur;
    swapcontext(&me->ctx, &b->sched);
}

/* every participant arrives, then all go on */
inline void kn_emu_wait(kn_emu_barrier *bar) {
    unsigned gen = bar->gen;
    if (++bar->count == bar->size) {
        bar->count = 0;
        bar->gen++;
        return;
    }
    while (bar->gen == gen) kn_emu_yield();
}

inline void __syncthreads(void) { kn_emu_wait(&kn_emu_cur_block()->bar); }

inline kn_emu_warp &kn_emu_my_warp(void) {
    kn_emu_block *b = kn_emu_cur_block();
    return b->w[(size_t)b->cur->warp];
}
inline int kn_emu_lane(void) { return kn_emu_cur_block()->cur->lane; }

inline float __shfl_xor_sync(unsigned, float v, int m) {
    kn_emu_warp &w = kn_emu_my_warp();
    int l = kn_emu_lane();
    w.c[l][0] = v;
    kn_emu_wait(&w.bar);
    float r = w.c[l ^ m][0];
    kn_emu_wait(&w.bar);
    return r;
}

static inline float kn_emu_bf16_lo(uint32_t u) {
    __nv_bfloat16_raw r;
    r.x = (unsigned short)(u & 0xffffu);
    return __bfloat162float(__nv_bfloat16(r));
}
static inline float kn_emu_bf16_hi(uint32_t u) {
    __nv_bfloat16_raw r;
    r.x = (unsigned short)(u >> 16);
    return __bfloat162float(__nv_bfloat16(r));
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, D = A B + C in place.
 * Lane (g = lane / 4, t = lane % 4): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t..],
 * a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]; b0 = B[2t, 2t+1][g], b1 =
 * B[2t+8, 2t+9][g]; c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]. */
inline void mma_bf16(float *d, const uint32_t *a, const uint32_t *b) {
    kn_emu_warp &w = kn_emu_my_warp();
    int l = kn_emu_lane();
    memcpy(w.a[l], a, sizeof w.a[l]);
    memcpy(w.b[l], b, sizeof w.b[l]);
    kn_emu_wait(&w.bar);
    float A[16][16], B[16][8];
    for (int L = 0; L < 32; L++) {
        int g = L >> 2, t = L & 3;
        for (int h = 0; h < 2; h++) {
            A[g][2 * t + h] = h ? kn_emu_bf16_hi(w.a[L][0]) : kn_emu_bf16_lo(w.a[L][0]);
            A[g + 8][2 * t + h] = h ? kn_emu_bf16_hi(w.a[L][1]) : kn_emu_bf16_lo(w.a[L][1]);
            A[g][2 * t + 8 + h] = h ? kn_emu_bf16_hi(w.a[L][2]) : kn_emu_bf16_lo(w.a[L][2]);
            A[g + 8][2 * t + 8 + h] = h ? kn_emu_bf16_hi(w.a[L][3]) : kn_emu_bf16_lo(w.a[L][3]);
            B[2 * t + h][g] = h ? kn_emu_bf16_hi(w.b[L][0]) : kn_emu_bf16_lo(w.b[L][0]);
            B[2 * t + 8 + h][g] = h ? kn_emu_bf16_hi(w.b[L][1]) : kn_emu_bf16_lo(w.b[L][1]);
        }
    }
    kn_emu_wait(&w.bar); /* every lane has read the staging area */
    int g = l >> 2, t = l & 3;
    for (int e = 0; e < 4; e++) {
        int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float acc = d[e];
        for (int k = 0; k < 16; k++) acc += A[row][k] * B[k][col];
        d[e] = acc;
    }
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8j .. 8j+7 give the
 * row addresses of matrix j; lane i receives, of each matrix j, row i/4
 * columns 2(i%4), 2(i%4)+1 (.trans: rows 2(i%4), 2(i%4)+1 of column i/4). */
inline void kn_emu_ldsm(uint32_t r[4], const __nv_bfloat16 *row, bool trans) {
    kn_emu_warp &w = kn_emu_my_warp();
    int l = kn_emu_lane();
    w.addr[l] = row;
    kn_emu_wait(&w.bar);
    for (int j = 0; j < 4; j++) {
        const __nv_bfloat16 *lo, *hi;
        if (!trans) {
            const __nv_bfloat16 *rp = (const __nv_bfloat16 *)w.addr[8 * j + (l >> 2)];
            lo = rp + 2 * (l & 3);
            hi = lo + 1;
        } else {
            lo = (const __nv_bfloat16 *)w.addr[8 * j + 2 * (l & 3)] + (l >> 2);
            hi = (const __nv_bfloat16 *)w.addr[8 * j + 2 * (l & 3) + 1] + (l >> 2);
        }
        __nv_bfloat16_raw a = *lo, b = *hi;
        r[j] = (uint32_t)a.x | ((uint32_t)b.x << 16);
    }
    kn_emu_wait(&w.bar);
}
inline void ldsm_x4(uint32_t r[4], const __nv_bfloat16 *row) { kn_emu_ldsm(r, row, false); }
inline void ldsm_x4_trans(uint32_t r[4], const __nv_bfloat16 *row) { kn_emu_ldsm(r, row, true); }

inline void cp_async16(void *smem, const void *gmem, bool valid) {
    if (valid) memcpy(smem, gmem, 16);
    else memset(smem, 0, 16);
}
inline void cp_async_commit(void) {}
inline void cp_async_wait1(void) {}
inline float ex2(float x) { return exp2f(x); }
inline float __expf(float x) { return expf(x); } /* the device intrinsic: within 2 ulp there */

static void kn_emu_entry(void) {
    kn_emu_block *b = kn_emu_cur_block();
    (*b->body)();
    b->cur->done = 1;
    swapcontext(&b->cur->ctx, &b->sched);
}

/* One block to the end: fibers made afresh, then rounds until every fiber is
 * done.  A round in which no barrier opened and no fiber finished, with
 * fibers left, would repeat forever: a deadlock (-1).  Its own function, so
 * that no caller's locals live across swapcontext. */
static __attribute__((noinline)) int kn_emu_run_block(kn_emu_block *blk) {
    unsigned threads = blk->block.x;
    blk->bar = {(int)threads, 0, 0};
    for (auto &w : blk->w) w.bar = {32, 0, 0};
    for (unsigned i = 0; i < threads; i++) {
        kn_emu_fiber &f = blk->f[i];
        f.tid = make_uint3(i, 0, 0);
        f.lane = (int)(i & 31);
        f.warp = (int)(i >> 5);
        f.done = 0;
        f.stack.resize(256 * 1024);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, kn_emu_entry, 0);
    }
    for (;;) {
        unsigned gens = blk->bar.gen;
        for (auto &w : blk->w) gens += w.bar.gen;
        int left = 0, finished = 0;
        for (auto &f : blk->f) {
            if (f.done) continue;
            blk->cur = &f;
            swapcontext(&blk->sched, &f.ctx);
            if (f.done) finished++;
            else left++;
        }
        if (!left) return 0;
        unsigned now = blk->bar.gen;
        for (auto &w : blk->w) now += w.bar.gen;
        if (now == gens && !finished) {
            fprintf(stderr, "kn_emu: deadlock in block (%u,%u,%u): %d threads wait at a barrier\n", blk->bid.x,
                    blk->bid.y, blk->bid.z, left);
            return -1;
        }
    }
}

/* Run `body` (a kernel call) for every block of `grid`, blockDim = block
 * (x only; a multiple of 32).  Returns 0, or -1 on a deadlock (a barrier some
 * threads never reach). */
inline int kn_emu_launch(dim3 grid, unsigned threads, const std::function<void()> &body) {
    kn_emu_block blk;
    blk.grid = grid;
    blk.block = dim3(threads, 1, 1);
    blk.body = &body;
    blk.f.resize(threads);
    blk.w.resize((threads + 31) / 32);
    kn_emu_cur_block() = &blk;
    int rc = 0;
    for (unsigned z = 0; z < grid.z && !rc; z++)
        for (unsigned y = 0; y < grid.y && !rc; y++)
            for (unsigned x = 0; x < grid.x && !rc; x++) {
                blk.bid = dim3(x, y, z);
                rc = kn_emu_run_block(&blk);
            }
    kn_emu_cur_block() = nullptr;
    return rc;
}

#endif
