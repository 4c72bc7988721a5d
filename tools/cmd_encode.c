/* cmd_encode.c - mkshards encode: documents -> one JSON array of token ids per line. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "handoff.h"
#include "record_batch.h"
#include "ds.h"
#include "tk.h"

static const char k_usage[] =
    "Usage: mkshards encode --tokenizer T [options] [INPUT...] --ids-out FILE\n"
    "\n"
    "Encodes every document of the inputs and writes one line per document: a JSON\n"
    "array of token ids, e.g. [464,3290,13], in input order.\n"
    "\n"
    "Inputs: .txt, .jsonl, either + .zst, folders (recursive, sorted), or - for stdin\n"
    "(default when no input is given).\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T        .tiktoken file, tokenizer.json, folder with encoder.json +\n"
    "                           vocab.bpe, or a name: gpt2, r50k_base, cl100k_base, o200k_base\n"
    "                           (names are looked up in $MKSHARDS_VOCAB_DIR)   [required]\n"
    "  -i, --input FILE         an input (repeatable; positional INPUTs work too)\n"
    "  -f, --field NAME         JSONL text field, dotted path for nested objects (default: text)\n"
    "  -j, --threads N          encoder threads, 0..4096 (default 0: all cores)\n"
    "  -p, --pattern P          pre-tokenizer pattern: gpt2, cl100k, o200k (default: the one\n"
    "                           the vocabulary implies)\n"
    "      --allow-special S    map special-token text to special ids: 'all' or a comma list\n"
    "                           such as '<|endoftext|>' (default: none, specials are ordinary text)\n"
    "      --doc-sep MODE       for .txt inputs: file (default), line or blank-line\n"
    "  -o, --ids-out FILE       output file, - for stdout   [required]\n"
    "      --batch-bytes SIZE   text per encode batch, 1..1T (default 2M)\n"
    "      --batch-docs N       documents per encode batch, 1..16777216 (default 4096)\n"
    "      --stats              print docs, bytes, tokens, MB/s and the time spent encoding\n"
    "                           alone (reading and writing excluded) to stderr at the end\n"
    "  -h, --help               show this help\n"
    "\n"
    "Records the reader cannot use (bad JSON, missing field, ...) are reported on stderr\n"
    "with file:line and skipped.\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input or file (or nothing could be read; or --ids-out is an\n"
    "input, lies inside an input folder or is the tokenizer: refused before writing),\n"
    "64 usage error.\n"
    "\n"
    "Example:\n"
    "  mkshards encode -t cl100k_base samples/tiny.jsonl --ids-out tiny.ids --stats\n";

enum { OPT_ALLOW_SPECIAL = 1000, OPT_DOC_SEP, OPT_STATS, OPT_BATCH_BYTES, OPT_BATCH_DOCS };

static const struct option k_opts[] = {
    {"tokenizer", required_argument, 0, 't'},
    {"input", required_argument, 0, 'i'},
    {"field", required_argument, 0, 'f'},
    {"threads", required_argument, 0, 'j'},
    {"pattern", required_argument, 0, 'p'},
    {"allow-special", required_argument, 0, OPT_ALLOW_SPECIAL},
    {"doc-sep", required_argument, 0, OPT_DOC_SEP},
    {"ids-out", required_argument, 0, 'o'},
    {"batch-bytes", required_argument, 0, OPT_BATCH_BYTES},
    {"batch-docs", required_argument, 0, OPT_BATCH_DOCS},
    {"stats", no_argument, 0, OPT_STATS},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0}};

static const char *rec_status_name(ds_rec_status s)
{
    switch (s) {
    case DS_REC_OK: return "ok";
    case DS_REC_BAD_JSON: return "malformed JSON line";
    case DS_REC_MISSING_FIELD: return "text field missing";
    case DS_REC_NOT_STRING: return "text field is not a string";
    case DS_REC_OVERLONG: return "record longer than the reader's limit";
    case DS_REC_ZSTD_ERROR: return "zstd stream truncated or corrupt (rest of file ignored)";
    }
    return "unusable record";
}

/* ---- special-token encoding on our own threads (tk_encode_batch has no specials) */
typedef struct {
    const tk_tokenizer *tok;
    const tk_span *docs;
    tk_ids *outs;
    size_t n;
    const char *const *allowed;
    size_t n_allowed;
    atomic_size_t next;
    atomic_int rc;
} special_job;

static void *special_worker(void *arg)
{
    special_job *j = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n || atomic_load(&j->rc) != TK_OK)
            break;
        int rc = tk_encode_special(j->tok, j->docs[i].text, j->docs[i].len, j->allowed, j->n_allowed, &j->outs[i]);
        if (rc != TK_OK)
            atomic_store(&j->rc, rc);
    }
    return NULL;
}

static int encode_special_batch(const tk_tokenizer *tok, const tk_span *docs, size_t n, int threads,
                                const char *const *allowed, size_t n_allowed, tk_ids *outs)
{
    special_job j = {.tok = tok, .docs = docs, .outs = outs, .n = n, .allowed = allowed, .n_allowed = n_allowed};
    atomic_init(&j.next, 0);
    atomic_init(&j.rc, TK_OK);
    if (threads > (int)n)
        threads = n ? (int)n : 1;
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    if (!th)
        return TK_ERR_NOMEM;
    int started = 0;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&th[t], NULL, special_worker, &j) != 0)
            break;
        started++;
    }
    special_worker(&j);
    for (int t = 1; t <= started; t++)
        pthread_join(th[t], NULL);
    free(th);
    return atomic_load(&j.rc);
}

/* ---- reader thread: fills batches while the previous one is encoded */
typedef struct {
    uint8_t *arena;
    size_t cap, used;
    size_t *offs; /* n + 1 entries */
    size_t n;
    int eof;   /* no batch after this one */
    int fatal; /* reader error: message in errmsg, batch contents invalid */
    char errmsg[512];
} batch;

typedef struct {
    ds_reader *rd;
    const char *cmd;
    size_t max_docs;
    uint64_t max_bytes;
    batch slot[2];
    handoff h; /* slot full: ready for the encoder; free: for the reader */
    uint64_t skipped;
} pipeline;

#define TAKE_TEXT_MIN ((size_t)256 << 10)

static void fill_batch(pipeline *pl, batch *b)
{
    b->n = 0;
    b->used = 0;
    b->eof = 0;
    b->fatal = 0;
    while (b->n < pl->max_docs && b->used < pl->max_bytes) {
        ds_record rec;
        int r = batch_next_record(pl->rd, &rec, b->errmsg, sizeof b->errmsg);
        if (r <= 0) {
            b->eof = 1;
            b->fatal = r < 0;
            if (r < 0)
                return;
            break;
        }
        if (rec.status != DS_REC_OK) {
            pl->skipped++;
            cli_warn(pl->cmd, "%s:%llu: %s; record skipped", rec.file ? rec.file : "?",
                     (unsigned long long)rec.line, rec_status_name(rec.status));
            continue;
        }
        if (b->used == 0 && rec.len >= TAKE_TEXT_MIN) {
            /* a large document first in the batch: swap buffers with the
             * reader rather than copy it into fresh pages */
            long long at = ds_reader_take_text(pl->rd, &rec, &b->arena, &b->cap);
            if (at >= 0) {
                b->offs[b->n++] = (size_t)at;
                b->used = (size_t)at + rec.len;
                continue;
            }
        }
        size_t off = b->used;
        if (batch_arena_append(&b->arena, &b->cap, &b->used, rec.text, rec.len)) {
            snprintf(b->errmsg, sizeof b->errmsg, "out of memory (document of %zu bytes)", rec.len);
            b->fatal = 1;
            b->eof = 1;
            return;
        }
        b->offs[b->n++] = off;
    }
    b->offs[b->n] = b->used;
}

static int fill_slot(void *ctx, unsigned k)
{
    pipeline *pl = ctx;
    fill_batch(pl, &pl->slot[k]);
    return pl->slot[k].eof;
}

static void *reader_main(void *arg)
{
    pipeline *pl = arg;
    handoff_produce(&pl->h, fill_slot, pl);
    return NULL;
}

/* ---- output buffer */
typedef struct {
    char *buf;
    size_t len, cap;
    FILE *f;
    const char *path;
    int failed;
} outbuf;

static int out_flush(outbuf *o)
{
    if (o->len && !o->failed && fwrite(o->buf, 1, o->len, o->f) != o->len)
        o->failed = errno ? errno : EIO;
    o->len = 0;
    return o->failed ? -1 : 0;
}

/* Make room for `need` more bytes (flushing first when over the soft limit). */
static int out_reserve(outbuf *o, size_t need)
{
    if (o->len + need <= o->cap)
        return 0;
    if (out_flush(o))
        return -1;
    if (need > o->cap) {
        char *nb = realloc(o->buf, need);
        if (!nb)
            return -1;
        o->buf = nb;
        o->cap = need;
    }
    return 0;
}

static int write_ids(outbuf *o, const tk_ids *v)
{
    /* worst case: 20 digits + ',' per id, "[]\n"; a block at a time so the
     * inner loop keeps its pointers in registers */
    const size_t block = 8192; /* 172 KiB of buffer at most: fewer first-touch page faults than 64 K ids */
    const uint32_t *ids = v->ids;
    size_t n = v->len;
    if (out_reserve(o, 3 + (n < block ? n : block) * 21))
        return -1;
    o->buf[o->len++] = '[';
    for (size_t i = 0; i < n;) {
        size_t m = n - i < block ? n - i : block;
        if (out_reserve(o, 3 + m * 21))
            return -1;
        char *p = o->buf + o->len;
        for (size_t k = i; k < i + m; k++) {
            *p = ',';
            p += k != 0;
            p += cli_fmt_u64(p, ids[k]);
        }
        o->len = (size_t)(p - o->buf);
        i += m;
    }
    o->buf[o->len++] = ']';
    o->buf[o->len++] = '\n';
    return 0;
}

/* ---- writer thread: formats and writes batch k while batch k+1 is encoded */
typedef struct {
    outbuf *out;
    tk_ids *set[2];
    size_t n[2];
    int last[2];
    handoff h;  /* set full: encoded, waiting to be written; free: for the encoder */
    int failed; /* a write failed (out->failed / ENOMEM); set before the writer stops */
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    for (unsigned k = 0;; k ^= 1) {
        if (handoff_wait_full(&w->h, k))
            return NULL; /* stopped while idle */
        int failed = 0;
        for (size_t i = 0; i < w->n[k]; i++) {
            tk_ids *v = &w->set[k][i];
            if (!failed && write_ids(w->out, v))
                failed = 1;
            /* do not keep a huge id array around after one giant document */
            if (v->cap > (16u << 20)) {
                tk_ids_free(v);
                memset(v, 0, sizeof *v);
            }
        }
        if (failed) {
            w->failed = 1;
            handoff_stop(&w->h); /* wakes the encoder waiting for this set */
            return NULL;
        }
        int last = w->last[k];
        handoff_release(&w->h, k);
        if (last)
            return NULL;
    }
}

int cmd_encode(int argc, char **argv)
{
    const char *cmd = "encode";
    const char *spec = NULL, *field = NULL, *pattern = NULL, *allow = NULL, *out_path = NULL;
    long threads = 0, batch_docs = 4096;
    uint64_t batch_bytes = 2ull << 20; /* small enough that reading, encoding and writing overlap */
    int stats = 0;
    ds_doc_sep sep = DS_SEP_FILE;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    size_t n_inputs = 0;
    int rc = EXIT_OK, c;
    if (!inputs) {
        cli_error(cmd, "out of memory");
        return EXIT_BAD_INPUT;
    }

    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":t:i:f:j:p:o:h", k_opts)) != -1) {
        switch (c) {
        case 't': spec = optarg; break;
        case 'i': inputs[n_inputs++] = optarg; break;
        case 'f': field = optarg; break;
        case 'j':
            if (cli_parse_long(cmd, "--threads", optarg, 0, 4096, &threads)) {
                free(inputs);
                return EXIT_USAGE;
            }
            break;
        case 'p': pattern = optarg; break;
        case 'o': out_path = optarg; break;
        case OPT_ALLOW_SPECIAL: allow = optarg; break;
        case OPT_DOC_SEP:
            if (!strcmp(optarg, "file"))
                sep = DS_SEP_FILE;
            else if (!strcmp(optarg, "line"))
                sep = DS_SEP_LINE;
            else if (!strcmp(optarg, "blank-line") || !strcmp(optarg, "blank"))
                sep = DS_SEP_BLANK;
            else {
                free(inputs);
                return cli_usage_error(cmd, "--doc-sep expects file, line or blank-line, got '%s'", optarg);
            }
            break;
        case OPT_BATCH_BYTES:
            if (cli_parse_size(cmd, "--batch-bytes", optarg, 1, 1ull << 40, &batch_bytes)) {
                free(inputs);
                return EXIT_USAGE;
            }
            break;
        case OPT_BATCH_DOCS:
            if (cli_parse_long(cmd, "--batch-docs", optarg, 1, 1L << 24, &batch_docs)) {
                free(inputs);
                return EXIT_USAGE;
            }
            break;
        case OPT_STATS: stats = 1; break;
        case 'h':
            fputs(k_usage, stdout);
            free(inputs);
            return EXIT_OK;
        default: free(inputs); return EXIT_USAGE;
        }
    }
    for (int i = optind; i < argc; i++)
        inputs[n_inputs++] = argv[i];
    if (!spec) {
        free(inputs);
        return cli_usage_error(cmd, "--tokenizer is required (a .tiktoken file or a name such as cl100k_base)");
    }
    if (!out_path) {
        free(inputs);
        return cli_usage_error(cmd, "--ids-out is required (a file, or - for stdout)");
    }
    if (n_inputs == 0)
        inputs[n_inputs++] = "-";
    if (threads <= 0)
        threads = cli_ncpus();
    /* before the output is created (fopen "wb" truncates): it must be
     * neither an input, nor inside an input folder, nor the tokenizer */
    if (cli_refuse_overwrite(cmd, "--ids-out", out_path, "the input", inputs, n_inputs) ||
        cli_refuse_overwrite_tokenizer(cmd, "--ids-out", out_path, spec)) {
        free(inputs);
        return EXIT_BAD_INPUT;
    }

    tk_tokenizer *tok = NULL;
    ds_reader *rd = NULL;
    outbuf out = {0};
    const char **allowed = NULL;
    char *allow_copy = NULL;
    size_t n_allowed = 0;
    int use_special = 0;
    pipeline pl = {0};
    pthread_t reader_thread;
    int reader_started = 0, pl_inited = 0;
    writer wr;
    memset(&wr, 0, sizeof wr);
    pthread_t writer_thread;
    int writer_started = 0, wr_inited = 0;
    tk_span *spans = NULL;
    tk_ids *ids = NULL;
    char err[512] = "";

    rc = cli_load_tokenizer(spec, pattern, &tok);
    if (rc != EXIT_OK)
        goto done;

    if (allow) {
        use_special = 1;
        if (!strcmp(allow, "all")) {
            allowed = NULL;
            n_allowed = (size_t)-1;
        } else {
            allow_copy = strdup(allow);
            allowed = calloc(strlen(allow) + 1, sizeof *allowed);
            if (!allow_copy || !allowed) {
                cli_error(cmd, "out of memory");
                rc = EXIT_BAD_INPUT;
                goto done;
            }
            for (char *save = NULL, *t = strtok_r(allow_copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                uint32_t id;
                if (tk_special_id(tok, t, &id) != TK_OK) {
                    char list[1024] = "";
                    size_t ns = tk_n_specials(tok);
                    const tk_special *sp = tk_specials(tok);
                    for (size_t k = 0; k < ns; k++) {
                        size_t l = strlen(list);
                        snprintf(list + l, sizeof list - l, "%s%s", k ? ", " : "", sp[k].text);
                    }
                    rc = cli_usage_error(cmd, "'%s' is not a special token of %s (its specials: %s)", t,
                                         tk_name(tok), ns ? list : "none");
                    goto done;
                }
                allowed[n_allowed++] = t;
            }
        }
    }

    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    if (field)
        ro.field = field;
    ro.doc_sep = sep;
    int orc = ds_reader_open(inputs, n_inputs, &ro, &rd, err, sizeof err);
    if (orc != DS_OK) {
        cli_error(cmd, "%s", err[0] ? err : ds_strerror(orc));
        rc = EXIT_BAD_INPUT;
        goto done;
    }

    if (!strcmp(out_path, "-")) {
        out.f = stdout;
        out.path = "stdout";
    } else {
        out.f = fopen(out_path, "wb");
        out.path = out_path;
        if (!out.f) {
            cli_error(cmd, "cannot create --ids-out '%s': %s", out_path, strerror(errno));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    out.cap = 1u << 20; /* written out when full: a bigger buffer only adds first-touch page faults */
    out.buf = malloc(out.cap);
    spans = malloc((size_t)batch_docs * sizeof *spans);
    ids = calloc(2 * (size_t)batch_docs, sizeof *ids); /* two sets: one encoded, one being written */
    if (!out.buf || !spans || !ids) {
        cli_error(cmd, "out of memory");
        rc = EXIT_BAD_INPUT;
        goto done;
    }

    uint64_t n_docs = 0, n_bytes = 0, n_tokens = 0, n_skipped = 0;
    double t0 = cli_now();
    /* time inside the encode calls: CPU time of this thread when it encodes
     * alone (the reader and writer threads may share its core), else wall */
    double (*encode_clock)(void) = threads == 1 ? cli_thread_cpu : cli_now;
    double t_encode = 0;
    pl.rd = rd;
    pl.cmd = cmd;
    pl.max_docs = (size_t)batch_docs;
    pl.max_bytes = batch_bytes;
    for (int k = 0; k < 2; k++) {
        pl.slot[k].offs = malloc(((size_t)batch_docs + 1) * sizeof *pl.slot[k].offs);
        if (!pl.slot[k].offs) {
            cli_error(cmd, "out of memory");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    handoff_init(&pl.h);
    pl_inited = 1;
    if (pthread_create(&reader_thread, NULL, reader_main, &pl) != 0) {
        cli_error(cmd, "cannot start the reader thread");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    reader_started = 1;
    wr.out = &out;
    wr.set[0] = ids;
    wr.set[1] = ids + batch_docs;
    handoff_init(&wr.h);
    wr_inited = 1;
    if (pthread_create(&writer_thread, NULL, writer_main, &wr) != 0) {
        cli_error(cmd, "cannot start the writer thread");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    writer_started = 1;
    for (unsigned k = 0;; k ^= 1) {
        handoff_wait_full(&pl.h, k); /* the reader always publishes, eof included */
        batch *b = &pl.slot[k];
        if (b->fatal) {
            cli_error(cmd, "%s", b->errmsg);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        /* the id set of this parity must have been written out */
        if (handoff_wait_free(&wr.h, k) || wr.failed) {
            cli_error(cmd, "cannot write '%s': %s", out.path, strerror(out.failed ? out.failed : ENOMEM));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        tk_ids *set = wr.set[k];
        size_t nb = b->n;
        for (size_t i = 0; i < nb; i++) {
            spans[i].text = b->arena + b->offs[i];
            spans[i].len = b->offs[i + 1] - b->offs[i];
            set[i].len = 0;
        }
        int erc = TK_OK;
        double te = encode_clock();
        if (nb)
            erc = use_special ? encode_special_batch(tok, spans, nb, (int)threads, allowed, n_allowed, set)
                              : tk_encode_batch(tok, spans, nb, (int)threads, set);
        t_encode += encode_clock() - te;
        if (erc != TK_OK) {
            cli_error(cmd, "encoding failed: %s", tk_strerror(erc));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        for (size_t i = 0; i < nb; i++)
            n_tokens += set[i].len;
        n_docs += nb;
        n_bytes += b->used;
        int last = b->eof;
        wr.n[k] = nb;
        wr.last[k] = last;
        handoff_publish(&wr.h, k);
        /* the text is no longer needed: the reader may refill this slot */
        handoff_release(&pl.h, k);
        if (last)
            break;
    }
    pthread_join(reader_thread, NULL);
    reader_started = 0;
    pthread_join(writer_thread, NULL);
    writer_started = 0;
    n_skipped = pl.skipped;
    if (wr.failed || out_flush(&out) || fflush(out.f) != 0 || ferror(out.f)) {
        cli_error(cmd, "cannot write '%s': %s", out.path, strerror(out.failed ? out.failed : errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    double dt = cli_now() - t0;
    if (n_docs == 0 && n_skipped > 0) {
        cli_error(cmd, "no usable document in the input (%llu records skipped; see the warnings above)",
                  (unsigned long long)n_skipped);
        rc = EXIT_BAD_INPUT;
    } else if (n_skipped > 0) {
        cli_warn(cmd, "%llu record(s) skipped", (unsigned long long)n_skipped);
    }
    if (stats)
        fprintf(stderr,
                "mkshards encode: %llu docs, %llu bytes, %llu tokens, %.1f bytes/token, %.2f s, %.1f MB/s, "
                "%ld threads, %s; encoding alone %.4f s (%s), %.1f MB/s\n",
                (unsigned long long)n_docs, (unsigned long long)n_bytes, (unsigned long long)n_tokens,
                n_tokens ? (double)n_bytes / (double)n_tokens : 0.0, dt,
                dt > 0 ? (double)n_bytes / dt / 1e6 : 0.0, threads, tk_name(tok), t_encode,
                threads == 1 ? "CPU" : "wall", t_encode > 0 ? (double)n_bytes / t_encode / 1e6 : 0.0);

done:
    if (writer_started) { /* error path: stop the writer and wait for it */
        handoff_stop(&wr.h);
        pthread_join(writer_thread, NULL);
    }
    if (wr_inited)
        handoff_destroy(&wr.h);
    if (reader_started) { /* error path: stop the reader and wait for it */
        handoff_stop(&pl.h);
        pthread_join(reader_thread, NULL);
    }
    if (pl_inited)
        handoff_destroy(&pl.h);
    for (int k = 0; k < 2; k++) {
        free(pl.slot[k].arena);
        free(pl.slot[k].offs);
    }
    if (out.f && out.f != stdout) {
        if (fclose(out.f) != 0 && rc == EXIT_OK) {
            cli_error(cmd, "cannot write '%s': %s", out.path, strerror(errno));
            rc = EXIT_BAD_INPUT;
        }
    } else if (out.f == stdout) {
        fflush(stdout);
    }
    free(out.buf);
    if (ids)
        for (long i = 0; i < 2 * batch_docs; i++)
            tk_ids_free(&ids[i]);
    free(ids);
    free(spans);
    free(allowed);
    free(allow_copy);
    if (rd)
        ds_reader_free(rd);
    if (tok)
        tk_free(tok);
    free(inputs);
    return rc;
}
