/* pattern.c - tk_pattern_from_regex: a regex given by a tokenizer file, as
 * one of the built-in pre-tokenizers when it is exactly one of their forms. */
#include "tk_internal.h"

#include <string.h>

#define CL100K_OLD_HEAD "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
#define CL100K_OLD_TAIL "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

int tk_regex_cl100k_hf(const char *re) {
    /* the older cl100k spelling (Llama 3's tokenizer.json), and Qwen2's
     * (and Qwen v1's tokenization_qwen.py PAT_STR): the same with \p{N} */
    if (strcmp(re, CL100K_OLD_HEAD "\\p{N}{1,3}" CL100K_OLD_TAIL) == 0) return 1;
    if (strcmp(re, CL100K_OLD_HEAD "\\p{N}" CL100K_OLD_TAIL) == 0) return 2;
    return 0;
}

/* A byte a White_Space character other than \r and \n may hold (any byte
 * >= 0x80 counted: a superset). */
static bool ws_byte(uint8_t b) {
    return b == ' ' || b == '\t' || b == 0x0b || b == 0x0c || (b >= 0x1c && b <= 0x1f) || b >= 0x80;
}

bool tk_vocab_joins_nl_ws(const tk_tokenizer *t) {
    /* Where the two spellings differ, the text ends with A B: A up to the
     * run's last newline, B whitespace without one. A token across the cut
     * ends in such whitespace right after a \r or \n. */
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        const uint8_t *p = t->arena + t->tok_off[r], *e = t->arena + t->tok_off[r + 1], *x = e;
        while (x > p && ws_byte(x[-1])) x--;
        if (x < e && x > p && (x[-1] == '\n' || x[-1] == '\r')) return true;
    }
    return false;
}

tk_pattern tk_pattern_from_regex(const char *re) {
    /* exact matches with our exports, the README forms and Python's forms */
    static const struct {
        const char *re;
        tk_pattern pat;
    } forms[] = {
        {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", TK_PAT_GPT2},
        {"'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ?\\p{N}++| ?[^\\s\\p{L}\\p{N}]++|\\s++$|\\s+(?!\\S)|\\s", TK_PAT_GPT2},
        {CL100K_OLD_HEAD "\\p{N}{1,3}" CL100K_OLD_TAIL, TK_PAT_CL100K}, /* the older spelling (tk_regex_cl100k_hf) */
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
