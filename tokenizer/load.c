/* load.c - vocabulary loaders: tiktoken rank files, GPT-2 encoder.json +
 * vocab.bpe, HF tokenizer.json (ByteLevel BPE), and name resolution. */
#include "tk_internal.h"
#include "mks_env.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Upstream vocabularies, recognised by the sha256 of their rank file. */
typedef struct {
    const char *name;
    const char *sha256;
    tk_pattern pat;
    tk_special specials[6];
} known_vocab;

static const known_vocab KNOWN[] = {
    {"gpt2", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", TK_PAT_GPT2,
     {{"<|endoftext|>", 50256}}},
    {"gpt2", "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", TK_PAT_GPT2, /* vocab.bpe */
     {{"<|endoftext|>", 50256}}},
    {"cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7", TK_PAT_CL100K,
     {{"<|endoftext|>", 100257},
      {"<|fim_prefix|>", 100258},
      {"<|fim_middle|>", 100259},
      {"<|fim_suffix|>", 100260},
      {"<|endofprompt|>", 100276}}},
    {"o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", TK_PAT_O200K,
     {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}},
};

static const known_vocab *known_by_sha(const uint8_t *data, size_t n) {
    uint8_t d[32];
    char hex[65];
    tk_sha256(data, n, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
        if (strcmp(hex, KNOWN[k].sha256) == 0) return &KNOWN[k];
    return NULL;
}

static size_t n_known_specials(const known_vocab *kv) {
    size_t n = 0;
    while (n < 6 && kv->specials[n].text) n++;
    return n;
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
/* Something is there (a file, FIFO, device ...): the loaders refuse what is
 * not a regular file, with a message, instead of looking elsewhere. */
static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A path built from parts; false (and a message) if it does not fit. */
static bool join_path(char *out, size_t cap, const char *dir, const char *name, char *err, size_t errlen) {
    int n = snprintf(out, cap, "%s%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        tk_set_err(err, errlen, "path too long: %.200s...%s", dir, name);
        return false;
    }
    return true;
}

/* Length of the valid UTF-8 character at p[0..n) (2-4 bytes, no overlong
 * form, no surrogate, at most U+10FFFF), 0 if there is none. */
static size_t utf8_char(const uint8_t *p, size_t n) {
    size_t k = 0;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) k = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) k = 3;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4) k = 4;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) || (p[0] == 0xF0 && p[1] < 0x90) ||
        (p[0] == 0xF4 && p[1] > 0x8F))
        return 0;
    return k;
}

const char *tk_escape_text(const void *text, size_t n, char *out, size_t cap) {
    const uint8_t *p = text;
    size_t o = 0;
    if (!cap) return out;
    if (cap < 8) { /* no room for even one escape and "..." */
        out[0] = 0;
        return out;
    }
    for (size_t i = 0; i < n;) {
        size_t k = p[i] < 0x80 ? 1 : utf8_char(p + i, n - i);
        bool c1 = k == 2 && p[i] == 0xC2 && p[i + 1] <= 0x9F; /* U+0080..U+009F */
        bool esc = k == 0 || c1 || p[i] < 0x20 || p[i] == 0x7F || p[i] == '"' || p[i] == '\\';
        size_t need = esc ? 4 * (k ? k : 1) : k, used = k ? k : 1;
        /* the rest, or "..." after it, must still fit */
        if (o + need + (i + used < n ? 3 : 0) >= cap) {
            memcpy(out + o, "...", 4);
            return out;
        }
        for (size_t j = 0; j < used; j++) {
            if (esc) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i + j]);
            else out[o++] = (char)p[i + j];
        }
        i += used;
    }
    out[o] = 0;
    return out;
}

/* A token text or key as it may be shown in a message: control bytes
 * (terminal escapes in a hostile file) as \xNN, at most ~60 bytes. */
static const char *shown(const char *s, char buf[static 160]) {
    return tk_escape_text(s, strlen(s), buf, 68);
}

static const char *json_kind(const json_t *v) {
    if (!v) return "missing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a float";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

/* A token id from JSON: an integer (not a float, string or boolean) in
 * 0..TK_MAX_VOCAB-1; what/entry name it in the message. */
static int json_id(const json_t *v, const char *file, const char *what, const char *entry, uint32_t *id, char *err,
                   size_t errlen) {
    char sb[160];
    if (!json_is_integer(v)) {
        tk_set_err(err, errlen, "%s: %s \"%s\": the id is %s, not an integer", file, what, shown(entry, sb),
                   json_kind(v));
        return TK_ERR_FORMAT;
    }
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= (json_int_t)TK_MAX_VOCAB) {
        tk_set_err(err, errlen, "%s: %s \"%s\": id %lld out of range (0..%u)", file, what, shown(entry, sb),
                   (long long)x, TK_MAX_VOCAB - 1);
        return TK_ERR_RANGE;
    }
    *id = (uint32_t)x;
    return TK_OK;
}

/* ---- tokens under construction ------------------------------------------ */

typedef struct {
    uint8_t *arena;
    size_t len, cap;
    uint64_t *off; /* by rank: start; UINT64_MAX = unset */
    uint32_t *tlen;
    uint32_t n;    /* number of ranks (slots) */
} tokvec;

/* n slots: callers size it by entries actually present in the file, so it
 * is bounded by the file's size (and by TK_MAX_VOCAB). */
static int tv_init(tokvec *v, uint32_t n) {
    memset(v, 0, sizeof *v);
    if (n > TK_MAX_VOCAB) return TK_ERR_RANGE;
    v->off = malloc((n ? n : 1) * sizeof *v->off);
    v->tlen = calloc(n ? n : 1, sizeof *v->tlen);
    if (!v->off || !v->tlen) return TK_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) v->off[i] = UINT64_MAX;
    v->n = n;
    return TK_OK;
}

static int tv_set(tokvec *v, uint32_t rank, const uint8_t *p, size_t n) {
    if (rank >= v->n) return TK_ERR_MISSING_RANK;
    if (v->off[rank] != UINT64_MAX) return TK_ERR_DUP_RANK;
    if (n > TK_MAX_TOKEN_BYTES) return TK_ERR_LIMIT;
    if (n > v->cap - v->len) {
        size_t c = v->cap ? v->cap : 1 << 16;
        while (c - v->len < n) {
            if (__builtin_mul_overflow(c, (size_t)2, &c)) return TK_ERR_NOMEM;
        }
        uint8_t *a = realloc(v->arena, c);
        if (!a) return TK_ERR_NOMEM;
        v->arena = a;
        v->cap = c;
    }
    memcpy(v->arena + v->len, p, n);
    v->off[rank] = v->len;
    v->tlen[rank] = (uint32_t)n;
    v->len += n;
    return TK_OK;
}

static void tv_free(tokvec *v) {
    free(v->arena);
    free(v->off);
    free(v->tlen);
}

/* What tk_finalize refused, as a message naming the file and the entries. */
static void finalize_msg(const tk_tokenizer *t, int rc, const char *file, const char *sp_file, char *err,
                         size_t errlen) {
    const char *what = t->bad_what ? t->bad_what : tk_strerror(rc);
    /* ranks are contiguous by now: an id out of range or too far out is a special's */
    if (rc == TK_ERR_RANGE || strstr(what, "special")) file = sp_file;
#define ID_OF(r) (t->rank_to_id ? t->rank_to_id[r] : (r))
    if (rc == TK_ERR_MISSING_RANK && t->bad_id != TK_NO_RANK)
        tk_set_err(err, errlen, "%s: %s (byte 0x%02x has no token)", file, what, t->bad_id);
    else if (t->bad_rank != TK_NO_RANK && t->bad_rank2 != TK_NO_RANK && t->bad_rank < t->n_ranks &&
             t->bad_rank2 < t->n_ranks)
        tk_set_err(err, errlen, "%s: %s (ids %u and %u)", file, what, ID_OF(t->bad_rank2), ID_OF(t->bad_rank));
    else if (t->bad_id != TK_NO_RANK)
        tk_set_err(err, errlen, "%s: %s (id %u)", file, what, t->bad_id);
    else if (t->bad_rank != TK_NO_RANK && t->bad_rank < t->n_ranks)
        tk_set_err(err, errlen, "%s: %s (id %u)", file, what, ID_OF(t->bad_rank));
    else
        tk_set_err(err, errlen, "%s: %s", file, what);
#undef ID_OF
}

/* Move a complete tokvec into a new tokenizer (arena laid out by rank). */
static int tv_build_x(tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                      const char *name, const char *file, const char *sp_file, bool decode_only, tk_tokenizer **out,
                      char *err, size_t errlen);
static int tv_build(tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                    const char *name, const char *file, const char *sp_file, tk_tokenizer **out, char *err,
                    size_t errlen) {
    return tv_build_x(v, pat, sp, nsp, rank_to_id, name, file, sp_file, false, out, err, errlen);
}

static int tv_build_x(tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                      const char *name, const char *file, const char *sp_file, bool decode_only, tk_tokenizer **out,
                      char *err, size_t errlen) {
    for (uint32_t r = 0; r < v->n; r++)
        if (v->off[r] == UINT64_MAX) {
            tk_set_err(err, errlen, "%s: rank %u is missing (ranks must be contiguous from 0)", file, r);
            free(rank_to_id);
            return TK_ERR_MISSING_RANK;
        }
    for (size_t k = 0; k < nsp; k++)
        if (!sp[k].text || !sp[k].text[0]) {
            tk_set_err(err, errlen, "%s: special token with id %u has an empty text", sp_file, sp[k].id);
            free(rank_to_id);
            return TK_ERR_FORMAT;
        }
    tk_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        free(rank_to_id);
        return TK_ERR_NOMEM;
    }
    t->eot = TK_NO_RANK;
    t->pattern = pat;
    t->decode_only = decode_only;
    t->rank_to_id = rank_to_id;
    t->n_ranks = v->n;
    t->arena = malloc(v->len ? v->len : 1);
    t->tok_off = malloc(((size_t)v->n + 1) * sizeof *t->tok_off);
    int rc = TK_ERR_NOMEM;
    if (!t->arena || !t->tok_off) goto fail;
    size_t off = 0;
    for (uint32_t r = 0; r < v->n; r++) {
        t->tok_off[r] = off;
        memcpy(t->arena + off, v->arena + v->off[r], v->tlen[r]);
        off += v->tlen[r];
    }
    t->tok_off[v->n] = off;
    if (name) snprintf(t->name, sizeof t->name, "%s", name);
    if ((rc = tk_set_specials(t, sp, nsp))) goto fail;
    if ((rc = tk_finalize(t))) {
        finalize_msg(t, rc, file, sp_file, err, errlen);
        goto fail;
    }
    *out = t;
    return TK_OK;
fail:
    tk_free(t);
    return rc;
}

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

static void free_specials(tk_special *sp, size_t n) {
    for (size_t k = 0; k < n; k++) free((char *)sp[k].text);
    free(sp);
}

/* Optional sidecar "<path>.meta.json": {"pattern": "...", "special_tokens": {"text": id}} */
static int read_meta(const char *path, tk_pattern *pat, tk_special **sp, size_t *nsp, char *err, size_t errlen) {
    char mp[4096];
    *sp = NULL;
    *nsp = 0;
    if (!join_path(mp, sizeof mp, path, ".meta.json", err, errlen)) return TK_ERR_ARG;
    if (!exists(mp)) return TK_OK;
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
        tk_set_err(err, errlen, "%s: \"pattern\" is %s, not a string", mp, json_kind(p));
        json_decref(root);
        return TK_ERR_FORMAT;
    }
    /* only the known names: a sidecar never supplies a regex */
    if (p && tk_pattern_parse(json_string_value(p), &named)) {
        tk_set_err(err, errlen, "%s: unknown pattern \"%s\" (gpt2, cl100k or o200k)", mp,
                   shown(json_string_value(p), sb));
        json_decref(root);
        return TK_ERR_PATTERN;
    }
    if (*pat == TK_PAT_NONE) *pat = named;
    json_t *st = json_object_get(root, "special_tokens");
    if (st && !json_is_object(st)) {
        tk_set_err(err, errlen, "%s: \"special_tokens\" is %s, not an object", mp, json_kind(st));
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
            if ((rc = json_id(v, mp, "special token", k, &id, err, errlen))) break;
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
            free_specials(*sp, *nsp);
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

/* One pass over the rank lines; a blank line is skipped. Each entry needs
 * at least 7 bytes ("AA== 0\n"), so the tables are bounded by the file. */
static int tiktoken_lines(const char *path, const uint8_t *data, size_t len, tokvec *v, char *err, size_t errlen) {
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
    int rc = tv_init(v, entries);
    if (rc) return rc;
    uint8_t tokbuf[TK_MAX_TOKEN_BYTES];
    uint32_t lineno = 0;
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
            long tl = b64_decode(data + i, sp - i, tokbuf);
            if (tl <= 0) {
                tk_set_err(err, errlen, "%s:%u: bad base64 \"%.*s\"", path, lineno, (int)(sp - i > 40 ? 40 : sp - i),
                           data + i);
                return TK_ERR_BASE64;
            }
            uint32_t r = 0;
            if ((rc = parse_rank(data + sp + 1, le - sp - 1, &r))) {
                if (rc == TK_ERR_RANGE)
                    tk_set_err(err, errlen, "%s:%u: rank \"%.*s\" out of range (0..%u)", path, lineno,
                               (int)(le - sp - 1 > 24 ? 24 : le - sp - 1), data + sp + 1, TK_MAX_VOCAB - 1);
                else
                    tk_set_err(err, errlen, "%s:%u: bad rank (decimal digits expected)", path, lineno);
                return rc;
            }
            if (r >= v->n) {
                tk_set_err(err, errlen, "%s:%u: rank %u leaves a gap (file has %u entries)", path, lineno, r, v->n);
                return TK_ERR_MISSING_RANK;
            }
            if ((rc = tv_set(v, r, tokbuf, (size_t)tl))) {
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
    if (tk_image_load(path, pat, out, &src) == 0) return TK_OK;
    size_t len;
    int rc = tk_read_regular(path, TK_MAX_FILE_BYTES, &data, &len, err, errlen);
    if (rc) return rc;
    tokvec v = {0};
    if ((rc = tiktoken_lines(path, data, len, &v, err, errlen))) goto done;
    {
        const known_vocab *kv = known_by_sha(data, len);
        tk_special *msp = NULL;
        size_t nmsp = 0;
        tk_pattern p = pat;
        if (!kv && (rc = read_meta(path, &p, &msp, &nmsp, err, errlen))) goto done;
        if (p == TK_PAT_NONE) p = kv ? kv->pat : TK_PAT_NONE;
        if (p == TK_PAT_NONE) {
            tk_set_err(err, errlen, "%s: unknown rank file (not gpt2/cl100k_base/o200k_base by sha256): give the "
                       "pre-tokenizer with --pattern gpt2|cl100k|o200k", path);
            free_specials(msp, nmsp);
            rc = TK_ERR_PATTERN;
            goto done;
        }
        char mp[4096];
        snprintf(mp, sizeof mp, "%s%s", path, nmsp ? ".meta.json" : "");
        rc = tv_build(&v, p, kv ? kv->specials : msp, kv ? n_known_specials(kv) : nmsp, NULL, kv ? kv->name : NULL,
                      path, mp, out, err, errlen);
        free_specials(msp, nmsp);
        if (rc == TK_OK && kv) {
            (*out)->known = true;
            tk_image_save(path, pat, *out, &src, data, len);
        }
    }
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", path, tk_strerror(rc));
    tv_free(&v);
    free(data);
    return rc;
}

/* ---- byte-level strings (GPT-2 encoder.json / tokenizer.json) ---------- */

/* Decode a byte-level-mapped UTF-8 string into raw bytes; -1 if a character
 * is not in the byte map or the result exceeds cap. */
static long bytelevel_decode(const char *s, uint8_t *out, size_t cap) {
    size_t o = 0;
    const uint8_t *p = (const uint8_t *)s;
    while (*p) {
        uint32_t cp;
        if (p[0] < 0x80) {
            cp = p[0];
            p++;
        } else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
            cp = ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
            p += 2;
        } else {
            return -1;
        }
        int b = tk_cp_to_byte(cp);
        if (b < 0 || o >= cap) return -1;
        out[o++] = (uint8_t)b;
    }
    return (long)o;
}

/* Hash set of byte strings (to know which vocab entries are mergeable). */
typedef struct {
    uint8_t **keys;
    uint32_t *lens;
    size_t mask;
} strset;

static int ss_init(strset *s, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    s->keys = calloc(cap, sizeof *s->keys);
    s->lens = calloc(cap, sizeof *s->lens);
    s->mask = cap - 1;
    return s->keys && s->lens ? TK_OK : TK_ERR_NOMEM;
}
static long ss_find(const strset *s, const uint8_t *p, size_t n) {
    size_t i = tk_hash_bytes(p, n) & s->mask;
    while (s->keys[i]) {
        if (s->lens[i] == n && memcmp(s->keys[i], p, n) == 0) return (long)i;
        i = (i + 1) & s->mask;
    }
    return -1 - (long)i;
}
/* Adds p (the set must have room: its capacity is twice what it may hold). */
static int ss_add(strset *s, const uint8_t *p, size_t n) {
    long f = ss_find(s, p, n);
    if (f >= 0) return TK_OK;
    size_t i = (size_t)(-1 - f);
    s->keys[i] = malloc(n ? n : 1);
    if (!s->keys[i]) return TK_ERR_NOMEM;
    memcpy(s->keys[i], p, n);
    s->lens[i] = (uint32_t)n;
    return TK_OK;
}
static void ss_free(strset *s) {
    if (s->keys)
        for (size_t i = 0; i <= s->mask; i++) free(s->keys[i]);
    free(s->keys);
    free(s->lens);
}

/* vocab.bpe: "<a> <b>" per line, an optional "#version" first line. Every
 * part and every result must be an entry of encoder.json (the set then holds
 * at most 256 + its entries, so its capacity is never exceeded). */
static int gpt2_merges(const char *vocab_bpe, uint8_t *bpe, size_t bpe_len, json_t *enc, strset *set, char *err,
                       size_t errlen) {
    char *line = (char *)bpe, *end = (char *)bpe + bpe_len;
    uint32_t lineno = 0;
    int rc;
    char sb[160];
    const uint8_t *nul = memchr(bpe, 0, bpe_len);
    if (nul) {
        tk_set_err(err, errlen, "%s: NUL byte at offset %zu", vocab_bpe, (size_t)(nul - bpe));
        return TK_ERR_FORMAT;
    }
    while (line < end) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        if (!nl) nl = end;
        *nl = 0;
        lineno++;
        if (nl > line && nl[-1] == '\r') nl[-1] = 0;
        if (line[0] && !(lineno == 1 && strncmp(line, "#version", 8) == 0)) {
            char *sp1 = strchr(line, ' ');
            if (!sp1 || sp1 == line || !sp1[1] || strchr(sp1 + 1, ' ')) {
                tk_set_err(err, errlen, "%s:%u: expected \"<a> <b>\"", vocab_bpe, lineno);
                return TK_ERR_FORMAT;
            }
            *sp1 = 0;
            for (const char *part = line; part; part = part == line ? sp1 + 1 : NULL)
                if (!json_object_get(enc, part)) {
                    tk_set_err(err, errlen, "%s:%u: merge part \"%s\" is not in encoder.json", vocab_bpe, lineno,
                               shown(part, sb));
                    return TK_ERR_FORMAT;
                }
            uint8_t buf[2 * TK_MAX_TOKEN_BYTES];
            long a = bytelevel_decode(line, buf, TK_MAX_TOKEN_BYTES);
            long b = a < 0 ? -1 : bytelevel_decode(sp1 + 1, buf + a, TK_MAX_TOKEN_BYTES);
            if (a < 0 || b < 0) {
                tk_set_err(err, errlen, "%s:%u: not a byte-level token (or longer than %u bytes)", vocab_bpe, lineno,
                           TK_MAX_TOKEN_BYTES);
                return TK_ERR_FORMAT;
            }
            if (a + b > (long)TK_MAX_TOKEN_BYTES) {
                tk_set_err(err, errlen, "%s:%u: merge result longer than %u bytes", vocab_bpe, lineno,
                           TK_MAX_TOKEN_BYTES);
                return TK_ERR_LIMIT;
            }
            /* the result as encoder.json spells it: the two strings joined */
            size_t la = strlen(line), lb = strlen(sp1 + 1);
            char joined[4 * TK_MAX_TOKEN_BYTES + 1];
            memcpy(joined, line, la);
            memcpy(joined + la, sp1 + 1, lb + 1);
            if (!json_object_get(enc, joined)) {
                tk_set_err(err, errlen, "%s:%u: merge result \"%s\" is not in encoder.json", vocab_bpe, lineno,
                           shown(joined, sb));
                return TK_ERR_FORMAT;
            }
            if ((rc = ss_add(set, buf, (size_t)(a + b)))) return rc;
        }
        line = nl + 1;
    }
    return TK_OK;
}

int tk_load_gpt2(const char *encoder_json, const char *vocab_bpe, tk_pattern pat, tk_tokenizer **out, char *err,
                 size_t errlen) {
    if (!encoder_json || !vocab_bpe || !out) return TK_ERR_ARG;
    *out = NULL;
    uint8_t *bpe;
    size_t bpe_len;
    int rc = tk_read_regular(vocab_bpe, TK_MAX_FILE_BYTES, &bpe, &bpe_len, err, errlen);
    if (rc) return rc;
    const known_vocab *kv = known_by_sha(bpe, bpe_len);
    json_t *enc = NULL;
    strset set = {0};
    tokvec v = {0};
    tk_special *sp = NULL;
    size_t nsp = 0;
    char sb[160];
    if ((rc = tk_json_load(encoder_json, &enc, err, errlen))) goto done;
    if (!json_is_object(enc)) {
        tk_set_err(err, errlen, "%s: not a JSON object", encoder_json);
        rc = TK_ERR_FORMAT;
        goto done;
    }
    if (json_object_size(enc) > TK_MAX_VOCAB) {
        tk_set_err(err, errlen, "%s: more than %u entries", encoder_json, TK_MAX_VOCAB);
        rc = TK_ERR_RANGE;
        goto done;
    }
    /* every id first: type, range */
    {
        const char *k;
        json_t *val;
        uint32_t id;
        json_object_foreach(enc, k, val) {
            if ((rc = json_id(val, encoder_json, "token", k, &id, err, errlen))) goto done;
        }
    }
    /* mergeable set: the 256 bytes + every merge result of vocab.bpe */
    if ((rc = ss_init(&set, json_object_size(enc) + 256))) goto done;
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if ((rc = ss_add(&set, &c, 1))) goto done;
    }
    if ((rc = gpt2_merges(vocab_bpe, bpe, bpe_len, enc, &set, err, errlen))) goto done;
    {
        size_t n = json_object_size(enc);
        sp = calloc(n ? n : 1, sizeof *sp);
        if (!sp) {
            rc = TK_ERR_NOMEM;
            goto done;
        }
        uint32_t n_ranks = 0;
        const char *k;
        json_t *val;
        json_object_foreach(enc, k, val) {
            uint8_t buf[TK_MAX_TOKEN_BYTES];
            long l = bytelevel_decode(k, buf, sizeof buf);
            if (l > 0 && ss_find(&set, buf, (size_t)l) >= 0) n_ranks++;
        }
        if ((rc = tv_init(&v, n_ranks))) goto done;
        json_object_foreach(enc, k, val) {
            uint32_t id = (uint32_t)json_integer_value(val); /* checked above */
            uint8_t buf[TK_MAX_TOKEN_BYTES];
            long l = bytelevel_decode(k, buf, sizeof buf);
            if (l > 0 && ss_find(&set, buf, (size_t)l) >= 0) {
                if ((rc = tv_set(&v, id, buf, (size_t)l))) {
                    tk_set_err(err, errlen, "%s: token \"%s\": id %u %s", encoder_json, shown(k, sb), id,
                               rc == TK_ERR_DUP_RANK ? "is given twice"
                                                     : "leaves a gap in the ranks (mergeable tokens must have ids "
                                                       "0..n-1)");
                    goto done;
                }
            } else {
                if (!k[0]) {
                    tk_set_err(err, errlen, "%s: the empty string is not a token", encoder_json);
                    rc = TK_ERR_FORMAT;
                    goto done;
                }
                if (!(sp[nsp].text = strdup(k))) {
                    rc = TK_ERR_NOMEM;
                    goto done;
                }
                sp[nsp].id = id;
                nsp++;
            }
        }
    }
    if (pat == TK_PAT_NONE) pat = TK_PAT_GPT2; /* GPT-2's own format implies its pattern */
    rc = tv_build(&v, pat, sp, nsp, NULL, kv ? kv->name : NULL, encoder_json, encoder_json, out, err, errlen);
    if (rc == TK_OK && kv) (*out)->known = true;
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", encoder_json, tk_strerror(rc));
    free_specials(sp, nsp);
    tv_free(&v);
    ss_free(&set);
    json_decref(enc);
    free(bpe);
    return rc;
}

/* ---- HF tokenizer.json ----------------------------------------------------- */

#define SPECIAL_ID (TK_NO_RANK - 1)

tk_pattern tk_pattern_from_regex(const char *re) {
    /* exact matches with our exports, the README forms and Python's forms */
    static const struct {
        const char *re;
        tk_pattern pat;
    } forms[] = {
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", TK_PAT_GPT2},
        {"'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s", TK_PAT_GPT2},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*["
         "\\r\\n]+|\\s+(?!\\S)|\\s+",
         TK_PAT_CL100K},
        {"'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|"
         "\\s*[\\r\\n]|\\s+(?!\\S)|\\s",
         TK_PAT_CL100K},
    };
    for (int p = TK_PAT_GPT2; p <= TK_PAT_O200K; p++)
        if (strcmp(re, tk_pattern_regex((tk_pattern)p)) == 0) return (tk_pattern)p;
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++)
        if (strcmp(re, forms[k].re) == 0) return forms[k].pat;
    return TK_PAT_NONE;
}

/* Some object in v (recursively) has "type": type. */
static bool has_type(json_t *v, const char *type, int depth) {
    if (depth > 32) return false;
    if (json_is_object(v)) {
        const char *t = json_string_value(json_object_get(v, "type"));
        if (t && strcmp(t, type) == 0) return true;
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) if (has_type(x, type, depth + 1)) return true;
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) if (has_type(x, type, depth + 1)) return true;
    }
    return false;
}

/* Bytes a SentencePiece-style token stands for when decoded on its own:
 * <0xNN> the byte (with byte_fallback), U+2581 a space, the rest as is. */
static long sp_display(const char *k, bool byte_fallback, uint8_t *out, size_t cap) {
    size_t n = strlen(k), o = 0;
    if (byte_fallback && n == 6 && k[0] == '<' && k[1] == '0' && k[2] == 'x' && k[5] == '>') {
        int hi = k[3] >= '0' && k[3] <= '9' ? k[3] - '0' : k[3] >= 'A' && k[3] <= 'F' ? k[3] - 'A' + 10 : -1;
        int lo = k[4] >= '0' && k[4] <= '9' ? k[4] - '0' : k[4] >= 'A' && k[4] <= 'F' ? k[4] - 'A' + 10 : -1;
        if (hi >= 0 && lo >= 0) {
            out[0] = (uint8_t)(hi << 4 | lo);
            return 1;
        }
    }
    for (size_t i = 0; i < n;) {
        if ((uint8_t)k[i] == 0xE2 && i + 2 < n && (uint8_t)k[i + 1] == 0x96 && (uint8_t)k[i + 2] == 0x81) {
            if (o >= cap) return -1;
            out[o++] = ' ';
            i += 3;
            continue;
        }
        if (o >= cap) return -1;
        out[o++] = (uint8_t)k[i++];
    }
    return (long)o;
}

/* The two parts of merge i (a string "a b" or an array ["a", "b"]), copied
 * to a and b (each of cap bytes). */
static int hf_merge_parts(const json_t *m, size_t i, char *a, char *b, size_t cap, const char *path, char *err,
                          size_t errlen) {
    const char *sa = NULL, *sb = NULL;
    size_t la = 0, lb = 0;
    if (json_is_string(m)) {
        const char *s = json_string_value(m), *spc = strchr(s, ' ');
        if (spc) {
            sa = s;
            la = (size_t)(spc - s);
            sb = spc + 1;
            lb = strlen(sb);
            if (memchr(sb, ' ', lb)) sa = NULL;
        }
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) {
        sa = json_string_value(json_array_get(m, 0));
        sb = json_string_value(json_array_get(m, 1));
        la = strlen(sa);
        lb = strlen(sb);
    }
    if (!sa || !la || !lb) {
        tk_set_err(err, errlen, "%s: merge %zu malformed (expected \"a b\" or [\"a\", \"b\"])", path, i);
        return TK_ERR_FORMAT;
    }
    if (la >= cap || lb >= cap) {
        tk_set_err(err, errlen, "%s: merge %zu: a part is longer than %u bytes", path, i, TK_MAX_TOKEN_BYTES);
        return TK_ERR_LIMIT;
    }
    memcpy(a, sa, la);
    a[la] = 0;
    memcpy(b, sb, lb);
    b[lb] = 0;
    return TK_OK;
}

/* Ids of model.vocab and added_tokens: type and range of each, no id named
 * by two vocab entries, and no more ids than the entries can account for
 * (checked before rank_of_id, 4 bytes per id, is allocated). */
static int hf_check_ids(const char *path, json_t *vocab, size_t nv, json_t *added, uint32_t *max_id, char *err,
                        size_t errlen) {
    const char *k;
    json_t *val;
    uint32_t id;
    int rc;
    size_t na = json_array_size(added);
    if (nv > TK_MAX_VOCAB || na > TK_MAX_VOCAB) {
        tk_set_err(err, errlen, "%s: more than %u entries", path, TK_MAX_VOCAB);
        return TK_ERR_RANGE;
    }
    json_object_foreach(vocab, k, val) {
        if ((rc = json_id(val, path, "model.vocab entry", k, &id, err, errlen))) return rc;
        if (id > *max_id) *max_id = id;
    }
    if (added && !json_is_array(added)) {
        tk_set_err(err, errlen, "%s: added_tokens is %s, not an array", path, json_kind(added));
        return TK_ERR_FORMAT;
    }
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        json_t *c = json_object_get(a, "content");
        if (!json_is_string(c) || !json_string_length(c)) {
            tk_set_err(err, errlen, "%s: added_tokens[%zu]: \"content\" is %s, not a non-empty string", path, i,
                       json_is_string(c) ? "empty" : json_kind(c));
            return TK_ERR_FORMAT;
        }
        if ((rc = json_id(json_object_get(a, "id"), path, "added token", json_string_value(c), &id, err, errlen)))
            return rc;
        if (id > *max_id) *max_id = id;
    }
    if ((uint64_t)*max_id + 1 > (uint64_t)nv + na + TK_MAX_ID_GAP) {
        tk_set_err(err, errlen, "%s: id %u leaves more than %u ids unused (%zu vocab entries, %zu added tokens): "
                   "the vocabulary would be far larger than its entries", path, *max_id, TK_MAX_ID_GAP, nv, na);
        return TK_ERR_RANGE;
    }
    return TK_OK;
}

/* State shared by the phases of tk_load_hf_json; everything owned here is
 * released by hf_finish, the single cleanup path. */
typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    json_t *root, *model, *vocab, *merges, *added;
    tk_hfj J;
    bool fast;    /* vocab and merges came from the fast reader */
    bool sp_mode; /* SentencePiece-style (no ByteLevel anywhere) */
    size_t nv, n_merges;
    uint32_t max_id, next_rank;
    tokvec v;
    tk_special *sp;
    size_t nsp;
    uint32_t *rank_of_id, *rank_to_id;
    uint32_t (*mids)[3]; /* merges as (id a, id b, id result), then as ranks */
    int32_t (*ment)[3];  /* merges as vocabulary entries (a, b, a+b; -1: none) */
    char sb[160];
} hf_load;

/* Phase 1: read the file; vocab and merges by the fast reader, the rest by
 * jansson; on anything unusual the whole file by jansson (its messages). */
static int hf_read(hf_load *L) {
    uint8_t *data;
    size_t len;
    int rc;
    if ((rc = tk_read_regular(L->path, TK_MAX_FILE_BYTES, &data, &len, L->err, L->errlen))) return rc;
    rc = tk_hfj_parse(data, len, &L->J);
    if (rc == TK_OK && tk_json_loadb(L->path, L->J.rest, L->J.rest_len, len, &L->root, NULL, 0) == TK_OK) {
        L->fast = true;
    } else {
        tk_hfj_free(&L->J);
        if (rc < 0 && rc != TK_HFJ_FALLBACK) {
            free(data);
            return rc;
        }
        rc = tk_json_loadb(L->path, data, len, len, &L->root, L->err, L->errlen);
    }
    free(data);
    return rc;
}

/* The jansson tree's vocab and merges as flat arrays, as the fast reader
 * gives them. */
static int hf_flatten(hf_load *L) {
    tk_hfj *J = &L->J;
    size_t bytes = 16, used = 0, i;
    const char *k;
    json_t *val, *m;
    int rc;
    json_array_foreach(L->merges, i, m) if (json_is_string(m)) bytes += json_string_length(m) + 2;
    J->arena = malloc(bytes);
    J->vkey = malloc((L->nv + 1) * sizeof *J->vkey);
    J->vlen = malloc((L->nv + 1) * sizeof *J->vlen);
    J->vid = malloc((L->nv + 1) * sizeof *J->vid);
    J->ma = malloc((L->n_merges + 1) * sizeof *J->ma);
    J->mb = malloc((L->n_merges + 1) * sizeof *J->mb);
    if (!J->arena || !J->vkey || !J->vlen || !J->vid || !J->ma || !J->mb) return TK_ERR_NOMEM;
    json_object_foreach(L->vocab, k, val) {
        J->vkey[J->nv] = k;
        J->vlen[J->nv] = (uint32_t)strlen(k);
        J->vid[J->nv++] = (uint32_t)json_integer_value(val); /* checked */
    }
    if ((rc = tk_hfj_index(J))) return rc < 0 ? rc : TK_ERR_FORMAT; /* jansson refused duplicate keys already */
    json_array_foreach(L->merges, i, m) {
        char a[4 * TK_MAX_TOKEN_BYTES + 2], b[4 * TK_MAX_TOKEN_BYTES + 2];
        if ((rc = hf_merge_parts(m, i, a, b, 4 * TK_MAX_TOKEN_BYTES, L->path, L->err, L->errlen))) return rc;
        /* the parts as jansson holds them */
        if (json_is_string(m)) {
            char *c = (char *)J->arena + used; /* a and b fit: they are the string, split */
            used += strlen(a) + strlen(b) + 2;
            strcpy(c, a);
            strcpy(c + strlen(a) + 1, b);
            J->ma[i] = c;
            J->mb[i] = c + strlen(a) + 1;
        } else {
            J->ma[i] = json_string_value(json_array_get(m, 0));
            J->mb[i] = json_string_value(json_array_get(m, 1));
        }
        J->nm = i + 1;
    }
    return TK_OK;
}

/* Phase 2: the model section: type, vocab and merges, ids of vocab and
 * added tokens, merge count. */
static int hf_model(hf_load *L) {
    int rc;
    L->model = json_object_get(L->root, "model");
    const char *type = json_string_value(json_object_get(L->model, "type"));
    if (!type || strcmp(type, "BPE") != 0) {
        tk_set_err(L->err, L->errlen, "%s: model.type: model \"%s\" is not supported (only BPE)", L->path,
                   type ? shown(type, L->sb) : "?");
        return TK_ERR_UNSUPPORTED;
    }
    L->vocab = json_object_get(L->model, "vocab");
    L->merges = json_object_get(L->model, "merges");
    L->added = json_object_get(L->root, "added_tokens");
    if (!json_is_object(L->vocab) || !json_is_array(L->merges)) {
        tk_set_err(L->err, L->errlen, "%s: model.vocab or model.merges missing", L->path);
        return TK_ERR_FORMAT;
    }
    L->nv = L->fast ? L->J.nv : json_object_size(L->vocab);
    L->n_merges = L->fast ? L->J.nm : json_array_size(L->merges);
    L->max_id = L->fast ? L->J.max_id : 0;
    if ((rc = hf_check_ids(L->path, L->vocab, L->nv, L->added, &L->max_id, L->err, L->errlen))) return rc;
    if (!L->fast && (rc = hf_flatten(L))) return rc;
    if (L->n_merges > TK_MAX_VOCAB * (size_t)4) {
        tk_set_err(L->err, L->errlen, "%s: more than %zu merges", L->path, TK_MAX_VOCAB * (size_t)4);
        return TK_ERR_LIMIT;
    }
    return TK_OK;
}

/* Phase 3: the id tables; no id named by two vocab entries; added tokens
 * are specials, never ranks (our exports list them in the model vocab too):
 * their ids are marked as taken. */
static int hf_index_ids(hf_load *L) {
    L->mids = malloc((L->n_merges + 1) * sizeof *L->mids);
    if (!L->mids) return TK_ERR_NOMEM;
    L->rank_of_id = malloc(((size_t)L->max_id + 1) * sizeof *L->rank_of_id);
    L->rank_to_id = malloc((L->nv ? L->nv : 1) * sizeof *L->rank_to_id);
    if (!L->rank_of_id || !L->rank_to_id || tv_init(&L->v, (uint32_t)L->nv)) return TK_ERR_NOMEM;
    uint32_t *rank_of_id = L->rank_of_id;
    for (uint32_t i = 0; i <= L->max_id; i++) rank_of_id[i] = TK_NO_RANK;
    /* two vocab entries with one id: one of them would silently vanish */
    for (size_t e = 0; e < L->nv; e++) {
        uint32_t id = L->J.vid[e];
        if (rank_of_id[id] == SPECIAL_ID) {
            tk_set_err(L->err, L->errlen, "%s: model.vocab entry \"%s\": id %u is also the id of another entry",
                       L->path, shown(L->J.vkey[e], L->sb), id);
            return TK_ERR_DUP_RANK;
        }
        rank_of_id[id] = SPECIAL_ID;
    }
    for (uint32_t i = 0; i <= L->max_id; i++) rank_of_id[i] = TK_NO_RANK;
    size_t i;
    json_t *a;
    json_array_foreach(L->added, i, a) rank_of_id[json_integer_value(json_object_get(a, "id"))] = SPECIAL_ID;
    return TK_OK;
}

/* Gives id (token bytes buf[0..l)) the next rank. */
static int hf_give_rank(hf_load *L, uint32_t id, const uint8_t *buf, size_t l) {
    L->rank_of_id[id] = L->next_rank;
    L->rank_to_id[L->next_rank] = id;
    return tv_set(&L->v, L->next_rank++, buf, l);
}

/* Phase 4: the pipeline decision and the first ranks. Merge priority:
 * single bytes first (by id), then merge i -> rank 256 + i, then any other
 * vocab entry (unreachable by merges) last. SentencePiece-style (no
 * ByteLevel anywhere): ranks in file order, token bytes for decoding only;
 * hf.c encodes with the raw vocabulary. */
static int hf_first_ranks(hf_load *L) {
    int rc;
    L->sp_mode = !has_type(json_object_get(L->root, "pre_tokenizer"), "ByteLevel", 0) &&
                 !has_type(json_object_get(L->root, "decoder"), "ByteLevel", 0) &&
                 !has_type(json_object_get(L->root, "normalizer"), "ByteLevel", 0);
    bool bfb = L->sp_mode && json_is_true(json_object_get(L->model, "byte_fallback"));
    for (size_t e = 0; e < L->nv; e++) {
        uint32_t id = L->J.vid[e];
        const char *k = L->J.vkey[e];
        if (L->rank_of_id[id] == SPECIAL_ID) continue;
        uint8_t buf[TK_MAX_TOKEN_BYTES];
        long l;
        if (L->sp_mode) {
            if ((l = sp_display(k, bfb, buf, sizeof buf)) <= 0) {
                tk_set_err(L->err, L->errlen, "%s: model.vocab entry \"%s\" is %s", L->path, shown(k, L->sb),
                           l == 0 ? "empty" : "longer than 1024 bytes");
                return l == 0 ? TK_ERR_FORMAT : TK_ERR_LIMIT;
            }
        } else if ((l = bytelevel_decode(k, buf, sizeof buf)) <= 0) { /* pass 1: single bytes */
            tk_set_err(L->err, L->errlen, "%s: model.vocab entry \"%s\" is %s", L->path, shown(k, L->sb),
                       l == 0 ? "empty" : "not byte-level or longer than 1024 bytes (only ByteLevel BPE is supported)");
            return l == 0 ? TK_ERR_FORMAT : TK_ERR_UNSUPPORTED;
        }
        if ((L->sp_mode || l == 1) && (rc = hf_give_rank(L, id, buf, (size_t)l))) return rc;
    }
    if (L->sp_mode) L->v.n = L->next_rank;
    return TK_OK;
}

/* SentencePiece-style merge i: ids only (hf.c checks and tables them); with
 * a continuing_subword_prefix of sp_plen bytes HF's result is
 * a + b[len(prefix):]. */
static int hf_merge_sp(hf_load *L, size_t i, size_t sp_plen) {
    tk_hfj *J = &L->J;
    int ea = L->ment[i][0], eb = L->ment[i][1], er = L->ment[i][2];
    char ab2[8 * TK_MAX_TOKEN_BYTES + 4];
    size_t la2 = strlen(J->ma[i]), lb2 = strlen(J->mb[i]);
    memcpy(ab2, J->ma[i], la2);
    memcpy(ab2 + la2, J->mb[i], lb2 + 1);
    if (sp_plen && eb >= 0) { /* HF: the result is a + b without b's first prefix-length bytes */
        if (lb2 < sp_plen) {
            tk_set_err(L->err, L->errlen, "%s: merge %zu: part \"%s\" is shorter than continuing_subword_prefix",
                       L->path, i, shown(J->mb[i], L->sb));
            return TK_ERR_FORMAT;
        }
        memcpy(ab2 + la2, J->mb[i] + sp_plen, lb2 - sp_plen + 1);
        er = tk_hfj_lookup(J, ab2, la2 + lb2 - sp_plen);
    }
    if (ea < 0 || eb < 0 || er < 0) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: %s \"%s\" is not in model.vocab", L->path, i,
                   er >= 0 || ea < 0 || eb < 0 ? "part" : "result",
                   shown(ea < 0 ? J->ma[i] : eb < 0 ? J->mb[i] : ab2, L->sb));
        return TK_ERR_FORMAT;
    }
    L->mids[i][0] = J->vid[ea];
    L->mids[i][1] = J->vid[eb];
    L->mids[i][2] = J->vid[er];
    return TK_OK;
}

/* ByteLevel merge i: its parts and result by id; the result's rank unless
 * an earlier merge produced it (the first merge producing it wins). */
static int hf_merge_bl(hf_load *L, size_t i) {
    tk_hfj *J = &L->J;
    char ab[8 * TK_MAX_TOKEN_BYTES + 4];
    const char *a = J->ma[i], *b = J->mb[i];
    size_t la = strlen(a), lb = strlen(b);
    int ea = L->ment[i][0], eb = L->ment[i][1], er = L->ment[i][2];
    if (ea < 0 || eb < 0) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: part \"%s\" is not in model.vocab", L->path, i,
                   shown(ea < 0 ? a : b, L->sb));
        return TK_ERR_FORMAT;
    }
    memcpy(ab, a, la); /* each part < 4 x 1024 + 2 bytes */
    memcpy(ab + la, b, lb + 1);
    if (er < 0) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: result \"%s\" is not in model.vocab", L->path, i,
                   shown(ab, L->sb));
        return TK_ERR_FORMAT;
    }
    uint32_t id = J->vid[er];
    L->mids[i][0] = J->vid[ea];
    L->mids[i][1] = J->vid[eb];
    L->mids[i][2] = id;
    if (L->rank_of_id[id] == SPECIAL_ID) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: result \"%s\" is an added token", L->path, i, shown(ab, L->sb));
        return TK_ERR_FORMAT;
    }
    if (L->rank_of_id[id] != TK_NO_RANK) return TK_OK;
    uint8_t buf[TK_MAX_TOKEN_BYTES];
    long l = bytelevel_decode(ab, buf, sizeof buf); /* a vocab entry: decoded in pass 1 */
    if (l <= 0) return TK_ERR_UNSUPPORTED;
    return hf_give_rank(L, id, buf, (size_t)l);
}

/* Phase 5 (pass 2): the merges (parts and results looked up in batches:
 * hf_json.c). */
static int hf_merges(hf_load *L) {
    int rc;
    json_t *sp_pfx = json_object_get(L->model, "continuing_subword_prefix");
    size_t sp_plen = L->sp_mode && json_is_string(sp_pfx) ? json_string_length(sp_pfx) : 0;
    if (!(L->ment = malloc((L->n_merges + 1) * sizeof *L->ment)) || tk_hfj_resolve_merges(&L->J, L->ment))
        return TK_ERR_NOMEM;
    for (size_t i = 0; i < L->n_merges; i++)
        if ((rc = L->sp_mode ? hf_merge_sp(L, i, sp_plen) : hf_merge_bl(L, i))) return rc;
    return TK_OK;
}

/* Phase 6 (pass 3): ByteLevel vocab entries no merge reaches, ranked last. */
static int hf_rest_ranks(hf_load *L) {
    int rc;
    for (size_t e = 0; e < L->nv && !L->sp_mode; e++) {
        uint32_t id = L->J.vid[e];
        if (L->rank_of_id[id] != TK_NO_RANK) continue;
        uint8_t buf[TK_MAX_TOKEN_BYTES];
        long l = bytelevel_decode(L->J.vkey[e], buf, sizeof buf); /* decoded in pass 1 */
        if (l <= 0) return TK_ERR_UNSUPPORTED;
        if ((rc = hf_give_rank(L, id, buf, (size_t)l))) return rc;
    }
    L->v.n = L->next_rank;
    return TK_OK;
}

/* Phase 7: added tokens -> specials (those not already mergeable tokens). */
static int hf_specials(hf_load *L) {
    size_t i;
    json_t *a;
    L->sp = calloc(json_array_size(L->added) + 1, sizeof *L->sp);
    if (!L->sp) return TK_ERR_NOMEM;
    json_array_foreach(L->added, i, a) {
        const char *c = json_string_value(json_object_get(a, "content"));
        uint32_t id = (uint32_t)json_integer_value(json_object_get(a, "id")); /* checked */
        if (L->rank_of_id[id] != SPECIAL_ID) continue;
        if (!(L->sp[L->nsp].text = strdup(c))) return TK_ERR_NOMEM;
        L->sp[L->nsp].id = id;
        L->nsp++;
    }
    return TK_OK;
}

/* Phase 8: ByteLevel merge parts and results as ranks (parts that are added
 * tokens: refused). */
static int hf_merge_ranks(hf_load *L) {
    for (size_t i = 0; i < L->n_merges && !L->sp_mode; i++)
        for (int k = 0; k < 3; k++) {
            uint32_t r = L->rank_of_id[L->mids[i][k]];
            if (r >= L->v.n) {
                tk_set_err(L->err, L->errlen, "%s: merge %zu: a part is an added token, not a model.vocab entry",
                           L->path, i);
                return TK_ERR_FORMAT;
            }
            L->mids[i][k] = r;
        }
    return TK_OK;
}

/* Phase 9: the tokenizer, then its pipeline (normalizer, pre-tokenizer,
 * decoder: hf.c) and post-processor. */
static int hf_build(hf_load *L, tk_pattern pat, tk_tokenizer **out) {
    bool identity = true;
    int rc;
    for (uint32_t r = 0; r < L->v.n && identity; r++) identity = L->rank_to_id[r] == r;
    if (identity) {
        free(L->rank_to_id);
        L->rank_to_id = NULL;
    }
    tk_tokenizer *t = NULL;
    rc = tv_build_x(&L->v, TK_PAT_NONE, L->sp, L->nsp, L->rank_to_id, NULL, L->path, L->path, L->sp_mode, &t,
                    L->err, L->errlen);
    L->rank_to_id = NULL; /* owned by tv_build now */
    if (rc) return rc;
    const uint32_t(*mids)[3] = (const uint32_t(*)[3])L->mids;
    if (L->sp_mode && pat != TK_PAT_NONE) {
        tk_set_err(L->err, L->errlen, "%s: --pattern cannot replace this tokenizer's own pre-tokenizer: leave it out",
                   L->path);
        rc = TK_ERR_PATTERN;
    } else if (L->sp_mode) {
        rc = tk_hf_setup_sp(t, L->root, L->path, mids, L->n_merges, &L->J, L->err, L->errlen);
    } else {
        rc = tk_hf_setup(t, L->root, L->path, mids, L->n_merges, pat, L->err, L->errlen);
    }
    if (rc) {
        tk_free(t);
        return rc;
    }
    tk_hf_post_processor(t, L->root);
    *out = t;
    return TK_OK;
}

/* Phase 10: the single cleanup path; a failure without a message gets the
 * generic one. */
static int hf_finish(hf_load *L, int rc) {
    if (rc && L->err && !L->err[0]) tk_set_err(L->err, L->errlen, "%s: %s", L->path, tk_strerror(rc));
    free(L->rank_of_id);
    free(L->rank_to_id);
    free(L->mids);
    free(L->ment);
    tk_hfj_free(&L->J);
    free_specials(L->sp, L->nsp);
    tv_free(&L->v);
    json_decref(L->root);
    return rc;
}

int tk_load_hf_json(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!path || !out) return TK_ERR_ARG;
    *out = NULL;
    hf_load L;
    memset(&L, 0, sizeof L);
    L.path = path;
    L.err = err;
    L.errlen = errlen;
    int rc = hf_read(&L);
    if (rc) return rc; /* nothing held yet; its own messages */
    if (!(rc = hf_model(&L)) && !(rc = hf_index_ids(&L)) && !(rc = hf_first_ranks(&L)) && !(rc = hf_merges(&L)) &&
        !(rc = hf_rest_ranks(&L)) && !(rc = hf_specials(&L)) && !(rc = hf_merge_ranks(&L)))
        rc = hf_build(&L, pat, out);
    return hf_finish(&L, rc);
}

/* ---- resolution by path or name -------------------------------------------- */

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

#define BLOB "https://openaipublic.blob.core.windows.net/"

/* A SentencePiece ModelProto by its first bytes (spm.c). */
static bool looks_spm(const char *path) {
    uint8_t head[16];
    size_t size;
    int fd = tk_open_regular(path, TK_MAX_FILE_BYTES, &size, NULL, 0);
    if (fd < 0) return false;
    ssize_t r = read(fd, head, sizeof head);
    close(fd);
    return r > 0 && tk_spm_sniff(head, (size_t)r);
}

int tk_load(const char *spec, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!spec || !out) return TK_ERR_ARG;
    if (err && errlen) err[0] = 0;
    char a[4096], b[4096];
    /* Whatever exists under a path is handed to its loader, which refuses a
     * FIFO or device with a message instead of blocking on it. */
    if (is_dir(spec)) {
        if (!join_path(a, sizeof a, spec, "/encoder.json", err, errlen) ||
            !join_path(b, sizeof b, spec, "/vocab.bpe", err, errlen))
            return TK_ERR_ARG;
        if (exists(a) || exists(b)) {
            if (!exists(a) || !exists(b)) {
                tk_set_err(err, errlen, "%s: has %s but not %s", spec, exists(a) ? "encoder.json" : "vocab.bpe",
                           exists(a) ? "vocab.bpe" : "encoder.json");
                return TK_ERR_NOT_FOUND;
            }
            return tk_load_gpt2(a, b, pat, out, err, errlen);
        }
        if (!join_path(a, sizeof a, spec, "/tokenizer.json", err, errlen)) return TK_ERR_ARG;
        if (exists(a)) return tk_load_hf_json(a, pat, out, err, errlen);
        if (!join_path(a, sizeof a, spec, "/tokenizer.model", err, errlen)) return TK_ERR_ARG;
        if (exists(a)) { /* SentencePiece (spm.c) */
            if (pat == TK_PAT_NONE) return tk_load_spm(a, out, err, errlen);
            tk_set_err(err, errlen, "%s: --pattern does not apply to a SentencePiece model: leave it out", a);
            return TK_ERR_PATTERN;
        }
        tk_set_err(err, errlen, "%s: folder holds neither encoder.json + vocab.bpe nor tokenizer.json nor "
                   "tokenizer.model", spec);
        return TK_ERR_NOT_FOUND;
    }
    if (exists(spec)) {
        if (has_suffix(spec, ".json")) return tk_load_hf_json(spec, pat, out, err, errlen);
        if (has_suffix(spec, ".model") || looks_spm(spec)) {
            if (pat != TK_PAT_NONE) {
                tk_set_err(err, errlen, "%s: --pattern does not apply to a SentencePiece model: leave it out", spec);
                return TK_ERR_PATTERN;
            }
            return tk_load_spm(spec, out, err, errlen);
        }
        return tk_load_tiktoken(spec, pat, out, err, errlen);
    }
    /* a name */
    static const struct {
        const char *name;
        const char *files[2];
        const char *url;
    } names[] = {
        {"gpt2", {"gpt2.tiktoken", "r50k_base.tiktoken"}, BLOB "encodings/r50k_base.tiktoken"},
        {"r50k_base", {"r50k_base.tiktoken", "gpt2.tiktoken"}, BLOB "encodings/r50k_base.tiktoken"},
        {"cl100k_base", {"cl100k_base.tiktoken", NULL}, BLOB "encodings/cl100k_base.tiktoken"},
        {"o200k_base", {"o200k_base.tiktoken", NULL}, BLOB "encodings/o200k_base.tiktoken"},
    };
    int which = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(spec, names[k].name) == 0) which = k;
    if (which < 0) {
        tk_set_err(err, errlen, "%s: no such file, folder or vocabulary name (names: gpt2, r50k_base, cl100k_base, "
                   "o200k_base)", spec);
        return errno == ENOENT || errno == 0 ? TK_ERR_IO : TK_ERR_IO;
    }
    const char *vd = mks_getenv("MKS_VOCAB_DIR");
    if (vd && *vd) {
        for (int f = 0; f < 2 && names[which].files[f]; f++) {
            if (snprintf(a, sizeof a, "%s/%s", vd, names[which].files[f]) >= (int)sizeof a) break;
            if (exists(a)) return tk_load_tiktoken(a, pat, out, err, errlen);
        }
        if (which == 0) {
            if (join_path(a, sizeof a, vd, "/encoder.json", NULL, 0) && join_path(b, sizeof b, vd, "/vocab.bpe", NULL, 0) &&
                exists(a) && exists(b))
                return tk_load_gpt2(a, b, pat, out, err, errlen);
        }
    }
    /* tiktoken's cache: files named by sha1 of the download URL */
    const char *cd = getenv("TIKTOKEN_CACHE_DIR");
    if (!cd || !*cd) cd = getenv("DATA_GYM_CACHE_DIR");
    char tmpd[4096];
    if (!cd || !*cd) {
        const char *td = getenv("TMPDIR");
        snprintf(tmpd, sizeof tmpd, "%s/data-gym-cache", td && *td ? td : "/tmp");
        cd = tmpd;
    }
    char h[41];
    if (strlen(cd) > sizeof a - 64) {
        tk_set_err(err, errlen, "cache folder path too long: %s", cd);
        return TK_ERR_ARG;
    }
    tk_sha1_hex(names[which].url, h);
    snprintf(a, sizeof a, "%.4000s/%s", cd, h);
    if (exists(a)) return tk_load_tiktoken(a, pat, out, err, errlen);
    if (which == 0) {
        char h2[41];
        tk_sha1_hex(BLOB "gpt-2/encodings/main/encoder.json", h);
        tk_sha1_hex(BLOB "gpt-2/encodings/main/vocab.bpe", h2);
        snprintf(a, sizeof a, "%.4000s/%s", cd, h);
        snprintf(b, sizeof b, "%.4000s/%s", cd, h2);
        if (exists(a) && exists(b)) return tk_load_gpt2(a, b, pat, out, err, errlen);
    }
    tk_set_err(err, errlen, "vocabulary %s not found: looked in $MKS_VOCAB_DIR (%s) for %s and in tiktoken's "
               "cache %s; set MKS_VOCAB_DIR to a folder holding %s", spec, vd && *vd ? vd : "unset",
               names[which].files[0], cd, names[which].files[0]);
    return TK_ERR_NOT_FOUND;
}
