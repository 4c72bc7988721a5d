/* _core.c - the CPython extension behind the `mkshards` package.
 *
 * A thin layer over the public headers tokenizer/tk.h and dataset/ds.h:
 *   Tokenizer  tk_load / tk_encode* / tk_decode (GIL released while encoding;
 *              batches on tk_encode_batch's threads)
 *   ShardSet   ds_shardset_open / ds_shardset_read (rows into caller buffers,
 *              GIL released)
 *   analyze    ds_analyze (lint / hist), reports as the CLI's --json text
 *   row_order  llmtrain's seeded row order (train/loader.c, tr_row_at)
 *   IdBuffer   a malloc'ed array exported through the buffer protocol, so
 *              numpy.frombuffer wraps it without a copy (numpy is not needed
 *              to build this module).
 * Every C failure raises mkshards.MkshardsError (a ValueError) carrying the C
 * message and the status in .code; nothing here exits or aborts. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "ds.h"
#include "tk.h"

#ifndef MKS_VERSION
#define MKS_VERSION "0.0.0"
#endif

#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyObject *MksError;

/* Raise MkshardsError(msg) with .code = code. */
static PyObject *raise_c(int code, const char *msg)
{
    PyObject *e = PyObject_CallFunction(MksError, "s", msg && *msg ? msg : "mkshards: unknown error");
    if (!e)
        return NULL;
    PyObject *c = PyLong_FromLong(code);
    if (c) {
        PyObject_SetAttrString(e, "code", c);
        Py_DECREF(c);
    }
    PyErr_SetObject(MksError, e);
    Py_DECREF(e);
    return NULL;
}

static PyObject *raise_tk(int rc, const char *what)
{
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tk_strerror(rc));
    return raise_c(rc, msg);
}

static int n_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

/* ================================================================ checked numbers
 * Every integer argument goes through one of these (PyArg "O&"): a Python int
 * (or anything with __index__, or an integral float) that must lie in the
 * argument's range, the ranges of the CLI options it mirrors. Out of range
 * (negative, too big for the C type, beyond the option's limit) is a
 * ValueError naming the argument and the value as given; a non-number a
 * TypeError. The PyArg units "I" and "k" would wrap silently (2**32 + 64 ->
 * 64) and "i"/"K" name neither the argument nor the value. */

/* The decimal text of an int (a long one by its size: str() of an int of
 * over 4300 digits raises). */
static void int_text(PyObject *ix, char *buf, size_t n)
{
    PyObject *s = PyObject_Str(ix);
    const char *u = s ? PyUnicode_AsUTF8(s) : NULL;
    if (u && strlen(u) <= 60) {
        snprintf(buf, n, "%s", u);
    } else {
        PyErr_Clear();
        PyObject *bits = PyObject_CallMethod(ix, "bit_length", NULL);
        long long b = bits ? PyLong_AsLongLong(bits) : -1;
        PyErr_Clear();
        Py_XDECREF(bits);
        snprintf(buf, n, "(%s integer of %lld bits)",
                 PyObject_RichCompareBool(ix, Py_False, Py_LT) == 1 ? "a negative" : "an", b); /* Py_False: 0 */
        PyErr_Clear();
    }
    Py_XDECREF(s);
}

/* o as an exact int (new reference): ints and __index__ types, and floats
 * without a fraction (build(shard_tokens=32e6)); NULL with TypeError /
 * ValueError naming `name` otherwise. */
static PyObject *exact_int(PyObject *o, const char *name)
{
    if (PyFloat_Check(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        if (!isfinite(d) || d != floor(d)) {
            PyErr_Format(PyExc_ValueError, "%s %R: must be an integer", name, o);
            return NULL;
        }
        return PyNumber_Long(o);
    }
    PyObject *ix = PyNumber_Index(o);
    if (!ix && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: an integer, not %.80s", name, Py_TYPE(o)->tp_name);
    }
    return ix;
}

typedef struct {
    const char *name;          /* the argument, as the Python call names it */
    unsigned long long lo, hi; /* accepted values */
    unsigned char zero_ok;     /* 0 accepted too: 1 the default, 2 all cores */
    unsigned char none_ok;     /* None accepted too (the default): v keeps its preset value */
    unsigned char given;       /* set when a number was given */
    unsigned long long v;      /* the value (preset: the default) */
} num_arg;

/* Checks ix (an exact int) against a's range; 1 and a->v set, or 0 with ValueError. */
static int num_check(num_arg *a, PyObject *ix)
{
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (s == -1 && PyErr_Occurred())
        return 0;
    unsigned long long v = 0;
    int ok;
    if (overflow < 0 || (!overflow && s < 0)) {
        ok = 0;
    } else if (overflow > 0) { /* >= 2^63: in range only if it fits 64 bits */
        v = PyLong_AsUnsignedLongLong(ix);
        ok = !(v == (unsigned long long)-1 && PyErr_Occurred());
        PyErr_Clear();
    } else {
        v = (unsigned long long)s;
        ok = 1;
    }
    if (ok && ((v >= a->lo && v <= a->hi) || (a->zero_ok && v == 0))) {
        a->v = v;
        a->given = 1;
        return 1;
    }
    char t[96];
    int_text(ix, t, sizeof t);
    PyErr_Format(PyExc_ValueError, "%s %s: must be %llu..%llu%s", a->name, t, a->lo, a->hi,
                 a->zero_ok == 2 ? " (or 0: all cores)"
                 : a->zero_ok    ? " (or 0: the default)"
                 : a->none_ok    ? " (or None: the default)"
                                 : "");
    return 0;
}

/* PyArg "O&" converter for a num_arg. */
static int conv_num(PyObject *o, void *p)
{
    num_arg *a = p;
    if (o == Py_None && a->none_ok)
        return 1;
    PyObject *ix = exact_int(o, a->name);
    if (!ix)
        return 0;
    int ok = num_check(a, ix);
    Py_DECREF(ix);
    return ok;
}

/* A signed 64-bit integer argument (ignore_index): "O&" converter. */
typedef struct {
    const char *name;
    long long v;
} i64_arg;

static int conv_i64(PyObject *o, void *p)
{
    i64_arg *a = p;
    PyObject *ix = exact_int(o, a->name);
    if (!ix)
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        char t[96];
        PyErr_Clear();
        int_text(ix, t, sizeof t);
        PyErr_Format(PyExc_ValueError, "%s %s: must be -2^63..2^63-1", a->name, t);
        Py_DECREF(ix);
        return 0;
    }
    Py_DECREF(ix);
    a->v = v;
    return 1;
}

/* A float argument: finite, in [lo, hi] (lo_open / hi_open: the bound
 * excluded), or 0 when zero_ok (the default). 0, or -1 with ValueError. */
static int check_real(const char *name, double v, double lo, int lo_open, double hi, int hi_open, int zero_ok)
{
    if (zero_ok && v == 0)
        return 0;
    if (isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi))
        return 0;
    char msg[200]; /* PyErr_Format has no %g */
    snprintf(msg, sizeof msg, "%s %.17g: must be a number with %g %s x %s %g%s", name, v, lo, lo_open ? "<" : "<=",
             hi_open ? "<" : "<=", hi, zero_ok ? " (or 0: the default)" : "");
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* ================================================================ IdBuffer */
typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t n;
    Py_ssize_t itemsize;
    const char *fmt;
    Py_ssize_t shape[1], strides[1];
} IdBuf;

static uint64_t empty_storage;

static void idbuf_dealloc(IdBuf *b)
{
    if (b->data != &empty_storage)
        free(b->data);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int idbuf_getbuffer(IdBuf *b, Py_buffer *view, int flags)
{
    (void)flags;
    view->obj = (PyObject *)b;
    Py_INCREF(b);
    view->buf = b->data;
    view->len = b->n * b->itemsize;
    view->readonly = 0;
    view->itemsize = b->itemsize;
    view->format = (flags & PyBUF_FORMAT) ? (char *)b->fmt : NULL;
    view->ndim = 1;
    b->shape[0] = b->n;
    b->strides[0] = b->itemsize;
    view->shape = (flags & PyBUF_ND) ? b->shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? b->strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static Py_ssize_t idbuf_len(IdBuf *b) { return b->n; }

static PyBufferProcs idbuf_as_buffer = {(getbufferproc)idbuf_getbuffer, NULL};
static PySequenceMethods idbuf_as_seq = {.sq_length = (lenfunc)idbuf_len};

static PyTypeObject IdBufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mkshards._core.IdBuffer",
    .tp_basicsize = sizeof(IdBuf),
    .tp_dealloc = (destructor)idbuf_dealloc,
    .tp_as_buffer = &idbuf_as_buffer,
    .tp_as_sequence = &idbuf_as_seq,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A C array (uint32 token ids or uint64 offsets) exported through the buffer protocol.",
};

/* Takes ownership of data (malloc'ed, or NULL when n == 0). */
static PyObject *idbuf_new(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *fmt)
{
    IdBuf *b = PyObject_New(IdBuf, &IdBufType);
    if (!b) {
        free(data);
        return NULL;
    }
    b->data = data ? data : (void *)&empty_storage;
    b->n = n;
    b->itemsize = itemsize;
    b->fmt = fmt;
    return (PyObject *)b;
}

/* ================================================================ Tokenizer */
typedef struct {
    PyObject_HEAD
    tk_tokenizer *tok;
    PyObject **idcache; /* PyLong for every id < ncache (built on first use) */
    uint32_t ncache;
    PyObject *spec;     /* the spec loaded (bytes): outputs are checked against its files (ds_check_output) */
} TokObj;

#define IDCACHE_MAX (1u << 21)

static void tok_dealloc(TokObj *t)
{
    if (t->idcache) {
        for (uint32_t i = 0; i < t->ncache; i++)
            Py_XDECREF(t->idcache[i]);
        free(t->idcache);
    }
    if (t->tok)
        tk_free(t->tok);
    Py_XDECREF(t->spec);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int tok_init(TokObj *t, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"spec", "pattern", NULL};
    PyObject *spec_o = NULL;
    const char *pattern = NULL;
    if (t->tok) { /* another thread may be encoding with it (GIL released) */
        PyErr_SetString(PyExc_RuntimeError, "Tokenizer is already loaded");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|z", kwl, PyUnicode_FSConverter, &spec_o, &pattern))
        return -1;
    tk_pattern pat = TK_PAT_NONE;
    if (pattern && *pattern && tk_pattern_parse(pattern, &pat) != TK_OK) {
        Py_DECREF(spec_o);
        PyErr_Format(PyExc_ValueError, "unknown pattern '%s': use gpt2, cl100k or o200k", pattern);
        return -1;
    }
    const char *spec = PyBytes_AS_STRING(spec_o);
    if (!*spec) {
        Py_DECREF(spec_o);
        PyErr_SetString(PyExc_ValueError, "no tokenizer given: a .tiktoken file, a tokenizer.json, a folder with "
                                          "encoder.json+vocab.bpe, or a name (gpt2, cl100k_base, o200k_base)");
        return -1;
    }
    char err[512] = "";
    tk_tokenizer *tok = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tk_load(spec, pat, &tok, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc != TK_OK || !tok) {
        /* the same wording as the CLI (tools/cli.c, cli_load_tokenizer) */
        const char *hint = "";
        if (rc == TK_ERR_PATTERN)
            hint = " (this vocabulary is not a known one: pass pattern='gpt2'|'cl100k'|'o200k')";
        else if (!err[0] && rc == TK_ERR_NOT_FOUND)
            hint = " (pass a path, or set MKSHARDS_VOCAB_DIR to a folder holding <name>.tiktoken)";
        char msg[900];
        snprintf(msg, sizeof msg, "cannot load tokenizer '%s': %s%s", spec, err[0] ? err : tk_strerror(rc), hint);
        Py_DECREF(spec_o);
        raise_c(rc ? rc : TK_ERR_IO, msg);
        return -1;
    }
    if (t->tok) { /* loaded meanwhile by another thread */
        Py_DECREF(spec_o);
        tk_free(tok);
        PyErr_SetString(PyExc_RuntimeError, "Tokenizer is already loaded");
        return -1;
    }
    t->tok = tok;
    Py_XSETREF(t->spec, spec_o); /* owns the reference */
    return 0;
}

static int tok_ready(TokObj *t)
{
    if (!t->tok) {
        PyErr_SetString(PyExc_ValueError, "tokenizer not loaded");
        return 0;
    }
    return 1;
}

static int build_cache(TokObj *t)
{
    if (t->idcache || t->ncache)
        return 0;
    uint32_t n = tk_vocab_size(t->tok);
    if (n > IDCACHE_MAX)
        n = IDCACHE_MAX;
    PyObject **c = calloc(n ? n : 1, sizeof *c);
    if (!c) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        c[i] = PyLong_FromUnsignedLong(i);
        if (!c[i]) {
            for (uint32_t k = 0; k < i; k++)
                Py_DECREF(c[k]);
            free(c);
            return -1;
        }
    }
    t->idcache = c;
    t->ncache = n;
    return 0;
}

static PyObject *ids_to_list(TokObj *t, const uint32_t *ids, size_t n)
{
    if (!t->idcache && build_cache(t))
        return NULL;
    PyObject *l = PyList_New((Py_ssize_t)n);
    if (!l)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *o;
        if (ids[i] < t->ncache) {
            o = t->idcache[ids[i]];
            Py_INCREF(o);
        } else if (!(o = PyLong_FromUnsignedLong(ids[i]))) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, o);
    }
    return l;
}

/* UTF-8 of a str. A str with lone surrogates cannot be UTF-8: like tiktoken,
 * it is round-tripped through UTF-16 (surrogatepass) and decoded with
 * 'replace' (pairs join, lone ones become U+FFFD). *keep receives a new
 * reference the bytes live in (NULL when they live in s itself). */
static int text_utf8(PyObject *s, PyObject **keep, const char **p, Py_ssize_t *n)
{
    *keep = NULL;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.80s", Py_TYPE(s)->tp_name);
        return -1;
    }
    *p = PyUnicode_AsUTF8AndSize(s, n);
    if (*p)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyErr_Clear();
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-16", "surrogatepass");
    if (!b)
        return -1;
    PyObject *f = PyUnicode_Decode(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), "utf-16", "replace");
    Py_DECREF(b);
    if (!f)
        return -1;
    *p = PyUnicode_AsUTF8AndSize(f, n);
    if (!*p) {
        Py_DECREF(f);
        return -1;
    }
    *keep = f;
    return 0;
}

/* allowed: None / empty -> ordinary encoding (*n = 0, *all = 0); "all" ->
 * every special; else an iterable of str. The strings live in *keep. */
typedef struct {
    const char **names;
    size_t n;
    int all;
    PyObject *keep;
} allowed_set;

static void allowed_free(allowed_set *a)
{
    PyMem_Free(a->names);
    Py_XDECREF(a->keep);
    memset(a, 0, sizeof *a);
}

static int allowed_parse(PyObject *o, allowed_set *a)
{
    memset(a, 0, sizeof *a);
    if (!o || o == Py_None)
        return 0;
    if (PyUnicode_Check(o)) {
        if (PyUnicode_CompareWithASCIIString(o, "all") == 0) {
            a->all = 1;
            return 0;
        }
        PyErr_SetString(PyExc_ValueError, "allowed_special: 'all' or a set of special-token strings");
        return -1;
    }
    PyObject *t = PySequence_Tuple(o);
    if (!t)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    a->keep = t;
    if (n == 0)
        return 0;
    a->names = PyMem_Malloc((size_t)n * sizeof *a->names);
    if (!a->names) {
        allowed_free(a);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(t, i);
        if (!PyUnicode_Check(s) || !(a->names[i] = PyUnicode_AsUTF8(s))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "allowed_special: expected str items");
            allowed_free(a);
            return -1;
        }
    }
    a->n = (size_t)n;
    return 0;
}

static int allowed_any(const allowed_set *a) { return a->all || a->n > 0; }

static int encode_one(const tk_tokenizer *tok, const allowed_set *a, const uint8_t *p, size_t n, tk_ids *out)
{
    if (a->all)
        return tk_encode_special(tok, p, n, NULL, (size_t)-1, out);
    if (a->n)
        return tk_encode_special(tok, p, n, a->names, a->n, out);
    return tk_encode(tok, p, n, out);
}

/* encode one str -> tk_ids (GIL released while encoding) */
static int encode_str(TokObj *t, PyObject *text, PyObject *allowed_o, tk_ids *out)
{
    allowed_set a;
    if (allowed_parse(allowed_o, &a))
        return -1;
    PyObject *keep;
    const char *p;
    Py_ssize_t n;
    if (text_utf8(text, &keep, &p, &n)) {
        allowed_free(&a);
        return -1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = encode_one(t->tok, &a, (const uint8_t *)p, (size_t)n, out);
    Py_END_ALLOW_THREADS
    Py_XDECREF(keep);
    allowed_free(&a);
    if (rc != TK_OK) {
        tk_ids_free(out);
        raise_tk(rc, "encode");
        return -1;
    }
    return 0;
}

static PyObject *tok_encode(TokObj *t, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"text", "allowed", NULL};
    PyObject *text, *allowed = Py_None;
    if (!tok_ready(t) || !PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &text, &allowed))
        return NULL;
    tk_ids out = {0};
    if (encode_str(t, text, allowed, &out))
        return NULL;
    PyObject *l = ids_to_list(t, out.ids, out.len);
    tk_ids_free(&out);
    return l;
}

static PyObject *tok_encode_ordinary(TokObj *t, PyObject *text)
{
    if (!tok_ready(t))
        return NULL;
    tk_ids out = {0};
    if (encode_str(t, text, Py_None, &out))
        return NULL;
    PyObject *l = ids_to_list(t, out.ids, out.len);
    tk_ids_free(&out);
    return l;
}

static PyObject *tok_encode_to_buffer(TokObj *t, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"text", "allowed", NULL};
    PyObject *text, *allowed = Py_None;
    if (!tok_ready(t) || !PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &text, &allowed))
        return NULL;
    tk_ids out = {0};
    if (encode_str(t, text, allowed, &out))
        return NULL;
    return idbuf_new(out.ids, (Py_ssize_t)out.len, 4, "I");
}

static PyObject *tok_count(TokObj *t, PyObject *text)
{
    if (!tok_ready(t))
        return NULL;
    PyObject *keep;
    const char *p;
    Py_ssize_t n;
    if (text_utf8(text, &keep, &p, &n))
        return NULL;
    size_t cnt = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tk_count(t->tok, (const uint8_t *)p, (size_t)n, &cnt);
    Py_END_ALLOW_THREADS
    Py_XDECREF(keep);
    if (rc != TK_OK)
        return raise_tk(rc, "count");
    return PyLong_FromSize_t(cnt);
}

/* ---- batches */
typedef struct {
    const tk_tokenizer *tok;
    const allowed_set *a;
    const tk_span *docs;
    tk_ids *outs;
    size_t n, next;
    int rc;
} special_job;

static void *special_worker(void *arg)
{
    special_job *j = arg;
    for (;;) {
        size_t k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (k >= j->n)
            break;
        int rc = encode_one(j->tok, j->a, j->docs[k].text, j->docs[k].len, &j->outs[k]);
        if (rc) {
            int z = 0;
            __atomic_compare_exchange_n(&j->rc, &z, rc, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

/* Encode with allowed specials on `threads` threads (tk_encode_batch has no
 * special-token variant). */
static int encode_batch_special(const tk_tokenizer *tok, const allowed_set *a, const tk_span *docs, size_t n,
                                int threads, tk_ids *outs)
{
    if (threads <= 0)
        threads = n_cpus();
    if ((size_t)threads > n)
        threads = (int)n;
    special_job j = {tok, a, docs, outs, n, 0, 0};
    pthread_t th[256];
    if (threads > 256)
        threads = 256;
    int started = 0;
    for (int k = 1; k < threads; k++) {
        if (pthread_create(&th[k], NULL, special_worker, &j))
            break;
        started = k;
    }
    special_worker(&j);
    for (int k = 1; k <= started; k++)
        pthread_join(th[k], NULL);
    return j.rc;
}

/* Encode a sequence of str; outs (calloc'ed, n entries) on success. */
static int encode_texts(TokObj *t, PyObject *texts, int threads, PyObject *allowed_o, tk_ids **outs_ret,
                        size_t *n_ret)
{
    allowed_set a;
    if (allowed_parse(allowed_o, &a))
        return -1;
    /* a tuple holds every str alive while the GIL is released, even if the
     * caller's list changes meanwhile */
    PyObject *tup = PySequence_Tuple(texts);
    if (!tup) {
        allowed_free(&a);
        return -1;
    }
    size_t n = (size_t)PyTuple_GET_SIZE(tup);
    tk_span *spans = PyMem_Calloc(n ? n : 1, sizeof *spans);
    tk_ids *outs = calloc(n ? n : 1, sizeof *outs);
    PyObject *keeps = PyList_New(0);
    int rc = -1;
    if (!spans || !outs || !keeps) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *keep;
        const char *p;
        Py_ssize_t len;
        if (text_utf8(PyTuple_GET_ITEM(tup, (Py_ssize_t)i), &keep, &p, &len))
            goto done;
        if (keep) {
            int e = PyList_Append(keeps, keep);
            Py_DECREF(keep);
            if (e)
                goto done;
        }
        spans[i].text = (const uint8_t *)p;
        spans[i].len = (size_t)len;
    }
    int erc;
    Py_BEGIN_ALLOW_THREADS
    if (allowed_any(&a))
        erc = encode_batch_special(t->tok, &a, spans, n, threads, outs);
    else
        erc = tk_encode_batch(t->tok, spans, n, threads, outs);
    Py_END_ALLOW_THREADS
    if (erc != TK_OK) {
        raise_tk(erc, "encode_batch");
        goto done;
    }
    *outs_ret = outs;
    *n_ret = n;
    outs = NULL;
    rc = 0;
done:
    if (outs) {
        for (size_t i = 0; i < n; i++)
            tk_ids_free(&outs[i]);
        free(outs);
    }
    PyMem_Free(spans);
    Py_XDECREF(keeps);
    Py_DECREF(tup);
    allowed_free(&a);
    return rc;
}

static PyObject *tok_encode_batch(TokObj *t, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"texts", "num_threads", "allowed", "as_buffer", NULL};
    PyObject *texts, *allowed = Py_None;
    int as_buffer = 0;
    num_arg threads = {"num_threads", 1, 4096, 2, 0, 0, 0}; /* 0: all cores (mkshards encode --threads 0..4096) */
    if (!tok_ready(t) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O|O&Op", kwl, &texts, conv_num, &threads, &allowed, &as_buffer))
        return NULL;
    tk_ids *outs = NULL;
    size_t n = 0;
    if (encode_texts(t, texts, (int)threads.v, allowed, &outs, &n))
        return NULL;
    PyObject *res = NULL;
    if (as_buffer) {
        /* flat ids + offsets (n + 1 entries) */
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += outs[i].len;
        uint32_t *ids = malloc(total ? total * 4 : 4);
        uint64_t *off = malloc((n + 1) * 8);
        if (!ids || !off) {
            free(ids);
            free(off);
            PyErr_NoMemory();
        } else {
            size_t o = 0;
            for (size_t i = 0; i < n; i++) {
                off[i] = o;
                if (outs[i].len)
                    memcpy(ids + o, outs[i].ids, outs[i].len * 4);
                o += outs[i].len;
            }
            off[n] = o;
            PyObject *bi = idbuf_new(ids, (Py_ssize_t)total, 4, "I");
            PyObject *bo = bi ? idbuf_new(off, (Py_ssize_t)n + 1, 8, "Q") : (free(off), NULL);
            if (bi && bo)
                res = PyTuple_Pack(2, bi, bo);
            Py_XDECREF(bi);
            Py_XDECREF(bo);
        }
    } else {
        /* No cyclic collection while the lists are built: each one the list
         * allocations trigger traverses every id of the young lists (measured:
         * that was all of the 0.3 s the lists cost over the numpy form on the
         * 77 MB corpus). Nothing else runs meanwhile (the GIL is held). */
#if PY_VERSION_HEX >= 0x030A0000
        int gc_was = PyGC_Disable();
#endif
        res = PyList_New((Py_ssize_t)n);
        for (size_t i = 0; res && i < n; i++) {
            PyObject *l = ids_to_list(t, outs[i].ids, outs[i].len);
            if (!l) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, l);
        }
#if PY_VERSION_HEX >= 0x030A0000
        if (gc_was)
            PyGC_Enable();
#endif
    }
    for (size_t i = 0; i < n; i++)
        tk_ids_free(&outs[i]);
    free(outs);
    return res;
}

/* ---- decoding
 * An id that is not in the vocabulary - negative, beyond 32 bits, at or over
 * n_vocab, or an unused id inside the range - raises MkshardsError (a
 * ValueError, code TK_ERR_RANGE) from decode / decode_bytes naming the id as
 * given and its index; decode_single_token_bytes raises KeyError (tiktoken's
 * exception for an unknown token) with the same words. A non-integer is a
 * TypeError. */

static PyObject *raise_bad_id(const char *id_text, size_t index, const tk_tokenizer *tok, int unused)
{
    char msg[300];
    snprintf(msg, sizeof msg, "decode: token id %s (index %zu) is not in the vocabulary (ids 0..%u%s)", id_text, index,
             tk_vocab_size(tok) - 1, unused ? "; this one is unused" : "");
    return raise_c(TK_ERR_RANGE, msg);
}

/* An item of a sequence of ids as uint32; -1 with TypeError, or MkshardsError
 * naming the id as given when it cannot be one. */
static int item_id(PyObject *item, size_t index, const tk_tokenizer *tok, uint32_t *id)
{
    PyObject *ix = PyNumber_Index(item);
    if (!ix) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "token id at index %zu: an integer, not %.80s", index,
                         Py_TYPE(item)->tp_name);
        }
        return -1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (x == -1 && !overflow && PyErr_Occurred()) {
        Py_DECREF(ix);
        return -1;
    }
    if (overflow || x < 0 || x > (long long)UINT32_MAX) {
        char t[96];
        int_text(ix, t, sizeof t);
        Py_DECREF(ix);
        raise_bad_id(t, index, tok, 0);
        return -1;
    }
    Py_DECREF(ix);
    *id = (uint32_t)x;
    return 0;
}

/* ids from a buffer (numpy array or scalar, array.array, IdBuffer) of
 * integers or any iterable of ints; *ids is PyMem_Malloc'ed. */
static int collect_ids(PyObject *o, const tk_tokenizer *tok, uint32_t **ids_ret, size_t *n_ret)
{
    *ids_ret = NULL;
    *n_ret = 0;
    if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
        Py_buffer v;
        if (PyObject_GetBuffer(o, &v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
            const char *f = v.format ? v.format : "B";
            if (*f == '<' || *f == '=' || *f == '@')
                f++;
            char c = f[0];
            int sgn = (c == 'b' || c == 'h' || c == 'i' || c == 'l' || c == 'q');
            int ok = c && f[1] == 0 && strchr("bBhHiIlLqQ", c) != NULL &&
                     (v.itemsize == 1 || v.itemsize == 2 || v.itemsize == 4 || v.itemsize == 8);
            size_t n = ok ? (size_t)(v.len / v.itemsize) : 0;
            if (ok) {
                uint32_t *ids = PyMem_Malloc(n ? n * 4 : 4);
                if (!ids) {
                    PyBuffer_Release(&v);
                    PyErr_NoMemory();
                    return -1;
                }
                for (size_t i = 0; i < n; i++) {
                    const char *p = (const char *)v.buf + i * (size_t)v.itemsize;
                    /* the value as stored: signed items as int64, unsigned as uint64 */
                    int64_t x = 0;
                    uint64_t u = 0;
                    switch (v.itemsize) {
                    case 1: x = *(const int8_t *)p, u = *(const uint8_t *)p; break;
                    case 2: x = *(const int16_t *)p, u = *(const uint16_t *)p; break;
                    case 4: x = *(const int32_t *)p, u = *(const uint32_t *)p; break;
                    default: memcpy(&x, p, 8), memcpy(&u, p, 8);
                    }
                    if (sgn ? (x < 0 || x > (int64_t)UINT32_MAX) : u > UINT32_MAX) {
                        char t[32];
                        if (sgn)
                            snprintf(t, sizeof t, "%lld", (long long)x);
                        else
                            snprintf(t, sizeof t, "%llu", (unsigned long long)u);
                        PyMem_Free(ids);
                        PyBuffer_Release(&v);
                        raise_bad_id(t, i, tok, 0);
                        return -1;
                    }
                    ids[i] = sgn ? (uint32_t)x : (uint32_t)u;
                }
                PyBuffer_Release(&v);
                *ids_ret = ids;
                *n_ret = n;
                return 0;
            }
            PyBuffer_Release(&v);
        } else {
            PyErr_Clear();
        }
    }
    PyObject *seq = PySequence_Fast(o, "expected a sequence of token ids");
    if (!seq)
        return -1;
    size_t n = (size_t)PySequence_Fast_GET_SIZE(seq);
    uint32_t *ids = PyMem_Malloc(n ? n * 4 : 4);
    if (!ids) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (size_t i = 0; i < n; i++) {
        if (PyLong_CheckExact(items[i])) { /* the common case, without a new reference */
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(items[i], &overflow);
            if (!overflow && x >= 0 && x <= (long long)UINT32_MAX) {
                ids[i] = (uint32_t)x;
                continue;
            }
        }
        if (item_id(items[i], i, tok, &ids[i])) {
            PyMem_Free(ids);
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *ids_ret = ids;
    *n_ret = n;
    return 0;
}

static PyObject *tok_decode_bytes(TokObj *t, PyObject *tokens)
{
    if (!tok_ready(t))
        return NULL;
    uint32_t *ids;
    size_t n;
    if (collect_ids(tokens, t->tok, &ids, &n))
        return NULL;
    tk_bytes out = {0};
    int rc = tk_decode(t->tok, ids, n, &out);
    if (rc != TK_OK) {
        size_t i = 0;
        const uint8_t *b;
        size_t bl;
        while (rc == TK_ERR_RANGE && i < n && tk_token_bytes(t->tok, ids[i], &b, &bl) == TK_OK)
            i++;
        tk_bytes_free(&out);
        if (rc == TK_ERR_RANGE && i < n) {
            char tx[16];
            snprintf(tx, sizeof tx, "%u", ids[i]);
            int unused = ids[i] < tk_vocab_size(t->tok);
            PyMem_Free(ids);
            return raise_bad_id(tx, i, t->tok, unused);
        }
        PyMem_Free(ids);
        return raise_tk(rc, "decode");
    }
    PyMem_Free(ids);
    PyObject *b = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    tk_bytes_free(&out);
    return b;
}

static PyObject *tok_token_bytes(TokObj *t, PyObject *arg)
{
    if (!tok_ready(t))
        return NULL;
    PyObject *ix = PyNumber_Index(arg);
    if (!ix) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "token id: an integer, not %.80s", Py_TYPE(arg)->tp_name);
        }
        return NULL;
    }
    int overflow = 0;
    long long id = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (id == -1 && !overflow && PyErr_Occurred()) {
        Py_DECREF(ix);
        return NULL;
    }
    const uint8_t *b;
    size_t n;
    if (overflow || id < 0 || id > (long long)UINT32_MAX || tk_token_bytes(t->tok, (uint32_t)id, &b, &n) != TK_OK) {
        char tx[96];
        int_text(ix, tx, sizeof tx);
        Py_DECREF(ix);
        uint32_t nv = tk_vocab_size(t->tok);
        PyErr_Format(PyExc_KeyError, "token id %s is not in the vocabulary (ids 0..%u%s)", tx, nv - 1,
                     !overflow && id >= 0 && id < (long long)nv ? "; this one is unused" : "");
        return NULL;
    }
    Py_DECREF(ix);
    return PyBytes_FromStringAndSize((const char *)b, (Py_ssize_t)n);
}

static PyObject *tok_rank_of(TokObj *t, PyObject *arg)
{
    if (!tok_ready(t))
        return NULL;
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(arg, &p, &n))
        return NULL;
    return PyLong_FromLongLong((long long)tk_rank_of(t->tok, (const uint8_t *)p, (size_t)n));
}

/* Bytes of every mergeable token (specials excluded), sorted like tiktoken's
 * token_byte_values. */
static PyObject *tok_token_byte_values(TokObj *t, PyObject *unused)
{
    (void)unused;
    if (!tok_ready(t))
        return NULL;
    uint32_t nv = tk_vocab_size(t->tok);
    size_t ns = tk_n_specials(t->tok);
    const tk_special *sp = tk_specials(t->tok);
    PyObject *l = PyList_New(0);
    for (uint32_t id = 0; l && id < nv; id++) {
        int special = 0;
        for (size_t k = 0; k < ns; k++)
            special |= sp[k].id == id;
        const uint8_t *b;
        size_t n;
        if (special || tk_token_bytes(t->tok, id, &b, &n) != TK_OK)
            continue;
        PyObject *o = PyBytes_FromStringAndSize((const char *)b, (Py_ssize_t)n);
        if (!o || PyList_Append(l, o)) {
            Py_XDECREF(o);
            Py_CLEAR(l);
            break;
        }
        Py_DECREF(o);
    }
    if (l && PyList_Sort(l)) {
        Py_CLEAR(l);
    }
    return l;
}

static PyObject *tok_get_name(TokObj *t, void *c)
{
    (void)c;
    return tok_ready(t) ? PyUnicode_FromString(tk_name(t->tok)) : NULL;
}
static PyObject *tok_get_n_vocab(TokObj *t, void *c)
{
    (void)c;
    return tok_ready(t) ? PyLong_FromUnsignedLong(tk_vocab_size(t->tok)) : NULL;
}
static PyObject *tok_get_n_ranks(TokObj *t, void *c)
{
    (void)c;
    return tok_ready(t) ? PyLong_FromUnsignedLong(tk_n_ranks(t->tok)) : NULL;
}
static PyObject *tok_get_pattern(TokObj *t, void *c)
{
    (void)c;
    if (!tok_ready(t))
        return NULL;
    const char *p = tk_pattern_name(tk_get_pattern(t->tok));
    if (!p)
        Py_RETURN_NONE;
    return PyUnicode_FromString(p);
}
static PyObject *tok_get_pat_str(TokObj *t, void *c)
{
    (void)c;
    if (!tok_ready(t))
        return NULL;
    const char *p = tk_pattern_regex(tk_get_pattern(t->tok));
    if (!p)
        Py_RETURN_NONE;
    return PyUnicode_FromString(p);
}
static PyObject *tok_get_eot(TokObj *t, void *c)
{
    (void)c;
    if (!tok_ready(t))
        return NULL;
    uint32_t id;
    if (tk_eot_id(t->tok, &id) != TK_OK)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(id);
}
static PyObject *tok_get_specials(TokObj *t, void *c)
{
    (void)c;
    if (!tok_ready(t))
        return NULL;
    PyObject *d = PyDict_New();
    size_t n = tk_n_specials(t->tok);
    const tk_special *sp = tk_specials(t->tok);
    for (size_t i = 0; d && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLong(sp[i].id);
        if (!v || PyDict_SetItemString(d, sp[i].text, v)) {
            Py_XDECREF(v);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(v);
    }
    return d;
}
static PyObject *tok_get_fingerprint(TokObj *t, void *c)
{
    (void)c;
    if (!tok_ready(t))
        return NULL;
    uint8_t fp[32];
    char hex[65];
    tk_fingerprint(t->tok, fp);
    ds_shard_hex(fp, 32, hex);
    return PyUnicode_FromString(hex);
}

static PyMethodDef tok_methods[] = {
    {"encode", FN(tok_encode), METH_VARARGS | METH_KEYWORDS,
     "encode(text, allowed=None) -> list[int]; allowed: None, 'all' or special-token strings"},
    {"encode_ordinary", FN(tok_encode_ordinary), METH_O, "encode_ordinary(text) -> list[int]"},
    {"encode_to_buffer", FN(tok_encode_to_buffer), METH_VARARGS | METH_KEYWORDS,
     "encode_to_buffer(text, allowed=None) -> IdBuffer (uint32)"},
    {"encode_batch", FN(tok_encode_batch), METH_VARARGS | METH_KEYWORDS,
     "encode_batch(texts, num_threads=0, allowed=None, as_buffer=False) -> list[list[int]] or (ids, offsets)"},
    {"count", FN(tok_count), METH_O, "count(text) -> number of tokens"},
    {"decode_bytes", FN(tok_decode_bytes), METH_O, "decode_bytes(ids) -> bytes"},
    {"token_bytes", FN(tok_token_bytes), METH_O, "token_bytes(id) -> bytes"},
    {"rank_of", FN(tok_rank_of), METH_O, "rank_of(bytes) -> rank, or -1"},
    {"token_byte_values", FN(tok_token_byte_values), METH_NOARGS, "sorted bytes of the mergeable tokens"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef tok_getset[] = {
    {"name", (getter)tok_get_name, NULL, "vocabulary name (cl100k_base, ... or custom)", NULL},
    {"n_vocab", (getter)tok_get_n_vocab, NULL, "max id + 1, specials included", NULL},
    {"n_ranks", (getter)tok_get_n_ranks, NULL, "mergeable ranks", NULL},
    {"pattern", (getter)tok_get_pattern, NULL, "pre-tokenizer pattern name", NULL},
    {"pat_str", (getter)tok_get_pat_str, NULL, "pre-tokenizer regex", NULL},
    {"eot", (getter)tok_get_eot, NULL, "<|endoftext|> id or None", NULL},
    {"specials", (getter)tok_get_specials, NULL, "dict of special-token text -> id", NULL},
    {"fingerprint", (getter)tok_get_fingerprint, NULL, "sha256 (hex) over ranks, specials and pattern", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject TokType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mkshards._core.Tokenizer",
    .tp_basicsize = sizeof(TokObj),
    .tp_dealloc = (destructor)tok_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Tokenizer(spec, pattern=None): tk_load(spec) - a path or a vocabulary name",
    .tp_methods = tok_methods,
    .tp_getset = tok_getset,
    .tp_init = (initproc)tok_init,
    .tp_new = PyType_GenericNew,
};

/* ================================================================ ShardSet */
/* Direct row metadata (docs/shard-format.md): fill() reads each row's valid /
 * sidx / starts entries and, for uncompressed shards, its token ids in place
 * from a second read-only mapping of the shard file, and writes llmtrain's
 * layout from them in runs (the segments of the row), instead of having
 * ds_shardset_read expand positions, segments and mask per token first.
 * Every offset is bounds-checked here (a crafted file may carry valid
 * checksums); a shard whose sizes do not add up, or any shard on a
 * big-endian host, goes through ds_shardset_read. */
typedef struct {
    uint64_t first, n_rows; /* rows of the split before this shard; its rows */
    void *map;              /* NULL: read through ds_shardset_read */
    size_t map_len;
    const uint8_t *tok;     /* uncompressed token rows, or NULL (zstd frames) */
    const uint8_t *valid, *sidx, *starts;
    uint64_t n_starts;
    uint32_t dt;
    /* zstd shards: the token section and frames[n_frames + 1] (offsets in it) */
    const uint8_t *zsec, *frames;
    uint64_t zsec_bytes, n_frames;
    uint32_t frame_rows;
} sh_map;

/* The last decoded zstd frame, so that reading the rows of a compressed shard
 * in order decodes each frame once instead of once per row. */
typedef struct {
    pthread_mutex_t mu;
    const sh_map *m; /* NULL: empty */
    uint64_t f;
    uint8_t *buf;
    size_t cap;
} frame_cache;

typedef struct {
    PyObject_HEAD
    ds_shardset *ss;
    ds_shardset_info info;
    int busy; /* reads running with the GIL released: close() must wait for them */
    sh_map *maps[2];
    size_t n_maps[2];
    frame_cache fc;
    int fc_init;
} SSObj;

static uint32_t get32le(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static uint64_t get64le(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void maps_free(SSObj *s)
{
    if (s->fc_init) {
        free(s->fc.buf);
        s->fc.buf = NULL;
        s->fc.cap = 0;
        s->fc.m = NULL;
    }
    for (int sp = 0; sp < 2; sp++) {
        for (size_t k = 0; k < s->n_maps[sp]; k++)
            if (s->maps[sp][k].map)
                munmap(s->maps[sp][k].map, s->maps[sp][k].map_len);
        free(s->maps[sp]);
        s->maps[sp] = NULL;
        s->n_maps[sp] = 0;
    }
}

/* Map one shard when its sections fit the file; leaves m->map NULL otherwise. */
static void map_shard(sh_map *m, const char *path, const ds_shard_header *h)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t N = h->n_rows, S = h->n_starts, L = h->row_len;
    if (N > (1ull << 40) || S > (1ull << 40) || h->tokens_bytes > (1ull << 50) || h->meta_bytes > (1ull << 50))
        return;
    int zstd = (h->flags & DS_SHARD_F_ZSTD) != 0;
    uint64_t F = zstd ? h->n_frames : 0;
    if (F > (1ull << 40) || (zstd && (h->frame_rows == 0 || F != (N + h->frame_rows - 1) / h->frame_rows ||
                                      (uint64_t)h->frame_rows * L * h->dtype_bytes > DS_SHARD_MAX_FRAME_BYTES)))
        return;
    uint64_t meta_need = 4 * N + 4 * (N + 1) + 4 * S + (zstd ? 8 * (F + 1) : 0);
    uint64_t meta_off = DS_SHARD_HEADER_BYTES + h->tokens_bytes;
    if (h->meta_bytes < meta_need || (h->dtype_bytes != 2 && h->dtype_bytes != 4) || L > (1ull << 24) ||
        (!zstd && h->tokens_bytes < N * L * h->dtype_bytes))
        return;
    /* the library opened and checked this file; if a FIFO or device has
     * taken its name since, opening it must not block, nor be mapped */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size >= meta_off + h->meta_bytes)
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return;
    const uint8_t *b = p;
    m->map = p;
    m->map_len = (size_t)st.st_size;
    m->tok = zstd ? NULL : b + DS_SHARD_HEADER_BYTES;
    m->valid = b + meta_off;
    m->sidx = m->valid + 4 * N;
    m->starts = m->sidx + 4 * (N + 1);
    m->n_starts = S;
    m->dt = h->dtype_bytes;
    if (zstd) {
        m->zsec = b + DS_SHARD_HEADER_BYTES;
        m->zsec_bytes = h->tokens_bytes;
        m->frames = m->starts + 4 * S;
        m->n_frames = F;
        m->frame_rows = h->frame_rows;
    }
#else
    (void)m, (void)path, (void)h;
#endif
}

static int maps_open(SSObj *s)
{
    if (!s->fc_init) {
        pthread_mutex_init(&s->fc.mu, NULL);
        s->fc_init = 1;
    }
    for (int sp = 0; sp < 2; sp++) {
        size_t n = ds_shardset_n_shards(s->ss, (ds_split)sp);
        s->maps[sp] = calloc(n ? n : 1, sizeof(sh_map));
        if (!s->maps[sp])
            return -1;
        s->n_maps[sp] = n;
        uint64_t first = 0;
        for (size_t k = 0; k < n; k++) {
            const char *path = NULL;
            const ds_shard *sh = ds_shardset_shard(s->ss, (ds_split)sp, k, &path);
            const ds_shard_header *h = ds_shard_get_header(sh);
            sh_map *m = &s->maps[sp][k];
            m->first = first;
            m->n_rows = h->n_rows;
            first += h->n_rows;
            if (path && h->row_len == s->info.row_len)
                map_shard(m, path, h);
        }
    }
    return 0;
}

/* The shard holding row `row` of split sp (row < the split's rows). */
static const sh_map *map_of(const SSObj *s, int sp, uint64_t row)
{
    size_t lo = 0, hi = s->n_maps[sp];
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s->maps[sp][mid].first <= row)
            lo = mid;
        else
            hi = mid;
    }
    return &s->maps[sp][lo];
}

/* Row r of mapped zstd shard m as u32 ids (L entries) through the frame cache. */
static int zstd_row(SSObj *s, const sh_map *m, uint64_t r, size_t L, uint32_t *out)
{
    if (r >= m->n_rows)
        return DS_ERR_FORMAT;
    uint64_t f = r / m->frame_rows, r0 = f * m->frame_rows;
    size_t rows_in = (size_t)(m->n_rows - r0 < m->frame_rows ? m->n_rows - r0 : m->frame_rows);
    size_t fb = rows_in * L * m->dt;
    int rc = DS_OK;
    pthread_mutex_lock(&s->fc.mu);
    frame_cache *c = &s->fc;
    if (c->m != m || c->f != f) {
        uint64_t o0 = get64le(m->frames + 8 * f), o1 = get64le(m->frames + 8 * (f + 1));
        c->m = NULL;
        if (o0 > o1 || o1 > m->zsec_bytes)
            rc = DS_ERR_FORMAT;
        else if (fb > c->cap) {
            uint8_t *nb = realloc(c->buf, fb);
            if (!nb)
                rc = DS_ERR_NOMEM;
            else {
                c->buf = nb;
                c->cap = fb;
            }
        }
        if (rc == DS_OK) {
            size_t z = ZSTD_decompress(c->buf, fb, m->zsec + o0, (size_t)(o1 - o0));
            if (ZSTD_isError(z) || z != fb)
                rc = DS_ERR_FORMAT;
            else {
                c->m = m;
                c->f = f;
            }
        }
    }
    if (rc == DS_OK) {
        const uint8_t *src = c->buf + (size_t)(r - r0) * L * m->dt;
        if (m->dt == 4)
            memcpy(out, src, L * 4);
        else
            for (size_t j = 0; j < L; j++)
                out[j] = ((const uint16_t *)src)[j];
    }
    pthread_mutex_unlock(&s->fc.mu);
    /* the id checks of ds_shard_read (a crafted frame may carry valid checksums) */
    uint32_t nv = rc == DS_OK ? get32le(m->valid + 4 * r) : 0;
    if (rc == DS_OK && ds_shard_check_ids(out, 4, (uint32_t)L, nv, s->info.vocab_size, s->info.pad_id) != DS_OK)
        rc = DS_ERR_FORMAT;
    return rc;
}

static void ss_dealloc(SSObj *s)
{
    maps_free(s);
    if (s->fc_init)
        pthread_mutex_destroy(&s->fc.mu);
    if (s->ss)
        ds_shardset_close(s->ss);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int ss_init(SSObj *s, PyObject *args, PyObject *kw)
{
    static char *kwl[] = {"dir", "verify", NULL};
    PyObject *dir_o = NULL;
    int verify = 1;
    if (s->ss) {
        PyErr_SetString(PyExc_RuntimeError, "ShardSet is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|p", kwl, PyUnicode_FSConverter, &dir_o, &verify))
        return -1;
    char err[512] = "";
    ds_shardset *ss = NULL;
    int rc;
    const char *dir = PyBytes_AS_STRING(dir_o);
    Py_BEGIN_ALLOW_THREADS
    rc = ds_shardset_open(dir, verify ? DS_SHARD_OPEN_FULL : 0, &ss, err, sizeof err); /* verify: `mkshards verify` */
    Py_END_ALLOW_THREADS
    if (rc != DS_OK || !ss) {
        char msg[800];
        snprintf(msg, sizeof msg, "%s", err[0] ? err : ds_strerror(rc));
        Py_DECREF(dir_o);
        raise_c(rc ? rc : DS_ERR_IO, msg);
        return -1;
    }
    Py_DECREF(dir_o);
    if (s->ss) {
        ds_shardset_close(ss);
        PyErr_SetString(PyExc_RuntimeError, "ShardSet is already open");
        return -1;
    }
    s->ss = ss;
    ds_shardset_get_info(ss, &s->info);
    if (maps_open(s)) /* out of memory: every read goes through ds_shardset_read */
        maps_free(s);
    return 0;
}

static int ss_ready(SSObj *s)
{
    if (!s->ss) {
        PyErr_SetString(PyExc_ValueError, "shard set is closed");
        return 0;
    }
    return 1;
}

static int parse_split(PyObject *o, ds_split *sp)
{
    if (PyUnicode_Check(o)) {
        if (PyUnicode_CompareWithASCIIString(o, "train") == 0) {
            *sp = DS_SPLIT_TRAIN;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(o, "val") == 0) {
            *sp = DS_SPLIT_VAL;
            return 0;
        }
    }
    PyErr_SetString(PyExc_ValueError, "split must be 'train' or 'val'");
    return -1;
}

static PyObject *ss_info(SSObj *s, PyObject *unused)
{
    (void)unused;
    if (!ss_ready(s))
        return NULL;
    const ds_shardset_info *i = &s->info;
    char hex[65];
    ds_shard_hex(i->fingerprint, 32, hex);
    /* framing: bos_id / eos_id, None when the documents have none (-1) */
    PyObject *bos = i->bos_id < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(i->bos_id);
    PyObject *eos = i->eos_id < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(i->eos_id);
    if (!bos || !eos) {
        Py_XDECREF(bos);
        Py_XDECREF(eos);
        return NULL;
    }
    return Py_BuildValue("{s:I,s:I,s:I,s:I,s:N,s:N,s:I,s:s,s:s,s:{s:K,s:K},s:{s:K,s:K},s:{s:n,s:n}}", "row_len",
                         i->row_len, "vocab_size", i->vocab_size, "eot_id", i->eot_id, "pad_id", i->pad_id, "bos_id",
                         bos, "eos_id", eos, "dtype_bytes", i->dtype_bytes, "fingerprint", hex, "tokenizer",
                         i->tokenizer, "rows", "train", (unsigned long long)i->rows[0], "val",
                         (unsigned long long)i->rows[1], "tokens", "train", (unsigned long long)i->tokens[0], "val",
                         (unsigned long long)i->tokens[1], "n_shards", "train", (Py_ssize_t)i->n_shards[0], "val",
                         (Py_ssize_t)i->n_shards[1]);
}

static PyObject *ss_shards(SSObj *s, PyObject *split_o)
{
    ds_split sp;
    if (!ss_ready(s) || parse_split(split_o, &sp))
        return NULL;
    size_t n = ds_shardset_n_shards(s->ss, sp);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; l && k < n; k++) {
        const char *path = NULL;
        const ds_shard *sh = ds_shardset_shard(s->ss, sp, k, &path);
        const ds_shard_header *h = ds_shard_get_header(sh);
        PyObject *d = Py_BuildValue("{s:s,s:K,s:I,s:I,s:I,s:K,s:K,s:O}", "path", path ? path : "", "rows",
                                    (unsigned long long)h->n_rows, "row_len", h->row_len, "dtype_bytes",
                                    h->dtype_bytes, "flags", h->flags, "tokens_offset",
                                    (unsigned long long)DS_SHARD_HEADER_BYTES, "tokens_bytes",
                                    (unsigned long long)h->tokens_bytes, "compressed",
                                    (h->flags & DS_SHARD_F_ZSTD) ? Py_True : Py_False);
        if (!d) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)k, d);
    }
    return l;
}

/* A writable C-contiguous buffer of count items of itemsize bytes (None: no
 * buffer). */
static int out_buffer(PyObject *o, Py_buffer *v, int *have, size_t count, const char *what, int size_a, int size_b)
{
    *have = 0;
    if (o == Py_None)
        return 0;
    if (PyObject_GetBuffer(o, v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS))
        return -1;
    *have = 1;
    if ((v->itemsize != size_a && v->itemsize != size_b) || (size_t)v->len != count * (size_t)v->itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: need a writable buffer of %zu items of %d bytes (got %zd bytes, itemsize %zd)",
                     what, count, size_a, v->len, v->itemsize);
        PyBuffer_Release(v);
        *have = 0;
        return -1;
    }
    return 0;
}

/* Row numbers for read/fill: an int or a C-contiguous buffer of 8-byte ints,
 * each checked against the split's row count. */
typedef struct {
    Py_buffer v;
    int have;
    int64_t one;
    const int64_t *rows;
    size_t n;
} rows_arg;

static void rows_release(rows_arg *r)
{
    if (r->have)
        PyBuffer_Release(&r->v);
    r->have = 0;
}

static int rows_parse(SSObj *s, ds_split sp, PyObject *o, rows_arg *r)
{
    memset(r, 0, sizeof *r);
    if (PyLong_Check(o)) {
        int overflow = 0;
        r->one = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (r->one == -1 && !overflow && PyErr_Occurred())
            return -1;
        if (overflow) { /* beyond int64: out of range, named as given */
            char t[96];
            int_text(o, t, sizeof t);
            PyErr_Format(PyExc_IndexError, "row %s out of range: the %s split has %llu rows", t,
                         sp == DS_SPLIT_VAL ? "val" : "train", (unsigned long long)ds_shardset_rows(s->ss, sp));
            return -1;
        }
        r->rows = &r->one;
        r->n = 1;
    } else {
        if (PyObject_GetBuffer(o, &r->v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS))
            return -1;
        r->have = 1;
        const char *f = r->v.format;
        if (r->v.itemsize != 8 || !f || !f[0] || !strchr("qlQL", f[strlen(f) - 1])) {
            rows_release(r);
            PyErr_SetString(PyExc_TypeError, "rows: an int or a buffer of int64");
            return -1;
        }
        r->rows = r->v.buf;
        r->n = (size_t)(r->v.len / 8);
    }
    uint64_t nrows = ds_shardset_rows(s->ss, sp);
    /* uint64 rows are named as given (2^64 - 1 is not row -1) */
    int uns = r->have && strchr("QL", r->v.format[strlen(r->v.format) - 1]) != NULL;
    for (size_t i = 0; i < r->n; i++)
        if (r->rows[i] < 0 || (uint64_t)r->rows[i] >= nrows) {
            char t[32];
            if (uns)
                snprintf(t, sizeof t, "%llu", (unsigned long long)r->rows[i]);
            else
                snprintf(t, sizeof t, "%lld", (long long)r->rows[i]);
            PyErr_Format(PyExc_IndexError, "row %s out of range: the %s split has %llu rows", t,
                         sp == DS_SPLIT_VAL ? "val" : "train", (unsigned long long)nrows);
            rows_release(r);
            return -1;
        }
    return 0;
}

/* A refused row: MkshardsError with what is wrong, as `mkshards verify` says
 * it ("train row 7: DIR/train-00000.mks: offset 5236: row 7 document start 3
 * invalid"). The reads that go through the library have that reason; the
 * direct paths (fill, the row maker, ShardSet.row over the mapped files)
 * return a status only, so the library is asked to read the row again for
 * it: the same checks, made once more on the error path only. */
static PyObject *raise_row(SSObj *s, ds_split sp, int64_t row, int rc)
{
    const char *split = sp == DS_SPLIT_VAL ? "val" : "train";
    char err[600] = "", msg[800];
    if (rc == DS_ERR_NOMEM)
        return PyErr_NoMemory();
    uint32_t *tok = malloc((size_t)s->info.row_len * 4 + 4);
    int lrc = tok ? ds_shardset_read_msg(s->ss, sp, (uint64_t)row, tok, NULL, NULL, NULL, err, sizeof err)
                  : DS_ERR_NOMEM;
    free(tok);
    if (lrc != DS_OK && err[0]) {
        snprintf(msg, sizeof msg, "%s row %lld: %s", split, (long long)row, err);
        return raise_c(lrc, msg);
    }
    /* the library reads the row: a mapped section of its shard does not
     * hold what the header says (the direct path's own bounds checks) */
    const char *path = "";
    uint64_t first = 0, r = (uint64_t)row;
    for (size_t k = 0; k < ds_shardset_n_shards(s->ss, sp); k++) {
        const ds_shard *sh = ds_shardset_shard(s->ss, sp, k, &path);
        uint64_t nr = ds_shard_get_header(sh)->n_rows;
        if (r < first + nr) {
            r -= first;
            break;
        }
        first += nr;
    }
    snprintf(msg, sizeof msg, "%s row %lld: %s: row %llu of the shard: its row metadata or token section is corrupt",
             split, (long long)row, path ? path : "", (unsigned long long)r);
    return raise_c(rc, msg);
}

/* read(split, rows, tokens, pos_ids, doc_ids, loss_mask): rows = an int or a
 * buffer of int64 row numbers; outputs (any may be None) are writable
 * buffers of len(rows) x row_len items: tokens of 4 (uint32) or 2 bytes
 * (uint16, for 2-byte shard sets), pos/doc of 4 bytes, loss_mask of 1. */
static PyObject *ss_read(SSObj *s, PyObject *args)
{
    PyObject *split_o, *rows_o, *tok_o, *pos_o, *doc_o, *mask_o;
    if (!ss_ready(s) || !PyArg_ParseTuple(args, "OOOOOO", &split_o, &rows_o, &tok_o, &pos_o, &doc_o, &mask_o))
        return NULL;
    ds_split sp;
    rows_arg ra;
    if (parse_split(split_o, &sp) || rows_parse(s, sp, rows_o, &ra))
        return NULL;
    const int64_t *rows = ra.rows;
    size_t n = ra.n, L = s->info.row_len;
    Py_buffer bt, bp, bd, bm;
    int ht = 0, hp = 0, hd = 0, hm = 0;
    PyObject *ret = NULL;
    uint32_t *scratch = NULL;
    if (n && L > SIZE_MAX / 4 / n) {
        PyErr_NoMemory();
        goto out;
    }
    if (out_buffer(tok_o, &bt, &ht, n * L, "tokens", 4, s->info.dtype_bytes == 2 ? 2 : 4) ||
        out_buffer(pos_o, &bp, &hp, n * L, "pos_ids", 4, 4) || out_buffer(doc_o, &bd, &hd, n * L, "doc_ids", 4, 4) ||
        out_buffer(mask_o, &bm, &hm, n * L, "loss_mask", 1, 1))
        goto out;
    int narrow = ht && bt.itemsize == 2;
    if (narrow && !(scratch = malloc(L * 4))) {
        PyErr_NoMemory();
        goto out;
    }
    int rc = DS_OK;
    size_t bad = 0;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n && rc == DS_OK; i++) {
        size_t o = i * L;
        uint32_t *t = ht ? (narrow ? scratch : (uint32_t *)bt.buf + o) : NULL;
        const sh_map *m = t && s->n_maps[sp] ? map_of(s, (int)sp, (uint64_t)rows[i]) : NULL;
        if (m && m->map && !m->tok) { /* zstd: the ids through the frame cache */
            rc = zstd_row(s, m, (uint64_t)rows[i] - m->first, L, t);
            t = NULL;
        }
        if (rc == DS_OK && (t || hp || hd || hm))
            rc = ds_shardset_read(s->ss, sp, (uint64_t)rows[i], t, hp ? (uint32_t *)bp.buf + o : NULL,
                                  hd ? (uint32_t *)bd.buf + o : NULL, hm ? (uint8_t *)bm.buf + o : NULL);
        if (rc == DS_OK && !ht && s->n_maps[sp]) { /* ShardSet.row takes the ids from its memory map: */
            const sh_map *mm = map_of(s, (int)sp, (uint64_t)rows[i]); /* the id checks of ds_shard_read */
            uint64_t rr = (uint64_t)rows[i] - mm->first;
            if (mm->map && mm->tok &&
                (rr >= mm->n_rows || ds_shard_check_ids(mm->tok + rr * L * mm->dt, mm->dt, (uint32_t)L,
                                                         get32le(mm->valid + 4 * rr), s->info.vocab_size,
                                                         s->info.pad_id) != DS_OK))
                rc = DS_ERR_FORMAT;
        }
        if (rc == DS_OK && narrow) {
            uint16_t *d = (uint16_t *)bt.buf + o;
            for (size_t j = 0; j < L; j++)
                d[j] = (uint16_t)scratch[j];
        }
        bad = i;
    }
    Py_END_ALLOW_THREADS
    s->busy--;
    if (rc != DS_OK) {
        raise_row(s, sp, rows[bad], rc);
        goto out;
    }
    ret = Py_None;
    Py_INCREF(ret);
out:
    free(scratch);
    if (ht)
        PyBuffer_Release(&bt);
    if (hp)
        PyBuffer_Release(&bp);
    if (hd)
        PyBuffer_Release(&bd);
    if (hm)
        PyBuffer_Release(&bm);
    rows_release(&ra);
    return ret;
}

/* ---- fill: llmtrain's layout. The int outputs are int64 (wide) or int32;
 * each loop is a plain pass the compiler vectorises. */
typedef struct {
    char *d[5];  /* this row's input_ids, labels, position_ids, doc_ids, loss_mask (NULL: not wanted) */
    int wide[5]; /* 8-byte (1) or 4-byte (0) ints */
    size_t T, L;
    int doc_mask;
    int64_t ignore;
} fill_row_out;

/* dst[j] = src[j], j < n: u16 or u32 ids (dt bytes) into int64 or int32 */
static void put_src(void *dst, int wide, const void *src, int dt, size_t n)
{
    if (dt == 4) {
        const uint32_t *s = src;
        if (wide)
            for (size_t j = 0; j < n; j++)
                ((int64_t *)dst)[j] = (int64_t)s[j];
        else
            for (size_t j = 0; j < n; j++)
                ((int32_t *)dst)[j] = (int32_t)s[j];
    } else {
        const uint16_t *s = src;
        if (wide)
            for (size_t j = 0; j < n; j++)
                ((int64_t *)dst)[j] = (int64_t)s[j];
        else
            for (size_t j = 0; j < n; j++)
                ((int32_t *)dst)[j] = (int32_t)s[j];
    }
}

/* dst[j] = v (step 0) or v + j - from (step 1), from <= j < to */
static void put_run1(void *dst, int wide, size_t from, size_t to, int64_t v, int step)
{
    if (wide) {
        int64_t *d = dst;
        for (size_t j = from; j < to; j++)
            d[j] = step ? (int64_t)(j - from) : v;
    } else {
        int32_t *d = dst;
        for (size_t j = from; j < to; j++)
            d[j] = step ? (int32_t)(j - from) : (int32_t)v;
    }
}

/* One segment [from, to): positions restart, one segment number. */
static void put_run(const fill_row_out *o, size_t from, size_t to, size_t seg)
{
    if (o->d[2])
        put_run1(o->d[2], o->wide[2], from, to, 0, 1);
    if (o->d[3])
        put_run1(o->d[3], o->wide[3], from, to, (int64_t)seg, 0);
}

/* position_ids / doc_ids of a row from its document starts: segments begin
 * at 0, at every start and at valid (padding), as ds_shard_read expands them. */
static int put_segments(const sh_map *m, uint32_t a, uint32_t b, uint32_t nv, const fill_row_out *o)
{
    size_t start = 0, seg = 0, T = o->T;
    uint32_t prev = 0;
    for (uint64_t k = a; k <= b && start < T; k++) {
        size_t x;
        if (k < b) {
            uint32_t st = get32le(m->starts + 4 * k);
            if (st >= nv || (k > a && st <= prev))
                return DS_ERR_FORMAT;
            prev = st;
            if (st == 0)
                continue;
            x = st;
        } else {
            if (nv == 0 || nv >= o->L)
                break;
            x = nv;
        }
        put_run(o, start, x < T ? x : T, seg);
        seg++;
        start = x;
    }
    if (start < T)
        put_run(o, start, T, seg);
    return DS_OK;
}

/* Row r of mapped shard m; tok32: its ids when the shard is compressed (NULL: in place). */
static int fill_direct(const sh_map *m, uint64_t r, const uint32_t *tok32, const fill_row_out *o)
{
    size_t L = o->L, T = o->T;
    if (r >= m->n_rows)
        return DS_ERR_FORMAT;
    uint32_t nv = get32le(m->valid + 4 * r), a = get32le(m->sidx + 4 * r), b = get32le(m->sidx + 4 * (r + 1));
    if (nv > L || a > b || b > m->n_starts)
        return DS_ERR_FORMAT;
    size_t lab_n = nv > 0 ? nv - 1 : 0; /* labels where j + 1 < valid */
    if (lab_n > T)
        lab_n = T;
    if (o->d[0] || o->d[1]) {
        const void *src = tok32 ? (const void *)tok32 : (const void *)(m->tok + r * L * m->dt);
        int dt = tok32 ? 4 : (int)m->dt;
        if (o->d[0])
            put_src(o->d[0], o->wide[0], src, dt, T);
        if (o->d[1]) {
            put_src(o->d[1], o->wide[1], (const uint8_t *)src + dt, dt, lab_n);
            put_run1(o->d[1], o->wide[1], lab_n, T, o->ignore, 0);
        }
    }
    if (o->d[4]) {
        memset(o->d[4], 1, lab_n);
        memset(o->d[4] + lab_n, 0, T - lab_n);
    }
    if (!o->d[2] && !o->d[3])
        return DS_OK;
    if (o->doc_mask)
        return put_segments(m, a, b, nv, o);
    put_run(o, 0, T, 0);
    return DS_OK;
}

/* labels[j] = tok[j+1] where loss_mask[j+1] (j+1 < L), else ignore */
static void put_labels(void *dst, int wide, const uint32_t *tok, const uint8_t *mask, size_t L, size_t T,
                       int64_t ignore)
{
    size_t m_end = T < L - 1 ? T : L - 1;
    if (wide) {
        int64_t *d = dst;
        for (size_t j = 0; j < m_end; j++)
            d[j] = mask[j + 1] ? (int64_t)tok[j + 1] : ignore;
        for (size_t j = m_end; j < T; j++)
            d[j] = ignore;
    } else {
        int32_t *d = dst, ig = (int32_t)ignore;
        for (size_t j = 0; j < m_end; j++)
            d[j] = mask[j + 1] ? (int32_t)tok[j + 1] : ig;
        for (size_t j = m_end; j < T; j++)
            d[j] = ig;
    }
}

/* The same through ds_shardset_read's per-position arrays (scratch: 3 x L
 * u32 + L bytes), for shards that are not mapped. */
static int fill_read(SSObj *s, ds_split sp, uint64_t row, uint32_t *scratch, const fill_row_out *o)
{
    size_t L = o->L, T = o->T;
    uint32_t *tok = scratch, *pos = scratch + L, *doc = scratch + 2 * L;
    uint8_t *mask = (uint8_t *)(scratch + 3 * L);
    int need_tok = o->d[0] || o->d[1], need_mask = o->d[1] || o->d[4];
    int rc = ds_shardset_read(s->ss, sp, row, need_tok ? tok : NULL, o->doc_mask && o->d[2] ? pos : NULL,
                              o->doc_mask && o->d[3] ? doc : NULL, need_mask ? mask : NULL);
    if (rc != DS_OK)
        return rc;
    if (o->d[0])
        put_src(o->d[0], o->wide[0], tok, 4, T);
    if (o->d[1])
        put_labels(o->d[1], o->wide[1], tok, mask, L, T, o->ignore);
    if (o->d[2]) {
        if (o->doc_mask)
            put_src(o->d[2], o->wide[2], pos, 4, T);
        else
            put_run1(o->d[2], o->wide[2], 0, T, 0, 1);
    }
    if (o->d[3]) {
        if (o->doc_mask)
            put_src(o->d[3], o->wide[3], doc, 4, T);
        else
            put_run1(o->d[3], o->wide[3], 0, T, 0, 0);
    }
    if (o->d[4]) {
        size_t m_end = T < L - 1 ? T : L - 1;
        for (size_t j = 0; j < m_end; j++)
            ((uint8_t *)o->d[4])[j] = mask[j + 1] != 0;
        memset(o->d[4] + m_end, 0, T - m_end);
    }
    return DS_OK;
}

/* *scratch (3 x L u32 + L bytes) is allocated on first use: rows of mapped
 * uncompressed shards need none. */
static int fill_row(SSObj *s, ds_split sp, uint64_t row, uint32_t **scratch, const fill_row_out *o)
{
    const sh_map *m = s->n_maps[sp] ? map_of(s, (int)sp, row) : NULL;
    int need_tok = o->d[0] || o->d[1];
    if ((!m || !m->map || (!m->tok && need_tok)) && !*scratch && !(*scratch = malloc(o->L * 13)))
        return DS_ERR_NOMEM;
    if (!m || !m->map)
        return fill_read(s, sp, row, *scratch, o);
    const uint32_t *tok = NULL;
    if (!m->tok && need_tok) { /* zstd: the ids through the frame cache */
        int rc = zstd_row(s, m, row - m->first, o->L, *scratch);
        if (rc != DS_OK)
            return rc;
        tok = *scratch;
    }
    uint64_t r = row - m->first; /* in place: the id checks of ds_shard_read (zstd_row made them) */
    if (m->tok && need_tok &&
        (r >= m->n_rows || ds_shard_check_ids(m->tok + r * o->L * m->dt, m->dt, (uint32_t)o->L,
                                              get32le(m->valid + 4 * r), s->info.vocab_size,
                                              s->info.pad_id) != DS_OK))
        return DS_ERR_FORMAT;
    return fill_direct(m, r, tok, o);
}

/* fill(split, rows, T, doc_mask, ignore_index, input_ids, labels, position_ids, doc_ids, loss_mask):
 * llmtrain's micro-batch layout (train/loader.c, fill_one) for rows (an int
 * or a buffer of int64), the GIL released. The int outputs hold len(rows) x T
 * items of 8 or 4 bytes (any may be None), loss_mask 1 byte:
 *   input_ids[j] = tokens[j]
 *   labels[j]    = tokens[j+1] when j+1 < row_len and loss_mask[j+1], else ignore_index
 *   loss_mask[j] = labels[j] carries loss
 *   doc_mask: position_ids / doc_ids are the row's pos_ids / doc_ids (they
 *   restart where a document starts); without, position j and segment 0. */
static PyObject *ss_fill(SSObj *s, PyObject *args)
{
    PyObject *split_o, *rows_o, *outs_o[5];
    int doc_mask;
    num_arg Ta = {"seq_len", 1, DS_SHARD_MAX_ROW_LEN, 0, 0, 0, 0};
    i64_arg ig = {"ignore_index", 0};
    if (!ss_ready(s) || !PyArg_ParseTuple(args, "OOO&pO&OOOOO", &split_o, &rows_o, conv_num, &Ta, &doc_mask, conv_i64,
                                          &ig, &outs_o[0], &outs_o[1], &outs_o[2], &outs_o[3], &outs_o[4]))
        return NULL;
    ds_split sp;
    if (parse_split(split_o, &sp))
        return NULL;
    size_t L = s->info.row_len;
    if (Ta.v > L) {
        PyErr_Format(PyExc_ValueError, "seq_len %llu: must be 1..%zu (the rows' length)", Ta.v, L);
        return NULL;
    }
    int T = (int)Ta.v;
    long long ignore = ig.v;
    rows_arg ra;
    if (rows_parse(s, sp, rows_o, &ra))
        return NULL;
    static const char *names[5] = {"input_ids", "labels", "position_ids", "doc_ids", "loss_mask"};
    Py_buffer ob[5];
    int have[5] = {0, 0, 0, 0, 0};
    PyObject *ret = NULL;
    uint32_t *scratch = NULL;
    size_t n = ra.n, Tz = (size_t)T;
    if (n > SIZE_MAX / 8 / Tz) {
        PyErr_NoMemory();
        goto out;
    }
    for (int k = 0; k < 5; k++)
        if (out_buffer(outs_o[k], &ob[k], &have[k], n * Tz, names[k], k == 4 ? 1 : 8, k == 4 ? 1 : 4))
            goto out;
    fill_row_out o = {.T = Tz, .L = L, .doc_mask = doc_mask, .ignore = (int64_t)ignore};
    for (int k = 0; k < 5; k++)
        o.wide[k] = have[k] && ob[k].itemsize == 8;
    if (have[1] && !o.wide[1] && (ignore < INT32_MIN || ignore > INT32_MAX)) { /* it would be cut to 32 bits */
        PyErr_Format(PyExc_ValueError, "ignore_index %lld: int32 labels hold -2^31..2^31-1", ignore);
        goto out;
    }
    int rc = DS_OK;
    size_t r = 0;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS
    for (; r < n; r++) {
        for (int k = 0; k < 5; k++)
            o.d[k] = have[k] ? (char *)ob[k].buf + r * Tz * (size_t)ob[k].itemsize : NULL;
        if ((rc = fill_row(s, sp, (uint64_t)ra.rows[r], &scratch, &o)) != DS_OK)
            break;
    }
    Py_END_ALLOW_THREADS
    s->busy--;
    if (rc != DS_OK) {
        raise_row(s, sp, ra.rows[r], rc);
        goto out;
    }
    ret = Py_None;
    Py_INCREF(ret);
out:
    free(scratch);
    for (int k = 0; k < 5; k++)
        if (have[k])
            PyBuffer_Release(&ob[k]);
    rows_release(&ra);
    return ret;
}

/* ---- RowMaker: ShardDataset[i] with every field, in one C call. Creating
 * the five tensors is most of the cost of a row (torch.from_numpy is ~0.7 us
 * each), so the rest is kept out of the interpreter: the arrays come from
 * the given numpy.empty, the tensors from the given torch.from_numpy, the
 * dict is built here. */
typedef struct {
    PyObject_HEAD
    SSObj *ss;
    ds_split sp;
    long T;
    int doc_mask;
    int64_t ignore;
    PyObject *len_T, *i64, *boolean, *empty, *to_tensor, *keys[5];
} RMObj;

static void rm_dealloc(RMObj *r)
{
    Py_XDECREF(r->ss);
    Py_XDECREF(r->len_T);
    Py_XDECREF(r->i64);
    Py_XDECREF(r->boolean);
    Py_XDECREF(r->empty);
    Py_XDECREF(r->to_tensor);
    for (int k = 0; k < 5; k++)
        Py_XDECREF(r->keys[k]);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* row(i): dict of the five (T,) tensors of row i (negative i counts from the end). */
static PyObject *rm_row(RMObj *r, PyObject *idx)
{
    SSObj *s = r->ss;
    if (!ss_ready(s))
        return NULL;
    int overflow = 0;
    long long i = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (i == -1 && !overflow && PyErr_Occurred()) {
        PyErr_Clear();
        PyObject *ix = PyNumber_Index(idx); /* numpy integers */
        if (!ix)
            return NULL;
        i = PyLong_AsLongLongAndOverflow(ix, &overflow);
        Py_DECREF(ix);
        if (i == -1 && !overflow && PyErr_Occurred())
            return NULL;
    }
    long long n = (long long)s->info.rows[r->sp];
    long long row = i < 0 ? i + n : i;
    if (overflow || row < 0 || row >= n) {
        char t[96] = "";
        PyObject *ix = PyNumber_Index(idx);
        if (ix) {
            int_text(ix, t, sizeof t);
            Py_DECREF(ix);
        }
        PyErr_Clear();
        PyErr_Format(PyExc_IndexError, "row %s: the %s split has %lld rows", t,
                     r->sp == DS_SPLIT_TRAIN ? "train" : "val", n);
        return NULL;
    }
    PyObject *arr[5] = {NULL}, *ret = NULL;
    Py_buffer b[5];
    int have = 0;
    for (int k = 0; k < 5; k++) {
        PyObject *a[2] = {r->len_T, k < 4 ? r->i64 : r->boolean};
        if (!(arr[k] = PyObject_Vectorcall(r->empty, a, 2, NULL)))
            goto out;
    }
    for (; have < 5; have++)
        if (out_buffer(arr[have], &b[have], &(int){0}, (size_t)r->T, "row", have < 4 ? 8 : 1, have < 4 ? 8 : 1))
            goto out;
    fill_row_out o = {.T = (size_t)r->T, .L = s->info.row_len, .doc_mask = r->doc_mask, .ignore = r->ignore,
                      .wide = {1, 1, 1, 1, 1}};
    for (int k = 0; k < 5; k++)
        o.d[k] = b[k].buf;
    uint32_t *scratch = NULL;
    int rc;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS
    rc = fill_row(s, r->sp, (uint64_t)row, &scratch, &o);
    Py_END_ALLOW_THREADS
    s->busy--;
    free(scratch);
    if (rc != DS_OK) {
        raise_row(s, r->sp, row, rc);
        goto out;
    }
    PyObject *d = PyDict_New();
    for (int k = 0; d && k < 5; k++) {
        PyObject *tensor = PyObject_Vectorcall(r->to_tensor, &arr[k], 1, NULL);
        if (!tensor || PyDict_SetItem(d, r->keys[k], tensor)) {
            Py_XDECREF(tensor);
            Py_CLEAR(d);
            break;
        }
        Py_DECREF(tensor);
    }
    ret = d;
out:
    for (int k = 0; k < have; k++)
        PyBuffer_Release(&b[k]);
    for (int k = 0; k < 5; k++)
        Py_XDECREF(arr[k]);
    return ret;
}

static PyMethodDef rm_methods[] = {
    {"row", (PyCFunction)rm_row, METH_O, "row(i) -> dict of the row's five tensors"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RMType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mkshards._core.RowMaker",
    .tp_basicsize = sizeof(RMObj),
    .tp_dealloc = (destructor)rm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ShardSet.row_maker(...): ShardDataset's per-row reader",
    .tp_methods = rm_methods,
};

/* row_maker(split, T, doc_mask, ignore_index, empty, int64, bool, to_tensor, keys): a RowMaker. */
static PyObject *ss_row_maker(SSObj *s, PyObject *args)
{
    PyObject *split_o, *empty, *i64, *boolean, *to_tensor, *keys;
    int doc_mask;
    num_arg Ta = {"seq_len", 1, DS_SHARD_MAX_ROW_LEN, 0, 0, 0, 0};
    i64_arg ig = {"ignore_index", 0};
    if (!ss_ready(s) || !PyArg_ParseTuple(args, "OO&pO&OOOOO", &split_o, conv_num, &Ta, &doc_mask, conv_i64, &ig,
                                          &empty, &i64, &boolean, &to_tensor, &keys))
        return NULL;
    ds_split sp;
    if (parse_split(split_o, &sp))
        return NULL;
    if (Ta.v > s->info.row_len) {
        PyErr_Format(PyExc_ValueError, "seq_len %llu: must be 1..%u (the rows' length)", Ta.v, s->info.row_len);
        return NULL;
    }
    long T = (long)Ta.v;
    long long ignore = ig.v;
    if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) != 5 || !PyCallable_Check(empty) || !PyCallable_Check(to_tensor)) {
        PyErr_SetString(PyExc_TypeError, "row_maker: keys must be a tuple of 5 names, empty and to_tensor callables");
        return NULL;
    }
    RMObj *r = PyObject_New(RMObj, &RMType);
    if (!r)
        return NULL;
    r->ss = (SSObj *)Py_NewRef(s);
    r->sp = sp;
    r->T = T;
    r->doc_mask = doc_mask;
    r->ignore = (int64_t)ignore;
    r->len_T = PyLong_FromLong(T);
    r->i64 = Py_NewRef(i64);
    r->boolean = Py_NewRef(boolean);
    r->empty = Py_NewRef(empty);
    r->to_tensor = Py_NewRef(to_tensor);
    for (int k = 0; k < 5; k++)
        r->keys[k] = Py_NewRef(PyTuple_GET_ITEM(keys, k));
    if (!r->len_T) {
        Py_DECREF(r);
        return NULL;
    }
    return (PyObject *)r;
}

static PyObject *ss_close(SSObj *s, PyObject *unused)
{
    (void)unused;
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ShardSet.close: another thread is reading from it");
        return NULL;
    }
    maps_free(s);
    if (s->ss)
        ds_shardset_close(s->ss);
    s->ss = NULL;
    Py_RETURN_NONE;
}

static PyMethodDef ss_methods[] = {
    {"info", FN(ss_info), METH_NOARGS, "dict: row_len, vocab_size, eot_id, pad_id, bos_id, eos_id, dtype_bytes, fingerprint, ..."},
    {"shards", FN(ss_shards), METH_O, "shards(split) -> list of dicts (path, rows, dtype_bytes, compressed, ...)"},
    {"read", FN(ss_read), METH_VARARGS, "read(split, rows, tokens, pos_ids, doc_ids, loss_mask)"},
    {"row_maker", FN(ss_row_maker), METH_VARARGS,
     "row_maker(split, T, doc_mask, ignore_index, empty, int64, bool, to_tensor, keys): ShardDataset's per-row reader"},
    {"fill", FN(ss_fill), METH_VARARGS,
     "fill(split, rows, T, doc_mask, ignore_index, input_ids, labels, position_ids, doc_ids, loss_mask): "
     "llmtrain's batch layout"},
    {"close", FN(ss_close), METH_NOARGS, "release the mappings"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SSType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mkshards._core.ShardSet",
    .tp_basicsize = sizeof(SSObj),
    .tp_dealloc = (destructor)ss_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "ShardSet(dir, verify=True): ds_shardset_open",
    .tp_methods = ss_methods,
    .tp_init = (initproc)ss_init,
    .tp_new = PyType_GenericNew,
};

/* ================================================================ row order */
/* llmtrain's row order (train/loader.c): the row visited at loader position p
 * is a per-epoch keyed permutation of 0..n-1 (4-round Feistel network over
 * the smallest even bit width >= 2 that holds n, cycle-walking values >= n),
 * keyed by mix64(seed * golden + epoch + 1). */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t row_at(uint64_t p, uint64_t n, uint64_t seed, int shuffle)
{
    if (n == 0)
        return 0;
    uint64_t epoch = p / n, i = p % n;
    if (!shuffle || n == 1)
        return i;
    int bits = 2;
    while (bits < 64 && (1ULL << bits) < n)
        bits++;
    bits += bits & 1;
    int half = bits / 2;
    uint64_t hmask = half >= 64 ? ~0ULL : (1ULL << half) - 1;
    uint64_t key = mix64(seed * 0x9e3779b97f4a7c15ULL + epoch + 1);
    uint64_t x = i;
    do {
        uint64_t l = x >> half, r = x & hmask;
        for (uint64_t k = 0; k < 4; k++) {
            uint64_t f = mix64(r ^ (key + k * 0x632be59bd9b4e019ULL)) & hmask;
            uint64_t t = l ^ f;
            l = r;
            r = t;
        }
        x = (l << half) | r;
    } while (x >= n);
    return x;
}

static PyObject *py_row_order(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwl[] = {"start", "count", "n", "seed", "shuffle", NULL};
    num_arg sa = {"start", 0, UINT64_MAX, 0, 0, 0, 0}, ca = {"count", 0, 1ULL << 40, 0, 0, 0, 0};
    num_arg na = {"n_rows", 1, UINT64_MAX, 0, 0, 0, 0}, se = {"seed", 0, UINT64_MAX, 0, 0, 0, 0}; /* llmtrain --seed */
    int shuffle = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&O&O&|p", kwl, conv_num, &sa, conv_num, &ca, conv_num, &na,
                                     conv_num, &se, &shuffle))
        return NULL;
    unsigned long long start = sa.v, count = ca.v, n = na.v, seed = se.v;
    if (count && start > UINT64_MAX - (count - 1)) { /* the last position must not wrap to 0 */
        PyErr_Format(PyExc_ValueError, "start %llu + count %llu: beyond the last loader position 2^64 - 1", start,
                     count);
        return NULL;
    }
    uint64_t *out = malloc(count ? count * 8 : 8);
    if (!out)
        return PyErr_NoMemory();
    Py_BEGIN_ALLOW_THREADS
    for (uint64_t i = 0; i < count; i++)
        out[i] = row_at(start + i, n, seed, shuffle);
    Py_END_ALLOW_THREADS
    return idbuf_new(out, (Py_ssize_t)count, 8, "Q");
}

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
static int bg_report(bg_job *j, PyObject *(*make)(const void *ev), const void *ev)
{
    if (__atomic_load_n(&j->cancel, __ATOMIC_RELAXED))
        return 1;
    if (!j->cb)
        return 0;
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
        if (!j->exc_t)
            PyErr_Fetch(&j->exc_t, &j->exc_v, &j->exc_tb);
        else
            PyErr_Clear();
        stop = 1;
    }
    PyGILState_Release(g);
    if (stop)
        __atomic_store_n(&j->cancel, 1, __ATOMIC_RELAXED);
    return stop;
}

static void *bg_thread(void *arg)
{
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
static int bg_wait(bg_job *j)
{
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
static int bg_run(bg_job *j)
{
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
static const char **fs_paths(PyObject *seq, PyObject **keep, size_t *n_ret)
{
    *keep = NULL;
    PyObject *tup = PySequence_Tuple(seq);
    if (!tup)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(tup);
    PyObject *paths = PyList_New(n);
    const char **out = PyMem_Calloc(n ? (size_t)n : 1, sizeof *out);
    if (!paths || !out) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(tup, i), &b))
            goto fail;
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
} analyze_job;

static PyObject *analyze_event_dict(const void *p)
{
    const ds_analyze_event *ev = p;
    return Py_BuildValue("{s:s,s:K,s:K,s:d,s:O}", "stage", "progress", "records", (unsigned long long)ev->records,
                         "bytes_in", (unsigned long long)ev->bytes_in, "seconds", ev->seconds, "last",
                         ev->last ? Py_True : Py_False);
}

static int analyze_cb(const ds_analyze_event *ev, void *user)
{
    return bg_report(user, analyze_event_dict, ev);
}

static int analyze_run(bg_job *b)
{
    analyze_job *j = (analyze_job *)b;
    return ds_analyze(j->inputs, j->n_inputs, &j->ro, &j->ao, j->lint ? &j->rep : NULL, j->hist ? &j->h : NULL,
                      j->err, sizeof j->err);
}

/* The reports as the CLI's --json text, the chart as --svg. */
static PyObject *analyze_result(analyze_job *j, PyObject *svg_b)
{
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

static PyObject *py_analyze(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwl[] = {"inputs", "tokenizer", "lint", "hist", "seq_len", "max_doc_bytes", "max_examples",
                          "threads", "field", "doc_sep", "max_record_bytes", "cut_overlong", "outlier_factor",
                          "long_run_bytes", "long_line_bytes", "min_bytes_per_token", "svg", "callback", NULL};
    PyObject *inputs_o, *tok_o = Py_None, *svg_o = Py_None, *cb = Py_None;
    int lint = 1, hist = 0, doc_sep = 0, cut = 0;
    /* the ranges of mkshards lint / hist (tools/analyze_cli.c); 0 or None: the default */
    num_arg seq_len = {"seq_len", 1, 1ULL << 30, 1, 0, 0, 0}, max_doc_bytes = {"max_doc_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg max_examples = {"max_examples", 0, 100000, 0, 1, 0, 0}, threads = {"threads", 1, 256, 2, 0, 0, 0};
    num_arg max_record = {"max_record_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg long_run = {"long_run_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg long_line = {"long_line_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    double outlier = 0, min_bpt = 0;
    const char *field = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OppO&O&O&O&ziO&pdO&O&dOO", kwl, &inputs_o, &tok_o, &lint, &hist,
                                     conv_num, &seq_len, conv_num, &max_doc_bytes, conv_num, &max_examples, conv_num,
                                     &threads, &field, &doc_sep, conv_num, &max_record, &cut, &outlier, conv_num,
                                     &long_run, conv_num, &long_line, &min_bpt, &svg_o, &cb))
        return NULL;
    if (check_real("outlier_factor", outlier, 1, 1, 1e12, 0, 1) ||
        check_real("min_bytes_per_token", min_bpt, 0, 1, 1e6, 0, 1))
        return NULL;
    if (tok_o != Py_None && (!PyObject_TypeCheck(tok_o, &TokType) || !((TokObj *)tok_o)->tok))
        return PyErr_Format(PyExc_TypeError, "tokenizer: a loaded mkshards Tokenizer or None");
    if (hist && tok_o == Py_None)
        return PyErr_Format(PyExc_ValueError, "hist needs a tokenizer");
    if (doc_sep < 0 || doc_sep > 2)
        return PyErr_Format(PyExc_ValueError, "doc_sep: 'file', 'line' or 'blank-line'");
    if (cb != Py_None && !PyCallable_Check(cb))
        return PyErr_Format(PyExc_TypeError, "progress: a callable or None");
    analyze_job *j = PyMem_Calloc(1, sizeof *j);
    PyObject *paths = NULL, *svg_b = NULL, *ret = NULL;
    if (!j)
        return PyErr_NoMemory();
    if (!(j->inputs = fs_paths(inputs_o, &paths, &j->n_inputs)))
        goto out;
    if (!j->n_inputs) {
        PyErr_SetString(PyExc_ValueError, "no inputs given");
        goto out;
    }
    if (svg_o != Py_None && !PyUnicode_FSConverter(svg_o, &svg_b))
        goto out;
    if (svg_b) { /* before the (long) analysis: the CLI's refusals, through the same library check */
        ds_read_paths rp = {.inputs = j->inputs, .n_inputs = j->n_inputs,
                            .tokenizer = tok_o == Py_None || !((TokObj *)tok_o)->spec
                                             ? NULL
                                             : PyBytes_AS_STRING(((TokObj *)tok_o)->spec)};
        int crc = ds_check_output("svg", PyBytes_AS_STRING(svg_b), &rp, j->err, sizeof j->err);
        if (crc != DS_OK) {
            raise_c(crc, j->err);
            goto out;
        }
    }
    ds_reader_opts_init(&j->ro);
    ds_analyze_opts_init(&j->ao);
    j->ro.field = field;
    j->ro.doc_sep = (ds_doc_sep)doc_sep;
    if (max_record.v)
        j->ro.max_record_bytes = (size_t)max_record.v;
    if (cut)
        j->ro.overlong = DS_OVERLONG_CUT;
    ds_analyze_opts *ao = &j->ao;
    ao->tok = tok_o == Py_None ? NULL : (const struct tk_tokenizer *)((TokObj *)tok_o)->tok;
    ao->seq_len = seq_len.v;
    ao->max_doc_bytes = max_doc_bytes.v;
    if (max_examples.given) {
        ao->max_examples = (size_t)max_examples.v;
        ao->set_examples = 1;
    }
    ao->threads = (int)threads.v;
    if (outlier > 0)
        ao->outlier_factor = outlier;
    if (long_run.v)
        ao->long_run_bytes = long_run.v;
    if (long_line.v)
        ao->long_line_bytes = long_line.v;
    if (min_bpt > 0)
        ao->min_bytes_per_token = min_bpt;
    ao->callback = analyze_cb;
    ao->user = j;
    j->lint = lint;
    j->hist = hist;
    j->bg.run = analyze_run;
    j->bg.cb = cb == Py_None ? NULL : cb;
    if (bg_run(&j->bg))
        goto out;
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
} build_job;

static const char *build_ev_name(ds_build_event_kind k)
{
    switch (k) {
    case DS_BUILD_EV_PROGRESS: return "progress";
    case DS_BUILD_EV_REBUILD: return "rebuild";
    case DS_BUILD_EV_RESUME: return "resume";
    case DS_BUILD_EV_CKPT_FAILED: return "checkpoint_failed";
    }
    return "event";
}

static PyObject *build_event_dict(const void *p)
{
    const ds_build_event *ev = p;
    return Py_BuildValue("{s:s,s:K,s:K,s:K,s:K,s:d,s:O,s:n,s:s}", "event", build_ev_name(ev->kind), "records",
                         (unsigned long long)ev->records, "bytes_in", (unsigned long long)ev->bytes_in, "tokens",
                         (unsigned long long)ev->tokens, "est_bytes", (unsigned long long)ev->est_bytes, "seconds",
                         ev->seconds, "last", ev->last ? Py_True : Py_False, "shards", (Py_ssize_t)ev->shards,
                         "detail", ev->detail ? ev->detail : "");
}

static int build_cb(const ds_build_event *ev, void *user)
{
    return bg_report(user, build_event_dict, ev);
}

static int build_run(bg_job *b)
{
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
} build_args;

/* Parse and check; a->out is a new reference (bytes) on success. */
static int build_parse(PyObject *args, PyObject *kw, build_args *a)
{
    static char *kwl[] = {"inputs", "out", "tokenizer", "tokenizer_spec", "seq_len", "pack", "over_long",
                          "bfd_window", "val_fraction", "seed", "shuffle", "shard_tokens", "zstd_level",
                          "frame_rows", "field", "doc_sep", "part_k", "part_n", "threads", "batch_bytes", "force",
                          "callback", "checkpoint_seconds", NULL};
    memset(a, 0, sizeof *a);
    a->cb = Py_None;
    a->shuffle = 1;
    /* the ranges of mkshards build's options (tools/cmd_build.c); 0: the default */
    num_arg seq_len = {"seq_len", 1, 1ULL << 24, 0, 0, 0, 0}, bfd_window = {"bfd_window", 1, 1ULL << 24, 1, 0, 0, 0};
    num_arg seed = {"seed", 0, UINT64_MAX, 0, 0, 0, 0}, shard_tokens = {"shard_tokens", 1, 1ULL << 40, 1, 0, 0, 0};
    num_arg zstd_level = {"zstd", 0, 22, 0, 0, 0, 0}, frame_rows = {"frame_rows", 1, 1ULL << 20, 1, 0, 0, 0};
    num_arg part_k = {"part K", 1, DS_BUILD_MAX_PARTS, 0, 0, 0, 1}, part_n = {"part N", 1, DS_BUILD_MAX_PARTS, 0, 0, 0, 1};
    num_arg threads = {"threads", 1, 256, 2, 0, 0, 0}, batch_bytes = {"batch_bytes", 1, 1ULL << 40, 1, 0, 0, 0};
    PyObject *ckpt_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&Os|O&iiO&dO&pO&O&O&ziO&O&O&O&pOO", kwl, &a->inputs,
                                     PyUnicode_FSConverter, &a->out, &a->tok, &a->spec, conv_num, &seq_len, &a->pack,
                                     &a->over_long, conv_num, &bfd_window, &a->val_fraction, conv_num, &seed,
                                     &a->shuffle, conv_num, &shard_tokens, conv_num, &zstd_level, conv_num, &frame_rows,
                                     &a->field, &a->doc_sep, conv_num, &part_k, conv_num, &part_n, conv_num, &threads,
                                     conv_num, &batch_bytes, &a->force, &a->cb, &ckpt_o))
        return -1;
    a->ckpt_s = -1; /* None: ds_build's default */
    if (ckpt_o != Py_None && ((a->ckpt_s = PyFloat_AsDouble(ckpt_o)) == -1 && PyErr_Occurred()))
        goto fail;
    if (!seq_len.given) {
        PyErr_SetString(PyExc_TypeError, "build: seq_len is required (tokens per row, 1..2^24)");
        goto fail;
    }
    if (part_k.v > part_n.v) {
        PyErr_Format(PyExc_ValueError, "part %llu/%llu: K must be 1..N (N at most %u)", part_k.v, part_n.v,
                     (unsigned)DS_BUILD_MAX_PARTS);
        goto fail;
    }
    if (check_real("val_fraction", a->val_fraction, 0, 0, 1, 1, 0) ||
        (ckpt_o != Py_None && check_real("checkpoint_seconds", a->ckpt_s, 0, 0, 1e9, 1, 0)))
        goto fail;
    a->seq_len = (unsigned)seq_len.v;
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
    PyObject *type = PyExc_TypeError;
    if (!PyObject_TypeCheck(a->tok, &TokType) || !((TokObj *)a->tok)->tok)
        bad = "tokenizer: a loaded mkshards Tokenizer";
    else if (a->cb != Py_None && !PyCallable_Check(a->cb))
        bad = "progress: a callable or None";
    else if (a->pack < 0 || a->pack > 2 || a->over_long < 0 || a->over_long > 2 || a->doc_sep < 0 || a->doc_sep > 2) {
        bad = "pack / over_long / doc_sep out of range";
        type = PyExc_ValueError;
    }
    if (bad) {
        PyErr_SetString(type, bad);
        goto fail;
    }
    return 0;
fail:
    Py_CLEAR(a->out);
    return -1;
}

/* ds_build_opts from the parsed arguments (0 = the CLI's default). */
static void build_set_opts(build_job *j, const build_args *a, const char **inputs, size_t n)
{
    ds_build_opts *o = &j->o;
    ds_build_opts_init(o);
    o->tok = (const struct tk_tokenizer *)((TokObj *)a->tok)->tok;
    o->tokenizer_spec = a->spec;
    o->inputs = inputs;
    o->n_inputs = n;
    o->out_dir = PyBytes_AS_STRING(a->out);
    o->seq_len = a->seq_len;
    o->pack = (ds_pack)a->pack;
    o->over_long = (ds_over_long)a->over_long;
    if (a->bfd_window)
        o->bfd_window = a->bfd_window;
    o->val_fraction = a->val_fraction;
    o->seed = a->seed;
    o->shuffle = a->shuffle;
    if (a->shard_tokens)
        o->shard_tokens = a->shard_tokens;
    o->zstd_level = a->zstd_level;
    if (a->frame_rows)
        o->frame_rows = a->frame_rows;
    o->field = a->field;
    o->doc_sep = (ds_doc_sep)a->doc_sep;
    o->part_k = a->part_k;
    o->part_n = a->part_n;
    o->threads = a->threads > 0 ? a->threads : n_cpus();
    if (a->batch_bytes)
        o->batch_bytes = a->batch_bytes;
    o->force = a->force;
    if (a->ckpt_s >= 0)
        o->checkpoint_seconds = a->ckpt_s;
    o->callback = build_cb;
    o->user = j;
}

static PyObject *py_build(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    build_args a;
    if (build_parse(args, kw, &a))
        return NULL;
    PyObject *paths = NULL, *ret = NULL;
    size_t n = 0;
    const char **inputs = fs_paths(a.inputs, &paths, &n);
    build_job *j = inputs ? PyMem_Calloc(1, sizeof *j) : NULL;
    if (!j) {
        if (inputs)
            PyErr_NoMemory();
        goto out;
    }
    build_set_opts(j, &a, inputs, n);
    j->bg.run = build_run;
    j->bg.cb = a.cb == Py_None ? NULL : a.cb;
    if (bg_run(&j->bg))
        goto out;
    if (j->bg.rc != DS_OK) {
        raise_c(j->bg.rc, j->err[0] ? j->err : ds_strerror(j->bg.rc));
        goto out;
    }
    ret = Py_BuildValue("{s:O,s:n,s:O,s:n,s:d}", "up_to_date", j->res.up_to_date ? Py_True : Py_False, "n_checked",
                        (Py_ssize_t)j->res.n_checked, "resumed", j->res.resumed ? Py_True : Py_False, "n_shards",
                        (Py_ssize_t)j->res.n_shards, "seconds", j->res.seconds);
out:
    PyMem_Free(j);
    PyMem_Free(inputs);
    Py_XDECREF(paths);
    Py_XDECREF(a.out);
    return ret;
}

/* ================================================================ module */
static PyObject *py_cpu_count(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLong(n_cpus());
}

static PyMethodDef mod_methods[] = {
    {"row_order", FN(py_row_order), METH_VARARGS | METH_KEYWORDS,
     "row_order(start, count, n, seed, shuffle=True) -> IdBuffer (uint64): llmtrain's rows at positions "
     "start..start+count-1"},
    {"analyze", FN(py_analyze), METH_VARARGS | METH_KEYWORDS,
     "analyze(inputs, tokenizer=None, lint=True, hist=False, ...) -> (lint_json, hist_json, exit_code, docs)"},
    {"cpu_count", FN(py_cpu_count), METH_NOARGS, "online CPUs"},
    {"build", FN(py_build), METH_VARARGS | METH_KEYWORDS,
     "build(inputs, out, tokenizer, tokenizer_spec, seq_len, ...): ds_build on a worker thread; Ctrl-C cancels"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod_def = {PyModuleDef_HEAD_INIT, "_core", "C core of mkshards", -1, mod_methods,
                                     NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void)
{
    if (PyType_Ready(&IdBufType) < 0 || PyType_Ready(&TokType) < 0 || PyType_Ready(&SSType) < 0 ||
        PyType_Ready(&RMType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&mod_def);
    if (!m)
        return NULL;
    MksError = PyErr_NewExceptionWithDoc("mkshards.MkshardsError",
                                         "A failure reported by the C library; .code holds its status (negative).",
                                         PyExc_ValueError, NULL);
    if (!MksError || PyModule_AddObject(m, "MkshardsError", MksError)) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(MksError);
    Py_INCREF(&TokType);
    Py_INCREF(&SSType);
    Py_INCREF(&IdBufType);
    if (PyModule_AddObject(m, "Tokenizer", (PyObject *)&TokType) ||
        PyModule_AddObject(m, "ShardSet", (PyObject *)&SSType) ||
        PyModule_AddObject(m, "IdBuffer", (PyObject *)&IdBufType) ||
        PyModule_AddStringConstant(m, "__version__", MKS_VERSION) ||
        PyModule_AddIntConstant(m, "SHARD_HEADER_BYTES", DS_SHARD_HEADER_BYTES)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
