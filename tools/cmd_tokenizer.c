/* cmd_tokenizer.c - mkshards tokenizer train|export|info (issue 5). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "cli.h"
#include "ds.h"
#include "tk.h"
#include "tk_train.h"

static const char k_usage[] =
    "Usage: mkshards tokenizer train --vocab-size N --out FILE [options] [INPUT...]\n"
    "       mkshards tokenizer export --tokenizer T --out FILE [--pattern P]\n"
    "       mkshards tokenizer info --tokenizer T\n"
    "\n"
    "train: learns a byte-level BPE vocabulary from the inputs (.txt, .jsonl, either + .zst,\n"
    "folders, or - for stdin; default stdin). Ranks 0..255 are the single bytes, merge i\n"
    "gets rank 256+i, special tokens follow the merges. Ties between pairs of equal count\n"
    "go to the lexicographically smallest (left bytes, right bytes). The output is the\n"
    "same byte for byte for any thread count. FILE ending in .json is written as an HF\n"
    "tokenizer.json, anything else (normally .tiktoken) as .tiktoken + FILE.meta.json.\n"
    "\n"
    "Options (train):\n"
    "  -n, --vocab-size N        total vocabulary incl. special tokens  [required]\n"
    "  -o, --out FILE            output .tiktoken or tokenizer.json     [required]\n"
    "  -p, --pattern P           pre-tokenizer: gpt2, cl100k, o200k (default o200k)\n"
    "  -s, --special TEXT        special token appended after the merges (repeatable)\n"
    "      --min-frequency N     never merge a pair seen fewer than N times (default 0)\n"
    "      --max-token-bytes N   never create a token longer than N bytes (default: no cap)\n"
    "      --max-piece-bytes N   cut longer pre-tokens into chunks (default 1024)\n"
    "      --sample-bytes SIZE   train on a deterministic sample of about SIZE bytes of text\n"
    "                            (0 = all, default)\n"
    "                            (documents chosen by a hash of their text; stdin: first SIZE)\n"
    "  -i, --input FILE          an input (repeatable; positional INPUTs work too)\n"
    "  -f, --field NAME          JSONL text field (default: text)\n"
    "      --doc-sep MODE        for .txt inputs: file (default), line or blank-line\n"
    "  -j, --threads N           counting and merging threads (default: all cores)\n"
    "      --batch-bytes SIZE    text counted per batch, 4K..1T; two are held (default 32M)\n"
    "  -q, --quiet               no progress and no summary\n"
    "  -h, --help                show this help\n"
    "\n"
    "Documents that lint rejects with an error (corrupt zstd, bad JSON, missing or non-string\n"
    "field, record too large, invalid UTF-8, NUL bytes) and empty documents are skipped and\n"
    "counted.\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input (nothing to train on, unreadable file; --out or its\n"
    ".meta.json naming an input, a file in an input folder or the source tokenizer is\n"
    "refused before anything is written), 64 usage error.\n"
    "\n"
    "Example:\n"
    "  mkshards tokenizer train -n 32768 -s '<|endoftext|>' -o my.tiktoken corpus/\n";

enum { OPT_MINF = 1000, OPT_MAXTOK, OPT_MAXPIECE, OPT_SAMPLE, OPT_DOCSEP, OPT_BATCH };

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* The files an output path becomes: OUT, and OUT.meta.json next to a .tiktoken.
 * None of them may be an input (or lie in an input folder): refused before
 * any work, with exit 2. */
static int refuse_outputs(const char *cmd, const char *out, const char *in_what, const char *const *inputs,
                          size_t n_inputs, const char *tokenizer) {
    char meta[4200];
    snprintf(meta, sizeof meta, "%s.meta.json", out);
    const char *outs[2] = {out, meta};
    for (int k = 0; k < (has_suffix(out, ".json") ? 1 : 2); k++) {
        const char *opt = k ? "--out (its .meta.json sidecar)" : "--out";
        if (inputs && cli_refuse_overwrite(cmd, opt, outs[k], in_what, inputs, n_inputs)) return EXIT_BAD_INPUT;
        if (tokenizer && cli_refuse_overwrite_tokenizer(cmd, opt, outs[k], tokenizer)) return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

static int save_by_ext(const char *cmd, const tk_tokenizer *tok, const char *out) {
    int rc = has_suffix(out, ".json") ? tk_save_hf_json(tok, out) : tk_save_tiktoken(tok, out);
    if (rc != TK_OK) {
        cli_error(cmd, "cannot write %s: %s", out, tk_strerror(rc));
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

/* UTF-8 validity (no overlongs, no surrogates, <= U+10FFFF). */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07;
        else return 0;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

typedef struct {
    uint64_t docs, bytes, skipped_reader, skipped_utf8, skipped_nul, skipped_empty, not_sampled;
} read_stats;

/* 1: usable document; 0: skipped (counted). */
static int usable(const ds_record *rec, read_stats *st) {
    if (rec->status != DS_REC_OK || !rec->text) {
        st->skipped_reader++;
        return 0;
    }
    if (!rec->len) {
        st->skipped_empty++;
        return 0;
    }
    if (!utf8_valid(rec->text, rec->len)) {
        st->skipped_utf8++;
        return 0;
    }
    if (memchr(rec->text, 0, rec->len)) {
        st->skipped_nul++;
        return 0;
    }
    return 1;
}

static uint64_t doc_hash(const uint8_t *t, size_t n) { return XXH3_64bits_withSeed(t, n, 0x6d6b736861726473ull); }

/* A batch of copied documents. */
typedef struct {
    uint8_t *buf;
    size_t blen, bcap;
    size_t *doff, nd, dcap;
    tk_span *spans;
    size_t scap;
} batch;

static int batch_add(batch *b, const uint8_t *t, size_t len) {
    if (b->blen + len > b->bcap) {
        size_t nc = b->bcap ? b->bcap : 1 << 20;
        while (nc < b->blen + len) nc *= 2;
        uint8_t *nb = realloc(b->buf, nc);
        if (!nb) return -1;
        b->buf = nb;
        b->bcap = nc;
    }
    if (b->nd + 1 >= b->dcap) {
        size_t nc = b->dcap ? b->dcap * 2 : 1024;
        size_t *nn = realloc(b->doff, nc * sizeof *nn);
        if (!nn) return -1;
        b->doff = nn;
        b->dcap = nc;
    }
    b->doff[b->nd++] = b->blen;
    memcpy(b->buf + b->blen, t, len);
    b->blen += len;
    return 0;
}

static int batch_spans(batch *b) {
    if (b->nd > b->scap) {
        tk_span *ns = realloc(b->spans, b->nd * sizeof *ns);
        if (!ns) return -1;
        b->spans = ns;
        b->scap = b->nd;
    }
    for (size_t i = 0; i < b->nd; i++)
        b->spans[i] = (tk_span){b->buf + b->doff[i], (i + 1 < b->nd ? b->doff[i + 1] : b->blen) - b->doff[i]};
    return 0;
}

static void batch_reset(batch *b, uint64_t batch_bytes) {
    b->nd = 0;
    b->blen = 0;
    if (b->bcap > 2 * batch_bytes + (1u << 20)) { /* one huge document: give the memory back */
        free(b->buf);
        b->buf = NULL;
        b->bcap = 0;
    }
}

static void batch_free(batch *b) {
    free(b->buf);
    free(b->doff);
    free(b->spans);
}

typedef struct {
    tk_piece_counts *pc;
    batch *b;
    int rc;
} count_task;

static void *count_main(void *arg) {
    count_task *t = arg;
    t->rc = tk_piece_counts_add_docs(t->pc, t->b->spans, t->b->nd);
    return NULL;
}

static int cmd_train(int argc, char **argv) {
    const char *cmd = "tokenizer train";
    const char *out = NULL, *field = NULL, *pattern = "o200k";
    long vocab = 0, threads = 0, minf = 0, maxtok = 0, maxpiece = TK_TRAIN_DEFAULT_MAX_PIECE;
    uint64_t sample = 0, batch_bytes = 32ull << 20;
    int quiet = 0, c, rc = EXIT_OK;
    ds_doc_sep sep = DS_SEP_FILE;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    const char **specials = calloc((size_t)argc + 1, sizeof *specials);
    size_t n_inputs = 0, n_specials = 0;
    if (!inputs || !specials) {
        free(inputs);
        free(specials);
        cli_error(cmd, "out of memory");
        return EXIT_BAD_INPUT;
    }
    static const struct option opts[] = {{"vocab-size", required_argument, 0, 'n'},
                                         {"out", required_argument, 0, 'o'},
                                         {"pattern", required_argument, 0, 'p'},
                                         {"special", required_argument, 0, 's'},
                                         {"min-frequency", required_argument, 0, OPT_MINF},
                                         {"max-token-bytes", required_argument, 0, OPT_MAXTOK},
                                         {"max-piece-bytes", required_argument, 0, OPT_MAXPIECE},
                                         {"sample-bytes", required_argument, 0, OPT_SAMPLE},
                                         {"input", required_argument, 0, 'i'},
                                         {"field", required_argument, 0, 'f'},
                                         {"doc-sep", required_argument, 0, OPT_DOCSEP},
                                         {"threads", required_argument, 0, 'j'},
                                         {"batch-bytes", required_argument, 0, OPT_BATCH},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_getopt_reset();
    while (rc == EXIT_OK && (c = cli_getopt(argc, argv, cmd, ":n:o:p:s:i:f:j:qh", opts)) != -1) {
        switch (c) {
        case 'n': rc = cli_parse_long(cmd, "--vocab-size", optarg, 1, 0x7fffffffL, &vocab); break;
        case 'o': out = optarg; break;
        case 'p': pattern = optarg; break;
        case 's': specials[n_specials++] = optarg; break;
        case OPT_MINF: rc = cli_parse_long(cmd, "--min-frequency", optarg, 0, 0x7fffffffffffffffL, &minf); break;
        case OPT_MAXTOK: rc = cli_parse_long(cmd, "--max-token-bytes", optarg, 0, 0x7fffffffL, &maxtok); break;
        case OPT_MAXPIECE:
            rc = cli_parse_long(cmd, "--max-piece-bytes", optarg, 2, 1L << 24, &maxpiece);
            break;
        case OPT_SAMPLE: rc = cli_parse_size(cmd, "--sample-bytes", optarg, 0, 1ull << 50, &sample); break;
        case 'i': inputs[n_inputs++] = optarg; break;
        case 'f': field = optarg; break;
        case OPT_DOCSEP:
            if (!strcmp(optarg, "file")) sep = DS_SEP_FILE;
            else if (!strcmp(optarg, "line")) sep = DS_SEP_LINE;
            else if (!strcmp(optarg, "blank-line") || !strcmp(optarg, "blank")) sep = DS_SEP_BLANK;
            else rc = cli_usage_error(cmd, "--doc-sep expects file, line or blank-line, got '%s'", optarg);
            break;
        case 'j': rc = cli_parse_long(cmd, "--threads", optarg, 0, 256, &threads); break;
        case OPT_BATCH: rc = cli_parse_size(cmd, "--batch-bytes", optarg, 4096, 1ull << 40, &batch_bytes); break;
        case 'q': quiet = 1; break;
        case 'h':
            fputs(k_usage, stdout);
            free(inputs);
            free(specials);
            return EXIT_OK;
        default: rc = EXIT_USAGE; break;
        }
    }
    tk_pattern pat = TK_PAT_NONE;
    if (rc == EXIT_OK) {
        for (int k = optind; k < argc; k++) inputs[n_inputs++] = argv[k];
        if (!vocab) rc = cli_usage_error(cmd, "--vocab-size is required (e.g. --vocab-size 32768)");
        else if (!out) rc = cli_usage_error(cmd, "--out is required (a .tiktoken or tokenizer.json path)");
        else if ((uint64_t)vocab < 256 + (uint64_t)n_specials)
            rc = cli_usage_error(cmd,
                                 "--vocab-size %ld is below 256 byte tokens + %zu special token(s); "
                                 "use at least %zu",
                                 vocab, n_specials, 256 + n_specials);
        else if (tk_pattern_parse(pattern, &pat) != TK_OK)
            rc = cli_usage_error(cmd, "unknown --pattern '%s' (use gpt2, cl100k or o200k)", pattern);
        else if (batch_bytes < 4096)
            rc = cli_usage_error(cmd, "--batch-bytes must be at least 4K");
    }
    for (size_t i = 0; rc == EXIT_OK && i < n_specials; i++) {
        if (!specials[i][0]) rc = cli_usage_error(cmd, "--special needs a non-empty text");
        for (size_t k = 0; rc == EXIT_OK && k < i; k++)
            if (!strcmp(specials[i], specials[k]))
                rc = cli_usage_error(cmd, "--special '%s' given twice", specials[i]);
    }
    if (rc != EXIT_OK) {
        free(inputs);
        free(specials);
        return rc;
    }
    if (!n_inputs) inputs[n_inputs++] = "-";
    if (refuse_outputs(cmd, out, "the input", inputs, n_inputs, NULL)) {
        free(inputs);
        free(specials);
        return EXIT_BAD_INPUT;
    }
    int from_stdin = 0;
    for (size_t i = 0; i < n_inputs; i++)
        if (!strcmp(inputs[i], "-")) from_stdin = 1;
    int progress = !quiet && isatty(2);

    tk_train_opts o;
    tk_train_opts_init(&o);
    o.vocab_size = (uint32_t)vocab;
    o.pattern = pat;
    o.specials = specials;
    o.n_specials = n_specials;
    o.min_frequency = (uint64_t)minf;
    o.max_token_bytes = (uint32_t)maxtok;
    o.max_piece_bytes = (uint32_t)maxpiece;
    o.threads = threads ? (int)threads : cli_ncpus();
    o.progress = progress;

    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    if (field) ro.field = field;
    ro.doc_sep = sep;
    char err[512] = "";
    double t0 = cli_now();
    read_stats st = {0};
    ds_reader *r = NULL;
    ds_record rec;
    int n;

    /* Sampling: pass 1 measures the usable text so that a hash threshold
     * keeps about `sample` bytes (stdin cannot be read twice: first SIZE). */
    uint64_t threshold = UINT64_MAX; /* keep doc iff hash <= threshold */
    int prefix_sample = 0;
    if (sample) {
        if (from_stdin) {
            prefix_sample = 1;
        } else {
            if (ds_reader_open(inputs, n_inputs, &ro, &r, err, sizeof err) != DS_OK) {
                cli_error(cmd, "%s", err);
                free(inputs);
                free(specials);
                return EXIT_BAD_INPUT;
            }
            uint64_t total = 0;
            read_stats tmp = {0};
            while ((n = ds_reader_next(r, &rec, err, sizeof err)) == 1)
                if (usable(&rec, &tmp)) total += rec.len;
            ds_reader_free(r);
            r = NULL;
            if (n < 0) {
                cli_error(cmd, "%s", err);
                free(inputs);
                free(specials);
                return EXIT_BAD_INPUT;
            }
            if (total > sample) threshold = (uint64_t)((double)sample / (double)total * 18446744073709551615.0);
        }
    }

    tk_piece_counts *pc = NULL;
    int trc = tk_piece_counts_create(&o, &pc);
    if (trc) {
        cli_error(cmd, "%s", tk_strerror(trc));
        free(inputs);
        free(specials);
        return EXIT_BAD_INPUT;
    }
    if (ds_reader_open(inputs, n_inputs, &ro, &r, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        tk_piece_counts_free(pc);
        free(inputs);
        free(specials);
        return EXIT_BAD_INPUT;
    }
    /* Double-buffered batches: the reader fills one while the other is counted. */
    batch bt[2];
    memset(bt, 0, sizeof bt);
    int cur = 0, running = 0;
    count_task task = {0};
    pthread_t th;
    size_t distinct_seen = 0;
    double tlast = 0;
    int done = 0;
    while (!done && rc == EXIT_OK) {
        n = ds_reader_next(r, &rec, err, sizeof err);
        if (n < 0) {
            cli_error(cmd, "%s", err);
            rc = EXIT_BAD_INPUT;
            break;
        }
        batch *b = &bt[cur];
        if (n == 1 && usable(&rec, &st)) {
            int keep = 1;
            if (prefix_sample) {
                if (st.bytes >= sample) keep = 0, done = 1;
            } else if (threshold != UINT64_MAX && doc_hash(rec.text, rec.len) > threshold) {
                keep = 0;
            }
            if (keep) {
                if (batch_add(b, rec.text, rec.len)) {
                    cli_error(cmd, "out of memory");
                    rc = EXIT_BAD_INPUT;
                    break;
                }
                st.docs++;
                st.bytes += rec.len;
            } else if (!done) {
                st.not_sampled++;
            }
        }
        if (n == 0) done = 1;
        if (b->nd && (done || b->blen >= batch_bytes)) {
            if (running) {
                pthread_join(th, NULL);
                running = 0;
                distinct_seen = tk_piece_counts_distinct(pc);
                if (task.rc) break;
            }
            if (batch_spans(b)) {
                cli_error(cmd, "out of memory");
                rc = EXIT_BAD_INPUT;
                break;
            }
            task = (count_task){pc, b, 0};
            if (pthread_create(&th, NULL, count_main, &task) != 0) {
                count_main(&task); /* no thread: count here */
                distinct_seen = tk_piece_counts_distinct(pc);
                if (task.rc) break;
            } else {
                running = 1;
            }
            cur ^= 1;
            batch_reset(&bt[cur], batch_bytes);
        }
        double tn = cli_now();
        if (progress && (tn - tlast > 0.25 || done)) {
            tlast = tn;
            fprintf(stderr, "\r[train] counting: %llu docs, %.1f MB, %.1f MB/s, %zu distinct pieces   ",
                    (unsigned long long)st.docs, (double)st.bytes / 1e6,
                    (double)st.bytes / 1e6 / (tn - t0 > 1e-9 ? tn - t0 : 1e-9), distinct_seen);
            fflush(stderr);
        }
    }
    if (running) pthread_join(th, NULL);
    if (rc == EXIT_OK && task.rc) {
        cli_error(cmd, "counting pieces failed: %s", tk_strerror(task.rc));
        rc = EXIT_BAD_INPUT;
    }
    if (progress) fputc('\n', stderr);
    ds_reader_free(r);
    for (int k = 0; k < 2; k++) batch_free(&bt[k]);
    double t_count = cli_now() - t0;
    uint64_t skipped = st.skipped_reader + st.skipped_utf8 + st.skipped_nul + st.skipped_empty;
    if (rc == EXIT_OK && skipped)
        cli_warn(cmd,
                 "skipped %llu document(s): %llu unusable record(s), %llu invalid UTF-8, %llu with NUL "
                 "bytes, %llu empty",
                 (unsigned long long)skipped, (unsigned long long)st.skipped_reader,
                 (unsigned long long)st.skipped_utf8, (unsigned long long)st.skipped_nul,
                 (unsigned long long)st.skipped_empty);
    if (rc == EXIT_OK && tk_piece_counts_distinct(pc) == 0) {
        cli_error(cmd, "empty corpus: no usable text in the inputs (%llu document(s) skipped)",
                  (unsigned long long)skipped);
        rc = EXIT_BAD_INPUT;
    }
    tk_train_result res;
    memset(&res, 0, sizeof res);
    double t1 = cli_now();
    if (rc == EXIT_OK) {
        trc = tk_train_merges(pc, &o, &res, err, sizeof err);
        if (trc) {
            cli_error(cmd, "%s", err[0] ? err : tk_strerror(trc));
            rc = EXIT_BAD_INPUT;
        }
    }
    double t_merge = cli_now() - t1;
    size_t distinct = tk_piece_counts_distinct(pc);
    tk_piece_counts_free(pc);
    if (rc == EXIT_OK) {
        if (res.hit_limit)
            cli_warn(cmd, "stopped at %u ranks + %zu special(s) = %zu ids, below --vocab-size %ld: no pair left%s",
                     res.n_ranks, n_specials, (size_t)res.n_ranks + n_specials, vocab,
                     minf > 1 ? " at or above --min-frequency" : " to merge");
        tk_tokenizer *tok = NULL;
        trc = tk_train_result_tokenizer(&res, &o, &tok);
        if (trc) {
            cli_error(cmd, "cannot build the tokenizer: %s", tk_strerror(trc));
            rc = EXIT_BAD_INPUT;
        } else {
            rc = save_by_ext(cmd, tok, out);
            tk_free(tok);
        }
    }
    if (rc == EXIT_OK && !quiet)
        fprintf(stderr,
                "mkshards tokenizer train: %s: %u ranks + %zu special(s), %u merges; %llu docs, %.1f MB "
                "(%llu not sampled), %zu distinct pieces; counting %.2fs, merging %.2fs\n",
                out, res.n_ranks, n_specials, res.n_merges, (unsigned long long)st.docs,
                (double)st.bytes / 1e6, (unsigned long long)st.not_sampled, distinct, t_count, t_merge);
    tk_train_result_free(&res);
    free(inputs);
    free(specials);
    return rc;
}

static int cmd_export(int argc, char **argv, int info) {
    const char *cmd = info ? "tokenizer info" : "tokenizer export";
    const char *spec = NULL, *out = NULL, *pattern = NULL;
    int c, rc = EXIT_OK;
    static const struct option opts[] = {{"tokenizer", required_argument, 0, 't'},
                                         {"out", required_argument, 0, 'o'},
                                         {"pattern", required_argument, 0, 'p'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_getopt_reset();
    while (rc == EXIT_OK && (c = cli_getopt(argc, argv, cmd, ":t:o:p:h", opts)) != -1) {
        switch (c) {
        case 't': spec = optarg; break;
        case 'o': out = optarg; break;
        case 'p': pattern = optarg; break;
        case 'h': fputs(k_usage, stdout); return EXIT_OK;
        default: rc = EXIT_USAGE; break;
        }
    }
    if (rc != EXIT_OK) return rc;
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!spec) return cli_usage_error(cmd, "--tokenizer is required");
    if (!info && !out) return cli_usage_error(cmd, "--out is required (a .tiktoken or tokenizer.json path)");
    if (!info && refuse_outputs(cmd, out, NULL, NULL, 0, spec)) return EXIT_BAD_INPUT;
    tk_tokenizer *tok = NULL;
    rc = cli_load_tokenizer(spec, pattern, &tok);
    if (rc != EXIT_OK) return rc;
    if (info) {
        uint8_t fp[32];
        tk_fingerprint(tok, fp);
        printf("name: %s\npattern: %s\nranks: %u\nvocab size: %u\nspecials: %zu\n", tk_name(tok),
               tk_pattern_name(tk_get_pattern(tok)), tk_n_ranks(tok), tk_vocab_size(tok), tk_n_specials(tok));
        const tk_special *sp = tk_specials(tok);
        for (size_t i = 0; i < tk_n_specials(tok); i++) printf("  %u %s\n", sp[i].id, sp[i].text);
        char desc[512];
        tk_describe(tok, desc, sizeof desc);
        printf("pipeline: %s\n", desc);
        tk_framing fr;
        char ferr[512] = "";
        if (tk_default_framing(tok, &fr, ferr, sizeof ferr) == TK_OK) { /* what build frames documents with */
            printf("framing:");
            for (int k = 0; k < 2; k++) {
                int64_t id = k ? fr.eos : fr.bos;
                const uint8_t *p;
                size_t n;
                printf(" %s ", k ? "EOS" : "BOS");
                if (id < 0) printf("none");
                else if (tk_token_bytes(tok, (uint32_t)id, &p, &n) == TK_OK && n < 100)
                    printf("%.*s (%lld)", (int)n, (const char *)p, (long long)id);
                else printf("id %lld", (long long)id);
                printf("%s", k ? "" : ",");
            }
            printf(" - %s\n", fr.source);
        } else {
            printf("framing: none by default (%s)\n", ferr);
        }
        printf("fingerprint: ");
        for (int i = 0; i < 32; i++) printf("%02x", fp[i]);
        printf("\n");
    } else {
        rc = save_by_ext(cmd, tok, out);
    }
    tk_free(tok);
    return rc;
}

int cmd_tokenizer(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(k_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "export")) return cmd_export(argc - 1, argv + 1, 0);
    if (!strcmp(argv[1], "info")) return cmd_export(argc - 1, argv + 1, 1);
    return cli_usage_error("tokenizer", "unknown action '%s' (use train, export or info)", argv[1]);
}
