/* bpe_flat.h - the hot loops of the flat merge (bpe.c), compiled three
 * times by bpe.c: for the baseline target (SSE2 on x86-64), for AVX2 and
 * for AVX-512, chosen at run time (tk_simd_level). Up to 64 lanes. Not a header to include anywhere else: it expects
 * bpe.c's flat_state, flat_init, flat_rank and chunk_joined, and FLAT_FN()
 * to name its functions. */

/* Lowest rank of lanes 0..31, and the first lane holding it. */
static inline __attribute__((always_inline)) int32_t FLAT_FN(argmin32)(const int32_t *rk, unsigned *at) {
#if defined(__AVX512F__)
    __m512i a0 = _mm512_load_si512(rk), a1 = _mm512_load_si512(rk + 16);
    __m512i m = _mm512_set1_epi32(_mm512_reduce_min_epi32(_mm512_min_epi32(a0, a1)));
    uint32_t mask = (uint32_t)_mm512_cmpeq_epi32_mask(a0, m) | (uint32_t)_mm512_cmpeq_epi32_mask(a1, m) << 16;
    *at = (unsigned)__builtin_ctz(mask);
    return _mm_cvtsi128_si32(_mm512_castsi512_si128(m));
#elif defined(__AVX2__)
    const __m256i *v = (const __m256i *)rk;
    __m256i a0 = _mm256_load_si256(v), a1 = _mm256_load_si256(v + 1), a2 = _mm256_load_si256(v + 2),
            a3 = _mm256_load_si256(v + 3);
    __m256i m = _mm256_min_epi32(_mm256_min_epi32(a0, a1), _mm256_min_epi32(a2, a3));
    m = _mm256_min_epi32(m, _mm256_permute2x128_si256(m, m, 1));
    m = _mm256_min_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm256_min_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    uint32_t mask = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a0, m))) |
                    (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a1, m))) << 8 |
                    (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a2, m))) << 16 |
                    (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a3, m))) << 24;
    *at = (unsigned)__builtin_ctz(mask);
    return _mm256_cvtsi256_si32(m);
#else
    return flat_argmin(rk, 8, at);
#endif
}

/* Lowest rank of lanes 0..63, and the first lane holding it. */
static inline __attribute__((always_inline)) int32_t FLAT_FN(argmin64)(const int32_t *rk, unsigned *at) {
#if defined(__AVX512F__)
    __m512i a0 = _mm512_load_si512(rk), a1 = _mm512_load_si512(rk + 16), a2 = _mm512_load_si512(rk + 32),
            a3 = _mm512_load_si512(rk + 48);
    __m512i m = _mm512_set1_epi32(
        _mm512_reduce_min_epi32(_mm512_min_epi32(_mm512_min_epi32(a0, a1), _mm512_min_epi32(a2, a3))));
    uint64_t mask = (uint64_t)_mm512_cmpeq_epi32_mask(a0, m) | (uint64_t)_mm512_cmpeq_epi32_mask(a1, m) << 16 |
                    (uint64_t)_mm512_cmpeq_epi32_mask(a2, m) << 32 | (uint64_t)_mm512_cmpeq_epi32_mask(a3, m) << 48;
    *at = (unsigned)__builtin_ctzll(mask);
    return _mm_cvtsi128_si32(_mm512_castsi512_si128(m));
#else
    unsigned lo, hi;
    int32_t a = FLAT_FN(argmin32)(rk, &lo), b = FLAT_FN(argmin32)(rk + 32, &hi);
    *at = a <= b ? lo : 32 + hi;
    return a <= b ? a : b;
#endif
}

/* rk[lane] = val, rewriting the whole vector the scan will load (see flat_set). */
static inline void FLAT_FN(set)(flat_state *st, unsigned lane, int32_t val) {
#if defined(__AVX512F__)
    __m512i *v = (__m512i *)st->rk + (lane >> 4);
    _mm512_store_si512(v, _mm512_mask_set1_epi32(_mm512_load_si512(v), (__mmask16)(1u << (lane & 15)), val));
#elif defined(__AVX2__)
    __m256i *v = (__m256i *)st->rk + (lane >> 3);
    __m256i m = _mm256_cmpeq_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32((int)(lane & 7)));
    _mm256_store_si256(v, _mm256_blendv_epi8(_mm256_load_si256(v), _mm256_set1_epi32(val), m));
#else
    flat_set(st, lane, val);
#endif
}

/* One merge; 0 once no pair is left. */
static inline int FLAT_FN(step)(flat_state *st, const tk_tokenizer *t, uint32_t max_rank) {
    unsigned k;
    int32_t best;
    if (st->nvec == 2) {
        /* 8 lanes: scalar, since a vector load of lanes just written one
         * by one stalls on store forwarding; (rank, lane) keys make the
         * leftmost of equal ranks the smallest */
        uint64_t key = ((uint64_t)(uint32_t)st->rk[0] << 8);
        for (unsigned i = 1; i < 7; i++) {
            uint64_t c = ((uint64_t)(uint32_t)st->rk[i] << 8) | i;
            key = c < key ? c : key;
        }
        best = (int32_t)(key >> 8);
        k = (unsigned)(key & 0xff);
    } else if (st->nvec == 4) {
        best = flat_argmin(st->rk, 4, &k);
    } else if (st->nvec == 8) {
        best = FLAT_FN(argmin32)(st->rk, &k);
    } else {
        best = FLAT_FN(argmin64)(st->rk, &k);
    }
    if (best == FLAT_INF) return 0;
    /* merge the part at k with the next one */
    unsigned n = st->n, d = st->nxt[k], e = st->nxt[d];
    st->tok[k] = (uint32_t)best;
    st->alive &= ~(1ull << d);
    FLAT_FN(set)(st, d, FLAT_INF);
    st->nxt[k] = (uint8_t)e;
    if (e < n) {
        st->prv[e] = (uint8_t)k;
        FLAT_FN(set)(st, k, flat_rank(t, st->p + k, st->nxt[e] - k, max_rank));
    } else {
        FLAT_FN(set)(st, k, FLAT_INF);
    }
    if (k) {
        unsigned q = st->prv[k];
        FLAT_FN(set)(st, q, flat_rank(t, st->p + q, e - q, max_rank));
    }
    return 1;
}

static int FLAT_FN(small)(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out) {
    flat_state st;
    flat_init(&st, t, p, n, max_rank);
    while (FLAT_FN(step)(&st, t, max_rank)) {
    }
    return flat_emit(&st, out);
}

/* The chunks of a long piece, CHUNK_GROUP at a time: the chunks of a group
 * are merged in turn, one step each, so that the rank look-ups of different
 * chunks overlap. A chunk equal to the one before it (runs, repeated text)
 * reuses its tokens. Each chunk's tokens go to chunk_joined, which checks and
 * repairs the junction. 1: done, 0: fall back to the whole piece, <0: error. */
static int FLAT_FN(chunks)(const tk_tokenizer *t, scratch *s, const uint8_t *p, size_t n, size_t chunk,
                           tk_ids *out) {
    size_t base = out->len;
    flat_state st[CHUNK_GROUP];
    uint32_t raw[FLAT_LANES]; /* tokens of the previous chunk on its own */
    size_t raw_n = 0, prev_len = 0;
    size_t len[CHUNK_GROUP];
    for (size_t pos = 0; pos < n;) {
        size_t g = 0, end = pos;
        unsigned copy = 0, live = 0;
        for (; g < CHUNK_GROUP && end < n; g++) {
            size_t m = chunk_cut(t, p, end, n, chunk);
            len[g] = m;
            if (m == (g ? len[g - 1] : prev_len) && memcmp(p + end, p + end - m, m) == 0) {
                copy |= 1u << g;
            } else {
                flat_init(&st[g], t, p + end, m, TK_NO_RANK);
                live |= 1u << g;
            }
            end += m;
        }
        while (live)
            for (size_t i = 0; i < g; i++)
                if ((live >> i & 1) && !FLAT_FN(step)(&st[i], t, TK_NO_RANK)) live &= ~(1u << i);
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
