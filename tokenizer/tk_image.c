/* tk_image.c - the built tables of an upstream vocabulary, kept as a file
 * image that later processes map instead of rebuilding them.
 *
 * Loading o200k_base from its .tiktoken file (3.6 MB of base64 lines: parse,
 * sha256 recognition, hash maps, pair tables, fingerprint) takes tens of
 * milliseconds, more than encoding a few hundred small documents. The first
 * load of a *known* rank file (recognised by sha256, so its contents are the
 * upstream ones) writes the finished tables to
 *   $MKSHARDS_CACHE_DIR, else $XDG_CACHE_HOME/mkshards, else $HOME/.cache/mkshards
 * as tk-<dev>-<inode>-<pattern>.img; later loads of the same file map that
 * image read-only (mmap, pages faulted in as encoding touches them).
 *
 * The image is used only while the rank file is the one it was built from:
 * same device, inode, size, mtime and ctime (ns), as git's index decides that
 * a file is unchanged; an image is not written for a file changed within the
 * last 2 s (timestamps of a file still being written can repeat). It also
 * records the format version, check values of the hash functions and the
 * identity (device, inode, size, mtime) of the executable or shared object
 * holding this code, so any other build, older or newer, never uses the
 * image and a changed table builder cannot meet an old one. Images are
 * private caches: the folder must belong to this user and not be writable by
 * others, the file too; anything else and the rank file is parsed as before.
 * MKSHARDS_CACHE_DIR=off (or empty) turns images off.
 */
#include "tk_internal.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define IMG_VERSION 2u /* 2: the straddle minima (S_CHARMIN) */
#define IMG_ALIGN 64u

enum { S_ARENA, S_TOK_OFF, S_MAP, S_SMAP, S_FILTER, S_PAIR2, S_MAXLEN2, S_MAP3, S_ID2RANK, S_SPECIALS, S_CHARMIN, S_COUNT };

typedef struct {
    char magic[8];
    uint32_t version, hdr_size;
    uint64_t total;
    uint64_t checks[4]; /* hash functions and layout of this build */
    /* the rank file it was built from */
    uint64_t dev, ino, size;
    int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
    uint32_t req_pat, pattern, n_ranks, vocab_size, max_token_len, map3_shift, eot, n_specials;
    uint64_t map_mask, smap_mask;
    uint32_t byte_rank[256];
    uint8_t fingerprint[32];
    char name[64];
    uint64_t off[S_COUNT], len[S_COUNT];
} img_hdr;

/* The file holding this code (the executable, or the shared object that
 * links the tokenizer library): an image made by another build of it is
 * never used, so a changed table builder cannot meet an old image. */
static uint64_t code_identity(void) {
    Dl_info info;
    struct stat st;
    /* a statically linked program has no dladdr: the code is its own file */
    const char *file = dladdr((void *)&tk_image_load, &info) && info.dli_fname ? info.dli_fname : "/proc/self/exe";
    if (stat(file, &st) != 0) return 0;
    uint64_t v[5] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
                     (uint64_t)st.st_mtim.tv_nsec};
    return tk_hash_bytes((const uint8_t *)v, sizeof v) | 1;
}

static bool build_checks(uint64_t c[4]) {
    static const uint8_t probe[] = "mkshards tokenizer image check: 0123456789";
    c[0] = tk_hash_bytes(probe, sizeof probe - 1) ^ tk_hash_bytes(probe, 11);
    c[1] = tk_short_hash(tk_short_word(probe, 7), 7);
    c[2] = (uint64_t)sizeof(tk_shortslot) << 48 | (uint64_t)TK_FILTER_BITS << 32 | sizeof(img_hdr);
    c[3] = code_identity();
    return c[3] != 0; /* without it, no images */
}

/* The image folder, or false when images are off or no folder is known. */
static bool image_dir(char *out, size_t cap) {
    const char *d = getenv("MKSHARDS_CACHE_DIR");
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

static bool same_source(const img_hdr *h, const struct stat *st) {
    return h->dev == (uint64_t)st->st_dev && h->ino == (uint64_t)st->st_ino && h->size == (uint64_t)st->st_size &&
           h->mtime_s == (int64_t)st->st_mtim.tv_sec && h->mtime_ns == (int64_t)st->st_mtim.tv_nsec &&
           h->ctime_s == (int64_t)st->st_ctim.tv_sec && h->ctime_ns == (int64_t)st->st_ctim.tv_nsec;
}

/* Expected byte length of each section, from the header's counts. */
static bool section_sizes_ok(const img_hdr *h) {
    if (h->n_ranks < 256 || h->n_ranks > TK_MAX_VOCAB || h->vocab_size < h->n_ranks || h->vocab_size > TK_MAX_VOCAB)
        return false;
    if (h->map3_shift < 32 || h->map3_shift > 60 || h->map_mask > (1ull << 32) || h->smap_mask > (1ull << 32))
        return false;
    if ((h->map_mask & (h->map_mask + 1)) || (h->smap_mask & (h->smap_mask + 1))) return false;
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
    for (int s = 0; s < S_COUNT; s++) {
        if (h->off[s] % IMG_ALIGN || h->off[s] < sizeof *h || h->off[s] > h->total || h->len[s] > h->total - h->off[s])
            return false;
        if (s != S_ARENA && s != S_SPECIALS && h->len[s] != want[s]) return false;
    }
    return true;
}

int tk_image_load(const char *path, tk_pattern pat, tk_tokenizer **out, struct stat *src) {
    memset(src, 0, sizeof *src);
    if (stat(path, src) != 0 || !S_ISREG(src->st_mode)) {
        src->st_ino = 0;
        return 1;
    }
    char ip[4096], dir[3800];
    if (!image_path(src, pat, ip, sizeof ip) || !image_dir(dir, sizeof dir) || !private_dir(dir)) return 1;
    int fd = open(ip, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return 1;
    struct stat ist;
    img_hdr h;
    void *base = MAP_FAILED;
    tk_tokenizer *t = NULL;
    if (fstat(fd, &ist) || !S_ISREG(ist.st_mode) || ist.st_uid != geteuid() || (ist.st_mode & 022) ||
        (size_t)ist.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        goto no;
    uint64_t checks[4];
    if (!build_checks(checks)) goto no;
    if (memcmp(h.magic, "MKSTKIM", 8) || h.version != IMG_VERSION || h.hdr_size != sizeof h ||
        h.total != (uint64_t)ist.st_size || memcmp(h.checks, checks, sizeof checks) || h.req_pat != (uint32_t)pat ||
        !same_source(&h, src) || !section_sizes_ok(&h) || h.pattern < TK_PAT_GPT2 || h.pattern > TK_PAT_O200K ||
        h.n_specials > 64)
        goto no;
    base = mmap(NULL, h.total, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) goto no;
    const uint8_t *b = base;
    const uint64_t *tok_off = (const uint64_t *)(b + h.off[S_TOK_OFF]);
    if (tok_off[0] != 0 || tok_off[h.n_ranks] != h.len[S_ARENA]) goto no;
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
    t->name[sizeof t->name - 1] = 0;
    t->arena = (uint8_t *)(b + h.off[S_ARENA]);
    t->tok_off = (uint64_t *)tok_off;
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
    /* specials: (id u32, len u32, text) each */
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
        if (len == 0 || len > (size_t)(qe - q) || id >= h.vocab_size || !(texts[ns] = strndup((const char *)q, len))) {
            ok = false;
            break;
        }
        sp[ns] = (tk_special){texts[ns], id};
        q += len;
    }
    if (ok) ok = tk_set_specials(t, sp, ns) == TK_OK;
    for (size_t k = 0; k < ns; k++) free(texts[k]);
    if (!ok || !(t->reach = calloc(t->n_ranks, 1))) goto no;
    if (t->eot != TK_NO_RANK && t->eot >= t->vocab_size) goto no;
    t->serial = tk_next_serial();
    tk_classes_init();
    close(fd);
    *out = t;
    return 0;
no:
    if (t) {
        tk_free(t); /* unmaps base */
    } else if (base != MAP_FAILED) {
        munmap(base, h.total);
    }
    close(fd);
    return 1;
}

static int write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
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

/* At most IMG_KEEP images in the folder: before a new one is written the
 * oldest (by mtime) go, so copies of vocabularies in temporary folders
 * (tests, scratch runs) cannot fill the disk with images over time. */
#define IMG_KEEP 8
static void prune_images(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char names[64][256];
    struct timespec when[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "tk-", 3) || l < 8 || l >= 256 || strcmp(e->d_name + l - 4, ".img")) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) continue;
        memcpy(names[n], e->d_name, l + 1);
        when[n++] = st.st_mtim;
    }
    while (n >= IMG_KEEP) { /* drop the oldest until there is room for one more */
        int o = 0;
        for (int k = 1; k < n; k++)
            if (when[k].tv_sec < when[o].tv_sec ||
                (when[k].tv_sec == when[o].tv_sec && when[k].tv_nsec < when[o].tv_nsec))
                o = k;
        unlinkat(dirfd(d), names[o], 0);
        names[o][0] = 0;
        when[o] = when[--n];
        memcpy(names[o], names[n], sizeof names[o]);
    }
    closedir(d);
}

void tk_image_save(const char *path, tk_pattern pat, const tk_tokenizer *t, const struct stat *src) {
    if (!t || t->image || t->hf || t->decode_only || t->rank_to_id || !t->known || !src->st_ino) return;
    struct stat now;
    if (stat(path, &now) != 0 || !same_source(&(img_hdr){.dev = (uint64_t)src->st_dev,
                                                         .ino = (uint64_t)src->st_ino,
                                                         .size = (uint64_t)src->st_size,
                                                         .mtime_s = src->st_mtim.tv_sec,
                                                         .mtime_ns = src->st_mtim.tv_nsec,
                                                         .ctime_s = src->st_ctim.tv_sec,
                                                         .ctime_ns = src->st_ctim.tv_nsec},
                                              &now))
        return; /* changed while it was read */
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) || ts.tv_sec - src->st_ctim.tv_sec < 2) return;
    char ip[4096], dir[3800], tmp[4200];
    if (!image_path(src, pat, ip, sizeof ip) || !image_dir(dir, sizeof dir) || mkdir_private(dir)) return;
    if (t->n_specials > 64) return;
    if (access(ip, F_OK) != 0) prune_images(dir); /* a new name: make room */
    img_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "MKSTKIM", 8);
    h.version = IMG_VERSION;
    h.hdr_size = sizeof h;
    if (!build_checks(h.checks)) return;
    h.dev = (uint64_t)src->st_dev;
    h.ino = (uint64_t)src->st_ino;
    h.size = (uint64_t)src->st_size;
    h.mtime_s = src->st_mtim.tv_sec;
    h.mtime_ns = src->st_mtim.tv_nsec;
    h.ctime_s = src->st_ctim.tv_sec;
    h.ctime_ns = src->st_ctim.tv_nsec;
    h.req_pat = (uint32_t)pat;
    h.pattern = (uint32_t)t->pattern;
    h.n_ranks = t->n_ranks;
    h.vocab_size = t->vocab_size;
    h.max_token_len = t->max_token_len;
    h.map3_shift = t->map3_shift;
    h.eot = t->eot;
    h.n_specials = (uint32_t)t->n_specials;
    h.map_mask = t->map.mask;
    h.smap_mask = t->smap.mask;
    memcpy(h.byte_rank, t->byte_rank, sizeof h.byte_rank);
    memcpy(h.fingerprint, t->fingerprint, 32);
    memcpy(h.name, t->name, sizeof h.name);
    uint8_t *spb = NULL;
    size_t spn = 0;
    for (size_t k = 0; k < t->n_specials; k++) spn += 8 + strlen(t->specials[k].text);
    if (!(spb = malloc(spn ? spn : 1))) return;
    for (size_t k = 0, o = 0; k < t->n_specials; k++) {
        uint32_t id = t->specials[k].id, len = (uint32_t)strlen(t->specials[k].text);
        memcpy(spb + o, &id, 4);
        memcpy(spb + o + 4, &len, 4);
        memcpy(spb + o + 8, t->specials[k].text, len);
        o += 8 + len;
    }
    tk_charmin *cm = tk_charmin_build(t);
    if (!cm) {
        free(spb);
        return;
    }
    const void *src_p[S_COUNT] = {t->arena, t->tok_off, t->map.slots, t->smap.slots, t->filter,
                                  t->pair2, t->maxlen2, t->map3,      t->id_to_rank, spb, cm};
    h.len[S_ARENA] = t->tok_off[t->n_ranks];
    h.len[S_TOK_OFF] = ((uint64_t)t->n_ranks + 1) * 8;
    h.len[S_MAP] = (t->map.mask + 1) * 8;
    h.len[S_SMAP] = (t->smap.mask + 1) * sizeof(tk_shortslot);
    h.len[S_FILTER] = (1u << TK_FILTER_BITS) / 8;
    h.len[S_PAIR2] = 65536 * 4;
    h.len[S_MAXLEN2] = 65536;
    h.len[S_MAP3] = ((uint64_t)1 << (64 - t->map3_shift)) * 8;
    h.len[S_ID2RANK] = (uint64_t)t->vocab_size * 4;
    h.len[S_SPECIALS] = spn;
    h.len[S_CHARMIN] = sizeof *cm;
    uint64_t o = (sizeof h + IMG_ALIGN - 1) / IMG_ALIGN * IMG_ALIGN;
    for (int s = 0; s < S_COUNT; s++) {
        h.off[s] = o;
        o = (o + h.len[s] + IMG_ALIGN - 1) / IMG_ALIGN * IMG_ALIGN;
    }
    h.total = o;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", ip, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        free(spb);
        free(cm);
        return;
    }
    static const uint8_t zeros[IMG_ALIGN];
    int bad = write_all(fd, &h, sizeof h);
    uint64_t at = sizeof h;
    for (int s = 0; s < S_COUNT && !bad; s++) {
        bad = write_all(fd, zeros, h.off[s] - at);
        if (!bad && h.len[s]) bad = write_all(fd, src_p[s], h.len[s]);
        at = h.off[s] + h.len[s];
    }
    if (!bad) bad = write_all(fd, zeros, h.total - at);
    free(spb);
    free(cm);
    if (close(fd) || bad || rename(tmp, ip)) unlink(tmp);
}
