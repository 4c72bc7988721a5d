/* kn_attention_cudnn.cu - causal attention through cuDNN's fused flash
 * attention (cudnn_frontend's SDPA graphs), an optional engine beside the
 * project's own kernels (issue 31 item 3).
 *
 * Why a library here: the own tensor-core kernels reach 172 / 143 TFLOP/s
 * (forward / backward, H200, d12) where flash-attention-class kernels (wgmma,
 * TMA, warp specialisation on sm_90) reach several times that; cuDNN ships
 * such kernels, PyTorch's SDPA baseline can use them, and llm.c uses them.
 * The own kernels stay: they are the default until this path has run on a
 * GPU, the fallback (document masks, fp32, a build or machine without cuDNN,
 * a shape cuDNN refuses) and the oracle in tests/test_kn_cudnn_gpu.cu.
 *
 * Built with cuDNN when CMake finds cudnn.h, libcudnn and the cudnn-frontend
 * headers (MKS_CUDNN, kernels/CMakeLists.txt; KN_HAVE_CUDNN); otherwise
 * every entry point answers "not built with cuDNN" and nothing links it.
 *
 * Layout: the rows are the packed q/k/v rows both model families use,
 * [q heads (NH HS) | k heads (NKV HS) | v heads (NKV HS)] per token (GPT-2's
 * is NKV = NH), read in place through strides (no copies); out (B,T,NH HS);
 * lse (B,NH,T) fp32 is cuDNN's softmax statistics, the natural-log
 * log-sum-exp of the scaled scores, which is what the own kernels store too.
 * dqkv is overwritten whole (its q, k and v parts), as by the own backward.
 *
 * Determinism: cuDNN's default backward on Hopper sums dQ with atomics (not
 * bit-reproducible); its deterministic algorithm either keeps dP, a T x T
 * matrix per head (b h T^2 bf16: what this project never allocates), or,
 * from cuDNN 9.25, orders the dQ sums with a workspace linear in T - chosen
 * by the frontend only when CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT is below
 * dP's size, so it is set (to the caller's bound) while such a graph is
 * built.  `deterministic` asks for the latter: with an older cuDNN the
 * T x T plans exceed the bound and prepare says so (KN_ENOTSUP); 0 takes
 * the atomics (runs and resumes then differ in the last bits).
 *
 * Memory: a graph's workspace comes from the caller (the models' kernel
 * scratch, a plan row); plans needing more than the caller's bound are
 * deselected before one is chosen, so cuDNN never allocates behind the
 * plan's back.  The handle and the graphs' own host state are cached per
 * process (one device per process in this trainer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kn_cuda_common.cuh"

#ifdef KN_HAVE_CUDNN
#define CUDNN_FRONTEND_SKIP_JSON_LIB /* graph (de)serialisation is not used */
#include <cudnn.h>

#include <cstring> /* cudnn_frontend_shim.h calls std::strlen without including it (1.32) */
#include <cudnn_frontend.h>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fe = cudnn_frontend;

enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

struct att_key {
    int bwd, B, T, NH, NKV, HS, dt, det; /* det: the deterministic backward (always 0 for forward graphs) */
    long long ws_cap;
    bool operator==(const att_key &o) const {
        return bwd == o.bwd && B == o.B && T == o.T && NH == o.NH && NKV == o.NKV && HS == o.HS && dt == o.dt &&
               det == o.det && ws_cap == o.ws_cap;
    }
};

struct att_graph {
    att_key key;
    std::shared_ptr<fe::graph::Graph> g; /* null: cuDNN refused this key (remembered: not retried per call) */
    int64_t ws;
};

/* Graphs are built once per shape; a run uses a handful (train and eval
 * batch shapes, forward and backward).  The bound keeps a caller that walks
 * through shapes from growing host memory without limit. */
#define KN_CUDNN_MAX_GRAPHS 64

static std::mutex g_mu;
static cudnnHandle_t g_handle;
static int g_handle_state; /* 0 not tried, 1 ok, -1 failed */
static std::vector<att_graph> g_graphs;

/* the packed q/k/v row geometry as cuDNN tensors: dims {B, H, T, HS},
 * strides {T RS, HS, RS, 1} */
static std::shared_ptr<fe::graph::Tensor_attributes> rows_tensor(fe::graph::Graph &g, const char *name, int uid,
                                                                 int64_t B, int64_t H, int64_t T, int64_t HS,
                                                                 int64_t RS) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({B, H, T, HS})
                        .set_stride({T * RS, HS, RS, 1}));
}

/* Build one graph; NULL (and why, in `why`) when cuDNN cannot run it. */
static std::shared_ptr<fe::graph::Graph> build_graph(const att_key &k, int64_t *ws, char *why, size_t whylen) {
    const int64_t B = k.B, T = k.T, NH = k.NH, NKV = k.NKV, HS = k.HS;
    const int64_t RS = (NH + 2 * NKV) * HS, OS = NH * HS;
    const float scale = 1.0f / sqrtf((float)HS);
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(k.dt == KN_BF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto Q = rows_tensor(*g, "Q", UID_Q, B, NH, T, HS, RS);
    auto K = rows_tensor(*g, "K", UID_K, B, NKV, T, HS, RS);
    auto V = rows_tensor(*g, "V", UID_V, B, NKV, T, HS, RS);
    if (!k.bwd) {
        auto opt = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true).set_attn_scale(scale);
        opt.set_causal_mask(true);
        auto [O, Stats] = g->sdpa(Q, K, V, opt);
        O->set_output(true).set_uid(UID_O).set_dim({B, NH, T, HS}).set_stride({T * OS, HS, OS, 1});
        Stats->set_output(true)
            .set_uid(UID_STATS)
            .set_data_type(fe::DataType_t::FLOAT)
            .set_dim({B, NH, T, 1})
            .set_stride({NH * T, T, 1, 1});
    } else {
        auto O = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("O")
                               .set_uid(UID_O)
                               .set_dim({B, NH, T, HS})
                               .set_stride({T * OS, HS, OS, 1}));
        auto dO = g->tensor(fe::graph::Tensor_attributes()
                                .set_name("dO")
                                .set_uid(UID_DO)
                                .set_dim({B, NH, T, HS})
                                .set_stride({T * OS, HS, OS, 1}));
        auto Stats = g->tensor(fe::graph::Tensor_attributes()
                                   .set_name("Stats")
                                   .set_uid(UID_STATS)
                                   .set_data_type(fe::DataType_t::FLOAT)
                                   .set_dim({B, NH, T, 1})
                                   .set_stride({NH * T, T, 1, 1}));
        auto opt = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_backward")
                       .set_attn_scale(scale)
                       .set_deterministic_algorithm(k.det != 0);
        opt.set_causal_mask(true);
        auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, Stats, opt);
        dQ->set_output(true).set_uid(UID_DQ).set_dim({B, NH, T, HS}).set_stride({T * RS, HS, RS, 1});
        dK->set_output(true).set_uid(UID_DK).set_dim({B, NKV, T, HS}).set_stride({T * RS, HS, RS, 1});
        dV->set_output(true).set_uid(UID_DV).set_dim({B, NKV, T, HS}).set_stride({T * RS, HS, RS, 1});
    }
    /* each step, until one fails: its name and message go into the reason
     * (initialised from a call, never assigned: nvcc flags an assignment of
     * the frontend's [[nodiscard]] error type as a discarded value) */
    const char *step = "";
    std::string msg;
#define KN_CUDNN_STEP(name, call)                                                                                      \
    if (msg.empty()) {                                                                                                 \
        step = name;                                                                                                   \
        fe::error_t r_ = (call);                                                                                       \
        if (!r_.is_good()) msg = r_.get_message().empty() ? std::string("failed") : r_.get_message();                  \
    }
    /* the deterministic backward with linear workspace (cuDNN >= 9.25): the frontend takes it when the
     * dP limit is below dP's size; the user's own setting wins */
    struct env_guard { /* unset again however the build ends (the frontend may throw) */
        const char *name = "CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT";
        bool set = false;
        ~env_guard() {
            if (set) unsetenv(name);
        }
    } dp;
    if (k.bwd && k.det && !getenv(dp.name)) {
        char v[32];
        snprintf(v, sizeof v, "%lld", k.ws_cap);
        dp.set = setenv(dp.name, v, 1) == 0;
    }
    KN_CUDNN_STEP("validate", g->validate());
    KN_CUDNN_STEP("build_operation_graph", g->build_operation_graph(g_handle));
    KN_CUDNN_STEP("create_execution_plans", g->create_execution_plans({fe::HeurMode_t::A}));
    /* only plans that fit the caller's workspace: cuDNN must not need memory
     * the plan did not count */
    if (msg.empty()) g->deselect_workspace_greater_than(k.ws_cap);
    KN_CUDNN_STEP("check_support", g->check_support(g_handle));
    KN_CUDNN_STEP("build_plans", g->build_plans(g_handle));
    KN_CUDNN_STEP("get_workspace_size", g->get_workspace_size(*ws));
#undef KN_CUDNN_STEP
    if (!msg.empty()) {
        snprintf(why, whylen, "cuDNN %d %s graph (B %d T %d NH %d NKV %d HS %d, workspace <= %lld): %s: %s",
                 (int)cudnnGetVersion(), k.bwd ? "attention backward" : "attention forward", k.B, k.T, k.NH, k.NKV,
                 k.HS, k.ws_cap, step, msg.c_str());
        return nullptr;
    }
    return g;
}

/* The cached graph for k (built on first use), or NULL with why. Caller holds g_mu. */
static const att_graph *graph_for(const att_key &k, char *why, size_t whylen) {
    if (g_handle_state == 0) {
        cudnnStatus_t cs = cudnnCreate(&g_handle);
        g_handle_state = cs == CUDNN_STATUS_SUCCESS ? 1 : -1;
        if (cs != CUDNN_STATUS_SUCCESS) snprintf(why, whylen, "cudnnCreate: %s", cudnnGetErrorString(cs));
    }
    if (g_handle_state < 0) {
        if (!why[0]) snprintf(why, whylen, "cudnnCreate failed earlier in this process");
        return nullptr;
    }
    for (auto &e : g_graphs)
        if (e.key == k) {
            if (!e.g) snprintf(why, whylen, "cuDNN refused this attention shape earlier in this process");
            return e.g ? &e : nullptr;
        }
    if (g_graphs.size() >= KN_CUDNN_MAX_GRAPHS) {
        snprintf(why, whylen, "more than %d attention shapes in one process", KN_CUDNN_MAX_GRAPHS);
        return nullptr;
    }
    att_graph e;
    e.key = k;
    e.ws = 0;
    try {
        e.g = build_graph(k, &e.ws, why, whylen);
    } catch (const std::exception &x) { /* the frontend may throw (e.g. a library it cannot load) */
        snprintf(why, whylen, "cuDNN attention graph: %s", x.what());
        e.g = nullptr;
    }
    g_graphs.push_back(e);
    return e.g ? &g_graphs.back() : nullptr;
}

static int shape_ok(int B, int T, int NH, int NKV, int HS, kn_dtype dt) {
    return (dt == KN_BF16 || dt == KN_F16) && B > 0 && T > 0 && NH > 0 && NKV > 0 && NH % NKV == 0 && HS % 8 == 0 &&
           HS >= 8 && HS <= 256;
}

static int run_graph(const att_key &k, std::unordered_map<int64_t, void *> &pack, void *ws, kn_stream s) {
    std::lock_guard<std::mutex> lock(g_mu);
    char why[512] = "";
    const att_graph *e = graph_for(k, why, sizeof why);
    if (!e) {
        kn_cuda_set_error("%s", why);
        return KN_ENOTSUP;
    }
    if (e->ws > 0 && !ws) return KN_EINVAL;
    cudnnStatus_t cs = cudnnSetStream(g_handle, s);
    if (cs != CUDNN_STATUS_SUCCESS) {
        kn_cuda_set_error("cudnnSetStream: %s", cudnnGetErrorString(cs));
        return KN_ECUDA;
    }
    try {
        fe::error_t st = e->g->execute(g_handle, pack, ws);
        if (!st.is_good()) {
            kn_cuda_set_error("cuDNN attention %s execute: %s", k.bwd ? "backward" : "forward",
                              st.get_message().c_str());
            return KN_ECUDA;
        }
    } catch (const std::exception &x) {
        kn_cuda_set_error("cuDNN attention %s: %s", k.bwd ? "backward" : "forward", x.what());
        return KN_ECUDA;
    }
    return KN_OK;
}

extern "C" int kn_cudnn_attention_version(void) { return (int)cudnnGetVersion(); }

extern "C" int kn_cudnn_attention_prepare(size_t *fwd_ws, size_t *bwd_ws, int B, int T, int NH, int NKV, int HS,
                                          size_t ws_cap, int deterministic, kn_dtype dt, char *why, size_t whylen) {
    if (why && whylen) why[0] = 0;
    if (!shape_ok(B, T, NH, NKV, HS, dt)) {
        if (why && whylen) snprintf(why, whylen, "cuDNN attention: 16-bit rows with HS a multiple of 8, <= 256");
        return KN_ENOTSUP;
    }
    std::lock_guard<std::mutex> lock(g_mu);
    char buf[512] = "";
    for (int bwd = 0; bwd < 2; bwd++) {
        att_key k = {bwd, B, T, NH, NKV, HS, (int)dt, bwd && deterministic, (long long)ws_cap};
        const att_graph *e = graph_for(k, buf, sizeof buf);
        if (!e) {
            if (why && whylen) snprintf(why, whylen, "%s", buf);
            return KN_ENOTSUP;
        }
        size_t *out = bwd ? bwd_ws : fwd_ws;
        if (out) *out = (size_t)e->ws;
    }
    return KN_OK;
}

extern "C" int kn_cudnn_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV, int HS,
                                          void *ws, size_t ws_bytes, kn_dtype dt, kn_stream s) {
    if (!out || !lse || !qkv || !shape_ok(B, T, NH, NKV, HS, dt)) return KN_EINVAL;
    const size_t e = 2;
    char *q = (char *)qkv;
    std::unordered_map<int64_t, void *> pack = {{UID_Q, q},
                                                {UID_K, q + (size_t)NH * HS * e},
                                                {UID_V, q + (size_t)(NH + NKV) * HS * e},
                                                {UID_O, out},
                                                {UID_STATS, lse}};
    att_key k = {0, B, T, NH, NKV, HS, (int)dt, 0, (long long)ws_bytes};
    return run_graph(k, pack, ws, s);
}

extern "C" int kn_cudnn_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out,
                                           const float *lse, int B, int T, int NH, int NKV, int HS, void *ws,
                                           size_t ws_bytes, int deterministic, kn_dtype dt, kn_stream s) {
    if (!dqkv || !dout || !qkv || !out || !lse || !shape_ok(B, T, NH, NKV, HS, dt)) return KN_EINVAL;
    const size_t e = 2, ko = (size_t)NH * HS * e, vo = (size_t)(NH + NKV) * HS * e;
    char *q = (char *)qkv, *dq = (char *)dqkv;
    std::unordered_map<int64_t, void *> pack = {{UID_Q, q},           {UID_K, q + ko},        {UID_V, q + vo},
                                                {UID_O, (void *)out}, {UID_DO, (void *)dout}, {UID_STATS, (void *)lse},
                                                {UID_DQ, dq},         {UID_DK, dq + ko},      {UID_DV, dq + vo}};
    att_key k = {1, B, T, NH, NKV, HS, (int)dt, deterministic != 0, (long long)ws_bytes};
    return run_graph(k, pack, ws, s);
}

#else /* built without cuDNN: every entry point says so */

static int no_cudnn(char *why, size_t whylen) {
    if (why && whylen)
        snprintf(why, whylen,
                 "this build has no cuDNN (MKS_CUDNN: cudnn.h, libcudnn and the "
                 "cudnn-frontend headers, see docs/gpu-notes.md)");
    return KN_ENOTSUP;
}

extern "C" int kn_cudnn_attention_version(void) { return 0; }

extern "C" int kn_cudnn_attention_prepare(size_t *fwd_ws, size_t *bwd_ws, int, int, int, int, int, size_t, int,
                                          kn_dtype, char *why, size_t whylen) {
    if (fwd_ws) *fwd_ws = 0;
    if (bwd_ws) *bwd_ws = 0;
    return no_cudnn(why, whylen);
}

extern "C" int kn_cudnn_attention_forward(void *, float *, const void *, int, int, int, int, int, void *, size_t,
                                          kn_dtype, kn_stream) {
    kn_cuda_set_error("attention_cudnn: %s", "this build has no cuDNN");
    return KN_ENOTSUP;
}

extern "C" int kn_cudnn_attention_backward(void *, const void *, const void *, const void *, const float *, int, int,
                                           int, int, int, void *, size_t, int, kn_dtype, kn_stream) {
    kn_cuda_set_error("attention_cudnn: %s", "this build has no cuDNN");
    return KN_ENOTSUP;
}
#endif
