/* save.c - write a tokenizer as a .tiktoken rank file (+ meta sidecar) or as
 * an HF tokenizer.json (ByteLevel BPE with merges recovered from the ranks). */
#include "tk_engine.h"
#include "mks_common.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_encode(const uint8_t *p, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16;
        if (i + 1 < n) x |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n) x |= p[i + 2];
        out[o++] = B64[(x >> 18) & 63];
        out[o++] = B64[(x >> 12) & 63];
        out[o++] = i + 1 < n ? B64[(x >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? B64[x & 63] : '=';
    }
    out[o] = 0;
    return o;
}

/* Write to path atomically, the common layer's policy (mks_common.h): a
 * fresh temporary (PATH.tmp.PID: processes may save the same path), fsync,
 * rename, fsync of the folder. */
static FILE *open_tmp(const char *path, char *tmp, size_t tmplen) {
    snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
    int fd = mc_atomic_open(tmp, 0666, NULL, 0);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f) mc_atomic_commit(fd, 1, tmp, path, NULL, 0);
    return f;
}

static int close_tmp(FILE *f, const char *tmp, const char *path) {
    int bad = ferror(f) || fflush(f), fd = dup(fileno(f));
    if (fclose(f)) bad = 1;
    if (fd < 0) {
        unlink(tmp);
        return TK_ERR_IO;
    }
    return mc_atomic_commit(fd, bad, tmp, path, NULL, 0) == MC_OK ? TK_OK : TK_ERR_IO;
}

/* What we write, we load: a token longer than the loaders accept
 * (TK_MAX_TOKEN_BYTES, decoded bytes) is refused before anything is written. */
static int tokens_fit(const tk_tokenizer *t) {
    for (uint32_t r = 0; r < t->n_ranks; r++)
        if (t->tok_off[r + 1] - t->tok_off[r] > TK_MAX_TOKEN_BYTES) return TK_ERR_LIMIT;
    return TK_OK;
}

int tk_save_tiktoken(const tk_tokenizer *t, const char *path) {
    /* an engine with a pipeline of its own says whether a rank file can
     * carry it (a tokenizer.json: only a built-in pattern over bytes, read
     * back with merge-by-rank; a SentencePiece model: never) */
    if (t && tk_engine_of(t)->savable && tk_engine_of(t)->savable(t, 0)) return TK_ERR_UNSUPPORTED;
    if (!t || !path) return TK_ERR_ARG;
    if (t->rank_to_id) return TK_ERR_UNSUPPORTED; /* .tiktoken requires id == rank */
    if (tokens_fit(t)) return TK_ERR_LIMIT;
    char tmp[4200];
    FILE *f = open_tmp(path, tmp, sizeof tmp);
    if (!f) return TK_ERR_IO;
    char *line = malloc((TK_MAX_TOKEN_BYTES + 2) / 3 * 4 + 1); /* base64 of the longest token */
    if (!line) {
        fclose(f);
        unlink(tmp);
        return TK_ERR_NOMEM;
    }
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        size_t n = t->tok_off[r + 1] - t->tok_off[r];
        size_t o = b64_encode(t->arena + t->tok_off[r], n, line);
        if (o == 0) line[o++] = '='; /* the empty token, as Whisper's files write it */
        fprintf(f, "%.*s %u\n", (int)o, line, r);
    }
    free(line);
    int rc = close_tmp(f, tmp, path);
    if (rc || t->known) return rc;
    /* sidecar: pattern and specials, which a rank file cannot hold */
    json_t *meta = json_object(), *sp = json_object();
    json_object_set_new(meta, "pattern", json_string(tk_pattern_name(t->pattern)));
    for (size_t k = 0; k < t->n_specials; k++)
        json_object_set_new(sp, t->specials[k].text, json_integer(t->specials[k].id));
    json_object_set_new(meta, "special_tokens", sp);
    char mp[4200];
    snprintf(mp, sizeof mp, "%s.meta.json", path);
    rc = json_dump_file(meta, mp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) ? TK_ERR_IO : TK_OK;
    json_decref(meta);
    return rc;
}

/* Byte-level mapped string of a byte sequence. */
static char *bytelevel(const uint8_t *p, size_t n) {
    char *s = malloc(n * 2 + 1), *o = s;
    if (!s) return NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tk_byte_to_cp(p[i]);
        if (cp < 0x80) {
            *o++ = (char)cp;
        } else {
            *o++ = (char)(0xC0 | (cp >> 6));
            *o++ = (char)(0x80 | (cp & 0x3F));
        }
    }
    *o = 0;
    return s;
}

static const uint8_t *tok_bytes(const tk_tokenizer *t, uint32_t r, size_t *n) {
    *n = t->tok_off[r + 1] - t->tok_off[r];
    return t->arena + t->tok_off[r];
}

/* 125 lines: one linear build of the JSON tree, section by section in the
 * order of the file, with one cleanup path (done:); splitting it would pass
 * the five trees and their ownership between functions for no gain. */
int tk_save_hf_json(const tk_tokenizer *t, const char *path) {
    if (t && tk_engine_of(t)->savable && tk_engine_of(t)->savable(t, 1)) return TK_ERR_UNSUPPORTED; /* a pipeline */
    if (!t || !path) return TK_ERR_ARG;
    if (tokens_fit(t)) return TK_ERR_LIMIT;
    int rc = TK_ERR_NOMEM;
    json_t *root = json_object(), *model = json_object(), *vocab = json_object(), *merges = json_array();
    json_t *added = json_array();
    tk_ids parts = {0};
    if (!root || !model || !vocab || !merges || !added) goto done;
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    for (size_t k = 0; k < t->n_specials; k++) {
        json_t *a = json_object();
        json_object_set_new(a, "id", json_integer(t->specials[k].id));
        json_object_set_new(a, "content", json_string(t->specials[k].text));
        json_object_set_new(a, "single_word", json_false());
        json_object_set_new(a, "lstrip", json_false());
        json_object_set_new(a, "rstrip", json_false());
        json_object_set_new(a, "normalized", json_false());
        json_object_set_new(a, "special", json_true());
        json_array_append_new(added, a);
    }
    json_object_set_new(root, "added_tokens", added);
    added = NULL;
    json_object_set_new(root, "normalizer", json_null());
    {
        json_t *split = json_object(), *pat = json_object(), *bl = json_object(), *seq = json_object(),
               *list = json_array();
        json_object_set_new(pat, "Regex", json_string(tk_pattern_regex(t->pattern)));
        json_object_set_new(split, "type", json_string("Split"));
        json_object_set_new(split, "pattern", pat);
        json_object_set_new(split, "behavior", json_string("Isolated"));
        json_object_set_new(split, "invert", json_false());
        json_object_set_new(bl, "type", json_string("ByteLevel"));
        json_object_set_new(bl, "add_prefix_space", json_false());
        json_object_set_new(bl, "trim_offsets", json_true());
        json_object_set_new(bl, "use_regex", json_false());
        json_array_append_new(list, split);
        json_array_append_new(list, bl);
        json_object_set_new(seq, "type", json_string("Sequence"));
        json_object_set_new(seq, "pretokenizers", list);
        json_object_set_new(root, "pre_tokenizer", seq);
    }
    json_object_set_new(root, "post_processor", json_null());
    {
        json_t *dec = json_object();
        json_object_set_new(dec, "type", json_string("ByteLevel"));
        json_object_set_new(dec, "add_prefix_space", json_true());
        json_object_set_new(dec, "trim_offsets", json_true());
        json_object_set_new(dec, "use_regex", json_true());
        json_object_set_new(root, "decoder", dec);
    }
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", json_null());
    json_object_set_new(model, "end_of_word_suffix", json_null());
    json_object_set_new(model, "fuse_unk", json_false());
    json_object_set_new(model, "byte_fallback", json_false());
    json_object_set_new(model, "ignore_merges", json_false());
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        size_t n;
        const uint8_t *p = tok_bytes(t, r, &n);
        char *s = bytelevel(p, n);
        if (!s) goto done;
        json_object_set_new(vocab, s, json_integer(t->rank_to_id ? t->rank_to_id[r] : r));
        free(s);
    }
    /* Specials also go in the model vocab: HF gives an added token that is
     * not in it the next free id, which breaks vocabularies with id gaps. */
    for (size_t k = 0; k < t->n_specials; k++)
        json_object_set_new(vocab, t->specials[k].text, json_integer(t->specials[k].id));
    /* Merges: the pair a token splits into when BPE may only use lower ranks
     * (the standard recovery of merges from a rank table). */
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        size_t n;
        const uint8_t *p = tok_bytes(t, r, &n);
        if (n < 2) continue;
        parts.len = 0;
        if ((rc = tk_bpe_piece(t, p, n, r, &parts))) goto done;
        rc = TK_ERR_NOMEM;
        if (parts.len != 2) continue; /* not reachable by one merge: rank-only token */
        size_t na, nb;
        const uint8_t *pa = tok_bytes(t, parts.ids[0], &na), *pb = tok_bytes(t, parts.ids[1], &nb);
        char *sa = bytelevel(pa, na), *sb = bytelevel(pb, nb);
        if (!sa || !sb) {
            free(sa);
            free(sb);
            goto done;
        }
        json_t *m = json_array();
        json_array_append_new(m, json_string(sa));
        json_array_append_new(m, json_string(sb));
        json_array_append_new(merges, m);
        free(sa);
        free(sb);
    }
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", merges);
    vocab = merges = NULL;
    json_object_set_new(root, "model", model);
    model = NULL;
    {
        char tmp[4200];
        FILE *f = open_tmp(path, tmp, sizeof tmp);
        if (!f) rc = TK_ERR_IO;
        else if (json_dumpf(root, f, JSON_PRESERVE_ORDER | JSON_COMPACT)) {
            fclose(f);
            unlink(tmp);
            rc = TK_ERR_IO;
        } else {
            rc = close_tmp(f, tmp, path);
        }
    }
done:
    tk_ids_free(&parts);
    json_decref(vocab);
    json_decref(merges);
    json_decref(model);
    json_decref(added);
    json_decref(root);
    return rc;
}
