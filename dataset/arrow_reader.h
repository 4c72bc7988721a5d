/* arrow_reader.h - the C API of the one C++ file (arrow_reader.cpp) that
 * reads Parquet and Arrow IPC inputs through Apache Arrow's own readers
 * (issue 29). Everything else (input list, records, reports) stays in C:
 * reader.c calls these. Built only with MKS_ENABLE_ARROW (CMakeLists.txt);
 * MKS_HAVE_ARROW is defined then.
 *
 * A file is read piece by piece: up to 1024 rows of a Parquet row group
 * (only the column that holds the text field, decoded page by page) or an
 * IPC record batch. A Parquet string field is read with Parquet's own
 * column reader (ReadBatch): each row's text is a view into the decoded
 * page or dictionary, bounds-checked by Parquet's decoders, and its
 * definition levels are checked against the values here. Every other
 * piece (IPC batches, a field that is not a string, chat formats' columns)
 * is checked with Arrow's validation (ValidateFull) before a row is looked
 * at. Every allocation Arrow makes for the file goes through a pool capped
 * at mem_limit bytes, so a crafted file is an error message, not a crash
 * or unbounded memory. */
#ifndef MKS_ARROW_READER_H
#define MKS_ARROW_READER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ds_arrow ds_arrow;

enum { DS_ARROW_FMT_PARQUET = 1, DS_ARROW_FMT_IPC = 2 /* file or stream format, told by the magic */ };

/* Return codes of open / next_piece. */
enum { DS_ARROW_DAMAGED = -1, DS_ARROW_NOMEM = -2 };

/* What ds_arrow_row found at the field. */
enum {
    DS_ARROW_ROW_TEXT = 0,      /* *text / *len: the string (not NUL-terminated; valid until the next piece) */
    DS_ARROW_ROW_MISSING = 1,   /* no such field, a parent that is not a struct, or a null on the path */
    DS_ARROW_ROW_NOT_STRING = 2 /* the field's type is not a string type */
};

/* Opens the file at fd (always taken over: closed by ds_arrow_close, or
 * here on failure). parts: the field's dotted path split ("meta.text" ->
 * "meta", "text"); the strings are copied. mem_limit: bytes Arrow may hold
 * for this file at once (0: no cap). 0 on success; DS_ARROW_DAMAGED (not
 * this format, bad footer/schema: err says what) or DS_ARROW_NOMEM. */
int ds_arrow_open(int fd, int format, const char *const *parts, size_t n_parts, uint64_t mem_limit, ds_arrow **out,
                  char *err, size_t errlen);

/* Chat formats (ds_arrow_json.h): opens the file to read whole rows of
 * the columns under paths (dotted: "messages", "conv.messages"; a path into
 * a struct column reads only that part of it) instead of one string
 * field; ds_arrow_piece_c then gives each piece to ds_ajson_row. Paths
 * that name no column are left out (a file where none does has rows with
 * no columns). Otherwise as ds_arrow_open. */
int ds_arrow_open_rows(int fd, int format, const char *const *paths, size_t n_paths, uint64_t mem_limit, ds_arrow **out,
                       char *err, size_t errlen);

struct ArrowSchema;
struct ArrowArray;
/* The loaded piece of a ds_arrow_open_rows file as Arrow C data, checked
 * in full by Arrow (ValidateFull; strings as bytes: UTF-8 is the chat
 * parser's to judge per record): a struct array of the columns read, valid
 * until the next piece or close. 0; -1 when the piece has no columns (every
 * row is the empty object). */
int ds_arrow_piece_c(ds_arrow *a, const struct ArrowSchema **sc, const struct ArrowArray **arr);

/* Loads the next piece (rows of a row group, or a record batch; the previous one is
 * released first). 1: loaded, *rows rows in it (may be 0); 0: the file is
 * done; DS_ARROW_DAMAGED / DS_ARROW_NOMEM: err says what and which piece. */
int ds_arrow_next_piece(ds_arrow *a, int64_t *rows, char *err, size_t errlen);

/* Row i (0 <= i < rows) of the loaded piece. For MISSING / NOT_STRING,
 * *detail (valid until the next call) says why, like the JSONL reader's
 * details ("no field 'text'", "field 'text' is null", ...). */
int ds_arrow_row(ds_arrow *a, int64_t i, const uint8_t **text, size_t *len, const char **detail);

uint64_t ds_arrow_piece_index(const ds_arrow *a); /* 0-based row group / batch number of the loaded piece */
/* its first row within that row group (Parquet reads a row group in batches of 1024 rows) */
uint64_t ds_arrow_piece_row0(const ds_arrow *a);
uint64_t ds_arrow_n_pieces(const ds_arrow *a);      /* row groups / batches in the file (IPC stream: read so far) */
uint64_t ds_arrow_peak_bytes(const ds_arrow *a);    /* most bytes Arrow held for this file at once */
uint64_t ds_arrow_largest_piece(const ds_arrow *a); /* most bytes held for one loaded piece (its column) */
void ds_arrow_close(ds_arrow *a);

/* "Arrow 26.0.1" - the library version linked. */
const char *ds_arrow_version(void);

#ifdef __cplusplus
}
#endif
#endif
