/* mks_common.h - the common layer below every library (tk, ds, tr, the
 * tools): the small utilities each of them used to carry its own copy of.
 * Plain C11 + POSIX, no dependency on any other module of the project (tk
 * sits above it, so nothing here may include tk.h or ds.h).
 *
 *   mc_set_err      printf-style message into a caller's buffer
 *   mc_now_s        monotonic clock, seconds
 *   mc_env_uint     a launcher's number from the environment (rank, size, task id)
 *   mc_utf8_*       strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF):
 *                   check a buffer or one sequence, write a code point
 *   mc_open_regular open an untrusted path that must be a regular file
 *   mc_read_regular ... and read it whole, under a byte cap
 *   mc_atomic_write write a file so that a reader sees the old or the new
 *                   bytes, never a mix: one fsync policy for every writer
 *
 * Return values: the functions that can fail return MC_OK (0) or a negative
 * MC_ERR_*; callers map them to their own module's codes. */
#ifndef MKS_COMMON_H
#define MKS_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MC_OK = 0,
    MC_ERR_IO = -1,    /* cannot open, stat, read or write; not a regular file */
    MC_ERR_LIMIT = -2, /* the file is larger than the caller's cap */
    MC_ERR_NOMEM = -3,
};

/* Formats into err[0..errlen) (always NUL-terminated, truncated to fit);
 * does nothing when err is NULL or errlen is 0. Messages that carry bytes of
 * an untrusted input escape them first (tk_escape_text, cli_error). */
void mc_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mc_vset_err(char *err, size_t errlen, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* Bytes as they may be shown in a message (terminal escapes in a hostile
 * file name or token must not reach a terminal): valid UTF-8 as it is;
 * control bytes (< 0x20, 0x7F, U+0080..U+009F), '"', '\\' and bytes that are
 * not valid UTF-8 as \xNN; cut with "..." to fit cap (at least 8, else ""),
 * always NUL-terminated. Returns out. The messages of this layer show paths
 * this way. */
const char *mc_escape_text(const void *text, size_t n, char *out, size_t cap);

/* CLOCK_MONOTONIC in seconds: for durations and deadlines, never wall time. */
double mc_now_s(void);

/* A launcher's number in the environment (MPI, PMI, Slurm ranks, sizes, job
 * array ids), parsed one way for everyone who reads them (llmtrain's launch
 * detection, `mkshards --part auto`). Callers keep their own policy on what
 * an unset or malformed variable means.
 *   mc_env_uint:       NAME is a plain decimal (digits only) <= max.
 *   mc_env_first_uint: the first number of a Slurm per-node list such as
 *                      "4(x2),3" (-> 4): digits, then end, '(' or ','.
 * Both return 1 (set and valid, into *v), 0 (unset or empty), -1 (set to
 * anything else, including a value over max). */
int mc_env_uint(const char *name, uint64_t max, uint64_t *v);
int mc_env_first_uint(const char *name, uint64_t max, uint64_t *v);

/* Length of the longest prefix of p[0..n) that is valid UTF-8 (Rust's
 * str::from_utf8 valid_up_to, jansson's check): 2-4 byte sequences without
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF; a
 * sequence cut by the end of the buffer is invalid. n when all valid. */
size_t mc_utf8_valid_prefix(const uint8_t *p, size_t n);
/* 1 when all of p[0..n) is valid UTF-8, else 0. */
int mc_utf8_valid(const uint8_t *p, size_t n);
/* Length of the one valid UTF-8 sequence at p[0..n) (1-4 bytes), 0 if the
 * bytes there are not one (or n is 0). Inline: the JSON scanners (mc_json.h)
 * call it once per non-ASCII character. */
static inline size_t mc_utf8_seq(const uint8_t *p, size_t n) {
    if (!n) return 0;
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    /* the second byte's range is narrower after E0 / ED / F0 / F4 (Unicode table 3-7) */
    if (c >= 0xC2 && c <= 0xDF) return n >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] > 0x9F) return 0; /* surrogates */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && p[1] > 0x8F) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0; /* a continuation byte, C0/C1 (overlong), F5..FF */
}
/* Writes code point cp (a scalar value: <= U+10FFFF, no surrogate; the
 * caller checks) as 1-4 UTF-8 bytes at o, which has room for 4; returns how
 * many. Inline: the JSON string decoders call it once per \u escape. */
static inline size_t mc_utf8_put(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | cp >> 6);
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Opens path for reading when it is a regular file. The open is
 * O_NONBLOCK (a FIFO with no writer cannot hang it before fstat sees what it
 * is), then fstat must say S_ISREG (a FIFO, device, socket or folder is
 * refused: a reader would block or read without end), then the flag is
 * cleared again. Symbolic links to regular files are followed, as the
 * inputs' folder walk follows them. max_bytes: 0 = no cap, else a larger
 * file is refused (MC_ERR_LIMIT). *size (may be NULL) gets the size fstat
 * gave (also when MC_ERR_LIMIT refuses it). Returns the descriptor (>= 0, O_CLOEXEC) or a negative MC_ERR_*. */
int mc_open_regular(const char *path, uint64_t max_bytes, uint64_t *size, char *err, size_t errlen);

/* Reads the whole regular file path (mc_open_regular's checks), at most
 * max_bytes (required, > 0): *data gets a malloc'd buffer of *len bytes plus
 * a NUL after them (for line parsers). The read must return exactly the size
 * fstat gave: a file that grows or shrinks while read is refused. On
 * MC_ERR_LIMIT *len is the file's size (for the caller's message). */
int mc_read_regular(const char *path, size_t max_bytes, uint8_t **data, size_t *len, char *err, size_t errlen);

/* Atomic replace, the one policy: a temporary in the same folder (tmp, or
 * PATH.tmp when tmp is NULL: the ".tmp" suffix is what the shard folders'
 * stale-file cleaning and the output checks know; a writer that other
 * processes may race on the same path passes its own, e.g. PATH.tmp.PID).
 * A file or link planted under the temporary's name is removed first and the
 * temporary is created O_EXCL|O_NOFOLLOW, so it can neither block on a FIFO
 * nor write through a link; it is filled, fsync'd, closed, renamed over
 * path, then the folder is fsync'd so the rename survives a crash. On any
 * failure the temporary is removed and path is untouched.
 *
 * fill writes the content to fd and returns 0, or nonzero to abandon the
 * write (a message the fill put in err is kept). mode: the new file's
 * permission bits (before umask). */
typedef int (*mc_fill_fn)(int fd, void *ctx, char *err, size_t errlen);
int mc_atomic_write_fn(const char *path, const char *tmp, unsigned mode, mc_fill_fn fill, void *ctx, char *err,
                       size_t errlen);
/* The same for n buffers written one after the other. */
int mc_atomic_write(const char *path, const char *tmp, unsigned mode, const void *const *part, const size_t *len,
                    size_t n, char *err, size_t errlen);
/* The two halves, for a writer that streams into its temporary over time:
 * mc_atomic_open creates tmp as above (returns the fd or MC_ERR_IO);
 * mc_atomic_commit(fd, failed, ...) fsyncs and closes fd, renames tmp over
 * path and fsyncs the folder; with failed != 0 (or when any step fails) it
 * closes fd and removes tmp instead. fd is closed in every case. */
int mc_atomic_open(const char *tmp, unsigned mode, char *err, size_t errlen);
int mc_atomic_commit(int fd, int failed, const char *tmp, const char *path, char *err, size_t errlen);
/* write(2) all of p[0..n) to fd (EINTR retried, 1 GiB per call): 0 or -1. */
int mc_write_all(int fd, const void *p, size_t n);
/* fsync the folder that holds path (its entry of a rename): 0 or -1. */
int mc_fsync_dir_of(const char *path);

#ifdef __cplusplus
}
#endif
#endif
