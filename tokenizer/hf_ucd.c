/* hf_ucd.c - HF's normalizers' Unicode versions (hf_ucd.h): lookups in the
 * generated tables of hf_ucd_data.c. */
#include "hf_ucd.h"

#include "hf_internal.h" /* u8_len */
#include "normalize.h"

#include <utf8proc.h>

/* The BMP's new code points as a bitmap (8 KiB, built on first use): a
 * normalizer asks for every non-ASCII character, and a search per character
 * cost 13% of Qwen2's encode on multilingual text. Above the BMP (rare) the
 * ranges are searched. */
static uint64_t g_bmp[0x10000 / 64];
static int g_bmp_ready;

static void bmp_build(void) {
    for (size_t k = 0; k < tk_hf_n_new_ranges && tk_hf_new_ranges[k][0] < 0x10000; k++)
        for (uint32_t c = tk_hf_new_ranges[k][0]; c <= tk_hf_new_ranges[k][1] && c < 0x10000; c++)
            __atomic_fetch_or(&g_bmp[c / 64], 1ull << (c % 64), __ATOMIC_RELAXED); /* idempotent: a race builds twice */
    __atomic_store_n(&g_bmp_ready, 1, __ATOMIC_RELEASE);
}

bool tk_hf_nf_new(int32_t cp) {
    if (cp < (int32_t)tk_hf_new_ranges[0][0] || cp > 0x10FFFF) return false;
    if (cp < 0x10000) {
        if (!__atomic_load_n(&g_bmp_ready, __ATOMIC_ACQUIRE)) bmp_build();
        return __atomic_load_n(&g_bmp[cp / 64], __ATOMIC_RELAXED) >> (cp % 64) & 1;
    }
    size_t lo = 0, hi = tk_hf_n_new_ranges; /* the first range ending at or after cp */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tk_hf_new_ranges[mid][1] < (uint32_t)cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < tk_hf_n_new_ranges && tk_hf_new_ranges[lo][0] <= (uint32_t)cp;
}

int tk_hf_nf_category(int32_t cp) {
    if (tk_hf_nf_new(cp)) return UTF8PROC_CATEGORY_CN;
    int c = utf8proc_category(cp);
    for (size_t k = 0; k < tk_hf_n_mark_flips; k++) /* three entries */
        if (tk_hf_mark_flips[k] == (uint32_t)cp)
            return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME
                       ? UTF8PROC_CATEGORY_LO
                       : UTF8PROC_CATEGORY_MN;
    return c;
}

bool tk_hf_punct_flip(int32_t cp) {
    if (cp < (int32_t)tk_hf_punct_flips[0] || cp > (int32_t)tk_hf_punct_flips[tk_hf_n_punct_flips - 1]) return false;
    size_t lo = 0, hi = tk_hf_n_punct_flips;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tk_hf_punct_flips[mid] < (uint32_t)cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < tk_hf_n_punct_flips && tk_hf_punct_flips[lo] == (uint32_t)cp;
}

int32_t tk_hf_tolower(int32_t cp) {
    size_t lo = 0, hi = tk_hf_n_lower_pairs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tk_hf_lower_pairs[mid][0] < (uint32_t)cp) lo = mid + 1;
        else hi = mid;
    }
    if (lo < tk_hf_n_lower_pairs && tk_hf_lower_pairs[lo][0] == (uint32_t)cp) return (int32_t)tk_hf_lower_pairs[lo][1];
    return utf8proc_tolower(cp);
}

/* A new code point is a starter that nothing composes with and that blocks
 * reordering across it, so normalizing the text on each side of it alone
 * gives what normalizing the whole would under Unicode 9.0. */
int tk_hf_nm_unicode(int kind, const uint8_t *s, size_t n, tk_bytes *out, size_t cap) {
    size_t from = 0, i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int32_t cp;
        size_t l;
        /* 2 and 3 bytes decoded here (a malformed one is not split at:
         * tk_nm_unicode keeps its bytes either way) */
        if ((s[i] & 0xE0) == 0xC0 && i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
            cp = (s[i] & 0x1F) << 6 | (s[i + 1] & 0x3F);
            l = 2;
        } else if ((s[i] & 0xF0) == 0xE0 && i + 2 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
            cp = (s[i] & 0x0F) << 12 | (s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
            l = 3;
        } else {
            l = u8_len(s, n, i, &cp);
        }
        if (cp >= 0 && tk_hf_nf_new(cp)) {
            int rc = tk_nm_unicode(kind, s + from, i - from, out, cap);
            if (rc || (rc = tk_bytes_put_capped(out, s + i, l, cap))) return rc;
            from = i + l;
        }
        i += l;
    }
    return tk_nm_unicode(kind, s + from, n - from, out, cap);
}
