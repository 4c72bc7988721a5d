/* mkshards.c - command dispatcher: mkshards <command> [options]. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command k_commands[] = {
    {"encode", cmd_encode, "encode documents to token ids (one JSON array per document)"},
    {"decode", cmd_decode, "decode token-id lines back to text"},
    {"lint", cmd_lint, "check a dataset for problems before training"},
    {"hist", cmd_hist, "histogram of document lengths in tokens"},
    {"tokenizer", cmd_tokenizer, "tokenizer tools (train, export, info)"},
    {"build", cmd_build, "build fixed-length token shards"},
    {"inspect", cmd_inspect, "show the header and contents of a shard"},
    {"verify", cmd_verify, "verify shard checksums and invariants"},
    {"merge", cmd_merge, "merge shard sets"},
    {"plan", cmd_plan, "plan sequence length and batch size for a GPU memory budget"},
};
#define N_COMMANDS (sizeof k_commands / sizeof k_commands[0])

static void usage(FILE *f) {
    fputs("Usage: mkshards <command> [options]\n"
          "       mkshards <command> --help\n"
          "       mkshards --help | --version\n"
          "\n"
          "Turns raw text corpora into fixed-length token shards.\n"
          "\n"
          "Commands:\n",
          f);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", k_commands[i].name, k_commands[i].summary);
    fputs("\n"
          "Exit codes: 0 ok, 1 findings (lint warnings), 2 bad input or file, 64 usage error.\n"
          "Tokenizer names (gpt2, r50k_base, cl100k_base, o200k_base) are looked up in\n"
          "$MKS_VOCAB_DIR and in tiktoken's cache ($TIKTOKEN_CACHE_DIR).\n",
          f);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        if (!strcmp(name, "help") && argc > 2) {
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (!strcmp(argv[2], k_commands[i].name)) {
                    char *av[] = {argv[2], "--help", NULL};
                    return k_commands[i].fn(2, av);
                }
            return cli_usage_error(NULL, "unknown command '%s'", argv[2]);
        }
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-V") || !strcmp(name, "version")) {
        printf("mkshards %s\n", MKS_VERSION);
        return EXIT_OK;
    }
    if (name[0] == '-')
        return cli_usage_error(NULL, "unknown option '%s' (the command comes first: mkshards <command> ...)", name);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, k_commands[i].name)) {
            int rc = k_commands[i].fn(argc - 1, argv + 1);
            cli_columnar_note(name); /* a command that read Parquet / Arrow inputs: their memory */
            return rc;
        }
    return cli_usage_error(NULL, "unknown command '%s'", name);
}
