/* hostile_tk.h - crafted tokenizer files and documents for the per-document
 * limits (issue 32, items 1-3), written at test time (no committed blobs):
 * used by test_tk_hostile.c, test_lint.c and, through hostile_tk_gen.c, by
 * the CLI scripts.
 *
 *   htk_regex_json      byte-level BPE tokenizer.json whose Split regex is the
 *                       audit's (?:x+x+)+y|. (or any other pattern)
 *   htk_regex_doc       its document: runs of 22 'x' and a 'z' (each start
 *                       position stays under PCRE2's per-match limit)
 *   htk_replace_json    tokenizer.json with a Replace normalizer "a" -> 1 MiB
 *   htk_precompiled_json tokenizer.json with a Precompiled normalizer whose
 *                       charsmap maps "a" to 1 MiB
 *   htk_decoder_json    SentencePiece-style tokenizer.json whose Replace
 *                       decoder turns "a" into 1 MiB
 *   htk_spm_model       SentencePiece .model (BPE) whose normalizer, or
 *                       denormalizer, charsmap maps "a" to 1 MiB
 *
 * Before the limits, 3 KB of "a" through any of these reached 14-15 GB. */
#ifndef HOSTILE_TK_H
#define HOSTILE_TK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTK_BIG ((size_t)1 << 20) /* what one "a" is mapped to */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} htk_buf;

static inline void htk_grow(htk_buf *b, size_t k) {
    if (b->n + k + 1 <= b->cap) return;
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + k + 1) c *= 2;
    uint8_t *q = realloc(b->p, c);
    if (!q) {
        fprintf(stderr, "hostile_tk: out of memory\n");
        exit(1);
    }
    b->p = q;
    b->cap = c;
}
static inline void htk_putn(htk_buf *b, const void *p, size_t k) {
    htk_grow(b, k);
    memcpy(b->p + b->n, p, k);
    b->n += k;
    b->p[b->n] = 0;
}
static inline void htk_fill(htk_buf *b, int c, size_t k) {
    htk_grow(b, k);
    memset(b->p + b->n, c, k);
    b->n += k;
    b->p[b->n] = 0;
}
__attribute__((format(printf, 2, 3))) static inline void htk_put(htk_buf *b, const char *fmt, ...) {
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    htk_grow(b, (size_t)k);
    vsnprintf((char *)b->p + b->n, (size_t)k + 1, fmt, aq);
    va_end(aq);
    b->n += (size_t)k;
}

/* Write b to path and free it; 0 or -1. */
static inline int htk_save(htk_buf *b, const char *path) {
    FILE *f = fopen(path, "wb");
    int ok = f && (b->n == 0 || fwrite(b->p, 1, b->n, f) == b->n);
    if (f && fclose(f)) ok = 0;
    free(b->p);
    memset(b, 0, sizeof *b);
    if (!ok) perror(path);
    return ok ? 0 : -1;
}

/* GPT-2's byte-level character of a byte, as a JSON string body. */
static inline const char *htk_bl(int byte) {
    static char out[4][8];
    static int k;
    k = (k + 1) % 4;
    int printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
    unsigned cp = (unsigned)byte;
    if (!printable) {
        unsigned n = 0;
        for (int x = 0; x < byte; x++)
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
        cp = 256 + n;
    }
    if (cp == '"' || cp == '\\') snprintf(out[k], 8, "\\%c", (char)cp);
    else if (cp < 0x80) snprintf(out[k], 8, "%c", (char)cp);
    else snprintf(out[k], 8, "%c%c", (char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 63)));
    return out[k];
}

/* A byte-level BPE tokenizer.json (256 single-byte tokens, no merges) with
 * this normalizer (JSON, NULL: none) and these pre-tokenizers before the
 * ByteLevel one (JSON array body, NULL: none). */
static inline int htk_bytelevel_json(const char *path, const char *normalizer, const char *pre) {
    htk_buf b = {0};
    htk_put(&b,
            "{\"normalizer\":%s,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[%s%s"
            "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
            "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"merges\":[],\"vocab\":{",
            normalizer ? normalizer : "null", pre ? pre : "", pre ? "," : "");
    for (int i = 0; i < 256; i++) htk_put(&b, "%s\"%s\":%d", i ? "," : "", htk_bl(i), i);
    htk_put(&b, "}}}");
    return htk_save(&b, path);
}

/* tokenizer.json whose Split (Isolated) regex is re (a JSON string body). */
static inline int htk_regex_json(const char *path, const char *re) {
    char pre[512];
    snprintf(pre, sizeof pre,
             "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"%s\"},\"behavior\":\"Isolated\",\"invert\":false}", re);
    return htk_bytelevel_json(path, NULL, pre);
}
#define HTK_REGEX "(?:x+x+)+y|."

/* n bytes of runs of 22 'x' each followed by 'z' (no NUL; out[n] = 0). */
static inline void htk_regex_doc(char *out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = i % 23 == 22 ? 'z' : 'x';
    out[n] = 0;
}

/* tokenizer.json with a Replace normalizer: "a" -> HTK_BIG bytes of 'b'. */
static inline int htk_replace_json(const char *path) {
    htk_buf nm = {0};
    htk_put(&nm, "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"");
    htk_fill(&nm, 'b', HTK_BIG);
    htk_put(&nm, "\"}");
    int rc = htk_bytelevel_json(path, (const char *)nm.p, NULL);
    free(nm.p);
    return rc;
}

/* A SentencePiece precompiled_charsmap (a Darts-clone double array and its
 * string pool) with one rule: the byte key -> len bytes of fill. Root
 * offset 1: key byte c leads to unit 1 ^ c, whose leaf (offset 1 again) holds
 * the pool offset 0. */
static inline void htk_charsmap(htk_buf *out, uint8_t key, int fill, size_t len) {
    uint32_t node = 1u ^ key, leaf = node ^ 1u, n_units = (node > leaf ? node : leaf) + 1;
    uint32_t *u = calloc(n_units, sizeof *u);
    if (!u) exit(1);
    u[0] = 1u << 10;
    u[node] = 1u << 10 | 1u << 8 | key;
    u[leaf] = 0x80000000u | 0u;
    uint32_t tsize = n_units * 4;
    uint8_t le[4] = {(uint8_t)tsize, (uint8_t)(tsize >> 8), (uint8_t)(tsize >> 16), (uint8_t)(tsize >> 24)};
    htk_putn(out, le, 4);
    for (uint32_t i = 0; i < n_units; i++) {
        uint8_t w[4] = {(uint8_t)u[i], (uint8_t)(u[i] >> 8), (uint8_t)(u[i] >> 16), (uint8_t)(u[i] >> 24)};
        htk_putn(out, w, 4);
    }
    free(u);
    htk_fill(out, fill, len);
    htk_putn(out, "", 1); /* the pool string's NUL */
}

static inline void htk_base64(htk_buf *out, const uint8_t *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {A[x >> 18 & 63], A[x >> 12 & 63], i + 1 < n ? A[x >> 6 & 63] : '=', i + 2 < n ? A[x & 63] : '='};
        htk_putn(out, q, 4);
    }
}

/* tokenizer.json with a Precompiled normalizer: "a" -> HTK_BIG bytes of 'b'. */
static inline int htk_precompiled_json(const char *path) {
    htk_buf cm = {0}, nm = {0};
    htk_charsmap(&cm, 'a', 'b', HTK_BIG);
    htk_put(&nm, "{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"");
    htk_base64(&nm, cm.p, cm.n);
    htk_put(&nm, "\"}");
    free(cm.p);
    int rc = htk_bytelevel_json(path, (const char *)nm.p, NULL);
    free(nm.p);
    return rc;
}

/* SentencePiece-style tokenizer.json (no ByteLevel: pieces <unk> 0, a 1,
 * b 2) whose Replace decoder turns "a" into HTK_BIG bytes of 'b'. */
static inline int htk_decoder_json(const char *path) {
    htk_buf b = {0};
    htk_put(&b, "{\"normalizer\":null,\"pre_tokenizer\":null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                "{\"type\":\"Replace\",\"pattern\":{\"String\":\"a\"},\"content\":\"");
    htk_fill(&b, 'b', HTK_BIG);
    htk_put(&b, "\"}]},\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"merges\":[],"
                "\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2}}}");
    return htk_save(&b, path);
}

/* protobuf wire format */
static inline void htk_varint(htk_buf *o, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        c |= v ? 0x80 : 0;
        htk_putn(o, &c, 1);
    } while (v);
}
static inline void htk_pb_bytes(htk_buf *o, unsigned field, const void *p, size_t n) {
    htk_varint(o, (uint64_t)field << 3 | 2);
    htk_varint(o, n);
    htk_putn(o, p, n);
}
static inline void htk_pb_int(htk_buf *o, unsigned field, uint64_t v) {
    htk_varint(o, (uint64_t)field << 3);
    htk_varint(o, v);
}
static inline void htk_pb_piece(htk_buf *o, const char *s, int type) {
    htk_buf p = {0};
    htk_pb_bytes(&p, 1, s, strlen(s));
    uint8_t score[5] = {2 << 3 | 5, 0, 0, 0, 0}; /* score 0.0f */
    htk_putn(&p, score, 5);
    htk_pb_int(&p, 3, (uint64_t)type);
    htk_pb_bytes(o, 1, p.p, p.n);
    free(p.p);
}

/* A SentencePiece BPE .model (pieces <unk>, <s>, </s>, U+2581, a, b) whose
 * normalizer (denorm 0) or denormalizer (denorm 1) charsmap maps "a" to
 * HTK_BIG bytes of 'b'. */
static inline int htk_spm_model(const char *path, int denorm) {
    htk_buf m = {0}, tr = {0}, spec = {0}, cm = {0};
    htk_pb_piece(&m, "<unk>", 2);
    htk_pb_piece(&m, "<s>", 3);
    htk_pb_piece(&m, "</s>", 3);
    htk_pb_piece(&m, "\xe2\x96\x81", 1);
    htk_pb_piece(&m, "a", 1);
    htk_pb_piece(&m, "b", 1);
    htk_pb_int(&tr, 3, 2); /* model_type BPE */
    htk_pb_bytes(&m, 2, tr.p, tr.n);
    htk_charsmap(&cm, 'a', 'b', HTK_BIG);
    htk_pb_bytes(&spec, 1, "hostile", 7);
    htk_pb_bytes(&spec, 2, cm.p, cm.n);
    if (denorm) {
        htk_pb_int(&spec, 3, 0); /* no dummy prefix, keep the spaces */
        htk_pb_int(&spec, 4, 0);
    }
    htk_pb_bytes(&m, denorm ? 5 : 3, spec.p, spec.n);
    free(tr.p);
    free(spec.p);
    free(cm.p);
    return htk_save(&m, path);
}

#endif
