/* cmd_inspect.c - mkshards inspect DIR|SHARD: header, counts, accounting,
 * document-length histogram, and --row I decoded. */
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ds.h"
#include "shards_common.h"

static const char k_usage[] =
    "Usage: mkshards inspect [options] DIR|SHARD\n"
    "\n"
    "DIR (a shard set): tokenizer, build configuration, splits, shards, the\n"
    "accounting (documents in = whole + truncated + chunked + dropped + rejected,\n"
    "with token counts), utilisation and the histogram of document lengths.\n"
    "SHARD (one .mks file): its header and counts.\n"
    "\n"
    "Options:\n"
    "  -r, --row I          show row I decoded: segments (documents), positions, padding\n"
    "                       (in DIR: row I of --split; in SHARD: row I of the file)\n"
    "  -s, --split S        train (default) or val, for --row on a DIR\n"
    "  -t, --tokenizer T    tokenizer for decoding (default: the one the manifest names;\n"
    "                       its fingerprint must match the shards')\n"
    "      --ids            print token ids instead of decoded text\n"
    "  -h, --help           show this help\n"
    "\n"
    "Exit codes: 0 ok, 2 unreadable or corrupt input, 64 usage error.\n";

static const struct option k_opts[] = {{"row", required_argument, 0, 'r'},   {"split", required_argument, 0, 's'},
                                       {"tokenizer", required_argument, 0, 't'}, {"ids", no_argument, 0, 'I'},
                                       {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};

static void print_header(const ds_shard_header *h) {
    char fp[65];
    ds_shard_hex(h->fingerprint, 32, fp);
    printf("  version        %u\n  dtype          u%u\n  row length     %u\n  rows           %" PRIu64 "\n"
           "  vocab size     %u\n  eot / pad id   %u / %u\n  flags          %s%s%s\n"
           "  doc starts     %" PRIu64 "\n  token bytes    %" PRIu64 "%s\n  meta bytes     %" PRIu64 "\n"
           "  checksums      payload %016" PRIx64 ", %" PRIu64 " blocks of %u bytes\n  tokenizer fp   %s\n",
           h->version, h->dtype_bytes * 8, h->row_len, h->n_rows, h->vocab_size, h->eot_id, h->pad_id,
           (h->flags & DS_SHARD_F_VAL) ? "val" : "train", (h->flags & DS_SHARD_F_SHUFFLED) ? " shuffled" : "",
           (h->flags & DS_SHARD_F_ZSTD) ? " zstd" : "", h->n_starts, h->tokens_bytes,
           (h->flags & DS_SHARD_F_ZSTD) ? " (compressed)" : "", h->meta_bytes, h->payload_xxh3, h->n_blocks,
           DS_SHARD_BLOCK_BYTES, fp);
    if (h->flags & DS_SHARD_F_ZSTD)
        printf("  zstd frames    %" PRIu64 " of %u rows (ratio %.2f)\n", h->n_frames, h->frame_rows,
               h->tokens_bytes ? (double)(h->n_rows * h->row_len * h->dtype_bytes) / (double)h->tokens_bytes : 0.0);
}

static uint64_t ju(json_t *o, const char *k) { return (uint64_t)json_integer_value(json_object_get(o, k)); }

static void print_manifest(json_t *m) {
    json_t *tk = json_object_get(m, "tokenizer"), *cfg = json_object_get(m, "config");
    json_t *acc = json_object_get(m, "accounting");
    json_t *d = json_object_get(acc, "documents"), *t = json_object_get(acc, "tokens");
    printf("tokenizer    %s (vocab %" PRIu64 ", eot %" PRIu64 ", fingerprint %.16s...)\n",
           json_string_value(json_object_get(tk, "name")), ju(tk, "vocab_size"), ju(tk, "eot_id"),
           json_string_value(json_object_get(tk, "fingerprint")));
    printf("rows         %" PRIu64 " tokens, %s; pack %s", ju(m, "seq_len"), json_string_value(json_object_get(m, "dtype")),
           json_string_value(json_object_get(cfg, "pack")));
    if (!strcmp(json_string_value(json_object_get(cfg, "pack")), "none"))
        printf(" (over-long: %s)", json_string_value(json_object_get(cfg, "over_long")));
    printf("; val fraction %g; seed %" PRIu64 "%s; zstd %" PRIu64 "\n", json_real_value(json_object_get(cfg, "val_fraction")),
           ju(cfg, "seed"), json_is_true(json_object_get(cfg, "shuffle")) ? "" : " (no shuffle)", ju(cfg, "zstd_level"));
    json_t *sp = json_object_get(m, "splits");
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object_get(sp, k ? "val" : "train");
        printf("%-12s %" PRIu64 " shards, %" PRIu64 " rows, %" PRIu64 " tokens\n", k ? "val" : "train", ju(o, "shards"),
               ju(o, "rows"), ju(o, "tokens"));
    }
    json_t *sh = json_object_get(m, "shards");
    size_t n = json_array_size(sh);
    printf("\nshards (%zu):\n", n);
    for (size_t i = 0; i < n; i++) {
        if (i == 8 && n > 10) {
            printf("  ... %zu more\n", n - 9);
            i = n - 1;
        }
        json_t *e = json_array_get(sh, i);
        printf("  %-18s %-5s %10" PRIu64 " rows %12" PRIu64 " tokens %12" PRIu64 " bytes  xxh3 %s\n",
               json_string_value(json_object_get(e, "file")), json_string_value(json_object_get(e, "split")),
               ju(e, "rows"), ju(e, "tokens"), ju(e, "bytes"), json_string_value(json_object_get(e, "xxh3")));
    }
    printf("\naccounting:\n");
    printf("  documents in  %12" PRIu64 "  (records %" PRIu64 ", %.1f MB)\n", ju(d, "in"), ju(acc, "records"),
           (double)ju(acc, "bytes_in") / 1e6);
    printf("    whole       %12" PRIu64 "  %14" PRIu64 " tokens\n", ju(d, "whole"), ju(t, "whole"));
    printf("    truncated   %12" PRIu64 "  %14" PRIu64 " tokens kept, %" PRIu64 " lost\n", ju(d, "truncated"),
           ju(t, "truncated_kept"), ju(t, "truncated_lost"));
    printf("    chunked     %12" PRIu64 "  %14" PRIu64 " tokens in %" PRIu64 " pieces\n", ju(d, "chunked"), ju(t, "chunked"),
           ju(acc, "pieces"));
    printf("    dropped     %12" PRIu64 "  %14" PRIu64 " tokens\n", ju(d, "dropped"), ju(t, "dropped"));
    printf("    rejected    %12" PRIu64 "  %14" PRIu64 " bytes", ju(d, "rejected"), ju(acc, "rejected_bytes"));
    json_t *rr = json_object_get(acc, "reject_reasons");
    const char *key;
    json_t *v;
    int first = 1;
    json_object_foreach(rr, key, v) {
        if (json_integer_value(v) && strcmp(key, "over-long")) {
            printf("%s%s %" PRIu64, first ? "  (" : ", ", key, (uint64_t)json_integer_value(v));
            first = 0;
        }
    }
    printf("%s\n", first ? "" : ")");
    printf("  documents     %" PRIu64 " train, %" PRIu64 " val\n", ju(d, "train"), ju(d, "val"));
    printf("  tokens        %" PRIu64 " in, %" PRIu64 " written (with %" PRIu64 " EOT), %" PRIu64 " padding\n",
           ju(t, "in"), ju(t, "written"), ju(t, "eot"), ju(t, "pad"));
    printf("  utilisation   %s (non-pad tokens / row tokens)\n", json_string_value(json_object_get(acc, "utilisation")));
    json_t *h = json_object_get(acc, "doc_tokens_log2_hist");
    uint64_t max = 0, tot = 0;
    for (size_t i = 0; i < json_array_size(h); i++) {
        uint64_t c = (uint64_t)json_integer_value(json_array_get(h, i));
        if (c > max) max = c;
        tot += c;
    }
    if (tot) {
        printf("\ndocument length (tokens, accepted documents):\n");
        size_t i0 = 0;
        while (!json_integer_value(json_array_get(h, i0))) i0++;
        for (size_t i = i0; i < json_array_size(h); i++) {
            uint64_t c = (uint64_t)json_integer_value(json_array_get(h, i));
            char lab[48];
            if (i == 0) snprintf(lab, sizeof lab, "0");
            else snprintf(lab, sizeof lab, "%" PRIu64 "-%" PRIu64, (uint64_t)1 << (i - 1), ((uint64_t)1 << i) - 1);
            int w = max ? (int)((c * 50 + max - 1) / max) : 0;
            printf("  %-16s %10" PRIu64 " %5.1f%% ", lab, c, 100.0 * (double)c / (double)tot);
            for (int k = 0; k < w; k++) fputs("#", stdout);
            putchar('\n');
        }
    }
}

static void print_text(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

static int show_row(const ds_shard *s, uint64_t row, const tk_tokenizer *tok, int ids_only) {
    const ds_shard_header *h = ds_shard_get_header(s);
    uint32_t L = h->row_len, nv = 0;
    uint32_t *t = malloc(L * sizeof *t), *pos = malloc(L * sizeof *pos), *doc = malloc(L * sizeof *doc);
    uint8_t *mask = malloc(L);
    int rc = ds_shard_read(s, row, t, pos, doc, mask, &nv);
    if (rc != DS_OK) {
        free(t), free(pos), free(doc), free(mask);
        return rc;
    }
    printf("row %" PRIu64 ": %u tokens, %u real, %u padding%s\n", row, L, nv, L - nv,
           nv && pos[0] == 0 && doc[0] == 0 ? "" : "");
    uint32_t i = 0;
    while (i < nv) {
        uint32_t j = i;
        while (j < nv && doc[j] == doc[i]) j++;
        uint32_t st[1];
        (void)st;
        printf("  segment %u: positions %u-%u (%u tokens)%s\n    ", doc[i], i, j - 1, j - i,
               t[j - 1] == h->eot_id ? ", ends with EOT" : "");
        if (ids_only || !tok) {
            for (uint32_t k = i; k < j; k++) printf("%s%u", k > i ? " " : "", t[k]);
        } else {
            tk_bytes b = {0};
            if (tk_decode(tok, t + i, j - i, &b) == TK_OK) {
                putchar('"');
                print_text(b.data, b.len);
                putchar('"');
            } else {
                printf("(ids do not decode with this tokenizer)");
            }
            tk_bytes_free(&b);
        }
        putchar('\n');
        i = j;
    }
    if (nv < L) printf("  padding: positions %u-%u (pad id %u, loss mask 0)\n", nv, L - 1, h->pad_id);
    free(t), free(pos), free(doc), free(mask);
    return DS_OK;
}

int cmd_inspect(int argc, char **argv) {
    const char *cmd = "inspect";
    const char *tkspec = NULL;
    long long row = -1;
    int split = 0, ids_only = 0, c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":r:s:t:h", k_opts)) != -1) {
        switch (c) {
        case 'r': {
            char *end;
            row = strtoll(optarg, &end, 10);
            if (*end || row < 0) return cli_usage_error(cmd, "--row expects a row number >= 0, got '%s'", optarg);
            break;
        }
        case 's':
            if (!strcmp(optarg, "train")) split = 0;
            else if (!strcmp(optarg, "val")) split = 1;
            else return cli_usage_error(cmd, "--split expects train or val, got '%s'", optarg);
            break;
        case 't': tkspec = optarg; break;
        case 'I': ids_only = 1; break;
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
    int isdir = S_ISDIR(st.st_mode);
    char err[1024];
    json_t *m = NULL;
    char mdir[4200];
    snprintf(mdir, sizeof mdir, "%s", target);
    if (!isdir) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s", target);
        snprintf(mdir, sizeof mdir, "%s", dirname(tmp));
    }
    m = sh_manifest_load(mdir, err, sizeof err);
    if (isdir && !m) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    int rc = EXIT_OK;
    ds_shardset *set = NULL;
    ds_shard *one = NULL;
    tk_tokenizer *tok = NULL;
    if (isdir) {
        print_manifest(m);
        json_t *sh0 = json_array_get(json_object_get(m, "shards"), 0);
        if (sh0) {
            char p0[4200];
            snprintf(p0, sizeof p0, "%s/%s", target, json_string_value(json_object_get(sh0, "file")));
            if (ds_shard_open(p0, 0, &one, err, sizeof err) == DS_OK) {
                printf("\nheader of %s:\n", p0);
                print_header(ds_shard_get_header(one));
                ds_shard_close(one);
                one = NULL;
            } else {
                cli_error(cmd, "%s", err);
                rc = EXIT_BAD_INPUT;
            }
        }
    } else {
        if (ds_shard_open(target, 0, &one, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            json_decref(m);
            return EXIT_BAD_INPUT;
        }
        printf("%s:\n", target);
        print_header(ds_shard_get_header(one));
        uint64_t toks = 0;
        const ds_shard_header *h = ds_shard_get_header(one);
        for (uint64_t r = 0; r < h->n_rows; r++) {
            uint32_t nv;
            ds_shard_read(one, r, NULL, NULL, NULL, NULL, &nv);
            toks += nv;
        }
        printf("  tokens         %" PRIu64 " real, %" PRIu64 " padding (utilisation %.4f)\n", toks,
               h->n_rows * h->row_len - toks, h->n_rows ? (double)toks / (double)(h->n_rows * h->row_len) : 0.0);
    }
    if (row >= 0) {
        const ds_shard *s = one;
        uint64_t r = (uint64_t)row;
        if (isdir) {
            if (ds_shardset_open(target, 0, &set, err, sizeof err) != DS_OK) {
                cli_error(cmd, "%s", err);
                rc = EXIT_BAD_INPUT;
                goto done;
            }
            ds_split sp = split ? DS_SPLIT_VAL : DS_SPLIT_TRAIN;
            if (r >= ds_shardset_rows(set, sp)) {
                cli_error(cmd, "--row %lld is out of range: the %s split has %" PRIu64 " rows", row,
                          split ? "val" : "train", ds_shardset_rows(set, sp));
                rc = EXIT_USAGE;
                goto done;
            }
            for (size_t i = 0; i < ds_shardset_n_shards(set, sp); i++) {
                const ds_shard *x = ds_shardset_shard(set, sp, i, NULL);
                uint64_t n = ds_shard_get_header(x)->n_rows;
                if (r < n) {
                    s = x;
                    break;
                }
                r -= n;
            }
        } else if (r >= ds_shard_get_header(one)->n_rows) {
            cli_error(cmd, "--row %lld is out of range: the shard has %" PRIu64 " rows", row,
                      ds_shard_get_header(one)->n_rows);
            rc = EXIT_USAGE;
            goto done;
        }
        if (!ids_only) {
            const char *spec = tkspec;
            if (!spec && m) spec = json_string_value(json_object_get(json_object_get(m, "config"), "tokenizer"));
            if (spec && cli_load_tokenizer(spec, NULL, &tok) == EXIT_OK) {
                uint8_t fp[32];
                tk_fingerprint(tok, fp);
                if (memcmp(fp, ds_shard_get_header(s)->fingerprint, 32) != 0) {
                    cli_warn(cmd, "tokenizer '%s' is not the one the shards were built with; showing ids", spec);
                    tk_free(tok);
                    tok = NULL;
                }
            } else {
                cli_warn(cmd, "no tokenizer to decode with (give --tokenizer); showing ids");
            }
        }
        printf("\n");
        if (show_row(s, r, tok, ids_only) != DS_OK) {
            cli_error(cmd, "row %lld is corrupt (run mkshards verify)", row);
            rc = EXIT_BAD_INPUT;
        }
    }
done:
    if (tok) tk_free(tok);
    ds_shardset_close(set);
    ds_shard_close(one);
    json_decref(m);
    return rc;
}
