/* build_outdir.c - the output folder's protocol for ds_build: what is
 * removed before a build looks at it, when it already holds this build (the
 * checks of `mkshards verify`), and rejects.jsonl. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build_internal.h"

int ds_rejects_write(FILE *f, const char *file, uint64_t line, uint64_t offset, int reason, const char *detail,
                     uint64_t bytes) {
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(file ? file : "?"));
    json_object_set_new(o, "line", json_integer((json_int_t)line));
    json_object_set_new(o, "offset", json_integer((json_int_t)offset));
    json_object_set_new(o, "reason", json_string(ds_reject_reason_name(reason)));
    json_object_set_new(o, "detail", json_string(detail && detail[0] ? detail : ds_reject_reason_name(reason)));
    json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
    int rc = json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(o);
    if (rc || fputc('\n', f) == EOF) return -1;
    return 0;
}

/* DIR/rejects.jsonl.part, opened without following a link planted in the
 * output folder: fresh (whatever was there is unlinked, then created
 * exclusively) or, on resume, the existing regular file cut back to len (the
 * length the checkpoint recorded) and appended to. NULL + errno on failure. */
FILE *ds_rejects_open(const char *path, int resume, uint64_t len) {
    int fd;
    if (resume) {
        struct stat st;
        fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < len ||
                        len > (uint64_t)INT64_MAX || ftruncate(fd, (off_t)len) != 0)) {
            close(fd);
            errno = EINVAL;
            return NULL;
        }
    } else {
        if (unlink(path) != 0 && errno != ENOENT) return NULL;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, resume ? "a" : "w");
    if (!f) close(fd);
    return f;
}

int ds_mkdir_p(const char *dir) {
    char *d = strdup(dir);
    if (!d) return -1;
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0755);
            *p = '/';
        }
    int r = mkdir(d, 0755);
    free(d);
    return r == 0 || errno == EEXIST ? 0 : -1;
}

/* Names this build reads back or replaces in DIR. Anything under one of them
 * that is not a regular file (a FIFO, a device, a symbolic link planted in
 * the folder) is removed before the build looks at DIR: opening a FIFO would
 * block (reading the manifest, the checkpoint, or comparing a shard before
 * rewriting it), and a link would make the build read or write outside DIR.
 * 0, or -1 with a message (a folder under such a name). */
int ds_build_remove_special(const char *dir, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot read --out '%s': %s", dir, strerror(errno));
        return DS_ERR_IO;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t l = strlen(n);
        int ours = !strcmp(n, "manifest.json") || !strcmp(n, "build.ckpt") || !strcmp(n, "rejects.jsonl") ||
                   !strcmp(n, "rejects.jsonl.part") || (l > 4 && !strcmp(n + l - 4, ".tmp")) ||
                   (l > 4 && !strcmp(n + l - 4, ".mks") && (!strncmp(n, "train-", 6) || !strncmp(n, "val-", 4)));
        if (!ours) continue;
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) continue;
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "'%s' is a folder where the build writes a file; remove it or use another --out",
                     path);
            rc = DS_ERR_CONFLICT;
        } else if (unlink(path) != 0) {
            snprintf(err, errlen, "cannot remove '%s' (not a regular file): %s", path, strerror(errno));
            rc = DS_ERR_IO;
        }
    }
    closedir(d);
    return rc;
}

int ds_out_refuse_other(const char *dir, json_t *m, json_t *cfgj, const uint8_t fp[32], int force, int *same, char *err,
                        size_t errlen) {
    *same = 0;
    if (!m) return DS_OK;
    char fph[65];
    ds_shard_hex(fp, 32, fph);
    const char *mfp = json_string_value(json_object_get(json_object_get(m, "tokenizer"), "fingerprint"));
    *same = json_equal(json_object_get(m, "config"), cfgj) && mfp && !strcmp(mfp, fph);
    if (*same || force) return DS_OK;
    snprintf(err, errlen, "'%s' holds a build with a different configuration; use another --out or --force", dir);
    return DS_ERR_CONFLICT;
}

/* A shard name as this tool writes it: train-NNNNN.mks / val-NNNNN.mks, no
 * '/' or "..", so a crafted manifest cannot point outside DIR. */
static int plain_shard_name(const char *n) {
    if (!n || !*n || strchr(n, '/') || strstr(n, "..") || strlen(n) >= 64) return 0;
    size_t l = strlen(n);
    return l > 4 && !strcmp(n + l - 4, ".mks") && (!strncmp(n, "train-", 6) || !strncmp(n, "val-", 4));
}

/* Nothing to do when DIR holds a complete manifest with the same config whose
 * shards all pass what `mkshards verify` checks per shard: the structure
 * (header, block checksums, metadata) and the whole-file XXH3, size and rows
 * recorded in the manifest. *n_checked: shards checked. 1: up to date, 0:
 * rebuild, -1: refuse (different config, no --force). */
int ds_build_check_existing(const char *dir, json_t *cfgj, const uint8_t fp[32], int force, size_t *n_checked,
                            char *why, size_t whylen, char *errout, size_t errlen) {
    *n_checked = 0;
    why[0] = 0;
    char err[512];
    json_t *m = ds_manifest_load_root(dir, err, sizeof err);
    if (!m) return 0;
    int same = 0;
    int rc = ds_out_refuse_other(dir, m, cfgj, fp, force, &same, errout, errlen);
    if (rc != DS_OK) {
        json_decref(m);
        return rc;
    }
    int ok = same;
    json_t *sh = json_object_get(m, "shards");
    if (!json_is_array(sh)) ok = 0;
    for (size_t i = 0; ok && i < json_array_size(sh); i++) {
        json_t *s = json_array_get(sh, i);
        const char *name = json_string_value(json_object_get(s, "file"));
        const char *mx = json_string_value(json_object_get(s, "xxh3"));
        char path[4200], hx[17];
        if (!plain_shard_name(name) || !mx) {
            snprintf(why, whylen, "shard %zu of the manifest has no valid file name or xxh3", i);
            ok = 0;
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, name);
        /* regular file only: ds_shard_verify must not block on a FIFO */
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            (json_int_t)st.st_size != json_integer_value(json_object_get(s, "bytes"))) {
            snprintf(why, whylen, "%.400s is missing, not a regular file or not the size the manifest records", path);
            ok = 0;
            break;
        }
        uint64_t xx = 0;
        if (ds_shard_verify(path, &xx, err, sizeof err) != DS_OK) {
            snprintf(why, whylen, "%s", err);
            ok = 0;
            break;
        }
        snprintf(hx, sizeof hx, "%016" PRIx64, xx);
        ds_shard *h = NULL;
        if (strcmp(hx, mx) || ds_shard_open(path, 0, &h, err, sizeof err) != DS_OK) {
            snprintf(why, whylen, "%.400s: file checksum %s disagrees with the manifest's %s", path, hx, mx);
            ok = 0;
            break;
        }
        if (ds_shard_get_header(h)->n_rows != (uint64_t)json_integer_value(json_object_get(s, "rows"))) {
            snprintf(why, whylen, "%.400s: rows disagree with the manifest", path);
            ok = 0;
        }
        ds_shard_close(h);
        if (ok) ++*n_checked;
    }
    char rp[4200];
    snprintf(rp, sizeof rp, "%s/rejects.jsonl", dir);
    if (ok && access(rp, R_OK) != 0) ok = 0;
    json_decref(m);
    if (ok) {
        char cp[4200];
        snprintf(cp, sizeof cp, "%s/build.ckpt", dir);
        unlink(cp);
        return 1;
    }
    /* the old manifest must not reference shards we are about to rewrite */
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.json", dir);
    unlink(mp);
    return 0;
}
