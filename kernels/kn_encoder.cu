/* kn_encoder.cu - token + position embedding, forward and deterministic backward
 * (CUDA twin of encoder_ref; see kn_cuda.h). */
#include <cub/device/device_radix_sort.cuh>

#include "kn_cuda_common.cuh"

/* Out-of-range ids cannot be reported without a host sync: such rows are
 * written as NaN, so they poison the loss instead of reading out of bounds. */
template <typename T>
__global__ void encoder_fwd_kernel(T *out, const uint32_t *inp, const int32_t *pos, const T *wte, const T *wpe, int BT,
                                   int T_, int C, int V, int maxT) {
    size_t total = (size_t)BT * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i / C), c = (int)(i % C);
        uint32_t id = inp[n];
        int p = pos ? pos[n] : n % T_;
        if (id >= (uint32_t)V || p < 0 || p >= maxT) {
            kn_st(out + i, __int_as_float(0x7fc00000));
            continue;
        }
        kn_st(out + i, kn_ld(wte + (size_t)id * C + c) + kn_ld(wpe + (size_t)p * C + c));
    }
}

extern "C" int kn_encoder_forward_cuda(void *out, const uint32_t *inp, const int32_t *pos, const void *wte,
                                       const void *wpe, int B, int T, int C, int V, int maxT, kn_dtype dt,
                                       kn_stream s) {
    if (!out || !inp || !wte || !wpe || B <= 0 || T <= 0 || C <= 0 || V <= 0 || maxT <= 0) return KN_EINVAL;
    if (!pos && T > maxT) return KN_EINVAL;
    size_t total = (size_t)B * T * C;
    KN_DISPATCH(dt, (encoder_fwd_kernel<DT><<<kn_blocks(total, 256), 256, 0, s>>>(
                        (DT *)out, inp, pos, (const DT *)wte, (const DT *)wpe, B * T, T, C, V, maxT)));
    KN_CUDA_LAUNCHED("encoder_forward");
    return KN_OK;
}

/* ---- backward -------------------------------------------------------------------------- */
__global__ void iota_keys_kernel(uint32_t *keys, int32_t *vals, const uint32_t *src_u, const int32_t *src_i, int N,
                                 uint32_t limit) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        uint32_t k = src_u ? src_u[i] : (uint32_t)src_i[i];
        keys[i] = k < limit ? k : limit; /* out of range: a bucket past the table, skipped */
        vals[i] = i;
    }
}

/* After a stable sort, the block of each segment start sums its rows in index
 * order (deterministic) and adds the sum to the table row.  grid (N, ceil(C/256)). */
template <typename T>
__global__ void segment_sum_kernel(float *table, const uint32_t *keys, const int32_t *idx, const T *dout, int N, int C,
                                   uint32_t limit) {
    int i = blockIdx.x;
    uint32_t k = keys[i];
    if (k >= limit || (i > 0 && keys[i - 1] == k)) return;
    int c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int j = i; j < N && keys[j] == k; j++) acc += kn_ld(dout + (size_t)idx[j] * C + c);
    table[(size_t)k * C + c] += acc;
}

/* dwpe without explicit positions: p = t, sum over b in order. */
template <typename T> __global__ void wpe_bwd_kernel(float *dwpe, const T *dout, int B, int T_, int C) {
    size_t total = (size_t)T_ * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int b = 0; b < B; b++) acc += kn_ld(dout + (size_t)b * T_ * C + i);
        dwpe[i] += acc;
    }
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static size_t cub_temp_bytes(int N) {
    size_t temp = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                    (const int32_t *)nullptr, (int32_t *)nullptr, N);
    return temp;
}

template <typename T>
static int scatter_rows(float *table, int rows, const T *dout, const uint32_t *ids_u, const int32_t *ids_i, int N,
                        int C, char *scratch, size_t scratch_bytes, cudaStream_t s) {
    size_t a = align256((size_t)N * 4);
    uint32_t *k_in = (uint32_t *)scratch, *k_out = (uint32_t *)(scratch + a);
    int32_t *v_in = (int32_t *)(scratch + 2 * a), *v_out = (int32_t *)(scratch + 3 * a);
    void *temp = scratch + 4 * a;
    size_t temp_bytes = scratch_bytes - 4 * a;
    iota_keys_kernel<<<(N + 255) / 256, 256, 0, s>>>(k_in, v_in, ids_u, ids_i, N, (uint32_t)rows);
    KN_CUDA_LAUNCHED("encoder_backward keys");
    int bits = 1;
    while (bits < 32 && (1u << bits) <= (uint32_t)rows) bits++;
    KN_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, k_in, k_out, v_in, v_out, N, 0, bits, s));
    KN_CUDA_LAUNCHED("encoder_backward sort (cub::DeviceRadixSort)");
    dim3 grid((unsigned)N, (unsigned)((C + 255) / 256));
    segment_sum_kernel<T><<<grid, 256, 0, s>>>(table, k_out, v_out, dout, N, C, (uint32_t)rows);
    KN_CUDA_LAUNCHED("encoder_backward segment_sum");
    return KN_OK;
}

extern "C" int kn_encoder_backward_cuda(float *dwte, float *dwpe, const void *dout, const uint32_t *inp,
                                        const int32_t *pos, int B, int T, int C, int V, int maxT, void *scratch,
                                        size_t scratch_bytes, kn_dtype dt, kn_stream s) {
    if (!dout || !inp || B <= 0 || T <= 0 || C <= 0 || V <= 0 || maxT <= 0) return KN_EINVAL;
    if (!pos && T > maxT) return KN_EINVAL;
    int N = B * T;
    if (!scratch || scratch_bytes < kn_encoder_backward_scratch_bytes(N)) return KN_EINVAL;
    /* the scratch size is computed without CUDA (kn_cuda_size.c, for the
     * planner) from a bound on CUB's temporary storage: hold CUB to it */
    size_t need = cub_temp_bytes(N);
    if (need > kn_encoder_sort_temp_bytes(N)) {
        kn_cuda_set_error("encoder_backward: cub::DeviceRadixSort needs %zu bytes of temporary storage for %d ids, "
                          "more than the %zu kn_encoder_sort_temp_bytes reserves (kernels/kn_cuda_size.c)",
                          need, N, kn_encoder_sort_temp_bytes((size_t)N));
        return KN_EINVAL;
    }
    int rc = KN_OK;
    if (dwte)
        KN_DISPATCH(dt, rc = scatter_rows<DT>(dwte, V, (const DT *)dout, inp, nullptr, N, C, (char *)scratch,
                                              scratch_bytes, s));
    if (rc != KN_OK) return rc;
    if (dwpe) {
        if (pos) {
            KN_DISPATCH(dt, rc = scatter_rows<DT>(dwpe, maxT, (const DT *)dout, nullptr, pos, N, C, (char *)scratch,
                                                  scratch_bytes, s));
        } else {
            size_t total = (size_t)T * C;
            KN_DISPATCH(dt,
                        (wpe_bwd_kernel<DT><<<kn_blocks(total, 256), 256, 0, s>>>(dwpe, (const DT *)dout, B, T, C)));
            KN_CUDA_LAUNCHED("encoder_backward wpe");
        }
    }
    return rc;
}
