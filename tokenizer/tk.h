/* tk.h - byte-level BPE tokenizer with exact tiktoken parity.
 *
 * Public API of the tokenizer module. Every function returns an int status
 * (TK_OK == 0, negative TK_ERR_* on failure; see tk_strerror) unless noted.
 * A tk_tokenizer is immutable after loading and safe to share between threads.
 */
#ifndef TK_H
#define TK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TK_OK = 0,
    TK_ERR_NOMEM = -1,        /* allocation failed */
    TK_ERR_IO = -2,           /* file missing or unreadable */
    TK_ERR_FORMAT = -3,       /* malformed vocabulary file */
    TK_ERR_BASE64 = -4,       /* bad base64 in a .tiktoken line */
    TK_ERR_DUP_RANK = -5,     /* the same rank or token given twice */
    TK_ERR_MISSING_RANK = -6, /* ranks not contiguous / single bytes missing */
    TK_ERR_RANGE = -7,        /* token id out of range */
    TK_ERR_UNSUPPORTED = -8,  /* e.g. tokenizer.json of another model type */
    TK_ERR_ARG = -9,          /* invalid argument */
    TK_ERR_PATTERN = -10,     /* unknown pre-tokenizer pattern / none given */
    TK_ERR_NOT_FOUND = -11,   /* named vocabulary not found */
    TK_ERR_THREAD = -12,      /* could not start a thread */
    TK_ERR_LIMIT = -13,       /* beyond a documented limit (file size, token length, JSON memory) */
    /* Per-document failures: this text is refused, the tokenizer is fine and
     * the next document may be encoded (tk_err_is_document). Every other code
     * from an encode or decode call is a failure of the run (memory, misuse). */
    TK_ERR_DOC_REGEX = -14,  /* the document spent its regex work budget (TK_REGEX_WORK_*) */
    TK_ERR_DOC_EXPAND = -15, /* a normalizer or decoder step would write more than TK_EXPAND_* allow */
    TK_ERR_DOC_UNK = -16     /* a character no token covers and no unk token (HF Unigram fails such a text too) */
};
/* 1 when err refuses one document (TK_ERR_DOC_*), 0 otherwise. */
int tk_err_is_document(int err);

/* Limits on what a tokenizer file may ask for (docs/tokenizer.md, "Hostile
 * files"). A loader refuses, with a message naming the file and the entry,
 * anything beyond them, so memory is bounded by the file's size. */
#define TK_MAX_FILE_BYTES ((size_t)1 << 30) /* a rank file, JSON file or vocab.bpe */
#define TK_MAX_VOCAB ((uint32_t)1 << 24)    /* ids 0..2^24-1 (o200k: 200k, Gemma: 256k) */
#define TK_MAX_ID_GAP 65536u                /* ids named by no entry, at most */
#define TK_MAX_TOKEN_BYTES 1024u            /* bytes of one mergeable token */
#define TK_JSON_MEM_FACTOR 32u              /* a JSON file's parse tree: at most 32 x its size */
/* Limits on what one document may cost (docs/tokenizer.md, "Hostile files"):
 * beyond them the document is refused (TK_ERR_DOC_*), the run goes on. */
#define TK_EXPAND_FACTOR 16u /* a normalizer / decoder step writes <= 16 x min(its input, the chain's) */
#define TK_EXPAND_SLACK 64u  /* ... + 64 bytes */
#define TK_REGEX_WORK_BASE ((uint64_t)1 << 20) /* regex work units per document: this ... */
#define TK_REGEX_WORK_PER_BYTE 256u            /* ... + this many per byte of the document */
#define TK_REGEX_MAX_MIN_REPEAT 256u           /* X{n,m} with n above this is refused at load */
const char *tk_strerror(int err);

/* Pre-tokenizer patterns (the pat_str of tiktoken's encodings). */
typedef enum {
    TK_PAT_NONE = 0, /* not set: use the one a known vocabulary implies */
    TK_PAT_GPT2 = 1, /* gpt2 / r50k_base / p50k_base */
    TK_PAT_CL100K = 2,
    TK_PAT_O200K = 3
} tk_pattern;
/* "gpt2"|"r50k"|"r50k_base"|"cl100k"|"cl100k_base"|"o200k"|"o200k_base" */
int tk_pattern_parse(const char *name, tk_pattern *out);
const char *tk_pattern_name(tk_pattern pat); /* "gpt2", "cl100k", "o200k" */
/* The exact regex of a pattern (for tokenizer.json export and docs). */
const char *tk_pattern_regex(tk_pattern pat);

/* Split text into pre-tokens (pieces). Calls fn for every piece in order;
 * a non-zero return from fn stops the scan and is returned. Invalid UTF-8
 * bytes are treated as single "other" characters, so every byte lands in
 * exactly one piece. */
typedef int (*tk_piece_fn)(void *user, const uint8_t *piece, size_t len);
int tk_pretokenize(tk_pattern pat, const uint8_t *text, size_t len, tk_piece_fn fn, void *user);

typedef struct tk_tokenizer tk_tokenizer;

/* A special token: text and id. */
typedef struct {
    const char *text;
    uint32_t id;
} tk_special;

/* Load by spec: a path to a .tiktoken file, a tokenizer.json, a SentencePiece
 * .model (BPE or Unigram; recognised by its content), or a folder
 * holding encoder.json + vocab.bpe; or a name (gpt2, r50k_base, cl100k_base,
 * o200k_base) looked up in $MKS_VOCAB_DIR and in tiktoken's cache
 * ($TIKTOKEN_CACHE_DIR, files named by the sha1 of the download URL).
 * pat overrides the pattern (TK_PAT_NONE: the one the vocabulary implies;
 * vocabularies are recognised by sha256 of their rank file). On failure
 * err (if not NULL) receives a one-line human message. */
int tk_load(const char *spec, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen);
int tk_load_tiktoken(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen);
int tk_load_gpt2(const char *encoder_json, const char *vocab_bpe, tk_pattern pat, tk_tokenizer **out, char *err,
                 size_t errlen);
int tk_load_hf_json(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen);

/* A rank file's own pre-tokenizer and normalization (rank_pretok.c): what
 * tiktoken.Encoding(pat_str=REGEX, mergeable_ranks=...) gives on
 * unicodedata.normalize(FORM, text), e.g. Qwen (v1)'s qwen.tiktoken (its own
 * regex, NFC). Only for tokenizers run by the rank engine (rank files,
 * encoder.json + vocab.bpe, tk_create): a tokenizer.json, a SentencePiece
 * model or a Tekken file carries its own pipeline (TK_ERR_UNSUPPORTED). */
typedef enum {
    TK_NORM_NONE = 0,
    TK_NORM_NFC = 1, /* utf8proc's NFC (Unicode 15.0) */
    TK_NORM_NFKC = 2
} tk_norm;
int tk_norm_parse(const char *name, tk_norm *out); /* "none" | "nfc" | "nfkc" */
const char *tk_norm_name(tk_norm norm);
#define TK_MAX_PATTERN_BYTES 4096u /* a pre-tokenizer regex given by the user */
/* --pattern ARG: a built-in name (tk_pattern_parse) -> *pat, *regex = NULL;
 * else a regex (it holds a byte other than a letter, digit or '_'): one
 * that is exactly a built-in's spelling -> that *pat; any other -> *regex =
 * arg, *pat = TK_PAT_NONE. TK_ERR_PATTERN for an unknown name. */
int tk_pattern_spec(const char *arg, tk_pattern *pat, const char **regex);
typedef struct {
    tk_pattern pat;    /* a built-in pattern; TK_PAT_NONE: the file's own */
    const char *regex; /* a pre-tokenizer regex in tiktoken's syntax instead of pat; NULL: none */
    tk_norm norm;      /* applied to the text before pre-tokenizing */
} tk_load_opts;
/* tk_load with those options (o NULL: none): the file is loaded as by
 * tk_load (a regex stands in for --pattern: an unknown rank file needs no
 * name), then tk_set_pretokenizer. */
int tk_load_ex(const char *spec, const tk_load_opts *o, tk_tokenizer **out, char *err, size_t errlen);
/* Gives a rank-engine tokenizer a regex (NULL: keep its built-in pattern)
 * and a normalization; both go into its fingerprint. Matches follow
 * tiktoken: text no match covers is dropped (tk_lossless is then 0), and a
 * document whose matching spends the regex work budget is refused
 * (TK_ERR_DOC_REGEX). Unsupported constructs (hf_regex.c) are refused with
 * TK_ERR_UNSUPPORTED and the construct named in err. */
int tk_set_pretokenizer(tk_tokenizer *tok, const char *regex, tk_norm norm, char *err, size_t errlen);
const char *tk_get_regex(const tk_tokenizer *tok); /* the regex given, NULL: a built-in pattern */
tk_norm tk_get_norm(const tk_tokenizer *tok);
/* A SentencePiece tokenizer.model whose model_type is BPE or UNIGRAM (ids
 * of sentencepiece's encode, no BOS/EOS); tk_load picks it by content. */
int tk_load_spm(const char *path, tk_tokenizer **out, char *err, size_t errlen);

/* Build from raw token bytes in rank order (rank i = tokens[i]); the first
 * 256 ranks need not be single bytes but every single byte must appear.
 * Specials get the ids given (must not collide with ranks). */
int tk_create(const uint8_t *const *tokens, const uint32_t *lens, uint32_t n_ranks, tk_pattern pat,
              const tk_special *specials, size_t n_specials, tk_tokenizer **out);
void tk_free(tk_tokenizer *tok);

/* Save as .tiktoken (plus "<path>.meta.json" with pattern and specials when
 * they are not implied by a known vocabulary) or as HF tokenizer.json. */
int tk_save_tiktoken(const tk_tokenizer *tok, const char *path);
int tk_save_hf_json(const tk_tokenizer *tok, const char *path);

uint32_t tk_n_ranks(const tk_tokenizer *tok);    /* mergeable ranks */
uint32_t tk_vocab_size(const tk_tokenizer *tok); /* max id + 1, specials included */
tk_pattern tk_get_pattern(const tk_tokenizer *tok);
/* The pattern a recognised upstream vocabulary (by sha256: gpt2, cl100k_base,
 * o200k_base, Meta's llama3 / llama4) needs; TK_PAT_NONE for any other. A
 * front end warns when the user's --pattern differs from it. */
tk_pattern tk_known_pattern(const tk_tokenizer *tok);
const char *tk_name(const tk_tokenizer *tok); /* "cl100k_base", ... or "custom" */
size_t tk_n_specials(const tk_tokenizer *tok);
const tk_special *tk_specials(const tk_tokenizer *tok);
/* Id of a special token by text; TK_ERR_NOT_FOUND if it is not one. */
int tk_special_id(const tk_tokenizer *tok, const char *text, uint32_t *id);
/* End-of-text id (<|endoftext|>), TK_ERR_NOT_FOUND if the vocabulary has none. */
int tk_eot_id(const tk_tokenizer *tok, uint32_t *id);
/* Id of a token given by its text: an added or special token, else a
 * vocabulary token whose bytes are exactly the text; TK_ERR_NOT_FOUND. */
int tk_token_id(const tk_tokenizer *tok, const char *text, uint32_t *id);
/* How a document is framed for training (docs/tokenizer.md, "Framing"):
 * bos before it, eos after it, -1 for none. A tokenizer.json's
 * post_processor decides BOS (TemplateProcessing's `single` template,
 * Roberta/BertProcessing's cls and sep, Sequence; ByteLevel adds nothing)
 * and EOS when its template ends with one; otherwise the end-of-text token
 * of the model family, by name (<|end_of_text|>, <|endoftext|>, </s>,
 * <eos>, <｜end▁of▁sentence｜>); a file without post_processor also takes
 * the family's BOS by name (<|begin_of_text|>, <s>, <bos>, ...). Rank files
 * and encoder.json: no BOS, EOS <|endoftext|>. TK_ERR_NOT_FOUND (no EOS
 * token) or TK_ERR_UNSUPPORTED (a template with several tokens on a side),
 * with a message in err. */
typedef struct {
    int64_t bos, eos; /* ids, -1: none */
    char source[160]; /* where each came from, for messages */
} tk_framing;
int tk_default_framing(const tk_tokenizer *tok, tk_framing *out, char *err, size_t errlen);
/* What HF's encode(add_special_tokens=True) adds to one sequence: the ids
 * the tokenizer.json's post_processor puts before (bos) and after (eos) it,
 * -1 for none (post_process.c). Rank files, encoder.json, SentencePiece and
 * a tokenizer.json without a post_processor (or with ByteLevel's) add
 * nothing. TK_ERR_UNSUPPORTED (why: the reason) for a post_processor that
 * adds more than one token on a side or pairs only. */
int tk_post_process_ids(const tk_tokenizer *tok, int64_t *bos, int64_t *eos, const char **why);
/* Bytes of one token (specials included); TK_ERR_RANGE for unknown ids. */
int tk_token_bytes(const tk_tokenizer *tok, uint32_t id, const uint8_t **bytes, size_t *len);
/* Rank of an exact byte string, or -1 if it is not a token. */
int64_t tk_rank_of(const tk_tokenizer *tok, const uint8_t *bytes, size_t len);
/* One line naming the components that produce the ids, e.g. "tokenizer.json:
 * NFC | Split(regex, Isolated) ByteLevel | BPE (HF merge loop)", or
 * "rank file: cl100k pre-tokenizer | BPE (merge by rank)". */
void tk_describe(const tk_tokenizer *tok, char *buf, size_t len);
/* A token's text (any bytes) as it may be printed to a terminal or in a
 * message: control bytes (C0, DEL, C1), bytes that are not valid UTF-8, the
 * double quote and the backslash as \xNN, the rest as is (so a hostile
 * token cannot send terminal escapes); cut at a character boundary with
 * "..." when it does not fit in cap bytes (NUL included). Returns out. */
const char *tk_escape_text(const void *text, size_t n, char *out, size_t cap);
/* 1 if decode(encode(x)) == x for every x (no normalizer, no pre-tokenizer
 * that removes or adds text), else 0. */
int tk_lossless(const tk_tokenizer *tok);
/* sha256 over the ranks, specials and pattern, and for a tokenizer.json run
 * through its own pipeline also over normalizer, pre-tokenizer, model
 * options, added tokens and decoder: identifies a tokenizer. */
void tk_fingerprint(const tk_tokenizer *tok, uint8_t out[32]);

/* Growable id array. tk_ids_free(NULL-initialised) is fine. */
typedef struct {
    uint32_t *ids;
    size_t len, cap;
} tk_ids;
void tk_ids_free(tk_ids *v);

/* Encode (tiktoken's encode_ordinary: special-token text is ordinary text);
 * ids are appended to out. Thread-safe. A document beyond a per-document
 * limit (a tokenizer.json's regex work budget, a normalizer's output bound)
 * returns TK_ERR_DOC_* and appends nothing: the caller may reject that
 * document and go on (tk_err_is_document); any other failure is the run's. */
int tk_encode(const tk_tokenizer *tok, const uint8_t *text, size_t len, tk_ids *out);
/* Ids of any bytes, invalid UTF-8 included, as tiktoken's
 * Encoding._encode_bytes gives them (encode_bytes.c): valid UTF-8 is
 * tk_encode; otherwise the last piece of the valid prefix plus the invalid
 * tail are merged as one piece. TK_ERR_UNSUPPORTED for invalid UTF-8 given to
 * a tokenizer.json or SentencePiece tokenizer. */
int tk_encode_bytes(const tk_tokenizer *tok, const uint8_t *bytes, size_t len, tk_ids *out);
/* Count tokens without storing them. */
int tk_count(const tk_tokenizer *tok, const uint8_t *text, size_t len, size_t *n_tokens);
/* Encode mapping the listed special tokens to their ids (allowed == NULL and
 * n_allowed == (size_t)-1 allows all of the tokenizer's specials). */
int tk_encode_special(const tk_tokenizer *tok, const uint8_t *text, size_t len, const char *const *allowed,
                      size_t n_allowed, tk_ids *out);

/* Batch: encode n documents on `threads` threads (0 = all cores); outs[i]
 * receives the ids of docs[i] (appended). Output order is input order. The
 * first failure is returned (a per-document one included): callers that
 * reject single documents encode them one by one. */
typedef struct {
    const uint8_t *text;
    size_t len;
} tk_span;
int tk_encode_batch(const tk_tokenizer *tok, const tk_span *docs, size_t n, int threads, tk_ids *outs);

/* Growable byte buffer. */
typedef struct {
    uint8_t *data;
    size_t len, cap;
} tk_bytes;
void tk_bytes_free(tk_bytes *b);

/* Decode ids to bytes (appended to out). TK_ERR_RANGE on an unknown id
 * (nothing is appended then); TK_ERR_DOC_EXPAND / TK_ERR_DOC_REGEX when a
 * decoder step (a tokenizer.json decoder, a SentencePiece denormalizer)
 * passes its output bound or regex budget for these ids. */
int tk_decode(const tk_tokenizer *tok, const uint32_t *ids, size_t n, tk_bytes *out);

/* Streaming decoder: holds back a trailing incomplete UTF-8 sequence until
 * the next ids complete it (or finish flushes it as-is). */
typedef struct tk_decoder tk_decoder;
int tk_decoder_create(const tk_tokenizer *tok, tk_decoder **out);
int tk_decoder_feed(tk_decoder *dec, const uint32_t *ids, size_t n, tk_bytes *out);
int tk_decoder_finish(tk_decoder *dec, tk_bytes *out);
void tk_decoder_free(tk_decoder *dec);

#ifdef __cplusplus
}
#endif
#endif
