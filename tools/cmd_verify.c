/* cmd_verify.c - mkshards verify DIR|SHARD: full integrity check of a shard
 * set (or one shard): header and size, header/payload/block checksums, ids <
 * vocab size, row metadata, zstd frames, and agreement with the manifest.
 * The checks are ds_verify (dataset/verify.c), which ShardSet(verify=True)
 * runs too; this file has the options, messages and exit codes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "ds.h"

static const char k_usage[] = "Usage: mkshards verify [options] DIR|SHARD\n"
                              "\n"
                              "Checks every shard of the set in DIR (listed by DIR/manifest.json), or one\n"
                              "shard file: header and file size, header/block/payload checksums (XXH3-64),\n"
                              "every token id < vocab size, padding and document-start metadata, every zstd\n"
                              "frame, and that each shard agrees with the manifest (rows, tokens, bytes, file\n"
                              "checksum, tokenizer fingerprint, split). The first problem is reported with the\n"
                              "shard and the byte offset (or range) that is wrong.\n"
                              "\n"
                              "Options:\n"
                              "  -q, --quiet   print nothing when everything is fine\n"
                              "  -h, --help    show this help\n"
                              "\n"
                              "Exit codes: 0 ok, 2 corruption found or unreadable input, 64 usage error.\n";

static const struct option k_opts[] = {{"quiet", no_argument, 0, 'q'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

int cmd_verify(int argc, char **argv) {
    const char *cmd = "verify";
    int quiet = 0, c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":qh", k_opts)) != -1) {
        switch (c) {
        case 'q': quiet = 1; break;
        case 'h': fputs(k_usage, stdout); return EXIT_OK;
        default: return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) return cli_usage_error(cmd, "give exactly one DIR or SHARD");
    const char *target = argv[optind];
    ds_verify_result r;
    char err[1024];
    if (ds_verify(target, &r, err, sizeof err) != DS_OK) {
        cli_error(cmd, "%s", err);
        return EXIT_BAD_INPUT;
    }
    if (quiet) return EXIT_OK;
    if (!r.is_set)
        printf("ok: %s: %" PRIu64 " rows of %u, %" PRIu64 " tokens, xxh3 %016" PRIx64 "\n", target,
               r.rows[0] + r.rows[1], r.row_len, r.tokens[0] + r.tokens[1], r.file_xxh3);
    else
        printf("ok: %s: %" PRIu64 " shards, %" PRIu64 " train rows, %" PRIu64 " val rows, %" PRIu64
               " tokens, all checksums match\n",
               target, r.shards[0] + r.shards[1], r.rows[0], r.rows[1], r.tokens[0] + r.tokens[1]);
    return EXIT_OK;
}
