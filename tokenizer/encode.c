/* encode.c - text to ids: pre-tokenize, BPE each piece, batch over threads. */
#include "tk_engine.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i);

#define ENCODE_RESERVE_MIN (256u << 10)
#define ENCODE_RESERVE_MAX (64u << 20)

/* Map ranks [from, out->len) to ids when ids differ from merge priority. */
static void ranks_to_ids(const tk_tokenizer *t, tk_ids *out, size_t from) {
    if (!t->rank_to_id) return;
    for (size_t k = from; k < out->len; k++) out->ids[k] = t->rank_to_id[out->ids[k]];
}

static int encode_ordinary(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out) {
    const tk_engine *e = tk_engine_of(t);
    if (e->encode) return e->encode(t, s, n, out);
    size_t from = out->len, i = 0;
    tk_pattern pat = t->pattern;
    /* A large document gets room for its worst case (one id per byte) at
     * once: pages of it that are never written cost nothing, while growing
     * by doubling would copy every id written so far into fresh pages again
     * (measured: ~900 extra page faults for a 1 MiB document). */
    if (n >= ENCODE_RESERVE_MIN && n <= ENCODE_RESERVE_MAX && tk_ids_reserve(out, n)) return TK_ERR_NOMEM;
    while (i < n) {
        size_t e = tk_pretok_next(pat, s, n, i);
        size_t len = e - i;
        /* fast path: whole piece is a token */
        if (len == 1 || len == 2) {
            if (out->len == out->cap && tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
            uint32_t r = len == 1 ? t->byte_rank[s[i]] : t->pair2[((uint32_t)s[i] << 8) | s[i + 1]];
            if (r != TK_NO_RANK) {
                out->ids[out->len++] = r;
                i = e;
                continue;
            }
        }
        int rc = tk_bpe_piece(t, s + i, len, TK_NO_RANK, out);
        if (rc) return rc;
        i = e;
    }
    ranks_to_ids(t, out, from);
    return TK_OK;
}

int tk_encode(const tk_tokenizer *t, const uint8_t *text, size_t len, tk_ids *out) {
    if (!t || !out || (!text && len)) return TK_ERR_ARG;
    size_t from = out->len;
    int rc = encode_ordinary(t, text, len, out);
    if (tk_err_is_document(rc)) out->len = from; /* a refused document leaves no ids behind */
    return rc;
}

int tk_count(const tk_tokenizer *t, const uint8_t *text, size_t len, size_t *n_tokens) {
    if (!t || !n_tokens || (!text && len)) return TK_ERR_ARG;
    const tk_engine *e = tk_engine_of(t);
    if (e->encode) {
        tk_ids ids = {0};
        int rc = e->encode(t, text, len, &ids);
        *n_tokens = ids.len;
        tk_ids_free(&ids);
        return rc;
    }
    /* Piece by piece over the whole text, so the scanner sees the true end
     * of input; the id buffer only ever holds one piece. */
    tk_ids buf = {0};
    size_t total = 0, i = 0;
    int rc = TK_OK;
    while (i < len) {
        size_t e = tk_pretok_next(t->pattern, text, len, i);
        buf.len = 0;
        if ((rc = tk_bpe_piece(t, text + i, e - i, TK_NO_RANK, &buf))) break;
        total += buf.len;
        i = e;
    }
    tk_ids_free(&buf);
    *n_tokens = total;
    return rc;
}

static int encode_special(const tk_tokenizer *t, const uint8_t *text, size_t len, const char *const *allowed,
                          size_t n_allowed, tk_ids *out);

int tk_encode_special(const tk_tokenizer *t, const uint8_t *text, size_t len, const char *const *allowed,
                      size_t n_allowed, tk_ids *out) {
    if (!t || !out || (!text && len)) return TK_ERR_ARG;
    size_t from = out->len;
    int rc = encode_special(t, text, len, allowed, n_allowed, out);
    if (tk_err_is_document(rc)) out->len = from; /* a refused document leaves no ids behind */
    return rc;
}

static int encode_special(const tk_tokenizer *t, const uint8_t *text, size_t len, const char *const *allowed,
                          size_t n_allowed, tk_ids *out) {
    bool all = allowed == NULL && n_allowed == (size_t)-1;
    if (!all && n_allowed && !allowed) return TK_ERR_ARG;
    const tk_engine *e = tk_engine_of(t);
    if (e->encode_special) {
        if (!all)
            for (size_t a = 0; a < n_allowed; a++)
                if (tk_special_id(t, allowed[a], NULL) != TK_OK) return TK_ERR_NOT_FOUND;
        return e->encode_special(t, text, len, allowed, all ? 0 : n_allowed, all, out);
    }
    if (!all)
        for (size_t a = 0; a < n_allowed; a++)
            if (tk_special_id(t, allowed[a], NULL) != TK_OK) return TK_ERR_NOT_FOUND;
    return tk_split_specials(t, text, len, allowed, n_allowed, all, encode_ordinary, out);
}

int tk_split_specials(const tk_tokenizer *t, const uint8_t *text, size_t len, const char *const *allowed,
                      size_t n_allowed, bool all, tk_ordinary_fn ordinary, tk_ids *out) {
    /* The specials in force, all of them (o200k_harmony has 1,090, Llama 3
     * 256). One pass over the text: at a byte that starts some special the
     * longest special there is taken, so the first occurrence wins and the
     * longest on an equal start, at O(len x specials with that first byte). */
    const tk_special **sp = malloc((t->n_specials ? t->n_specials : 1) * sizeof *sp);
    if (!sp) return TK_ERR_NOMEM;
    size_t ns = 0;
    bool first[256] = {false};
    for (size_t k = 0; k < t->n_specials; k++) {
        bool ok = all;
        for (size_t a = 0; !ok && a < n_allowed; a++) ok = strcmp(allowed[a], t->specials[k].text) == 0;
        if (ok && t->specials[k].text[0]) {
            sp[ns++] = &t->specials[k];
            first[(uint8_t)t->specials[k].text[0]] = true;
        }
    }
    size_t i = 0, from = 0;
    int rc = TK_OK;
    while (i < len) {
        size_t blen = 0;
        uint32_t bid = 0;
        if (first[text[i]])
            for (size_t k = 0; k < ns; k++) {
                const char *st = sp[k]->text;
                if ((uint8_t)st[0] != text[i]) continue;
                size_t sl = strlen(st);
                if (sl > blen && sl <= len - i && memcmp(text + i, st, sl) == 0) {
                    blen = sl;
                    bid = sp[k]->id;
                }
            }
        if (!blen) {
            i++;
            continue;
        }
        if ((rc = ordinary(t, text + from, i - from, out))) break;
        if (tk_ids_reserve(out, 1)) {
            rc = TK_ERR_NOMEM;
            break;
        }
        out->ids[out->len++] = bid;
        i += blen;
        from = i;
    }
    if (rc == TK_OK) rc = ordinary(t, text + from, len - from, out);
    free(sp);
    return rc;
}

/* ---- batch -------------------------------------------------------------- */

typedef struct {
    const tk_tokenizer *t;
    const tk_span *docs;
    tk_ids *outs;
    size_t n;
    size_t next; /* atomic work counter */
    int rc;
} batch_job;

static void *batch_worker(void *arg) {
    batch_job *j = arg;
    for (;;) {
        size_t k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (k >= j->n) break;
        int rc = encode_ordinary(j->t, j->docs[k].text, j->docs[k].len, &j->outs[k]);
        if (rc) {
            int z = 0;
            __atomic_compare_exchange_n(&j->rc, &z, rc, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

int tk_encode_batch(const tk_tokenizer *t, const tk_span *docs, size_t n, int threads, tk_ids *outs) {
    if (!t || (!docs && n) || (!outs && n)) return TK_ERR_ARG;
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if ((size_t)threads > n) threads = (int)n;
    batch_job j = {t, docs, outs, n, 0, 0};
    if (threads <= 1) {
        batch_worker(&j);
        return j.rc;
    }
    pthread_t *th = malloc((size_t)threads * sizeof *th);
    if (!th) return TK_ERR_NOMEM;
    int started = 0;
    for (int k = 1; k < threads; k++) {
        if (pthread_create(&th[k], NULL, batch_worker, &j)) break;
        started = k;
    }
    batch_worker(&j);
    for (int k = 1; k <= started; k++) pthread_join(th[k], NULL);
    free(th);
    return j.rc;
}
