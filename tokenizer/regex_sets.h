/* regex_sets.h - character classes of tiktoken's regex dialect (Rust
 * regex-syntax) computed as code point sets from the references' Unicode
 * tables, for hf_regex.c (internal to the tokenizer module). */
#ifndef TK_REGEX_SETS_H
#define TK_REGEX_SETS_H

#include <stdbool.h>
#include <stddef.h>

/* At re[*pos]: a '[' class or a \p / \P escape, in tiktoken's dialect.
 * When it holds nothing that PCRE2's own reading gets wrong (no script, no
 * nested class, no && / -- / ~~, no \S \W \D or Any / ASCII / Assigned in a
 * class), *plain is set, *pos left and 0 returned: hf_regex.c translates it
 * as before. Otherwise the class is evaluated as Rust does (left-to-right set
 * operations, nested classes, Unicode 16.0 general categories and scripts)
 * and written for PCRE2 as one code-point item that matches exactly that set
 * whatever PCRE2's Unicode version (*out, malloc'd, NUL-terminated; *pos
 * after the construct). icase: a (?i) is in force, under which Rust folds
 * the set by its own case tables: refused. 0, or TK_ERR_UNSUPPORTED /
 * TK_ERR_FORMAT / TK_ERR_NOMEM with err set. */
int tk_rx_rust_set(const char *re, size_t n, size_t *pos, bool icase, bool *plain, char **out, char *err,
                   size_t errlen);

/* Oniguruma's \p{NAME} (or \P{NAME}: negated) when NAME is a script (or
 * Unknown): its code points by Unicode 16.0's Script property, as the body of
 * a PCRE2 class ("\x{2E80}-\x{2E99}..."; *out malloc'd). 0; 1 when NAME is
 * no script (nothing written); TK_ERR_NOMEM. */
int tk_rx_script_class(const char *name, size_t len, bool negated, char **out);

#endif
