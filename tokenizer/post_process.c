/* post_process.c - a tokenizer.json's post_processor: parsed at load
 * (tk_hf_post_processor, which load_hf.c calls) and the ids it puts around
 * one sequence (tk_post_process_ids, HF's add_special_tokens=True); and
 * token look-up by text (tk_token_id), which its templates need. Below the
 * engine dispatcher: uses only the token tables (tokenizer.c). */
#include "tk_internal.h"

#include <jansson.h>
#include <string.h>

int tk_token_id(const tk_tokenizer *t, const char *text, uint32_t *id) {
    if (!t || !text || !*text) return TK_ERR_ARG;
    if (tk_special_id(t, text, id) == TK_OK) return TK_OK;
    size_t n = strlen(text);
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        const uint8_t *b;
        size_t l;
        if (tk_token_bytes(t, i, &b, &l) == TK_OK && l == n && memcmp(b, text, n) == 0) {
            if (id) *id = i;
            return TK_OK;
        }
    }
    return TK_ERR_NOT_FOUND;
}

/* The id of a template's SpecialToken: the post_processor's special_tokens
 * entry (exactly one id), else the token of that text. */
static int pp_special(const tk_tokenizer *t, json_t *specials, const char *name, uint32_t *id) {
    json_t *e = json_object_get(specials, name);
    if (e) {
        json_t *ids = json_object_get(e, "ids");
        if (!json_is_array(ids) || json_array_size(ids) != 1) return -1;
        json_t *v = json_array_get(ids, 0);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (json_int_t)t->vocab_size)
            return -1;
        *id = (uint32_t)json_integer_value(v);
        return 0;
    }
    return tk_token_id(t, name, id) == TK_OK ? 0 : -1;
}

typedef struct {
    uint32_t bos, eos;
    const char *why;
} pp_state;

static void pp_set(pp_state *s, uint32_t *side, uint32_t id) {
    if (*side != TK_NO_RANK && *side != id) s->why = "the post_processor puts several tokens on one side of a text";
    *side = id;
}

static void pp_one(const tk_tokenizer *t, json_t *p, pp_state *s, int depth) {
    if (!p || json_is_null(p) || s->why) return;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type) {
        s->why = "post_processor without a type";
    } else if (!strcmp(type, "ByteLevel")) {
        /* offsets only */
    } else if (!strcmp(type, "Sequence")) {
        json_t *ps = json_object_get(p, "processors");
        if (!json_is_array(ps) || depth > 8) {
            s->why = "post_processor Sequence without processors";
            return;
        }
        size_t i;
        json_t *q;
        json_array_foreach(ps, i, q) pp_one(t, q, s, depth + 1);
    } else if (!strcmp(type, "TemplateProcessing")) {
        json_t *single = json_object_get(p, "single"), *specials = json_object_get(p, "special_tokens");
        if (!json_is_array(single)) {
            s->why = "TemplateProcessing without a single template";
            return;
        }
        int seen_a = 0;
        size_t i;
        json_t *piece;
        json_array_foreach(single, i, piece) {
            json_t *sp = json_object_get(piece, "SpecialToken"), *sq = json_object_get(piece, "Sequence");
            if (sq) {
                if (seen_a) s->why = "a single template with two sequences";
                seen_a = 1;
            } else if (sp) {
                const char *name = json_string_value(json_object_get(sp, "id"));
                uint32_t id;
                if (!name || pp_special(t, specials, name, &id)) {
                    s->why = "a template token that is not one token of the vocabulary";
                    return;
                }
                pp_set(s, seen_a ? &s->eos : &s->bos, id);
            } else {
                s->why = "a template piece that is neither SpecialToken nor Sequence";
            }
            if (s->why) return;
        }
        if (!seen_a) s->why = "a single template without the sequence $A";
    } else if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) {
        /* single: cls $A sep */
        json_t *cls = json_object_get(p, "cls"), *sep = json_object_get(p, "sep");
        json_t *ci = json_array_get(cls, 1), *si = json_array_get(sep, 1);
        if (!json_is_integer(ci) || !json_is_integer(si) || json_integer_value(ci) < 0 || json_integer_value(si) < 0 ||
            json_integer_value(ci) >= (json_int_t)t->vocab_size ||
            json_integer_value(si) >= (json_int_t)t->vocab_size) {
            s->why = "cls / sep are not [text, id] pairs of this vocabulary";
            return;
        }
        pp_set(s, &s->bos, (uint32_t)json_integer_value(ci));
        pp_set(s, &s->eos, (uint32_t)json_integer_value(si));
    } else {
        s->why = "an unknown post_processor type";
    }
}

void tk_hf_post_processor(tk_tokenizer *t, json_t *root) {
    json_t *p = json_object_get(root, "post_processor");
    t->pp_bos = t->pp_eos = TK_NO_RANK;
    t->pp_why = NULL;
    if (!p || json_is_null(p)) {
        t->pp = TK_PP_ABSENT;
        return;
    }
    pp_state s = {TK_NO_RANK, TK_NO_RANK, NULL};
    pp_one(t, p, &s, 0);
    if (s.why) {
        t->pp = TK_PP_UNUSABLE;
        t->pp_why = s.why;
        return;
    }
    t->pp = TK_PP_TEMPLATE;
    t->pp_bos = s.bos;
    t->pp_eos = s.eos;
}

int tk_post_process_ids(const tk_tokenizer *t, int64_t *bos, int64_t *eos, const char **why) {
    if (!t || !bos || !eos) return TK_ERR_ARG;
    *bos = *eos = -1;
    if (why) *why = NULL;
    if (t->pp == TK_PP_UNUSABLE) {
        if (why) *why = t->pp_why;
        return TK_ERR_UNSUPPORTED;
    }
    if (t->pp == TK_PP_TEMPLATE) {
        if (t->pp_bos != TK_NO_RANK) *bos = t->pp_bos;
        if (t->pp_eos != TK_NO_RANK) *eos = t->pp_eos;
    }
    return TK_OK; /* no post_processor, ByteLevel's, or not a tokenizer.json: nothing added */
}
