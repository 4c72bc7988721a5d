/* cmd_verify.c - mkshards verify DIR|SHARD: full integrity check of a shard
 * set (or one shard): header and size, header/payload/block checksums, ids <
 * vocab size, row metadata, zstd frames, and agreement with the manifest. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ds.h"
#include "shards_common.h"

static const char k_usage[] =
    "Usage: mkshards verify [options] DIR|SHARD\n"
    "\n"
    "Checks every shard of the set in DIR (listed by DIR/manifest.json), or one\n"
    "shard file: header and file size, header/block/payload checksums (XXH3-64),\n"
    "every token id < vocab size, padding and document-start metadata, every zstd\n"
    "frame, and that each shard agrees with the manifest (rows, tokens, bytes, file\n"
    "checksum, tokenizer fingerprint, split). The first problem is reported with the\n"
    "shard and the byte offset (or range) that is wrong.\n"
    "\n"
    "Options:\n"
    "  -q, --quiet   print nothing when everything is fine\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit codes: 0 ok, 2 corruption found or unreadable input, 64 usage error.\n";

static const struct option k_opts[] = {{"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

static int verify_one(const char *cmd, const char *path, uint64_t *xx, uint64_t *rows, uint64_t *tokens,
                      ds_shard_header *hdr) {
    char err[1024];
    if (ds_shard_verify(path, xx, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    ds_shard *s = NULL;
    if (ds_shard_open(path, 0, &s, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    *hdr = *ds_shard_get_header(s);
    *rows = hdr->n_rows;
    *tokens = 0;
    for (uint64_t r = 0; r < hdr->n_rows; r++) {
        uint32_t nv = 0;
        ds_shard_read(s, r, NULL, NULL, NULL, NULL, &nv);
        *tokens += nv;
    }
    ds_shard_close(s);
    return EXIT_OK;
}

int cmd_verify(int argc, char **argv) {
    const char *cmd = "verify";
    int quiet = 0, c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":qh", k_opts)) != -1) {
        switch (c) {
        case 'q': quiet = 1; break;
        case 'h': fputs(k_usage, stdout); return EXIT_OK;
        default: return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) return cli_usage_error(cmd, "give exactly one DIR or SHARD");
    const char *target = argv[optind];
    struct stat st;
    if (stat(target, &st) != 0) {
        cli_error(cmd, "cannot open '%s'", target);
        return EXIT_BAD_INPUT;
    }
    uint64_t xx, rows, tokens;
    ds_shard_header h;
    if (!S_ISDIR(st.st_mode)) {
        int rc = verify_one(cmd, target, &xx, &rows, &tokens, &h);
        if (rc == EXIT_OK && !quiet)
            printf("ok: %s: %" PRIu64 " rows of %u, %" PRIu64 " tokens, xxh3 %016" PRIx64 "\n", target, rows,
                   h.row_len, tokens, xx);
        return rc;
    }
    char err[1024];
    json_t *m = sh_manifest_load(target, err, sizeof err);
    if (!m) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    int rc = EXIT_OK;
    uint8_t fp[32];
    json_t *tk = json_object_get(m, "tokenizer");
    const char *fph = json_string_value(json_object_get(tk, "fingerprint"));
    uint32_t vocab = (uint32_t)json_integer_value(json_object_get(tk, "vocab_size"));
    uint32_t L = (uint32_t)json_integer_value(json_object_get(m, "seq_len"));
    if (!fph || ds_shard_unhex(fph, fp, 32) != 0) {
        cli_error(cmd, "%s/manifest.json: bad tokenizer fingerprint", target);
        json_decref(m);
        return EXIT_BAD_INPUT;
    }
    json_t *sh = json_object_get(m, "shards");
    uint64_t tot_rows[2] = {0, 0}, tot_tok[2] = {0, 0}, n_sh[2] = {0, 0};
    for (size_t i = 0; i < json_array_size(sh) && rc == EXIT_OK; i++) {
        json_t *e = json_array_get(sh, i);
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *split = json_string_value(json_object_get(e, "split"));
        if (!file || !split || strchr(file, '/')) {
            cli_error(cmd, "%s/manifest.json: shard %zu has no valid file/split", target, i);
            rc = EXIT_BAD_INPUT;
            break;
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", target, file);
        rc = verify_one(cmd, path, &xx, &rows, &tokens, &h);
        if (rc) break;
        char hx[17];
        snprintf(hx, sizeof hx, "%016" PRIx64, xx);
        const char *mx = json_string_value(json_object_get(e, "xxh3"));
        int k = !strcmp(split, "val");
        struct stat fs;
        stat(path, &fs);
        const char *what = NULL;
        if (!mx || strcmp(mx, hx)) what = "file checksum";
        else if ((uint64_t)json_integer_value(json_object_get(e, "rows")) != rows) what = "rows";
        else if ((uint64_t)json_integer_value(json_object_get(e, "tokens")) != tokens) what = "tokens";
        else if ((json_int_t)fs.st_size != json_integer_value(json_object_get(e, "bytes"))) what = "bytes";
        else if (memcmp(h.fingerprint, fp, 32)) what = "tokenizer fingerprint";
        else if (h.vocab_size != vocab) what = "vocab size";
        else if (h.row_len != L) what = "row length";
        else if (((h.flags & DS_SHARD_F_VAL) != 0) != k) what = "split";
        if (what) {
            cli_error(cmd, "%s: %s disagrees with the manifest", path, what);
            rc = EXIT_BAD_INPUT;
            break;
        }
        tot_rows[k] += rows;
        tot_tok[k] += tokens;
        n_sh[k]++;
    }
    if (rc == EXIT_OK) {
        json_t *sp = json_object_get(m, "splits");
        for (int k = 0; k < 2 && rc == EXIT_OK; k++) {
            json_t *o = json_object_get(sp, k ? "val" : "train");
            if ((uint64_t)json_integer_value(json_object_get(o, "rows")) != tot_rows[k] ||
                (uint64_t)json_integer_value(json_object_get(o, "tokens")) != tot_tok[k] ||
                (uint64_t)json_integer_value(json_object_get(o, "shards")) != n_sh[k]) {
                cli_error(cmd, "%s/manifest.json: splits.%s does not match its shards", target, k ? "val" : "train");
                rc = EXIT_BAD_INPUT;
            }
        }
        /* accounting must add up */
        sh_account a;
        sh_account_from_json(json_object_get(m, "accounting"), &a);
        json_t *acc = json_object_get(m, "accounting");
        json_t *d = json_object_get(acc, "documents"), *t = json_object_get(acc, "tokens");
        uint64_t din = (uint64_t)json_integer_value(json_object_get(d, "in"));
        uint64_t written = (uint64_t)json_integer_value(json_object_get(t, "written"));
        if (rc == EXIT_OK &&
            (din != a.docs_whole + a.docs_truncated + a.docs_chunked + a.docs_dropped + a.docs_rejected ||
             din != a.records || written + a.pad != (tot_rows[0] + tot_rows[1]) * (uint64_t)L ||
             written != tot_tok[0] + tot_tok[1] || a.rows[0] != tot_rows[0] || a.rows[1] != tot_rows[1])) {
            cli_error(cmd, "%s/manifest.json: accounting does not add up (documents in = whole + truncated + "
                      "chunked + dropped + rejected; written + pad = rows x seq_len)", target);
            rc = EXIT_BAD_INPUT;
        }
    }
    if (rc == EXIT_OK && !quiet)
        printf("ok: %s: %" PRIu64 " shards, %" PRIu64 " train rows, %" PRIu64 " val rows, %" PRIu64
               " tokens, all checksums match\n",
               target, n_sh[0] + n_sh[1], tot_rows[0], tot_rows[1], tot_tok[0] + tot_tok[1]);
    json_decref(m);
    return rc;
}
