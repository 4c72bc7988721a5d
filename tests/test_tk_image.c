/* Table images of known rank files (tokenizer/tk_image.c): a load from the
 * image gives the same tokenizer as parsing the file (ids of every shared
 * vocabulary on mixed text, fingerprint, specials, token bytes); an image is
 * not used once the rank file changed, nor when it is truncated or in a
 * folder others may write; MKS_CACHE_DIR=off turns images off; an
 * unknown rank file never gets one; at most 8 images are kept (the oldest
 * go).
 *
 * Every byte of an image is checked on every map (issue 32, item 4): zeroed
 * sections, edited header fields, 150 random bit flips, another vocabulary's
 * image with the rank file's identity copied in and edited offset tables
 * are all refused - the rank file is parsed instead, giving its own ids, and
 * the image is rewritten byte for byte as it was - and decoding after an
 * edited offset table never hangs (alarm) or reads out of bounds, even with
 * the digests skipped. The body digests this build expects (IMG_KNOWN) are
 * those of tables built from the rank files. Pruning deletes only files
 * with the image header (never foreign files, links or folders named
 * tk-*.img), and removes temporary files of writers that died (item 5/6). */
#include "tk.h"
#include "tk_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

static const char TEXT[] = "Hello, World! It's 2026: naïve café — Ünïcödé ΚΑΛΗΜΕΡΑ καλημέρα, 你好世界, "
                           "こんにちは, مرحبا, שלום; CamelCaseWords and ALLCAPS'S don't\r\n\n  \t  x = 12345678;\n"
                           "    return foo(bar[i] /* c */);\n\xff\xfe bytes 🎉🎉 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/* tk_image.c's header, as far as the edits below need it: part 1 (this
 * file and its rank file) is the first 88 bytes; part 2 starts with
 * pattern, n_ranks, vocab_size, max_token_len, map3_shift, eot, n_specials;
 * then the masks, byte ranks, fingerprint, name, and the offsets and
 * lengths of the 11 sections. */
#define H_IDENTITY 24 /* dev, ino, size, mtime, ctime: bytes 24..88 */
#define H_MTIME_NS (H_IDENTITY + 32)
#define H_PART2 88
#define H_N_RANKS (H_PART2 + 4)
#define H_MAX_TOKEN_LEN (H_PART2 + 12)
#define H_EOT (H_PART2 + 20)
#define H_N_SPECIALS (H_PART2 + 24)
#define H_BYTE_RANK (H_PART2 + 48)
#define H_NAME (H_PART2 + 32 + 16 + 1024 + 32)
#define H_OFF (H_NAME + 64)
#define H_LEN (H_OFF + 8 * N_SEC)
#define N_SEC 11
enum { S_ARENA, S_TOK_OFF, S_MAP, S_SMAP, S_FILTER, S_PAIR2, S_MAXLEN2, S_MAP3, S_ID2RANK, S_SPECIALS, S_CHARMIN };

static tk_tokenizer *load_any(const char *path) {
    char err[512] = "";
    tk_tokenizer *t = NULL;
    int rc = tk_load(path, TK_PAT_NONE, &t, err, sizeof err);
    CHECK(rc == TK_OK, "load %s: %s", path, err);
    return t;
}

static tk_tokenizer *load(const char *path, bool want_image) {
    tk_tokenizer *t = load_any(path);
    if (t)
        CHECK((t->image != NULL) == want_image, "%s: image %s, expected %s", path, t->image ? "used" : "not used",
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

/* Names of this code's images (tk-*.img, no .tmp) that are regular files. */
static int count_images(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        struct stat st;
        size_t l = strlen(e->d_name);
        n += l > 4 && !strcmp(e->d_name + l - 4, ".img") &&
             fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    }
    closedir(d);
    return n;
}

static void image_of(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    out[0] = 0;
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".img") && snprintf(out, cap, "%s/%s", dir, e->d_name) >= (int)cap)
            out[0] = 0; /* a cut path would name another file: none found */
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

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    uint8_t *b = NULL;
    *n = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long l = ftell(f);
        rewind(f);
        if (l > 0 && (b = malloc((size_t)l)) && fread(b, 1, (size_t)l, f) != (size_t)l) {
            free(b);
            b = NULL;
        }
        if (b) *n = (size_t)l;
    }
    if (f) fclose(f);
    return b;
}

static void write_all(const char *path, const uint8_t *b, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, b, n) == (ssize_t)n, "write %s", path);
    if (fd >= 0) close(fd);
}

static uint64_t get64(const uint8_t *b, size_t at) {
    uint64_t v;
    memcpy(&v, b + at, 8);
    return v;
}

static void put64(uint8_t *b, size_t at, uint64_t v) { memcpy(b + at, &v, 8); }

/* The image file img of rank file src holds the bytes bad (pristine: what
 * the loader wrote): loading src must not use it, must give the tokenizer
 * ref (the rank file's own), and must write the pristine image again. With
 * decode_all, every id is decoded too (an edited offset table used to loop
 * or crash there). */
static void refused(const char *src, const char *img, const uint8_t *bad, size_t n, const uint8_t *pristine, size_t pn,
                    const tk_tokenizer *ref, bool decode_all, const char *what) {
    write_all(img, bad, n);
    tk_tokenizer *t = load_any(src);
    if (!t) return;
    CHECK(t->image == NULL, "%s: the edited image was used", what);
    same(ref, t, what);
    if (decode_all) {
        tk_bytes out = {0};
        for (uint32_t id = 0; id < tk_n_ranks(t); id++) {
            out.len = 0;
            CHECK(tk_decode(t, &id, 1, &out) == TK_OK, "%s: decode %u", what, id);
        }
        tk_bytes_free(&out);
    }
    tk_free(t);
    size_t rn;
    uint8_t *re = read_all(img, &rn);
    CHECK(re && rn == pn && memcmp(re, pristine, pn) == 0, "%s: the image was not rewritten as it was", what);
    free(re);
}

/* An image-like file: this code's header start (magic, version) or not. */
static void fake(const char *dir, const char *name, bool ours, size_t size, time_t mtime) {
    char path[8800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint8_t *b = calloc(1, size ? size : 1);
    if (size >= 12 && ours) {
        memcpy(b, "MKSTKIM", 8);
        b[8] = 3;
    } else if (size) {
        memset(b, 'x', size);
    }
    write_all(path, b, size);
    free(b);
    struct timeval tv[2] = {{mtime, 0}, {mtime, 0}};
    utimes(path, tv);
}

static bool there(const char *dir, const char *name) {
    char path[8800];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

static void corruptions(const char *cache) {
    char gp[4096], cp[4096], gimg[4400], cimg[4400];
    snprintf(gp, sizeof gp, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    snprintf(cp, sizeof cp, "%s/vocab/cl100k_base.tiktoken", MKS_SHARED_DIR);
    struct stat gs, cs;
    CHECK(stat(gp, &gs) == 0 && stat(cp, &cs) == 0, "stat rank files");
    snprintf(gimg, sizeof gimg, "%s/tk-%llx-%llx-0.img", cache, (unsigned long long)gs.st_dev,
             (unsigned long long)gs.st_ino);
    snprintf(cimg, sizeof cimg, "%s/tk-%llx-%llx-0.img", cache, (unsigned long long)cs.st_dev,
             (unsigned long long)cs.st_ino);
    setenv("MKS_CACHE_DIR", "off", 1);
    tk_tokenizer *ref = load(gp, false);
    setenv("MKS_CACHE_DIR", cache, 1);
    size_t n, cn;
    uint8_t *img = read_all(gimg, &n), *cl = read_all(cimg, &cn), *bad = malloc(n > cn ? n : cn);
    CHECK(ref && img && cl && bad && n > H_LEN + 8 * N_SEC && cn > H_LEN + 8 * N_SEC, "images of gpt2 / cl100k_base");
    if (!ref || !img || !cl || !bad || n <= H_LEN + 8 * N_SEC || cn <= H_LEN + 8 * N_SEC) goto out;
    CHECK(get64(img, H_OFF) % 64 == 0 && get64(img, H_OFF) >= H_LEN + 8 * N_SEC &&
              get64(img, H_OFF + 8 * S_TOK_OFF) == (get64(img, H_OFF) + get64(img, H_LEN) + 63) / 64 * 64,
          "the header layout of this test is not tk_image.c's");
    alarm(600); /* an edited offset table used to make decoding loop forever: fail, not hang */

    /* each section zeroed */
    for (int s = 0; s < N_SEC; s++) {
        char what[64];
        snprintf(what, sizeof what, "section %d zeroed", s);
        memcpy(bad, img, n);
        uint64_t o = get64(img, H_OFF + 8 * (size_t)s), l = get64(img, H_LEN + 8 * (size_t)s);
        if (o <= n && l <= n - o) memset(bad + o, 0, l);
        refused(gp, gimg, bad, n, img, n, ref, false, what);
    }
    /* header fields edited: identity, counts, name, offsets */
    static const struct {
        size_t at;
        uint32_t xor ;
        const char *what;
    } hdr[] = {{8, 1, "version"},
               {H_MTIME_NS, 1, "mtime ns"},
               {H_N_RANKS, 1, "n_ranks"},
               {H_MAX_TOKEN_LEN, 1, "max_token_len"},
               {H_EOT, 1, "eot"},
               {H_N_SPECIALS, 1, "n_specials"},
               {H_BYTE_RANK + 4 * 'a', 1, "byte rank of 'a'"},
               {H_NAME, 'g' ^ 'c', "name"},
               {H_OFF + 8 * S_TOK_OFF, 64, "offset of the offset table"},
               {H_LEN + 8 * S_SPECIALS, 1, "length of the specials"}};
    for (size_t k = 0; k < sizeof hdr / sizeof hdr[0]; k++) {
        memcpy(bad, img, n);
        uint32_t v;
        memcpy(&v, bad + hdr[k].at, 4);
        v ^= hdr[k].xor ;
        memcpy(bad + hdr[k].at, &v, 4);
        refused(gp, gimg, bad, n, img, n, ref, false, hdr[k].what);
    }
    /* 150 random single-bit flips anywhere in the file */
    srand(32);
    for (int k = 0; k < 150; k++) {
        char what[64];
        size_t at = ((size_t)rand() << 16 ^ (size_t)rand()) % n;
        int bit = rand() % 8;
        snprintf(what, sizeof what, "bit %d of byte %zu flipped", bit, at);
        memcpy(bad, img, n);
        bad[at] ^= (uint8_t)(1u << bit);
        refused(gp, gimg, bad, n, img, n, ref, false, what);
    }
    /* cl100k_base's image put in gpt2's place, gpt2's identity copied in;
     * then its name and pattern too */
    memcpy(bad, cl, cn);
    memcpy(bad + H_IDENTITY, img + H_IDENTITY, H_PART2 - H_IDENTITY);
    refused(gp, gimg, bad, cn, img, n, ref, false, "cl100k_base's image with gpt2's identity");
    memcpy(bad, cl, cn);
    memcpy(bad + H_IDENTITY, img + H_IDENTITY, H_PART2 - H_IDENTITY);
    memcpy(bad + H_PART2, img + H_PART2, 4);
    memcpy(bad + H_NAME, img + H_NAME, 64);
    refused(gp, gimg, bad, cn, img, n, ref, false, "cl100k_base's image named gpt2");
    /* edited offset tables: a token of negative length (decoding appended
     * 2^64 - 1 bytes: an endless loop), one far outside the arena (a
     * segfault), the last offset moved; with the digests, then without */
    uint64_t to = get64(img, H_OFF + 8 * S_TOK_OFF);
    for (int skip = 0; skip < 2; skip++) {
        tk_image_skip_digests_for_tests = skip;
        static const char *const kinds[] = {"offset below the one before", "offset outside the arena",
                                            "last offset moved"};
        for (int e = 0; e < 3; e++) {
            char what[96];
            snprintf(what, sizeof what, "%s%s", kinds[e], skip ? " (digests skipped)" : "");
            memcpy(bad, img, n);
            size_t at = (size_t)to + 8 * (e == 2 ? tk_n_ranks(ref) : 1000);
            put64(bad, at, e == 0 ? get64(img, at - 8) - 1 : e == 1 ? 1ull << 40 : get64(img, at) - 1);
            refused(gp, gimg, bad, n, img, n, ref, true, what);
        }
        /* an id table naming a rank that does not exist */
        memcpy(bad, img, n);
        put64(bad, (size_t)get64(img, H_OFF + 8 * S_ID2RANK) + 4 * 500, 0x00ffffff00ffffffull);
        refused(gp, gimg, bad, n, img, n, ref, true, skip ? "id table edited (digests skipped)" : "id table edited");
    }
    tk_image_skip_digests_for_tests = false;
    alarm(0);
    /* and the pristine image is used */
    tk_free(load(gp, true));
out:
    free(img);
    free(cl);
    free(bad);
    tk_free(ref);
}

int main(void) {
    char tmpl[] = "/tmp/test_tk_image.XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    char cache[4200], p[4096];
    snprintf(cache, sizeof cache, "%s/cache", tmpl);
    setenv("MKS_CACHE_DIR", cache, 1);
    snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    if (access(p, R_OK)) return 77;

    /* every shared vocabulary: parsed (image written), then from the image;
     * its tables hash to the body digest this build expects */
    const char *names[] = {"gpt2", "cl100k_base", "o200k_base"};
    for (int e = 0; e < 3; e++) {
        snprintf(p, sizeof p, "%s/vocab/%s.tiktoken", MKS_SHARED_DIR, names[e]);
        tk_tokenizer *a = load(p, false);
        char dg[33] = "";
        const char *want = tk_image_known_body(names[e]);
        CHECK(a && tk_image_body_digest(a, dg) == TK_OK && want && strcmp(dg, want) == 0,
              "%s: the tables hash to %s, tk_image.c's IMG_KNOWN expects %s: the table builder or the image layout "
              "changed; put the new value in IMG_KNOWN",
              names[e], dg, want ? want : "nothing");
        CHECK(count_images(cache) == e + 1, "%s: no image written", names[e]);
        tk_tokenizer *b = load(p, true);
        if (a && b) same(a, b, names[e]);
        tk_tokenizer *c = load(p, true); /* two mappings at once */
        if (a && c) same(a, c, names[e]);
        tk_free(a);
        tk_free(b);
        tk_free(c);
    }
    /* a known vocabulary under another pattern: no image */
    {
        char err[512];
        for (int k = 0; k < 2; k++) {
            tk_tokenizer *t = NULL;
            CHECK(tk_load_tiktoken(p, TK_PAT_CL100K, &t, err, sizeof err) == TK_OK && t && !t->image,
                  "o200k_base under the cl100k pattern: %s", t ? "image used" : err);
            tk_free(t);
        }
        CHECK(count_images(cache) == 3, "an image for o200k_base under another pattern");
    }

    corruptions(cache);

    /* images off */
    snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    setenv("MKS_CACHE_DIR", "off", 1);
    tk_free(load(p, false));
    setenv("MKS_CACHE_DIR", cache, 1);

    /* a folder others may write: not used */
    chmod(cache, 0777);
    tk_free(load(p, false));
    chmod(cache, 0700);

    /* a copy of gpt2.tiktoken: no image while its ctime is recent, one
     * after 2 s, none used once the file is touched */
    char copy[4200], cache2[4200], img[4400];
    snprintf(copy, sizeof copy, "%s/gpt2.tiktoken", tmpl);
    snprintf(cache2, sizeof cache2, "%s/cache2", tmpl);
    setenv("MKS_CACHE_DIR", cache2, 1);
    copy_file(p, copy);
    tk_tokenizer *ref = load(copy, false);
    CHECK(count_images(cache2) == 0, "image written for a file changed < 2 s ago");
    tk_free(ref);
    /* nine old images already there: the oldest go, eight are left; files
     * named like images that this code did not write stay, links and
     * folders too; temporary files of writers that died go */
    mkdir(cache2, 0700);
    for (int k = 0; k < 9; k++) {
        char name[64];
        snprintf(name, sizeof name, "tk-0-%x-0.img", k);
        fake(cache2, name, true, 64, 1000 + k);
    }
    fake(cache2, "tk-0-100-0.img", false, 64, 500); /* foreign, older than all */
    fake(cache2, "tk-0-101-0.img", false, 0, 500);  /* foreign, empty */
    {
        char target[4400], link[4400], sub[4400];
        snprintf(target, sizeof target, "%s/elsewhere.img", tmpl);
        snprintf(link, sizeof link, "%s/tk-0-102-0.img", cache2);
        fake(tmpl, "elsewhere.img", true, 64, 400);
        CHECK(symlink(target, link) == 0, "symlink");
        snprintf(sub, sizeof sub, "%s/tk-0-103-0.img", cache2);
        mkdir(sub, 0700);
    }
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char tmpname[8][96];
    time_t now = time(NULL);
    snprintf(tmpname[0], 96, "tk-0-200-0.img.tmp.%d", (int)dead); /* died mid-write */
    fake(cache2, tmpname[0], true, 4 << 20, now);
    snprintf(tmpname[1], 96, "tk-0-201-0.img.tmp.%d", (int)dead); /* died before its first write */
    fake(cache2, tmpname[1], true, 0, now);
    snprintf(tmpname[2], 96, "tk-0-202-0.img.tmp.%d", (int)getppid()); /* a live writer */
    fake(cache2, tmpname[2], true, 1 << 20, now);
    snprintf(tmpname[3], 96, "tk-0-203-0.img.tmp.%d", (int)getppid()); /* pid alive, but an hour old */
    fake(cache2, tmpname[3], true, 1 << 20, now - 3600);
    snprintf(tmpname[4], 96, "tk-0-204-0.img.tmp.%d", (int)dead); /* not ours */
    fake(cache2, tmpname[4], false, 100, now - 3600);
    snprintf(tmpname[5], 96, "tk-0-205-0.img.tmp.%d", (int)dead); /* a link */
    {
        char target[4400], link[4400];
        snprintf(target, sizeof target, "%s/elsewhere.img", tmpl);
        snprintf(link, sizeof link, "%s/%s", cache2, tmpname[5]);
        CHECK(symlink(target, link) == 0, "symlink");
    }
    snprintf(tmpname[6], 96, "tk-0-206-0.img.tmp.x%d", (int)dead); /* not a name this code writes */
    fake(cache2, tmpname[6], true, 100, now - 3600);
    sleep(2);
    ref = load(copy, false);
    {
        char fake0[4400];
        int ours = 0;
        for (int k = 0; k < 9; k++) {
            snprintf(fake0, sizeof fake0, "tk-0-%x-0.img", k);
            ours += there(cache2, fake0);
        }
        CHECK(ours == 7, "%d of the 9 old images left, expected 7 (+ the new one)", ours);
        CHECK(!there(cache2, "tk-0-0-0.img") && !there(cache2, "tk-0-1-0.img"), "the oldest images were kept");
        CHECK(there(cache2, "tk-0-100-0.img") && there(cache2, "tk-0-101-0.img"), "a foreign tk-*.img was deleted");
        CHECK(there(cache2, "tk-0-102-0.img") && there(cache2, "tk-0-103-0.img"), "a link or folder was deleted");
        CHECK(there(tmpl, "elsewhere.img"), "a link's target was deleted");
        CHECK(!there(cache2, tmpname[0]) && !there(cache2, tmpname[1]), "a dead writer's temporary file was kept");
        CHECK(there(cache2, tmpname[2]), "a live writer's temporary file was deleted");
        CHECK(!there(cache2, tmpname[3]), "an hour-old temporary file was kept");
        CHECK(there(cache2, tmpname[4]) && there(cache2, tmpname[5]) && there(cache2, tmpname[6]),
              "a foreign temporary file or link was deleted");
        char cmd[4600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'/tk-0-*", cache2);
        if (system(cmd)) fprintf(stderr, "could not clean %s\n", cache2);
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
    tk_free(load(copy, true));
    /* truncated: ignored */
    struct stat st;
    CHECK(stat(img, &st) == 0 && truncate(img, st.st_size - 64) == 0, "truncate %s", img);
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
    setenv("MKS_CACHE_DIR", cache3, 1);
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
