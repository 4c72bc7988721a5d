/* ckpt.c - atomic checkpoints (see tr.h).
 *
 * Layout (little-endian, this machine's byte order):
 *   "TRCKPT01"                         8 bytes
 *   meta                               fixed fields below
 *   n_sections x { name[32], u64 bytes }
 *   section payloads in order
 *   u64 XXH64 of everything before it (seed 0)
 * Written to DIR/ckpt.tmp, fsync, rename to DIR/ckpt.bin, fsync DIR. */
#include "tr.h"
#include "mks_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ds.h"

#define CK_MAGIC "TRCKPT01"

typedef struct {
    FILE *f;
    XXH64_state_t *h;
    int err;
} wr;

static void w(wr *o, const void *p, size_t n) {
    if (o->err) return;
    if (n && fwrite(p, 1, n, o->f) != n) o->err = 1;
    XXH64_update(o->h, p, n);
}
static void w64(wr *o, uint64_t v) { w(o, &v, 8); }

static void meta_write(wr *o, const tr_ckpt_meta *m, int n) {
    w64(o, m->step);
    w64(o, m->loader_pos);
    w64(o, m->seed);
    for (int i = 0; i < 4; i++) w64(o, m->rng.s[i]);
    w(o, m->fingerprint, 32);
    int32_t v[6] = {m->n_layer, m->n_head, m->n_embd, m->max_seq, m->seq_len, (int32_t)m->vocab_size};
    w(o, v, sizeof v);
    w64(o, (uint64_t)n);
}

static int mkdir_p(const char *dir) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0777);
            *p = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST) return -1;
    return 0;
}

int tr_ckpt_save(const char *dir, const tr_ckpt_meta *m, const tr_ckpt_section *s, int n, char *err, size_t errlen) {
    return tr_ckpt_save_io(dir, m, s, NULL, n, err, errlen);
}

typedef struct {
    const tr_ckpt_meta *m;
    const tr_ckpt_section *s;
    const tr_ckpt_io *io;
    int n;
    const char *tmp;
} ckpt_fill_ctx;

/* The checkpoint's bytes into the temporary (fd stays the caller's). */
static int ckpt_fill(int fd, void *vctx, char *err, size_t errlen) {
    const ckpt_fill_ctx *c = vctx;
    const tr_ckpt_section *s = c->s;
    const tr_ckpt_io *io = c->io;
    int n = c->n, dfd = dup(fd);
    wr o = {dfd >= 0 ? fdopen(dfd, "wb") : NULL, XXH64_createState(), 0};
    if (dfd >= 0 && !o.f) close(dfd);
    if (!o.f || !o.h) {
        snprintf(err, errlen, "cannot write %s: %s", c->tmp, strerror(errno));
        if (o.f) fclose(o.f);
        XXH64_freeState(o.h);
        return -1;
    }
    XXH64_reset(o.h, 0);
    w(&o, CK_MAGIC, 8);
    meta_write(&o, c->m, n);
    for (int i = 0; i < n; i++) {
        char name[32] = {0};
        snprintf(name, sizeof name, "%s", s[i].name);
        w(&o, name, 32);
        w64(&o, s[i].bytes);
    }
    int io_failed = 0;
    for (int i = 0; i < n && !io_failed; i++) {
        if (!io || !io[i].fn) {
            w(&o, s[i].data, (size_t)s[i].bytes);
            continue;
        }
        for (uint64_t off = 0; off < s[i].bytes;) { /* a section in pieces */
            uint64_t len = s[i].bytes - off;
            const void *p = io[i].fn(io[i].ctx, off, &len);
            if (!p || len == 0 || len > s[i].bytes - off) {
                io_failed = 1;
                break;
            }
            w(&o, p, (size_t)len);
            off += len;
        }
    }
    uint64_t hv = XXH64_digest(o.h);
    if (!io_failed && !o.err && fwrite(&hv, 1, 8, o.f) != 8) o.err = 1;
    XXH64_freeState(o.h);
    if (fclose(o.f)) o.err = 1;
    if (io_failed) {
        snprintf(err, errlen, "cannot write %s: a section's data could not be gathered", c->tmp);
        return -1;
    }
    if (o.err) {
        snprintf(err, errlen, "cannot write %s: %s", c->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

int tr_ckpt_save_io(const char *dir, const tr_ckpt_meta *m, const tr_ckpt_section *s, const tr_ckpt_io *io, int n,
                    char *err, size_t errlen) {
    char tmp[4096], fin[4096];
    if (mkdir_p(dir)) {
        snprintf(err, errlen, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
        return TR_ERR_IO;
    }
    snprintf(tmp, sizeof tmp, "%s/ckpt.tmp", dir);
    snprintf(fin, sizeof fin, "%s/ckpt.bin", dir);
    /* the common layer's one policy (mks_common.h): ckpt.tmp created fresh
     * (O_EXCL|O_NOFOLLOW, a planted FIFO or link removed first), fsync,
     * rename to ckpt.bin, fsync of the folder */
    ckpt_fill_ctx c = {m, s, io, n, tmp};
    return mc_atomic_write_fn(fin, tmp, 0644, ckpt_fill, &c, err, errlen) == MC_OK ? TR_OK : TR_ERR_IO;
}

typedef struct {
    FILE *f;
    XXH64_state_t *h;
    int err;
} rd;

static void r(rd *o, void *p, size_t n) {
    if (o->err) return;
    if (n && fread(p, 1, n, o->f) != n) {
        o->err = 1;
        return;
    }
    XXH64_update(o->h, p, n);
}
static uint64_t r64(rd *o) {
    uint64_t v = 0;
    r(o, &v, 8);
    return v;
}

/* magic + step, loader_pos, seed, rng[4] + fingerprint + 6 x i32 + n_sections */
#define CK_HEADER_BYTES (8u + 7u * 8u + 32u + 6u * 4u + 8u)
#define CK_SECTION_ENTRY_BYTES 40u

/* Model shape as a checkpoint may state it: each field within what the
 * trainer can build (the run compares them with its own config). */
static int meta_sane(const tr_ckpt_meta *m) {
    return m->n_layer >= 1 && m->n_layer <= 1024 && m->n_head >= 1 && m->n_head <= 1024 && m->n_embd >= 1 &&
           m->n_embd <= 65536 && m->max_seq >= 1 && (uint32_t)m->max_seq <= TR_MAX_ROW_LEN && m->seq_len >= 1 &&
           m->seq_len <= m->max_seq && m->vocab_size >= 1 && m->vocab_size <= TR_MAX_VOCAB && m->step <= TR_MAX_STEPS;
}

int tr_ckpt_load(const char *dir, tr_ckpt_meta *m, tr_ckpt_section *s, int n, char *err, size_t errlen) {
    return tr_ckpt_load_io(dir, m, s, NULL, n, err, errlen);
}

static int load_path(const char *fin, tr_ckpt_meta *m, tr_ckpt_section *s, const tr_ckpt_io *io, int n, char *err,
                     size_t errlen);

int tr_ckpt_load_io(const char *dir, tr_ckpt_meta *m, tr_ckpt_section *s, const tr_ckpt_io *io, int n, char *err,
                    size_t errlen) {
    char fin[4096];
    if ((size_t)snprintf(fin, sizeof fin, "%s/ckpt.bin", dir) >= sizeof fin) {
        snprintf(err, errlen, "checkpoint directory name too long");
        return TR_ERR_ARG;
    }
    return load_path(fin, m, s, io, n, err, errlen);
}

int tr_ckpt_load_path(const char *fin, tr_ckpt_meta *m, tr_ckpt_section *s, int n, char *err, size_t errlen) {
    return load_path(fin, m, s, NULL, n, err, errlen);
}

/* The header into m (checked: meta_sane, 1..TR_CKPT_MAX_SECTIONS sections). */
static int read_header(rd *o, const char *fin, uint64_t fsize, tr_ckpt_meta *m, char *err, size_t errlen) {
    char magic[8];
    r(o, magic, 8);
    if (o->err || memcmp(magic, CK_MAGIC, 8)) {
        snprintf(err, errlen, "%s is not a checkpoint (bad magic)", fin);
        return TR_ERR_CORRUPT;
    }
    m->step = r64(o);
    m->loader_pos = r64(o);
    m->seed = r64(o);
    for (int i = 0; i < 4; i++) m->rng.s[i] = r64(o);
    r(o, m->fingerprint, 32);
    int32_t v[6] = {0};
    r(o, v, sizeof v);
    m->n_layer = v[0];
    m->n_head = v[1];
    m->n_embd = v[2];
    m->max_seq = v[3];
    m->seq_len = v[4];
    m->vocab_size = (uint32_t)v[5];
    m->n_sections = r64(o);
    if (o->err) {
        snprintf(err, errlen, "%s: truncated header (%llu bytes)", fin, (unsigned long long)fsize);
        return TR_ERR_CORRUPT;
    }
    if (m->n_sections < 1 || m->n_sections > TR_CKPT_MAX_SECTIONS || !meta_sane(m)) {
        snprintf(err, errlen,
                 "%s: corrupt header (%llu sections, step %llu, %dL H=%d C=%d max_seq=%d T=%d V=%u out of range)", fin,
                 (unsigned long long)m->n_sections, (unsigned long long)m->step, m->n_layer, m->n_head, m->n_embd,
                 m->max_seq, m->seq_len, m->vocab_size);
        return TR_ERR_CORRUPT;
    }
    return TR_OK;
}

/* The section table, then the exact file size it implies, before any
 * payload is touched. */
static int read_table(rd *o, const char *fin, uint64_t fsize, const tr_ckpt_meta *m,
                      char names[TR_CKPT_MAX_SECTIONS][32], uint64_t sizes[TR_CKPT_MAX_SECTIONS], char *err,
                      size_t errlen) {
    uint64_t want_size = CK_HEADER_BYTES + m->n_sections * CK_SECTION_ENTRY_BYTES + 8;
    for (uint64_t i = 0; i < m->n_sections; i++) {
        r(o, names[i], 32);
        sizes[i] = r64(o);
        if (o->err) {
            snprintf(err, errlen, "%s: truncated section table (%llu bytes)", fin, (unsigned long long)fsize);
            return TR_ERR_CORRUPT;
        }
        if (!memchr(names[i], 0, 32) || __builtin_add_overflow(want_size, sizes[i], &want_size)) {
            snprintf(err, errlen, "%s: corrupt section table entry %llu", fin, (unsigned long long)i);
            return TR_ERR_CORRUPT;
        }
    }
    if (fsize != want_size) {
        snprintf(err, errlen,
                 fsize < want_size ? "%s: truncated: %llu bytes, the header describes %llu"
                                   : "%s: %llu bytes, the header describes %llu: trailing bytes after the checksum",
                 fin, (unsigned long long)fsize, (unsigned long long)want_size);
        return TR_ERR_CORRUPT;
    }
    return TR_OK;
}

/* The n sections the caller expects (names and sizes equal to the table's),
 * into s[i].data, through io[i].fn in pieces, or read and checksummed only;
 * then the checksum. */
static int read_sections(rd *o, const char *fin, const tr_ckpt_meta *m, char names[TR_CKPT_MAX_SECTIONS][32],
                         const uint64_t sizes[TR_CKPT_MAX_SECTIONS], tr_ckpt_section *s, const tr_ckpt_io *io, int n,
                         char *err, size_t errlen) {
    if (m->n_sections != (uint64_t)n) {
        snprintf(err, errlen, "%s: %llu sections, expected %d (a different model or optimizer?)", fin,
                 (unsigned long long)m->n_sections, n);
        return TR_ERR_CORRUPT;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], s[i].name) || sizes[i] != s[i].bytes) {
            snprintf(err, errlen, "%s: section %d is '%.31s' (%llu bytes), expected '%s' (%llu bytes)", fin, i,
                     names[i], (unsigned long long)sizes[i], s[i].name, (unsigned long long)s[i].bytes);
            return TR_ERR_CORRUPT;
        }
    }
    for (int i = 0; i < n && !o->err; i++) {
        int in_pieces = io && io[i].fn;
        if (s[i].data && !in_pieces) {
            r(o, s[i].data, (size_t)s[i].bytes);
            continue;
        }
        /* in pieces (io), or read and checksummed only (no data) */
        unsigned char skip[65536];
        for (uint64_t off = 0; off < s[i].bytes && !o->err;) {
            uint64_t len = s[i].bytes - off;
            void *p = skip;
            if (in_pieces) {
                p = io[i].fn(io[i].ctx, off, &len);
                if (!p || len == 0 || len > s[i].bytes - off) {
                    snprintf(err, errlen, "%s: cannot place section '%s'", fin, s[i].name);
                    return TR_ERR_IO;
                }
            } else if (len > sizeof skip) {
                len = sizeof skip;
            }
            r(o, p, (size_t)len);
            off += len;
        }
    }
    uint64_t want = XXH64_digest(o->h), got = 0;
    if (o->err || fread(&got, 1, 8, o->f) != 8) {
        snprintf(err, errlen, "%s: truncated", fin);
        return TR_ERR_CORRUPT;
    }
    if (got != want) {
        snprintf(err, errlen, "%s: checksum mismatch (file %016llx, computed %016llx): corrupt checkpoint", fin,
                 (unsigned long long)got, (unsigned long long)want);
        return TR_ERR_CORRUPT;
    }
    return TR_OK;
}

static int load_path(const char *fin, tr_ckpt_meta *m, tr_ckpt_section *s, const tr_ckpt_io *io, int n, char *err,
                     size_t errlen) {
    char e[512] = "";
    memset(m, 0, sizeof *m);
    if (n < 0 || n > TR_CKPT_MAX_SECTIONS || (n && !s)) {
        snprintf(err, errlen, "tr_ckpt_load: bad section list");
        return TR_ERR_ARG;
    }
    /* a FIFO or device in place of ckpt.bin is refused without blocking */
    int fd = ds_open_regular(fin, e, sizeof e);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open checkpoint %s", e);
        return TR_ERR_IO;
    }
    struct stat st;
    if (fstat(fd, &st)) {
        snprintf(err, errlen, "cannot open checkpoint %s: %s", fin, strerror(errno));
        close(fd);
        return TR_ERR_IO;
    }
    uint64_t fsize = (uint64_t)st.st_size;
    rd o = {fdopen(fd, "rb"), XXH64_createState(), 0};
    if (!o.f || !o.h) {
        snprintf(err, errlen, "cannot open checkpoint %s: %s", fin, strerror(errno));
        if (o.f) fclose(o.f);
        else close(fd);
        XXH64_freeState(o.h);
        return TR_ERR_IO;
    }
    XXH64_reset(o.h, 0);
    char names[TR_CKPT_MAX_SECTIONS][32];
    uint64_t sizes[TR_CKPT_MAX_SECTIONS];
    int rc = read_header(&o, fin, fsize, m, err, errlen);
    if (rc == TR_OK) rc = read_table(&o, fin, fsize, m, names, sizes, err, errlen);
    if (rc == TR_OK && n > 0) /* n == 0: meta only */
        rc = read_sections(&o, fin, m, names, sizes, s, io, n, err, errlen);
    fclose(o.f);
    XXH64_freeState(o.h);
    return rc;
}
