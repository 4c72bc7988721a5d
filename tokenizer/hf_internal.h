/* hf_internal.h - what the files of the HF tokenizer.json engine share:
 * the pipeline state (struct tk_hf) parsed by hf_config.c and run by
 * hf_normalize.c, hf_encode.c (added tokens, pre-tokenizers, the model
 * dispatch), hf_model.c (the BPE model stage) and hf_decode.c; hf.c holds
 * the engine ops that load_hf.c's tk_engine_hf table names. Private to
 * those files and load_hf.c; everything else in them is static. */
#ifndef MKS_HF_INTERNAL_H
#define MKS_HF_INTERNAL_H

#include "hf_ucd.h"
#include "normalize.h"
#include "tk_engine.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

size_t tk_pretok_next(tk_pattern pat, const uint8_t *s, size_t n, size_t i);
/* pretok.c: cl100k's older spelling, with one digit a piece if digits1 (Qwen's) */
size_t tk_pretok_cl100k_hf_next(const uint8_t *s, size_t n, size_t i, bool digits1);
/* DeepSeek V3's third Split regex (pretok.c): the end of the match at i, or
 * of the text up to the next match.  tokenizer.json writes the regex as
 * HEAD nl MID nl MID2 nl TAIL, nl being "\r\n" as characters (DeepSeek's
 * file) or as the escapes \r\n (tk_hf_is_deepseek_re takes both). */
size_t tk_pretok_deepseek_next(const uint8_t *s, size_t n, size_t i);
#define HF_DEEPSEEK_HEAD "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^"
#define HF_DEEPSEEK_MID "\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+["
#define HF_DEEPSEEK_MID2 "]*|\\s*["
#define HF_DEEPSEEK_TAIL "]+|\\s+(?!\\S)|\\s+"

/* This engine's state of t (tk_engine.h). */
#define HF_OF(t) ((tk_hf *)(t)->engine_state)

enum {
    NM_NFC,
    NM_NFD,
    NM_NFKC,
    NM_NFKD,
    NM_LOWER,
    NM_STRIP,
    NM_REPLACE,
    NM_PREPEND,
    NM_PRECOMPILED,
    NM_STRIP_ACCENTS,
    NM_BERT_CLEAN, /* BertNormalizer's steps (hf_bert.c) */
    NM_BERT_CJK,
    NM_BERT_MN
};
enum { PT_SPLIT, PT_BYTELEVEL, PT_DIGITS, PT_PUNCT, PT_WSSPLIT, PT_METASPACE, PT_BERT };
enum { B_REMOVED, B_ISOLATED, B_MERGED_PREV, B_MERGED_NEXT, B_CONTIGUOUS };
enum { MS_ALWAYS, MS_FIRST, MS_NEVER };

#define HF_MAX_STEPS 32

typedef struct {
    int kind;
    bool left, right; /* Strip */
    uint8_t *a, *b;   /* Replace: content (b); Prepend: a */
    size_t alen, blen;
    tk_regex *re;     /* Replace pattern */
    uint8_t rep;      /* Replace: REP_* (hf_normalize.c), how its pattern is matched */
    uint8_t run_byte; /* Replace REP_RUN: the byte of the run */
    uint32_t run_min; /* Replace REP_RUN: its least length */
    tk_cmap cmap;     /* Precompiled: the charsmap of a (decoded once, at load) */
    bool plain[256];  /* Precompiled: ASCII bytes but CR the charsmap leaves as they are */
} nm_step;

typedef struct {
    int kind;
    int beh;
    bool invert;
    tk_regex *re;    /* Split (regex engine) */
    tk_pattern fast; /* Split whose regex is a built-in scanner's */
    int cl100k_hf;   /* 1: the regex is cl100k's older spelling, 2: Qwen's (\p{N} for \p{N}{1,3}), 3: DeepSeek V3's
                    * third Split (tk_pretok_deepseek_next; Isolated only, re compiled for the rest) */
    bool ws_scan;    /* the Whitespace pre-tokenizer (re: \w+|[^\w\s]+): ASCII stretches scanned */
    bool prefix_space, use_regex; /* ByteLevel */
    uint8_t repl[8];              /* Metaspace replacement (UTF-8) */
    size_t repl_len;
    int scheme;
    bool split;
    bool individual; /* Digits */
} pt_step;

typedef struct {
    uint8_t *text; /* content (normalized content for normalized tokens) */
    size_t len;
    uint32_t id;
    bool special, normalized;
    bool lstrip, rstrip; /* the match takes the whitespace before / after it */
    bool single_word;    /* a match counts only between non-word characters (else it is skipped) */
} hf_added;

typedef struct {
    uint64_t key;       /* ((a << 32) | b) + 1; 0 = empty */
    uint32_t midx, res; /* merge priority, result rank */
} mslot;

#define HF_AFFIX_MAX 64 /* bytes of continuing_subword_prefix / end_of_word_suffix */
struct tk_hf {
    nm_step nm[HF_MAX_STEPS];
    size_t n_nm;
    pt_step pt[HF_MAX_STEPS];
    size_t n_pt;
    bool fast_bpe; /* tk_bpe_piece gives HF's ids */
    bool ignore_merges;
    mslot *merges;
    uint64_t mmask;
    uint64_t *pair1; /* 65536: merge of the byte pair (b1, b2): midx << 32 | res, UINT64_MAX if none */
    struct m1 {
        uint32_t a, b, midx;
    } * m1;               /* per result rank: its only merge; a = NONE: none, b = MULTI: several
                                             * (midx: then the lowest of their priorities) */
    tk_chartab *chartab;  /* merging from characters (bpe.c), by merge priority; built on first use */
    uint32_t multi_words; /* words of multi-byte characters seen before the chartab is built */
    hf_added *added;
    size_t n_added;
    /* SentencePiece-style BPE: the model works on characters and ids */
    bool sp;
    tk_hfj voc;            /* vocabulary strings -> entries (own copy) */
    uint32_t byte_id[256]; /* id of <0xNN>, TK_NO_RANK if none or no byte_fallback */
    uint32_t unk;          /* unk_token id, TK_NO_RANK if none */
    bool fuse_unk;
    /* model.continuing_subword_prefix / end_of_word_suffix (as written in
     * the vocabulary): put before every character but a word's first /
     * after its last */
    uint8_t prefix[HF_AFFIX_MAX], suffix[HF_AFFIX_MAX];
    size_t prefix_len, suffix_len;
    /* Byte-level words that merge_small and merging from characters cannot
     * take (bl_word): a byte without a single-byte token, or an affix. */
    bool bl_general;       /* every word goes to bl_word (an affix) */
    uint8_t bl_odd[32];    /* bitmap: bytes whose character is no mergeable token */
    bool bl_byte_fallback; /* model.byte_fallback */
    bool bl_plain;         /* the model is merge-by-rank's: no affix, no odd byte, no raw entry */
    uint32_t bsym[4][256]; /* symbol of a byte's character [1: not first | 2: last] (BL_*) */
    uint32_t fb_sym[256];  /* symbol of <0xNN> (byte_fallback), BL_NONE if none */
    uint32_t unk_sym;      /* symbol of unk_token, BL_NONE if none */
    struct dec_step {
        int kind;
        uint8_t *a, *b;
        size_t alen, blen;
        uint32_t start, stop;
        int scheme;
        tk_regex *re; /* Replace with a {"Regex": ...} pattern */
    } dec[HF_MAX_STEPS];
    size_t n_dec;
    uint8_t first_byte[32]; /* bitmap of the first bytes of added tokens */
    /* The added tokens' texts as a byte trie (node 0 the root; children in a
     * sibling list): the longest one at a position in one walk, where a scan
     * of every token cost 15% of DeepSeek V3's encode (800 "<｜...｜>"
     * placeholders tried at each '<'). term: the added index whose text ends
     * at the node, [normalized], the lowest of equal texts; -1 none. */
    struct hf_tnode {
        uint32_t child, next; /* 0: none (the root is nobody's child) */
        int32_t term[2];
        uint8_t byte;
    } * trie;
    size_t n_trie;
    struct tk_hf_uni *uni;            /* model "Unigram" (hf_unigram.c); NULL: BPE */
    const struct tk_hf_model_ops *wm; /* a model of hf_models.def (WordPiece, WordLevel); NULL: BPE or Unigram */
    void *wm_state;                   /* its state (freed by tk_hf_free) */
    bool first_scheme;                /* a Metaspace with prepend_scheme "first": encode tracks where the text starts */
};

/* ---- small helpers ------------------------------------------------------ */

#define M1_NONE UINT32_MAX
#define M1_MULTI (UINT32_MAX - 1)

/* A symbol of bl_word: a rank, or BL_ID | id for a model.vocab entry that is
 * no mergeable token (an added token's entry: never part of a merge), or
 * BL_NONE: the vocabulary has no such entry. */
#define BL_ID 0x80000000u
#define BL_NONE UINT32_MAX

enum { D_REPLACE, D_BYTEFB, D_FUSE, D_STRIP, D_METASPACE, D_WORDPIECE };

/* The merge loop's heap entries and per-word scratch (hf_model.c; the
 * encode context and hf_config.c's proof hold one). */
typedef struct {
    uint32_t rank, pos, res;
} hq_item;

typedef struct {
    uint32_t *sym; /* rank of each symbol */
    int32_t *prev, *next;
    uint8_t *gone;
    hq_item *heap;
    size_t cap, hcap;
} bpe_scratch;

/* ---- small helpers ------------------------------------------------------ */

static inline size_t u8_len(const uint8_t *s, size_t n, size_t i, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t l = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i > 4 ? 4 : n - i), &c);
    if (l <= 0) {
        *cp = -1;
        return 1;
    }
    *cp = c;
    return (size_t)l;
}

/* s[0, n) into out (capped) without the characters drop(cp) says yes to
 * (cp -1 for an invalid byte, which is given to drop too): the normalizers
 * that remove marks (StripAccents, BertNormalizer's strip_accents).  ASCII
 * is never dropped; runs between dropped characters are copied whole. */
static inline int tk_hf_drop_chars(const uint8_t *s, size_t n, bool (*drop)(int32_t cp), tk_bytes *out, size_t cap) {
    size_t i = 0, kept = 0; /* s[kept, i) is copied as one run */
    int rc;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        size_t l = u8_len(s, n, i, &cp);
        if (drop(cp)) {
            if ((rc = tk_bytes_put_capped(out, s + kept, i - kept, cap))) return rc;
            kept = i + l;
        }
        i += l;
    }
    return tk_bytes_put_capped(out, s + kept, n - kept, cap);
}

static inline int hexd(uint8_t c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

static inline bool is_ws(int32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static inline bool is_numeric(int32_t cp) { /* Rust char::is_numeric: Nd, Nl, No */
    if (cp < 0) return false;
    int c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

static inline bool is_punct(int32_t cp) { /* ASCII punctuation or Unicode P* */
    if (cp < 0) return false;
    if (cp < 128)
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
               (cp >= 0x7B && cp <= 0x7E);
    int c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO) != tk_hf_punct_flip(cp); /* HF's tables: hf_ucd.h */
}

static inline int bput(tk_bytes *b, const void *p, size_t n) { return n ? tk_bytes_append(b, p, n) : TK_OK; }

/* A Replace step in progress (normalizer or decoder). */
typedef struct {
    const uint8_t *s;
    tk_bytes *out;
    size_t pos;
    const uint8_t *rep;
    size_t rep_len;
    size_t cap; /* the step's output bound */
} repl_ctx;

/* The merge of the pair (a, b), or NULL. */
static inline const mslot *merge_get(const tk_hf *h, uint32_t a, uint32_t b) {
    uint64_t key = (((uint64_t)a << 32) | b) + 1;
    uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> 20 & h->mmask;
    for (;;) {
        const mslot *s = &h->merges[i];
        if (!s->key) return NULL;
        if (s->key == key) return s;
        i = (i + 1) & h->mmask;
    }
}

/* hf_unigram.c's per-thread scratch (in the encode context): the lattice
 * of a word, a node per byte, and the best path scores of its last `ring`
 * positions only (a start proposes at most its longest entry ahead;
 * hf_unigram.c says why the scores are kept apart). */
typedef struct {
    uint32_t start1; /* where the best path's last piece starts + 1; 0: no path yet */
    uint32_t id;     /* its last piece */
} hf_uni_node;

typedef struct {
    hf_uni_node *best;
    size_t best_cap;
    double *score;   /* best path score ending at position p: score[p & (ring - 1)] */
    size_t ring;     /* a power of 2 above the farthest a start proposes */
    uint32_t *path;  /* the best path's (end, id) pairs, last first */
    size_t path_cap; /* uint32_t's */
} hf_uni_scratch;

/* A model that looks words up in the vocabulary h->voc (hf_wordpiece.c:
 * WordPiece, WordLevel). Each is one `const tk_hf_model_ops
 * tk_hf_model_<name>` and one HF_MODEL(<name>) line in hf_models.def, in
 * the order HF's untagged read tries them; load_hf.c picks one by
 * model.type (or untagged), hf_config.c calls setup once the vocabulary is
 * in h->voc, hf_encode.c calls word on each pre-tokenized word. */
typedef struct tk_hf_model_ops {
    const char *type;                /* model.type */
    bool (*untagged)(json_t *model); /* a model without "type" is this one (HF's untagged order) */
    /* model's options into h->wm_state (freed by free); folds them into t->fingerprint */
    int (*setup)(tk_tokenizer *t, tk_hf *h, json_t *model, const char *file, char *err, size_t errlen);
    /* the ids of one word p[0..n), appended to out; TK_ERR_DOC_UNK where HF fails the text */
    int (*word)(const tk_hf *h, const uint8_t *p, size_t n, tk_ids *out);
    void (*describe)(const tk_hf *h, char *buf, size_t len);
    void (*free)(void *state);
} tk_hf_model_ops;

/* hf_bert.c: BertNormalizer's steps (s[0..n) into out, at most cap bytes);
 * does step kind drop the character cp; one token through the WordPiece
 * decoder (lead: the text's first token) with a and b as scratch. */
int tk_hf_nm_bert_clean(const uint8_t *s, size_t n, tk_bytes *out, size_t cap);
int tk_hf_nm_bert_cjk(const uint8_t *s, size_t n, tk_bytes *out, size_t cap);
int tk_hf_nm_bert_mn(const uint8_t *s, size_t n, tk_bytes *out, size_t cap);
bool tk_hf_bert_drops(int kind, int32_t cp);
int tk_hf_dec_wordpiece(const uint8_t *pfx, size_t plen, bool cleanup, bool lead, const uint8_t *p, size_t n,
                        tk_bytes *a, tk_bytes *b, const uint8_t **res, size_t *rn);

/* ---- between the files ---------------------------------------------------- */

/* hf.c: the engine ops load_hf.c's tk_engine_hf names. */
void tk_hf_describe(const tk_tokenizer *t, char *buf, size_t len);
bool tk_hf_sniff(const char *path, const uint8_t *head, size_t n);
int tk_hf_encode_ordinary(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out);
int tk_hf_decode_op(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, bool stream, tk_bytes *out);
int tk_hf_savable(const tk_tokenizer *t, int fmt);
void tk_hf_free_state(void *state);
/* hf_encode.c: 1 when decode gives back every input byte. */
int tk_hf_lossless(const tk_tokenizer *t);

/* hf_normalize.c: h's normalizer chain on s[0..n), alternating between a
 * and b; *res, *rn: the result (s itself when there are no steps). */
int tk_hf_normalize(const tk_hf *h, const uint8_t *s, size_t n, tk_bytes *a, tk_bytes *b, const uint8_t **res,
                    size_t *rn, tk_re_budget *budget, bool *lead_dropped);
/* hf_normalize.c: a Replace step's pattern (pat[0, len), a String pattern
 * when literal; st->re compiled) checked for a form matched without the
 * regex engine (st->rep; a literal copied into st->a). TK_OK or
 * TK_ERR_NOMEM. */
enum { REP_REGEX, REP_LITERAL, REP_RUN, REP_TRIM };
int tk_hf_replace_fast(nm_step *st, const char *pat, size_t len, bool literal);
/* hf_normalize.c: st->plain of a Precompiled step (its cmap set). */
void tk_hf_precompiled_plain(nm_step *st);
/* tk_regex_find_all callback of a Replace step (a repl_ctx); the decoder's
 * Replace uses it too. */
int tk_hf_repl_cb(void *u, size_t a, size_t b);

/* hf_model.c: the model stage on one pre-tokenized word, ids appended to
 * out. Byte-level words: tk_hf_bpe_bytes (HF's merge loop on bytes, ranks
 * out), tk_hf_bl_word (character by character with affixes / byte fallback /
 * unk, ids out); SentencePiece-style words: tk_hf_sp_word (ids out). */
int tk_hf_bpe_bytes(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out);
int tk_hf_bl_word(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out);
int tk_hf_sp_word(const tk_hf *h, bpe_scratch *s, const uint8_t *p, size_t n, tk_ids *out);
/* HF's merge loop on token r's own bytes: 1 if it yields r (hf_config.c's
 * proof that merge-by-rank gives HF's ids). */
int tk_hf_reaches(const tk_tokenizer *t, const tk_hf *h, bpe_scratch *s, uint32_t r, tk_ids *tmp);

/* hf_unigram.c: HF's Unigram model. tk_hf_uni_build: from the vocab
 * entries (key[i], len[i] bytes, score[i]; id = i), unk_id (TK_NO_RANK:
 * none); tk_hf_uni_word: the ids of one pre-tokenized word (TK_ERR_DOC_UNK
 * where HF fails the text: a character without a piece and no unk_id). */
struct tk_hf_uni;
int tk_hf_uni_build(const char *const *key, const uint32_t *len, const double *score, uint32_t n, uint32_t unk_id,
                    bool byte_fallback, struct tk_hf_uni **out);
void tk_hf_uni_free(struct tk_hf_uni *u);
uint32_t tk_hf_uni_size(const struct tk_hf_uni *u);
double tk_hf_uni_unk_score(const struct tk_hf_uni *u);
int tk_hf_uni_word(const struct tk_hf_uni *u, hf_uni_scratch *w, const uint8_t *t, size_t tn, tk_ids *out);
void tk_hf_uni_scratch_free(hf_uni_scratch *w);

/* hf_config.c: a tokenizer.json whose model is "Unigram": the vocab entries
 * J->vkey[i] (J->vlen[i] bytes, score[i], id i = J->vid[i]), unk_id (TK_NO_RANK: none); the
 * normalizer, pre-tokenizer, decoder and added tokens as tk_hf_setup_sp's. */
int tk_hf_setup_uni(tk_tokenizer *t, json_t *root, const char *file, const tk_hfj *J, const double *score,
                    uint32_t unk_id, bool byte_fallback, tk_hf **out, char *err, size_t errlen);
/* hf_config.c: a tokenizer.json whose model is one of hf_models.def's (ops):
 * the vocab entries of J, then the model's own options (ops->setup), the
 * normalizer, pre-tokenizer, decoder and added tokens as tk_hf_setup_sp's. */
int tk_hf_setup_word(tk_tokenizer *t, json_t *root, const char *file, const tk_hfj *J, const tk_hf_model_ops *ops,
                     tk_hf **out, char *err, size_t errlen);

/* hf_json.c: a Unigram model.vocab read from the raw file: pieces (NUL
 * terminated, in arena), their scores as HF reads them (serde_json), and
 * the file with that value replaced by [] for jansson. TK_HFJ_FALLBACK for
 * anything unusual (the loader then reads the file with jansson). */
typedef struct {
    uint8_t *arena;
    const char **key;
    uint32_t *len;
    double *score;
    size_t n;
    uint8_t *rest;
    size_t rest_len;
} tk_hfj_uni;
int tk_hfj_parse_unigram(const uint8_t *s, size_t n, tk_hfj_uni *v);
void tk_hfj_uni_free(tk_hfj_uni *v);

/* Does the byte-level word p[0..n) need tk_hf_bl_word? (inline: asked once a
 * piece on the encode path) */
static inline bool tk_hf_bl_needs_word(const tk_hf *h, const uint8_t *p, size_t n) {
    if (h->bl_general) return true;
    if (h->bl_plain) return false;
    for (size_t i = 0; i < n; i++)
        if (h->bl_odd[p[i] >> 3] >> (p[i] & 7) & 1) return true;
    return false;
}

#endif
