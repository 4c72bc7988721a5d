/* spm.c - SentencePiece `tokenizer.model` files: the ModelProto reader
 * (tk_spm_read, for BPE and UNIGRAM models alike; load_spm.c attaches the
 * engine) and the BPE engine's ops.
 *
 * Reads the ModelProto with a small protobuf reader of its own (no protobuf
 * library), normalizes text as sentencepiece's Normalizer does (the
 * precompiled_charsmap double-array trie, add_dummy_prefix,
 * remove_extra_whitespaces, escape_whitespaces) and encodes as its bpe::Model
 * followed by SentencePieceProcessor's byte fallback / unknown merging, so
 * the ids are those of `SentencePieceProcessor.encode(text)` (out_type=int, no
 * BOS/EOS). Decoding follows SentencePieceProcessor::Decode. UNIGRAM models
 * share everything here but the model (unigram.c: the Viterbi of
 * unigram::Model::EncodeOptimized); WORD and CHAR models are refused. docs/tokenizer.md, "SentencePiece .model".
 *
 * The file is untrusted: every length is checked against the bytes left,
 * varints are at most 10 bytes, and everything allocated is bounded by the
 * file's size (pieces are counted before they are stored).
 *
 * The charsmap reader is normalize.c's, shared with HF tokenizer.json's
 * "Precompiled" normalizer (hf_normalize.c), which walks it per grapheme
 * cluster as HF does. */
#include "normalize.h"
#include "spm_internal.h"
#include "tk_engine.h"

#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <nettle/sha2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* This engine's state of t (tk_engine.h). */
#define SPM_OF(t) ((const tk_spm *)(t)->engine_state)

/* ---- protobuf wire format --------------------------------------------------
 * A message is a run of fields: key = varint (field number << 3 | wire
 * type), then the value: 0 varint, 1 8 bytes, 2 varint length + bytes, 5 4
 * bytes. Groups (3, 4) are obsolete and refused. Fields we do not know are
 * skipped, as protobuf does; a field seen twice keeps its last value, and an
 * embedded message seen twice is merged (later fields win), as protobuf
 * does. */

typedef struct {
    const uint8_t *p, *end;
} pb;

static int pb_varint(pb *r, uint64_t *v) {
    uint64_t x = 0;
    for (int k = 0; k < 10; k++) {
        if (r->p >= r->end) return -1;
        uint8_t b = *r->p++;
        if (k == 9 && b > 1) return -1; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Next field: its number, wire type and, for type 2, the bytes. */
typedef struct {
    uint32_t num, wt;
    uint64_t v;       /* wire types 0, 1, 5 */
    const uint8_t *s; /* wire type 2 */
    size_t n;
} pb_field;

static int pb_next(pb *r, pb_field *f) {
    uint64_t key;
    if (pb_varint(r, &key)) return -1;
    f->num = (uint32_t)(key >> 3);
    f->wt = (uint32_t)(key & 7);
    if (f->num == 0 || key >> 3 > 0x1fffffff) return -1;
    switch (f->wt) {
    case 0: return pb_varint(r, &f->v);
    case 1:
    case 5: {
        size_t w = f->wt == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < w) return -1;
        f->v = 0;
        for (size_t k = 0; k < w; k++) f->v |= (uint64_t)r->p[k] << (8 * k);
        r->p += w;
        return 0;
    }
    case 2: {
        uint64_t n;
        if (pb_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
        f->s = r->p;
        f->n = (size_t)n;
        r->p += n;
        return 0;
    }
    default: return -1; /* groups and wire types 6, 7 */
    }
}

/* ---- the parsed model --------------------------------------------------- */

static uint64_t h64(const uint8_t *p, size_t n) { return tk_hash_bytes(p, n); }
static int byte_of_piece(const uint8_t *p, size_t n);

static uint32_t map_get(const tk_spm *m, const uint64_t *slots, size_t mask, const uint8_t *p, size_t n) {
    if (!slots) return TK_NO_RANK;
    uint64_t h = h64(p, n), tag = h >> 32;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        uint64_t s = slots[i];
        if (!s) return TK_NO_RANK;
        uint32_t id = (uint32_t)s - 1;
        if (s >> 32 == tag && m->plen[id] == n && tk_bytes_eq(m->piece[id], p, n)) return id;
    }
}

/* PieceToId without the unknown fallback: reserved pieces first. */
static inline uint32_t piece_id(const tk_spm *m, const uint8_t *p, size_t n) {
    uint32_t id = map_get(m, m->rmap, m->rmask, p, n);
    return id != TK_NO_RANK ? id : map_get(m, m->nmap, m->nmask, p, n);
}

/* ---- UTF-8 as sentencepiece sees it -------------------------------------- */

/* string_util::OneCharLen: from the lead byte alone. */
static inline size_t one_char_len(uint8_t b) {
    static const uint8_t t[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return t[b >> 4];
}

/* ---- user-defined symbols (PrefixMatcher) ---------------------------------- */

/* Length of the user-defined symbol at s (the longest of the first 64 that
 * are prefixes), 0 if none. */
static size_t user_match(const tk_spm *m, const uint8_t *s, size_t n) {
    if (!m->user_maxlen || !((m->user_first[s[0] >> 6] >> (s[0] & 63)) & 1)) return 0;
    size_t best = 0, found = 0, lim = n < m->user_maxlen ? n : m->user_maxlen;
    for (size_t l = 1; l <= lim; l++) {
        uint32_t id = map_get(m, m->nmap, m->nmask, s, l);
        if (id != TK_NO_RANK && m->type[id] == SP_USER) {
            best = l;
            if (++found == SPM_USER_RESULTS) break;
        }
    }
    return best;
}

/* ---- Normalizer::Normalize ------------------------------------------------ */

static int put(tk_bytes *b, const void *p, size_t n) { return n ? tk_bytes_append(b, p, n) : TK_OK; }

/* NormalizePrefix: the normalized form of the longest rule at s (or one
 * character copied, or U+FFFD for one malformed byte); *used = bytes read. */
static const uint8_t *norm_prefix(const tk_spm *m, const spm_norm *nz, const uint8_t *s, size_t n, size_t *len,
                                  size_t *used) {
    if (m) {
        size_t ul = user_match(m, s, n);
        if (ul) {
            *len = *used = ul;
            return s;
        }
    }
    uint32_t v = 0;
    size_t l = tk_cmap_longest(&nz->map, s, n, SPM_NORM_RESULTS, false, &v);
    if (l) {
        *used = l;
        return tk_cmap_string(&nz->map, v, len);
    }
    size_t c = tk_spm_valid_char(s, n);
    if (!c) {
        *used = 1;
        *len = 3;
        return (const uint8_t *)"\xef\xbf\xbd";
    }
    *len = *used = c;
    return s;
}

/* m: the model whose user-defined symbols pass unchanged (NULL for the
 * denormalizer). The output is at most tk_expand_cap(n, n0) bytes (n0: the
 * text the chain started from): a rule whose string is megabytes long
 * refuses the text (TK_ERR_DOC_EXPAND) instead of writing it n times. */
static int normalize(const tk_spm *m, const spm_norm *nz, const uint8_t *s, size_t n, size_t n0, tk_bytes *out) {
    out->len = 0;
    if (!n) return TK_OK;
    if (n > SIZE_MAX / 4) return TK_ERR_LIMIT;
    const size_t cap = tk_expand_cap(n, n0);
#define put(b, p, k) tk_bytes_put_capped(b, p, k, cap)
    const spm_spec *sp = &nz->spec;
    size_t len, used;
    const uint8_t *q;
    if (sp->remove_extra_ws)
        while (n) {
            q = norm_prefix(m, nz, s, n, &len, &used);
            if (!(len == 1 && q[0] == ' ')) break;
            s += used;
            n -= used;
        }
    if (!n) return TK_OK;
    if (tk_bytes_append(out, NULL, n * 3 + 3)) return TK_ERR_NOMEM;
    out->len = 0;
    const uint8_t *ws = sp->escape_ws ? SPACE_SYM : (const uint8_t *)" ";
    size_t wsl = sp->escape_ws ? 3 : 1;
    int rc = TK_OK;
    if (!nz->ws_suffix && sp->add_dummy_prefix && (rc = put(out, ws, wsl))) return rc;
    bool prev_space = sp->remove_extra_ws;
    while (n) {
        /* what norm_prefix would copy one by one (plain ASCII, letters no
         * combining sequence follows, characters no key starts) and plain
         * spaces, written straight into out: no step writes more than 3
         * bytes a byte read, so 3 n + 3 bytes of room hold the run; the cap
         * is checked after it (the text is refused all the same) */
        if (out->cap - out->len < 3 * n + 3) {
            size_t l = out->len;
            if (tk_bytes_append(out, NULL, 3 * n + 3)) return TK_ERR_NOMEM;
            out->len = l;
        }
        uint8_t *o = out->data + out->len;
        const uint8_t *const o0 = o;
        size_t r = 0;
        while (r < n) {
#ifdef __SSE2__
            /* 16 bytes at a time while they are printable ASCII other than
             * ' ' (a word of plain text): stored whole, kept up to the
             * first other byte (the room holds 16: 3 (n - r) + 3 >= 16);
             * a byte >= 0x80 after the run may continue its last byte's
             * key, so that byte is left to the steps below */
            if (nz->graphic_plain && n - r >= 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(s + r));
                unsigned in = (unsigned)_mm_movemask_epi8(
                    _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(0x20)), _mm_cmplt_epi8(v, _mm_set1_epi8(0x7f))));
                unsigned k = (unsigned)__builtin_ctz(~in | 0x10000u);
                if (k && r + k < n && s[r + k] >= 0x80) k--;
                if (k) {
                    _mm_storeu_si128((__m128i *)o, v);
                    o += k;
                    r += k;
                    prev_space = false;
                    continue;
                }
            }
#endif
            uint8_t b = s[r];
            if (b < 0x80) {
                if (nz->plain[b] ||
                    (nz->plain_unless[b] && (r + 1 == n || !((nz->cont[b][s[r + 1] >> 6] >> (s[r + 1] & 63)) & 1)))) {
                    *o++ = b;
                    r++;
                    prev_space = false;
                    continue;
                }
                if (b == ' ' && nz->plain_space) {
                    if (!prev_space) {
                        if (sp->escape_ws) {
                            memcpy(o, SPACE_SYM, 3);
                            o += 3;
                        } else {
                            *o++ = ' ';
                        }
                    }
                    prev_space = sp->remove_extra_ws;
                    r++;
                    continue;
                }
                break;
            }
            if (b >= 0xc2 && b < 0xf0) {
                size_t cl = tk_spm_valid_char(s + r, n - r);
                if (!cl) break;
                uint32_t cp = cl == 2
                                  ? (uint32_t)(b & 0x1f) << 6 | (s[r + 1] & 0x3f)
                                  : (uint32_t)(b & 0x0f) << 12 | (uint32_t)(s[r + 1] & 0x3f) << 6 | (s[r + 2] & 0x3f);
                if (!((nz->ident[cp >> 6] >> (cp & 63)) & 1)) break;
                memcpy(o, s + r, cl);
                o += cl;
                r += cl;
                prev_space = false;
                continue;
            }
            break;
        }
        out->len += (size_t)(o - o0);
        if (out->len > cap) return TK_ERR_DOC_EXPAND;
        s += r;
        n -= r;
        if (!n) break;
        q = norm_prefix(m, nz, s, n, &len, &used);
        while (prev_space && len && q[0] == ' ') {
            q++;
            len--;
        }
        if (len) {
            if (sp->escape_ws) {
                size_t a = 0;
                for (size_t k = 0; k < len; k++)
                    if (q[k] == ' ') {
                        if ((rc = put(out, q + a, k - a)) || (rc = put(out, SPACE_SYM, 3))) return rc;
                        a = k + 1;
                    }
                if ((rc = put(out, q + a, len - a))) return rc;
            } else if ((rc = put(out, q, len))) {
                return rc;
            }
            prev_space = q[len - 1] == ' ';
        }
        s += used;
        n -= used;
        if (!sp->remove_extra_ws) prev_space = false;
    }
    if (sp->remove_extra_ws)
        while (out->len >= wsl && memcmp(out->data + out->len - wsl, ws, wsl) == 0) out->len -= wsl;
    if (nz->ws_suffix && sp->add_dummy_prefix) rc = put(out, ws, wsl);
    return rc;
#undef put
}

int tk_spm_normalize(const tk_spm *m, const uint8_t *s, size_t n, tk_bytes *out) {
    return normalize(m, &m->norm, s, n, n, out);
}

/* ---- bpe::Model::Encode ---------------------------------------------------- */

#define ID_LATER (TK_NO_RANK - 1) /* sym.id not looked up yet (bpe_run does) */
typedef struct {
    uint32_t off, len;
    uint32_t id; /* its piece among NORMAL/USER_DEFINED/UNUSED, TK_NO_RANK if none */
    int32_t prev, next;
    bool freeze;
} sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t id;
    uint32_t size;
} agenda_item;

/* top = highest score, then leftmost */
static inline bool ag_before(const agenda_item *a, const agenda_item *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    sym *sy;
    size_t sy_cap;
    agenda_item *ag;
    size_t ag_n, ag_cap;
    uint32_t *rev; /* per UNUSED piece: (left sym off, left len, right off, right len), 0 len = unset */
    size_t rev_cap;
    uint32_t *stack;
    size_t stack_cap;
    tk_bytes norm;
    struct wc_entry_s *wc;
} spm_scratch;

static int ag_push(spm_scratch *w, agenda_item it) {
    if (w->ag_n == w->ag_cap) {
        size_t c = w->ag_cap ? w->ag_cap * 2 : 256;
        agenda_item *p = realloc(w->ag, c * sizeof *p);
        if (!p) return TK_ERR_NOMEM;
        w->ag = p;
        w->ag_cap = c;
    }
    size_t i = w->ag_n++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!ag_before(&it, &w->ag[p])) break;
        w->ag[i] = w->ag[p];
        i = p;
    }
    w->ag[i] = it;
    return TK_OK;
}

static agenda_item ag_pop(spm_scratch *w) {
    agenda_item top = w->ag[0], last = w->ag[--w->ag_n];
    size_t i = 0, n = w->ag_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ag_before(&w->ag[c + 1], &w->ag[c])) c++;
        if (!ag_before(&w->ag[c], &last)) break;
        w->ag[i] = w->ag[c];
        i = c;
    }
    if (n) w->ag[i] = last;
    return top;
}

static int maybe_add(const tk_spm *m, spm_scratch *w, const uint8_t *t, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return TK_OK;
    const sym *a = &w->sy[l], *b = &w->sy[r];
    if (a->freeze || b->freeze) return TK_OK;
    uint32_t size = a->len + b->len;
    uint32_t id = map_get(m, m->nmap, m->nmask, t + a->off, size);
    if (id == TK_NO_RANK) return TK_OK;
    if (m->type[id] == SP_UNUSED) {
        uint32_t *e = &w->rev[4 * (size_t)m->unused_idx[id]];
        e[0] = a->off;
        e[1] = a->len;
        e[2] = b->off;
        e[3] = b->len;
    }
    return ag_push(w, (agenda_item){m->score[id], l, r, id, size});
}

/* Each final piece goes to emit(id, offset, length in the normalized text). */
typedef int (*emit_fn)(void *u, uint32_t id, uint32_t off, uint32_t len);

static int resegment(const tk_spm *m, spm_scratch *w, const uint8_t *t, uint32_t off, uint32_t len, emit_fn emit,
                     void *u) {
    /* explicit stack of (off, len) pairs, right part pushed first */
    size_t sp = 0;
    if (w->stack_cap < 2) {
        uint32_t *s = realloc(w->stack, 64 * sizeof *s);
        if (!s) return TK_ERR_NOMEM;
        w->stack = s;
        w->stack_cap = 64;
    }
    w->stack[sp++] = off;
    w->stack[sp++] = len;
    while (sp) {
        uint32_t l = w->stack[--sp], o = w->stack[--sp];
        uint32_t id = piece_id(m, t + o, l);
        if (id == TK_NO_RANK || m->type[id] != SP_UNUSED || !w->rev[4 * (size_t)m->unused_idx[id] + 1]) {
            int rc = emit(u, id == TK_NO_RANK ? m->unk_id : id, o, l);
            if (rc) return rc;
            continue;
        }
        const uint32_t *e = &w->rev[4 * (size_t)m->unused_idx[id]];
        if (sp + 4 > w->stack_cap) {
            uint32_t *s = realloc(w->stack, w->stack_cap * 2 * sizeof *s);
            if (!s) return TK_ERR_NOMEM;
            w->stack = s;
            w->stack_cap *= 2;
        }
        w->stack[sp++] = e[2];
        w->stack[sp++] = e[3];
        w->stack[sp++] = e[0];
        w->stack[sp++] = e[1];
    }
    return TK_OK;
}

/* BPE over symbols [first .. last] of w->sy (a linked run), then emit. */
static int bpe_run(const tk_spm *m, spm_scratch *w, const uint8_t *t, int32_t first, int32_t last, emit_fn emit,
                   void *u) {
    int rc;
    w->ag_n = 0;
    for (int32_t i = first; i <= last; i++) /* looked up only now: a cached word never needs them */
        w->sy[i].id = map_get(m, m->nmap, m->nmask, t + w->sy[i].off, w->sy[i].len);
    for (int32_t i = first; i < last; i++)
        if ((rc = maybe_add(m, w, t, i, i + 1))) return rc;
    while (w->ag_n) {
        agenda_item top = ag_pop(w);
        sym *a = &w->sy[top.left], *b = &w->sy[top.right];
        if (!a->len || !b->len || a->len + b->len != top.size) continue;
        a->len += b->len;
        a->id = top.id;
        a->next = b->next;
        if (b->next >= 0) w->sy[b->next].prev = top.left;
        b->len = 0;
        if ((rc = maybe_add(m, w, t, a->prev, top.left)) || (rc = maybe_add(m, w, t, top.left, a->next))) return rc;
    }
    for (int32_t i = first; i >= 0 && i <= last; i = w->sy[i].next) {
        const sym *y = &w->sy[i];
        if (y->id != TK_NO_RANK && !m->n_unused) { /* PieceToId without looking the piece up again */
            if ((rc = emit(u, m->shadow ? m->shadow[y->id] : y->id, y->off, y->len))) return rc;
        } else if ((rc = resegment(m, w, t, y->off, y->len, emit, u))) {
            return rc;
        }
    }
    return TK_OK;
}

/* ---- SentencePieceProcessor::Encode: unknown pieces ------------------------ */

typedef struct {
    const tk_spm *m;
    const uint8_t *t;
    tk_ids *out;
    bool prev_unk;
} emit_ctx;

static int emit_id(void *u, uint32_t id, uint32_t off, uint32_t len) {
    emit_ctx *c = u;
    const tk_spm *m = c->m;
    bool unk = id == m->unk_id;
    if (unk && m->byte_fallback) {
        if (tk_ids_reserve(c->out, len)) return TK_ERR_NOMEM;
        for (uint32_t k = 0; k < len; k++) c->out->ids[c->out->len++] = m->byte_id[c->t[off + k]];
    } else if (!(unk && c->prev_unk)) { /* a run of unknown pieces is one unk */
        if (c->out->len == c->out->cap && tk_ids_reserve(c->out, 1)) return TK_ERR_NOMEM;
        c->out->ids[c->out->len++] = id;
    }
    c->prev_unk = unk;
    return TK_OK;
}

/* Per-thread word cache: a word (the symbols between two cuts) of up to
 * WC_KEY bytes -> its final pieces as (id, offset, length), direct mapped;
 * words recur, and a hit skips the merge loop. Entries carry the
 * tokenizer's serial number, never its address. */
#define WC_KEY 40
#define WC_PIECES 12
#define WC_BITS 14
typedef struct wc_entry_s {
    uint64_t serial, hash;
    uint8_t klen, np;
    uint8_t key[WC_KEY];
    uint8_t off[WC_PIECES], len[WC_PIECES];
    uint32_t id[WC_PIECES];
} wc_entry;

typedef struct {
    uint32_t id[WC_PIECES];
    uint8_t off[WC_PIECES], len[WC_PIECES];
    uint32_t np, base;
    bool over;
} wc_rec;

static int emit_rec(void *u, uint32_t id, uint32_t off, uint32_t len) {
    wc_rec *r = u;
    if (r->np == WC_PIECES) {
        r->over = true;
        return TK_OK;
    }
    r->id[r->np] = id;
    r->off[r->np] = (uint8_t)(off - r->base);
    r->len[r->np++] = (uint8_t)len;
    return TK_OK;
}

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    spm_scratch *w = p;
    if (!w) return;
    free(w->sy);
    free(w->ag);
    free(w->rev);
    free(w->stack);
    free(w->wc);
    tk_bytes_free(&w->norm);
    free(w);
}

static void key_init(void) { pthread_key_create(&g_key, scratch_free); }

static spm_scratch *scratch(void) {
    pthread_once(&g_once, key_init);
    spm_scratch *w = pthread_getspecific(g_key);
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w || pthread_setspecific(g_key, w)) {
            free(w);
            return NULL;
        }
    }
    return w;
}

static int word_cached(const tk_spm *m, spm_scratch *w, const uint8_t *t, uint32_t wo, uint32_t wl, int32_t a,
                       int32_t b, emit_ctx *c) {
    if (!w->wc) {
        w->wc = tk_zalloc_written((size_t)1 << WC_BITS, sizeof *w->wc);
        if (!w->wc) return bpe_run(m, w, t, a, b, emit_id, c);
    }
    uint64_t h = tk_hash_bytes(t + wo, wl);
    wc_entry *e = &w->wc[h >> (64 - WC_BITS)];
    int rc;
    if (e->serial == m->serial && e->hash == h && e->klen == wl && memcmp(e->key, t + wo, wl) == 0) {
        for (uint32_t k = 0; k < e->np; k++)
            if ((rc = emit_id(c, e->id[k], wo + e->off[k], e->len[k]))) return rc;
        return TK_OK;
    }
    wc_rec r = {.base = wo};
    if ((rc = bpe_run(m, w, t, a, b, emit_rec, &r))) return rc;
    if (r.over) {                          /* more pieces than an entry holds: run it again, emitting */
        for (int32_t k = a; k <= b; k++) { /* the symbols, as they were */
            w->sy[k].len = k < b ? w->sy[k + 1].off - w->sy[k].off : wo + wl - w->sy[k].off;
            w->sy[k].prev = k == a ? -1 : k - 1;
            w->sy[k].next = k == b ? -1 : k + 1;
            w->sy[k].id = ID_LATER;
        }
        return bpe_run(m, w, t, a, b, emit_id, c);
    }
    e->serial = m->serial;
    e->hash = h;
    e->klen = (uint8_t)wl;
    e->np = (uint8_t)r.np;
    memcpy(e->key, t + wo, wl);
    memcpy(e->id, r.id, r.np * sizeof *r.id);
    memcpy(e->off, r.off, r.np);
    memcpy(e->len, r.len, r.np);
    for (uint32_t k = 0; k < r.np; k++)
        if ((rc = emit_id(c, r.id[k], wo + r.off[k], r.len[k]))) return rc;
    return TK_OK;
}

static bool starts_ws(const uint8_t *p, size_t n, const uint8_t *ws, size_t wsl) {
    return n >= wsl && memcmp(p, ws, wsl) == 0;
}
static bool ends_ws(const uint8_t *p, size_t n, const uint8_t *ws, size_t wsl) {
    return n >= wsl && memcmp(p + n - wsl, ws, wsl) == 0;
}

int tk_spm_encode(const tk_tokenizer *tok, const uint8_t *s, size_t n, tk_ids *out) {
    const tk_spm *m = SPM_OF(tok);
    spm_scratch *w = scratch();
    if (!w) return TK_ERR_NOMEM;
    int rc = normalize(m, &m->norm, s, n, n, &w->norm);
    if (rc) return rc;
    const uint8_t *t = w->norm.data;
    size_t tn = w->norm.len;
    if (!tn) return TK_OK;
    if (tn > INT32_MAX / 2) return TK_ERR_LIMIT;
    if (m->n_unused) {
        if (w->rev_cap < m->n_unused) {
            uint32_t *p = realloc(w->rev, (size_t)m->n_unused * 4 * sizeof *p);
            if (!p) return TK_ERR_NOMEM;
            w->rev = p;
            w->rev_cap = m->n_unused;
        }
        memset(w->rev, 0, (size_t)m->n_unused * 4 * sizeof *w->rev);
    }
    emit_ctx c = {m, t, out, false};
    const uint8_t *ws = m->norm.spec.escape_ws ? SPACE_SYM : (const uint8_t *)" ";
    size_t wsl = m->norm.spec.escape_ws ? 3 : 1;
    /* Symbols: a user-defined symbol (frozen) or one character by its lead
     * byte. With safe cuts (m->split) each word is merged as soon as it
     * ends, so the symbol buffer holds one word; else the whole text. */
    int32_t ns = 0;
    for (size_t i = 0; i <= tn;) {
        sym y = {0};
        if (i < tn) {
            size_t l = user_match(m, t + i, tn - i);
            y.freeze = l > 0;
            if (!l) {
                l = one_char_len(t[i]);
                if (l > tn - i) l = tn - i;
            }
            y.off = (uint32_t)i;
            y.len = (uint32_t)l;
            y.id = ID_LATER;
        }
        bool cut = i == tn;
        if (!cut && ns && m->split) {
            const sym *x = &w->sy[ns - 1];
            if (x->freeze || y.freeze) cut = true;
            else if (!m->norm.ws_suffix)
                cut = starts_ws(t + y.off, y.len, ws, wsl) && !ends_ws(t + x->off, x->len, ws, wsl);
            else cut = ends_ws(t + x->off, x->len, ws, wsl) && !starts_ws(t + y.off, y.len, ws, wsl);
        }
        if (cut && ns) {
            w->sy[ns - 1].next = -1;
            uint32_t wo = w->sy[0].off, wl = w->sy[ns - 1].off + w->sy[ns - 1].len - wo;
            if (m->split && wl <= WC_KEY) rc = word_cached(m, w, t, wo, wl, 0, ns - 1, &c);
            else rc = bpe_run(m, w, t, 0, ns - 1, emit_id, &c);
            if (rc) return rc;
            ns = 0;
        }
        if (i == tn) break;
        if ((size_t)ns == w->sy_cap) {
            size_t cap = w->sy_cap ? w->sy_cap * 2 : 1024;
            sym *p = realloc(w->sy, cap * sizeof *p);
            if (!p) return TK_ERR_NOMEM;
            w->sy = p;
            w->sy_cap = cap;
        }
        y.prev = ns - 1;
        y.next = ns + 1;
        w->sy[ns++] = y;
        i += y.len;
    }
    return TK_OK;
}

/* ---- SentencePieceProcessor::Decode ---------------------------------------- */

static int put_bytes_run(const uint8_t *b, size_t n, tk_bytes *out, size_t cap) {
    int rc = TK_OK;
    for (size_t i = 0; i < n && !rc;) {
        size_t c = tk_spm_valid_char(b + i, n - i);
        if (!c) {
            rc = tk_bytes_put_capped(out, "\xef\xbf\xbd", 3, cap);
            i++;
        } else {
            rc = tk_bytes_put_capped(out, b + i, c, cap);
            i += c;
        }
    }
    return rc;
}

/* raw: byte pieces as their bytes, unchecked (the streaming decoder holds an
 * incomplete character back until the next feed completes it). */
static int spm_decode(const tk_tokenizer *tok, const uint32_t *ids, size_t n, bool first, bool raw, tk_bytes *out) {
    const tk_spm *m = SPM_OF(tok);
    size_t in0 = 0; /* the pieces' bytes: what the decoded text and the denormalizer are bounded by */
    for (size_t k = 0; k < n; k++) {
        if (ids[k] >= m->n) return TK_ERR_RANGE;
        in0 += m->plen[ids[k]];
    }
    /* the text before the denormalizer: pieces with the space symbol as ' ',
     * U+FFFD for bad bytes, the unknown piece's surface (from the file) */
    const size_t cap = tk_expand_cap(in0, in0);
#define put(b, p, k) tk_bytes_put_capped(b, p, k, cap)
    tk_bytes text = {0};
    uint8_t *bytes = NULL;
    size_t nb = 0;
    int rc = TK_OK;
    bool bos_ws = first, seen = false;
    const spm_spec *sp = &m->norm.spec;
    for (size_t k = 0; k <= n && !rc; k++) {
        uint32_t id = TK_NO_RANK;
        if (k < n) {
            id = piece_id(m, m->piece[ids[k]], m->plen[ids[k]]); /* Decode looks the piece up again */
            if (id == TK_NO_RANK) id = m->unk_id;
            if (m->type[id] == SP_BYTE) {
                if (!bytes && !(bytes = malloc(n))) {
                    rc = TK_ERR_NOMEM;
                    break;
                }
                bytes[nb++] = (uint8_t)byte_of_piece(m->piece[id], m->plen[id]);
                continue;
            }
        }
        if ((rc = raw ? put(&text, bytes, nb) : put_bytes_run(bytes, nb, &text, cap))) break;
        nb = 0;
        if (k == n) break;
        if (seen || text.len) bos_ws = false;
        const uint8_t *p = m->piece[ids[k]];
        size_t pl = m->plen[ids[k]];
        seen = false;
        if (m->type[id] == SP_CONTROL) continue;
        if (m->type[id] == SP_UNKNOWN) {
            if (id == m->unk_id && pl == m->plen[m->unk_id] && memcmp(p, m->piece[m->unk_id], pl) == 0)
                rc = m->has_unk_surface ? put(&text, m->unk_surface, m->unk_surface_len)
                                        : put(&text, " \xe2\x81\x87 ", 5);
            else rc = put(&text, p, pl);
            continue;
        }
        if (bos_ws && (sp->add_dummy_prefix || sp->remove_extra_ws)) {
            if (pl >= 3 && memcmp(p, SPACE_SYM, 3) == 0) {
                p += 3;
                pl -= 3;
                seen = !sp->remove_extra_ws;
            }
        }
        size_t a = 0;
        for (size_t i = 0; i + 3 <= pl && !rc;) {
            if (memcmp(p + i, SPACE_SYM, 3) == 0) {
                if (!(rc = put(&text, p + a, i - a))) rc = put(&text, " ", 1);
                i += 3;
                a = i;
            } else {
                i++;
            }
        }
        if (!rc) rc = put(&text, p + a, pl - a);
    }
#undef put
    free(bytes);
    if (!rc && m->has_denorm) {
        tk_bytes d = {0};
        rc = normalize(NULL, &m->denorm, text.data, text.len, in0, &d);
        if (!rc) rc = put(out, d.data, d.len);
        tk_bytes_free(&d);
    } else if (!rc) {
        rc = put(out, text.data, text.len);
    }
    tk_bytes_free(&text);
    return rc;
}

int tk_spm_decode(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out) {
    return spm_decode(t, ids, n, first, false, out);
}

int tk_spm_decode_stream(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out) {
    return spm_decode(t, ids, n, first, true, out);
}

/* ---- loading ---------------------------------------------------------------- */

/* Inside a loading phase (which has an spm_load *L): report and return. */
#define FAIL(code, ...)                                                                                                \
    do {                                                                                                               \
        int fail_rc_ = (code);                                                                                         \
        tk_set_err(L->err, L->errlen, __VA_ARGS__);                                                                    \
        return fail_rc_;                                                                                               \
    } while (0)

static void shown(const uint8_t *p, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (p[i] < 0x20 || p[i] == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
        else out[o++] = (char)p[i];
    }
    out[o] = 0;
}

typedef struct {
    int64_t model_type, unk_id, bos_id, eos_id, pad_id;
    bool byte_fallback, ws_suffix, has_unk_surface;
    const uint8_t *unk_surface, *pieces_named[4];
    size_t unk_surface_len, pieces_named_len[4];
} trainer;

static int parse_trainer(const uint8_t *s, size_t n, trainer *tr) {
    pb r = {s, s + n};
    pb_field f;
    while (r.p < r.end) {
        if (pb_next(&r, &f)) return -1;
        if (f.wt == 0) {
            switch (f.num) {
            case 3: tr->model_type = (int32_t)f.v; break;
            case 35: tr->byte_fallback = f.v != 0; break;
            case 24: tr->ws_suffix = f.v != 0; break;
            case 40: tr->unk_id = (int32_t)f.v; break;
            case 41: tr->bos_id = (int32_t)f.v; break;
            case 42: tr->eos_id = (int32_t)f.v; break;
            case 43: tr->pad_id = (int32_t)f.v; break;
            }
        } else if (f.wt == 2) {
            if (f.num == 44) {
                tr->has_unk_surface = true;
                tr->unk_surface = f.s;
                tr->unk_surface_len = f.n;
            } else if (f.num >= 45 && f.num <= 48) {
                tr->pieces_named[f.num - 45] = f.s;
                tr->pieces_named_len[f.num - 45] = f.n;
            }
        }
    }
    return 0;
}

static int parse_spec(const uint8_t *s, size_t n, spm_spec *sp) {
    pb r = {s, s + n};
    pb_field f;
    while (r.p < r.end) {
        if (pb_next(&r, &f)) return -1;
        if (f.wt == 2 && f.num == 1) {
            sp->name = f.s;
            sp->name_len = f.n;
        } else if (f.wt == 2 && f.num == 2) {
            sp->cmap = f.s;
            sp->cmap_len = f.n;
        } else if (f.wt == 0 && f.num == 3) {
            sp->add_dummy_prefix = f.v != 0;
        } else if (f.wt == 0 && f.num == 4) {
            sp->remove_extra_ws = f.v != 0;
        } else if (f.wt == 0 && f.num == 5) {
            sp->escape_ws = f.v != 0;
        }
    }
    return 0;
}

static void spm_free(tk_spm *m) {
    if (!m) return;
    free(m->file);
    free(m->piece);
    free(m->plen);
    free(m->score);
    free(m->type);
    free(m->nmap);
    free(m->rmap);
    free(m->unused_idx);
    free(m->shadow);
    free(m->norm.map.units);
    free(m->denorm.map.units);
    free(m);
}

void tk_spm_free(tk_spm *m) { spm_free(m); }

static int map_build(tk_spm *m, bool reserved, uint32_t *dup) {
    size_t cnt = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        bool normal = m->type[i] == SP_NORMAL || m->type[i] == SP_USER || m->type[i] == SP_UNUSED;
        cnt += normal != reserved && m->type[i] != SP_DROPPED;
    }
    size_t cap = 16;
    while (cap < cnt * 2) cap *= 2;
    uint64_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return TK_ERR_NOMEM;
    size_t mask = cap - 1;
    for (uint32_t i = 0; i < m->n; i++) {
        bool normal = m->type[i] == SP_NORMAL || m->type[i] == SP_USER || m->type[i] == SP_UNUSED;
        if (normal == reserved || m->type[i] == SP_DROPPED) continue;
        uint64_t h = h64(m->piece[i], m->plen[i]);
        size_t k = h & mask;
        for (;; k = (k + 1) & mask) {
            uint64_t s = slots[k];
            if (!s) break;
            uint32_t j = (uint32_t)s - 1;
            if (m->plen[j] == m->plen[i] && memcmp(m->piece[j], m->piece[i], m->plen[i]) == 0) {
                free(slots);
                *dup = i;
                return TK_ERR_DUP_RANK;
            }
        }
        slots[k] = (h >> 32) << 32 | (uint64_t)(i + 1);
    }
    if (reserved) {
        m->rmap = slots;
        m->rmask = mask;
    } else {
        m->nmap = slots;
        m->nmask = mask;
    }
    return TK_OK;
}

static int byte_of_piece(const uint8_t *p, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    const char *a = memchr(hex, p[3], 16), *b = memchr(hex, p[4], 16);
    if (!a || !b || !p[3] || !p[4]) return -1;
    return (int)((a - hex) * 16 + (b - hex));
}

/* Does the space symbol occur in a piece only where a word cut cannot
 * separate it from its neighbour? (see tk_spm_encode) */
static bool split_ok(const tk_spm *m) {
    if (m->n_unused) return false;
    const uint8_t *ws = m->norm.spec.escape_ws ? SPACE_SYM : (const uint8_t *)" ";
    size_t wsl = m->norm.spec.escape_ws ? 3 : 1;
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->type[i] != SP_NORMAL && m->type[i] != SP_USER) continue;
        const uint8_t *p = m->piece[i];
        size_t n = m->plen[i];
        for (size_t k = 0; k + wsl <= n; k++) {
            if (memcmp(p + k, ws, wsl) != 0) continue;
            if (!m->norm.ws_suffix) {
                /* every space symbol after the start follows another */
                if (k > 0 && !(k >= wsl && memcmp(p + k - wsl, ws, wsl) == 0)) return false;
            } else {
                /* every space symbol before the end is followed by another */
                if (k + wsl < n && !(k + 2 * wsl <= n && memcmp(p + k + wsl, ws, wsl) == 0)) return false;
            }
        }
    }
    return true;
}

static void fingerprint(tk_tokenizer *t, const tk_spm *m) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, 32, t->fingerprint);
    uint8_t hdr[16] = {'s',
                       'p',
                       'm',
                       1,
                       (uint8_t)m->byte_fallback,
                       (uint8_t)m->norm.ws_suffix,
                       (uint8_t)m->has_unk_surface,
                       (uint8_t)m->has_denorm};
    memcpy(hdr + 8, &m->n, 4);
    hdr[12] = m->model_type == MT_UNIGRAM; /* 0 for BPE: its fingerprints stay what they were */
    sha256_update(&c, sizeof hdr, hdr);
    for (uint32_t i = 0; i < m->n; i++) {
        uint32_t l = m->plen[i];
        sha256_update(&c, 4, (const uint8_t *)&l);
        sha256_update(&c, l, m->piece[i]);
        sha256_update(&c, 4, (const uint8_t *)&m->score[i]);
        sha256_update(&c, 1, &m->type[i]);
    }
    const spm_spec *sp[2] = {&m->norm.spec, &m->denorm.spec};
    for (int k = 0; k < 2; k++) {
        uint8_t fl[3] = {sp[k]->add_dummy_prefix, sp[k]->remove_extra_ws, sp[k]->escape_ws};
        uint64_t l = sp[k]->cmap_len;
        sha256_update(&c, 3, fl);
        sha256_update(&c, 8, (const uint8_t *)&l);
        if (l) sha256_update(&c, l, sp[k]->cmap);
    }
    uint64_t l = m->unk_surface_len;
    sha256_update(&c, 8, (const uint8_t *)&l);
    if (l) sha256_update(&c, l, m->unk_surface);
    sha256_digest(&c, 32, t->fingerprint);
}

bool tk_spm_sniff(const uint8_t *p, size_t n) {
    /* field 1 (pieces), length-delimited, whose message starts with field 1
     * (piece) length-delimited too: 0x0a <varint> 0x0a */
    if (n < 3 || p[0] != 0x0a) return false;
    pb r = {p + 1, p + n};
    uint64_t len;
    if (pb_varint(&r, &len) || len < 2) return false;
    return r.p < r.end && *r.p == 0x0a;
}

/* What tk_load_spm's phases share: where errors go, and what pass 1 read. */
typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    trainer tr;
    spm_spec nspec, dspec;
    bool has_trainer;
    size_t np; /* pieces counted in pass 1 */
} spm_load;

/* pass 1: count pieces, read the specs */
static int load_scan(const tk_spm *m, spm_load *L) {
    const char *path = L->path;
    pb r = {m->file, m->file + m->file_len};
    pb_field f;
    while (r.p < r.end) {
        if (pb_next(&r, &f))
            FAIL(TK_ERR_FORMAT, "%s: not a SentencePiece model: malformed protobuf at byte %zu", path,
                 (size_t)(r.p - m->file));
        if (f.wt != 2) continue;
        if (f.num == 1) {
            L->np++;
        } else if (f.num == 2) {
            L->has_trainer = true;
            if (parse_trainer(f.s, f.n, &L->tr)) FAIL(TK_ERR_FORMAT, "%s: trainer_spec: malformed protobuf", path);
        } else if (f.num == 3) {
            if (parse_spec(f.s, f.n, &L->nspec)) FAIL(TK_ERR_FORMAT, "%s: normalizer_spec: malformed protobuf", path);
        } else if (f.num == 5) {
            if (parse_spec(f.s, f.n, &L->dspec)) FAIL(TK_ERR_FORMAT, "%s: denormalizer_spec: malformed protobuf", path);
        }
    }
    return TK_OK;
}

/* Refuse what is not a BPE or UNIGRAM model with a vocabulary we can hold. */
static int load_check(const spm_load *L) {
    const char *path = L->path;
    if (!L->np) FAIL(TK_ERR_FORMAT, "%s: not a SentencePiece model: no pieces", path);
    if (L->tr.model_type != MT_BPE && L->tr.model_type != MT_UNIGRAM) {
        static const char *const mt[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
        FAIL(TK_ERR_UNSUPPORTED,
             "%s: trainer_spec.model_type: SentencePiece model type %s is not supported (only BPE and UNIGRAM)", path,
             L->tr.model_type >= 1 && L->tr.model_type <= 4 ? mt[L->tr.model_type] : "unknown");
    }
    if (L->np > TK_MAX_VOCAB) FAIL(TK_ERR_LIMIT, "%s: more than %u pieces", path, TK_MAX_VOCAB);
    return TK_OK;
}

/* pass 2: the pieces (the protobuf was checked in pass 1) */
static int load_pieces(tk_spm *m, const spm_load *L) {
    const char *path = L->path;
    size_t np = L->np;
    m->n = (uint32_t)np;
    m->piece = malloc(np * sizeof *m->piece);
    m->plen = malloc(np * sizeof *m->plen);
    m->score = malloc(np * sizeof *m->score);
    m->type = malloc(np);
    if (!m->piece || !m->plen || !m->score || !m->type) FAIL(TK_ERR_NOMEM, "%s: out of memory", path);
    pb r = {m->file, m->file + m->file_len};
    pb_field f;
    size_t i = 0;
    while (r.p < r.end) {
        pb_next(&r, &f); /* checked in pass 1 */
        if (f.wt != 2 || f.num != 1) continue;
        const uint8_t *ps = (const uint8_t *)"";
        size_t pn = 0;
        float sc = 0;
        int ty = SP_NORMAL;
        pb q = {f.s, f.s + f.n};
        pb_field g;
        while (q.p < q.end) {
            if (pb_next(&q, &g)) FAIL(TK_ERR_FORMAT, "%s: pieces[%zu]: malformed protobuf", path, i);
            if (g.num == 1 && g.wt == 2) {
                ps = g.s;
                pn = g.n;
            } else if (g.num == 2 && g.wt == 5) {
                uint32_t v = (uint32_t)g.v;
                memcpy(&sc, &v, 4);
            } else if (g.num == 3 && g.wt == 0) {
                /* an enum value protobuf does not know leaves the default */
                if (g.v >= 1 && g.v <= 6) ty = (int)g.v;
            }
        }
        if (!pn) FAIL(TK_ERR_FORMAT, "%s: pieces[%zu]: empty piece", path, i);
        if (memchr(ps, 0, pn)) {
            /* sentencepiece 0.2.3 loads a piece that is one NUL byte when the
             * model has byte fallback (it is made UNUSED: conversion scripts
             * wrote "\0" beside <0x00>, InternLM's V7_sft.model has one) or
             * is UNUSED already, and leaves it out of its piece maps; any
             * other NUL it refuses */
            if (pn == 1 && (L->tr.byte_fallback || ty == SP_UNUSED)) ty = SP_DROPPED;
            else FAIL(TK_ERR_FORMAT, "%s: pieces[%zu]: piece contains a NUL byte", path, i);
        }
        if (pn >= SPM_MAX_PIECE)
            FAIL(TK_ERR_LIMIT, "%s: pieces[%zu]: piece of %zu bytes (sentencepiece's limit: %d)", path, i, pn,
                 SPM_MAX_PIECE - 1);
        if (isnan(sc)) FAIL(TK_ERR_FORMAT, "%s: pieces[%zu]: score is NaN", path, i);
        m->piece[i] = ps;
        m->plen[i] = (uint32_t)pn;
        m->score[i] = sc;
        m->type[i] = (uint8_t)ty;
        i++;
    }
    return TK_OK;
}

/* InitializePieces: the piece maps, unk, byte pieces, user-defined and
 * unused pieces */
static int load_index(tk_spm *m, const spm_load *L) {
    const char *path = L->path;
    char sb[160];
    int rc;
    uint32_t dup;
    for (int res = 0; res < 2; res++)
        if ((rc = map_build(m, res, &dup))) {
            if (rc == TK_ERR_DUP_RANK) {
                shown(m->piece[dup], m->plen[dup], sb, sizeof sb);
                FAIL(rc, "%s: pieces[%u]: \"%s\" is already defined", path, dup, sb);
            }
            FAIL(rc, "%s: out of memory", path);
        }
    m->unk_id = TK_NO_RANK;
    m->model_type = (int)L->tr.model_type;
    m->byte_fallback = L->tr.byte_fallback;
    for (int b = 0; b < 256; b++) m->byte_id[b] = TK_NO_RANK;
    for (uint32_t i = 0; i < m->n; i++) {
        int ty = m->type[i];
        if (ty == SP_UNKNOWN) {
            if (m->unk_id != TK_NO_RANK) FAIL(TK_ERR_FORMAT, "%s: pieces[%u]: unk is already defined", path, i);
            m->unk_id = i;
        } else if (ty == SP_BYTE) {
            shown(m->piece[i], m->plen[i], sb, sizeof sb);
            if (!m->byte_fallback)
                FAIL(TK_ERR_FORMAT, "%s: pieces[%u]: byte piece \"%s\" although trainer_spec.byte_fallback is false",
                     path, i, sb);
            int b = byte_of_piece(m->piece[i], m->plen[i]);
            if (b < 0) FAIL(TK_ERR_FORMAT, "%s: pieces[%u]: byte piece \"%s\" is not <0xNN>", path, i, sb);
            m->byte_id[b] = i; /* unique: the reserved map refused duplicates */
        } else if (ty == SP_USER) {
            m->user_first[m->piece[i][0] >> 6] |= 1ull << (m->piece[i][0] & 63);
            if (m->plen[i] > m->user_maxlen) m->user_maxlen = m->plen[i];
        } else if (ty == SP_UNUSED) {
            m->n_unused++;
        }
    }
    if (m->unk_id == TK_NO_RANK) FAIL(TK_ERR_FORMAT, "%s: pieces: no piece of type UNKNOWN (unk is not defined)", path);
    if (m->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (m->byte_id[b] == TK_NO_RANK)
                FAIL(TK_ERR_FORMAT, "%s: trainer_spec.byte_fallback is true but piece <0x%02X> is missing", path, b);
    if (m->n_unused) {
        m->unused_idx = malloc((size_t)m->n * sizeof *m->unused_idx);
        if (!m->unused_idx) FAIL(TK_ERR_NOMEM, "%s: out of memory", path);
        uint32_t k = 0;
        for (uint32_t i = 0; i < m->n; i++) m->unused_idx[i] = m->type[i] == SP_UNUSED ? k++ : 0;
    }
    return TK_OK;
}

/* The charsmap trie's step from node id by byte c (tk_cmap_longest's):
 * the next node id, or UINT32_MAX; *leaf: a key ends there. */
static uint32_t cmap_step(const tk_cmap *c, uint32_t id, uint8_t b, bool *leaf) {
    id ^= b;
    if (id >= c->n_units) return UINT32_MAX;
    uint32_t u = c->units[id];
    if ((u & (0x80000000u | 0xffu)) != b) return UINT32_MAX;
    *leaf = (u >> 8) & 1;
    return id ^ tk_du_offset(u);
}

/* nz->plain: the ASCII bytes (not ' ') at which neither a charsmap rule
 * (no transition from the trie's root) nor one of m's user-defined symbols
 * starts; nz->plain_unless / cont and nz->ident (spm_internal.h): what
 * else normalizes to itself, found by the same trie steps the walk takes */
static void plain_ascii(spm_norm *nz, const tk_spm *m) {
    const tk_cmap *c = &nz->map;
    uint32_t root = c->n_units ? tk_du_offset(c->units[0]) : 0;
    for (uint32_t b = 0; b < 128; b++) {
        bool rule = false, leaf = false;
        uint32_t nb = UINT32_MAX;
        if (c->n_units) {
            uint32_t id = tk_du_offset(c->units[0]) ^ b;
            rule = id < c->n_units && (c->units[id] & (0x80000000u | 0xffu)) == b;
            nb = cmap_step(c, root, (uint8_t)b, &leaf);
        }
        bool user = m && ((m->user_first[b >> 6] >> (b & 63)) & 1);
        nz->plain[b] = b != ' ' && !rule && !user;
        if (b == ' ') nz->plain_space = !rule && !user;
        memset(nz->cont[b], 0, sizeof nz->cont[b]);
        nz->plain_unless[b] = b != ' ' && rule && nb != UINT32_MAX && !leaf && !user;
        if (nz->plain_unless[b])
            for (uint32_t x = 0; x < 256; x++) {
                bool l2;
                if (cmap_step(c, nb, (uint8_t)x, &l2) != UINT32_MAX) nz->cont[b][x >> 6] |= 1ull << (x & 63);
            }
    }
    nz->graphic_plain = true;
    for (uint32_t b = 0x21; b < 0x7f; b++)
        if (!nz->plain[b] && !(nz->plain_unless[b] && !nz->cont[b][0] && !nz->cont[b][1])) nz->graphic_plain = false;
    memset(nz->ident, 0, sizeof nz->ident);
    for (uint32_t cp = 0x80; cp < 0x10000; cp++) {
        if (cp >= 0xd800 && cp < 0xe000) continue;
        uint8_t u[3];
        size_t k = cp < 0x800 ? 2 : 3;
        if (k == 2) {
            u[0] = (uint8_t)(0xc0 | cp >> 6);
            u[1] = (uint8_t)(0x80 | (cp & 0x3f));
        } else {
            u[0] = (uint8_t)(0xe0 | cp >> 12);
            u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
            u[2] = (uint8_t)(0x80 | (cp & 0x3f));
        }
        if (m && ((m->user_first[u[0] >> 6] >> (u[0] & 63)) & 1)) continue;
        bool left = !c->n_units, leaf = false;
        uint32_t id = root;
        for (size_t j = 0; j < k && !left && !leaf; j++) {
            id = cmap_step(c, id, u[j], &leaf);
            left = id == UINT32_MAX;
        }
        if (left) nz->ident[cp >> 6] |= 1ull << (cp & 63);
    }
}

/* normalizer and denormalizer, unk surface, word splitting */
static int load_norm(tk_spm *m, const spm_load *L) {
    const char *path = L->path;
    int rc;
    m->norm.spec = L->nspec;
    m->norm.ws_suffix = L->tr.ws_suffix;
    if ((rc = tk_cmap_init(&m->norm.map, L->nspec.cmap, L->nspec.cmap_len)))
        FAIL(rc, "%s: normalizer_spec.precompiled_charsmap: %s", path,
             rc == TK_ERR_NOMEM ? "out of memory" : "broken (trie size beyond the blob)");
    m->denorm.spec = L->dspec;
    if (L->dspec.cmap_len) {
        m->has_denorm = true;
        if ((rc = tk_cmap_init(&m->denorm.map, L->dspec.cmap, L->dspec.cmap_len)))
            FAIL(rc, "%s: denormalizer_spec.precompiled_charsmap: %s", path,
                 rc == TK_ERR_NOMEM ? "out of memory" : "broken (trie size beyond the blob)");
    }
    plain_ascii(&m->norm, m);
    plain_ascii(&m->denorm, NULL);
    m->has_unk_surface = L->tr.has_unk_surface;
    m->unk_surface = L->tr.unk_surface;
    m->unk_surface_len = L->tr.unk_surface_len;
    m->split = split_ok(m);
    return TK_OK;
}

/* pieces shadowed by a reserved piece of the same text; the model's
 * <s>, </s> and <pad> (when they are CONTROL pieces) */
static int load_ids(tk_spm *m, const spm_load *L) {
    const char *path = L->path;
    for (uint32_t i = 0; i < m->n; i++) {
        bool normal = m->type[i] == SP_NORMAL || m->type[i] == SP_USER || m->type[i] == SP_UNUSED;
        uint32_t r = normal ? map_get(m, m->rmap, m->rmask, m->piece[i], m->plen[i]) : TK_NO_RANK;
        if (r == TK_NO_RANK) continue;
        if (!m->shadow) {
            if (!(m->shadow = malloc((size_t)m->n * sizeof *m->shadow))) FAIL(TK_ERR_NOMEM, "%s: out of memory", path);
            for (uint32_t k = 0; k < m->n; k++) m->shadow[k] = k;
        }
        m->shadow[i] = r;
    }
    static const char *const dflt[] = {"<s>", "</s>", "<pad>"};
    int32_t *dst[3] = {&m->bos_id, &m->eos_id, &m->pad_id};
    for (int k = 0; k < 3; k++) {
        const uint8_t *p = L->tr.pieces_named[k + 1];
        size_t pl = L->tr.pieces_named_len[k + 1];
        if (!p || !pl) {
            p = (const uint8_t *)dflt[k];
            pl = strlen(dflt[k]);
        }
        uint32_t id = map_get(m, m->rmap, m->rmask, p, pl);
        *dst[k] = id != TK_NO_RANK && m->type[id] == SP_CONTROL ? (int32_t)id : -1;
    }
    return TK_OK;
}

/* Fill the token arena (what each non-CONTROL piece decodes to on its own)
 * and the specials list (the CONTROL pieces). */
static void fill_tables(tk_tokenizer *t, const tk_spm *m, tk_special *sp, char *stext) {
    size_t off = 0, so = 0;
    uint32_t r = 0, c = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        const uint8_t *p = m->piece[i];
        size_t pl = m->plen[i];
        if (m->type[i] == SP_CONTROL) {
            memcpy(stext + so, p, pl);
            stext[so + pl] = 0;
            sp[c].text = stext + so;
            sp[c++].id = i;
            so += pl + 1;
            continue;
        }
        t->tok_off[r] = off;
        t->rank_to_id[r++] = i;
        if (m->type[i] == SP_BYTE) {
            t->arena[off++] = (uint8_t)byte_of_piece(p, pl);
            continue;
        }
        for (size_t k = 0; k < pl;) {
            if (m->type[i] != SP_UNKNOWN && k + 3 <= pl && memcmp(p + k, SPACE_SYM, 3) == 0) {
                t->arena[off++] = ' ';
                k += 3;
            } else {
                t->arena[off++] = p[k++];
            }
        }
    }
    t->tok_off[r] = off;
}

/* the tk_tokenizer: CONTROL pieces are its specials, the others its
 * tokens, whose bytes are what each decodes to on its own. *tp is set as
 * soon as it is allocated, so the caller frees it on failure. */
static int load_tokenizer(const tk_spm *m, tk_tokenizer **tp, const spm_load *L) {
    const char *path = L->path;
    int rc;
    tk_tokenizer *t = *tp = calloc(1, sizeof *t);
    if (!t) FAIL(TK_ERR_NOMEM, "%s: out of memory", path);
    t->eot = TK_NO_RANK;
    t->decode_only = true;
    uint32_t nr = 0, nc = 0;
    size_t bytes = 0;
    for (uint32_t i = 0; i < m->n; i++) {
        if (m->type[i] == SP_CONTROL) {
            nc++;
            continue;
        }
        nr++;
        bytes += m->plen[i];
    }
    t->n_ranks = nr;
    t->arena = malloc(bytes + 1);
    t->tok_off = malloc(((size_t)nr + 1) * sizeof *t->tok_off);
    t->rank_to_id = malloc(((size_t)nr + 1) * sizeof *t->rank_to_id);
    tk_special *sp = calloc(nc + 1, sizeof *sp);
    char *stext = malloc(bytes + (size_t)m->n + 1);
    if (!t->arena || !t->tok_off || !t->rank_to_id || !sp || !stext) {
        free(sp);
        free(stext);
        FAIL(TK_ERR_NOMEM, "%s: out of memory", path);
    }
    fill_tables(t, m, sp, stext);
    rc = tk_set_specials(t, sp, nc);
    free(sp);
    free(stext);
    if (rc) FAIL(rc, "%s: out of memory", path);
    return TK_OK;
}

/* finalize, framing, fingerprint */
static int load_finish(tk_tokenizer *t, const tk_spm *m, const spm_load *L) {
    const char *path = L->path;
    int rc;
    if (m->eos_id >= 0) t->eot = (uint32_t)m->eos_id;
    snprintf(t->name, sizeof t->name, "sentencepiece");
    if ((rc = tk_finalize(t))) FAIL(rc, "%s: %s", path, t->bad_what ? t->bad_what : tk_strerror(rc));
    if (m->eos_id >= 0) t->eot = (uint32_t)m->eos_id;
    /* framing (tk_default_framing): the model's own BOS and EOS pieces
     * (trainer_spec bos_piece / eos_piece when they are CONTROL pieces) */
    t->pp = TK_PP_TEMPLATE;
    t->pp_bos = m->bos_id >= 0 ? (uint32_t)m->bos_id : TK_NO_RANK;
    t->pp_eos = m->eos_id >= 0 ? (uint32_t)m->eos_id : TK_NO_RANK;
    fingerprint(t, m);
    return TK_OK;
}

int tk_spm_read(const char *path, tk_tokenizer **tp, tk_spm **mp, char *err, size_t errlen) {
    *tp = NULL;
    *mp = NULL;
    if (err && errlen) err[0] = 0;
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = tk_read_regular(path, TK_MAX_FILE_BYTES, &data, &len, err, errlen);
    if (rc) return rc;
    tk_spm *m = calloc(1, sizeof *m);
    tk_tokenizer *t = NULL;
    if (!m) {
        free(data);
        return TK_ERR_NOMEM;
    }
    m->file = data;
    m->file_len = len;
    spm_load L = {.path = path,
                  .err = err,
                  .errlen = errlen,
                  .tr = {.model_type = MT_UNIGRAM, .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1},
                  .nspec = {.add_dummy_prefix = true, .remove_extra_ws = true, .escape_ws = true}};
    L.dspec = L.nspec;
    if ((rc = load_scan(m, &L)) || (rc = load_check(&L)) || (rc = load_pieces(m, &L)) || (rc = load_index(m, &L)) ||
        (rc = load_norm(m, &L)) || (rc = load_ids(m, &L)) || (rc = load_tokenizer(m, &t, &L)) ||
        (rc = load_finish(t, m, &L)))
        goto done;
    m->serial = t->serial;
    *mp = m;
    *tp = t;
    return TK_OK;
done:
    if (err && errlen && !err[0]) tk_set_err(err, errlen, "%s: %s", path, tk_strerror(rc));
    spm_free(m);
    tk_free(t);
    return rc;
}

void tk_spm_describe(const tk_tokenizer *t, char *buf, size_t len) {
    const tk_spm *m = SPM_OF(t);
    const spm_spec *sp = &m->norm.spec;
    char nm[64];
    shown(sp->name, sp->name_len < 40 ? sp->name_len : 40, nm, sizeof nm);
    snprintf(buf, len, "sentencepiece .model: %s%s%s%s%s | BPE (sentencepiece merge order by score%s%s)%s",
             sp->cmap_len ? "charsmap " : "identity", sp->cmap_len ? nm : "",
             sp->add_dummy_prefix ? ", dummy prefix" : "", sp->remove_extra_ws ? ", remove extra whitespace" : "",
             sp->escape_ws ? ", escape whitespace" : "", m->byte_fallback ? ", byte fallback" : "",
             m->user_maxlen ? ", user-defined symbols" : "", m->has_denorm ? " | denormalizer charsmap" : "");
}

/* ---- the ops (load_spm.c holds the table) ---------------------------------- */

/* Decode, lossless and savable are the same for both SentencePiece engines
 * (BPE here, Unigram in unigram.c): the pieces, the normalizer and the file
 * format are shared, only the segmentation differs. */
int tk_spm_decode_op(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, bool stream, tk_bytes *out) {
    return stream ? tk_spm_decode_stream(t, ids, n, first, out) : tk_spm_decode(t, ids, n, first, out);
}

/* The normalizer, unk and U+FFFD for bad UTF-8 lose bytes. */
int tk_spm_lossless_op(const tk_tokenizer *t) {
    (void)t;
    return 0;
}

/* Neither format carries a normalizer and SentencePiece's scores. */
int tk_spm_savable_op(const tk_tokenizer *t, int fmt) {
    (void)t;
    (void)fmt;
    return TK_ERR_UNSUPPORTED;
}
