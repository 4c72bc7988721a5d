/* load_internal.h - helpers shared by the vocabulary loaders (not public).
 *
 * load_tiktoken.c (rank files), load_gpt2.c (encoder.json + vocab.bpe),
 * load_hf.c (tokenizer.json) and load_resolve.c (tk_load: a path or name to
 * its loader) use these; load_common.c defines them. */
#ifndef TK_LOAD_INTERNAL_H
#define TK_LOAD_INTERNAL_H

#include "tk_internal.h"

#include <jansson.h>

/* A run of special tokens in a known vocabulary's list: the literal text
 * (count 0), or count texts fmt % (first + i) (fmt holds one %u). */
typedef struct {
    const char *fmt;
    uint32_t first, count;
} tk_special_run;

/* Upstream vocabularies, recognised by the sha256 of their rank file. */
typedef struct {
    const char *name;
    const char *sha256;
    tk_pattern pat;
    tk_special specials[6];
    /* Meta's Llama files: the special tokens as their tokenizer.py lists
     * them, ids from the number of ranks up (specials[] unused); NULL-fmt
     * terminated. BOS/EOS by name (<|begin_of_text|> / <|end_of_text|>). */
    const tk_special_run *runs;
} tk_known_vocab;

/* The known vocabulary whose rank file (data[0..n)) has this sha256, or NULL. */
const tk_known_vocab *tk_ld_known_by_sha(const uint8_t *data, size_t n);
size_t tk_ld_n_known_specials(const tk_known_vocab *kv);
/* A known vocabulary's specials listed by runs (kv->runs), ids from base;
 * *sp owned by the caller (tk_ld_free_specials). */
int tk_ld_known_run_specials(const tk_known_vocab *kv, uint32_t base, tk_special **sp, size_t *nsp);

bool tk_ld_is_dir(const char *p);
/* Something is there (a file, FIFO, device ...): the loaders refuse what is
 * not a regular file, with a message, instead of looking elsewhere. */
bool tk_ld_exists(const char *p);
/* A path built from parts; false (and a message) if it does not fit. */
bool tk_ld_join_path(char *out, size_t cap, const char *dir, const char *name, char *err, size_t errlen);

/* A token text or key as it may be shown in a message: control bytes
 * (terminal escapes in a hostile file) as \xNN, at most ~60 bytes. */
const char *tk_ld_shown(const char *s, char buf[static 160]);
const char *tk_ld_json_kind(const json_t *v);
/* A token id from JSON: an integer (not a float, string or boolean) in
 * 0..TK_MAX_VOCAB-1; what/entry name it in the message. */
int tk_ld_json_id(const json_t *v, const char *file, const char *what, const char *entry, uint32_t *id, char *err,
                  size_t errlen);
void tk_ld_free_specials(tk_special *sp, size_t n);

/* Tokens under construction, by rank. */
typedef struct {
    uint8_t *arena;
    size_t len, cap;
    uint64_t *off; /* by rank: start; UINT64_MAX = unset */
    uint32_t *tlen;
    uint32_t n; /* number of ranks (slots) */
} tk_tokvec;
int tk_ld_tv_init(tk_tokvec *v, uint32_t n);
int tk_ld_tv_set(tk_tokvec *v, uint32_t rank, const uint8_t *p, size_t n);
void tk_ld_tv_free(tk_tokvec *v);
/* What tk_finalize refused, as a message naming the file and the entries. */
void tk_ld_finalize_msg(const tk_tokenizer *t, int rc, const char *file, const char *sp_file, char *err, size_t errlen);
/* Move a complete tk_tokvec into a new tokenizer (arena laid out by rank);
 * _x: how = TK_LD_* flags. */
int tk_ld_tv_build(tk_tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                   const char *name, const char *file, const char *sp_file, tk_tokenizer **out, char *err,
                   size_t errlen);
enum {
    TK_LD_DECODE_ONLY = 1u,  /* token bytes kept for decoding alone (SentencePiece-style BPE) */
    TK_LD_PARTIAL_BYTES = 2u /* some single bytes may have no token (HF byte-level: hf.c decides) */
};
int tk_ld_tv_build_x(tk_tokvec *v, tk_pattern pat, const tk_special *sp, size_t nsp, uint32_t *rank_to_id,
                     const char *name, const char *file, const char *sp_file, unsigned how, tk_tokenizer **out,
                     char *err, size_t errlen);

/* Decode a byte-level-mapped UTF-8 string into raw bytes; -1 if a character
 * is not in the byte map or the result exceeds cap. */
long tk_ld_bytelevel_decode(const char *s, uint8_t *out, size_t cap);

#endif
