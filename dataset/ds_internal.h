/* ds_internal.h - helpers shared by the dataset module (not public). */
#ifndef DS_INTERNAL_H
#define DS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ds.h"

#if defined(__GNUC__)
#define DS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DS_PRINTF(a, b)
#endif

void ds_set_err(char *err, size_t errlen, const char *fmt, ...) DS_PRINTF(3, 4);

/* ------------------------------------------------------------ reader.c
 * The input files every command reads, from its INPUT arguments: the one
 * folder walk (docs/reader.md "Inputs"; ds_reader_open uses it too), so
 * that build's file list (--part K/N, resume) is the list lint, encode and
 * hist read. A dataset-named entry of a folder that is not a regular file
 * (FIFO, socket, device, dangling link) is an error naming it. */
typedef struct {
    char **path;     /* "-" for stdin */
    uint64_t *bytes; /* file sizes when listed (0 for stdin) */
    size_t n;
} ds_input_files;
/* keep_spelling: name a folder's files DIR/NAME with DIR as given (build's
 * manifests record them); 0: trailing slashes dropped (the reader). DS_OK,
 * or DS_ERR_IO / DS_ERR_NOMEM / DS_ERR_ARG with a message naming the path. */
int ds_input_expand(const char *const *inputs, size_t n_inputs, int keep_spelling, ds_input_files *out, char *err,
                    size_t errlen);
void ds_input_files_free(ds_input_files *f);

/* ------------------------------------------------------------ json_scan.c
 * Single-pass strict JSON scanner for one JSONL line (RFC 8259, with the
 * same acceptance as jansson's json_loadb(JSON_ALLOW_NUL | JSON_DECODE_ANY)
 * after reader.c's lone-surrogate retry): validates the whole line, finds
 * the value at a dotted field path (last duplicate key wins, as
 * json_object_get) and decodes it when it is a string. Anything it cannot
 * decide (real-number overflow) is DS_JSCAN_UNSURE; the caller then runs
 * jansson. Not thread-safe per buffer: one ds_jscan_buf per thread. */
typedef struct {
    uint8_t *text; /* decoded string value (NUL-terminated), reused across lines */
    size_t cap;
    uint8_t *key; /* scratch: decoded keys with escapes on the field path */
    size_t key_cap;
} ds_jscan_buf;

typedef enum {
    DS_JSCAN_OK = 0,            /* a string: text/len */
    DS_JSCAN_MISSING,           /* no such field */
    DS_JSCAN_NOT_OBJECT,        /* the line (top-level value) is not an object */
    DS_JSCAN_PARENT_NOT_OBJECT, /* an intermediate path value is not an object */
    DS_JSCAN_NOT_STRING,        /* field present, `type` says what it is */
    DS_JSCAN_INVALID,           /* jansson rejects the line (also after the surrogate retry) */
    DS_JSCAN_UNSURE,            /* valid so far but left to jansson (e.g. 1e400) */
    DS_JSCAN_NOMEM
} ds_jscan_status;

typedef enum {
    DS_JSCAN_T_OBJECT,
    DS_JSCAN_T_ARRAY,
    DS_JSCAN_T_STRING,
    DS_JSCAN_T_NUMBER,
    DS_JSCAN_T_BOOLEAN,
    DS_JSCAN_T_NULL
} ds_jscan_type;

typedef struct {
    ds_jscan_status status;
    ds_jscan_type type;  /* of the field's value (NOT_STRING / OK) */
    int lone_surrogate;  /* an unpaired \uD800-\uDFFF escape was seen (decoded as U+FFFD) */
    const uint8_t *text; /* OK: points into buf->text, valid until the next scan */
    size_t len;
} ds_jscan_result;

/* line: one line without BOM or newline. parts: n_parts non-empty keys. */
/* Replace unpaired \uD800-\uDFFF escapes in a JSON line by \uFFFD (same
 * length) in place, so that a strict parser accepts it. Returns the number of
 * replacements. (reader.c) */
size_t ds_fix_lone_surrogates(uint8_t *p, size_t n);

ds_jscan_status ds_json_scan(const uint8_t *line, size_t n, char *const *parts, size_t n_parts, ds_jscan_buf *buf,
                             ds_jscan_result *res);
void ds_jscan_buf_free(ds_jscan_buf *buf);

/* The whole line as a tape (chat records, chat.c): one node per value and
 * per object key, in document order, with the same acceptance as
 * ds_json_scan. A container's `end` is the index just past its subtree
 * (scalars: their index + 1); an object's children alternate key (a
 * DS_JSCAN_T_STRING node) and value. Strings are decoded into text (lone
 * surrogate escapes as U+FFFD, *lone set). Nodes are 16 bytes, at most one
 * per input byte, and text at most the line: memory <= 17 x the line, reused
 * across lines. Returns DS_JSCAN_OK (the tape is complete), DS_JSCAN_INVALID,
 * DS_JSCAN_UNSURE (complete, but a number jansson may reject as a double
 * overflow: the caller asks jansson) or DS_JSCAN_NOMEM. A raw NUL byte after
 * a number or literal (jansson drops it) is INVALID here. Lines over 4 GiB
 * are INVALID (offsets are 32-bit). */
typedef struct {
    uint8_t type; /* ds_jscan_type */
    uint32_t end, off, len;
} ds_jnode;
typedef struct {
    ds_jnode *n;
    size_t len, cap;
    uint8_t *text;
    size_t text_cap;
} ds_jtape;
ds_jscan_status ds_json_tape(const uint8_t *line, size_t n, ds_jtape *t, int *lone);
void ds_jtape_free(ds_jtape *t);
/* The value of KEY in object node OBJ (the last one when the key repeats,
 * as jansson's json_object_get); -1 when absent or OBJ is not an object. */
long ds_jtape_get(const ds_jtape *t, size_t obj, const char *key);

/* ------------------------------------------------------------ lenhist.c
 * Exact histogram of document lengths (bytes or tokens) with bounded memory,
 * replacing the former 4-bytes-per-document arrays of lint/hist. Values below
 * DS_LH_DENSE are counted in a flat array (512 KiB, allocated on first use);
 * larger values in an open-addressing map of at most DS_LH_SPARSE_MAX
 * distinct values (<= 8 MiB). Up to that cap every rank is exact. A new
 * distinct value beyond the cap switches the map to coarse mode for good:
 * values >= DS_LH_DENSE are then rounded down to 7 significant bits (64
 * buckets per power of two, <= 3072 buckets), so a rank above DS_LH_DENSE is
 * the lower end of its bucket: at most 1/64 below the true value. */
#define DS_LH_DENSE ((uint64_t)1 << 16)
#define DS_LH_SPARSE_MAX ((size_t)1 << 18)
typedef struct {
    uint64_t *dense; /* DS_LH_DENSE counts, or NULL while unused */
    uint64_t *keys;  /* sparse values (>= DS_LH_DENSE; 0 = empty slot) */
    uint64_t *counts;
    size_t cap, n;     /* slots (power of two), used slots */
    size_t sparse_max; /* distinct sparse values before coarse mode (0: DS_LH_SPARSE_MAX) */
    uint64_t total;    /* values added */
    int coarse;        /* 1: values >= DS_LH_DENSE are bucketed (see above) */
} ds_lenhist;
int ds_lenhist_add(ds_lenhist *h, uint64_t v); /* DS_OK or DS_ERR_NOMEM */
/* Value of each 1-based rank (ranks[i] in 1..total, any order): the smallest
 * value v with at least rank values <= v (bucket lower end in coarse mode). */
int ds_lenhist_ranks(const ds_lenhist *h, const uint64_t *ranks, uint64_t *out, size_t n);
/* Number of values > thr (coarse mode: a bucket counts when its lower end is
 * > thr). DS_ERR_NOMEM leaves *out 0. */
int ds_lenhist_count_above(const ds_lenhist *h, double thr, uint64_t *out);
void ds_lenhist_free(ds_lenhist *h);

/* hist.c: streaming form of ds_hist_compute (exact sums, min, max, bins,
 * policies per document; percentiles from the ds_lenhist at the end). */
void ds_hist_begin(ds_hist *h, uint64_t seq_len);
int ds_hist_add(ds_hist *h, ds_lenhist *lh, uint64_t tokens);
int ds_hist_end(ds_hist *h, const ds_lenhist *lh);

#endif
