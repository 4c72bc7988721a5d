/* cmd_merge.c - mkshards merge --out DIR PART_DIR...: join the shard sets
 * built with --part 1/N .. N/N into the set a single build would have
 * written (byte-identical: rows are taken back to packing order, re-sharded
 * and re-shuffled exactly as build does; rejects and accounting are joined). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ds.h"
#include "shards_common.h"

static const char k_usage[] =
    "Usage: mkshards merge --out DIR PART_DIR...\n"
    "\n"
    "Joins the outputs of `mkshards build --part K/N` (K = 1..N, any order on the\n"
    "command line) into one shard set in DIR. The parts must come from the same\n"
    "build command (same inputs, tokenizer and options). The result is\n"
    "byte-identical to a single build without --part. Part folders are only read.\n"
    "\n"
    "Options:\n"
    "  -o, --out DIR   output folder (created)            [required]\n"
    "  -q, --quiet     no summary line\n"
    "  -h, --help      show this help\n"
    "\n"
    "Exit codes: 0 ok, 2 bad or mismatched parts / output error, 64 usage error.\n";

static const struct option k_opts[] = {
    {"out", required_argument, 0, 'o'}, {"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

typedef struct {
    const char *dir;
    json_t *m;
    sh_config cfg;
    sh_account acc;
} part;

static const char *js(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static int copy_append(FILE *out, const char *path) {
    FILE *f = fopen(path, "rb");
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

int cmd_merge(int argc, char **argv) {
    const char *cmd = "merge";
    const char *out_dir = NULL;
    int quiet = 0, c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":o:qh", k_opts)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(k_usage, stdout); return EXIT_OK;
        default: return EXIT_USAGE;
        }
    }
    if (!out_dir) return cli_usage_error(cmd, "--out is required");
    int np = argc - optind;
    if (np < 1) return cli_usage_error(cmd, "give the part folders to merge");
    part *parts = calloc((size_t)np, sizeof *parts);
    part **byk = calloc((size_t)np, sizeof *byk);
    int rc = EXIT_OK;
    char err[1024];
    sh_config cfg;
    memset(&cfg, 0, sizeof cfg);
    sh_account acc;
    memset(&acc, 0, sizeof acc);
    sh_writer wr[2];
    memset(wr, 0, sizeof wr);
    sh_shard_rec *recs = NULL;
    size_t n_recs = 0, cap_recs = 0;
    uint32_t *row = NULL, *st = NULL, *perm = NULL, *inv = NULL;
    FILE *rej = NULL;
    char rej_tmp[4200], rej_path[4200];
    if (!parts || !byk) return EXIT_BAD_INPUT;
    for (int i = 0; i < np; i++) {
        part *p = &parts[i];
        p->dir = argv[optind + i];
        p->m = sh_manifest_load(p->dir, err, sizeof err);
        if (!p->m) {
            cli_error(cmd, "%s", err);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        if (sh_config_from_json(json_object_get(p->m, "config"), &p->cfg, err, sizeof err)) {
            cli_error(cmd, "%s: %s", p->dir, err);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        sh_account_from_json(json_object_get(p->m, "accounting"), &p->acc);
        if ((int)p->cfg.part_n != np) {
            cli_error(cmd, "%s is part %u/%u but %d part folder(s) were given", p->dir, p->cfg.part_k, p->cfg.part_n, np);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        if (byk[p->cfg.part_k - 1]) {
            cli_error(cmd, "%s and %s are both part %u/%d", byk[p->cfg.part_k - 1]->dir, p->dir, p->cfg.part_k, np);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        byk[p->cfg.part_k - 1] = p;
    }
    /* the configs must agree except for part and files */
    for (int i = 0; i < np; i++) {
        json_t *a = json_deep_copy(json_object_get(byk[0]->m, "config"));
        json_t *b = json_deep_copy(json_object_get(byk[i]->m, "config"));
        json_object_del(a, "part"), json_object_del(a, "files");
        json_object_del(b, "part"), json_object_del(b, "files");
        int same = json_equal(a, b) &&
                   json_equal(json_object_get(byk[0]->m, "tokenizer"), json_object_get(byk[i]->m, "tokenizer"));
        json_decref(a), json_decref(b);
        if (!same) {
            cli_error(cmd, "%s was built with other options or tokenizer than %s; parts must come from one command",
                      byk[i]->dir, byk[0]->dir);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    /* merged config = the single build's */
    sh_config_from_json(json_object_get(byk[0]->m, "config"), &cfg, err, sizeof err);
    {
        json_t *tk = json_object_get(byk[0]->m, "tokenizer");
        snprintf(cfg.tokenizer_name, sizeof cfg.tokenizer_name, "%s", json_string_value(json_object_get(tk, "name")));
        ds_shard_unhex(json_string_value(json_object_get(tk, "fingerprint")), cfg.fingerprint, 32);
        cfg.vocab_size = (uint32_t)json_integer_value(json_object_get(tk, "vocab_size"));
        cfg.eot_id = (uint32_t)json_integer_value(json_object_get(tk, "eot_id"));
        for (size_t i = 0; i < cfg.n_files; i++) free(cfg.files[i]);
        free(cfg.files), free(cfg.file_bytes);
        size_t nf = 0;
        for (int i = 0; i < np; i++) nf += byk[i]->cfg.n_files;
        cfg.files = calloc(nf + 1, sizeof *cfg.files);
        cfg.file_bytes = calloc(nf + 1, sizeof *cfg.file_bytes);
        cfg.n_files = 0;
        for (int i = 0; i < np; i++)
            for (size_t j = 0; j < byk[i]->cfg.n_files; j++) {
                cfg.files[cfg.n_files] = strdup(byk[i]->cfg.files[j]);
                cfg.file_bytes[cfg.n_files++] = byk[i]->cfg.file_bytes[j];
            }
        cfg.part_k = cfg.part_n = 1;
    }
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        cli_error(cmd, "cannot create --out '%s': %s", out_dir, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    for (int i = 0; i < np; i++) {
        struct stat a, b;
        if (stat(out_dir, &a) == 0 && stat(byk[i]->dir, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            cli_error(cmd, "--out must not be one of the part folders");
            rc = EXIT_USAGE;
            goto done;
        }
    }
    {
        char mp[4200];
        snprintf(mp, sizeof mp, "%s/manifest.json", out_dir);
        unlink(mp);
    }
    sh_clean_dir(out_dir, NULL, 0);
    uint32_t L = cfg.seq_len;
    row = malloc((size_t)L * sizeof *row);
    st = malloc((size_t)L * sizeof *st);
    for (int s = 0; s < 2; s++) sh_writer_init(&wr[s], &cfg, s, out_dir, &recs, &n_recs, &cap_recs);
    /* rows back into packing order, part by part, split by split */
    for (int i = 0; i < np && rc == EXIT_OK; i++) {
        json_t *sh = json_object_get(byk[i]->m, "shards");
        uint64_t idx[2] = {0, 0};
        for (size_t q = 0; q < json_array_size(sh) && rc == EXIT_OK; q++) {
            json_t *e = json_array_get(sh, q);
            int split = !strcmp(js(e, "split"), "val");
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", byk[i]->dir, js(e, "file"));
            ds_shard *s = NULL;
            if (ds_shard_open(path, DS_SHARD_OPEN_VERIFY, &s, err, sizeof err) != DS_OK) {
                cli_error(cmd, "%s", err);
                rc = EXIT_BAD_INPUT;
                break;
            }
            uint64_t n = ds_shard_get_header(s)->n_rows;
            free(perm), free(inv);
            perm = malloc((n + 1) * sizeof *perm);
            inv = malloc((n + 1) * sizeof *inv);
            if (cfg.shuffle) sh_shuffle_perm(cfg.seed, split, idx[split], perm, n);
            else
                for (uint64_t j = 0; j < n; j++) perm[j] = (uint32_t)j;
            for (uint64_t j = 0; j < n; j++) inv[perm[j]] = (uint32_t)j;
            idx[split]++;
            for (uint64_t r = 0; r < n && rc == EXIT_OK; r++) {
                uint32_t nv = 0, ns = 0;
                if (ds_shard_read(s, inv[r], row, NULL, NULL, NULL, &nv) != DS_OK ||
                    ds_shard_row_starts(s, inv[r], st, &ns) != DS_OK) {
                    cli_error(cmd, "%s: row %u unreadable", path, inv[r]);
                    rc = EXIT_BAD_INPUT;
                    break;
                }
                sh_account dummy;
                memset(&dummy, 0, sizeof dummy);
                if (sh_writer_add(&wr[split], row, nv, st, ns, &dummy) != DS_OK) {
                    cli_error(cmd, "%s", wr[split].err);
                    rc = EXIT_BAD_INPUT;
                }
            }
            ds_shard_close(s);
        }
    }
    if (rc) goto done;
    sh_account dummy;
    memset(&dummy, 0, sizeof dummy);
    for (int s = 0; s < 2; s++)
        if (sh_writer_finish(&wr[s], &dummy) != DS_OK) {
            cli_error(cmd, "%s", wr[s].err);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    /* accounting: every counter is a sum over parts */
    for (int i = 0; i < np; i++) {
        sh_account *a = &byk[i]->acc;
        uint64_t *dst = (uint64_t *)&acc, *src = (uint64_t *)a;
        for (size_t w = 0; w < sizeof acc / sizeof(uint64_t); w++) dst[w] += src[w];
    }
    acc.shards[0] = acc.shards[1] = 0; /* not in the manifest's accounting */
    snprintf(rej_path, sizeof rej_path, "%s/rejects.jsonl", out_dir);
    snprintf(rej_tmp, sizeof rej_tmp, "%s/rejects.jsonl.tmp", out_dir);
    rej = fopen(rej_tmp, "wb");
    for (int i = 0; rej && i < np; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/rejects.jsonl", byk[i]->dir);
        if (copy_append(rej, p)) {
            cli_error(cmd, "cannot read '%s'", p);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    if (!rej || fflush(rej) || fsync(fileno(rej)) || fclose(rej)) {
        rej = NULL;
        cli_error(cmd, "cannot write '%s': %s", rej_tmp, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    rej = NULL;
    if (rename(rej_tmp, rej_path)) {
        cli_error(cmd, "cannot rename '%s': %s", rej_tmp, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    sh_clean_dir(out_dir, recs, n_recs);
    if (sh_manifest_write(out_dir, &cfg, &acc, recs, n_recs, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    if (!quiet)
        fprintf(stderr, "mkshards merge: %d parts -> %s: %zu shards, %" PRIu64 " train rows, %" PRIu64 " val rows\n",
                np, out_dir, n_recs, acc.rows[0], acc.rows[1]);
done:
    if (rej) fclose(rej);
    for (int s = 0; s < 2; s++) sh_writer_free(&wr[s]);
    for (int i = 0; i < np; i++) {
        json_decref(parts[i].m);
        sh_config_free(&parts[i].cfg);
    }
    sh_config_free(&cfg);
    free(parts), free(byk), free(recs), free(row), free(st), free(perm), free(inv);
    return rc;
}
