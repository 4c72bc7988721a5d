/* cmd_lint.c - mkshards lint: find the data problems that crash training. */
#include "analyze_cli.h"

static const char k_usage[] =
    "Usage: mkshards lint [--tokenizer T] [--seq-len L] [--json] [--max-examples N] INPUT...\n"
    "\n"
    "Checks documents for the problems that make training run out of memory or learn\n"
    "garbage: missed separators, missing JSON fields, over-long documents, blobs,\n"
    "duplicates, bad UTF-8, corrupt zstd, ... (rules: docs/lint-rules.md).\n"
    "\n"
    "Inputs: .txt, .jsonl, either + .zst or .gz, folders (recursive, sorted), - for stdin.\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T          count tokens (enables doc-too-long at L tokens,\n"
    "                             low-bytes-per-token and tokenizer-limit); name or path\n"
    "                             as for encode\n"
    "  -p, --pattern P            pre-tokenizer pattern override (gpt2, cl100k, o200k)\n"
    "  -L, --seq-len L            training sequence length in tokens\n"
    "      --json                 print the report as one JSON object\n"
    "      --max-examples N       examples kept per rule (default 5)\n"
    "      --hist                 also print the token histogram (as `mkshards hist`), same pass\n"
    "  -f, --field NAME           JSONL text field, dotted path (default: text)\n" CLI_CHAT_HELP
    "                           lint: chat-* rules (docs/lint-rules.md); without --tokenizer and\n"
    "                           --chat-template the messages only; with them lengths are the\n"
    "                           rendered conversation's tokens (chat-over-seq-len)\n"
    "      --doc-sep MODE         .txt documents: file (default), line, blank-line\n"
    "  -j, --threads N            worker threads (default: all cores)\n"
    "  -i, --input FILE           an input (repeatable; positional INPUTs work too)\n"
    "      --max-doc-bytes B      doc-too-long limit without tokenizer (default 8M, or 8*L)\n"
    "      --max-record-bytes B   reader limit per record (default 256M; larger are skipped)\n"
    "      --cut-overlong         deliver the first B bytes of over-limit txt records\n"
    "      --outlier-factor X     outlier-doc: X times the median size (default 100)\n"
    "      --long-line B          long-line threshold (default 1M)\n"
    "      --long-run B           long-run threshold (default 4096)\n"
    "      --min-bytes-per-token X  low-bytes-per-token threshold (default 1.5)\n"
    "      --list-rules           print the rule ids, severities and fixes\n"
    "  -h, --help                 show this help\n"
    "\n"
    "Exit codes: 0 clean (info findings only), 1 warnings only, 2 errors (or an input\n"
    "cannot be read / tokenizer cannot be loaded), 64 usage error.\n"
    "\n"
    "Example:\n"
    "  mkshards lint -t cl100k_base -L 2048 data/*.jsonl.zst\n";

int cmd_lint(int argc, char **argv) {
    analyze_args a;
    int rc = analyze_parse("lint", k_usage, argc, argv, &a);
    if (rc < 0) rc = analyze_run("lint", &a);
    analyze_args_free(&a);
    return rc;
}
