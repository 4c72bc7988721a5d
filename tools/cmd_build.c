/* cmd_build.c - mkshards build: options, messages and exit codes around
 * ds_build (dataset/build.c: the pipeline, packers, resume, manifest).
 * Format: docs/shard-format.md. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_chat.h"
#include "ds.h"
#include "mks_env.h"
#include "tk.h"

static const char k_usage[] =
    "Usage: mkshards build --tokenizer T --seq-len L --out DIR [options] INPUT...\n"
    "\n"
    "Tokenizes the inputs and writes fixed-length rows of L tokens into shards\n"
    "(DIR/train-NNNNN.mks, DIR/val-NNNNN.mks), DIR/rejects.jsonl and, last,\n"
    "DIR/manifest.json. Format: docs/shard-format.md.\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T       .tiktoken file, tokenizer.json, SentencePiece .model (BPE/Unigram), or a\n"
    "                          name (gpt2, cl100k_base, o200k_base; looked up in\n"
    "                          $MKS_VOCAB_DIR)                                     [required]\n"
    "  -p, --pattern P         a rank file's pre-tokenizer: gpt2, cl100k, o200k or a regex in\n"
    "                          tiktoken's syntax (default: the one the vocabulary implies)\n"
    "      --normalize N       a rank file's text normalization before it: none (default), nfc\n"
    "                          or nfkc (Qwen v1's qwen.tiktoken: its regex and nfc)\n"
    "  -L, --seq-len L         tokens per row, 1..16777216                         [required]\n"
    "  -o, --out DIR           output directory (created)                          [required]\n"
    "  -j, --threads N         worker threads, 0..256 (default 0: all cores); output is byte-identical\n"
    "                          for any N\n"
    "      --pack P            concat (default): documents joined with EOT, cut into rows;\n"
    "                          bfd: documents cut into pieces of <= L, best-fit-decreasing\n"
    "                          packed within a window; none: one document per row, padded\n"
    "      --over-long M       --pack none: truncate (default), chunk or drop documents\n"
    "                          longer than L (document + EOT). Chat formats, every --pack:\n"
    "                          truncate (cut the last assistant message), drop, drop-turns\n"
    "                          (drop the oldest turns after the system message until it\n"
    "                          fits) or chunk (leave it to the packer); a sample left without\n"
    "                          a target token is dropped (rejects.jsonl: no-loss-tokens)\n"
    "      --bfd-window R      rows per BFD packing window, 1..16777216 (default 1024);\n"
    "                          R x L must stay below 2^31\n"
    "      --val-fraction F    fraction of documents for validation, by document hash,\n"
    "                          0 <= F < 1 (default 0)\n"
    "      --seed S            seed of the per-shard row shuffle, 0..2^64-1 (default 0)\n"
    "      --no-shuffle        keep rows in packing order\n"
    "      --shard-tokens N    target tokens per shard, K/M/G suffixes (default 32M)\n"
    "      --zstd LEVEL        compress rows in independent zstd frames, 0..22 (0 = off, default)\n"
    "      --frame-rows N      rows per zstd frame, 1..1048576 (default 64)\n"
    "  -f, --field NAME        JSONL text field (default: text)\n" CLI_CHAT_HELP
    "                          Chat formats write the loss mask into the shards (version 2;\n"
    "                          docs/shard-format.md), no BOS/EOS framing unless --bos/--eos\n"
    "      --doc-sep MODE      .txt inputs: file (default), line or blank-line\n"
    "      --part K/N          build the K-th of N partitions of the input files\n"
    "                          (1 <= K <= N <= 1000000); --part auto: K/N from the\n"
    "                          launcher (mpirun, srun, sbatch --array; docs/cluster.md)\n"
    "      --batch-bytes SIZE  text read per batch, 1..1T (default 32M)\n"
    "      --resume            finish an interrupted build from its last checkpoint\n"
    "                          (running the same command again does the same)\n"
    "      --bos TOKEN|none    token put before every document (its text, e.g. <|begin_of_text|>)\n"
    "      --eos TOKEN|none    token put after every document (e.g. <|end_of_text|>); default for\n"
    "                          both: the tokenizer's framing (tokenizer.json: its post_processor,\n"
    "                          else the model family's tokens; .tiktoken: <|endoftext|> after)\n"
    "      --force             overwrite DIR even if it holds a build with another config\n"
    "                          (never when DIR is, or lies inside, an input folder)\n"
    "  -q, --quiet             no progress line\n"
    "  -h, --help              show this help\n"
    "\n"
    "Records with lint errors (bad JSON, missing field, invalid UTF-8, NUL bytes, zstd\n"
    "damage, oversized records) are rejected and listed in DIR/rejects.jsonl with file,\n"
    "line and reason, as are documents dropped by --over-long drop.\n"
    "\n"
    "DIR is locked (DIR/.lock) for the whole build: a second build or merge into DIR\n"
    "fails at once. An existing DIR is \"complete and up to date\" only when its manifest\n"
    "has the same configuration and every shard passes the checks of `mkshards verify`\n"
    "(file checksum, size and rows against the manifest); otherwise it is rebuilt.\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input or output error (also: no row could be written because\n"
    "every record was rejected or dropped; --out is, holds or lies inside an input; DIR is\n"
    "locked by another build), 64 usage error (every one with a message).\n"
    "\n"
    "Example:\n"
    "  mkshards build -t gpt2 -L 1024 --val-fraction 0.01 -o shards/ corpus/*.jsonl.zst\n";

enum {
    OPT_PACK = 1000,
    OPT_OVERLONG,
    OPT_BFD_WINDOW,
    OPT_VAL,
    OPT_SEED,
    OPT_NO_SHUFFLE,
    OPT_SHARD_TOKENS,
    OPT_ZSTD,
    OPT_FRAME_ROWS,
    OPT_DOC_SEP,
    OPT_PART,
    OPT_RESUME,
    OPT_FORCE,
    OPT_BATCH_BYTES,
    OPT_BOS,
    OPT_EOS,
    OPT_NORMALIZE
};

static const struct option k_opts[] = {{"tokenizer", required_argument, 0, 't'},
                                       {"pattern", required_argument, 0, 'p'},
                                       {"normalize", required_argument, 0, OPT_NORMALIZE},
                                       {"seq-len", required_argument, 0, 'L'},
                                       {"out", required_argument, 0, 'o'},
                                       {"threads", required_argument, 0, 'j'},
                                       {"pack", required_argument, 0, OPT_PACK},
                                       {"over-long", required_argument, 0, OPT_OVERLONG},
                                       {"bfd-window", required_argument, 0, OPT_BFD_WINDOW},
                                       {"val-fraction", required_argument, 0, OPT_VAL},
                                       {"seed", required_argument, 0, OPT_SEED},
                                       {"no-shuffle", no_argument, 0, OPT_NO_SHUFFLE},
                                       {"shard-tokens", required_argument, 0, OPT_SHARD_TOKENS},
                                       {"zstd", required_argument, 0, OPT_ZSTD},
                                       {"frame-rows", required_argument, 0, OPT_FRAME_ROWS},
                                       {"field", required_argument, 0, 'f'},
                                       {"doc-sep", required_argument, 0, OPT_DOC_SEP},
                                       {"part", required_argument, 0, OPT_PART},
                                       {"resume", no_argument, 0, OPT_RESUME},
                                       {"force", no_argument, 0, OPT_FORCE},
                                       {"batch-bytes", required_argument, 0, OPT_BATCH_BYTES},
                                       {"bos", required_argument, 0, OPT_BOS},
                                       {"eos", required_argument, 0, OPT_EOS},
                                       CLI_CHAT_LONGOPTS,
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};

static const char *CMD = "build";

typedef struct {
    ds_build_opts o;
    const char *spec;
    const char *pattern, *normalize; /* --pattern / --normalize as given */
    const char *bos, *eos;           /* --bos / --eos as given */
    cli_chat_args chat;              /* --format, --chat-template, --messages-field, --loss-on */
    int quiet, ol_given;
    char **inputs;
    size_t n_inputs;
    /* progress line */
    int progress, drawn;
    double last_prog;
} build_cli;

/* Options into c->o. EXIT_OK, or the exit code after a usage message (or -h). */
static int parse_args(build_cli *c, int argc, char **argv) {
    ds_build_opts *o = &c->o;
    long seq_len = 0, threads = 0, frame_rows = 64, zstd_level = 0, part_k = 1, part_n = 1;
    int ch;
    char names[64]; /* an enum's names, for a usage message */
    cli_getopt_reset();
    while ((ch = cli_getopt(argc, argv, CMD, ":t:p:L:o:j:f:qh", k_opts)) != -1) {
        switch (ch) {
        case 't': c->spec = optarg; break;
        case 'p': c->pattern = optarg; break;
        case OPT_NORMALIZE: c->normalize = optarg; break;
        case 'L':
            if (cli_parse_long(CMD, "--seq-len", optarg, 1, 1L << 24, &seq_len)) return EXIT_USAGE;
            break;
        case 'o': o->out_dir = optarg; break;
        case 'j':
            if (cli_parse_long(CMD, "--threads", optarg, 0, 256, &threads)) return EXIT_USAGE;
            break;
        case 'f': o->field = optarg; break;
        case 'q': c->quiet = 1; break;
        case OPT_PACK:
            if (ds_pack_parse(optarg, &o->pack))
                return cli_usage_error(CMD, "--pack expects %s, got '%s'",
                                       ds_names_list(ds_pack_name, names, sizeof names), optarg);
            break;
        case OPT_OVERLONG:
            if (ds_over_long_parse(optarg, &o->over_long))
                return cli_usage_error(CMD, "--over-long expects %s, got '%s'",
                                       ds_names_list(ds_over_long_name, names, sizeof names), optarg);
            c->ol_given = 1;
            break;
        case OPT_BFD_WINDOW:
            if (cli_parse_u64(CMD, "--bfd-window", optarg, 1, 1u << 24, &o->bfd_window)) return EXIT_USAGE;
            break;
        case OPT_VAL:
            /* 1 would send every document to validation and leave no training rows */
            if (cli_parse_double(CMD, "--val-fraction", optarg, 0, 0, 1, 1, &o->val_fraction)) return EXIT_USAGE;
            break;
        case OPT_SEED:
            if (cli_parse_u64(CMD, "--seed", optarg, 0, UINT64_MAX, &o->seed)) return EXIT_USAGE;
            break;
        case OPT_NO_SHUFFLE: o->shuffle = 0; break;
        case OPT_SHARD_TOKENS:
            if (cli_parse_size(CMD, "--shard-tokens", optarg, 1, 1ull << 40, &o->shard_tokens)) return EXIT_USAGE;
            break;
        case OPT_ZSTD:
            if (cli_parse_long(CMD, "--zstd", optarg, 0, 22, &zstd_level)) return EXIT_USAGE;
            break;
        case OPT_FRAME_ROWS:
            if (cli_parse_long(CMD, "--frame-rows", optarg, 1, 1L << 20, &frame_rows)) return EXIT_USAGE;
            break;
        case OPT_DOC_SEP:
            if (ds_doc_sep_parse(optarg, &o->doc_sep))
                return cli_usage_error(CMD, "--doc-sep expects %s, got '%s'",
                                       ds_names_list(ds_doc_sep_name, names, sizeof names), optarg);
            break;
        case OPT_PART:
            if (!strcmp(optarg, "auto")) { /* K/N from mpirun / srun / a Slurm array (docs/cluster.md) */
                uint32_t k, n;
                char src[512], e[512];
                if (ds_part_from_env(&k, &n, src, sizeof src, e, sizeof e)) return cli_usage_error(CMD, "%s", e);
                fprintf(stderr, "%s: --part auto: part %u/%u (%s)\n", CMD, k, n, src);
                part_k = k;
                part_n = n;
            } else if (cli_parse_part(CMD, "--part", optarg, DS_BUILD_MAX_PARTS, &part_k, &part_n)) return EXIT_USAGE;
            break;
        case OPT_RESUME: break; /* resuming is what every run does */
        case OPT_FORCE: o->force = 1; break;
        case OPT_BATCH_BYTES:
            if (cli_parse_size(CMD, "--batch-bytes", optarg, 1, 1ull << 40, &o->batch_bytes)) return EXIT_USAGE;
            break;
        case OPT_BOS: c->bos = optarg; break;
        case OPT_EOS: c->eos = optarg; break;
        case 'h': fputs(k_usage, stdout); return -1;
        default:
            if (cli_chat_option(CMD, ch, optarg, &c->chat) == 1) break;
            return EXIT_USAGE; /* a bad value (its message printed), or cli_getopt's own message */
        }
    }
    for (int i = optind; i < argc; i++) c->inputs[c->n_inputs++] = argv[i];
    o->format = c->chat.format;
    o->messages_field = c->chat.messages_field;
    o->loss_on = c->chat.loss_on;
    o->seq_len = (uint32_t)seq_len;
    o->threads = (int)threads;
    o->zstd_level = (int)zstd_level;
    o->frame_rows = (uint32_t)frame_rows;
    o->part_k = (uint32_t)part_k;
    o->part_n = (uint32_t)part_n;
    return EXIT_OK;
}

/* What parse_args cannot see option by option. */
static int check_args(build_cli *c) {
    if (!c->spec) return cli_usage_error(CMD, "--tokenizer is required (a .tiktoken file or a name such as gpt2)");
    if (!c->o.seq_len) return cli_usage_error(CMD, "--seq-len is required (tokens per row, e.g. 1024)");
    if (!c->o.out_dir) return cli_usage_error(CMD, "--out is required (the output folder)");
    if (!c->n_inputs) return cli_usage_error(CMD, "no INPUT given (files, folders, or - for stdin)");
    if (c->o.threads <= 0) c->o.threads = cli_ncpus();
    if (c->o.bfd_window * (uint64_t)c->o.seq_len >= (1ull << 31))
        return cli_usage_error(CMD, "--bfd-window x --seq-len must stay below 2^31 tokens");
    if (cli_chat_check(CMD, &c->chat) != EXIT_OK) return EXIT_USAGE;
    if (c->o.over_long == DS_OL_DROP_TURNS && c->o.format == DS_FMT_TEXT)
        return cli_usage_error(CMD, "--over-long drop-turns needs --format chat, prompt-completion or auto");
    if (c->ol_given && c->o.pack != DS_PACK_NONE && c->o.format == DS_FMT_TEXT)
        cli_warn(CMD, "--over-long applies to --pack none only (concat keeps every token; bfd chunks)");
    const char *e = mks_getenv("MKS_CHECKPOINT_SECONDS"); /* tests: 0 = at every batch that wrote a shard */
    if (e && *e) {
        double v = atof(e);
        c->o.checkpoint_seconds = v >= 0 && v < 1e9 ? v : 0.5;
    }
    return EXIT_OK;
}

/* ds_build's notices and the progress line (docs, MB, tokens, MB/s, ETA; on a terminal only). */
static int on_event(const ds_build_event *ev, void *user) {
    build_cli *c = user;
    switch (ev->kind) {
    case DS_BUILD_EV_REBUILD:
        if (!c->quiet)
            fprintf(stderr, "mkshards build: the previous build in %s fails verification (%s); building again\n",
                    c->o.out_dir, ev->detail);
        break;
    case DS_BUILD_EV_RESUME:
        if (!c->quiet)
            fprintf(stderr, "mkshards build: resuming after %" PRIu64 " records (%zu shards already written)\n",
                    ev->records, ev->shards);
        break;
    case DS_BUILD_EV_CKPT_FAILED:
        cli_warn(CMD, "cannot write the checkpoint %s/build.ckpt (the build goes on)", c->o.out_dir);
        break;
    case DS_BUILD_EV_PROGRESS: {
        double now = cli_now();
        if (!c->progress || !(now - c->last_prog > 0.5 || ev->last)) break;
        double mb = (double)ev->bytes_in / 1e6, dt = ev->seconds, rate = dt > 0 ? mb / dt : 0;
        double left = ev->est_bytes > ev->bytes_in ? (double)(ev->est_bytes - ev->bytes_in) / 1e6 : 0;
        double eta = rate > 0 ? left / rate : 0;
        fprintf(stderr, "\r  %" PRIu64 " docs  %.1f MB  %" PRIu64 " tokens  %.1f MB/s  ETA %d:%02d   ", ev->records, mb,
                ev->tokens, rate, (int)eta / 60, (int)eta % 60);
        if (ev->last) fputc('\n', stderr);
        c->last_prog = now;
        break;
    }
    }
    return 0;
}

static void print_summary(const build_cli *c, const ds_build_result *r) {
    const ds_build_account *a = &r->acc;
    double dt = r->seconds;
    uint64_t written = a->tok_whole + a->tok_trunc_kept + a->tok_chunked + a->eot + a->bos;
    uint64_t cells = (a->rows[0] + a->rows[1]) * (uint64_t)c->o.seq_len;
    fprintf(stderr,
            "mkshards build: %" PRIu64 " docs (%" PRIu64 " whole, %" PRIu64 " truncated, %" PRIu64 " chunked, %" PRIu64
            " dropped, %" PRIu64 " rejected), %" PRIu64 " rows (%" PRIu64 " train, %" PRIu64 " val) in %" PRIu64
            " shard(s), utilisation %.4f, %.1f MB in %.2f s (%.1f MB/s)\n",
            a->records, a->docs_whole, a->docs_truncated, a->docs_chunked, a->docs_dropped, a->docs_rejected,
            a->rows[0] + a->rows[1], a->rows[0], a->rows[1], (uint64_t)r->n_shards,
            cells ? (double)written / (double)cells : 0.0, (double)a->bytes_in / 1e6, dt,
            dt > 0 ? (double)a->bytes_in / 1e6 / dt : 0.0);
    if (c->o.format != DS_FMT_TEXT) /* the targets beside the tokens, and what fitting did */
        fprintf(stderr,
                "mkshards build: %" PRIu64 " loss tokens of %" PRIu64 " written (%s, --loss-on %s); %" PRIu64
                " turn(s) dropped, %" PRIu64 " sample(s) without a target dropped\n",
                a->loss_tokens, written, ds_chat_template_name(c->o.chat_template),
                c->o.loss_on == DS_LOSS_DEFAULT ? "default" : ds_loss_on_name(c->o.loss_on), a->turns_dropped,
                a->reasons[DS_REJ_NO_LOSS]);
    if (a->docs_rejected || a->docs_dropped)
        fprintf(stderr, "mkshards build: %" PRIu64 " record(s) listed in %s/rejects.jsonl\n",
                a->docs_rejected + a->docs_dropped, c->o.out_dir);
}

/* The framing, when it is not the tiktoken one (no BOS, <|endoftext|> after). */
static void print_framing(const tk_tokenizer *tok, const ds_build_result *r) {
    char s[2][300], shown[240];
    for (int k = 0; k < 2; k++) {
        int64_t id = k ? r->eos_id : r->bos_id;
        const uint8_t *p;
        size_t n;
        if (id < 0) snprintf(s[k], sizeof s[k], "none");
        else if (tk_token_bytes(tok, (uint32_t)id, &p, &n) == TK_OK) /* escaped: a hostile file's ESC bytes */
            snprintf(s[k], sizeof s[k], "%s (%lld)", tk_escape_text(p, n, shown, sizeof shown), (long long)id);
        else snprintf(s[k], sizeof s[k], "id %lld", (long long)id);
    }
    fprintf(stderr, "mkshards build: documents framed as BOS %s + text + EOS %s\n", s[0], s[1]);
}

int cmd_build(int argc, char **argv) {
    build_cli c;
    memset(&c, 0, sizeof c);
    ds_build_opts_init(&c.o);
    cli_chat_init(&c.chat);
    c.inputs = calloc((size_t)argc + 1, sizeof *c.inputs);
    if (!c.inputs) return EXIT_BAD_INPUT;
    int rc = parse_args(&c, argc, argv);
    if (rc == EXIT_OK) rc = check_args(&c);
    if (rc != EXIT_OK) {
        free(c.inputs);
        return rc < 0 ? EXIT_OK : rc; /* -1: --help */
    }
    tk_tokenizer *tok = NULL;
    rc = cli_load_tokenizer_opts(c.spec, c.pattern, c.normalize, &tok);
    if (rc != EXIT_OK) {
        free(c.inputs);
        return rc;
    }
    if ((c.bos && (rc = cli_frame_token(CMD, "--bos", tok, c.bos, &c.o.bos_id)) != EXIT_OK) ||
        (c.eos && (rc = cli_frame_token(CMD, "--eos", tok, c.eos, &c.o.eos_id)) != EXIT_OK) ||
        (rc = cli_chat_template(CMD, &c.chat, c.spec, &c.o.chat_template)) != EXIT_OK) {
        tk_free(tok);
        free(c.inputs);
        return rc;
    }
    c.o.tok = tok;
    c.o.tokenizer_spec = c.spec;
    c.o.inputs = (const char *const *)c.inputs;
    c.o.n_inputs = c.n_inputs;
    c.o.callback = on_event;
    c.o.user = &c;
    c.progress = !c.quiet && isatty(2);
    c.last_prog = cli_now();
    ds_build_result res;
    char err[9000];
    int brc = ds_build(&c.o, &res, err, sizeof err);
    if (brc == DS_OK && res.up_to_date) {
        if (!c.quiet)
            fprintf(stderr,
                    "mkshards build: %s is complete and up to date (same configuration; %zu shard(s) verified: "
                    "structure, file checksum, size and rows match the manifest); nothing to do\n",
                    c.o.out_dir, res.n_checked);
    } else if (brc == DS_OK) {
        if (!c.quiet) print_summary(&c, &res);
        uint32_t eot;
        if (!c.quiet && (res.bos_id >= 0 || !(tk_eot_id(tok, &eot) == TK_OK && res.eos_id == (int64_t)eot)))
            print_framing(tok, &res);
    } else if (brc == DS_ERR_ARG && !strncmp(err, "bad --field", 11)) {
        rc = cli_usage_error(CMD, "%s", err);
    } else {
        cli_error(CMD, "%s", err[0] ? err : ds_strerror(brc));
        rc = brc == DS_ERR_ARG ? EXIT_USAGE : EXIT_BAD_INPUT;
    }
    tk_free(tok);
    free(c.inputs);
    return rc;
}
