/* ds.h - dataset readers (txt, JSONL, zstd, folders, stdin), validation
 * (lint), length statistics and token shards.
 *
 * Public API of the dataset module. Functions return int status codes
 * (DS_OK == 0, negative DS_ERR_* on failure; see ds_strerror).
 */
#ifndef DS_H
#define DS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    DS_OK = 0,
    DS_ERR_NOMEM = -1,
    DS_ERR_IO = -2,       /* cannot open/read an input */
    DS_ERR_FORMAT = -3,   /* unknown input kind */
    DS_ERR_ZSTD = -4,     /* truncated or corrupt zstd stream (fatal for that file) */
    DS_ERR_ARG = -5,
    DS_ERR_INTERNAL = -6
};
const char *ds_strerror(int err);

/* ---------------------------------------------------------------- reader */

typedef enum {
    DS_SEP_FILE = 0,   /* .txt: the whole file is one document (default) */
    DS_SEP_LINE = 1,   /* .txt: one document per line */
    DS_SEP_BLANK = 2   /* .txt: documents separated by blank lines */
} ds_doc_sep;

typedef enum {
    DS_OVERLONG_SKIP = 0, /* a record over max_record_bytes is measured, reported, skipped */
    DS_OVERLONG_CUT = 1   /* ... or its first max_record_bytes bytes are delivered */
} ds_overlong;

typedef struct {
    const char *field;        /* JSONL text field, dotted path for nested objects; NULL = "text".
                                 Non-NULL also makes stdin / unknown extensions read as JSONL. */
    ds_doc_sep doc_sep;       /* for .txt inputs */
    size_t max_record_bytes;  /* bound on one record held in memory; 0 = default (256 MiB) */
    ds_overlong overlong;
} ds_reader_opts;
void ds_reader_opts_init(ds_reader_opts *o);

/* Status of one record. A record whose status is not DS_REC_OK still has
 * file/line/offset set; text is the best available payload (may be NULL). */
typedef enum {
    DS_REC_OK = 0,
    DS_REC_BAD_JSON = 1,        /* malformed JSON line */
    DS_REC_MISSING_FIELD = 2,   /* field absent */
    DS_REC_NOT_STRING = 3,      /* field present but not a string */
    DS_REC_OVERLONG = 4,        /* over max_record_bytes (skipped: text NULL; cut: truncated text) */
    DS_REC_ZSTD_ERROR = 5       /* the stream is truncated/corrupt at this point; file ends here */
} ds_rec_status;

typedef struct {
    const uint8_t *text;    /* document bytes (valid until the next ds_reader_next) */
    size_t len;
    ds_rec_status status;
    uint64_t record_bytes;  /* size of the raw record (line or file) in the input */
    const char *file;       /* input path ("-" for stdin) */
    uint64_t line;          /* 1-based line of the record's start in the (decompressed) input */
    uint64_t offset;        /* byte offset of the record's start in the (decompressed) input */
    uint64_t index;         /* 0-based index of the record over all inputs */
    uint32_t flags;         /* DS_RECF_* facts the reader noticed */
    const char *detail;     /* short reason for a non-OK status (e.g. the JSON parser's message), or NULL */
} ds_record;
/* Payload per status:
 *   OK            text = document (JSON string value / txt span, BOM stripped)
 *   BAD_JSON      text = the raw line (for diagnosis only; never train on it)
 *   MISSING_FIELD, NOT_STRING, ZSTD_ERROR: text NULL, len 0
 *   OVERLONG      SKIP: text NULL; CUT: first max_record_bytes bytes (txt
 *                 inputs only, cut at a UTF-8 boundary, DS_RECF_CUT); a JSONL
 *                 line over the limit cannot be parsed, so its text is NULL.
 * record_bytes always holds the full raw size, however large.
 * file stays valid until ds_reader_free. JSONL blank lines are skipped. */

enum {
    DS_RECF_JSON_LONE_SURROGATE = 1u << 0, /* JSON had an unpaired \uD800-\uDFFF escape */
    DS_RECF_BOM = 1u << 1,                 /* record/file started with a UTF-8 BOM */
    DS_RECF_CUT = 1u << 2,                 /* text was cut at max_record_bytes */
    DS_RECF_CRLF = 1u << 3                 /* txt line mode: the line ended in \r\n (\r removed) */
};

typedef struct ds_reader ds_reader;
/* inputs: files (.txt, .jsonl, either + .zst), folders (recursive, sorted),
 * "-" for stdin (JSONL if --field was given explicitly or the first byte is
 * '{', else txt). Streams with bounded memory. */
int ds_reader_open(const char *const *inputs, size_t n_inputs, const ds_reader_opts *opts, ds_reader **out,
                   char *err, size_t errlen);
/* 1: a record was produced; 0: end of all inputs; <0: fatal error (err set). */
int ds_reader_next(ds_reader *r, ds_record *rec, char *err, size_t errlen);
void ds_reader_free(ds_reader *r);

#ifdef __cplusplus
}
#endif
#endif
