/* strbuf.h - the growable text buffer the regex translators write their
 * PCRE2 patterns into (hf_regex.c, regex_sets.c; internal to the tokenizer
 * module). A failed write marks the buffer and every later write does
 * nothing, so a writer checks oom once, after the last write. */
#ifndef TK_STRBUF_H
#define TK_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *s; /* malloc'd, NUL-terminated once anything was written; the caller frees it */
    size_t len, cap;
    size_t max;     /* the longest content accepted; 0: no limit */
    bool oom;       /* no memory, or over max */
    bool too_large; /* over max */
} tk_strbuf;

/* Appends p[0..n) (n == 0: nothing, p may be NULL). */
void tk_sb_put(tk_strbuf *b, const char *p, size_t n);
void tk_sb_puts(tk_strbuf *b, const char *p);
/* A code point range as a PCRE2 class item: "\x{LO}" when lo == hi, else
 * "\x{LO}-\x{HI}" (upper-case hex). */
void tk_sb_cp_range(tk_strbuf *b, uint32_t lo, uint32_t hi);

#endif
