/* load_common.c - what the vocabulary loaders share (load_internal.h): the
 * table of upstream vocabularies known by sha256, path helpers, JSON id and
 * message helpers, tokens under construction (tk_tokvec) and their move into
 * a tokenizer, byte-level string decoding, and tk_escape_text. */
#include "load_internal.h"
#include "mks_common.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Meta's special tokens, in the order of their tokenizer.py (llama-models
 * 0.3.0, llama3/ and llama4/): ids from the number of ranks up. */
#define RUN(fmt, first, count)                                                                                         \
    { "<|" fmt "|>", first, count }
#define LIT(text)                                                                                                      \
    { "<|" text "|>", 0, 0 }
static const tk_special_run LLAMA3_SPECIALS[] = {
    LIT("begin_of_text"),
    LIT("end_of_text"),
    RUN("reserved_special_token_%u", 0, 2),
    LIT("finetune_right_pad_id"),
    LIT("step_id"),
    LIT("start_header_id"),
    LIT("end_header_id"),
    LIT("eom_id"),
    LIT("eot_id"),
    LIT("python_tag"),
    LIT("image"),
    RUN("reserved_special_token_%u", 2, 244), /* 256 in all */
    {NULL, 0, 0},
};
static const tk_special_run LLAMA4_SPECIALS[] = {
    /* BASIC_SPECIAL_TOKENS */
    LIT("begin_of_text"),
    LIT("end_of_text"),
    LIT("fim_prefix"),
    LIT("fim_middle"),
    LIT("fim_suffix"),
    /* LLAMA4_TEXT_POST_TRAIN_SPECIAL_TOKENS */
    LIT("header_start"),
    LIT("header_end"),
    LIT("eom"),
    LIT("eot"),
    LIT("step"),
    RUN("text_post_train_reserved_special_token_%u", 0, 6),
    LIT("python_start"),
    LIT("python_end"),
    LIT("finetune_right_pad"),
    RUN("text_post_train_reserved_special_token_%u", 8, 61),
    /* LLAMA4_VISION_SPECIAL_TOKENS */
    LIT("image_start"),
    LIT("image_end"),
    RUN("vision_reserved_special_token_%u", 0, 2),
    LIT("tile_x_separator"),
    LIT("tile_y_separator"),
    RUN("vision_reserved_special_token_%u", 2, 4),
    LIT("image"),
    RUN("vision_reserved_special_token_%u", 6, 1),
    LIT("patch"),
    RUN("vision_reserved_special_token_%u", 7, 1041),
    /* LLAMA4_REASONING_SPECIAL_TOKENS */
    RUN("reasoning_reserved_special_token_%u", 0, 8),
    LIT("reasoning_thinking_start"),
    LIT("reasoning_thinking_end"),
    /* up to num_reserved_special_tokens = 2048 */
    RUN("reserved_special_token_%u", 0, 904),
    {NULL, 0, 0},
};
#undef RUN
#undef LIT

/* Upstream vocabularies, recognised by the sha256 of their rank file. */
static const tk_known_vocab TK_KNOWN[] = {
    {"gpt2",
     "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
     TK_PAT_GPT2,
     {{"<|endoftext|>", 50256}},
     NULL},
    {"gpt2",
     "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
     TK_PAT_GPT2, /* vocab.bpe */
     {{"<|endoftext|>", 50256}},
     NULL},
    {"cl100k_base",
     "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
     TK_PAT_CL100K,
     {{"<|endoftext|>", 100257},
      {"<|fim_prefix|>", 100258},
      {"<|fim_middle|>", 100259},
      {"<|fim_suffix|>", 100260},
      {"<|endofprompt|>", 100276}},
     NULL},
    {"o200k_base",
     "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
     TK_PAT_O200K,
     {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
     NULL},
    /* Meta's tokenizer.model files: Llama 3's pat_str is cl100k's (its
     * older spelling), Llama 4's O200K_PATTERN is o200k's */
    {"llama3",
     "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
     TK_PAT_CL100K,
     {{0}},
     LLAMA3_SPECIALS},
    {"llama4",
     "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed",
     TK_PAT_O200K,
     {{0}},
     LLAMA4_SPECIALS},
};

const tk_known_vocab *tk_ld_known_by_sha(const uint8_t *data, size_t n) {
    uint8_t d[32];
    char hex[65];
    tk_sha256(data, n, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    for (size_t k = 0; k < sizeof TK_KNOWN / sizeof TK_KNOWN[0]; k++)
        if (strcmp(hex, TK_KNOWN[k].sha256) == 0) return &TK_KNOWN[k];
    return NULL;
}

size_t tk_ld_n_known_specials(const tk_known_vocab *kv) {
    size_t n = 0;
    while (n < 6 && kv->specials[n].text) n++;
    return n;
}

int tk_ld_known_run_specials(const tk_known_vocab *kv, uint32_t base, tk_special **sp, size_t *nsp) {
    *sp = NULL;
    *nsp = 0;
    size_t n = 0;
    for (const tk_special_run *r = kv->runs; r && r->fmt; r++) n += r->count ? r->count : 1;
    if (!n) return TK_OK;
    tk_special *out = calloc(n, sizeof *out);
    if (!out) return TK_ERR_NOMEM;
    size_t k = 0;
    for (const tk_special_run *r = kv->runs; r->fmt; r++)
        for (uint32_t i = 0; i < (r->count ? r->count : 1); i++, k++) {
            char buf[96];
            if (r->count) snprintf(buf, sizeof buf, r->fmt, r->first + i);
            out[k].text = strdup(r->count ? buf : r->fmt);
            out[k].id = base + (uint32_t)k;
            if (!out[k].text) {
                tk_ld_free_specials(out, k);
                return TK_ERR_NOMEM;
            }
        }
    *sp = out;
    *nsp = n;
    return TK_OK;
}

tk_pattern tk_known_pattern(const tk_tokenizer *t) {
    if (!t || !t->known) return TK_PAT_NONE;
    for (size_t k = 0; k < sizeof TK_KNOWN / sizeof TK_KNOWN[0]; k++)
        if (strcmp(t->name, TK_KNOWN[k].name) == 0) return TK_KNOWN[k].pat;
    return TK_PAT_NONE;
}

bool tk_ld_is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
/* Something is there (a file, FIFO, device ...): the loaders refuse what is
 * not a regular file, with a message, instead of looking elsewhere. */
bool tk_ld_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A path built from parts; false (and a message) if it does not fit. */
bool tk_ld_join_path(char *out, size_t cap, const char *dir, const char *name, char *err, size_t errlen) {
    int n = snprintf(out, cap, "%s%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        tk_set_err(err, errlen, "path too long: %.200s...%s", dir, name);
        return false;
    }
    return true;
}

/* Length of the valid UTF-8 character at p[0..n) (2-4 bytes, no overlong
 * form, no surrogate, at most U+10FFFF), 0 if there is none. */
/* tk.h's name for the common layer's escaper (the same rules: strict UTF-8
 * kept, controls, C1, DEL, quote and backslash as \xNN, "..." when cut). */
const char *tk_escape_text(const void *text, size_t n, char *out, size_t cap) {
    return mc_escape_text(text, n, out, cap);
}

/* A token text or key as it may be shown in a message: control bytes
 * (terminal escapes in a hostile file) as \xNN, at most ~60 bytes. */
const char *tk_ld_shown(const char *s, char buf[static 160]) { return tk_escape_text(s, strlen(s), buf, 68); }

const char *tk_ld_json_kind(const json_t *v) {
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
int tk_ld_json_id(const json_t *v, const char *file, const char *what, const char *entry, uint32_t *id, char *err,
                  size_t errlen) {
    char sb[160];
    if (!json_is_integer(v)) {
        tk_set_err(err, errlen, "%s: %s \"%s\": the id is %s, not an integer", file, what, tk_ld_shown(entry, sb),
                   tk_ld_json_kind(v));
        return TK_ERR_FORMAT;
    }
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= (json_int_t)TK_MAX_VOCAB) {
        tk_set_err(err, errlen, "%s: %s \"%s\": id %lld out of range (0..%u)", file, what, tk_ld_shown(entry, sb),
                   (long long)x, TK_MAX_VOCAB - 1);
        return TK_ERR_RANGE;
    }
    *id = (uint32_t)x;
    return TK_OK;
}

/* ---- tokens under construction ------------------------------------------ */

/* n slots: callers size it by entries actually present in the file, so it
 * is bounded by the file's size (and by TK_MAX_VOCAB). */
int tk_ld_tv_init(tk_tokvec *v, uint32_t n) {
    memset(v, 0, sizeof *v);
    if (n > TK_MAX_VOCAB) return TK_ERR_RANGE;
    v->off = malloc((n ? n : 1) * sizeof *v->off);
    v->tlen = calloc(n ? n : 1, sizeof *v->tlen);
    if (!v->off || !v->tlen) return TK_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) v->off[i] = UINT64_MAX;
    v->n = n;
    return TK_OK;
}

int tk_ld_tv_set(tk_tokvec *v, uint32_t rank, const uint8_t *p, size_t n) {
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

void tk_ld_tv_free(tk_tokvec *v) {
    free(v->arena);
    free(v->off);
    free(v->tlen);
}

/* What tk_finalize refused, as a message naming the file and the entries. */
void tk_ld_finalize_msg(const tk_tokenizer *t, int rc, const char *file, const char *sp_file, char *err,
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
    else if (t->bad_id != TK_NO_RANK) tk_set_err(err, errlen, "%s: %s (id %u)", file, what, t->bad_id);
    else if (t->bad_rank != TK_NO_RANK && t->bad_rank < t->n_ranks)
        tk_set_err(err, errlen, "%s: %s (id %u)", file, what, ID_OF(t->bad_rank));
    else tk_set_err(err, errlen, "%s: %s", file, what);
#undef ID_OF
}

/* Move a complete tk_tokvec into a new tokenizer (arena laid out by rank). */
int tk_ld_tv_build(tk_tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                   const char *name, const char *file, const char *sp_file, tk_tokenizer **out, char *err,
                   size_t errlen) {
    return tk_ld_tv_build_x(v, pat, sp, nsp, rank_to_id, name, file, sp_file, 0, out, err, errlen);
}

int tk_ld_tv_build_x(tk_tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                     const char *name, const char *file, const char *sp_file, unsigned how, tk_tokenizer **out,
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
    t->decode_only = how & TK_LD_DECODE_ONLY;
    t->partial_bytes = how & TK_LD_PARTIAL_BYTES;
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
        tk_ld_finalize_msg(t, rc, file, sp_file, err, errlen);
        goto fail;
    }
    *out = t;
    return TK_OK;
fail:
    tk_free(t);
    return rc;
}

void tk_ld_free_specials(tk_special *sp, size_t n) {
    for (size_t k = 0; k < n; k++) free((char *)sp[k].text);
    free(sp);
}

/* ---- byte-level strings (GPT-2 encoder.json / tokenizer.json) ---------- */

/* Decode a byte-level-mapped UTF-8 string into raw bytes; -1 if a character
 * is not in the byte map or the result exceeds cap. */
long tk_ld_bytelevel_decode(const char *s, uint8_t *out, size_t cap) {
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
