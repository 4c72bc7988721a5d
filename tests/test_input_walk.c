/* test_input_walk: build and the readers (lint, hist, encode, tokenizer
 * train: all ds_reader_open) see exactly the same input files of a folder.
 * The folder holds every input kind and codec, hidden files and a hidden
 * folder, a link to a file and a link to a folder, non-input extensions and
 * a nested folder; build's file list (ds_build_select_files) must equal the
 * files the reader delivers records from, in order, and both the expected
 * list (hidden names skipped, links to files followed, links to folders
 * not, other extensions skipped, sorted by name at each level). */
#include "build_internal.h"
#include "ds.h"
#include "test_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

static char dir[256];

static void put(const char *name, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL, "%s", p);
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static void put_text(const char *name, const char *text) { put(name, text, strlen(text)); }

static void put_zst(const char *name, const char *text) {
    uint8_t out[256];
    size_t z = ZSTD_compress(out, sizeof out, text, strlen(text), 3);
    CHECK(!ZSTD_isError(z));
    put(name, out, z);
}

static void put_gz(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    gzFile g = gzopen(p, "wb");
    CHECK(g != NULL);
    if (!g) return;
    gzwrite(g, text, (unsigned)strlen(text));
    gzclose(g);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/test_input_walk.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) return 1;
    char in[300], p[600], q[600];
    snprintf(in, sizeof in, "%s/in", dir);
    mkdir(in, 0755);
    const char *subs[] = {"in/sub", "in/sub/deeper", "in/.hidden_dir", "in/other"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, subs[i]);
        mkdir(p, 0755);
    }
    const char *doc = "{\"text\":\"one document\"}\n";
    put_text("in/a.jsonl", doc);
    put_text("in/b.ndjson", doc);
    put_text("in/c.json", doc);
    put_text("in/d.txt", "a text document\n");
    put_text("in/e.text", "another text document\n");
    put_zst("in/f.jsonl.zst", doc);
    put_zst("in/g.txt.zstd", "zstd text\n");
    put_gz("in/h.jsonl.gz", doc);
    put_gz("in/sub/i.txt.gz", "gzip text\n");
    put_text("in/sub/deeper/j.jsonl", doc);
    put_text("in/.hidden.jsonl", doc);         /* hidden: skipped */
    put_text("in/.hidden_dir/k.jsonl", doc);   /* in a hidden folder: skipped */
    put_text("in/notes.md", "not an input\n"); /* other extensions: skipped */
    put_text("in/data.csv", "x,y\n");
    put_text("in/sub/l.jsonl.bak", doc);
    put_text("in/other/m.txt", "linked to\n");
    snprintf(p, sizeof p, "%s/in/other/m.txt", dir);
    snprintf(q, sizeof q, "%s/in/sub/link.txt", dir);
    CHECK(symlink(p, q) == 0); /* a link to a file: followed */
    snprintf(p, sizeof p, "%s/in/other", dir);
    snprintf(q, sizeof q, "%s/in/sub/folder_link", dir);
    CHECK(symlink(p, q) == 0); /* a link to a folder: not followed */
    static const char *const want[] = {
        "a.jsonl",     "b.ndjson",           "c.json",       "d.txt",
        "e.text",      "f.jsonl.zst",        "g.txt.zstd",   "h.jsonl.gz",
        "other/m.txt", "sub/deeper/j.jsonl", "sub/i.txt.gz", "sub/link.txt",
    };
    size_t n_want = sizeof want / sizeof *want;

    /* build's list */
    char *inputs[1] = {in};
    ds_build_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.inputs = inputs;
    cfg.n_inputs = 1;
    cfg.part_k = cfg.part_n = 1;
    char err[512] = "", out[600];
    snprintf(out, sizeof out, "%s/out", dir);
    int rc = ds_build_select_files(&cfg, out, err, sizeof err);
    CHECK(rc == DS_OK, "%s", err);
    CHECK(cfg.n_files == n_want, "build lists %zu files, want %zu", cfg.n_files, n_want);
    for (size_t i = 0; i < cfg.n_files && i < n_want; i++) {
        snprintf(p, sizeof p, "%s/%s", in, want[i]);
        CHECK(!strcmp(cfg.files[i], p), "build file %zu: %s, want %s", i, cfg.files[i], p);
    }

    /* the readers' files, in the order their records come */
    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    ds_reader *r = NULL;
    rc = ds_reader_open((const char *const *)inputs, 1, &ro, &r, err, sizeof err);
    CHECK(rc == DS_OK, "%s", err);
    char *seen[64];
    size_t n_seen = 0;
    ds_record rec;
    while (r && (rc = ds_reader_next(r, &rec, err, sizeof err)) == 1 && n_seen < 64) {
        CHECK(rec.status == DS_REC_OK, "%s: record status %d", rec.file, (int)rec.status);
        if (!n_seen || strcmp(seen[n_seen - 1], rec.file)) seen[n_seen++] = strdup(rec.file);
    }
    CHECK(rc == 0, "reader ended with %d: %s", rc, err);
    if (r) ds_reader_free(r);
    CHECK(n_seen == cfg.n_files, "the reader read %zu files, build lists %zu", n_seen, cfg.n_files);
    for (size_t i = 0; i < n_seen && i < cfg.n_files; i++)
        CHECK(!strcmp(seen[i], cfg.files[i]), "file %zu: reader %s, build %s", i, seen[i], cfg.files[i]);
    for (size_t i = 0; i < n_seen; i++) free(seen[i]);
    for (size_t i = 0; i < cfg.n_files; i++) free(cfg.files[i]);
    free(cfg.files);
    free(cfg.file_bytes);
    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    if (system(p)) fprintf(stderr, "cannot remove %s\n", dir);
    if (failures) fprintf(stderr, "test_input_walk: %d failures\n", failures);
    else printf("test_input_walk: ok (%zu files, build = readers)\n", n_want);
    return failures ? 1 : 0;
}
