/* rank_pretok.h - internals of a rank file's own pre-tokenizer regex and
 * normalization (rank_pretok.c; the public side is tk_load_ex /
 * tk_set_pretokenizer in tk.h). */
#ifndef TK_RANK_PRETOK_H
#define TK_RANK_PRETOK_H

#include "tk_internal.h"

/* The pattern a rank loader is given when the caller attaches a regex right
 * after the load (tk_load_ex): the loader takes it as a given pattern; a
 * known file keeps its own in its tables and image; no other engine takes
 * it (load_resolve.c). Never reaches the pre-tokenizers. */
#define TK_PAT_REGEX ((tk_pattern)4)

/* tk_regex_compile's pattern syntax with tiktoken's meaning (hf_regex.c's
 * top: Rust fancy-regex, $ and ^ the text's end and start, X{n,m}+
 * possessive). */
int tk_regex_compile_tiktoken(const char *re, size_t n, tk_regex **out, char *err, size_t errlen);

#endif
