/* hf_ucd.h - HF tokenizers' own Unicode versions where they differ from the
 * system utf8proc's (15.0): its NFC/NFD/NFKC/NFKD and StripAccents know
 * Unicode 9.0 only (the unicode-normalization-alignments crate), its
 * Lowercase is Rust's (17.0), its Punctuation pre-tokenizer's table older
 * than 9.0. Tables in hf_ucd_data.c (gen_hf_ucd.py). */
#ifndef TK_HF_UCD_H
#define TK_HF_UCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk_internal.h" /* tk_bytes */

extern const uint32_t tk_hf_new_ranges[][2];
extern const size_t tk_hf_n_new_ranges;
extern const uint32_t tk_hf_lower_pairs[][2];
extern const size_t tk_hf_n_lower_pairs;
extern const uint32_t tk_hf_mark_flips[];
extern const size_t tk_hf_n_mark_flips;
extern const uint32_t tk_hf_punct_flips[];
extern const size_t tk_hf_n_punct_flips;

/* cp was assigned after Unicode 9.0: HF's normalizers treat it as
 * unassigned (no decomposition, combining class 0, composes with nothing,
 * not a mark). */
bool tk_hf_nf_new(int32_t cp);
/* utf8proc_category(cp) as far as HF's StripAccents sees it (a mark or
 * not, by Unicode 9.0): UTF8PROC_CATEGORY_CN for a tk_hf_nf_new code point,
 * MN / LO for the few whose category changed since. */
int tk_hf_nf_category(int32_t cp);
/* HF's Punctuation pre-tokenizer disagrees with utf8proc's P* on cp (its
 * tables are older: U+2E43 and later are not punctuation, U+166D is). */
bool tk_hf_punct_flip(int32_t cp);
/* HF's Lowercase of cp when it is one character (all but U+0130). */
int32_t tk_hf_tolower(int32_t cp);
/* tk_nm_unicode (normalize.c) as HF's NFC/NFD/NFKC/NFKD: the text between
 * tk_hf_nf_new code points normalized, those copied as they are. */
int tk_hf_nm_unicode(int kind, const uint8_t *s, size_t n, tk_bytes *out, size_t cap);

#endif
