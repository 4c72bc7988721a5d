/* core_jobs.c - mkshards._core.analyze and build (core.h): ds_analyze (lint /
 * hist, reports as the CLI's --json text) and ds_build over dataset/ds.h,
 * each on a worker thread while the caller waits with the GIL released. */
#include "core.h"
#include "ds_arrow_json.h" /* the Arrow C data interface structs (ArrowSchema, ArrowArray) */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ================================================================ background calls */
/* ds_analyze and ds_build run on a worker thread; the calling (main) thread
 * waits with the GIL released and checks for signals every 100 ms, so Ctrl-C
 * cancels the call at its next batch boundary and raises KeyboardInterrupt.
 * The Python progress callback runs on the worker thread (under the GIL); a
 * true return value or an exception cancels too (the exception is raised). */
typedef struct bg_job {
    int (*run)(struct bg_job *j); /* the C call, on the worker thread; returns its status */
    int rc;                       /* run's status */
    PyObject *cb;                 /* progress callback (borrowed) or NULL */
    int cancel;
    PyObject *exc_t, *exc_v, *exc_tb; /* the callback's exception */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} bg_job;

/* From a C progress callback on the worker thread: make(ev) builds the
 * event's dict (under the GIL), the Python callback gets it. Nonzero: stop. */
static int bg_report(bg_job *j, PyObject *(*make)(const void *ev), const void *ev) {
    if (__atomic_load_n(&j->cancel, __ATOMIC_RELAXED)) return 1;
    if (!j->cb) return 0;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *d = make(ev);
    PyObject *r = d ? PyObject_CallFunctionObjArgs(j->cb, d, NULL) : NULL;
    Py_XDECREF(d);
    int stop = 1;
    if (r) {
        stop = PyObject_IsTrue(r);
        Py_DECREF(r);
    }
    if (stop < 0 || !r) {
        if (!j->exc_t) PyErr_Fetch(&j->exc_t, &j->exc_v, &j->exc_tb);
        else PyErr_Clear();
        stop = 1;
    }
    PyGILState_Release(g);
    if (stop) __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
    return stop;
}

static void *bg_thread(void *arg) {
    bg_job *j = arg;
    int rc = j->run(j);
    pthread_mutex_lock(&j->mu);
    j->rc = rc;
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Wait up to 100 ms for the worker (GIL released); 1 when it is done. */
static int bg_wait(bg_job *j) {
    int done;
    Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&j->mu);
        if (!j->done) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        }
        done = j->done;
        pthread_mutex_unlock(&j->mu);
    Py_END_ALLOW_THREADS
    return done;
}

/* Run j->run on a worker thread. 0: it ran to its end (status in j->rc);
 * -1: a Python exception is set (a signal's, e.g. KeyboardInterrupt, or the
 * callback's; the C call was canceled). */
static int bg_run(bg_job *j) {
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    pthread_t th;
    int ret = 0;
    if (pthread_create(&th, NULL, bg_thread, j)) {
        raise_c(DS_ERR_INTERNAL, "cannot start a thread");
        ret = -1;
        goto out;
    }
    PyObject *st = NULL, *sv = NULL, *stb = NULL; /* a signal's exception */
    while (!bg_wait(j))
        if (!st && PyErr_CheckSignals() < 0) {
            PyErr_Fetch(&st, &sv, &stb);
            __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
        }
    Py_BEGIN_ALLOW_THREADS
        pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
    if (st) {
        PyErr_Restore(st, sv, stb);
        ret = -1;
    } else if (j->exc_t) {
        PyErr_Restore(j->exc_t, j->exc_v, j->exc_tb);
        j->exc_t = j->exc_v = j->exc_tb = NULL;
        ret = -1;
    }
out:
    Py_CLEAR(j->exc_t);
    Py_CLEAR(j->exc_v);
    Py_CLEAR(j->exc_tb);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    return ret;
}

/* Path-likes -> C strings (file system encoding). *keep (a list) owns the
 * bytes; the array is PyMem_Malloc'ed. NULL with an exception set. */
static const char **fs_paths(PyObject *seq, PyObject **keep, size_t *n_ret) {
    *keep = NULL;
    PyObject *tup = PySequence_Tuple(seq);
    if (!tup) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    PyObject *paths = PyList_New(n);
    const char **out = PyMem_Calloc(n ? (size_t)n : 1, sizeof *out);
    if (!paths || !out) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(tup, i), &b)) goto fail;
        PyList_SET_ITEM(paths, i, b);
        out[i] = PyBytes_AS_STRING(b);
    }
    Py_DECREF(tup);
    *keep = paths;
    *n_ret = (size_t)n;
    return out;
fail:
    Py_DECREF(tup);
    Py_XDECREF(paths);
    PyMem_Free(out);
    return NULL;
}

/* ================================================================ enum arguments */
/* pack / over_long / doc_sep by name, through the library's tables (ds.h
 * "Enum names"): the Python package spells none of them itself. */
typedef struct {
    const char *arg;          /* the argument, as the Python call names it */
    const char *(*name)(int); /* the table, for the message */
    int (*parse)(const char *, int *);
    int v; /* the value (preset: the default) */
} enum_arg;

static int parse_pack(const char *s, int *v) {
    ds_pack x;
    return ds_pack_parse(s, &x) ? -1 : (*v = (int)x, 0);
}

static int parse_over_long(const char *s, int *v) {
    ds_over_long x;
    return ds_over_long_parse(s, &x) ? -1 : (*v = (int)x, 0);
}

static int parse_doc_sep(const char *s, int *v) {
    ds_doc_sep x;
    return ds_doc_sep_parse(s, &x) ? -1 : (*v = (int)x, 0);
}

/* format= / chat_template= / loss_on= / messages_field= (None: not given):
 * the CLI's --format / --chat-template / --loss-on / --messages-field of
 * build, lint and hist (tools/cli_chat.c), with its names and checks.
 * resolve: look the template up (NAME, auto: the tokenizer folder's
 * tokenizer_config.json, or FILE) through the library, as the CLI does.
 * 0, or -1 with ValueError (a usage error) / MkshardsError (exit 2 of the
 * CLI: an unrecognised or unreadable template). */
typedef struct {
    const char *format, *chat_template, *loss_on, *messages_field;
    ds_format fmt;
    ds_loss_on lo;
    const ds_chat_template *tpl;
} chat_kw;

static int chat_kw_check(chat_kw *k, const char *tok_spec, int resolve) {
    char names[96];
    k->fmt = DS_FMT_TEXT;
    k->lo = DS_LOSS_DEFAULT;
    k->tpl = NULL;
    if (k->format && ds_format_parse(k->format, &k->fmt)) {
        PyErr_Format(PyExc_ValueError, "format '%s': must be %s", k->format,
                     ds_names_list(ds_format_name, names, sizeof names));
        return -1;
    }
    /* "default" is the library's own value, not an option value */
    if (k->loss_on && (ds_loss_on_parse(k->loss_on, &k->lo) || k->lo == DS_LOSS_DEFAULT)) {
        PyErr_Format(PyExc_ValueError, "loss_on '%s': must be assistant, completion or all", k->loss_on);
        return -1;
    }
    if (k->fmt == DS_FMT_TEXT && (k->chat_template || k->messages_field || k->loss_on)) {
        PyErr_SetString(PyExc_ValueError,
                        "chat_template, messages_field and loss_on need format='chat', 'prompt-completion' or 'auto'");
        return -1;
    }
    if (k->fmt == DS_FMT_TEXT || !resolve) return 0;
    char err[1200] = "";
    int rc = ds_chat_template_resolve(k->chat_template, tok_spec, &k->tpl, err, sizeof err);
    if (rc == DS_ERR_ARG) {
        PyErr_Format(PyExc_ValueError, "chat_template: %s", err);
        return -1;
    }
    if (rc != DS_OK) {
        char msg[1300];
        snprintf(msg, sizeof msg, "chat_template: %s", err);
        raise_c(rc, msg);
        return -1;
    }
    return 0;
}

/* PyArg "O&" converter for an enum_arg: a str naming a value; TypeError /
 * ValueError naming the argument (and the accepted names) otherwise. */
static int conv_enum(PyObject *o, void *p) {
    enum_arg *e = p;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: a str, not %.80s", e->arg, Py_TYPE(o)->tp_name);
        return 0;
    }
    const char *s = PyUnicode_AsUTF8(o);
    if (!s) return 0;
    if (e->parse(s, &e->v)) {
        char names[128];
        PyErr_Format(PyExc_ValueError, "%s %R: must be %s", e->arg, o, ds_names_list(e->name, names, sizeof names));
        return 0;
    }
    return 1;
}

/* ================================================================ Python sources */
/* A Python iterable as a ds_source (ds.h): the pipeline's reader thread calls
 * py_src_next, which takes the GIL (PyGILState_Ensure; the calling thread
 * waits in bg_wait with it released, the C work runs without it) only to pull
 * a chunk of items (up to SRC_CHUNK_ITEMS or SRC_CHUNK_BYTES of text), then
 * hands them out one by one. The texts are the str objects' own UTF-8
 * buffers, kept alive by the chunk's references until the next pull, so
 * memory is one chunk plus the pipeline's two batches. An exception from the
 * iterator is kept in the job and re-raised unchanged by bg_run. The spec
 * (a dict, made by mkshards._pipeline) is {"iter": iterator, "field": tuple of
 * keys, "field_name": str, "values": bool}: values True: the items are the
 * field's values; else an item is a str (the document) or a dict walked by
 * the keys. Arrow data comes as {"stream": an Arrow C stream, ...} instead
 * (src_arrow below): zero-copy, no Python object per row. */
#define SRC_CHUNK_ITEMS 1024
#define SRC_CHUNK_BYTES ((size_t)4 << 20)

typedef struct {
    const char *text; /* NULL: at aux_off in aux */
    size_t len, aux_off, detail_off;
    int status;
    uint32_t flags;
} src_item;

/* The Arrow C stream interface (arrow.apache.org/docs/format/CStreamInterface.html;
 * the C data structs come from ds_arrow_json.h): the ABI is these structs,
 * which the specification says to copy rather than include, so the module
 * needs no Arrow headers or libraries. */
#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE
struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};
#endif

#define SRC_ARROW_DEPTH 32 /* dotted field components followed into struct columns */

/* An Arrow stream source: record batches from a C stream, the field's
 * strings handed to the pipeline as pointers into the batch's own buffers
 * (offsets + data; no Python objects, no copies). */
typedef struct {
    struct ArrowArrayStream stream; /* release NULL: none */
    struct ArrowSchema schema;      /* release NULL: none */
    struct ArrowArray batch;        /* the batch being handed out; release NULL: none */
    int64_t row;                    /* next row of batch */
    int depth;                      /* schema levels found along the field's path (>= 1) */
    int child[SRC_ARROW_DEPTH];     /* child index at each level */
    int broken;                     /* 0: the leaf is at depth n_keys; 1: no such field; 2: a parent is not a struct */
    int leaf;                       /* 0: not a string; 1: utf8; 2: large_utf8; 3: utf8_view; | 8: dictionary-encoded */
    int index_bytes, index_signed;  /* a dictionary's index type */
    const char *not_string;         /* the JSON reader's words for the leaf's type */
    char detail[256];
} src_arrow;

typedef struct {
    bg_job *job;
    PyObject *it, *keys; /* keys: a tuple of str */
    const char *field_name;
    int values;
    src_arrow *arrow; /* non-NULL: an Arrow C stream instead of it */
    ds_source src;
    PyObject *refs[SRC_CHUNK_ITEMS];
    src_item items[SRC_CHUNK_ITEMS];
    size_t n, pos;
    char *aux; /* details and re-encoded texts of this chunk */
    size_t aux_len, aux_cap;
    int ended, stop_rc;
    char stop_msg[200];
    /* chat formats: an item is a record, handed over as its JSON text
     * (DS_RECF_RAW_JSON) for the chat parser: a str (the JSON; mkshards._pipeline
     * writes each dict as json.dumps does), or an Arrow row as the JSON object
     * of the fields the format reads (ds_ajson_row) */
    int rows;
    ds_ajson *aj;
    ds_ajson_buf ajbuf;
} py_source;

static int aux_put(py_source *s, const void *p, size_t n, size_t *off) {
    if (s->aux_len + n + 1 > s->aux_cap) {
        size_t nc = s->aux_cap ? s->aux_cap : 4096;
        while (nc < s->aux_len + n + 1) nc *= 2;
        char *na = PyMem_RawRealloc(s->aux, nc);
        if (!na) return -1;
        s->aux = na;
        s->aux_cap = nc;
    }
    *off = s->aux_len;
    memcpy(s->aux + s->aux_len, p, n);
    s->aux[s->aux_len + n] = 0;
    s->aux_len += n + 1;
    return 0;
}

static int src_detail(py_source *s, src_item *it, int status, const char *fmt, const char *a, const char *b) {
    char d[256];
    snprintf(d, sizeof d, fmt, a, b);
    it->status = status;
    return aux_put(s, d, strlen(d), &it->detail_off);
}

/* The JSON reader's words for a value's type (reader.c), for the same reject details. */
static const char *json_type_words(PyObject *o) {
    if (o == Py_None) return "null";
    if (PyBool_Check(o)) return "a boolean";
    if (PyLong_Check(o) || PyFloat_Check(o)) return "a number";
    if (PyDict_Check(o)) return "an object";
    if (PyList_Check(o) || PyTuple_Check(o)) return "an array";
    return Py_TYPE(o)->tp_name;
}

/* A str that has surrogates (not UTF-8 encodable) as the JSON reader decodes
 * its \u escapes: a high + low pair is one code point, a lone one U+FFFD.
 * But a lone U+DC80..U+DCFF is what Python's surrogateescape makes of a byte
 * that is not UTF-8 (os.fsdecode, open(..., errors="surrogateescape")): it
 * goes back to that byte, so the document is the bytes it was read from and
 * is rejected as they would be (utf8-invalid: one reject, the run goes on). */
static int src_utf8_fixed(py_source *s, PyObject *u, src_item *it) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(u);
    int kind = PyUnicode_KIND(u);
    const void *data = PyUnicode_DATA(u);
    size_t start = s->aux_len;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n) {
            Py_UCS4 d = PyUnicode_READ(kind, data, i + 1);
            if (d >= 0xDC00 && d <= 0xDFFF) {
                c = 0x10000 + ((c - 0xD800) << 10) + (d - 0xDC00);
                i++;
            }
        }
        if (c >= 0xDC80 && c <= 0xDCFF) {
            unsigned char raw = (unsigned char)(c - 0xDC00);
            size_t off;
            if (aux_put(s, &raw, 1, &off)) return -1;
            s->aux_len--;
            continue;
        }
        if (c >= 0xD800 && c <= 0xDFFF) {
            c = 0xFFFD;
            it->flags |= DS_RECF_JSON_LONE_SURROGATE;
        }
        unsigned char b[4];
        size_t k = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        if (k == 1) b[0] = (unsigned char)c;
        else if (k == 2) b[0] = (unsigned char)(0xC0 | (c >> 6)), b[1] = (unsigned char)(0x80 | (c & 0x3F));
        else if (k == 3)
            b[0] = (unsigned char)(0xE0 | (c >> 12)), b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)),
            b[2] = (unsigned char)(0x80 | (c & 0x3F));
        else
            b[0] = (unsigned char)(0xF0 | (c >> 18)), b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F)),
            b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)), b[3] = (unsigned char)(0x80 | (c & 0x3F));
        size_t off;
        if (aux_put(s, b, k, &off)) return -1;
        s->aux_len--; /* one run: drop the NUL aux_put added */
    }
    it->text = NULL;
    it->aux_off = start;
    it->len = s->aux_len - start;
    s->aux_len++; /* keep the last NUL */
    return 0;
}

/* One item -> *it (a reference to its text's str in *ref). -1: no memory. */
static int src_classify(py_source *s, PyObject *o, src_item *it, PyObject **ref) {
    memset(it, 0, sizeof *it);
    it->detail_off = (size_t)-1;
    PyObject *v = o;
    if (s->rows && PyBytes_Check(o)) { /* a record's JSON as bytes (a dict with surrogateescape'd strs) */
        Py_INCREF(o);
        *ref = o;
        it->flags |= DS_RECF_RAW_JSON;
        it->text = PyBytes_AS_STRING(o);
        it->len = (size_t)PyBytes_GET_SIZE(o);
        return 0;
    }
    if (s->rows) { /* a record: its JSON text */
        if (!PyUnicode_Check(o))
            return src_detail(s, it, DS_REC_NOT_STRING,
                              "item is %s%s, not a chat record (a dict json.dumps writes, or its JSON text)",
                              json_type_words(o), "");
        it->flags |= DS_RECF_RAW_JSON;
    } else if (!PyUnicode_Check(o)) {
        if (s->values)
            return src_detail(s, it, DS_REC_NOT_STRING, "field '%s' is %s, not a string", s->field_name,
                              json_type_words(o));
        if (!PyDict_Check(o))
            return src_detail(s, it, DS_REC_NOT_STRING, "item is %s%s, not a str or a dict", json_type_words(o), "");
        Py_ssize_t nk = PyTuple_GET_SIZE(s->keys);
        for (Py_ssize_t i = 0; i < nk; i++) {
            if (!PyDict_Check(v))
                return src_detail(s, it, DS_REC_MISSING_FIELD, "%s%s", "parent of the field is not an object", "");
            PyObject *x = PyDict_GetItemWithError(v, PyTuple_GET_ITEM(s->keys, i));
            if (!x) {
                PyErr_Clear(); /* an unhashable key cannot be there */
                return src_detail(s, it, DS_REC_MISSING_FIELD, "no field '%s'%s", s->field_name, "");
            }
            v = x;
        }
        if (!PyUnicode_Check(v))
            return src_detail(s, it, DS_REC_NOT_STRING, "field '%s' is %s, not a string", s->field_name,
                              json_type_words(v));
    }
    Py_ssize_t len;
    const char *u8 = PyUnicode_AsUTF8AndSize(v, &len);
    if (!u8) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
        PyErr_Clear();
        return src_utf8_fixed(s, v, it);
    }
    Py_INCREF(v);
    *ref = v;
    it->text = u8;
    it->len = (size_t)len;
    return 0;
}

/* Refill the chunk (GIL held). */
static void src_pull(py_source *s) {
    for (size_t i = 0; i < s->n; i++) Py_CLEAR(s->refs[i]);
    s->n = s->pos = 0;
    s->aux_len = 0;
    size_t bytes = 0;
    while (s->n < SRC_CHUNK_ITEMS && bytes < SRC_CHUNK_BYTES) {
        if (__atomic_load_n(&s->job->cancel, __ATOMIC_RELAXED)) {
            s->stop_rc = DS_ERR_CANCELED;
            snprintf(s->stop_msg, sizeof s->stop_msg, "canceled");
            return;
        }
        PyObject *o = PyIter_Next(s->it);
        if (!o) {
            if (!PyErr_Occurred()) {
                s->ended = 1;
                return;
            }
            if (!s->job->exc_t) PyErr_Fetch(&s->job->exc_t, &s->job->exc_v, &s->job->exc_tb);
            else PyErr_Clear();
            s->stop_rc = DS_ERR_CANCELED;
            snprintf(s->stop_msg, sizeof s->stop_msg, "the Python source raised an exception");
            return;
        }
        src_item *it = &s->items[s->n];
        s->refs[s->n] = NULL;
        int r = src_classify(s, o, it, &s->refs[s->n]);
        Py_DECREF(o);
        if (r) {
            PyErr_Clear();
            s->stop_rc = DS_ERR_NOMEM;
            snprintf(s->stop_msg, sizeof s->stop_msg, "out of memory reading the Python source");
            return;
        }
        bytes += it->len;
        s->n++;
    }
}

/* ---------------------------------------------------------------- Arrow streams */
/* Every check a record batch gets before a row of it is read: the producer
 * is a library in this process (pyarrow, polars, ...), but a batch that does
 * not match its schema or claims impossible lengths is refused, not read. */

static int arrow_fmt_is(const struct ArrowSchema *sc, const char *f) { return sc->format && !strcmp(sc->format, f); }

/* The leaf's string kind (1 utf8, 2 large_utf8, 3 utf8_view), 0 for another type. */
static int arrow_string_kind(const struct ArrowSchema *sc) {
    return arrow_fmt_is(sc, "u") ? 1 : arrow_fmt_is(sc, "U") ? 2 : arrow_fmt_is(sc, "vu") ? 3 : 0;
}

/* The JSON reader's words for a non-string Arrow type, as a JSONL writer would have written its values. */
static const char *arrow_type_words(const struct ArrowSchema *sc) {
    const char *f = sc->format ? sc->format : "";
    if (!strcmp(f, "n")) return "null";
    if (!strcmp(f, "b")) return "a boolean";
    if (strchr("cCsSiIlLefg", f[0]) && f[1] == 0) return "a number";
    if (f[0] == 'd' && f[1] == ':') return "a number"; /* decimal */
    if (!strcmp(f, "+s") || !strcmp(f, "+m")) return "an object";
    if (f[0] == '+' && (f[1] == 'l' || f[1] == 'L' || f[1] == 'w' || f[1] == 'v')) return "an array";
    return "not text (binary, a date, ...)";
}

/* The schema along the field's path (GIL held, at init). 0, or -1 with a
 * ValueError naming the columns when the first key is no column. */
static int arrow_plan(src_arrow *a, PyObject *keys, const char *field_name) {
    const struct ArrowSchema *sc = &a->schema;
    if (!arrow_fmt_is(sc, "+s") || sc->n_children < 0 || (sc->n_children && !sc->children)) {
        PyErr_Format(PyExc_ValueError, "Arrow stream: its schema is '%s', not a struct of columns",
                     sc->format ? sc->format : "?");
        return -1;
    }
    Py_ssize_t nk = PyTuple_GET_SIZE(keys);
    if (nk > SRC_ARROW_DEPTH) {
        PyErr_Format(PyExc_ValueError, "field '%s': more than %d components", field_name, SRC_ARROW_DEPTH);
        return -1;
    }
    a->depth = 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        const char *key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(keys, k));
        if (!key) return -1;
        if (k > 0 && !arrow_fmt_is(sc, "+s")) {
            a->broken = 2;
            return 0;
        }
        int hit = -1;
        for (int64_t c = 0; c < sc->n_children && hit < 0; c++)
            if (sc->children[c] && sc->children[c]->name && !strcmp(sc->children[c]->name, key)) hit = (int)c;
        if (hit < 0) {
            if (k == 0) { /* as for a Table: a missing column is the caller's mistake, not one reject per row */
                PyObject *names = PyList_New(0);
                for (int64_t c = 0; names && c < sc->n_children; c++) {
                    PyObject *n = PyUnicode_FromString(sc->children[c]->name ? sc->children[c]->name : "");
                    if (!n || PyList_Append(names, n)) Py_CLEAR(names);
                    Py_XDECREF(n);
                }
                PyObject *sep = names ? PyUnicode_FromString(", ") : NULL;
                PyObject *joined = sep ? PyUnicode_Join(sep, names) : NULL;
                if (joined)
                    PyErr_Format(PyExc_ValueError, "field '%s': no column '%s' (columns: %U)", field_name, key, joined);
                Py_XDECREF(joined);
                Py_XDECREF(sep);
                Py_XDECREF(names);
                return -1;
            }
            a->broken = 1;
            return 0;
        }
        a->child[a->depth++] = hit;
        sc = sc->children[hit];
    }
    const struct ArrowSchema *vals = sc->dictionary ? sc->dictionary : sc;
    a->leaf = arrow_string_kind(vals);
    if (a->leaf && sc->dictionary) {
        const char *f = sc->format ? sc->format : "";
        const char *ix = strchr("cCsSiIlL", f[0]);
        if (!ix || !f[0] || f[1]) {
            PyErr_Format(PyExc_ValueError, "field '%s': dictionary index type '%s'", field_name, f);
            return -1;
        }
        int w = (int)(ix - "cCsSiIlL");
        a->index_bytes = 1 << (w / 2);
        a->index_signed = !(w & 1);
        a->leaf |= 8;
    }
    if (!a->leaf) a->not_string = arrow_type_words(vals);
    return 0;
}

static int arrow_valid(const struct ArrowArray *x, int64_t p) {
    if (x->null_count == 0 || x->n_buffers < 1 || !x->buffers[0]) return 1;
    return (((const uint8_t *)x->buffers[0])[p >> 3] >> (p & 7)) & 1;
}

/* A batch's structure along the path (lengths, offsets, buffer and child
 * counts) against the schema. NULL, or what is wrong. */
static const char *arrow_check(const src_arrow *a, const struct ArrowArray *b) {
    const struct ArrowSchema *sc = &a->schema;
    const struct ArrowArray *x = b;
    int64_t need = 0; /* rows of x that are addressed: physical positions [0, need) */
    if (b->length < 0 || b->offset < 0 || b->length > INT64_MAX / 2 - b->offset) return "bad length or offset";
    need = b->offset + b->length;
    for (int k = 0; k < a->depth; k++) {
        if (x->n_children != sc->n_children || !x->children) return "children differ from the schema";
        x = x->children[a->child[k]];
        sc = sc->children[a->child[k]];
        if (!x || x->length < 0 || x->offset < 0 || x->length > INT64_MAX / 2 - x->offset) return "bad child length";
        if (x->length < need) return "a child shorter than its parent";
        if (x->null_count != 0 && x->n_buffers >= 1 && !x->buffers) return "no buffers";
        need += x->offset; /* the child's physical positions */
    }
    if (a->broken || !a->leaf || !a->depth) return NULL;
    const struct ArrowArray *v = x;
    if (a->leaf & 8) {
        if (x->n_buffers != 2 || !x->buffers || (need > x->offset && !x->buffers[1])) return "bad dictionary indices";
        v = x->dictionary;
        if (!v || v->length < 0 || v->offset < 0 || v->length > INT64_MAX / 2 - v->offset) return "bad dictionary";
    }
    int kind = a->leaf & 7;
    if (!v->buffers || (kind < 3 ? v->n_buffers != 3 : v->n_buffers < 3)) return "bad string buffers";
    if (v->length > 0 && !v->buffers[1]) return "no offsets buffer";
    return NULL;
}

/* Row i of the loaded batch into *out (its text points into the batch). */
static void arrow_row(py_source *s, int64_t i, ds_source_item *out) {
    src_arrow *a = s->arrow;
    const struct ArrowArray *x = &a->batch;
    int64_t p = i + x->offset; /* physical position in x */
    int nk = (int)PyTuple_GET_SIZE(s->keys);
    memset(out, 0, sizeof *out);
    out->detail = a->detail;
    for (int k = 0; k < a->depth; k++) {
        x = x->children[a->child[k]];
        p += x->offset;
        if (!arrow_valid(x, p)) { /* a null on the path: as JSON null there */
            if (k + 1 < nk) {
                out->status = DS_REC_MISSING_FIELD;
                snprintf(a->detail, sizeof a->detail, "parent of the field is not an object");
            } else {
                out->status = DS_REC_NOT_STRING;
                snprintf(a->detail, sizeof a->detail, "field '%s' is null, not a string", s->field_name);
            }
            return;
        }
    }
    if (a->broken) {
        out->status = DS_REC_MISSING_FIELD;
        if (a->broken == 1) snprintf(a->detail, sizeof a->detail, "no field '%s'", s->field_name);
        else snprintf(a->detail, sizeof a->detail, "parent of the field is not an object");
        return;
    }
    if (!a->leaf) {
        out->status = DS_REC_NOT_STRING;
        snprintf(a->detail, sizeof a->detail, "field '%s' is %s, not a string", s->field_name, a->not_string);
        return;
    }
    if (a->leaf & 8) { /* the index, then the dictionary's string */
        const uint8_t *ib = (const uint8_t *)x->buffers[1] + (size_t)p * (size_t)a->index_bytes;
        int64_t k;
        switch (a->index_bytes * 2 + !a->index_signed) {
        case 2: k = *(const int8_t *)ib; break;
        case 3: k = *ib; break;
        case 4: k = *(const int16_t *)ib; break;
        case 5: k = *(const uint16_t *)ib; break;
        case 8: k = *(const int32_t *)ib; break;
        case 9: k = *(const uint32_t *)ib; break;
        case 16: k = *(const int64_t *)ib; break;
        default: k = (int64_t)(*(const uint64_t *)ib & INT64_MAX); break;
        }
        x = x->dictionary;
        if (k < 0 || k >= x->length) {
            out->status = DS_REC_MISSING_FIELD;
            snprintf(a->detail, sizeof a->detail, "dictionary index %lld out of range", (long long)k);
            return;
        }
        p = k + x->offset;
        if (!arrow_valid(x, p)) {
            out->status = DS_REC_NOT_STRING;
            snprintf(a->detail, sizeof a->detail, "field '%s' is null, not a string", s->field_name);
            return;
        }
    }
    const uint8_t *data = NULL;
    int64_t lo = 0, hi = 0;
    switch (a->leaf & 7) {
    case 1:
        lo = ((const int32_t *)x->buffers[1])[p], hi = ((const int32_t *)x->buffers[1])[p + 1];
        data = x->buffers[2];
        break;
    case 2:
        lo = ((const int64_t *)x->buffers[1])[p], hi = ((const int64_t *)x->buffers[1])[p + 1];
        data = x->buffers[2];
        break;
    default: { /* a view: 4-byte length, then the bytes inline (<= 12) or prefix, buffer index, offset */
        const uint8_t *vw = (const uint8_t *)x->buffers[1] + (size_t)p * 16;
        int32_t n, bi, off;
        memcpy(&n, vw, 4);
        hi = n;
        if (n <= 12) {
            data = vw + 4;
        } else {
            memcpy(&bi, vw + 8, 4);
            memcpy(&off, vw + 12, 4);
            /* buffers: validity, views, the variadic data buffers, their sizes */
            if (bi < 0 || bi >= x->n_buffers - 3 || off < 0) {
                out->status = DS_REC_MISSING_FIELD;
                snprintf(a->detail, sizeof a->detail, "string view out of range");
                return;
            }
            const int64_t *sizes = x->buffers[x->n_buffers - 1];
            if (sizes && (int64_t)off + n > sizes[bi]) {
                out->status = DS_REC_MISSING_FIELD;
                snprintf(a->detail, sizeof a->detail, "string view out of range");
                return;
            }
            data = (const uint8_t *)x->buffers[2 + bi] + off;
        }
        break;
    }
    }
    if (lo < 0 || hi < lo || (hi > lo && !data)) {
        out->status = DS_REC_MISSING_FIELD;
        snprintf(a->detail, sizeof a->detail, "string offsets out of order");
        return;
    }
    out->status = DS_REC_OK;
    out->text = hi > lo ? data + lo : (const uint8_t *)"";
    out->len = (size_t)(hi - lo);
    out->detail = NULL;
}

/* The next non-empty batch (GIL held). 1: loaded, 0: the stream ended; -1: stop (s->stop_* set). */
static int arrow_pull(py_source *s) {
    src_arrow *a = s->arrow;
    for (;;) {
        if (a->batch.release) a->batch.release(&a->batch);
        memset(&a->batch, 0, sizeof a->batch);
        a->row = 0;
        if (__atomic_load_n(&s->job->cancel, __ATOMIC_RELAXED)) {
            s->stop_rc = DS_ERR_CANCELED;
            snprintf(s->stop_msg, sizeof s->stop_msg, "canceled");
            return -1;
        }
        int rc = a->stream.get_next(&a->stream, &a->batch);
        if (rc) {
            const char *m = a->stream.get_last_error ? a->stream.get_last_error(&a->stream) : NULL;
            s->stop_rc = DS_ERR_IO;
            snprintf(s->stop_msg, sizeof s->stop_msg, "the Arrow stream failed: %s", m ? m : strerror(rc));
            return -1;
        }
        if (!a->batch.release) return 0; /* released marker: the end */
        /* rows mode: ds_ajson_row checks each access against the arrays' own lengths */
        const char *bad = s->rows ? NULL : arrow_check(a, &a->batch);
        if (bad) {
            s->stop_rc = DS_ERR_FORMAT;
            snprintf(s->stop_msg, sizeof s->stop_msg, "Arrow stream: a record batch does not match its schema (%s)",
                     bad);
            return -1;
        }
        if (a->batch.length > 0) return 1;
    }
}

/* Takes the stream out of a PyCapsule named "arrow_array_stream" (the
 * __arrow_c_stream__ protocol: the capsule's stream is moved, its release
 * set to NULL) or, for an object without the protocol (pyarrow < 14), from
 * its _export_to_c(address). 0, or -1 with an exception set. */
static int arrow_take_stream(src_arrow *a, PyObject *obj) {
    if (PyCapsule_CheckExact(obj)) {
        struct ArrowArrayStream *st = PyCapsule_GetPointer(obj, "arrow_array_stream");
        if (!st) return -1;
        if (!st->release) {
            PyErr_SetString(PyExc_ValueError, "Arrow stream: the capsule's stream was already consumed");
            return -1;
        }
        a->stream = *st;
        st->release = NULL;
        return 0;
    }
    PyObject *r = PyObject_CallMethod(obj, "_export_to_c", "K", (unsigned long long)(uintptr_t)&a->stream);
    if (!r) return -1;
    Py_DECREF(r);
    if (!a->stream.release) {
        PyErr_SetString(PyExc_ValueError, "Arrow stream: _export_to_c gave no stream");
        return -1;
    }
    return 0;
}

/* GIL held. */
static void arrow_free(src_arrow *a) {
    if (!a) return;
    if (a->batch.release) a->batch.release(&a->batch);
    if (a->schema.release) a->schema.release(&a->schema);
    if (a->stream.release) a->stream.release(&a->stream);
    PyMem_RawFree(a);
}

/* Chat formats: row i of the loaded batch as the JSON object of the
 * format's fields, the record's text (RAW_JSON). A batch that contradicts
 * its schema stops the run, as for the text field (arrow_check). */
static int arrow_row_json(py_source *s, int64_t i, ds_source_item *out, char *err, size_t errlen) {
    char why[160];
    const size_t limit = (size_t)256 << 20; /* the reader's bound on a record (source.c) */
    int rc = ds_ajson_row(s->aj, &s->arrow->schema, &s->arrow->batch, i, limit, &s->ajbuf, why, sizeof why);
    memset(out, 0, sizeof *out);
    if (rc == DS_AJSON_NOMEM) {
        snprintf(err, errlen, "out of memory reading the Arrow stream");
        return DS_ERR_NOMEM;
    }
    if (rc == DS_AJSON_BAD) {
        snprintf(err, errlen, "Arrow stream: a record batch does not match its schema (%s)", why);
        return DS_ERR_FORMAT;
    }
    out->status = DS_REC_OK;
    out->flags = DS_RECF_RAW_JSON;
    out->text = s->ajbuf.p;
    /* over the bound: the prefix written, far over the chat parser's 8 MiB
     * (chat-record-too-large) or the pipeline's record bound (record-too-large) */
    out->len = s->ajbuf.len;
    return 1;
}

static int py_src_next(void *user, ds_source_item *out, char *err, size_t errlen) {
    py_source *s = user;
    if (s->arrow) { /* the batch's rows in place; the GIL only to move to the next batch */
        src_arrow *a = s->arrow;
        if (a->row >= a->batch.length && !s->ended && !s->stop_rc) {
            PyGILState_STATE g = PyGILState_Ensure();
            if (arrow_pull(s) == 0) s->ended = 1;
            PyGILState_Release(g);
        }
        if (s->stop_rc) {
            snprintf(err, errlen, "%s", s->stop_msg);
            return s->stop_rc;
        }
        if (s->ended) return 0;
        if (s->rows) return arrow_row_json(s, a->row++, out, err, errlen);
        arrow_row(s, a->row++, out);
        return 1;
    }
    if (s->pos == s->n && !s->ended && !s->stop_rc) {
        PyGILState_STATE g = PyGILState_Ensure();
        src_pull(s);
        PyGILState_Release(g);
    }
    if (s->pos == s->n) {
        if (s->stop_rc) {
            snprintf(err, errlen, "%s", s->stop_msg);
            return s->stop_rc;
        }
        return 0;
    }
    const src_item *it = &s->items[s->pos++];
    out->status = (ds_rec_status)it->status;
    out->flags = it->flags;
    out->text = (const uint8_t *)(it->text ? it->text : it->status == DS_REC_OK ? s->aux + it->aux_off : NULL);
    out->len = it->len;
    out->detail = it->detail_off == (size_t)-1 ? NULL : s->aux + it->detail_off;
    return 1;
}

/* From the spec dict (see above); 0, or -1 with an exception set. */
static int py_source_init(py_source *s, PyObject *spec, bg_job *job, int row_format, const char *messages_field) {
    memset(s, 0, sizeof *s);
    s->job = job;
    s->rows = row_format != DS_FMT_TEXT;
    PyObject *it = PyDict_GetItemString(spec, "iter"), *keys = PyDict_GetItemString(spec, "field");
    PyObject *name = PyDict_GetItemString(spec, "field_name"), *values = PyDict_GetItemString(spec, "values");
    PyObject *stream = PyDict_GetItemString(spec, "stream");
    if ((stream ? !!it : !it || !PyIter_Check(it)) || !keys || !PyTuple_Check(keys) || !PyTuple_GET_SIZE(keys) ||
        !name || !PyUnicode_Check(name) || !values) {
        PyErr_SetString(PyExc_TypeError, "source: {'iter': iterator or 'stream': Arrow C stream, 'field': tuple, "
                                         "'field_name': str, 'values': bool}");
        return -1;
    }
    if (!(s->field_name = PyUnicode_AsUTF8(name))) return -1;
    s->values = PyObject_IsTrue(values) == 1;
    s->it = it;
    s->keys = keys;
    if (stream) {
        if (!(s->arrow = PyMem_RawCalloc(1, sizeof *s->arrow))) {
            PyErr_NoMemory();
            return -1;
        }
        int rc = arrow_take_stream(s->arrow, stream);
        if (!rc && s->arrow->stream.get_schema(&s->arrow->stream, &s->arrow->schema)) {
            const char *m = s->arrow->stream.get_last_error ? s->arrow->stream.get_last_error(&s->arrow->stream) : 0;
            PyErr_Format(PyExc_ValueError, "Arrow stream: no schema (%s)", m ? m : "no message");
            rc = -1;
        }
        if (!rc && s->rows && !arrow_fmt_is(&s->arrow->schema, "+s")) {
            PyErr_Format(PyExc_ValueError, "Arrow stream: its schema is '%s', not a struct of columns",
                         s->arrow->schema.format ? s->arrow->schema.format : "?");
            rc = -1;
        }
        if (!rc && !s->rows) rc = arrow_plan(s->arrow, keys, s->field_name);
        if (rc) {
            arrow_free(s->arrow);
            s->arrow = NULL;
            return -1;
        }
    }
    if (s->rows && !(s->aj = ds_ajson_for_format(row_format, messages_field, s->field_name))) {
        PyErr_NoMemory();
        return -1;
    }
    s->src.next = py_src_next;
    s->src.user = s;
    s->src.name = "<python>";
    return 0;
}

/* GIL held. */
static void py_source_free(py_source *s) {
    ds_ajson_free(s->aj);
    s->aj = NULL;
    ds_ajson_buf_free(&s->ajbuf);
    arrow_free(s->arrow);
    s->arrow = NULL;
    for (size_t i = 0; i < s->n; i++) Py_CLEAR(s->refs[i]);
    PyMem_RawFree(s->aux);
    s->aux = NULL;
}

/* ================================================================ analyze */
typedef struct {
    bg_job bg; /* first: the job is passed around as a bg_job */
    const char **inputs;
    size_t n_inputs;
    ds_reader_opts ro;
    ds_analyze_opts ao;
    int lint, hist;
    ds_lint_report *rep;
    ds_hist *h;
    char err[512];
    py_source *src; /* inputs was a source spec (a dict) */
} analyze_job;

static PyObject *analyze_event_dict(const void *p) {
    const ds_analyze_event *ev = p;
    return Py_BuildValue("{s:s,s:K,s:K,s:d,s:O}", "stage", "progress", "records", (unsigned long long)ev->records,
                         "bytes_in", (unsigned long long)ev->bytes_in, "seconds", ev->seconds, "last",
                         ev->last ? Py_True : Py_False);
}

static int analyze_cb(const ds_analyze_event *ev, void *user) { return bg_report(user, analyze_event_dict, ev); }

static int analyze_run(bg_job *b) {
    analyze_job *j = (analyze_job *)b;
    return ds_analyze(j->inputs, j->n_inputs, &j->ro, &j->ao, j->lint ? &j->rep : NULL, j->hist ? &j->h : NULL, j->err,
                      sizeof j->err);
}

/* The reports as the CLI's --json text, the chart as --svg. */
static PyObject *analyze_result(analyze_job *j, PyObject *svg_b) {
    char *lbuf = NULL, *hbuf = NULL;
    size_t lsz = 0, hsz = 0;
    PyObject *ret = NULL;
    if (j->rep) {
        FILE *f = open_memstream(&lbuf, &lsz);
        if (!f || ds_lint_write_json(j->rep, f) < 0 || fclose(f)) {
            raise_c(DS_ERR_NOMEM, "lint: cannot format the report");
            goto out;
        }
    }
    if (j->h) {
        FILE *f = open_memstream(&hbuf, &hsz);
        if (!f || ds_hist_write_json(j->h, f) < 0 || fclose(f)) {
            raise_c(DS_ERR_NOMEM, "hist: cannot format the report");
            goto out;
        }
        if (svg_b && ds_hist_write_svg(j->h, PyBytes_AS_STRING(svg_b), j->err, sizeof j->err) != DS_OK) {
            raise_c(DS_ERR_IO, j->err);
            goto out;
        }
    }
    int code = j->rep ? ds_lint_exit_code(j->rep) : 0;
    ret = Py_BuildValue("(z#z#iK)", lbuf, (Py_ssize_t)lsz, hbuf, (Py_ssize_t)hsz, code,
                        (unsigned long long)(j->h ? j->h->docs : 0));
out:
    free(lbuf);
    free(hbuf);
    return ret;
}

/* _core.analyze(inputs, ...): mkshards lint / hist from Python. Long (~125
 * lines) but flat: 22 keyword arguments (the kwlist alone is 23 lines, one
 * per name as clang-format lays it out), each mapped once onto the reader
 * and analyze options in the CLI's order, then one background run and one
 * clean-up path; split, the options would travel through a struct built for
 * nothing else. */
static PyObject *py_analyze(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwl[] = {"inputs",
                          "tokenizer",
                          "lint",
                          "hist",
                          "seq_len",
                          "max_doc_bytes",
                          "max_examples",
                          "threads",
                          "field",
                          "doc_sep",
                          "max_record_bytes",
                          "cut_overlong",
                          "outlier_factor",
                          "long_run_bytes",
                          "long_line_bytes",
                          "min_bytes_per_token",
                          "svg",
                          "callback",
                          "format",
                          "chat_template",
                          "loss_on",
                          "messages_field",
                          NULL};
    PyObject *inputs_o, *tok_o = Py_None, *svg_o = Py_None, *cb = Py_None;
    chat_kw ck = {0};
    int lint = 1, hist = 0, cut = 0;
    enum_arg doc_sep = {"doc_sep", ds_doc_sep_name, parse_doc_sep, DS_SEP_FILE};
    /* the ranges of mkshards lint / hist (tools/analyze_cli.c); 0 or None: the default */
    num_arg seq_len = {"seq_len", 1, 1ULL << 30, 1, 0, 0, 0},
            max_doc_bytes = {"max_doc_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg max_examples = {"max_examples", 0, 100000, 0, 1, 0, 0}, threads = {"threads", 1, 256, 2, 0, 0, 0};
    num_arg max_record = {"max_record_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg long_run = {"long_run_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg long_line = {"long_line_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    double outlier = 0, min_bpt = 0;
    const char *field = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OppO&O&O&O&zO&O&pdO&O&dOOzzzz", kwl, &inputs_o, &tok_o, &lint, &hist,
                                     conv_num, &seq_len, conv_num, &max_doc_bytes, conv_num, &max_examples, conv_num,
                                     &threads, &field, conv_enum, &doc_sep, conv_num, &max_record, &cut, &outlier,
                                     conv_num, &long_run, conv_num, &long_line, &min_bpt, &svg_o, &cb, &ck.format,
                                     &ck.chat_template, &ck.loss_on, &ck.messages_field))
        return NULL;
    if (check_real("outlier_factor", outlier, 1, 1, 1e12, 0, 1) ||
        check_real("min_bytes_per_token", min_bpt, 0, 1, 1e6, 0, 1))
        return NULL;
    const tk_tokenizer *tok = NULL;
    const char *tok_spec = NULL; /* the spec it was loaded from */
    if (tok_o != Py_None && !(tok = core_tokenizer_of(tok_o, &tok_spec)))
        return PyErr_Format(PyExc_TypeError, "tokenizer: a loaded mkshards Tokenizer or None");
    if (hist && tok_o == Py_None) return PyErr_Format(PyExc_ValueError, "hist needs a tokenizer");
    /* lint without a tokenizer nor a template checks the messages only (the CLI's rule) */
    if (chat_kw_check(&ck, tok_spec, tok || ck.chat_template)) return NULL;
    if (cb != Py_None && !PyCallable_Check(cb)) return PyErr_Format(PyExc_TypeError, "progress: a callable or None");
    analyze_job *j = PyMem_Calloc(1, sizeof *j);
    PyObject *paths = NULL, *svg_b = NULL, *ret = NULL;
    if (!j) return PyErr_NoMemory();
    if (PyDict_Check(inputs_o)) { /* a Python source (mkshards._pipeline) */
        if (!(j->src = PyMem_Calloc(1, sizeof *j->src))) {
            PyErr_NoMemory();
            goto out;
        }
        if (py_source_init(j->src, inputs_o, &j->bg, ck.fmt, ck.messages_field)) goto out;
    } else if (!(j->inputs = fs_paths(inputs_o, &paths, &j->n_inputs))) goto out;
    if (!j->n_inputs && !j->src) {
        PyErr_SetString(PyExc_ValueError, "no inputs given");
        goto out;
    }
    if (svg_o != Py_None && !PyUnicode_FSConverter(svg_o, &svg_b)) goto out;
    if (svg_b) { /* before the (long) analysis: the CLI's refusals, through the same library check */
        ds_read_paths rp = {.inputs = j->inputs, .n_inputs = j->n_inputs, .tokenizer = tok_spec};
        int crc = ds_check_output("svg", PyBytes_AS_STRING(svg_b), &rp, j->err, sizeof j->err);
        if (crc != DS_OK) {
            raise_c(crc, j->err);
            goto out;
        }
    }
    ds_reader_opts_init(&j->ro);
    ds_analyze_opts_init(&j->ao);
    j->ro.field = field;
    j->ro.doc_sep = (ds_doc_sep)doc_sep.v;
    if (max_record.v) j->ro.max_record_bytes = (size_t)max_record.v;
    if (cut) j->ro.overlong = DS_OVERLONG_CUT;
    ds_analyze_opts *ao = &j->ao;
    ao->tok = tok;
    ao->seq_len = seq_len.v;
    ao->max_doc_bytes = max_doc_bytes.v;
    if (max_examples.given) {
        ao->max_examples = (size_t)max_examples.v;
        ao->set_examples = 1;
    }
    ao->threads = (int)threads.v;
    if (outlier > 0) ao->outlier_factor = outlier;
    if (long_run.v) ao->long_run_bytes = long_run.v;
    if (long_line.v) ao->long_line_bytes = long_line.v;
    if (min_bpt > 0) ao->min_bytes_per_token = min_bpt;
    ao->format = ck.fmt;
    ao->chat_template = ck.tpl;
    ao->messages_field = ck.messages_field;
    ao->loss_on = ck.lo;
    ao->callback = analyze_cb;
    ao->user = j;
    ao->source = j->src ? &j->src->src : NULL;
    j->lint = lint;
    j->hist = hist;
    j->bg.run = analyze_run;
    j->bg.cb = cb == Py_None ? NULL : cb;
    if (bg_run(&j->bg)) goto out;
    if (j->bg.rc != DS_OK) {
        raise_c(j->bg.rc, j->err[0] ? j->err : ds_strerror(j->bg.rc));
        goto out;
    }
    ret = analyze_result(j, svg_b);
out:
    if (j) {
        ds_lint_report_free(j->rep);
        ds_hist_free(j->h);
        PyMem_Free(j->inputs);
        if (j->src) py_source_free(j->src);
        PyMem_Free(j->src);
    }
    PyMem_Free(j);
    Py_XDECREF(svg_b);
    Py_XDECREF(paths);
    return ret;
}

/* ================================================================ build */
typedef struct {
    bg_job bg; /* first */
    ds_build_opts o;
    ds_build_result res;
    char err[1024];
    py_source *src; /* inputs was a source spec (a dict) */
} build_job;

static const char *build_ev_name(ds_build_event_kind k) {
    switch (k) {
    case DS_BUILD_EV_PROGRESS: return "progress";
    case DS_BUILD_EV_REBUILD: return "rebuild";
    case DS_BUILD_EV_RESUME: return "resume";
    case DS_BUILD_EV_CKPT_FAILED: return "checkpoint_failed";
    }
    return "event";
}

static PyObject *build_event_dict(const void *p) {
    const ds_build_event *ev = p;
    return Py_BuildValue("{s:s,s:K,s:K,s:K,s:K,s:d,s:O,s:n,s:s}", "event", build_ev_name(ev->kind), "records",
                         (unsigned long long)ev->records, "bytes_in", (unsigned long long)ev->bytes_in, "tokens",
                         (unsigned long long)ev->tokens, "est_bytes", (unsigned long long)ev->est_bytes, "seconds",
                         ev->seconds, "last", ev->last ? Py_True : Py_False, "shards", (Py_ssize_t)ev->shards, "detail",
                         ev->detail ? ev->detail : "");
}

static int build_cb(const ds_build_event *ev, void *user) { return bg_report(user, build_event_dict, ev); }

static int build_run(bg_job *b) {
    build_job *j = (build_job *)b;
    return ds_build(&j->o, &j->res, j->err, sizeof j->err);
}

/* build()'s keyword arguments, as parsed */
typedef struct {
    PyObject *inputs, *out, *tok, *cb;
    const char *spec, *field;
    unsigned int seq_len, frame_rows, part_k, part_n;
    int pack, over_long, shuffle, zstd_level, doc_sep, threads, force;
    unsigned long long bfd_window, seed, shard_tokens, batch_bytes;
    double val_fraction, ckpt_s;
    chat_kw chat; /* format=, chat_template=, loss_on=, messages_field= */
} build_args;

/* Parse and check; a->out is a new reference (bytes) on success. */
static int build_parse(PyObject *args, PyObject *kw, build_args *a) {
    static char *kwl[] = {"inputs",
                          "out",
                          "tokenizer",
                          "tokenizer_spec",
                          "seq_len",
                          "pack",
                          "over_long",
                          "bfd_window",
                          "val_fraction",
                          "seed",
                          "shuffle",
                          "shard_tokens",
                          "zstd_level",
                          "frame_rows",
                          "field",
                          "doc_sep",
                          "part_k",
                          "part_n",
                          "threads",
                          "batch_bytes",
                          "force",
                          "callback",
                          "checkpoint_seconds",
                          "format",
                          "chat_template",
                          "loss_on",
                          "messages_field",
                          NULL};
    memset(a, 0, sizeof *a);
    a->cb = Py_None;
    a->shuffle = 1;
    /* the ranges of mkshards build's options (tools/cmd_build.c); 0: the default */
    num_arg seq_len = {"seq_len", 1, 1ULL << 24, 0, 0, 0, 0}, bfd_window = {"bfd_window", 1, 1ULL << 24, 1, 0, 0, 0};
    num_arg seed = {"seed", 0, UINT64_MAX, 0, 0, 0, 0}, shard_tokens = {"shard_tokens", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg zstd_level = {"zstd", 0, 22, 0, 0, 0, 0}, frame_rows = {"frame_rows", 1, 1ULL << 20, 1, 0, 0, 0};
    num_arg part_k = {"part K", 1, DS_BUILD_MAX_PARTS, 0, 0, 0, 1},
            part_n = {"part N", 1, DS_BUILD_MAX_PARTS, 0, 0, 0, 1};
    num_arg threads = {"threads", 1, 256, 2, 0, 0, 0}, batch_bytes = {"batch_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    enum_arg pack = {"pack", ds_pack_name, parse_pack, DS_PACK_CONCAT};
    enum_arg over_long = {"over_long", ds_over_long_name, parse_over_long, DS_OL_TRUNCATE};
    enum_arg doc_sep = {"doc_sep", ds_doc_sep_name, parse_doc_sep, DS_SEP_FILE};
    PyObject *ckpt_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(
            args, kw, "OO&Os|O&O&O&O&dO&pO&O&O&zO&O&O&O&O&pOOzzzz", kwl, &a->inputs, PyUnicode_FSConverter, &a->out,
            &a->tok, &a->spec, conv_num, &seq_len, conv_enum, &pack, conv_enum, &over_long, conv_num, &bfd_window,
            &a->val_fraction, conv_num, &seed, &a->shuffle, conv_num, &shard_tokens, conv_num, &zstd_level, conv_num,
            &frame_rows, &a->field, conv_enum, &doc_sep, conv_num, &part_k, conv_num, &part_n, conv_num, &threads,
            conv_num, &batch_bytes, &a->force, &a->cb, &ckpt_o, &a->chat.format, &a->chat.chat_template,
            &a->chat.loss_on, &a->chat.messages_field))
        return -1;
    a->ckpt_s = -1; /* None: ds_build's default */
    if (ckpt_o != Py_None && ((a->ckpt_s = PyFloat_AsDouble(ckpt_o)) == -1 && PyErr_Occurred())) goto fail;
    if (!seq_len.given) {
        PyErr_SetString(PyExc_TypeError, "build: seq_len is required (tokens per row, 1..2^24)");
        goto fail;
    }
    if (part_k.v > part_n.v) {
        PyErr_Format(PyExc_ValueError, "part %llu/%llu: K must be 1..N (N at most %u)", part_k.v, part_n.v,
                     (unsigned)DS_BUILD_MAX_PARTS);
        goto fail;
    }
    if (chat_kw_check(&a->chat, a->spec, 1)) goto fail;
    if (over_long.v == DS_OL_DROP_TURNS && a->chat.fmt == DS_FMT_TEXT) {
        PyErr_SetString(PyExc_ValueError, "over_long 'drop-turns' needs format='chat', 'prompt-completion' or 'auto'");
        goto fail;
    }
    if (check_real("val_fraction", a->val_fraction, 0, 0, 1, 1, 0) ||
        (ckpt_o != Py_None && check_real("checkpoint_seconds", a->ckpt_s, 0, 0, 1e9, 1, 0)))
        goto fail;
    a->seq_len = (unsigned)seq_len.v;
    a->pack = pack.v;
    a->over_long = over_long.v;
    a->doc_sep = doc_sep.v;
    a->bfd_window = bfd_window.v;
    a->seed = seed.v;
    a->shard_tokens = shard_tokens.v;
    a->zstd_level = (int)zstd_level.v;
    a->frame_rows = (unsigned)frame_rows.v;
    a->part_k = (unsigned)part_k.v;
    a->part_n = (unsigned)part_n.v;
    a->threads = (int)threads.v;
    a->batch_bytes = batch_bytes.v;
    const char *bad = NULL;
    if (!core_tokenizer_of(a->tok, NULL)) bad = "tokenizer: a loaded mkshards Tokenizer";
    else if (a->cb != Py_None && !PyCallable_Check(a->cb)) bad = "progress: a callable or None";
    if (bad) {
        PyErr_SetString(PyExc_TypeError, bad);
        goto fail;
    }
    return 0;
fail:
    Py_CLEAR(a->out);
    return -1;
}

/* ds_build_opts from the parsed arguments (0 = the CLI's default). */
static void build_set_opts(build_job *j, const build_args *a, const char **inputs, size_t n) {
    ds_build_opts *o = &j->o;
    ds_build_opts_init(o);
    o->tok = core_tokenizer_of(a->tok, NULL);
    o->tokenizer_spec = a->spec;
    o->inputs = inputs;
    o->n_inputs = n;
    o->out_dir = PyBytes_AS_STRING(a->out);
    o->seq_len = a->seq_len;
    o->pack = (ds_pack)a->pack;
    o->over_long = (ds_over_long)a->over_long;
    if (a->bfd_window) o->bfd_window = a->bfd_window;
    o->val_fraction = a->val_fraction;
    o->seed = a->seed;
    o->shuffle = a->shuffle;
    if (a->shard_tokens) o->shard_tokens = a->shard_tokens;
    o->zstd_level = a->zstd_level;
    if (a->frame_rows) o->frame_rows = a->frame_rows;
    o->field = a->field;
    o->doc_sep = (ds_doc_sep)a->doc_sep;
    o->part_k = a->part_k;
    o->part_n = a->part_n;
    o->threads = a->threads > 0 ? a->threads : n_cpus();
    if (a->batch_bytes) o->batch_bytes = a->batch_bytes;
    o->force = a->force;
    if (a->ckpt_s >= 0) o->checkpoint_seconds = a->ckpt_s;
    o->format = a->chat.fmt;
    o->chat_template = a->chat.tpl;
    o->messages_field = a->chat.messages_field;
    o->loss_on = a->chat.lo;
    o->callback = build_cb;
    o->user = j;
}

static PyObject *py_build(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    build_args a;
    if (build_parse(args, kw, &a)) return NULL;
    PyObject *paths = NULL, *ret = NULL;
    size_t n = 0;
    int is_src = PyDict_Check(a.inputs); /* a Python source (mkshards._pipeline) */
    const char **inputs = is_src ? NULL : fs_paths(a.inputs, &paths, &n);
    build_job *j = inputs || is_src ? PyMem_Calloc(1, sizeof *j) : NULL;
    if (!j) {
        if (inputs || is_src) PyErr_NoMemory();
        goto out;
    }
    if (is_src) {
        if (a.part_n > 1) {
            PyErr_SetString(PyExc_ValueError, "part: a Python source cannot be split into parts; give files");
            goto out;
        }
        if (!(j->src = PyMem_Calloc(1, sizeof *j->src))) {
            PyErr_NoMemory();
            goto out;
        }
        if (py_source_init(j->src, a.inputs, &j->bg, a.chat.fmt, a.chat.messages_field)) goto out;
    }
    build_set_opts(j, &a, inputs, n);
    if (j->src) j->o.source = &j->src->src;
    j->bg.run = build_run;
    j->bg.cb = a.cb == Py_None ? NULL : a.cb;
    if (bg_run(&j->bg)) goto out;
    if (j->bg.rc != DS_OK) {
        raise_c(j->bg.rc, j->err[0] ? j->err : ds_strerror(j->bg.rc));
        goto out;
    }
    ret = Py_BuildValue("{s:O,s:n,s:O,s:n,s:d}", "up_to_date", j->res.up_to_date ? Py_True : Py_False, "n_checked",
                        (Py_ssize_t)j->res.n_checked, "resumed", j->res.resumed ? Py_True : Py_False, "n_shards",
                        (Py_ssize_t)j->res.n_shards, "seconds", j->res.seconds);
out:
    if (j && j->src) py_source_free(j->src);
    if (j) PyMem_Free(j->src);
    PyMem_Free(j);
    PyMem_Free(inputs);
    Py_XDECREF(paths);
    Py_XDECREF(a.out);
    return ret;
}

static PyMethodDef jobs_functions[] = {
    {"analyze", FN(py_analyze), METH_VARARGS | METH_KEYWORDS,
     "analyze(inputs, tokenizer=None, lint=True, hist=False, ...) -> (lint_json, hist_json, exit_code, docs)"},
    {"build", FN(py_build), METH_VARARGS | METH_KEYWORDS,
     "build(inputs, out, tokenizer, tokenizer_spec, seq_len, ...): ds_build on a worker thread; Ctrl-C cancels"},
    {NULL, NULL, 0, NULL}};

int core_add_jobs(PyObject *m) { return PyModule_AddFunctions(m, jobs_functions); }
