/* build_inputs.c - which files a build reads: the inputs expanded by the
 * reader's own walk (ds_input_expand: folders recursive, sorted by name,
 * hidden names skipped, dataset extensions only; a dataset-named entry that
 * is not a regular file refused, as lint / encode / hist refuse it) and cut
 * into --part K/N (contiguous ranges of the file list, balanced by bytes). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "build_internal.h"
#include "ds_internal.h"

int ds_build_select_files(ds_build_config *cfg, const char *out_dir, char *err, size_t errlen) {
    ds_input_files all;
    err[0] = 0;
    /* keep_spelling: config.files keeps the bytes earlier builds recorded */
    int rc = ds_input_expand((const char *const *)cfg->inputs, cfg->n_inputs, 1, &all, err, errlen);
    if (rc != DS_OK) {
        if (!err[0]) snprintf(err, errlen, "%s", ds_strerror(rc));
        return rc == DS_ERR_NOMEM ? rc : DS_ERR_IO;
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
        uint64_t p =
            total ? (uint64_t)(((unsigned __int128)(2 * cum + all.bytes[i]) * part_n) / (2 * (unsigned __int128)total))
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
    ds_read_paths rp = {.inputs = (const char *const *)cfg->inputs,
                        .n_inputs = cfg->n_inputs,
                        .tokenizer = cfg->tokenizer_spec[0] ? cfg->tokenizer_spec : NULL};
    rc = ds_check_output("--out", out_dir, &rp, err, errlen);
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
    ds_input_files_free(&all);
    return rc;
}

uint64_t ds_build_estimate_bytes(const char *path, uint64_t size) {
    size_t n = strlen(path);
    /* gzip's ISIZE trailer is mod 2^32 and names the last member only */
    if (n > 3 && !strcmp(path + n - 3, ".gz")) return size * 4;
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
