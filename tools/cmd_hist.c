/* cmd_hist.c - mkshards hist: tokens-per-document distribution and what each
 * over-long policy would do at L. */
#include "analyze_cli.h"

static const char k_usage[] =
    "Usage: mkshards hist --tokenizer T [--seq-len L] [--json] [--svg FILE] INPUT...\n"
    "\n"
    "Counts the tokens of every document and prints: documents, tokens, mean,\n"
    "p50/p90/p99/p99.9/max, a log2-binned histogram, and with --seq-len the share of\n"
    "documents and tokens over L and the cost of each over-long policy at L:\n"
    "truncate (tokens lost), chunk (rows), drop (docs/tokens lost), pad-to-L (padding\n"
    "waste) and pack (rows, utilisation; one separator token per document).\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T        name or path as for encode   [required]\n"
    "  -p, --pattern P          pre-tokenizer pattern override (gpt2, cl100k, o200k)\n"
    "  -L, --seq-len L          training sequence length in tokens\n"
    "      --json               print the statistics as one JSON object\n"
    "      --svg FILE           write the histogram as an SVG chart (L marked)\n"
    "  -f, --field NAME         JSONL text field, dotted path (default: text)\n" CLI_CHAT_HELP
    "                           hist: lengths are the rendered conversations' tokens; the report\n"
    "                           adds their targets and what --over-long drop-turns would do\n"
    "      --doc-sep MODE       .txt documents: file (default), line, blank-line\n"
    "  -j, --threads N          worker threads (default: all cores)\n"
    "  -i, --input FILE         an input (repeatable; positional INPUTs work too)\n"
    "      --max-record-bytes B reader limit per record (default 256M)\n"
    "  -h, --help               show this help\n"
    "\n"
    "Records without usable text (bad JSON, missing field, ...) are counted as skipped;\n"
    "documents the tokenizer refuses (over its regex work budget or a normalizer's output\n"
    "bound) are counted as refused, the first one named; run `mkshards lint` to see why.\n"
    "\n"
    "Exit codes: 0 ok, 2 unreadable input / tokenizer / no documents, 64 usage error.\n"
    "\n"
    "Example:\n"
    "  mkshards hist -t cl100k_base -L 2048 --svg lengths.svg data/\n";

int cmd_hist(int argc, char **argv) {
    analyze_args a;
    int rc = analyze_parse("hist", k_usage, argc, argv, &a);
    if (rc < 0) rc = analyze_run("hist", &a);
    analyze_args_free(&a);
    return rc;
}
