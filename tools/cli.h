/* cli.h - shared helpers for the mkshards subcommands.
 *
 * Every subcommand lives in its own tools/cmd_<name>.c and defines
 *     int cmd_<name>(int argc, char **argv);
 * argv[0] is the subcommand name ("encode"); the return value is the
 * process exit status (one of the CLI_EXIT_* / EXIT_* codes below).
 * Subcommands that are not written yet have weak stubs in cmd_pending.c:
 * adding a file with a strong definition replaces the stub.
 *
 * Option parsing pattern (getopt_long, GNU permutation, so positional
 * arguments may appear anywhere):
 *
 *     static const struct option opts[] = {
 *         {"tokenizer", required_argument, 0, 't'},
 *         {"help", no_argument, 0, 'h'},
 *         {0, 0, 0, 0}};
 *     int c;
 *     cli_getopt_reset();
 *     while ((c = cli_getopt(argc, argv, "encode", ":t:h", opts)) != -1) {
 *         switch (c) {
 *         case 't': spec = optarg; break;
 *         case 'h': fputs(usage, stdout); return EXIT_OK;
 *         default: return EXIT_USAGE;   // cli_getopt already printed why
 *         }
 *     }
 *     // positional arguments: argv[optind .. argc-1]
 *
 * Messages go to stderr, one line, prefixed "mkshards <cmd>: ", and say what
 * to do about it. Library calls return int status codes; only the tools map
 * them to exit codes.
 */
#ifndef MKS_CLI_H
#define MKS_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tk.h"

#ifndef MKS_VERSION
#define MKS_VERSION "0.1.0"
#endif

/* Exit codes (documented in README.md). */
enum {
    EXIT_OK = 0,        /* success */
    EXIT_FINDINGS = 1,  /* ran fine but found problems (lint warnings) */
    EXIT_BAD_INPUT = 2, /* bad input data, missing/unreadable file, bad tokenizer */
    EXIT_USAGE = 64     /* bad command line (sysexits EX_USAGE) */
};

/* Subcommands. */
int cmd_encode(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_lint(int argc, char **argv);
int cmd_hist(int argc, char **argv);
int cmd_tokenizer(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_plan(int argc, char **argv);

/* Reset getopt state before parsing a subcommand's argv. */
void cli_getopt_reset(void);
/* getopt_long with messages: returns the option character, -1 at the end,
 * or '?' after printing a one-line error ("unknown option", "option needs a
 * value") plus a hint to run `mkshards <cmd> --help`. shortopts should start
 * with ':' so that a missing value is told apart from an unknown option. */
int cli_getopt(int argc, char **argv, const char *cmd, const char *shortopts, const struct option *longopts);

/* Print "mkshards <cmd>: <message>" and the --help hint; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "mkshards <cmd>: <message>" (no hint). */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "mkshards <cmd>: warning: <message>". */
void cli_warn(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse a decimal integer in [min, max] given to option `opt`. Returns 0, or
 * prints a usage error and returns EXIT_USAGE. */
int cli_parse_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out);
/* Parse a size with optional K/M/G suffix (binary units). */
int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t *out);

/* Load a tokenizer by spec (path to .tiktoken / tokenizer.json / folder with
 * encoder.json+vocab.bpe, or a name such as gpt2, cl100k_base, o200k_base)
 * with an optional pattern name (NULL = the one the vocabulary implies).
 * Prints one actionable error and returns EXIT_BAD_INPUT (cannot load) or
 * EXIT_USAGE (unknown pattern name); EXIT_OK on success. */
int cli_load_tokenizer(const char *spec, const char *pattern, tk_tokenizer **out);

/* Number of online CPUs (>= 1). */
int cli_ncpus(void);
/* Monotonic seconds. */
double cli_now(void);        /* monotonic wall clock, seconds */
double cli_thread_cpu(void); /* CPU time of the calling thread, seconds */

/* Fast unsigned decimal formatting: writes the digits of v at p, returns the
 * number of bytes written (1..20). No terminating NUL. Inline: writing ids
 * calls it once per token. */
extern const char cli_digits2[201];
/* For v < 10000: its digits without leading zeros, left-aligned in a
 * 4-byte word (cli_digits4_lead, length in cli_digits4_len), and with
 * leading zeros (cli_digits4_full). Filled before main(). */
extern uint32_t cli_digits4_lead[10000], cli_digits4_full[10000];
extern uint8_t cli_digits4_len[10000];

/* Fast unsigned decimal formatting: writes the digits of v at p, returns the
 * number of bytes written (1..20). No terminating NUL. May write up to 8
 * bytes past the digits for v < 10^8: callers keep that much slack. Inline:
 * writing ids calls it once per token. */
static inline size_t cli_fmt_u64(char *p, uint64_t v)
{
    if (v < 10000) {
        memcpy(p, &cli_digits4_lead[v], 4);
        return cli_digits4_len[v];
    }
    if (v < 100000000) {
        uint32_t hi = (uint32_t)v / 10000, lo = (uint32_t)v % 10000;
        size_t n = cli_digits4_len[hi];
        memcpy(p, &cli_digits4_lead[hi], 4);
        memcpy(p + n, &cli_digits4_full[lo], 4);
        return n + 4;
    }
    char tmp[20];
    size_t n = 0;
    while (v) {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

#endif
