/* build_inputs.c - which files a build reads: the inputs expanded as the
 * reader expands them (folders recursive, sorted by name, hidden names
 * skipped, dataset extensions only) and cut into --part K/N (contiguous
 * ranges of the file list, balanced by bytes). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "build_internal.h"

typedef struct {
    char **path;
    uint64_t *bytes;
    size_t n, cap;
} flist;

static int flist_push(flist *l, const char *p, uint64_t bytes) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        char **np = realloc(l->path, nc * sizeof *np);
        if (np) l->path = np;
        uint64_t *nb = realloc(l->bytes, nc * sizeof *nb);
        if (nb) l->bytes = nb;
        if (!np || !nb) return -1;
        l->cap = nc;
    }
    if (!(l->path[l->n] = strdup(p))) return -1;
    l->bytes[l->n++] = bytes;
    return 0;
}

static int known_ext(const char *p) {
    static const char *const ex[] = {".jsonl", ".ndjson", ".json", ".txt", ".text"};
    size_t n = strlen(p);
    if (n > 4 && !strcmp(p + n - 4, ".zst")) n -= 4;
    else if (n > 5 && !strcmp(p + n - 5, ".zstd")) n -= 5;
    for (size_t i = 0; i < 5; i++) {
        size_t k = strlen(ex[i]);
        if (n >= k && !strncmp(p + n - k, ex[i], k)) return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Same expansion as the reader: folders recursive, sorted by name, hidden
 * names skipped, files with a dataset extension. */
static int walk(flist *l, const char *dir, int depth, char *err, size_t errlen) {
    if (depth > 64) {
        snprintf(err, errlen, "folder '%s' is nested more than 64 levels deep", dir);
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "cannot read folder '%s': %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            char **nn = realloc(names, nc * sizeof *names);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(e->d_name))) rc = -1;
        else n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str); /* an empty folder: names is NULL */
    if (rc) snprintf(err, errlen, "out of memory listing '%s'", dir);
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *p = malloc(len);
        if (!p) {
            rc = -1;
            break;
        }
        snprintf(p, len, "%s/%s", dir, names[i]);
        struct stat ls, st;
        if (lstat(p, &ls) == 0 && stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                if (!S_ISLNK(ls.st_mode)) rc = walk(l, p, depth + 1, err, errlen);
            } else if (S_ISREG(st.st_mode) && known_ext(p)) {
                rc = flist_push(l, p, (uint64_t)st.st_size);
            }
        }
        free(p);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

static int expand_inputs(char **inputs, size_t n, flist *out, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!strcmp(inputs[i], "-")) {
            if (flist_push(out, "-", 0)) return -1;
            continue;
        }
        if (stat(inputs[i], &st) != 0) {
            snprintf(err, errlen, "cannot open input '%s': %s", inputs[i], strerror(errno));
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            if (walk(out, inputs[i], 0, err, errlen)) return -1;
        } else if (flist_push(out, inputs[i], (uint64_t)st.st_size))
            return -1;
    }
    return 0;
}

int ds_build_select_files(ds_build_config *cfg, const char *out_dir, char *err, size_t errlen) {
    flist all = {0};
    int rc = DS_OK;
    err[0] = 0;
    if (expand_inputs(cfg->inputs, cfg->n_inputs, &all, err, errlen)) {
        if (!err[0]) snprintf(err, errlen, "out of memory");
        rc = DS_ERR_IO;
        goto out;
    }
    uint64_t total = 0, cum = 0, part_n = cfg->part_n, part_k = cfg->part_k;
    for (size_t i = 0; i < all.n; i++) total += all.bytes[i];
    cfg->files = calloc(all.n + 1, sizeof *cfg->files);
    cfg->file_bytes = calloc(all.n + 1, sizeof *cfg->file_bytes);
    if (!cfg->files || !cfg->file_bytes) {
        snprintf(err, errlen, "out of memory");
        rc = DS_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < all.n; i++) {
        if (part_n > 1 && !strcmp(all.path[i], "-")) {
            snprintf(err, errlen, "--part cannot split stdin; give files or folders");
            rc = DS_ERR_ARG;
            goto out;
        }
        uint64_t p = total ? (uint64_t)(((unsigned __int128)(2 * cum + all.bytes[i]) * part_n) / (2 * (unsigned __int128)total))
                           : (uint64_t)i * part_n / all.n;
        if (p >= part_n) p = part_n - 1;
        cum += all.bytes[i];
        if (p + 1 == part_k) {
            if (!(cfg->files[cfg->n_files] = strdup(all.path[i]))) {
                snprintf(err, errlen, "out of memory");
                rc = DS_ERR_NOMEM;
                goto out;
            }
            cfg->file_bytes[cfg->n_files++] = all.bytes[i];
        }
    }
    /* before anything is created or deleted: the output must be neither an
     * input, nor inside an input folder, nor hold an input (it would read its
     * own manifest and shards, and force would delete them) */
    rc = ds_refuse_overwrite("--out", out_dir, "the input", (const char *const *)cfg->inputs, cfg->n_inputs, err,
                             errlen);
    for (size_t i = 0; rc == DS_OK && i < cfg->n_inputs + all.n; i++) {
        const char *in = i < cfg->n_inputs ? cfg->inputs[i] : all.path[i - cfg->n_inputs];
        if (strcmp(in, "-") && ds_path_within(in, out_dir) == 1) {
            snprintf(err, errlen,
                     "the input '%s' lies inside --out '%s': the build would overwrite or delete its own "
                     "input; choose an --out outside the inputs",
                     in, out_dir);
            rc = DS_ERR_CONFLICT;
        }
    }
out:
    for (size_t i = 0; i < all.n; i++) free(all.path[i]);
    free(all.path);
    free(all.bytes);
    return rc;
}

uint64_t ds_build_estimate_bytes(const char *path, uint64_t size) {
    size_t n = strlen(path);
    if (!(n > 4 && !strcmp(path + n - 4, ".zst"))) return size;
    uint8_t hb[32];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return size * 4;
    ssize_t r = read(fd, hb, sizeof hb);
    close(fd);
    if (r > 0) {
        unsigned long long cs = ZSTD_getFrameContentSize(hb, (size_t)r);
        if (cs != ZSTD_CONTENTSIZE_UNKNOWN && cs != ZSTD_CONTENTSIZE_ERROR && cs > size) return cs;
    }
    return size * 4;
}

