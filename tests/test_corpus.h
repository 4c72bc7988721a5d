/* test_corpus.h - the C tests' access to ../shared/corpus: whole files,
 * zstd streams, and the first documents of a category file (the `text`
 * field of each JSONL line, in file order, as the oracle numbers them).
 * A file that cannot be read gives NULL / -1; a corrupt stream ends the
 * test (the shared corpus is fixed data, not an input under test). */
#ifndef MKS_TEST_CORPUS_H
#define MKS_TEST_CORPUS_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* The whole file, NUL-terminated (*len excludes the NUL). */
static inline char *test_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *c = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!c || fread(c, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(c);
        return NULL;
    }
    fclose(f);
    c[n] = 0;
    *len = (size_t)n;
    return c;
}

/* A zstd file decompressed whole, NUL-terminated. */
static inline char *test_read_zst(const char *path, size_t *len) {
    size_t n;
    char *c = test_read_file(path, &n);
    if (!c) return NULL;
    size_t cap = n * 8 + (1 << 20), o = 0;
    char *out = malloc(cap + 1);
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_inBuffer in = {c, n, 0};
    while (in.pos < in.size) {
        if (cap - o < (1 << 20)) {
            cap *= 2;
            out = realloc(out, cap + 1);
        }
        ZSTD_outBuffer ob = {out + o, cap - o, 0};
        size_t r = ZSTD_decompressStream(ds, &ob, &in);
        if (ZSTD_isError(r)) {
            fprintf(stderr, "%s: %s\n", path, ZSTD_getErrorName(r));
            exit(1);
        }
        o += ob.pos;
    }
    ZSTD_freeDStream(ds);
    free(c);
    out[o] = 0;
    *len = o;
    return out;
}

/* fn(user, i, text, len) for the first `max` documents of
 * SHARED/corpus/CAT.jsonl.zst (text valid during the call only).
 * Returns the number of documents visited, -1 when the file is unreadable. */
typedef void (*test_doc_fn)(void *user, int i, const char *text, size_t len);
static inline int test_corpus_docs(const char *shared, const char *cat, int max, test_doc_fn fn, void *user) {
    char p[4096];
    snprintf(p, sizeof p, "%s/corpus/%s.jsonl.zst", shared, cat);
    size_t n;
    char *all = test_read_zst(p, &n);
    if (!all) return -1;
    char *line = all;
    int i = 0;
    for (; i < max && line && *line; i++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        json_t *t = json_object_get(o, "text");
        fn(user, i, json_string_value(t), json_string_length(t));
        json_decref(o);
        line = nl ? nl + 1 : NULL;
    }
    free(all);
    return i;
}

/* test_corpus_docs' fn that keeps each document as a NUL-terminated copy in
 * the caller's arrays (user: a test_doc_slots for the category). */
typedef struct {
    char **text;
    size_t *len;
} test_doc_slots;
static inline void test_doc_keep(void *user, int i, const char *text, size_t len) {
    const test_doc_slots *s = user;
    s->text[i] = malloc(len + 1);
    memcpy(s->text[i], text, len);
    s->text[i][len] = 0;
    s->len[i] = len;
}

#endif
