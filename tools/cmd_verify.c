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
#include "build_internal.h"

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
        if (ds_shard_read(s, r, NULL, NULL, NULL, NULL, &nv) != DS_OK) { /* changed since the verify above */
            cli_error(cmd, "%s: row %" PRIu64 ": metadata corrupt", path, r);
            ds_shard_close(s);
            return EXIT_BAD_INPUT;
        }
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
    ds_manifest man;
    if (ds_manifest_load(target, &man, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    json_t *m = man.root;
    int rc = EXIT_OK;
    ds_build_config cfg;
    ds_build_account a;
    if (ds_build_config_from_json(json_object_get(m, "config"), &cfg, err, sizeof err) ||
        ds_build_account_from_json(json_object_get(m, "accounting"), &a, err, sizeof err)) {
        cli_error(cmd, "%s: %s", man.path, err);
        ds_build_config_free(&cfg);
        ds_manifest_free(&man);
        return EXIT_BAD_INPUT;
    }
    uint32_t L = man.seq_len;
    uint64_t tot_rows[2] = {0, 0}, tot_tok[2] = {0, 0}, n_sh[2] = {0, 0};
    if (cfg.seq_len != L) {
        cli_error(cmd, "%s: config.seq_len %u differs from seq_len %u", man.path, cfg.seq_len, L);
        rc = EXIT_BAD_INPUT;
    }
    for (size_t i = 0; i < man.n_shards && rc == EXIT_OK; i++) {
        const ds_manifest_shard *e = &man.shards[i];
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", target, e->file);
        rc = verify_one(cmd, path, &xx, &rows, &tokens, &h);
        if (rc) break;
        int k = e->split;
        uint64_t bytes = DS_SHARD_HEADER_BYTES + h.tokens_bytes + h.meta_bytes + 8 * h.n_blocks; /* = file size */
        const char *what = NULL;
        if (e->xxh3 != xx) what = "file checksum";
        else if (e->rows != rows) what = "rows";
        else if (e->tokens != tokens) what = "tokens";
        else if (e->bytes != bytes) what = "bytes";
        else if (memcmp(h.fingerprint, man.fingerprint, 32)) what = "tokenizer fingerprint";
        else if (h.vocab_size != man.vocab_size) what = "vocab size";
        else if (h.dtype_bytes != man.dtype_bytes) what = "dtype";
        else if (h.eot_id != man.eot_id) what = "EOT id";
        else if (h.pad_id != man.pad_id) what = "pad id";
        else if (h.row_len != L) what = "row length";
        else if (((h.flags & DS_SHARD_F_VAL) != 0) != k) what = "split";
        else if (((h.flags & DS_SHARD_F_ZSTD) != 0) != (cfg.zstd_level != 0) || h.frame_rows != cfg.frame_rows)
            what = "compression (config.zstd_level / frame_rows)";
        else if (((h.flags & DS_SHARD_F_SHUFFLED) != 0) != (cfg.shuffle != 0)) what = "shuffle flag";
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
        /* the set-level checks the trainer makes (one file under two names) */
        ds_shardset *set = NULL;
        if (ds_shardset_open(target, 0, &set, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            rc = EXIT_BAD_INPUT;
        }
        ds_shardset_close(set);
    }
    if (rc == EXIT_OK) {
        json_t *sp = json_object_get(m, "splits");
        for (int k = 0; k < 2 && rc == EXIT_OK; k++) {
            json_t *o = json_object_get(sp, k ? "val" : "train");
            json_t *r = json_object_get(o, "rows"), *t = json_object_get(o, "tokens"), *n = json_object_get(o, "shards");
            if (!json_is_integer(r) || !json_is_integer(t) || !json_is_integer(n) ||
                (uint64_t)json_integer_value(r) != tot_rows[k] || (uint64_t)json_integer_value(t) != tot_tok[k] ||
                (uint64_t)json_integer_value(n) != n_sh[k]) {
                cli_error(cmd, "%s/manifest.json: splits.%s does not match its shards", target, k ? "val" : "train");
                rc = EXIT_BAD_INPUT;
            }
        }
        /* accounting must add up (sums in 128 bits: the counters are untrusted) */
        json_t *acc = json_object_get(m, "accounting");
        json_t *d = json_object_get(acc, "documents"), *t = json_object_get(acc, "tokens");
        json_t *jin = json_object_get(d, "in"), *jw = json_object_get(t, "written");
        unsigned __int128 din = (uint64_t)json_integer_value(jin), written = (uint64_t)json_integer_value(jw);
        unsigned __int128 docs = (unsigned __int128)a.docs_whole + a.docs_truncated + a.docs_chunked + a.docs_dropped +
                                 a.docs_rejected;
        unsigned __int128 cells = ((unsigned __int128)tot_rows[0] + tot_rows[1]) * L;
        if (rc == EXIT_OK &&
            (!json_is_integer(jin) || !json_is_integer(jw) || json_integer_value(jin) < 0 ||
             json_integer_value(jw) < 0 || din != docs || din != a.records || written + a.pad != cells ||
             written != (unsigned __int128)tot_tok[0] + tot_tok[1] || a.rows[0] != tot_rows[0] ||
             a.rows[1] != tot_rows[1])) {
            cli_error(cmd, "%s/manifest.json: accounting does not add up (documents in = whole + truncated + "
                      "chunked + dropped + rejected; written + pad = rows x seq_len)", target);
            rc = EXIT_BAD_INPUT;
        }
    }
    if (rc == EXIT_OK && !quiet)
        printf("ok: %s: %" PRIu64 " shards, %" PRIu64 " train rows, %" PRIu64 " val rows, %" PRIu64
               " tokens, all checksums match\n",
               target, n_sh[0] + n_sh[1], tot_rows[0], tot_rows[1], tot_tok[0] + tot_tok[1]);
    ds_build_config_free(&cfg);
    ds_manifest_free(&man);
    return rc;
}
