/* core_module.c - the module mkshards._core (core.h lists its files): the
 * MkshardsError exception, the checked-number argument converters, IdBuffer,
 * cpu_count and PyInit__core, which adds the bindings of core_tokenizer.c,
 * core_shardset.c and core_jobs.c. */
#include "core.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef MKS_VERSION
#define MKS_VERSION "0.0.0"
#endif

static PyObject *MksError;

/* Raise MkshardsError(msg) with .code = code. */
PyObject *raise_c(int code, const char *msg) {
    PyObject *e = PyObject_CallFunction(MksError, "s", msg && *msg ? msg : "mkshards: unknown error");
    if (!e) return NULL;
    PyObject *c = PyLong_FromLong(code);
    if (c) {
        PyObject_SetAttrString(e, "code", c);
        Py_DECREF(c);
    }
    PyErr_SetObject(MksError, e);
    Py_DECREF(e);
    return NULL;
}

PyObject *raise_tk(int rc, const char *what) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", what, tk_strerror(rc));
    return raise_c(rc, msg);
}

int n_cpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

/* ================================================================ checked numbers
 * (core.h says what every converter checks) */

/* The decimal text of an int (a long one by its size: str() of an int of
 * over 4300 digits raises). */
void int_text(PyObject *ix, char *buf, size_t n) {
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
static PyObject *exact_int(PyObject *o, const char *name) {
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

/* Checks ix (an exact int) against a's range; 1 and a->v set, or 0 with ValueError. */
static int num_check(num_arg *a, PyObject *ix) {
    int overflow = 0;
    long long s = PyLong_AsLongLongAndOverflow(ix, &overflow);
    if (s == -1 && PyErr_Occurred()) return 0;
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
int conv_num(PyObject *o, void *p) {
    num_arg *a = p;
    if (o == Py_None && a->none_ok) return 1;
    PyObject *ix = exact_int(o, a->name);
    if (!ix) return 0;
    int ok = num_check(a, ix);
    Py_DECREF(ix);
    return ok;
}

/* A signed 64-bit integer argument (ignore_index): "O&" converter. */
int conv_i64(PyObject *o, void *p) {
    i64_arg *a = p;
    PyObject *ix = exact_int(o, a->name);
    if (!ix) return 0;
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
int check_real(const char *name, double v, double lo, int lo_open, double hi, int hi_open, int zero_ok) {
    if (zero_ok && v == 0) return 0;
    if (isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi)) return 0;
    char msg[200]; /* PyErr_Format has no %g */
    snprintf(msg, sizeof msg, "%s %.17g: must be a number with %g %s x %s %g%s", name, v, lo,
             lo_open ? "<" : "<=", hi_open ? "<" : "<=", hi, zero_ok ? " (or 0: the default)" : "");
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* ================================================================ IdBuffer */
typedef struct {
    PyObject_HEAD void *data;
    Py_ssize_t n;
    Py_ssize_t itemsize;
    const char *fmt;
    Py_ssize_t shape[1], strides[1];
} IdBuf;

static uint64_t empty_storage;

static void idbuf_dealloc(IdBuf *b) {
    if (b->data != &empty_storage) free(b->data);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static int idbuf_getbuffer(IdBuf *b, Py_buffer *view, int flags) {
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
PyObject *idbuf_new(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *fmt) {
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

/* ================================================================ module */
/* The names of an enum from its library table (ds.h "Enum names"), as a
 * tuple: the package spells none of them itself. */
static PyObject *names_tuple(const char *(*name)(int)) {
    int n = 0;
    while (name(n)) n++;
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(name(i));
        if (!s) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

/* Adds NAME = names_tuple(name) to m; 0, or -1 with an exception set. */
static int add_names(PyObject *m, const char *attr, const char *(*name)(int)) {
    PyObject *t = names_tuple(name);
    if (!t || PyModule_AddObject(m, attr, t)) {
        Py_XDECREF(t);
        return -1;
    }
    return 0;
}

static PyObject *py_cpu_count(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong(n_cpus());
}

static PyMethodDef mod_methods[] = {{"cpu_count", FN(py_cpu_count), METH_NOARGS, "online CPUs"}, {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT, "_core", "C core of mkshards", -1, mod_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&IdBufType) < 0) return NULL;
    PyObject *m = PyModule_Create(&mod_def);
    if (!m) return NULL;
    MksError = PyErr_NewExceptionWithDoc("mkshards.MkshardsError",
                                         "A failure reported by the C library; .code holds its status (negative).",
                                         PyExc_ValueError, NULL);
    if (!MksError || PyModule_AddObject(m, "MkshardsError", MksError)) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(MksError);
    Py_INCREF(&IdBufType);
    if (PyModule_AddObject(m, "IdBuffer", (PyObject *)&IdBufType) ||
        PyModule_AddStringConstant(m, "__version__", MKS_VERSION) ||
        PyModule_AddIntConstant(m, "SHARD_HEADER_BYTES", DS_SHARD_HEADER_BYTES) ||
        add_names(m, "SPLIT_NAMES", ds_split_name) || add_names(m, "PACK_NAMES", ds_pack_name) ||
        add_names(m, "OVER_LONG_NAMES", ds_over_long_name) || add_names(m, "DOC_SEP_NAMES", ds_doc_sep_name) ||
        core_add_tokenizer(m) || core_add_shardset(m) || core_add_jobs(m)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
