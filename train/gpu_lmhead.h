/* gpu_lmhead.h - the row chunks of the GPU models' lm head and softmax
 * cross-entropy (issue 31 item 3): plain C, in tr_plan, so the memory
 * planner (train/plan.c, train/gpu_llama_plan.c) and both GPU models'
 * carves (train/gpu_model.cu, train/gpu_llama.cu) take the logits buffer's
 * rows from one function; the device sequence is train/gpu_lmhead.cuh.
 *
 * Whole (today's path, the default): the logits of all N = B x T rows of a
 * micro-batch in one N x Vp buffer, the softmax-xent writing dlogits over
 * them in place, the head's backward at the start of the backward pass.
 * Chunked (MKS_LMHEAD_CHUNK=R): rows [r0, r0 + R) at a time through one
 * R x Vp buffer, each chunk's backward (dW += dlogits^T x, dx = dlogits W)
 * right after its softmax-xent, so the buffer is free for the next chunk.
 *
 * MKS_LMHEAD_CHUNK: unset, empty or "0": whole; a decimal row count >= 1:
 * chunks of that many rows; "auto": tr_lmhead_chunk_auto(C). Anything else
 * (not a number, negative, above TR_LMHEAD_CHUNK_MAX): whole, as the
 * project's other switches fall back to their default. */
#ifndef TR_GPU_LMHEAD_H
#define TR_GPU_LMHEAD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TR_LMHEAD_AUTO (-1L)
#define TR_LMHEAD_CHUNK_MAX (1L << 30)

/* The request a string spells (the rules above); 0 for NULL. */
long tr_lmhead_chunk_parse(const char *s);
/* The environment's request (MKS_LMHEAD_CHUNK), read at every call: a model
 * reads it once, when its shape is fixed (arena_bytes and create). */
long tr_lmhead_chunk_request(void);
/* The rows "auto" picks for a model of width C.
 *
 * Why not the L2-sized chunk (R x Vp x 2 bytes <= ~32 MiB, R <= 333 rows at
 * Vp 50304): every chunk, whatever its rows, re-reads the head weight twice
 * (its forward and its dx = dlogits W: 2 x Vp x C x 2 bytes, 16-bit) and
 * reads and writes the fp32 dW once more (beta = 1: 8 x Vp x C bytes), so
 * about 12 Vp C bytes of HBM traffic a chunk; a chunk's own logits move
 * about 10 R Vp bytes (the forward GEMM's write, the softmax-xent's read and
 * in-place write, the two backward GEMMs' reads), which L2 residence could
 * save at best.  That is less than the 12 Vp C it costs for every R below
 * 1.2 C (922 rows at d12): d12's 256-row chunks would add 63 x 464 MB =
 * 29 GB a step, about 6 ms at 4.8 TB/s.  So "auto" sizes the chunk for
 * memory and bounds the extra traffic instead: R >= 5 C keeps each chunk's
 * 12 Vp C at most a quarter of the chunk's own 10 R Vp (24%), rounded up to
 * a multiple of 128 (cuBLASLt's tile rows), at least 256.  d12 (C 768):
 * 3840 rows, 5 chunks at B16 T1024 (the last 1024 rows), 368 MiB of logits
 * instead of 1,572 MiB, 4 x 464 MB = 1.9 GB more traffic (~0.4 ms at
 * 4.8 TB/s) - a projection from this arithmetic, not a measurement. */
static inline size_t tr_lmhead_chunk_auto(size_t C) {
    size_t r = 5 * C;
    r = (r + 127) / 128 * 128;
    return r < 256 ? 256 : r;
}

/* The rows of the logits buffer for a request and a capacity of ncap rows
 * (Bmax x Tmax) at width C: ncap when whole or when the chunk is no smaller
 * than ncap, else the chunk; 0 for ncap 0. */
static inline size_t tr_lmhead_chunk_rows(long req, size_t ncap, size_t C) {
    size_t r = req == TR_LMHEAD_AUTO ? tr_lmhead_chunk_auto(C) : req > 0 ? (size_t)req : 0;
    return r == 0 || r >= ncap ? ncap : r;
}

/* ceil(N / R): the number of chunks (0 for N 0 or R 0). */
static inline size_t tr_lmhead_chunk_count(size_t N, size_t R) { return R ? N / R + (N % R != 0) : 0; }

/* Chunk i of N rows in chunks of R: *r0, *r1 its rows [r0, r1); returns 0
 * past the last chunk (or for R 0), 1 otherwise. Every row of [0, N) lies
 * in exactly one chunk, in order; only the last may be short. */
static inline int tr_lmhead_chunk_at(size_t N, size_t R, size_t i, size_t *r0, size_t *r1) {
    if (!R || i >= tr_lmhead_chunk_count(N, R)) return 0;
    size_t a = i * R, b = a + R;
    *r0 = a;
    *r1 = b < N ? b : N;
    return 1;
}

#ifdef __cplusplus
}
#endif
#endif /* TR_GPU_LMHEAD_H */
