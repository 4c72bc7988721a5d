/* cli.c - shared helpers for the mkshards subcommands (see cli.h). */
#include "cli.h"
#include "ds_columnar.h"
#include "mks_common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ds.h"

void cli_getopt_reset(void) {
    optind = 0; /* glibc: 0 re-initialises getopt completely */
    opterr = 0;
}

int cli_getopt(int argc, char **argv, const char *cmd, const char *shortopts, const struct option *longopts) {
    opterr = 0;
    int prev = optind ? optind : 1;
    int c = getopt_long(argc, argv, shortopts, longopts, NULL);
    if (c == '?' || c == ':') {
        const char *arg = (optind - 1 >= 1 && optind - 1 < argc) ? argv[optind - 1] : "?";
        if (prev < argc && optind == prev && optopt) /* short option inside a cluster */
            arg = argv[prev];
        if (c == ':') {
            if (optopt && !(arg[0] == '-' && arg[1] == '-')) cli_usage_error(cmd, "option '-%c' needs a value", optopt);
            else cli_usage_error(cmd, "option '%s' needs a value", arg);
        } else if (optopt && !(arg[0] == '-' && arg[1] == '-')) {
            cli_usage_error(cmd, "unknown option '-%c'", optopt);
        } else {
            cli_usage_error(cmd, "unknown option '%s'", arg);
        }
        return '?';
    }
    return c;
}

static void vmsg(const char *cmd, const char *kind, const char *fmt, va_list ap) {
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    if (cmd && *cmd) fprintf(stderr, "mkshards %s: %s%s\n", cmd, kind, buf);
    else fprintf(stderr, "mkshards: %s%s\n", kind, buf);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(cmd, "", fmt, ap);
    va_end(ap);
    if (cmd && *cmd) fprintf(stderr, "Try 'mkshards %s --help' for the list of options.\n", cmd);
    else fprintf(stderr, "Try 'mkshards --help' for the list of commands.\n");
    return EXIT_USAGE;
}

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(cmd, "", fmt, ap);
    va_end(ap);
}

void cli_warn(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmsg(cmd, "warning: ", fmt, ap);
    va_end(ap);
}

/* Leading characters strto* would skip or accept that a strict value must not
 * start with: blanks, '+', and '-' where no sign is allowed. */
static int bad_start(const char *s, int allow_minus) {
    if (!s || !*s) return 1;
    if (allow_minus && s[0] == '-') s++;
    return !(*s >= '0' && *s <= '9');
}

int cli_parse_long(const char *cmd, const char *opt, const char *s, long min, long max, long *out) {
    char *end = NULL;
    errno = 0;
    long v = bad_start(s, min < 0) ? 0 : strtol(s, &end, 10);
    if (!end || errno || end == s || *end || v < min || v > max)
        return cli_usage_error(cmd, "%s expects an integer from %ld to %ld, got '%s'", opt, min, max, s ? s : "");
    *out = v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = bad_start(s, 0) ? 0 : strtoull(s, &end, 10);
    if (!end || errno || end == s || *end || v < min || v > max)
        return cli_usage_error(cmd, "%s expects an integer from %llu to %llu, got '%s'", opt, (unsigned long long)min,
                               (unsigned long long)max, s ? s : "");
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_size(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = bad_start(s, 0) ? 0 : strtoull(s, &end, 10);
    if (!end || errno || end == s) goto bad;
    uint64_t mul = 1;
    switch (*end) {
    case 0: break;
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    default: goto bad;
    }
    if (mul > 1 && *end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v > UINT64_MAX / mul) goto bad;
    v *= mul;
    if (v < min || v > max) goto bad;
    *out = (uint64_t)v;
    return 0;
bad:
    return cli_usage_error(cmd, "%s expects a size from %llu to %llu bytes (e.g. 4096, 64K, 256M, 2G), got '%s'", opt,
                           (unsigned long long)min, (unsigned long long)max, s ? s : "");
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, int lo_open, double hi, int hi_open,
                     double *out) {
    char *end = NULL;
    errno = 0;
    double v = 0;
    int ok = !bad_start(s, lo < 0) || (s && s[0] == '.' && s[1] >= '0' && s[1] <= '9');
    /* digits, '.', exponent only: strtod also takes nan, inf and hex floats */
    for (const char *p = s; ok && *p; p++)
        if (!strchr("0123456789.eE+-", *p)) ok = 0;
    if (ok) v = strtod(s, &end);
    if (!ok || !end || errno == ERANGE || end == s || *end || !isfinite(v) || (lo_open ? v <= lo : v < lo) ||
        (hi_open ? v >= hi : v > hi))
        return cli_usage_error(cmd, "%s expects a number with %g %s F %s %g, got '%s'", opt, lo,
                               lo_open ? "<" : "<=", hi_open ? "<" : "<=", hi, s ? s : "");
    *out = v;
    return 0;
}

int cli_parse_part(const char *cmd, const char *opt, const char *s, long max_n, long *k, long *n) {
    const char *slash = s ? strchr(s, '/') : NULL;
    char *end = NULL;
    long a = 0, b = 0;
    int ok = slash && !bad_start(s, 0) && !bad_start(slash + 1, 0);
    if (ok) {
        errno = 0;
        a = strtol(s, &end, 10);
        ok = !errno && end == slash;
    }
    if (ok) {
        b = strtol(slash + 1, &end, 10);
        ok = !errno && !*end && b >= 1 && b <= max_n && a >= 1 && a <= b;
    }
    if (!ok)
        return cli_usage_error(cmd, "%s expects K/N with 1 <= K <= N <= %ld (e.g. 2/8), got '%s'", opt, max_n,
                               s ? s : "");
    *k = a;
    *n = b;
    return 0;
}

int cli_refuse_overwrite(const char *cmd, const char *out_opt, const char *out, const char *in_what,
                         const char *const *inputs, size_t n_inputs) {
    char err[9000];
    if (ds_refuse_overwrite(out_opt, out, in_what, inputs, n_inputs, err, sizeof err) == DS_OK) return 0;
    cli_error(cmd, "%s", err);
    return EXIT_BAD_INPUT;
}

int cli_refuse_overwrite_tokenizer(const char *cmd, const char *out_opt, const char *out, const char *spec) {
    char err[9000];
    ds_read_paths in = {.tokenizer = spec};
    if (ds_check_output(out_opt, out, &in, err, sizeof err) == DS_OK) return 0;
    cli_error(cmd, "%s", err);
    return EXIT_BAD_INPUT;
}

int cli_frame_token(const char *cmd, const char *opt, const tk_tokenizer *tok, const char *arg, int64_t *id) {
    if (!strcmp(arg, "none")) {
        *id = -1;
        return EXIT_OK;
    }
    if (!strcmp(arg, "default")) {
        *id = -2;
        return EXIT_OK;
    }
    uint32_t v;
    if (tk_token_id(tok, arg, &v) != TK_OK) {
        cli_error(cmd,
                  "%s '%s' is not a token of %s (give the text of an added or special token, e.g. "
                  "<|endoftext|>, or none)",
                  opt, arg, tk_name(tok));
        return EXIT_BAD_INPUT;
    }
    *id = v;
    return EXIT_OK;
}

int cli_load_tokenizer(const char *spec, const char *pattern, tk_tokenizer **out) {
    return cli_load_tokenizer_opts(spec, pattern, NULL, out);
}

int cli_load_tokenizer_opts(const char *spec, const char *pattern, const char *normalize, tk_tokenizer **out) {
    tk_load_opts o = {TK_PAT_NONE, NULL, TK_NORM_NONE};
    *out = NULL;
    if (!spec || !*spec) {
        cli_error(NULL, "no tokenizer given: pass --tokenizer with a .tiktoken file, a tokenizer.json, "
                        "a folder with encoder.json+vocab.bpe, or a name (gpt2, cl100k_base, o200k_base)");
        return EXIT_USAGE;
    }
    if (pattern && tk_pattern_spec(pattern, &o.pat, &o.regex) != TK_OK) {
        char shown[96];
        cli_error(NULL, "unknown --pattern '%s': use gpt2, cl100k, o200k or a regex",
                  tk_escape_text(pattern, strlen(pattern), shown, sizeof shown));
        return EXIT_USAGE;
    }
    if (normalize && tk_norm_parse(normalize, &o.norm) != TK_OK) {
        char shown[96];
        cli_error(NULL, "unknown --normalize '%s': use none, nfc or nfkc",
                  tk_escape_text(normalize, strlen(normalize), shown, sizeof shown));
        return EXIT_USAGE;
    }
    char err[512] = "";
    int rc = tk_load_ex(spec, &o, out, err, sizeof err);
    if (rc == TK_OK && *out) {
        /* a recognised file under another pattern or normalization gives other
         * ids than its own reference: allowed (the user asked), never silent */
        tk_pattern need = tk_known_pattern(*out);
        if (need != TK_PAT_NONE && o.regex)
            cli_warn(NULL,
                     "--pattern REGEX is not the pattern %s that %s needs: ids will differ from %s's own tokenizer",
                     tk_pattern_name(need), tk_name(*out), tk_name(*out));
        else if (o.pat != TK_PAT_NONE && need != TK_PAT_NONE && need != o.pat)
            cli_warn(NULL,
                     "--pattern %s differs from the pattern %s that %s needs: ids will differ from %s's own "
                     "tokenizer",
                     tk_pattern_name(o.pat), tk_pattern_name(need), tk_name(*out), tk_name(*out));
        if (need != TK_PAT_NONE && o.norm != TK_NORM_NONE)
            cli_warn(NULL, "--normalize %s: %s's own tokenizer does not normalize: ids will differ from it",
                     tk_norm_name(o.norm), tk_name(*out));
        return EXIT_OK;
    }
    const char *why = err[0] ? err : tk_strerror(rc);
    /* tk_load's own message already says what was tried; add a hint only without one */
    const char *hint = "";
    if (rc == TK_ERR_PATTERN)
        hint = " (this vocabulary is not a known one: pass --pattern gpt2|cl100k|o200k or its regex)";
    else if (!err[0] && rc == TK_ERR_NOT_FOUND)
        hint = " (pass a path, or set MKS_VOCAB_DIR to a folder holding <name>.tiktoken)";
    else if (!err[0] && rc == TK_ERR_IO) hint = " (check the path exists and is readable)";
    cli_error(NULL, "cannot load tokenizer '%s': %s%s", spec, why, hint);
    *out = NULL;
    return EXIT_BAD_INPUT;
}

int cli_ncpus(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

double cli_now(void) { return mc_now_s(); }

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cli_digits3_* are laid out for little-endian words (the digits first in memory, the count last)"
#endif
uint32_t cli_digits3_lead[1000], cli_digits3_full[1000];

__attribute__((constructor)) static void cli_digits3_init(void) {
    for (unsigned v = 0; v < 1000; v++) {
        unsigned char d[3] = {(unsigned char)('0' + v / 100), (unsigned char)('0' + v / 10 % 10),
                              (unsigned char)('0' + v % 10)};
        unsigned n = v >= 100 ? 3 : v >= 10 ? 2 : 1;
        uint32_t lead = (uint32_t)n << 24;
        for (unsigned k = 0; k < n; k++) lead |= (uint32_t)d[3 - n + k] << (8 * k);
        cli_digits3_lead[v] = lead; /* little-endian: the digits come first in memory */
        cli_digits3_full[v] = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16;
    }
}

void cli_columnar_note(const char *cmd) {
    ds_columnar_stats st;
    ds_columnar_stats_get(&st);
    if (!st.files) return;
    fprintf(stderr,
            "mkshards %s: %llu Parquet/Arrow file(s), %llu row group(s)/batch(es); Arrow held at most %.2f MiB for "
            "one row group's text column (%.2f MiB with a file's metadata; %s)\n",
            cmd, (unsigned long long)st.files, (unsigned long long)st.pieces,
            (double)st.largest_piece_bytes / 1048576.0, (double)st.peak_bytes / 1048576.0, ds_columnar_support());
}
