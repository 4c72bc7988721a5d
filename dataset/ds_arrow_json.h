/* ds_arrow_json.h - a row of Arrow columns as one JSON object, for the chat
 * formats (issue 28/29; docs/chat.md, docs/reader.md): a Parquet / Arrow
 * IPC row (reader.c through arrow_reader.cpp) or a row of a Python Arrow
 * stream (tools/python/core_jobs.c) becomes the JSONL line a writer would
 * have written for it, and goes through the same chat parser
 * (ds_chat_parse), so lint findings, rejects and shard bytes are those of
 * the same records in JSONL.
 *
 * Works on the Arrow C data interface (the structs below, copied from the
 * specification as it asks), so it needs no Arrow library. Values:
 * strings and binaries as JSON strings (their bytes as they are: the chat
 * parser judges the UTF-8, as in a JSONL line), integers and floats as
 * numbers (NaN / infinities as null), booleans, null, lists (list,
 * large_list, fixed_size_list) as arrays, structs and maps with string keys
 * as objects, dictionaries as their values; any other type (dates,
 * decimals, unions, ...) as {} - not a string, not a list, so the chat
 * parser reports it as the wrong type it is.
 *
 * Every access is checked against the lengths, offsets and buffer counts
 * the arrays declare (a producer's bad batch is an error, never a read out
 * of bounds of what it declares); string data buffers have no declared
 * size in the interface, so their offsets are trusted as the producer's
 * (the CLI's arrays passed Arrow's ValidateFull first). */
#ifndef DS_ARROW_JSON_H
#define DS_ARROW_JSON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* Which columns a row's object holds: dotted paths ("messages",
 * "conv.messages"); a path into a struct column keeps only that part of
 * it. Paths that name no column are left out (the object then lacks the
 * field, as a JSONL line without it). */
typedef struct ds_ajson ds_ajson;
/* NULL when out of memory. */
ds_ajson *ds_ajson_new(const char *const *paths, size_t n_paths);
void ds_ajson_free(ds_ajson *p);

/* The fields a chat format reads (ds_chat_parse): format chat: the
 * messages field and the record's tools; prompt-completion: prompt,
 * completion, tools (TRL's conversational form with tools); auto: all of
 * these and the text field. fmt is a ds_format; NULL names default. */
ds_ajson *ds_ajson_for_format(int fmt, const char *messages_field, const char *text_field);
/* Those fields' paths (out: room for DS_AJSON_MAX_PATHS; the strings are the arguments or literals). Returns how
 * many. */
#define DS_AJSON_MAX_PATHS 6
size_t ds_ajson_format_paths(int fmt, const char *messages_field, const char *text_field,
                             const char *out[DS_AJSON_MAX_PATHS]);

typedef struct {
    uint8_t *p;
    size_t len, cap;
} ds_ajson_buf;
void ds_ajson_buf_free(ds_ajson_buf *b);

enum { DS_AJSON_OK = 0, DS_AJSON_TOO_LARGE = 1, DS_AJSON_BAD = 2, DS_AJSON_NOMEM = -1 };
/* Row `row` (0 <= row < batch->length) of a record batch (a struct array
 * of columns with its schema sc) as a JSON object, replacing b's contents.
 * DS_AJSON_OK; DS_AJSON_TOO_LARGE once the text passes limit bytes (b then
 * holds a prefix); DS_AJSON_BAD when the arrays contradict their schema or
 * their own lengths (why says where); DS_AJSON_NOMEM. */
int ds_ajson_row(const ds_ajson *p, const struct ArrowSchema *sc, const struct ArrowArray *batch, int64_t row,
                 size_t limit, ds_ajson_buf *b, char *why, size_t whylen);

#ifdef __cplusplus
}
#endif
#endif
