/* fuzz_arrow.c - libFuzzer target for the Parquet / Arrow IPC wrapper
 * (dataset/arrow_reader.cpp through its C API, arrow_reader.h), with
 * Arrow's own checks on as mkshards reads files: the footer / flatbuffer
 * limits, ValidateFull on every row group and batch, a capped memory pool.
 * The first input byte picks the configuration (bit 0: Parquet or IPC;
 * bits 1-2: the field; bit 3: the chat formats' rows mode, every row of the
 * fields messages, prompt, completion (or conv.messages) as a JSON object
 * through ds_ajson_row, arrow_json.c), the rest is the file. Built only with
 * MKS_ENABLE_ARROW; seeds: tests/data/fuzz/make_arrow_seeds.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arrow_reader.h"
#include "ds_arrow_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Chat formats: whole rows as JSON objects, each byte of them read (ASan). */
static int rows_mode(int fd, uint8_t cfg, int f) {
    static const char *const chat[] = {"messages", "prompt", "completion", "tools", "text"};
    static const char *const nested[] = {"conv.messages"};
    const char *const *paths = f == 1 ? nested : chat;
    size_t np = f == 1 ? 1 : f == 2 ? 1 : 5;
    char err[256], why[160];
    ds_arrow *a = NULL;
    if (ds_arrow_open_rows(fd, (cfg & 1) ? DS_ARROW_FMT_IPC : DS_ARROW_FMT_PARQUET, paths, np, (uint64_t)64 << 20, &a,
                           err, sizeof err) != 0) {
        if (!memchr(err, 0, sizeof err)) abort();
        return 0;
    }
    ds_ajson *p = ds_ajson_new(paths, np);
    ds_ajson_buf b = {0};
    uint64_t sum = 0;
    for (int piece = 0; p && piece < 1000; piece++) {
        int64_t rows;
        if (ds_arrow_next_piece(a, &rows, err, sizeof err) <= 0) break;
        const struct ArrowSchema *sc;
        const struct ArrowArray *arr;
        if (ds_arrow_piece_c(a, &sc, &arr) != 0) continue;
        if (arr->length != rows) abort();
        for (int64_t i = 0; i < rows && i < 100000; i++) {
            /* 1 MiB: a row past it is TOO_LARGE, not memory */
            int rc = ds_ajson_row(p, sc, arr, i, (size_t)1 << 20, &b, why, sizeof why);
            if (rc == DS_AJSON_OK && (b.len < 2 || b.p[0] != '{' || b.p[b.len - 1] != '}')) abort();
            if (rc == DS_AJSON_BAD && !memchr(why, 0, sizeof why)) abort();
            if (b.len > ((size_t)1 << 20)) abort();
            for (size_t k = 0; k < b.len; k++) sum += b.p[k];
        }
    }
    ds_ajson_buf_free(&b);
    ds_ajson_free(p);
    if (ds_arrow_peak_bytes(a) > ((uint64_t)64 << 20)) abort();
    ds_arrow_close(a);
    return (int)(sum & 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t cfg = data[0];
    data++;
    size--;
    int fd = memfd_create("fuzz_arrow", 0);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    static const char *const text[] = {"text"}, *const nested[] = {"meta", "body"}, *const id[] = {"id"},
                             *const deep[] = {"text", "x"};
    static const char *const *const fields[] = {text, nested, id, deep};
    static const size_t n_parts[] = {1, 2, 1, 2};
    int f = (cfg >> 1) & 3;
    char err[256];
    ds_arrow *a = NULL;
    if (cfg & 8) return rows_mode(fd, cfg, f);
    /* 64 MiB: a crafted size must fail at the pool's cap, within the fuzzer's RSS limit */
    if (ds_arrow_open(fd, (cfg & 1) ? DS_ARROW_FMT_IPC : DS_ARROW_FMT_PARQUET, fields[f], n_parts[f],
                      (uint64_t)64 << 20, &a, err, sizeof err) != 0) {
        if (!memchr(err, 0, sizeof err)) abort(); /* messages are terminated */
        return 0;
    }
    uint64_t sum = 0;
    for (int piece = 0; piece < 1000; piece++) {
        int64_t rows;
        int rc = ds_arrow_next_piece(a, &rows, err, sizeof err);
        if (rc <= 0) break;
        if (rows < 0) abort();
        for (int64_t i = 0; i < rows && i < 100000; i++) {
            const uint8_t *t;
            size_t len;
            const char *detail;
            int st = ds_arrow_row(a, i, &t, &len, &detail);
            if (st == DS_ARROW_ROW_TEXT) {
                if (len && !t) abort();
                for (size_t k = 0; k < len; k++) sum += t[k]; /* every byte readable (ASan) */
            } else if (!detail) {
                abort();
            }
        }
    }
    if (ds_arrow_peak_bytes(a) > ((uint64_t)64 << 20)) abort();
    ds_arrow_close(a);
    return (int)(sum & 0);
}
