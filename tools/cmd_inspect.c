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

static const char k_usage[] = "Usage: mkshards inspect [options] DIR|SHARD\n"
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
                              "  -t, --tokenizer T    tokenizer for decoding; its fingerprint must match the shards'.\n"
                              "                       Without it --row shows ids: the path the manifest records is\n"
                              "                       only named, never opened (a path from inside a file)\n"
                              "      --ids            print token ids instead of decoded text\n"
                              "  -h, --help           show this help\n"
                              "\n"
                              "Exit codes: 0 ok, 2 unreadable or corrupt input, 64 usage error.\n";

static const struct option k_opts[] = {
    {"row", required_argument, 0, 'r'}, {"split", required_argument, 0, 's'}, {"tokenizer", required_argument, 0, 't'},
    {"ids", no_argument, 0, 'I'},       {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};

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
    if (h->version == DS_SHARD_VERSION_LOSS)
        printf("  loss bytes     %" PRIu64 " (a loss bit per token: version 2)\n", h->loss_bytes);
    if (h->flags & DS_SHARD_F_ZSTD)
        printf("  zstd frames    %" PRIu64 " of %u rows (ratio %.2f)\n", h->n_frames, h->frame_rows,
               h->tokens_bytes ? (double)(h->n_rows * h->row_len * h->dtype_bytes) / (double)h->tokens_bytes : 0.0);
}

/* man was checked by ds_manifest_read: every field printed here exists with
 * its type and range (the split and total figures as the manifest records them). */
static void print_manifest(const ds_manifest_info *man) {
    const ds_build_account *a = ds_manifest_account(man);
    char fp[65];
    ds_shard_hex(man->fingerprint, 32, fp);
    printf("tokenizer    %s (vocab %u, eot %u, fingerprint %.16s...)\n", man->tokenizer_name, man->vocab_size,
           man->eot_id, fp);
    printf("rows         %u tokens, u%u; pack %s", man->seq_len, 8 * man->dtype_bytes, ds_pack_name(man->pack));
    if (man->pack == DS_PACK_NONE) printf(" (over-long: %s)", ds_over_long_name(man->over_long));
    printf("; val fraction %g; seed %" PRIu64 "%s; zstd %d\n", man->val_fraction, man->seed,
           man->shuffle ? "" : " (no shuffle)", man->zstd_level);
    for (int k = 0; k < 2; k++) {
        printf("%-12s %" PRIu64 " shards, %" PRIu64 " rows, %" PRIu64 " tokens", k ? "val" : "train",
               man->split_shards[k], man->split_rows[k], man->split_tokens[k]);
        if (man->shard_version == DS_SHARD_VERSION_LOSS) { /* the targets the shards list */
            uint64_t loss = 0;
            for (size_t i = 0; i < man->n_shards; i++)
                if (man->shards[i].split == k) loss += man->shards[i].loss_tokens;
            printf(", %" PRIu64 " targets (loss bits)", loss);
        }
        putchar('\n');
    }
    size_t n = man->n_shards;
    printf("\nshards (%zu):\n", n);
    for (size_t i = 0; i < n; i++) {
        if (i == 8 && n > 10) {
            printf("  ... %zu more\n", n - 9);
            i = n - 1;
        }
        const ds_manifest_shard *e = &man->shards[i];
        printf("  %-18s %-5s %10" PRIu64 " rows %12" PRIu64 " tokens %12" PRIu64 " bytes  xxh3 %016" PRIx64 "\n",
               e->file, e->split ? "val" : "train", e->rows, e->tokens, e->bytes, e->xxh3);
    }
    printf("\naccounting:\n");
    printf("  documents in  %12" PRIu64 "  (records %" PRIu64 ", %.1f MB)\n", man->docs_in, a->records,
           (double)a->bytes_in / 1e6);
    printf("    whole       %12" PRIu64 "  %14" PRIu64 " tokens\n", a->docs_whole, a->tok_whole);
    printf("    truncated   %12" PRIu64 "  %14" PRIu64 " tokens kept, %" PRIu64 " lost\n", a->docs_truncated,
           a->tok_trunc_kept, a->tok_trunc_lost);
    printf("    chunked     %12" PRIu64 "  %14" PRIu64 " tokens in %" PRIu64 " pieces\n", a->docs_chunked,
           a->tok_chunked, a->pieces);
    printf("    dropped     %12" PRIu64 "  %14" PRIu64 " tokens\n", a->docs_dropped, a->tok_dropped);
    printf("    rejected    %12" PRIu64 "  %14" PRIu64 " bytes", a->docs_rejected, a->rejected_bytes);
    int first = 1;
    for (int r = 0; r < DS_REJ_COUNT; r++) {
        if (a->reasons[r] && r != DS_REJ_OVERLONG_DROP) {
            printf("%s%s %" PRIu64, first ? "  (" : ", ", ds_reject_reason_name(r), a->reasons[r]);
            first = 0;
        }
    }
    printf("%s\n", first ? "" : ")");
    printf("  documents     %" PRIu64 " train, %" PRIu64 " val\n", a->docs_split[0], a->docs_split[1]);
    char bos[40] = "";
    if (a->bos) snprintf(bos, sizeof bos, ", %" PRIu64 " BOS", a->bos);
    printf("  tokens        %" PRIu64 " in, %" PRIu64 " written (with %" PRIu64 " EOT%s), %" PRIu64 " padding\n",
           man->tokens_in, man->tokens_written, a->eot, bos, a->pad);
    printf("  utilisation   %.32s (non-pad tokens / row tokens)\n", man->utilisation[0] ? man->utilisation : "?");
    /* at most DS_BUILD_HIST_BINS (40) bins: the bounds 2^(i-1) .. 2^i - 1 fit in 64 bits */
    uint64_t max = 0;
    long double tot = 0;
    int i0 = -1, n_bins = 0;
    for (int i = 0; i < DS_BUILD_HIST_BINS; i++) {
        uint64_t c = a->hist[i];
        if (c > max) max = c;
        tot += (long double)c;
        if (c && i0 < 0) i0 = i;
        if (c) n_bins = i + 1;
    }
    if (i0 >= 0) {
        printf("\ndocument length (tokens, accepted documents):\n");
        for (int i = i0; i < n_bins; i++) {
            uint64_t c = a->hist[i];
            char lab[48];
            if (i == 0) snprintf(lab, sizeof lab, "0");
            else snprintf(lab, sizeof lab, "%" PRIu64 "-%" PRIu64, (uint64_t)1 << (i - 1), ((uint64_t)1 << i) - 1);
            int w = max ? (int)((long double)c * 50 / (long double)max + 0.999999L) : 0;
            printf("  %-16s %10" PRIu64 " %5.1f%% ", lab, c, (double)(100.0L * (long double)c / tot));
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
        else if (c < 0x80) putchar(c);
        else { /* a character: C1 controls (U+009B is CSI) and bytes that are not UTF-8 as \xNN */ char e[40];
            size_t k = 1;
            while (k < 4 && i + k < n && (p[i + k] & 0xC0) == 0x80) k++;
            fputs(tk_escape_text(p + i, k, e, sizeof e), stdout);
            i += k - 1;
        }
    }
}

/* Tokens [i, j) as ids or decoded text. */
static void print_span(const uint32_t *t, uint32_t i, uint32_t j, const tk_tokenizer *tok, int ids_only) {
    if (ids_only || !tok) {
        for (uint32_t k = i; k < j; k++) printf("%s%u", k > i ? " " : "", t[k]);
        return;
    }
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

static int show_row(const ds_shard *s, uint64_t row, const tk_tokenizer *tok, int ids_only) {
    const ds_shard_header *h = ds_shard_get_header(s);
    uint32_t L = h->row_len, nv = 0;
    uint32_t *t = malloc(L * sizeof *t), *pos = malloc(L * sizeof *pos), *doc = malloc(L * sizeof *doc);
    uint8_t *mask = malloc(L);
    if (!t || !pos || !doc || !mask) {
        free(t), free(pos), free(doc), free(mask);
        return DS_ERR_NOMEM;
    }
    int rc = ds_shard_read(s, row, t, pos, doc, mask, &nv);
    if (rc != DS_OK) {
        free(t), free(pos), free(doc), free(mask);
        return rc;
    }
    int bits = h->version == DS_SHARD_VERSION_LOSS;
    uint32_t targets = 0;
    for (uint32_t k = 0; k < nv; k++) targets += mask[k];
    printf("row %" PRIu64 ": %u tokens, %u real, %u padding", row, L, nv, L - nv);
    if (bits) printf(", %u targets; [bracketed] spans are not targets (loss bit 0)", targets);
    putchar('\n');
    uint32_t i = 0;
    while (i < nv) {
        uint32_t j = i;
        while (j < nv && doc[j] == doc[i]) j++;
        uint32_t st[1];
        (void)st;
        printf("  segment %u: positions %u-%u (%u tokens)%s\n    ", doc[i], i, j - 1, j - i,
               t[j - 1] == h->eot_id ? ", ends with EOT" : "");
        if (!bits) {
            print_span(t, i, j, tok, ids_only);
        } else { /* runs of equal loss bits; the masked-out ones in brackets */
            for (uint32_t a = i; a < j;) {
                uint32_t e = a;
                while (e < j && mask[e] == mask[a]) e++;
                if (a > i) putchar(' ');
                if (!mask[a]) putchar('[');
                print_span(t, a, e, tok, ids_only);
                if (!mask[a]) putchar(']');
                a = e;
            }
        }
        putchar('\n');
        i = j;
    }
    if (nv < L) printf("  padding: positions %u-%u (pad id %u, loss mask 0)\n", nv, L - 1, h->pad_id);
    free(t), free(pos), free(doc), free(mask);
    return DS_OK;
}

/* s (a string from a file) for a message: at most 200 bytes, control bytes
 * as \xNN, so that it cannot drive the terminal. */
static void escaped(const char *s, char *out, size_t cap) {
    size_t o = 0;
    for (; *s && o + 8 < cap && o < 200; s++) {
        uint8_t c = (uint8_t)*s;
        if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else out[o++] = (char)c;
    }
    if (*s) o += (size_t)snprintf(out + o, cap - o, "...");
    out[o] = 0;
}

/* The tokenizer --row decodes with: --tokenizer only; NULL (ids shown, with
 * a warning) when it is not given or not the shards'. The tokenizer path
 * the manifest records (config.tokenizer) is never opened: a crafted
 * manifest could name a FIFO, a device, a huge file, or a vocabulary name
 * whose first load writes a table image to the cache (docs/threat-model.md:
 * no path from inside a file is used). The warning names it, so the user
 * can pass it on purpose. */
static tk_tokenizer *row_tokenizer(const char *cmd, const char *tkspec, const ds_manifest_info *m, const ds_shard *s) {
    tk_tokenizer *tok = NULL;
    const char *spec = tkspec && *tkspec ? tkspec : NULL;
    if (!spec) {
        const char *rec = m ? m->tokenizer_spec : NULL;
        char esc[256];
        if (rec && *rec) {
            escaped(rec, esc, sizeof esc);
            cli_warn(cmd, "showing ids: give --tokenizer to decode (the manifest records '%s', not opened)", esc);
        } else {
            cli_warn(cmd, "showing ids: give --tokenizer to decode");
        }
        return NULL;
    }
    if (cli_load_tokenizer(spec, NULL, &tok) == EXIT_OK) {
        uint8_t fp[32];
        tk_fingerprint(tok, fp);
        if (memcmp(fp, ds_shard_get_header(s)->fingerprint, 32) != 0) {
            cli_warn(cmd, "tokenizer '%s' is not the one the shards were built with; showing ids", spec);
            tk_free(tok);
            tok = NULL;
        }
    } else {
        cli_warn(cmd, "cannot load tokenizer '%s'; showing ids", spec);
    }
    return tok;
}

/* DIR: the manifest and the header of its first shard. */
static int inspect_set(const char *cmd, const char *target, ds_manifest_info *man) {
    char err[1024];
    if (ds_manifest_read(target, man, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    print_manifest(man);
    if (man->n_shards) {
        char p0[4200];
        ds_shard *one = NULL;
        /* `inspect shards/` (as typed with tab completion) names the shard
         * shards/train-00000.mks, not shards//train-00000.mks; "/" stays "/". */
        size_t tn = strlen(target);
        while (tn > 1 && target[tn - 1] == '/') tn--;
        const char *sep = tn > 0 && target[tn - 1] == '/' ? "" : "/";
        snprintf(p0, sizeof p0, "%.*s%s%s", (int)tn, target, sep, man->shards[0].file);
        if (ds_shard_open(p0, 0, &one, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            return EXIT_BAD_INPUT;
        }
        printf("\nheader of %s:\n", p0);
        print_header(ds_shard_get_header(one));
        ds_shard_close(one);
    }
    return EXIT_OK;
}

/* SHARD (open in one): its header and token counts. */
static int inspect_shard(const char *cmd, const char *target, const ds_shard *one) {
    printf("%s:\n", target);
    print_header(ds_shard_get_header(one));
    uint64_t toks = 0, targets = 0;
    const ds_shard_header *h = ds_shard_get_header(one);
    uint8_t *mask = malloc(h->row_len); /* row_len <= 2^24 (header checked) */
    if (!mask) {
        cli_error(cmd, "out of memory");
        return EXIT_BAD_INPUT;
    }
    for (uint64_t r = 0; r < h->n_rows; r++) {
        uint32_t nv = 0;
        char why[512];
        if (ds_shard_read_msg(one, r, NULL, NULL, NULL, mask, &nv, why, sizeof why) != DS_OK) {
            free(mask);
            cli_error(cmd, "%s: row %" PRIu64 ": row metadata corrupt (%s; run mkshards verify)", target, r, why);
            return EXIT_BAD_INPUT;
        }
        toks += nv;
        for (uint32_t i = 0; i < nv; i++) targets += mask[i];
    }
    free(mask);
    uint64_t cells = h->n_rows * h->row_len; /* <= 2^32-1 (header checked) */
    printf("  tokens         %" PRIu64 " real, %" PRIu64 " padding (utilisation %.4f)\n", toks, cells - toks,
           cells ? (double)toks / (double)cells : 0.0);
    if (h->version == DS_SHARD_VERSION_LOSS) printf("  targets        %" PRIu64 " (loss bit set)\n", targets);
    return EXIT_OK;
}

/* --row ROW of the split of the set in DIR (*set opened here), or of the
 * shard one: the shard holding it (*s) and its row there (*r). */
static int locate_row(const char *cmd, const char *target, const ds_shard *one, int split, long long row,
                      ds_shardset **set, const ds_shard **s, uint64_t *r) {
    char err[1024];
    *s = one;
    *r = (uint64_t)row;
    if (one) {
        if (*r >= ds_shard_get_header(one)->n_rows) {
            cli_error(cmd, "--row %lld is out of range: the shard has %" PRIu64 " rows", row,
                      ds_shard_get_header(one)->n_rows);
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    if (ds_shardset_open(target, 0, set, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    ds_split sp = split ? DS_SPLIT_VAL : DS_SPLIT_TRAIN;
    if (*r >= ds_shardset_rows(*set, sp)) {
        cli_error(cmd, "--row %lld is out of range: the %s split has %" PRIu64 " rows", row, split ? "val" : "train",
                  ds_shardset_rows(*set, sp));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < ds_shardset_n_shards(*set, sp); i++) {
        const ds_shard *x = ds_shardset_shard(*set, sp, i, NULL);
        uint64_t n = ds_shard_get_header(x)->n_rows;
        if (*r < n) {
            *s = x;
            break;
        }
        *r -= n;
    }
    return EXIT_OK;
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
        case 's': {
            ds_split sp;
            char names[32];
            if (ds_split_parse(optarg, &sp))
                return cli_usage_error(cmd, "--split expects %s, got '%s'",
                                       ds_names_list(ds_split_name, names, sizeof names), optarg);
            split = sp == DS_SPLIT_VAL;
            break;
        }
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
    const ds_manifest_info *m = NULL; /* man, once read */
    ds_manifest_info man;
    memset(&man, 0, sizeof man);
    ds_shardset *set = NULL;
    ds_shard *one = NULL;
    tk_tokenizer *tok = NULL;
    int rc;
    if (S_ISDIR(st.st_mode)) {
        rc = inspect_set(cmd, target, &man);
        if (rc != EXIT_OK) goto done;
        m = &man;
    } else {
        char err[1024];
        if (ds_shard_open(target, 0, &one, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            return EXIT_BAD_INPUT;
        }
        /* the folder's manifest only names, in --row's warning, the
         * tokenizer the set was built with (never opened: row_tokenizer) */
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s", target);
        if (ds_manifest_read(dirname(tmp), &man, err, sizeof err) == DS_OK) m = &man;
        rc = inspect_shard(cmd, target, one);
        if (rc != EXIT_OK) goto done;
    }
    if (row >= 0) {
        const ds_shard *s;
        uint64_t r;
        rc = locate_row(cmd, target, one, split, row, &set, &s, &r);
        if (rc != EXIT_OK) goto done;
        if (!ids_only) tok = row_tokenizer(cmd, tkspec, m, s);
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
    ds_manifest_info_free(&man);
    return rc;
}
