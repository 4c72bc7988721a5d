/* cmd_encode.c - mkshards encode: documents -> one JSON array of token ids per
 * line. ds_encode (dataset/encode.c) runs the pipeline; this file has the
 * options, the id formatter (the sink, on ds_encode's writer thread),
 * messages and exit codes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_chat.h"
#include "ds.h"
#include "tk.h"

static const char k_usage[] =
    "Usage: mkshards encode --tokenizer T [options] [INPUT...] --ids-out FILE\n"
    "\n"
    "Encodes every document of the inputs and writes one line per document: a JSON\n"
    "array of token ids, e.g. [464,3290,13], in input order.\n"
    "\n"
    "Inputs: .txt, .jsonl, either + .zst or .gz, folders (recursive, sorted), or - for stdin\n"
    "(default when no input is given).\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T        .tiktoken file, tokenizer.json, SentencePiece .model (BPE/Unigram),\n"
    "                           folder with encoder.json + vocab.bpe, or a name: gpt2,\n"
    "                           r50k_base, cl100k_base, o200k_base\n"
    "                           (names are looked up in $MKS_VOCAB_DIR)        [required]\n"
    "  -i, --input FILE         an input (repeatable; positional INPUTs work too)\n"
    "  -f, --field NAME         JSONL text field, dotted path for nested objects (default: text)\n"
    "  -j, --threads N          encoder threads, 0..4096 (default 0: all cores)\n"
    "  -p, --pattern P          pre-tokenizer pattern: gpt2, cl100k, o200k, or a regex in\n"
    "                           tiktoken's syntax for a rank file (default: the one the\n"
    "                           vocabulary implies)\n"
    "      --normalize N        a rank file's text normalization: none (default), nfc, nfkc\n"
    "      --allow-special S    map special-token text to special ids: 'all' or a comma list\n"
    "                           such as '<|endoftext|>' (default: none, specials are ordinary text)\n"
    "      --doc-sep MODE       for .txt inputs: file (default), line or blank-line\n"
    "      --bos TOKEN|default  put this token (its text) before every document; default: the\n"
    "                           tokenizer's framing, as `build` uses (default: none)\n"
    "      --eos TOKEN|default  the same after every document (default: none)\n" CLI_CHAT_HELP
    "      --mask-out FILE      chat formats: one line per document, the loss mask as a JSON\n"
    "                           array of 0/1, one per id of the --ids-out line\n"
    "  -o, --ids-out FILE       output file, - for stdout   [required]\n"
    "      --batch-bytes SIZE   text per encode batch, 1..1T (default 256K with one thread, else 2M)\n"
    "      --batch-docs N       documents per encode batch, 1..16777216 (default 4096)\n"
    "      --stats              print docs, bytes, tokens, MB/s and the time spent encoding\n"
    "                           alone (reading and writing excluded) to stderr at the end\n"
    "  -h, --help               show this help\n"
    "\n"
    "Records the reader cannot use (bad JSON, missing field, ...) and documents the\n"
    "tokenizer refuses (tokenizer-limit: over its regex work budget or a normalizer's\n"
    "output bound, docs/tokenizer.md) are reported on stderr with file:line and skipped;\n"
    "the other documents' lines are written as if they were not there.\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input or file (or nothing could be read; or --ids-out is an\n"
    "input, lies inside an input folder or is the tokenizer: refused before writing),\n"
    "64 usage error.\n"
    "\n"
    "Example:\n"
    "  mkshards encode -t cl100k_base samples/tiny.jsonl --ids-out tiny.ids --stats\n";

enum {
    OPT_ALLOW_SPECIAL = 1000,
    OPT_DOC_SEP,
    OPT_STATS,
    OPT_BATCH_BYTES,
    OPT_BATCH_DOCS,
    OPT_BOS,
    OPT_EOS,
    OPT_MASK_OUT,
    OPT_NORMALIZE
};

static const struct option k_opts[] = {{"tokenizer", required_argument, 0, 't'},
                                       {"input", required_argument, 0, 'i'},
                                       {"field", required_argument, 0, 'f'},
                                       {"threads", required_argument, 0, 'j'},
                                       {"pattern", required_argument, 0, 'p'},
                                       {"normalize", required_argument, 0, OPT_NORMALIZE},
                                       {"allow-special", required_argument, 0, OPT_ALLOW_SPECIAL},
                                       {"doc-sep", required_argument, 0, OPT_DOC_SEP},
                                       {"ids-out", required_argument, 0, 'o'},
                                       {"batch-bytes", required_argument, 0, OPT_BATCH_BYTES},
                                       {"batch-docs", required_argument, 0, OPT_BATCH_DOCS},
                                       {"stats", no_argument, 0, OPT_STATS},
                                       {"bos", required_argument, 0, OPT_BOS},
                                       {"eos", required_argument, 0, OPT_EOS},
                                       CLI_CHAT_LONGOPTS,
                                       {"mask-out", required_argument, 0, OPT_MASK_OUT},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};

static const char *rec_status_name(ds_rec_status s) {
    switch (s) {
    case DS_REC_OK: return "ok";
    case DS_REC_BAD_JSON: return "malformed JSON line";
    case DS_REC_MISSING_FIELD: return "text field missing";
    case DS_REC_NOT_STRING: return "text field is not a string";
    case DS_REC_OVERLONG: return "record longer than the reader's limit";
    case DS_REC_ZSTD_ERROR: return "zstd stream truncated or corrupt (rest of file ignored)";
    case DS_REC_TOKENIZER: return "tokenizer-limit";
    case DS_REC_CHAT: return "chat record refused";
    }
    return "unusable record";
}

/* ---- output buffer */
typedef struct {
    char *buf;
    size_t len, cap;
    FILE *f;
    const char *path;
    int failed;
} outbuf;

static int out_flush(outbuf *o) {
    if (o->len && !o->failed && fwrite(o->buf, 1, o->len, o->f) != o->len) o->failed = errno ? errno : EIO;
    o->len = 0;
    return o->failed ? -1 : 0;
}

/* Make room for `need` more bytes (flushing first when over the soft limit). */
static int out_reserve(outbuf *o, size_t need) {
    if (o->len + need <= o->cap) return 0;
    if (out_flush(o)) return -1;
    if (need > o->cap) {
        char *nb = realloc(o->buf, need);
        if (!nb) return -1;
        o->buf = nb;
        o->cap = need;
    }
    return 0;
}

static int write_ids(outbuf *o, const tk_ids *v) {
    /* worst case: 20 digits + ',' per id, "[]\n"; a block at a time so the
     * inner loop keeps its pointers in registers */
    const size_t block = 8192; /* 172 KiB of buffer at most: fewer first-touch page faults than 64 K ids */
    const uint32_t *ids = v->ids;
    size_t n = v->len;
    if (out_reserve(o, 3 + (n < block ? n : block) * 21)) return -1;
    o->buf[o->len++] = '[';
    for (size_t i = 0; i < n;) {
        size_t m = n - i < block ? n - i : block;
        if (out_reserve(o, 3 + m * 21)) return -1;
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

/* ---- the sink: ids -> "[1,2,3]\n" lines */
typedef struct {
    outbuf out;
    const char *out_path;
    int sink_failed, open_failed;
    outbuf mask; /* --mask-out */
    const char *mask_path;
} encode_cli;

static int open_output(void *user) {
    encode_cli *c = user;
    if (!strcmp(c->out_path, "-")) {
        c->out.f = stdout;
        c->out.path = "stdout";
        return 0;
    }
    c->out.f = fopen(c->out_path, "wb");
    c->out.path = c->out_path;
    if (!c->out.f) {
        cli_error("encode", "cannot create --ids-out '%s': %s", c->out_path, strerror(errno));
        c->open_failed = 1;
        return -1;
    }
    return 0;
}

/* --mask-out: the mask of the document whose ids come next, as "[0,1,1]\n" */
static int sink_mask(const uint8_t *mask, size_t n, void *user) {
    encode_cli *c = user;
    if (!c->mask.f) return 0;
    if (out_reserve(&c->mask, 2 * n + 3)) {
        c->sink_failed = 1;
        return -1;
    }
    char *p = c->mask.buf + c->mask.len;
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (i) *p++ = ',';
        *p++ = mask[i] ? '1' : '0';
    }
    *p++ = ']';
    *p++ = '\n';
    c->mask.len = (size_t)(p - c->mask.buf);
    return 0;
}

static int sink_ids(const uint32_t *ids, size_t n, void *user) {
    encode_cli *c = user;
    tk_ids v = {.ids = (uint32_t *)ids, .len = n, .cap = n};
    if (write_ids(&c->out, &v)) {
        c->sink_failed = 1;
        return -1;
    }
    return 0;
}

static void on_skipped(const ds_record *rec, void *user) {
    (void)user;
    if (rec->status == DS_REC_TOKENIZER ||
        rec->status == DS_REC_CHAT) /* the rule id and why, as lint and build's rejects.jsonl say it */
        cli_warn("encode", "%s:%llu: %s: %s; record skipped", rec->file ? rec->file : "?",
                 (unsigned long long)rec->line, rec_status_name(rec->status), rec->detail ? rec->detail : "");
    else
        cli_warn("encode", "%s:%llu: %s; record skipped", rec->file ? rec->file : "?", (unsigned long long)rec->line,
                 rec_status_name(rec->status));
}

/* --allow-special: "all" or a comma list of the tokenizer's special tokens.
 * EXIT_OK or the exit code after a message. */
static int parse_allowed(const char *cmd, const tk_tokenizer *tok, const char *allow, ds_encode_opts *o,
                         char **copy_out, const char ***list_out) {
    o->use_special = 1;
    if (!strcmp(allow, "all")) {
        o->allowed = NULL;
        o->n_allowed = (size_t)-1;
        return EXIT_OK;
    }
    char *copy = *copy_out = strdup(allow);
    const char **allowed = *list_out = calloc(strlen(allow) + 1, sizeof *allowed);
    if (!copy || !allowed) {
        cli_error(cmd, "out of memory");
        return EXIT_BAD_INPUT;
    }
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        uint32_t id;
        if (tk_special_id(tok, t, &id) != TK_OK) {
            char list[1024] = "", shown[200];
            size_t ns = tk_n_specials(tok);
            const tk_special *sp = tk_specials(tok);
            for (size_t k = 0; k < ns; k++) { /* escaped: a hostile file's ESC bytes */
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", k ? ", " : "",
                         tk_escape_text(sp[k].text, strlen(sp[k].text), shown, sizeof shown));
            }
            return cli_usage_error(cmd, "'%s' is not a special token of %s (its specials: %s)", t, tk_name(tok),
                                   ns ? list : "none");
        }
        allowed[n++] = t;
    }
    o->allowed = allowed;
    o->n_allowed = n;
    return EXIT_OK;
}

typedef struct {
    const char *spec, *pattern, *normalize, *allow, *out_path, *bos, *eos, *chat_template, *mask_out;
    int stats;
    cli_chat_args chat; /* --format, --chat-template, --messages-field, --loss-on */
    const char **inputs;
    size_t n_inputs;
} encode_args;

/* Options into o / a. EXIT_OK, -1 after --help, or the usage exit code. */
static int parse_args(int argc, char **argv, ds_encode_opts *o, encode_args *a) {
    const char *cmd = "encode";
    long threads = 0, batch_docs = 4096;
    int c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":t:i:f:j:p:o:h", k_opts)) != -1) {
        switch (c) {
        case 't': a->spec = optarg; break;
        case 'i': a->inputs[a->n_inputs++] = optarg; break;
        case 'f': o->field = optarg; break;
        case 'j':
            if (cli_parse_long(cmd, "--threads", optarg, 0, 4096, &threads)) return EXIT_USAGE;
            break;
        case 'p': a->pattern = optarg; break;
        case OPT_NORMALIZE: a->normalize = optarg; break;
        case 'o': a->out_path = optarg; break;
        case OPT_ALLOW_SPECIAL: a->allow = optarg; break;
        case OPT_DOC_SEP:
            if (ds_doc_sep_parse(optarg, &o->doc_sep)) {
                char names[64];
                return cli_usage_error(cmd, "--doc-sep expects %s, got '%s'",
                                       ds_names_list(ds_doc_sep_name, names, sizeof names), optarg);
            }
            break;
        case OPT_BATCH_BYTES:
            if (cli_parse_size(cmd, "--batch-bytes", optarg, 1, 1ull << 40, &o->batch_bytes)) return EXIT_USAGE;
            break;
        case OPT_BATCH_DOCS:
            if (cli_parse_long(cmd, "--batch-docs", optarg, 1, 1L << 24, &batch_docs)) return EXIT_USAGE;
            break;
        case OPT_STATS: a->stats = 1; break;
        case OPT_BOS: a->bos = optarg; break;
        case OPT_EOS: a->eos = optarg; break;
        case OPT_MASK_OUT: a->mask_out = optarg; break;
        case 'h': fputs(k_usage, stdout); return -1;
        default: {
            int taken = cli_chat_option(cmd, c, optarg, &a->chat);
            if (taken == 1) break;
            return EXIT_USAGE; /* a bad value (its message printed), or cli_getopt's own message */
        }
        }
    }
    o->format = a->chat.format;
    o->messages_field = a->chat.messages_field;
    o->loss_on = a->chat.loss_on;
    a->chat_template = a->chat.chat_template;
    for (int i = optind; i < argc; i++) a->inputs[a->n_inputs++] = argv[i];
    if (!a->spec)
        return cli_usage_error(cmd, "--tokenizer is required (a .tiktoken file or a name such as cl100k_base)");
    if (!a->out_path) return cli_usage_error(cmd, "--ids-out is required (a file, or - for stdout)");
    if (a->n_inputs == 0) a->inputs[a->n_inputs++] = "-";
    if (o->format == DS_FMT_TEXT && a->mask_out)
        return cli_usage_error(cmd, "--mask-out needs --format chat, prompt-completion or auto");
    if (cli_chat_check(cmd, &a->chat) != EXIT_OK) return EXIT_USAGE;
    if (o->format != DS_FMT_TEXT && (a->allow || a->bos || a->eos))
        return cli_usage_error(cmd, "--allow-special, --bos and --eos are for --format text: a chat template "
                                    "places its own special tokens");
    o->threads = threads <= 0 ? cli_ncpus() : (int)threads;
    o->batch_docs = (size_t)batch_docs;
    return EXIT_OK;
}

/* After ds_encode: its status, the output's last bytes, the skip count and --stats. */
static int report(const char *cmd, int erc, const char *err, encode_cli *c, const ds_encode_result *r,
                  const encode_args *a, const ds_encode_opts *o, const tk_tokenizer *tok, double t0) {
    outbuf *out = &c->out;
    if (erc != DS_OK) {
        if (c->sink_failed)
            cli_error(cmd, "cannot write '%s': %s", out->path, strerror(out->failed ? out->failed : ENOMEM));
        else if (!c->open_failed) /* open_output printed its own message */
            cli_error(cmd, "%s", err[0] ? err : ds_strerror(erc));
        return EXIT_BAD_INPUT;
    }
    if (out_flush(out) || fflush(out->f) != 0 || ferror(out->f)) {
        cli_error(cmd, "cannot write '%s': %s", out->path, strerror(out->failed ? out->failed : errno));
        return EXIT_BAD_INPUT;
    }
    double dt = cli_now() - t0;
    int rc = EXIT_OK;
    if (r->docs == 0 && r->skipped > 0) {
        cli_error(cmd, "no usable document in the input (%llu records skipped; see the warnings above)",
                  (unsigned long long)r->skipped);
        rc = EXIT_BAD_INPUT;
    } else if (r->skipped > 0) {
        cli_warn(cmd, "%llu record(s) skipped", (unsigned long long)r->skipped);
    }
    if (a->stats)
        fprintf(stderr,
                "mkshards encode: %llu docs, %llu bytes, %llu tokens, %.1f bytes/token, %.2f s, %.1f MB/s, "
                "%d threads, %s; encoding alone %.4f s (%s), %.1f MB/s\n",
                (unsigned long long)r->docs, (unsigned long long)r->bytes, (unsigned long long)r->tokens,
                r->tokens ? (double)r->bytes / (double)r->tokens : 0.0, dt, dt > 0 ? (double)r->bytes / dt / 1e6 : 0.0,
                o->threads, tk_name(tok), r->encode_seconds, o->threads == 1 ? "CPU" : "wall",
                r->encode_seconds > 0 ? (double)r->bytes / r->encode_seconds / 1e6 : 0.0);
    return rc;
}

int cmd_encode(int argc, char **argv) {
    const char *cmd = "encode";
    ds_encode_opts o;
    ds_encode_opts_init(&o);
    encode_args a = {0};
    cli_chat_init(&a.chat);
    a.inputs = calloc((size_t)argc + 1, sizeof *a.inputs);
    if (!a.inputs) {
        cli_error(cmd, "out of memory");
        return EXIT_BAD_INPUT;
    }
    int rc = parse_args(argc, argv, &o, &a);
    /* before the output is created (fopen "wb" truncates): it must be
     * neither an input, nor inside an input folder, nor the tokenizer */
    if (rc == EXIT_OK && (cli_refuse_overwrite(cmd, "--ids-out", a.out_path, "the input", a.inputs, a.n_inputs) ||
                          cli_refuse_overwrite_tokenizer(cmd, "--ids-out", a.out_path, a.spec) ||
                          cli_refuse_overwrite(cmd, "--mask-out", a.mask_out, "the input", a.inputs, a.n_inputs) ||
                          cli_refuse_overwrite_tokenizer(cmd, "--mask-out", a.mask_out, a.spec)))
        rc = EXIT_BAD_INPUT;
    if (rc != EXIT_OK) {
        free(a.inputs);
        return rc < 0 ? EXIT_OK : rc; /* -1: --help */
    }
    tk_tokenizer *tok = NULL;
    char *allow_copy = NULL;
    const char **allowed = NULL;
    encode_cli c = {.out_path = a.out_path};
    rc = cli_load_tokenizer_opts(a.spec, a.pattern, a.normalize, &tok);
    if (rc == EXIT_OK && a.allow) rc = parse_allowed(cmd, tok, a.allow, &o, &allow_copy, &allowed);
    if (rc == EXIT_OK && a.bos) rc = cli_frame_token(cmd, "--bos", tok, a.bos, &o.bos_id);
    if (rc == EXIT_OK && a.eos) rc = cli_frame_token(cmd, "--eos", tok, a.eos, &o.eos_id);
    const ds_chat_template *tmpl = NULL;
    if (rc == EXIT_OK) rc = cli_chat_template(cmd, &a.chat, a.spec, &tmpl);
    o.chat_template = tmpl;
    if (rc == EXIT_OK && a.mask_out) {
        if (a.out_path && !strcmp(a.out_path, a.mask_out) && strcmp(a.mask_out, "-")) {
            rc = cli_usage_error(cmd, "--mask-out and --ids-out are the same file");
        } else if (!strcmp(a.mask_out, "-")) {
            c.mask.f = stdout;
            c.mask.path = "stdout";
        } else if (!(c.mask.f = fopen(a.mask_out, "wb"))) {
            cli_error(cmd, "cannot create --mask-out '%s': %s", a.mask_out, strerror(errno));
            rc = EXIT_BAD_INPUT;
        } else {
            c.mask.path = a.mask_out;
        }
        c.mask.cap = 1u << 17;
        if (rc == EXIT_OK && !(c.mask.buf = malloc(c.mask.cap))) {
            cli_error(cmd, "out of memory");
            rc = EXIT_BAD_INPUT;
        }
        o.sink_mask = sink_mask;
    }
    c.out.cap = 1u << 17; /* written out when full: a bigger buffer only adds first-touch page faults */
    if (rc == EXIT_OK && !(c.out.buf = malloc(c.out.cap))) {
        cli_error(cmd, "out of memory");
        rc = EXIT_BAD_INPUT;
    }
    if (rc == EXIT_OK) {
        o.tok = tok;
        o.inputs = a.inputs;
        o.n_inputs = a.n_inputs;
        o.begin = open_output;
        o.sink = sink_ids;
        o.skipped = on_skipped;
        o.user = &c;
        ds_encode_result r;
        char err[9000];
        double t0 = cli_now();
        int erc = ds_encode(&o, &r, err, sizeof err);
        rc = report(cmd, erc, err, &c, &r, &a, &o, tok, t0);
        if (c.mask.f && (out_flush(&c.mask) || fflush(c.mask.f) != 0 || ferror(c.mask.f)) && rc == EXIT_OK) {
            cli_error(cmd, "cannot write '%s': %s", c.mask.path, strerror(c.mask.failed ? c.mask.failed : errno));
            rc = EXIT_BAD_INPUT;
        }
    }
    if (c.mask.f && c.mask.f != stdout && fclose(c.mask.f) != 0 && rc == EXIT_OK) {
        cli_error(cmd, "cannot write '%s': %s", c.mask.path, strerror(errno));
        rc = EXIT_BAD_INPUT;
    }
    free(c.mask.buf);
    if (c.out.f && c.out.f != stdout) {
        if (fclose(c.out.f) != 0 && rc == EXIT_OK) {
            cli_error(cmd, "cannot write '%s': %s", c.out.path, strerror(errno));
            rc = EXIT_BAD_INPUT;
        }
    } else if (c.out.f == stdout) {
        fflush(stdout);
    }
    free(c.out.buf);
    free(allowed);
    free(allow_copy);
    if (tok) tk_free(tok);
    free(a.inputs);
    return rc;
}
