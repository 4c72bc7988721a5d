/* bpe_flat.h - the hot loops of the flat merge (bpe.c), compiled three
 * times by bpe.c: for the baseline target (SSE2 on x86-64), for AVX2 and
 * for AVX-512, chosen at run time (tk_simd_level). Up to 64 lanes. Not a
 * header to include anywhere else: it expects bpe.c's flat_state, flat_init,
 * flat_rank, flat_next and chunk_joined, the mid-size helpers (mid_parts,
 * mid_first_rank, part_pair_rank, mid_join, mid_emit, mid_key), FLAT_FN()
 * to name its functions and FLAT_SIMD, the variant's level (0 baseline,
 * 1 AVX2, 2 AVX-512). The code is chosen by FLAT_SIMD, never by __AVX2__ or
 * __AVX512F__: under -march=native those describe the build machine, so the
 * baseline variant, compiled without <immintrin.h> and a target pragma, would
 * take the vector code (MKS_NATIVE=ON failed to compile, issue 32). */
#if !defined(FLAT_SIMD)
#error "bpe_flat.h: define FLAT_SIMD (0, 1 or 2) before including it"
#endif
/* a vector variant only under its target pragma (which defines these) */
#if (FLAT_SIMD >= 1 && !defined(__AVX2__)) || (FLAT_SIMD >= 2 && !defined(__AVX512F__))
#error "bpe_flat.h: FLAT_SIMD above the target's instruction set"
#endif

#if FLAT_SIMD == 1
/* Lowest of the 8 lanes of m. */
static inline __attribute__((always_inline)) int32_t FLAT_FN(hmin256)(__m256i m) {
    __m128i h = _mm_min_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    h = _mm_min_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
    h = _mm_min_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(h);
}
#endif

/* Lowest key of lanes 0..31 (see flat_key). */
static inline __attribute__((always_inline)) int32_t FLAT_FN(argmin32)(const int32_t *rk) {
#if FLAT_SIMD >= 2
    return _mm512_reduce_min_epi32(_mm512_min_epi32(_mm512_load_si512(rk), _mm512_load_si512(rk + 16)));
#elif FLAT_SIMD == 1
    const __m256i *v = (const __m256i *)rk;
    return FLAT_FN(hmin256)(_mm256_min_epi32(_mm256_min_epi32(_mm256_load_si256(v), _mm256_load_si256(v + 1)),
                                             _mm256_min_epi32(_mm256_load_si256(v + 2), _mm256_load_si256(v + 3))));
#else
    return flat_argmin(rk, 8);
#endif
}

/* Lowest key of lanes 0..63. */
static inline __attribute__((always_inline)) int32_t FLAT_FN(argmin64)(const int32_t *rk) {
#if FLAT_SIMD >= 2
    return _mm512_reduce_min_epi32(
        _mm512_min_epi32(_mm512_min_epi32(_mm512_load_si512(rk), _mm512_load_si512(rk + 16)),
                         _mm512_min_epi32(_mm512_load_si512(rk + 32), _mm512_load_si512(rk + 48))));
#else
    int32_t a = FLAT_FN(argmin32)(rk), b = FLAT_FN(argmin32)(rk + 32);
    return a < b ? a : b;
#endif
}

/* rk[lane] = val, rewriting the whole vector the scan will load (see flat_set);
 * rk 64-byte aligned. */
static inline __attribute__((always_inline)) void FLAT_FN(set_lane)(int32_t *rk, unsigned lane, int32_t val) {
#if FLAT_SIMD >= 2
    __m512i *v = (__m512i *)rk + (lane >> 4);
    _mm512_store_si512(v, _mm512_mask_set1_epi32(_mm512_load_si512(v), (__mmask16)(1u << (lane & 15)), val));
#elif FLAT_SIMD == 1
    __m256i *v = (__m256i *)rk + (lane >> 3);
    __m256i m = _mm256_cmpeq_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32((int)(lane & 7)));
    _mm256_store_si256(v, _mm256_blendv_epi8(_mm256_load_si256(v), _mm256_set1_epi32(val), m));
#else
    flat_set(rk, lane, val);
#endif
}

static inline void FLAT_FN(set)(flat_state *st, unsigned lane, int32_t val) { FLAT_FN(set_lane)(st->rk, lane, val); }

/* Merge the part whose pair holds the lowest key with the next part. */
static inline __attribute__((always_inline)) void FLAT_FN(merge)(flat_state *st, const tk_tokenizer *t,
                                                                 uint32_t max_rank, int32_t key) {
    unsigned k = (unsigned)key & ((1u << FLAT_LANE_BITS) - 1);
    /* the parts are the set bits of alive (flat_next) */
    uint64_t alive = st->alive;
    unsigned n = st->n;
    uint64_t above_k = alive & (~1ull << k), above_d = above_k & (above_k - 1);
    unsigned d = flat_next(above_k, n), e = flat_next(above_d, n); /* d: the part merged in */
    st->tok[k] = (uint32_t)key >> FLAT_LANE_BITS;
    st->alive = alive & ~(1ull << d);
    FLAT_FN(set)(st, d, FLAT_INF);
    if (e < n) {
        unsigned f = flat_next(above_d & (above_d - 1), n);
        FLAT_FN(set)(st, k, flat_rank(t, st->p + k, f - k, max_rank, k));
    } else {
        FLAT_FN(set)(st, k, FLAT_INF);
    }
    if (k) {
        unsigned q = 63u - (unsigned)__builtin_clzll(alive & ((1ull << k) - 1));
        FLAT_FN(set)(st, q, flat_rank(t, st->p + q, e - q, max_rank, q));
    }
}

/* Lowest key of the first 4 * nvec lanes. Inlined with a constant nvec
 * (the chunk loop) it is one fixed-width scan, no dispatch. */
static inline __attribute__((always_inline)) int32_t FLAT_FN(lowest)(const int32_t *rk, unsigned nvec) {
    if (nvec == 2) {
        /* 8 lanes: scalar, since a vector load of lanes just written one
         * by one stalls on store forwarding */
        int32_t key = rk[0];
        for (unsigned i = 1; i < 7; i++) key = rk[i] < key ? rk[i] : key;
        return key;
    }
    if (nvec == 4) return flat_argmin(rk, 4);
    if (nvec == 8) return FLAT_FN(argmin32)(rk);
    return FLAT_FN(argmin64)(rk);
}

/* One merge over the first 4 * nvec lanes; 0 once no pair is left. */
static inline __attribute__((always_inline)) int FLAT_FN(step_at)(flat_state *st, const tk_tokenizer *t,
                                                                  uint32_t max_rank, unsigned nvec) {
    int32_t key = FLAT_FN(lowest)(st->rk, nvec);
    if (key == FLAT_INF) return 0;
    FLAT_FN(merge)(st, t, max_rank, key);
    return 1;
}

static inline __attribute__((always_inline)) int FLAT_FN(step)(flat_state *st, const tk_tokenizer *t,
                                                               uint32_t max_rank) {
    return FLAT_FN(step_at)(st, t, max_rank, st->nvec);
}

static int FLAT_FN(small)(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    flat_state st;
    flat_init(&st, t, p, n, max_rank);
    while (FLAT_FN(step)(&st, t, max_rank)) {}
    return flat_emit(&st, out);
}

/* The merge from a state set up elsewhere (bpe_chars: parts are characters). */
static int FLAT_FN(run)(flat_state *st, const tk_tokenizer *t, tk_ids *out) {
    while (FLAT_FN(step)(st, t, TK_NO_RANK)) {}
    return flat_emit(st, out);
}

/* flat_init for a chunk of 2..`lanes` bytes (lanes 32 or 64, all of them
 * filled): the first pair ranks come from vector gathers of pair2. */
static inline void FLAT_FN(init_chunk)(flat_state *st, const tk_tokenizer *t, const uint8_t *p, size_t n,
                                       unsigned lanes) {
#if FLAT_SIMD >= 1
    st->p = p;
    st->n = (uint32_t)n;
    st->nvec = lanes / 4;
    st->alive = flat_all_parts(n);
    uint8_t b[FLAT_LANES + 16]; /* the bytes, zero-padded: every load below stays inside */
    memcpy(b, p, n);
    memset(b + n, 0, sizeof b - n);
#if FLAT_SIMD >= 2
    const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (unsigned v = 0; v < lanes; v += 16) {
        __m512i lo = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + v)));
        __m512i hi = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(b + v + 1)));
        _mm512_storeu_si512(st->tok + v, _mm512_i32gather_epi32(lo, (const void *)t->byte_rank, 4));
        __m512i r = _mm512_i32gather_epi32(_mm512_or_si512(_mm512_slli_epi32(lo, 8), hi), (const void *)t->pair2, 4);
        __m512i lane = _mm512_add_epi32(iota, _mm512_set1_epi32((int)v));
        /* a pair exists where lane + 1 < n, and its rank fits a key */
        __mmask16 ok =
            _mm512_cmplt_epu32_mask(_mm512_add_epi32(lane, _mm512_set1_epi32(1)), _mm512_set1_epi32((int)n)) &
            _mm512_cmplt_epu32_mask(r, _mm512_set1_epi32((int)FLAT_MAX_RANKS));
        __m512i key = _mm512_or_si512(_mm512_slli_epi32(r, FLAT_LANE_BITS), lane);
        _mm512_store_si512(st->rk + v, _mm512_mask_blend_epi32(ok, _mm512_set1_epi32(FLAT_INF), key));
    }
#else
    const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    for (unsigned v = 0; v < lanes; v += 8) {
        __m256i lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + v)));
        __m256i hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + v + 1)));
        _mm256_storeu_si256((__m256i *)(st->tok + v), _mm256_i32gather_epi32((const int *)t->byte_rank, lo, 4));
        __m256i r = _mm256_i32gather_epi32((const int *)t->pair2, _mm256_or_si256(_mm256_slli_epi32(lo, 8), hi), 4);
        __m256i lane = _mm256_add_epi32(iota, _mm256_set1_epi32((int)v));
        /* signed compares are safe: lanes < 64, and ranks >= 2^31 are out of range either way */
        __m256i ok = _mm256_and_si256(
            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_add_epi32(lane, _mm256_set1_epi32(1))),
            _mm256_and_si256(_mm256_cmpgt_epi32(r, _mm256_set1_epi32(-1)),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32((int)FLAT_MAX_RANKS), r)));
        __m256i key = _mm256_or_si256(_mm256_slli_epi32(r, FLAT_LANE_BITS), lane);
        _mm256_store_si256((__m256i *)(st->rk + v), _mm256_blendv_epi8(_mm256_set1_epi32(FLAT_INF), key, ok));
    }
#endif
#else
    flat_init(st, t, p, n, TK_NO_RANK);
    for (size_t k = 4 * st->nvec; k < lanes; k++) st->rk[k] = FLAT_INF;
    st->nvec = lanes / 4;
#endif
}

/* Step the live chunks of a group in turn, one merge each, until all are
 * done: the rank look-ups of different chunks overlap. Inlined with a
 * constant nvec, so each step is a fixed-width scan. */
static inline __attribute__((always_inline)) void FLAT_FN(merge_group)(flat_state *st, size_t g, unsigned live,
                                                                       const tk_tokenizer *t, unsigned nvec) {
    while (live)
        for (size_t i = 0; i < g; i++)
            if ((live >> i & 1) && !FLAT_FN(step_at)(&st[i], t, TK_NO_RANK, nvec)) live &= ~(1u << i);
}

/* The chunks of a long piece, CHUNK_GROUP at a time: the chunks of a group
 * are merged in turn, one step each, so that the rank look-ups of different
 * chunks overlap. A chunk equal to the one before it (runs, repeated text)
 * reuses its tokens. Each chunk's tokens go to chunk_joined, which checks and
 * repairs the junction. 1: done, 0: fall back to the whole piece, <0: error. */
static int FLAT_FN(chunks)(const tk_tokenizer *t, scratch *s, const uint8_t *p, size_t n, size_t chunk, tk_ids *out) {
    size_t base = out->len;
    flat_state st[CHUNK_GROUP];
    uint32_t raw[FLAT_LANES]; /* tokens of the previous chunk on its own */
    size_t raw_n = 0, prev_len = 0;
    size_t len[CHUNK_GROUP];
    const unsigned nvec = chunk > 32 ? 16 : 8; /* every chunk is scanned at this width */
    for (size_t pos = 0; pos < n;) {
        size_t g = 0, end = pos;
        unsigned copy = 0, live = 0;
        for (; g < CHUNK_GROUP && end < n; g++) {
            size_t m = chunk_cut(t, p, end, n, chunk);
            len[g] = m;
            if (m == (g ? len[g - 1] : prev_len) && memcmp(p + end, p + end - m, m) == 0) {
                copy |= 1u << g;
            } else {
                FLAT_FN(init_chunk)(&st[g], t, p + end, m, 4 * nvec);
                live |= 1u << g;
            }
            end += m;
        }
        if (nvec == 16) FLAT_FN(merge_group)(st, g, live, t, 16);
        else FLAT_FN(merge_group)(st, g, live, t, 8);
        for (size_t i = 0; i < g; i++) {
            if (!(copy >> i & 1)) raw_n = flat_tokens(&st[i], raw);
            int rc = chunk_joined(t, s, p, base, pos, raw, raw_n, out);
            if (rc <= 0) return rc;
            pos += len[i];
            prev_len = len[i];
        }
    }
    return 1;
}

#if FLAT_SIMD >= 1
/* ---- mid-size pieces (bpe_mid_from's work, 33..255 bytes) --------------
 * The flat merge again, over up to 256 byte lanes: a lane holds the key
 * (rank << 8 | lane) of the pair that starts there, and each step takes the
 * lowest key with a vector min over the lanes in use. The parts are a
 * linked list (nxt/prv) as in the heap merge. Where the heap pays two or
 * three mispredicted sift loops per merge and skips stale keys, this pays
 * n/16 (AVX-512) or n/8 (AVX2) vector mins, and a lane is rewritten in place
 * when its pair changes. Ranks must stay below MID_MAX_RANKS (mid_key). */
#if FLAT_SIMD >= 2
#define MID_VL 16
#else
#define MID_VL 8
#endif

/* Lowest key of lanes 0..nv * MID_VL. */
static inline __attribute__((always_inline)) int32_t FLAT_FN(mid_lowest)(const int32_t *rk, unsigned nv) {
#if FLAT_SIMD >= 2
    __m512i a = _mm512_load_si512(rk), b = _mm512_set1_epi32(FLAT_INF);
    unsigned v = 1;
    for (; v + 1 < nv; v += 2) { /* two chains: half the dependent mins */
        a = _mm512_min_epi32(a, _mm512_load_si512(rk + MID_VL * v));
        b = _mm512_min_epi32(b, _mm512_load_si512(rk + MID_VL * (v + 1)));
    }
    if (v < nv) a = _mm512_min_epi32(a, _mm512_load_si512(rk + MID_VL * v));
    return _mm512_reduce_min_epi32(_mm512_min_epi32(a, b));
#else
    const __m256i *x = (const __m256i *)rk;
    __m256i a = _mm256_load_si256(x), b = _mm256_set1_epi32(FLAT_INF);
    unsigned v = 1;
    for (; v + 1 < nv; v += 2) {
        a = _mm256_min_epi32(a, _mm256_load_si256(x + v));
        b = _mm256_min_epi32(b, _mm256_load_si256(x + v + 1));
    }
    if (v < nv) a = _mm256_min_epi32(a, _mm256_load_si256(x + v));
    return FLAT_FN(hmin256)(_mm256_min_epi32(a, b));
#endif
}

static int FLAT_FN(mid)(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, const uint64_t *start,
                        const uint32_t *start_tok, tk_ids *out) {
    _Alignas(64) int32_t rk[SMALL_PIECE + 1];
    uint8_t nxt[SMALL_PIECE + 1], prv[SMALL_PIECE + 1];
    uint32_t tok[SMALL_PIECE + 1];
    scratch *s = pair_cache(t, max_rank);
    unsigned nv = (unsigned)((n + MID_VL - 1) / MID_VL);
    for (unsigned k = 0; k < nv * MID_VL; k++) rk[k] = FLAT_INF;
    mid_parts(t, p, n, start, start_tok, nxt, prv, tok);
    for (size_t k = 0; nxt[k] < n; k = nxt[k])
        rk[k] = mid_key(mid_first_rank(s, t, p, start, nxt, tok, k, max_rank), (unsigned)k);
    for (;;) {
        int32_t key = FLAT_FN(mid_lowest)(rk, nv);
        if (key == FLAT_INF) break;
        uint32_t k = (uint32_t)key & 0xFF;
        FLAT_FN(set_lane)(rk, mid_join(nxt, prv, tok, n, k, (uint32_t)key >> 8), FLAT_INF);
        uint32_t nr = nxt[k] < n ? part_pair_rank(s, t, p, nxt, tok, k, max_rank) : TK_NO_RANK;
        FLAT_FN(set_lane)(rk, k, mid_key(nr, k));
        if (k > 0) {
            uint32_t q = prv[k];
            FLAT_FN(set_lane)(rk, q, mid_key(part_pair_rank(s, t, p, nxt, tok, q, max_rank), q));
        }
    }
    return mid_emit(nxt, tok, n, out);
}
#undef MID_VL
#endif
