/* hf_decode.c - the decoder chain of a SentencePiece-style pipeline
 * (Replace, ByteFallback, Fuse, Strip, Metaspace). */
#include "hf_internal.h"

typedef struct {
    tk_bytes b;  /* all token strings, back to back */
    size_t *off; /* n + 1 offsets */
    size_t n, cap;
} strv;

/* Append a token string; TK_ERR_DOC_EXPAND when the strings would pass cap bytes. */
static int sv_add(strv *v, const uint8_t *p, size_t n, size_t cap) {
    if (n > cap || v->b.len > cap - n) return TK_ERR_DOC_EXPAND;
    if (v->n + 2 > v->cap) {
        size_t c = v->cap ? v->cap * 2 : 64;
        size_t *o = realloc(v->off, c * sizeof *o);
        if (!o) return TK_ERR_NOMEM;
        v->off = o;
        v->cap = c;
    }
    if (!v->n) v->off[0] = v->b.len;
    int rc = bput(&v->b, p, n);
    if (rc) return rc;
    v->off[++v->n] = v->b.len;
    return TK_OK;
}

static bool byte_token(const uint8_t *p, size_t n, uint8_t *out) {
    if (n != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return false;
    int hi = hexd(p[3]), lo = hexd(p[4]);
    if (hi < 0 || lo < 0) return false;
    *out = (uint8_t)(hi << 4 | lo);
    return true;
}

/* One decoder step over the token strings of in, into out: at most
 * tk_expand_cap(its input, in0) bytes (in0: the bytes of the ids' own
 * strings); Replace regexes pay from budget. */
static int dec_apply(const struct dec_step *d, const strv *in, strv *out, bool first, size_t in0,
                     tk_re_budget *budget) {
    int rc = TK_OK;
    out->n = 0;
    out->b.len = 0;
    size_t cap = tk_expand_cap(in->n ? in->off[in->n] - in->off[0] : 0, in0);
    if (d->kind == D_FUSE) {
        if (!in->n) return TK_OK;
        size_t len = in->off[in->n] - in->off[0];
        return sv_add(out, len ? in->b.data + in->off[0] : (const uint8_t *)"", len, cap);
    }
    tk_bytes wx = {0}, wy = {0}; /* WordPiece's scratch, kept across the tokens */
    for (size_t k = 0; k < in->n && !rc; k++) {
        const uint8_t *p = in->b.data ? in->b.data + in->off[k] : (const uint8_t *)"";
        size_t n = in->off[k + 1] - in->off[k];
        switch (d->kind) {
        case D_BYTEFB: {
            uint8_t byte;
            if (!byte_token(p, n, &byte)) {
                rc = sv_add(out, p, n, cap);
                break;
            }
            /* a run of byte tokens: one string if valid UTF-8, else U+FFFD per byte */
            uint8_t run[256];
            size_t r = 0, k0 = k;
            while (k < in->n && r < sizeof run &&
                   byte_token(in->b.data + in->off[k], in->off[k + 1] - in->off[k], &run[r]))
                r++, k++;
            k--;
            size_t i = 0;
            bool valid = true;
            while (i < r && valid) {
                int32_t cp;
                size_t l = u8_len(run, r, i, &cp);
                valid = cp >= 0;
                i += l;
            }
            (void)k0;
            if (valid) rc = sv_add(out, run, r, cap);
            else
                for (size_t j = 0; j < r && !rc; j++) rc = sv_add(out, (const uint8_t *)"\xEF\xBF\xBD", 3, cap);
            break;
        }
        case D_REPLACE: {
            tk_bytes tmp = {0};
            size_t i = 0, room = cap - out->b.len; /* what this token's string may still take */
            if (d->re) {
                repl_ctx c = {p, &tmp, 0, d->b, d->blen, room};
                rc = tk_regex_find_all(d->re, p, n, budget, tk_hf_repl_cb, &c);
                if (!rc) rc = tk_bytes_put_capped(&tmp, p + c.pos, n - c.pos, room);
                i = n;
            }
            while (i < n && !rc) {
                if (n - i >= d->alen && memcmp(p + i, d->a, d->alen) == 0) {
                    rc = tk_bytes_put_capped(&tmp, d->b, d->blen, room);
                    i += d->alen;
                } else {
                    rc = tk_bytes_put_capped(&tmp, p + i, 1, room);
                    i++;
                }
            }
            if (!rc) rc = sv_add(out, tmp.data ? tmp.data : (const uint8_t *)"", tmp.len, cap);
            tk_bytes_free(&tmp);
            break;
        }
        case D_STRIP: {
            size_t a = 0, b = n;
            for (uint32_t j = 0; j < d->start && b - a >= d->alen && memcmp(p + a, d->a, d->alen) == 0; j++)
                a += d->alen;
            for (uint32_t j = 0; j < d->stop && b - a >= d->alen && memcmp(p + b - d->alen, d->a, d->alen) == 0; j++)
                b -= d->alen;
            rc = sv_add(out, p + a, b - a, cap);
            break;
        }
        case D_WORDPIECE: {
            const uint8_t *r;
            size_t rn;
            rc = tk_hf_dec_wordpiece(d->a, d->alen, d->scheme != 0, k == 0 && first, p, n, &wx, &wy, &r, &rn);
            if (!rc) rc = sv_add(out, r, rn, cap);
            break;
        }
        case D_METASPACE: {
            /* HF: in the first token every replacement character is dropped
             * (not only a leading one) unless prepend_scheme is never */
            bool drop = k == 0 && first && d->scheme != MS_NEVER;
            tk_bytes tmp = {0};
            size_t i = 0;
            while (i < n && !rc) {
                if (n - i >= d->alen && memcmp(p + i, d->a, d->alen) == 0) {
                    if (!drop) rc = bput(&tmp, " ", 1);
                    i += d->alen;
                } else {
                    rc = bput(&tmp, p + i, 1);
                    i++;
                }
            }
            if (!rc) rc = sv_add(out, tmp.data ? tmp.data : (const uint8_t *)"", tmp.len, cap);
            tk_bytes_free(&tmp);
            break;
        }
        }
    }
    tk_bytes_free(&wx);
    tk_bytes_free(&wy);
    return rc;
}

int tk_hf_decode(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out) {
    const tk_hf *h = HF_OF(t);
    strv a = {0}, b = {0};
    int rc = TK_OK;
    for (size_t k = 0; k < n && !rc; k++) {
        if (ids[k] >= t->vocab_size) {
            rc = TK_ERR_RANGE;
            break;
        }
        /* the token's own string: vocab entry or added token */
        uint32_t r = t->id_to_rank[ids[k]];
        const char *str = NULL;
        size_t len = 0;
        if (r != TK_NO_RANK) {
            /* vocabulary entries are in rank order */
            for (size_t e = r; e < h->voc.nv; e++)
                if (h->voc.vid[e] == ids[k]) {
                    str = h->voc.vkey[e];
                    len = h->voc.vlen[e];
                    break;
                }
        }
        if (!str) {
            const uint8_t *p;
            if (tk_token_bytes(t, ids[k], &p, &len)) {
                rc = TK_ERR_RANGE;
                break;
            }
            str = (const char *)p;
        }
        rc = sv_add(&a, (const uint8_t *)str, len, SIZE_MAX);
    }
    /* the ids' own strings are the decoder chain's input: its steps' bound */
    size_t in0 = a.n ? a.off[a.n] - a.off[0] : 0;
    tk_re_budget budget;
    tk_re_budget_init(&budget, in0);
    strv *cur = &a, *nxt = &b;
    for (size_t k = 0; k < h->n_dec && !rc; k++) {
        rc = dec_apply(&h->dec[k], cur, nxt, first, in0, &budget);
        strv *x = cur;
        cur = nxt;
        nxt = x;
    }
    if (!rc && !h->n_dec && cur->n) {
        /* HF without a decoder: the tokens' strings joined by spaces (a
         * stream's later chunks start with the space between) */
        for (size_t k = 0; k < cur->n && !rc; k++) {
            if ((k || !first) && (rc = bput(out, " ", 1))) break;
            rc = bput(out, cur->b.data + cur->off[k], cur->off[k + 1] - cur->off[k]);
        }
    } else if (!rc && cur->n && cur->off[cur->n] > cur->off[0])
        rc = bput(out, cur->b.data + cur->off[0], cur->off[cur->n] - cur->off[0]);
    tk_bytes_free(&a.b);
    tk_bytes_free(&b.b);
    free(a.off);
    free(b.off);
    return rc;
}
