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
    ds_manifest man; /* checked: shard names, counts, tokenizer */
    json_t *m;       /* man.root */
    sh_config cfg;
    sh_account acc;
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
static int check_part(const char *cmd, const part *p, const sh_config *cfg) {
    const ds_manifest *m = &p->man;
    uint64_t idx[2] = {0, 0}, rows[2] = {0, 0}, toks[2] = {0, 0};
    char err[1024];
    for (size_t q = 0; q < m->n_shards; q++) {
        const ds_manifest_shard *e = &m->shards[q];
        char want[64], path[4200];
        sh_shard_name(e->split, idx[e->split], want, sizeof want);
        if (strcmp(e->file, want)) {
            cli_error(cmd, "%s: shard %s is listed where %s belongs (shards are named and listed in build order)",
                      m->path, e->file, want);
            return EXIT_BAD_INPUT;
        }
        idx[e->split]++;
        snprintf(path, sizeof path, "%s/%s", p->dir, e->file);
        uint64_t xx = 0;
        if (ds_shard_verify(path, &xx, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            return EXIT_BAD_INPUT;
        }
        ds_shard *s = NULL;
        if (ds_shard_open(path, 0, &s, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            return EXIT_BAD_INPUT;
        }
        const ds_shard_header *h = ds_shard_get_header(s);
        uint64_t nt = 0;
        int bad_row = 0;
        for (uint64_t r = 0; r < h->n_rows && !bad_row; r++) {
            uint32_t nv = 0;
            if (ds_shard_read(s, r, NULL, NULL, NULL, NULL, &nv) != DS_OK) bad_row = 1;
            nt += nv;
        }
        uint64_t bytes = DS_SHARD_HEADER_BYTES + h->tokens_bytes + h->meta_bytes + 8 * h->n_blocks;
        const char *what = bad_row                                                   ? "row metadata"
                           : xx != e->xxh3                                          ? "file checksum (xxh3)"
                           : bytes != e->bytes                                      ? "bytes"
                           : h->n_rows != e->rows                                   ? "rows"
                           : nt != e->tokens                                        ? "tokens"
                           : h->row_len != cfg->seq_len                             ? "row length"
                           : h->vocab_size != cfg->vocab_size                       ? "vocabulary size"
                           : h->dtype_bytes != (cfg->vocab_size <= 65536 ? 2u : 4u) ? "dtype"
                           : h->eot_id != cfg->eot_id || h->pad_id != cfg->eot_id   ? "EOT / pad id"
                           : memcmp(h->fingerprint, cfg->fingerprint, 32)           ? "tokenizer fingerprint"
                           : ((h->flags & DS_SHARD_F_VAL) != 0) != (e->split == 1)  ? "split"
                           : ((h->flags & DS_SHARD_F_ZSTD) != 0) != (cfg->zstd_level != 0) ||
                                   h->frame_rows != cfg->frame_rows
                               ? "compression (zstd_level / frame_rows)"
                           : ((h->flags & DS_SHARD_F_SHUFFLED) != 0) != (cfg->shuffle != 0) ? "shuffle flag"
                                                                                            : NULL;
        ds_shard_close(s);
        if (what) {
            cli_error(cmd, "%s: %s disagrees with %s", path, what, m->path);
            return EXIT_BAD_INPUT;
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
            cli_error(cmd, "%s: splits.%s / accounting.rows do not match the listed shards", m->path,
                      k ? "val" : "train");
            return EXIT_BAD_INPUT;
        }
    }
    return EXIT_OK;
}

int cmd_merge(int argc, char **argv) {
    const char *cmd = "merge";
    const char *out_dir = NULL;
    int lock_fd = -1;
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
        if (ds_manifest_load(p->dir, &p->man, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        p->m = p->man.root;
        if (sh_config_from_json(json_object_get(p->m, "config"), &p->cfg, err, sizeof err) ||
            sh_account_from_json(json_object_get(p->m, "accounting"), &p->acc, err, sizeof err)) {
            cli_error(cmd, "%s: %s", p->man.path, err);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        if (p->cfg.seq_len != p->man.seq_len) {
            cli_error(cmd, "%s: config.seq_len %u differs from seq_len %u", p->man.path, p->cfg.seq_len, p->man.seq_len);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        /* sh_config_from_json checked 1 <= K <= N */
        if (p->cfg.part_n != (uint32_t)np) {
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
    /* N folders, each part K/N, no K twice: every K in 1..N is present */
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
    if (sh_config_from_json(json_object_get(byk[0]->m, "config"), &cfg, err, sizeof err)) {
        cli_error(cmd, "%s: %s", byk[0]->man.path, err);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    {
        const ds_manifest *m0 = &byk[0]->man;
        snprintf(cfg.tokenizer_name, sizeof cfg.tokenizer_name, "%s", m0->tokenizer_name);
        memcpy(cfg.fingerprint, m0->fingerprint, 32);
        cfg.vocab_size = m0->vocab_size;
        cfg.eot_id = m0->eot_id;
        if (m0->pad_id != m0->eot_id) {
            cli_error(cmd, "%s: pad_id %u differs from eot_id %u (mkshards pads with EOT)", m0->path, m0->pad_id,
                      m0->eot_id);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        for (size_t i = 0; i < cfg.n_files; i++) free(cfg.files[i]);
        free(cfg.files), free(cfg.file_bytes);
        size_t nf = 0;
        for (int i = 0; i < np; i++) nf += byk[i]->cfg.n_files;
        cfg.files = calloc(nf + 1, sizeof *cfg.files);
        cfg.file_bytes = calloc(nf + 1, sizeof *cfg.file_bytes);
        cfg.n_files = 0;
        if (!cfg.files || !cfg.file_bytes) {
            cli_error(cmd, "out of memory");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        for (int i = 0; i < np; i++)
            for (size_t j = 0; j < byk[i]->cfg.n_files; j++) {
                if (!(cfg.files[cfg.n_files] = strdup(byk[i]->cfg.files[j]))) break;
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
        if (ds_same_file(out_dir, byk[i]->dir)) {
            cli_error(cmd, "--out must not be one of the part folders");
            rc = EXIT_USAGE;
            goto done;
        }
    }
    /* one writer per folder: a build or another merge into the same --out would
     * interleave shards and manifests (the result fails verify) */
    if ((lock_fd = cli_lock_dir(cmd, out_dir, "build or merge")) < 0) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    /* every shard of every part against its manifest before anything is written */
    for (int i = 0; i < np; i++)
        if ((rc = check_part(cmd, byk[i], &cfg)) != EXIT_OK) goto done;
    {
        char mp[4200];
        snprintf(mp, sizeof mp, "%s/manifest.json", out_dir);
        unlink(mp);
    }
    sh_clean_dir(out_dir, NULL, 0);
    uint32_t L = cfg.seq_len;
    row = malloc((size_t)L * sizeof *row);
    st = malloc((size_t)L * sizeof *st);
    if (!row || !st) {
        cli_error(cmd, "out of memory");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    for (int s = 0; s < 2; s++) sh_writer_init(&wr[s], &cfg, s, out_dir, &recs, &n_recs, &cap_recs);
    /* rows back into packing order, part by part, split by split */
    for (int i = 0; i < np && rc == EXIT_OK; i++) {
        const ds_manifest *pm = &byk[i]->man;
        uint64_t idx[2] = {0, 0};
        for (size_t q = 0; q < pm->n_shards && rc == EXIT_OK; q++) {
            const ds_manifest_shard *e = &pm->shards[q];
            int split = e->split;
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", byk[i]->dir, e->file);
            ds_shard *s = NULL;
            if (ds_shard_open(path, 0, &s, err, sizeof err) != DS_OK) {
                cli_error(cmd, "%s", err);
                rc = EXIT_BAD_INPUT;
                break;
            }
            const ds_shard_header *h = ds_shard_get_header(s);
            uint64_t n = h->n_rows;
            /* check_part verified this file; a file changed since is refused, not trusted */
            if (n != e->rows || h->row_len != L) {
                cli_error(cmd, "%s changed while merging", path);
                ds_shard_close(s);
                rc = EXIT_BAD_INPUT;
                break;
            }
            free(perm), free(inv);
            perm = malloc((n + 1) * sizeof *perm); /* n <= file size / 8 (header checked) */
            inv = malloc((n + 1) * sizeof *inv);
            if (!perm || !inv) {
                cli_error(cmd, "out of memory");
                ds_shard_close(s);
                rc = EXIT_BAD_INPUT;
                break;
            }
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
    cli_unlock_dir(out_dir, lock_fd);
    for (int s = 0; s < 2; s++) sh_writer_free(&wr[s]);
    for (int i = 0; i < np; i++) {
        ds_manifest_free(&parts[i].man);
        sh_config_free(&parts[i].cfg);
    }
    sh_config_free(&cfg);
    free(parts), free(byk), free(recs), free(row), free(st), free(perm), free(inv);
    return rc;
}
