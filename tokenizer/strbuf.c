/* strbuf.c - see strbuf.h. */
#include "strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tk_sb_put(tk_strbuf *b, const char *p, size_t n) {
    if (b->oom || !n) return; /* n == 0 may come with p == NULL, which memcpy may not take */
    if (b->max && n > b->max - b->len) {
        b->oom = b->too_large = true;
        return;
    }
    if (n >= b->cap - b->len) { /* room for n bytes and the NUL */
        if (n > SIZE_MAX / 4 - b->len) {
            b->oom = true;
            return;
        }
        size_t c = b->cap ? b->cap * 2 : 256;
        while (c - b->len < n + 1) c *= 2;
        char *q = realloc(b->s, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->s = q;
        b->cap = c;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

void tk_sb_puts(tk_strbuf *b, const char *p) { tk_sb_put(b, p, strlen(p)); }

void tk_sb_cp_range(tk_strbuf *b, uint32_t lo, uint32_t hi) {
    char tmp[32];
    if (lo == hi) snprintf(tmp, sizeof tmp, "\\x{%X}", (unsigned)lo);
    else snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", (unsigned)lo, (unsigned)hi);
    tk_sb_puts(b, tmp);
}
