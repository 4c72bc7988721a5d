/* encode_bytes.c - tk_encode_bytes: tiktoken's Encoding._encode_bytes, ids of
 * any byte string (invalid UTF-8 included) that decode back to those bytes.
 *
 * tiktoken (src/lib.rs, CoreBPE::_encode_bytes): the longest valid UTF-8
 * prefix is encoded as text; its last regex piece - widened backwards over
 * tokens made only of ' ', '\n', '\t' (the \s*[\r\n]+ alternative of cl100k
 * can join them with what follows) - is decoded again, the invalid tail is
 * appended, and those bytes are one token if they are one, else BPE-merged as
 * a single piece. The ids are tiktoken's, not only a lossless encoding. */
#include "mks_common.h"
#include "tk_internal.h"

size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i); /* pretok.c */

static bool all_space(const tk_tokenizer *t, uint32_t id) {
    const uint8_t *b;
    size_t n;
    if (tk_token_bytes(t, id, &b, &n) != TK_OK) return false;
    for (size_t k = 0; k < n; k++)
        if (b[k] != ' ' && b[k] != '\n' && b[k] != '\t') return false;
    return true;
}

/* tk_bpe_piece appends ranks; ids differ from them in a tokenizer.json's vocabulary */
static void ranks_to_ids(const tk_tokenizer *t, tk_ids *out, size_t from) {
    if (t->rank_to_id)
        for (size_t k = from; k < out->len; k++) out->ids[k] = t->rank_to_id[out->ids[k]];
}

int tk_encode_bytes(const tk_tokenizer *t, const uint8_t *bytes, size_t len, tk_ids *out) {
    if (!t || !out || (!bytes && len)) return TK_ERR_ARG;
    size_t valid = mc_utf8_valid_prefix(bytes, len);
    if (valid == len) return tk_encode(t, bytes, len, out);
    /* A tokenizer.json or SentencePiece model normalizes and maps text, not
     * bytes: there is no tiktoken meaning for its invalid UTF-8. */
    if (t->engine) return TK_ERR_UNSUPPORTED; /* NULL: the rank engine (tk_engine.h) */
    size_t from = out->len, last = from, i = 0;
    int rc = TK_OK;
    while (i < valid) {
        size_t e = tk_pretok_next(t->pattern, bytes, valid, i);
        last = out->len;
        if ((rc = tk_bpe_piece(t, bytes + i, e - i, TK_NO_RANK, out))) goto fail;
        i = e;
    }
    ranks_to_ids(t, out, from);
    if (last < out->len && all_space(t, out->ids[last]))
        while (last > from && all_space(t, out->ids[last - 1])) last--;
    /* the unstable bytes: the last piece's tokens again, then the invalid tail */
    tk_bytes unstable = {0};
    if ((rc = tk_decode(t, out->ids + last, out->len - last, &unstable)) ||
        (rc = tk_bytes_append(&unstable, bytes + valid, len - valid))) {
        tk_bytes_free(&unstable);
        goto fail;
    }
    out->len = last;
    rc = tk_bpe_piece(t, unstable.data, unstable.len, TK_NO_RANK, out);
    tk_bytes_free(&unstable);
    if (rc) goto fail;
    ranks_to_ids(t, out, last);
    return TK_OK;
fail:
    out->len = from;
    return rc;
}
