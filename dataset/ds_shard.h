/* ds_shard.h - token shards: fixed-length rows of token ids written by
 * `mkshards build`, read by trainers. Included by ds.h.
 *
 * Format: docs/shard-format.md. A shard set is a directory holding
 * manifest.json and shard files (*.mks); the manifest lists the shards of
 * the train and validation splits in order.
 *
 * Reading is thread-safe: any number of threads may call ds_shardset_read /
 * ds_shard_read on the same handle at once (the files are mmap'ed; zstd
 * compressed shards are read with pread and decoded into a per-call buffer).
 *
 * Row semantics (what a trainer needs):
 *   tokens[i]    token id at position i (u32, whatever the on-disk dtype);
 *                padding positions hold the pad id (the EOT id).
 *   pos_ids[i]   position of token i inside its document segment: restarts
 *                at 0 where a document (or a piece of one) starts in the row;
 *                the first segment of a row starts at 0 as well.
 *   doc_ids[i]   0-based segment number inside the row (attention mask:
 *                token i may attend to j <= i iff doc_ids[i] == doc_ids[j]);
 *                padding positions get their own segment number (last + 1).
 *   loss_mask[i] 1 where token i is a target (the prediction of token i from
 *                the tokens before it is trained), else 0. Version-1 shards:
 *                1 for every real token (document tokens and their EOT), 0
 *                for padding. Version-2 shards store the bit per token (the
 *                loss section; chat / prompt-completion builds), never set on
 *                padding.
 * Any of the output arrays may be NULL. Arrays hold row_len entries.
 */
#ifndef DS_SHARD_H
#define DS_SHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DS_SHARD_MAGIC "MKSHARD\0" /* 8 bytes */
#define DS_SHARD_VERSION 1u        /* shards without a loss section: every real token is a target */
#define DS_SHARD_VERSION_LOSS 2u   /* shards with a per-token loss bit (the loss section) */
#define DS_SHARD_HEADER_BYTES 192u
#define DS_SHARD_BLOCK_BYTES 65536u /* granularity of the per-block checksums */

/* Limits a reader enforces on every header and manifest (docs/shard-format.md,
 * "Limits"); the writer never produces anything beyond them. They bound what
 * a crafted file can make a reader allocate: opening a shard maps the file
 * and allocates nothing in proportion to its header; reading a row of a zstd
 * shard allocates one decoded frame (at most DS_SHARD_MAX_FRAME_BYTES). */
#define DS_SHARD_MAX_ROW_LEN (1u << 24)         /* tokens per row (mkshards build --seq-len) */
#define DS_SHARD_MAX_VOCAB (1u << 24)           /* = TK_MAX_VOCAB */
#define DS_SHARD_MAX_TOKENS 0xFFFFFFFFull       /* rows x row length of one shard */
#define DS_SHARD_MAX_FRAME_BYTES (256ull << 20) /* decoded bytes of one zstd frame */
#define DS_SHARD_MAX_FILE_BYTES (1ull << 40)    /* one shard file */
#define DS_MANIFEST_MAX_BYTES (256u << 20)      /* manifest.json */
#define DS_MANIFEST_MAX_SHARDS (1u << 24)       /* shards listed in one manifest */

enum {
    DS_SHARD_F_ZSTD = 1u << 0,     /* token rows stored as independent zstd frames */
    DS_SHARD_F_VAL = 1u << 1,      /* the shard belongs to the validation split */
    DS_SHARD_F_SHUFFLED = 1u << 2, /* rows were permuted with the seeded shuffle */
    DS_SHARD_F_KNOWN = 7u          /* any other bit makes the header invalid */
};

/* Shard header as decoded from disk (all little-endian on disk). */
typedef struct {
    uint32_t version;
    uint32_t dtype_bytes; /* 2 (u16, vocab <= 65536) or 4 (u32) */
    uint32_t flags;       /* DS_SHARD_F_* */
    uint32_t row_len;     /* L */
    uint64_t n_rows;
    uint32_t vocab_size;
    uint32_t pad_id; /* id stored at padding positions (= EOT id) */
    uint32_t eot_id;
    uint32_t frame_rows; /* rows per zstd frame (0 when not compressed) */
    uint64_t n_frames;
    uint64_t n_starts;       /* entries in the document-start table */
    uint64_t tokens_bytes;   /* size of the token section on disk */
    uint64_t meta_bytes;     /* size of the row-metadata section */
    uint64_t n_blocks;       /* per-block checksums that follow the metadata */
    uint64_t payload_xxh3;   /* XXH3-64 of tokens + metadata sections */
    uint64_t blocks_xxh3;    /* XXH3-64 of the block checksum table */
    uint8_t fingerprint[32]; /* tokenizer fingerprint (tk_fingerprint) */
    uint64_t loss_bytes;     /* version 2: the loss section, n_rows x ceil(row_len / 8) bytes; version 1: 0 */
} ds_shard_header;

/* Bytes of one row's loss bits in a version-2 shard: bit i of the row is bit
 * (i % 8) of byte i / 8 (least significant first). */
static inline uint64_t ds_shard_loss_row_bytes(uint32_t row_len) { return ((uint64_t)row_len + 7) / 8; }

/* ------------------------------------------------------------ one shard */
typedef struct ds_shard ds_shard;

enum {
    DS_SHARD_OPEN_VERIFY = 1, /* hash the whole file on open (payload and block checksums) */
    DS_SHARD_OPEN_FULL = 2    /* ds_shardset_open: first ds_verify the set (all `mkshards verify` checks) */
};

/* Open a shard: checks magic, version, header checksum and that the file
 * size matches the header (cheap); with DS_SHARD_OPEN_VERIFY also the payload
 * checksum. Returns DS_OK or DS_ERR_IO / DS_ERR_FORMAT (err says why). */
int ds_shard_open(const char *path, int flags, ds_shard **out, char *err, size_t errlen);
void ds_shard_close(ds_shard *s);
const ds_shard_header *ds_shard_get_header(const ds_shard *s);
/* Read row `row` (0-based) into caller buffers (row_len entries each, any may
 * be NULL). n_valid (may be NULL) receives the count of non-pad tokens.
 * Thread-safe. DS_ERR_ARG for a row out of range, DS_ERR_FORMAT for corrupt
 * metadata or a frame that does not decode. */
int ds_shard_read(const ds_shard *s, uint64_t row, uint32_t *tokens, uint32_t *pos_ids, uint32_t *doc_ids,
                  uint8_t *loss_mask, uint32_t *n_valid);
/* ds_shard_read that says why a row is refused: err (may be NULL) receives
 * the reason with the byte offset where it is known ("offset 234584: row 0
 * document start 971 invalid", "row 3 position 7 (compressed): token id 600
 * is outside the vocabulary of 512 ids").
 * Every read checks what `mkshards verify` checks about the row it returns:
 * the valid count (<= row length), the row's span of the document-start
 * table and its starts (strictly increasing, below the valid count; they
 * make pos_ids / doc_ids) and, when tokens is asked for, the zstd frame and
 * every id (< vocab_size; the pad id at each padding position). A shard with
 * recomputed checksums still cannot hand a reader an id the model cannot
 * index or a segment layout verify refuses. */
int ds_shard_read_msg(const ds_shard *s, uint64_t row, uint32_t *tokens, uint32_t *pos_ids, uint32_t *doc_ids,
                      uint8_t *loss_mask, uint32_t *n_valid, char *err, size_t errlen);

/* The id checks of a read, for readers that map shard files themselves
 * (the Python package's direct paths): ROW_LEN little-endian ids of
 * DTYPE_BYTES (2 or 4) of which the first N_VALID are real: every real id <
 * vocab_size, every padding id = pad_id. DS_OK or DS_ERR_FORMAT. */
int ds_shard_check_ids(const void *ids, uint32_t dtype_bytes, uint32_t row_len, uint32_t n_valid, uint32_t vocab_size,
                       uint32_t pad_id);

/* Full check of one shard file (what `mkshards verify` runs per shard):
 * header, size, header/payload/block checksums, every id < vocab_size,
 * metadata invariants, every zstd frame. On failure returns DS_ERR_FORMAT
 * (or DS_ERR_IO) and err names the byte offset or range that is wrong.
 * file_xxh3 (may be NULL) receives the XXH3-64 of the whole file. */
int ds_shard_verify(const char *path, uint64_t *file_xxh3, char *err, size_t errlen);

/* What `mkshards verify` checked (ds_verify). */
typedef struct {
    int is_set;         /* 1: a shard set folder, 0: one shard file */
    uint64_t shards[2]; /* per split: [DS_SPLIT_TRAIN], [DS_SPLIT_VAL] */
    uint64_t rows[2];
    uint64_t tokens[2]; /* real (non-pad) tokens */
    uint32_t row_len;
    uint64_t loss_tokens[2]; /* targets (loss bit set; version 1: = tokens) */
    uint32_t shard_version;  /* of the shard / the set's shards */
    uint64_t file_xxh3;      /* one shard: XXH3-64 of the file */
} ds_verify_result;

/* Everything `mkshards verify PATH` checks. PATH a folder: its manifest, then
 * every listed shard with ds_shard_verify and against the manifest (file
 * checksum, rows, tokens, bytes, fingerprint, vocabulary, dtype, EOT / pad
 * ids, row length, split, compression, shuffle flag), one file under two
 * names, splits and accounting sums. PATH a file: ds_shard_verify and its
 * counts. DS_OK, or DS_ERR_FORMAT / DS_ERR_IO with the first problem (file
 * and byte offset) in err. res may be NULL. */
int ds_verify(const char *path, ds_verify_result *res, char *err, size_t errlen);

/* ------------------------------------------------------------- shard set */
typedef enum { DS_SPLIT_TRAIN = 0, DS_SPLIT_VAL = 1 } ds_split;
/* "train", "val" (the manifest's "split", shard file names, inspect --split,
 * Python's split argument); NULL past the last / -1 for another name, as the
 * other enum names (ds.h, dataset/ds_names.c). */
const char *ds_split_name(int v);
int ds_split_parse(const char *name, ds_split *out);

typedef struct {
    uint32_t row_len;
    uint32_t vocab_size;
    uint32_t eot_id;
    uint32_t pad_id;
    uint32_t dtype_bytes;
    uint8_t fingerprint[32]; /* tokenizer fingerprint; compare with tk_fingerprint */
    char tokenizer[64];      /* tokenizer name recorded in the manifest */
    uint64_t rows[2];        /* rows per split: [DS_SPLIT_TRAIN], [DS_SPLIT_VAL] */
    uint64_t tokens[2];      /* non-pad tokens per split */
    size_t n_shards[2];
    int64_t bos_id, eos_id;  /* framing of each document (manifest "tokenizer.bos_id"/"eos_id"; -1: none);
                                  a manifest without them: no BOS, EOS = eot_id */
    uint32_t shard_version;  /* DS_SHARD_VERSION (every real token a target) or DS_SHARD_VERSION_LOSS */
    uint64_t loss_tokens[2]; /* targets per split (the manifest's per-shard "loss_tokens"; = tokens for version 1) */
} ds_shardset_info;

typedef struct ds_shardset ds_shardset;
/* Open the shard set in dir (reads dir/manifest.json, opens every shard with
 * the cheap checks, checks that each agrees with the manifest: rows, row
 * length, vocabulary, fingerprint). flags: DS_SHARD_OPEN_VERIFY also hashes
 * every file against the manifest; DS_SHARD_OPEN_FULL runs ds_verify on dir
 * first (every check of `mkshards verify`: each row's metadata and ids, the
 * accounting; it hashes every file, so VERIFY adds nothing to it). */
int ds_shardset_open(const char *dir, int flags, ds_shardset **out, char *err, size_t errlen);
void ds_shardset_close(ds_shardset *s);
void ds_shardset_get_info(const ds_shardset *s, ds_shardset_info *info);
uint64_t ds_shardset_rows(const ds_shardset *s, ds_split split);
/* Read row `row` (0-based within the split, shards in manifest order), with
 * ds_shard_read's checks. */
int ds_shardset_read(const ds_shardset *s, ds_split split, uint64_t row, uint32_t *tokens, uint32_t *pos_ids,
                     uint32_t *doc_ids, uint8_t *loss_mask);
/* The same with the reason of a refusal in err ("DIR/train-00000.mks: offset
 * ...: row 0 ..."; err may be NULL). */
int ds_shardset_read_msg(const ds_shardset *s, ds_split split, uint64_t row, uint32_t *tokens, uint32_t *pos_ids,
                         uint32_t *doc_ids, uint8_t *loss_mask, char *err, size_t errlen);
/* Shards of a split, in order (paths valid until close). */
size_t ds_shardset_n_shards(const ds_shardset *s, ds_split split);
const ds_shard *ds_shardset_shard(const ds_shardset *s, ds_split split, size_t i, const char **path);

/* ------------------------------------------------------------- manifest reader
 * DIR/manifest.json as checked values (dataset/manifest_info.c), through the
 * one reader of manifests that ds_shardset_open, ds_verify and ds_merge use:
 * a regular file of at most DS_MANIFEST_MAX_BYTES, no duplicate keys, every
 * field below present with its type and range (the config by the rules
 * ds_build accepts, the accounting's counters), shard names plain file names.
 * The "as recorded" summaries are the manifest's own figures (0 / "" when
 * absent); ds_verify checks that they agree with the shards. ds.h adds
 * ds_manifest_account (the accounting). */
typedef struct {
    const char *file; /* plain file name inside the set's directory */
    int split;        /* DS_SPLIT_TRAIN or DS_SPLIT_VAL */
    uint64_t rows, tokens, bytes, xxh3;
    uint64_t loss_tokens; /* targets ("loss_tokens"; version-1 sets: = tokens) */
} ds_manifest_shard;

typedef struct {
    /* tokenizer */
    const char *tokenizer_name;
    uint8_t fingerprint[32];
    uint32_t vocab_size, eot_id, pad_id, seq_len, dtype_bytes;
    int64_t bos_id, eos_id; /* -1: none */
    /* config: what the set was built with */
    const char *tokenizer_spec; /* config.tokenizer as recorded: a path or a name, never opened here */
    int pack;                   /* ds_pack (ds.h; ds_pack_name) */
    int over_long;              /* ds_over_long (ds_over_long_name) */
    double val_fraction;
    uint64_t seed;
    int shuffle, zstd_level;
    uint32_t frame_rows, part_k, part_n;
    /* as recorded: "splits" ([DS_SPLIT_TRAIN], [DS_SPLIT_VAL]) and accounting totals */
    uint64_t split_shards[2], split_rows[2], split_tokens[2];
    uint64_t docs_in, tokens_in, tokens_written;
    char utilisation[33]; /* non-pad tokens / row tokens: its fixed-digit text (32 bytes at most) */
    size_t n_shards;      /* in manifest order */
    const ds_manifest_shard *shards;
    uint32_t shard_version; /* "shard_format_version": 1, or 2 (per-token loss bits) */
    void *impl;             /* the reader's own (freed by ds_manifest_info_free) */
} ds_manifest_info;

/* DS_OK, DS_ERR_IO (missing / not a regular file / not a directory),
 * DS_ERR_FORMAT (err names the manifest and the field), DS_ERR_NOMEM. On
 * failure *m needs no free. */
int ds_manifest_read(const char *dir, ds_manifest_info *m, char *err, size_t errlen);
void ds_manifest_info_free(ds_manifest_info *m);

/* Helpers shared with the tools. */
void ds_shard_hex(const uint8_t *bytes, size_t n, char *out);  /* out: 2n+1 chars */
int ds_shard_unhex(const char *hex, uint8_t *bytes, size_t n); /* 0 ok, -1 bad */

#ifdef __cplusplus
}
#endif
#endif
