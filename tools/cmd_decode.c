/* cmd_decode.c - mkshards decode: lines of JSON token-id arrays -> text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tk.h"

static const char k_usage[] =
    "Usage: mkshards decode --tokenizer T [--ids FILE] [--out FILE]\n"
    "\n"
    "Reads lines written by `mkshards encode` (one JSON array of token ids per line,\n"
    "e.g. [464,3290,13]) and writes the decoded text of each line followed by a newline.\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T   .tiktoken file, tokenizer.json, SentencePiece .model (BPE/Unigram),\n"
    "                      folder with encoder.json + vocab.bpe, or a name: gpt2,\n"
    "                      r50k_base, cl100k_base, o200k_base\n"
    "                      (names are looked up in $MKS_VOCAB_DIR)        [required]\n"
    "  -p, --pattern P     pre-tokenizer pattern (gpt2, cl100k, o200k); only needed for\n"
    "                      vocabularies that are not recognised\n"
    "  -i, --ids FILE      input (default: - = stdin); a positional FILE works too\n"
    "  -o, --out FILE      output (default: - = stdout)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input (malformed line, id out of range, unreadable file;\n"
    "--out naming the --ids file or the tokenizer is refused before writing), 64 usage error.\n"
    "\n"
    "Example:\n"
    "  mkshards encode -t gpt2 notes.txt --ids-out - | mkshards decode -t gpt2\n";

static const struct option k_opts[] = {{"tokenizer", required_argument, 0, 't'},
                                       {"pattern", required_argument, 0, 'p'},
                                       {"ids", required_argument, 0, 'i'},
                                       {"out", required_argument, 0, 'o'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p;
}

/* Parse "[1, 2, 3]" into v. Returns NULL on success, or a description of the problem. */
static const char *parse_line(const char *p, const char *end, tk_ids *v, size_t *col) {
    const char *start = p;
    v->len = 0;
    p = skip_ws(p, end);
    if (p >= end || *p != '[') {
        *col = (size_t)(p - start) + 1;
        return "expected '[' (each line must be a JSON array of token ids)";
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == ']') {
        p = skip_ws(p + 1, end);
        *col = (size_t)(p - start) + 1;
        return p == end ? NULL : "unexpected text after ']'";
    }
    for (;;) {
        if (p >= end || *p < '0' || *p > '9') {
            *col = (size_t)(p - start) + 1;
            return "expected a non-negative integer token id";
        }
        uint64_t x = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            x = x * 10 + (uint64_t)(*p - '0');
            if (x > UINT32_MAX) {
                *col = (size_t)(p - start) + 1;
                return "token id too large";
            }
            p++;
        }
        if (v->len == v->cap) {
            size_t nc = v->cap ? v->cap * 2 : 1024;
            uint32_t *n = realloc(v->ids, nc * sizeof *n);
            if (!n) return "out of memory";
            v->ids = n;
            v->cap = nc;
        }
        v->ids[v->len++] = (uint32_t)x;
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == ']') {
            p = skip_ws(p + 1, end);
            *col = (size_t)(p - start) + 1;
            return p == end ? NULL : "unexpected text after ']'";
        }
        *col = (size_t)(p - start) + 1;
        return "expected ',' or ']'";
    }
}

/* Every line of in (a JSON array of ids) decoded to one line of out. EXIT_OK,
 * or EXIT_BAD_INPUT after a message naming the line (and column or id). */
static int decode_stream(const char *cmd, const tk_tokenizer *tok, FILE *in, const char *in_name, FILE *out,
                         const char *out_path) {
    char *line = NULL;
    size_t line_cap = 0;
    tk_ids v = {0};
    tk_bytes text = {0};
    int rc = EXIT_OK;
    uint32_t vocab = tk_vocab_size(tok);
    uint64_t lineno = 0;
    ssize_t n;
    while (rc == EXIT_OK && (n = getline(&line, &line_cap, in)) > 0) {
        lineno++;
        size_t col = 0;
        const char *why = parse_line(line, line + n, &v, &col);
        if (why) {
            cli_error(cmd, "%s:%llu:%zu: %s", in_name, (unsigned long long)lineno, col, why);
            rc = EXIT_BAD_INPUT;
            break;
        }
        text.len = 0;
        int drc = tk_decode(tok, v.ids, v.len, &text);
        if (drc == TK_ERR_RANGE) {
            size_t k = 0;
            const uint8_t *b;
            size_t bl;
            while (k < v.len && v.ids[k] < vocab && tk_token_bytes(tok, v.ids[k], &b, &bl) == TK_OK) k++;
            cli_error(cmd,
                      "%s:%llu: token id %u (position %zu) is not in the vocabulary of %s (%u ids); "
                      "was it encoded with another tokenizer?",
                      in_name, (unsigned long long)lineno, k < v.len ? v.ids[k] : 0u, k + 1, tk_name(tok), vocab);
            rc = EXIT_BAD_INPUT;
        } else if (drc != TK_OK) {
            cli_error(cmd, "%s:%llu: decode failed: %s", in_name, (unsigned long long)lineno, tk_strerror(drc));
            rc = EXIT_BAD_INPUT;
        } else if ((text.len && fwrite(text.data, 1, text.len, out) != text.len) || putc('\n', out) == EOF) {
            cli_error(cmd, "cannot write '%s': %s", out_path, strerror(errno));
            rc = EXIT_BAD_INPUT;
        }
    }
    if (rc == EXIT_OK && ferror(in)) {
        cli_error(cmd, "cannot read '%s': %s", in_name, strerror(errno));
        rc = EXIT_BAD_INPUT;
    }
    free(line);
    tk_ids_free(&v);
    tk_bytes_free(&text);
    return rc;
}

int cmd_decode(int argc, char **argv) {
    const char *cmd = "decode";
    const char *spec = NULL, *pattern = NULL, *in_path = NULL, *out_path = NULL;
    int c, rc = EXIT_OK;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":t:p:i:o:h", k_opts)) != -1) {
        switch (c) {
        case 't': spec = optarg; break;
        case 'p': pattern = optarg; break;
        case 'i': in_path = optarg; break;
        case 'o': out_path = optarg; break;
        case 'h': fputs(k_usage, stdout); return EXIT_OK;
        default: return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        if (in_path || optind + 1 < argc)
            return cli_usage_error(cmd, "decode reads one input; got more than one ('%s')", argv[optind]);
        in_path = argv[optind];
    }
    if (!spec) return cli_usage_error(cmd, "--tokenizer is required (the one the ids were encoded with)");
    if (!in_path) in_path = "-";
    if (!out_path) out_path = "-";

    /* before --out is created (fopen "wb" truncates) */
    {
        const char *ids_in[1] = {in_path};
        if (cli_refuse_overwrite(cmd, "--out", out_path, "--ids", ids_in, 1) ||
            cli_refuse_overwrite_tokenizer(cmd, "--out", out_path, spec))
            return EXIT_BAD_INPUT;
    }

    tk_tokenizer *tok = NULL;
    FILE *in = NULL, *out = NULL;

    rc = cli_load_tokenizer(spec, pattern, &tok);
    if (rc != EXIT_OK) goto done;
    const char *in_name = strcmp(in_path, "-") ? in_path : "<stdin>";
    in = strcmp(in_path, "-") ? fopen(in_path, "rb") : stdin; /* a pipe is fine: decode streams */
    if (!in) {
        cli_error(cmd, "cannot open --ids '%s': %s", in_path, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    out = strcmp(out_path, "-") ? fopen(out_path, "wb") : stdout;
    if (!out) {
        cli_error(cmd, "cannot create --out '%s': %s", out_path, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    static char obuf[1 << 20];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);

    rc = decode_stream(cmd, tok, in, in_name, out, out_path);
    if (rc != EXIT_OK) goto done;
    if (fflush(out) != 0) {
        cli_error(cmd, "cannot write '%s': %s", out_path, strerror(errno));
        rc = EXIT_BAD_INPUT;
    }

done:
    if (in && in != stdin) fclose(in);
    if (out && out != stdout) {
        if (fclose(out) != 0 && rc == EXIT_OK) {
            cli_error(cmd, "cannot write '%s': %s", out_path, strerror(errno));
            rc = EXIT_BAD_INPUT;
        }
    } else if (out) {
        fflush(out);
    }
    if (tok) tk_free(tok);
    return rc;
}
