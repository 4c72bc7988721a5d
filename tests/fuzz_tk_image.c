/* fuzz_tk_image.c - libFuzzer target for the table-image reader
 * (tokenizer/tk_image.c: tk_image_load) next to a real rank file, gpt2's
 * from the shared vocabularies: whatever the image file holds, loading must
 * not crash or hang, and an image it accepts must give the rank file's own
 * tokenizer (ids of a mixed text, fingerprint, token bytes). Replayed over
 * tests/data/fuzz/tk_image in every build (test_replay_tk_image); seeds from
 * tests/data/fuzz/make_tk_image_seeds.py.
 *
 * Input: byte 0 = flags, the rest = payload.
 *   bit 0 clear: the payload is the whole image file.
 *   bit 0 set:   the payload is a list of edits of gpt2's real image (made
 *                once per process): each edit is u8 where (0..10 a section,
 *                anything else the header), u32 little-endian offset in it
 *                (modulo its length), u8 length n, then n bytes written there.
 *   bit 1: copy the real image's first header part (magic, version, the rank
 *          file's identity) over the file's and set its size field to the
 *          file's size, as an attacker copying identities in would - else
 *          nearly every input stops at the first comparison.
 *   bit 2: skip the two digests (tk_image_skip_digests_for_tests): what is
 *          then accepted must still decode every id in bounds and in time
 *          (the structural checks); ids are not compared (tables the digests
 *          would have refused may encode differently).
 * Without gpt2.tiktoken (no shared data) every input is a no-op. */
#include "tk.h"
#include "tk_internal.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MKS_SHARED_DIR
#define MKS_SHARED_DIR MKS_TEST_DATA "/../../../shared" /* fuzz builds: tests/data -> ../shared */
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the header layout of tk_image.c: part 1 is 88 bytes (size field at 16);
 * offsets and lengths of the 11 sections at H_OFF and H_OFF + 88 */
#define H_PART1 88
#define H_TOTAL 16
#define H_OFF (88 + 32 + 16 + 1024 + 32 + 64)
#define N_SEC 11

static const char TEXT[] =
    "Hello, World! naïve café ΚΑΛΗΜΕΡΑ 你好世界 <|endoftext|> x = 12345678;\n\xff\xfe 🎉 aaaaaaaa";

static struct {
    int ready; /* 1: set up, -1: no shared data */
    char dir[128], cache[200], src[512], img[512];
    uint8_t *image;
    size_t image_len;
    tk_ids ref_ids;
    uint8_t ref_fp[32];
    uint32_t ref_vocab;
} G;

static void cleanup(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", G.dir);
    if (G.dir[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", G.dir);
}

static void setup(void) {
    G.ready = -1;
    snprintf(G.src, sizeof G.src, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    struct stat st;
    if (stat(G.src, &st) != 0) return;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(G.dir, sizeof G.dir, "%s/fuzz_tk_image.XXXXXX", base);
    if (!mkdtemp(G.dir)) abort();
    atexit(cleanup);
    snprintf(G.cache, sizeof G.cache, "%s/cache", G.dir);
    snprintf(G.img, sizeof G.img, "%s/tk-%llx-%llx-0.img", G.cache, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    /* the reference: the rank file parsed; then its image, written by that load */
    setenv("MKS_CACHE_DIR", G.cache, 1);
    char err[512];
    tk_tokenizer *t = NULL;
    if (tk_load_tiktoken(G.src, TK_PAT_NONE, &t, err, sizeof err) != TK_OK || t->image) abort();
    if (tk_encode_special(t, (const uint8_t *)TEXT, sizeof TEXT - 1, NULL, (size_t)-1, &G.ref_ids) != TK_OK) abort();
    tk_fingerprint(t, G.ref_fp);
    G.ref_vocab = tk_vocab_size(t);
    tk_free(t);
    FILE *f = fopen(G.img, "rb");
    if (!f) { /* no image (the rank file changed < 2 s ago, or another vocabulary): nothing to fuzz */
        fprintf(stderr, "fuzz_tk_image: no image of %s was written\n", G.src);
        return;
    }
    fseek(f, 0, SEEK_END);
    G.image_len = (size_t)ftell(f);
    rewind(f);
    G.image = malloc(G.image_len);
    if (!G.image || fread(G.image, 1, G.image_len, f) != G.image_len) abort();
    fclose(f);
    G.ready = 1;
}

static uint64_t get64(const uint8_t *b, size_t at) {
    uint64_t v;
    memcpy(&v, b + at, 8);
    return v;
}

/* The file bytes for this input (malloc'd), or NULL. */
static uint8_t *build(const uint8_t *data, size_t size, size_t *n) {
    uint8_t flags = data[0];
    const uint8_t *p = data + 1, *e = data + size;
    uint8_t *b;
    if (!(flags & 1)) {
        *n = size - 1;
        if (!(b = malloc(*n ? *n : 1))) abort();
        memcpy(b, p, *n);
    } else {
        *n = G.image_len;
        if (!(b = malloc(*n))) abort();
        memcpy(b, G.image, *n);
        while (e - p >= 6) {
            uint8_t where = p[0], len = p[5];
            uint32_t off;
            memcpy(&off, p + 1, 4);
            p += 6;
            if (len > e - p) len = (uint8_t)(e - p);
            uint64_t so = 0, sl = H_OFF + 16 * N_SEC; /* the header */
            if (where < N_SEC) {
                so = get64(G.image, H_OFF + 8 * (size_t)where);
                sl = get64(G.image, H_OFF + 8 * N_SEC + 8 * (size_t)where);
            }
            if (sl) {
                uint64_t at = so + off % sl;
                for (uint8_t k = 0; k < len && at + k < *n; k++) b[at + k] = p[k];
            }
            p += len;
        }
    }
    if ((flags & 2) && *n >= H_PART1) {
        uint64_t total = *n;
        memcpy(b, G.image, H_PART1);
        memcpy(b + H_TOTAL, &total, 8);
    }
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!G.ready) setup();
    if (G.ready < 0 || size < 1) return 0;
    size_t n;
    uint8_t *b = build(data, size, &n);
    int fd = open(G.img, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (n && write(fd, b, n) != (ssize_t)n) || close(fd)) abort();
    free(b);
    bool skip = data[0] & 4;
    tk_image_skip_digests_for_tests = skip;
    tk_tokenizer *t = NULL;
    struct stat st;
    int rc = tk_image_load(G.src, TK_PAT_NONE, &t, &st);
    tk_image_skip_digests_for_tests = false;
    if (rc != 0) return 0; /* refused: the loader parses the rank file instead */
    if (!t || !t->image || tk_vocab_size(t) > TK_MAX_VOCAB) abort();
    /* every id decodes in bounds (ASan) and in time (libFuzzer -timeout) */
    tk_bytes out = {0};
    for (uint32_t id = 0; id < tk_vocab_size(t); id++) {
        out.len = 0;
        (void)tk_decode(t, &id, 1, &out);
    }
    tk_bytes_free(&out);
    if (!skip) { /* accepted with its digests: the rank file's own tokenizer */
        tk_ids ids = {0};
        uint8_t fp[32];
        tk_fingerprint(t, fp);
        if (tk_vocab_size(t) != G.ref_vocab || memcmp(fp, G.ref_fp, 32)) abort();
        if (tk_encode_special(t, (const uint8_t *)TEXT, sizeof TEXT - 1, NULL, (size_t)-1, &ids) != TK_OK ||
            ids.len != G.ref_ids.len || memcmp(ids.ids, G.ref_ids.ids, ids.len * 4))
            abort();
        tk_ids_free(&ids);
    }
    tk_free(t);
    return 0;
}
