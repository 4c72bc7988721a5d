/* build_internal.h - the pieces of ds_build and ds_merge (not public API):
 * build configuration and manifest I/O (build_manifest.c), the shard writer
 * (shard_writer.c), the packers (pack.c), resume checkpoints
 * (build_resume.c), input expansion and partition (build_inputs.c) and the
 * output folder's protocol (build_outdir.c). `mkshards inspect` / `verify`
 * read configs and accounting through ds_build_config_from_json /
 * ds_build_account_from_json. */
#ifndef DS_BUILD_INTERNAL_H
#define DS_BUILD_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ds.h"
#include "shard_internal.h"

/* Everything that determines the bytes of the output (the manifest's "config"). */
typedef struct {
    char tokenizer_spec[512];
    /* a rank file's --pattern REGEX / --normalize (tk_get_regex /
     * tk_get_norm), "" when not given: written to config only when given, so
     * every other manifest keeps its bytes (TK_MAX_PATTERN_BYTES + 1) */
    char tokenizer_regex[4097];
    char tokenizer_normalize[8];
    char tokenizer_name[64];
    uint8_t fingerprint[32];
    uint32_t vocab_size, eot_id; /* eot_id: the pad / separator id of the shard headers */
    /* framing: framed = 0 is the format before framing (no BOS, EOS = eot_id
     * = <|endoftext|>): nothing more is written, so such manifests keep their
     * bytes; framed = 1 writes config.framing, tokenizer.bos_id/eos_id ... */
    int framed;
    int64_t bos_id, eos_id;            /* -1: none */
    char bos_text[256], eos_text[256]; /* "" when not valid UTF-8 or too long (written as null) */
    uint32_t seq_len;
    ds_pack pack;
    ds_over_long over_long;
    uint64_t bfd_window; /* rows per BFD window */
    double val_fraction;
    uint64_t seed;
    int shuffle;
    uint64_t shard_tokens;
    int zstd_level; /* 0 = uncompressed */
    uint32_t frame_rows;
    char field[256];
    char doc_sep[16];
    uint32_t part_k, part_n; /* 1/1 for a whole build */
    /* fine-tuning records (config "records", written only when format is not text) */
    ds_format format;
    char chat_template[32];
    char messages_field[256];
    ds_loss_on loss_on;
    /* 1: the shards are version 2 with a per-token loss bit (builds whose
     * records carry loss masks: ds_packer_add_loss). Every shard of the set
     * is then version 2, whatever its rows' documents, so the bytes do not
     * depend on where --part cut the inputs; the manifest records it as
     * "shard_format_version": 2 and loss-token counts. 0: version-1 shards,
     * byte-identical to builds before loss bits existed. */
    int loss_bits;
    size_t n_inputs;
    char **inputs; /* the INPUT arguments as given */
    size_t n_files;
    char **files; /* the input files of this part, in order */
    uint64_t *file_bytes;
} ds_build_config;

void ds_build_config_free(ds_build_config *c);
uint64_t ds_build_rows_per_shard(const ds_build_config *c);
/* JSON for the config (part included). */
json_t *ds_build_config_json(const ds_build_config *c);
/* Parse a manifest's config back: every field present, of its type and in
 * the range ds_build accepts (part: 1 <= K <= N <= DS_BUILD_MAX_PARTS); -1
 * with err naming the field otherwise (c must then be freed). */
int ds_build_config_from_json(json_t *j, ds_build_config *c, char *err, size_t errlen);

/* ------------------------------------------------------------ shard writer */
/* One finished shard. */
typedef struct {
    char file[64];
    int split;
    uint64_t rows, tokens, bytes, xxh3;
    uint64_t loss_tokens; /* targets (loss bits set); = tokens when cfg->loss_bits is 0 */
} ds_shard_rec;

/* The writer for one split: accumulates rows; writes a shard every
 * rows_per_shard rows (rows permuted by the seeded shuffle). */
typedef struct {
    const ds_build_config *cfg;
    int split;
    uint64_t rows_per_shard;
    uint32_t *tok;   /* rows * L */
    uint32_t *valid; /* rows */
    uint32_t *sidx;  /* rows + 1 */
    uint32_t *starts;
    uint8_t *loss; /* cfg->loss_bits: rows x ds_shard_loss_row_bytes(L) bytes of loss bits; else NULL */
    size_t n_rows, cap_rows, n_starts, cap_starts;
    uint64_t shard_index;
    const char *out_dir;
    ds_shard_rec **recs; /* shared list (both splits), appended in write order */
    size_t *n_recs, *cap_recs;
    uint64_t written_skipped; /* shards found already complete (resume) */
    char err[512];
} ds_shard_writer;

void ds_shard_writer_init(ds_shard_writer *w, const ds_build_config *cfg, int split, const char *out_dir,
                          ds_shard_rec **recs, size_t *n_recs, size_t *cap_recs);
/* Add one row: tokens[0..n_valid) real tokens (rest padded), starts = document
 * starts inside the row. Writes a shard when full. DS_OK or <0 (w->err). */
int ds_shard_writer_add(ds_shard_writer *w, const uint32_t *tokens, uint32_t n_valid, const uint32_t *starts,
                        uint32_t n_starts, ds_build_account *acc);
/* The same with the row's loss mask: loss[i] != 0 (i < n_valid) makes token
 * i a target; loss NULL: every real token is one. A mask needs
 * cfg->loss_bits (DS_ERR_ARG otherwise). The targets are counted per shard
 * (ds_shard_rec.loss_tokens); ds_manifest_write sums them into the
 * accounting's tokens.loss, so callers do not count them. */
int ds_shard_writer_add_loss(ds_shard_writer *w, const uint32_t *tokens, const uint8_t *loss, uint32_t n_valid,
                             const uint32_t *starts, uint32_t n_starts, ds_build_account *acc);
int ds_shard_writer_finish(ds_shard_writer *w, ds_build_account *acc);
void ds_shard_writer_free(ds_shard_writer *w);
/* The permutation used for shard `shard_index` of `split` with n rows:
 * output row j holds input row perm[j]. */
void ds_shard_shuffle_perm(uint64_t seed, int split, uint64_t shard_index, uint32_t *perm, uint64_t n);
void ds_shard_file_name(int split, uint64_t index, char *out, size_t outlen);

/* ------------------------------------------------------------ manifest */
/* Write DIR/manifest.json (crash-safe; the last file of a build). */
int ds_manifest_write(const char *dir, const ds_build_config *cfg, const ds_build_account *acc,
                      const ds_shard_rec *recs, size_t n_recs, char *err, size_t errlen);
json_t *ds_build_account_json(const ds_build_account *acc, const ds_build_config *cfg);
/* Strict: every counter present and >= 0, the histogram at most
 * DS_BUILD_HIST_BINS long; -1 with err naming the field otherwise. */
int ds_build_account_from_json(json_t *j, ds_build_account *acc, char *err, size_t errlen);
/* DIR/manifest.json's root through ds_manifest_load (NULL + err if missing/bad). */
json_t *ds_manifest_load_root(const char *dir, char *err, size_t errlen);
/* Remove DIR/<name>.tmp files and, when keep is not NULL, shard files
 * (train-*.mks, val-*.mks) not listed in keep. */
void ds_build_clean_dir(const char *dir, const ds_shard_rec *keep, size_t n_keep);

/* Strict UTF-8 check (no overlongs, surrogates or > U+10FFFF): returns the
 * offset of the first invalid byte or len if valid. */
size_t ds_utf8_invalid_at(const uint8_t *p, size_t len);

/* ------------------------------------------------------------ packers (pack.c)
 * One packer per split turns documents (ids; EOT appended) into rows for
 * that split's writer: concat joins and cuts every L, bfd collects pieces of
 * at most L for a window and best-fit-decreasing packs them, none writes one
 * document per row (over_long decides about longer ones). */
typedef struct {
    uint32_t off, len, order, next;
} ds_piece;

typedef struct {
    const ds_build_config *cfg;
    ds_shard_writer *wr;
    ds_build_account *acc;
    /* concat (none: row only) */
    uint32_t *row; /* L */
    uint32_t fill;
    uint32_t *st; /* L + 1 */
    uint32_t n_st;
    uint8_t *rowl; /* cfg->loss_bits: the loss mask of row (L bytes, 1 = target) */
    /* bfd */
    uint32_t *pool;
    uint8_t *pooll; /* cfg->loss_bits: pool's loss mask (pool_cap bytes) */
    size_t pool_len, pool_cap;
    ds_piece *pc;
    size_t n_pc, cap_pc;
} ds_packer;

/* DS_OK or DS_ERR_NOMEM. */
int ds_packer_init(ds_packer *p, const ds_build_config *cfg, ds_shard_writer *wr, ds_build_account *acc);
void ds_packer_free(ds_packer *p);
/* Forget pending rows / pieces (a fresh start after a failed resume). */
void ds_packer_reset(ds_packer *p);
/* Add one accepted document; *dropped = 1 when --over-long drop dropped it.
 * DS_OK or <0 (the writer's err, or out of memory). */
int ds_packer_add(ds_packer *p, const uint32_t *ids, size_t n, int *dropped);
/* ds_packer_add with a loss mask (the chat / prompt-completion records'):
 * loss[i] != 0 makes ids[i] a target (its prediction from the tokens before
 * it is trained); loss NULL: every token is one, as ds_packer_add. The mask
 * follows its tokens through truncation, chunking and packing into the
 * version-2 shards' loss bits. Framing: a BOS the build puts before the
 * document is never a target of a masked document; the EOS after it is a
 * target when the document's last token is (an empty masked document: not).
 * Unmasked documents keep every framed token a target (what version-1
 * shards mean). A non-NULL mask needs cfg->loss_bits (DS_ERR_ARG). */
int ds_packer_add_loss(ds_packer *p, const uint32_t *ids, const uint8_t *loss, size_t n, int *dropped);
/* Write what is pending (a partial concat row, a BFD window). */
int ds_packer_flush(ds_packer *p);

/* ------------------------------------------------------------ resume (build_resume.c)
 * DIR/build.ckpt, written (crash-safe) at batch boundaries after a shard was
 * written: records processed, accounting, both splits' packer and writer
 * state (rows not yet in a shard), the shards written so far and the length
 * of rejects.jsonl.part. A rerun with the same config restores it, skips the
 * processed records (read, not parsed or encoded) and continues; the output
 * is the same bytes as an uninterrupted run. */
uint64_t ds_build_config_hash(json_t *cfgj, const uint8_t fp[32]);
int ds_ckpt_save(const char *dir, uint64_t cfg_hash, const ds_build_account *acc, uint64_t toks_total,
                 const char *cur_file, ds_packer *pk, ds_shard_writer *wr, const ds_shard_rec *recs, size_t n_recs,
                 uint64_t rej_len);
/* 0: restored; -1: no usable checkpoint (start from scratch). The file lies
 * in the output folder, which others may be able to write: everything is
 * checked before it is used. */
int ds_ckpt_load(const char *dir, uint64_t cfg_hash, ds_build_account *acc, uint64_t *toks_total, char **cur_file,
                 ds_packer *pk, ds_shard_writer *wr, ds_shard_rec **recs, size_t *n_recs, size_t *cap_recs,
                 uint64_t *rej_len);
void ds_ckpt_remove(const char *dir);

/* ------------------------------------------------------------ inputs (build_inputs.c) */
/* cfg->files / file_bytes: the files of part cfg->part_k of cfg->part_n of
 * the expanded cfg->inputs (folders recursive, sorted; contiguous ranges
 * balanced by bytes); then out_dir is refused when it is, lies in or holds an
 * input or one of the expanded files. DS_OK, DS_ERR_ARG ("--part cannot split
 * stdin"), DS_ERR_CONFLICT, DS_ERR_IO, DS_ERR_NOMEM. */
int ds_build_select_files(ds_build_config *cfg, const char *out_dir, char *err, size_t errlen);
/* Estimated decompressed bytes of one input (progress ETA). */
uint64_t ds_build_estimate_bytes(const char *path, uint64_t size);

/* ------------------------------------------------------------ output folder (build_outdir.c) */
int ds_mkdir_p(const char *dir);
/* Remove non-regular entries under the names a build reads or replaces. */
int ds_build_remove_special(const char *dir, char *err, size_t errlen);
/* The refusal build and merge share: DIR's manifest M (NULL: none, or not a
 * readable manifest) records another config or tokenizer fingerprint than
 * CFGJ / FP. *same = 1 when it records this one. DS_OK (same, none, or
 * force), or DS_ERR_CONFLICT with "'DIR' holds a build with a different
 * configuration; use another --out or --force". */
int ds_out_refuse_other(const char *dir, json_t *m, json_t *cfgj, const uint8_t fp[32], int force, int *same, char *err,
                        size_t errlen);
/* 1: DIR holds this build, verified (*n_checked shards); 0: rebuild (why[0]
 * set when a build with this config failed verification); DS_ERR_CONFLICT:
 * another config and no force (message in err). */
int ds_build_check_existing(const char *dir, json_t *cfgj, const uint8_t fp[32], int force, size_t *n_checked,
                            char *why, size_t whylen, char *err, size_t errlen);
/* DIR/rejects.jsonl.part: fresh, or on resume cut back to len and appended. */
FILE *ds_rejects_open(const char *path, int resume, uint64_t len);
int ds_rejects_write(FILE *f, const char *file, uint64_t line, uint64_t offset, int reason, const char *detail,
                     uint64_t bytes);

#endif
