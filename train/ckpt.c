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

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define CK_MAGIC "TRCKPT01"

typedef struct {
    FILE *f;
    XXH64_state_t *h;
    int err;
} wr;

static void w(wr *o, const void *p, size_t n)
{
    if (o->err)
        return;
    if (n && fwrite(p, 1, n, o->f) != n)
        o->err = 1;
    XXH64_update(o->h, p, n);
}
static void w64(wr *o, uint64_t v) { w(o, &v, 8); }

static void meta_write(wr *o, const tr_ckpt_meta *m, int n)
{
    w64(o, m->step);
    w64(o, m->loader_pos);
    w64(o, m->seed);
    for (int i = 0; i < 4; i++)
        w64(o, m->rng.s[i]);
    w(o, m->fingerprint, 32);
    int32_t v[6] = {m->n_layer, m->n_head, m->n_embd, m->max_seq, m->seq_len, (int32_t)m->vocab_size};
    w(o, v, sizeof v);
    w64(o, (uint64_t)n);
}

static int mkdir_p(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0777);
            *p = '/';
        }
    if (mkdir(tmp, 0777) && errno != EEXIST)
        return -1;
    return 0;
}

int tr_ckpt_save(const char *dir, const tr_ckpt_meta *m, const tr_ckpt_section *s, int n, char *err, size_t errlen)
{
    char tmp[4096], fin[4096];
    if (mkdir_p(dir)) {
        snprintf(err, errlen, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
        return TR_ERR_IO;
    }
    snprintf(tmp, sizeof tmp, "%s/ckpt.tmp", dir);
    snprintf(fin, sizeof fin, "%s/ckpt.bin", dir);
    wr o = {fopen(tmp, "wb"), XXH64_createState(), 0};
    if (!o.f || !o.h) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        if (o.f)
            fclose(o.f);
        XXH64_freeState(o.h);
        return TR_ERR_IO;
    }
    XXH64_reset(o.h, 0);
    w(&o, CK_MAGIC, 8);
    meta_write(&o, m, n);
    for (int i = 0; i < n; i++) {
        char name[32] = {0};
        snprintf(name, sizeof name, "%s", s[i].name);
        w(&o, name, 32);
        w64(&o, s[i].bytes);
    }
    for (int i = 0; i < n; i++)
        w(&o, s[i].data, (size_t)s[i].bytes);
    uint64_t hv = XXH64_digest(o.h);
    if (!o.err && fwrite(&hv, 1, 8, o.f) != 8)
        o.err = 1;
    XXH64_freeState(o.h);
    if (fflush(o.f) || fsync(fileno(o.f)))
        o.err = 1;
    if (fclose(o.f))
        o.err = 1;
    if (o.err) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        unlink(tmp);
        return TR_ERR_IO;
    }
    if (rename(tmp, fin)) {
        snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, fin, strerror(errno));
        return TR_ERR_IO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return TR_OK;
}

typedef struct {
    FILE *f;
    XXH64_state_t *h;
    int err;
} rd;

static void r(rd *o, void *p, size_t n)
{
    if (o->err)
        return;
    if (n && fread(p, 1, n, o->f) != n) {
        o->err = 1;
        return;
    }
    XXH64_update(o->h, p, n);
}
static uint64_t r64(rd *o)
{
    uint64_t v = 0;
    r(o, &v, 8);
    return v;
}

int tr_ckpt_load(const char *dir, tr_ckpt_meta *m, tr_ckpt_section *s, int n, char *err, size_t errlen)
{
    char fin[4096];
    snprintf(fin, sizeof fin, "%s/ckpt.bin", dir);
    rd o = {fopen(fin, "rb"), XXH64_createState(), 0};
    if (!o.f || !o.h) {
        snprintf(err, errlen, "cannot open checkpoint %s: %s", fin, strerror(errno));
        if (o.f)
            fclose(o.f);
        XXH64_freeState(o.h);
        return TR_ERR_IO;
    }
    XXH64_reset(o.h, 0);
    int rc = TR_OK;
    char magic[8];
    r(&o, magic, 8);
    if (o.err || memcmp(magic, CK_MAGIC, 8)) {
        snprintf(err, errlen, "%s is not a checkpoint (bad magic)", fin);
        rc = TR_ERR_CORRUPT;
        goto done;
    }
    memset(m, 0, sizeof *m);
    m->step = r64(&o);
    m->loader_pos = r64(&o);
    m->seed = r64(&o);
    for (int i = 0; i < 4; i++)
        m->rng.s[i] = r64(&o);
    r(&o, m->fingerprint, 32);
    int32_t v[6] = {0};
    r(&o, v, sizeof v);
    m->n_layer = v[0];
    m->n_head = v[1];
    m->n_embd = v[2];
    m->max_seq = v[3];
    m->seq_len = v[4];
    m->vocab_size = (uint32_t)v[5];
    m->n_sections = r64(&o);
    if (o.err || m->n_sections > 1024) {
        snprintf(err, errlen, "%s: truncated or corrupt header", fin);
        rc = TR_ERR_CORRUPT;
        goto done;
    }
    if (!s || n == 0)
        goto done; /* meta only */
    if ((int)m->n_sections != n) {
        snprintf(err, errlen, "%s: %llu sections, expected %d (different model?)", fin,
                 (unsigned long long)m->n_sections, n);
        rc = TR_ERR_CORRUPT;
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char name[32];
        r(&o, name, 32);
        name[31] = 0;
        uint64_t b = r64(&o);
        if (o.err || strcmp(name, s[i].name) || b != s[i].bytes) {
            snprintf(err, errlen, "%s: section %d is '%s' (%llu bytes), expected '%s' (%llu bytes)", fin, i, name,
                     (unsigned long long)b, s[i].name, (unsigned long long)s[i].bytes);
            rc = TR_ERR_CORRUPT;
            goto done;
        }
    }
    for (int i = 0; i < n; i++)
        r(&o, s[i].data, (size_t)s[i].bytes);
    uint64_t want = XXH64_digest(o.h), got = 0;
    if (o.err || fread(&got, 1, 8, o.f) != 8) {
        snprintf(err, errlen, "%s: truncated", fin);
        rc = TR_ERR_CORRUPT;
        goto done;
    }
    if (got != want) {
        snprintf(err, errlen, "%s: checksum mismatch (file %016llx, computed %016llx): corrupt checkpoint", fin,
                 (unsigned long long)got, (unsigned long long)want);
        rc = TR_ERR_CORRUPT;
    }
done:
    fclose(o.f);
    XXH64_freeState(o.h);
    return rc;
}
