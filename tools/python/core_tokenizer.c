/* core_tokenizer.c - mkshards._core.Tokenizer (core.h): tk_load / tk_encode*
 * / tk_decode over tokenizer/tk.h; the GIL is released while encoding, and
 * batches run on tk_encode_batch's threads. */
#include "core.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD tk_tokenizer *tok;
    PyObject **idcache; /* PyLong for every id < ncache (built on first use) */
    uint32_t ncache;
    PyObject *spec; /* the spec loaded (bytes): outputs are checked against its files (ds_check_output) */
} TokObj;

#define IDCACHE_MAX (1u << 21)

static void tok_dealloc(TokObj *t) {
    if (t->idcache) {
        for (uint32_t i = 0; i < t->ncache; i++) Py_XDECREF(t->idcache[i]);
        free(t->idcache);
    }
    if (t->tok) tk_free(t->tok);
    Py_XDECREF(t->spec);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static int tok_init(TokObj *t, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"spec", "pattern", "normalize", NULL};
    PyObject *spec_o = NULL;
    const char *pattern = NULL, *normalize = NULL;
    if (t->tok) { /* another thread may be encoding with it (GIL released) */
        PyErr_SetString(PyExc_RuntimeError, "Tokenizer is already loaded");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|zz", kwl, PyUnicode_FSConverter, &spec_o, &pattern, &normalize))
        return -1;
    /* a name or a regex (tiktoken's syntax), as the CLI's --pattern / --normalize */
    tk_load_opts lo = {TK_PAT_NONE, NULL, TK_NORM_NONE};
    if (pattern && tk_pattern_spec(pattern, &lo.pat, &lo.regex) != TK_OK) {
        Py_DECREF(spec_o);
        PyErr_Format(PyExc_ValueError, "unknown pattern '%s': use gpt2, cl100k, o200k or a regex", pattern);
        return -1;
    }
    if (normalize && tk_norm_parse(normalize, &lo.norm) != TK_OK) {
        Py_DECREF(spec_o);
        PyErr_Format(PyExc_ValueError, "unknown normalize '%s': use none, nfc or nfkc", normalize);
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
        rc = tk_load_ex(spec, &lo, &tok, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (rc != TK_OK || !tok) {
        /* the same wording as the CLI (tools/cli.c, cli_load_tokenizer) */
        const char *hint = "";
        if (rc == TK_ERR_PATTERN)
            hint = " (this vocabulary is not a known one: pass pattern='gpt2'|'cl100k'|'o200k' or its regex)";
        else if (!err[0] && rc == TK_ERR_NOT_FOUND)
            hint = " (pass a path, or set MKS_VOCAB_DIR to a folder holding <name>.tiktoken)";
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

/* Tokenizer.create(tokens, pattern, specials): tk_create from the token bytes
 * in rank order (rank i = tokens[i]), a pattern (a name, or any regex in
 * tiktoken's syntax: tk_set_pretokenizer) and a dict special text -> id -
 * what tiktoken's Encoding(name=, pat_str=, mergeable_ranks=,
 * special_tokens=) builds in memory. spec is the name to record. */
static PyObject *tok_create(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"tokens", "pattern", "specials", "spec", NULL};
    PyObject *tokens_o, *specials_o, *spec_o;
    const char *pattern;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OsO!O!", kwl, &tokens_o, &pattern, &PyDict_Type, &specials_o,
                                     &PyBytes_Type, &spec_o))
        return NULL;
    tk_pattern pat;
    const char *regex;
    if (tk_pattern_spec(pattern, &pat, &regex) != TK_OK || (!regex && pat == TK_PAT_NONE)) {
        PyErr_Format(PyExc_ValueError, "unknown pattern '%s': use gpt2, cl100k, o200k or a regex", pattern);
        return NULL;
    }
    PyObject *seq = PySequence_Fast(tokens_o, "tokens: a sequence of bytes in rank order");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t ns = PyDict_Size(specials_o);
    if ((size_t)n > TK_MAX_VOCAB || (size_t)ns > TK_MAX_VOCAB) {
        Py_DECREF(seq);
        return raise_c(TK_ERR_LIMIT, "Encoding: more ranks or special tokens than a vocabulary may hold (2^24)");
    }
    const uint8_t **tp = PyMem_Calloc((size_t)n + 1, sizeof *tp);
    uint32_t *lens = PyMem_Calloc((size_t)n + 1, sizeof *lens);
    tk_special *sp = PyMem_Calloc((size_t)ns + 1, sizeof *sp);
    PyObject *res = NULL;
    if (!tp || !lens || !sp) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "token of rank %zd: bytes, not %.80s", i, Py_TYPE(items[i])->tp_name);
            goto done;
        }
        if ((size_t)PyBytes_GET_SIZE(items[i]) > TK_MAX_TOKEN_BYTES || PyBytes_GET_SIZE(items[i]) == 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "Encoding: token of rank %zd has %zd bytes (1..%u allowed)", i,
                     PyBytes_GET_SIZE(items[i]), TK_MAX_TOKEN_BYTES);
            raise_c(TK_ERR_LIMIT, msg);
            goto done;
        }
        tp[i] = (const uint8_t *)PyBytes_AS_STRING(items[i]);
        lens[i] = (uint32_t)PyBytes_GET_SIZE(items[i]);
    }
    Py_ssize_t pos = 0, k = 0;
    PyObject *key, *val;
    while (PyDict_Next(specials_o, &pos, &key, &val)) {
        const char *text = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!text) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "special token: str, not %.80s", Py_TYPE(key)->tp_name);
            goto done;
        }
        int overflow = 0;
        long long id = PyLong_Check(val) ? PyLong_AsLongLongAndOverflow(val, &overflow) : -1;
        if (overflow || id < 0 || id >= (long long)TK_MAX_VOCAB) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "special token %R: id must be an int in 0..%u", key, TK_MAX_VOCAB - 1);
            goto done;
        }
        sp[k].text = text;
        sp[k].id = (uint32_t)id;
        k++;
    }
    tk_tokenizer *tok = NULL;
    int rc;
    char err[512] = "";
    /* a regex: the tables are built under a built-in pattern, then the regex replaces it */
    Py_BEGIN_ALLOW_THREADS
        rc = tk_create(tp, lens, (uint32_t)n, regex ? TK_PAT_O200K : pat, sp, (size_t)k, &tok);
        if (rc == TK_OK && regex && (rc = tk_set_pretokenizer(tok, regex, TK_NORM_NONE, err, sizeof err))) {
            tk_free(tok);
            tok = NULL;
        }
    Py_END_ALLOW_THREADS
    if (err[0]) {
        char msg[700];
        snprintf(msg, sizeof msg, "Encoding: pat_str: %s", err);
        PyErr_SetString(PyExc_ValueError, msg);
        goto done;
    }
    if (rc != TK_OK || !tok) {
        char msg[300];
        snprintf(msg, sizeof msg, "Encoding: cannot build the tokenizer from its ranks: %s%s", tk_strerror(rc),
                 rc == TK_ERR_MISSING_RANK ? " (every single byte must be a token)" : "");
        raise_c(rc ? rc : TK_ERR_ARG, msg);
        goto done;
    }
    TokObj *t = (TokObj *)type->tp_alloc(type, 0);
    if (!t) {
        tk_free(tok);
        goto done;
    }
    t->tok = tok;
    Py_INCREF(spec_o);
    t->spec = spec_o;
    res = (PyObject *)t;
done:
    PyMem_Free(tp);
    PyMem_Free(lens);
    PyMem_Free(sp);
    Py_DECREF(seq);
    return res;
}

static int tok_ready(TokObj *t) {
    if (!t->tok) {
        PyErr_SetString(PyExc_ValueError, "tokenizer not loaded");
        return 0;
    }
    return 1;
}

static int build_cache(TokObj *t) {
    if (t->idcache || t->ncache) return 0;
    uint32_t n = tk_vocab_size(t->tok);
    if (n > IDCACHE_MAX) n = IDCACHE_MAX;
    PyObject **c = calloc(n ? n : 1, sizeof *c);
    if (!c) {
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        c[i] = PyLong_FromUnsignedLong(i);
        if (!c[i]) {
            for (uint32_t k = 0; k < i; k++) Py_DECREF(c[k]);
            free(c);
            return -1;
        }
    }
    t->idcache = c;
    t->ncache = n;
    return 0;
}

static PyObject *ids_to_list(TokObj *t, const uint32_t *ids, size_t n) {
    if (!t->idcache && build_cache(t)) return NULL;
    PyObject *l = PyList_New((Py_ssize_t)n);
    if (!l) return NULL;
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
static int text_utf8(PyObject *s, PyObject **keep, const char **p, Py_ssize_t *n) {
    *keep = NULL;
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.80s", Py_TYPE(s)->tp_name);
        return -1;
    }
    *p = PyUnicode_AsUTF8AndSize(s, n);
    if (*p) return 0;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear();
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-16", "surrogatepass");
    if (!b) return -1;
    PyObject *f = PyUnicode_Decode(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), "utf-16", "replace");
    Py_DECREF(b);
    if (!f) return -1;
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

static void allowed_free(allowed_set *a) {
    PyMem_Free(a->names);
    Py_XDECREF(a->keep);
    memset(a, 0, sizeof *a);
}

static int allowed_parse(PyObject *o, allowed_set *a) {
    memset(a, 0, sizeof *a);
    if (!o || o == Py_None) return 0;
    if (PyUnicode_Check(o)) {
        if (PyUnicode_CompareWithASCIIString(o, "all") == 0) {
            a->all = 1;
            return 0;
        }
        PyErr_SetString(PyExc_ValueError, "allowed_special: 'all' or a set of special-token strings");
        return -1;
    }
    PyObject *t = PySequence_Tuple(o);
    if (!t) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(t);
    a->keep = t;
    if (n == 0) return 0;
    a->names = PyMem_Malloc((size_t)n * sizeof *a->names);
    if (!a->names) {
        allowed_free(a);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(t, i);
        if (!PyUnicode_Check(s) || !(a->names[i] = PyUnicode_AsUTF8(s))) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "allowed_special: expected str items");
            allowed_free(a);
            return -1;
        }
    }
    a->n = (size_t)n;
    return 0;
}

static int allowed_any(const allowed_set *a) { return a->all || a->n > 0; }

static int encode_one(const tk_tokenizer *tok, const allowed_set *a, const uint8_t *p, size_t n, tk_ids *out) {
    if (a->all) return tk_encode_special(tok, p, n, NULL, (size_t)-1, out);
    if (a->n) return tk_encode_special(tok, p, n, a->names, a->n, out);
    return tk_encode(tok, p, n, out);
}

/* encode one str -> tk_ids (GIL released while encoding) */
static int encode_str(TokObj *t, PyObject *text, PyObject *allowed_o, tk_ids *out) {
    allowed_set a;
    if (allowed_parse(allowed_o, &a)) return -1;
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

static PyObject *tok_encode(TokObj *t, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"text", "allowed", NULL};
    PyObject *text, *allowed = Py_None;
    if (!tok_ready(t) || !PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &text, &allowed)) return NULL;
    tk_ids out = {0};
    if (encode_str(t, text, allowed, &out)) return NULL;
    PyObject *l = ids_to_list(t, out.ids, out.len);
    tk_ids_free(&out);
    return l;
}

static PyObject *tok_encode_ordinary(TokObj *t, PyObject *text) {
    if (!tok_ready(t)) return NULL;
    tk_ids out = {0};
    if (encode_str(t, text, Py_None, &out)) return NULL;
    PyObject *l = ids_to_list(t, out.ids, out.len);
    tk_ids_free(&out);
    return l;
}

/* tiktoken's _encode_bytes: any bytes-like object, invalid UTF-8 included (tk_encode_bytes). */
static PyObject *tok_encode_bytes(TokObj *t, PyObject *arg) {
    if (!tok_ready(t)) return NULL;
    Py_buffer v;
    if (PyObject_GetBuffer(arg, &v, PyBUF_SIMPLE)) return NULL;
    tk_ids out = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS
        rc = tk_encode_bytes(t->tok, (const uint8_t *)v.buf, (size_t)v.len, &out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    if (rc != TK_OK) {
        tk_ids_free(&out);
        return raise_tk(rc, "encode_bytes");
    }
    PyObject *l = ids_to_list(t, out.ids, out.len);
    tk_ids_free(&out);
    return l;
}

static PyObject *tok_encode_to_buffer(TokObj *t, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"text", "allowed", NULL};
    PyObject *text, *allowed = Py_None;
    if (!tok_ready(t) || !PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwl, &text, &allowed)) return NULL;
    tk_ids out = {0};
    if (encode_str(t, text, allowed, &out)) return NULL;
    return idbuf_new(out.ids, (Py_ssize_t)out.len, 4, "I");
}

static PyObject *tok_count(TokObj *t, PyObject *text) {
    if (!tok_ready(t)) return NULL;
    PyObject *keep;
    const char *p;
    Py_ssize_t n;
    if (text_utf8(text, &keep, &p, &n)) return NULL;
    size_t cnt = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
        rc = tk_count(t->tok, (const uint8_t *)p, (size_t)n, &cnt);
    Py_END_ALLOW_THREADS
    Py_XDECREF(keep);
    if (rc != TK_OK) return raise_tk(rc, "count");
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

static void *special_worker(void *arg) {
    special_job *j = arg;
    for (;;) {
        size_t k = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (k >= j->n) break;
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
                                int threads, tk_ids *outs) {
    if (threads <= 0) threads = n_cpus();
    if ((size_t)threads > n) threads = (int)n;
    special_job j = {tok, a, docs, outs, n, 0, 0};
    pthread_t th[256];
    if (threads > 256) threads = 256;
    int started = 0;
    for (int k = 1; k < threads; k++) {
        if (pthread_create(&th[k], NULL, special_worker, &j)) break;
        started = k;
    }
    special_worker(&j);
    for (int k = 1; k <= started; k++) pthread_join(th[k], NULL);
    return j.rc;
}

/* Encode a sequence of str; outs (calloc'ed, n entries) on success. */
static int encode_texts(TokObj *t, PyObject *texts, int threads, PyObject *allowed_o, tk_ids **outs_ret,
                        size_t *n_ret) {
    allowed_set a;
    if (allowed_parse(allowed_o, &a)) return -1;
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
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *keep;
        const char *p;
        Py_ssize_t len;
        if (text_utf8(PyTuple_GET_ITEM(tup, (Py_ssize_t)i), &keep, &p, &len)) goto done;
        if (keep) {
            int e = PyList_Append(keeps, keep);
            Py_DECREF(keep);
            if (e) goto done;
        }
        spans[i].text = (const uint8_t *)p;
        spans[i].len = (size_t)len;
    }
    int erc;
    Py_BEGIN_ALLOW_THREADS
        if (allowed_any(&a)) erc = encode_batch_special(t->tok, &a, spans, n, threads, outs);
        else erc = tk_encode_batch(t->tok, spans, n, threads, outs);
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
        for (size_t i = 0; i < n; i++) tk_ids_free(&outs[i]);
        free(outs);
    }
    PyMem_Free(spans);
    Py_XDECREF(keeps);
    Py_DECREF(tup);
    allowed_free(&a);
    return rc;
}

static PyObject *tok_encode_batch(TokObj *t, PyObject *args, PyObject *kw) {
    static char *kwl[] = {"texts", "num_threads", "allowed", "as_buffer", NULL};
    PyObject *texts, *allowed = Py_None;
    int as_buffer = 0;
    num_arg threads = {"num_threads", 1, 4096, 2, 0, 0, 0}; /* 0: all cores (mkshards encode --threads 0..4096) */
    if (!tok_ready(t) ||
        !PyArg_ParseTupleAndKeywords(args, kw, "O|O&Op", kwl, &texts, conv_num, &threads, &allowed, &as_buffer))
        return NULL;
    tk_ids *outs = NULL;
    size_t n = 0;
    if (encode_texts(t, texts, (int)threads.v, allowed, &outs, &n)) return NULL;
    PyObject *res = NULL;
    if (as_buffer) {
        /* flat ids + offsets (n + 1 entries) */
        size_t total = 0;
        for (size_t i = 0; i < n; i++) total += outs[i].len;
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
                if (outs[i].len) memcpy(ids + o, outs[i].ids, outs[i].len * 4);
                o += outs[i].len;
            }
            off[n] = o;
            PyObject *bi = idbuf_new(ids, (Py_ssize_t)total, 4, "I");
            PyObject *bo = bi ? idbuf_new(off, (Py_ssize_t)n + 1, 8, "Q") : (free(off), NULL);
            if (bi && bo) res = PyTuple_Pack(2, bi, bo);
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
        if (gc_was) PyGC_Enable();
#endif
    }
    for (size_t i = 0; i < n; i++) tk_ids_free(&outs[i]);
    free(outs);
    return res;
}

/* ---- decoding
 * An id that is not in the vocabulary raises, from decode / decode_bytes, an
 * exception naming the id as given and its index (code TK_ERR_RANGE) whose
 * class is both MkshardsError (a ValueError) and what tiktoken raises, so code
 * written for either catches it: an id that fits 32 bits but has no token (at
 * or over n_vocab, or unused inside the range) is UnknownTokenError (a
 * KeyError); a negative id or one beyond 32 bits is TokenIdOverflowError (an
 * OverflowError: tiktoken's u32 conversion fails). decode_single_token_bytes
 * raises the same classes. A non-integer is a TypeError. */

static PyObject *UnknownTokenError, *TokenIdOverflowError;

static PyObject *raise_id_error(PyObject *type, const char *msg) {
    PyObject *e = PyObject_CallFunction(type, "s", msg);
    if (!e) return NULL;
    PyObject *c = PyLong_FromLong(TK_ERR_RANGE);
    if (c) {
        PyObject_SetAttrString(e, "code", c);
        Py_DECREF(c);
    }
    PyErr_SetObject(type, e);
    Py_DECREF(e);
    return NULL;
}

/* in_u32: 0 the id is negative or beyond 32 bits; 1 it fits; -1 it fits and is under n_vocab (unused) */
static PyObject *raise_bad_id(const char *id_text, size_t index, const tk_tokenizer *tok, int in_u32) {
    char msg[300];
    snprintf(msg, sizeof msg, "decode: token id %s (index %zu) is not in the vocabulary (ids 0..%u%s)", id_text, index,
             tk_vocab_size(tok) - 1, in_u32 < 0 ? "; this one is unused" : "");
    return raise_id_error(in_u32 ? UnknownTokenError : TokenIdOverflowError, msg);
}

/* An item of a sequence of ids as uint32; -1 with TypeError, or MkshardsError
 * naming the id as given when it cannot be one. */
static int item_id(PyObject *item, size_t index, const tk_tokenizer *tok, uint32_t *id) {
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
static int collect_ids(PyObject *o, const tk_tokenizer *tok, uint32_t **ids_ret, size_t *n_ret) {
    *ids_ret = NULL;
    *n_ret = 0;
    if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
        Py_buffer v;
        if (PyObject_GetBuffer(o, &v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
            const char *f = v.format ? v.format : "B";
            if (*f == '<' || *f == '=' || *f == '@') f++;
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
                        if (sgn) snprintf(t, sizeof t, "%lld", (long long)x);
                        else snprintf(t, sizeof t, "%llu", (unsigned long long)u);
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
    if (!seq) return -1;
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

static PyObject *tok_decode_bytes(TokObj *t, PyObject *tokens) {
    if (!tok_ready(t)) return NULL;
    uint32_t *ids;
    size_t n;
    if (collect_ids(tokens, t->tok, &ids, &n)) return NULL;
    tk_bytes out = {0};
    int rc = tk_decode(t->tok, ids, n, &out);
    if (rc != TK_OK) {
        size_t i = 0;
        const uint8_t *b;
        size_t bl;
        while (rc == TK_ERR_RANGE && i < n && tk_token_bytes(t->tok, ids[i], &b, &bl) == TK_OK) i++;
        tk_bytes_free(&out);
        if (rc == TK_ERR_RANGE && i < n) {
            char tx[16];
            snprintf(tx, sizeof tx, "%u", ids[i]);
            int in_u32 = ids[i] < tk_vocab_size(t->tok) ? -1 : 1;
            PyMem_Free(ids);
            return raise_bad_id(tx, i, t->tok, in_u32);
        }
        PyMem_Free(ids);
        return raise_tk(rc, "decode");
    }
    PyMem_Free(ids);
    PyObject *b = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    tk_bytes_free(&out);
    return b;
}

static PyObject *tok_token_bytes(TokObj *t, PyObject *arg) {
    if (!tok_ready(t)) return NULL;
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
        int in_u32 = !overflow && id >= 0 && id <= (long long)UINT32_MAX;
        char msg[300];
        snprintf(msg, sizeof msg, "token id %s is not in the vocabulary (ids 0..%u%s)", tx, nv - 1,
                 in_u32 && id < (long long)nv ? "; this one is unused" : "");
        return raise_id_error(in_u32 ? UnknownTokenError : TokenIdOverflowError, msg);
    }
    Py_DECREF(ix);
    return PyBytes_FromStringAndSize((const char *)b, (Py_ssize_t)n);
}

static PyObject *tok_rank_of(TokObj *t, PyObject *arg) {
    if (!tok_ready(t)) return NULL;
    char *p;
    Py_ssize_t n;
    if (PyBytes_AsStringAndSize(arg, &p, &n)) return NULL;
    return PyLong_FromLongLong((long long)tk_rank_of(t->tok, (const uint8_t *)p, (size_t)n));
}

/* Bytes of every mergeable token (specials excluded), sorted like tiktoken's
 * token_byte_values. */
static PyObject *tok_token_byte_values(TokObj *t, PyObject *unused) {
    (void)unused;
    if (!tok_ready(t)) return NULL;
    uint32_t nv = tk_vocab_size(t->tok);
    size_t ns = tk_n_specials(t->tok);
    const tk_special *sp = tk_specials(t->tok);
    PyObject *l = PyList_New(0);
    for (uint32_t id = 0; l && id < nv; id++) {
        int special = 0;
        for (size_t k = 0; k < ns; k++) special |= sp[k].id == id;
        const uint8_t *b;
        size_t n;
        if (special || tk_token_bytes(t->tok, id, &b, &n) != TK_OK) continue;
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

static PyObject *tok_get_name(TokObj *t, void *c) {
    (void)c;
    return tok_ready(t) ? PyUnicode_FromString(tk_name(t->tok)) : NULL;
}
static PyObject *tok_get_n_vocab(TokObj *t, void *c) {
    (void)c;
    return tok_ready(t) ? PyLong_FromUnsignedLong(tk_vocab_size(t->tok)) : NULL;
}
static PyObject *tok_get_n_ranks(TokObj *t, void *c) {
    (void)c;
    return tok_ready(t) ? PyLong_FromUnsignedLong(tk_n_ranks(t->tok)) : NULL;
}
static PyObject *tok_get_pattern(TokObj *t, void *c) {
    (void)c;
    if (!tok_ready(t)) return NULL;
    const char *p = tk_pattern_name(tk_get_pattern(t->tok));
    if (!p) Py_RETURN_NONE;
    return PyUnicode_FromString(p);
}
static PyObject *tok_get_pat_str(TokObj *t, void *c) {
    (void)c;
    if (!tok_ready(t)) return NULL;
    const char *p = tk_get_regex(t->tok);
    if (!p) p = tk_pattern_regex(tk_get_pattern(t->tok));
    if (!p) Py_RETURN_NONE;
    return PyUnicode_FromString(p);
}
static PyObject *tok_get_eot(TokObj *t, void *c) {
    (void)c;
    if (!tok_ready(t)) return NULL;
    uint32_t id;
    if (tk_eot_id(t->tok, &id) != TK_OK) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(id);
}
static PyObject *tok_get_specials(TokObj *t, void *c) {
    (void)c;
    if (!tok_ready(t)) return NULL;
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
/* (bos, eos) the tokenizer.json's post_processor adds to one sequence (None: none); ValueError for one
 * mkshards cannot apply (tk_post_process_ids). */
static PyObject *tok_get_post_process(TokObj *t, void *closure) {
    (void)closure;
    if (!tok_ready(t)) return NULL;
    int64_t bos, eos;
    const char *why = NULL;
    int rc = tk_post_process_ids(t->tok, &bos, &eos, &why);
    if (rc != TK_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "add_special_tokens: this tokenizer.json's post_processor cannot be applied (%s)",
                 why ? why : tk_strerror(rc));
        return raise_c(rc, msg);
    }
    PyObject *b = bos < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(bos);
    PyObject *e = eos < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(eos);
    if (!b || !e) {
        Py_XDECREF(b);
        Py_XDECREF(e);
        return NULL;
    }
    PyObject *r = PyTuple_Pack(2, b, e);
    Py_DECREF(b);
    Py_DECREF(e);
    return r;
}

static PyObject *tok_get_fingerprint(TokObj *t, void *c) {
    (void)c;
    if (!tok_ready(t)) return NULL;
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
    {"create", FN(tok_create), METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "create(tokens, pattern, specials, spec) -> Tokenizer: tk_create from token bytes in rank order"},
    {"encode_bytes", FN(tok_encode_bytes), METH_O, "encode_bytes(bytes) -> list[int] (tiktoken's _encode_bytes)"},
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
    {"post_process", (getter)tok_get_post_process, NULL, "(bos, eos) a tokenizer.json's post_processor adds", NULL},
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

const tk_tokenizer *core_tokenizer_of(PyObject *o, const char **spec) {
    if (!PyObject_TypeCheck(o, &TokType) || !((TokObj *)o)->tok) return NULL;
    if (spec) *spec = ((TokObj *)o)->spec ? PyBytes_AS_STRING(((TokObj *)o)->spec) : NULL;
    return ((TokObj *)o)->tok;
}

int core_add_tokenizer(PyObject *m) {
    if (PyType_Ready(&TokType) < 0) return -1;
    /* the id errors: MkshardsError and tiktoken's class at once (see "decoding") */
    PyObject *base = PyObject_GetAttrString(m, "MkshardsError");
    if (!base) return -1;
    PyObject *b1 = Py_BuildValue("(OO)", base, PyExc_KeyError), *b2 = Py_BuildValue("(OO)", base, PyExc_OverflowError);
    /* str(e) is the message, as MkshardsError's (KeyError's own __str__ would quote it) */
    PyObject *plain = PyDict_New(), *str = PyObject_GetAttrString(PyExc_BaseException, "__str__");
    if (plain && str && PyDict_SetItemString(plain, "__str__", str) == 0 && b1 && b2) {
        UnknownTokenError = PyErr_NewExceptionWithDoc(
            "mkshards.UnknownTokenError", "A token id with no token (a KeyError, as in tiktoken, and a MkshardsError).",
            b1, plain);
        TokenIdOverflowError = PyErr_NewExceptionWithDoc(
            "mkshards.TokenIdOverflowError",
            "A token id that is negative or beyond 32 bits (an OverflowError, as in tiktoken, and a MkshardsError).",
            b2, NULL);
    }
    Py_XDECREF(b1);
    Py_XDECREF(b2);
    Py_XDECREF(plain);
    Py_XDECREF(str);
    Py_DECREF(base);
    if (!UnknownTokenError || !TokenIdOverflowError) return -1;
    Py_INCREF(UnknownTokenError);
    Py_INCREF(TokenIdOverflowError);
    if (PyModule_AddObject(m, "UnknownTokenError", UnknownTokenError) ||
        PyModule_AddObject(m, "TokenIdOverflowError", TokenIdOverflowError))
        return -1;
    Py_INCREF(&TokType);
    return PyModule_AddObject(m, "Tokenizer", (PyObject *)&TokType);
}
