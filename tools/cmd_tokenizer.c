/* cmd_tokenizer.c - mkshards tokenizer train|export|info (issue 5). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "cli.h"
#include "mks_common.h"
#include "ds.h"
#include "tk.h"
#include "tk_train.h"

static const char k_usage[] =
    "Usage: mkshards tokenizer train --vocab-size N --out FILE [options] [INPUT...]\n"
    "       mkshards tokenizer export --tokenizer T --out FILE [--pattern P]\n"
    "       mkshards tokenizer info --tokenizer T [--pattern P] [--normalize none|nfc|nfkc]\n"
    "\n"
    "train: learns a byte-level BPE vocabulary from the inputs (.txt, .jsonl, either + .zst/.gz,\n"
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
    "      --max-token-bytes N   never create a token longer than N bytes (default and at most\n"
    "                            1024: the longest token a vocabulary file may hold)\n"
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
        /* a rank file's own regex / normalization has no place in either format */
        int own = rc == TK_ERR_UNSUPPORTED && (tk_get_regex(tok) || tk_get_norm(tok) != TK_NORM_NONE);
        cli_error(cmd, "cannot write %s: %s%s", out, tk_strerror(rc),
                  own ? " (a .meta.json names only the built-in patterns and no normalization, and a tokenizer.json "
                        "would be read by Oniguruma's rules: a tokenizer given --pattern REGEX or --normalize is "
                        "not saved)"
                      : "");
        return EXIT_BAD_INPUT;
    }
    return EXIT_OK;
}

/* UTF-8 validity (no overlongs, no surrogates, <= U+10FFFF). */
static int utf8_valid(const uint8_t *s, size_t n) { return mc_utf8_valid(s, n); }

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

/* Options of `tokenizer train`, filled by train_parse. */
typedef struct {
    const char *out, *field, *pattern;
    long vocab, threads, minf, maxtok, maxpiece;
    uint64_t sample, batch_bytes;
    int quiet, help;
    ds_doc_sep sep;
    tk_pattern pat;
    const char **inputs, **specials; /* argc + 1 slots each */
    size_t n_inputs, n_specials;
} train_args;

/* Checks after getopt: required options, vocabulary size, pattern, specials. */
static int train_check(const char *cmd, train_args *a) {
    int rc = EXIT_OK;
    if (!a->vocab) rc = cli_usage_error(cmd, "--vocab-size is required (e.g. --vocab-size 32768)");
    else if (!a->out) rc = cli_usage_error(cmd, "--out is required (a .tiktoken or tokenizer.json path)");
    else if ((uint64_t)a->vocab < 256 + (uint64_t)a->n_specials)
        rc = cli_usage_error(cmd,
                             "--vocab-size %ld is below 256 byte tokens + %zu special token(s); "
                             "use at least %zu",
                             a->vocab, a->n_specials, 256 + a->n_specials);
    else if (tk_pattern_parse(a->pattern, &a->pat) != TK_OK)
        rc = cli_usage_error(cmd, "unknown --pattern '%s' (use gpt2, cl100k or o200k)", a->pattern);
    else if (a->batch_bytes < 4096) rc = cli_usage_error(cmd, "--batch-bytes must be at least 4K");
    for (size_t i = 0; rc == EXIT_OK && i < a->n_specials; i++) {
        if (!a->specials[i][0]) rc = cli_usage_error(cmd, "--special needs a non-empty text");
        for (size_t k = 0; rc == EXIT_OK && k < i; k++)
            if (!strcmp(a->specials[i], a->specials[k]))
                rc = cli_usage_error(cmd, "--special '%s' given twice", a->specials[i]);
    }
    return rc;
}

/* Parses argv into *a (whose inputs/specials arrays are allocated by the
 * caller). Sets a->help after printing the usage for -h. */
static int train_parse(int argc, char **argv, const char *cmd, train_args *a) {
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
    int c, rc = EXIT_OK;
    cli_getopt_reset();
    while (rc == EXIT_OK && (c = cli_getopt(argc, argv, cmd, ":n:o:p:s:i:f:j:qh", opts)) != -1) {
        switch (c) {
        case 'n': rc = cli_parse_long(cmd, "--vocab-size", optarg, 1, 0x7fffffffL, &a->vocab); break;
        case 'o': a->out = optarg; break;
        case 'p': a->pattern = optarg; break;
        case 's': a->specials[a->n_specials++] = optarg; break;
        case OPT_MINF: rc = cli_parse_long(cmd, "--min-frequency", optarg, 0, 0x7fffffffffffffffL, &a->minf); break;
        case OPT_MAXTOK:
            rc = cli_parse_long(cmd, "--max-token-bytes", optarg, 0, TK_MAX_TOKEN_BYTES, &a->maxtok);
            break;
        case OPT_MAXPIECE: rc = cli_parse_long(cmd, "--max-piece-bytes", optarg, 2, 1L << 24, &a->maxpiece); break;
        case OPT_SAMPLE: rc = cli_parse_size(cmd, "--sample-bytes", optarg, 0, 1ull << 50, &a->sample); break;
        case 'i': a->inputs[a->n_inputs++] = optarg; break;
        case 'f': a->field = optarg; break;
        case OPT_DOCSEP:
            if (ds_doc_sep_parse(optarg, &a->sep)) {
                char names[64];
                rc = cli_usage_error(cmd, "--doc-sep expects %s, got '%s'",
                                     ds_names_list(ds_doc_sep_name, names, sizeof names), optarg);
            }
            break;
        case 'j': rc = cli_parse_long(cmd, "--threads", optarg, 0, 256, &a->threads); break;
        case OPT_BATCH: rc = cli_parse_size(cmd, "--batch-bytes", optarg, 4096, 1ull << 40, &a->batch_bytes); break;
        case 'q': a->quiet = 1; break;
        case 'h':
            fputs(k_usage, stdout);
            a->help = 1;
            return EXIT_OK;
        default: rc = EXIT_USAGE; break;
        }
    }
    if (rc != EXIT_OK) return rc;
    for (int k = optind; k < argc; k++) a->inputs[a->n_inputs++] = argv[k];
    return train_check(cmd, a);
}

/* Sampling: pass 1 measures the usable text so that a hash threshold keeps
 * about `sample` bytes (keep a document iff its hash <= *threshold). stdin
 * cannot be read twice: *prefix_sample, keep the first SIZE. */
static int train_sample_threshold(const char *cmd, const train_args *a, const ds_reader_opts *ro, uint64_t *threshold,
                                  int *prefix_sample) {
    *threshold = UINT64_MAX;
    *prefix_sample = 0;
    if (!a->sample) return EXIT_OK;
    for (size_t i = 0; i < a->n_inputs; i++)
        if (!strcmp(a->inputs[i], "-")) *prefix_sample = 1;
    if (*prefix_sample) return EXIT_OK;
    char err[512] = "";
    ds_reader *r = NULL;
    ds_record rec;
    int n;
    if (ds_reader_open(a->inputs, a->n_inputs, ro, &r, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    uint64_t total = 0;
    read_stats tmp = {0};
    while ((n = ds_reader_next(r, &rec, err, sizeof err)) == 1)
        if (usable(&rec, &tmp)) total += rec.len;
    ds_reader_free(r);
    if (n < 0) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    if (total > a->sample) *threshold = (uint64_t)((double)a->sample / (double)total * 18446744073709551615.0);
    return EXIT_OK;
}

/* State of the counting pass: double-buffered batches, the reader fills one
 * while the other is counted on a thread. */
typedef struct {
    tk_piece_counts *pc;
    batch bt[2];
    int cur, running;
    count_task task;
    pthread_t th;
    size_t distinct_seen;
} counter;

/* Hands the current batch to the counting thread (after joining the previous
 * one). 1: a count failed (counter.task.rc), stop quietly; otherwise rc. */
static int counter_flush(const char *cmd, counter *k, uint64_t batch_bytes, int *stop) {
    batch *b = &k->bt[k->cur];
    if (k->running) {
        pthread_join(k->th, NULL);
        k->running = 0;
        k->distinct_seen = tk_piece_counts_distinct(k->pc);
        if (k->task.rc) return *stop = 1, EXIT_OK;
    }
    if (batch_spans(b)) {
        cli_error(cmd, "out of memory");
        return EXIT_BAD_INPUT;
    }
    k->task = (count_task){k->pc, b, 0};
    if (pthread_create(&k->th, NULL, count_main, &k->task) != 0) {
        count_main(&k->task); /* no thread: count here */
        k->distinct_seen = tk_piece_counts_distinct(k->pc);
        if (k->task.rc) return *stop = 1, EXIT_OK;
    } else {
        k->running = 1;
    }
    k->cur ^= 1;
    batch_reset(&k->bt[k->cur], batch_bytes);
    return EXIT_OK;
}

/* Reads the inputs and counts their pre-tokens into pc, keeping the sampled
 * documents; st gets the document statistics. */
static int train_count(const char *cmd, const train_args *a, const ds_reader_opts *ro, tk_piece_counts *pc,
                       uint64_t threshold, int prefix_sample, int progress, double t0, read_stats *st) {
    char err[512] = "";
    ds_reader *r = NULL;
    ds_record rec;
    if (ds_reader_open(a->inputs, a->n_inputs, ro, &r, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    counter k;
    memset(&k, 0, sizeof k);
    k.pc = pc;
    double tlast = 0;
    int done = 0, stop = 0, rc = EXIT_OK;
    while (!done && rc == EXIT_OK) {
        int n = ds_reader_next(r, &rec, err, sizeof err);
        if (n < 0) {
            cli_error(cmd, "%s", err);
            rc = EXIT_BAD_INPUT;
            break;
        }
        batch *b = &k.bt[k.cur];
        if (n == 1 && usable(&rec, st)) {
            int keep = 1;
            if (prefix_sample) {
                if (st->bytes >= a->sample) keep = 0, done = 1;
            } else if (threshold != UINT64_MAX && doc_hash(rec.text, rec.len) > threshold) {
                keep = 0;
            }
            if (keep) {
                if (batch_add(b, rec.text, rec.len)) {
                    cli_error(cmd, "out of memory");
                    rc = EXIT_BAD_INPUT;
                    break;
                }
                st->docs++;
                st->bytes += rec.len;
            } else if (!done) {
                st->not_sampled++;
            }
        }
        if (n == 0) done = 1;
        if (b->nd && (done || b->blen >= a->batch_bytes)) {
            rc = counter_flush(cmd, &k, a->batch_bytes, &stop);
            if (rc != EXIT_OK || stop) break;
        }
        double tn = cli_now();
        if (progress && (tn - tlast > 0.25 || done)) {
            tlast = tn;
            fprintf(stderr, "\r[train] counting: %llu docs, %.1f MB, %.1f MB/s, %zu distinct pieces   ",
                    (unsigned long long)st->docs, (double)st->bytes / 1e6,
                    (double)st->bytes / 1e6 / (tn - t0 > 1e-9 ? tn - t0 : 1e-9), k.distinct_seen);
            fflush(stderr);
        }
    }
    if (k.running) pthread_join(k.th, NULL);
    if (rc == EXIT_OK && k.task.rc) {
        cli_error(cmd, "counting pieces failed: %s", tk_strerror(k.task.rc));
        rc = EXIT_BAD_INPUT;
    }
    if (progress) fputc('\n', stderr);
    ds_reader_free(r);
    for (int i = 0; i < 2; i++) batch_free(&k.bt[i]);
    return rc;
}

/* Builds the tokenizer from the merges and writes it to --out. */
static int train_write(const char *cmd, const train_args *a, const tk_train_opts *o, const tk_train_result *res) {
    if (res->hit_limit)
        cli_warn(cmd, "stopped at %u ranks + %zu special(s) = %zu ids, below --vocab-size %ld: no pair left%s",
                 res->n_ranks, a->n_specials, (size_t)res->n_ranks + a->n_specials, a->vocab,
                 a->minf > 1 ? " at or above --min-frequency" : " to merge");
    tk_tokenizer *tok = NULL;
    int trc = tk_train_result_tokenizer(res, o, &tok);
    if (trc) {
        cli_error(cmd, "cannot build the tokenizer: %s", tk_strerror(trc));
        return EXIT_BAD_INPUT;
    }
    int rc = save_by_ext(cmd, tok, a->out);
    tk_free(tok);
    return rc;
}

/* Counts, merges, writes and reports; pc is freed here. */
static int train_run(const char *cmd, const train_args *a, const tk_train_opts *o, const ds_reader_opts *ro,
                     tk_piece_counts *pc, uint64_t threshold, int prefix_sample, double t0) {
    char err[512] = "";
    read_stats st = {0};
    int rc = train_count(cmd, a, ro, pc, threshold, prefix_sample, o->progress, t0, &st);
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
        int trc = tk_train_merges(pc, o, &res, err, sizeof err);
        if (trc) {
            cli_error(cmd, "%s", err[0] ? err : tk_strerror(trc));
            rc = EXIT_BAD_INPUT;
        }
    }
    double t_merge = cli_now() - t1;
    size_t distinct = tk_piece_counts_distinct(pc);
    tk_piece_counts_free(pc);
    if (rc == EXIT_OK) rc = train_write(cmd, a, o, &res);
    if (rc == EXIT_OK && !a->quiet)
        fprintf(stderr,
                "mkshards tokenizer train: %s: %u ranks + %zu special(s), %u merges; %llu docs, %.1f MB "
                "(%llu not sampled), %zu distinct pieces; counting %.2fs, merging %.2fs\n",
                a->out, res.n_ranks, a->n_specials, res.n_merges, (unsigned long long)st.docs, (double)st.bytes / 1e6,
                (unsigned long long)st.not_sampled, distinct, t_count, t_merge);
    tk_train_result_free(&res);
    return rc;
}

/* Library options from the parsed command line. */
static void train_opts_from_args(const train_args *a, int progress, tk_train_opts *o, ds_reader_opts *ro) {
    tk_train_opts_init(o);
    o->vocab_size = (uint32_t)a->vocab;
    o->pattern = a->pat;
    o->specials = a->specials;
    o->n_specials = a->n_specials;
    o->min_frequency = (uint64_t)a->minf;
    o->max_token_bytes = (uint32_t)a->maxtok;
    o->max_piece_bytes = (uint32_t)a->maxpiece;
    o->threads = a->threads ? (int)a->threads : cli_ncpus();
    o->progress = progress;
    ds_reader_opts_init(ro);
    if (a->field) ro->field = a->field;
    ro->doc_sep = a->sep;
}

/* Everything after parsing: refuse outputs naming inputs, sample, count, train. */
static int train_main(const char *cmd, train_args *a) {
    if (!a->n_inputs) a->inputs[a->n_inputs++] = "-";
    if (refuse_outputs(cmd, a->out, "the input", a->inputs, a->n_inputs, NULL)) return EXIT_BAD_INPUT;
    tk_train_opts o;
    ds_reader_opts ro;
    train_opts_from_args(a, !a->quiet && isatty(2), &o, &ro);
    double t0 = cli_now(); /* counting time includes the sampling pass */
    uint64_t threshold;
    int prefix_sample;
    int rc = train_sample_threshold(cmd, a, &ro, &threshold, &prefix_sample);
    if (rc != EXIT_OK) return rc;
    tk_piece_counts *pc = NULL;
    int trc = tk_piece_counts_create(&o, &pc);
    if (trc) {
        cli_error(cmd, "%s", tk_strerror(trc));
        return EXIT_BAD_INPUT;
    }
    return train_run(cmd, a, &o, &ro, pc, threshold, prefix_sample, t0);
}

static int cmd_train(int argc, char **argv) {
    const char *cmd = "tokenizer train";
    train_args a;
    memset(&a, 0, sizeof a);
    a.pattern = "o200k";
    a.maxpiece = TK_TRAIN_DEFAULT_MAX_PIECE;
    a.batch_bytes = 32ull << 20;
    a.sep = DS_SEP_FILE;
    a.pat = TK_PAT_NONE;
    a.inputs = calloc((size_t)argc + 1, sizeof *a.inputs);
    a.specials = calloc((size_t)argc + 1, sizeof *a.specials);
    int rc;
    if (!a.inputs || !a.specials) {
        cli_error(cmd, "out of memory");
        rc = EXIT_BAD_INPUT;
    } else {
        rc = train_parse(argc, argv, cmd, &a);
        if (rc == EXIT_OK && !a.help) rc = train_main(cmd, &a);
    }
    free(a.inputs);
    free(a.specials);
    return rc;
}

static int cmd_export(int argc, char **argv, int info) {
    const char *cmd = info ? "tokenizer info" : "tokenizer export";
    const char *spec = NULL, *out = NULL, *pattern = NULL, *normalize = NULL;
    int c, rc = EXIT_OK;
    static const struct option opts[] = {{"tokenizer", required_argument, 0, 't'},
                                         {"out", required_argument, 0, 'o'},
                                         {"pattern", required_argument, 0, 'p'},
                                         {"normalize", required_argument, 0, 'N'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    cli_getopt_reset();
    while (rc == EXIT_OK && (c = cli_getopt(argc, argv, cmd, ":t:o:p:h", opts)) != -1) {
        switch (c) {
        case 't': spec = optarg; break;
        case 'o': out = optarg; break;
        case 'p': pattern = optarg; break;
        case 'N': normalize = optarg; break;
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
    rc = cli_load_tokenizer_opts(spec, pattern, normalize, &tok);
    if (rc != EXIT_OK) return rc;
    if (info) {
        uint8_t fp[32];
        tk_fingerprint(tok, fp);
        const char *rx = tk_get_regex(tok);
        char shown[TK_MAX_PATTERN_BYTES * 4 + 8];
        if (rx) tk_escape_text(rx, strlen(rx), shown, sizeof shown);
        printf("name: %s\npattern: %s%s\n", tk_name(tok), rx ? "regex " : tk_pattern_name(tk_get_pattern(tok)),
               rx ? shown : "");
        if (tk_get_norm(tok) != TK_NORM_NONE) printf("normalize: %s\n", tk_norm_name(tk_get_norm(tok)));
        printf("ranks: %u\nvocab size: %u\nspecials: %zu\n", tk_n_ranks(tok), tk_vocab_size(tok), tk_n_specials(tok));
        const tk_special *sp = tk_specials(tok);
        for (size_t i = 0; i < tk_n_specials(tok); i++) /* token texts escaped: a hostile file's ESC bytes */
            printf("  %u %s\n", sp[i].id, tk_escape_text(sp[i].text, strlen(sp[i].text), shown, sizeof shown));
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
                    printf("%s (%lld)", tk_escape_text(p, n, shown, sizeof shown), (long long)id);
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
