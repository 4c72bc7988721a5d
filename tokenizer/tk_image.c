/* tk_image.c - the built tables of an upstream vocabulary, kept as a file
 * image that later processes map instead of rebuilding them.
 *
 * Loading o200k_base from its .tiktoken file (3.6 MB of base64 lines: parse,
 * sha256 recognition, hash maps, pair tables, fingerprint) takes tens of
 * milliseconds, more than encoding a few hundred small documents. The first
 * load of a *known* rank file (recognised by sha256, so its contents are the
 * upstream ones) writes the finished tables to
 *   $MKS_CACHE_DIR, else $XDG_CACHE_HOME/mkshards, else $HOME/.cache/mkshards
 * as tk-<dev>-<inode>-<pattern>.img; later loads of the same file map that
 * image read-only.
 *
 * An image is a cache, and a cache must never change a result: every byte
 * of it is checked on every map, against values that do not come from the
 * image itself.
 *  - Its first header part (magic, version, sizes, the rank file's device,
 *    inode, size, mtime and ctime in ns, the requested pattern) must equal,
 *    byte for byte, the header this build would write for that rank file now.
 *  - The rank file's bytes are hashed (XXH3-128, 0.06-0.3 ms) and must be the
 *    upstream file the image names (IMG_KNOWN: its size and digest), so an
 *    image cannot be moved onto another file by copying identities in.
 *  - Everything after that - the rest of the header (counts, offsets) and
 *    all 11 sections with their padding - is hashed (XXH3-128, 0.3-0.6 ms)
 *    and must equal the digest this build's table builder gives for that
 *    vocabulary (IMG_KNOWN, checked by tests/test_tk_image.c against tables
 *    built from the rank files). The tables are a pure function of the
 *    upstream tokens and the builder, so the expected bytes are known in
 *    advance: a zeroed section, a flipped bit, an edited offset table or
 *    header, another vocabulary's tables or another build's layout all fail,
 *    whether or not anything in the image was "fixed up" to match.
 * Anything else sends the loader back to the rank file, which rewrites the
 * image. After the digests, the offset and id tables are checked for shape
 * as well (monotone, in range): decoding can never loop or read out of
 * bounds on image contents, even if the digests were skipped.
 *
 * XXH3 is not a cryptographic hash: the digests stop accidents, stale or
 * copied files and edits, not someone who can write the private cache folder
 * and crafts XXH3 second preimages (such a person can change the program).
 * Images are private caches: the folder must belong to this user and not be
 * writable by others, the file too; an image is not written for a rank file
 * changed within the last 2 s (its timestamps could repeat), nor when the
 * builder's tables do not hash to IMG_KNOWN (then images are simply off).
 * MKS_CACHE_DIR=off (or empty) turns images off.
 */
#include "tk_engine.h"
#include "mks_common.h"
#include "mks_env.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define IMG_VERSION 3u /* 2: the straddle minima (S_CHARMIN); 3: digests checked against IMG_KNOWN */
#define IMG_ALIGN 64u
#define IMG_MAGIC "MKSTKIM" /* 8 bytes with its NUL */

enum {
    S_ARENA,
    S_TOK_OFF,
    S_MAP,
    S_SMAP,
    S_FILTER,
    S_PAIR2,
    S_MAXLEN2,
    S_MAP3,
    S_ID2RANK,
    S_SPECIALS,
    S_CHARMIN,
    S_COUNT
};

typedef struct {
    /* part 1: this file and the rank file it was made from */
    char magic[8];
    uint32_t version, hdr_size;
    uint64_t total;
    uint64_t dev, ino, size;
    int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
    uint32_t req_pat, reserved;
    /* part 2 (the "body" with the sections): the tables */
    uint32_t pattern, n_ranks, vocab_size, max_token_len, map3_shift, eot, n_specials, reserved2;
    uint64_t map_mask, smap_mask;
    uint32_t byte_rank[256];
    uint8_t fingerprint[32];
    char name[64];
    uint64_t off[S_COUNT], len[S_COUNT];
} img_hdr;
#define IMG_BODY offsetof(img_hdr, pattern)
/* no padding anywhere: every header byte is written and checked */
_Static_assert(IMG_BODY == 88 && sizeof(img_hdr) == 88 + 32 + 16 + 1024 + 32 + 64 + 16 * S_COUNT,
               "img_hdr has padding");

/* The upstream rank files that get images: name, pattern, size and XXH3-128
 * of the file, and XXH3-128 of the image body (header part 2 + sections)
 * that this build's table builder makes for it. The body digests change
 * whenever the tables or their layout do: tests/test_tk_image.c builds the
 * tables from the rank files and fails, printing the new value, until they
 * are updated here (meanwhile no image is written or used: slower, never
 * wrong). */
typedef struct {
    const char *name;
    tk_pattern pat;
    uint64_t size;
    const char *source; /* XXH3-128 of the rank file, canonical (big-endian) hex */
    const char *body;   /* XXH3-128 of the image body */
} img_known;
static const img_known IMG_KNOWN[] = {
    {"gpt2", TK_PAT_GPT2, 835554, "aa5ef69a716d8a563cb2fbe95939bd2d", "d759e29ba52de8c42206f34ca33e68f5"},
    {"cl100k_base", TK_PAT_CL100K, 1681126, "7cdb781bb5d59657aa5d7bf38900641a", "40ec85005dc5133fd169084c843d3f44"},
    {"o200k_base", TK_PAT_O200K, 3613922, "dee5d4ced09a2db672a095e82ca109d6", "9b714e74f47674f0d84785fd5211e824"},
};

/* Tests only: skip both digests, to check that the structural checks alone
 * keep decoding in bounds. */
bool tk_image_skip_digests_for_tests;

static const img_known *known_of(const char *name) {
    for (size_t k = 0; k < sizeof IMG_KNOWN / sizeof IMG_KNOWN[0]; k++)
        if (strcmp(name, IMG_KNOWN[k].name) == 0) return &IMG_KNOWN[k];
    return NULL;
}

static void hex128(XXH128_hash_t h, char out[33]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
}

/* XXH3-128 of the regular file open on fd, which must hold exactly size
 * bytes (read with pread: a file truncated meanwhile gives a short read,
 * not the SIGBUS a mapping would). */
static bool file_digest(int fd, uint64_t size, char out[33]) {
    enum { CHUNK = 1 << 18 };
    XXH3_state_t *s = XXH3_createState();
    uint8_t *buf = malloc(CHUNK);
    bool ok = s && buf && XXH3_128bits_reset(s) == XXH_OK;
    for (uint64_t at = 0; ok && at < size;) {
        size_t want = size - at < CHUNK ? (size_t)(size - at) : CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) ok = false;
        else {
            XXH3_128bits_update(s, buf, (size_t)got);
            at += (uint64_t)got;
        }
    }
    if (ok) {
        uint8_t extra;
        ok = pread(fd, &extra, 1, (off_t)size) == 0; /* and nothing more */
    }
    if (ok) hex128(XXH3_128bits_digest(s), out);
    free(buf);
    XXH3_freeState(s);
    return ok;
}

/* The image folder, or false when images are off or no folder is known. */
static bool image_dir(char *out, size_t cap) {
    const char *d = mks_getenv("MKS_CACHE_DIR");
    int n;
    if (d) {
        if (!d[0] || strcmp(d, "off") == 0) return false;
        n = snprintf(out, cap, "%s", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && d[0] == '/') {
        n = snprintf(out, cap, "%s/mkshards", d);
    } else if ((d = getenv("HOME")) && d[0] == '/') {
        n = snprintf(out, cap, "%s/.cache/mkshards", d);
    } else {
        return false;
    }
    return n > 0 && (size_t)n < cap;
}

static bool private_dir(const char *dir) {
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 022);
}

static bool image_path(const struct stat *src, tk_pattern pat, char *out, size_t cap) {
    char dir[3800];
    if (!image_dir(dir, sizeof dir)) return false;
    int n = snprintf(out, cap, "%s/tk-%llx-%llx-%d.img", dir, (unsigned long long)src->st_dev,
                     (unsigned long long)src->st_ino, (int)pat);
    return n > 0 && (size_t)n < cap;
}

/* Header part 1 as this build writes it for the rank file *src. */
static void part1(img_hdr *h, const struct stat *src, tk_pattern pat, uint64_t total) {
    memset(h, 0, IMG_BODY);
    memcpy(h->magic, IMG_MAGIC, 8);
    h->version = IMG_VERSION;
    h->hdr_size = sizeof *h;
    h->total = total;
    h->dev = (uint64_t)src->st_dev;
    h->ino = (uint64_t)src->st_ino;
    h->size = (uint64_t)src->st_size;
    h->mtime_s = src->st_mtim.tv_sec;
    h->mtime_ns = src->st_mtim.tv_nsec;
    h->ctime_s = src->st_ctim.tv_sec;
    h->ctime_ns = src->st_ctim.tv_nsec;
    h->req_pat = (uint32_t)pat;
}

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Expected byte length of each section, from the header's counts; offsets
 * in order, aligned, inside the file. */
static bool section_sizes_ok(const img_hdr *h) {
    if (h->n_ranks < 256 || h->n_ranks > TK_MAX_VOCAB || h->vocab_size < h->n_ranks || h->vocab_size > TK_MAX_VOCAB)
        return false;
    if (h->map3_shift < 32 || h->map3_shift > 60 || h->map_mask > (1ull << 32) || h->smap_mask > (1ull << 32))
        return false;
    if ((h->map_mask & (h->map_mask + 1)) || (h->smap_mask & (h->smap_mask + 1))) return false;
    if (h->max_token_len == 0 || h->max_token_len > TK_MAX_TOKEN_BYTES) return false;
    const uint64_t want[S_COUNT] = {
        [S_TOK_OFF] = ((uint64_t)h->n_ranks + 1) * 8,
        [S_MAP] = (h->map_mask + 1) * 8,
        [S_SMAP] = (h->smap_mask + 1) * sizeof(tk_shortslot),
        [S_FILTER] = (1u << TK_FILTER_BITS) / 8,
        [S_PAIR2] = 65536 * 4,
        [S_MAXLEN2] = 65536,
        [S_MAP3] = ((uint64_t)1 << (64 - h->map3_shift)) * 8,
        [S_ID2RANK] = (uint64_t)h->vocab_size * 4,
        [S_CHARMIN] = sizeof(tk_charmin),
    };
    uint64_t end = sizeof *h;
    for (int s = 0; s < S_COUNT; s++) {
        if (h->off[s] % IMG_ALIGN || h->off[s] < end || h->off[s] > h->total || h->len[s] > h->total - h->off[s])
            return false;
        if (s != S_ARENA && s != S_SPECIALS && h->len[s] != want[s]) return false;
        end = h->off[s] + h->len[s];
    }
    return h->len[S_ARENA] <= (uint64_t)h->n_ranks * h->max_token_len;
}

/* The shape of what decoding reads (token offsets, id -> rank, single
 * bytes): with these, no id makes decoding read outside the arena or append
 * more than max_token_len bytes per token. */
static bool tables_shape_ok(const img_hdr *h, const uint8_t *b) {
    const uint64_t *off = (const uint64_t *)(b + h->off[S_TOK_OFF]);
    const uint32_t *id2r = (const uint32_t *)(b + h->off[S_ID2RANK]);
    const uint8_t *arena = b + h->off[S_ARENA];
    if (off[0] != 0 || off[h->n_ranks] != h->len[S_ARENA]) return false;
    uint64_t longest = 0;
    for (uint32_t r = 0; r < h->n_ranks; r++) {
        if (off[r + 1] <= off[r] || off[r + 1] - off[r] > h->max_token_len) return false; /* no empty token */
        if (off[r + 1] - off[r] > longest) longest = off[r + 1] - off[r];
    }
    if (longest != h->max_token_len) return false;
    for (uint32_t i = 0; i < h->vocab_size; i++)
        if (id2r[i] != TK_NO_RANK && id2r[i] >= h->n_ranks) return false;
    for (int c = 0; c < 256; c++) {
        uint32_t r = h->byte_rank[c];
        if (r >= h->n_ranks || off[r + 1] - off[r] != 1 || arena[off[r]] != c) return false;
    }
    return h->eot == TK_NO_RANK || h->eot < h->vocab_size;
}

int tk_image_load(const char *path, tk_pattern pat, tk_tokenizer **out, struct stat *src) {
    memset(src, 0, sizeof *src);
    if (stat(path, src) != 0 || !S_ISREG(src->st_mode)) {
        src->st_ino = 0;
        return 1;
    }
    char ip[4096], dir[3800];
    if (!image_path(src, pat, ip, sizeof ip) || !image_dir(dir, sizeof dir) || !private_dir(dir)) return 1;
    int fd = open(ip, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), sfd = -1;
    if (fd < 0) return 1;
    struct stat ist, sst;
    img_hdr h, want;
    void *base = MAP_FAILED;
    tk_tokenizer *t = NULL;
    if (fstat(fd, &ist) || !S_ISREG(ist.st_mode) || ist.st_uid != geteuid() || (ist.st_mode & 022) ||
        (size_t)ist.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        goto no;
    /* part 1: exactly what this build writes for this rank file */
    part1(&want, src, pat, (uint64_t)ist.st_size);
    if (memcmp(&h, &want, IMG_BODY) || !memchr(h.name, 0, sizeof h.name)) goto no;
    const img_known *kv = known_of(h.name);
    if (!kv || h.pattern != (uint32_t)kv->pat || (pat != TK_PAT_NONE && pat != kv->pat) || h.n_specials > 64 ||
        !section_sizes_ok(&h) || (uint64_t)src->st_size != kv->size)
        goto no;
    /* the rank file is that upstream file (its bytes, not only its stat) */
    char dg[33];
    if (!tk_image_skip_digests_for_tests) {
        sfd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (sfd < 0 || fstat(sfd, &sst) || !S_ISREG(sst.st_mode) || !same_file(&sst, src) ||
            !file_digest(sfd, kv->size, dg) || strcmp(dg, kv->source))
            goto no;
    }
    base = mmap(NULL, h.total, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (base == MAP_FAILED) goto no;
    const uint8_t *b = base;
    /* the mapping is what was checked above (not a file rewritten since),
     * and its body is the one this build makes for that vocabulary */
    if (memcmp(b, &h, sizeof h)) goto no;
    if (!tk_image_skip_digests_for_tests) {
        hex128(XXH3_128bits(b + IMG_BODY, h.total - IMG_BODY), dg);
        if (strcmp(dg, kv->body)) goto no;
    }
    if (!tables_shape_ok(&h, b)) goto no;
    if (!(t = calloc(1, sizeof *t))) goto no;
    t->image = base;
    t->image_len = h.total;
    t->n_ranks = h.n_ranks;
    t->vocab_size = h.vocab_size;
    t->max_token_len = h.max_token_len;
    t->map3_shift = h.map3_shift;
    t->eot = h.eot;
    t->pattern = (tk_pattern)h.pattern;
    t->known = true;
    memcpy(t->byte_rank, h.byte_rank, sizeof t->byte_rank);
    memcpy(t->fingerprint, h.fingerprint, 32);
    memcpy(t->name, h.name, sizeof t->name);
    t->arena = (uint8_t *)(b + h.off[S_ARENA]);
    t->tok_off = (uint64_t *)(b + h.off[S_TOK_OFF]);
    t->map.slots = (uint64_t *)(b + h.off[S_MAP]);
    t->map.mask = h.map_mask;
    t->smap.slots = (tk_shortslot *)(b + h.off[S_SMAP]);
    t->smap.mask = h.smap_mask;
    t->filter = (uint64_t *)(b + h.off[S_FILTER]);
    t->pair2 = (uint32_t *)(b + h.off[S_PAIR2]);
    t->maxlen2 = (uint8_t *)(b + h.off[S_MAXLEN2]);
    t->map3 = (uint64_t *)(b + h.off[S_MAP3]);
    t->id_to_rank = (uint32_t *)(b + h.off[S_ID2RANK]);
    t->charmin = (const tk_charmin *)(b + h.off[S_CHARMIN]);
    t->bad_rank = t->bad_rank2 = t->bad_id = TK_NO_RANK;
    /* specials: (id u32, len u32, text) each, filling the section exactly */
    tk_special sp[64];
    char *texts[64];
    size_t ns = 0;
    const uint8_t *q = b + h.off[S_SPECIALS], *qe = q + h.len[S_SPECIALS];
    bool ok = true;
    for (; ns < h.n_specials && ok; ns++) {
        uint32_t id, len;
        if (qe - q < 8) {
            ok = false;
            break;
        }
        memcpy(&id, q, 4);
        memcpy(&len, q + 4, 4);
        q += 8;
        if (len == 0 || len > (size_t)(qe - q) || memchr(q, 0, len) || id >= h.vocab_size || id < h.n_ranks ||
            !(texts[ns] = strndup((const char *)q, len))) {
            ok = false;
            break;
        }
        sp[ns] = (tk_special){texts[ns], id};
        q += len;
    }
    if (ok) ok = q == qe && tk_set_specials(t, sp, ns) == TK_OK && t->eot == h.eot;
    for (size_t k = 0; k < ns; k++) free(texts[k]);
    if (!ok || !(t->reach = calloc(t->n_ranks, 1))) goto no;
    t->serial = tk_next_serial();
    tk_classes_init();
    close(fd);
    if (sfd >= 0) close(sfd);
    *out = t;
    return 0;
no:
    if (t) {
        tk_free(t); /* unmaps base */
    } else if (base != MAP_FAILED) {
        munmap(base, h.total);
    }
    close(fd);
    if (sfd >= 0) close(sfd);
    return 1;
}

static int mkdir_private(const char *dir) {
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p) return -1;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == 0) {
            char c = p[i];
            p[i] = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
            p[i] = c;
        }
    }
    return private_dir(dir) ? 0 : -1;
}

/* Names this code writes: tk-<hex>-<hex>-<decimal>.img, and while one is
 * written, that name + .tmp.<pid>. Returns 1 for an image, 2 for a
 * temporary file (*pid set), 0 for anything else. */
static int our_name(const char *s, long *pid) {
    if (strncmp(s, "tk-", 3)) return 0;
    s += 3;
    for (int part = 0; part < 3; part++) {
        const char *d = s;
        while (part < 2 ? ((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')) : (*s >= '0' && *s <= '9')) s++;
        if (s == d || s - d > 16 || *s != (part < 2 ? '-' : '.')) return 0;
        s++;
    }
    if (!strcmp(s, "img")) return 1;
    if (strncmp(s, "img.tmp.", 8)) return 0;
    s += 8;
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || *e || errno || v <= 0 || v > 0x7fffffffL || *s < '0' || *s > '9') return 0;
    *pid = v;
    return 2;
}

/* A regular file of this user that starts with an image header this code
 * wrote (magic, a version number; a temporary file may also be empty: a
 * writer killed before its first write). Opened without following links,
 * checked on the descriptor; *st receives its stat. */
static bool our_file(int dfd, const char *name, bool may_be_empty, struct stat *st) {
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return false;
    uint8_t head[12];
    bool ok = fstat(fd, st) == 0 && S_ISREG(st->st_mode) && st->st_uid == geteuid();
    if (ok && !(may_be_empty && st->st_size == 0)) {
        uint32_t version;
        ok = pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head && memcmp(head, IMG_MAGIC, 8) == 0;
        memcpy(&version, head + 8, 4);
        ok = ok && version >= 1 && version <= 255;
    }
    close(fd);
    return ok;
}

/* unlink name if it is still the file checked as *st */
static void unlink_checked(int dfd, const char *name, const struct stat *st) {
    struct stat now;
    if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
        unlinkat(dfd, name, 0);
}

/* Housekeeping before an image is written: at most IMG_KEEP images stay (the
 * oldest by mtime go first), so copies of vocabularies in temporary folders
 * (tests, scratch runs) cannot fill the disk with images over time, and
 * temporary files of writers that died (kill -9 while writing: 4-11 MB each)
 * are removed: their pid no longer runs, or they are over IMG_TMP_STALE old
 * (a pid reused, or a writer on another host sharing the folder - that
 * writer then only loses its image: its rename fails). Only files named as
 * this code names them, that carry its header (our_file), are ever deleted;
 * links, folders and anything else in the folder are left alone. */
#define IMG_KEEP 8
#define IMG_TMP_STALE (15 * 60)
static void prune_images(const char *dir, bool make_room) {
    DIR *d = opendir(dir);
    if (!d) return;
    char names[64][256];
    struct timespec when[64];
    struct stat sts[64];
    int n = 0;
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d));) {
        long pid = 0;
        int kind = our_name(e->d_name, &pid);
        size_t l = strlen(e->d_name);
        struct stat st;
        if (!kind || l >= 256) continue;
        if (kind == 2) {
            bool alive = pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM;
            if (our_file(dirfd(d), e->d_name, true, &st) && (!alive || now - st.st_mtim.tv_sec > IMG_TMP_STALE))
                unlink_checked(dirfd(d), e->d_name, &st);
            continue;
        }
        if (n < 64 && our_file(dirfd(d), e->d_name, false, &st)) {
            memcpy(names[n], e->d_name, l + 1);
            sts[n] = st;
            when[n++] = st.st_mtim;
        }
    }
    while (make_room && n >= IMG_KEEP) { /* drop the oldest until there is room for one more */
        int o = 0;
        for (int k = 1; k < n; k++)
            if (when[k].tv_sec < when[o].tv_sec ||
                (when[k].tv_sec == when[o].tv_sec && when[k].tv_nsec < when[o].tv_nsec))
                o = k;
        unlink_checked(dirfd(d), names[o], &sts[o]);
        n--;
        when[o] = when[n];
        sts[o] = sts[n];
        memcpy(names[o], names[n], sizeof names[o]);
    }
    closedir(d);
}

/* The header part 2 and the section sources of t's image (spb, cm: the
 * special-token and straddle-minima sections, allocated here). */
static bool layout(const tk_tokenizer *t, img_hdr *h, const void *src_p[S_COUNT], uint8_t **spb, tk_charmin **cm) {
    memset((uint8_t *)h + IMG_BODY, 0, sizeof *h - IMG_BODY);
    *spb = NULL;
    *cm = NULL;
    if (t->n_specials > 64) return false;
    h->pattern = (uint32_t)t->pattern;
    h->n_ranks = t->n_ranks;
    h->vocab_size = t->vocab_size;
    h->max_token_len = t->max_token_len;
    h->map3_shift = t->map3_shift;
    h->eot = t->eot;
    h->n_specials = (uint32_t)t->n_specials;
    h->map_mask = t->map.mask;
    h->smap_mask = t->smap.mask;
    memcpy(h->byte_rank, t->byte_rank, sizeof h->byte_rank);
    memcpy(h->fingerprint, t->fingerprint, 32);
    snprintf(h->name, sizeof h->name, "%s", t->name);
    size_t spn = 0;
    for (size_t k = 0; k < t->n_specials; k++) spn += 8 + strlen(t->specials[k].text);
    if (!(*spb = malloc(spn ? spn : 1))) return false;
    for (size_t k = 0, o = 0; k < t->n_specials; k++) {
        uint32_t id = t->specials[k].id, len = (uint32_t)strlen(t->specials[k].text);
        memcpy(*spb + o, &id, 4);
        memcpy(*spb + o + 4, &len, 4);
        memcpy(*spb + o + 8, t->specials[k].text, len);
        o += 8 + len;
    }
    if (!(*cm = tk_charmin_build(t))) {
        free(*spb);
        *spb = NULL;
        return false;
    }
    const void *p[S_COUNT] = {t->arena,   t->tok_off, t->map.slots,  t->smap.slots, t->filter, t->pair2,
                              t->maxlen2, t->map3,    t->id_to_rank, *spb,          *cm};
    memcpy(src_p, p, sizeof p);
    h->len[S_ARENA] = t->tok_off[t->n_ranks];
    h->len[S_TOK_OFF] = ((uint64_t)t->n_ranks + 1) * 8;
    h->len[S_MAP] = (t->map.mask + 1) * 8;
    h->len[S_SMAP] = (t->smap.mask + 1) * sizeof(tk_shortslot);
    h->len[S_FILTER] = (1u << TK_FILTER_BITS) / 8;
    h->len[S_PAIR2] = 65536 * 4;
    h->len[S_MAXLEN2] = 65536;
    h->len[S_MAP3] = ((uint64_t)1 << (64 - t->map3_shift)) * 8;
    h->len[S_ID2RANK] = (uint64_t)t->vocab_size * 4;
    h->len[S_SPECIALS] = spn;
    h->len[S_CHARMIN] = sizeof **cm;
    uint64_t o = (sizeof *h + IMG_ALIGN - 1) / IMG_ALIGN * IMG_ALIGN;
    for (int s = 0; s < S_COUNT; s++) {
        h->off[s] = o;
        o = (o + h->len[s] + IMG_ALIGN - 1) / IMG_ALIGN * IMG_ALIGN;
    }
    h->total = o;
    return true;
}

/* The bytes of an image after part 1, in file order, to a file (fd >= 0)
 * and/or a digest (xs): header part 2, then each section after zero padding,
 * then zeros to the end. */
static int emit_body(const img_hdr *h, const void *const src_p[S_COUNT], int fd, XXH3_state_t *xs) {
    static const uint8_t zeros[IMG_ALIGN];
#define EMIT(p, n)                                                                                                     \
    do {                                                                                                               \
        if (xs) XXH3_128bits_update(xs, (p), (n));                                                                     \
        if (fd >= 0 && mc_write_all(fd, (p), (n))) return -1;                                                          \
    } while (0)
    EMIT((const uint8_t *)h + IMG_BODY, sizeof *h - IMG_BODY);
    uint64_t at = sizeof *h;
    for (int s = 0; s < S_COUNT; s++) {
        EMIT(zeros, h->off[s] - at);
        if (h->len[s]) EMIT(src_p[s], h->len[s]);
        at = h->off[s] + h->len[s];
    }
    EMIT(zeros, h->total - at);
#undef EMIT
    return 0;
}

/* Whether t's tables are all there is of it: no engine (the rank engine's
 * tokenizers: tk_engine.h) or one whose image flag says its state is in the
 * tables. Read from the tokenizer's own engine pointer, not through the
 * dispatcher (tk_engine_of): the images sit below the engines, whose rank
 * loader calls them, and the dispatcher's registry names every engine, so a
 * call up to it would close a circle (tests/tk_layering.py). */
static bool tables_hold_all(const tk_tokenizer *t) { return !t->engine || t->engine->image; }

int tk_image_body_digest(const tk_tokenizer *t, char out[33]) {
    img_hdr h;
    const void *src_p[S_COUNT];
    uint8_t *spb;
    tk_charmin *cm;
    out[0] = 0;
    if (!t || t->image || !tables_hold_all(t) || t->decode_only || t->rank_to_id) return TK_ERR_UNSUPPORTED;
    if (!layout(t, &h, src_p, &spb, &cm)) return TK_ERR_NOMEM;
    XXH3_state_t *xs = XXH3_createState();
    int rc = TK_ERR_NOMEM;
    if (xs && XXH3_128bits_reset(xs) == XXH_OK && emit_body(&h, src_p, -1, xs) == 0) {
        hex128(XXH3_128bits_digest(xs), out);
        rc = TK_OK;
    }
    XXH3_freeState(xs);
    free(spb);
    free(cm);
    return rc;
}

const char *tk_image_known_body(const char *name) {
    const img_known *kv = known_of(name);
    return kv ? kv->body : NULL;
}

void tk_image_save(const char *path, tk_pattern pat, const tk_tokenizer *t, const struct stat *src, const uint8_t *data,
                   size_t len) {
    if (!t || t->image || !tables_hold_all(t) || t->decode_only || t->rank_to_id || !t->known || !src->st_ino) return;
    /* only the upstream files of IMG_KNOWN, with their own pattern */
    const img_known *kv = known_of(t->name);
    if (!kv || t->pattern != kv->pat || (pat != TK_PAT_NONE && pat != kv->pat) || len != kv->size) return;
    char dg[33];
    hex128(XXH3_128bits(data, len), dg);
    if (strcmp(dg, kv->source)) return;
    struct stat now;
    if (stat(path, &now) != 0 || !same_file(src, &now)) return; /* changed while it was read */
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) || ts.tv_sec - src->st_ctim.tv_sec < 2) return;
    char ip[4096], dir[3800], tmp[4200];
    if (!image_path(src, pat, ip, sizeof ip) || !image_dir(dir, sizeof dir) || mkdir_private(dir)) return;
    img_hdr h;
    const void *src_p[S_COUNT];
    uint8_t *spb;
    tk_charmin *cm;
    if (!layout(t, &h, src_p, &spb, &cm)) return;
    part1(&h, src, pat, h.total);
    /* tables that do not hash to IMG_KNOWN would never be used: not written */
    XXH3_state_t *xs = XXH3_createState();
    bool ok = xs && XXH3_128bits_reset(xs) == XXH_OK && emit_body(&h, src_p, -1, xs) == 0;
    if (ok) hex128(XXH3_128bits_digest(xs), dg);
    XXH3_freeState(xs);
    if (!ok || strcmp(dg, kv->body)) {
        free(spb);
        free(cm);
        return;
    }
    prune_images(dir, access(ip, F_OK) != 0); /* a new name: make room */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", ip, (long)getpid());
    /* the common layer's atomic write (fresh temporary, fsync, rename, fsync
     * of the folder); the pid in the name: ranks may cache the same image */
    int fd = mc_atomic_open(tmp, 0600, NULL, 0);
    if (fd >= 0) {
        int bad = mc_write_all(fd, &h, IMG_BODY) || emit_body(&h, src_p, fd, NULL);
        mc_atomic_commit(fd, bad, tmp, ip, NULL, 0);
    }
    free(spb);
    free(cm);
}
