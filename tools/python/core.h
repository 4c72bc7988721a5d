/* core.h - private to the CPython extension mkshards._core (tools/python).
 *
 * The module is a thin layer over the public headers tokenizer/tk.h,
 * dataset/ds.h and (for the row order) train/tr.h, one file per binding:
 *   core_tokenizer.c  Tokenizer: tk_load / tk_encode* / tk_decode (GIL
 *                     released while encoding; batches on tk_encode_batch's
 *                     threads)
 *   core_shardset.c   ShardSet: ds_shardset_open / ds_shardset_read (rows into
 *                     caller buffers, GIL released), RowMaker, and row_order:
 *                     llmtrain's seeded row order (tr_row_at)
 *   core_jobs.c       analyze (ds_analyze: lint / hist, reports as the CLI's
 *                     --json text) and build (ds_build), on a worker thread
 *   core_module.c     the module: MkshardsError, the checked-number argument
 *                     converters, IdBuffer (a malloc'ed array exported through
 *                     the buffer protocol, so numpy.frombuffer wraps it
 *                     without a copy: numpy is not needed to build this
 *                     module), cpu_count, PyInit__core
 * Every C failure raises mkshards.MkshardsError (a ValueError) carrying the C
 * message and the status in .code; nothing here exits or aborts.
 *
 * The names below are shared between those files only: the module's files
 * are compiled with hidden visibility, so of their symbols only PyInit__core
 * is exported. */
#ifndef MKS_PY_CORE_H
#define MKS_PY_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "ds.h"
#include "tk.h"

#define FN(f) ((PyCFunction)(void (*)(void))(f))

/* ------------------------------------------------------------ errors */
/* Raise MkshardsError(msg) with .code = code; returns NULL. */
PyObject *raise_c(int code, const char *msg);
/* Raise MkshardsError("what: tk_strerror(rc)") with .code = rc; returns NULL. */
PyObject *raise_tk(int rc, const char *what);
/* Online CPUs (at least 1). */
int n_cpus(void);

/* ------------------------------------------------------------ checked numbers
 * Every integer argument goes through one of these (PyArg "O&"): a Python int
 * (or anything with __index__, or an integral float) that must lie in the
 * argument's range, the ranges of the CLI options it mirrors. Out of range
 * (negative, too big for the C type, beyond the option's limit) is a
 * ValueError naming the argument and the value as given; a non-number a
 * TypeError. The PyArg units "I" and "k" would wrap silently (2**32 + 64 ->
 * 64) and "i"/"K" name neither the argument nor the value. */
typedef struct {
    const char *name;          /* the argument, as the Python call names it */
    unsigned long long lo, hi; /* accepted values */
    unsigned char zero_ok;     /* 0 accepted too: 1 the default, 2 all cores */
    unsigned char none_ok;     /* None accepted too (the default): v keeps its preset value */
    unsigned char given;       /* set when a number was given */
    unsigned long long v;      /* the value (preset: the default) */
} num_arg;

/* A signed 64-bit integer argument (ignore_index). */
typedef struct {
    const char *name;
    long long v;
} i64_arg;

/* The decimal text of an int (a long one by its size: str() of an int of
 * over 4300 digits raises). */
void int_text(PyObject *ix, char *buf, size_t n);
/* PyArg "O&" converters for a num_arg / an i64_arg. */
int conv_num(PyObject *o, void *p);
int conv_i64(PyObject *o, void *p);
/* A float argument: finite, in [lo, hi] (lo_open / hi_open: the bound
 * excluded), or 0 when zero_ok (the default). 0, or -1 with ValueError. */
int check_real(const char *name, double v, double lo, int lo_open, double hi, int hi_open, int zero_ok);

/* ------------------------------------------------------------ IdBuffer */
/* An IdBuffer over data (malloc'ed, or NULL when n == 0; ownership passes to
 * it, freed on failure too): n items of itemsize bytes, struct format fmt. */
PyObject *idbuf_new(void *data, Py_ssize_t n, Py_ssize_t itemsize, const char *fmt);

/* ------------------------------------------------------------ bindings
 * Each adds its types and functions to the module m: 0, or -1 with an
 * exception set. */
int core_add_tokenizer(PyObject *m);
int core_add_shardset(PyObject *m);
int core_add_jobs(PyObject *m);

/* The library tokenizer of o when o is a loaded Tokenizer, NULL otherwise;
 * *spec (when spec is not NULL) gets the spec it was loaded from, or NULL. */
const tk_tokenizer *core_tokenizer_of(PyObject *o, const char **spec);

#endif
