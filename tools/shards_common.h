/* shards_common.h - pieces shared by mkshards build and merge: the shard
 * writer (row accumulation, seeded per-shard shuffle, crash-safe writes),
 * accounting, build configuration and manifest I/O. */
#ifndef MKS_SHARDS_COMMON_H
#define MKS_SHARDS_COMMON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "ds.h"
#include "shard_internal.h"

#define SH_HIST_BINS 40
#define SH_MAX_PARTS 1000000 /* mkshards build --part K/N: N at most */

/* Accounting (all counters additive across parts). */
typedef struct {
    uint64_t records, bytes_in;                   /* every record the reader produced */
    uint64_t docs_whole, docs_truncated, docs_chunked, docs_dropped, docs_rejected;
    uint64_t tok_whole, tok_trunc_kept, tok_trunc_lost, tok_chunked, tok_dropped;
    uint64_t eot, pad, pieces;                    /* EOT tokens written, pad tokens, bfd/chunk pieces */
    uint64_t rejected_bytes;
    uint64_t reasons[16];                         /* rejects per reason (sh_reason_name) */
    uint64_t docs_split[2], rows[2], shards[2];   /* per split (train, val) */
    uint64_t hist[SH_HIST_BINS];                  /* accepted documents by token count: bin 0 = 0,
                                                     bin k = [2^(k-1), 2^k) */
} sh_account;

enum {
    SH_R_ZSTD = 0, SH_R_JSON, SH_R_FIELD_MISSING, SH_R_FIELD_TYPE, SH_R_TOO_LARGE, SH_R_UTF8, SH_R_NUL,
    SH_R_OVERLONG_DROP, SH_R_COUNT
};
const char *sh_reason_name(int r);

typedef enum { PACK_CONCAT = 0, PACK_BFD = 1, PACK_NONE = 2 } sh_pack;
typedef enum { OL_TRUNCATE = 0, OL_CHUNK = 1, OL_DROP = 2 } sh_overlong;

/* Everything that determines the bytes of the output (the manifest's "config"). */
typedef struct {
    char tokenizer_spec[512];
    char tokenizer_name[64];
    uint8_t fingerprint[32];
    uint32_t vocab_size, eot_id;
    uint32_t seq_len;
    sh_pack pack;
    sh_overlong over_long;
    uint64_t bfd_window;      /* rows per BFD window */
    double val_fraction;
    uint64_t seed;
    int shuffle;
    uint64_t shard_tokens;
    int zstd_level;           /* 0 = uncompressed */
    uint32_t frame_rows;
    char field[256];
    char doc_sep[16];
    uint32_t part_k, part_n;  /* 1/1 for a whole build */
    size_t n_inputs;
    char **inputs;            /* the INPUT arguments as given */
    size_t n_files;
    char **files;             /* the input files of this part, in order */
    uint64_t *file_bytes;
} sh_config;

void sh_config_free(sh_config *c);
uint64_t sh_rows_per_shard(const sh_config *c);
/* JSON for the config (part included). */
json_t *sh_config_json(const sh_config *c);
/* Parse a manifest's config back: every field present, of its type and in
 * the range `mkshards build` accepts (part: 1 <= K <= N <= SH_MAX_PARTS);
 * -1 with err naming the field otherwise (c must then be freed). */
int sh_config_from_json(json_t *j, sh_config *c, char *err, size_t errlen);

/* One finished shard. */
typedef struct {
    char file[64];
    int split;
    uint64_t rows, tokens, bytes, xxh3;
} sh_shard_rec;

/* The writer for one split: accumulates rows; writes a shard every
 * rows_per_shard rows (rows permuted by the seeded shuffle). */
typedef struct {
    const sh_config *cfg;
    int split;
    uint64_t rows_per_shard;
    uint32_t *tok;   /* rows * L */
    uint32_t *valid; /* rows */
    uint32_t *sidx;  /* rows + 1 */
    uint32_t *starts;
    size_t n_rows, cap_rows, n_starts, cap_starts;
    uint64_t shard_index;
    const char *out_dir;
    sh_shard_rec **recs; /* shared list (both splits), appended in write order */
    size_t *n_recs, *cap_recs;
    uint64_t written_skipped; /* shards found already complete (resume) */
    char err[512];
} sh_writer;

void sh_writer_init(sh_writer *w, const sh_config *cfg, int split, const char *out_dir, sh_shard_rec **recs,
                    size_t *n_recs, size_t *cap_recs);
/* Add one row: tokens[0..n_valid) real tokens (rest padded), starts = document
 * starts inside the row. Writes a shard when full. DS_OK or <0 (w->err). */
int sh_writer_add(sh_writer *w, const uint32_t *tokens, uint32_t n_valid, const uint32_t *starts, uint32_t n_starts,
                  sh_account *acc);
int sh_writer_finish(sh_writer *w, sh_account *acc);
void sh_writer_free(sh_writer *w);
/* The permutation used for shard `shard_index` of `split` with n rows:
 * output row j holds input row perm[j]. */
void sh_shuffle_perm(uint64_t seed, int split, uint64_t shard_index, uint32_t *perm, uint64_t n);
void sh_shard_name(int split, uint64_t index, char *out, size_t outlen);

/* Manifest: write (crash-safe, last) and read. */
int sh_manifest_write(const char *dir, const sh_config *cfg, const sh_account *acc, const sh_shard_rec *recs,
                      size_t n_recs, char *err, size_t errlen);
json_t *sh_account_json(const sh_account *acc, const sh_config *cfg);
/* Strict: every counter present and >= 0, the histogram at most SH_HIST_BINS
 * long; -1 with err naming the field otherwise. */
int sh_account_from_json(json_t *j, sh_account *acc, char *err, size_t errlen);
/* Load dir/manifest.json through ds_manifest_load (regular file, size limit,
 * every top-level and per-shard field checked; NULL + err if missing/bad).
 * config and accounting are checked by sh_config_from_json /
 * sh_account_from_json. */
json_t *sh_manifest_load(const char *dir, char *err, size_t errlen);

/* Remove DIR/<name>.tmp files and shard files (train-*.mks, val-*.mks) not listed. */
void sh_clean_dir(const char *dir, const sh_shard_rec *keep, size_t n_keep);

/* Strict UTF-8 check (no overlongs, surrogates or > U+10FFFF): returns the
 * offset of the first invalid byte or len if valid. */
size_t sh_utf8_invalid_at(const uint8_t *p, size_t len);

#endif
