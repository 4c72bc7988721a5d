/* load_tekken.c - Mistral's Tekken vocabularies (tekken.json: Mistral NeMo,
 * Pixtral, Ministral and later): loader and engine, ids equal to
 * mistral_common's Tekkenizer.encode(text, bos=False, eos=False).
 *
 * A tekken.json is {"config": {"pattern", "num_vocab_tokens",
 * "default_vocab_size", "default_num_special_tokens", "version"}, "vocab":
 * [{"rank", "token_bytes" (base64), "token_str"}...], "special_tokens"?:
 * [{"rank", "token_str", "is_control"}...], "image"?, "audio"?, ...}.
 * mistral_common (tokens/tokenizers/tekken.py) builds from it:
 *   - the specials: the file's list (ids = their ranks, 0..), or for files
 *     of version <= v7 without one its 20 DEPRECATED_SPECIAL_TOKENS (<unk>,
 *     <s>, </s>, [INST] ...), then "<SPECIAL_{i}>" fillers up to
 *     default_num_special_tokens;
 *   - the mergeable tokens: the first default_vocab_size -
 *     default_num_special_tokens vocab entries (the rest is cut, unread),
 *     entry i with rank i, entries 0..255 the single bytes;
 *   - a tiktoken Encoding over them with config.pattern and no specials:
 *     special-token text in a document is ordinary text; id = rank +
 *     number of specials.
 * So this engine is the rank engine's BPE (tk_bpe_piece) over the Tekken
 * pre-tokenizer (pretok.c: o200k's scanner without contractions, one digit
 * per piece) with every id shifted; a file with another pattern goes through
 * the general regex engine in tiktoken's dialect (hf_regex.c,
 * tk_regex_compile_tiktoken), whose matches are the pieces as tiktoken's
 * find_iter gives them (text no match covers is dropped, as tiktoken drops
 * it).
 *
 * The file (19 MB for Mistral NeMo's) holds "\u0000" in token_str and is
 * read here by a strict streaming JSON scanner (Python json's grammar:
 * jansson refuses NUL in strings and takes 3x the time): a vocab entry is
 * recorded as its rank and where its token_bytes string lies, and only the
 * entries mistral_common keeps are decoded. Memory is bounded by the file:
 * 12 bytes per recorded entry, each entry at least 3 bytes of JSON.
 * What it shares with the other two JSON scanners (json_scan.c, hf_json.c)
 * is in dataset/common/mc_json.h: hex digits, \u escapes and their surrogate
 * pairs, the number grammar, strict UTF-8. What stays here is Python's
 * acceptance where jansson's differs (lone surrogates kept, NaN / Infinity,
 * integers of any size, \u0000 in keys) and the streaming loop that decodes
 * only the entries kept (json_scan.c decodes one field of a line into a
 * reused buffer, with SSE2 / SIMD UTF-8 loops): one loop for both would
 * carry both rule sets and both decode strategies on the JSONL hot path. */
#include "load_internal.h"
#include "mc_json.h"
#include "mks_common.h"
#include "rank_pretok.h"
#include "tk_engine.h"

#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Specials a file may ask for (fillers made up to this count; Mistral's
 * files: 1000). Each costs a string and a look-up in --allow-special. */
#define TEKKEN_MAX_SPECIALS (1u << 16)
/* Nesting of the JSON values skipped (image, audio, ...): a bound on the
 * scanner's recursion. */
#define TEKKEN_MAX_DEPTH 64

static const char TEKKEN_PATTERN[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?["
    "\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

/* mistral_common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS (ranks 0..19), the
 * specials of files of version <= v7 that list none. */
static const char *const DEPRECATED_SPECIALS[] = {"<unk>",
                                                  "<s>",
                                                  "</s>",
                                                  "[INST]",
                                                  "[/INST]",
                                                  "[AVAILABLE_TOOLS]",
                                                  "[/AVAILABLE_TOOLS]",
                                                  "[TOOL_RESULTS]",
                                                  "[/TOOL_RESULTS]",
                                                  "[TOOL_CALLS]",
                                                  "[IMG]",
                                                  "<pad>",
                                                  "[IMG_BREAK]",
                                                  "[IMG_END]",
                                                  "[PREFIX]",
                                                  "[MIDDLE]",
                                                  "[SUFFIX]",
                                                  "[SYSTEM_PROMPT]",
                                                  "[/SYSTEM_PROMPT]",
                                                  "[TOOL_CONTENT]"};

/* ---- a strict JSON scanner over the file's bytes ---------------------------- */

typedef struct {
    const uint8_t *s;
    size_t n, i;
    const char *path;
    char *err;
    size_t errlen;
    int rc; /* the first failure (its message is in err) */
} jrd;

static int jfail(jrd *r, int rc, const char *what) {
    if (!r->rc) {
        char sb[160];
        tk_set_err(r->err, r->errlen, "%s: byte %zu: %s", tk_escape_text(r->path, strlen(r->path), sb, sizeof sb), r->i,
                   what);
        r->rc = rc;
    }
    return r->rc;
}

static inline void jws(jrd *r) {
    while (r->i < r->n) {
        uint8_t c = r->s[r->i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        r->i++;
    }
}

static inline bool jeat(jrd *r, uint8_t c) {
    jws(r);
    if (r->i < r->n && r->s[r->i] == c) {
        r->i++;
        return true;
    }
    return false;
}

/* A code point as UTF-8 onto o (a scalar value: the caller has set lone
 * surrogates aside). */
static int put_cp(tk_bytes *o, uint32_t cp) {
    uint8_t u[4];
    return tk_bytes_append(o, u, mc_utf8_put(u, cp));
}

enum { JS_NUL = 1, JS_LONE = 2, JS_ESC = 4 };

/* A string at r->i (after whitespace): validated; decoded into *out when out
 * is not NULL (out->len reset first). *flags: JS_NUL (holds U+0000), JS_LONE
 * (a lone surrogate escape, which Python keeps and UTF-8 cannot hold), JS_ESC
 * (had an escape). */
static int jstring(jrd *r, tk_bytes *out, unsigned *flags) {
    jws(r);
    *flags = 0;
    if (out) out->len = 0;
    if (r->i >= r->n || r->s[r->i] != '"') return jfail(r, TK_ERR_FORMAT, "a string expected");
    size_t i = ++r->i, run = i;
    const uint8_t *s = r->s;
    for (;;) {
        while (i < r->n && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') i++;
        if (i >= r->n) {
            r->i = i;
            return jfail(r, TK_ERR_FORMAT, "unterminated string");
        }
        uint8_t c = s[i];
        if (c == '"') {
            if (out && tk_bytes_append(out, s + run, i - run)) return jfail(r, TK_ERR_NOMEM, "out of memory");
            r->i = i + 1;
            return TK_OK;
        }
        if (c < 0x20) {
            r->i = i;
            return jfail(r, TK_ERR_FORMAT, "a control byte inside a string (JSON needs it escaped)");
        }
        if (c >= 0x80) {
            size_t l = mc_utf8_seq(s + i, r->n - i); /* Python's strict decoder takes the same */
            if (!l) {
                r->i = i;
                return jfail(r, TK_ERR_FORMAT, "invalid UTF-8 inside a string");
            }
            i += l;
            continue;
        }
        /* a backslash */
        *flags |= JS_ESC;
        if (out && tk_bytes_append(out, s + run, i - run)) return jfail(r, TK_ERR_NOMEM, "out of memory");
        if (i + 1 >= r->n) {
            r->i = i;
            return jfail(r, TK_ERR_FORMAT, "unterminated string");
        }
        uint8_t e = s[i + 1], ch = 0;
        switch (e) {
        case '"': ch = '"'; break;
        case '\\': ch = '\\'; break;
        case '/': ch = '/'; break;
        case 'b': ch = '\b'; break;
        case 'f': ch = '\f'; break;
        case 'n': ch = '\n'; break;
        case 'r': ch = '\r'; break;
        case 't': ch = '\t'; break;
        case 'u': break;
        default: r->i = i; return jfail(r, TK_ERR_FORMAT, "a bad escape inside a string");
        }
        if (e != 'u') {
            if (out && tk_bytes_append(out, &ch, 1)) return jfail(r, TK_ERR_NOMEM, "out of memory");
            i += 2;
            run = i;
            continue;
        }
        uint32_t cp;
        size_t k = mc_json_u_escape(s + i, r->n - i, &cp); /* a surrogate pair in two escapes is one character */
        if (!k) {
            r->i = i;
            return jfail(r, TK_ERR_FORMAT, "a bad \\u escape inside a string");
        }
        i += k;
        if (cp >= 0xD800 && cp < 0xE000) *flags |= JS_LONE; /* Python keeps a lone surrogate as it is */
        if (cp == 0) *flags |= JS_NUL;
        if (out && !(*flags & JS_LONE) && put_cp(out, cp)) return jfail(r, TK_ERR_NOMEM, "out of memory");
        run = i;
    }
}

/* A number at r->i; *ival and *is_int: its value when it is an integer
 * (no fraction, no exponent: Python reads those as float) that fits in 63
 * bits, else *is_int false. Python's json also reads NaN, Infinity and
 * -Infinity (as floats). */
static int jnumber(jrd *r, int64_t *ival, bool *is_int) {
    jws(r);
    const uint8_t *s = r->s;
    size_t i = r->i, n = r->n;
    *is_int = false;
    *ival = 0;
    static const char *const lits[] = {"NaN", "Infinity", "-Infinity"};
    for (int k = 0; k < 3; k++) {
        size_t l = strlen(lits[k]);
        if (n - i >= l && memcmp(s + i, lits[k], l) == 0) {
            r->i = i + l;
            return TK_OK;
        }
    }
    mc_jnum nm; /* the grammar is mc_json.h's; the value and NaN / Infinity Python's */
    int g = mc_json_number(s + i, s + n, &nm);
    if (g == MC_JNUM_NONE) return jfail(r, TK_ERR_FORMAT, "a number expected");
    if (g == MC_JNUM_BAD) {
        r->i = (size_t)(nm.end - s);
        return jfail(r, TK_ERR_FORMAT, "a bad number");
    }
    uint64_t v = 0;
    bool big = false, neg = nm.neg, integral = !nm.real;
    for (size_t k = 0; k < nm.n_digits; k++) {
        if (v > (UINT64_C(1) << 62) / 10) big = true;
        v = v * 10 + (uint64_t)(nm.digits[k] - '0');
    }
    i = (size_t)(nm.end - s);
    r->i = i;
    if (integral && !big) {
        *is_int = true;
        *ival = neg ? -(int64_t)v : (int64_t)v;
    } else if (integral) {
        *is_int = true;
        *ival = neg ? INT64_MIN : INT64_MAX; /* out of every range checked below */
    }
    return TK_OK;
}

static int jvalue_skip(jrd *r, int depth);

static int jliteral(jrd *r, const char *lit) {
    size_t l = strlen(lit);
    if (r->n - r->i < l || memcmp(r->s + r->i, lit, l) != 0) return jfail(r, TK_ERR_FORMAT, "a JSON value expected");
    r->i += l;
    return TK_OK;
}

/* Any value, validated and passed over. */
static int jvalue_skip(jrd *r, int depth) {
    jws(r);
    if (r->i >= r->n) return jfail(r, TK_ERR_FORMAT, "a value expected (the file ends)");
    if (depth > TEKKEN_MAX_DEPTH) return jfail(r, TK_ERR_LIMIT, "values nested deeper than 64");
    unsigned f;
    int64_t v;
    bool is_int;
    switch (r->s[r->i]) {
    case '"': return jstring(r, NULL, &f);
    case 't': return jliteral(r, "true");
    case 'f': return jliteral(r, "false");
    case 'n': return jliteral(r, "null");
    case '{':
        r->i++;
        if (jeat(r, '}')) return TK_OK;
        do {
            if (jstring(r, NULL, &f)) return r->rc;
            if (!jeat(r, ':')) return jfail(r, TK_ERR_FORMAT, "':' expected");
            if (jvalue_skip(r, depth + 1)) return r->rc;
        } while (jeat(r, ','));
        return jeat(r, '}') ? TK_OK : jfail(r, TK_ERR_FORMAT, "',' or '}' expected");
    case '[':
        r->i++;
        if (jeat(r, ']')) return TK_OK;
        do {
            if (jvalue_skip(r, depth + 1)) return r->rc;
        } while (jeat(r, ','));
        return jeat(r, ']') ? TK_OK : jfail(r, TK_ERR_FORMAT, "',' or ']' expected");
    default: return jnumber(r, &v, &is_int);
    }
}

static bool key_is(const tk_bytes *k, const char *s) {
    size_t l = strlen(s);
    return k->len == l && memcmp(k->data, s, l) == 0;
}

/* ---- the file's parts -------------------------------------------------------- */

/* A vocab entry as read: checked when mistral_common keeps it. */
typedef struct {
    uint32_t off;  /* token_bytes' opening quote */
    uint32_t rank; /* UINT32_MAX: not an integer in range */
    uint16_t len;  /* bytes up to the closing quote, clamped */
    uint8_t flags; /* VE_* */
    uint8_t pad;
} tk_vent;
enum { VE_RANK = 1, VE_BYTES = 2, VE_STR = 4, VE_OTHER = 8, VE_TWICE = 16, VE_BYTES_NOTSTR = 32 };

typedef struct {
    tk_vent *v;
    size_t n, cap;
} vents;

typedef struct {
    char *text;
    int64_t rank;
} tspecial;

typedef struct {
    bool have_config, have_vocab, have_specials, specials_null;
    char *pattern;
    char version[16];
    bool have_version, have_vs, have_nsp;
    int64_t vocab_size, num_special;
    vents ve;
    tspecial *sp;
    size_t nsp_listed;
} tekken_file;

static void tekken_file_free(tekken_file *f) {
    free(f->pattern);
    free(f->ve.v);
    for (size_t k = 0; k < f->nsp_listed; k++) free(f->sp[k].text);
    free(f->sp);
}

/* A decoded string as a C string: NUL inside or a lone surrogate refused. */
static int jstring_c(jrd *r, tk_bytes *kb, const char *what, char **out) {
    unsigned fl;
    size_t at = r->i;
    if (jstring(r, kb, &fl)) return r->rc;
    if (fl & (JS_NUL | JS_LONE)) {
        r->i = at;
        char m[128];
        snprintf(m, sizeof m, "%s holds %s", what, fl & JS_NUL ? "U+0000" : "a lone surrogate");
        return jfail(r, TK_ERR_FORMAT, m);
    }
    *out = malloc(kb->len + 1);
    if (!*out) return jfail(r, TK_ERR_NOMEM, "out of memory");
    if (kb->len) memcpy(*out, kb->data, kb->len);
    (*out)[kb->len] = 0;
    return TK_OK;
}

static int jint_field(jrd *r, const char *what, int64_t *v) {
    jws(r);
    bool is_int;
    if (r->i >= r->n || !(r->s[r->i] == '-' || (r->s[r->i] >= '0' && r->s[r->i] <= '9'))) {
        char m[96];
        snprintf(m, sizeof m, "%s is not a number", what);
        return jfail(r, TK_ERR_FORMAT, m);
    }
    if (jnumber(r, v, &is_int)) return r->rc;
    if (!is_int) {
        char m[96];
        snprintf(m, sizeof m, "%s is not an integer", what);
        return jfail(r, TK_ERR_FORMAT, m);
    }
    return TK_OK;
}

static int parse_config(jrd *r, tk_bytes *kb, tekken_file *f) {
    if (!jeat(r, '{')) return jfail(r, TK_ERR_FORMAT, "\"config\" is not an object");
    if (jeat(r, '}')) return TK_OK;
    do {
        unsigned fl;
        if (jstring(r, kb, &fl)) return r->rc;
        if (!jeat(r, ':')) return jfail(r, TK_ERR_FORMAT, "':' expected");
        bool *seen = key_is(kb, "pattern")                      ? (bool *)&f->pattern
                     : key_is(kb, "default_vocab_size")         ? &f->have_vs
                     : key_is(kb, "default_num_special_tokens") ? &f->have_nsp
                     : key_is(kb, "version")                    ? &f->have_version
                                                                : NULL;
        if (seen == (bool *)&f->pattern) {
            if (f->pattern) return jfail(r, TK_ERR_FORMAT, "config.pattern given twice");
            if (jstring_c(r, kb, "config.pattern", &f->pattern)) return r->rc;
            if (!f->pattern[0]) return jfail(r, TK_ERR_FORMAT, "config.pattern is empty");
        } else if (seen == &f->have_vs || seen == &f->have_nsp) {
            if (*seen) return jfail(r, TK_ERR_FORMAT, "a config key given twice");
            *seen = true;
            if (jint_field(r, seen == &f->have_vs ? "config.default_vocab_size" : "config.default_num_special_tokens",
                           seen == &f->have_vs ? &f->vocab_size : &f->num_special))
                return r->rc;
        } else if (seen == &f->have_version) {
            if (*seen) return jfail(r, TK_ERR_FORMAT, "config.version given twice");
            *seen = true;
            char *v;
            if (jstring_c(r, kb, "config.version", &v)) return r->rc;
            snprintf(f->version, sizeof f->version, "%s", v);
            bool ok = v[0] == 'v' && v[1] && strlen(v) < sizeof f->version;
            for (size_t k = 1; ok && v[k]; k++) ok = v[k] >= '0' && v[k] <= '9';
            free(v);
            if (!ok) return jfail(r, TK_ERR_FORMAT, "config.version is not a version (v1, v3, v7, v11 ...)");
        } else if (jvalue_skip(r, 2)) {
            return r->rc;
        }
    } while (jeat(r, ','));
    return jeat(r, '}') ? TK_OK : jfail(r, TK_ERR_FORMAT, "',' or '}' expected in \"config\"");
}

static int parse_vocab(jrd *r, tk_bytes *kb, tekken_file *f) {
    if (!jeat(r, '[')) return jfail(r, TK_ERR_FORMAT, "\"vocab\" is not an array");
    if (jeat(r, ']')) return TK_OK;
    do {
        if (f->ve.n == f->ve.cap) {
            size_t c = f->ve.cap ? f->ve.cap * 2 : 4096;
            tk_vent *nv = c > SIZE_MAX / sizeof *nv ? NULL : realloc(f->ve.v, c * sizeof *nv);
            if (!nv) return jfail(r, TK_ERR_NOMEM, "out of memory");
            f->ve.v = nv;
            f->ve.cap = c;
        }
        tk_vent *e = &f->ve.v[f->ve.n++];
        memset(e, 0, sizeof *e);
        e->rank = UINT32_MAX;
        if (!jeat(r, '{')) return jfail(r, TK_ERR_FORMAT, "a vocab entry is not an object");
        if (!jeat(r, '}')) {
            do {
                unsigned fl;
                if (jstring(r, kb, &fl)) return r->rc;
                if (!jeat(r, ':')) return jfail(r, TK_ERR_FORMAT, "':' expected");
                uint8_t bit = key_is(kb, "rank")          ? VE_RANK
                              : key_is(kb, "token_bytes") ? VE_BYTES
                              : key_is(kb, "token_str")   ? VE_STR
                                                          : VE_OTHER;
                if (e->flags & bit & (VE_RANK | VE_BYTES | VE_STR)) e->flags |= VE_TWICE;
                e->flags |= bit;
                jws(r);
                if (bit == VE_RANK && r->i < r->n && (r->s[r->i] == '-' || (r->s[r->i] >= '0' && r->s[r->i] <= '9'))) {
                    int64_t v;
                    bool is_int;
                    if (jnumber(r, &v, &is_int)) return r->rc;
                    e->rank = is_int && v >= 0 && v < (int64_t)TK_MAX_VOCAB ? (uint32_t)v : UINT32_MAX;
                } else if (bit == VE_BYTES && r->i < r->n && r->s[r->i] == '"') {
                    size_t at = r->i;
                    if (jstring(r, NULL, &fl)) return r->rc;
                    e->off = (uint32_t)at;
                    e->len = (uint16_t)(r->i - at > UINT16_MAX ? UINT16_MAX : r->i - at);
                } else {
                    if (bit == VE_BYTES) e->flags |= VE_BYTES_NOTSTR;
                    if (jvalue_skip(r, 3)) return r->rc;
                }
            } while (jeat(r, ','));
            if (!jeat(r, '}')) return jfail(r, TK_ERR_FORMAT, "',' or '}' expected in a vocab entry");
        }
    } while (jeat(r, ','));
    return jeat(r, ']') ? TK_OK : jfail(r, TK_ERR_FORMAT, "',' or ']' expected in \"vocab\"");
}

static int parse_specials(jrd *r, tk_bytes *kb, tekken_file *f) {
    jws(r);
    if (r->i < r->n && r->s[r->i] == 'n') {
        f->specials_null = true;
        return jliteral(r, "null");
    }
    if (!jeat(r, '[')) return jfail(r, TK_ERR_FORMAT, "\"special_tokens\" is neither an array nor null");
    if (jeat(r, ']')) return TK_OK;
    size_t cap = 0;
    do {
        if (f->nsp_listed == TEKKEN_MAX_SPECIALS)
            return jfail(r, TK_ERR_LIMIT, "more than 65536 special tokens (the limit)");
        if (f->nsp_listed == cap) {
            size_t c = cap ? cap * 2 : 64;
            tspecial *n = realloc(f->sp, c * sizeof *n);
            if (!n) return jfail(r, TK_ERR_NOMEM, "out of memory");
            f->sp = n;
            cap = c;
        }
        tspecial *e = &f->sp[f->nsp_listed++];
        e->text = NULL;
        e->rank = -1;
        bool have_rank = false;
        if (!jeat(r, '{')) return jfail(r, TK_ERR_FORMAT, "a special_tokens entry is not an object");
        if (!jeat(r, '}')) {
            do {
                unsigned fl;
                if (jstring(r, kb, &fl)) return r->rc;
                if (!jeat(r, ':')) return jfail(r, TK_ERR_FORMAT, "':' expected");
                if (key_is(kb, "rank")) {
                    if (have_rank) return jfail(r, TK_ERR_FORMAT, "a special token's rank given twice");
                    have_rank = true;
                    if (jint_field(r, "a special token's rank", &e->rank)) return r->rc;
                } else if (key_is(kb, "token_str")) {
                    if (e->text) return jfail(r, TK_ERR_FORMAT, "a special token's token_str given twice");
                    if (jstring_c(r, kb, "a special token's token_str", &e->text)) return r->rc;
                } else if (jvalue_skip(r, 3)) {
                    return r->rc;
                }
            } while (jeat(r, ','));
            if (!jeat(r, '}')) return jfail(r, TK_ERR_FORMAT, "',' or '}' expected in a special token");
        }
        if (!have_rank || !e->text) return jfail(r, TK_ERR_FORMAT, "a special token without rank or token_str");
    } while (jeat(r, ','));
    return jeat(r, ']') ? TK_OK : jfail(r, TK_ERR_FORMAT, "',' or ']' expected in \"special_tokens\"");
}

static int parse_file(jrd *r, tekken_file *f) {
    tk_bytes kb = {0};
    /* (a UTF-8 byte order mark is refused here as Python's json.load refuses it) */
    if (!jeat(r, '{')) {
        jfail(r, TK_ERR_FORMAT, "not a JSON object");
        goto out;
    }
    if (!jeat(r, '}')) {
        do {
            unsigned fl;
            if (jstring(r, &kb, &fl)) goto out;
            if (!jeat(r, ':')) {
                jfail(r, TK_ERR_FORMAT, "':' expected");
                goto out;
            }
            bool *seen = key_is(&kb, "config")           ? &f->have_config
                         : key_is(&kb, "vocab")          ? &f->have_vocab
                         : key_is(&kb, "special_tokens") ? &f->have_specials
                                                         : NULL;
            if (seen && *seen) {
                jfail(r, TK_ERR_FORMAT, "a top-level key given twice");
                goto out;
            }
            if (seen) *seen = true;
            if (seen == &f->have_config  ? parse_config(r, &kb, f)
                : seen == &f->have_vocab ? parse_vocab(r, &kb, f)
                : seen                   ? parse_specials(r, &kb, f)
                                         : jvalue_skip(r, 1))
                goto out;
        } while (jeat(r, ','));
        if (!jeat(r, '}')) {
            jfail(r, TK_ERR_FORMAT, "',' or '}' expected at the top level");
            goto out;
        }
    }
    jws(r);
    if (r->i != r->n) jfail(r, TK_ERR_FORMAT, "data after the top-level object");
out:
    tk_bytes_free(&kb);
    return r->rc;
}

/* ---- base64 -------------------------------------------------------------- */

/* Standard base64 with its padding (what Python's b64decode reads from
 * Mistral's files; it would also skip characters outside the alphabet, which
 * no writer of these files emits: refused here). -1 if malformed. */
static long b64_decode(const uint8_t *s, size_t n, uint8_t *out) {
    static int8_t val[256];
    static bool init;
    if (!__atomic_load_n(&init, __ATOMIC_ACQUIRE)) {
        int8_t tmp[256];
        memset(tmp, -1, sizeof tmp);
        const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int k = 0; k < 64; k++) tmp[(uint8_t)a[k]] = (int8_t)k;
        memcpy(val, tmp, sizeof val);
        __atomic_store_n(&init, true, __ATOMIC_RELEASE);
    }
    if (n % 4) return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int a = val[s[i]], b = val[s[i + 1]], c = val[s[i + 2]], d = val[s[i + 3]];
        bool last = i + 4 == n;
        if (a < 0 || b < 0) return -1;
        if (last && s[i + 3] == '=') {
            if (s[i + 2] == '=') {
                out[o++] = (uint8_t)(a << 2 | b >> 4);
                continue;
            }
            if (c < 0) return -1;
            out[o++] = (uint8_t)(a << 2 | b >> 4);
            out[o++] = (uint8_t)((b & 15) << 4 | c >> 2);
            continue;
        }
        if (c < 0 || d < 0) return -1;
        out[o++] = (uint8_t)(a << 2 | b >> 4);
        out[o++] = (uint8_t)((b & 15) << 4 | c >> 2);
        out[o++] = (uint8_t)((c & 3) << 6 | d);
    }
    return (long)o;
}

/* ---- the engine's state and ops ---------------------------------------------- */

/* End of the piece at s[i] under Mistral's pattern (pretok.c: the o200k
 * scanner without contractions, one digit per piece; tk_classes_init has
 * run by then: tk_finalize calls it). */
size_t tk_pretok_tekken_next(const uint8_t *s, size_t n, size_t i);

typedef struct {
    uint32_t nsp;     /* ids 0..nsp-1 are the specials; rank r is id r + nsp */
    tk_regex *re;     /* a pattern other than Mistral's: the general regex engine */
    char version[16]; /* config.version */
} tekken_state;

static void tekken_free(void *state) {
    tekken_state *st = state;
    if (!st) return;
    tk_regex_free(st->re);
    free(st);
}

#define ENCODE_RESERVE_MIN (256u << 10)
#define ENCODE_RESERVE_MAX (64u << 20)

typedef struct {
    const tk_tokenizer *t;
    const uint8_t *s;
    tk_ids *out;
    size_t last; /* end of the previous match */
} re_piece_ctx;

/* Text between matches: tiktoken drops it (its find_iter yields matches
 * only), which a pattern like Mistral's never leaves in valid text; bytes
 * that are not UTF-8 (which no Python str holds, and which match nothing
 * here) are kept as one piece, so decode(encode(x)) == x. */
static int re_gap(re_piece_ctx *c, size_t a) {
    size_t g = a - c->last;
    int rc = TK_OK;
    if (g && mc_utf8_valid_prefix(c->s + c->last, g) != g)
        rc = tk_bpe_piece(c->t, c->s + c->last, g, TK_NO_RANK, c->out);
    return rc;
}

static int re_piece(void *user, size_t a, size_t b) {
    re_piece_ctx *c = user;
    int rc = re_gap(c, a);
    c->last = b;
    return rc ? rc : tk_bpe_piece(c->t, c->s + a, b - a, TK_NO_RANK, c->out);
}

static int tekken_encode(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out) {
    const tekken_state *st = t->engine_state;
    size_t from = out->len;
    int rc = TK_OK;
    if (n >= ENCODE_RESERVE_MIN && n <= ENCODE_RESERVE_MAX && tk_ids_reserve(out, n)) return TK_ERR_NOMEM;
    if (st->re) {
        tk_re_budget bud;
        tk_re_budget_init(&bud, n);
        re_piece_ctx c = {t, s, out, 0};
        rc = tk_regex_find_all(st->re, s, n, &bud, re_piece, &c);
        if (!rc) rc = re_gap(&c, n);
    } else {
        for (size_t i = 0; i < n;) {
            size_t e = tk_pretok_tekken_next(s, n, i), len = e - i;
            if (len == 1 || len == 2) { /* the whole piece is one token */
                if (out->len == out->cap && tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
                uint32_t r = len == 1 ? t->byte_rank[s[i]] : t->pair2[((uint32_t)s[i] << 8) | s[i + 1]];
                if (r != TK_NO_RANK) {
                    out->ids[out->len++] = r;
                    i = e;
                    continue;
                }
            }
            if ((rc = tk_bpe_piece(t, s + i, len, TK_NO_RANK, out))) break;
            i = e;
        }
    }
    if (rc) {
        out->len = from;
        return rc;
    }
    uint32_t nsp = st->nsp;
    for (size_t k = from; k < out->len; k++) out->ids[k] += nsp;
    return TK_OK;
}

static void tekken_describe(const tk_tokenizer *t, char *buf, size_t len) {
    const tekken_state *st = t->engine_state;
    snprintf(buf, len, "tekken.json %s: %s pre-tokenizer | BPE (merge by rank), ids after %u special ids", st->version,
             st->re ? "regex" : "Tekken", st->nsp);
}

/* Mistral's pattern covers every byte; another may leave valid text out of
 * every match, which tiktoken drops. */
static int tekken_lossless(const tk_tokenizer *t) { return ((const tekken_state *)t->engine_state)->re == NULL; }

/* Neither a rank file nor a tokenizer.json written by save.c carries the
 * Tekken pattern and the id shift. */
static int tekken_savable(const tk_tokenizer *t, int fmt) {
    (void)t;
    (void)fmt;
    return TK_ERR_UNSUPPORTED;
}

/* ---- sniffing and loading ---------------------------------------------------- */

/* A .json named tekken*.json (Mistral's files: tekken.json), or whose first
 * key is "config" (Mistral's files start so; a tokenizer.json starts with
 * "version", "truncation" or "model", never "config"). */
static bool tekken_sniff(const char *path, const uint8_t *head, size_t n) {
    size_t a = strlen(path);
    if (a < 5 || strcmp(path + a - 5, ".json") != 0) return false;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "tekken", 6) == 0) return true;
    size_t i = 0;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    if (i == n || head[i++] != '{') return false;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    return n - i >= 8 && memcmp(head + i, "\"config\"", 8) == 0;
}

/* The mergeable tokens mistral_common keeps: entries 0..inner-1, entry i of
 * rank i with exactly the keys rank, token_bytes, token_str; 0..255 the
 * single bytes. */
static int build_ranks(const char *shown, const uint8_t *data, const tekken_file *f, uint32_t inner, tk_tokvec *v,
                       char *err, size_t errlen) {
    int rc = tk_ld_tv_init(v, inner);
    if (rc) return rc;
    tk_bytes sb = {0};
    uint8_t tok[TK_MAX_TOKEN_BYTES + 3];
    for (uint32_t i = 0; i < inner; i++) {
        const tk_vent *e = &f->ve.v[i];
        if ((e->flags & (VE_RANK | VE_BYTES | VE_STR | VE_OTHER | VE_TWICE)) != (VE_RANK | VE_BYTES | VE_STR)) {
            tk_set_err(err, errlen, "%s: vocab entry %u: keys other than exactly rank, token_bytes, token_str", shown,
                       i);
            rc = TK_ERR_FORMAT;
            break;
        }
        if (e->rank != i) {
            if (e->rank == UINT32_MAX)
                tk_set_err(err, errlen, "%s: vocab entry %u: rank is not an integer in 0..%u", shown, i,
                           TK_MAX_VOCAB - 1);
            else
                tk_set_err(err, errlen, "%s: vocab entry %u has rank %u (entries are in rank order from 0)", shown, i,
                           e->rank);
            rc = e->rank == UINT32_MAX ? TK_ERR_RANGE : TK_ERR_MISSING_RANK;
            break;
        }
        if (e->flags & VE_BYTES_NOTSTR) {
            tk_set_err(err, errlen, "%s: vocab entry %u: token_bytes is not a string", shown, i);
            rc = TK_ERR_FORMAT;
            break;
        }
        /* the string's bytes between its quotes (re-read when escaped) */
        const uint8_t *b64 = data + e->off + 1;
        size_t bn = (size_t)e->len - 2;
        if (e->len == UINT16_MAX) bn = SIZE_MAX; /* clamped: far beyond the limit */
        else if (memchr(b64, '\\', bn)) {
            jrd r = {data, (size_t)e->off + e->len, e->off, shown, err, errlen, 0};
            unsigned fl;
            if ((rc = jstring(&r, &sb, &fl))) break;
            b64 = sb.data;
            bn = sb.len;
        }
        if (bn / 4 * 3 > TK_MAX_TOKEN_BYTES + 2) {
            tk_set_err(err, errlen, "%s: vocab entry %u: a token longer than %u bytes (the limit)", shown, i,
                       TK_MAX_TOKEN_BYTES);
            rc = TK_ERR_LIMIT;
            break;
        }
        long tl = bn ? b64_decode(b64, bn, tok) : 0;
        if (tl < 0) {
            char q[160];
            tk_set_err(err, errlen, "%s: vocab entry %u: bad base64 \"%s\"", shown, i,
                       tk_escape_text(b64, bn > 40 ? 40 : bn, q, sizeof q));
            rc = TK_ERR_BASE64;
            break;
        }
        if (tl > (long)TK_MAX_TOKEN_BYTES) {
            tk_set_err(err, errlen, "%s: vocab entry %u: a token of %ld bytes, longer than %u bytes (the limit)", shown,
                       i, tl, TK_MAX_TOKEN_BYTES);
            rc = TK_ERR_LIMIT;
            break;
        }
        if (i < 256 && (tl != 1 || tok[0] != i)) {
            tk_set_err(err, errlen, "%s: vocab entry %u is not the single byte 0x%02x (entries 0..255 are the bytes)",
                       shown, i, i);
            rc = TK_ERR_MISSING_RANK;
            break;
        }
        if (tl == 0) {
            tk_set_err(err, errlen, "%s: vocab entry %u: an empty token", shown, i);
            rc = TK_ERR_FORMAT;
            break;
        }
        if ((rc = tk_ld_tv_set(v, i, tok, (size_t)tl))) break;
    }
    tk_bytes_free(&sb);
    return rc;
}

/* The specials as mistral_common has them: listed (or the deprecated 20)
 * then <SPECIAL_i> fillers; ids = ranks = 0..nsp-1. */
static int build_specials(const char *shown, const tekken_file *f, uint32_t nsp, tk_special **out, char *err,
                          size_t errlen) {
    *out = NULL;
    size_t nl = f->have_specials && !f->specials_null ? f->nsp_listed : 0;
    bool deprecated = !(f->have_specials && !f->specials_null);
    if (deprecated) {
        /* mistral_common: "Tokenizer > v7 should find special tokens in the
         * tokenizer file" */
        if (atoi(f->version + 1) > 7) {
            tk_set_err(err, errlen, "%s: no special_tokens (a file of version %s must list them)", shown, f->version);
            return TK_ERR_FORMAT;
        }
        nl = sizeof DEPRECATED_SPECIALS / sizeof DEPRECATED_SPECIALS[0];
    }
    if (nl > nsp) {
        tk_set_err(err, errlen, "%s: %zu special tokens, more than config.default_num_special_tokens (%u)", shown, nl,
                   nsp);
        return TK_ERR_RANGE;
    }
    tk_special *sp = calloc(nsp ? nsp : 1, sizeof *sp);
    if (!sp) return TK_ERR_NOMEM;
    int rc = TK_OK;
    for (uint32_t k = 0; k < nsp && !rc; k++) {
        char fill[32];
        const char *text;
        if (k < nl && deprecated) text = DEPRECATED_SPECIALS[k];
        else if (k < nl) {
            text = f->sp[k].text;
            if (f->sp[k].rank != (int64_t)k) {
                tk_set_err(err, errlen, "%s: special_tokens[%u] has rank %lld (ranks are 0.. in list order)", shown, k,
                           (long long)f->sp[k].rank);
                rc = TK_ERR_MISSING_RANK;
                break;
            }
            if (!text[0]) {
                tk_set_err(err, errlen, "%s: special_tokens[%u] has an empty token_str", shown, k);
                rc = TK_ERR_FORMAT;
                break;
            }
        } else {
            snprintf(fill, sizeof fill, "<SPECIAL_%u>", k);
            text = fill;
        }
        sp[k].id = k;
        if (!(sp[k].text = strdup(text))) rc = TK_ERR_NOMEM;
    }
    if (rc) {
        tk_ld_free_specials(sp, nsp);
        return rc;
    }
    *out = sp;
    return TK_OK;
}

static int tekken_load(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!path || !out) return TK_ERR_ARG;
    *out = NULL;
    char shown[160];
    tk_escape_text(path, strlen(path), shown, sizeof shown);
    if (pat != TK_PAT_NONE) {
        tk_set_err(err, errlen,
                   "%s: a Mistral Tekken vocabulary carries its own pre-tokenizer (config.pattern): --pattern does not "
                   "apply",
                   shown);
        return TK_ERR_PATTERN;
    }
    uint8_t *data;
    size_t len;
    int rc = tk_read_regular(path, TK_MAX_FILE_BYTES, &data, &len, err, errlen);
    if (rc) return rc;
    if (len > UINT32_MAX) { /* vocab entries record 32-bit offsets */
        tk_set_err(err, errlen, "%s: a Tekken file of more than 4 GiB", shown);
        free(data);
        return TK_ERR_LIMIT;
    }
    tekken_file f = {0};
    tk_tokvec v = {0};
    tk_special *sp = NULL;
    uint32_t nsp = 0;
    tekken_state *st = NULL;
    jrd r = {data, len, 0, shown, err, errlen, 0};
    if ((rc = parse_file(&r, &f))) goto done;
    rc = TK_ERR_FORMAT;
    if (!f.have_config || !f.have_vocab) {
        tk_set_err(err, errlen, "%s: a Tekken file without \"%s\"", shown, f.have_config ? "vocab" : "config");
        goto done;
    }
    if (!f.pattern || !f.have_vs || !f.have_nsp || !f.have_version) {
        tk_set_err(err, errlen, "%s: config.%s missing", shown,
                   !f.pattern    ? "pattern"
                   : !f.have_vs  ? "default_vocab_size"
                   : !f.have_nsp ? "default_num_special_tokens"
                                 : "version");
        goto done;
    }
    if (f.num_special < 0 || f.num_special > (int64_t)TEKKEN_MAX_SPECIALS) {
        tk_set_err(err, errlen, "%s: config.default_num_special_tokens %lld out of range (0..%u)", shown,
                   (long long)f.num_special, TEKKEN_MAX_SPECIALS);
        rc = TK_ERR_LIMIT;
        goto done;
    }
    nsp = (uint32_t)f.num_special;
    if (f.vocab_size < f.num_special || f.vocab_size > (int64_t)TK_MAX_VOCAB) {
        tk_set_err(err, errlen,
                   "%s: config.default_vocab_size %lld out of range (config.default_num_special_tokens %u .. %u)",
                   shown, (long long)f.vocab_size, nsp, TK_MAX_VOCAB);
        rc = TK_ERR_RANGE;
        goto done;
    }
    uint32_t inner = (uint32_t)(f.vocab_size - f.num_special);
    if (inner > f.ve.n) {
        tk_set_err(
            err, errlen,
            "%s: config.default_vocab_size %lld needs %u vocab entries after %u special tokens; the file has %zu",
            shown, (long long)f.vocab_size, inner, nsp, f.ve.n);
        rc = TK_ERR_MISSING_RANK;
        goto done;
    }
    if ((rc = build_specials(shown, &f, nsp, &sp, err, errlen))) goto done;
    if ((rc = build_ranks(shown, data, &f, inner, &v, err, errlen))) goto done;
    st = calloc(1, sizeof *st);
    uint32_t *rank_to_id = malloc((inner ? inner : 1) * sizeof *rank_to_id);
    if (!st || !rank_to_id) {
        free(rank_to_id);
        rc = TK_ERR_NOMEM;
        goto done;
    }
    for (uint32_t k = 0; k < inner; k++) rank_to_id[k] = k + nsp;
    st->nsp = nsp;
    snprintf(st->version, sizeof st->version, "%s", f.version);
    if (strcmp(f.pattern, TEKKEN_PATTERN) != 0 &&
        (rc = tk_regex_compile_tiktoken(f.pattern, strlen(f.pattern), &st->re, err, errlen))) {
        free(rank_to_id);
        char m[512];
        snprintf(m, sizeof m, "%s", err ? err : "");
        tk_set_err(err, errlen, "%s: config.pattern: %s", shown, m);
        goto done;
    }
    /* the name mistral_common gives it: the file name without ".json" */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strlen(base);
    if (bl >= 5 && strcmp(base + bl - 5, ".json") == 0) bl -= 5;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(bl < 63 ? bl : 63), base);
    if ((rc = tk_ld_tv_build(&v, TK_PAT_NONE, sp, nsp, rank_to_id, name, shown, shown, out, err, errlen))) goto done;
    tk_engine_attach(*out, &tk_engine_tekken, st);
    st = NULL;
    /* the fingerprint identifies the ids: ranks, ids and specials (above)
     * and the pattern, which t->pattern (none) does not name */
    struct sha256_ctx c;
    sha256_init(&c);
    static const uint8_t hdr[8] = {'t', 'k', 't', 'e', 1, 0, 0, 0};
    sha256_update(&c, sizeof hdr, hdr);
    sha256_update(&c, 32, (*out)->fingerprint);
    sha256_update(&c, strlen(f.pattern), (const uint8_t *)f.pattern);
    sha256_digest(&c, 32, (*out)->fingerprint);
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", shown, tk_strerror(rc));
    tekken_free(st);
    tk_ld_free_specials(sp, sp ? nsp : 0);
    tk_ld_tv_free(&v);
    tekken_file_free(&f);
    free(data);
    return rc;
}

const tk_engine tk_engine_tekken = {
    .name = "tekken",
    .sniff = tekken_sniff,
    .load = tekken_load,
    .encode = tekken_encode,
    .describe = tekken_describe,
    .lossless = tekken_lossless,
    .savable = tekken_savable,
    .default_pp = TK_PP_ABSENT, /* <s> ... </s> by name: ids 1 and 2 */
    .free = tekken_free,
};
