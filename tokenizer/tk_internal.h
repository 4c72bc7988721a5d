/* tk_internal.h - shared internals of the tokenizer module (not public). */
#ifndef TK_INTERNAL_H
#define TK_INTERNAL_H

#include "tk.h"

#include <stdbool.h>
#include <string.h>

#define TK_NO_RANK UINT32_MAX

/* Character classes used by the pre-tokenizers (bit flags). */
enum {
    TKC_L = 1u << 0,  /* \p{L} */
    TKC_N = 1u << 1,  /* \p{N} */
    TKC_S = 1u << 2,  /* \s (Unicode White_Space) */
    TKC_M = 1u << 3,  /* \p{M} */
    TKC_UP = 1u << 4, /* o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] */
    TKC_LO = 1u << 5, /* o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
    TKC_P = 1u << 6,  /* \p{P} (DeepSeek's regex) */
    TKC_SY = 1u << 7, /* \p{S} */
};

/* Class of the character at s[i] (n = end); *len receives its byte length.
 * Invalid UTF-8 yields class 0 ("other") with length 1. */
uint8_t tk_char_class(const uint8_t *s, size_t n, size_t i, size_t *len);
void tk_classes_init(void);

/* Hash map from byte strings (token bytes) to ranks, for tokens longer
 * than 8 bytes: the key bytes live in the arena. */
typedef struct {
    uint64_t *slots; /* (tag << 32) | (rank + 1); 0 = empty */
    uint64_t mask;
} tk_rankmap;

/* Tokens of at most 8 bytes (almost every look-up during merging): the
 * bytes are stored in the slot, so a probe is one cache line. */
typedef struct {
    uint64_t word;  /* the bytes, little-endian, zero-padded */
    uint32_t rank1; /* rank + 1; 0 = empty */
    uint32_t len;
} tk_shortslot;

typedef struct {
    tk_shortslot *slots;
    uint64_t mask;
} tk_shortmap;

struct tk_tokenizer {
    uint32_t n_ranks;    /* mergeable tokens: ranks 0..n_ranks-1 */
    uint32_t vocab_size; /* max id + 1 (specials included) */
    uint8_t *arena;      /* token bytes */
    uint64_t *tok_off;   /* n_ranks + 1 offsets into arena */
    tk_rankmap map;      /* tokens > 8 bytes */
    tk_shortmap smap;    /* tokens <= 8 bytes */
    uint64_t *filter;    /* TK_FILTER_BITS-bit filter over token hashes: most failed look-ups stop here */
    uint32_t byte_rank[256];
    uint32_t *pair2;  /* 65536: rank of each 2-byte token, TK_NO_RANK if none */
    uint8_t *maxlen2; /* 65536: longest token starting with these two bytes (255: or longer) */
    uint8_t *reach;   /* per rank, filled lazily: 1 = the merge loop on its bytes yields it, 2 = not, 0 = unknown */
    /* Merging from characters (bpe.c): the straddle minima (mapped from the
     * table image, tk_image.c, or NULL: built with the chartab) and the
     * per-character table built on first use by a piece with non-ASCII
     * bytes (NULL until then). */
    const struct tk_charmin *charmin;
    struct tk_chartab *chartab;
    uint64_t *map3;      /* 3-byte tokens: (bytes + 1) << 32 | rank, open addressing; 0 = empty */
    uint32_t map3_shift; /* 64 - log2(slots) */
    uint32_t max_token_len;
    uint64_t serial; /* unique per tokenizer instance (caches key on it, not on the address) */
    /* Ids: rank r is emitted as id r unless rank_to_id is set (vocabularies
     * whose ids are not their merge priority, e.g. some tokenizer.json). */
    uint32_t *rank_to_id;
    uint32_t *id_to_rank; /* vocab_size entries, TK_NO_RANK for specials/gaps */
    tk_pattern pattern;
    char name[64];
    tk_special *specials; /* texts owned */
    size_t n_specials;
    uint32_t eot; /* TK_NO_RANK if none */
    uint8_t fingerprint[32];
    bool known; /* a known upstream vocabulary (sha256 matched) */
    /* The engine that runs this tokenizer (tk_engine.h; NULL: the rank
     * engine) and its own state, which only that engine's file touches. */
    const struct tk_engine *engine;
    void *engine_state;
    bool decode_only; /* token bytes for decoding only, no merge tables (SentencePiece-style BPE) */
    /* Some single bytes have no token (byte-level tokenizer.json such as
     * StarCoder's or Falcon's): only the hf engine runs it, and decides
     * what such a byte gives (HF's unk / byte_fallback / dropped). */
    bool partial_bytes;
    /* Document framing a tokenizer file asks for (tk_default_framing, hf.c):
     * pp = TK_PP_* (0: not a tokenizer.json); pp_bos / pp_eos: ids the
     * post-processor puts before / after a sequence (TK_NO_RANK: none). */
    uint8_t pp;
    uint32_t pp_bos, pp_eos;
    const char *pp_why; /* TK_PP_UNUSABLE: why (static string) */
    /* Set by tk_finalize when it refuses: the entries at fault, for the
     * loaders' messages (TK_NO_RANK when not applicable). */
    uint32_t bad_rank, bad_rank2, bad_id;
    const char *bad_what; /* what was wrong, a static string */
    /* Tables mapped from a file image (tk_image.c): the sections point into
     * it, tk_free unmaps it instead of freeing them. NULL: heap tables. */
    void *image;
    size_t image_len;
};

/* Lowest rank (stored as rank + 1, 0: none) of a token that can cover part
 * of a 2- or 3-byte character and bytes outside it, by what decides it:
 * see bpe.c, "merging from characters". Part of the table image. */
typedef struct tk_charmin {
    uint32_t pre1[256 * 64]; /* [byte before][lead & 63]: tokens ending with those two bytes */
    uint32_t suf1[64 * 256]; /* [continuation & 63][byte after]: tokens starting with exactly those */
    uint32_t suf2[4096];     /* tokens starting with exactly these two continuation bytes */
    uint32_t pre2[1024];     /* tokens ending with a 3-byte lead + 1 continuation, after another byte */
    uint32_t whole[65536];   /* per code point: tokens holding all of the character and more */
} tk_charmin;
tk_charmin *tk_charmin_build(const tk_tokenizer *t); /* NULL: out of memory */
void tk_charmin_note(tk_charmin *cm, const uint8_t *b, size_t n, uint32_t r);

/* A character's own merges, in the terms of one merge engine (bpe.c: ranks
 * of concatenations; hf.c: merge priorities). */
typedef struct {
    uint32_t first;      /* token of the first merge; CT_BC set when it is bytes 1-2 of a 3-byte character */
    uint32_t first_rank; /* its rank / priority */
    uint32_t whole;      /* token of the whole character (TK_NO_RANK: none) */
    uint32_t high;       /* highest rank / priority of the merges making it whole (TK_NO_RANK: not made) */
    uint32_t lim;        /* lowest straddle rank not keyed by a neighbour; 0: not worked out yet */
} char_slot;
#define CT_BC (1u << 31)
typedef struct tk_chartab {
    const tk_charmin *m; /* the straddle minima (the image's, or own) */
    tk_charmin *own;
    /* per BMP code point, worked out on first use, in blocks of 256 code
     * points allocated (zeroed and written: tk_zalloc_written) when a
     * character of the block first shows up: one script's text touches a
     * few blocks, not pages of a 1.3 MB table that calloc left on the zero
     * page (each taking a read fault and then a copy-on-write fault) */
    char_slot *blk[256];
} tk_chartab;
char_slot *tk_chartab_block(tk_chartab *ct, uint32_t hi);
/* The slot of code point cp (< 65536); NULL: out of memory. */
static inline char_slot *tk_chartab_slot(tk_chartab *ct, uint32_t cp) {
    char_slot *b = __atomic_load_n(&ct->blk[cp >> 8], __ATOMIC_ACQUIRE);
    if (!b && !(b = tk_chartab_block(ct, cp >> 8))) return NULL;
    return &b[cp & 255];
}
typedef const char_slot *(*tk_char_slot_fn)(const void *ctx, tk_chartab *ct, uint32_t cp, const uint8_t *c,
                                            unsigned len);
tk_chartab *tk_chartab_new(const tk_charmin *m, tk_charmin *own); /* takes own; NULL: out of memory */
void tk_chartab_free(struct tk_chartab *ct);
void tk_char_slot_set(char_slot *e, uint32_t first, uint32_t first_rank, uint32_t whole, uint32_t high, uint32_t lim);
int tk_char_parts(const tk_tokenizer *t, tk_chartab *ct, tk_char_slot_fn slot_of, const void *ctx, const uint8_t *p,
                  size_t n, uint64_t start[4], uint32_t *tok);
/* 1 when the merge of piece p[0..n) starts from characters (for tests). */
int tk_bpe_char_start(const tk_tokenizer *t, const uint8_t *p, size_t n);

static inline uint64_t tk_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        if (n >= 4) {
            uint32_t a, b;
            memcpy(&a, p, 4);
            memcpy(&b, p + n - 4, 4);
            w = ((uint64_t)a << 32) | b;
        } else {
            w = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
        }
        h = (h ^ w) * 0x94d049bb133111ebull;
    }
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

/* Equality of two n-byte strings without a libc call for short keys. */
static inline bool tk_bytes_eq(const uint8_t *a, const uint8_t *b, size_t n) {
    if (n >= 8 && n <= 16) {
        uint64_t x0, y0, x1, y1;
        memcpy(&x0, a, 8);
        memcpy(&y0, b, 8);
        memcpy(&x1, a + n - 8, 8);
        memcpy(&y1, b + n - 8, 8);
        return x0 == y0 && x1 == y1;
    }
    if (n >= 4 && n < 8) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4);
        memcpy(&y0, b, 4);
        memcpy(&x1, a + n - 4, 4);
        memcpy(&y1, b + n - 4, 4);
        return x0 == y0 && x1 == y1;
    }
    if (n < 4) {
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i]) return false;
        return true;
    }
    return memcmp(a, b, n) == 0;
}

/* The n <= 8 bytes at p as a zero-padded little-endian word. */
static inline uint64_t tk_short_word(const uint8_t *p, size_t n) {
    uint64_t w;
    if (n == 8) {
        memcpy(&w, p, 8);
    } else if (n >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        w = (uint64_t)lo | ((uint64_t)hi << ((n - 4) * 8)); /* overlap ORs equal bytes */
    } else {
        w = p[0];
        if (n > 1) w |= (uint64_t)p[1] << 8;
        if (n > 2) w |= (uint64_t)p[2] << 16;
    }
    return w;
}

static inline uint64_t tk_short_hash(uint64_t word, size_t n) {
    uint64_t h = (word ^ ((uint64_t)n << 59)) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* A 512 KiB bit filter (one bit per hash, false positives ~5% for 200k
 * tokens): merging asks mostly for byte strings that are not tokens, and
 * the filter answers those from L2 instead of probing the multi-MB map. */
#define TK_FILTER_BITS 22
static inline bool tk_filter_has(const tk_tokenizer *t, uint64_t h) {
    uint64_t b = h >> (64 - TK_FILTER_BITS);
    return (t->filter[b >> 6] >> (b & 63)) & 1;
}

static inline uint32_t tk_smap_get(const tk_tokenizer *t, uint64_t word, size_t n) {
    uint64_t h = tk_short_hash(word, n);
    if (!tk_filter_has(t, h)) return TK_NO_RANK;
    uint64_t i = h & t->smap.mask;
    for (;;) {
        const tk_shortslot *s = &t->smap.slots[i];
        if (!s->rank1) return TK_NO_RANK;
        if (s->word == word && s->len == n) return s->rank1 - 1;
        i = (i + 1) & t->smap.mask;
    }
}

/* Rank of the 3 bytes at p, or TK_NO_RANK: merging long runs asks mostly for
 * 3-byte strings, and this table is a few hundred KiB where the short map
 * and its filter are megabytes. */
static inline uint32_t tk_map3_get(const tk_tokenizer *t, const uint8_t *p) {
    uint64_t key = ((uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16) + 1;
    uint64_t mask = (~0ull) >> t->map3_shift;
    for (uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> t->map3_shift;; i = (i + 1) & mask) {
        uint64_t s = t->map3[i];
        if (!s) return TK_NO_RANK;
        if (s >> 32 == key) return (uint32_t)s;
    }
}

/* Rank of bytes p[0..n) (n > 8) whose tk_hash_bytes is h, or TK_NO_RANK. */
static inline uint32_t tk_lmap_get(const tk_tokenizer *t, const uint8_t *p, size_t n, uint64_t h) {
    if (!tk_filter_has(t, h)) return TK_NO_RANK;
    uint64_t tag = h >> 32, i = h & t->map.mask;
    for (;;) {
        uint64_t s = t->map.slots[i];
        if (!s) return TK_NO_RANK;
        if ((s >> 32) == tag) {
            uint32_t r = (uint32_t)s - 1;
            uint64_t off = t->tok_off[r], len = t->tok_off[r + 1] - off;
            if (len == n && tk_bytes_eq(t->arena + off, p, n)) return r;
        }
        i = (i + 1) & t->map.mask;
    }
}

/* Rank of bytes p[0..n), or TK_NO_RANK. h: tk_hash_bytes(p, n), only
 * used for keys longer than 8 bytes. */
static inline uint32_t tk_map_get_h(const tk_tokenizer *t, const uint8_t *p, size_t n, uint64_t h) {
    if (n <= 8) return n ? tk_smap_get(t, tk_short_word(p, n), n) : TK_NO_RANK;
    return tk_lmap_get(t, p, n, h);
}

static inline uint32_t tk_map_get(const tk_tokenizer *t, const uint8_t *p, size_t n) {
    if (n <= 8) return n ? tk_smap_get(t, tk_short_word(p, n), n) : TK_NO_RANK;
    return tk_lmap_get(t, p, n, tk_hash_bytes(p, n));
}

/* BPE-encode one piece, appending ranks to out. max_rank limits the merges
 * to tokens of rank < max_rank (TK_NO_RANK: no limit). */
int tk_bpe_piece(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t max_rank, tk_ids *out);
/* n * size zeroed bytes for a cache that is probed before it is stored to:
 * written once at allocation, not left on the shared zero page (see bpe.c).
 * NULL on overflow or out of memory. */
void *tk_zalloc_written(size_t n, size_t size);
/* Which vector code the flat merge runs: 0 baseline (SSE2), 1 AVX2, 2
 * AVX-512. force < 0: the best this CPU has; else at most force (tests run
 * every level the CPU allows). Returns the level now in force. */
int tk_simd_level(int force);
/* The long-piece path with an explicit chunk size (1..64), for tests. */
int tk_bpe_chunked(const tk_tokenizer *t, const uint8_t *p, size_t n, size_t chunk, tk_ids *out);

int tk_ids_reserve(tk_ids *v, size_t extra);
int tk_bytes_append(tk_bytes *b, const void *p, size_t n);

/* sha256 / sha1 helpers (nettle). */
void tk_sha256(const void *p, size_t n, uint8_t out[32]);
void tk_sha1_hex(const char *s, char out[41]);

/* Finish construction: build map, pair table, fingerprint. Takes ownership
 * of arena/tok_off already set on t. */
int tk_finalize(tk_tokenizer *t);
uint64_t tk_next_serial(void);

/* File images of built tables (tk_image.c). tk_image_load: 0 and *out when
 * an image of the rank file at path (requested pattern pat) is valid in
 * every byte, else 1; *src receives the file's stat (st_ino 0 when it
 * failed), for tk_image_save, which writes an image of t when t is a known
 * vocabulary, data/len (the bytes t was built from) its upstream file, and
 * the file is still what *src says. Neither reports errors: without an
 * image the rank file is parsed as usual. tk_image_body_digest: the XXH3-128
 * (hex) of the image body t would get, for tests/test_tk_image.c to compare
 * with tk_image_known_body(name), the value this build expects. */
struct stat;
int tk_image_load(const char *path, tk_pattern pat, tk_tokenizer **out, struct stat *src);
void tk_image_save(const char *path, tk_pattern pat, const tk_tokenizer *t, const struct stat *src, const uint8_t *data,
                   size_t len);
int tk_image_body_digest(const tk_tokenizer *t, char out[33]);
const char *tk_image_known_body(const char *name); /* NULL: no images for that vocabulary */
extern bool tk_image_skip_digests_for_tests;
int tk_set_specials(tk_tokenizer *t, const tk_special *sp, size_t n);

/* GPT-2 bytes_to_unicode: byte -> code point, and inverse for cp < 512. */
uint32_t tk_byte_to_cp(uint8_t b);
int tk_cp_to_byte(uint32_t cp); /* -1 if not a mapped code point */

void tk_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Untrusted files (tk_file.c). tk_open_regular: an fd open for blocking
 * reads on a regular file of at most max_bytes (its size in *size), or a
 * negative TK_ERR_* with err set; never blocks on a FIFO or device.
 * tk_read_regular: the whole file, NUL-terminated, read exactly.
 * tk_json_load: a JSON file parsed with duplicate keys refused and memory
 * bounded by TK_JSON_MEM_FACTOR x its size (TK_ERR_LIMIT beyond). */
int tk_open_regular(const char *path, size_t max_bytes, size_t *size, char *err, size_t errlen);
int tk_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *len, char *err, size_t errlen);
struct json_t;
int tk_json_load(const char *path, struct json_t **out, char *err, size_t errlen);
/* The same on bytes already read (file_len sets the memory budget). */
int tk_json_loadb(const char *path, const uint8_t *data, size_t len, size_t file_len, struct json_t **out, char *err,
                  size_t errlen);

/* HF tokenizer.json pipeline (hf_config.c). tk_hf_setup parses normalizer,
 * pre_tokenizer, model options, added tokens and decoder of root; merges
 * are (rank a, rank b, rank result) in file order (all TK_NO_RANK: a merge
 * that never applies); J: the vocabulary by string; raw_entries: some ids
 * are vocab entries outside the byte map or such merges. Either the rank
 * engine is proven to give HF's ids (t->pattern set, *out NULL) or *out is
 * the pipeline for the hf engine (load_hf.c attaches it as tk_engine_hf's
 * engine_state: the engine never names the loader); anything unsupported
 * is refused (err names the JSON path). forced: --pattern, refused unless it is what the file says. */
typedef struct tk_hf tk_hf;
struct tk_hfj_s;
int tk_hf_setup(tk_tokenizer *t, struct json_t *root, const char *file, const uint32_t (*merges)[3], size_t nm,
                const struct tk_hfj_s *J, bool raw_entries, tk_pattern forced, tk_hf **out, char *err, size_t errlen);
/* SentencePiece-style BPE (no ByteLevel): merges are (id a, id b, id result);
 * takes over the vocabulary arrays of *J. */
int tk_hf_setup_sp(tk_tokenizer *t, struct json_t *root, const char *file, const uint32_t (*merges)[3], size_t nm,
                   struct tk_hfj_s *J, tk_hf **out, char *err, size_t errlen);
/* Decode through the tokenizer.json decoder chain (SentencePiece-style);
 * first: the ids start the text (Metaspace/Strip take the prefix space). */
int tk_hf_decode(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out);
void tk_hf_free(tk_hf *h);
/* Encode through the pipeline: added tokens that are not special always,
 * specials when all or listed in allowed. */
int tk_hf_encode(const tk_tokenizer *t, const uint8_t *s, size_t n, const char *const *allowed, size_t n_allowed,
                 bool all, tk_ids *out);
void tk_compute_fingerprint(tk_tokenizer *t);
/* tokenizer.json post_processor -> t->pp, pp_bos, pp_eos (never refuses:
 * ids do not depend on it; an unusable one only needs --bos/--eos). */
enum { TK_PP_NONE = 0, TK_PP_TEMPLATE = 1, TK_PP_UNUSABLE = 2, TK_PP_ABSENT = 3 };
void tk_hf_post_processor(tk_tokenizer *t, struct json_t *root);
/* The built-in pattern a regex is (exactly, in one of its known spellings), or TK_PAT_NONE. */
tk_pattern tk_pattern_from_regex(const char *re);
/* 1: re is exactly cl100k's older spelling (Llama 3's tokenizer.json), 2:
 * Qwen's (the same with \p{N} for \p{N}{1,3}), else 0 (pattern.c). The
 * older spelling cuts a whitespace run that ends the text after its last
 * newline; tiktoken's current one does not: the two give the same ids
 * unless a token ends in a newline and whitespace after it
 * (tk_vocab_joins_nl_ws: true when one may). */
int tk_regex_cl100k_hf(const char *re);
bool tk_vocab_joins_nl_ws(const tk_tokenizer *t);

/* model.vocab and model.merges of a tokenizer.json as flat arrays
 * (hf_json.c). Strings are NUL-terminated, in file order. */
typedef struct tk_hfj_s {
    uint8_t *arena;
    const char **vkey;
    uint32_t *vlen, *vid;
    size_t nv;
    uint32_t max_id;
    const char **ma, **mb; /* merge parts */
    size_t nm;
    /* vocab key -> entry: the key's first 8 bytes inline (one cache line
     * answers keys of up to 8 bytes), hash tag and length */
    struct tk_hfj_slot {
        uint64_t word;
        uint32_t e1;
        uint16_t len, tag;
    } * slots; /* e1 = entry + 1; 0 = empty */
    size_t mask;
    uint8_t *rest; /* the file with vocab -> {} and merges -> [] */
    size_t rest_len;
} tk_hfj;
#define TK_HFJ_FALLBACK 1 /* not for the fast reader: read the file with jansson */
int tk_hfj_parse(const uint8_t *s, size_t n, tk_hfj *j);
int tk_hfj_index(tk_hfj *j);                                  /* TK_HFJ_FALLBACK on a duplicate key */
int tk_hfj_lookup(const tk_hfj *j, const char *k, size_t kl); /* entry or -1 */
/* A zeroed table of `bytes` (free with free()): pages written before they
 * are read, 2 MiB pages for big ones (MADV_HUGEPAGE) - loading speed. */
void *tk_table_alloc(size_t bytes);
/* Entries of every merge's parts and of their concatenation (-1: not in the
 * vocabulary), looked up in batches with prefetching (loading speed). */
int tk_hfj_resolve_merges(const tk_hfj *j, int32_t (*out)[3]);
void tk_hfj_free(tk_hfj *j);

/* Oniguruma-compatible regexes on PCRE2 (hf_regex.c). tk_regex_translate:
 * the PCRE2 pattern with Oniguruma's meaning (tk_regex_compile adds the
 * work-budget callouts to the same translation). */
typedef struct tk_regex tk_regex;
int tk_regex_translate(const char *re, size_t n, char **out, char *err, size_t errlen);
int tk_regex_compile(const char *re, size_t n, bool literal, tk_regex **out, char *err, size_t errlen);
void tk_regex_free(tk_regex *r);
/* The regex work one document may cost (docs/tokenizer.md, "Hostile
 * files"): units left, shared by every regex step the document goes
 * through; tk_re_budget_init gives TK_REGEX_WORK_BASE +
 * TK_REGEX_WORK_PER_BYTE x bytes. */
typedef struct {
    uint64_t left;
} tk_re_budget;
void tk_re_budget_init(tk_re_budget *b, size_t bytes);
/* Rust onig find_iter over s[0..n): fn(user, start, end) per match, the work
 * paid from *budget; TK_ERR_DOC_REGEX when it runs out (or PCRE2 hits its own
 * limits): the document is refused, no split is guessed. */
int tk_regex_find_all(const tk_regex *r, const uint8_t *s, size_t n, tk_re_budget *budget,
                      int (*fn)(void *, size_t, size_t), void *user);

/* The output bound of a normalizer or decoder step (docs/tokenizer.md,
 * "Hostile files"): a step whose input is `in` bytes, in a chain whose input
 * was `in0` bytes, may write at most TK_EXPAND_FACTOR x min(in, in0) +
 * TK_EXPAND_SLACK bytes; beyond that the text is refused with
 * TK_ERR_DOC_EXPAND before anything more is allocated. */
static inline size_t tk_expand_cap(size_t in, size_t in0) {
    size_t m = in < in0 ? in : in0;
    if (m > (SIZE_MAX - TK_EXPAND_SLACK) / TK_EXPAND_FACTOR) return SIZE_MAX;
    return m * TK_EXPAND_FACTOR + TK_EXPAND_SLACK;
}
/* Append to a step's output within its cap (TK_ERR_DOC_EXPAND beyond). */
static inline int tk_bytes_put_capped(tk_bytes *b, const void *p, size_t n, size_t cap) {
    if (!n) return TK_OK;
    if (n > cap || b->len > cap - n) return TK_ERR_DOC_EXPAND;
    return tk_bytes_append(b, p, n);
}

/* SentencePiece .model, model_type BPE (spm.c). tk_spm_sniff: the first
 * bytes look like a ModelProto. tk_spm_decode: first = the ids start the text
 * (the dummy-prefix space is taken off). tk_spm_charsmap_check: a
 * precompiled_charsmap blob is well formed (it and tk_spm_charsmap_b64 live
 * in normalize.c; HF's "Precompiled" normalizer walks the blob in
 * hf_normalize.c). */
typedef struct tk_spm tk_spm;
bool tk_spm_sniff(const uint8_t *p, size_t n);
int tk_spm_encode(const tk_tokenizer *t, const uint8_t *s, size_t n, tk_ids *out);
int tk_spm_decode(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out);
/* The same for tk_decoder_feed: byte pieces pass as raw bytes (a character split
 * between feeds is held back by the decoder, not replaced by U+FFFD). */
int tk_spm_decode_stream(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, tk_bytes *out);
/* The ops both SentencePiece engines (spm.c, unigram.c) share. */
int tk_spm_decode_op(const tk_tokenizer *t, const uint32_t *ids, size_t n, bool first, bool stream, tk_bytes *out);
int tk_spm_lossless_op(const tk_tokenizer *t);
int tk_spm_savable_op(const tk_tokenizer *t, int fmt);
void tk_spm_free(tk_spm *m);
int tk_spm_charsmap_check(const uint8_t *blob, size_t n);
int tk_spm_charsmap_b64(const char *s, size_t n, uint8_t **out, size_t *on);

/* Byte strings in byte order for the Unigram tries (key_sort.c): an entry is
 * a string's first 8 bytes big-endian (tk_key_head), its id and length;
 * tk_key_sort orders ent[0, n) by the whole strings (bytes(owner, id) gives
 * one), equal strings by id. TK_OK or TK_ERR_NOMEM. */
typedef struct {
    uint64_t head;
    uint32_t id, len;
} tk_key_ent;
uint64_t tk_key_head(const uint8_t *s, uint32_t len);
int tk_key_sort(tk_key_ent *ent, uint32_t n, const void *owner,
                const uint8_t *(*bytes)(const void *owner, uint32_t id));

/* The double array of a Unigram trie (key_trie.c): the child of slot s by
 * byte c is (base & ~TK_DA_TERMINAL) + c where its check is s. TERMINAL is
 * the caller's flag (a string it keeps ends there; bases stay below 2^31).
 * tk_da_build lays out ent[0, n) (sorted by tk_key_sort, distinct strings)
 * into *slot (*size slots used, 256 more allocated and free, so base + c
 * needs no bound check; free: check TK_DA_FREE) and sets at[i] to the slot
 * where ent[i]'s string ends (the root for an empty one); the callers keep
 * their payloads by slot, as wide as they need. Slots are placed depth
 * first, within about 4 per string byte (the bound of the placement).
 * TK_OK, TK_ERR_NOMEM or TK_ERR_LIMIT (over 2^31 slots). */
typedef struct {
    uint32_t check, base;
} tk_da_slot;
#define TK_DA_FREE UINT32_MAX
#define TK_DA_TERMINAL 0x80000000u
int tk_da_build(const tk_key_ent *ent, uint32_t n, const void *owner,
                const uint8_t *(*bytes)(const void *owner, uint32_t id), tk_da_slot **slot, size_t *size, uint32_t *at);

/* The walk of a common-prefix search down the double array, one byte at a
 * time (the Unigram lattices' inner loop, so inlined): from the root
 * (tk_da_walk_root), tk_da_walk_step moves to the child by byte c and
 * returns -1 where there is none (the search ends), 1 where a string the
 * caller marked TK_DA_TERMINAL ends at the new slot (w->node), else 0. */
typedef struct {
    uint32_t node, base; /* the slot reached, its base without the flag */
} tk_da_walk;
static inline tk_da_walk tk_da_walk_root(const tk_da_slot *sl) { return (tk_da_walk){0, sl[0].base & ~TK_DA_TERMINAL}; }
static inline __attribute__((always_inline)) int tk_da_walk_step(const tk_da_slot *sl, tk_da_walk *w, uint8_t c) {
    uint32_t nx = w->base + c;
    if (sl[nx].check != w->node) return -1;
    uint32_t b = sl[nx].base;
    w->node = nx;
    w->base = b & ~TK_DA_TERMINAL;
    return (b & TK_DA_TERMINAL) != 0;
}

#endif
