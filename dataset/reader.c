/* reader.c - streaming document reader: txt / JSONL, optionally zstd or
 * gzip, folders (recursive, sorted), stdin. Memory is bounded by the read
 * buffers plus max_record_bytes for the record being assembled. */
#include "ds.h"
#include "ds_columnar.h"
#include "mks_common.h"
#include "ds_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef MKS_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif
#include <zlib.h>
#include <zstd.h>
#ifdef MKS_HAVE_ARROW
#include "arrow_reader.h"
#include "ds_arrow_json.h"
#include "ds_chat.h"
#endif

#define DS_DEFAULT_MAX_RECORD ((size_t)256 << 20)
#define DS_IN_CAP ((size_t)256 << 10)     /* reused per read; larger only adds first-touch page faults */
#define ZERR (-100)                       /* internal: zstd or gzip error on the current file */
#define DS_JSON_DOM_MAX ((size_t)1 << 20) /* longest line handed to jansson (its tree: ~26x the bytes) */

const char *ds_strerror(int err) {
    switch (err) {
    case DS_OK: return "ok";
    case DS_ERR_NOMEM: return "out of memory";
    case DS_ERR_IO: return "cannot open or read an input";
    case DS_ERR_FORMAT: return "malformed data (a shard, manifest, checkpoint or input not in its format)";
    case DS_ERR_ZSTD: return "truncated or corrupt zstd stream";
    case DS_ERR_ARG: return "invalid argument";
    case DS_ERR_INTERNAL: return "internal error";
    case DS_ERR_BUSY: return "the output folder is locked by another writer";
    case DS_ERR_CONFLICT: return "the output would overwrite an input or another build";
    case DS_ERR_EMPTY: return "nothing to write";
    case DS_ERR_CANCELED: return "canceled";
    default: return "unknown error";
    }
}

void ds_reader_opts_init(ds_reader_opts *o) {
    memset(o, 0, sizeof *o);
    o->field = NULL;
    o->doc_sep = DS_SEP_FILE;
    o->max_record_bytes = 0;
    o->overlong = DS_OVERLONG_SKIP;
}

void ds_set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mc_vset_err(err, errlen, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ input list */

typedef enum { KIND_AUTO = 0, KIND_TXT = 1, KIND_JSONL = 2, KIND_PARQUET = 3, KIND_ARROW = 4 } in_kind;
enum { CODEC_SNIFF = 0, CODEC_ZSTD = 1, CODEC_GZIP = 2 };

typedef struct {
    char *path;
    in_kind kind;   /* from the extension; AUTO = sniff */
    int codec;      /* CODEC_ZSTD / CODEC_GZIP from the extension; CODEC_SNIFF: sniff the magic */
    uint64_t bytes; /* size when listed (0 for stdin): build balances --part K/N by it */
} in_file;

typedef struct {
    in_file *v;
    size_t n, cap;
} in_list;

static int ends_with(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* Compression suffixes: a dataset name is one of the kinds below plus at
 * most one of these (the folder walk lists exactly those names). */
static const struct {
    const char *suffix;
    int codec;
} k_codecs[] = {{".zst", CODEC_ZSTD}, {".zstd", CODEC_ZSTD}, {".gz", CODEC_GZIP}};

/* Classify by name. Returns 1 if the name is a known dataset file. */
static int classify(const char *path, in_kind *kind, int *codec) {
    size_t n = strlen(path);
    *codec = CODEC_SNIFF;
    /* columnar files compress inside (per page / per buffer): no outer codec */
    if (ends_with(path, n, ".parquet") || ends_with(path, n, ".arrow")) {
        *kind = ends_with(path, n, ".parquet") ? KIND_PARQUET : KIND_ARROW;
        return 1;
    }
    for (size_t i = 0; i < sizeof k_codecs / sizeof k_codecs[0]; i++)
        if (ends_with(path, n, k_codecs[i].suffix)) {
            *codec = k_codecs[i].codec;
            n -= strlen(k_codecs[i].suffix);
            break;
        }
    char tmp[16];
    static const char *const jsonl[] = {".jsonl", ".ndjson", ".json"};
    static const char *const txt[] = {".txt", ".text"};
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(jsonl[i]);
        if (n >= k) {
            memcpy(tmp, path + n - k, k);
            tmp[k] = 0;
            if (strcmp(tmp, jsonl[i]) == 0) {
                *kind = KIND_JSONL;
                return 1;
            }
        }
    }
    for (size_t i = 0; i < 2; i++) {
        size_t k = strlen(txt[i]);
        if (n >= k) {
            memcpy(tmp, path + n - k, k);
            tmp[k] = 0;
            if (strcmp(tmp, txt[i]) == 0) {
                *kind = KIND_TXT;
                return 1;
            }
        }
    }
    *kind = KIND_AUTO;
    return 0;
}

static int list_push(in_list *l, const char *path, in_kind kind, int codec, uint64_t bytes) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        in_file *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) return DS_ERR_NOMEM;
        l->v = nv;
        l->cap = nc;
    }
    char *p = strdup(path);
    if (!p) return DS_ERR_NOMEM;
    l->v[l->n].path = p;
    l->v[l->n].kind = kind;
    l->v[l->n].codec = codec;
    l->v[l->n].bytes = bytes;
    l->n++;
    return DS_OK;
}

/* Limits of the folder walk (docs/reader.md): an untrusted tree cannot make
 * the walk loop, recurse without end, or hold unbounded names in memory. */
#define DS_MAX_DEPTH 64                      /* nested folders below an input folder */
#define DS_MAX_INPUT_FILES ((size_t)1 << 22) /* dataset files over all inputs */
#define DS_MAX_DIR_ENTRIES ((size_t)1 << 22) /* entries listed in one folder */
#define DS_MAX_PATH 4096                     /* bytes of one path */

static const char *file_kind(mode_t m) {
    return S_ISFIFO(m)   ? "a pipe or FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISDIR(m)  ? "a folder"
           : S_ISLNK(m)  ? "a symbolic link"
                         : "not a file";
}

/* The folders being walked, innermost first: a folder that is its own
 * ancestor (a bind mount, or one swapped for a link mid-walk) is a loop. */
typedef struct dir_chain {
    dev_t dev;
    ino_t ino;
    const struct dir_chain *up;
} dir_chain;

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Reads the names in the folder open at fd (closed here), sorted. */
static int list_dir(int fd, const char *dir, char ***out, size_t *out_n, char *err, size_t errlen) {
    *out = NULL;
    *out_n = 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        ds_set_err(err, errlen, "%s: %s", dir, strerror(errno));
        close(fd);
        return DS_ERR_IO;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = DS_OK;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno) {
                ds_set_err(err, errlen, "%s: %s", dir, strerror(errno));
                rc = DS_ERR_IO;
            }
            break;
        }
        if (e->d_name[0] == '.') continue; /* ., .., hidden files */
        if (n == DS_MAX_DIR_ENTRIES) {
            ds_set_err(err, errlen, "%s: more than %zu entries in one folder", dir, DS_MAX_DIR_ENTRIES);
            rc = DS_ERR_IO;
            break;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 32;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                rc = DS_ERR_NOMEM;
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = DS_ERR_NOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == DS_OK && n > 1) qsort(names, n, sizeof *names, cmp_str); /* names is NULL when n == 0 */
    if (rc != DS_OK) {
        for (size_t i = 0; i < n; i++) free(names[i]);
        free(names);
        return rc;
    }
    *out = names;
    *out_n = n;
    return DS_OK;
}

/* Adds the dataset files below dir (open at fd, which is consumed). Entries
 * that are not dataset files by name are skipped whatever they are; a
 * dataset-named entry that is not a regular file (FIFO, socket, device,
 * dangling link) is an error rather than silently missing data or a read
 * that blocks. Symbolic links to files are followed, to folders not. */
static int walk_dir(in_list *l, int fd, const char *dir, const dir_chain *up, int depth, char *err, size_t errlen) {
    struct stat ds;
    if (fstat(fd, &ds) != 0) {
        ds_set_err(err, errlen, "%s: %s", dir, strerror(errno));
        close(fd);
        return DS_ERR_IO;
    }
    for (const dir_chain *c = up; c; c = c->up)
        if (c->dev == ds.st_dev && c->ino == ds.st_ino) {
            ds_set_err(err, errlen, "%s: folder loop (the folder contains itself)", dir);
            close(fd);
            return DS_ERR_IO;
        }
    if (depth > DS_MAX_DEPTH) {
        ds_set_err(err, errlen, "%s: folders nested more than %d deep", dir, DS_MAX_DEPTH);
        close(fd);
        return DS_ERR_IO;
    }
    dir_chain self = {ds.st_dev, ds.st_ino, up};
    char **names;
    size_t n;
    int rc = list_dir(fd, dir, &names, &n, err, errlen);
    if (rc != DS_OK) return rc;
    size_t dl = strlen(dir);
    for (size_t i = 0; i < n && rc == DS_OK; i++) {
        size_t len = dl + strlen(names[i]) + 2;
        if (len > DS_MAX_PATH) {
            ds_set_err(err, errlen, "path longer than %d bytes: %.160s.../%.40s", DS_MAX_PATH, dir, names[i]);
            rc = DS_ERR_IO;
            break;
        }
        char *p = malloc(len);
        if (!p) {
            rc = DS_ERR_NOMEM;
            break;
        }
        snprintf(p, len, "%s/%s", dir, names[i]);
        in_kind k;
        int z;
        int data = classify(p, &k, &z);
        struct stat ls, st;
        if (lstat(p, &ls) != 0) {
            if (data) { /* vanished while listing */
                ds_set_err(err, errlen, "%s: %s", p, strerror(errno));
                rc = DS_ERR_IO;
            }
        } else if (S_ISDIR(ls.st_mode)) {
            int sub = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
            if (sub < 0) {
                ds_set_err(err, errlen, "%s: %s", p, strerror(errno));
                rc = DS_ERR_IO;
            } else {
                rc = walk_dir(l, sub, p, &self, depth + 1, err, errlen);
            }
        } else if (data) {
            int lnk = S_ISLNK(ls.st_mode);
            if (lnk && stat(p, &st) != 0) {
                ds_set_err(err, errlen, "%s: symbolic link to nothing readable (%s)", p, strerror(errno));
                rc = DS_ERR_IO;
            } else if (!lnk) {
                st = ls;
            }
            if (rc == DS_OK && S_ISDIR(st.st_mode)) {
                /* a link to a folder: not followed (loops, trees outside the input) */
            } else if (rc == DS_OK && !S_ISREG(st.st_mode)) {
                ds_set_err(err, errlen, "%s: %s, not a regular file; remove it from the folder (a reader would block)",
                           p, file_kind(st.st_mode));
                rc = DS_ERR_IO;
            } else if (rc == DS_OK) {
                if (l->n >= DS_MAX_INPUT_FILES) {
                    ds_set_err(err, errlen, "%s: more than %zu input files", dir, DS_MAX_INPUT_FILES);
                    rc = DS_ERR_IO;
                } else {
                    rc = list_push(l, p, k, z, (uint64_t)st.st_size);
                }
            }
        }
        free(p);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* The inputs as every command reads them (ds_reader_open, and ds_build's
 * file list through ds_input_expand): "-" is stdin; a folder is walked
 * (walk_dir: recursive, sorted, hidden names skipped, dataset extensions);
 * any other input must be a regular file. keep_spelling: a folder's files
 * are named DIR/NAME with DIR exactly as given (build records them in its
 * manifest config and checkpoint, so their bytes stay those of earlier
 * builds); otherwise trailing slashes are dropped for nicer paths. */
static int expand_inputs(in_list *l, const char *const *inputs, size_t n_inputs, int keep_spelling, char *err,
                         size_t errlen) {
    int rc = DS_OK;
    for (size_t i = 0; i < n_inputs && rc == DS_OK; i++) {
        const char *p = inputs[i];
        if (!p) {
            rc = DS_ERR_ARG;
            break;
        }
        if (strcmp(p, "-") == 0) {
            rc = list_push(l, "-", KIND_AUTO, 0, 0);
            continue;
        }
        struct stat st;
        if (stat(p, &st) != 0) {
            ds_set_err(err, errlen, "%s: %s", p, strerror(errno));
            rc = DS_ERR_IO;
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            char *d = strdup(p);
            if (!d) {
                rc = DS_ERR_NOMEM;
                break;
            }
            size_t dl = strlen(d);
            while (!keep_spelling && dl > 1 && d[dl - 1] == '/') d[--dl] = 0;
            int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
            if (fd < 0) {
                ds_set_err(err, errlen, "%s: %s", d, strerror(errno));
                rc = DS_ERR_IO;
            } else {
                rc = walk_dir(l, fd, d, NULL, 0, err, errlen); /* an empty folder: nothing to read, no error */
            }
            free(d);
        } else if (!S_ISREG(st.st_mode)) {
            /* A pipe is read only as "-": a FIFO, /dev/fd/N from <(...) or a
             * device named as a file could block or never end. */
            ds_set_err(err, errlen, "%s: %s, not a regular file; use - to read from standard input", p,
                       file_kind(st.st_mode));
            rc = DS_ERR_IO;
        } else if (l->n >= DS_MAX_INPUT_FILES) {
            ds_set_err(err, errlen, "%s: more than %zu input files", p, DS_MAX_INPUT_FILES);
            rc = DS_ERR_IO;
        } else {
            in_kind k;
            int z;
            classify(p, &k, &z);
            rc = list_push(l, p, k, z, (uint64_t)st.st_size);
        }
    }
    if (rc == DS_ERR_NOMEM) ds_set_err(err, errlen, "out of memory");
    return rc;
}

int ds_input_expand(const char *const *inputs, size_t n_inputs, int keep_spelling, ds_input_files *out, char *err,
                    size_t errlen) {
    memset(out, 0, sizeof *out);
    in_list l = {0};
    int rc = expand_inputs(&l, inputs, n_inputs, keep_spelling, err, errlen);
    if (rc == DS_OK) {
        out->path = calloc(l.n + 1, sizeof *out->path);
        out->bytes = calloc(l.n + 1, sizeof *out->bytes);
        if (!out->path || !out->bytes) {
            ds_set_err(err, errlen, "out of memory");
            rc = DS_ERR_NOMEM;
        }
    }
    for (size_t i = 0; i < l.n; i++) {
        if (rc == DS_OK) {
            out->path[i] = l.v[i].path; /* moved */
            out->bytes[i] = l.v[i].bytes;
        } else {
            free(l.v[i].path);
        }
    }
    if (rc == DS_OK) out->n = l.n;
    else ds_input_files_free(out);
    free(l.v);
    return rc;
}

void ds_input_files_free(ds_input_files *f) {
    for (size_t i = 0; i < f->n; i++) free(f->path[i]);
    free(f->path);
    free(f->bytes);
    memset(f, 0, sizeof *f);
}

/* ---------------------------------------------------------------- reader */

struct ds_reader {
    ds_reader_opts opts;
    ds_json_ctx *jctx; /* field path + parser scratch */
    int field_explicit;

    in_list files;
    size_t cur; /* index of the current file */
    int open;   /* a file is open */
    int fd;
    int is_stdin; /* fd is 0, not ours to close */
    int eof_raw;  /* raw input exhausted */
    int is_zst;
    int is_gz;
    in_kind kind;
    ZSTD_DCtx *zd;
    size_t zlast; /* last ZSTD_decompressStream return (0 = frame complete) */
    int zerr;     /* a zstd or gzip error happened on this file */
    char zmsg[160];
    z_stream *gz; /* zlib inflate state, made at the first gzip file */
#ifdef MKS_HAVE_ISAL
    struct inflate_state *isal; /* ISA-L's, used instead of zlib's where built with it */
#endif
    struct gz_pipe *gzp;   /* the inflate thread of the open gzip file, if any */
    int gz_in_member;      /* inside a gzip member (EOF here = truncated) */
    uint64_t gz_members;   /* members finished in this file */
    uint64_t raw_base;     /* compressed offset of r->in[0] */
    uint64_t gz_member_at; /* compressed offset where the current member starts */

    uint8_t *in; /* raw input buffer */
    size_t in_pos, in_len;
    uint8_t *out; /* decompressed buffer (zstd) */
    size_t out_cap;
    const uint8_t *win; /* current window of decompressed bytes */
    size_t wpos, wlen;

    uint64_t pos;  /* decompressed offset of the next unread byte */
    uint64_t line; /* line number of the next unread byte (1-based) */
    int at_file_start;
    int file_done;

    uint8_t *rec; /* record assembly buffer (<= max_record_bytes) */
    size_t rec_len, rec_cap;
    uint64_t index;
    char detail[256];

#ifdef MKS_HAVE_ARROW
    ds_arrow *arrow;    /* the open Parquet / Arrow IPC file (arrow_reader.h) */
    int64_t arrow_rows; /* rows in its loaded piece */
    int64_t arrow_row;  /* next row of the piece */
    ds_ajson *ajson;    /* opts.row_format: the fields a row's JSON object holds */
    ds_ajson_buf ajbuf; /* ... and that object */
#endif
};

typedef struct gz_pipe gz_pipe;
static void gz_pipe_stop(ds_reader *r);

/* ds_columnar_stats_get's totals: the files' figures are added as each closes. */
static pthread_mutex_t g_columnar_mu = PTHREAD_MUTEX_INITIALIZER;
static ds_columnar_stats g_columnar;
#ifdef MKS_HAVE_ARROW
static void columnar_account(const ds_arrow *a) {
    uint64_t big = ds_arrow_largest_piece(a), peak = ds_arrow_peak_bytes(a);
    pthread_mutex_lock(&g_columnar_mu);
    g_columnar.files++;
    g_columnar.pieces += ds_arrow_n_pieces(a);
    if (big > g_columnar.largest_piece_bytes) g_columnar.largest_piece_bytes = big;
    if (peak > g_columnar.peak_bytes) g_columnar.peak_bytes = peak;
    pthread_mutex_unlock(&g_columnar_mu);
}
#endif
static void gz_pipe_start(ds_reader *r);

static void close_file(ds_reader *r) {
    gz_pipe_stop(r); /* joined before its fd closes */
#ifdef MKS_HAVE_ARROW
    if (r->arrow) {
        columnar_account(r->arrow);
        ds_arrow_close(r->arrow); /* closes the fd it was given */
        r->arrow = NULL;
        r->fd = -1;
    }
#endif
    if (r->open) {
        if (r->fd >= 0 && !r->is_stdin) close(r->fd);
        r->open = 0;
        r->fd = -1;
    }
}

void ds_reader_free(ds_reader *r) {
    if (!r) return;
    close_file(r);
    for (size_t i = 0; i < r->files.n; i++) free(r->files.v[i].path);
    free(r->files.v);
    ds_json_ctx_free(r->jctx);
#ifdef MKS_HAVE_ARROW
    ds_ajson_free(r->ajson);
    ds_ajson_buf_free(&r->ajbuf);
#endif
    if (r->zd) ZSTD_freeDCtx(r->zd);
    if (r->gz) {
        inflateEnd(r->gz);
        free(r->gz);
    }
#ifdef MKS_HAVE_ISAL
    free(r->isal);
#endif
    free(r->in);
    free(r->out);
    free(r->rec);
    free(r);
}

int ds_reader_open(const char *const *inputs, size_t n_inputs, const ds_reader_opts *opts, ds_reader **out, char *err,
                   size_t errlen) {
    if (!out || (!inputs && n_inputs)) return DS_ERR_ARG;
    *out = NULL;
    ds_reader *r = calloc(1, sizeof *r);
    if (!r) return DS_ERR_NOMEM;
    r->fd = -1;
    if (opts) r->opts = *opts;
    else ds_reader_opts_init(&r->opts);
    if (!r->opts.max_record_bytes) r->opts.max_record_bytes = DS_DEFAULT_MAX_RECORD;
    if (r->opts.doc_sep > DS_SEP_BLANK || r->opts.overlong > DS_OVERLONG_CUT) {
        ds_set_err(err, errlen, "invalid reader options");
        ds_reader_free(r);
        return DS_ERR_ARG;
    }
    r->field_explicit = r->opts.field != NULL;
    int frc = ds_json_ctx_new(&r->opts, &r->jctx);
    if (frc) {
        if (frc == DS_ERR_ARG)
            ds_set_err(err, errlen, "bad --field '%s': empty path component", r->opts.field ? r->opts.field : "");
        ds_reader_free(r);
        return frc;
    }

    int rc = expand_inputs(&r->files, inputs, n_inputs, 0, err, errlen);
    if (rc == DS_OK) {
        r->in = malloc(DS_IN_CAP);
        r->out_cap = ZSTD_DStreamOutSize() * 8;
        r->out = malloc(r->out_cap);
        r->rec_cap = 1 << 16;
        if (r->rec_cap > r->opts.max_record_bytes) r->rec_cap = r->opts.max_record_bytes;
        r->rec = malloc(r->rec_cap + 1);
        r->zd = ZSTD_createDCtx();
        if (!r->in || !r->out || !r->rec || !r->zd) rc = DS_ERR_NOMEM;
    }
    if (rc != DS_OK) {
        if (rc == DS_ERR_NOMEM) ds_set_err(err, errlen, "out of memory");
        ds_reader_free(r);
        return rc;
    }
    *out = r;
    return DS_OK;
}

/* Read raw bytes into r->in. Returns bytes read, 0 at EOF, <0 on error. */
static ssize_t raw_read(ds_reader *r) {
    for (;;) {
        ssize_t n = read(r->fd, r->in, DS_IN_CAP);
        if (n < 0 && errno == EINTR) continue;
        return n;
    }
}

static int open_arrow(ds_reader *r, char *err, size_t errlen);

static int open_file(ds_reader *r, char *err, size_t errlen) {
    in_file *f = &r->files.v[r->cur];
    if (f->kind == KIND_PARQUET || f->kind == KIND_ARROW) return open_arrow(r, err, errlen);
    if (strcmp(f->path, "-") == 0) {
        r->fd = 0;
        r->is_stdin = 1;
    } else {
        r->is_stdin = 0;
        /* regular files only, checked again at open time: the file may have
         * been replaced by a FIFO since the input list was made */
        r->fd = ds_open_regular(f->path, err, errlen);
        if (r->fd < 0) {
            r->fd = -1;
            return DS_ERR_IO;
        }
#ifdef POSIX_FADV_SEQUENTIAL
        posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    }
    r->open = 1;
    r->eof_raw = 0;
    r->in_pos = r->in_len = 0;
    r->win = NULL;
    r->wpos = r->wlen = 0;
    r->pos = 0;
    r->line = 1;
    r->zerr = 0;
    r->zlast = 0;
    r->at_file_start = 1;
    r->file_done = 0;
    r->kind = f->kind;
    /* first raw chunk: sniff zstd magic */
    ssize_t n = raw_read(r);
    if (n < 0) {
        ds_set_err(err, errlen, "%s: %s", f->path, strerror(errno));
        return DS_ERR_IO;
    }
    r->in_len = (size_t)n;
    if (n == 0) r->eof_raw = 1;
    int magic = n >= 4 && r->in[0] == 0x28 && r->in[1] == 0xB5 && r->in[2] == 0x2F && r->in[3] == 0xFD;
    /* gzip: ID1 ID2 and CM = 8 (deflate, the only method RFC 1952 defines) */
    int gz_magic = n >= 3 && r->in[0] == 0x1F && r->in[1] == 0x8B && r->in[2] == 0x08;
    r->is_zst = f->codec == CODEC_ZSTD || (f->codec == CODEC_SNIFF && magic);
    r->is_gz = f->codec == CODEC_GZIP || (f->codec == CODEC_SNIFF && !magic && gz_magic);
    r->raw_base = 0;
    r->gz_members = 0;
    r->gz_in_member = 0;
    if (r->is_zst) ZSTD_DCtx_reset(r->zd, ZSTD_reset_session_only);
#ifdef MKS_HAVE_ISAL
    if (r->is_gz && !r->isal && !(r->isal = malloc(sizeof *r->isal))) return DS_ERR_NOMEM;
#else
    if (r->is_gz && !r->gz) {
        if (!(r->gz = calloc(1, sizeof *r->gz))) return DS_ERR_NOMEM;
        /* 15 + 16: a gzip wrapper only (zlib or raw deflate is damage) */
        if (inflateInit2(r->gz, 15 + 16) != Z_OK) {
            free(r->gz);
            r->gz = NULL;
            return DS_ERR_NOMEM;
        }
    }
#endif
    if (r->is_gz && !r->is_stdin && !r->eof_raw) gz_pipe_start(r);
    return DS_OK;
}

/* Inflates the next bytes of the open gzip file into out[0..cap): members
 * one after another (gzip -c a b, pigz, bgzip's blocks), each checked by
 * zlib against its CRC-32 and ISIZE trailer. 1: *got > 0 bytes, 0: clean
 * end, ZERR: damage (msg says what and where; *got bytes before it are still
 * good), DS_ERR_*. Touches only the raw-input and inflate state, so it runs
 * on the inflate thread (gz_worker) or inline. Output goes through fixed
 * buffers, so a bomb costs time, not memory: the record being assembled is
 * capped by max_record_bytes as with zstd. */
#ifdef MKS_HAVE_ISAL
/* isal_inflate's errors in zlib's words, so the reports read the same
 * whichever library inflates. */
static const char *isal_error(int ret) {
    switch (ret) {
    case ISAL_INVALID_BLOCK: return "invalid block type or stored block lengths";
    case ISAL_INVALID_SYMBOL: return "invalid code or literal/length";
    case ISAL_INVALID_LOOKBACK: return "invalid distance too far back";
    case ISAL_INVALID_WRAPPER: return "incorrect header check";
    case ISAL_UNSUPPORTED_METHOD: return "unknown compression method";
    case ISAL_INCORRECT_CHECKSUM: return "incorrect data check (CRC-32 or length)";
    default: return "corrupt deflate data";
    }
}

/* gz_produce with ISA-L's igzip: same contract, same reports. */
static int gz_produce_isal(ds_reader *r, uint8_t *out, size_t cap, size_t *got, char *msg, size_t msglen) {
    struct inflate_state *z = r->isal;
    *got = 0;
    for (;;) {
        if (r->in_pos == r->in_len && !r->eof_raw) {
            ssize_t n = raw_read(r);
            if (n < 0) return DS_ERR_IO;
            r->raw_base += r->in_len;
            r->in_pos = 0;
            r->in_len = (size_t)n;
            if (n == 0) r->eof_raw = 1;
        }
        if (r->in_pos == r->in_len && r->eof_raw) {
            uint64_t member_in = r->raw_base + r->in_pos - r->gz_member_at;
            if (r->gz_in_member && r->gz_members && member_in < 10) {
                snprintf(msg, msglen, "trailing garbage: %llu bytes at compressed byte %llu after gzip member %llu",
                         (unsigned long long)member_in, (unsigned long long)r->gz_member_at,
                         (unsigned long long)r->gz_members);
                return ZERR;
            }
            if (r->gz_in_member || r->gz_members == 0) {
                snprintf(msg, msglen, "gzip stream truncated (input ended inside member %llu at compressed byte %llu)",
                         (unsigned long long)r->gz_members + 1, (unsigned long long)(r->raw_base + r->in_pos));
                return ZERR;
            }
            return 0;
        }
        if (!r->gz_in_member) {
            isal_inflate_init(z);
            z->crc_flag = ISAL_GZIP;
            r->gz_in_member = 1;
            r->gz_member_at = r->raw_base + r->in_pos;
        }
        z->next_in = r->in + r->in_pos;
        z->avail_in = (uint32_t)(r->in_len - r->in_pos);
        z->next_out = out;
        z->avail_out = (uint32_t)cap;
        int ret = isal_inflate(z);
        r->in_pos = r->in_len - z->avail_in;
        *got = cap - z->avail_out;
        if (ret < 0) {
            uint64_t bad = r->raw_base + r->in_pos;
            if (r->gz_members && (ret == ISAL_INVALID_WRAPPER || ret == ISAL_UNSUPPORTED_METHOD))
                snprintf(msg, msglen,
                         "trailing garbage: bytes at compressed byte %llu after gzip member %llu "
                         "are not a gzip member (%s)",
                         (unsigned long long)r->gz_member_at, (unsigned long long)r->gz_members, isal_error(ret));
            else
                snprintf(msg, msglen, "gzip: %s (member %llu, compressed byte %llu)", isal_error(ret),
                         (unsigned long long)r->gz_members + 1, (unsigned long long)bad);
            return ZERR;
        }
        if (z->block_state == ISAL_BLOCK_FINISH) {
            r->gz_in_member = 0;
            r->gz_members++;
        }
        if (*got > 0) return 1;
    }
}
#else
static int gz_produce_zlib(ds_reader *r, uint8_t *out, size_t cap, size_t *got, char *msg, size_t msglen) {
    z_stream *z = r->gz;
    *got = 0;
    for (;;) {
        if (r->in_pos == r->in_len && !r->eof_raw) {
            ssize_t n = raw_read(r);
            if (n < 0) return DS_ERR_IO;
            r->raw_base += r->in_len;
            r->in_pos = 0;
            r->in_len = (size_t)n;
            if (n == 0) r->eof_raw = 1;
        }
        if (r->in_pos == r->in_len && r->eof_raw) {
            if (r->gz_in_member && r->gz_members && z->total_in < 10) {
                /* a few bytes after the last member, too short for a header */
                snprintf(msg, msglen, "trailing garbage: %llu bytes at compressed byte %llu after gzip member %llu",
                         (unsigned long long)z->total_in, (unsigned long long)r->gz_member_at,
                         (unsigned long long)r->gz_members);
                return ZERR;
            }
            if (r->gz_in_member || r->gz_members == 0) {
                snprintf(msg, msglen, "gzip stream truncated (input ended inside member %llu at compressed byte %llu)",
                         (unsigned long long)r->gz_members + 1, (unsigned long long)(r->raw_base + r->in_pos));
                return ZERR;
            }
            return 0;
        }
        if (!r->gz_in_member) {
            if (inflateReset(z) != Z_OK) return DS_ERR_INTERNAL;
            r->gz_in_member = 1;
            r->gz_member_at = r->raw_base + r->in_pos;
        }
        z->next_in = r->in + r->in_pos;
        z->avail_in = (uInt)(r->in_len - r->in_pos);
        z->next_out = out;
        z->avail_out = (uInt)cap;
        int ret = inflate(z, Z_NO_FLUSH);
        r->in_pos = r->in_len - z->avail_in;
        *got = cap - z->avail_out;
        if (ret == Z_STREAM_END) {
            r->gz_in_member = 0;
            r->gz_members++;
        } else if (ret == Z_MEM_ERROR) {
            return DS_ERR_NOMEM;
        } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
            uint64_t bad = r->raw_base + r->in_pos;
            /* damage in the 10-byte fixed header of a later member: bytes
             * appended after the last member (gzip -t: "trailing garbage") */
            if (r->gz_members && bad - r->gz_member_at < 10)
                snprintf(msg, msglen,
                         "trailing garbage: bytes at compressed byte %llu after gzip member %llu "
                         "are not a gzip member (%s)",
                         (unsigned long long)r->gz_member_at, (unsigned long long)r->gz_members,
                         z->msg ? z->msg : "bad header");
            else
                snprintf(msg, msglen, "gzip: %s (member %llu, compressed byte %llu)",
                         z->msg ? z->msg : "corrupt deflate data", (unsigned long long)r->gz_members + 1,
                         (unsigned long long)bad);
            return ZERR;
        }
        if (*got > 0) return 1;
    }
}

#endif

static int gz_produce(ds_reader *r, uint8_t *out, size_t cap, size_t *got, char *msg, size_t msglen) {
#ifdef MKS_HAVE_ISAL
    return gz_produce_isal(r, out, cap, got, msg, msglen);
#else
    return gz_produce_zlib(r, out, cap, got, msg, msglen);
#endif
}

/* The inflate thread of a gzip file. build and lint read on one thread that
 * also scans JSON; at 2 threads that thread bounds the wall time, so zlib's
 * ~320 MB/s inflate there made a .jsonl.gz build 1.22x the .jsonl one
 * (tools/bench/bench_gzip.py). Here inflate overlaps the scan through
 * GZ_SLOTS fixed buffers (memory stays bounded). Regular files only: a
 * thread blocked reading a pipe could not be joined. */
#define GZ_SLOTS 3
typedef struct gz_slot {
    uint8_t *buf;
    size_t len;
    int status; /* gz_produce's result */
    char msg[160];
} gz_slot;

struct gz_pipe {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gz_slot slot[GZ_SLOTS];
    uint64_t produced, consumed; /* slots handed over / given back */
    int holding;                 /* the reader's window is slot[consumed % GZ_SLOTS] */
    int stop;
    ds_reader *r;
};

static void *gz_worker(void *arg) {
    gz_pipe *g = arg;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (g->produced - g->consumed == GZ_SLOTS && !g->stop) pthread_cond_wait(&g->cv, &g->mu);
        int stop = g->stop;
        pthread_mutex_unlock(&g->mu);
        if (stop) break;
        gz_slot *s = &g->slot[g->produced % GZ_SLOTS];
        s->status = gz_produce(g->r, s->buf, g->r->out_cap, &s->len, s->msg, sizeof s->msg);
        pthread_mutex_lock(&g->mu);
        g->produced++;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        if (s->status != 1) break;
    }
    return NULL;
}

static void gz_pipe_stop(ds_reader *r) {
    gz_pipe *g = r->gzp;
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->th, NULL);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    for (int i = 0; i < GZ_SLOTS; i++) free(g->slot[i].buf);
    free(g);
    r->gzp = NULL;
}

/* Starts the inflate thread for the open file; without one (no memory or
 * no thread) fill_gz inflates inline, same bytes. */
static void gz_pipe_start(ds_reader *r) {
    gz_pipe *g = calloc(1, sizeof *g);
    if (!g) return;
    g->r = r;
    int ok = 1;
    for (int i = 0; i < GZ_SLOTS; i++) ok &= (g->slot[i].buf = malloc(r->out_cap)) != NULL;
    if (ok && pthread_mutex_init(&g->mu, NULL) == 0) {
        if (pthread_cond_init(&g->cv, NULL) == 0) {
            if (pthread_create(&g->th, NULL, gz_worker, g) == 0) {
                r->gzp = g;
                return;
            }
            pthread_cond_destroy(&g->cv);
        }
        pthread_mutex_destroy(&g->mu);
    }
    for (int i = 0; i < GZ_SLOTS; i++) free(g->slot[i].buf);
    free(g);
}

/* The gzip branch of fill(). */
static int fill_gz(ds_reader *r) {
    size_t got = 0;
    int rc;
    const uint8_t *buf = r->out;
    gz_pipe *g = r->gzp;
    if (g) {
        pthread_mutex_lock(&g->mu);
        if (g->holding) {
            g->consumed++;
            g->holding = 0;
            pthread_cond_broadcast(&g->cv);
        }
        while (g->produced == g->consumed) pthread_cond_wait(&g->cv, &g->mu);
        gz_slot *s = &g->slot[g->consumed % GZ_SLOTS];
        pthread_mutex_unlock(&g->mu);
        rc = s->status;
        got = s->len;
        buf = s->buf;
        if (rc == ZERR) snprintf(r->zmsg, sizeof r->zmsg, "%s", s->msg);
        if (got) g->holding = 1; /* the slot stays ours while the window points into it */
    } else {
        rc = gz_produce(r, r->out, r->out_cap, &got, r->zmsg, sizeof r->zmsg);
    }
    if (rc == ZERR) r->zerr = 1;
    if (rc < 0 && rc != ZERR) return rc;
    if (got) { /* what inflated before damage is still delivered */
        r->win = buf;
        r->wpos = 0;
        r->wlen = got;
        return 1;
    }
    return rc;
}

/* Make sure the window has unread bytes. 1: data, 0: EOF, ZERR: zstd error
 * (r->zerr set, r->zmsg holds the reason), DS_ERR_IO on read errors. */
static int fill(ds_reader *r) {
    if (r->wpos < r->wlen) return 1;
    if (r->zerr) return ZERR;
    if (r->is_gz) return fill_gz(r);
    if (!r->is_zst) {
        if (r->in_pos < r->in_len) {
            r->win = r->in + r->in_pos;
            r->wpos = 0;
            r->wlen = r->in_len - r->in_pos;
            r->in_pos = r->in_len;
            return 1;
        }
        if (r->eof_raw) return 0;
        ssize_t n = raw_read(r);
        if (n < 0) return DS_ERR_IO;
        if (n == 0) {
            r->eof_raw = 1;
            return 0;
        }
        r->in_pos = 0;
        r->in_len = (size_t)n;
        r->win = r->in;
        r->wpos = 0;
        r->wlen = (size_t)n;
        r->in_pos = r->in_len;
        return 1;
    }
    for (;;) {
        if (r->in_pos == r->in_len && !r->eof_raw) {
            ssize_t n = raw_read(r);
            if (n < 0) return DS_ERR_IO;
            r->in_pos = 0;
            r->in_len = (size_t)n;
            if (n == 0) r->eof_raw = 1;
        }
        if (r->in_pos == r->in_len && r->eof_raw) {
            if (r->zlast != 0) {
                r->zerr = 1;
                snprintf(r->zmsg, sizeof r->zmsg, "zstd stream truncated (input ended inside a frame)");
                return ZERR;
            }
            return 0;
        }
        ZSTD_inBuffer ib = {r->in, r->in_len, r->in_pos};
        ZSTD_outBuffer ob = {r->out, r->out_cap, 0};
        size_t ret = ZSTD_decompressStream(r->zd, &ob, &ib);
        r->in_pos = ib.pos;
        if (ZSTD_isError(ret)) {
            r->zerr = 1;
            snprintf(r->zmsg, sizeof r->zmsg, "zstd: %s", ZSTD_getErrorName(ret));
            return ZERR;
        }
        r->zlast = ret;
        if (ob.pos > 0) {
            r->win = r->out;
            r->wpos = 0;
            r->wlen = ob.pos;
            return 1;
        }
    }
}

long long ds_reader_take_text(ds_reader *r, const ds_record *rec, uint8_t **buf, size_t *cap) {
    if (!r || !rec || !buf || !cap || !rec->text || !r->rec) return -1;
    const uint8_t *t = rec->text;
    if (t < r->rec || t > r->rec + r->rec_len || rec->len > (size_t)(r->rec + r->rec_len - t)) return -1;
    uint8_t *mine = r->rec, *next = *buf;
    size_t mine_size = r->rec_cap + 1, next_cap;
    if (next && *cap >= 2) {
        next_cap = *cap - 1; /* one byte stays for the terminating NUL */
    } else {
        next_cap = (size_t)1 << 16;
        if (next_cap > r->opts.max_record_bytes) next_cap = r->opts.max_record_bytes;
        if (!(next = malloc(next_cap + 1))) return -1;
        free(*buf);
    }
    r->rec = next;
    r->rec_cap = next_cap;
    r->rec_len = 0;
    *buf = mine;
    *cap = mine_size;
    return (long long)(t - mine);
}

/* Room for `want` bytes in the record buffer (capped at max_record_bytes). */
static int rec_reserve(ds_reader *r, uint64_t want) {
    if (want <= r->rec_cap) return DS_OK;
    uint64_t nc = r->rec_cap * 2;
    while (nc < want) nc *= 2;
    if (nc > r->opts.max_record_bytes) nc = r->opts.max_record_bytes;
    if (nc <= r->rec_cap) return DS_OK;
    uint8_t *nb = realloc(r->rec, (size_t)nc + 1);
    if (!nb) return DS_ERR_NOMEM;
    r->rec = nb;
    r->rec_cap = (size_t)nc;
    return DS_OK;
}

/* Append up to n bytes to the record buffer, respecting max_record_bytes.
 * Returns the number of bytes that did not fit (dropped). */
static int rec_append(ds_reader *r, const uint8_t *p, size_t n, size_t *dropped) {
    size_t room = r->opts.max_record_bytes - r->rec_len;
    size_t take = n < room ? n : room;
    *dropped = n - take;
    if (r->rec_len + take > r->rec_cap && rec_reserve(r, r->rec_len + take)) return DS_ERR_NOMEM;
    memcpy(r->rec + r->rec_len, p, take);
    r->rec_len += take;
    return DS_OK;
}

typedef struct {
    uint64_t bytes; /* raw bytes of the line, newline excluded */
    int had_nl;
    int nonblank; /* has a byte other than space, \t, \r, \f, \v */
    int overflow; /* some bytes did not fit */
} line_info;

static int is_blank_byte(uint8_t c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

/* Read one line, appending it to r->rec. 1: a line (maybe without newline),
 * 0: EOF and nothing read, ZERR: zstd error (partial line dropped), <0 other. */
static int read_line(ds_reader *r, line_info *li, int want_blank) {
    memset(li, 0, sizeof *li);
    int any = 0;
    for (;;) {
        int f = fill(r);
        if (f == 0) return any ? 1 : 0;
        if (f < 0) return f;
        any = 1;
        const uint8_t *s = r->win + r->wpos;
        size_t avail = r->wlen - r->wpos;
        const uint8_t *nl = memchr(s, '\n', avail);
        size_t n = nl ? (size_t)(nl - s) : avail;
        if (want_blank && !li->nonblank)
            for (size_t i = 0; i < n; i++)
                if (!is_blank_byte(s[i])) {
                    li->nonblank = 1;
                    break;
                }
        size_t dropped;
        int rc = rec_append(r, s, n, &dropped);
        if (rc) return rc;
        if (dropped) li->overflow = 1;
        li->bytes += n;
        r->pos += n;
        r->wpos += n;
        if (nl) {
            r->wpos++;
            r->pos++;
            r->line++;
            li->had_nl = 1;
            return 1;
        }
    }
}

/* Back a cut off to a UTF-8 boundary (drops at most 3 bytes). */
static size_t utf8_cut(const uint8_t *p, size_t n) {
    if (n == 0) return 0;
    size_t j = n - 1;
    while (j > 0 && n - j < 4 && (p[j] & 0xC0) == 0x80) j--;
    uint8_t c = p[j];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > 1 && n - j < need) return j;
    return n;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}
static int parse_u(const uint8_t *p, size_t n, size_t i, unsigned *v) {
    /* p[i] == '\\', p[i+1] == 'u' */
    if (i + 6 > n || p[i + 1] != 'u') return 0;
    unsigned x = 0;
    for (int k = 2; k < 6; k++) {
        int h = hexval(p[i + k]);
        if (h < 0) return 0;
        x = x * 16 + (unsigned)h;
    }
    *v = x;
    return 1;
}
size_t ds_fix_lone_surrogates(uint8_t *p, size_t n) {
    size_t fixed = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] != '\\') continue;
        if (p[i + 1] != 'u') {
            i++;
            continue;
        } /* skip escaped char, e.g. \\ */
        unsigned v;
        if (!parse_u(p, n, i, &v)) {
            i++;
            continue;
        }
        if (v >= 0xD800 && v <= 0xDBFF) {
            unsigned w;
            if (i + 12 <= n && p[i + 6] == '\\' && parse_u(p, n, i + 6, &w) && w >= 0xDC00 && w <= 0xDFFF) {
                i += 11;
                continue;
            }
        } else if (!(v >= 0xDC00 && v <= 0xDFFF)) {
            i += 5;
            continue;
        }
        memcpy(p + i, "\\uFFFD", 6);
        fixed++;
        i += 5;
    }
    return fixed;
}

static void rec_base(ds_reader *r, ds_record *rec, uint64_t line, uint64_t off) {
    memset(rec, 0, sizeof *rec);
    rec->file = r->files.v[r->cur].path;
    rec->line = line;
    rec->offset = off;
    rec->index = r->index;
}

static void set_overlong(ds_reader *r, ds_record *rec, int txt) {
    rec->status = DS_REC_OVERLONG;
    snprintf(r->detail, sizeof r->detail, "record of %llu bytes over the %zu-byte limit",
             (unsigned long long)rec->record_bytes, r->opts.max_record_bytes);
    rec->detail = r->detail;
    if (txt && r->opts.overlong == DS_OVERLONG_CUT) {
        rec->text = r->rec;
        rec->len = utf8_cut(r->rec, r->rec_len);
        rec->flags |= DS_RECF_CUT;
    } else {
        rec->text = NULL;
        rec->len = 0;
    }
}

static void strip_bom(ds_record *rec) {
    if (rec->text && rec->len >= 3 && rec->text[0] == 0xEF && rec->text[1] == 0xBB && rec->text[2] == 0xBF) {
        rec->text += 3;
        rec->len -= 3;
        rec->flags |= DS_RECF_BOM;
    }
}

static void zstd_record(ds_reader *r, ds_record *rec) {
    rec_base(r, rec, r->line, r->pos);
    rec->status = DS_REC_ZSTD_ERROR;
    snprintf(r->detail, sizeof r->detail, "%s", r->zmsg);
    rec->detail = r->detail;
    r->file_done = 1;
}

struct ds_json_ctx {
    char **parts; /* dotted path split */
    size_t n_parts;
    char *buf;
    char *name;    /* the field as given */
    json_t *json;  /* parsed JSON of the last record */
    uint8_t *copy; /* scratch for the lone-surrogate retry */
    size_t copy_cap;
    ds_jscan_buf scan; /* json_scan.c: decoded field of the last record */
    char detail[256];
};

void ds_json_ctx_free(ds_json_ctx *c) {
    if (!c) return;
    if (c->json) json_decref(c->json);
    free(c->parts);
    free(c->buf);
    free(c->name);
    free(c->copy);
    ds_jscan_buf_free(&c->scan);
    free(c);
}

int ds_json_ctx_new(const ds_reader_opts *o, ds_json_ctx **out) {
    *out = NULL;
    const char *field = o && o->field ? o->field : "text";
    if (!*field) return DS_ERR_ARG;
    ds_json_ctx *c = calloc(1, sizeof *c);
    if (!c) return DS_ERR_NOMEM;
    c->buf = strdup(field);
    c->name = strdup(field);
    size_t parts = 1;
    for (const char *q = field; *q; q++) parts += *q == '.';
    c->parts = calloc(parts, sizeof *c->parts);
    if (!c->buf || !c->name || !c->parts) {
        ds_json_ctx_free(c);
        return DS_ERR_NOMEM;
    }
    c->parts[c->n_parts++] = c->buf;
    for (char *q = c->buf; *q; q++)
        if (*q == '.') {
            *q = 0;
            c->parts[c->n_parts++] = q + 1;
        }
    for (size_t i = 0; i < c->n_parts; i++)
        if (!*c->parts[i]) {
            ds_json_ctx_free(c);
            return DS_ERR_ARG;
        }
    *out = c;
    return DS_OK;
}

/* One JSONL line to the --field text: the fast scanner (json_scan.c) first,
 * jansson only for the lines the scanner cannot decide (with the lone-
 * surrogate retry). Long (~135 lines) because both paths must give the same
 * record and the same reject reason, word for word; they share the line's
 * state and the message buffer. */
int ds_json_extract(ds_json_ctx *c, const uint8_t *line, size_t len, ds_record *rec) {
    if (c->json) {
        json_decref(c->json);
        c->json = NULL;
    }
    rec->flags &= ~(uint32_t)DS_RECF_RAW_JSON;
    rec->detail = NULL;
    const uint8_t *p = line;
    size_t n = len;
    if (n >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
        p += 3;
        n -= 3;
        rec->flags |= DS_RECF_BOM;
    }
    /* Fast path (json_scan.c): same acceptance and results as the jansson
     * code below, ~40x fewer instructions (docs/reader.md). Invalid or undecided lines
     * go to jansson, so the error details stay jansson's. */
    ds_jscan_result sr;
    switch (ds_json_scan(p, n, c->parts, c->n_parts, &c->scan, &sr)) {
    case DS_JSCAN_OK:
        if (sr.lone_surrogate) rec->flags |= DS_RECF_JSON_LONE_SURROGATE;
        rec->status = DS_REC_OK;
        rec->text = sr.text;
        rec->len = sr.len;
        return DS_OK;
    case DS_JSCAN_NOT_OBJECT:
    case DS_JSCAN_PARENT_NOT_OBJECT:
    case DS_JSCAN_MISSING:
        if (sr.lone_surrogate) rec->flags |= DS_RECF_JSON_LONE_SURROGATE;
        rec->text = NULL;
        rec->len = 0;
        rec->status = DS_REC_MISSING_FIELD;
        if (sr.status == DS_JSCAN_MISSING) snprintf(c->detail, sizeof c->detail, "no field '%s'", c->name);
        else
            snprintf(c->detail, sizeof c->detail, "%s",
                     sr.status == DS_JSCAN_NOT_OBJECT ? "line is not a JSON object"
                                                      : "parent of the field is not an object");
        rec->detail = c->detail;
        return DS_OK;
    case DS_JSCAN_NOT_STRING: {
        if (sr.lone_surrogate) rec->flags |= DS_RECF_JSON_LONE_SURROGATE;
        rec->text = NULL;
        rec->len = 0;
        rec->status = DS_REC_NOT_STRING;
        const char *t = sr.type == DS_JSCAN_T_NULL     ? "null"
                        : sr.type == DS_JSCAN_T_OBJECT ? "an object"
                        : sr.type == DS_JSCAN_T_ARRAY  ? "an array"
                        : sr.type == DS_JSCAN_T_NUMBER ? "a number"
                                                       : "a boolean";
        snprintf(c->detail, sizeof c->detail, "field '%s' is %s, not a string", c->name, t);
        rec->detail = c->detail;
        return DS_OK;
    }
    case DS_JSCAN_NOMEM: return DS_ERR_NOMEM;
    default: /* invalid or unsure: jansson decides */ break;
    }
    if (n > DS_JSON_DOM_MAX) {
        /* jansson builds the whole document tree, ~26 bytes of memory per
         * input byte for "[0,0,0,...": a hostile 256 MiB line would take
         * gigabytes per worker. The scanner's INVALID is final (same
         * acceptance); an UNSURE line this long is refused unparsed. */
        rec->status = DS_REC_BAD_JSON;
        rec->text = line;
        rec->len = len;
        if (sr.status == DS_JSCAN_INVALID)
            snprintf(c->detail, sizeof c->detail, "invalid JSON (line of %zu bytes; no parser message over %zu MiB)", n,
                     DS_JSON_DOM_MAX >> 20);
        else
            snprintf(c->detail, sizeof c->detail,
                     "not parsed: a number >= 1e308 or a NUL byte after a value in a line over %zu MiB",
                     DS_JSON_DOM_MAX >> 20);
        rec->detail = c->detail;
        return DS_OK;
    }
    json_error_t je;
    json_t *j = json_loadb((const char *)p, n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
    if (!j && memchr(p, '\\', n)) {
        /* maybe a lone surrogate escape: patch a copy (same length) and retry */
        if (c->copy_cap < n) {
            uint8_t *nc = realloc(c->copy, n);
            if (!nc) return DS_ERR_NOMEM;
            c->copy = nc;
            c->copy_cap = n;
        }
        memcpy(c->copy, p, n);
        if (ds_fix_lone_surrogates(c->copy, n)) {
            json_error_t je2;
            j = json_loadb((const char *)c->copy, n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je2);
            if (j) rec->flags |= DS_RECF_JSON_LONE_SURROGATE;
        }
    }
    if (!j) {
        rec->status = DS_REC_BAD_JSON;
        rec->text = line;
        rec->len = len;
        snprintf(c->detail, sizeof c->detail, "%s (column %d)", je.text, je.column);
        rec->detail = c->detail;
        return DS_OK;
    }
    c->json = j;
    rec->text = NULL;
    rec->len = 0;
    json_t *v = j;
    for (size_t i = 0; i < c->n_parts; i++) {
        if (!json_is_object(v)) {
            rec->status = DS_REC_MISSING_FIELD;
            snprintf(c->detail, sizeof c->detail, "%s",
                     i == 0 ? "line is not a JSON object" : "parent of the field is not an object");
            rec->detail = c->detail;
            return DS_OK;
        }
        v = json_object_get(v, c->parts[i]);
        if (!v) {
            rec->status = DS_REC_MISSING_FIELD;
            snprintf(c->detail, sizeof c->detail, "no field '%s'", c->name);
            rec->detail = c->detail;
            return DS_OK;
        }
    }
    if (!json_is_string(v)) {
        rec->status = DS_REC_NOT_STRING;
        const char *t = json_is_null(v)     ? "null"
                        : json_is_object(v) ? "an object"
                        : json_is_array(v)  ? "an array"
                        : json_is_number(v) ? "a number"
                                            : "a boolean";
        snprintf(c->detail, sizeof c->detail, "field '%s' is %s, not a string", c->name, t);
        rec->detail = c->detail;
        return DS_OK;
    }
    rec->status = DS_REC_OK;
    rec->text = (const uint8_t *)json_string_value(v);
    rec->len = json_string_length(v);
    return DS_OK;
}

/* Decide the kind of an AUTO file from its first decompressed bytes. */
static void sniff_kind(ds_reader *r) {
    if (r->kind != KIND_AUTO) return;
    if (r->field_explicit) {
        r->kind = KIND_JSONL;
        return;
    }
    r->kind = KIND_TXT;
    if (fill(r) == 1) {
        const uint8_t *s = r->win + r->wpos;
        size_t n = r->wlen - r->wpos;
        size_t i = 0;
        if (n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) i = 3;
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) i++;
        if (i < n && s[i] == '{') r->kind = KIND_JSONL;
    }
}

/* JSONL: the next non-blank line, its text field extracted (or the raw line
 * with defer_json). 1: produced, 0: file finished, <0 read error. */
static int next_jsonl(ds_reader *r, ds_record *rec) {
    line_info li;
    int rc;
    for (;;) {
        uint64_t line = r->line, off = r->pos;
        r->rec_len = 0;
        rc = read_line(r, &li, 1);
        if (rc == 0) {
            r->file_done = 1;
            return 0;
        }
        if (rc == ZERR) {
            zstd_record(r, rec);
            return 1;
        }
        if (rc < 0) return rc;
        if (!li.nonblank) continue;
        rec_base(r, rec, line, off);
        rec->record_bytes = li.bytes;
        if (li.overflow) {
            set_overlong(r, rec, 0);
            return 1;
        }
        /* strip a trailing \r (CRLF file) */
        if (r->rec_len && r->rec[r->rec_len - 1] == '\r') r->rec_len--;
        r->rec[r->rec_len] = 0;
        if (r->opts.defer_json) {
            rec->status = DS_REC_OK;
            rec->text = r->rec;
            rec->len = r->rec_len;
            rec->flags |= DS_RECF_RAW_JSON;
            return 1;
        }
        if ((rc = ds_json_extract(r->jctx, r->rec, r->rec_len, rec))) return rc;
        return 1;
    }
}

/* A text record's end: terminate, mark it over-long or point at its text,
 * and drop a byte order mark from the first line of the file. */
static int finish_text(ds_reader *r, ds_record *rec, int overflow, int first_line) {
    r->rec[r->rec_len] = 0;
    if (overflow) {
        set_overlong(r, rec, 1);
    } else {
        rec->status = DS_REC_OK;
        rec->text = r->rec;
        rec->len = r->rec_len;
    }
    if (first_line) strip_bom(rec);
    return 1;
}

/* --doc-sep file: the whole file as one record. */
static int next_whole_file(ds_reader *r, ds_record *rec) {
    int rc;
    uint64_t total = 0;
    int overflow = 0;
    /* a plain file's size is known: one buffer of that size, instead of
     * doubling it and copying the text into fresh pages each time */
    struct stat st;
    if (!r->is_zst && !r->is_gz && fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (rc = rec_reserve(r, (uint64_t)st.st_size)))
        return rc;
    for (;;) {
        int f = fill(r);
        if (f == 0) break;
        if (f == ZERR) {
            zstd_record(r, rec);
            return 1;
        }
        if (f < 0) {
            rc = f;
            return rc;
        }
        const uint8_t *s = r->win + r->wpos;
        size_t n = r->wlen - r->wpos;
        size_t dropped;
        if ((rc = rec_append(r, s, n, &dropped))) return rc;
        if (dropped) overflow = 1;
        for (const uint8_t *q = s, *e = s + n; (q = memchr(q, '\n', (size_t)(e - q))); q++) r->line++;
        total += n;
        r->pos += n;
        r->wpos = r->wlen;
    }
    r->file_done = 1;
    rec_base(r, rec, 1, 0);
    rec->record_bytes = total;
    return finish_text(r, rec, overflow, 1);
}

/* --doc-sep line: the next line. */
static int next_line(ds_reader *r, ds_record *rec) {
    line_info li;
    int rc;
    uint64_t line = r->line, off = r->pos;
    rc = read_line(r, &li, 0);
    if (rc == 0) {
        r->file_done = 1;
        return 0;
    }
    if (rc == ZERR) {
        zstd_record(r, rec);
        return 1;
    }
    if (rc < 0) return rc;
    rec_base(r, rec, line, off);
    rec->record_bytes = li.bytes;
    if (!li.overflow && r->rec_len && r->rec[r->rec_len - 1] == '\r' && li.had_nl) {
        r->rec_len--;
        rec->flags |= DS_RECF_CRLF;
    }
    return finish_text(r, rec, li.overflow, line == 1);
}

/* --doc-sep blank-line: the next maximal run of non-blank lines. */
static int next_blank_run(ds_reader *r, ds_record *rec) {
    line_info li;
    int rc;
    uint64_t line = 0, off = 0;
    uint64_t total = 0;
    int started = 0, overflow = 0;
    for (;;) {
        size_t before = r->rec_len;
        uint64_t lline = r->line, loff = r->pos;
        if (started) {
            size_t dropped;
            if ((rc = rec_append(r, (const uint8_t *)"\n", 1, &dropped))) return rc;
            if (dropped) overflow = 1;
        }
        int ov_before = overflow;
        rc = read_line(r, &li, 1);
        if (rc == ZERR) {
            zstd_record(r, rec);
            return 1;
        }
        if (rc < 0) return rc;
        if (rc == 0) {
            r->rec_len = before;
            r->file_done = 1;
            break;
        }
        if (!li.nonblank) {
            r->rec_len = before;
            overflow = ov_before;
            if (started) break;
            continue;
        }
        if (li.overflow) overflow = 1;
        if (!started) {
            started = 1;
            line = lline;
            off = loff;
            total = li.bytes;
        } else {
            total += 1 + li.bytes;
        }
        if (!li.had_nl) {
            r->file_done = 1;
            break;
        }
    }
    if (!started) return 0;
    rec_base(r, rec, line, off);
    rec->record_bytes = total;
    if (!overflow && r->rec_len && r->rec[r->rec_len - 1] == '\r') r->rec_len--; /* CRLF file */
    return finish_text(r, rec, overflow, line == 1);
}

/* ------------------------------------------------- Parquet and Arrow IPC */

/* The reader's share of Arrow's memory for one file: the row group (only
 * the text column) or record batch being read, plus the file's metadata.
 * A piece that needs more is damage (a crafted page size, a bomb), reported
 * like any other with its file and row group. */
#define DS_ARROW_MEM_LIMIT ((uint64_t)2 << 30)

/* Opens a .parquet / .arrow input through arrow_reader.cpp. A file Arrow
 * cannot open (not that format, bad footer or schema) is damage: the
 * record ds_reader_next gives next says so, as for a .gz that is not gzip. */
static int open_arrow(ds_reader *r, char *err, size_t errlen) {
    in_file *f = &r->files.v[r->cur];
#ifndef MKS_HAVE_ARROW
    ds_set_err(err, errlen,
               "%s: %s input needs a build with Arrow: configure with -DMKS_ENABLE_ARROW=ON (pyarrow's C++ "
               "libraries; `make deps` installs them), or convert it to JSONL",
               f->path, f->kind == KIND_PARQUET ? "Parquet" : "Arrow IPC");
    return DS_ERR_FORMAT;
#else
    int fd = ds_open_regular(f->path, err, errlen);
    if (fd < 0) return DS_ERR_IO;
    r->is_stdin = 0;
    r->fd = -1; /* the wrapper owns fd */
    r->open = 1;
    r->kind = f->kind;
    r->at_file_start = 0;
    r->file_done = 0;
    r->zerr = 0;
    r->line = 1;
    r->pos = 0;
    r->arrow_rows = r->arrow_row = 0;
    uint64_t limit = DS_ARROW_MEM_LIMIT;
    int afmt = f->kind == KIND_PARQUET ? DS_ARROW_FMT_PARQUET : DS_ARROW_FMT_IPC;
    int rc;
    if (r->opts.row_format != DS_FMT_TEXT) { /* chat formats: whole rows of the fields the format reads */
        const char *paths[DS_AJSON_MAX_PATHS];
        size_t np = ds_ajson_format_paths(r->opts.row_format, r->opts.messages_field, r->opts.field, paths);
        if (!r->ajson && !(r->ajson = ds_ajson_new(paths, np))) {
            close(fd);
            ds_set_err(err, errlen, "out of memory");
            return DS_ERR_NOMEM;
        }
        rc = ds_arrow_open_rows(fd, afmt, paths, np, limit, &r->arrow, r->zmsg, sizeof r->zmsg);
    } else {
        rc = ds_arrow_open(fd, afmt, (const char *const *)r->jctx->parts, r->jctx->n_parts, limit, &r->arrow, r->zmsg,
                           sizeof r->zmsg);
    }
    if (rc == DS_ARROW_NOMEM) {
        ds_set_err(err, errlen, "%s: out of memory", f->path);
        return DS_ERR_NOMEM;
    }
    if (rc < 0) r->zerr = 1;
    return DS_OK;
#endif
}

#ifdef MKS_HAVE_ARROW
/* Chat formats: row i as the JSON object of the format's fields (the JSONL
 * line a writer would have written for it), for ds_chat_parse on the
 * workers, as a deferred JSONL line is. */
static int arrow_row_json(ds_reader *r, ds_record *rec, int64_t i) {
    const struct ArrowSchema *sc;
    const struct ArrowArray *arr;
    int rc = DS_AJSON_OK;
    char why[160] = "";
    if (ds_arrow_piece_c(r->arrow, &sc, &arr) != 0) { /* no column the format reads: an empty object */
        r->ajbuf.len = 0;
        if (r->ajbuf.cap < 2) {
            uint8_t *p = realloc(r->ajbuf.p, 16);
            if (!p) return DS_ERR_NOMEM;
            r->ajbuf.p = p;
            r->ajbuf.cap = 16;
        }
        memcpy(r->ajbuf.p, "{}", 2);
        r->ajbuf.len = 2;
    } else {
        rc = ds_ajson_row(r->ajson, sc, arr, i, r->opts.max_record_bytes, &r->ajbuf, why, sizeof why);
    }
    if (rc == DS_AJSON_NOMEM) return DS_ERR_NOMEM;
    rec->record_bytes = r->ajbuf.len;
    if (rc == DS_AJSON_TOO_LARGE) { /* as an over-long JSONL line: reported, no text */
        rec->record_bytes = r->opts.max_record_bytes + 1;
        set_overlong(r, rec, 0);
        return 1;
    }
    if (rc != DS_AJSON_OK) { /* arrays that contradict their schema (Arrow validated them: not expected) */
        rec->status = DS_REC_BAD_JSON;
        snprintf(r->detail, sizeof r->detail, "%s (%s %llu, row %llu)", why,
                 r->kind == KIND_PARQUET ? "row group" : "record batch",
                 (unsigned long long)ds_arrow_piece_index(r->arrow),
                 (unsigned long long)(ds_arrow_piece_row0(r->arrow) + (uint64_t)i));
        rec->detail = r->detail;
        return 1;
    }
    rec->status = DS_REC_OK;
    rec->flags |= DS_RECF_RAW_JSON;
    rec->text = r->ajbuf.p;
    rec->len = r->ajbuf.len;
    return 1;
}

/* The next row of the open Parquet / Arrow IPC file. Rows are numbered
 * from 1 through the whole file (row groups / batches in file order): the
 * record's line; its offset is 0 (a row has no byte position); non-OK
 * rows name their row group and row in the detail. 1 / 0 / <0 as next_jsonl. */
static int next_arrow(ds_reader *r, ds_record *rec, char *err, size_t errlen) {
    const char *what = r->kind == KIND_PARQUET ? "parquet" : "arrow";
    while (!r->zerr && r->arrow_row >= r->arrow_rows) {
        int64_t rows = 0;
        int rc = ds_arrow_next_piece(r->arrow, &rows, r->zmsg, sizeof r->zmsg);
        if (rc == 0) {
            r->file_done = 1;
            return 0;
        }
        if (rc == DS_ARROW_NOMEM) {
            ds_set_err(err, errlen, "%s: out of memory", r->files.v[r->cur].path);
            return DS_ERR_NOMEM;
        }
        if (rc < 0) r->zerr = 1;
        r->arrow_rows = rows;
        r->arrow_row = 0;
    }
    if (r->zerr) { /* damage: where the usable rows ended, and Arrow's words */
        char msg[sizeof r->zmsg];
        memcpy(msg, r->zmsg, sizeof msg);
        snprintf(r->zmsg, sizeof r->zmsg, "%s: %.*s", what, (int)(sizeof msg - 10), msg);
        zstd_record(r, rec);
        rec->offset = 0;
        return 1;
    }
    int64_t i = r->arrow_row++;
    rec_base(r, rec, r->line++, 0);
    if (r->ajson) return arrow_row_json(r, rec, i);
    const uint8_t *text;
    size_t len;
    const char *detail;
    int st = ds_arrow_row(r->arrow, i, &text, &len, &detail);
    if (st != DS_ARROW_ROW_TEXT) {
        rec->status = st == DS_ARROW_ROW_NOT_STRING ? DS_REC_NOT_STRING : DS_REC_MISSING_FIELD;
        snprintf(r->detail, sizeof r->detail, "%s (%s %llu, row %llu)", detail,
                 r->kind == KIND_PARQUET ? "row group" : "record batch",
                 (unsigned long long)ds_arrow_piece_index(r->arrow),
                 (unsigned long long)(ds_arrow_piece_row0(r->arrow) + (uint64_t)i));
        rec->detail = r->detail;
        return 1;
    }
    rec->record_bytes = len;
    if (len > r->opts.max_record_bytes) { /* as an over-long JSONL line: measured, reported, no text */
        set_overlong(r, rec, 0);
        return 1;
    }
    /* not copied: the text is Arrow's buffer, valid until the next call
     * (the piece is released only when the next one is loaded); the
     * pipeline copies it into its batch once, ds_reader_take_text declines
     * it (not in r->rec) */
    rec->status = DS_REC_OK;
    rec->text = len ? text : (const uint8_t *)"";
    rec->len = len;
    (void)err;
    (void)errlen;
    return 1;
}
#endif

const char *ds_columnar_support(void) {
#ifdef MKS_HAVE_ARROW
    return ds_arrow_version();
#else
    return NULL;
#endif
}

int ds_reader_columnar(const ds_reader *r) {
    if (!r || r->cur >= r->files.n) return 0;
    in_kind k = r->files.v[r->cur].kind;
    return k == KIND_PARQUET || k == KIND_ARROW;
}

void ds_columnar_stats_get(ds_columnar_stats *out) {
    pthread_mutex_lock(&g_columnar_mu);
    *out = g_columnar;
    pthread_mutex_unlock(&g_columnar_mu);
}

/* One record from the open file. 1: produced, 0: file finished, <0 fatal. */
static int next_in_file(ds_reader *r, ds_record *rec, char *err, size_t errlen) {
    if (r->file_done) return 0;
#ifdef MKS_HAVE_ARROW
    if (r->kind == KIND_PARQUET || r->kind == KIND_ARROW) {
        int arc = next_arrow(r, rec, err, errlen);
        if (arc == DS_ERR_NOMEM && !(err && err[0])) ds_set_err(err, errlen, "out of memory");
        return arc;
    }
#endif
    if (r->at_file_start) {
        sniff_kind(r);
        r->at_file_start = 0;
    }
    r->rec_len = 0;
    int rc = r->kind == KIND_JSONL            ? next_jsonl(r, rec)
             : r->opts.doc_sep == DS_SEP_FILE ? next_whole_file(r, rec)
             : r->opts.doc_sep == DS_SEP_LINE ? next_line(r, rec)
                                              : next_blank_run(r, rec);
    if (rc >= 0) return rc;
    if (rc == DS_ERR_NOMEM) ds_set_err(err, errlen, "out of memory");
    else ds_set_err(err, errlen, "%s: read error: %s", r->files.v[r->cur].path, strerror(errno));
    return rc;
}

int ds_reader_next(ds_reader *r, ds_record *rec, char *err, size_t errlen) {
    if (!r || !rec) return DS_ERR_ARG;
    while (r->cur < r->files.n) {
        if (!r->open) {
            int rc = open_file(r, err, errlen);
            if (rc) return rc;
        }
        int rc = next_in_file(r, rec, err, errlen);
        if (rc < 0) return rc;
        if (rc == 1) {
            r->index++;
            return 1;
        }
        close_file(r);
        r->cur++;
    }
    return 0;
}
