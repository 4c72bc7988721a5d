/* hf_bert.c - what BERT's tokenizer.json files run around their WordPiece
 * model, with HF tokenizers 0.23.3's semantics: the BertNormalizer steps
 * (hf_config.c splits one BertNormalizer into NM_BERT_CLEAN, NM_BERT_CJK,
 * NFD + NM_BERT_MN and Lowercase, in HF's order) and the WordPiece decoder
 * step. BertPreTokenizer needs nothing here: it is WhitespaceSplit then
 * Punctuation (Isolated), which hf_config.c sets up from the existing steps.
 *
 * Unicode: HF's is_other / is_mark_nonspacing come from the unicode_categories
 * crate (Unicode 8.0): utf8proc's categories (15.0) with the code points
 * where they part (hf_bert_ucd_data.c, gen_hf_bert_ucd.py, asked of HF);
 * is_whitespace is Rust's char::is_whitespace (White_Space: is_ws), the NFD
 * HF's 9.0 one (tk_hf_nm_unicode), the CJK ranges HF's own list. */
#include "hf_internal.h"

extern const uint32_t tk_hf_bert_other_flips[], tk_hf_bert_mn_flips[];
extern const size_t tk_hf_bert_n_other_flips, tk_hf_bert_n_mn_flips;

static bool in_sorted(const uint32_t *t, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t[mid] == cp) return true;
        if (t[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* unicode_categories' is_other: Cc, Cf, Co, Cs of Unicode 8.0 (not Cn). */
static bool bert_other(int32_t cp) {
    int c = utf8proc_category(cp);
    bool o = c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CO ||
             c == UTF8PROC_CATEGORY_CS;
    return o != in_sorted(tk_hf_bert_other_flips, tk_hf_bert_n_other_flips, (uint32_t)cp);
}

/* HF's is_chinese_char: its list of CJK blocks (0x2B920, not 0x2B820, as
 * HF writes it). */
static bool bert_cjk(int32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* unicode_categories' is_mark_nonspacing (Mn of Unicode 8.0). */
static bool bert_mn(int32_t cp) {
    return (utf8proc_category(cp) == UTF8PROC_CATEGORY_MN) !=
           in_sorted(tk_hf_bert_mn_flips, tk_hf_bert_n_mn_flips, (uint32_t)cp);
}

/* clean_text's verdict on cp: 0 drop, 1 a space, 2 keep. Invalid UTF-8
 * (cp < 0; HF's strings never hold it) is kept. */
static int clean_verdict(int32_t cp) {
    if (cp < 0) return 2;
    if (cp == '\t' || cp == '\n' || cp == '\r') return 1;
    if (cp == 0 || cp == 0xFFFD || bert_other(cp)) return 0; /* before the space test: U+000B, U+0085 are Cc */
    return is_ws(cp) ? 1 : 2;
}

bool tk_hf_bert_drops(int kind, int32_t cp) {
    if (cp < 0) return false;
    if (kind == NM_BERT_CLEAN) return clean_verdict(cp) == 0;
    if (kind == NM_BERT_MN) return bert_mn(cp);
    return false;
}

/* clean_text: control characters (Cc, Cf, Co but tab, LF, CR), NUL and
 * U+FFFD dropped; White_Space and tab, LF, CR made a space. */
int tk_hf_nm_bert_clean(const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    size_t i = 0, kept = 0; /* s[kept, i) is copied as one run */
    int rc;
    while (i < n) {
        if (s[i] >= 0x20 && s[i] < 0x7F) {
            i++;
            continue;
        }
        int32_t cp;
        size_t l = u8_len(s, n, i, &cp);
        int v = clean_verdict(cp);
        if (v != 2) {
            if ((rc = tk_bytes_put_capped(out, s + kept, i - kept, cap))) return rc;
            if (v == 1 && (rc = tk_bytes_put_capped(out, " ", 1, cap))) return rc;
            kept = i + l;
        }
        i += l;
    }
    return tk_bytes_put_capped(out, s + kept, n - kept, cap);
}

/* handle_chinese_chars: a space on each side of every CJK ideograph. */
int tk_hf_nm_bert_cjk(const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    size_t i = 0, kept = 0;
    int rc;
    while (i < n) {
        if (s[i] < 0xE3) { /* below U+3000: no ideograph starts with such a byte */
            i++;
            continue;
        }
        int32_t cp;
        size_t l = u8_len(s, n, i, &cp);
        if (bert_cjk(cp)) {
            if ((rc = tk_bytes_put_capped(out, s + kept, i - kept, cap)) ||
                (rc = tk_bytes_put_capped(out, " ", 1, cap)) || (rc = tk_bytes_put_capped(out, s + i, l, cap)) ||
                (rc = tk_bytes_put_capped(out, " ", 1, cap)))
                return rc;
            kept = i + l;
        }
        i += l;
    }
    return tk_bytes_put_capped(out, s + kept, n - kept, cap);
}

/* strip_accents after NFD: nonspacing marks dropped. */
static bool drops_mn(int32_t cp) { return cp >= 0 && bert_mn(cp); }

int tk_hf_nm_bert_mn(const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    return tk_hf_drop_chars(s, n, drops_mn, out, cap);
}

/* ---- the WordPiece decoder ------------------------------------------------ */

/* HF's cleanup: these replacements, each over the whole token in turn
 * (Rust's str::replace: left to right, not overlapping). */
static const char *const k_cleanup[][2] = {{" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
                                           {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
                                           {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};

static int replace_all(const uint8_t *s, size_t n, const char *from, const char *to, tk_bytes *out) {
    size_t fl = strlen(from), tl = strlen(to), i = 0, kept = 0;
    int rc;
    out->len = 0;
    while (i + fl <= n) {
        if (s[i] == (uint8_t)from[0] && memcmp(s + i, from, fl) == 0) {
            if ((rc = bput(out, s + kept, i - kept)) || (rc = bput(out, to, tl))) return rc;
            i += fl;
            kept = i;
        } else {
            i++;
        }
    }
    return bput(out, s + kept, n - kept);
}

/* One token through the WordPiece decoder: not the first of the text
 * (first false: a later chunk of a stream), it loses the prefix or gains a
 * space; then cleanup. The result into out (a and b: scratch). */
int tk_hf_dec_wordpiece(const uint8_t *pfx, size_t plen, bool cleanup, bool lead, const uint8_t *p, size_t n,
                        tk_bytes *a, tk_bytes *b, const uint8_t **res, size_t *rn) {
    int rc;
    a->len = 0;
    if (!lead) {
        if (n >= plen && memcmp(p, pfx, plen) == 0) p += plen, n -= plen;
        else if ((rc = bput(a, " ", 1))) return rc;
    }
    if ((rc = bput(a, p, n))) return rc;
    tk_bytes *cur = a, *nxt = b;
    if (cleanup) {
        /* a token without a space is left as it is by every replacement */
        if (!cur->len || !memchr(cur->data, ' ', cur->len)) {
            *res = cur->data ? cur->data : (const uint8_t *)"";
            *rn = cur->len;
            return TK_OK;
        }
        for (size_t k = 0; k < sizeof k_cleanup / sizeof k_cleanup[0]; k++) {
            if ((rc = replace_all(cur->data, cur->len, k_cleanup[k][0], k_cleanup[k][1], nxt))) return rc;
            tk_bytes *x = cur;
            cur = nxt;
            nxt = x;
        }
    }
    *res = cur->data ? cur->data : (const uint8_t *)"";
    *rn = cur->len;
    return TK_OK;
}
