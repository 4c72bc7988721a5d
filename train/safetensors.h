/* safetensors.h - reader and writer of the safetensors format (internal
 * header of the train module; used by `llmtrain export` and --init-from).
 *
 * The format (https://github.com/huggingface/safetensors, "Format"):
 *   u64 N (little-endian)     size of the header
 *   N bytes                   UTF-8 JSON object, starting with '{', that may be
 *                             padded at the end with spaces (0x20)
 *   the byte buffer           every tensor's bytes, little-endian, row-major
 * The header maps each tensor name to {"dtype": "F32", "shape": [d0, ...],
 * "data_offsets": [begin, end]} (offsets relative to the byte buffer) and
 * may hold "__metadata__": an object of string values.
 *
 * A file is untrusted input. The reader refuses (TR_ERR_CORRUPT, a message
 * naming the file and the tensor, control bytes escaped):
 *   - N over TR_ST_MAX_HEADER (100,000,000 bytes: the reference reader's
 *     MAX_HEADER_SIZE) or over the file's size; a header that is not UTF-8,
 *     does not start with '{', is not one JSON object with nothing but spaces
 *     after it, or nests deeper than the format does;
 *   - duplicate names (tensors or __metadata__ keys), an empty name or one
 *     holding a NUL, unknown keys in a tensor's entry, a missing dtype /
 *     shape / data_offsets, a dtype that is not one of the format's, a rank
 *     over TR_ST_MAX_RANK, numbers that are not plain non-negative integers
 *     or do not fit 64 bits;
 *   - a shape whose element count x dtype size overflows 64 bits or differs
 *     from end - begin, begin > end, and offsets that do not tile the byte
 *     buffer exactly: sorted by offset each tensor starts where the previous
 *     one ends, the first at 0, the last ending at the end of the file (no
 *     overlap, no hole, nothing outside the file - the spec's "entirely
 *     indexed, no holes" rule).
 * Memory: the header is read only after N is checked against the file size;
 * its strings go to one arena of N + 1 bytes and each table entry stands for
 * at least 6 header bytes, so the reader allocates at most about 4 x N + 1 KiB
 * (bounded by what the file holds).  Only regular files are opened.
 *
 * The writer follows the reference writer: compact JSON, "__metadata__"
 * first, tensors laid out by decreasing dtype size then name (so each is
 * aligned to its element size), the header padded with spaces to a multiple
 * of 8 bytes; the file is written to PATH.tmp, fsynced and renamed.
 *
 * Functions return TR_OK or a negative TR_ERR_* (tr.h) with a one-line
 * message in err; they never exit. */
#ifndef TR_SAFETENSORS_H
#define TR_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TR_ST_MAX_HEADER 100000000ull
#define TR_ST_MAX_RANK 8

typedef enum {
    TR_ST_BOOL,
    TR_ST_U8,
    TR_ST_I8,
    TR_ST_F8_E5M2,
    TR_ST_F8_E4M3,
    TR_ST_I16,
    TR_ST_U16,
    TR_ST_F16,
    TR_ST_BF16,
    TR_ST_I32,
    TR_ST_U32,
    TR_ST_F32,
    TR_ST_F64,
    TR_ST_I64,
    TR_ST_U64,
    TR_ST_NDTYPES
} tr_st_dtype;
const char *tr_st_dtype_name(tr_st_dtype d); /* "F32", ... NULL if out of range */
size_t tr_st_dtype_size(tr_st_dtype d);      /* bytes per element, 0 if out of range */

typedef struct {
    char *name; /* NUL-terminated, no NUL inside */
    tr_st_dtype dtype;
    int rank;
    uint64_t shape[TR_ST_MAX_RANK];
    uint64_t numel;      /* product of shape (1 for rank 0) */
    uint64_t begin, end; /* offsets in the byte buffer */
} tr_st_tensor;

typedef struct {
    tr_st_tensor *t; /* sorted by name */
    size_t n;
    char **meta_key, **meta_val; /* __metadata__, in file order */
    size_t n_meta;
    uint64_t data_start; /* 8 + N: file offset of the byte buffer */
    uint64_t data_len;   /* bytes of the byte buffer */
    int fd;              /* -1 for a parsed header without a file */
    char path[512];      /* for messages */
    char *arena_;        /* private: the strings' storage */
} tr_st_file;

/* Parse a header (the N JSON bytes) for a byte buffer of data_len bytes and
 * check it as described above. out->fd = -1. what names the file in
 * messages. The fuzz target calls this directly. */
int tr_st_parse(const uint8_t *json, size_t n, uint64_t data_len, const char *what, tr_st_file *out, char *err,
                size_t errlen);
/* Open a regular file, read and check its header. */
int tr_st_open(const char *path, tr_st_file *out, char *err, size_t errlen);
void tr_st_close(tr_st_file *f);
/* The tensor called name, NULL if there is none (binary search). */
const tr_st_tensor *tr_st_find(const tr_st_file *f, const char *name);
/* __metadata__[key], NULL if absent. */
const char *tr_st_meta(const tr_st_file *f, const char *key);
/* Read a F32, BF16 or F16 tensor as n fp32 values (n must be its numel):
 * TR_ERR_ARG for another count or dtype, TR_ERR_IO when the read fails. */
int tr_st_read_f32(const tr_st_file *f, const tr_st_tensor *t, float *dst, uint64_t n, char *err, size_t errlen);

/* ---- writer ---- */
typedef struct {
    const char *name;
    tr_st_dtype dtype;
    int rank;
    uint64_t shape[TR_ST_MAX_RANK];
    const void *data; /* numel x dtype size bytes, little-endian */
    /* Instead of data (NULL): fp32 values converted to dtype (TR_ST_F32 or
     * TR_ST_BF16) while the file is written, TR_ST_CHUNK elements at a time,
     * so an export needs no second copy of the weights (issue 30). src_rows
     * > 0: src is (src_rows, numel / src_rows) row-major and is written
     * transposed (GPT-2's Conv1D layout). */
    const float *src;
    uint64_t src_rows;
} tr_st_out;
#define TR_ST_CHUNK (1u << 18) /* elements converted per write: 1 MiB of fp32 */
/* fp32 -> bf16, round to nearest even; NaN stays NaN (quiet). */
uint16_t tr_st_f32_to_bf16(float x);
/* Write n tensors (unique, non-empty names) and n_meta key/value metadata
 * strings to path (PATH.tmp, fsync, rename, fsync of the folder). */
int tr_st_write(const char *path, const tr_st_out *t, size_t n, const char *const *meta_key,
                const char *const *meta_val, size_t n_meta, char *err, size_t errlen);

/* Write the concatenation of n parts to path atomically (PATH.tmp created
 * fresh with O_EXCL|O_NOFOLLOW after unlinking a leftover, fsync, rename,
 * fsync of the folder) - what train/ckpt.c does for ckpt.bin. */
int tr_st_write_atomic(const char *path, const void *const *part, const size_t *len, size_t n, char *err,
                       size_t errlen);

/* ---- a model folder: model.safetensors or model.safetensors.index.json ----
 * The index ({"metadata": {...}, "weight_map": {"tensor": "file", ...}}) is
 * read with a size bound (TR_ST_MAX_INDEX bytes); each file it names must be
 * a plain name in the same folder (no '/', not "." or ".."), at most
 * TR_ST_MAX_SHARDS files; every tensor of a file must be in the map with
 * that file, and every mapped tensor must be in its file (TR_ERR_CORRUPT). */
#define TR_ST_MAX_INDEX (16ull << 20)
#define TR_ST_MAX_SHARDS 4096
typedef struct {
    tr_st_file *files;
    size_t n_files;
} tr_st_set;
int tr_st_set_open(const char *dir, tr_st_set *out, char *err, size_t errlen);
void tr_st_set_close(tr_st_set *s);
/* Find a tensor in a set: returns it and its file in *file, NULL if none. */
const tr_st_tensor *tr_st_set_find(const tr_st_set *s, const char *name, const tr_st_file **file);
/* Number of tensors over all files. */
size_t tr_st_set_count(const tr_st_set *s);

#ifdef __cplusplus
}
#endif
#endif /* TR_SAFETENSORS_H */
