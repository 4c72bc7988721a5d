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
#include <stdio.h>

#include "ds_shard.h" /* token shards: writer format and the trainer-facing reader */
#include "ds_chat.h"  /* fine-tuning records: chat templates and loss masks */

#ifdef __cplusplus
extern "C" {
#endif

enum {
    DS_OK = 0,
    DS_ERR_NOMEM = -1,
    DS_ERR_IO = -2,     /* cannot open/read an input */
    DS_ERR_FORMAT = -3, /* malformed data: a shard, manifest, checkpoint or input not in its format */
    DS_ERR_ZSTD = -4,   /* truncated or corrupt zstd stream (fatal for that file) */
    DS_ERR_ARG = -5,
    DS_ERR_INTERNAL = -6,
    DS_ERR_BUSY = -7,     /* an output folder is locked by another build or merge */
    DS_ERR_CONFLICT = -8, /* an output would overwrite an input, or a folder holds another build */
    DS_ERR_EMPTY = -9,    /* nothing to write (no document, or every record rejected) */
    DS_ERR_CANCELED = -10 /* the caller's callback asked to stop */
};
const char *ds_strerror(int err);

/* ---------------------------------------------------------------- files */

/* Opens PATH read-only only when it is a regular file (a FIFO, device or
 * socket is refused without blocking). Returns the descriptor (close-on-exec),
 * or DS_ERR_IO with a message naming the path in err. */
int ds_open_regular(const char *path, char *err, size_t errlen);
/* ds_open_regular as a FILE* ("rb"); NULL on failure, message in err. */
FILE *ds_fopen_regular(const char *path, char *err, size_t errlen);
/* 1 when both paths exist and name the same file (device + inode), else 0:
 * used to refuse an output that would overwrite an input. */
int ds_same_file(const char *a, const char *b);
/* 1 when PATH is DIR or lies inside it (symbolic links and .. resolved; PATH
 * need not exist yet), 0 when not, -1 when either cannot be resolved. */
int ds_path_within(const char *path, const char *dir);
/* ---------------------------------------------------------------- outputs
 * The one check that an output path does not destroy or mix with what a
 * command reads: every front end (the mkshards commands, llmtrain, the
 * Python package) calls ds_check_output for each file or folder it is about
 * to write, before writing anything. */

#define DS_PATH_BYTES 4200 /* a path buffer of ds_tokenizer_sources */
#define DS_TK_SOURCES_MAX 8
/* The files a tokenizer spec is read from, as tk_load resolves it: SPEC and
 * SPEC.meta.json for a file; encoder.json, vocab.bpe and tokenizer.json in a
 * folder; for a name, the candidates in $MKS_VOCAB_DIR (tiktoken's
 * cache is not listed: its files are named by hash). Only existing paths
 * are written to paths[0..max); returns their number. */
size_t ds_tokenizer_sources(const char *spec, char paths[][DS_PATH_BYTES], size_t max);

/* Everything a command reads, for ds_check_output. */
typedef struct {
    const char *const *inputs; /* files and folders read (NULL, "" and "-" are skipped) */
    size_t n_inputs;
    const char *in_what;     /* how messages name them; NULL: "the input" */
    const char *tokenizer;   /* a tokenizer spec (its ds_tokenizer_sources are inputs), or NULL */
    const char *const *sets; /* shard-set folders read: the folder and every file in it are inputs */
    size_t n_sets;
    const char *set_what; /* how messages name them; NULL: "the shard set" */
} ds_read_paths;

/* Refuse an output that would overwrite or land inside an input. OUT is
 * refused when it is the same file (device + inode: ds_same_file, so links
 * and other names count) as an input or a tokenizer source, when it lies
 * inside an input folder or a shard set (ds_path_within: links and ..
 * resolved; OUT need not exist yet), or when it is another name of a file
 * in a shard set. NULL, "" and "-" (stdout) are never refused. DS_OK, or
 * DS_ERR_CONFLICT with "LABEL 'OUT' is the same file as IN_WHAT 'IN': ..."
 * (or "... lies inside the input folder / the shard set ...") in err. */
int ds_check_output(const char *label, const char *out, const ds_read_paths *in, char *err, size_t errlen);
/* ds_check_output of OUT against INPUTS alone. */
int ds_refuse_overwrite(const char *out_label, const char *out, const char *in_what, const char *const *inputs,
                        size_t n_inputs, char *err, size_t errlen);
/* Exclusive lock of an output folder for one writer (build, merge): opens
 * DIR/.lock (0644, O_NOFOLLOW, regular file only), takes a non-blocking flock
 * and writes the holder's pid into it. Returns the descriptor to keep open
 * while writing (>= 0), DS_ERR_BUSY when another process holds it ("another
 * WHAT holds DIR/.lock (pid N); wait for it to finish or use another --out"),
 * or DS_ERR_IO / DS_ERR_ARG with a message. A process killed while holding it
 * leaves DIR/.lock behind, which is harmless: the kernel released the flock. */
int ds_lock_dir(const char *dir, const char *what, char *err, size_t errlen);
/* Release ds_lock_dir's lock (fd < 0: nothing): unlinks DIR/.lock while still
 * holding it (ds_lock_dir re-checks the inode it locked), then closes. */
void ds_unlock_dir(const char *dir, int fd);

/* ---------------------------------------------------------------- reader */

typedef enum {
    DS_SEP_FILE = 0, /* .txt: the whole file is one document (default) */
    DS_SEP_LINE = 1, /* .txt: one document per line */
    DS_SEP_BLANK = 2 /* .txt: documents separated by blank lines */
} ds_doc_sep;

typedef enum {
    DS_OVERLONG_SKIP = 0, /* a record over max_record_bytes is measured, reported, skipped */
    DS_OVERLONG_CUT = 1   /* ... or its first max_record_bytes bytes are delivered */
} ds_overlong;

typedef struct {
    const char *field;       /* JSONL text field, dotted path for nested objects; NULL = "text".
                                 Non-NULL also makes stdin / unknown extensions read as JSONL. */
    ds_doc_sep doc_sep;      /* for .txt inputs */
    size_t max_record_bytes; /* bound on one record held in memory; 0 = default (256 MiB) */
    ds_overlong overlong;
    int defer_json; /* 1: JSONL lines are delivered unparsed (status OK, DS_RECF_RAW_JSON,
                                 text = the line) so that ds_json_extract can run on worker threads */
    /* A chat ds_format (ds_chat.h; 0, text: the field's string as before): a
     * Parquet / Arrow IPC row is delivered as the JSON object of the fields
     * that format reads (status OK, DS_RECF_RAW_JSON; ds_arrow_json.h), for
     * ds_chat_parse as a JSONL line is; messages_field: its messages field
     * (NULL: "messages"). */
    int row_format;
    const char *messages_field;
} ds_reader_opts;
void ds_reader_opts_init(ds_reader_opts *o);

/* Status of one record. A record whose status is not DS_REC_OK still has
 * file/line/offset set; text is the best available payload (may be NULL). */
typedef enum {
    DS_REC_OK = 0,
    DS_REC_BAD_JSON = 1,      /* malformed JSON line */
    DS_REC_MISSING_FIELD = 2, /* field absent */
    DS_REC_NOT_STRING = 3,    /* field present but not a string */
    DS_REC_OVERLONG = 4,      /* over max_record_bytes (skipped: text NULL; cut: truncated text) */
    DS_REC_ZSTD_ERROR = 5,    /* the zstd or gzip stream is truncated/corrupt here; file ends here */
    DS_REC_TOKENIZER = 6      /* not from the reader: the tokenizer refused the document (a per-document
                                   limit, TK_ERR_DOC_*; detail says which); ds_encode's skipped callback */
    ,
    DS_REC_CHAT = 7 /* not from the reader: a chat / prompt-completion record its parser or
                                   template refuses (detail: ds_chat_status_name and why); ds_encode's
                                   skipped callback */
} ds_rec_status;

typedef struct {
    const uint8_t *text; /* document bytes (valid until the next ds_reader_next) */
    size_t len;
    ds_rec_status status;
    uint64_t record_bytes; /* size of the raw record (line or file) in the input */
    const char *file;      /* input path ("-" for stdin) */
    uint64_t line;         /* 1-based line of the record's start in the (decompressed) input */
    uint64_t offset;       /* byte offset of the record's start in the (decompressed) input */
    uint64_t index;        /* 0-based index of the record over all inputs */
    uint32_t flags;        /* DS_RECF_* facts the reader noticed */
    const char *detail;    /* short reason for a non-OK status (e.g. the JSON parser's message), or NULL */
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
    DS_RECF_CRLF = 1u << 3,                /* txt line mode: the line ended in \r\n (\r removed) */
    DS_RECF_RAW_JSON = 1u << 4             /* defer_json: text is the raw JSONL line, not yet parsed */
};

typedef struct ds_reader ds_reader;
/* inputs: files (.txt, .jsonl, either + .zst), folders (recursive, sorted),
 * "-" for stdin (JSONL if --field was given explicitly or the first byte is
 * '{', else txt). Streams with bounded memory. */
int ds_reader_open(const char *const *inputs, size_t n_inputs, const ds_reader_opts *opts, ds_reader **out, char *err,
                   size_t errlen);
/* 1: a record was produced; 0: end of all inputs; <0: fatal error (err set). */
int ds_reader_next(ds_reader *r, ds_record *rec, char *err, size_t errlen);
void ds_reader_free(ds_reader *r);
/* Take over the buffer that holds rec's text (rec: the record ds_reader_next
 * just produced) instead of copying a large document out of it: *buf
 * receives that buffer (*cap its size in bytes) and the reader keeps the
 * buffer passed in *buf / *cap (NULL / 0: it allocates one) for its next
 * records. Returns the text's offset in the buffer handed over; -1 if rec's
 * text does not live in it (JSONL records: the text is unescaped elsewhere),
 * nothing exchanged then. */
long long ds_reader_take_text(ds_reader *r, const ds_record *rec, uint8_t **buf, size_t *cap);

/* Record source: documents pulled from a callback instead of read from files
 * (the Python package's iterables; source.c). The pipeline calls next on its
 * one reader thread, in order; each item becomes one record numbered like a
 * JSONL line (file = name, line = item number from 1, offset 0). An item is
 * the document (status DS_REC_OK, text/len valid until the next call) or a
 * reject: DS_REC_MISSING_FIELD / DS_REC_NOT_STRING with a detail, as a JSONL
 * line whose field is absent / not a string. A text over max_record_bytes
 * becomes DS_REC_OVERLONG without its text, as an over-long JSONL line.
 * next returns 1 (an item), 0 (the end) or a DS_ERR_* (stop: err says why;
 * the build or analysis fails with it). No --part, resume or "up to date"
 * check: a source cannot be replayed. */
typedef struct {
    const uint8_t *text;
    size_t len;
    ds_rec_status status; /* DS_REC_OK, DS_REC_MISSING_FIELD or DS_REC_NOT_STRING */
    uint32_t flags;       /* DS_RECF_JSON_LONE_SURROGATE where the source replaced one by U+FFFD;
                             DS_RECF_RAW_JSON: text is a chat record's JSON (chat formats) */
    const char *detail;   /* a reject's reason (valid until the next call) */
} ds_source_item;
typedef struct {
    int (*next)(void *user, ds_source_item *item, char *err, size_t errlen);
    void *user;
    const char *name; /* the records' file name in reports and rejects, e.g. "<python>" */
} ds_source;

/* JSON field extraction, usable on any thread (one ctx per thread). With
 * defer_json, pass each DS_RECF_RAW_JSON record's text/len here: rec gets
 * status, text/len (valid until the next call on this ctx), flags (BOM,
 * lone surrogate) and detail, exactly as ds_reader_next would have set them.
 * Returns DS_OK or DS_ERR_NOMEM. */
typedef struct ds_json_ctx ds_json_ctx;
int ds_json_ctx_new(const ds_reader_opts *opts, ds_json_ctx **out); /* DS_ERR_ARG: bad field path */
void ds_json_ctx_free(ds_json_ctx *c);
int ds_json_extract(ds_json_ctx *c, const uint8_t *line, size_t len, ds_record *rec);

/* ------------------------------------------------------------ lint / hist
 * One streaming pass over the inputs: the reader runs on the calling thread,
 * documents are checked (one byte pass + one tk_count each) on worker
 * threads in batches, and results are merged in input order, so reports do
 * not depend on the thread count. Memory does not grow with the document
 * count: two batches of text (2 x (batch_bytes + the largest record)), two
 * exact length histograms (<= 8.5 MiB each, see docs/lint-rules.md), the
 * duplicate set (16 bytes per distinct document up to max_dup_docs, 128 MiB
 * by default) and max_examples examples per rule. */

struct tk_tokenizer;

typedef enum { DS_SEV_INFO = 0, DS_SEV_WARNING = 1, DS_SEV_ERROR = 2 } ds_severity;

/* Lint rules (ids are stable; see docs/lint-rules.md). */
typedef enum {
    DS_RULE_ZSTD = 0,         /* zstd-corrupt        error   */
    DS_RULE_JSON,             /* json-malformed      error   */
    DS_RULE_FIELD_MISSING,    /* field-missing       error   */
    DS_RULE_FIELD_TYPE,       /* field-not-string    error   */
    DS_RULE_UTF8,             /* utf8-invalid        error   */
    DS_RULE_NUL,              /* nul-byte            error   */
    DS_RULE_RECORD_TOO_LARGE, /* record-too-large    error   */
    DS_RULE_TOKENIZER_LIMIT,  /* tokenizer-limit     error   (the tokenizer refuses the document) */
    DS_RULE_CONTROL,          /* control-char        warning */
    DS_RULE_EMPTY,            /* empty-doc           warning */
    DS_RULE_TOO_LONG,         /* doc-too-long        warning */
    DS_RULE_OUTLIER,          /* outlier-doc         warning */
    DS_RULE_LONG_LINE,        /* long-line           warning */
    DS_RULE_LOW_BPT,          /* low-bytes-per-token warning */
    DS_RULE_BLOB,             /* blob                warning */
    DS_RULE_LONG_RUN,         /* long-run            warning */
    DS_RULE_DUPLICATE,        /* duplicate           warning */
    DS_RULE_SPECIAL,          /* special-token       warning */
    DS_RULE_SURROGATE,        /* json-lone-surrogate warning */
    DS_RULE_BOM,              /* bom                 info    */
    DS_RULE_MIXED_NL,         /* mixed-newlines      info    */
    /* chat / prompt-completion records (--format; docs/lint-rules.md) */
    DS_RULE_CHAT_ROLE,             /* chat-unknown-role        error   */
    DS_RULE_CHAT_CONTENT,          /* chat-bad-content         error   (not a string nor text parts) */
    DS_RULE_CHAT_TEMPLATE,         /* chat-template-refused    error   (the template's own refusal) */
    DS_RULE_CHAT_ASSISTANT_TWICE,  /* chat-assistant-twice     error   (two in a row, the template refuses) */
    DS_RULE_CHAT_EMPTY,            /* chat-empty-content       warning */
    DS_RULE_CHAT_NO_ASSISTANT,     /* chat-no-assistant        warning (no target: build drops it) */
    DS_RULE_CHAT_SYSTEM_NOT_FIRST, /* chat-system-not-first    warning */
    DS_RULE_CHAT_TOO_LONG,         /* chat-over-seq-len        warning (and what drop-turns would do) */
    DS_RULE_CHAT_SPECIAL,          /* chat-special-text        warning (a special token's text in content) */
    DS_RULE_CHAT_PARTS,            /* chat-non-text-part       warning (left out) */
    DS_RULE_COUNT
} ds_rule;

typedef struct {
    const char *id; /* "utf8-invalid" */
    ds_severity severity;
    const char *title; /* one line: what it means */
    const char *fix;   /* one line: what to do */
} ds_rule_info;
const ds_rule_info *ds_rule_get(int rule);   /* NULL if out of range */
int ds_rule_find(const char *id);            /* rule index or -1 */
const char *ds_severity_name(ds_severity s); /* "info", "warning", "error" */

/* Progress of ds_analyze: after every batch of records, on the calling thread. */
typedef struct {
    uint64_t records;  /* records read so far */
    uint64_t bytes_in; /* their bytes in the (decompressed) inputs */
    double seconds;    /* since ds_analyze started */
    int last;          /* the inputs are all read */
} ds_analyze_event;
/* Return nonzero to cancel: ds_analyze stops after the current batch and
 * returns DS_ERR_CANCELED (no report, nothing written). */
typedef int (*ds_analyze_callback)(const ds_analyze_event *ev, void *user);

typedef struct {
    const struct tk_tokenizer *tok; /* NULL: byte checks only (no token counts) */
    uint64_t seq_len;               /* L in tokens (0: not set) */
    uint64_t max_doc_bytes;         /* doc-too-long limit when there is no tokenizer or no L
                                       (0: 8 MiB; with L and no tokenizer: 8*L) */
    size_t max_examples;            /* per rule (default 5; 0 keeps 0 when set_examples) */
    int set_examples;               /* 1: max_examples is meant as given (even 0) */
    int threads;                    /* worker threads (0 = all cores) */
    int lint;                       /* run the lint checks */
    int hist;                       /* collect per-document token counts (needs tok) */
    /* thresholds (0 = default) */
    double outlier_factor;        /* outlier-doc: > factor x median bytes (100) ... */
    uint64_t outlier_min_bytes;   /* ... and > this many bytes (1 MiB) */
    uint64_t long_line_bytes;     /* long-line: a line of at least this (1 MiB) */
    uint64_t long_run_bytes;      /* long-run: non-whitespace run of at least this (4096) */
    double min_bytes_per_token;   /* low-bytes-per-token below this (1.5), mostly-ASCII docs ... */
    uint64_t bpt_min_bytes;       /* ... for documents of at least this many bytes (1024) */
    uint64_t batch_bytes;         /* text per batch (8 MiB) */
    uint64_t max_dup_docs;        /* duplicate: distinct documents remembered (0: DS_DUP_DEFAULT_MAX;
                                       16 bytes each, the table is <= 2^ceil(log2(4/3 x this)) slots) */
    ds_analyze_callback callback; /* progress and cancellation (NULL: none) */
    void *user;
    const ds_source *source; /* non-NULL: records from it; ds_analyze's inputs must be empty */
    /* Fine-tuning records (ds_chat.h), as ds_build_opts: with format CHAT,
     * PROMPT_COMPLETION or AUTO each JSONL line is parsed as a record; the
     * byte rules run over its contents, the chat-* rules over its messages,
     * and (with tok and chat_template) lengths are the rendered
     * conversation's tokens, hist counts its targets. */
    ds_format format;
    const struct ds_chat_template *chat_template; /* NULL: no rendering (structure rules only) */
    const char *messages_field;                   /* NULL: "messages" */
    ds_loss_on loss_on;                           /* DS_LOSS_DEFAULT */
} ds_analyze_opts;
#define DS_DUP_DEFAULT_MAX ((uint64_t)6291456) /* 3/4 of 2^23 slots: a 128 MiB table */
void ds_analyze_opts_init(ds_analyze_opts *o);

typedef struct {
    char *file;
    uint64_t line;   /* 1-based line of the record */
    uint64_t offset; /* byte offset of the record in the decompressed input */
    uint64_t index;  /* 0-based record index over all inputs */
    uint64_t pos;    /* byte position inside the document text (in-document rules), else 0 */
    uint64_t value;  /* rule-specific number (tokens, bytes, count ...) */
    char note[120];  /* short human detail */
} ds_lint_example;

typedef struct {
    uint64_t count;
    size_t n_examples;
    ds_lint_example *examples;
} ds_lint_finding;

typedef struct {
    ds_lint_finding rules[DS_RULE_COUNT];
    uint64_t records, docs, bytes, tokens; /* docs = records with usable text */
    uint64_t files;
    uint64_t median_bytes;
    int has_tokens;
    uint64_t seq_len, max_doc_bytes;
    char tokenizer[64];
    int median_approximate; /* 1: median_bytes / outlier-doc count are bucket-accurate (1/64), see
                                 ds_hist.approximate; set only for > 2^18 distinct sizes >= 64 KiB */
    uint64_t dup_tracked;   /* distinct documents held for duplicate detection */
    uint64_t dup_untracked; /* distinct documents seen after the set was full (max_dup_docs): they were
                                 compared with the tracked ones only, not with each other */
} ds_lint_report;

/* Token-count statistics (hist). Counts exclude any end-of-text token. */
#define DS_HIST_MAX_BINS 48
typedef struct {
    uint64_t docs, tokens, bytes, skipped; /* skipped: records without usable text */
    uint64_t refused;                      /* documents the tokenizer refused (a per-document limit,
                                              TK_ERR_DOC_*): not in docs, nor in skipped */
    char refused_first[300];               /* the first of them: "file:line: reason" */
    double mean;
    uint64_t min, p50, p90, p99, p999, max;
    uint64_t seq_len;
    uint64_t docs_over, tokens_over; /* docs with > L tokens, and their tokens */
    uint64_t trunc_lost;             /* truncate: tokens past L */
    uint64_t chunk_rows;             /* chunk: sum ceil(t/L) */
    uint64_t drop_docs, drop_tokens; /* drop: docs over L and their tokens */
    uint64_t pad_rows, pad_waste;    /* pad-to-L: one row per doc (cut at L), pad tokens */
    uint64_t pack_rows;              /* pack: ceil(sum(t+1)/L) rows (1 separator per doc) */
    double pack_util;                /* sum(t+1) / (rows*L) */
    size_t n_bins;                   /* bin 0: 0 tokens; bin k: [2^(k-1), 2^k) */
    uint64_t bin_docs[DS_HIST_MAX_BINS];
    uint64_t bin_tokens[DS_HIST_MAX_BINS];
    char tokenizer[64];
    /* chat formats (ds_analyze_opts.format not text): targets and fitting */
    int chat;
    uint64_t loss_tokens;        /* targets over all conversations */
    uint64_t no_loss_docs;       /* conversations without a target (build drops them) */
    uint64_t loss_min, loss_max; /* targets per conversation */
    uint64_t turns_docs;         /* over L: conversations drop-turns fits */
    uint64_t turns_dropped;      /* ... and the turns it drops for them */
    uint64_t turns_fail;         /* over L: conversations whose last turn alone is over L */
    int approximate;             /* 1: over 2^18 distinct counts >= 65536 were seen, so a
                                              percentile >= 65536 is its bucket's lower end: at most
                                              1/64 below the exact value (min, max, sums stay exact) */
} ds_hist;

/* Run lint and/or hist in one pass. Either output may be NULL. <0 on a
 * fatal error (cannot open an input, out of memory, tokenizer failure). */
int ds_analyze(const char *const *inputs, size_t n_inputs, const ds_reader_opts *ropts, const ds_analyze_opts *aopts,
               ds_lint_report **lint_out, ds_hist **hist_out, char *err, size_t errlen);
void ds_lint_report_free(ds_lint_report *r);
void ds_hist_free(ds_hist *h);

/* Worst severity present (count > 0): -1 if clean. */
int ds_lint_worst(const ds_lint_report *r);
/* Exit status for `mkshards lint`: 0 clean (info only), 1 warnings, 2 errors. */
int ds_lint_exit_code(const ds_lint_report *r);
int ds_lint_print(const ds_lint_report *r, FILE *f); /* human table + examples */
int ds_lint_write_json(const ds_lint_report *r, FILE *f);
int ds_hist_print(const ds_hist *h, FILE *f, int width); /* terminal report and bar chart */
int ds_hist_write_json(const ds_hist *h, FILE *f);
int ds_hist_write_svg(const ds_hist *h, const char *path, char *err, size_t errlen);
/* Fill the derived fields (mean, percentiles, policies, bins) of h from
 * per-document counts (exposed for tests and other tools). */
int ds_hist_compute(ds_hist *h, const uint32_t *counts, size_t n, uint64_t seq_len);

/* ---------------------------------------------------------------- encode
 * Documents -> token ids, in input order: a reader thread fills batches, the
 * calling thread encodes each batch on `threads` threads, and a writer thread
 * hands the ids of the previous batch to `sink` while the next is encoded.
 * docs/library.md shows a caller. */
typedef struct {
    const struct tk_tokenizer *tok; /* required */
    const char *const *inputs;      /* files, folders or "-" */
    size_t n_inputs;
    const char *field; /* JSONL text field (NULL: "text") */
    ds_doc_sep doc_sep;
    int threads;                /* 0: all cores */
    size_t batch_docs;          /* documents per batch (0: 4096) */
    uint64_t batch_bytes;       /* text per batch (0: 256 KiB with one thread, else 2 MiB) */
    int use_special;            /* 1: tk_encode_special with allowed / n_allowed */
    int64_t bos_id, eos_id;     /* framing around every document (counted in tokens): -1 none
                                         (the default), DS_FRAME_DEFAULT: the tokenizer's
                                         (tk_default_framing), else the id */
    const char *const *allowed; /* special tokens allowed; n_allowed == (size_t)-1: all */
    size_t n_allowed;
    /* called once after the inputs opened, before anything is encoded (e.g.
     * to create the output file); nonzero: stop, ds_encode returns DS_ERR_IO */
    int (*begin)(void *user);
    /* the ids of one document, in input order, on the writer thread;
     * nonzero: stop, ds_encode returns DS_ERR_IO */
    int (*sink)(const uint32_t *ids, size_t n, void *user);
    /* a record the reader could not use (status != DS_REC_OK), on the reader
     * thread; or a document the tokenizer refused (DS_REC_TOKENIZER, detail:
     * why), on the calling thread: either is skipped (no ids, no sink call) */
    void (*skipped)(const ds_record *rec, void *user);
    void *user;
    /* Fine-tuning records (ds_chat.h, docs/chat.md): format CHAT,
     * PROMPT_COMPLETION or AUTO reads each JSONL line as a record rendered
     * through chat_template (required then) into ids; a record the parser or
     * the template refuses is skipped (DS_REC_CHAT, detail: why). The
     * template's bos_token / eos_token are the tokenizer's framing tokens;
     * bos_id / eos_id framing applies to text records only. */
    ds_format format; /* DS_FMT_TEXT (default) */
    const struct ds_chat_template *chat_template;
    const char *messages_field; /* NULL: "messages" */
    ds_loss_on loss_on;         /* DS_LOSS_DEFAULT */
    /* with a chat format: the loss mask of each document (one byte per id,
     * 1 = target) just before its sink call, on the writer thread (NULL: none) */
    int (*sink_mask)(const uint8_t *mask, size_t n, void *user);
} ds_encode_opts;
void ds_encode_opts_init(ds_encode_opts *o);

typedef struct {
    uint64_t docs, bytes, tokens, skipped; /* skipped: refused included */
    uint64_t refused;                      /* documents the tokenizer refused (DS_REC_TOKENIZER) */
    double encode_seconds;                 /* inside the encode calls: CPU time of the calling thread
                                         with 1 thread, wall time otherwise */
} ds_encode_result;
int ds_encode(const ds_encode_opts *opts, ds_encode_result *res, char *err, size_t errlen);

/* ---------------------------------------------------------------- build
 * Raw documents -> fixed-length rows of token ids in shards (DIR/train-NNNNN.mks,
 * DIR/val-NNNNN.mks), DIR/rejects.jsonl and, last, DIR/manifest.json
 * (docs/shard-format.md). Pipeline: a reader thread fills batches; worker
 * threads parse, validate and encode each document; the calling thread packs
 * and writes in input order, so the bytes do not depend on the thread count.
 * DIR is locked (ds_lock_dir) for the whole build, refused when it is, holds
 * or lies inside an input, checkpointed (DIR/build.ckpt) so that a build
 * interrupted at any point continues where it stopped, and left alone when it
 * already holds the same build. docs/library.md shows a caller. */
typedef enum { DS_PACK_CONCAT = 0, DS_PACK_BFD = 1, DS_PACK_NONE = 2 } ds_pack;
#define DS_FRAME_DEFAULT (-2) /* bos_id / eos_id: the tokenizer's framing (tk_default_framing) */
/* DROP_TURNS: chat / prompt-completion builds only (the oldest turns after
 * the system message go until the conversation fits; docs/chat.md). */
typedef enum { DS_OL_TRUNCATE = 0, DS_OL_CHUNK = 1, DS_OL_DROP = 2, DS_OL_DROP_TURNS = 3 } ds_over_long;

/* Enum names (dataset/ds_names.c): the one spelling of ds_pack, ds_over_long
 * and ds_doc_sep, used by the CLI options, the manifest's config and the
 * Python arguments. ds_<enum>_name(v): the name, NULL for a value out of
 * range (so for (i = 0; ds_pack_name(i); i++) lists them all);
 * ds_<enum>_parse(name, &v): 0 with v set, -1 for an unknown name or NULL
 * (ds_doc_sep_parse also takes "blank" for "blank-line");
 * ds_names_list(ds_pack_name, buf, cap): "concat, bfd or none", for messages. */
const char *ds_pack_name(int v);
int ds_pack_parse(const char *name, ds_pack *out);
const char *ds_over_long_name(int v);
int ds_over_long_parse(const char *name, ds_over_long *out);
const char *ds_doc_sep_name(int v);
int ds_doc_sep_parse(const char *name, ds_doc_sep *out);
const char *ds_names_list(const char *(*name)(int), char *buf, size_t cap);

#define DS_BUILD_HIST_BINS 40
#define DS_BUILD_MAX_PARTS 1000000 /* part_n at most */

/* Why a record was rejected (rejects.jsonl "reason"; ds_reject_reason_name). */
enum {
    DS_REJ_ZSTD = 0,
    DS_REJ_JSON,
    DS_REJ_FIELD_MISSING,
    DS_REJ_FIELD_TYPE,
    DS_REJ_TOO_LARGE,
    DS_REJ_UTF8,
    DS_REJ_NUL,
    DS_REJ_OVERLONG_DROP,
    DS_REJ_TOKENIZER, /* "tokenizer-limit": the tokenizer refused the document (TK_ERR_DOC_*); the
                         manifest names it in reject_reasons only when it happened */
    DS_REJ_CHAT,      /* "chat-invalid": a chat / prompt-completion record its parser or template
                         refuses (detail: the ds_chat_status id and why); named only when it happened */
    DS_REJ_NO_LOSS,   /* "no-loss-tokens": a sample left without a target token (dropped); named
                         only when it happened */
    DS_REJ_COUNT
};
const char *ds_reject_reason_name(int reason);

/* Accounting: the manifest's "accounting"; every counter adds up across parts. */
typedef struct {
    uint64_t records, bytes_in; /* every record the reader produced */
    uint64_t docs_whole, docs_truncated, docs_chunked, docs_dropped, docs_rejected;
    uint64_t tok_whole, tok_trunc_kept, tok_trunc_lost, tok_chunked, tok_dropped;
    uint64_t eot, pad, pieces; /* EOT tokens written, pad tokens, bfd/chunk pieces */
    uint64_t rejected_bytes;
    uint64_t reasons[16];                       /* rejects per reason (DS_REJ_*) */
    uint64_t docs_split[2], rows[2], shards[2]; /* per split (train, val) */
    uint64_t hist[DS_BUILD_HIST_BINS];          /* accepted documents by token count: bin 0 = 0,
                                                     bin k = [2^(k-1), 2^k) */
    uint64_t bos;                               /* BOS tokens written (framing with a BOS) */
    /* chat / prompt-completion builds (the manifest writes them only there) */
    uint64_t loss_tokens;   /* target tokens written (loss bit set) */
    uint64_t turns_dropped; /* turns removed by --over-long drop-turns */
} ds_build_account;
/* The accounting of a manifest read by ds_manifest_read (ds_shard.h): every
 * counter checked as ds_build reads it back; NULL for an unread m. */
const ds_build_account *ds_manifest_account(const ds_manifest_info *m);

typedef enum {
    DS_BUILD_EV_PROGRESS = 0, /* after every batch (records, bytes_in, tokens, est_bytes, seconds, last) */
    DS_BUILD_EV_REBUILD,      /* DIR holds a build with this configuration that fails verification
                                 (detail says why): it is built again */
    DS_BUILD_EV_RESUME,       /* continuing from DIR/build.ckpt after `records` records, `shards` shards */
    DS_BUILD_EV_CKPT_FAILED   /* a checkpoint could not be written (the build goes on) */
} ds_build_event_kind;

typedef struct {
    ds_build_event_kind kind;
    uint64_t records, bytes_in, tokens; /* so far */
    uint64_t est_bytes;                 /* estimated input bytes (zstd frames: content size or 4x) */
    double seconds;                     /* since the pipeline started */
    int last;                           /* PROGRESS: the inputs are all read */
    size_t shards;                      /* RESUME: shards already written */
    const char *detail;                 /* REBUILD: why */
} ds_build_event;

/* Return nonzero to cancel: ds_build stops at the next batch boundary and
 * returns DS_ERR_CANCELED; DIR keeps its checkpoint, so a later build with the
 * same options continues from it. */
typedef int (*ds_build_callback)(const ds_build_event *ev, void *user);

typedef struct {
    const struct tk_tokenizer *tok; /* required; not freed */
    const char *tokenizer_spec;     /* as the user gave it: recorded in the manifest's config */
    const char *const *inputs;      /* files, folders (recursive, sorted) or "-" */
    size_t n_inputs;
    const char *out_dir;    /* created */
    uint32_t seq_len;       /* L, 1..2^24 */
    ds_pack pack;           /* default concat */
    ds_over_long over_long; /* pack none: documents longer than L (document + EOT) */
    uint64_t bfd_window;    /* rows per BFD window (1024); bfd_window x L < 2^31 */
    double val_fraction;    /* 0 <= F < 1, by document hash */
    uint64_t seed;          /* per-shard row shuffle */
    int shuffle;            /* 1 (default) */
    uint64_t shard_tokens;  /* target tokens per shard (32 Mi) */
    int zstd_level;         /* 0: uncompressed rows */
    uint32_t frame_rows;    /* rows per zstd frame (64) */
    const char *field;      /* JSONL text field (NULL: "text") */
    ds_doc_sep doc_sep;
    uint32_t part_k, part_n;    /* build part K of N of the input files (1/1) */
    int threads;                /* 0: all cores */
    uint64_t batch_bytes;       /* text read per batch (32 MiB) */
    int force;                  /* replace a build with another configuration in DIR */
    double checkpoint_seconds;  /* between checkpoints (0.5; 0: after every batch that wrote a shard) */
    ds_build_callback callback; /* progress, notices, cancellation (NULL: none) */
    void *user;
    /* Framing: each document becomes [BOS] ids [EOS]. DS_FRAME_DEFAULT (the
     * default): the tokenizer's (tk_default_framing: tiktoken files no BOS and
     * <|endoftext|>, tokenizer.json its post_processor / family tokens);
     * -1: none; else an id < vocab size. Recorded in the manifest. */
    int64_t bos_id, eos_id;
    const ds_source *source; /* non-NULL: records from it instead of inputs (n_inputs 0, part 1/1);
                                         never checkpointed nor "up to date" (like stdin) */
    /* Fine-tuning records (ds_chat.h, docs/chat.md), as ds_encode_opts: format
     * CHAT, PROMPT_COMPLETION or AUTO renders each JSONL record through
     * chat_template (required then) and writes its loss mask into the shards
     * (version 2); bos_id / eos_id default to none (the template places its
     * own). over_long then applies to every packer: truncate / drop /
     * drop-turns fit a conversation to L before packing, chunk leaves it to
     * the packer. A sample without a target token is dropped. */
    ds_format format; /* DS_FMT_TEXT (default) */
    const struct ds_chat_template *chat_template;
    const char *messages_field; /* NULL: "messages" */
    ds_loss_on loss_on;         /* DS_LOSS_DEFAULT */
} ds_build_opts;
void ds_build_opts_init(ds_build_opts *o);

typedef struct {
    int up_to_date;         /* 1: DIR already held this build, checked and left alone */
    size_t n_checked;       /* up_to_date: shards verified */
    int resumed;            /* continued from a checkpoint */
    size_t n_shards;        /* shards in the manifest */
    ds_build_account acc;   /* the manifest's accounting */
    double seconds;         /* from the start of the pipeline to the manifest */
    int64_t bos_id, eos_id; /* the framing in force (-1: none) */
} ds_build_result;

/* DS_OK; DS_ERR_ARG (bad option: err names it), DS_ERR_CONFLICT (DIR is,
 * holds or lies in an input; DIR holds a build with another configuration and
 * force is 0), DS_ERR_BUSY (DIR is locked), DS_ERR_EMPTY (no row written: no
 * document or every one rejected or dropped; no manifest), DS_ERR_CANCELED,
 * DS_ERR_IO / DS_ERR_NOMEM / other (err says what). err holds one line
 * without a trailing newline. res may be NULL. */
int ds_build(const ds_build_opts *opts, ds_build_result *res, char *err, size_t errlen);

/* Join the outputs of builds with part 1/N .. N/N (any order) into out_dir:
 * the bytes a single build would have written. Every shard of every part is
 * verified against its manifest before anything is written; out_dir is
 * locked. An out_dir holding a set of another configuration or tokenizer is
 * refused unless force is set (as ds_build refuses it). n_shards/rows_train/
 * rows_val: of the merged set (may be NULL). DS_OK; DS_ERR_ARG (out_dir is
 * one of the parts), DS_ERR_CONFLICT (out_dir holds another set, force 0),
 * DS_ERR_BUSY, DS_ERR_FORMAT (parts missing, duplicated, mismatched or
 * damaged) or DS_ERR_IO / NOMEM. */
int ds_merge(const char *out_dir, const char *const *part_dirs, size_t n_parts, int force, size_t *n_shards,
             uint64_t *rows_train, uint64_t *rows_val, char *err, size_t errlen);

/* `--part auto`: the part K of N (1 <= K <= N) this process builds, from the
 * launcher's environment: its rank and size (mpirun: OMPI_COMM_WORLD_RANK /
 * _SIZE; PMI: PMI_RANK / PMI_SIZE; an srun step: SLURM_PROCID /
 * SLURM_STEP_NUM_TASKS) and a Slurm job array (SLURM_ARRAY_TASK_ID - _MIN of
 * SLURM_ARRAY_TASK_COUNT, step 1); with both, array task a of c and rank r
 * of s build part a*s + r + 1 of c*s. src (may be 0-sized) says which
 * variables were used. DS_OK, or DS_ERR_ARG with a message in err (no
 * launcher, malformed values, a sparse array, N over 1000000). */
int ds_part_from_env(uint32_t *part_k, uint32_t *part_n, char *src, size_t srclen, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
