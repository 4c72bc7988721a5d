/* fileio.c - opening untrusted paths safely (see docs/threat-model.md).
 *
 * Data files (inputs, shards, manifests, checkpoints) are opened only when they
 * are regular files: a FIFO, a character device or a socket in their place
 * would block a reader forever or feed it unbounded bytes. The checks are the
 * common layer's mc_open_regular (O_NONBLOCK open, fstat S_ISREG, blocking
 * again), the one copy tk and ds share. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "mks_common.h"
#include "mks_env.h"

int ds_open_regular(const char *path, char *err, size_t errlen) {
    int fd = mc_open_regular(path, 0, NULL, err, errlen); /* no cap: shards are mapped, inputs streamed */
    return fd >= 0 ? fd : fd == MC_ERR_NOMEM ? DS_ERR_NOMEM : DS_ERR_IO;
}

FILE *ds_fopen_regular(const char *path, char *err, size_t errlen) {
    int fd = ds_open_regular(path, err, errlen);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        if (err) snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

int ds_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (!a || !b || stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* realpath of the longest existing prefix of path, with the rest appended:
 * a folder that does not exist yet still resolves through its parents. */
static int resolve_existing(const char *path, char *out, size_t outlen) {
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf) return -1;
    strcpy(buf, path);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    char rest[PATH_MAX] = "";
    for (;;) {
        char real[PATH_MAX];
        if (realpath(buf[0] ? buf : ".", real)) {
            int w = snprintf(out, outlen, "%s%s%s", real, rest[0] && strcmp(real, "/") ? "/" : "", rest);
            return w < 0 || (size_t)w >= outlen ? -1 : 0;
        }
        if (errno != ENOENT && errno != ENOTDIR) return -1;
        char *slash = strrchr(buf, '/');
        const char *last = slash ? slash + 1 : buf;
        if (!strcmp(last, "..") || !strcmp(last, ".")) return -1; /* cannot resolve lexically */
        char tmp[PATH_MAX];
        int w = snprintf(tmp, sizeof tmp, "%s%s%s", last, rest[0] ? "/" : "", rest);
        if (w < 0 || (size_t)w >= sizeof tmp) return -1;
        strcpy(rest, tmp);
        if (!slash) buf[0] = 0;
        else if (slash == buf) buf[1] = 0;
        else *slash = 0;
    }
}

int ds_path_within(const char *path, const char *dir) {
    char p[PATH_MAX], d[PATH_MAX];
    if (resolve_existing(path, p, sizeof p) != 0 || resolve_existing(dir, d, sizeof d) != 0) return -1;
    size_t n = strlen(d);
    if (!strcmp(d, "/")) return 1;
    return strncmp(p, d, n) == 0 && (p[n] == 0 || p[n] == '/');
}

/* Appends DIR_PREFIX + NAME to paths[*n] when it exists and is not a folder. */
static void add_source(char paths[][DS_PATH_BYTES], size_t *n, size_t max, const char *a, const char *b) {
    struct stat st;
    if (*n >= max) return;
    int w = snprintf(paths[*n], DS_PATH_BYTES, "%s%s", a, b);
    if (w < 0 || w >= DS_PATH_BYTES || stat(paths[*n], &st) != 0 || S_ISDIR(st.st_mode)) return;
    (*n)++;
}

size_t ds_tokenizer_sources(const char *spec, char paths[][DS_PATH_BYTES], size_t max) {
    size_t n = 0;
    struct stat st;
    if (!spec || !*spec) return 0;
    if (stat(spec, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            add_source(paths, &n, max, spec, "/encoder.json");
            add_source(paths, &n, max, spec, "/vocab.bpe");
            add_source(paths, &n, max, spec, "/tokenizer.json");
        } else {
            add_source(paths, &n, max, spec, "");
            add_source(paths, &n, max, spec, ".meta.json");
        }
        return n;
    }
    /* a vocabulary name: the files tk_load looks for in $MKS_VOCAB_DIR
     * (tiktoken's cache is not listed: its files are named by hash) */
    const char *vd = mks_getenv("MKS_VOCAB_DIR");
    if (!vd || !*vd || strchr(spec, '/')) return 0;
    char dir[DS_PATH_BYTES];
    snprintf(dir, sizeof dir, "%s/", vd);
    static const char *const gpt2[] = {"gpt2.tiktoken", "r50k_base.tiktoken", "encoder.json", "vocab.bpe"};
    if (!strcmp(spec, "gpt2") || !strcmp(spec, "r50k_base")) {
        for (size_t i = 0; i < 4; i++) add_source(paths, &n, max, dir, gpt2[i]);
    } else {
        char f[300];
        snprintf(f, sizeof f, "%.200s.tiktoken", spec);
        add_source(paths, &n, max, dir, f);
    }
    return n;
}

/* The refusal of an output: the message (mc_set_err ignores a NULL err)
 * and DS_ERR_CONFLICT. */
static int conflict(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int conflict(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mc_vset_err(err, errlen, fmt, ap);
    va_end(ap);
    return DS_ERR_CONFLICT;
}
#define DESTROYS_INPUT ": writing it would destroy the input; choose another output path"

/* OUT against one input path: the same file, or inside it when it is a folder. */
static int check_one(const char *label, const char *out, const char *in_what, const char *in, char *err,
                     size_t errlen) {
    if (!in || !*in || !strcmp(in, "-")) return DS_OK;
    if (ds_same_file(out, in))
        return conflict(err, errlen, "%s '%s' is the same file as %s '%s'" DESTROYS_INPUT, label, out, in_what, in);
    struct stat st;
    if (stat(in, &st) == 0 && S_ISDIR(st.st_mode) && ds_path_within(out, in) == 1)
        return conflict(err, errlen,
                        "%s '%s' lies inside the input folder '%s': the output would be mixed with the input; "
                        "choose an output outside it",
                        label, out, in);
    return DS_OK;
}

/* OUT against a shard set's folder: inside it, or another name (a hard or
 * symbolic link elsewhere) of one of the files in it. */
static int check_set(const char *label, const char *out, const char *what, const char *set, char *err, size_t errlen) {
    if (!set || !*set) return DS_OK;
    if (ds_path_within(out, set) == 1)
        return conflict(err, errlen,
                        "%s '%s' lies inside %s '%s': its manifest, shards and rejects.jsonl are inputs "
                        "(merge and verify read them); write it outside the set",
                        label, out, what, set);
    struct stat os;
    if (stat(out, &os) != 0) return DS_OK; /* not there yet: no other name of a file of the set */
    DIR *d = opendir(set);
    if (!d) return DS_OK; /* the reader reports an unreadable set */
    struct dirent *e;
    int rc = DS_OK;
    while (rc == DS_OK && (e = readdir(d))) {
        char p[DS_PATH_BYTES];
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", set, e->d_name) >= (int)sizeof p || lstat(p, &st) != 0 ||
            !S_ISREG(st.st_mode) || st.st_dev != os.st_dev || st.st_ino != os.st_ino)
            continue;
        rc = conflict(err, errlen, "%s '%s' is the same file as '%s' of %s '%s'" DESTROYS_INPUT, label, out, p, what,
                      set);
    }
    closedir(d);
    return rc;
}

int ds_check_output(const char *label, const char *out, const ds_read_paths *in, char *err, size_t errlen) {
    if (!out || !*out || !strcmp(out, "-") || !in) return DS_OK;
    if (!label) label = "the output";
    const char *what = in->in_what ? in->in_what : "the input";
    int rc = DS_OK;
    for (size_t i = 0; rc == DS_OK && i < in->n_inputs; i++)
        rc = check_one(label, out, what, in->inputs[i], err, errlen);
    if (rc == DS_OK && in->tokenizer) {
        char paths[DS_TK_SOURCES_MAX][DS_PATH_BYTES];
        size_t n = ds_tokenizer_sources(in->tokenizer, paths, DS_TK_SOURCES_MAX);
        for (size_t i = 0; rc == DS_OK && i < n; i++)
            rc = check_one(label, out, "the tokenizer file", paths[i], err, errlen);
    }
    const char *set_what = in->set_what ? in->set_what : "the shard set";
    for (size_t i = 0; rc == DS_OK && i < in->n_sets; i++)
        rc = check_set(label, out, set_what, in->sets[i], err, errlen);
    return rc;
}

int ds_refuse_overwrite(const char *out_label, const char *out, const char *in_what, const char *const *inputs,
                        size_t n_inputs, char *err, size_t errlen) {
    ds_read_paths in = {.inputs = inputs, .n_inputs = n_inputs, .in_what = in_what};
    return ds_check_output(out_label, out, &in, err, errlen);
}

int ds_lock_dir(const char *dir, const char *what, char *err, size_t errlen) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/.lock", dir) >= (int)sizeof path) {
        if (err) snprintf(err, errlen, "output folder path too long: %s", dir);
        return DS_ERR_ARG;
    }
    for (int attempt = 0;; attempt++) {
        int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
        struct stat st, now;
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (err)
                snprintf(err, errlen, "cannot open the lock file '%s': %s", path,
                         fd < 0 ? strerror(errno) : "not a regular file");
            if (fd >= 0) close(fd);
            return DS_ERR_IO;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno, busy = e == EWOULDBLOCK || e == EAGAIN;
            if (busy) {
                char buf[32] = "";
                ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
                long pid = 0;
                if (n > 0) {
                    buf[n] = 0;
                    pid = strtol(buf, NULL, 10);
                }
                if (err && pid > 0)
                    snprintf(err, errlen, "another %s holds %s (pid %ld); wait for it to finish or use another --out",
                             what, path, pid);
                else if (err)
                    snprintf(err, errlen, "another %s holds %s; wait for it to finish or use another --out", what,
                             path);
            } else if (err) {
                snprintf(err, errlen, "cannot lock '%s': %s", path, strerror(e));
            }
            close(fd);
            return busy ? DS_ERR_BUSY : DS_ERR_IO;
        }
        /* the holder before us unlinks the file while it still holds the lock
         * (ds_unlock_dir): a lock on an inode no longer at PATH protects
         * nothing, so open the new one */
        if (lstat(path, &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
            close(fd);
            if (attempt < 100) continue;
            if (err) snprintf(err, errlen, "cannot lock '%s': it keeps being replaced", path);
            return DS_ERR_BUSY;
        }
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
            /* the lock is held all the same; only the pid in messages is missing */
        }
        return fd;
    }
}

void ds_unlock_dir(const char *dir, int fd) {
    if (fd < 0) return;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/.lock", dir) < (int)sizeof path) unlink(path); /* while still held */
    close(fd);
}
