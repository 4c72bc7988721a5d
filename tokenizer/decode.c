/* decode.c - ids to bytes, one-shot and streaming. */
#include "tk_engine.h"

#include <stdlib.h>

int tk_decode(const tk_tokenizer *t, const uint32_t *ids, size_t n, tk_bytes *out) {
    if (!t || !out || (!ids && n)) return TK_ERR_ARG;
    const tk_engine *e = tk_engine_of(t);
    int erc = e->decode ? e->decode(t, ids, n, true, false, out) : 1;
    if (erc != 1) return erc; /* 1: the engine decodes as the token bytes, below */
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *b;
        size_t l;
        if (tk_token_bytes(t, ids[k], &b, &l)) return TK_ERR_RANGE;
        total += l;
    }
    if (out->len + total > out->cap) {
        size_t save = out->len;
        if (tk_bytes_append(out, NULL, total)) return TK_ERR_NOMEM;
        out->len = save;
    }
    for (size_t k = 0; k < n; k++) {
        const uint8_t *b;
        size_t l;
        tk_token_bytes(t, ids[k], &b, &l);
        if (l) memcpy(out->data + out->len, b, l); /* the empty token: out->data may be NULL */
        out->len += l;
    }
    return TK_OK;
}

struct tk_decoder {
    const tk_tokenizer *t;
    bool started;
    uint8_t pending[4];
    size_t n_pending;
};

int tk_decoder_create(const tk_tokenizer *t, tk_decoder **out) {
    if (!t || !out) return TK_ERR_ARG;
    *out = calloc(1, sizeof **out);
    if (!*out) return TK_ERR_NOMEM;
    (*out)->t = t;
    return TK_OK;
}

void tk_decoder_free(tk_decoder *d) { free(d); }

/* Length of the trailing bytes of s[0..n) that form a valid but incomplete
 * UTF-8 sequence (0 if the tail is complete or not a valid prefix). */
static size_t incomplete_tail(const uint8_t *s, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        uint8_t b = s[n - back];
        if ((b & 0xC0) == 0x80) continue; /* continuation: keep looking for the lead */
        size_t need = b >= 0xF0 && b < 0xF5 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b < 0xE0 ? 2 : 0;
        if (need == 0 || need <= back) return 0;
        /* check the second byte's stricter ranges (E0/ED/F0/F4) */
        if (back >= 2) {
            uint8_t c = s[n - back + 1];
            if ((b == 0xE0 && c < 0xA0) || (b == 0xED && c > 0x9F) || (b == 0xF0 && c < 0x90) ||
                (b == 0xF4 && c > 0x8F))
                return 0;
        }
        return back;
    }
    return 0;
}

int tk_decoder_feed(tk_decoder *d, const uint32_t *ids, size_t n, tk_bytes *out) {
    if (!d || !out || (!ids && n)) return TK_ERR_ARG;
    size_t start = out->len;
    if (tk_bytes_append(out, d->pending, d->n_pending)) return TK_ERR_NOMEM;
    const tk_engine *e = tk_engine_of(d->t);
    int rc = e->decode ? e->decode(d->t, ids, n, !d->started, true, out) : 1;
    if (rc == 1) rc = tk_decode(d->t, ids, n, out); /* the token bytes */
    if (n) d->started = true;
    if (rc) {
        out->len = start;
        return rc;
    }
    d->n_pending = 0;
    size_t tail = incomplete_tail(out->data + start, out->len - start);
    if (tail) {
        memcpy(d->pending, out->data + out->len - tail, tail);
        d->n_pending = tail;
        out->len -= tail;
    }
    return TK_OK;
}

int tk_decoder_finish(tk_decoder *d, tk_bytes *out) {
    if (!d || !out) return TK_ERR_ARG;
    int rc = tk_bytes_append(out, d->pending, d->n_pending);
    d->n_pending = 0;
    return rc;
}
