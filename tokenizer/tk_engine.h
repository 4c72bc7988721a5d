/* tk_engine.h - tokenizer engines behind one ops table (internal).
 *
 * An engine is a kind of tokenizer file and the code that runs it:
 *   rank      tiktoken-style BPE: .tiktoken rank files, GPT-2 encoder.json +
 *             vocab.bpe (load_tiktoken.c, load_gpt2.c; encode.c / bpe.c /
 *             decode.c run it: its ops are the generic paths)
 *   hf        HF tokenizer.json BPE (load_hf.c: loader and table; hf.c: ops;
 *             hf_config.c hf_normalize.c hf_encode.c hf_model.c hf_decode.c,
 *             sharing hf_internal.h; hf_regex.c, hf_json.c)
 *   spm       SentencePiece .model BPE (load_spm.c: loader and table; spm.c:
 *             the ModelProto reader, normalizer, BPE and decode ops)
 *   rank+pretok  a rank-engine tokenizer given its own regex and / or
 *             normalization (rank_pretok.c: --pattern REGEX, --normalize);
 *             not in the registry: tk_set_pretokenizer hands it over
 *   tekken    Mistral's tekken.json (load_tekken.c: loader and ops; the
 *             rank tables and merge, Mistral's pattern in pretok.c, ids
 *             shifted past the specials)
 *   unigram   SentencePiece .model UNIGRAM (unigram.c encodes with spm.c's
 *             normalizer and decodes with its ops; no sniffer: load_spm.c
 *             hands these models over)
 * The registry (tk_engines.def, one TK_ENGINE(name) line per engine, in the
 * order files are offered to their sniffers) is read by tk_engine.c, the
 * dispatcher: adding an engine = its own file defining
 * `const tk_engine tk_engine_<name>` + one line there.
 *
 * Layering inside tokenizer/ (each line uses only what is below it; no
 * circle):
 *   load_resolve.c                   tk_load: path/name -> an engine's load
 *   load_*.c, hf*.c, unigram.c, spm.c engines (loaders + their ops; a loader
 *                                    calls its engine, never the reverse)
 *   tk_engine.c                      dispatcher: registry, tk_describe,
 *                                    tk_lossless, tk_engine_of
 *   encode.c decode.c save.c framing.c
 *                                    generic API; call engines only through
 *                                    tk_engine_of(t)->op
 *   tokenizer.c bpe.c pretok.c normalize.c hf_regex.c hf_json.c tk_file.c
 *   tk_image.c                       tables, merge loops, pre-tokenizers,
 *                                    normalizers, files, table images (the
 *                                    rank loader's; they read t->engine's
 *                                    image flag, never call the dispatcher)
 * (tokenizer.c's tk_free calls the engine's free op through the table.) */
#ifndef TK_ENGINE_H
#define TK_ENGINE_H

#include "tk_internal.h"

typedef struct tk_engine {
    const char *name;
    /* Is the file at path (its first n bytes: head) this engine's? Offered
     * in registry order; NULL: never picked by content or name. */
    bool (*sniff)(const char *path, const uint8_t *head, size_t n);
    /* Load a file this engine sniffed (pat: the user's --pattern, or
     * TK_PAT_NONE). */
    int (*load)(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen);
    /* Text to ids without special tokens; NULL: the rank-file path of
     * encode.c (pre-tokenizer + merge by rank). */
    int (*encode)(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out);
    /* Text to ids with the allowed specials (all: every one); NULL: encode.c
     * splits at the specials and encodes the rest with encode. */
    int (*encode_special)(const tk_tokenizer *t, const uint8_t *s, size_t n, const char *const *allowed,
                          size_t n_allowed, bool all, tk_ids *out);
    /* Ids to bytes; first = the ids start the text; stream = part of a
     * tk_decoder's stream. Returns 1 (no bytes written) to ask for the
     * generic decode (the tokens' bytes back to back). NULL: always generic. */
    int (*decode)(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, bool stream, tk_bytes *out);
    /* One line naming the pipeline (tk_describe); NULL: the rank line. */
    void (*describe)(const tk_tokenizer *t, char *buf, size_t len);
    /* tk_lossless (tk.h): 1 when decode(encode(x)) == x for every text;
     * NULL: 1. */
    int (*lossless)(const tk_tokenizer *t);
    /* TK_OK when tk_save_tiktoken (fmt 0) / tk_save_hf_json (fmt 1) can carry
     * this tokenizer, else TK_ERR_UNSUPPORTED; NULL: both can. */
    int (*savable)(const tk_tokenizer *t, int fmt);
    /* Its tables can be written to / mapped from a table image
     * (tk_image.c): the rank engine only, whose state is all in the
     * tokenizer's own tables. */
    bool image;
    /* Framing when the file names no post-processor (TK_PP_NONE: the
     * <|endoftext|> convention of rank files; TK_PP_ABSENT: <s> ... </s>
     * by name, SentencePiece's). */
    uint8_t default_pp;
    /* Frees engine_state. */
    void (*free)(void *state);
} tk_engine;

/* The generic special-token split (encode.c): the allowed specials (all:
 * every one) become their ids, the text between them goes to ordinary. An
 * engine whose encode_special must see the whole text first (rank_pretok.c:
 * normalize, then split, as tiktoken on unicodedata.normalize's output)
 * calls it itself. */
typedef int (*tk_ordinary_fn)(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out);
int tk_split_specials(const tk_tokenizer *t, const uint8_t *text, size_t len, const char *const *allowed,
                      size_t n_allowed, bool all, tk_ordinary_fn ordinary, tk_ids *out);
/* The engine of t (the rank engine when none was set: tk_create and the
 * rank-file loaders leave it NULL). */
const tk_engine *tk_engine_of(const tk_tokenizer *t);
/* The registry, in sniffing order; *n receives its length. */
const tk_engine *const *tk_engines(size_t *n);
/* Gives t to engine e with its state (freed by e->free with t). */
static inline void tk_engine_attach(tk_tokenizer *t, const tk_engine *e, void *state) {
    t->engine = e;
    t->engine_state = state;
}

#define TK_ENGINE(name) extern const tk_engine tk_engine_##name;
#include "tk_engines.def"
#undef TK_ENGINE

#endif
