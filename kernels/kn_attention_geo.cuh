/* kn_attention_geo.cuh - the row geometry every attention kernel reads its
 * packed q/k/v rows by (the SIMT kernels of kn_attention_simt.cuh and the
 * pipelined tensor-core ones of kn_attention_tc_pipe.cu), for both layouts:
 *   - GPT-2's row [q | k | v] of 3C: NKV = NH, k at C, v at 2C;
 *   - the Llama family's [q (NH HS) | k (NKV HS) | v (NKV HS)]: query head h
 *     reads KV head h / rep.
 * Internal to kn_cuda. */
#ifndef KN_ATTENTION_GEO_CUH
#define KN_ATTENTION_GEO_CUH

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kn_att_geo {
    int Tn, NH, NKV, rep; /* rep = NH / NKV query heads per KV head */
    size_t RS;            /* elements per token row of qkv */
    size_t OS;            /* elements per token row of out / dout: NH HS */
    size_t koff, voff;    /* where the k and v heads start in a row */
};

/* GPT-2's row of 3C: every head its own K/V head */
static inline kn_att_geo kn_att_geo_gpt2(int T, int C, int NH) {
    kn_att_geo g;
    g.Tn = T, g.NH = NH, g.NKV = NH, g.rep = 1;
    g.RS = 3 * (size_t)C, g.OS = (size_t)C, g.koff = (size_t)C, g.voff = 2 * (size_t)C;
    return g;
}

/* The shapes every grouped-query attention launch takes (kn_llama.cu's SIMT
 * kernels, kn_attention_tc.cu's tensor-core ones): positive sizes, NKV
 * dividing NH, B and NH within the grid's z / y limits, and a row width
 * (NH + 2 NKV) HS that fits the callers' int-sized matmul widths. */
static inline bool kn_att_gqa_shape_ok(int B, int T, int NH, int NKV, int HS) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || HS <= 0 || NH % NKV) return false;
    if (B > 65535 || NH > 65535) return false;
    return (size_t)(NH + 2 * NKV) * HS <= (size_t)INT32_MAX;
}

/* The grouped-query row; the caller has checked NKV > 0 and NH % NKV == 0 */
static inline kn_att_geo kn_att_geo_gqa(int T, int NH, int NKV, int HS) {
    kn_att_geo g;
    g.Tn = T, g.NH = NH, g.NKV = NKV, g.rep = NH / NKV;
    g.RS = (size_t)(NH + 2 * NKV) * HS;
    g.OS = (size_t)NH * HS;
    g.koff = (size_t)NH * HS;
    g.voff = (size_t)(NH + NKV) * HS;
    return g;
}

#endif
