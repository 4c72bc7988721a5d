/* load_tiktoken.c - tiktoken rank files ("base64 rank" per line) and
 * their optional .meta.json sidecar. */
#include "load_internal.h"
#include "rank_pretok.h"
#include "tk_engine.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
/* ---- .tiktoken ------------------------------------------------------------ */

static int b64val(uint8_t c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Strict base64 with padding; returns decoded length or -1. out holds at
 * least n / 4 * 3 bytes. */
static long b64_decode(const uint8_t *s, size_t n, uint8_t *out) {
    if (n == 0 || n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else {
                if (pad) return -1;
                v[k] = b64val(s[i + k]);
                if (v[k] < 0) return -1;
            }
        }
        uint32_t x = (uint32_t)(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        out[o++] = (uint8_t)(x >> 16);
        if (pad < 2) out[o++] = (uint8_t)(x >> 8);
        if (pad < 1) out[o++] = (uint8_t)x;
    }
    return (long)o;
}

/* Optional sidecar "<path>.meta.json": {"pattern": "...", "special_tokens": {"text": id}} */
static int read_meta(const char *path, tk_pattern *pat, tk_special **sp, size_t *nsp, char *err, size_t errlen) {
    char mp[4096];
    *sp = NULL;
    *nsp = 0;
    if (!tk_ld_join_path(mp, sizeof mp, path, ".meta.json", err, errlen)) return TK_ERR_ARG;
    if (!tk_ld_exists(mp)) return TK_OK;
    json_t *root;
    int rc = tk_json_load(mp, &root, err, errlen);
    if (rc) return rc;
    if (!json_is_object(root)) {
        tk_set_err(err, errlen, "%s: not a JSON object", mp);
        json_decref(root);
        return TK_ERR_FORMAT;
    }
    json_t *p = json_object_get(root, "pattern");
    tk_pattern named = TK_PAT_NONE;
    char sb[160];
    if (p && !json_is_string(p)) {
        tk_set_err(err, errlen, "%s: \"pattern\" is %s, not a string", mp, tk_ld_json_kind(p));
        json_decref(root);
        return TK_ERR_FORMAT;
    }
    /* only the known names: a sidecar never supplies a regex */
    if (p && tk_pattern_parse(json_string_value(p), &named)) {
        tk_set_err(err, errlen, "%s: unknown pattern \"%s\" (gpt2, cl100k or o200k)", mp,
                   tk_ld_shown(json_string_value(p), sb));
        json_decref(root);
        return TK_ERR_PATTERN;
    }
    if (*pat == TK_PAT_NONE) *pat = named;
    json_t *st = json_object_get(root, "special_tokens");
    if (st && !json_is_object(st)) {
        tk_set_err(err, errlen, "%s: \"special_tokens\" is %s, not an object", mp, tk_ld_json_kind(st));
        json_decref(root);
        return TK_ERR_FORMAT;
    }
    if (json_object_size(st)) {
        *sp = calloc(json_object_size(st), sizeof **sp);
        if (!*sp) {
            json_decref(root);
            return TK_ERR_NOMEM;
        }
        const char *k;
        json_t *v;
        json_object_foreach(st, k, v) {
            uint32_t id;
            if ((rc = tk_ld_json_id(v, mp, "special token", k, &id, err, errlen))) break;
            if (!k[0]) {
                tk_set_err(err, errlen, "%s: special token with id %u has an empty text", mp, id);
                rc = TK_ERR_FORMAT;
                break;
            }
            (*sp)[*nsp].text = strdup(k);
            if (!(*sp)[*nsp].text) {
                rc = TK_ERR_NOMEM;
                break;
            }
            (*sp)[*nsp].id = id;
            (*nsp)++;
        }
        if (rc) {
            tk_ld_free_specials(*sp, *nsp);
            *sp = NULL;
            *nsp = 0;
        }
    }
    json_decref(root);
    return rc;
}

/* A rank: decimal digits only (no sign, no spaces), below TK_MAX_VOCAB. */
static int parse_rank(const uint8_t *s, size_t n, uint32_t *rank) {
    if (n == 0 || n > 10) return n ? TK_ERR_RANGE : TK_ERR_FORMAT;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return TK_ERR_FORMAT;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x >= TK_MAX_VOCAB) return TK_ERR_RANGE;
    *rank = (uint32_t)x;
    return TK_OK;
}

/* The first line is "<digits> <Python str or bytes literal> <digits>", as
 * RWKV World's vocabulary has it (a rank file's first field is base64,
 * which has no quote, and its line two fields). */
static bool rwkv_line(const uint8_t *d, size_t n) {
    size_t i = 0;
    while (i < n && d[i] >= '0' && d[i] <= '9') i++;
    if (i == 0 || i + 2 >= n || d[i] != ' ') return false;
    i++;
    if (d[i] == 'b') i++;
    return i < n && (d[i] == '\'' || d[i] == '"');
}

/* One pass over the rank lines; a blank line is skipped. Each entry needs
 * at least 7 bytes ("AA== 0\n"), so the tables are bounded by the file. */
static int tiktoken_lines(const char *path, const uint8_t *data, size_t len, tk_tokvec *v, char *err, size_t errlen) {
    uint32_t entries = 0;
    for (size_t i = 0; i < len;) {
        const uint8_t *nl = memchr(data + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - data) : len;
        if (e > i && !(e == i + 1 && data[i] == '\r')) {
            if (entries == TK_MAX_VOCAB) {
                tk_set_err(err, errlen, "%s: more than %u entries", path, TK_MAX_VOCAB);
                return TK_ERR_RANGE;
            }
            entries++;
        }
        i = e + 1;
    }
    /* RWKV World's rwkv_vocab_*.txt ("1 '\\x00' 1": id, a Python literal,
     * its length) is no rank file: named, not reported as bad base64 */
    if (rwkv_line(data, len)) {
        tk_set_err(err, errlen,
                   "%s: an RWKV World vocabulary (rwkv_vocab_*.txt: id, Python literal, length a line), not a tiktoken "
                   "rank file: not supported (RWKV's tokenizer is a longest-match trie, not BPE)",
                   path);
        return TK_ERR_UNSUPPORTED;
    }
    int rc = tk_ld_tv_init(v, entries);
    if (rc) return rc;
    uint8_t tokbuf[TK_MAX_TOKEN_BYTES];
    uint32_t lineno = 0, empty_seen = 0;
    for (size_t i = 0; i < len;) {
        const uint8_t *nl = memchr(data + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - data) : len, le = e;
        lineno++;
        if (le > i && data[le - 1] == '\r') le--;
        if (le > i) {
            const uint8_t *spc = memchr(data + i, ' ', le - i);
            size_t sp = spc ? (size_t)(spc - data) : le;
            if (sp == le || sp == i) {
                tk_set_err(err, errlen, "%s:%u: expected \"<base64> <rank>\"", path, lineno);
                return TK_ERR_FORMAT;
            }
            /* the decoded length (padding not counted): a 1024-byte token is
             * 1368 base64 characters ending in "==", which our saver writes
             * and tiktoken reads */
            size_t b64n = sp - i, pad = b64n >= 2 && data[sp - 1] == '=' ? 1 + (data[sp - 2] == '=') : 0;
            if (b64n % 4 == 0 && b64n / 4 * 3 - pad > TK_MAX_TOKEN_BYTES) { /* else b64_decode refuses it */
                tk_set_err(err, errlen, "%s:%u: a token of %zu bytes, longer than %u bytes (the limit)", path, lineno,
                           b64n / 4 * 3 - pad, TK_MAX_TOKEN_BYTES);
                return TK_ERR_LIMIT;
            }
            /* A field of '=' alone is the empty token: Python's b64decode
             * (tiktoken's load_tiktoken_bpe) turns "=" into b"", and Whisper's
             * multilingual.tiktoken / gpt2.tiktoken end with "= 50256". tiktoken
             * keeps it as a rank that encode never yields (a piece is never
             * empty) and that decodes to nothing; tk_finalize indexes tokens
             * of length 1 and up only, so it does the same. */
            size_t neq = 0;
            while (i + neq < sp && data[i + neq] == '=') neq++;
            long tl = neq == sp - i ? 0 : b64_decode(data + i, sp - i, tokbuf);
            if (tl < 0 || (tl == 0 && neq != sp - i)) {
                tk_set_err(err, errlen, "%s:%u: bad base64 \"%.*s\"", path, lineno, (int)(sp - i > 40 ? 40 : sp - i),
                           data + i);
                return TK_ERR_BASE64;
            }
            if (tl == 0 && empty_seen) {
                tk_set_err(err, errlen, "%s:%u: a second empty token (the first at line %u)", path, lineno, empty_seen);
                return TK_ERR_DUP_RANK;
            }
            if (tl == 0) empty_seen = lineno;
            uint32_t r = 0;
            if ((rc = parse_rank(data + sp + 1, le - sp - 1, &r))) {
                if (rc == TK_ERR_RANGE)
                    tk_set_err(err, errlen, "%s:%u: rank \"%.*s\" out of range (0..%u)", path, lineno,
                               (int)(le - sp - 1 > 24 ? 24 : le - sp - 1), data + sp + 1, TK_MAX_VOCAB - 1);
                else tk_set_err(err, errlen, "%s:%u: bad rank (decimal digits expected)", path, lineno);
                return rc;
            }
            if (r >= v->n) {
                tk_set_err(err, errlen, "%s:%u: rank %u leaves a gap (file has %u entries)", path, lineno, r, v->n);
                return TK_ERR_MISSING_RANK;
            }
            if ((rc = tk_ld_tv_set(v, r, tokbuf, (size_t)tl))) {
                tk_set_err(err, errlen, "%s:%u: rank %u given twice", path, lineno, r);
                return rc;
            }
        }
        i = e + 1;
    }
    if (entries == 0) {
        tk_set_err(err, errlen, "%s: empty rank file", path);
        return TK_ERR_FORMAT;
    }
    return TK_OK;
}

int tk_load_tiktoken(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!path || !out) return TK_ERR_ARG;
    *out = NULL;
    uint8_t *data;
    struct stat src; /* a known rank file's tables may be mapped from an image (tk_image.c) */
    /* a regex the caller attaches next (TK_PAT_REGEX): a known file keeps its
     * own pattern in its tables and image */
    tk_pattern img_pat = pat == TK_PAT_REGEX ? TK_PAT_NONE : pat;
    if (tk_image_load(path, img_pat, out, &src) == 0) return TK_OK;
    size_t len;
    int rc = tk_read_regular(path, TK_MAX_FILE_BYTES, &data, &len, err, errlen);
    if (rc) return rc;
    tk_tokvec v = {0};
    if ((rc = tiktoken_lines(path, data, len, &v, err, errlen))) goto done;
    {
        const tk_known_vocab *kv = tk_ld_known_by_sha(data, len);
        tk_special *msp = NULL;
        size_t nmsp = 0;
        tk_pattern p = pat;
        if (!kv && (rc = read_meta(path, &p, &msp, &nmsp, err, errlen))) goto done;
        if (p == TK_PAT_NONE || (p == TK_PAT_REGEX && kv)) p = kv ? kv->pat : TK_PAT_NONE;
        size_t pl = strlen(path);
        if (p == TK_PAT_NONE && pl >= 6 && strcmp(path + pl - 6, ".model") == 0) {
            tk_set_err(err, errlen,
                       "%s: a tiktoken rank file named .model (as Meta ships Llama 3 / Llama 4), not a "
                       "SentencePiece model, and not one this build recognises by sha256: give its pre-tokenizer "
                       "with --pattern gpt2|cl100k|o200k|REGEX (Llama 3: cl100k) and its special tokens in "
                       "%s.meta.json",
                       path, path);
            tk_ld_free_specials(msp, nmsp);
            rc = TK_ERR_PATTERN;
            goto done;
        }
        if (p == TK_PAT_NONE) {
            tk_set_err(err, errlen,
                       "%s: unknown rank file (not gpt2/cl100k_base/o200k_base by sha256): give the "
                       "pre-tokenizer with --pattern gpt2|cl100k|o200k or its regex",
                       path);
            tk_ld_free_specials(msp, nmsp);
            rc = TK_ERR_PATTERN;
            goto done;
        }
        /* Meta's files: the specials of its tokenizer.py, from n_ranks up */
        if (kv && kv->runs && (rc = tk_ld_known_run_specials(kv, v.n, &msp, &nmsp))) goto done;
        char mp[4096];
        snprintf(mp, sizeof mp, "%s%s", path, nmsp && !kv ? ".meta.json" : "");
        bool own = kv && !kv->runs;
        rc = tk_ld_tv_build(&v, p, own ? kv->specials : msp, own ? tk_ld_n_known_specials(kv) : nmsp, NULL,
                            kv ? kv->name : NULL, path, mp, out, err, errlen);
        tk_ld_free_specials(msp, nmsp);
        if (rc == TK_OK && kv) {
            (*out)->known = true;
            /* Meta's encode(bos=True, eos=True): <|begin_of_text|> ...
             * <|end_of_text|>, which tk_default_framing finds by name */
            if (kv->runs) (*out)->pp = TK_PP_ABSENT;
            tk_image_save(path, img_pat, *out, &src, data, len);
        }
    }
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", path, tk_strerror(rc));
    tk_ld_tv_free(&v);
    free(data);
    return rc;
}

/* ---- the rank engine (tk_engine.h) ------------------------------------------
 * Rank files and encoder.json + vocab.bpe: every op is the generic path
 * (encode.c, bpe.c, decode.c), the tables are the tokenizer's own. */

static bool rank_sniff(const char *path, const uint8_t *head, size_t n) {
    (void)path;
    (void)head;
    (void)n;
    return true; /* any file no other engine took */
}

static void rank_describe(const tk_tokenizer *t, char *buf, size_t len) {
    snprintf(buf, len, "%s pre-tokenizer | BPE (merge by rank)", tk_pattern_name(t->pattern));
}

const tk_engine tk_engine_rank = {
    .name = "rank",
    .sniff = rank_sniff,
    .load = tk_load_tiktoken,
    .describe = rank_describe,
    .image = true,
    .default_pp = TK_PP_NONE,
};
