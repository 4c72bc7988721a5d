/* pattern.c - tk_pattern_from_regex: a regex given by a tokenizer file, as
 * one of the built-in pre-tokenizers when it is exactly one of their forms. */
#include "tk_internal.h"

#include <string.h>

tk_pattern tk_pattern_from_regex(const char *re) {
    /* exact matches with our exports, the README forms and Python's forms */
    static const struct {
        const char *re;
        tk_pattern pat;
    } forms[] = {
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", TK_PAT_GPT2},
        {"'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s", TK_PAT_GPT2},
        {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*["
         "\\r\\n]+|\\s+(?!\\S)|\\s+",
         TK_PAT_CL100K},
        {"'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|"
         "\\s*[\\r\\n]|\\s+(?!\\S)|\\s",
         TK_PAT_CL100K},
    };
    for (int p = TK_PAT_GPT2; p <= TK_PAT_O200K; p++)
        if (strcmp(re, tk_pattern_regex((tk_pattern)p)) == 0) return (tk_pattern)p;
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++)
        if (strcmp(re, forms[k].re) == 0) return forms[k].pat;
    return TK_PAT_NONE;
}
