/* arrow_json.c - a row of Arrow columns as a JSON object (ds_arrow_json.h):
 * what a chat record from a Parquet / Arrow IPC file or a Python Arrow
 * stream is handed to the chat parser as, so that it is parsed, linted and
 * rejected exactly as the same record in a JSONL line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds_arrow_json.h"
#include "ds_chat.h"

#define AJSON_MAX_DEPTH                                                                                                \
    64 /* nesting followed; deeper values are {} (a schema is a finite tree, this bounds the stack) */

typedef struct {
    char *name;
    int parent; /* -1: top level */
    int whole;  /* the path ends here: the whole value */
} fnode;

struct ds_ajson {
    fnode *n;
    size_t len;
};

void ds_ajson_free(ds_ajson *p) {
    if (!p) return;
    for (size_t i = 0; i < p->len; i++) free(p->n[i].name);
    free(p->n);
    free(p);
}

static int find_node(const ds_ajson *p, int parent, const char *name, size_t nl) {
    for (size_t i = 0; i < p->len; i++)
        if (p->n[i].parent == parent && strlen(p->n[i].name) == nl && !memcmp(p->n[i].name, name, nl)) return (int)i;
    return -1;
}

ds_ajson *ds_ajson_new(const char *const *paths, size_t n_paths) {
    ds_ajson *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    size_t cap = 0;
    for (size_t k = 0; k < n_paths; k++) {
        const char *s = paths[k];
        if (!s) continue;
        int parent = -1;
        for (;;) {
            const char *dot = strchr(s, '.');
            size_t nl = dot ? (size_t)(dot - s) : strlen(s);
            int at = find_node(p, parent, s, nl);
            if (at < 0) {
                if (p->len == cap) {
                    size_t nc = cap ? 2 * cap : 8;
                    fnode *q = realloc(p->n, nc * sizeof *q);
                    if (!q) goto nomem;
                    p->n = q;
                    cap = nc;
                }
                char *name = malloc(nl + 1);
                if (!name) goto nomem;
                memcpy(name, s, nl);
                name[nl] = 0;
                p->n[p->len] = (fnode){.name = name, .parent = parent, .whole = 0};
                at = (int)p->len++;
            }
            if (!dot) {
                p->n[at].whole = 1; /* a shorter path wins over a longer one under it */
                break;
            }
            parent = at;
            s = dot + 1;
        }
    }
    return p;
nomem:
    ds_ajson_free(p);
    return NULL;
}

size_t ds_ajson_format_paths(int fmt, const char *messages_field, const char *text_field,
                             const char *out[DS_AJSON_MAX_PATHS]) {
    const char *mf = messages_field ? messages_field : "messages";
    const char *tf = text_field ? text_field : "text";
    size_t n = 0;
    if (fmt == DS_FMT_CHAT || fmt == DS_FMT_AUTO) out[n++] = mf;
    if (fmt == DS_FMT_PROMPT_COMPLETION || fmt == DS_FMT_AUTO) out[n++] = "prompt", out[n++] = "completion";
    /* the record's top-level tools (ds_chat_parse reads them beside the
     * messages or the conversational prompt / completion) */
    if (fmt == DS_FMT_CHAT || fmt == DS_FMT_PROMPT_COMPLETION || fmt == DS_FMT_AUTO) out[n++] = "tools";
    if (fmt == DS_FMT_AUTO || fmt == DS_FMT_TEXT) out[n++] = tf;
    return n;
}

ds_ajson *ds_ajson_for_format(int fmt, const char *messages_field, const char *text_field) {
    const char *paths[DS_AJSON_MAX_PATHS];
    size_t n = ds_ajson_format_paths(fmt, messages_field, text_field, paths);
    return ds_ajson_new(paths, n);
}

void ds_ajson_buf_free(ds_ajson_buf *b) {
    if (!b) return;
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- writing */

typedef struct {
    ds_ajson_buf *b;
    size_t limit;
    int rc; /* first failure: DS_AJSON_* */
    char *why;
    size_t whylen;
} wctx;

static int put(wctx *w, const void *s, size_t n) {
    if (w->rc) return -1;
    if (n > w->limit || w->b->len > w->limit - n) {
        w->rc = DS_AJSON_TOO_LARGE;
        return -1;
    }
    if (w->b->len + n > w->b->cap) {
        size_t nc = w->b->cap ? w->b->cap : 1024;
        while (nc < w->b->len + n) nc *= 2;
        uint8_t *q = realloc(w->b->p, nc);
        if (!q) {
            w->rc = DS_AJSON_NOMEM;
            return -1;
        }
        w->b->p = q;
        w->b->cap = nc;
    }
    memcpy(w->b->p + w->b->len, s, n);
    w->b->len += n;
    return 0;
}
static int puts_(wctx *w, const char *s) { return put(w, s, strlen(s)); }

static int bad(wctx *w, const char *what, const char *fmt) {
    if (!w->rc) {
        w->rc = DS_AJSON_BAD;
        if (w->why && w->whylen) snprintf(w->why, w->whylen, "Arrow column %s: %s", what, fmt);
    }
    return -1;
}

/* A JSON string of n bytes as they are ('"', '\\' and control bytes escaped). */
static int put_str(wctx *w, const uint8_t *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (put(w, "\"", 1)) return -1;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (put(w, s + run, i - run)) return -1;
        /* as json.dumps writes them: a JSONL line and this object are the same bytes */
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        const char *shortx = strchr("\"\\\b\f\n\r\t", c);
        if (c && shortx) {
            e[1] = "\"\\bfnrt"[shortx - "\"\\\b\f\n\r\t"];
            if (put(w, e, 2)) return -1;
        } else if (put(w, e, 6)) {
            return -1;
        }
        run = i + 1;
    }
    if (put(w, s + run, n - run)) return -1;
    return put(w, "\"", 1);
}

static int is_valid(const struct ArrowArray *a, int64_t phys) {
    if (a->null_count == 0 || a->n_buffers < 1 || !a->buffers[0]) return 1;
    return (((const uint8_t *)a->buffers[0])[phys >> 3] >> (phys & 7)) & 1;
}

static int fmt_is(const struct ArrowSchema *sc, const char *f) { return !strcmp(sc->format, f); }

/* buffers[k] of a (non-NULL: the rows being read need it) */
static const void *buf_at(wctx *w, const struct ArrowArray *a, int64_t k, const char *name) {
    if (k >= a->n_buffers || !a->buffers || !a->buffers[k]) {
        bad(w, name, "a buffer its type needs is missing");
        return NULL;
    }
    return a->buffers[k];
}

static int put_value(wctx *w, const struct ArrowSchema *sc, const struct ArrowArray *a, int64_t i, int filt,
                     const ds_ajson *p, int depth);

/* An integer / index at physical position phys of a fixed-width buffer. */
static int read_int(const char *f, const void *buf, int64_t phys, int64_t *sv, uint64_t *uv, int *is_unsigned) {
    *is_unsigned = 0;
    switch (f[0]) {
    case 'c': *sv = ((const int8_t *)buf)[phys]; return 1;
    case 'C': *uv = ((const uint8_t *)buf)[phys], *is_unsigned = 1; return 1;
    case 's': *sv = ((const int16_t *)buf)[phys]; return 1;
    case 'S': *uv = ((const uint16_t *)buf)[phys], *is_unsigned = 1; return 1;
    case 'i': *sv = ((const int32_t *)buf)[phys]; return 1;
    case 'I': *uv = ((const uint32_t *)buf)[phys], *is_unsigned = 1; return 1;
    case 'l': *sv = ((const int64_t *)buf)[phys]; return 1;
    case 'L': *uv = ((const uint64_t *)buf)[phys], *is_unsigned = 1; return 1;
    }
    return 0;
}

static int is_int_format(const char *f) { return f[0] && strchr("cCsSiIlL", f[0]) && !f[1]; }

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static int put_struct(wctx *w, const struct ArrowSchema *sc, const struct ArrowArray *a, int64_t i, int filt,
                      const ds_ajson *p, int depth) {
    if (sc->n_children < 0 || (sc->n_children && !sc->children)) return bad(w, "struct", "a bad schema");
    if (a->n_children != sc->n_children || (a->n_children && !a->children))
        return bad(w, "struct", "children differ from the schema");
    if (puts_(w, "{")) return -1;
    int first = 1;
    for (int64_t c = 0; c < sc->n_children; c++) {
        const struct ArrowSchema *cs = sc->children[c];
        const struct ArrowArray *ca = a->children[c];
        if (!cs || !ca || !cs->format) return bad(w, "struct", "a NULL child");
        const char *name = cs->name ? cs->name : "";
        /* the child's own filter: every child of it (-2) unless a filter
         * node says otherwise (a struct inside a list element or a whole
         * field must not be filtered by the root's names, nor read p) */
        int cf = -2;
        if (filt != -2) { /* -2: every child */
            int g = find_node(p, filt, name, strlen(name));
            if (g < 0) continue;
            cf = p->n[g].whole ? -2 : g;
        }
        if (!first && puts_(w, ",")) return -1;
        first = 0;
        if (put_str(w, (const uint8_t *)name, strlen(name)) || puts_(w, ":")) return -1;
        /* a struct's child rows are its rows: the parent's offset applies to them */
        if (put_value(w, cs, ca, a->offset + i, cf == -2 || fmt_is(cs, "+s") ? cf : -2, p, depth + 1)) return -1;
    }
    return puts_(w, "}");
}

/* Elements [lo, hi) of a list's child as a JSON array (or a map's entries as an object). */
static int put_elems(wctx *w, const struct ArrowSchema *sc, const struct ArrowArray *a, int64_t lo, int64_t hi,
                     int as_map, int depth) {
    if (sc->n_children != 1 || !sc->children || !sc->children[0] || !sc->children[0]->format)
        return bad(w, "list", "a bad schema");
    if (a->n_children != 1 || !a->children || !a->children[0]) return bad(w, "list", "children differ from the schema");
    const struct ArrowSchema *cs = sc->children[0];
    const struct ArrowArray *ca = a->children[0];
    if (lo < 0 || hi < lo || ca->length < 0 || hi > ca->length) return bad(w, "list", "offsets out of range");
    if (as_map) {
        /* entries: struct<key, value>; string keys make an object, others an array of [key, value] */
        if (!fmt_is(cs, "+s") || cs->n_children != 2 || !cs->children || ca->n_children != 2 || !ca->children)
            return bad(w, "map", "entries are not a struct of key and value");
        const struct ArrowSchema *ks = cs->children[0];
        int obj = ks && ks->format && !ks->dictionary && (fmt_is(ks, "u") || fmt_is(ks, "U") || fmt_is(ks, "vu"));
        if (puts_(w, obj ? "{" : "[")) return -1;
        for (int64_t e = lo; e < hi; e++) {
            if (e > lo && puts_(w, ",")) return -1;
            if (obj) {
                if (put_value(w, ks, ca->children[0], ca->offset + e, -2, NULL, depth + 1) || puts_(w, ":") ||
                    put_value(w, cs->children[1], ca->children[1], ca->offset + e, -2, NULL, depth + 1))
                    return -1;
            } else {
                if (puts_(w, "[") || put_value(w, ks, ca->children[0], ca->offset + e, -2, NULL, depth + 1) ||
                    puts_(w, ",") ||
                    put_value(w, cs->children[1], ca->children[1], ca->offset + e, -2, NULL, depth + 1) ||
                    puts_(w, "]"))
                    return -1;
            }
        }
        return puts_(w, obj ? "}" : "]");
    }
    if (puts_(w, "[")) return -1;
    for (int64_t e = lo; e < hi; e++) {
        if (e > lo && puts_(w, ",")) return -1;
        if (put_value(w, cs, ca, e, -2, NULL, depth + 1)) return -1;
    }
    return puts_(w, "]");
}

/* Value at logical row i of a (0 <= i < a->length). filt: the filter node
 * a struct's children are chosen by (-2: all). */
static int put_value(wctx *w, const struct ArrowSchema *sc, const struct ArrowArray *a, int64_t i, int filt,
                     const ds_ajson *p, int depth) {
    if (w->rc) return -1;
    if (!sc->format) return bad(w, "?", "a schema without a format");
    if (a->length < 0 || a->offset < 0 || a->length > INT64_MAX / 4 - a->offset || a->n_buffers < 0 ||
        (a->n_buffers && !a->buffers))
        return bad(w, sc->format, "a bad length, offset or buffer count");
    if (i < 0 || i >= a->length) return bad(w, sc->format, "a row past the array's length");
    if (depth > AJSON_MAX_DEPTH) return puts_(w, "{}");
    const int64_t phys = a->offset + i;
    if (!is_valid(a, phys)) return puts_(w, "null");
    const char *f = sc->format;
    if (sc->dictionary) { /* indices here, the values in a->dictionary */
        if (!is_int_format(f)) return bad(w, f, "a dictionary index type that is not an integer");
        const void *ib = buf_at(w, a, 1, "dictionary indices");
        if (!ib) return -1;
        int64_t sv = 0;
        uint64_t uv = 0;
        int u;
        read_int(f, ib, phys, &sv, &uv, &u);
        if (u) sv = uv > (uint64_t)INT64_MAX ? -1 : (int64_t)uv;
        const struct ArrowArray *d = a->dictionary;
        if (!d || !sc->dictionary->format) return bad(w, f, "no dictionary");
        if (sv < 0 || d->length < 0 || sv >= d->length) return bad(w, f, "a dictionary index out of range");
        return put_value(w, sc->dictionary, d, sv, filt, p, depth + 1);
    }
    char num[64];
    if (is_int_format(f)) {
        const void *vb = buf_at(w, a, 1, f);
        if (!vb) return -1;
        int64_t sv = 0;
        uint64_t uv = 0;
        int u;
        read_int(f, vb, phys, &sv, &uv, &u);
        if (u) snprintf(num, sizeof num, "%llu", (unsigned long long)uv);
        else snprintf(num, sizeof num, "%lld", (long long)sv);
        return puts_(w, num);
    }
    if (!f[1] && (f[0] == 'e' || f[0] == 'f' || f[0] == 'g')) {
        const void *vb = buf_at(w, a, 1, f);
        if (!vb) return -1;
        double v = f[0] == 'e'   ? half_to_double(((const uint16_t *)vb)[phys])
                   : f[0] == 'f' ? (double)((const float *)vb)[phys]
                                 : ((const double *)vb)[phys];
        if (!isfinite(v)) return puts_(w, "null");
        snprintf(num, sizeof num, "%.17g", v);
        return puts_(w, num);
    }
    if (fmt_is(sc, "n")) return puts_(w, "null");
    if (fmt_is(sc, "b")) {
        const uint8_t *vb = buf_at(w, a, 1, f);
        if (!vb) return -1;
        return puts_(w, (vb[phys >> 3] >> (phys & 7)) & 1 ? "true" : "false");
    }
    if (fmt_is(sc, "u") || fmt_is(sc, "z") || fmt_is(sc, "U") || fmt_is(sc, "Z")) {
        int large = f[0] == 'U' || f[0] == 'Z';
        const void *ob = buf_at(w, a, 1, f);
        if (!ob) return -1;
        int64_t lo = large ? ((const int64_t *)ob)[phys] : ((const int32_t *)ob)[phys];
        int64_t hi = large ? ((const int64_t *)ob)[phys + 1] : ((const int32_t *)ob)[phys + 1];
        if (lo < 0 || hi < lo) return bad(w, f, "string offsets out of order");
        if (hi == lo) return puts_(w, "\"\"");
        const uint8_t *db = buf_at(w, a, 2, f);
        if (!db) return -1;
        return put_str(w, db + lo, (size_t)(hi - lo));
    }
    if (fmt_is(sc, "vu") || fmt_is(sc, "vz")) {
        /* buffers: validity, views (16 bytes: length, then the bytes inline
         * (<= 12) or a prefix, buffer index, offset), variadic data, sizes */
        const uint8_t *vw = buf_at(w, a, 1, f);
        if (!vw) return -1;
        vw += (size_t)phys * 16;
        int32_t n, bi, off;
        memcpy(&n, vw, 4);
        if (n < 0) return bad(w, f, "a negative string view length");
        if (n <= 12) return put_str(w, vw + 4, (size_t)n);
        memcpy(&bi, vw + 8, 4);
        memcpy(&off, vw + 12, 4);
        if (a->n_buffers < 3 || bi < 0 || bi >= a->n_buffers - 3 || off < 0)
            return bad(w, f, "a string view out of range");
        const int64_t *sizes = buf_at(w, a, a->n_buffers - 1, f);
        if (!sizes) return -1;
        if ((int64_t)off + n > sizes[bi]) return bad(w, f, "a string view out of range");
        const uint8_t *db = buf_at(w, a, 2 + bi, f);
        if (!db) return -1;
        return put_str(w, db + off, (size_t)n);
    }
    if (!strncmp(f, "w:", 2)) { /* fixed-size binary */
        long width = strtol(f + 2, NULL, 10);
        if (width < 0 || width > INT32_MAX || phys > INT64_MAX / (width + 1)) return bad(w, f, "a bad width");
        const uint8_t *db = buf_at(w, a, 1, f);
        if (!db) return -1;
        return put_str(w, db + (size_t)phys * (size_t)width, (size_t)width);
    }
    if (fmt_is(sc, "+s")) return put_struct(w, sc, a, i, filt, p, depth);
    if (fmt_is(sc, "+l") || fmt_is(sc, "+L") || fmt_is(sc, "+m")) {
        const void *ob = buf_at(w, a, 1, f);
        if (!ob) return -1;
        int large = f[1] == 'L';
        int64_t lo = large ? ((const int64_t *)ob)[phys] : ((const int32_t *)ob)[phys];
        int64_t hi = large ? ((const int64_t *)ob)[phys + 1] : ((const int32_t *)ob)[phys + 1];
        /* the offsets are rows of the child, whose own offset applies */
        return put_elems(w, sc, a, lo, hi, f[1] == 'm', depth);
    }
    if (!strncmp(f, "+w:", 3)) {
        long size = strtol(f + 3, NULL, 10);
        if (size < 0 || size > INT32_MAX || phys > INT64_MAX / (size + 1)) return bad(w, f, "a bad list size");
        return put_elems(w, sc, a, phys * size, phys * size + size, 0, depth);
    }
    return puts_(w, "{}"); /* dates, decimals, unions, run-end encoded, list views, ...: not JSON text */
}

int ds_ajson_row(const ds_ajson *p, const struct ArrowSchema *sc, const struct ArrowArray *batch, int64_t row,
                 size_t limit, ds_ajson_buf *b, char *why, size_t whylen) {
    wctx w = {.b = b, .limit = limit ? limit : SIZE_MAX, .rc = 0, .why = why, .whylen = whylen};
    b->len = 0;
    if (why && whylen) why[0] = 0;
    if (!sc || !batch || !sc->format || !fmt_is(sc, "+s")) {
        bad(&w, "batch", "not a struct of columns");
        return w.rc;
    }
    if (row < 0 || batch->length < 0 || batch->offset < 0 || row >= batch->length) {
        bad(&w, "batch", "a row past the batch");
        return w.rc;
    }
    /* the batch's own validity is not a JSON null: a row is an object */
    struct ArrowArray top = *batch;
    top.null_count = 0;
    put_struct(&w, sc, &top, row, p && p->len ? -1 : -2, p, 0);
    return w.rc;
}
