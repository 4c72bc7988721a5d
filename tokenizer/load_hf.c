/* load_hf.c - HF tokenizer.json (BPE): vocab, merges, added tokens and
 * ranks; the pipeline itself (normalizer, pre-tokenizer, decoder) is set up
 * by hf_config.c, and the hf engine's table (tk_engine_hf) is here: this
 * file calls the engine (hf*.c), never the reverse. */
#include "hf_internal.h"
#include "load_internal.h"

#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
/* ---- HF tokenizer.json ----------------------------------------------------- */

/* The word-lookup models (hf_models.def), in HF's untagged order. */
#define HF_MODEL(n) extern const tk_hf_model_ops tk_hf_model_##n;
#include "hf_models.def"
#undef HF_MODEL
static const tk_hf_model_ops *const k_word_models[] = {
#define HF_MODEL(n) &tk_hf_model_##n,
#include "hf_models.def"
#undef HF_MODEL
};

#define SPECIAL_ID (TK_NO_RANK - 1)
/* rank_of_id of a model.vocab entry outside the byte map (raw text such as
 * Command-R's): no merge of byte-level pieces can make it, so it is kept for
 * decoding alone, as a special token holding its text */
#define RAW_ID (TK_NO_RANK - 2)

/* Every character of s is one of the byte map's 256 (tk_cp_to_byte). */
static bool is_bytelevel(const char *s) {
    const uint8_t *p = (const uint8_t *)s;
    while (*p) {
        uint32_t cp;
        if (p[0] < 0x80) {
            cp = *p++;
        } else if ((p[0] & 0xE0) == 0xC0 && (p[1] & 0xC0) == 0x80) {
            cp = ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
            p += 2;
        } else {
            return false;
        }
        if (tk_cp_to_byte(cp) < 0) return false;
    }
    return true;
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
        if ((rc = tk_ld_json_id(val, path, "model.vocab entry", k, &id, err, errlen))) return rc;
        if (id > *max_id) *max_id = id;
    }
    if (added && !json_is_array(added)) {
        tk_set_err(err, errlen, "%s: added_tokens is %s, not an array", path, tk_ld_json_kind(added));
        return TK_ERR_FORMAT;
    }
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        json_t *c = json_object_get(a, "content");
        if (!json_is_string(c) || !json_string_length(c)) {
            tk_set_err(err, errlen, "%s: added_tokens[%zu]: \"content\" is %s, not a non-empty string", path, i,
                       json_is_string(c) ? "empty" : tk_ld_json_kind(c));
            return TK_ERR_FORMAT;
        }
        if ((rc = tk_ld_json_id(json_object_get(a, "id"), path, "added token", json_string_value(c), &id, err, errlen)))
            return rc;
        if (id > *max_id) *max_id = id;
    }
    if ((uint64_t)*max_id + 1 > (uint64_t)nv + na + TK_MAX_ID_GAP) {
        tk_set_err(err, errlen,
                   "%s: id %u leaves more than %u ids unused (%zu vocab entries, %zu added tokens): "
                   "the vocabulary would be far larger than its entries",
                   path, *max_id, TK_MAX_ID_GAP, nv, na);
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
    size_t n_single; /* single-byte tokens (byte-level: < 256 when some bytes have none) */
    size_t *raw;     /* entries (indices into J) outside the byte map */
    size_t n_raw;
    bool dead_merges; /* some merge has a part outside the byte map: it never applies */
    tk_tokvec v;
    tk_special *sp;
    size_t nsp;
    uint32_t *rank_of_id, *rank_to_id;
    uint32_t (*mids)[3]; /* merges as (id a, id b, id result), then as ranks */
    int32_t (*ment)[3];  /* merges as vocabulary entries (a, b, a+b; -1: none) */
    /* model "Unigram": vocab [[piece, score], ...] (J.vkey/vlen, J.vid = index) */
    bool uni;
    tk_hfj_uni U; /* its vocab by the fast reader (uni_fast) */
    bool uni_fast;
    double *score;   /* jansson's reading (not uni_fast) */
    uint32_t unk_id; /* TK_NO_RANK: none */
    bool uni_bfb;
    const tk_hf_model_ops *wm; /* a word-lookup model (hf_models.def); NULL: BPE or Unigram */
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
        /* a Unigram vocab ([[piece, score], ...]) has its own fast reader */
        rc = tk_hfj_parse_unigram(data, len, &L->U);
        if (rc == TK_OK && tk_json_loadb(L->path, L->U.rest, L->U.rest_len, len, &L->root, NULL, 0) == TK_OK) {
            L->uni_fast = true;
        } else {
            tk_hfj_uni_free(&L->U);
            if (rc < 0 && rc != TK_HFJ_FALLBACK) {
                free(data);
                return rc;
            }
            rc = tk_json_loadb(L->path, data, len, len, &L->root, L->err, L->errlen);
        }
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

/* Phase 2 of a "Unigram" model: vocab [[piece, score], ...] (ids are the
 * positions; a piece listed twice is allowed, HF keeps its last id), unk_id
 * (null or a position), byte_fallback. HF ignores other keys of the model. */
static int hf_model_uni(hf_load *L) {
    int rc;
    json_t *v = json_object_get(L->model, "vocab"), *unk = json_object_get(L->model, "unk_id");
    json_t *bfb = json_object_get(L->model, "byte_fallback");
    L->uni = true;
    L->added = json_object_get(L->root, "added_tokens");
    if (!json_is_array(v)) {
        tk_set_err(L->err, L->errlen, "%s: model.vocab: a Unigram model's vocab is %s, not an array of [piece, score]",
                   L->path, tk_ld_json_kind(v));
        return TK_ERR_FORMAT;
    }
    if (bfb && !json_is_null(bfb) && !json_is_boolean(bfb)) {
        tk_set_err(L->err, L->errlen, "%s: model.byte_fallback is not a boolean", L->path);
        return TK_ERR_FORMAT;
    }
    L->uni_bfb = json_is_true(bfb);
    L->nv = L->uni_fast ? L->U.n : json_array_size(v);
    if (!L->nv) { /* HF: EmptyVocabulary, or every character fails */
        tk_set_err(L->err, L->errlen, "%s: model.vocab: an empty Unigram vocabulary", L->path);
        return TK_ERR_FORMAT;
    }
    L->unk_id = TK_NO_RANK;
    if (unk && !json_is_null(unk)) {
        if (!json_is_integer(unk) || json_integer_value(unk) < 0 || (size_t)json_integer_value(unk) >= L->nv) {
            tk_set_err(L->err, L->errlen,
                       "%s: model.unk_id is not a position in model.vocab (HF: UnkIdNotInVocabulary)", L->path);
            return TK_ERR_FORMAT;
        }
        L->unk_id = (uint32_t)json_integer_value(unk);
    }
    L->max_id = 0;
    if ((rc = hf_check_ids(L->path, NULL, L->nv, L->added, &L->max_id, L->err, L->errlen))) return rc;
    if (L->nv - 1 > L->max_id) L->max_id = (uint32_t)(L->nv - 1);
    tk_hfj *J = &L->J;
    J->vkey = malloc(L->nv * sizeof *J->vkey);
    J->vlen = malloc(L->nv * sizeof *J->vlen);
    J->vid = malloc(L->nv * sizeof *J->vid);
    if (!J->vkey || !J->vlen || !J->vid) return TK_ERR_NOMEM;
    J->nv = L->nv;
    if (L->uni_fast) {
        for (size_t i = 0; i < L->nv; i++) {
            if (strlen(L->U.key[i]) != L->U.len[i]) {
                tk_set_err(L->err, L->errlen, "%s: model.vocab[%zu]: a piece with a NUL character is not supported",
                           L->path, i);
                return TK_ERR_UNSUPPORTED;
            }
            J->vkey[i] = L->U.key[i];
            J->vlen[i] = L->U.len[i];
            J->vid[i] = (uint32_t)i;
        }
        L->score = L->U.score;
        L->U.score = NULL; /* owned by L->score now */
        return TK_OK;
    }
    /* jansson's numbers are strtod's, HF's serde_json's: an ulp apart for
     * some scores; only files the fast reader does not take come here */
    if (!(L->score = malloc(L->nv * sizeof *L->score))) return TK_ERR_NOMEM;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        json_t *p = json_array_get(e, 0), *sc = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) || !json_is_number(sc)) {
            tk_set_err(L->err, L->errlen, "%s: model.vocab[%zu] is not [piece, score]", L->path, i);
            return TK_ERR_FORMAT;
        }
        if (strlen(json_string_value(p)) != json_string_length(p)) {
            tk_set_err(L->err, L->errlen, "%s: model.vocab[%zu]: a piece with a NUL character is not supported",
                       L->path, i);
            return TK_ERR_UNSUPPORTED;
        }
        double d = json_number_value(sc);
        if (!isfinite(d)) {
            tk_set_err(L->err, L->errlen, "%s: model.vocab[%zu]: the score is not a finite number", L->path, i);
            return TK_ERR_FORMAT;
        }
        J->vkey[i] = json_string_value(p);
        J->vlen[i] = (uint32_t)json_string_length(p);
        J->vid[i] = (uint32_t)i;
        L->score[i] = d;
    }
    return TK_OK;
}

/* Phase 2 of a word-lookup model (WordPiece, WordLevel): vocab {token: id}
 * and no merges; the model's own options are read by its setup. */
static int hf_model_word(hf_load *L) {
    int rc;
    L->vocab = json_object_get(L->model, "vocab");
    L->merges = NULL;
    L->added = json_object_get(L->root, "added_tokens");
    if (!json_is_object(L->vocab)) {
        tk_set_err(L->err, L->errlen, "%s: model.vocab: a %s model's vocab is %s, not an object {token: id}", L->path,
                   L->wm->type, tk_ld_json_kind(L->vocab));
        return TK_ERR_FORMAT;
    }
    L->nv = L->fast ? L->J.nv : json_object_size(L->vocab);
    L->n_merges = 0;
    L->max_id = L->fast ? L->J.max_id : 0;
    if ((rc = hf_check_ids(L->path, L->vocab, L->nv, L->added, &L->max_id, L->err, L->errlen))) return rc;
    if (!L->fast && (rc = hf_flatten(L))) return rc;
    L->J.nm = 0; /* HF's WordPiece / WordLevel ignore keys they do not read (merges too) */
    return TK_OK;
}

/* Phase 2: the model section: type, vocab and merges, ids of vocab and
 * added tokens, merge count. */
/* The model's kind. Files written by tokenizers before 0.9 (roberta-base's
 * and t5-small's on the hub, among many) have no model.type: HF reads such
 * a model untagged, trying BPE (a vocab object and merges), WordPiece,
 * WordLevel, then Unigram (a vocab list), so the kind follows from the
 * vocab's shape. The fast readers leave {} / [] in the vocab's place, so the
 * shape survives them. NULL: WordPiece or WordLevel (no merges). */
static const char *hf_model_type(json_t *model) {
    json_t *t = json_object_get(model, "type");
    if (t) return json_string_value(t);
    json_t *v = json_object_get(model, "vocab");
    if (json_is_object(v) && json_is_array(json_object_get(model, "merges"))) return "BPE";
    for (size_t k = 0; k < sizeof k_word_models / sizeof k_word_models[0]; k++)
        if (k_word_models[k]->untagged(model)) return k_word_models[k]->type;
    if (json_is_array(v)) return "Unigram";
    return NULL;
}

static int hf_model(hf_load *L) {
    int rc;
    L->model = json_object_get(L->root, "model");
    const char *type = hf_model_type(L->model);
    if (type && strcmp(type, "Unigram") == 0) return hf_model_uni(L);
    for (size_t k = 0; type && k < sizeof k_word_models / sizeof k_word_models[0]; k++)
        if (strcmp(type, k_word_models[k]->type) == 0) {
            L->wm = k_word_models[k];
            return hf_model_word(L);
        }
    if (!type || strcmp(type, "BPE") != 0) {
        if (json_is_object(L->model) && !json_object_get(L->model, "type"))
            tk_set_err(L->err, L->errlen,
                       "%s: model: a model without \"type\" whose fields are no model's HF reads (BPE: vocab and "
                       "merges; WordPiece: vocab, unk_token, continuing_subword_prefix, max_input_chars_per_word; "
                       "WordLevel: vocab, unk_token; Unigram: a vocab list)",
                       L->path);
        else
            tk_set_err(L->err, L->errlen,
                       "%s: model.type: model \"%s\" is not supported (only BPE, Unigram, WordPiece and WordLevel)",
                       L->path, type ? tk_ld_shown(type, L->sb) : "?");
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
    if (!L->rank_of_id || !L->rank_to_id || tk_ld_tv_init(&L->v, (uint32_t)L->nv)) return TK_ERR_NOMEM;
    uint32_t *rank_of_id = L->rank_of_id;
    for (uint32_t i = 0; i <= L->max_id; i++) rank_of_id[i] = TK_NO_RANK;
    /* two vocab entries with one id: one of them would silently vanish */
    for (size_t e = 0; e < L->nv; e++) {
        uint32_t id = L->J.vid[e];
        if (rank_of_id[id] == SPECIAL_ID) {
            tk_set_err(L->err, L->errlen, "%s: model.vocab entry \"%s\": id %u is also the id of another entry",
                       L->path, tk_ld_shown(L->J.vkey[e], L->sb), id);
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
    return tk_ld_tv_set(&L->v, L->next_rank++, buf, l);
}

/* Phase 4: the pipeline decision and the first ranks. Merge priority:
 * single bytes first (by id), then merge i -> rank 256 + i, then any other
 * vocab entry (unreachable by merges) last. SentencePiece-style (no
 * ByteLevel anywhere): ranks in file order, token bytes for decoding only;
 * hf_model.c encodes with the raw vocabulary. */
static int hf_first_ranks(hf_load *L) {
    int rc;
    L->sp_mode = !has_type(json_object_get(L->root, "pre_tokenizer"), "ByteLevel", 0) &&
                 !has_type(json_object_get(L->root, "decoder"), "ByteLevel", 0) &&
                 !has_type(json_object_get(L->root, "normalizer"), "ByteLevel", 0);
    if ((L->uni || L->wm) && !L->sp_mode) {
        tk_set_err(L->err, L->errlen, "%s: a %s model with a ByteLevel component is not supported", L->path,
                   L->wm ? L->wm->type : "Unigram");
        return TK_ERR_UNSUPPORTED;
    }
    bool bfb =
        L->sp_mode && !L->wm && json_is_true(json_object_get(L->model, "byte_fallback")); /* word models: no such key */
    for (size_t e = 0; e < L->nv; e++) {
        uint32_t id = L->J.vid[e];
        const char *k = L->J.vkey[e];
        if (L->rank_of_id[id] == SPECIAL_ID) continue;
        uint8_t buf[TK_MAX_TOKEN_BYTES];
        long l;
        if (L->sp_mode) {
            /* "" in a SentencePiece-style BPE vocabulary: HF loads it as an
             * id no word produces and that decodes to nothing (as the
             * byte-level case below) */
            if (!k[0] && !L->uni) {
                if ((rc = hf_give_rank(L, id, buf, 0))) return rc;
                continue;
            }
            if ((l = sp_display(k, bfb, buf, sizeof buf)) <= 0) {
                tk_set_err(L->err, L->errlen, "%s: model.vocab entry \"%s\" is %s", L->path, tk_ld_shown(k, L->sb),
                           l == 0 ? "empty" : "longer than 1024 bytes");
                return l == 0 ? TK_ERR_FORMAT : TK_ERR_LIMIT;
            }
        } else if ((l = tk_ld_bytelevel_decode(k, buf, sizeof buf)) <= 0) { /* pass 1: single bytes */
            /* "" (Whisper's tokenizer.json: id 50256): HF keeps it as an id
             * that no word can produce and that decodes to nothing, as
             * tiktoken keeps Whisper's "= 50256"; ranked in pass 3 */
            if (l == 0) continue;
            if (!is_bytelevel(k)) {
                if (!L->raw && !(L->raw = malloc(L->nv * sizeof *L->raw))) return TK_ERR_NOMEM;
                L->raw[L->n_raw++] = e;
                L->rank_of_id[id] = RAW_ID;
                continue;
            }
            tk_set_err(L->err, L->errlen, "%s: model.vocab entry \"%s\" is longer than 1024 bytes", L->path,
                       tk_ld_shown(k, L->sb));
            return TK_ERR_LIMIT;
        }
        if (!L->sp_mode && l == 1) L->n_single++;
        if ((L->sp_mode || l == 1) && (rc = hf_give_rank(L, id, buf, (size_t)l))) return rc;
    }
    if (L->sp_mode) L->v.n = L->next_rank;
    return TK_OK;
}

/* SentencePiece-style merge i: ids only (hf_config.c checks and tables them); with
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
                       L->path, i, tk_ld_shown(J->mb[i], L->sb));
            return TK_ERR_FORMAT;
        }
        memcpy(ab2 + la2, J->mb[i] + sp_plen, lb2 - sp_plen + 1);
        er = tk_hfj_lookup(J, ab2, la2 + lb2 - sp_plen);
    }
    if (ea < 0 || eb < 0 || er < 0) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: %s \"%s\" is not in model.vocab", L->path, i,
                   er >= 0 || ea < 0 || eb < 0 ? "part" : "result",
                   tk_ld_shown(ea < 0   ? J->ma[i]
                               : eb < 0 ? J->mb[i]
                                        : ab2,
                               L->sb));
        return TK_ERR_FORMAT;
    }
    L->mids[i][0] = J->vid[ea];
    L->mids[i][1] = J->vid[eb];
    L->mids[i][2] = J->vid[er];
    return TK_OK;
}

/* ByteLevel merge i: its parts and result by id; the result's rank unless
 * an earlier merge produced it (the first merge producing it wins). With a
 * continuing_subword_prefix of plen bytes HF's result is a + b[plen:]. A
 * merge with a part outside the byte map can never apply: kept as a gap. */
static int hf_merge_bl(hf_load *L, size_t i, size_t plen) {
    tk_hfj *J = &L->J;
    char ab[8 * TK_MAX_TOKEN_BYTES + 4];
    const char *a = J->ma[i], *b = J->mb[i];
    size_t la = strlen(a), lb = strlen(b);
    int ea = L->ment[i][0], eb = L->ment[i][1], er = L->ment[i][2];
    if (ea < 0 || eb < 0) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: part \"%s\" is not in model.vocab", L->path, i,
                   tk_ld_shown(ea < 0 ? a : b, L->sb));
        return TK_ERR_FORMAT;
    }
    if (L->rank_of_id[J->vid[ea]] == RAW_ID || L->rank_of_id[J->vid[eb]] == RAW_ID) {
        L->mids[i][0] = L->mids[i][1] = L->mids[i][2] = TK_NO_RANK;
        L->dead_merges = true;
        return TK_OK;
    }
    memcpy(ab, a, la); /* each part < 4 x 1024 + 2 bytes */
    memcpy(ab + la, b, lb + 1);
    if (plen) {
        if (lb < plen) {
            tk_set_err(L->err, L->errlen, "%s: merge %zu: part \"%s\" is shorter than continuing_subword_prefix",
                       L->path, i, tk_ld_shown(b, L->sb));
            return TK_ERR_FORMAT;
        }
        memcpy(ab + la, b + plen, lb - plen + 1);
        er = tk_hfj_lookup(J, ab, la + lb - plen);
    }
    if (er < 0) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: result \"%s\" is not in model.vocab", L->path, i,
                   tk_ld_shown(ab, L->sb));
        return TK_ERR_FORMAT;
    }
    uint32_t id = J->vid[er];
    L->mids[i][0] = J->vid[ea];
    L->mids[i][1] = J->vid[eb];
    L->mids[i][2] = id;
    if (L->rank_of_id[id] == SPECIAL_ID) {
        tk_set_err(L->err, L->errlen, "%s: merge %zu: result \"%s\" is an added token", L->path, i,
                   tk_ld_shown(ab, L->sb));
        return TK_ERR_FORMAT;
    }
    if (L->rank_of_id[id] != TK_NO_RANK) return TK_OK;
    uint8_t buf[TK_MAX_TOKEN_BYTES];
    long l = tk_ld_bytelevel_decode(ab, buf, sizeof buf); /* a vocab entry: decoded in pass 1 */
    if (l <= 0) return TK_ERR_UNSUPPORTED;
    return hf_give_rank(L, id, buf, (size_t)l);
}

/* Phase 5 (pass 2): the merges (parts and results looked up in batches:
 * hf_json.c). */
static int hf_merges(hf_load *L) {
    int rc;
    json_t *pfx = json_object_get(L->model, "continuing_subword_prefix");
    size_t plen = json_is_string(pfx) ? json_string_length(pfx) : 0;
    if (!(L->ment = malloc((L->n_merges + 1) * sizeof *L->ment)) || tk_hfj_resolve_merges(&L->J, L->ment))
        return TK_ERR_NOMEM;
    for (size_t i = 0; i < L->n_merges; i++)
        if ((rc = L->sp_mode ? hf_merge_sp(L, i, plen) : hf_merge_bl(L, i, plen))) return rc;
    return TK_OK;
}

/* Phase 6 (pass 3): ByteLevel vocab entries no merge reaches, ranked last. */
static int hf_rest_ranks(hf_load *L) {
    int rc;
    for (size_t e = 0; e < L->nv && !L->sp_mode; e++) {
        uint32_t id = L->J.vid[e];
        if (L->rank_of_id[id] != TK_NO_RANK) continue;
        uint8_t buf[TK_MAX_TOKEN_BYTES];
        long l = tk_ld_bytelevel_decode(L->J.vkey[e], buf, sizeof buf); /* decoded in pass 1; 0: "" */
        if (l < 0) return TK_ERR_UNSUPPORTED;
        if ((rc = hf_give_rank(L, id, buf, (size_t)l))) return rc;
    }
    L->v.n = L->next_rank;
    return TK_OK;
}

/* Phase 7: added tokens -> specials (those not already mergeable tokens),
 * then the vocab entries outside the byte map, whose text is what HF's
 * ByteLevel decoder gives for them (unless an added token of another id
 * has that text: that id then has no text of its own). */
static int hf_specials(hf_load *L) {
    size_t i;
    json_t *a;
    L->sp = calloc(json_array_size(L->added) + L->n_raw + 1, sizeof *L->sp);
    if (!L->sp) return TK_ERR_NOMEM;
    json_array_foreach(L->added, i, a) {
        const char *c = json_string_value(json_object_get(a, "content"));
        uint32_t id = (uint32_t)json_integer_value(json_object_get(a, "id")); /* checked */
        int e = L->n_raw ? tk_hfj_lookup(&L->J, c, strlen(c)) : -1;
        if (e >= 0 && L->rank_of_id[L->J.vid[e]] == RAW_ID && L->J.vid[e] != id)
            L->rank_of_id[L->J.vid[e]] = TK_NO_RANK;
        if (L->rank_of_id[id] != SPECIAL_ID) continue;
        if (!(L->sp[L->nsp].text = strdup(c))) return TK_ERR_NOMEM;
        L->sp[L->nsp].id = id;
        L->nsp++;
    }
    for (size_t k = 0; k < L->n_raw; k++) {
        uint32_t id = L->J.vid[L->raw[k]];
        if (L->rank_of_id[id] != RAW_ID) continue;
        if (!(L->sp[L->nsp].text = strdup(L->J.vkey[L->raw[k]]))) return TK_ERR_NOMEM;
        L->sp[L->nsp].id = id;
        L->nsp++;
    }
    return TK_OK;
}

/* Phase 8: ByteLevel merge parts and results as ranks (parts that are added
 * tokens: refused). */
static int hf_merge_ranks(hf_load *L) {
    for (size_t i = 0; i < L->n_merges && !L->sp_mode; i++)
        for (int k = 0; k < 3 && L->mids[i][0] != TK_NO_RANK; k++) {
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
 * decoder: hf_config.c) and post-processor. */
static int hf_build(hf_load *L, tk_pattern pat, tk_tokenizer **out) {
    bool identity = true;
    int rc;
    for (uint32_t r = 0; r < L->v.n && identity; r++) identity = L->rank_to_id[r] == r;
    if (identity) {
        free(L->rank_to_id);
        L->rank_to_id = NULL;
    }
    tk_tokenizer *t = NULL;
    unsigned how = L->sp_mode ? TK_LD_DECODE_ONLY : L->n_single < 256 ? TK_LD_PARTIAL_BYTES : 0;
    rc = tk_ld_tv_build_x(&L->v, TK_PAT_NONE, L->sp, L->nsp, L->rank_to_id, NULL, L->path, L->path, how, &t, L->err,
                          L->errlen);
    L->rank_to_id = NULL; /* owned by tk_ld_tv_build now */
    if (rc) return rc;
    const uint32_t(*mids)[3] = (const uint32_t(*)[3])L->mids;
    tk_hf *h = NULL; /* NULL: the rank engine gives HF's ids */
    if (L->sp_mode && pat != TK_PAT_NONE) {
        tk_set_err(L->err, L->errlen, "%s: --pattern cannot replace this tokenizer's own pre-tokenizer: leave it out",
                   L->path);
        rc = TK_ERR_PATTERN;
    } else if (L->wm) {
        rc = tk_hf_setup_word(t, L->root, L->path, &L->J, L->wm, &h, L->err, L->errlen);
    } else if (L->uni) {
        rc = tk_hf_setup_uni(t, L->root, L->path, &L->J, L->score, L->unk_id, L->uni_bfb, &h, L->err, L->errlen);
    } else if (L->sp_mode) {
        rc = tk_hf_setup_sp(t, L->root, L->path, mids, L->n_merges, &L->J, &h, L->err, L->errlen);
    } else {
        rc = tk_hf_setup(t, L->root, L->path, mids, L->n_merges, &L->J, L->n_raw || L->dead_merges, pat, &h, L->err,
                         L->errlen);
    }
    if (rc) {
        tk_free(t);
        return rc;
    }
    if (h) tk_engine_attach(t, &tk_engine_hf, h);
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
    free(L->raw);
    free(L->score);
    tk_hfj_uni_free(&L->U);
    tk_hfj_free(&L->J);
    tk_ld_free_specials(L->sp, L->nsp);
    tk_ld_tv_free(&L->v);
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

/* The hf engine (tk_engine.h): its ops are the pipeline's (hf.c, hf_*.c);
 * the table lives with the loader so that the dependency is one-way: the
 * loader calls the engine, the engine never names the loader. */
const tk_engine tk_engine_hf = {
    .name = "hf",
    .sniff = tk_hf_sniff,
    .load = tk_load_hf_json,
    .encode = tk_hf_encode_ordinary,
    .encode_special = tk_hf_encode,
    .decode = tk_hf_decode_op,
    .describe = tk_hf_describe,
    .lossless = tk_hf_lossless,
    .savable = tk_hf_savable,
    .image = false,
    .default_pp = TK_PP_NONE,
    .free = tk_hf_free_state,
};
