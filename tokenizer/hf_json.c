/* hf_json.c - fast reading of a tokenizer.json's model.vocab and model.merges.
 *
 * A 150k-token tokenizer.json is 7-10 MB, almost all of it vocab and merges;
 * a jansson tree of it costs ~1 s here. This reader finds the two values in
 * the raw bytes, decodes them into flat arrays (strict JSON: UTF-8 checked,
 * escapes and surrogate pairs decoded, integer ids only), and leaves the rest
 * of the file (with the two values replaced by {} and []) to jansson. It
 * never decides an error itself: anything unusual (a duplicate key, a float
 * id, an empty key, bad UTF-8, a third merge form ...) makes it answer
 * TK_HFJ_FALLBACK, and the loader reads the file with jansson as before, so
 * the messages for bad files stay the loader's own.
 *
 * A Unigram model's vocab ([[piece, score], ...]) has its own reader
 * (tk_hfj_parse_unigram): jansson would take ~1 s on mT5's 250k pieces, and
 * its scores are strtod's, where HF's are serde_json's (serde_f64).
 */
#include "tk_internal.h"
#include "mc_json.h"
#include "mks_common.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "hf_internal.h" /* tk_hfj_uni */

static size_t ws(const uint8_t *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* Nonzero when one of the 8 bytes of v is a quote, a backslash, a control
 * byte (< 0x20) or, with high, >= 0x80 (a false positive only above a true
 * one: callers then look byte by byte). */
static inline uint64_t swar_special(uint64_t v, bool high) {
    const uint64_t ones = 0x0101010101010101ull, h = 0x8080808080808080ull;
    uint64_t q = v ^ (ones * '"'), b = v ^ (ones * '\\');
    return ((high ? v : 0) | ((v - ones * 0x20) & ~v) | ((q - ones) & ~q) | ((b - ones) & ~b)) & h;
}

/* End (after the closing quote) of the string starting at s[i] == '"'; 0 if none. */
static size_t str_end(const uint8_t *s, size_t n, size_t i) {
    for (i++; i < n; i++) {
        while (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + i, 8);
            uint64_t m = swar_special(v, false);
            if (m) { /* the lowest flagged byte is a true one: step to it */
                i += (size_t)__builtin_ctzll(m) >> 3;
                break;
            }
            i += 8;
        }
        if (i >= n) break;
        if (s[i] == '"') return i + 1;
        if (s[i] == '\\') i++;
        else if (s[i] < 0x20) return 0;
    }
    return 0;
}

/* JSON's brackets by name: the bodies below then hold no bracket characters
 * outside code, so brace-counting tools see skip_value as the 30 lines it is
 * (an opening brace in a character literal made one count it as 330). */
enum { J_OBJ = 0x7B, J_OBJ_END = 0x7D, J_ARR = 0x5B, J_ARR_END = 0x5D };

/* End of the value at s[i]; 0 on anything odd. */
static size_t skip_value(const uint8_t *s, size_t n, size_t i, int depth) {
    if (i >= n || depth > 64) return 0;
    if (s[i] == '"') return str_end(s, n, i);
    if (s[i] == J_OBJ || s[i] == J_ARR) {
        uint8_t close = s[i] == J_OBJ ? J_OBJ_END : J_ARR_END;
        bool obj = s[i] == J_OBJ;
        i = ws(s, n, i + 1);
        if (i < n && s[i] == close) return i + 1;
        for (;;) {
            if (obj) {
                if (i >= n || s[i] != '"' || !(i = str_end(s, n, i))) return 0;
                i = ws(s, n, i);
                if (i >= n || s[i] != ':') return 0;
                i = ws(s, n, i + 1);
            }
            if (!(i = skip_value(s, n, i, depth + 1))) return 0;
            i = ws(s, n, i);
            if (i >= n) return 0;
            if (s[i] == close) return i + 1;
            if (s[i] != ',') return 0;
            i = ws(s, n, i + 1);
        }
    }
    size_t j = i;
    while (j < n && s[j] != ',' && s[j] != J_OBJ_END && s[j] != J_ARR_END && s[j] != ' ' && s[j] != '\n' &&
           s[j] != '\t' && s[j] != '\r')
        j++;
    return j > i ? j : 0;
}

/* Decode the string at s[*i] into o (NUL-terminated); its length, or -1. */
static long decode_str(const uint8_t *s, size_t n, size_t *i, uint8_t *o) {
    size_t p = *i, w = 0;
    if (p >= n || s[p] != '"') return -1;
    p++;
    while (p < n) {
        /* 8 plain ASCII bytes (no quote, backslash or control) at a time */
        while (p + 8 <= n) {
            uint64_t v;
            memcpy(&v, s + p, 8);
            uint64_t m = swar_special(v, true);
            memcpy(o + w, &v, 8); /* the bytes past the plain ones are overwritten below */
            if (m) {              /* the lowest flagged byte is a true one: keep the plain bytes before it */
                size_t k = (size_t)__builtin_ctzll(m) >> 3;
                w += k;
                p += k;
                break;
            }
            w += 8;
            p += 8;
        }
        if (p >= n) break;
        uint8_t c = s[p];
        if (c == '"') {
            o[w] = 0;
            *i = p + 1;
            return (long)w;
        }
        if (c < 0x20) return -1;
        if (c == '\\') {
            if (p + 1 >= n) return -1;
            uint8_t e = s[p + 1];
            p += 2;
            switch (e) {
            case '"': o[w++] = '"'; break;
            case '\\': o[w++] = '\\'; break;
            case '/': o[w++] = '/'; break;
            case 'b': o[w++] = '\b'; break;
            case 'f': o[w++] = '\f'; break;
            case 'n': o[w++] = '\n'; break;
            case 'r': o[w++] = '\r'; break;
            case 't': o[w++] = '\t'; break;
            case 'u': {
                uint32_t u;
                size_t k = mc_json_u_escape(s + p - 2, n - (p - 2), &u); /* a surrogate pair is one character */
                if (!k) return -1;
                p += k - 2;
                if (u == 0) return -1;                     /* \u0000: the loader's message */
                if (u >= 0xD800 && u <= 0xDFFF) return -1; /* a lone surrogate: refused, as before */
                w += mc_utf8_put(o + w, (uint32_t)u);
                break;
            }
            default: return -1;
            }
            continue;
        }
        if (c < 0x80) {
            o[w++] = c;
            p++;
            continue;
        }
        /* one UTF-8 sequence, checked (mc_utf8_seq); two-byte ones (ByteLevel's
         * Ġ, Ċ ...: most of a byte-level vocabulary) here without the call */
        if (c >= 0xC2 && c < 0xE0 && p + 1 < n && (s[p + 1] & 0xC0) == 0x80) {
            o[w] = c;
            o[w + 1] = s[p + 1];
            w += 2;
            p += 2;
            continue;
        }
        size_t l = mc_utf8_seq(s + p, n - p); /* the common layer's strict check */
        if (!l) return -1;
        for (size_t k = 0; k < l; k++) o[w + k] = s[p + k];
        w += l;
        p += l;
    }
    return -1;
}

static bool key_is(const uint8_t *s, size_t a, size_t b, const char *k) {
    size_t kl = strlen(k);
    return b - a == kl + 2 && memcmp(s + a + 1, k, kl) == 0;
}

static uint64_t hash(const uint8_t *p, size_t n) { return tk_hash_bytes(p, n); }

/* The first min(8, n) bytes of p as a zero-padded word (keys hold no NUL). */
static inline uint64_t head_word(const uint8_t *p, size_t n) {
    if (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        return w;
    }
    return n ? tk_short_word(p, n) : 0;
}

static inline int slot_is(const tk_hfj *j, const struct tk_hfj_slot *s, uint64_t w, uint16_t tag, const uint8_t *k,
                          size_t kl) {
    if (s->tag != tag || s->word != w || s->len != (kl > 0xFFFF ? 0xFFFF : kl)) return 0;
    uint32_t e = s->e1 - 1;
    return kl <= 8 || (j->vlen[e] == kl && memcmp(j->vkey[e] + 8, k + 8, kl - 8) == 0);
}

int tk_hfj_lookup(const tk_hfj *j, const char *k, size_t kl) {
    const uint8_t *p = (const uint8_t *)k;
    uint64_t h = hash(p, kl), w = head_word(p, kl);
    uint16_t tag = (uint16_t)(h >> 48);
    for (size_t i = h & j->mask;; i = (i + 1) & j->mask) {
        const struct tk_hfj_slot *s = &j->slots[i];
        if (!s->e1) return -1;
        if (slot_is(j, s, w, tag, p, kl)) return (int)(s->e1 - 1);
    }
}

int tk_hfj_resolve_merges(const tk_hfj *j, int32_t (*out)[3]) {
    enum { BATCH = 16, STRIDE = 8 * TK_MAX_TOKEN_BYTES + 8 };
    uint8_t *buf = malloc((size_t)BATCH * STRIDE); /* the concatenations of a batch */
    if (!buf) return TK_ERR_NOMEM;
    struct {
        uint64_t h, w;
        const uint8_t *k;
        size_t kl;
    } q[BATCH * 3];
    for (size_t m0 = 0; m0 < j->nm; m0 += BATCH) {
        size_t nb = j->nm - m0 < BATCH ? j->nm - m0 : BATCH;
        /* hash the two parts and their concatenation, prefetch the slots ... */
        for (size_t m = 0; m < nb; m++) {
            const char *a = j->ma[m0 + m], *b = j->mb[m0 + m];
            size_t la = strlen(a), lb = strlen(b);
            uint8_t *ab = buf + m * STRIDE;
            memcpy(ab, a, la);
            memcpy(ab + la, b, lb + 1);
            const uint8_t *ks[3] = {(const uint8_t *)a, (const uint8_t *)b, ab};
            size_t ls[3] = {la, lb, la + lb};
            for (int s = 0; s < 3; s++) {
                size_t x = m * 3 + (size_t)s;
                q[x].k = ks[s];
                q[x].kl = ls[s];
                q[x].h = hash(ks[s], ls[s]);
                q[x].w = head_word(ks[s], ls[s]);
                __builtin_prefetch(&j->slots[q[x].h & j->mask]);
            }
        }
        /* ... then probe */
        for (size_t x = 0; x < nb * 3; x++) {
            int32_t e = -1;
            uint16_t tag = (uint16_t)(q[x].h >> 48);
            for (size_t i = q[x].h & j->mask;; i = (i + 1) & j->mask) {
                const struct tk_hfj_slot *sl = &j->slots[i];
                if (!sl->e1) break;
                if (slot_is(j, sl, q[x].w, tag, q[x].k, q[x].kl)) {
                    e = (int32_t)(sl->e1 - 1);
                    break;
                }
            }
            out[m0 + x / 3][x % 3] = e;
        }
    }
    free(buf);
    return TK_OK;
}

void tk_hfj_free(tk_hfj *j) {
    free(j->arena);
    free(j->vkey);
    free(j->vlen);
    free(j->vid);
    free(j->slots);
    free(j->ma);
    free(j->mb);
    free(j->rest);
    memset(j, 0, sizeof *j);
}

void *tk_table_alloc(size_t bytes) {
    void *p = NULL;
    if (bytes >= ((size_t)4 << 20)) {
        /* 2 MiB pages where the kernel gives them on request: a table of
         * megabytes filled at random would otherwise fault page by page */
        bytes = (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
        if (posix_memalign(&p, (size_t)2 << 20, bytes)) return NULL;
        madvise(p, bytes, MADV_HUGEPAGE);
    } else if (!(p = malloc(bytes ? bytes : 1))) {
        return NULL;
    }
    memset(p, 0, bytes); /* written first: one fault per page, not a zero page then a copy */
    return p;
}

int tk_hfj_index(tk_hfj *j) {
    size_t slots = 16;
    while (slots < j->nv + j->nv / 2 + 16) slots *= 2; /* load <= 2/3 */
    j->slots = tk_table_alloc(slots * sizeof *j->slots);
    if (!j->slots) return TK_ERR_NOMEM;
    j->mask = slots - 1;
    for (size_t e = 0; e < j->nv; e++) {
        const uint8_t *k = (const uint8_t *)j->vkey[e];
        size_t kl = j->vlen[e];
        uint64_t h = hash(k, kl), w = head_word(k, kl);
        uint16_t tag = (uint16_t)(h >> 48);
        size_t i = h & j->mask;
        for (;; i = (i + 1) & j->mask) {
            if (!j->slots[i].e1) break;
            if (slot_is(j, &j->slots[i], w, tag, k, kl)) return TK_HFJ_FALLBACK;
        }
        j->slots[i].word = w;
        j->slots[i].e1 = (uint32_t)e + 1;
        j->slots[i].len = (uint16_t)(kl > 0xFFFF ? 0xFFFF : kl);
        j->slots[i].tag = tag;
    }
    return TK_OK;
}

static int grow(void **p, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return TK_OK;
    size_t c = *cap ? *cap * 2 : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return TK_ERR_NOMEM;
    *p = q;
    *cap = c;
    return TK_OK;
}

/* model.vocab at s[i] == '{' decoded into j (strings into *o): the end of
 * the value, 0 for the fallback, or TK_ERR_NOMEM (negative, as size_t). */
static long parse_vocab(const uint8_t *s, size_t n, size_t i, tk_hfj *j, uint8_t **op) {
    uint8_t *o = *op;
    size_t vcap = 0, c2 = 0, c3 = 0;
    i = ws(s, n, i + 1);
    while (i < n && s[i] != '}') {
        if (grow((void **)&j->vkey, &vcap, j->nv + 1, sizeof *j->vkey) ||
            grow((void **)&j->vlen, &c2, j->nv + 1, sizeof *j->vlen) ||
            grow((void **)&j->vid, &c3, j->nv + 1, sizeof *j->vid))
            return TK_ERR_NOMEM;
        long l = decode_str(s, n, &i, o);
        if (l <= 0) return 0;
        i = ws(s, n, i);
        if (i >= n || s[i] != ':') return 0;
        i = ws(s, n, i + 1);
        uint64_t id = 0;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9' && id < TK_MAX_VOCAB) id = id * 10 + (s[i++] - '0');
        if (i == d || (s[d] == '0' && i - d > 1) || id >= TK_MAX_VOCAB) return 0;
        if (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')) return 0;
        j->vkey[j->nv] = (const char *)o;
        j->vlen[j->nv] = (uint32_t)l;
        j->vid[j->nv] = (uint32_t)id;
        if (id > j->max_id) j->max_id = (uint32_t)id;
        j->nv++;
        o += l + 1;
        i = ws(s, n, i);
        if (i < n && s[i] == ',') i = ws(s, n, i + 1);
        else if (i >= n || s[i] != '}') return 0;
    }
    if (i >= n) return 0;
    *op = o;
    return (long)(i + 1);
}

/* model.merges at s[i] == '[' ("a b" or ["a", "b"]), as parse_vocab. */
static long parse_merges(const uint8_t *s, size_t n, size_t i, tk_hfj *j, uint8_t **op) {
    uint8_t *o = *op;
    size_t mcap = 0, c4 = 0;
    i = ws(s, n, i + 1);
    while (i < n && s[i] != ']') {
        if (grow((void **)&j->ma, &mcap, j->nm + 1, sizeof *j->ma) ||
            grow((void **)&j->mb, &c4, j->nm + 1, sizeof *j->mb))
            return TK_ERR_NOMEM;
        if (s[i] == '"') {
            long l = decode_str(s, n, &i, o);
            if (l <= 0) return 0;
            if (l > 8 * (long)TK_MAX_TOKEN_BYTES) return 0;
            uint8_t *sp = memchr(o, ' ', (size_t)l);
            if (!sp || sp == o || sp == o + l - 1 || memchr(sp + 1, ' ', (size_t)(o + l - sp - 1))) return 0;
            if (sp - o >= 4 * (long)TK_MAX_TOKEN_BYTES || o + l - sp - 1 >= 4 * (long)TK_MAX_TOKEN_BYTES) return 0;
            *sp = 0;
            j->ma[j->nm] = (const char *)o;
            j->mb[j->nm] = (const char *)sp + 1;
            o += l + 1;
        } else if (s[i] == '[') {
            i = ws(s, n, i + 1);
            long la = decode_str(s, n, &i, o);
            if (la <= 0 || la >= 4 * (long)TK_MAX_TOKEN_BYTES) return 0;
            j->ma[j->nm] = (const char *)o;
            o += la + 1;
            i = ws(s, n, i);
            if (i >= n || s[i] != ',') return 0;
            i = ws(s, n, i + 1);
            long lb = decode_str(s, n, &i, o);
            if (lb <= 0 || lb >= 4 * (long)TK_MAX_TOKEN_BYTES) return 0;
            j->mb[j->nm] = (const char *)o;
            o += lb + 1;
            i = ws(s, n, i);
            if (i >= n || s[i] != ']') return 0;
            i++;
        } else {
            return 0;
        }
        j->nm++;
        i = ws(s, n, i);
        if (i < n && s[i] == ',') i = ws(s, n, i + 1);
        else if (i >= n || s[i] != ']') return 0;
    }
    if (i >= n) return 0;
    *op = o;
    return (long)(i + 1);
}

/* The walk both fast readers share: the top-level object, and inside its
 * "model" object each key handed to take(ctx, s, n, key_start, key_end, i,
 * &end) with s[i] its value. take returns TK_OK with *end the value's end
 * (0: not taken, the walk skips the value), TK_HFJ_FALLBACK or TK_ERR_NOMEM.
 * Every other value is skipped. TK_OK, TK_HFJ_FALLBACK (anything the fast
 * path does not read: jansson decides) or TK_ERR_NOMEM. */
typedef int (*model_key_fn)(void *ctx, const uint8_t *s, size_t n, size_t a, size_t b, size_t i, size_t *end);
static int walk_model_keys(const uint8_t *s, size_t n, model_key_fn take, void *ctx) {
    size_t i = ws(s, n, 0);
    if (i >= n || s[i] != '{') return TK_HFJ_FALLBACK;
    i = ws(s, n, i + 1);
    while (i < n && s[i] != '}') {
        size_t ks = i;
        if (s[i] != '"' || !(i = str_end(s, n, i))) return TK_HFJ_FALLBACK;
        size_t ke = i;
        i = ws(s, n, i);
        if (i >= n || s[i] != ':') return TK_HFJ_FALLBACK;
        i = ws(s, n, i + 1);
        if (key_is(s, ks, ke, "model") && i < n && s[i] == '{') {
            i = ws(s, n, i + 1);
            while (i < n && s[i] != '}') {
                size_t a = i;
                if (s[i] != '"' || !(i = str_end(s, n, i))) return TK_HFJ_FALLBACK;
                size_t b = i;
                i = ws(s, n, i);
                if (i >= n || s[i] != ':') return TK_HFJ_FALLBACK;
                i = ws(s, n, i + 1);
                size_t e = 0;
                int rc = take(ctx, s, n, a, b, i, &e);
                if (rc) return rc;
                if (!e && !(e = skip_value(s, n, i, 1))) return TK_HFJ_FALLBACK;
                i = ws(s, n, e);
                if (i < n && s[i] == ',') i = ws(s, n, i + 1);
                else if (i >= n || s[i] != '}') return TK_HFJ_FALLBACK;
            }
            if (i >= n) return TK_HFJ_FALLBACK;
            i++;
        } else {
            if (!(i = skip_value(s, n, i, 0))) return TK_HFJ_FALLBACK;
        }
        i = ws(s, n, i);
        if (i < n && s[i] == ',') i = ws(s, n, i + 1);
        else if (i >= n || s[i] != '}') return TK_HFJ_FALLBACK;
    }
    return TK_OK;
}

/* A parser's result (the value's end, 0 for the fallback, or a negative
 * TK_ERR_NOMEM) as take's status. */
static int taken(long e, size_t *end) {
    if (e < 0) return TK_ERR_NOMEM;
    if (!e) return TK_HFJ_FALLBACK;
    *end = (size_t)e;
    return TK_OK;
}

/* BPE: model.vocab and model.merges, decoded into the arena as they are met. */
typedef struct {
    tk_hfj *j;
    uint8_t *o;
    size_t vs, ve, ms, me;
} bpe_walk;
static int take_bpe(void *ctx, const uint8_t *s, size_t n, size_t a, size_t b, size_t i, size_t *end) {
    bpe_walk *w = ctx;
    if (key_is(s, a, b, "vocab")) {
        if (w->ve || i >= n || s[i] != '{') return TK_HFJ_FALLBACK;
        w->vs = i;
        int rc = taken(parse_vocab(s, n, i, w->j, &w->o), end);
        w->ve = *end;
        return rc;
    }
    if (key_is(s, a, b, "merges")) {
        if (w->me || i >= n || s[i] != '[') return TK_HFJ_FALLBACK;
        w->ms = i;
        int rc = taken(parse_merges(s, n, i, w->j, &w->o), end);
        w->me = *end;
        return rc;
    }
    return TK_OK;
}

int tk_hfj_parse(const uint8_t *s, size_t n, tk_hfj *j) {
    memset(j, 0, sizeof *j);
    int rc = TK_ERR_NOMEM;
    size_t i = ws(s, n, 0);
    if (i >= n || s[i] != '{') return TK_HFJ_FALLBACK;
    /* decoded strings (+ NUL) are never longer than their JSON text: vocab and
     * merges are decoded in this one pass over the file */
    j->arena = malloc(n + 16);
    if (!j->arena) goto fail;
    bpe_walk bw = {j, j->arena, 0, 0, 0, 0};
    if ((rc = walk_model_keys(s, n, take_bpe, &bw))) goto fail_rc;
    size_t vs = bw.vs, ve = bw.ve, ms = bw.ms, me = bw.me;
    if (!ve || !me || vs > ms) goto fallback;
    /* the rest, for jansson: the two values replaced by {} and [] */
    j->rest = malloc(n - (ve - vs) - (me - ms) + 8);
    if (!j->rest) goto fail;
    size_t w = 0;
    memcpy(j->rest + w, s, vs);
    w += vs;
    memcpy(j->rest + w, "{}", 2);
    w += 2;
    memcpy(j->rest + w, s + ve, ms - ve);
    w += ms - ve;
    memcpy(j->rest + w, "[]", 2);
    w += 2;
    memcpy(j->rest + w, s + me, n - me);
    w += n - me;
    j->rest_len = w;
    if ((rc = tk_hfj_index(j))) goto fail_rc;
    return TK_OK;
fallback:
    rc = TK_HFJ_FALLBACK;
    goto fail_rc;
fail:
    rc = TK_ERR_NOMEM;
fail_rc:
    tk_hfj_free(j);
    return rc;
}

/* ---- a Unigram model's vocab: [[piece, score], ...] ------------------------ */

/* 1e0 .. 1e308 as Rust's literals (correctly rounded, as strtod gives them). */
static double g_pow10[309];
static pthread_once_t g_pow10_once = PTHREAD_ONCE_INIT;
static void pow10_init(void) {
    for (int k = 0; k <= 308; k++) {
        char b[16];
        snprintf(b, sizeof b, "1e%d", k);
        g_pow10[k] = strtod(b, NULL);
    }
}

/* f64_from_parts of serde_json without its float_roundtrip feature (how HF
 * `tokenizers` builds it): (double)significand, then one multiplication or
 * division by a power of ten - not always the correctly rounded value
 * (strtod's): 13% of 17-digit scores differ by an ulp, which moves near-ties
 * of the Viterbi. false where serde_json fails (out of range). */
static bool serde_from_parts(bool neg, uint64_t sig, int64_t exp, double *out) {
    double f = (double)sig;
    for (;;) {
        uint64_t a = exp < 0 ? (uint64_t)(-exp) : (uint64_t)exp;
        if (a <= 308) {
            if (exp >= 0) {
                f *= g_pow10[a];
                if (isinf(f)) return false;
            } else {
                f /= g_pow10[a];
            }
            break;
        }
        if (f == 0.0) break;
        if (exp >= 0) return false;
        f /= 1e308;
        exp += 308;
    }
    *out = neg ? -f : f;
    return true;
}

/* The JSON number at s[*i] read as serde_json reads it into an f64
 * (de.rs: parse_integer, parse_long_integer, parse_decimal(_overflow),
 * parse_exponent(_overflow)); false on anything else. */
static bool serde_f64(const uint8_t *s, size_t n, size_t *i, double *out) {
    size_t p = *i;
    bool neg = p < n && s[p] == '-';
    if (neg) p++;
    if (p >= n || s[p] < '0' || s[p] > '9') return false;
    uint64_t sig = 0;
    int64_t exp = 0;
    bool integer = true;
    if (s[p] == '0') {
        p++;
        if (p < n && s[p] >= '0' && s[p] <= '9') return false;
    } else {
        while (p < n && s[p] >= '0' && s[p] <= '9') {
            uint64_t d = (uint64_t)(s[p] - '0');
            if (sig > (UINT64_MAX - d) / 10) { /* parse_long_integer: further digits only scale */
                integer = false;
                while (p < n && s[p] >= '0' && s[p] <= '9') p++, exp++;
                break;
            }
            sig = sig * 10 + d;
            p++;
        }
    }
    if (p < n && s[p] == '.') {
        integer = false;
        p++;
        size_t d0 = p;
        bool over = false;
        while (p < n && s[p] >= '0' && s[p] <= '9') {
            uint64_t d = (uint64_t)(s[p] - '0');
            if (!over && sig > (UINT64_MAX - d) / 10) over = true; /* parse_decimal_overflow: digits ignored */
            if (!over) sig = sig * 10 + d, exp--;
            p++;
        }
        if (p == d0) return false;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        integer = false;
        p++;
        bool eneg = false;
        if (p < n && (s[p] == '+' || s[p] == '-')) eneg = s[p++] == '-';
        if (p >= n || s[p] < '0' || s[p] > '9') return false;
        int64_t e = 0;
        bool over = false;
        while (p < n && s[p] >= '0' && s[p] <= '9') {
            if (!over && e > (INT32_MAX - (s[p] - '0')) / 10) over = true;
            if (!over) e = e * 10 + (s[p] - '0');
            p++;
        }
        if (over) { /* parse_exponent_overflow */
            if (sig && !eneg) return false;
            *out = neg ? -0.0 : 0.0;
            *i = p;
            return true;
        }
        exp = eneg ? exp - e : exp + e; /* saturating in i32 there; |exp| stays far below */
    }
    *i = p;
    if (integer) { /* U64 / I64, then `as f64` */
        *out = neg ? -(double)sig : (double)sig;
        return true;
    }
    return serde_from_parts(neg, sig, exp, out);
}

/* [[piece, score], ...] at s[i] == '[' into v: the end of the value, 0 for
 * the fallback, or TK_ERR_NOMEM (negative). */
static long parse_uni_vocab(const uint8_t *s, size_t n, size_t i, tk_hfj_uni *v, uint8_t **op) {
    uint8_t *o = *op;
    size_t c1 = 0, c2 = 0, c3 = 0;
    i = ws(s, n, i + 1);
    while (i < n && s[i] != ']') {
        if (grow((void **)&v->key, &c1, v->n + 1, sizeof *v->key) ||
            grow((void **)&v->len, &c2, v->n + 1, sizeof *v->len) ||
            grow((void **)&v->score, &c3, v->n + 1, sizeof *v->score))
            return TK_ERR_NOMEM;
        if (s[i] != '[') return 0;
        i = ws(s, n, i + 1);
        long l = decode_str(s, n, &i, o);
        if (l < 0) return 0;
        i = ws(s, n, i);
        if (i >= n || s[i] != ',') return 0;
        i = ws(s, n, i + 1);
        if (!serde_f64(s, n, &i, &v->score[v->n])) return 0;
        i = ws(s, n, i);
        if (i >= n || s[i] != ']') return 0;
        i = ws(s, n, i + 1);
        v->key[v->n] = (const char *)o;
        v->len[v->n] = (uint32_t)l;
        v->n++;
        o += l + 1;
        if (v->n > TK_MAX_VOCAB) return 0;
        if (i < n && s[i] == ',') i = ws(s, n, i + 1);
        else if (i >= n || s[i] != ']') return 0;
    }
    if (i >= n) return 0;
    *op = o;
    return (long)(i + 1);
}

/* Unigram: model.vocab, a list of [piece, score]. */
typedef struct {
    tk_hfj_uni *v;
    uint8_t *o;
    size_t vs, ve;
} uni_walk;
static int take_uni(void *ctx, const uint8_t *s, size_t n, size_t a, size_t b, size_t i, size_t *end) {
    uni_walk *w = ctx;
    if (!key_is(s, a, b, "vocab")) return TK_OK;
    if (w->ve || i >= n || s[i] != '[') return TK_HFJ_FALLBACK;
    w->vs = i;
    int rc = taken(parse_uni_vocab(s, n, i, w->v, &w->o), end);
    w->ve = *end;
    return rc;
}

int tk_hfj_parse_unigram(const uint8_t *s, size_t n, tk_hfj_uni *v) {
    memset(v, 0, sizeof *v);
    pthread_once(&g_pow10_once, pow10_init);
    int rc = TK_ERR_NOMEM;
    size_t i = ws(s, n, 0);
    if (i >= n || s[i] != '{') return TK_HFJ_FALLBACK;
    v->arena = malloc(n + 16); /* decoded strings are never longer than their JSON text */
    if (!v->arena) goto fail;
    uni_walk uw = {v, v->arena, 0, 0};
    if ((rc = walk_model_keys(s, n, take_uni, &uw))) goto fail_rc;
    size_t vs = uw.vs, ve = uw.ve;
    if (!ve) goto fallback;
    /* the rest, for jansson: the vocab replaced by [] */
    v->rest = malloc(n - (ve - vs) + 8);
    if (!v->rest) goto fail;
    memcpy(v->rest, s, vs);
    memcpy(v->rest + vs, "[]", 2);
    memcpy(v->rest + vs + 2, s + ve, n - ve);
    v->rest_len = vs + 2 + n - ve;
    return TK_OK;
fallback:
    rc = TK_HFJ_FALLBACK;
    goto fail_rc;
fail:
    rc = TK_ERR_NOMEM;
fail_rc:
    tk_hfj_uni_free(v);
    return rc;
}

void tk_hfj_uni_free(tk_hfj_uni *v) {
    free(v->arena);
    free(v->key);
    free(v->len);
    free(v->score);
    free(v->rest);
    memset(v, 0, sizeof *v);
}
