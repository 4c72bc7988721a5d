/* shard_internal.h - shard writer and header codec shared by dataset/shard.c
 * and the mkshards tools (not part of the public API). */
#ifndef DS_SHARD_INTERNAL_H
#define DS_SHARD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

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
int ds_shard_build_image(const ds_shard_header *h, const uint32_t *rows, const uint32_t *perm,
                         const uint32_t *valid, const uint32_t *sidx, const uint32_t *starts, int zstd_level,
                         ds_shard_image *out, char *err, size_t errlen);
void ds_shard_image_free(ds_shard_image *img);

/* Crash-safe write: path.tmp, fsync, rename, fsync of the directory. If the
 * file already exists with identical bytes it is left alone (*skipped = 1). */
int ds_write_file_atomic(const char *path, const void *data, size_t len, int *skipped, char *err,
                         size_t errlen);

/* Document starts of one row (at most row_len entries). */
int ds_shard_row_starts(const ds_shard *s, uint64_t row, uint32_t *starts, uint32_t *n_starts);

uint64_t ds_xxh3(const void *data, size_t len);

#endif
