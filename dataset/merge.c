/* merge.c - ds_merge: join the shard sets built with part 1/N .. N/N into
 * the set a single build would have written (byte-identical: rows are taken
 * back to packing order, re-sharded and re-shuffled exactly as the build
 * does; rejects and accounting are joined). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_internal.h"
#include "mks_common.h"

typedef struct {
    const char *dir;
    ds_manifest man; /* checked: shard names, counts, tokenizer */
    json_t *m;       /* man.root */
    ds_build_config cfg;
    ds_build_account acc;
} part;

static int copy_append(FILE *out, const char *path) {
    FILE *f = ds_fopen_regular(path, NULL, 0); /* a FIFO in its place must not block */
    if (!f) return -1;
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        if (fwrite(buf, 1, n, out) != n) {
            fclose(f);
            return -1;
        }
    int e = ferror(f);
    fclose(f);
    return e ? -1 : 0;
}

/* Everything merge reads from part p is checked against p's manifest and
 * the merged config first: each shard passes `verify` (checksums, ids <
 * vocabulary, metadata), and its file XXH3, size, rows, tokens and header
 * (row length, dtype, vocabulary, EOT/pad ids, fingerprint, split,
 * compression, shuffle flag) are those the manifest states; shards are named
 * and ordered as build names them (the shuffle of shard k depends on k), and
 * the per-split totals match splits and accounting. */
static int check_part(const part *p, const ds_build_config *cfg, char *errout, size_t errlen) {
    const ds_manifest *m = &p->man;
    uint64_t idx[2] = {0, 0}, rows[2] = {0, 0}, toks[2] = {0, 0};
    char err[1024];
    for (size_t q = 0; q < m->n_shards; q++) {
        const ds_manifest_shard *e = &m->shards[q];
        char want[64], path[4200];
        ds_shard_file_name(e->split, idx[e->split], want, sizeof want);
        if (strcmp(e->file, want)) {
            snprintf(errout, errlen,
                     "%s: shard %s is listed where %s belongs (shards are named and listed in build order)", m->path,
                     e->file, want);
            return DS_ERR_FORMAT;
        }
        idx[e->split]++;
        snprintf(path, sizeof path, "%s/%s", p->dir, e->file);
        uint64_t xx = 0;
        if (ds_shard_verify(path, &xx, err, sizeof err) != DS_OK) {
            snprintf(errout, errlen, "%s", err);
            return DS_ERR_FORMAT;
        }
        ds_shard *s = NULL;
        if (ds_shard_open(path, 0, &s, err, sizeof err) != DS_OK) {
            snprintf(errout, errlen, "%s", err);
            return DS_ERR_FORMAT;
        }
        const ds_shard_header *h = ds_shard_get_header(s);
        uint64_t nt = 0, nl = 0;
        int bad_row = 0;
        uint8_t *mask = malloc(h->row_len); /* row_len <= 2^24 (header checked) */
        if (!mask) {
            ds_shard_close(s);
            return DS_ERR_NOMEM;
        }
        for (uint64_t r = 0; r < h->n_rows && !bad_row; r++) {
            uint32_t nv = 0;
            if (ds_shard_read(s, r, NULL, NULL, NULL, mask, &nv) != DS_OK) bad_row = 1;
            nt += nv;
            for (uint32_t i = 0; i < nv && !bad_row; i++) nl += mask[i];
        }
        free(mask);
        uint64_t bytes = DS_SHARD_HEADER_BYTES + h->tokens_bytes + h->meta_bytes + h->loss_bytes + 8 * h->n_blocks;
        const char *what =
            bad_row                                                  ? "row metadata"
            : xx != e->xxh3                                          ? "file checksum (xxh3)"
            : h->version != m->shard_version                         ? "shard version (shard_format_version)"
            : bytes != e->bytes                                      ? "bytes"
            : h->n_rows != e->rows                                   ? "rows"
            : nt != e->tokens                                        ? "tokens"
            : nl != e->loss_tokens                                   ? "loss_tokens"
            : h->row_len != cfg->seq_len                             ? "row length"
            : h->vocab_size != cfg->vocab_size                       ? "vocabulary size"
            : h->dtype_bytes != (cfg->vocab_size <= 65536 ? 2u : 4u) ? "dtype"
            : h->eot_id != cfg->eot_id || h->pad_id != cfg->eot_id   ? "EOT / pad id"
            : memcmp(h->fingerprint, cfg->fingerprint, 32)           ? "tokenizer fingerprint"
            : ((h->flags & DS_SHARD_F_VAL) != 0) != (e->split == 1)  ? "split"
            : ((h->flags & DS_SHARD_F_ZSTD) != 0) != (cfg->zstd_level != 0) || h->frame_rows != cfg->frame_rows
                ? "compression (zstd_level / frame_rows)"
            : ((h->flags & DS_SHARD_F_SHUFFLED) != 0) != (cfg->shuffle != 0) ? "shuffle flag"
                                                                             : NULL;
        ds_shard_close(s);
        if (what) {
            snprintf(errout, errlen, "%s: %s disagrees with %s", path, what, m->path);
            return DS_ERR_FORMAT;
        }
        rows[e->split] += e->rows;
        toks[e->split] += e->tokens;
    }
    json_t *sp = json_object_get(p->m, "splits");
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object_get(sp, k ? "val" : "train");
        json_t *r = json_object_get(o, "rows"), *t = json_object_get(o, "tokens"), *n = json_object_get(o, "shards");
        if (!json_is_integer(r) || !json_is_integer(t) || !json_is_integer(n) ||
            (uint64_t)json_integer_value(r) != rows[k] || (uint64_t)json_integer_value(t) != toks[k] ||
            (uint64_t)json_integer_value(n) != idx[k] || p->acc.rows[k] != rows[k]) {
            snprintf(errout, errlen, "%s: splits.%s / accounting.rows do not match the listed shards", m->path,
                     k ? "val" : "train");
            return DS_ERR_FORMAT;
        }
    }
    return DS_OK;
}

typedef struct {
    const char *out;
    char *err;
    size_t errlen;
    part *parts, **byk;
    int np;
    ds_build_config cfg;
    ds_build_account acc;
    ds_shard_writer wr[2];
    ds_shard_rec *recs;
    size_t n_recs, cap_recs;
    int lock_fd;
    int force; /* replace a set of another config in out */
} merge;

static int mfail(merge *m, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int mfail(merge *m, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->errlen, fmt, ap);
    va_end(ap);
    return rc;
}

/* Each folder's manifest, config and accounting; byk[K-1] = part K. */
static int load_parts(merge *m, const char *const *dirs) {
    char err[1024];
    for (int i = 0; i < m->np; i++) {
        part *p = &m->parts[i];
        p->dir = dirs[i];
        if (ds_manifest_load(p->dir, &p->man, err, sizeof err) != DS_OK) return mfail(m, DS_ERR_FORMAT, "%s", err);
        p->m = p->man.root;
        if (ds_build_config_from_json(json_object_get(p->m, "config"), &p->cfg, err, sizeof err) ||
            ds_build_account_from_json(json_object_get(p->m, "accounting"), &p->acc, err, sizeof err))
            return mfail(m, DS_ERR_FORMAT, "%s: %s", p->man.path, err);
        if (p->cfg.seq_len != p->man.seq_len)
            return mfail(m, DS_ERR_FORMAT, "%s: config.seq_len %u differs from seq_len %u", p->man.path, p->cfg.seq_len,
                         p->man.seq_len);
        /* ds_build_config_from_json checked 1 <= K <= N */
        if (p->cfg.part_n != (uint32_t)m->np)
            return mfail(m, DS_ERR_FORMAT, "%s is part %u/%u but %d part folder(s) were given", p->dir, p->cfg.part_k,
                         p->cfg.part_n, m->np);
        if (m->byk[p->cfg.part_k - 1])
            return mfail(m, DS_ERR_FORMAT, "%s and %s are both part %u/%d", m->byk[p->cfg.part_k - 1]->dir, p->dir,
                         p->cfg.part_k, m->np);
        m->byk[p->cfg.part_k - 1] = p;
    }
    /* N folders, each part K/N, no K twice: every K in 1..N is present */
    return DS_OK;
}

/* The configs agree except for part and files; the merged config is the single build's. */
static int merged_config(merge *m) {
    part **byk = m->byk;
    for (int i = 0; i < m->np; i++) {
        if (byk[i]->man.shard_version != byk[0]->man.shard_version)
            return mfail(m, DS_ERR_FORMAT,
                         "%s holds shard format version %u, %s version %u; parts must come from one command",
                         byk[i]->dir, byk[i]->man.shard_version, byk[0]->dir, byk[0]->man.shard_version);
        json_t *a = json_deep_copy(json_object_get(byk[0]->m, "config"));
        json_t *b = json_deep_copy(json_object_get(byk[i]->m, "config"));
        json_object_del(a, "part"), json_object_del(a, "files");
        json_object_del(b, "part"), json_object_del(b, "files");
        int same = json_equal(a, b) &&
                   json_equal(json_object_get(byk[0]->m, "tokenizer"), json_object_get(byk[i]->m, "tokenizer"));
        json_decref(a), json_decref(b);
        if (!same)
            return mfail(m, DS_ERR_FORMAT,
                         "%s was built with other options or tokenizer than %s; parts must come from one command",
                         byk[i]->dir, byk[0]->dir);
    }
    char err[1024];
    ds_build_config *cfg = &m->cfg;
    if (ds_build_config_from_json(json_object_get(byk[0]->m, "config"), cfg, err, sizeof err))
        return mfail(m, DS_ERR_FORMAT, "%s: %s", byk[0]->man.path, err);
    const ds_manifest *m0 = &byk[0]->man;
    snprintf(cfg->tokenizer_name, sizeof cfg->tokenizer_name, "%s", m0->tokenizer_name);
    memcpy(cfg->fingerprint, m0->fingerprint, 32);
    cfg->vocab_size = m0->vocab_size;
    cfg->eot_id = m0->eot_id;
    if (m0->pad_id != m0->eot_id)
        return mfail(m, DS_ERR_FORMAT, "%s: pad_id %u differs from eot_id %u (mkshards pads with EOT)", m0->path,
                     m0->pad_id, m0->eot_id);
    for (size_t i = 0; i < cfg->n_files; i++) free(cfg->files[i]);
    free(cfg->files), free(cfg->file_bytes);
    size_t nf = 0;
    for (int i = 0; i < m->np; i++) nf += byk[i]->cfg.n_files;
    cfg->files = calloc(nf + 1, sizeof *cfg->files);
    cfg->file_bytes = calloc(nf + 1, sizeof *cfg->file_bytes);
    cfg->n_files = 0;
    if (!cfg->files || !cfg->file_bytes) return mfail(m, DS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->np; i++)
        for (size_t j = 0; j < byk[i]->cfg.n_files; j++) {
            if (!(cfg->files[cfg->n_files] = strdup(byk[i]->cfg.files[j]))) break;
            cfg->file_bytes[cfg->n_files++] = byk[i]->cfg.file_bytes[j];
        }
    cfg->part_k = cfg->part_n = 1;
    /* the parts' loss bits go on into the merged shards (version 2 in, version 2 out) */
    cfg->loss_bits = m0->shard_version == DS_SHARD_VERSION_LOSS;
    return DS_OK;
}

/* The rows of one part shard, back in packing order, into the writer. */
static int copy_shard(merge *m, const part *p, const ds_manifest_shard *e, uint64_t index, uint32_t *row, uint32_t *st,
                      uint8_t *mask) {
    char path[4200], err[1024];
    uint32_t L = m->cfg.seq_len;
    int split = e->split;
    snprintf(path, sizeof path, "%s/%s", p->dir, e->file);
    ds_shard *s = NULL;
    if (ds_shard_open(path, 0, &s, err, sizeof err) != DS_OK) return mfail(m, DS_ERR_FORMAT, "%s", err);
    const ds_shard_header *h = ds_shard_get_header(s);
    uint64_t n = h->n_rows;
    /* check_part verified this file; a file changed since is refused, not trusted */
    if (n != e->rows || h->row_len != L) {
        ds_shard_close(s);
        return mfail(m, DS_ERR_FORMAT, "%s changed while merging", path);
    }
    uint32_t *perm = malloc((n + 1) * sizeof *perm); /* n <= file size / 8 (header checked) */
    uint32_t *inv = malloc((n + 1) * sizeof *inv);
    int rc = DS_OK;
    if (!perm || !inv) rc = mfail(m, DS_ERR_NOMEM, "out of memory");
    if (rc == DS_OK) {
        if (m->cfg.shuffle) ds_shard_shuffle_perm(m->cfg.seed, split, index, perm, n);
        else
            for (uint64_t j = 0; j < n; j++) perm[j] = (uint32_t)j;
        for (uint64_t j = 0; j < n; j++) inv[perm[j]] = (uint32_t)j;
    }
    for (uint64_t r = 0; r < n && rc == DS_OK; r++) {
        uint32_t nv = 0, ns = 0;
        if (ds_shard_read(s, inv[r], row, NULL, NULL, m->cfg.loss_bits ? mask : NULL, &nv) != DS_OK ||
            ds_shard_row_starts(s, inv[r], st, &ns) != DS_OK) {
            rc = mfail(m, DS_ERR_FORMAT, "%s: row %u unreadable", path, inv[r]);
            break;
        }
        ds_build_account dummy;
        memset(&dummy, 0, sizeof dummy);
        if (ds_shard_writer_add_loss(&m->wr[split], row, m->cfg.loss_bits ? mask : NULL, nv, st, ns, &dummy) != DS_OK)
            rc = mfail(m, DS_ERR_IO, "%s", m->wr[split].err);
    }
    ds_shard_close(s);
    free(perm), free(inv);
    return rc;
}

/* Rows back into packing order, part by part, split by split. */
static int write_rows(merge *m) {
    uint32_t L = m->cfg.seq_len;
    uint32_t *row = malloc((size_t)L * sizeof *row), *st = malloc((size_t)L * sizeof *st);
    uint8_t *mask = malloc(L);
    int rc = row && st && mask ? DS_OK : mfail(m, DS_ERR_NOMEM, "out of memory");
    for (int s = 0; s < 2; s++) ds_shard_writer_init(&m->wr[s], &m->cfg, s, m->out, &m->recs, &m->n_recs, &m->cap_recs);
    for (int i = 0; i < m->np && rc == DS_OK; i++) {
        const ds_manifest *pm = &m->byk[i]->man;
        uint64_t idx[2] = {0, 0};
        for (size_t q = 0; q < pm->n_shards && rc == DS_OK; q++) {
            const ds_manifest_shard *e = &pm->shards[q];
            rc = copy_shard(m, m->byk[i], e, idx[e->split]++, row, st, mask);
        }
    }
    free(row), free(st), free(mask);
    if (rc != DS_OK) return rc;
    ds_build_account dummy;
    memset(&dummy, 0, sizeof dummy);
    for (int s = 0; s < 2; s++)
        if (ds_shard_writer_finish(&m->wr[s], &dummy) != DS_OK) return mfail(m, DS_ERR_IO, "%s", m->wr[s].err);
    return DS_OK;
}

/* Accounting (every counter a sum over parts), rejects.jsonl, manifest. */
static int write_rest(merge *m) {
    ds_build_account *acc = &m->acc;
    for (int i = 0; i < m->np; i++) {
        uint64_t *dst = (uint64_t *)acc, *src = (uint64_t *)&m->byk[i]->acc;
        for (size_t w = 0; w < sizeof *acc / sizeof(uint64_t); w++) dst[w] += src[w];
    }
    acc->shards[0] = acc->shards[1] = 0; /* not in the manifest's accounting */
    char rej_path[4200], rej_tmp[4200];
    snprintf(rej_path, sizeof rej_path, "%s/rejects.jsonl", m->out);
    snprintf(rej_tmp, sizeof rej_tmp, "%s/rejects.jsonl.tmp", m->out);
    /* the common layer's atomic write (fresh temporary, fsync, rename, fsync
     * of the folder), streamed: the parts' rejects are appended one by one */
    int fd = mc_atomic_open(rej_tmp, 0644, m->err, m->errlen), dfd = fd >= 0 ? dup(fd) : -1;
    FILE *rej = dfd >= 0 ? fdopen(dfd, "wb") : NULL;
    if (!rej) {
        if (dfd >= 0) close(dfd);
        if (fd >= 0) mc_atomic_commit(fd, 1, rej_tmp, rej_path, NULL, 0);
        return mfail(m, DS_ERR_IO, "cannot write '%s': %s", rej_tmp, strerror(errno));
    }
    for (int i = 0; i < m->np; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/rejects.jsonl", m->byk[i]->dir);
        if (copy_append(rej, p)) {
            fclose(rej);
            mc_atomic_commit(fd, 1, rej_tmp, rej_path, NULL, 0);
            return mfail(m, DS_ERR_IO, "cannot read '%s'", p);
        }
    }
    int bad = fclose(rej) != 0;
    char why[600];
    if (mc_atomic_commit(fd, bad, rej_tmp, rej_path, why, sizeof why) != MC_OK)
        return mfail(m, DS_ERR_IO, "%s", bad ? "cannot write rejects.jsonl.tmp" : why);
    ds_build_clean_dir(m->out, m->recs, m->n_recs);
    return ds_manifest_write(m->out, &m->cfg, acc, m->recs, m->n_recs, m->err, m->errlen);
}

/* Create and lock the output folder; check every part shard first. */
static int prepare_out(merge *m) {
    if (mkdir(m->out, 0755) != 0 && errno != EEXIST)
        return mfail(m, DS_ERR_IO, "cannot create --out '%s': %s", m->out, strerror(errno));
    for (int i = 0; i < m->np; i++)
        if (ds_same_file(m->out, m->byk[i]->dir))
            return mfail(m, DS_ERR_ARG, "--out must not be one of the part folders");
    /* one writer per folder: a build or another merge into the same --out would
     * interleave shards and manifests (the result fails verify) */
    m->lock_fd = ds_lock_dir(m->out, "build or merge", m->err, m->errlen);
    if (m->lock_fd < 0) return m->lock_fd;
    /* links, FIFOs or devices under the names merge writes would send its
     * writes elsewhere or block them (as in build) */
    int rc = ds_build_remove_special(m->out, m->err, m->errlen);
    if (rc != DS_OK) return rc;
    /* a shard set of another build in out is not replaced without force
     * (build's rule: its shards would be deleted or overwritten) */
    char e2[1024];
    json_t *old = ds_manifest_load_root(m->out, e2, sizeof e2), *cj = ds_build_config_json(&m->cfg);
    int same = 0;
    rc = cj ? ds_out_refuse_other(m->out, old, cj, m->cfg.fingerprint, m->force, &same, m->err, m->errlen)
            : mfail(m, DS_ERR_NOMEM, "out of memory");
    json_decref(old);
    json_decref(cj);
    if (rc != DS_OK) return rc;
    /* every shard of every part against its manifest before anything is written */
    for (int i = 0; i < m->np; i++)
        if ((rc = check_part(m->byk[i], &m->cfg, m->err, m->errlen)) != DS_OK) return rc;
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.json", m->out);
    unlink(mp);
    ds_build_clean_dir(m->out, NULL, 0);
    return DS_OK;
}

int ds_merge(const char *out_dir, const char *const *part_dirs, size_t n_parts, int force, size_t *n_shards,
             uint64_t *rows_train, uint64_t *rows_val, char *err, size_t errlen) {
    char dummy[8];
    if (!err || !errlen) err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (!out_dir || !part_dirs || n_parts < 1 || n_parts > DS_BUILD_MAX_PARTS) {
        snprintf(err, errlen, "ds_merge: an output folder and 1..%d part folders are required", DS_BUILD_MAX_PARTS);
        return DS_ERR_ARG;
    }
    merge m;
    memset(&m, 0, sizeof m);
    m.out = out_dir;
    m.err = err;
    m.errlen = errlen;
    m.np = (int)n_parts;
    m.lock_fd = -1;
    m.force = force != 0;
    m.parts = calloc(n_parts, sizeof *m.parts);
    m.byk = calloc(n_parts, sizeof *m.byk);
    int rc = m.parts && m.byk ? DS_OK : mfail(&m, DS_ERR_NOMEM, "out of memory");
    if (rc == DS_OK) rc = load_parts(&m, part_dirs);
    if (rc == DS_OK) rc = merged_config(&m);
    if (rc == DS_OK) rc = prepare_out(&m);
    if (rc == DS_OK) rc = write_rows(&m);
    if (rc == DS_OK) rc = write_rest(&m);
    if (rc == DS_OK) {
        if (n_shards) *n_shards = m.n_recs;
        if (rows_train) *rows_train = m.acc.rows[0];
        if (rows_val) *rows_val = m.acc.rows[1];
    }
    ds_unlock_dir(out_dir, m.lock_fd);
    for (int s = 0; s < 2; s++) ds_shard_writer_free(&m.wr[s]);
    for (int i = 0; m.parts && i < m.np; i++) {
        ds_manifest_free(&m.parts[i].man);
        ds_build_config_free(&m.parts[i].cfg);
    }
    ds_build_config_free(&m.cfg);
    free(m.parts), free(m.byk), free(m.recs);
    return rc;
}
