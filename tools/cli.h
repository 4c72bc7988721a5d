/* cli.h - shared helpers for the mkshards subcommands.
 *
 * Every subcommand lives in its own tools/cmd_<name>.c and defines
 *     int cmd_<name>(int argc, char **argv);
 * argv[0] is the subcommand name ("encode"); the return value is the
 * process exit status (one of the CLI_EXIT_* / EXIT_* codes below).
 * tools/mkshards.c lists them.
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
/* After a command read Parquet / Arrow IPC inputs: one stderr line with the
 * files, row groups and the most memory Arrow held for one row group
 * (ds_columnar.h). Nothing when it read none. */
void cli_columnar_note(const char *cmd);
/* Print "mkshards <cmd>: warning: <message>". */
void cli_warn(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict option-value parsers. Each accepts the whole string only (no
 * leading blanks or '+', no trailing text, no empty value), checks ERANGE and
 * the documented [min, max], and on failure prints one usage error naming the
 * option, the accepted range and the value given, and returns EXIT_USAGE
 * (0 on success). */
/* Decimal integer in [min, max] ('-' only when min < 0). */
int cli_parse_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out);
/* Unsigned decimal integer in [min, max]; a leading '-' is refused (strtoull
 * would wrap "-1" to 2^64-1). */
int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Size with optional K/M/G suffix (binary units, optional "iB"/"B"), in [min, max]. */
int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Finite decimal number (no nan/inf, no hex floats) with lo <= v <= hi; when
 * lo_open / hi_open, the bound itself is excluded. */
int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, int lo_open, double hi, int hi_open,
                     double *out);
/* "K/N" with 1 <= K <= N <= max_n. */
int cli_parse_part(const char *cmd, const char *opt, const char *s, long max_n, long *k, long *n);

/* Refuse an output that would overwrite or land inside an input: OUT is
 * compared with every entry of INPUTS (skipping NULL and "-") by device +
 * inode (ds_same_file, so links and other names of the same file count),
 * and, for inputs that are folders, by path containment (ds_path_within).
 * Returns 0, or prints "mkshards CMD: OUT_OPT 'OUT' is the same file as
 * IN_WHAT 'IN' ..." and returns EXIT_BAD_INPUT (2) before anything has been
 * written. The check is ds_check_output (dataset/fileio.c); build and
 * merge lock their output folder with ds_lock_dir inside ds_build/ds_merge. */
int cli_refuse_overwrite(const char *cmd, const char *out_opt, const char *out, const char *in_what,
                         const char *const *inputs, size_t n_inputs);

/* cli_refuse_overwrite of OUT against the tokenizer's source files
 * (ds_check_output with the spec: ds_tokenizer_sources lists them). */
int cli_refuse_overwrite_tokenizer(const char *cmd, const char *out_opt, const char *out, const char *spec);

/* Load a tokenizer by spec (path to .tiktoken / tokenizer.json / folder with
 * encoder.json+vocab.bpe, or a name such as gpt2, cl100k_base, o200k_base)
 * with an optional --pattern (a name or a regex: tk_pattern_spec; NULL = the
 * one the vocabulary implies) and --normalize (none|nfc|nfkc; NULL: none).
 * Warns when they differ from what a recognised vocabulary needs. Prints one
 * actionable error and returns EXIT_BAD_INPUT (cannot load) or EXIT_USAGE
 * (unknown pattern name or form); EXIT_OK on success. */
int cli_load_tokenizer(const char *spec, const char *pattern, tk_tokenizer **out);
int cli_load_tokenizer_opts(const char *spec, const char *pattern, const char *normalize, tk_tokenizer **out);

/* --bos / --eos ARG: "none" -> -1, "default" -> -2 (DS_FRAME_DEFAULT), else
 * the id of the token whose text is ARG (tk_token_id). EXIT_OK, or
 * EXIT_BAD_INPUT after a message naming the option and the text. */
int cli_frame_token(const char *cmd, const char *opt, const tk_tokenizer *tok, const char *arg, int64_t *id);

/* Number of online CPUs (>= 1). */
int cli_ncpus(void);
/* Monotonic seconds. */
double cli_now(void); /* monotonic wall clock, seconds */

/* For v < 1000: its digits without leading zeros in the low bytes of a
 * 4-byte word with their count in the top byte (cli_digits3_lead), and with
 * leading zeros (cli_digits3_full). 8 KiB in all, so they stay in L1 while
 * ids are written. Filled before main(). */
extern uint32_t cli_digits3_lead[1000], cli_digits3_full[1000];

/* Fast unsigned decimal formatting: writes the digits of v at p, returns the
 * number of bytes written (1..20). No terminating NUL. May write up to 4
 * bytes past the digits below 10^9: callers keep that much slack. Below 10^6
 * (every id of the known vocabularies) nothing branches on the value: the
 * leading group is picked arithmetically, since ids of real text mix 1-3 and
 * 4-6 digits at random (measured 1.6-1.9x faster than 4-digit tables, which
 * also miss L1). Inline: writing ids calls it once per token. */
static inline size_t cli_fmt_u64(char *p, uint64_t v) {
    if (v < 1000000) {
        uint32_t hi = (uint32_t)v / 1000, lo = (uint32_t)v - hi * 1000, two = hi != 0;
        uint32_t lead = cli_digits3_lead[lo + (hi - lo) * two], full = cli_digits3_full[lo];
        size_t n = lead >> 24;
        memcpy(p, &lead, 4);
        memcpy(p + n, &full, 4);
        return n + 3 * two;
    }
    if (v < 1000000000) {
        uint32_t a = (uint32_t)v / 1000000, b = (uint32_t)v / 1000 % 1000, c = (uint32_t)v % 1000;
        uint32_t lead = cli_digits3_lead[a], mid = cli_digits3_full[b], low = cli_digits3_full[c];
        size_t n = lead >> 24;
        memcpy(p, &lead, 4);
        memcpy(p + n, &mid, 4);
        memcpy(p + n + 3, &low, 4);
        return n + 6;
    }
    char tmp[20];
    size_t n = 0;
    while (v) {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    }
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

#endif
