/* fuzz_tk_chains.c - libFuzzer target for the tokenizer.json normalizer,
 * pre-tokenizer and decoder chains and their per-document limits (issue 32,
 * items 1-3): a fixed small vocabulary, the three sections and the text from
 * the fuzz bytes.
 *
 * Layout: byte 0 = flags (bit 0: byte-level vocabulary with a ByteLevel
 * pre-tokenizer after the fuzzed ones, else SentencePiece-style with byte
 * fallback, whose decoder chain is the fuzzed one), then three sections, each
 * a u16 little-endian length and that many bytes of JSON (length 0: null): the
 * normalizer, the pre_tokenizer, the decoder; the rest is the text to encode
 * (its bytes also give ids to decode).
 *
 * A loaded tokenizer must encode the text or refuse that document
 * (TK_ERR_DOC_*, tk_err_is_document) and leave no ids then; tk_count agrees
 * with tk_encode; every id is in the vocabulary; the ids decode, and any id
 * sequence decodes or is refused as a document; the ids stay within what the
 * output bound allows. Memory: libFuzzer's -rss_limit_mb. Every refusal at
 * load names the file. Seeds: tests/data/fuzz/make_chain_seeds.py; replayed
 * in every build (test_replay_tk_chains). */
#include "fuzz_tk_common.h"
#include "hostile_tk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    char *p;
    size_t n, cap;
} jbuf;

static void jput(jbuf *b, const void *p, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = (b->n + n + 1) * 2;
        char *q = realloc(b->p, c);
        if (!q) abort();
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void jputs(jbuf *b, const char *s) { jput(b, s, strlen(s)); }

/* GPT-2's byte-level character of a byte, JSON-escaped (hostile_tk.h). */
static void byte_char(jbuf *b, int byte) { jputs(b, htk_bl(byte)); }

/* One section: its JSON, or null. */
static int section(const uint8_t **p, size_t *left, jbuf *b) {
    if (*left < 2) return -1;
    size_t n = (size_t)(*p)[0] | (size_t)(*p)[1] << 8;
    *p += 2;
    *left -= 2;
    if (n > *left) n = *left;
    if (n) jput(b, *p, n);
    else jputs(b, "null");
    *p += n;
    *left -= n;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int bytelevel = data[0] & 1;
    const uint8_t *p = data + 1;
    size_t left = size - 1;
    jbuf nm = {0}, pt = {0}, dec = {0}, j = {0};
    if (section(&p, &left, &nm) || section(&p, &left, &pt) || section(&p, &left, &dec)) {
        free(nm.p);
        free(pt.p);
        free(dec.p);
        return 0;
    }
    const uint8_t *text = p;
    size_t tn = left;
    jputs(&j, "{\"normalizer\":");
    jput(&j, nm.p, nm.n);
    if (bytelevel) {
        /* the fuzzed pre-tokenizer, then ByteLevel (a Sequence whether or not it is one) */
        jputs(&j, ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[");
        if (strcmp(pt.p, "null")) {
            jput(&j, pt.p, pt.n);
            jputs(&j, ",");
        }
        jputs(&j, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
                  "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"merges\":[\"a b\"],\"vocab\":{");
        for (int i = 0; i < 256; i++) {
            jputs(&j, i ? ",\"" : "\"");
            byte_char(&j, i);
            char id[16];
            snprintf(id, sizeof id, "\":%d", i);
            jputs(&j, id);
        }
        jputs(&j, ",\"ab\":256}}}");
    } else {
        jputs(&j, ",\"pre_tokenizer\":");
        jput(&j, pt.p, pt.n);
        jputs(&j, ",\"decoder\":");
        jput(&j, dec.p, dec.n);
        jputs(&j, ",\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"unk_token\":\"<unk>\","
                  "\"merges\":[\"\xe2\x96\x81 a\",\"a b\",\"\xe2\x96\x81"
                  "a b\"],\"vocab\":{\"<unk>\":0");
        for (int i = 0; i < 256; i++) {
            char e[32];
            snprintf(e, sizeof e, ",\"<0x%02X>\":%d", i, i + 1);
            jputs(&j, e);
        }
        jputs(&j, ",\"\xe2\x96\x81\":257,\"a\":258,\"b\":259,\"c\":260,\"\xe2\x96\x81"
                  "a\":261,\"ab\":262,"
                  "\"\xe2\x96\x81"
                  "ab\":263,\" \":264}}}");
    }
    char path[200];
    snprintf(path, sizeof path, "%s/tokenizer.json", fuzz_tk_folder());
    fuzz_tk_write(path, (const uint8_t *)j.p, j.n);
    free(nm.p);
    free(pt.p);
    free(dec.p);
    free(j.p);
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load(path, TK_PAT_NONE, &t, err, sizeof err);
    if (rc != TK_OK) {
        if (!err[0] || !strstr(err, fuzz_tk_folder())) abort(); /* every refusal names the file */
        return 0;
    }
    uint32_t vs = tk_vocab_size(t);
    tk_ids ids = {0};
    tk_bytes out = {0};
    rc = tk_encode(t, text, tn, &ids);
    if (rc != TK_OK && !tk_err_is_document(rc)) abort();
    if (rc != TK_OK && ids.len) abort(); /* a refused document leaves no ids */
    size_t count = 0;
    int crc = tk_count(t, text, tn, &count);
    if (crc != rc || (rc == TK_OK && count != ids.len)) abort(); /* the same answer, the same count */
    /* one id per byte of the normalized text at most: 16 x the text + 64
     * per normalizer chain, times 8 for a Metaspace replacement of a space,
     * + a prefix */
    if (ids.len > 8 * (16 * tn + TK_EXPAND_SLACK) + 8) abort();
    for (size_t k = 0; k < ids.len; k++)
        if (ids.ids[k] >= vs) abort();
    rc = tk_decode(t, ids.ids, ids.len, &out);
    if (rc != TK_OK && !tk_err_is_document(rc)) abort();
    tk_bytes_free(&out);
    tk_ids_free(&ids);
    /* any ids: the text's bytes taken as ids, through the one-shot and the streaming decoder */
    uint32_t raw[128];
    size_t nr = 0;
    for (size_t k = 0; k + 1 < tn && nr < 128; k += 2)
        raw[nr++] = ((uint32_t)text[k] | (uint32_t)text[k + 1] << 8) % vs;
    rc = tk_decode(t, raw, nr, &out);
    if (rc != TK_OK && !tk_err_is_document(rc)) abort();
    tk_bytes_free(&out);
    tk_decoder *d = NULL;
    if (tk_decoder_create(t, &d) != TK_OK) abort();
    for (size_t k = 0; k < nr; k += 7) {
        rc = tk_decoder_feed(d, raw + k, nr - k < 7 ? nr - k : 7, &out);
        if (rc != TK_OK && !tk_err_is_document(rc)) abort();
    }
    if (tk_decoder_finish(d, &out) != TK_OK) abort();
    tk_decoder_free(d);
    tk_bytes_free(&out);
    tk_free(t);
    return 0;
}
