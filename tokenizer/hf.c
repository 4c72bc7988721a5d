/* hf.c - the HF tokenizer.json engine's ops (tk_engine.h; the table,
 * tk_engine_hf, is in load_hf.c): describe, sniff, encode, decode, savable,
 * free. The pipeline is in hf_config.c (parsed at load), hf_normalize.c,
 * hf_encode.c (added tokens, pre-tokenizers, the model dispatch),
 * hf_model.c (BPE with HF's merge semantics) and hf_decode.c, sharing
 * hf_internal.h.
 *
 * A tokenizer.json whose pipeline is exactly what the tiktoken engine does
 * (no normalizer; Split with the gpt2/cl100k/o200k regex + ByteLevel, or
 * ByteLevel with its own regex; merges proven equivalent to merge-by-rank;
 * no non-special added tokens) is encoded by the fast path and gets no
 * tk_hf at all. Every other supported pipeline is run here, component by
 * component, with HF's semantics (docs/tokenizer.md has the table). Anything
 * else is refused at load, naming the JSON path and the component.
 */
#include "hf_internal.h"

void tk_hf_describe(const tk_tokenizer *t, char *buf, size_t len) {
    static const char *const nm[] = {"NFC",
                                     "NFD",
                                     "NFKC",
                                     "NFKD",
                                     "Lowercase",
                                     "Strip",
                                     "Replace",
                                     "Prepend",
                                     "Precompiled",
                                     "StripAccents",
                                     "Bert(clean_text)",
                                     "Bert(handle_chinese_chars)",
                                     "Bert(strip nonspacing marks)"};
    static const char *const pt[] = {"Split",           "ByteLevel", "Digits",          "Punctuation",
                                     "WhitespaceSplit", "Metaspace", "BertPreTokenizer"};
    static const char *const bh[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const tk_hf *h = HF_OF(t);
    size_t o = 0;
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        if (o < len) o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__);                                             \
    } while (0)
    PUT("tokenizer.json:");
    for (size_t k = 0; k < h->n_nm; k++) PUT(" %s", nm[h->nm[k].kind]);
    PUT("%s |", h->n_nm ? "" : " (no normalizer)");
    for (size_t k = 0; k < h->n_pt; k++) {
        const pt_step *st = &h->pt[k];
        if (st->kind == PT_SPLIT)
            PUT(" Split(%s, %s%s)",
                st->cl100k_hf == 3        ? "deepseek"
                : st->cl100k_hf == 2      ? "qwen"
                : st->fast != TK_PAT_NONE ? tk_pattern_name(st->fast)
                                          : "regex",
                bh[st->beh], st->invert ? ", invert" : "");
        else PUT(" %s", pt[st->kind]);
    }
    if (!h->n_pt) PUT(" (no pre-tokenizer)");
    if (h->wm) {
        PUT(" | ");
        if (o < len) h->wm->describe(h, buf + o, len - o);
        return;
    }
    if (h->uni) {
        PUT(" | Unigram (Viterbi over %u pieces, unk score %g%s%s)", tk_hf_uni_size(h->uni),
            tk_hf_uni_unk_score(h->uni), h->unk == TK_NO_RANK ? ", no unk" : "",
            h->bl_byte_fallback ? ", byte fallback" : "");
        return;
    }
    PUT(" | BPE (%s%s%s", h->sp ? "characters, " : "", h->fast_bpe ? "merge by rank" : "HF merge loop",
        h->sp && h->byte_id[0] != TK_NO_RANK ? ", byte fallback" : "");
    if (!h->sp) {
        int odd = 0;
        for (int b = 0; b < 256; b++) odd += h->bl_odd[b >> 3] >> (b & 7) & 1;
        if (h->suffix_len) PUT(", end_of_word_suffix");
        if (h->prefix_len) PUT(", continuing_subword_prefix");
        if (odd)
            PUT(", %d bytes without a token: %s", odd,
                h->bl_byte_fallback     ? "byte fallback"
                : h->unk_sym != BL_NONE ? (h->fuse_unk ? "fused unk" : "unk")
                                        : "dropped");
    }
    PUT(")");
#undef PUT
}

/* ---- the engine (tk_engine.h) ---------------------------------------------- */

bool tk_hf_sniff(const char *path, const uint8_t *head, size_t n) {
    (void)head;
    (void)n;
    size_t a = strlen(path);
    return a >= 5 && strcmp(path + a - 5, ".json") == 0;
}

int tk_hf_encode_ordinary(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out) {
    return tk_hf_encode(t, s, n, NULL, 0, false, out);
}

/* Only a SentencePiece-style pipeline has a decoder chain of its own; a
 * byte-level one decodes as the token bytes (the generic path). */
int tk_hf_decode_op(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, bool stream, tk_bytes *out) {
    (void)stream;
    return HF_OF(t)->sp ? tk_hf_decode(t, ids, n, first, out) : 1;
}

/* tiktoken format: only a pipeline that is one of the built-in patterns
 * over merge-by-rank tokens; neither format carries the rest of the
 * pipeline. */
int tk_hf_savable(const tk_tokenizer *t, int fmt) {
    if (fmt == 0 && t->pattern != TK_PAT_NONE && !t->decode_only && HF_OF(t)->bl_plain) return TK_OK;
    return TK_ERR_UNSUPPORTED;
}

void tk_hf_free_state(void *state) { tk_hf_free(state); }
