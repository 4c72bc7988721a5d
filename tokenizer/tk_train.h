/* tk_train.h - byte-level BPE vocabulary training (issue 5).
 *
 * Two stages:
 *   1. piece counting: documents are split with the chosen pre-tokenizer
 *      (tk_pretokenize) on several threads; distinct pieces are counted with
 *      64-bit counts in one hash map (memory ~ distinct pieces, not corpus).
 *   2. merging: distinct pieces become words of symbol ids (the 256 single
 *      bytes are ranks 0..255 in byte order); pair -> (count, words) index,
 *      a max-heap with lazy invalidation and incremental count updates.
 *
 * Tie-break (documented in docs/bpe-training.md): the pair with the highest
 * count is merged; among equal counts the pair whose (left token bytes,
 * right token bytes) is lexicographically smallest (memcmp order, a proper
 * prefix sorts first; left compared first, then right). Merge i creates rank
 * 256+i unless its bytes already are a token (then that rank is reused, as
 * HF tokenizers does, and no rank is added). Results never depend on thread
 * count, hash order or input order of the pieces.
 *
 * All functions return TK_OK or a negative TK_ERR_* code.
 */
#ifndef TK_TRAIN_H
#define TK_TRAIN_H

#include "tk.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t vocab_size;         /* total ids: ranks + specials (>= 256 + n_specials) */
    tk_pattern pattern;          /* TK_PAT_NONE -> o200k */
    const char *const *specials; /* appended after the merges, ids n_ranks, n_ranks+1, ... */
    size_t n_specials;
    uint64_t min_frequency;   /* pairs seen fewer times are never merged (0/1: no limit) */
    uint32_t max_token_bytes; /* merged tokens longer than this are never made (0, or above
                                     TK_MAX_TOKEN_BYTES: TK_MAX_TOKEN_BYTES, what the loaders accept) */
    uint32_t max_piece_bytes; /* longer pieces are cut into chunks at UTF-8 boundaries
                                     (0: default TK_TRAIN_DEFAULT_MAX_PIECE) */
    int threads;              /* counting and merging threads (0: all cores) */
    uint32_t par_min_words;   /* a merge whose word list is at least this long is applied
                                     on all threads (0: default TK_TRAIN_DEFAULT_PAR_MIN) */
    int progress;             /* print phase / merges / rate to stderr */
} tk_train_opts;

#define TK_TRAIN_DEFAULT_MAX_PIECE 1024u
#define TK_TRAIN_DEFAULT_PAR_MIN 16384u

void tk_train_opts_init(tk_train_opts *o);

/* ---- stage 1: piece counts */
typedef struct tk_piece_counts tk_piece_counts;
int tk_piece_counts_create(const tk_train_opts *o, tk_piece_counts **out);
void tk_piece_counts_free(tk_piece_counts *pc);
/* Pre-tokenize and count n documents on o->threads threads. */
int tk_piece_counts_add_docs(tk_piece_counts *pc, const tk_span *docs, size_t n);
/* Add one already split piece (chunked if longer than max_piece_bytes). */
int tk_piece_counts_add_piece(tk_piece_counts *pc, const uint8_t *piece, size_t len, uint64_t count);
size_t tk_piece_counts_distinct(const tk_piece_counts *pc);
uint64_t tk_piece_counts_total_bytes(const tk_piece_counts *pc); /* bytes counted (with multiplicity) */

/* ---- stage 2: merges */
typedef struct {
    uint32_t left, right, result; /* ranks */
} tk_merge;

typedef struct {
    uint32_t n_ranks; /* 256 + distinct merged tokens */
    uint8_t **tokens; /* token bytes in rank order (tokens[r], lens[r]) */
    uint32_t *lens;
    tk_merge *merges; /* in merge order (includes merges whose bytes repeated a token) */
    uint32_t n_merges;
    int hit_limit; /* 1 if training stopped before vocab_size (no eligible pair left) */
} tk_train_result;

int tk_train_merges(const tk_piece_counts *pc, const tk_train_opts *o, tk_train_result *res, char *err, size_t errlen);
void tk_train_result_free(tk_train_result *res);

/* Build an encoder from the result (specials get ids n_ranks + i). */
int tk_train_result_tokenizer(const tk_train_result *res, const tk_train_opts *o, tk_tokenizer **out);

/* Convenience: pre-tokenize + count + merge n in-memory documents. */
int tk_train(const tk_span *docs, size_t n, const tk_train_opts *o, tk_train_result *res, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
