/* fuzz_tk_common.h - shared by the tokenizer-loader fuzz targets
 * (fuzz_tiktoken.c, fuzz_tokenizer_json.c, fuzz_encoder_json.c).
 *
 * Input layout of every target: byte 0 = flags (bits 0-1: the pattern passed
 * to the loader, 0 = none; bit 2: leave the second file out), bytes 1-2 =
 * length of the first file (little-endian, clipped to what is there), then
 * the first file's bytes, then the second file's bytes. The files are written
 * into a private temporary folder (the .tiktoken sidecar is found by name, so
 * a memfd cannot stand in for it). */
#ifndef FUZZ_TK_COMMON_H
#define FUZZ_TK_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tk.h"

typedef struct {
    tk_pattern pat;
    int second;           /* write the second file */
    const uint8_t *a, *b; /* the two files */
    size_t alen, blen;
} fuzz_tk_input;

__attribute__((unused)) static int fuzz_tk_split(const uint8_t *data, size_t size, fuzz_tk_input *in) {
    if (size < 3) return -1;
    in->pat = (tk_pattern)(data[0] & 3);
    in->second = !(data[0] & 4);
    size_t want = (size_t)data[1] | (size_t)data[2] << 8, rest = size - 3;
    in->a = data + 3;
    in->alen = want < rest ? want : rest;
    in->b = in->a + in->alen;
    in->blen = rest - in->alen;
    return 0;
}

static char fuzz_tk_dir[128];

static void fuzz_tk_cleanup(void) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_tk_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_tk_dir);
}

/* The private folder, made once per process. */
static const char *fuzz_tk_folder(void) {
    if (!fuzz_tk_dir[0]) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_tk_dir, sizeof fuzz_tk_dir, "%s/fuzz_tk.XXXXXX", base);
        if (!mkdtemp(fuzz_tk_dir)) abort();
        atexit(fuzz_tk_cleanup);
    }
    return fuzz_tk_dir;
}

static void fuzz_tk_write(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (fclose(f)) abort();
}

/* Use a loaded tokenizer: encode/decode round trip, count, specials, every
 * id's bytes. Any mismatch is a bug in the tables the loader built. */
__attribute__((unused)) static void fuzz_tk_exercise(tk_tokenizer *t) {
    /* multilingual words take the merge from characters (bpe.c): its
     * straddle minima are built from the fuzzed vocabulary */
    static const char multi[] = " \xd0\xbf\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 \xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96"
                                "\xe7\x95\x8c \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1 caf\xc3\xa9s";
    static const char *const texts[] = {"hello world", "  \n\n x1234 'll \xff\xfe<|endoftext|>",
                                        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", multi};
    for (size_t k = 0; k < 4; k++) {
        const uint8_t *s = (const uint8_t *)texts[k];
        size_t n = strlen(texts[k]), count = 0;
        tk_ids ids = {0};
        tk_bytes out = {0};
        /* a fuzzed tokenizer.json may refuse a text (its regex work budget,
         * a normalizer's output bound): that document only, no ids left */
        int rc = tk_encode(t, s, n, &ids);
        if (tk_err_is_document(rc)) {
            if (ids.len || tk_count(t, s, n, &count) != rc) abort();
            tk_ids_free(&ids);
            continue;
        }
        if (rc != TK_OK) abort();
        if (tk_count(t, s, n, &count) != TK_OK || count != ids.len) abort();
        rc = tk_decode(t, ids.ids, ids.len, &out);
        if (rc != TK_OK && !tk_err_is_document(rc)) abort();
        if (rc == TK_OK && tk_lossless(t) && (out.len != n || memcmp(out.data, s, n) != 0)) abort();
        tk_ids_free(&ids);
        rc = tk_encode_special(t, s, n, NULL, (size_t)-1, &ids);
        if (rc != TK_OK && !tk_err_is_document(rc)) abort();
        tk_bytes_free(&out);
        rc = tk_decode(t, ids.ids, ids.len, &out);
        if (rc != TK_OK && !tk_err_is_document(rc)) abort();
        tk_ids_free(&ids);
        tk_bytes_free(&out);
        /* tiktoken's _encode_bytes (invalid UTF-8 in texts[1]): a rank
         * tokenizer gives back the bytes; the others refuse invalid UTF-8 */
        rc = tk_encode_bytes(t, s, n, &ids);
        if (rc == TK_OK) {
            rc = tk_decode(t, ids.ids, ids.len, &out);
            if (rc != TK_OK && !tk_err_is_document(rc)) abort();
            if (rc == TK_OK && tk_lossless(t) && (out.len != n || memcmp(out.data, s, n) != 0)) abort();
        } else if (rc != TK_ERR_UNSUPPORTED && !tk_err_is_document(rc)) {
            abort();
        }
        tk_ids_free(&ids);
        tk_bytes_free(&out);
    }
    uint32_t vs = tk_vocab_size(t);
    if (vs > TK_MAX_VOCAB) abort();
    for (uint32_t id = 0; id < vs && id < 70000; id++) {
        const uint8_t *p;
        size_t len;
        if (tk_token_bytes(t, id, &p, &len) == TK_OK && len && p[0] == 0x5A) {
            volatile uint8_t last = p[len - 1]; /* ASan checks the whole token is readable */
            (void)last;
        }
    }
    uint32_t eot;
    if (tk_eot_id(t, &eot) == TK_OK && eot >= vs) abort();
    uint8_t fp[32];
    tk_fingerprint(t, fp);
}

#endif
