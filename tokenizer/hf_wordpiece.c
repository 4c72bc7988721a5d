/* hf_wordpiece.c - tokenizer.json's WordPiece and WordLevel models (BERT,
 * DistilBERT, MiniLM, BGE, E5, ELECTRA; WordLevel files), as HF tokenizers
 * 0.23.3 runs them on one pre-tokenized word. Both look whole strings up
 * in the vocabulary (h->voc: the hash of hf_json.c), so they are one file
 * of model ops (hf_internal.h tk_hf_model_ops) registered in hf_models.def;
 * the loader (load_hf.c) and hf_config.c set up the vocabulary, normalizer,
 * pre-tokenizer, decoder and added tokens as for any character-level model.
 *
 * WordPiece: a word of more than max_input_chars_per_word characters is one
 * unk; otherwise greedy longest-match-first from the left, every piece but
 * the first looked up with continuing_subword_prefix before it; a position
 * where nothing matches makes the whole word one unk. HF tries every
 * candidate from the longest down, a hash look-up each; here one walk down a
 * double array of the vocabulary (key_trie.c, as the Unigram engines')
 * from the root, or from the node the prefix leads to, finds the longest
 * entry at a position: a word costs its bytes, at most the longest entry's
 * per piece (the hash look-ups were 17% of bert-base-uncased's encode, perf).
 * WordLevel: the word itself or unk (one hash look-up). Without unk_token in
 * the vocabulary HF fails the text (MissingUnkToken) where it needs unk:
 * TK_ERR_DOC_UNK. */
#include "hf_internal.h"

#include <nettle/sha2.h>

#define WP_MAX_CHARS_LIMIT (1ull << 40) /* max_input_chars_per_word accepted (any larger is "no limit") */

typedef struct {
    bool wordpiece;
    uint8_t prefix[HF_AFFIX_MAX];
    size_t plen;
    uint64_t max_chars;
    uint32_t unk; /* TK_NO_RANK: unk_token is not in the vocabulary */
    char unk_text[64];
    /* WordPiece: the entries' double array; TK_DA_TERMINAL where an entry ends, term[slot] its id */
    tk_da_slot *slot;
    size_t size;
    uint32_t *term;
    tk_da_walk after_prefix; /* the walk after the prefix's bytes */
    bool prefix_path;        /* some entry starts with the prefix (else no piece but the first can match) */
} wp_state;

/* HF's untagged read (files of tokenizers before 0.9): a vocab object and no
 * merges (BPE needs them as an array) is WordPiece when it has WordPiece's
 * four fields, else WordLevel (which needs vocab and unk_token). */
static bool wp_untagged(json_t *model) {
    return json_is_object(json_object_get(model, "vocab")) && !json_is_array(json_object_get(model, "merges")) &&
           json_object_get(model, "unk_token") && json_object_get(model, "continuing_subword_prefix") &&
           json_object_get(model, "max_input_chars_per_word");
}

static bool wl_untagged(json_t *model) {
    return json_is_object(json_object_get(model, "vocab")) && !json_is_array(json_object_get(model, "merges")) &&
           json_object_get(model, "unk_token");
}

/* The fields both models share: vocab (already read), unk_token. HF ignores
 * keys it does not know; so do we (none changes its ids). */
static int common_setup(tk_tokenizer *t, tk_hf *h, json_t *model, bool wordpiece, const char *file, char *err,
                        size_t errlen) {
    wp_state *w = calloc(1, sizeof *w);
    if (!w) return TK_ERR_NOMEM;
    h->wm_state = w;
    w->wordpiece = wordpiece;
    const char *kind = wordpiece ? "WordPiece" : "WordLevel";
    json_t *unk = json_object_get(model, "unk_token");
    if (!json_is_string(unk) || strlen(json_string_value(unk)) != json_string_length(unk)) {
        tk_set_err(err, errlen, "%s: model.unk_token: a %s model needs unk_token, a string (HF: missing field)", file,
                   kind);
        return TK_ERR_FORMAT;
    }
    if (json_string_length(unk) >= sizeof w->unk_text) {
        tk_set_err(err, errlen, "%s: model.unk_token is longer than %zu bytes", file, sizeof w->unk_text - 1);
        return TK_ERR_LIMIT;
    }
    memcpy(w->unk_text, json_string_value(unk), json_string_length(unk) + 1);
    int e = tk_hfj_lookup(&h->voc, w->unk_text, strlen(w->unk_text));
    w->unk = e >= 0 ? h->voc.vid[e] : TK_NO_RANK;
    h->unk = w->unk;
    /* the ids depend on these beyond the vocabulary and fold_fingerprint's keys */
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, 32, t->fingerprint);
    char tail[160];
    int tl = snprintf(tail, sizeof tail, "tkhf%s|%d", kind, 1);
    sha256_update(&c, (size_t)tl, (const uint8_t *)tail);
    sha256_digest(&c, 32, t->fingerprint);
    return TK_OK;
}

static const uint8_t *voc_bytes(const void *owner, uint32_t e) {
    return (const uint8_t *)((const tk_hfj *)owner)->vkey[e];
}

/* The double array of the vocabulary's non-empty entries (distinct: JSON
 * object keys) and the walk past the prefix. */
static int trie_build(wp_state *w, const tk_hfj *v) {
    uint32_t n = (uint32_t)v->nv, m = 0;
    tk_key_ent *ent = malloc(((size_t)n + 1) * sizeof *ent);
    uint32_t *at = malloc(((size_t)n + 1) * sizeof *at);
    int rc = TK_ERR_NOMEM;
    if (!ent || !at) goto done;
    for (uint32_t e = 0; e < n; e++)
        if (v->vlen[e]) ent[m++] = (tk_key_ent){tk_key_head((const uint8_t *)v->vkey[e], v->vlen[e]), e, v->vlen[e]};
    if ((rc = tk_key_sort(ent, m, v, voc_bytes))) goto done;
    if ((rc = tk_da_build(ent, m, v, voc_bytes, &w->slot, &w->size, at))) goto done;
    if (!(w->term = malloc((w->size + 1) * sizeof *w->term))) {
        rc = TK_ERR_NOMEM;
        goto done;
    }
    for (uint32_t i = 0; i < m; i++) {
        w->slot[at[i]].base |= TK_DA_TERMINAL;
        w->term[at[i]] = v->vid[ent[i].id];
    }
    w->after_prefix = tk_da_walk_root(w->slot);
    w->prefix_path = true;
    for (size_t k = 0; k < w->plen && w->prefix_path; k++)
        w->prefix_path = tk_da_walk_step(w->slot, &w->after_prefix, w->prefix[k]) >= 0;
done:
    free(ent);
    free(at);
    return rc;
}

static int wp_setup(tk_tokenizer *t, tk_hf *h, json_t *model, const char *file, char *err, size_t errlen) {
    int rc = common_setup(t, h, model, true, file, err, errlen);
    if (rc) return rc;
    wp_state *w = h->wm_state;
    json_t *pfx = json_object_get(model, "continuing_subword_prefix");
    json_t *mx = json_object_get(model, "max_input_chars_per_word");
    if (!json_is_string(pfx) || json_string_length(pfx) > HF_AFFIX_MAX ||
        strlen(json_string_value(pfx)) != json_string_length(pfx)) {
        tk_set_err(err, errlen, "%s: model.continuing_subword_prefix must be a string of at most %d bytes", file,
                   HF_AFFIX_MAX);
        return TK_ERR_FORMAT;
    }
    w->plen = json_string_length(pfx);
    memcpy(w->prefix, json_string_value(pfx), w->plen);
    if (!json_is_integer(mx) || json_integer_value(mx) < 0) {
        tk_set_err(err, errlen, "%s: model.max_input_chars_per_word must be an integer >= 0 (HF: a usize)", file);
        return TK_ERR_FORMAT;
    }
    w->max_chars = (uint64_t)json_integer_value(mx);
    if (w->max_chars > WP_MAX_CHARS_LIMIT) w->max_chars = WP_MAX_CHARS_LIMIT; /* no word is that long */
    if ((rc = trie_build(w, &h->voc))) {
        tk_set_err(err, errlen, "%s: model.vocab: WordPiece: %s while building its trie", file,
                   rc == TK_ERR_LIMIT ? "too many trie nodes" : "out of memory");
        return rc;
    }
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, 32, t->fingerprint);
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)(w->max_chars >> (8 * k));
    sha256_update(&c, 8, le);
    sha256_digest(&c, 32, t->fingerprint);
    return TK_OK;
}

static int wl_setup(tk_tokenizer *t, tk_hf *h, json_t *model, const char *file, char *err, size_t errlen) {
    return common_setup(t, h, model, false, file, err, errlen);
}

static int put_id(tk_ids *out, uint32_t id) {
    if (tk_ids_reserve(out, 1)) return TK_ERR_NOMEM;
    out->ids[out->len++] = id;
    return TK_OK;
}

static inline bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

static int wp_word(const tk_hf *h, const uint8_t *p, size_t n, tk_ids *out) {
    const wp_state *w = h->wm_state;
    size_t from = out->len;
    uint64_t chars = 0;
    for (size_t i = 0; i < n; i++) chars += !is_cont(p[i]);
    if (chars > w->max_chars) goto unk;
    for (size_t start = 0; start < n;) {
        if (start && !w->prefix_path) goto unk;
        tk_da_walk k = start ? w->after_prefix : tk_da_walk_root(w->slot);
        size_t end = start; /* the longest entry found: prefix + p[start, end) */
        uint32_t id = TK_NO_RANK;
        for (size_t j = start; j < n; j++) {
            int r = tk_da_walk_step(w->slot, &k, p[j]);
            if (r < 0) break;
            if (r && (j + 1 == n || !is_cont(p[j + 1]))) end = j + 1, id = w->term[k.node]; /* at a character end */
        }
        if (end == start) goto unk;
        int rc = put_id(out, id);
        if (rc) return rc;
        start = end;
    }
    return TK_OK;
unk:
    out->len = from;
    if (w->unk == TK_NO_RANK) return TK_ERR_DOC_UNK; /* HF: MissingUnkToken */
    return put_id(out, w->unk);
}

static int wl_word(const tk_hf *h, const uint8_t *p, size_t n, tk_ids *out) {
    const wp_state *w = h->wm_state;
    int e = tk_hfj_lookup(&h->voc, (const char *)p, n);
    if (e >= 0) return put_id(out, h->voc.vid[e]);
    if (w->unk == TK_NO_RANK) return TK_ERR_DOC_UNK; /* HF: MissingUnkToken */
    return put_id(out, w->unk);
}

static void describe(const tk_hf *h, char *buf, size_t len) {
    const wp_state *w = h->wm_state;
    char shown[80];
    size_t o = 0;
    for (size_t i = 0; w->unk_text[i] && o + 5 < sizeof shown; i++) {
        uint8_t c = (uint8_t)w->unk_text[i];
        if (c < 0x20 || c == 0x7F) o += (size_t)snprintf(shown + o, sizeof shown - o, "\\x%02x", c);
        else shown[o++] = (char)c;
    }
    shown[o] = 0;
    if (w->wordpiece)
        snprintf(buf, len, "WordPiece (%zu entries, prefix \"%.*s\", at most %llu characters a word, unk \"%s\"%s)",
                 h->voc.nv, (int)w->plen, (const char *)w->prefix, (unsigned long long)w->max_chars, shown,
                 w->unk == TK_NO_RANK ? " not in the vocabulary" : "");
    else
        snprintf(buf, len, "WordLevel (%zu entries, unk \"%s\"%s)", h->voc.nv, shown,
                 w->unk == TK_NO_RANK ? " not in the vocabulary" : "");
}

static void wp_free(void *state) {
    wp_state *w = state;
    if (!w) return;
    free(w->slot);
    free(w->term);
    free(w);
}

const tk_hf_model_ops tk_hf_model_wordpiece = {
    .type = "WordPiece",
    .untagged = wp_untagged,
    .setup = wp_setup,
    .word = wp_word,
    .describe = describe,
    .free = wp_free,
};

const tk_hf_model_ops tk_hf_model_wordlevel = {
    .type = "WordLevel",
    .untagged = wl_untagged,
    .setup = wl_setup,
    .word = wl_word,
    .describe = describe,
    .free = wp_free,
};
