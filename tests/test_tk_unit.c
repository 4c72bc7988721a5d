/* Tokenizer unit tests: pre-tokenizer edge cases against Python tiktoken
 * (tests/data/tokenizer/edge_cases.jsonl, see regen_edge_cases.py), random
 * byte round trips, streaming decode, specials, batch, loaders, savers and
 * every error path. */
#include "tk.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "test_check.h"

static char shared_vocab[4096], tmpdir[4096];
static tk_tokenizer *enc[3];
static const char *enc_names[3] = {"gpt2", "cl100k_base", "o200k_base"};

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void write_file(const char *path, const char *content) {
    FILE *f = fopen(path, "wb");
    fputs(content, f);
    fclose(f);
}

static void test_edge_cases(void) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer/edge_cases.jsonl", MKS_TEST_DATA);
    FILE *f = fopen(p, "r");
    CHECK(f, "cannot open %s", p);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    tk_ids ids = {0};
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        const char *e = json_string_value(json_object_get(o, "enc"));
        json_t *t = json_object_get(o, "text"), *want = json_object_get(o, "ids");
        int k = strcmp(e, "gpt2") == 0 ? 0 : strcmp(e, "cl100k_base") == 0 ? 1 : 2;
        ids.len = 0;
        tk_encode(enc[k], (const uint8_t *)json_string_value(t), json_string_length(t), &ids);
        int same = ids.len == json_array_size(want);
        for (size_t i = 0; same && i < ids.len; i++)
            same = ids.ids[i] == (uint32_t)json_integer_value(json_array_get(want, i));
        if (!same) {
            char *js = json_dumps(t, JSON_ENCODE_ANY);
            char got[512] = "";
            for (size_t i = 0; i < ids.len && strlen(got) < 480; i++)
                snprintf(got + strlen(got), sizeof got - strlen(got), "%u,", ids.ids[i]);
            char *w = json_dumps(want, 0);
            CHECK(0, "%s %s: got [%s] want %s", e, js, got, w);
            free(js);
            free(w);
        }
        size_t cnt;
        tk_count(enc[k], (const uint8_t *)json_string_value(t), json_string_length(t), &cnt);
        CHECK(cnt == ids.len, "tk_count %zu != encode %zu", cnt, ids.len);
        n++;
        json_decref(o);
    }
    free(line);
    fclose(f);
    tk_ids_free(&ids);
    CHECK(n >= 300, "only %d edge cases", n);
    printf("edge cases: %d checked against tiktoken\n", n);
}

typedef struct {
    size_t total;
    int count;
} piece_acc;

static int on_piece(void *u, const uint8_t *p, size_t n) {
    (void)p;
    piece_acc *a = u;
    a->total += n;
    a->count++;
    return n == 0 ? 1 : 0;
}

static void test_round_trip(void) {
    tk_ids ids = {0};
    tk_bytes out = {0};
    uint8_t buf[2048];
    static const char *alpha[] = {"a",
                                  "b",
                                  " ",
                                  "\n",
                                  "\r",
                                  "1",
                                  "'",
                                  "s",
                                  "\xc3\xa9",
                                  "\xe4\xb8\xad",
                                  "\xcc\x81",
                                  "\xf0\x9f\x91\x8d",
                                  "\xe2\x80\x8d",
                                  "A",
                                  "\t",
                                  "/",
                                  "!",
                                  "\xff",
                                  "\x80",
                                  "\xc3"};
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = 0, want = rnd() % 300;
        if (iter % 2) {
            for (; n < want; n++) buf[n] = (uint8_t)rnd(); /* arbitrary bytes */
        } else {
            while (n < want) {
                const char *a = alpha[rnd() % (sizeof alpha / sizeof alpha[0])];
                size_t l = strlen(a);
                memcpy(buf + n, a, l);
                n += l;
            }
        }
        for (int k = 0; k < 3; k++) {
            ids.len = 0;
            out.len = 0;
            CHECK(tk_encode(enc[k], buf, n, &ids) == TK_OK, "encode");
            CHECK(tk_decode(enc[k], ids.ids, ids.len, &out) == TK_OK, "decode");
            CHECK(out.len == n && memcmp(out.data, buf, n) == 0, "round trip %s iter %d len %zu", enc_names[k], iter,
                  n);
            piece_acc acc = {0, 0};
            CHECK(tk_pretokenize(tk_get_pattern(enc[k]), buf, n, on_piece, &acc) == TK_OK, "pretokenize");
            CHECK(acc.total == n, "pieces cover %zu of %zu bytes", acc.total, n);
        }
        if (failures > 10) break;
    }
    tk_ids_free(&ids);
    tk_bytes_free(&out);
    printf("round trip: 3000 random strings x 3 encodings\n");
}

static int valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t b = s[i];
        size_t l = b < 0x80 ? 1 : b >= 0xC2 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xF0 && b < 0xF5 ? 4 : 0;
        if (!l || i + l > n) return 0;
        for (size_t k = 1; k < l; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += l;
    }
    return 1;
}

static void test_streaming_decoder(void) {
    const char *text =
        "Grüße aus 東京 👨‍👩‍👧‍👦 and ɑ̃ ... 中文字符测试 한국어 🇺🇸 end";
    for (int k = 0; k < 3; k++) {
        tk_ids ids = {0};
        tk_encode(enc[k], (const uint8_t *)text, strlen(text), &ids);
        tk_decoder *d;
        CHECK(tk_decoder_create(enc[k], &d) == TK_OK, "decoder");
        tk_bytes all = {0}, chunk = {0};
        for (size_t i = 0; i < ids.len; i++) {
            chunk.len = 0;
            CHECK(tk_decoder_feed(d, &ids.ids[i], 1, &chunk) == TK_OK, "feed");
            CHECK(valid_utf8(chunk.data, chunk.len), "%s: chunk %zu is not complete UTF-8", enc_names[k], i);
            size_t o = all.len;
            all.data = realloc(all.data, o + chunk.len + 1);
            memcpy(all.data + o, chunk.data, chunk.len);
            all.len = o + chunk.len;
        }
        chunk.len = 0;
        tk_decoder_finish(d, &chunk);
        CHECK(chunk.len == 0, "nothing pending at the end");
        CHECK(all.len == strlen(text) && memcmp(all.data, text, all.len) == 0, "streamed text differs");
        /* an incomplete tail is flushed as-is by finish */
        uint32_t lone;
        const uint8_t lead = 0xE4;
        tk_ids one = {0};
        tk_encode(enc[k], &lead, 1, &one);
        lone = one.ids[0];
        chunk.len = 0;
        tk_decoder_feed(d, &lone, 1, &chunk);
        CHECK(chunk.len == 0, "lead byte held back");
        tk_decoder_finish(d, &chunk);
        CHECK(chunk.len == 1 && chunk.data[0] == 0xE4, "finish flushes held bytes");
        /* out of range */
        uint32_t bad = tk_vocab_size(enc[k]) + 5;
        chunk.len = 0;
        CHECK(tk_decoder_feed(d, &bad, 1, &chunk) == TK_ERR_RANGE, "out of range id in stream");
        CHECK(tk_decode(enc[k], &bad, 1, &chunk) == TK_ERR_RANGE, "out of range id");
        tk_decoder_free(d);
        tk_ids_free(&ids);
        tk_ids_free(&one);
        tk_bytes_free(&all);
        tk_bytes_free(&chunk);
    }
    tk_decoder_free(NULL);
    printf("streaming decoder ok\n");
}

static void test_specials(void) {
    const char *text = "a<|endoftext|>b<|fim_prefix|>";
    tk_ids ids = {0};
    tk_encode(enc[0], (const uint8_t *)text, strlen(text), &ids);
    int has = 0;
    for (size_t i = 0; i < ids.len; i++) has |= ids.ids[i] == 50256;
    CHECK(!has, "ordinary encode must not produce the special id");
    ids.len = 0;
    const char *allow[] = {"<|endoftext|>"};
    CHECK(tk_encode_special(enc[0], (const uint8_t *)text, strlen(text), allow, 1, &ids) == TK_OK, "special");
    CHECK(ids.len >= 3 && ids.ids[1] == 50256, "<|endoftext|> -> 50256 (got %u)", ids.len > 1 ? ids.ids[1] : 0);
    ids.len = 0;
    CHECK(tk_encode_special(enc[1], (const uint8_t *)text, strlen(text), NULL, (size_t)-1, &ids) == TK_OK, "all");
    CHECK(ids.len == 4 && ids.ids[1] == 100257 && ids.ids[3] == 100258, "cl100k specials");
    const char *unknown[] = {"<|nope|>"};
    CHECK(tk_encode_special(enc[1], (const uint8_t *)text, strlen(text), unknown, 1, &ids) == TK_ERR_NOT_FOUND,
          "unknown special rejected");
    uint32_t id;
    CHECK(tk_eot_id(enc[2], &id) == TK_OK && id == 199999, "o200k eot");
    CHECK(tk_vocab_size(enc[0]) == 50257 && tk_vocab_size(enc[1]) == 100277 && tk_vocab_size(enc[2]) == 200019,
          "vocab sizes %u %u %u", tk_vocab_size(enc[0]), tk_vocab_size(enc[1]), tk_vocab_size(enc[2]));
    const uint8_t *b;
    size_t l;
    CHECK(tk_token_bytes(enc[1], 100276, &b, &l) == TK_OK && l == 15, "special bytes");
    CHECK(tk_token_bytes(enc[1], 100256, &b, &l) == TK_ERR_RANGE, "gap id is out of range");
    tk_ids_free(&ids);
}

static void test_batch(void) {
    enum { N = 64 };
    tk_span docs[N];
    char *texts[N];
    for (int i = 0; i < N; i++) {
        size_t n = 1 + rnd() % 5000;
        texts[i] = malloc(n);
        for (size_t k = 0; k < n; k++) texts[i][k] = "abc de\nfg 12'sXY"[rnd() % 16];
        docs[i].text = (const uint8_t *)texts[i];
        docs[i].len = n;
    }
    tk_ids a[N], b[N];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    CHECK(tk_encode_batch(enc[2], docs, N, 1, a) == TK_OK, "batch 1");
    CHECK(tk_encode_batch(enc[2], docs, N, 4, b) == TK_OK, "batch 4");
    for (int i = 0; i < N; i++) {
        CHECK(a[i].len == b[i].len && memcmp(a[i].ids, b[i].ids, a[i].len * 4) == 0, "batch doc %d differs", i);
        tk_ids_free(&a[i]);
        tk_ids_free(&b[i]);
        free(texts[i]);
    }
    printf("batch ok\n");
}

static int expect_load(const char *path, tk_pattern pat, int want, const char *what) {
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int rc = tk_load(path, pat, &t, err, sizeof err);
    CHECK(rc == want, "%s: got %d (%s), want %d", what, rc, err, want);
    CHECK(rc == TK_OK || strlen(err) > 0, "%s: no error message", what);
    if (rc != TK_OK) printf("  %-28s -> %s\n", what, err);
    tk_free(t);
    return rc;
}

static void test_errors(void) {
    char p[4200];
    printf("error messages:\n");
    snprintf(p, sizeof p, "%s/missing.tiktoken", tmpdir);
    expect_load(p, TK_PAT_NONE, TK_ERR_IO, "missing file");
    snprintf(p, sizeof p, "%s/badb64.tiktoken", tmpdir);
    write_file(p, "IQ== 0\nIg=! 1\n");
    expect_load(p, TK_PAT_GPT2, TK_ERR_BASE64, "bad base64");
    snprintf(p, sizeof p, "%s/dup.tiktoken", tmpdir);
    write_file(p, "IQ== 0\nIg== 0\n");
    expect_load(p, TK_PAT_GPT2, TK_ERR_DUP_RANK, "duplicate rank");
    snprintf(p, sizeof p, "%s/gap.tiktoken", tmpdir);
    write_file(p, "IQ== 0\nIg== 5\n");
    expect_load(p, TK_PAT_GPT2, TK_ERR_MISSING_RANK, "rank gap");
    snprintf(p, sizeof p, "%s/fewbytes.tiktoken", tmpdir);
    write_file(p, "IQ== 0\nIg== 1\n");
    expect_load(p, TK_PAT_GPT2, TK_ERR_MISSING_RANK, "single bytes missing");
    snprintf(p, sizeof p, "%s/norank.tiktoken", tmpdir);
    write_file(p, "IQ== x\n");
    expect_load(p, TK_PAT_GPT2, TK_ERR_FORMAT, "bad rank");
    snprintf(p, sizeof p, "%s/wordpiece.json", tmpdir);
    /* WordPiece without its other fields: HF refuses it too (serde: missing field unk_token) */
    write_file(p, "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}");
    expect_load(p, TK_PAT_NONE, TK_ERR_FORMAT, "tokenizer.json WordPiece without unk_token");
    snprintf(p, sizeof p, "%s/broken.json", tmpdir);
    write_file(p, "{\"model\": ");
    expect_load(p, TK_PAT_NONE, TK_ERR_FORMAT, "truncated tokenizer.json");
    expect_load("no_such_vocab_name", TK_PAT_NONE, TK_ERR_IO, "unknown name");
    unsetenv("MKS_VOCAB_DIR");
    setenv("TIKTOKEN_CACHE_DIR", tmpdir, 1);
    expect_load("o200k_base", TK_PAT_NONE, TK_ERR_NOT_FOUND, "name not in any folder");
    /* an unknown (custom) rank file needs a pattern */
    snprintf(p, sizeof p, "%s/custom.tiktoken", tmpdir);
    FILE *f = fopen(p, "w");
    static const char *b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int b = 0; b < 256; b++) fprintf(f, "%c%c== %d\n", b64[b >> 2], b64[(b & 3) << 4], b);
    fclose(f);
    expect_load(p, TK_PAT_NONE, TK_ERR_PATTERN, "custom file without pattern");
    expect_load(p, TK_PAT_CL100K, TK_OK, "custom file with --pattern");
    CHECK(tk_strerror(TK_ERR_BASE64)[0] && strcmp(tk_strerror(-999), "unknown error") == 0, "strerror");
    tk_free(NULL);
}

static void same_ids(tk_tokenizer *a, tk_tokenizer *b, const char *what);

/* Whisper's multilingual.tiktoken / gpt2.tiktoken: gpt2's ranks plus "= 50256",
 * the empty token. tiktoken (load_tiktoken_bpe: b64decode("=") == b"") keeps
 * it as an id that encode never yields and that decodes to b"", so the ids
 * are gpt2's; a saved copy writes it back as "=". */
static void test_empty_token(void) {
    char src[4200], p[4200], err[512] = "";
    snprintf(src, sizeof src, "%s/gpt2.tiktoken", shared_vocab);
    snprintf(p, sizeof p, "%s/multilingual_like.tiktoken", tmpdir);
    char cmd[13000];
    snprintf(cmd, sizeof cmd, "cat '%s' > '%s' && printf '= 50256\\n' >> '%s'", src, p, p);
    CHECK(system(cmd) == 0, "empty token: cannot write %s", p);
    tk_tokenizer *t = NULL;
    int rc = tk_load(p, TK_PAT_GPT2, &t, err, sizeof err);
    CHECK(rc == TK_OK, "empty token: rank file with \"= 50256\" refused: %s", err);
    if (rc) return;
    CHECK(tk_vocab_size(t) == 50257, "empty token: vocab size %u, want 50257", tk_vocab_size(t));
    same_ids(t, enc[0], "empty token vs gpt2");
    uint32_t id = 50256, mixed[3] = {15496, 50256, 995}; /* "Hello", "", " world" */
    tk_bytes b = {0};
    CHECK(tk_decode(t, &id, 1, &b) == TK_OK && b.len == 0, "empty token: decode(50256) gives %zu bytes", b.len);
    tk_bytes_free(&b);
    CHECK(tk_decode(t, mixed, 3, &b) == TK_OK && b.len == 11 && memcmp(b.data, "Hello world", 11) == 0,
          "empty token: decode around it");
    tk_bytes_free(&b);
    tk_decoder *d = NULL;
    CHECK(tk_decoder_create(t, &d) == TK_OK && tk_decoder_feed(d, &id, 1, &b) == TK_OK &&
              tk_decoder_feed(d, mixed, 3, &b) == TK_OK && tk_decoder_finish(d, &b) == TK_OK && b.len == 11,
          "empty token: streaming decode gives %zu bytes, want 11", b.len);
    tk_decoder_free(d);
    tk_bytes_free(&b);
    char saved[4300];
    snprintf(saved, sizeof saved, "%s/saved_empty.tiktoken", tmpdir);
    CHECK(tk_save_tiktoken(t, saved) == TK_OK, "empty token: save");
    tk_tokenizer *u = NULL;
    CHECK(tk_load(saved, TK_PAT_NONE, &u, err, sizeof err) == TK_OK, "empty token: reload of the saved copy: %s", err);
    if (u) {
        CHECK(tk_vocab_size(u) == 50257, "empty token: saved copy has %u ids", tk_vocab_size(u));
        same_ids(u, enc[0], "empty token saved copy vs gpt2");
    }
    tk_free(u);
    tk_free(t);
    /* only '=' alone is the empty token; "==x=" stays bad base64 */
    snprintf(p, sizeof p, "%s/badeq.tiktoken", tmpdir);
    write_file(p, "==x= 0\n");
    expect_load(p, TK_PAT_GPT2, TK_ERR_BASE64, "'=' mixed with data");
    printf("empty token ok\n");
}

/* Meta's Llama 3 / Llama 4 tokenizer.model is a rank file: read by content,
 * not as SentencePiece by its name (was "malformed protobuf at byte 205"). */
static void test_rank_file_named_model(void) {
    char src[4200], p[4200], err[512] = "", cmd[13000];
    snprintf(src, sizeof src, "%s/gpt2.tiktoken", shared_vocab);
    snprintf(p, sizeof p, "%s/tokenizer.model", tmpdir);
    /* gpt2's ranks but the last: a rank file no sha256 names */
    snprintf(cmd, sizeof cmd, "head -n 50255 '%s' > '%s'", src, p);
    CHECK(system(cmd) == 0, "rank .model: cannot write %s", p);
    tk_tokenizer *t = NULL;
    int rc = tk_load(p, TK_PAT_NONE, &t, err, sizeof err);
    CHECK(rc == TK_ERR_PATTERN && strstr(err, "tiktoken rank file named .model"),
          "rank .model without a pattern: got %d (%s)", rc, err);
    printf("  %-28s -> %s\n", "rank file named .model", err);
    tk_free(t);
    t = NULL;
    rc = tk_load(p, TK_PAT_GPT2, &t, err, sizeof err);
    CHECK(rc == TK_OK, "rank .model with --pattern gpt2: %s", err);
    if (t) same_ids(t, enc[0], "rank file named .model vs gpt2");
    tk_free(t);
    printf("rank file named .model ok\n");
    /* RWKV World's vocabulary is named, not reported as bad base64 */
    snprintf(p, sizeof p, "%s/rwkv_vocab_v20230424.txt", tmpdir);
    write_file(p, "1 '\\x00' 1\n2 '\\x01' 1\n257 b'\\xe4' 1\n");
    t = NULL;
    rc = tk_load(p, TK_PAT_NONE, &t, err, sizeof err);
    CHECK(rc == TK_ERR_UNSUPPORTED && strstr(err, "RWKV World vocabulary"), "RWKV vocabulary: got %d (%s)", rc, err);
    tk_free(t);
}

static void same_ids(tk_tokenizer *a, tk_tokenizer *b, const char *what) {
    const char *texts[] = {"Hello world! It's 2024, and we've got 12345 tokens.\n\n  x",
                           "Ünïcödé 中文 한국어 👍🏽 e\u0301 don't STOP",
                           "    for (int i = 0; i < n; i++) {}\n"};
    for (int i = 0; i < 3; i++) {
        tk_ids x = {0}, y = {0};
        tk_encode(a, (const uint8_t *)texts[i], strlen(texts[i]), &x);
        tk_encode(b, (const uint8_t *)texts[i], strlen(texts[i]), &y);
        CHECK(x.len == y.len && memcmp(x.ids, y.ids, x.len * 4) == 0, "%s: ids differ on text %d", what, i);
        tk_ids_free(&x);
        tk_ids_free(&y);
    }
}

static void test_loaders_savers(void) {
    char p[8400], err[512];
    tk_tokenizer *t = NULL;
    /* GPT-2 folder (encoder.json + vocab.bpe) == gpt2.tiktoken */
    CHECK(tk_load(shared_vocab, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "gpt2 folder: %s", err);
    if (t) {
        CHECK(strcmp(tk_name(t), "gpt2") == 0 && tk_vocab_size(t) == 50257, "gpt2 folder name/size");
        uint8_t f1[32], f2[32];
        tk_fingerprint(t, f1);
        tk_fingerprint(enc[0], f2);
        CHECK(memcmp(f1, f2, 32) == 0, "encoder.json+vocab.bpe fingerprint == gpt2.tiktoken");
        same_ids(t, enc[0], "gpt2 folder");
        tk_free(t);
    }
    /* by name through MKS_VOCAB_DIR and through tiktoken's cache */
    setenv("MKS_VOCAB_DIR", shared_vocab, 1);
    CHECK(tk_load("cl100k_base", TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "by name: %s", err);
    tk_free(t);
    unsetenv("MKS_VOCAB_DIR");
    char cache[4200], src[4200];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    mkdir(cache, 0755);
    /* sha1("https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken") */
    snprintf(p, sizeof p, "%s/fb374d419588a4632f3f557e76b4b70aebbca790", cache);
    snprintf(src, sizeof src, "%s/o200k_base.tiktoken", shared_vocab);
    unlink(p);
    CHECK(symlink(src, p) == 0, "symlink");
    setenv("TIKTOKEN_CACHE_DIR", cache, 1);
    CHECK(tk_load("o200k_base", TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "tiktoken cache: %s", err);
    if (t) CHECK(strcmp(tk_name(t), "o200k_base") == 0, "name from sha256");
    tk_free(t);
    /* save/load round trips for each encoding */
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s.json", tmpdir, enc_names[k]);
        CHECK(tk_save_hf_json(enc[k], p) == TK_OK, "save json");
        t = NULL;
        CHECK(tk_load(p, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "load saved json: %s", err);
        if (t) {
            CHECK(tk_vocab_size(t) == tk_vocab_size(enc[k]) && tk_get_pattern(t) == tk_get_pattern(enc[k]),
                  "json size/pattern");
            same_ids(t, enc[k], "tokenizer.json round trip");
            tk_free(t);
        }
        snprintf(p, sizeof p, "%s/%s.tiktoken", tmpdir, enc_names[k]);
        CHECK(tk_save_tiktoken(enc[k], p) == TK_OK, "save tiktoken");
        t = NULL;
        CHECK(tk_load(p, TK_PAT_NONE, &t, err, sizeof err) == TK_OK, "load saved tiktoken: %s", err);
        if (t) {
            uint8_t f1[32], f2[32];
            tk_fingerprint(t, f1);
            tk_fingerprint(enc[k], f2);
            CHECK(memcmp(f1, f2, 32) == 0, "tiktoken round trip fingerprint");
            tk_free(t);
        }
    }
    /* a custom vocabulary: tk_create + save keeps pattern and specials */
    const uint8_t *toks[300];
    uint32_t lens[300];
    uint8_t bytes[256];
    for (int b = 0; b < 256; b++) {
        bytes[b] = (uint8_t)b;
        toks[b] = &bytes[b];
        lens[b] = 1;
    }
    const char *extra[] = {"th", "the", " the", "in", "ing"};
    for (int i = 0; i < 5; i++) {
        toks[256 + i] = (const uint8_t *)extra[i];
        lens[256 + i] = (uint32_t)strlen(extra[i]);
    }
    tk_special sp[] = {{"<|endoftext|>", 261}};
    CHECK(tk_create(toks, lens, 261, TK_PAT_O200K, sp, 1, &t) == TK_OK, "create");
    snprintf(p, sizeof p, "%s/custom_saved.tiktoken", tmpdir);
    CHECK(tk_save_tiktoken(t, p) == TK_OK, "save custom");
    tk_tokenizer *u = NULL;
    CHECK(tk_load(p, TK_PAT_NONE, &u, err, sizeof err) == TK_OK, "reload custom: %s", err);
    if (u) {
        uint32_t id;
        CHECK(tk_get_pattern(u) == TK_PAT_O200K && tk_eot_id(u, &id) == TK_OK && id == 261, "meta sidecar");
        same_ids(t, u, "custom");
        tk_ids ids = {0};
        tk_encode(u, (const uint8_t *)"the thing", 9, &ids);
        CHECK(ids.len == 4 && ids.ids[0] == 257 && ids.ids[1] == 32 && ids.ids[2] == 256 && ids.ids[3] == 260,
              "custom ids");
        tk_ids_free(&ids);
    }
    tk_free(u);
    tk_free(t);
    printf("loaders/savers ok\n");
}

int main(void) {
    snprintf(shared_vocab, sizeof shared_vocab, "%s/vocab", MKS_SHARED_DIR);
    char p[4200], err[512];
    snprintf(p, sizeof p, "%s/gpt2.tiktoken", shared_vocab);
    if (access(p, R_OK)) {
        fprintf(stderr, "skip: %s missing\n", p);
        return 77;
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_tk_unit.%d", (int)getpid());
    mkdir(tmpdir, 0755);
    for (int k = 0; k < 3; k++) {
        snprintf(p, sizeof p, "%s/%s.tiktoken", shared_vocab, enc_names[k]);
        if (tk_load(p, TK_PAT_NONE, &enc[k], err, sizeof err)) {
            fprintf(stderr, "load %s: %s\n", p, err);
            return 1;
        }
    }
    test_edge_cases();
    test_round_trip();
    test_streaming_decoder();
    test_specials();
    test_batch();
    test_errors();
    test_empty_token();
    test_rank_file_named_model();
    test_loaders_savers();
    for (int k = 0; k < 3; k++) tk_free(enc[k]);
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) {}
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
