/* rank_pretok.c - a rank file with its own pre-tokenizer regex and
 * normalization (--pattern REGEX, --normalize nfc|nfkc): tk_load_ex,
 * tk_set_pretokenizer and the engine that runs such a tokenizer.
 *
 * The reference is tiktoken.Encoding(pat_str=REGEX, mergeable_ranks=...)
 * encoding unicodedata.normalize(FORM, text), as Qwen (v1)'s
 * tokenization_qwen.py does with qwen.tiktoken: the text is normalized, the
 * regex's matches (find_iter: leftmost-first, tiktoken's dialect,
 * hf_regex.c) are the pieces, each piece is merged by rank (bpe.c). Text no
 * match covers is dropped, as tiktoken drops it. The tables stay the rank
 * engine's (and a known file's stay mapped from its image, tk_image.c); only
 * encoding differs, so decode, framing and specials are the rank engine's
 * generic paths. */
#include "normalize.h"
#include "rank_pretok.h"
#include "tk_engine.h"

#include <nettle/sha2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i); /* pretok.c */

typedef struct {
    tk_regex *re; /* NULL: the built-in pattern t->pattern */
    char *regex;  /* as given */
    tk_norm norm;
} pretok_state;

int tk_norm_parse(const char *name, tk_norm *out) {
    if (!name || !out) return TK_ERR_ARG;
    static const char *const names[] = {"none", "nfc", "nfkc"};
    for (int k = 0; k < 3; k++)
        if (strcmp(name, names[k]) == 0) {
            *out = (tk_norm)k;
            return TK_OK;
        }
    return TK_ERR_ARG;
}

const char *tk_norm_name(tk_norm norm) {
    switch (norm) {
    case TK_NORM_NFC: return "nfc";
    case TK_NORM_NFKC: return "nfkc";
    default: return "none";
    }
}

int tk_pattern_spec(const char *arg, tk_pattern *pat, const char **regex) {
    if (!arg || !pat || !regex) return TK_ERR_ARG;
    *pat = TK_PAT_NONE;
    *regex = NULL;
    if (!*arg) return TK_OK;
    if (tk_pattern_parse(arg, pat) == TK_OK) return TK_OK;
    /* a word that is no name is a mistyped name, never a regex matching that word */
    bool word = true;
    for (const char *p = arg; *p && word; p++)
        word = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (word) return TK_ERR_PATTERN;
    *pat = tk_pattern_from_regex(arg);
    if (*pat == TK_PAT_NONE) *regex = arg;
    return TK_OK;
}

static void pretok_free(void *state) {
    pretok_state *st = state;
    if (!st) return;
    tk_regex_free(st->re);
    free(st->regex);
    free(st);
}

#define ENCODE_RESERVE_MIN (256u << 10)
#define ENCODE_RESERVE_MAX (64u << 20)

typedef struct {
    const tk_tokenizer *t;
    const uint8_t *s;
    tk_ids *out;
} piece_ctx;

static int re_piece(void *user, size_t a, size_t b) {
    piece_ctx *c = user;
    return tk_bpe_piece(c->t, c->s + a, b - a, TK_NO_RANK, c->out);
}

/* The pieces of already normalized text, merged by rank. */
static int pretok_pieces(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out) {
    const pretok_state *st = t->engine_state;
    size_t from = out->len;
    int rc = TK_OK;
    if (n >= ENCODE_RESERVE_MIN && n <= ENCODE_RESERVE_MAX && tk_ids_reserve(out, n)) return TK_ERR_NOMEM;
    if (st->re) {
        tk_re_budget bud;
        tk_re_budget_init(&bud, n);
        piece_ctx c = {t, s, out};
        rc = tk_regex_find_all(st->re, s, n, &bud, re_piece, &c);
    } else {
        for (size_t i = 0; i < n && rc == TK_OK;) {
            size_t e = tk_pretok_next(t->pattern, s, n, i);
            rc = tk_bpe_piece(t, s + i, e - i, TK_NO_RANK, out);
            i = e;
        }
    }
    if (rc == TK_OK && t->rank_to_id)
        for (size_t k = from; k < out->len; k++) out->ids[k] = t->rank_to_id[out->ids[k]];
    if (rc) out->len = from;
    return rc;
}

/* s[0..n) in the tokenizer's normalization form into *nm (NONE: as is);
 * *p / *pn the text to encode. */
static int normalized(const pretok_state *st, const uint8_t *s, size_t n, tk_bytes *nm, const uint8_t **p, size_t *pn) {
    *p = s;
    *pn = n;
    if (st->norm == TK_NORM_NONE) return TK_OK;
    /* the normalizers' output bound (TK_EXPAND_*): beyond it the document is refused */
    size_t cap =
        n > (SIZE_MAX - TK_EXPAND_SLACK) / TK_EXPAND_FACTOR ? SIZE_MAX : n * TK_EXPAND_FACTOR + TK_EXPAND_SLACK;
    int rc = tk_nm_unicode(st->norm == TK_NORM_NFC ? TK_NF_C : TK_NF_KC, s, n, nm, cap);
    if (rc == TK_OK) {
        *p = nm->data ? nm->data : s;
        *pn = nm->len;
    }
    return rc;
}

static int pretok_encode(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out) {
    tk_bytes nm = {0};
    const uint8_t *p;
    size_t pn;
    int rc = normalized(t->engine_state, s, n, &nm, &p, &pn);
    if (rc == TK_OK) rc = pretok_pieces(t, p, pn, out);
    tk_bytes_free(&nm);
    return rc;
}

/* tiktoken finds the specials in the normalized text (Qwen normalizes before
 * encode(allowed_special=...)): NFKC may turn text into a special's. */
static int pretok_encode_special(const tk_tokenizer *t, const uint8_t *s, size_t n, const char *const *allowed,
                                 size_t n_allowed, bool all, tk_ids *out) {
    tk_bytes nm = {0};
    const uint8_t *p;
    size_t pn;
    int rc = normalized(t->engine_state, s, n, &nm, &p, &pn);
    if (rc == TK_OK) rc = tk_split_specials(t, p, pn, allowed, n_allowed, all, pretok_pieces, out);
    tk_bytes_free(&nm);
    return rc;
}

static void pretok_describe(const tk_tokenizer *t, char *buf, size_t len) {
    const pretok_state *st = t->engine_state;
    char shown[96];
    if (st->re) tk_escape_text(st->regex, strlen(st->regex), shown, sizeof shown);
    snprintf(buf, len, "rank file: %s%s%s%s%s pre-tokenizer | BPE (merge by rank)",
             st->norm != TK_NORM_NONE ? (st->norm == TK_NORM_NFC ? "NFC" : "NFKC") : "",
             st->norm != TK_NORM_NONE ? " | " : "", st->re ? "regex \"" : tk_pattern_name(t->pattern),
             st->re ? shown : "", st->re ? "\"" : "");
}

/* A regex may drop text no match covers, a normalization rewrites it. */
static int pretok_lossless(const tk_tokenizer *t) {
    (void)t;
    return 0;
}

/* A rank file's .meta.json names built-in patterns only, a tokenizer.json
 * export would be read by Oniguruma's rules: neither carries this. */
static int pretok_savable(const tk_tokenizer *t, int fmt) {
    (void)t;
    (void)fmt;
    return TK_ERR_UNSUPPORTED;
}

/* Not in the registry (tk_engines.def): it sniffs nothing, a rank-engine
 * tokenizer is handed to it by tk_set_pretokenizer. */
static const tk_engine tk_engine_rank_pretok = {
    .name = "rank+pretok",
    .encode = pretok_encode,
    .encode_special = pretok_encode_special,
    .describe = pretok_describe,
    .lossless = pretok_lossless,
    .savable = pretok_savable,
    .image = false, /* the regex is state outside the tables */
    .default_pp = TK_PP_NONE,
    .free = pretok_free,
};

int tk_set_pretokenizer(tk_tokenizer *t, const char *regex, tk_norm norm, char *err, size_t errlen) {
    if (!t || norm < TK_NORM_NONE || norm > TK_NORM_NFKC) return TK_ERR_ARG;
    if (!regex && norm == TK_NORM_NONE) return TK_OK;
    if (t->engine || t->decode_only) {
        tk_set_err(err, errlen,
                   "%s: --pattern REGEX and --normalize apply to rank files (.tiktoken) and encoder.json + "
                   "vocab.bpe; this tokenizer carries its own pre-tokenizer and normalizer",
                   t->name[0] ? t->name : "tokenizer");
        return TK_ERR_UNSUPPORTED;
    }
    /* a built-in pattern spelled out is that pattern (its fast scanner, its fingerprint) */
    tk_pattern same = regex ? tk_pattern_from_regex(regex) : TK_PAT_NONE;
    /* cl100k's older spelling is cl100k's scanner only where no token
     * tells their cut of a final whitespace run apart; else the regex */
    if (same == TK_PAT_CL100K && tk_regex_cl100k_hf(regex) == 1 && tk_vocab_joins_nl_ws(t)) same = TK_PAT_NONE;
    if (same != TK_PAT_NONE) {
        regex = NULL;
        if (t->pattern != same) {
            t->pattern = same;
            tk_compute_fingerprint(t);
        }
        if (norm == TK_NORM_NONE) return TK_OK;
    }
    size_t rl = regex ? strlen(regex) : 0;
    if (regex && (rl == 0 || rl > TK_MAX_PATTERN_BYTES)) {
        tk_set_err(err, errlen, "pre-tokenizer regex of %zu bytes (1..%u allowed)", rl, TK_MAX_PATTERN_BYTES);
        return TK_ERR_LIMIT;
    }
    pretok_state *st = calloc(1, sizeof *st);
    if (!st) return TK_ERR_NOMEM;
    st->norm = norm;
    if (regex) {
        char why[256] = "";
        int rc = tk_regex_compile_tiktoken(regex, rl, &st->re, why, sizeof why);
        if (rc == TK_OK && !(st->regex = strdup(regex))) rc = TK_ERR_NOMEM;
        if (rc) {
            char shown[128];
            tk_set_err(err, errlen, "pre-tokenizer regex \"%s\": %s", tk_escape_text(regex, rl, shown, sizeof shown),
                       why[0] ? why : tk_strerror(rc));
            pretok_free(st);
            return rc;
        }
        t->pattern = TK_PAT_NONE; /* tk_get_pattern: no built-in one */
    }
    tk_engine_attach(t, &tk_engine_rank_pretok, st);
    /* the fingerprint identifies the ids: it covers the regex and the form */
    struct sha256_ctx c;
    sha256_init(&c);
    uint8_t hdr[8] = {'t', 'k', 'p', 't', 1, (uint8_t)norm, regex != NULL, 0};
    sha256_update(&c, sizeof hdr, hdr);
    sha256_update(&c, 32, t->fingerprint);
    if (regex) sha256_update(&c, rl, (const uint8_t *)regex);
    sha256_digest(&c, 32, t->fingerprint);
    return TK_OK;
}

const char *tk_get_regex(const tk_tokenizer *t) {
    return t && t->engine == &tk_engine_rank_pretok ? ((const pretok_state *)t->engine_state)->regex : NULL;
}

tk_norm tk_get_norm(const tk_tokenizer *t) {
    return t && t->engine == &tk_engine_rank_pretok ? ((const pretok_state *)t->engine_state)->norm : TK_NORM_NONE;
}

int tk_load_ex(const char *spec, const tk_load_opts *o, tk_tokenizer **out, char *err, size_t errlen) {
    if (!o || (!o->regex && o->norm == TK_NORM_NONE)) return tk_load(spec, o ? o->pat : TK_PAT_NONE, out, err, errlen);
    if (!out || (o->regex && o->pat != TK_PAT_NONE)) return TK_ERR_ARG;
    tk_pattern pat = o->regex ? tk_pattern_from_regex(o->regex) : o->pat;
    if (o->regex && pat == TK_PAT_NONE) pat = TK_PAT_REGEX;
    int rc = tk_load(spec, pat, out, err, errlen);
    if (rc) return rc;
    if ((rc = tk_set_pretokenizer(*out, o->regex, o->norm, err, errlen))) {
        tk_free(*out);
        *out = NULL;
    }
    return rc;
}
