/* load.c - vocabulary loaders: tiktoken rank files, GPT-2 encoder.json +
 * vocab.bpe, HF tokenizer.json (ByteLevel BPE), and name resolution. */
#include "tk_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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

static int read_file(const char *path, uint8_t **data, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return TK_ERR_IO;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? cap * 2 : 1 << 20;
            uint8_t *b = realloc(buf, cap + 1);
            if (!b) {
                free(buf);
                fclose(f);
                return TK_ERR_NOMEM;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return TK_ERR_IO;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return TK_OK;
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- tokens under construction ------------------------------------------ */

typedef struct {
    uint8_t *arena;
    size_t len, cap;
    uint64_t *off; /* by rank: start; UINT64_MAX = unset */
    uint32_t *tlen;
    uint32_t n;    /* number of ranks (slots) */
} tokvec;

static int tv_init(tokvec *v, uint32_t n) {
    memset(v, 0, sizeof *v);
    v->off = malloc((size_t)n * sizeof *v->off);
    v->tlen = calloc(n ? n : 1, sizeof *v->tlen);
    if (!v->off || !v->tlen) return TK_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) v->off[i] = UINT64_MAX;
    v->n = n;
    return TK_OK;
}

static int tv_set(tokvec *v, uint32_t rank, const uint8_t *p, size_t n) {
    if (rank >= v->n) return TK_ERR_MISSING_RANK;
    if (v->off[rank] != UINT64_MAX) return TK_ERR_DUP_RANK;
    if (v->len + n > v->cap) {
        size_t c = v->cap ? v->cap * 2 : 1 << 20;
        while (c < v->len + n) c *= 2;
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

/* Move a complete tokvec into a new tokenizer (arena laid out by rank). */
static int tv_build(tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                    const char *name, tk_tokenizer **out, char *err, size_t errlen) {
    for (uint32_t r = 0; r < v->n; r++)
        if (v->off[r] == UINT64_MAX) {
            tk_set_err(err, errlen, "rank %u is missing (ranks must be contiguous from 0)", r);
            free(rank_to_id);
            return TK_ERR_MISSING_RANK;
        }
    tk_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        free(rank_to_id);
        return TK_ERR_NOMEM;
    }
    t->eot = TK_NO_RANK;
    t->pattern = pat;
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
        if (rc == TK_ERR_DUP_RANK) tk_set_err(err, errlen, "the same token appears twice, or a special id collides");
        else if (rc == TK_ERR_MISSING_RANK) tk_set_err(err, errlen, "not every single byte is a token");
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

/* Strict base64 with padding; returns decoded length or -1. */
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
    snprintf(mp, sizeof mp, "%s.meta.json", path);
    *sp = NULL;
    *nsp = 0;
    if (!is_file(mp)) return TK_OK;
    json_error_t je;
    json_t *root = json_load_file(mp, 0, &je);
    if (!root || !json_is_object(root)) {
        tk_set_err(err, errlen, "%s: line %d: %s", mp, je.line, je.text);
        json_decref(root);
        return TK_ERR_FORMAT;
    }
    json_t *p = json_object_get(root, "pattern");
    if (json_is_string(p) && *pat == TK_PAT_NONE && tk_pattern_parse(json_string_value(p), pat)) {
        tk_set_err(err, errlen, "%s: unknown pattern \"%s\"", mp, json_string_value(p));
        json_decref(root);
        return TK_ERR_PATTERN;
    }
    json_t *st = json_object_get(root, "special_tokens");
    if (json_is_object(st) && json_object_size(st)) {
        *sp = calloc(json_object_size(st), sizeof **sp);
        if (!*sp) {
            json_decref(root);
            return TK_ERR_NOMEM;
        }
        const char *k;
        json_t *v;
        json_object_foreach(st, k, v) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) continue;
            (*sp)[*nsp].text = strdup(k);
            (*sp)[*nsp].id = (uint32_t)json_integer_value(v);
            (*nsp)++;
        }
    }
    json_decref(root);
    return TK_OK;
}

static void free_specials(tk_special *sp, size_t n) {
    for (size_t k = 0; k < n; k++) free((char *)sp[k].text);
    free(sp);
}

int tk_load_tiktoken(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!path || !out) return TK_ERR_ARG;
    *out = NULL;
    uint8_t *data;
    size_t len;
    int rc = read_file(path, &data, &len);
    if (rc) {
        tk_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return rc;
    }
    uint32_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
    if (len && data[len - 1] != '\n') lines++;
    tokvec v;
    if ((rc = tv_init(&v, lines))) goto done;
    uint8_t tokbuf[1024];
    size_t i = 0;
    uint32_t lineno = 0, n_ranks = 0;
    while (i < len) {
        size_t e = i;
        while (e < len && data[e] != '\n') e++;
        lineno++;
        size_t le = e;
        if (le > i && data[le - 1] == '\r') le--;
        if (le > i) {
            size_t sp = i;
            while (sp < le && data[sp] != ' ') sp++;
            if (sp == le || sp == i) {
                tk_set_err(err, errlen, "%s:%u: expected \"<base64> <rank>\"", path, lineno);
                rc = TK_ERR_FORMAT;
                goto done;
            }
            if ((sp - i) / 4 * 3 > sizeof tokbuf) {
                tk_set_err(err, errlen, "%s:%u: token longer than %zu bytes", path, lineno, sizeof tokbuf);
                rc = TK_ERR_FORMAT;
                goto done;
            }
            long tl = b64_decode(data + i, sp - i, tokbuf);
            if (tl <= 0) {
                tk_set_err(err, errlen, "%s:%u: bad base64 \"%.*s\"", path, lineno, (int)(sp - i > 40 ? 40 : sp - i),
                           data + i);
                rc = TK_ERR_BASE64;
                goto done;
            }
            char *endp;
            errno = 0;
            unsigned long r = strtoul((const char *)data + sp + 1, &endp, 10);
            if (endp != (const char *)data + le || errno || sp + 1 == le) {
                tk_set_err(err, errlen, "%s:%u: bad rank", path, lineno);
                rc = TK_ERR_FORMAT;
                goto done;
            }
            if (r >= lines) {
                tk_set_err(err, errlen, "%s:%u: rank %lu leaves a gap (file has %u entries)", path, lineno, r, lines);
                rc = TK_ERR_MISSING_RANK;
                goto done;
            }
            if ((rc = tv_set(&v, (uint32_t)r, tokbuf, (size_t)tl))) {
                if (rc == TK_ERR_DUP_RANK) tk_set_err(err, errlen, "%s:%u: rank %lu given twice", path, lineno, r);
                goto done;
            }
            n_ranks++;
        }
        i = e + 1;
    }
    if (n_ranks == 0) {
        tk_set_err(err, errlen, "%s: empty rank file", path);
        rc = TK_ERR_FORMAT;
        goto done;
    }
    v.n = n_ranks; /* blank lines do not count */
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
        rc = tv_build(&v, p, kv ? kv->specials : msp, kv ? n_known_specials(kv) : nmsp, NULL, kv ? kv->name : NULL,
                      out, err, errlen);
        free_specials(msp, nmsp);
        if (rc == TK_OK && kv) (*out)->known = true;
        if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", path, tk_strerror(rc));
    }
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", path, tk_strerror(rc));
    tv_free(&v);
    free(data);
    return rc;
}

/* ---- byte-level strings (GPT-2 encoder.json / tokenizer.json) ---------- */

/* Decode a byte-level-mapped UTF-8 string into raw bytes; -1 if a character
 * is not in the byte map. */
static long bytelevel_decode(const char *s, uint8_t *out, size_t cap) {
    size_t o = 0;
    const uint8_t *p = (const uint8_t *)s;
    while (*p) {
        uint32_t cp;
        if (p[0] < 0x80) {
            cp = p[0];
            p++;
        } else if ((p[0] & 0xE0) == 0xC0 && p[1]) {
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

int tk_load_gpt2(const char *encoder_json, const char *vocab_bpe, tk_pattern pat, tk_tokenizer **out, char *err,
                 size_t errlen) {
    if (!encoder_json || !vocab_bpe || !out) return TK_ERR_ARG;
    *out = NULL;
    uint8_t *bpe;
    size_t bpe_len;
    int rc = read_file(vocab_bpe, &bpe, &bpe_len);
    if (rc) {
        tk_set_err(err, errlen, "cannot read %s: %s", vocab_bpe, strerror(errno));
        return rc;
    }
    const known_vocab *kv = known_by_sha(bpe, bpe_len);
    json_error_t je;
    json_t *enc = json_load_file(encoder_json, 0, &je);
    strset set = {0};
    tokvec v = {0};
    tk_special *sp = NULL;
    size_t nsp = 0;
    if (!enc || !json_is_object(enc)) {
        tk_set_err(err, errlen, "%s: %s", encoder_json, enc ? "not a JSON object" : je.text);
        rc = enc ? TK_ERR_FORMAT : (is_file(encoder_json) ? TK_ERR_FORMAT : TK_ERR_IO);
        goto done;
    }
    /* mergeable set: the 256 bytes + every merge result of vocab.bpe */
    if ((rc = ss_init(&set, json_object_size(enc) + 512))) goto done;
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        if ((rc = ss_add(&set, &c, 1))) goto done;
    }
    {
        char *line = (char *)bpe, *end = (char *)bpe + bpe_len;
        uint32_t lineno = 0;
        while (line < end) {
            char *nl = memchr(line, '\n', (size_t)(end - line));
            if (!nl) nl = end;
            *nl = 0;
            lineno++;
            if (line[0] && !(lineno == 1 && strncmp(line, "#version", 8) == 0)) {
                char *sp1 = strchr(line, ' ');
                if (!sp1) {
                    tk_set_err(err, errlen, "%s:%u: expected \"<a> <b>\"", vocab_bpe, lineno);
                    rc = TK_ERR_FORMAT;
                    goto done;
                }
                *sp1 = 0;
                uint8_t buf[1024];
                long a = bytelevel_decode(line, buf, sizeof buf);
                long b = a < 0 ? -1 : bytelevel_decode(sp1 + 1, buf + a, sizeof buf - (size_t)a);
                if (a < 0 || b < 0) {
                    tk_set_err(err, errlen, "%s:%u: not a byte-level token", vocab_bpe, lineno);
                    rc = TK_ERR_FORMAT;
                    goto done;
                }
                if ((rc = ss_add(&set, buf, (size_t)(a + b)))) goto done;
            }
            line = nl + 1;
        }
    }
    {
        size_t n = json_object_size(enc);
        sp = calloc(n, sizeof *sp);
        if (!sp) {
            rc = TK_ERR_NOMEM;
            goto done;
        }
        uint32_t n_ranks = 0;
        const char *k;
        json_t *val;
        json_object_foreach(enc, k, val) {
            uint8_t buf[1024];
            long l = bytelevel_decode(k, buf, sizeof buf);
            if (l > 0 && ss_find(&set, buf, (size_t)l) >= 0) n_ranks++;
        }
        if ((rc = tv_init(&v, n_ranks))) goto done;
        json_object_foreach(enc, k, val) {
            if (!json_is_integer(val) || json_integer_value(val) < 0) {
                tk_set_err(err, errlen, "%s: id of \"%s\" is not a non-negative integer", encoder_json, k);
                rc = TK_ERR_FORMAT;
                goto done;
            }
            uint32_t id = (uint32_t)json_integer_value(val);
            uint8_t buf[1024];
            long l = bytelevel_decode(k, buf, sizeof buf);
            if (l > 0 && ss_find(&set, buf, (size_t)l) >= 0) {
                if ((rc = tv_set(&v, id, buf, (size_t)l))) {
                    tk_set_err(err, errlen, "%s: id %u of \"%s\" %s", encoder_json, id, k,
                               rc == TK_ERR_DUP_RANK ? "given twice" : "leaves a gap in the ranks");
                    goto done;
                }
            } else {
                sp[nsp].text = strdup(k);
                sp[nsp].id = id;
                nsp++;
            }
        }
    }
    if (pat == TK_PAT_NONE) pat = TK_PAT_GPT2; /* GPT-2's own format implies its pattern */
    rc = tv_build(&v, pat, sp, nsp, NULL, kv ? kv->name : NULL, out, err, errlen);
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

static tk_pattern pattern_from_regex(const char *re) {
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

static tk_pattern hf_pattern(json_t *pt) {
    if (!json_is_object(pt)) return TK_PAT_NONE;
    const char *type = json_string_value(json_object_get(pt, "type"));
    if (!type) return TK_PAT_NONE;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(pt, "pretokenizers");
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            tk_pattern p = hf_pattern(e);
            if (p != TK_PAT_NONE) return p;
        }
        return TK_PAT_NONE;
    }
    if (strcmp(type, "Split") == 0) {
        const char *re = json_string_value(json_object_get(json_object_get(pt, "pattern"), "Regex"));
        return re ? pattern_from_regex(re) : TK_PAT_NONE;
    }
    if (strcmp(type, "ByteLevel") == 0 && json_is_true(json_object_get(pt, "use_regex"))) return TK_PAT_GPT2;
    return TK_PAT_NONE;
}

int tk_load_hf_json(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!path || !out) return TK_ERR_ARG;
    *out = NULL;
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        tk_set_err(err, errlen, "%s: %s", path, is_file(path) ? je.text : "cannot read file");
        return is_file(path) ? TK_ERR_FORMAT : TK_ERR_IO;
    }
    int rc = TK_OK;
    tokvec v = {0};
    tk_special *sp = NULL;
    size_t nsp = 0;
    uint32_t *rank_of_id = NULL, *rank_to_id = NULL;
    json_t *model = json_object_get(root, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!type || strcmp(type, "BPE") != 0) {
        tk_set_err(err, errlen, "%s: model type \"%s\" is not supported (only byte-level BPE)", path,
                   type ? type : "?");
        rc = TK_ERR_UNSUPPORTED;
        goto done;
    }
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        tk_set_err(err, errlen, "%s: model.vocab or model.merges missing", path);
        rc = TK_ERR_FORMAT;
        goto done;
    }
    size_t nv = json_object_size(vocab);
    /* id -> bytes (byte-level decode); find max id */
    uint32_t max_id = 0;
    const char *k;
    json_t *val;
    json_object_foreach(vocab, k, val) {
        json_int_t id = json_integer_value(val);
        if (!json_is_integer(val) || id < 0 || id > 0x7fffffff) {
            tk_set_err(err, errlen, "%s: bad id for \"%s\"", path, k);
            rc = TK_ERR_FORMAT;
            goto done;
        }
        if ((uint32_t)id > max_id) max_id = (uint32_t)id;
    }
    rank_of_id = malloc(((size_t)max_id + 1) * sizeof *rank_of_id);
    rank_to_id = malloc((nv ? nv : 1) * sizeof *rank_to_id);
    if (!rank_of_id || !rank_to_id || (rc = tv_init(&v, (uint32_t)nv))) {
        rc = TK_ERR_NOMEM;
        goto done;
    }
    for (uint32_t i = 0; i <= max_id; i++) rank_of_id[i] = TK_NO_RANK;
    /* added tokens are specials, never ranks (our exports list them in the
     * model vocab too): mark their ids as taken */
    {
        json_t *added = json_object_get(root, "added_tokens");
        size_t i;
        json_t *a;
        json_array_foreach(added, i, a) {
            json_t *idv = json_object_get(a, "id");
            if (json_is_integer(idv) && json_integer_value(idv) >= 0 && (uint32_t)json_integer_value(idv) <= max_id)
                rank_of_id[json_integer_value(idv)] = SPECIAL_ID;
        }
    }
    /* Merge priority: single bytes first (by id), then merge i -> rank 256 + i,
     * then any other vocab entry (unreachable by merges) last. */
    uint32_t next_rank = 0;
    strset byid = {0};
    (void)byid;
    /* pass 1: single bytes */
    json_object_foreach(vocab, k, val) {
        uint8_t buf[1024];
        long l = bytelevel_decode(k, buf, sizeof buf);
        if (l < 0) {
            tk_set_err(err, errlen, "%s: vocab entry \"%s\" is not byte-level (only ByteLevel BPE is supported)", path,
                       k);
            rc = TK_ERR_UNSUPPORTED;
            goto done;
        }
        if (l == 1) {
            uint32_t id = (uint32_t)json_integer_value(val);
            if (rank_of_id[id] == SPECIAL_ID) continue;
            if (rank_of_id[id] != TK_NO_RANK) {
                rc = TK_ERR_DUP_RANK;
                goto done;
            }
            rank_of_id[id] = next_rank;
            rank_to_id[next_rank] = id;
            if ((rc = tv_set(&v, next_rank++, buf, 1))) goto done;
        }
    }
    /* pass 2: merges */
    {
        size_t i;
        json_t *m;
        json_array_foreach(merges, i, m) {
            char a[1024], b[1024];
            if (json_is_string(m)) {
                const char *s = json_string_value(m), *spc = strchr(s, ' ');
                if (!spc || (size_t)(spc - s) >= sizeof a || strlen(spc + 1) >= sizeof b) {
                    rc = TK_ERR_FORMAT;
                    tk_set_err(err, errlen, "%s: merge %zu malformed", path, i);
                    goto done;
                }
                memcpy(a, s, (size_t)(spc - s));
                a[spc - s] = 0;
                snprintf(b, sizeof b, "%s", spc + 1);
            } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                       json_is_string(json_array_get(m, 1))) {
                snprintf(a, sizeof a, "%s", json_string_value(json_array_get(m, 0)));
                snprintf(b, sizeof b, "%s", json_string_value(json_array_get(m, 1)));
            } else {
                rc = TK_ERR_FORMAT;
                tk_set_err(err, errlen, "%s: merge %zu malformed", path, i);
                goto done;
            }
            char ab[2048];
            snprintf(ab, sizeof ab, "%s%s", a, b);
            json_t *idv = json_object_get(vocab, ab);
            if (!idv) {
                rc = TK_ERR_FORMAT;
                tk_set_err(err, errlen, "%s: merge %zu (\"%s\" + \"%s\") result is not in the vocab", path, i, a, b);
                goto done;
            }
            uint32_t id = (uint32_t)json_integer_value(idv);
            if (rank_of_id[id] != TK_NO_RANK) continue; /* first merge producing it wins */
            uint8_t buf[2048];
            long l = bytelevel_decode(ab, buf, sizeof buf);
            if (l < 0) {
                rc = TK_ERR_UNSUPPORTED;
                goto done;
            }
            rank_of_id[id] = next_rank;
            rank_to_id[next_rank] = id;
            if ((rc = tv_set(&v, next_rank++, buf, (size_t)l))) goto done;
        }
    }
    /* pass 3: the rest */
    json_object_foreach(vocab, k, val) {
        uint32_t id = (uint32_t)json_integer_value(val);
        if (rank_of_id[id] != TK_NO_RANK) continue;
        uint8_t buf[1024];
        long l = bytelevel_decode(k, buf, sizeof buf);
        rank_of_id[id] = next_rank;
        rank_to_id[next_rank] = id;
        if ((rc = tv_set(&v, next_rank++, buf, (size_t)l))) goto done;
    }
    v.n = next_rank;
    /* added tokens -> specials (those not already mergeable tokens) */
    {
        json_t *added = json_object_get(root, "added_tokens");
        size_t i;
        json_t *a;
        sp = calloc(json_array_size(added) + 1, sizeof *sp);
        if (!sp) {
            rc = TK_ERR_NOMEM;
            goto done;
        }
        json_array_foreach(added, i, a) {
            const char *c = json_string_value(json_object_get(a, "content"));
            json_t *idv = json_object_get(a, "id");
            if (!c || !json_is_integer(idv)) continue;
            uint32_t id = (uint32_t)json_integer_value(idv);
            if (id <= max_id && rank_of_id[id] != TK_NO_RANK && rank_of_id[id] != SPECIAL_ID) continue;
            sp[nsp].text = strdup(c);
            sp[nsp].id = id;
            nsp++;
        }
    }
    if (pat == TK_PAT_NONE) pat = hf_pattern(json_object_get(root, "pre_tokenizer"));
    if (pat == TK_PAT_NONE) {
        tk_set_err(err, errlen, "%s: pre-tokenizer not recognised as gpt2/cl100k/o200k: give --pattern", path);
        rc = TK_ERR_PATTERN;
        goto done;
    }
    {
        bool identity = true;
        for (uint32_t r = 0; r < v.n && identity; r++) identity = rank_to_id[r] == r;
        if (identity) {
            free(rank_to_id);
            rank_to_id = NULL;
        }
        rc = tv_build(&v, pat, sp, nsp, rank_to_id, NULL, out, err, errlen);
        rank_to_id = NULL; /* owned by tv_build now */
    }
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", path, tk_strerror(rc));
    free(rank_of_id);
    free(rank_to_id);
    free_specials(sp, nsp);
    tv_free(&v);
    json_decref(root);
    return rc;
}

/* ---- resolution by path or name -------------------------------------------- */

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

#define BLOB "https://openaipublic.blob.core.windows.net/"

int tk_load(const char *spec, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!spec || !out) return TK_ERR_ARG;
    if (err && errlen) err[0] = 0;
    char a[4096], b[4096];
    if (is_dir(spec)) {
        snprintf(a, sizeof a, "%s/encoder.json", spec);
        snprintf(b, sizeof b, "%s/vocab.bpe", spec);
        if (is_file(a) && is_file(b)) return tk_load_gpt2(a, b, pat, out, err, errlen);
        snprintf(a, sizeof a, "%s/tokenizer.json", spec);
        if (is_file(a)) return tk_load_hf_json(a, pat, out, err, errlen);
        tk_set_err(err, errlen, "%s: folder holds neither encoder.json + vocab.bpe nor tokenizer.json", spec);
        return TK_ERR_NOT_FOUND;
    }
    if (is_file(spec)) {
        if (has_suffix(spec, ".json")) return tk_load_hf_json(spec, pat, out, err, errlen);
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
    const char *vd = getenv("MKSHARDS_VOCAB_DIR");
    if (vd && *vd) {
        for (int f = 0; f < 2 && names[which].files[f]; f++) {
            snprintf(a, sizeof a, "%s/%s", vd, names[which].files[f]);
            if (is_file(a)) return tk_load_tiktoken(a, pat, out, err, errlen);
        }
        if (which == 0) {
            snprintf(a, sizeof a, "%s/encoder.json", vd);
            snprintf(b, sizeof b, "%s/vocab.bpe", vd);
            if (is_file(a) && is_file(b)) return tk_load_gpt2(a, b, pat, out, err, errlen);
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
    if (is_file(a)) return tk_load_tiktoken(a, pat, out, err, errlen);
    if (which == 0) {
        char h2[41];
        tk_sha1_hex(BLOB "gpt-2/encodings/main/encoder.json", h);
        tk_sha1_hex(BLOB "gpt-2/encodings/main/vocab.bpe", h2);
        snprintf(a, sizeof a, "%.4000s/%s", cd, h);
        snprintf(b, sizeof b, "%.4000s/%s", cd, h2);
        if (is_file(a) && is_file(b)) return tk_load_gpt2(a, b, pat, out, err, errlen);
    }
    tk_set_err(err, errlen, "vocabulary %s not found: looked in $MKSHARDS_VOCAB_DIR (%s) for %s and in tiktoken's "
               "cache %s; set MKSHARDS_VOCAB_DIR to a folder holding %s", spec, vd && *vd ? vd : "unset",
               names[which].files[0], cd, names[which].files[0]);
    return TK_ERR_NOT_FOUND;
}
