/* spm_internal.h - the parsed SentencePiece ModelProto (spm.c), shared
 * with the engine that runs its Unigram models (unigram.c) and the loader
 * that hands each model to its engine (load_spm.c). Internal.
 * Calls go one way: load_spm.c -> unigram.c -> spm.c. */
#ifndef TK_SPM_INTERNAL_H
#define TK_SPM_INTERNAL_H

#include "normalize.h"
#include "tk_internal.h"

#include <stdbool.h>
#include <stdint.h>

struct tk_uni;

/* SP_DROPPED is ours, not the protobuf's: a piece sentencepiece leaves out of
 * its piece maps (load_pieces: a one-byte "\0" piece); its id stays, and
 * decodes as sentencepiece's Decode does (the piece is looked up again). */
enum { SP_NORMAL = 1, SP_UNKNOWN = 2, SP_CONTROL = 3, SP_USER = 4, SP_UNUSED = 5, SP_BYTE = 6, SP_DROPPED = 7 };
enum { MT_UNIGRAM = 1, MT_BPE = 2, MT_WORD = 3, MT_CHAR = 4 };
#define SPM_MAX_PIECE 8000                              /* sentencepiece refuses pieces of 8000 bytes or more */
#define SPM_NORM_RESULTS 32                             /* Normalizer::kMaxTrieResultsSize */
#define SPM_USER_RESULTS 64                             /* PrefixMatcher's kResultSize */
static const uint8_t SPACE_SYM[3] = {0xe2, 0x96, 0x81}; /* U+2581 */

typedef struct {
    const uint8_t *name, *cmap; /* into the file copy */
    size_t name_len, cmap_len;
    bool add_dummy_prefix, remove_extra_ws, escape_ws;
} spm_spec;

typedef struct {
    spm_spec spec;
    tk_cmap map;    /* n_units == 0: no charsmap (identity) */
    bool ws_suffix; /* trainer_spec.treat_whitespace_as_suffix */
    /* ASCII bytes other than ' ' that no charsmap rule and no user-defined
     * symbol starts with: they normalize to themselves, copied in runs */
    bool plain[128];
    bool plain_space; /* ' ' too (it is then escaped or squeezed one by one) */
    /* ASCII bytes that start keys (letters: "e" + a combining mark) but are
     * no key themselves and no user-defined symbol's first byte: they
     * normalize to themselves unless the next byte is in cont[b] (a step
     * of the trie from b's node) */
    bool plain_unless[128];
    uint64_t cont[128][4];
    /* every byte 0x21-0x7e is plain, or plain_unless with no ASCII byte in
     * its cont: a run of them copies as it is, but for its last byte when
     * a byte >= 0x80 follows (normalize's 16-byte steps) */
    bool graphic_plain;
    /* code points U+0080-U+FFFF (valid 2- and 3-byte characters) that no
     * key prefixes, whatever follows (the trie walk leaves before the
     * character's end with no key ended), and whose lead byte starts no
     * user-defined symbol: copied as they are */
    uint64_t ident[1024];
} spm_norm;

struct tk_spm {
    uint8_t *file; /* the model file (pieces and specs point into it) */
    size_t file_len;
    uint32_t n; /* pieces */
    const uint8_t **piece;
    uint32_t *plen;
    float *score;
    uint8_t *type;
    /* piece -> id: NORMAL, USER_DEFINED and UNUSED (what merges look up), and
     * the rest (UNKNOWN, CONTROL, BYTE), which PieceToId consults first */
    uint64_t *nmap, *rmap; /* slots: hash tag << 32 | (id + 1), 0 = empty */
    size_t nmask, rmask;
    uint32_t unk_id;
    uint32_t byte_id[256];
    bool byte_fallback;
    int model_type;
    /* user-defined symbols: first bytes and lengths */
    uint64_t user_first[4];
    uint32_t user_maxlen;
    uint32_t n_unused;
    uint32_t *unused_idx; /* id -> index among UNUSED pieces */
    uint32_t *shadow;     /* normal id -> the reserved id of the same string (PieceToId prefers it); NULL: none */
    spm_norm norm;
    spm_norm denorm; /* used when its charsmap is not empty */
    bool has_denorm;
    bool has_unk_surface;
    const uint8_t *unk_surface;
    size_t unk_surface_len;
    /* words: a cut is safe before a symbol starting with the space symbol
     * (after one ending with it when ws_suffix) whose neighbour across the
     * cut does not touch it (see split_ok in spm_setup) */
    bool split;
    int32_t bos_id, eos_id, pad_id; /* from trainer_spec, -1 if not a piece */
    uint64_t serial;                /* the tokenizer's (caches key on it) */
    struct tk_uni *uni;             /* model_type UNIGRAM: its lattice tables (unigram.c) */
};

/* spm.c: reads the ModelProto at path into *mp (m->uni unset) and the
 * tokenizer *tp that carries its pieces (no engine attached yet); on
 * failure both are NULL and err says why. tk_spm_free does not free m->uni
 * (the unigram engine's free op does). */
int tk_spm_read(const char *path, tk_tokenizer **tp, tk_spm **mp, char *err, size_t errlen);
/* spm.c: the describe op of SentencePiece BPE models. */
void tk_spm_describe(const tk_tokenizer *t, char *buf, size_t len);

/* Normalizer::Normalize of the model's normalizer_spec (user-defined symbols
 * pass unchanged); out is overwritten. */
int tk_spm_normalize(const tk_spm *m, const uint8_t *s, size_t n, tk_bytes *out);

/* unigram.c: builds m->uni (the piece trie and scores) at load; its engine
 * (tk_engine_unigram, whose state is such a tk_spm) frees m->uni, then m. */
int tk_unigram_build(tk_spm *m, char *err, size_t errlen, const char *path);
void tk_unigram_free(struct tk_uni *u);

#endif
