/* shard_internal.h - shard writer and header codec shared by dataset/shard.c
 * and the mkshards tools (not part of the public API). */
#ifndef DS_SHARD_INTERNAL_H
#define DS_SHARD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ds_shard.h"

/* Encode/decode the 192-byte header (decode checks magic, version, header
 * size and the header checksum; returns DS_OK or DS_ERR_FORMAT). */
void ds_shard_header_encode(const ds_shard_header *h, uint8_t out[DS_SHARD_HEADER_BYTES]);
int ds_shard_header_decode(const uint8_t in[DS_SHARD_HEADER_BYTES], ds_shard_header *h, char *err, size_t errlen);

/* In-memory image of a whole shard file. */
typedef struct {
    uint8_t *data;
    size_t len;
    uint64_t file_xxh3;
} ds_shard_image;

/* Build the file image of a shard. h supplies dtype_bytes, flags, row_len,
 * n_rows, vocab_size, pad_id, eot_id, frame_rows (if DS_SHARD_F_ZSTD) and
 * fingerprint; the other fields are computed. rows: n_rows*row_len ids
 * (u32), valid[n_rows], sidx[n_rows+1], starts[sidx[n_rows]], all in input
 * order; output row j is input row perm[j] (perm NULL: identity). */
int ds_shard_build_image(const ds_shard_header *h, const uint32_t *rows, const uint32_t *perm, const uint32_t *valid,
                         const uint32_t *sidx, const uint32_t *starts, int zstd_level, ds_shard_image *out, char *err,
                         size_t errlen);
/* The same with per-token loss bits: loss NULL writes a version-1 shard
 * (byte-identical to ds_shard_build_image); otherwise a version-2 shard whose
 * loss section holds, for output row j, the ds_shard_loss_row_bytes(row_len)
 * bytes at loss + perm[j] * that (input order, bit i = byte i / 8, bit i % 8).
 * A bit set at or past a row's valid count is refused (DS_ERR_ARG). */
int ds_shard_build_image_loss(const ds_shard_header *h, const uint32_t *rows, const uint32_t *perm,
                              const uint32_t *valid, const uint32_t *sidx, const uint32_t *starts, const uint8_t *loss,
                              int zstd_level, ds_shard_image *out, char *err, size_t errlen);
void ds_shard_image_free(ds_shard_image *img);

/* Crash-safe write: path.tmp, fsync, rename, fsync of the directory. If the
 * file already exists with identical bytes it is left alone (*skipped = 1). */
int ds_write_file_atomic(const char *path, const void *data, size_t len, int *skipped, char *err, size_t errlen);

/* ds_shardset_open without DS_SHARD_OPEN_FULL (shard.c): the manifest, the
 * shards, the set-level checks and DS_SHARD_OPEN_VERIFY's hashes.
 * ds_shardset_open (verify.c) runs ds_verify first when asked, then this. */
int ds_shardset_open_files(const char *dir, int flags, ds_shardset **out, char *err, size_t errlen);

/* Document starts of one row (at most row_len entries). */
int ds_shard_row_starts(const ds_shard *s, uint64_t row, uint32_t *starts, uint32_t *n_starts);

uint64_t ds_xxh3(const void *data, size_t len);

/* ------------------------------------------------------------ manifest
 * The one reader of manifest.json (ds_shardset_open, mkshards verify,
 * inspect, merge and build's up-to-date check all use it). It opens only a
 * regular file of at most DS_MANIFEST_MAX_BYTES inside a directory, rejects
 * duplicate JSON keys, and checks the type and range of every field below,
 * so its users never meet a missing or mistyped one. Shard names are plain
 * file names (ds_shard_name_check); a name listed twice is refused. */
/* ds_manifest_shard: ds_shard.h (the public reader, ds_manifest_read, wraps this one). */
typedef struct {
    json_t *root; /* the parsed manifest (owned; config/accounting are the tools' to check) */
    char *path;   /* DIR/manifest.json, for messages */
    uint32_t seq_len, vocab_size, eot_id, pad_id, dtype_bytes;
    uint32_t shard_version; /* "shard_format_version": every listed shard's header version */
    int64_t bos_id, eos_id; /* -1: none (absent from the manifest: no BOS, EOS = eot_id) */
    uint8_t fingerprint[32];
    const char *tokenizer_name;
    size_t n_shards; /* in manifest order */
    ds_manifest_shard *shards;
} ds_manifest;

/* DS_OK, DS_ERR_IO (missing / not a regular file / not a directory),
 * DS_ERR_FORMAT (err names the manifest and the field), DS_ERR_NOMEM. */
int ds_manifest_load(const char *dir, ds_manifest *m, char *err, size_t errlen);
void ds_manifest_free(ds_manifest *m);
/* 0 if name is a plain file name: 1..NAME_MAX bytes (len = the JSON string's
 * length, so an embedded NUL is seen), no '/', no "..", no leading '.', no
 * control bytes. Otherwise -1 and why says what is wrong. */
int ds_shard_name_check(const char *name, size_t len, char *why, size_t whylen);

#endif
