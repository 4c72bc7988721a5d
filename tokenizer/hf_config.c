/* hf_config.c - tokenizer.json's normalizer, pre_tokenizer, model, decoder
 * and added_tokens parsed into struct tk_hf at load (tk_hf_setup,
 * tk_hf_setup_sp); anything unsupported is refused, naming the JSON path. */
#include "hf_internal.h"

#include <nettle/sha2.h>

void tk_hf_free(tk_hf *h) {
    if (!h) return;
    for (size_t k = 0; k < h->n_nm; k++) {
        free(h->nm[k].a);
        free(h->nm[k].b);
        free(h->nm[k].cmap.units);
        tk_regex_free(h->nm[k].re);
    }
    for (size_t k = 0; k < h->n_pt; k++) tk_regex_free(h->pt[k].re);
    for (size_t k = 0; k < h->n_added; k++) free(h->added[k].text);
    free(h->trie);
    for (size_t k = 0; k < h->n_dec; k++) {
        free(h->dec[k].a);
        free(h->dec[k].b);
        tk_regex_free(h->dec[k].re);
    }
    tk_hfj_free(&h->voc);
    free(h->added);
    free(h->merges);
    free(h->pair1);
    free(h->m1);
    tk_chartab_free(h->chartab);
    tk_hf_uni_free(h->uni);
    if (h->wm) h->wm->free(h->wm_state);
    free(h);
}

#define REFUSE(path, ...)                                                                                              \
    do {                                                                                                               \
        char _m[320];                                                                                                  \
        snprintf(_m, sizeof _m, __VA_ARGS__);                                                                          \
        tk_set_err(err, errlen, "%s: %s: %s", file, path, _m);                                                         \
        return TK_ERR_UNSUPPORTED;                                                                                     \
    } while (0)

static const char *type_of(json_t *o) { return json_string_value(json_object_get(o, "type")); }

/* Keys of o other than those listed are refused: an option we do not know
 * could change the ids. */
static int only_keys(json_t *o, const char *file, const char *path, const char *comp, const char *const *keys,
                     char *err, size_t errlen) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        bool ok = strcmp(k, "type") == 0;
        for (size_t i = 0; keys[i] && !ok; i++) ok = strcmp(k, keys[i]) == 0;
        if (!ok) {
            char sb[64];
            snprintf(sb, sizeof sb, "%.40s", k);
            for (char *q = sb; *q; q++)
                if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
            REFUSE(path, "%s: option \"%s\" is not supported", comp, sb);
        }
    }
    return TK_OK;
}

static int get_bool(json_t *o, const char *key, bool dflt, bool *out, const char *file, const char *path, char *err,
                    size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return TK_OK;
    }
    if (!json_is_boolean(v)) {
        tk_set_err(err, errlen, "%s: %s.%s is not a boolean", file, path, key);
        return TK_ERR_FORMAT;
    }
    *out = json_is_true(v);
    return TK_OK;
}

static int get_str(json_t *o, const char *key, const uint8_t **s, size_t *n, const char *file, const char *path,
                   char *err, size_t errlen) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        tk_set_err(err, errlen, "%s: %s.%s is not a string", file, path, key);
        return TK_ERR_FORMAT;
    }
    *s = (const uint8_t *)json_string_value(v);
    *n = json_string_length(v);
    return TK_OK;
}

static int dup_bytes(const uint8_t *s, size_t n, uint8_t **out, size_t *on) {
    *out = malloc(n + 1);
    if (!*out) return TK_ERR_NOMEM;
    memcpy(*out, s, n);
    (*out)[n] = 0;
    *on = n;
    return TK_OK;
}

/* DeepSeek V3's third Split regex, in either spelling of its \r\n */
static bool is_deepseek_re(const char *re) {
    static const char *const nl[2] = {"\r\n", "\\r\\n"};
    for (int k = 0; k < 2; k++) {
        char b[512];
        int len = snprintf(b, sizeof b, "%s%s%s%s%s%s%s", HF_DEEPSEEK_HEAD, nl[k], HF_DEEPSEEK_MID, nl[k],
                           HF_DEEPSEEK_MID2, nl[k], HF_DEEPSEEK_TAIL);
        if (len > 0 && (size_t)len < sizeof b && strcmp(re, b) == 0) return true;
    }
    return false;
}

/* pattern: {"Regex": "..."} or {"String": "..."} */
static int parse_pattern(json_t *pat, const char *file, const char *path, tk_regex **re, tk_pattern *fast,
                         int *cl100k_hf, char *err, size_t errlen) {
    json_t *rx = json_object_get(pat, "Regex"), *st = json_object_get(pat, "String");
    if (!json_is_object(pat) || json_object_size(pat) != 1 || (!json_is_string(rx) && !json_is_string(st))) {
        tk_set_err(err, errlen, "%s: %s.pattern is not {\"Regex\": ...} or {\"String\": ...}", file, path);
        return TK_ERR_FORMAT;
    }
    json_t *v = rx ? rx : st;
    if (!json_string_length(v)) REFUSE(path, "an empty pattern is not supported");
    if (fast) {
        *fast = TK_PAT_NONE;
        /* cl100k's older spelling and Qwen's first: scanned with Oniguruma's
         * reading of their whitespace branches */
        *cl100k_hf = rx ? tk_regex_cl100k_hf(json_string_value(rx)) : 0;
        if (*cl100k_hf) *fast = TK_PAT_CL100K;
        else if (rx) *fast = tk_pattern_from_regex(json_string_value(rx));
        if (*fast != TK_PAT_NONE) return TK_OK;
        if (rx && is_deepseek_re(json_string_value(rx))) {
            /* scanned when Isolated (run_pre); compiled below for any other behaviour */
            *cl100k_hf = 3;
            *fast = TK_PAT_CL100K;
        }
    }
    char e2[200] = "";
    int rc = tk_regex_compile(json_string_value(v), json_string_length(v), st != NULL, re, e2, sizeof e2);
    if (rc) tk_set_err(err, errlen, "%s: %s.pattern: %s", file, path, e2[0] ? e2 : tk_strerror(rc));
    return rc;
}

static int parse_normalizer(tk_hf *h, json_t *n, const char *file, const char *path, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return TK_OK;
    const char *ty = type_of(n);
    if (!json_is_object(n) || !ty) {
        tk_set_err(err, errlen, "%s: %s is not an object with a \"type\"", file, path);
        return TK_ERR_FORMAT;
    }
    int rc;
    if (strcmp(ty, "Sequence") == 0) {
        json_t *l = json_object_get(n, "normalizers");
        if (!json_is_array(l)) {
            tk_set_err(err, errlen, "%s: %s.normalizers is not an array", file, path);
            return TK_ERR_FORMAT;
        }
        static const char *const keys[] = {"normalizers", NULL};
        if ((rc = only_keys(n, file, path, "Sequence", keys, err, errlen))) return rc;
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) {
            char p2[256];
            snprintf(p2, sizeof p2, "%.200s.normalizers[%zu]", path, i);
            if ((rc = parse_normalizer(h, e, file, p2, err, errlen))) return rc;
        }
        return TK_OK;
    }
    if (h->n_nm >= HF_MAX_STEPS) REFUSE(path, "more than %d normalizers", HF_MAX_STEPS);
    nm_step *st = &h->nm[h->n_nm];
    memset(st, 0, sizeof *st);
    static const char *const none[] = {NULL};
    if (!strcmp(ty, "NFC") || !strcmp(ty, "NFD") || !strcmp(ty, "NFKC") || !strcmp(ty, "NFKD") ||
        !strcmp(ty, "Lowercase") || !strcmp(ty, "StripAccents")) {
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        st->kind = !strcmp(ty, "NFC")         ? NM_NFC
                   : !strcmp(ty, "NFD")       ? NM_NFD
                   : !strcmp(ty, "NFKC")      ? NM_NFKC
                   : !strcmp(ty, "NFKD")      ? NM_NFKD
                   : !strcmp(ty, "Lowercase") ? NM_LOWER
                                              : NM_STRIP_ACCENTS;
    } else if (!strcmp(ty, "Strip")) {
        static const char *const keys[] = {"strip_left", "strip_right", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = NM_STRIP;
        if ((rc = get_bool(n, "strip_left", true, &st->left, file, path, err, errlen)) ||
            (rc = get_bool(n, "strip_right", true, &st->right, file, path, err, errlen)))
            return rc;
    } else if (!strcmp(ty, "Replace")) {
        static const char *const keys[] = {"pattern", "content", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = NM_REPLACE;
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "content", &cs, &cn, file, path, err, errlen))) return rc;
        json_t *pat = json_object_get(n, "pattern");
        if ((rc = parse_pattern(pat, file, path, &st->re, NULL, NULL, err, errlen))) return rc;
        h->n_nm++; /* owns st->re from here */
        json_t *ps = json_object_get(pat, "String"), *pv = ps ? ps : json_object_get(pat, "Regex");
        if ((rc = tk_hf_replace_fast(st, json_string_value(pv), json_string_length(pv), ps != NULL))) return rc;
        return dup_bytes(cs, cn, &st->b, &st->blen);
    } else if (!strcmp(ty, "Prepend")) {
        static const char *const keys[] = {"prepend", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = NM_PREPEND;
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "prepend", &cs, &cn, file, path, err, errlen))) return rc;
        h->n_nm++;
        return dup_bytes(cs, cn, &st->a, &st->alen);
    } else if (!strcmp(ty, "BertNormalizer")) {
        /* HF's order: clean_text, handle_chinese_chars, strip_accents (NFD,
         * then nonspacing marks dropped; null: as lowercase), lowercase;
         * steps of their own (hf_bert.c) so the chain runs them */
        static const char *const keys[] = {"clean_text", "handle_chinese_chars", "strip_accents", "lowercase", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        static const char *const req[] = {"clean_text", "handle_chinese_chars", "lowercase"};
        for (size_t k = 0; k < 3; k++)
            if (!json_is_boolean(json_object_get(n, req[k]))) {
                tk_set_err(err, errlen, "%s: %s.%s is not a boolean (HF needs it)", file, path, req[k]);
                return TK_ERR_FORMAT;
            }
        bool lower = json_is_true(json_object_get(n, "lowercase")), strip;
        if ((rc = get_bool(n, "strip_accents", lower, &strip, file, path, err, errlen))) return rc;
        int kinds[5], nk = 0;
        if (json_is_true(json_object_get(n, "clean_text"))) kinds[nk++] = NM_BERT_CLEAN;
        if (json_is_true(json_object_get(n, "handle_chinese_chars"))) kinds[nk++] = NM_BERT_CJK;
        if (strip) kinds[nk++] = NM_NFD, kinds[nk++] = NM_BERT_MN;
        if (lower) kinds[nk++] = NM_LOWER;
        if (h->n_nm + (size_t)nk > HF_MAX_STEPS) REFUSE(path, "more than %d normalizers", HF_MAX_STEPS);
        for (int k = 0; k < nk; k++) {
            memset(&h->nm[h->n_nm], 0, sizeof h->nm[h->n_nm]);
            h->nm[h->n_nm++].kind = kinds[k];
        }
        return TK_OK;
    } else if (!strcmp(ty, "Precompiled")) { /* SentencePiece's charsmap (spm.c) */
        static const char *const keys[] = {"precompiled_charsmap", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        json_t *b = json_object_get(n, "precompiled_charsmap");
        st->kind = NM_PRECOMPILED;
        if (!json_is_string(b) || tk_spm_charsmap_b64(json_string_value(b), json_string_length(b), &st->a, &st->alen))
            REFUSE(path, "Precompiled: precompiled_charsmap is not a base64 SentencePiece charsmap");
        h->n_nm++; /* owns st->a from here */
        if ((rc = tk_cmap_init(&st->cmap, st->a, st->alen))) return rc;
        tk_hf_precompiled_plain(st);
        return TK_OK;
    } else {
        char sb[48];
        snprintf(sb, sizeof sb, "%.40s", ty);
        for (char *q = sb; *q; q++)
            if ((unsigned char)*q < 0x20) *q = '?';
        REFUSE(path,
               "normalizer \"%s\" is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
               "StripAccents, Replace, Prepend, Precompiled, BertNormalizer, Sequence)",
               sb);
    }
    h->n_nm++;
    return TK_OK;
}

static int parse_behavior(json_t *o, const char *file, const char *path, int dflt, int *beh, char *err, size_t errlen) {
    json_t *b = json_object_get(o, "behavior");
    if (!b) {
        *beh = dflt;
        return TK_OK;
    }
    const char *s = json_string_value(b);
    static const struct {
        const char *n;
        int b;
    } names[] = {{"Removed", B_REMOVED},
                 {"Isolated", B_ISOLATED},
                 {"MergedWithPrevious", B_MERGED_PREV},
                 {"MergedWithNext", B_MERGED_NEXT},
                 {"Contiguous", B_CONTIGUOUS}};
    for (size_t k = 0; s && k < 5; k++)
        if (!strcmp(s, names[k].n)) {
            *beh = names[k].b;
            return TK_OK;
        }
    REFUSE(path, "behavior is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

/* One pre-tokenizer (a Sequence recursively) into h->pt. Over 120 lines
 * because it is one flat branch per HF type, each a few key checks: split
 * up, the types would each need the same seven parameters and nothing
 * would be shared. */
static int parse_pretok(tk_hf *h, json_t *n, const char *file, const char *path, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return TK_OK;
    const char *ty = type_of(n);
    if (!json_is_object(n) || !ty) {
        tk_set_err(err, errlen, "%s: %s is not an object with a \"type\"", file, path);
        return TK_ERR_FORMAT;
    }
    int rc;
    /* Steps after ByteLevel (Falcon: Digits, then a Split of [0-9]{3}) split
     * the byte-mapped text it leaves (hf_encode.c); a second ByteLevel or a
     * Metaspace there would change that text: not supported */
    for (size_t k = 0; k < h->n_pt; k++)
        if (h->pt[k].kind == PT_BYTELEVEL && (!strcmp(ty, "ByteLevel") || !strcmp(ty, "Metaspace")))
            REFUSE(path, "%.40s after ByteLevel is not supported", ty);
    if (strcmp(ty, "Sequence") == 0) {
        json_t *l = json_object_get(n, "pretokenizers");
        if (!json_is_array(l)) {
            tk_set_err(err, errlen, "%s: %s.pretokenizers is not an array", file, path);
            return TK_ERR_FORMAT;
        }
        static const char *const keys[] = {"pretokenizers", NULL};
        if ((rc = only_keys(n, file, path, "Sequence", keys, err, errlen))) return rc;
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) {
            char p2[256];
            snprintf(p2, sizeof p2, "%.200s.pretokenizers[%zu]", path, i);
            if ((rc = parse_pretok(h, e, file, p2, err, errlen))) return rc;
        }
        return TK_OK;
    }
    if (h->n_pt >= HF_MAX_STEPS) REFUSE(path, "more than %d pre-tokenizers", HF_MAX_STEPS);
    pt_step *st = &h->pt[h->n_pt];
    memset(st, 0, sizeof *st);
    st->fast = TK_PAT_NONE;
    if (!strcmp(ty, "Split")) {
        static const char *const keys[] = {"pattern", "behavior", "invert", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_SPLIT;
        if ((rc = parse_behavior(n, file, path, B_ISOLATED, &st->beh, err, errlen)) ||
            (rc = get_bool(n, "invert", false, &st->invert, file, path, err, errlen)))
            return rc;
        if ((rc = parse_pattern(json_object_get(n, "pattern"), file, path, &st->re, &st->fast, &st->cl100k_hf, err,
                                errlen)))
            return rc;
    } else if (!strcmp(ty, "ByteLevel")) {
        static const char *const keys[] = {"add_prefix_space", "trim_offsets", "use_regex", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_BYTELEVEL;
        /* HF refuses a ByteLevel without add_prefix_space; absent = false,
         * as this loader always read such files */
        if ((rc = get_bool(n, "add_prefix_space", false, &st->prefix_space, file, path, err, errlen)) ||
            (rc = get_bool(n, "use_regex", true, &st->use_regex, file, path, err, errlen)))
            return rc;
    } else if (!strcmp(ty, "Digits")) {
        static const char *const keys[] = {"individual_digits", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_DIGITS;
        if ((rc = get_bool(n, "individual_digits", false, &st->individual, file, path, err, errlen))) return rc;
    } else if (!strcmp(ty, "Punctuation")) {
        static const char *const keys[] = {"behavior", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_PUNCT;
        if ((rc = parse_behavior(n, file, path, B_ISOLATED, &st->beh, err, errlen))) return rc;
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        static const char *const none[] = {NULL};
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        st->kind = PT_WSSPLIT;
        st->beh = B_REMOVED;
    } else if (!strcmp(ty, "BertPreTokenizer")) {
        /* HF: split on White_Space (Removed), then on punctuation (ASCII or
         * its is_punctuation: Punctuation's test) Isolated; one scan
         * (hf_encode.c) */
        static const char *const none[] = {NULL};
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        st->kind = PT_BERT;
    } else if (!strcmp(ty, "Whitespace")) {
        static const char *const none[] = {NULL};
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        /* HF: \w+|[^\w\s]+, the matches kept (Removed, inverted) */
        st->kind = PT_SPLIT;
        st->beh = B_REMOVED;
        st->invert = true;
        st->ws_scan = true; /* hf_encode.c ws_split */
        char e2[200] = "";
        static const char re[] = "\\w+|[^\\w\\s]+";
        if ((rc = tk_regex_compile(re, sizeof re - 1, false, &st->re, e2, sizeof e2))) {
            tk_set_err(err, errlen, "%s: %s: %s", file, path, e2);
            return rc;
        }
    } else if (!strcmp(ty, "Metaspace")) {
        static const char *const keys[] = {"replacement",      "prepend_scheme", "split",
                                           "add_prefix_space", "str_rep",        NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        st->kind = PT_METASPACE;
        const uint8_t *r;
        size_t rl;
        if ((rc = get_str(n, "replacement", &r, &rl, file, path, err, errlen))) return rc;
        int32_t cp;
        if (rl == 0 || rl > 4 || u8_len(r, rl, 0, &cp) != rl || cp < 0)
            REFUSE(path, "Metaspace: replacement is not one character");
        memcpy(st->repl, r, rl);
        st->repl_len = rl;
        if ((rc = get_bool(n, "split", true, &st->split, file, path, err, errlen))) return rc;
        json_t *ps = json_object_get(n, "prepend_scheme");
        if (ps && !json_is_null(ps)) {
            const char *s = json_string_value(ps);
            if (!s) REFUSE(path, "Metaspace: prepend_scheme is not a string");
            if (!strcmp(s, "always")) st->scheme = MS_ALWAYS;
            else if (!strcmp(s, "first")) st->scheme = MS_FIRST, h->first_scheme = true;
            else if (!strcmp(s, "never")) st->scheme = MS_NEVER;
            else REFUSE(path, "Metaspace: prepend_scheme is not always/first/never");
        } else {
            bool aps;
            if ((rc = get_bool(n, "add_prefix_space", true, &aps, file, path, err, errlen))) return rc;
            st->scheme = aps ? MS_ALWAYS : MS_NEVER;
        }
    } else {
        char sb[48];
        snprintf(sb, sizeof sb, "%.40s", ty);
        for (char *q = sb; *q; q++)
            if ((unsigned char)*q < 0x20) *q = '?';
        REFUSE(path,
               "pre-tokenizer \"%s\" is not supported (supported: ByteLevel, Split, Digits, Punctuation, "
               "WhitespaceSplit, Whitespace, BertPreTokenizer, Metaspace, Sequence)",
               sb);
    }
    h->n_pt++;
    return TK_OK;
}

static int merges_build(tk_hf *h, const uint32_t (*m)[3], size_t nm) {
    size_t slots = 16;
    while (slots < nm * 2 + 16) slots *= 2;
    h->merges = tk_table_alloc(slots * sizeof *h->merges);
    if (!h->merges) return TK_ERR_NOMEM;
    h->mmask = slots - 1;
    for (size_t i = 0; i < nm; i++) {
        if (m[i][0] == TK_NO_RANK) continue; /* a merge that never applies (load_hf.c) */
        uint64_t key = (((uint64_t)m[i][0] << 32) | m[i][1]) + 1;
        uint64_t j = (key * 0x9E3779B97F4A7C15ull) >> 20 & h->mmask;
        while (h->merges[j].key && h->merges[j].key != key) j = (j + 1) & h->mmask;
        /* a pair listed twice: HF's map keeps the last */
        h->merges[j] = (mslot){key, (uint32_t)i, m[i][2]};
    }
    return TK_OK;
}

static int m1_build(const tk_tokenizer *t, tk_hf *h) {
    h->m1 = malloc((t->n_ranks ? t->n_ranks : 1) * sizeof *h->m1);
    if (!h->m1) return TK_ERR_NOMEM;
    for (uint32_t r = 0; r < t->n_ranks; r++) h->m1[r] = (struct m1){M1_NONE, M1_NONE, 0};
    for (uint64_t i = 0; i <= h->mmask; i++) {
        const mslot *m = &h->merges[i];
        if (!m->key) continue;
        struct m1 *e = &h->m1[m->res];
        uint32_t a = (uint32_t)((m->key - 1) >> 32), b = (uint32_t)(m->key - 1);
        if (e->a == M1_NONE && e->b == M1_NONE) {
            *e = (struct m1){a, b, m->midx};
        } else { /* several merges make it: midx keeps the lowest priority (merging from characters) */
            e->a = e->b = M1_MULTI;
            if (m->midx < e->midx) e->midx = m->midx;
        }
    }
    return TK_OK;
}

static int pair1_build(const tk_tokenizer *t, tk_hf *h) {
    h->pair1 = malloc(65536 * sizeof *h->pair1);
    if (!h->pair1) return TK_ERR_NOMEM;
    for (uint32_t k = 0; k < 65536; k++) {
        const mslot *m = merge_get(h, t->byte_rank[k >> 8], t->byte_rank[k & 255]);
        h->pair1[k] = m ? (uint64_t)m->midx << 32 | m->res : UINT64_MAX;
    }
    return TK_OK;
}

/* Is merge-by-rank (tk_bpe_piece) provably HF's merge loop for these
 * merges? (1) merges listed in the order of the ranks of their results;
 * (2) every split of every token into two tokens is a listed merge with
 * that token as result; (3) a token spelled x.y = y.z by two listed splits
 * sharing y (the only way two different splits of one token can both be
 * candidates at once, overlapping) has its left split ranked first, as
 * merge-by-rank takes the leftmost; (4) without ignore_merges, the merge
 * loop on every token's bytes yields that token (merge-by-rank looks whole
 * pieces up first). docs/tokenizer.md, "tokenizer.json fast path". */
static int fast_equivalent(const tk_tokenizer *t, tk_hf *h, const uint32_t (*m)[3], size_t nm, bool *yes) {
    *yes = false;
    for (size_t i = 1; i < nm; i++)
        if (m[i][2] < m[i - 1][2] && merge_get(h, m[i][0], m[i][1])->midx == i) return TK_OK;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        const uint8_t *p = t->arena + t->tok_off[r];
        size_t n = t->tok_off[r + 1] - t->tok_off[r];
        for (size_t k = 1; k < n; k++) {
            uint32_t a = tk_map_get(t, p, k), b = a == TK_NO_RANK ? TK_NO_RANK : tk_map_get(t, p + k, n - k);
            if (b == TK_NO_RANK) continue;
            const mslot *s = merge_get(h, a, b);
            if (!s || s->res != r) return TK_OK;
            /* (3): border y = p[k..n) = p[0..n-k) */
            if (2 * k != n && memcmp(p + k, p, n - k) == 0) {
                uint32_t c = tk_map_get(t, p, n - k), d = tk_map_get(t, p + n - k, k);
                const mslot *s2 = c != TK_NO_RANK && d != TK_NO_RANK ? merge_get(h, c, d) : NULL;
                if (s2 && s2->midx < s->midx) return TK_OK;
            }
        }
    }
    if (!h->ignore_merges) {
        bpe_scratch s = {0};
        tk_ids tmp = {0};
        int ok = 1;
        for (uint32_t r = 0; r < t->n_ranks && ok == 1; r++) ok = tk_hf_reaches(t, h, &s, r, &tmp);
        free(s.sym);
        free(s.prev);
        free(s.next);
        free(s.gone);
        free(s.heap);
        tk_ids_free(&tmp);
        if (ok < 0) return ok;
        if (!ok) return TK_OK;
    }
    *yes = true;
    return TK_OK;
}

/* Canonical text of the parts of the definition that decide ids beyond the
 * ranks and specials: folded into the fingerprint. */
static void fold_fingerprint(tk_tokenizer *t, json_t *root) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, 32, t->fingerprint);
    static const char *const parts[] = {"normalizer", "pre_tokenizer", "added_tokens", "decoder"};
    for (size_t k = 0; k < 4; k++) {
        char *s = json_dumps(json_object_get(root, parts[k]) ? json_object_get(root, parts[k]) : json_null(),
                             JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        uint32_t len = s ? (uint32_t)strlen(s) : 0;
        sha256_update(&c, 4, (const uint8_t *)&len);
        if (s) sha256_update(&c, len, (const uint8_t *)s);
        free(s);
    }
    json_t *model = json_object_get(root, "model");
    static const char *const mk[] = {
        "ignore_merges", "byte_fallback", "fuse_unk", "unk_token", "continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t k = 0; k < 6; k++) {
        char *s = json_dumps(json_object_get(model, mk[k]) ? json_object_get(model, mk[k]) : json_null(),
                             JSON_COMPACT | JSON_ENCODE_ANY);
        uint32_t len = s ? (uint32_t)strlen(s) : 0;
        sha256_update(&c, 4, (const uint8_t *)&len);
        if (s) sha256_update(&c, len, (const uint8_t *)s);
        free(s);
    }
    uint8_t tag[8] = {'t', 'k', 'h', 'f', 1, 0, 0, 0};
    sha256_update(&c, sizeof tag, tag);
    sha256_digest(&c, 32, t->fingerprint);
}

/* The trie of the added tokens' texts (tk_hf.trie): at most one node per
 * text byte, plus the root. */
static int build_added_trie(tk_hf *h) {
    size_t total = 1;
    for (size_t k = 0; k < h->n_added; k++) {
        if (h->added[k].len > SIZE_MAX - total) return TK_ERR_NOMEM;
        total += h->added[k].len;
    }
    if (total > UINT32_MAX) return TK_ERR_LIMIT; /* node numbers are 32-bit; a JSON file that size is refused before */
    h->trie = malloc(total * sizeof *h->trie);
    if (!h->trie) return TK_ERR_NOMEM;
    h->trie[0] = (struct hf_tnode){0, 0, {-1, -1}, 0};
    h->n_trie = 1;
    for (size_t k = 0; k < h->n_added; k++) {
        const hf_added *a = &h->added[k];
        uint32_t node = 0;
        for (size_t j = 0; j < a->len; j++) {
            uint32_t c = h->trie[node].child;
            while (c && h->trie[c].byte != a->text[j]) c = h->trie[c].next;
            if (!c) {
                c = (uint32_t)h->n_trie++;
                h->trie[c] = (struct hf_tnode){0, h->trie[node].child, {-1, -1}, a->text[j]};
                h->trie[node].child = c;
            }
            node = c;
        }
        int32_t *t = &h->trie[node].term[a->normalized];
        if (*t < 0) *t = (int32_t)k; /* equal texts: the first wins, as in a scan in index order */
    }
    return TK_OK;
}

static int parse_added(tk_hf *h, json_t *added, const char *file, char *err, size_t errlen) {
    size_t na = json_array_size(added);
    h->added = calloc(na ? na : 1, sizeof *h->added);
    if (!h->added) return TK_ERR_NOMEM;
    size_t i;
    json_t *a;
    int rc;
    json_array_foreach(added, i, a) {
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        bool special, normalized, lstrip, rstrip, single;
        if ((rc = get_bool(a, "special", false, &special, file, path, err, errlen)) ||
            (rc = get_bool(a, "normalized", !special, &normalized, file, path, err, errlen)) ||
            (rc = get_bool(a, "lstrip", false, &lstrip, file, path, err, errlen)) ||
            (rc = get_bool(a, "rstrip", false, &rstrip, file, path, err, errlen)) ||
            (rc = get_bool(a, "single_word", false, &single, file, path, err, errlen)))
            return rc;
        hf_added *d = &h->added[h->n_added];
        const char *c = json_string_value(json_object_get(a, "content"));
        size_t cl = json_string_length(json_object_get(a, "content"));
        d->id = (uint32_t)json_integer_value(json_object_get(a, "id"));
        d->special = special;
        d->normalized = normalized;
        d->lstrip = lstrip;
        d->rstrip = rstrip;
        d->single_word = single;
        if (normalized && h->n_nm) {
            /* HF matches normalized tokens by their normalized content */
            tk_bytes x = {0}, y = {0};
            const uint8_t *ns;
            size_t nn;
            tk_re_budget budget;
            tk_re_budget_init(&budget, cl);
            rc = tk_hf_normalize(h, (const uint8_t *)c, cl, &x, &y, &ns, &nn, &budget, NULL);
            if (!rc) rc = nn ? dup_bytes(ns, nn, &d->text, &d->len) : TK_OK;
            tk_bytes_free(&x);
            tk_bytes_free(&y);
            if (tk_err_is_document(rc)) {
                tk_set_err(err, errlen, "%s: %s: the normalizer refuses its content: %s", file, path, tk_strerror(rc));
                return TK_ERR_LIMIT;
            }
            if (rc) return rc;
            if (!nn) continue;
        } else if ((rc = dup_bytes((const uint8_t *)c, cl, &d->text, &d->len))) {
            return rc;
        }
        h->first_byte[d->text[0] >> 3] |= (uint8_t)(1u << (d->text[0] & 7));
        h->n_added++;
    }
    return build_added_trie(h);
}

/* The symbol (bl_word) of vocabulary string k[0..kl): its rank, BL_ID | id,
 * or BL_NONE. */
static uint32_t bl_sym_of(const tk_tokenizer *t, const tk_hfj *J, const char *k, size_t kl) {
    int e = tk_hfj_lookup(J, k, kl);
    if (e < 0) return BL_NONE;
    uint32_t id = J->vid[e], r = id < t->vocab_size ? t->id_to_rank[id] : TK_NO_RANK;
    return r != TK_NO_RANK ? r : BL_ID | id;
}

/* A string option of model (absent or null: empty) into buf (cap bytes). */
static int get_affix(json_t *model, const char *key, uint8_t *buf, size_t *len, const char *file, char *err,
                     size_t errlen) {
    json_t *v = json_object_get(model, key);
    *len = 0;
    if (!v || json_is_null(v)) return TK_OK;
    if (!json_is_string(v)) {
        tk_set_err(err, errlen, "%s: model.%s is not a string", file, key);
        return TK_ERR_FORMAT;
    }
    if (json_string_length(v) > HF_AFFIX_MAX) {
        tk_set_err(err, errlen, "%s: model.%s is longer than %d bytes", file, key, HF_AFFIX_MAX);
        return TK_ERR_LIMIT;
    }
    *len = json_string_length(v);
    memcpy(buf, json_string_value(v), *len);
    return TK_OK;
}

/* The byte-level model's options (HF's BPE: unk_token, fuse_unk,
 * byte_fallback, continuing_subword_prefix, end_of_word_suffix) as the
 * tables of bl_word: the symbol of each byte's character in each position,
 * of each <0xNN>, of unk. bl_plain when none of them changes what the
 * merge loop on the bytes gives. */
static int bl_model(const tk_tokenizer *t, tk_hf *h, json_t *model, const tk_hfj *J, bool raw_entries, const char *file,
                    char *err, size_t errlen) {
    int rc;
    if ((rc = get_bool(model, "fuse_unk", false, &h->fuse_unk, file, "model", err, errlen)) ||
        (rc = get_bool(model, "byte_fallback", false, &h->bl_byte_fallback, file, "model", err, errlen)) ||
        (rc = get_affix(model, "continuing_subword_prefix", h->prefix, &h->prefix_len, file, err, errlen)) ||
        (rc = get_affix(model, "end_of_word_suffix", h->suffix, &h->suffix_len, file, err, errlen)))
        return rc;
    h->bl_general = h->prefix_len || h->suffix_len;
    char k[2 * HF_AFFIX_MAX + 8];
    for (int pos = 0; pos < 4; pos++)
        for (int b = 0; b < 256; b++) {
            size_t kl = 0;
            if (pos & 1) memcpy(k, h->prefix, h->prefix_len), kl = h->prefix_len;
            uint32_t cp = tk_byte_to_cp((uint8_t)b);
            if (cp < 0x80) k[kl++] = (char)cp;
            else k[kl++] = (char)(0xC0 | cp >> 6), k[kl++] = (char)(0x80 | (cp & 63));
            if (pos & 2) memcpy(k + kl, h->suffix, h->suffix_len), kl += h->suffix_len;
            h->bsym[pos][b] = bl_sym_of(t, J, k, kl);
        }
    for (int b = 0; b < 256; b++) {
        snprintf(k, sizeof k, "<0x%02X>", b);
        h->fb_sym[b] = h->bl_byte_fallback ? bl_sym_of(t, J, k, 6) : BL_NONE;
        /* without affixes a byte's character is its single-byte token */
        if (h->bsym[0][b] == BL_NONE || h->bsym[0][b] != t->byte_rank[b]) h->bl_odd[b >> 3] |= (uint8_t)(1u << (b & 7));
    }
    h->unk = TK_NO_RANK;
    h->unk_sym = BL_NONE;
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk)) {
        tk_set_err(err, errlen, "%s: model.unk_token is not a string", file);
        return TK_ERR_FORMAT;
    }
    if (json_is_string(unk)) {
        h->unk_sym = bl_sym_of(t, J, json_string_value(unk), json_string_length(unk));
        h->unk = h->unk_sym == BL_NONE ? TK_NO_RANK
                 : h->unk_sym & BL_ID  ? h->unk_sym & ~BL_ID
                 : t->rank_to_id       ? t->rank_to_id[h->unk_sym]
                                       : h->unk_sym;
    }
    bool odd = false;
    for (int b = 0; b < 32; b++) odd |= h->bl_odd[b] != 0;
    h->bl_plain = !h->bl_general && !odd && !raw_entries;
    /* HF fails every text with a character that has no token, no fallback
     * and an unk_token missing from the vocabulary: no ids to give there */
    if (json_is_string(unk) && h->unk_sym == BL_NONE)
        for (int pos = 0; pos < 4; pos++)
            for (int b = 0; b < 256; b++) {
                if (h->bsym[pos][b] != BL_NONE || (!h->bl_general && pos)) continue;
                /* byte_fallback covers it when <0xNN> exist for every byte of prefix + char + suffix */
                bool covered = h->bl_byte_fallback;
                uint8_t w[2 * HF_AFFIX_MAX + 2];
                size_t wl = 0;
                if (pos & 1) memcpy(w, h->prefix, h->prefix_len), wl = h->prefix_len;
                uint32_t cp = tk_byte_to_cp((uint8_t)b);
                if (cp < 0x80) w[wl++] = (uint8_t)cp;
                else w[wl++] = (uint8_t)(0xC0 | cp >> 6), w[wl++] = (uint8_t)(0x80 | (cp & 63));
                if (pos & 2) memcpy(w + wl, h->suffix, h->suffix_len), wl += h->suffix_len;
                for (size_t q = 0; q < wl && covered; q++) covered = h->fb_sym[w[q]] != BL_NONE;
                if (covered) continue;
                tk_set_err(err, errlen,
                           "%s: model.unk_token \"%s\" is not in model.vocab, and byte 0x%02x has no token: "
                           "HF fails every text with that byte (unsupported byte-level vocabulary)",
                           file, json_string_value(unk), b);
                return TK_ERR_UNSUPPORTED;
            }
    return TK_OK;
}

int tk_hf_setup(tk_tokenizer *t, json_t *root, const char *file, const uint32_t (*merges)[3], size_t nm,
                const tk_hfj *J, bool raw_entries, tk_pattern forced, tk_hf **out, char *err, size_t errlen) {
    *out = NULL;
    tk_hf *h = calloc(1, sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    int rc;
    json_t *model = json_object_get(root, "model");
    if ((rc = get_bool(model, "ignore_merges", false, &h->ignore_merges, file, "model", err, errlen))) goto fail;
    {
        static const char *const keys[] = {"vocab",
                                           "merges",
                                           "dropout",
                                           "unk_token",
                                           "continuing_subword_prefix",
                                           "end_of_word_suffix",
                                           "fuse_unk",
                                           "byte_fallback",
                                           "ignore_merges",
                                           NULL};
        if ((rc = only_keys(model, file, "model", "BPE", keys, err, errlen))) goto fail;
        json_t *d = json_object_get(model, "dropout");
        if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0)) {
            tk_set_err(err, errlen, "%s: model.dropout: BPE dropout is not supported (ids would be random)", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
        if ((rc = bl_model(t, h, model, J, raw_entries, file, err, errlen))) goto fail;
    }
    if ((rc = parse_normalizer(h, json_object_get(root, "normalizer"), file, "normalizer", err, errlen))) goto fail;
    if ((rc = parse_pretok(h, json_object_get(root, "pre_tokenizer"), file, "pre_tokenizer", err, errlen))) goto fail;
    size_t bl_at = 0;
    while (bl_at < h->n_pt && h->pt[bl_at].kind != PT_BYTELEVEL) bl_at++;
    if (bl_at == h->n_pt) {
        tk_set_err(err, errlen,
                   "%s: pre_tokenizer: a byte-level vocabulary needs a ByteLevel pre-tokenizer (this one "
                   "has none)",
                   file);
        rc = TK_ERR_UNSUPPORTED;
        goto fail;
    }
    for (size_t k = 0; k < h->n_pt; k++)
        if (h->pt[k].kind == PT_METASPACE) {
            tk_set_err(err, errlen, "%s: pre_tokenizer: Metaspace with a byte-level vocabulary is not supported", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
    {
        const char *dt = type_of(json_object_get(root, "decoder"));
        json_t *dec = json_object_get(root, "decoder");
        if (dec && !json_is_null(dec) && (!dt || strcmp(dt, "ByteLevel") != 0)) {
            tk_set_err(err, errlen, "%s: decoder: only ByteLevel is supported with a byte-level vocabulary", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
    }
    if ((rc = parse_added(h, json_object_get(root, "added_tokens"), file, err, errlen))) goto fail;
    if ((rc = merges_build(h, merges, nm)) || (rc = pair1_build(t, h)) || (rc = m1_build(t, h))) goto fail;
    if (h->bl_plain && (rc = fast_equivalent(t, h, merges, nm, &h->fast_bpe))) goto fail;
    bool any_nonspecial = false;
    for (size_t k = 0; k < h->n_added; k++) any_nonspecial |= !h->added[k].special;
    /* the tiktoken engine alone does exactly this pipeline? */
    tk_pattern pat = TK_PAT_NONE;
    if (h->n_nm == 0 && !any_nonspecial && bl_at == h->n_pt - 1) {
        const pt_step *bl = &h->pt[bl_at];
        if (!bl->prefix_space) {
            if (h->n_pt == 1 && bl->use_regex) pat = TK_PAT_GPT2;
            if (h->n_pt == 2 && !bl->use_regex && h->pt[0].kind == PT_SPLIT && h->pt[0].fast != TK_PAT_NONE &&
                (h->pt[0].cl100k_hf == 0 || (h->pt[0].cl100k_hf == 1 && !tk_vocab_joins_nl_ws(t))) &&
                h->pt[0].beh == B_ISOLATED && !h->pt[0].invert)
                pat = h->pt[0].fast;
        }
    }
    if (forced != TK_PAT_NONE && forced != pat) {
        tk_set_err(err, errlen,
                   "%s: --pattern %s cannot replace this tokenizer's own pre-tokenizer and normalizer "
                   "(they would give other ids than HF): leave it out",
                   file, tk_pattern_name(forced));
        rc = TK_ERR_PATTERN;
        goto fail;
    }
    /* t->pattern: the pre-tokens are exactly that pattern's (tk_get_pattern) */
    t->pattern = pat;
    tk_compute_fingerprint(t);
    if (pat != TK_PAT_NONE && h->fast_bpe) {
        tk_hf_free(h);
        return TK_OK;
    }
    /* ids = HF's pipeline: the fingerprint covers it */
    fold_fingerprint(t, root);
    *out = h;
    return TK_OK;
fail:
    tk_hf_free(h);
    return rc;
}

/* ---- SentencePiece-style: setup and the decoder chain --------------------- */

static int parse_decoder(tk_hf *h, json_t *n, const char *file, const char *path, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return TK_OK;
    const char *ty = type_of(n);
    if (!json_is_object(n) || !ty) {
        tk_set_err(err, errlen, "%s: %s is not an object with a \"type\"", file, path);
        return TK_ERR_FORMAT;
    }
    int rc;
    if (!strcmp(ty, "Sequence")) {
        json_t *l = json_object_get(n, "decoders");
        if (!json_is_array(l)) {
            tk_set_err(err, errlen, "%s: %s.decoders is not an array", file, path);
            return TK_ERR_FORMAT;
        }
        size_t i;
        json_t *e;
        json_array_foreach(l, i, e) {
            char p2[256];
            snprintf(p2, sizeof p2, "%.200s.decoders[%zu]", path, i);
            if ((rc = parse_decoder(h, e, file, p2, err, errlen))) return rc;
        }
        return TK_OK;
    }
    if (h->n_dec >= HF_MAX_STEPS) REFUSE(path, "more than %d decoders", HF_MAX_STEPS);
    struct dec_step *d = &h->dec[h->n_dec];
    memset(d, 0, sizeof *d);
    static const char *const none[] = {NULL};
    if (!strcmp(ty, "ByteFallback") || !strcmp(ty, "Fuse")) {
        if ((rc = only_keys(n, file, path, ty, none, err, errlen))) return rc;
        d->kind = !strcmp(ty, "Fuse") ? D_FUSE : D_BYTEFB;
    } else if (!strcmp(ty, "Replace")) {
        static const char *const keys[] = {"pattern", "content", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        json_t *pat = json_object_get(n, "pattern"), *st = json_object_get(pat, "String");
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "content", &cs, &cn, file, path, err, errlen))) return rc;
        d->kind = D_REPLACE;
        if (!json_is_string(st)) { /* {"Regex": ...}: the pattern's matches (onig find_iter), as the normalizer */
            if ((rc = parse_pattern(pat, file, path, &d->re, NULL, NULL, err, errlen))) return rc;
            h->n_dec++; /* owns d->re from here */
            return dup_bytes(cs, cn, &d->b, &d->blen);
        }
        if (!json_string_length(st)) REFUSE(path, "Replace decoder: an empty pattern is not supported");
        if ((rc = dup_bytes((const uint8_t *)json_string_value(st), json_string_length(st), &d->a, &d->alen)) ||
            (rc = dup_bytes(cs, cn, &d->b, &d->blen)))
            return rc;
    } else if (!strcmp(ty, "Strip")) {
        static const char *const keys[] = {"content", "start", "stop", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        const uint8_t *cs;
        size_t cn;
        if ((rc = get_str(n, "content", &cs, &cn, file, path, err, errlen))) return rc;
        int32_t cp;
        json_t *a = json_object_get(n, "start"), *b = json_object_get(n, "stop");
        if (!cn || cn > 4 || u8_len(cs, cn, 0, &cp) != cn || !json_is_integer(a) || !json_is_integer(b) ||
            json_integer_value(a) < 0 || json_integer_value(b) < 0 || json_integer_value(a) > 1024 ||
            json_integer_value(b) > 1024)
            REFUSE(path, "Strip decoder: content must be one character, start/stop small integers");
        d->kind = D_STRIP;
        d->start = (uint32_t)json_integer_value(a);
        d->stop = (uint32_t)json_integer_value(b);
        if ((rc = dup_bytes(cs, cn, &d->a, &d->alen))) return rc;
    } else if (!strcmp(ty, "WordPiece")) {
        static const char *const keys[] = {"prefix", "cleanup", NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        const uint8_t *pf;
        size_t pn;
        if ((rc = get_str(n, "prefix", &pf, &pn, file, path, err, errlen))) return rc;
        if (!json_is_boolean(json_object_get(n, "cleanup"))) {
            tk_set_err(err, errlen, "%s: %s.cleanup is not a boolean (HF needs it)", file, path);
            return TK_ERR_FORMAT;
        }
        if (pn > HF_AFFIX_MAX) REFUSE(path, "WordPiece decoder: prefix longer than %d bytes", HF_AFFIX_MAX);
        d->kind = D_WORDPIECE;
        d->scheme = json_is_true(json_object_get(n, "cleanup"));
        if ((rc = dup_bytes(pf, pn, &d->a, &d->alen))) return rc;
    } else if (!strcmp(ty, "Metaspace")) {
        static const char *const keys[] = {"replacement",      "prepend_scheme", "split",
                                           "add_prefix_space", "str_rep",        NULL};
        if ((rc = only_keys(n, file, path, ty, keys, err, errlen))) return rc;
        const uint8_t *r;
        size_t rl;
        if ((rc = get_str(n, "replacement", &r, &rl, file, path, err, errlen))) return rc;
        d->kind = D_METASPACE;
        json_t *ps = json_object_get(n, "prepend_scheme");
        const char *sc = json_string_value(ps);
        bool aps = !json_is_false(json_object_get(n, "add_prefix_space"));
        d->scheme = sc ? (!strcmp(sc, "never") ? MS_NEVER : MS_ALWAYS) : (aps ? MS_ALWAYS : MS_NEVER);
        if ((rc = dup_bytes(r, rl, &d->a, &d->alen))) return rc;
    } else {
        char sb[48];
        snprintf(sb, sizeof sb, "%.40s", ty);
        for (char *q = sb; *q; q++)
            if ((unsigned char)*q < 0x20) *q = '?';
        REFUSE(path,
               "decoder \"%s\" is not supported with a SentencePiece-style vocabulary (supported: Replace, "
               "ByteFallback, Fuse, Strip, Metaspace, WordPiece, Sequence)",
               sb);
    }
    h->n_dec++;
    return TK_OK;
}

/* h->voc: a copy of the vocabulary strings of J, in J's order (the decoder
 * chain reads the tokens' own strings from it). */
static int voc_copy(tk_hf *h, const tk_hfj *J) {
    size_t bytes = 1;
    for (size_t e = 0; e < J->nv; e++) bytes += J->vlen[e] + 1;
    h->voc.arena = malloc(bytes);
    h->voc.vkey = malloc((J->nv + 1) * sizeof *h->voc.vkey);
    h->voc.vlen = malloc((J->nv + 1) * sizeof *h->voc.vlen);
    h->voc.vid = malloc((J->nv + 1) * sizeof *h->voc.vid);
    if (!h->voc.arena || !h->voc.vkey || !h->voc.vlen || !h->voc.vid) return TK_ERR_NOMEM;
    size_t o = 0;
    for (size_t e = 0; e < J->nv; e++) {
        memcpy(h->voc.arena + o, J->vkey[e], J->vlen[e] + 1);
        h->voc.vkey[e] = (const char *)h->voc.arena + o;
        h->voc.vlen[e] = J->vlen[e];
        h->voc.vid[e] = J->vid[e];
        o += J->vlen[e] + 1;
    }
    h->voc.nv = J->nv;
    return TK_OK;
}

int tk_hf_setup_sp(tk_tokenizer *t, json_t *root, const char *file, const uint32_t (*merges)[3], size_t nm, tk_hfj *J,
                   tk_hf **out, char *err, size_t errlen) {
    *out = NULL;
    tk_hf *h = calloc(1, sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    h->sp = true;
    int rc;
    json_t *model = json_object_get(root, "model");
    {
        static const char *const keys[] = {"vocab",
                                           "merges",
                                           "dropout",
                                           "unk_token",
                                           "continuing_subword_prefix",
                                           "end_of_word_suffix",
                                           "fuse_unk",
                                           "byte_fallback",
                                           "ignore_merges",
                                           NULL};
        if ((rc = only_keys(model, file, "model", "BPE", keys, err, errlen))) goto fail;
        json_t *d = json_object_get(model, "dropout");
        if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0)) {
            tk_set_err(err, errlen, "%s: model.dropout: BPE dropout is not supported (ids would be random)", file);
            rc = TK_ERR_UNSUPPORTED;
            goto fail;
        }
        static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
        for (size_t k = 0; k < 2; k++) {
            json_t *v = json_object_get(model, affixes[k]);
            if (!v || json_is_null(v)) continue;
            if (!json_is_string(v) || json_string_length(v) > HF_AFFIX_MAX ||
                strlen(json_string_value(v)) != json_string_length(v)) {
                tk_set_err(err, errlen, "%s: model.%s must be a string of at most %d bytes", file, affixes[k],
                           HF_AFFIX_MAX);
                rc = TK_ERR_UNSUPPORTED;
                goto fail;
            }
            memcpy(k ? h->suffix : h->prefix, json_string_value(v), json_string_length(v));
            *(k ? &h->suffix_len : &h->prefix_len) = json_string_length(v);
        }
    }
    bool bfb;
    if ((rc = get_bool(model, "ignore_merges", false, &h->ignore_merges, file, "model", err, errlen)) ||
        (rc = get_bool(model, "byte_fallback", false, &bfb, file, "model", err, errlen)) ||
        (rc = get_bool(model, "fuse_unk", false, &h->fuse_unk, file, "model", err, errlen)))
        goto fail;
    /* own copy of the vocabulary strings (J may point into a jansson tree) */
    {
        if ((rc = voc_copy(h, J))) goto fail;
        if ((rc = tk_hfj_index(&h->voc))) {
            rc = rc < 0 ? rc : TK_ERR_FORMAT;
            goto fail;
        }
    }
    for (int b = 0; b < 256; b++) {
        char code[8];
        snprintf(code, sizeof code, "<0x%02X>", b);
        int e = bfb ? tk_hfj_lookup(&h->voc, code, 6) : -1;
        h->byte_id[b] = e >= 0 ? h->voc.vid[e] : TK_NO_RANK;
    }
    h->unk = TK_NO_RANK;
    json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk)) {
        int e = json_is_string(unk) ? tk_hfj_lookup(&h->voc, json_string_value(unk), json_string_length(unk)) : -1;
        if (e < 0) {
            tk_set_err(err, errlen, "%s: model.unk_token is not a string naming a model.vocab entry", file);
            rc = TK_ERR_FORMAT;
            goto fail;
        }
        h->unk = h->voc.vid[e];
    }
    if ((rc = parse_normalizer(h, json_object_get(root, "normalizer"), file, "normalizer", err, errlen))) goto fail;
    if ((rc = parse_pretok(h, json_object_get(root, "pre_tokenizer"), file, "pre_tokenizer", err, errlen))) goto fail;
    if ((rc = parse_decoder(h, json_object_get(root, "decoder"), file, "decoder", err, errlen))) goto fail;
    if ((rc = parse_added(h, json_object_get(root, "added_tokens"), file, err, errlen))) goto fail;
    if ((rc = merges_build(h, merges, nm))) goto fail;
    fold_fingerprint(t, root);
    t->pattern = TK_PAT_NONE;
    *out = h;
    return TK_OK;
fail:
    tk_hf_free(h);
    return rc;
}

/* ---- Unigram: setup -------------------------------------------------------- */

/* The scores and unk_id decide the ids beyond what fold_fingerprint covers. */
static void fold_unigram(tk_tokenizer *t, const double *score, uint32_t n, uint32_t unk_id, bool bfb) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, 32, t->fingerprint);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &score[i], 8);
        uint8_t le[8];
        for (int k = 0; k < 8; k++) le[k] = (uint8_t)(b >> (8 * k));
        sha256_update(&c, 8, le);
    }
    uint8_t tail[16] = {'t',
                        'k',
                        'h',
                        'f',
                        'u',
                        'n',
                        'i',
                        1,
                        (uint8_t)unk_id,
                        (uint8_t)(unk_id >> 8),
                        (uint8_t)(unk_id >> 16),
                        (uint8_t)(unk_id >> 24),
                        (uint8_t)bfb,
                        0,
                        0,
                        0};
    sha256_update(&c, sizeof tail, tail);
    sha256_digest(&c, 32, t->fingerprint);
}

int tk_hf_setup_uni(tk_tokenizer *t, json_t *root, const char *file, const tk_hfj *J, const double *score,
                    uint32_t unk_id, bool byte_fallback, tk_hf **out, char *err, size_t errlen) {
    uint32_t n = (uint32_t)J->nv;
    *out = NULL;
    tk_hf *h = calloc(1, sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    h->sp = true; /* characters, not byte-level: decoder chain, no lossless claim */
    h->unk = unk_id;
    for (int b = 0; b < 256; b++) h->byte_id[b] = TK_NO_RANK;
    int rc = voc_copy(h, J);
    if (rc) goto fail;
    rc = tk_hf_uni_build(J->vkey, J->vlen, score, n, unk_id, byte_fallback, &h->uni);
    if (rc) {
        tk_set_err(err, errlen, "%s: model.vocab: Unigram: %s while building its piece trie", file,
                   rc == TK_ERR_LIMIT ? "too many trie nodes" : "out of memory");
        goto fail;
    }
    h->bl_byte_fallback = byte_fallback; /* for describe */
    if ((rc = parse_normalizer(h, json_object_get(root, "normalizer"), file, "normalizer", err, errlen))) goto fail;
    if ((rc = parse_pretok(h, json_object_get(root, "pre_tokenizer"), file, "pre_tokenizer", err, errlen))) goto fail;
    if ((rc = parse_decoder(h, json_object_get(root, "decoder"), file, "decoder", err, errlen))) goto fail;
    if ((rc = parse_added(h, json_object_get(root, "added_tokens"), file, err, errlen))) goto fail;
    fold_fingerprint(t, root);
    fold_unigram(t, score, n, unk_id, byte_fallback);
    t->pattern = TK_PAT_NONE;
    *out = h;
    return TK_OK;
fail:
    tk_hf_free(h);
    return rc;
}

/* ---- WordPiece, WordLevel (hf_models.def): setup ---------------------------- */

int tk_hf_setup_word(tk_tokenizer *t, json_t *root, const char *file, const tk_hfj *J, const tk_hf_model_ops *ops,
                     tk_hf **out, char *err, size_t errlen) {
    *out = NULL;
    tk_hf *h = calloc(1, sizeof *h);
    if (!h) return TK_ERR_NOMEM;
    h->sp = true; /* characters, not byte-level: decoder chain, no lossless claim */
    h->wm = ops;
    h->unk = TK_NO_RANK;
    for (int b = 0; b < 256; b++) h->byte_id[b] = TK_NO_RANK;
    int rc = voc_copy(h, J);
    if (!rc && (rc = tk_hfj_index(&h->voc))) rc = rc < 0 ? rc : TK_ERR_FORMAT;
    if (rc) goto fail;
    if ((rc = parse_normalizer(h, json_object_get(root, "normalizer"), file, "normalizer", err, errlen))) goto fail;
    if ((rc = parse_pretok(h, json_object_get(root, "pre_tokenizer"), file, "pre_tokenizer", err, errlen))) goto fail;
    if ((rc = parse_decoder(h, json_object_get(root, "decoder"), file, "decoder", err, errlen))) goto fail;
    if ((rc = parse_added(h, json_object_get(root, "added_tokens"), file, err, errlen))) goto fail;
    fold_fingerprint(t, root);
    if ((rc = ops->setup(t, h, json_object_get(root, "model"), file, err, errlen))) goto fail;
    t->pattern = TK_PAT_NONE;
    *out = h;
    return TK_OK;
fail:
    tk_hf_free(h);
    return rc;
}
