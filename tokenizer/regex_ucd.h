/* regex_ucd.h - the system PCRE2's general categories against the
 * references' (regex_ucd.c; internal to the tokenizer module). */
#ifndef TK_REGEX_UCD_H
#define TK_REGEX_UCD_H

#include <stddef.h>
#include <stdint.h>

enum { TK_UCD_NCAT = 30 }; /* UTF8PROC_CATEGORY_CN (0) .. UTF8PROC_CATEGORY_CO (29) */

typedef struct {
    uint32_t cp;
    uint8_t pcre_cat; /* PCRE2's category of cp */
    uint8_t our_cat;  /* tk_ucd_category(cp): the references' */
} tk_ucd_diff;

/* The code points whose category PCRE2 gives differently, sorted by cp
 * (none when its Unicode version is ours); measured once per process, thread
 * safe. *pcre_version: PCRE2's Unicode version. 0, or -1 when the differences
 * could not be measured (no memory): then *n is 0 and the caller must not
 * assume PCRE2 agrees. */
int tk_ucd_pcre2_diff(const tk_ucd_diff **diff, size_t *n, const char **pcre_version);

/* A general-category property name (L, Lu, LC, L&, N, Nd, ... as in \p{..};
 * case, '_', '-' and ' ' ignored) -> the set of categories, bit k =
 * category k. 0, or -1 for any other name (scripts, binary properties). */
int tk_ucd_category_mask(const char *name, size_t len, uint32_t *mask);

#endif
