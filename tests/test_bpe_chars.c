/* Merging from characters (tokenizer/bpe.c, "merging from characters"):
 * where a piece's merge starts from whole or half-merged characters instead
 * of bytes, the tokens must be exactly those of the textbook merge loop on
 * the bytes (tiktoken's algorithm, written here independently on top of
 * tk_rank_of). Pieces are drawn the way pre-tokenizers cut text (an optional
 * leading space, then letters of one script, sometimes mixed) from 14
 * scripts, plus pieces with 4-byte characters, invalid UTF-8 and characters
 * next to every kind of neighbour; and the shared corpus' multilingual
 * documents, cut at spaces. Every vector path the CPU has, the straddle
 * minima from a table image and built in place, for gpt2, cl100k_base and
 * o200k_base. The test also checks that most multilingual pieces do take
 * the character start, so it cannot pass with the path switched off. */
#include "ref_bpe.h"
#include "test_corpus.h"
#include "tk.h"
#include "tk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { return test_rnd(&rng); }

/* Reference: the whole piece if it is a token (as tiktoken looks it up
 * first), else the textbook merge loop. */
static size_t reference_piece(const tk_tokenizer *t, const uint8_t *p, size_t n, uint32_t *out) {
    int64_t whole = tk_rank_of(t, p, n);
    if (whole < 0) return reference_bpe(t, p, n, out);
    out[0] = (uint32_t)whole;
    return 1;
}

typedef struct {
    size_t pieces, from_chars;
} tally;

static void check(const tk_tokenizer *t, const char *name, const uint8_t *p, size_t n, tally *c) {
    uint32_t ref[4200];
    size_t m = reference_piece(t, p, n, ref);
    c->pieces++;
    c->from_chars += (size_t)tk_bpe_char_start(t, p, n);
    int top = tk_simd_level(-1);
    for (int level = 0; level <= top; level++) {
        tk_simd_level(level);
        tk_ids ids = {0};
        int rc = tk_bpe_piece(t, p, n, TK_NO_RANK, &ids);
        if (rc || ids.len != m || memcmp(ids.ids, ref, m * sizeof *ref)) {
            if (failures < 20) {
                fprintf(stderr, "FAIL %s simd %d rc %d: %zu tokens vs reference %zu for piece (%zu bytes):", name,
                        level, rc, ids.len, m, n);
                for (size_t k = 0; k < n; k++) fprintf(stderr, " %02x", p[k]);
                fprintf(stderr, "\n");
            }
            failures++;
        }
        tk_ids_free(&ids);
    }
    tk_simd_level(-1);
}

/* Letters of each script (UTF-8), ASCII and 4-byte characters. */
static const char *const scripts[] = {
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЭЮЯ", /* Cyrillic */
    /* CJK */
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以"
    "生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想"
    "看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但"
    "身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机"
    "给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信"
    "北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通"
    "目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司"
    "利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛"
    "林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远"
    "资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步"
    "完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱"
    "党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据"
    "导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴",
    "กขคฆงจฉชซฌญฎฏฐฑฒณดตถทธนบปผฝพฟภมยรลวศษสหฬอฮะัาำิีึืุูเแโใไ่้๊๋็์",           /* Thai */
    "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ",      /* Greek */
    "ابتثجحخدذرزسشصضطظعغفقكلمنهويىةءآأإؤئ",                         /* Arabic */
    "אבגדהוזחטיכלמנסעפצקרשתךםןףץ",                                  /* Hebrew */
    "अआइईउऊएऐओऔकखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसहािीुूेैोौंः्",            /* Devanagari */
    "가나다라마바사아자차카타파하한국어의는을를이가에서고다요습니", /* Hangul */
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコ", /* kana */
    "áéíóúàèìòùâêîôûäëïöüçñãõøåæœßÁÉÍÓÚÀÈÌÒÙÂÊÎÔÛÄËÏÖÜÇÑ", /* Latin accents */
    "ąćęłńóśźżčďěňřšťůžőűăîșțğışəğ",                       /* Latin extended */
    "ԱԲԳԴԵԶԷԸԹԺԻԼԽԾԿՀՁՂՃՄՅՆՇՈՉՊՋՌՍՎՏՐՑՒՓՔՕՖաբգդեզէըթ",     /* Armenian */
    "აბგდევზთიკლმნოპჟრსტუფქღყშჩცძწჭხჯჰ",                   /* Georgian */
    "€£¥©®°±µ¶·×÷‘’“”–—…•™←→↑↓∀∂∈∑√∞≈≠≤≥",                 /* symbols */
};
#define N_SCRIPTS (sizeof scripts / sizeof scripts[0])
static const char ascii[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"()-_";
static const char *const four_byte[] = {"😀", "😂", "👍", "🎉", "🚀", "𝔸", "𠀀", "🤔"};

/* One UTF-8 character of s at random (s: UTF-8 text). */
static size_t pick_char(const char *s, uint8_t *dst) {
    size_t len = strlen(s), at = rnd() % len;
    while (at > 0 && ((uint8_t)s[at] & 0xC0) == 0x80) at--;
    size_t n = 1;
    while (at + n < len && ((uint8_t)s[at + n] & 0xC0) == 0x80) n++;
    memcpy(dst, s + at, n);
    return n;
}

/* A piece as a pre-tokenizer cuts it, or (mode 3-4) anything. */
static size_t make_piece(uint8_t *p, size_t cap) {
    size_t n = 0, target = 2 + rnd() % (rnd() % 32 == 0 ? 250 : 40);
    int mode = (int)(rnd() % 5), a = (int)(rnd() % N_SCRIPTS), b = (int)(rnd() % N_SCRIPTS);
    if (rnd() % 2) p[n++] = ' ';
    while (n + 4 < cap && n < target) {
        uint64_t r = rnd() % 100;
        if (mode == 0 || r < 60) n += pick_char(scripts[a], p + n);      /* one script */
        else if (mode == 1 && r < 90) n += pick_char(scripts[b], p + n); /* two mixed */
        else if (mode == 2 && r < 95) p[n++] = (uint8_t)ascii[rnd() % (sizeof ascii - 1)];
        else if (mode == 3 && r < 90) { /* 4-byte characters */ const char *f = four_byte[rnd() % 8];
            memcpy(p + n, f, strlen(f));
            n += strlen(f);
        } else if (mode == 4 && r < 70) p[n++] = (uint8_t)(rnd() % 256); /* bytes: usually invalid UTF-8 */
        else if (r < 97) n += pick_char(scripts[a], p + n);
        else p[n++] = ' ';
    }
    return n > 255 ? 255 : n; /* may cut a character: invalid at the end */
}

/* The first MiB of the shared corpus' multilingual documents (raw UTF-8
 * JSONL), cut before spaces as the built-in patterns cut words: pieces of
 * 3..255 bytes. */
static const uint8_t *corpus;
static size_t corpus_len;

static void load_corpus(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/corpus/multi.jsonl.zst", MKS_SHARED_DIR);
    size_t len = 0;
    corpus = (const uint8_t *)test_read_zst(path, &len);
    corpus_len = len < (1u << 20) ? len : (1u << 20);
}

static void corpus_pieces(const tk_tokenizer *t, const char *name, tally *c) {
    for (size_t i = 0; i < corpus_len;) {
        size_t j = i + 1;
        while (j < corpus_len && corpus[j] != ' ' && corpus[j] != '\n' && j - i < 255) j++;
        if (j - i >= 3) check(t, name, corpus + i, j - i, c);
        i = j;
    }
}

static int run(const char *name, const char *mode) {
    char p[4096], err[512];
    tk_tokenizer *t;
    snprintf(p, sizeof p, "%s/vocab/%s.tiktoken", MKS_SHARED_DIR, name);
    if (tk_load(p, TK_PAT_NONE, &t, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    tally gen = {0}, corp = {0};
    uint8_t piece[300];
    for (int k = 0; k < 20000; k++) check(t, name, piece, make_piece(piece, sizeof piece), &gen);
    /* every neighbour of a few characters: each byte before and after */
    static const char *const probes[] = {"о", "ก", "的", "é", "ア", "한", "ع"};
    for (size_t q = 0; q < sizeof probes / sizeof probes[0]; q++)
        for (int x = 0; x < 256; x += 3) {
            size_t n = 0;
            piece[n++] = (uint8_t)x;
            n += pick_char(probes[q], piece + n);
            n += pick_char(probes[q], piece + n);
            piece[n++] = (uint8_t)(255 - x);
            check(t, name, piece, n, &gen);
            check(t, name, piece + 1, n - 1, &gen);
            check(t, name, piece, n - 1, &gen);
        }
    corpus_pieces(t, name, &corp);
    printf("%s (%s): %zu generated pieces, %zu from characters; %zu corpus pieces, %zu from characters\n", name, mode,
           gen.pieces, gen.from_chars, corp.pieces, corp.from_chars);
    /* the path must be in use: most multilingual corpus pieces start from characters */
    if (corp.pieces && corp.from_chars * 4 < corp.pieces) {
        fprintf(stderr, "FAIL %s: only %zu of %zu corpus pieces start from characters\n", name, corp.from_chars,
                corp.pieces);
        failures++;
    }
    if (gen.from_chars * 4 < gen.pieces) {
        fprintf(stderr, "FAIL %s: only %zu of %zu generated pieces start from characters\n", name, gen.from_chars,
                gen.pieces);
        failures++;
    }
    tk_free(t);
    return 0;
}

/* An adversarial vocabulary: the 256 bytes, then 2..8-byte substrings cut
 * at any byte of generated multilingual pieces, in random rank order. Its
 * straddles (tokens across character boundaries, partial characters,
 * characters with their neighbours) rank anywhere relative to the
 * characters, so every clause of the test in bpe.c is needed somewhere. */
static int write_vocab(const char *path, int n_tokens) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    typedef struct {
        uint8_t b[8];
        uint8_t n;
        uint64_t key;
    } tok;
    tok *v = malloc((size_t)(n_tokens + 256) * sizeof *v);
    uint64_t *seen = calloc(1u << 20, sizeof *seen);
    if (!v || !seen) return -1;
    int n = 0;
    for (int k = 0; k < 256; k++) v[n++] = (tok){.b = {(uint8_t)k}, .n = 1};
    uint8_t piece[300];
    while (n < n_tokens + 256) {
        size_t len = make_piece(piece, sizeof piece);
        if (len < 2) continue;
        size_t a = rnd() % (len - 1), m = 2 + rnd() % 7;
        if (a + m > len) m = len - a;
        uint64_t h = 1469598103934665603ull ^ m;
        for (size_t i = 0; i < m; i++) h = (h ^ piece[a + i]) * 1099511628211ull;
        h |= 1;
        size_t slot = h & ((1u << 20) - 1);
        while (seen[slot] && seen[slot] != h) slot = (slot + 1) & ((1u << 20) - 1);
        if (seen[slot]) continue; /* already a token (a 64-bit hash collision only costs a token) */
        seen[slot] = h;
        v[n] = (tok){.n = (uint8_t)m, .key = rnd()};
        memcpy(v[n].b, piece + a, m);
        n++;
    }
    for (int k = n - 1; k > 256; k--) { /* shuffle the ranks above the bytes */
        int j = 256 + (int)(rnd() % (uint64_t)(k - 255));
        tok x = v[k];
        v[k] = v[j];
        v[j] = x;
    }
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (int r = 0; r < n; r++) {
        char enc[16];
        size_t o = 0;
        for (size_t i = 0; i < v[r].n; i += 3) {
            uint32_t w = (uint32_t)v[r].b[i] << 16 | (i + 1 < v[r].n ? (uint32_t)v[r].b[i + 1] << 8 : 0) |
                         (i + 2 < v[r].n ? v[r].b[i + 2] : 0);
            enc[o++] = b64[w >> 18 & 63];
            enc[o++] = b64[w >> 12 & 63];
            enc[o++] = i + 1 < v[r].n ? b64[w >> 6 & 63] : '=';
            enc[o++] = i + 2 < v[r].n ? b64[w & 63] : '=';
        }
        fprintf(f, "%.*s %d\n", (int)o, enc, r);
    }
    free(v);
    free(seen);
    return fclose(f);
}

static int run_adversarial(const char *dir) {
    char path[4200], err[512];
    for (int round = 0; round < 4; round++) {
        snprintf(path, sizeof path, "%s/adversarial%d.tiktoken", dir, round);
        if (write_vocab(path, 4000 << round)) return 1;
        tk_tokenizer *t;
        if (tk_load(path, TK_PAT_GPT2, &t, err, sizeof err)) {
            fprintf(stderr, "FAIL: the adversarial vocabulary does not load: %s\n", err);
            return 1;
        }
        tally gen = {0};
        uint8_t piece[300];
        for (int k = 0; k < 20000; k++) check(t, "adversarial", piece, make_piece(piece, sizeof piece), &gen);
        printf("adversarial vocabulary %d (%u ranks): %zu pieces, %zu from characters\n", round, tk_n_ranks(t),
               gen.pieces, gen.from_chars);
        if (gen.from_chars * 50 < gen.pieces) {
            fprintf(stderr, "FAIL adversarial: only %zu of %zu pieces start from characters\n", gen.from_chars,
                    gen.pieces);
            failures++;
        }
        tk_free(t);
    }
    return 0;
}

/* Hand-made vocabularies for the clauses random ones reach rarely. suf2: in
 * "กา" the bytes b8 81 of ก merge first, and a token b8 81 e0 (its last two
 * bytes and the next lead byte) outranks ก itself, so the byte loop never
 * makes ก: starting from ก would be wrong. */
static int run_handmade(const char *dir) {
    static const struct {
        const char *tokens[4]; /* ranks 256, 257, ... in this order */
        const char *piece;
    } cases[] = {
        {{"\xb8\x81", "\xb8\x81\xe0", "\xe0\xb8\x81"}, "\xe0\xb8\x81\xe0\xb8\xb2"}, /* suf2 */
        {{"\xe0\xb8", "x\xe0\xb8", "\xe0\xb8\x81"}, "x\xe0\xb8\x81"},               /* pre2 */
        {{"x\xd0", "\xd0\xbe", "x\xd0\xbe"}, "x\xd0\xbe"},                          /* pre1 */
        {{"\xbe y", "\xd0\xbe"}, "\xd0\xbe y"},                                     /* suf1 */
        {{"\xd0\xbe", "\xd0\xbe\xd0\xb2", "\xd0\xb2"}, "\xd0\xbe\xd0\xb2"},         /* chars that stay whole */
    };
    char path[4200], err[512];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(path, sizeof path, "%s/handmade%zu.tiktoken", dir, c);
        FILE *f = fopen(path, "w");
        if (!f) return 1;
        static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        int r = 0;
        for (; r < 256 + 4; r++) {
            uint8_t b[16];
            size_t n;
            if (r < 256) {
                b[0] = (uint8_t)r;
                n = 1;
            } else if (cases[c].tokens[r - 256]) {
                n = strlen(cases[c].tokens[r - 256]);
                memcpy(b, cases[c].tokens[r - 256], n);
            } else {
                break;
            }
            for (size_t i = 0; i < n; i += 3) {
                uint32_t w =
                    (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
                fprintf(f, "%c%c%c%c", b64[w >> 18 & 63], b64[w >> 12 & 63], i + 1 < n ? b64[w >> 6 & 63] : '=',
                        i + 2 < n ? b64[w & 63] : '=');
            }
            fprintf(f, " %d\n", r);
        }
        fclose(f);
        tk_tokenizer *t;
        if (tk_load(path, TK_PAT_GPT2, &t, err, sizeof err)) {
            fprintf(stderr, "FAIL: hand-made vocabulary %zu does not load: %s\n", c, err);
            return 1;
        }
        tally tl = {0};
        check(t, "hand-made", (const uint8_t *)cases[c].piece, strlen(cases[c].piece), &tl);
        tk_free(t);
    }
    return 0;
}

int main(void) {
    char p[4096];
    snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    if (access(p, R_OK)) return 77;
    load_corpus();
    if (corpus_len < (1 << 19)) {
        fprintf(stderr, "FAIL: could not read the multilingual corpus\n");
        return 1;
    }
    /* the straddle minima built in place (no image), then mapped from an image */
    char dir[] = "/tmp/test_bpe_chars.XXXXXX";
    if (!mkdtemp(dir)) return 1;
    static const char *const names[] = {"gpt2", "cl100k_base", "o200k_base"};
    for (int e = 0; e < 3; e++) {
        setenv("MKS_CACHE_DIR", "off", 1);
        if (run(names[e], "tables built")) return 1;
        setenv("MKS_CACHE_DIR", dir, 1);
        tk_tokenizer *t;
        char err[512];
        snprintf(p, sizeof p, "%s/vocab/%s.tiktoken", MKS_SHARED_DIR, names[e]);
        if (tk_load(p, TK_PAT_NONE, &t, err, sizeof err)) return 1; /* writes the image */
        tk_free(t);
        if (tk_load(p, TK_PAT_NONE, &t, err, sizeof err)) return 1;
        int mapped = t->image != NULL && t->charmin != NULL;
        if (mapped) { /* the image's minima are the ones built from the ranks */
            tk_charmin *cm = tk_charmin_build(t);
            if (!cm || memcmp(cm, t->charmin, sizeof *cm)) {
                fprintf(stderr, "FAIL %s: the image's straddle minima differ from those built\n", names[e]);
                failures++;
            }
            free(cm);
        } else {
            fprintf(stderr, "note: %s: no image (source file changed within 2 s?)\n", names[e]);
        }
        tk_free(t);
        if (mapped && run(names[e], "tables from the image")) return 1;
    }
    setenv("MKS_CACHE_DIR", "off", 1);
    if (run_handmade(dir) || run_adversarial(dir)) return 1;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "note: could not remove %s\n", dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
