/* analyze_cli.c - shared driver of `mkshards lint` and `mkshards hist`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze_cli.h"

enum {
    OPT_JSON = 1000,
    OPT_MAX_EX,
    OPT_DOC_SEP,
    OPT_SVG,
    OPT_HIST,
    OPT_MAX_DOC_BYTES,
    OPT_MAX_RECORD,
    OPT_CUT,
    OPT_OUTLIER,
    OPT_LONG_RUN,
    OPT_LONG_LINE,
    OPT_MIN_BPT,
    OPT_LIST_RULES
};

static const struct option k_opts[] = {{"tokenizer", required_argument, 0, 't'},
                                       {"pattern", required_argument, 0, 'p'},
                                       {"seq-len", required_argument, 0, 'L'},
                                       {"input", required_argument, 0, 'i'},
                                       {"field", required_argument, 0, 'f'},
                                       {"threads", required_argument, 0, 'j'},
                                       {"json", no_argument, 0, OPT_JSON},
                                       {"max-examples", required_argument, 0, OPT_MAX_EX},
                                       {"doc-sep", required_argument, 0, OPT_DOC_SEP},
                                       {"svg", required_argument, 0, OPT_SVG},
                                       {"hist", no_argument, 0, OPT_HIST},
                                       {"max-doc-bytes", required_argument, 0, OPT_MAX_DOC_BYTES},
                                       {"max-record-bytes", required_argument, 0, OPT_MAX_RECORD},
                                       {"cut-overlong", no_argument, 0, OPT_CUT},
                                       {"outlier-factor", required_argument, 0, OPT_OUTLIER},
                                       {"long-run", required_argument, 0, OPT_LONG_RUN},
                                       {"long-line", required_argument, 0, OPT_LONG_LINE},
                                       {"min-bytes-per-token", required_argument, 0, OPT_MIN_BPT},
                                       {"list-rules", no_argument, 0, OPT_LIST_RULES},
                                       CLI_CHAT_LONGOPTS,
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};

static int push_input(analyze_args *a, const char *s) {
    const char **n = realloc(a->inputs, (a->n_inputs + 1) * sizeof *n);
    if (!n) return -1;
    a->inputs = n;
    a->inputs[a->n_inputs++] = s;
    return 0;
}

void analyze_args_free(analyze_args *a) {
    free(a->inputs);
    if (a->tok) tk_free(a->tok);
    a->inputs = NULL;
    a->tok = NULL;
}

int analyze_parse(const char *cmd, const char *usage, int argc, char **argv, analyze_args *a) {
    memset(a, 0, sizeof *a);
    ds_reader_opts_init(&a->ro);
    ds_analyze_opts_init(&a->ao);
    cli_chat_init(&a->chat);
    a->lint = strcmp(cmd, "lint") == 0;
    a->hist = !a->lint;
    int c;
    long v;
    uint64_t sz;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":t:p:L:i:f:j:h", k_opts)) != -1) {
        switch (c) {
        case 't': a->tokenizer = optarg; break;
        case 'p': a->pattern = optarg; break;
        case 'L':
            if (cli_parse_long(cmd, "--seq-len", optarg, 1, 1L << 30, &v)) return EXIT_USAGE;
            a->ao.seq_len = (uint64_t)v;
            break;
        case 'i':
            if (push_input(a, optarg)) return EXIT_BAD_INPUT;
            break;
        case 'f': a->ro.field = optarg; break;
        case 'j':
            if (cli_parse_long(cmd, "--threads", optarg, 1, 256, &v)) return EXIT_USAGE;
            a->ao.threads = (int)v;
            break;
        case OPT_JSON: a->json = 1; break;
        case OPT_MAX_EX:
            if (cli_parse_long(cmd, "--max-examples", optarg, 0, 100000, &v)) return EXIT_USAGE;
            a->ao.max_examples = (size_t)v;
            a->ao.set_examples = 1;
            break;
        case OPT_DOC_SEP:
            if (ds_doc_sep_parse(optarg, &a->ro.doc_sep)) {
                char names[64];
                return cli_usage_error(cmd, "--doc-sep must be %s, not '%s'",
                                       ds_names_list(ds_doc_sep_name, names, sizeof names), optarg);
            }
            break;
        case OPT_SVG: a->svg = optarg; break;
        case OPT_HIST: a->hist = 1; break;
        case OPT_MAX_DOC_BYTES:
            if (cli_parse_size(cmd, "--max-doc-bytes", optarg, 1, 1ull << 40, &sz)) return EXIT_USAGE;
            a->ao.max_doc_bytes = sz;
            break;
        case OPT_MAX_RECORD:
            if (cli_parse_size(cmd, "--max-record-bytes", optarg, 1, 1ull << 40, &sz)) return EXIT_USAGE;
            a->ro.max_record_bytes = (size_t)sz;
            break;
        case OPT_CUT: a->ro.overlong = DS_OVERLONG_CUT; break;
        case OPT_OUTLIER:
            if (cli_parse_double(cmd, "--outlier-factor", optarg, 1, 1, 1e12, 0, &a->ao.outlier_factor))
                return EXIT_USAGE;
            break;
        case OPT_MIN_BPT:
            if (cli_parse_double(cmd, "--min-bytes-per-token", optarg, 0, 1, 1e6, 0, &a->ao.min_bytes_per_token))
                return EXIT_USAGE;
            break;
        case OPT_LONG_RUN:
            if (cli_parse_size(cmd, "--long-run", optarg, 1, 1ull << 40, &sz)) return EXIT_USAGE;
            a->ao.long_run_bytes = sz;
            break;
        case OPT_LONG_LINE:
            if (cli_parse_size(cmd, "--long-line", optarg, 1, 1ull << 40, &sz)) return EXIT_USAGE;
            a->ao.long_line_bytes = sz;
            break;
        case 'h': fputs(usage, stdout); return EXIT_OK;
        case OPT_LIST_RULES:
            printf("%-20s %-8s %s\n", "RULE", "SEVERITY", "MEANING / FIX");
            for (int i = 0; i < DS_RULE_COUNT; i++) {
                const ds_rule_info *ri = ds_rule_get(i);
                printf("%-20s %-8s %s\n%-29s fix: %s\n", ri->id, ds_severity_name(ri->severity), ri->title, "",
                       ri->fix);
            }
            return EXIT_OK;
        default:
            if (cli_chat_option(cmd, c, optarg, &a->chat) == 1) break;
            return EXIT_USAGE; /* a bad value (its message printed), or cli_getopt's own message */
        }
    }
    for (int i = optind; i < argc; i++)
        if (push_input(a, argv[i])) return EXIT_BAD_INPUT;
    if (cli_chat_check(cmd, &a->chat) != EXIT_OK) return EXIT_USAGE;
    a->ao.format = a->chat.format;
    a->ao.messages_field = a->chat.messages_field;
    a->ao.loss_on = a->chat.loss_on;
    if (a->n_inputs == 0) return cli_usage_error(cmd, "no INPUT given (use - for stdin)");
    if (!a->lint && !a->tokenizer) return cli_usage_error(cmd, "--tokenizer is required");
    if (a->lint && a->hist && !a->tokenizer) return cli_usage_error(cmd, "--hist needs --tokenizer");
    if (a->svg && !a->hist) return cli_usage_error(cmd, "--svg needs --hist");
    /* before the (long) analysis: the chart must not overwrite an input */
    if (a->svg && (cli_refuse_overwrite(cmd, "--svg", a->svg, "the input", a->inputs, a->n_inputs) ||
                   cli_refuse_overwrite_tokenizer(cmd, "--svg", a->svg, a->tokenizer)))
        return EXIT_BAD_INPUT;
    return -1;
}

int analyze_run(const char *cmd, analyze_args *a) {
    if (a->tokenizer) {
        int rc = cli_load_tokenizer(a->tokenizer, a->pattern, &a->tok);
        if (rc != EXIT_OK) return rc;
        a->ao.tok = (const struct tk_tokenizer *)a->tok;
    }
    /* chat formats: the template renders (and counts) each conversation;
     * lint without a tokenizer nor --chat-template checks the messages only */
    if (a->chat.format != DS_FMT_TEXT && (a->tokenizer || a->chat.chat_template)) {
        int rc = cli_chat_template(cmd, &a->chat, a->tokenizer, &a->ao.chat_template);
        if (rc != EXIT_OK) return rc;
    }
    ds_lint_report *rep = NULL;
    ds_hist *h = NULL;
    char err[512] = "";
    int rc =
        ds_analyze(a->inputs, a->n_inputs, &a->ro, &a->ao, a->lint ? &rep : NULL, a->hist ? &h : NULL, err, sizeof err);
    if (rc != DS_OK) {
        cli_error(cmd, "%s", err[0] ? err : ds_strerror(rc));
        return rc == DS_ERR_ARG ? EXIT_USAGE : EXIT_BAD_INPUT;
    }
    int code = EXIT_OK;
    if (a->json) {
        if (rep && h) fputs("{\"lint\":", stdout);
        if (rep) ds_lint_write_json(rep, stdout);
        if (rep && h) fputs(",\"hist\":", stdout);
        if (h) ds_hist_write_json(h, stdout);
        if (rep && h) fputs("}\n", stdout);
    } else {
        if (rep) ds_lint_print(rep, stdout);
        if (rep && h) fputs("\n", stdout);
        if (h) ds_hist_print(h, stdout, 50);
    }
    if (h && a->svg) {
        if (ds_hist_write_svg(h, a->svg, err, sizeof err) != DS_OK) {
            cli_error(cmd, "%s", err);
            code = EXIT_BAD_INPUT;
        } else if (!a->json) {
            fprintf(stderr, "mkshards %s: histogram written to %s\n", cmd, a->svg);
        }
    }
    if (rep && code == EXIT_OK) code = ds_lint_exit_code(rep);
    if (h && h->docs == 0 && !rep) {
        cli_error(cmd, "no usable documents in the input");
        code = EXIT_BAD_INPUT;
    }
    fflush(stdout);
    ds_lint_report_free(rep);
    ds_hist_free(h);
    return code;
}
