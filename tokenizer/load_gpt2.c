/* load_gpt2.c - GPT-2's encoder.json + vocab.bpe. */
#include "load_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
                               tk_ld_shown(part, sb));
                    return TK_ERR_FORMAT;
                }
            uint8_t buf[2 * TK_MAX_TOKEN_BYTES];
            long a = tk_ld_bytelevel_decode(line, buf, TK_MAX_TOKEN_BYTES);
            long b = a < 0 ? -1 : tk_ld_bytelevel_decode(sp1 + 1, buf + a, TK_MAX_TOKEN_BYTES);
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
                           tk_ld_shown(joined, sb));
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
    const tk_known_vocab *kv = tk_ld_known_by_sha(bpe, bpe_len);
    json_t *enc = NULL;
    strset set = {0};
    tk_tokvec v = {0};
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
            if ((rc = tk_ld_json_id(val, encoder_json, "token", k, &id, err, errlen))) goto done;
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
            long l = tk_ld_bytelevel_decode(k, buf, sizeof buf);
            if (l > 0 && ss_find(&set, buf, (size_t)l) >= 0) n_ranks++;
        }
        if ((rc = tk_ld_tv_init(&v, n_ranks))) goto done;
        json_object_foreach(enc, k, val) {
            uint32_t id = (uint32_t)json_integer_value(val); /* checked above */
            uint8_t buf[TK_MAX_TOKEN_BYTES];
            long l = tk_ld_bytelevel_decode(k, buf, sizeof buf);
            if (l > 0 && ss_find(&set, buf, (size_t)l) >= 0) {
                if ((rc = tk_ld_tv_set(&v, id, buf, (size_t)l))) {
                    tk_set_err(err, errlen, "%s: token \"%s\": id %u %s", encoder_json, tk_ld_shown(k, sb), id,
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
    rc = tk_ld_tv_build(&v, pat, sp, nsp, NULL, kv ? kv->name : NULL, encoder_json, encoder_json, out, err, errlen);
    if (rc == TK_OK && kv) (*out)->known = true;
done:
    if (rc && err && !err[0]) tk_set_err(err, errlen, "%s: %s", encoder_json, tk_strerror(rc));
    tk_ld_free_specials(sp, nsp);
    tk_ld_tv_free(&v);
    ss_free(&set);
    json_decref(enc);
    free(bpe);
    return rc;
}
