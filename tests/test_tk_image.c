/* Table images of known rank files (tokenizer/tk_image.c): a load from the
 * image gives the same tokenizer as parsing the file (ids of every shared
 * vocabulary on mixed text, fingerprint, specials, token bytes); an image is
 * not used once the rank file changed, nor when it is truncated, corrupt in
 * its header, or in a folder others may write; MKSHARDS_CACHE_DIR=off turns
 * images off; an unknown rank file never gets one; at most 8 images are
 * kept (the oldest go). */
#include "tk.h"
#include "tk_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static int failures;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                      \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

static const char TEXT[] = "Hello, World! It's 2026: naïve café — Ünïcödé ΚΑΛΗΜΕΡΑ καλημέρα, 你好世界, "
                           "こんにちは, مرحبا, שלום; CamelCaseWords and ALLCAPS'S don't\r\n\n  \t  x = 12345678;\n"
                           "    return foo(bar[i] /* c */);\n\xff\xfe bytes 🎉🎉 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

static tk_tokenizer *load(const char *path, bool want_image) {
    char err[512] = "";
    tk_tokenizer *t = NULL;
    int rc = tk_load(path, TK_PAT_NONE, &t, err, sizeof err);
    CHECK(rc == TK_OK, "load %s: %s", path, err);
    if (t) CHECK((t->image != NULL) == want_image, "%s: image %s, expected %s", path, t->image ? "used" : "not used",
                 want_image ? "used" : "not used");
    return t;
}

static void same(const tk_tokenizer *a, const tk_tokenizer *b, const char *what) {
    uint8_t fa[32], fb[32];
    tk_fingerprint(a, fa);
    tk_fingerprint(b, fb);
    CHECK(memcmp(fa, fb, 32) == 0, "%s: fingerprints differ", what);
    CHECK(tk_n_ranks(a) == tk_n_ranks(b) && tk_vocab_size(a) == tk_vocab_size(b), "%s: sizes differ", what);
    CHECK(tk_get_pattern(a) == tk_get_pattern(b) && strcmp(tk_name(a), tk_name(b)) == 0, "%s: pattern/name", what);
    CHECK(tk_n_specials(a) == tk_n_specials(b), "%s: specials", what);
    for (size_t k = 0; k < tk_n_specials(a) && k < tk_n_specials(b); k++)
        CHECK(strcmp(tk_specials(a)[k].text, tk_specials(b)[k].text) == 0 &&
                  tk_specials(a)[k].id == tk_specials(b)[k].id,
              "%s: special %zu", what, k);
    uint32_t ea, eb;
    CHECK(tk_eot_id(a, &ea) == tk_eot_id(b, &eb) && ea == eb, "%s: eot", what);
    tk_ids x = {0}, y = {0};
    CHECK(tk_encode(a, (const uint8_t *)TEXT, sizeof TEXT - 1, &x) == TK_OK, "%s: encode", what);
    CHECK(tk_encode(b, (const uint8_t *)TEXT, sizeof TEXT - 1, &y) == TK_OK, "%s: encode", what);
    CHECK(x.len == y.len && x.len && memcmp(x.ids, y.ids, x.len * 4) == 0, "%s: ids differ", what);
    tk_bytes da = {0}, db = {0};
    CHECK(tk_decode(a, x.ids, x.len, &da) == TK_OK && tk_decode(b, y.ids, y.len, &db) == TK_OK, "%s: decode", what);
    CHECK(da.len == sizeof TEXT - 1 && db.len == da.len && memcmp(da.data, TEXT, da.len) == 0 &&
              memcmp(db.data, TEXT, db.len) == 0,
          "%s: round trip", what);
    for (uint32_t id = 0; id < tk_n_ranks(a); id += 997) {
        const uint8_t *pa, *pb;
        size_t la, lb;
        CHECK(tk_token_bytes(a, id, &pa, &la) == TK_OK && tk_token_bytes(b, id, &pb, &lb) == TK_OK && la == lb &&
                  memcmp(pa, pb, la) == 0 && tk_rank_of(b, pa, la) == (int64_t)id,
              "%s: token %u", what, id);
    }
    tk_ids_free(&x);
    tk_ids_free(&y);
    tk_bytes_free(&da);
    tk_bytes_free(&db);
}

static int count_images(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".img") != NULL && !strstr(e->d_name, ".tmp");
    closedir(d);
    return n;
}

static void image_of(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    out[0] = 0;
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".img")) snprintf(out, cap, "%s/%s", dir, e->d_name);
    closedir(d);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    char buf[65536];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

int main(void) {
    char tmpl[] = "/tmp/test_tk_image.XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    char cache[4200], p[4096];
    snprintf(cache, sizeof cache, "%s/cache", tmpl);
    setenv("MKSHARDS_CACHE_DIR", cache, 1);
    snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    if (access(p, R_OK)) return 77;

    /* every shared vocabulary: parsed (image written), then from the image */
    const char *names[] = {"gpt2", "cl100k_base", "o200k_base"};
    for (int e = 0; e < 3; e++) {
        snprintf(p, sizeof p, "%s/vocab/%s.tiktoken", MKS_SHARED_DIR, names[e]);
        tk_tokenizer *a = load(p, false);
        CHECK(count_images(cache) == e + 1, "%s: no image written", names[e]);
        tk_tokenizer *b = load(p, true);
        if (a && b) same(a, b, names[e]);
        tk_tokenizer *c = load(p, true); /* two mappings at once */
        if (a && c) same(a, c, names[e]);
        tk_free(a);
        tk_free(b);
        tk_free(c);
    }

    /* images off */
    snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    setenv("MKSHARDS_CACHE_DIR", "off", 1);
    tk_free(load(p, false));
    setenv("MKSHARDS_CACHE_DIR", cache, 1);

    /* a folder others may write: not used */
    chmod(cache, 0777);
    tk_free(load(p, false));
    chmod(cache, 0700);

    /* a copy of gpt2.tiktoken: no image while its ctime is recent, one
     * after 2 s, none used once the file is touched */
    char copy[4200], cache2[4200], img[4400];
    snprintf(copy, sizeof copy, "%s/gpt2.tiktoken", tmpl);
    snprintf(cache2, sizeof cache2, "%s/cache2", tmpl);
    setenv("MKSHARDS_CACHE_DIR", cache2, 1);
    copy_file(p, copy);
    tk_tokenizer *ref = load(copy, false);
    CHECK(count_images(cache2) == 0, "image written for a file changed < 2 s ago");
    tk_free(ref);
    /* nine old images already there: the oldest go, eight are left */
    mkdir(cache2, 0700);
    for (int k = 0; k < 9; k++) {
        char fake[4400];
        snprintf(fake, sizeof fake, "%s/tk-0-%x-0.img", cache2, k);
        FILE *f = fopen(fake, "w");
        if (f) fclose(f);
        struct timeval old[2] = {{1000 + k, 0}, {1000 + k, 0}};
        utimes(fake, old);
    }
    sleep(2);
    ref = load(copy, false);
    CHECK(count_images(cache2) == 8, "%d images after pruning, expected 8", count_images(cache2));
    {
        char fake[4400];
        snprintf(fake, sizeof fake, "%s/tk-0-0-0.img", cache2);
        CHECK(access(fake, F_OK) != 0, "the oldest image was kept");
        for (int k = 0; k < 9; k++) {
            snprintf(fake, sizeof fake, "%s/tk-0-%x-0.img", cache2, k);
            unlink(fake);
        }
    }
    CHECK(count_images(cache2) == 1, "no image after 2 s");
    tk_tokenizer *b = load(copy, true);
    if (ref && b) same(ref, b, "copy");
    tk_free(b);
    /* header corrupt: ignored (and replaced by a fresh image) */
    image_of(cache2, img, sizeof img);
    int fd = open(img, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "X", 1, 0) == 1, "corrupt %s", img);
    if (fd >= 0) close(fd);
    tk_free(load(copy, false));
    /* truncated: ignored */
    unlink(img);
    tk_free(load(copy, false)); /* writes a fresh image */
    tk_free(load(copy, true));
    image_of(cache2, img, sizeof img);
    struct stat st;
    CHECK(stat(img, &st) == 0 && truncate(img, st.st_size - 64) == 0, "truncate %s", img);
    tk_free(load(copy, false));
    unlink(img);
    tk_free(load(copy, false));
    tk_free(load(copy, true));
    /* the rank file touched (mtime, ctime change): the image is stale */
    struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
    CHECK(utimes(copy, tv) == 0, "utimes");
    b = load(copy, false);
    if (ref && b) same(ref, b, "touched copy");
    tk_free(b);
    tk_free(ref);

    /* an unknown rank file (a known one with a line dropped) never gets an image */
    char unk[4200], cache3[4200];
    snprintf(unk, sizeof unk, "%s/unknown.tiktoken", tmpl);
    snprintf(cache3, sizeof cache3, "%s/cache3", tmpl);
    setenv("MKSHARDS_CACHE_DIR", cache3, 1);
    {
        FILE *a = fopen(p, "rb"), *o = fopen(unk, "wb");
        char line[512];
        int k = 0;
        while (a && o && fgets(line, sizeof line, a))
            if (k++ < 50000) fputs(line, o);
        if (a) fclose(a);
        if (o) fclose(o);
    }
    sleep(2);
    char err[512];
    tk_tokenizer *u = NULL;
    CHECK(tk_load_tiktoken(unk, TK_PAT_GPT2, &u, err, sizeof err) == TK_OK, "unknown: %s", err);
    tk_free(u);
    CHECK(count_images(cache3) == 0, "image written for an unknown rank file");

    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpl);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    else printf("test_tk_image: ok\n");
    return failures ? 1 : 0;
}
