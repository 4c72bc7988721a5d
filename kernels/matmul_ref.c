/* matmul_ref.c - linear layer forward/backward on a packed, cache-blocked,
 * register-tiled SGEMM.
 *
 * gemm computes C (M,N) (+)= A (M,K) * B (K,N) where A and B are strided
 * views (any transpose is a stride swap).  The output is split into MB x NB
 * tasks handed to threads; for each task the K dimension is walked in KC
 * blocks: the B block is packed once into NR-column micro-panels, then each
 * MC-row A block into MR-row micro-panels (zero padded), and a 4x16
 * micro-kernel keeps the tile in registers.  Each output element is computed by one thread in
 * a fixed order, so results do not depend on the thread count.
 */
#include "kn.h"
#include "kn_internal.h"

#include <stdlib.h>
#include <string.h>

#define MR 4
#define NR 16
#define MC 64  /* rows of a packed A block, multiple of MR */
#define MB 256 /* rows of a thread task, multiple of MC */
#define NB 256 /* columns of a thread task / packed B block, multiple of NR */
#define KC 256

typedef kn_v8f v8f;

typedef struct {
    const float *p;
    ptrdiff_t rs, cs; /* element (r, c) = p[r * rs + c * cs] */
} view;

static void pack_a(float *dst, view A, int i0, int mc, int k0, int kc) {
    for (int ip = 0; ip < mc; ip += MR) {
        float *d = dst + (size_t)ip * kc;
        int rows = mc - ip < MR ? mc - ip : MR;
        if (A.cs == 1) {
            for (int r = 0; r < MR; r++) {
                if (r < rows) {
                    const float *s = A.p + (ptrdiff_t)(i0 + ip + r) * A.rs + k0;
                    for (int k = 0; k < kc; k++) d[k * MR + r] = s[k];
                } else {
                    for (int k = 0; k < kc; k++) d[k * MR + r] = 0.0f;
                }
            }
        } else {
            for (int k = 0; k < kc; k++) {
                const float *s = A.p + (ptrdiff_t)(k0 + k) * A.cs + (ptrdiff_t)(i0 + ip) * A.rs;
                for (int r = 0; r < MR; r++) d[k * MR + r] = r < rows ? s[r * A.rs] : 0.0f;
            }
        }
    }
}

static void pack_b(float *dst, view B, int k0, int kc, int j0, int nc) {
    for (int jp = 0; jp < nc; jp += NR) {
        float *d = dst + (size_t)jp * kc;
        int cols = nc - jp < NR ? nc - jp : NR;
        if (B.cs == 1) {
            for (int k = 0; k < kc; k++) {
                const float *s = B.p + (ptrdiff_t)(k0 + k) * B.rs + j0 + jp;
                for (int c = 0; c < NR; c++) d[k * NR + c] = c < cols ? s[c] : 0.0f;
            }
        } else {
            for (int c = 0; c < NR; c++) {
                if (c < cols) {
                    const float *s = B.p + (ptrdiff_t)(j0 + jp + c) * B.cs + (ptrdiff_t)k0 * B.rs;
                    for (int k = 0; k < kc; k++) d[k * NR + c] = s[(ptrdiff_t)k * B.rs];
                } else {
                    for (int k = 0; k < kc; k++) d[k * NR + c] = 0.0f;
                }
            }
        }
    }
}

/* C[MR x NR] (first ? = : +=) Ap(MR x kc) * Bp(kc x NR); only mr x nr valid. */
KN_CLONES
static void micro_kernel(int kc, const float *ap, const float *bp, float *c, ptrdiff_t ldc, int mr, int nr, int first) {
    v8f acc[MR][2];
    memset(acc, 0, sizeof acc);
    for (int k = 0; k < kc; k++) {
        v8f b0, b1;
        memcpy(&b0, bp + k * NR, sizeof b0);
        memcpy(&b1, bp + k * NR + 8, sizeof b1);
        const float *a = ap + k * MR;
        for (int r = 0; r < MR; r++) {
            acc[r][0] += a[r] * b0;
            acc[r][1] += a[r] * b1;
        }
    }
    float tmp[MR][NR];
    memcpy(tmp, acc, sizeof tmp);
    for (int r = 0; r < mr; r++) {
        float *cr = c + r * ldc;
        if (first)
            for (int j = 0; j < nr; j++) cr[j] = tmp[r][j];
        else
            for (int j = 0; j < nr; j++) cr[j] += tmp[r][j];
    }
}

static int gemm(int M, int N, int K, view A, view B, float *C, ptrdiff_t ldc, int accumulate) {
    /* task = MB x NB output block; inside it each KC x NB B panel is packed
     * once and reused by MB/MC packed A panels (packing ~2/256 of the work) */
    int mt = (M + MB - 1) / MB, nt = (N + NB - 1) / NB;
    long ntiles = (long)mt * nt;
    int err = 0;
    KN_OMP(parallel) {
        float *abuf = aligned_alloc(64, sizeof(float) * MC * KC);
        float *bbuf = aligned_alloc(64, sizeof(float) * KC * NB);
        if (!abuf || !bbuf) {
            KN_OMP(atomic write)
            err = 1;
        }
        KN_OMP(for schedule(dynamic, 1))
        for (long tile = 0; tile < ntiles; tile++) {
            if (!abuf || !bbuf) continue;
            int i0 = (int)(tile / nt) * MB, j0 = (int)(tile % nt) * NB;
            int mb = M - i0 < MB ? M - i0 : MB;
            int nb = N - j0 < NB ? N - j0 : NB;
            for (int k0 = 0; k0 < K; k0 += KC) {
                int kc = K - k0 < KC ? K - k0 : KC;
                int first = (k0 == 0 && !accumulate);
                pack_b(bbuf, B, k0, kc, j0, nb);
                for (int ic = 0; ic < mb; ic += MC) {
                    int mc = mb - ic < MC ? mb - ic : MC;
                    pack_a(abuf, A, i0 + ic, mc, k0, kc);
                    for (int jp = 0; jp < nb; jp += NR)
                        for (int ip = 0; ip < mc; ip += MR)
                            micro_kernel(kc, abuf + (size_t)ip * kc, bbuf + (size_t)jp * kc,
                                         C + (ptrdiff_t)(i0 + ic + ip) * ldc + j0 + jp, ldc,
                                         mc - ip < MR ? mc - ip : MR, nb - jp < NR ? nb - jp : NR, first);
                }
            }
        }
        free(abuf);
        free(bbuf);
    }
    return err ? KN_ENOMEM : KN_OK;
}

int kn_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias, int N, int C, int OC) {
    if (!out || !inp || !weight || N <= 0 || C <= 0 || OC <= 0) return KN_EINVAL;
    view A = {inp, C, 1};
    view B = {weight, 1, C}; /* B(k, j) = weight[j, k] */
    int rc = gemm(N, OC, C, A, B, out, OC, 0);
    if (rc) return rc;
    if (bias) {
        KN_OMP(parallel for)
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * OC;
            for (int j = 0; j < OC; j++) o[j] += bias[j];
        }
    }
    return KN_OK;
}

int kn_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                           const float *weight, int N, int C, int OC) {
    if (!dout || N <= 0 || C <= 0 || OC <= 0) return KN_EINVAL;
    if ((dinp && !weight) || (dweight && !inp)) return KN_EINVAL;
    int rc;
    if (dinp) {
        view A = {dout, OC, 1};
        view B = {weight, C, 1};
        if ((rc = gemm(N, C, OC, A, B, dinp, C, 0))) return rc;
    }
    if (dweight) {
        view A = {dout, 1, OC}; /* A(o, n) = dout[n, o] */
        view B = {inp, C, 1};
        if ((rc = gemm(OC, C, N, A, B, dweight, C, 1))) return rc;
    }
    if (dbias) {
        enum { CB = 64 };
        int nb = (OC + CB - 1) / CB;
        KN_OMP(parallel for schedule(static))
        for (int blk = 0; blk < nb; blk++) {
            int o0 = blk * CB, oc = OC - o0 < CB ? OC - o0 : CB;
            float acc[CB] = {0};
            for (int n = 0; n < N; n++) {
                const float *d = dout + (size_t)n * OC + o0;
                for (int j = 0; j < oc; j++) acc[j] += d[j];
            }
            for (int j = 0; j < oc; j++) dbias[o0 + j] += acc[j];
        }
    }
    return KN_OK;
}
