/* cmd_merge.c - mkshards merge --out DIR PART_DIR...: join the shard sets
 * built with --part 1/N .. N/N into the set a single build would have
 * written (byte-identical: rows are taken back to packing order, re-sharded
 * and re-shuffled exactly as build does; rejects and accounting are joined).
 * The work is ds_merge (dataset/merge.c); this file has the options,
 * messages and exit codes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "ds.h"

static const char k_usage[] = "Usage: mkshards merge --out DIR [--force] PART_DIR...\n"
                              "\n"
                              "Joins the outputs of `mkshards build --part K/N` (K = 1..N, any order on the\n"
                              "command line) into one shard set in DIR. The parts must come from the same\n"
                              "build command (same inputs, tokenizer and options). The result is\n"
                              "byte-identical to a single build without --part. Part folders are only read.\n"
                              "\n"
                              "Options:\n"
                              "  -o, --out DIR   output folder (created)            [required]\n"
                              "      --force     replace a shard set of another configuration in DIR\n"
                              "  -q, --quiet     no summary line\n"
                              "  -h, --help      show this help\n"
                              "\n"
                              "A DIR that holds a shard set with another configuration or tokenizer (another\n"
                              "build, another merge) is refused, as `mkshards build` refuses it, unless --force.\n"
                              "\n"
                              "Exit codes: 0 ok, 2 bad or mismatched parts / output error (also: DIR holds another\n"
                              "set; DIR is locked), 64 usage error.\n";

enum { OPT_FORCE = 1000 };
static const struct option k_opts[] = {{"out", required_argument, 0, 'o'},
                                       {"force", no_argument, 0, OPT_FORCE},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};

int cmd_merge(int argc, char **argv) {
    const char *cmd = "merge";
    const char *out_dir = NULL;
    int quiet = 0, force = 0, c;
    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, cmd, ":o:qh", k_opts)) != -1) {
        switch (c) {
        case 'o': out_dir = optarg; break;
        case 'q': quiet = 1; break;
        case OPT_FORCE: force = 1; break;
        case 'h': fputs(k_usage, stdout); return EXIT_OK;
        default: return EXIT_USAGE;
        }
    }
    if (!out_dir) return cli_usage_error(cmd, "--out is required");
    int np = argc - optind;
    if (np < 1) return cli_usage_error(cmd, "give the part folders to merge");
    size_t n_shards = 0;
    uint64_t rows_train = 0, rows_val = 0;
    char err[9000];
    int rc = ds_merge(out_dir, (const char *const *)argv + optind, (size_t)np, force, &n_shards, &rows_train, &rows_val,
                      err, sizeof err);
    if (rc != DS_OK) {
        cli_error(cmd, "%s", err[0] ? err : ds_strerror(rc));
        return rc == DS_ERR_ARG ? EXIT_USAGE : EXIT_BAD_INPUT;
    }
    if (!quiet)
        fprintf(stderr, "mkshards merge: %d parts -> %s: %zu shards, %" PRIu64 " train rows, %" PRIu64 " val rows\n",
                np, out_dir, n_shards, rows_train, rows_val);
    return EXIT_OK;
}
