/* ds_internal.h - helpers shared by the dataset module (not public). */
#ifndef DS_INTERNAL_H
#define DS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DS_PRINTF(a, b)
#endif

void ds_set_err(char *err, size_t errlen, const char *fmt, ...) DS_PRINTF(3, 4);

/* ------------------------------------------------------------ json_scan.c
 * Single-pass strict JSON scanner for one JSONL line (RFC 8259, with the
 * same acceptance as jansson's json_loadb(JSON_ALLOW_NUL | JSON_DECODE_ANY)
 * after reader.c's lone-surrogate retry): validates the whole line, finds
 * the value at a dotted field path (last duplicate key wins, as
 * json_object_get) and decodes it when it is a string. Anything it cannot
 * decide (real-number overflow) is DS_JSCAN_UNSURE; the caller then runs
 * jansson. Not thread-safe per buffer: one ds_jscan_buf per thread. */
typedef struct {
    uint8_t *text;   /* decoded string value (NUL-terminated), reused across lines */
    size_t cap;
    uint8_t *key;    /* scratch: decoded keys with escapes on the field path */
    size_t key_cap;
} ds_jscan_buf;

typedef enum {
    DS_JSCAN_OK = 0,             /* a string: text/len */
    DS_JSCAN_MISSING,            /* no such field */
    DS_JSCAN_NOT_OBJECT,         /* the line (top-level value) is not an object */
    DS_JSCAN_PARENT_NOT_OBJECT,  /* an intermediate path value is not an object */
    DS_JSCAN_NOT_STRING,         /* field present, `type` says what it is */
    DS_JSCAN_INVALID,            /* jansson rejects the line (also after the surrogate retry) */
    DS_JSCAN_UNSURE,             /* valid so far but left to jansson (e.g. 1e400) */
    DS_JSCAN_NOMEM
} ds_jscan_status;

typedef enum {
    DS_JSCAN_T_OBJECT, DS_JSCAN_T_ARRAY, DS_JSCAN_T_STRING,
    DS_JSCAN_T_NUMBER, DS_JSCAN_T_BOOLEAN, DS_JSCAN_T_NULL
} ds_jscan_type;

typedef struct {
    ds_jscan_status status;
    ds_jscan_type type;       /* of the field's value (NOT_STRING / OK) */
    int lone_surrogate;       /* an unpaired \uD800-\uDFFF escape was seen (decoded as U+FFFD) */
    const uint8_t *text;      /* OK: points into buf->text, valid until the next scan */
    size_t len;
} ds_jscan_result;

/* line: one line without BOM or newline. parts: n_parts non-empty keys. */
/* Replace unpaired \uD800-\uDFFF escapes in a JSON line by \uFFFD (same
 * length) in place, so that a strict parser accepts it. Returns the number of
 * replacements. (reader.c) */
size_t ds_fix_lone_surrogates(uint8_t *p, size_t n);

ds_jscan_status ds_json_scan(const uint8_t *line, size_t n, char *const *parts, size_t n_parts,
                             ds_jscan_buf *buf, ds_jscan_result *res);
void ds_jscan_buf_free(ds_jscan_buf *buf);

#endif
