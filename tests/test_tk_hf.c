/* Id-for-id parity with HF `tokenizers` for tokenizer.json files: the real
 * Llama 3 and Qwen2 files of ../shared/vocab/hf on the first 300 documents
 * of every ../shared/corpus category (count + sha256 of the ids) and on edge
 * cases (full ids, default mode and --allow-special all), plus the fixtures
 * of tests/data/tk_hf built to exercise every supported component.
 * References: tests/data/tk_hf/refs.jsonl.zst, made by
 * tests/ref/make_tk_hf_refs.py with HF tokenizers. Also checks
 * decode(encode(x)) == x for byte-level tokenizers.
 * argv[1]: shared dir (default MKS_SHARED_DIR); argv[2]: only this tokenizer
 * ("-": all); argv[3]: the fixture directory under tests/data (default
 * tk_hf; tk_hf_uni: the Unigram fixtures of make_tk_hf_uni_fixtures.py).
 * A row with "err" is a text HF fails (a Unigram model without unk_id):
 * ours must refuse that document (tk_err_is_document). */
#include "tk.h"
#include "test_corpus.h"
#include "test_tk_ids.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PER_CAT 300
static const char *CATS[] = {"en-books", "multi", "code", "web"};
static char *texts[4][PER_CAT];
static size_t lens[4][PER_CAT];

static int load_corpus(const char *shared) {
    for (int c = 0; c < 4; c++)
        if (test_corpus_docs(shared, CATS[c], PER_CAT, test_doc_keep, &(test_doc_slots){texts[c], lens[c]}) < 0)
            return -1;
    return 0;
}

static int first_diff(const tk_ids *v, json_t *ids) {
    size_t n = json_array_size(ids), i = 0;
    while (i < n && i < v->len && (uint32_t)json_integer_value(json_array_get(ids, i)) == v->ids[i]) i++;
    return (int)i;
}

static void show(const char *what, const tk_ids *v, json_t *ids, int at) {
    fprintf(stderr, "  %s: first difference at %d\n  ours:", what, at);
    for (size_t i = at > 3 ? (size_t)at - 3 : 0; i < v->len && i < (size_t)at + 6; i++)
        fprintf(stderr, " %u", v->ids[i]);
    fprintf(stderr, "\n  HF:  ");
    for (size_t i = at > 3 ? (size_t)at - 3 : 0; i < json_array_size(ids) && i < (size_t)at + 6; i++)
        fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(ids, i)));
    fprintf(stderr, "\n");
}

typedef struct {
    const char *at, *json, *want1, *want2;
} refusal_case;

static int refuse_each(const char *fixture, const refusal_case *cases, size_t n_cases);

/* Unsupported components are refused at load, naming the JSON path and the
 * component: never loaded with other ids. Each case edits a fixture. */
static int refusals(void) {
    static const refusal_case cases[] = {
        /* HF needs clean_text, handle_chinese_chars and lowercase (serde: missing field) */
        {"normalizer", "{\"type\":\"BertNormalizer\",\"clean_text\":true}", "normalizer.handle_chinese_chars",
         "HF needs it"},
        {"normalizer",
         "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Precompiled\","
         "\"precompiled_charsmap\":\"\"}]}",
         "normalizer.normalizers[1]", "Precompiled"},
        {"pre_tokenizer",
         "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"\\\\bfoo\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":false,\"use_regex\":false}]}",
         "pre_tokenizer.pretokenizers[0].pattern", "\\b"},
        {"pre_tokenizer",
         "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"[a[bc]]\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":false,\"use_regex\":false}]}",
         "pretokenizers[0].pattern", "nested"},
        {"pre_tokenizer",
         "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"(?m:a.)\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":false,\"use_regex\":false}]}",
         "pretokenizers[0].pattern", "(?"},
        {"pre_tokenizer",
         "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
         "\"\\\\p{N}{1,3}+\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":false,\"use_regex\":false}]}",
         "pretokenizers[0].pattern", "{n,m}+"},
        /* steps after ByteLevel split its characters (bl_after_bytelevel); a second one would map them again */
        {"pre_tokenizer",
         "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
         "\"use_regex\":false},{\"type\":\"Digits\",\"individual_digits\":true},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":false,\"use_regex\":true}]}",
         "pre_tokenizer.pretokenizers[2]", "ByteLevel after ByteLevel"},
        {"pre_tokenizer", "{\"type\":\"BertPreTokenizer\",\"x\":1}", "pre_tokenizer:", "\"x\""},
        {"pre_tokenizer",
         "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\","
         "\"invert\":false,\"extra\":1}",
         "pre_tokenizer:", "\"extra\""},
        {"decoder", "{\"type\":\"WordPiece\",\"prefix\":\"##\"}", "decoder", "ByteLevel"},
        /* a word model on a byte-level file: its pieces are characters, not ByteLevel's bytes */
        {"model.type", "\"WordPiece\"", "WordPiece model", "ByteLevel"},
        {"model.type", "\"WordLevel\"", "WordLevel model", "ByteLevel"},
        {"model.type", "\"CharLevel\"", "model.type", "CharLevel"},
        /* a BPE file marked Unigram: its vocab is an object, not [piece, score] pairs */
        {"model.type", "\"Unigram\"", "model.vocab", "Unigram"},
        {"model.dropout", "0.1", "model.dropout", "dropout"},
        /* with a prefix, HF's merge result is a + b[len(prefix):]: a part shorter than it cannot be */
        {"model.continuing_subword_prefix", "\"##\"", "merge", "shorter than continuing_subword_prefix"},
    };
    /* WordPiece / WordLevel files: the model's fields are bounded and typed */
    static const refusal_case wcases[] = {
        {"model.max_input_chars_per_word", "-1", "max_input_chars_per_word", "integer >= 0"},
        {"model.max_input_chars_per_word", "\"100\"", "max_input_chars_per_word", "integer >= 0"},
        {"model.max_input_chars_per_word", "1.5", "max_input_chars_per_word", "integer >= 0"},
        {"model.unk_token", "5", "model.unk_token", "string"},
        {"model.unk_token", "null", "model.unk_token", "string"},
        {"model.continuing_subword_prefix", "\"0123456789012345678901234567890123456789012345678901234567890123X\"",
         "continuing_subword_prefix", "at most 64 bytes"},
        {"model.continuing_subword_prefix", "null", "continuing_subword_prefix", "string"},
        {"model.vocab", "[[\"a\", 0.0]]", "model.vocab", "not an object"},
        {"model.vocab", "{\"a\": -1}", "model.vocab entry", "a"},
        {"model.vocab", "{\"a\": 0, \"b\": 0}", "model.vocab entry", "also the id"},
        {"model.vocab", "{\"a\": 9000000}", "id 9000000", "unused"},
        {"normalizer",
         "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
         "\"strip_accents\":null,\"lowercase\":\"yes\"}",
         "normalizer.lowercase", "boolean"},
        {"normalizer",
         "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,"
         "\"strip_accents\":1,\"lowercase\":true}",
         "normalizer.strip_accents", "boolean"},
        {"decoder", "{\"type\":\"WordPiece\",\"prefix\":\"##\"}", "decoder.cleanup", "boolean"},
        {"decoder", "{\"type\":\"WordPiece\",\"cleanup\":true}", "decoder.prefix", "string"},
        {"pre_tokenizer", "{\"type\":\"ByteLevel\",\"add_prefix_space\":false}", "WordPiece model", "ByteLevel"},
    };
    int fails = refuse_each(MKS_TEST_DATA "/tk_hf/bl_wssplit.json", cases, sizeof cases / sizeof cases[0]);
    fails += refuse_each(MKS_TEST_DATA "/tk_hf_wp/wp_options.json", wcases, sizeof wcases / sizeof wcases[0]);
    printf("refusals: %zu cases\n", sizeof cases / sizeof cases[0] + sizeof wcases / sizeof wcases[0]);
    return fails;
}

/* Each case: the fixture with one value replaced must fail to load, its
 * message holding want1 and want2. */
static int refuse_each(const char *fixture, const refusal_case *cases, size_t n_cases) {
    json_error_t je;
    json_t *base = json_load_file(fixture, 0, &je);
    if (!base) {
        fprintf(stderr, "FAIL refusals: no fixture %s\n", fixture);
        return 1;
    }
    int fails = 0;
    char tmp[] = "/tmp/tk_hf_refuse.XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) return 1;
    close(fd);
    for (size_t k = 0; k < n_cases; k++) {
        json_t *d = json_deep_copy(base), *v = json_loads(cases[k].json, JSON_DECODE_ANY, &je);
        if (!v) {
            fprintf(stderr, "FAIL refusal case %zu: bad JSON in the test: %s\n", k, je.text);
            fails++;
            json_decref(d);
            continue;
        }
        if (strncmp(cases[k].at, "model.", 6) == 0)
            json_object_set_new(json_object_get(d, "model"), cases[k].at + 6, v);
        else json_object_set_new(d, cases[k].at, v);
        json_dump_file(d, tmp, 0);
        json_decref(d);
        tk_tokenizer *t = NULL;
        char err[512] = "";
        int rc = tk_load_hf_json(tmp, TK_PAT_NONE, &t, err, sizeof err);
        if (rc == TK_OK || !strstr(err, cases[k].want1) || !strstr(err, cases[k].want2)) {
            fprintf(stderr, "FAIL refusal case %zu (%s): rc %d, message \"%s\", want \"%s\" and \"%s\"\n", k,
                    cases[k].at, rc, err, cases[k].want1, cases[k].want2);
            fails++;
        }
        tk_free(t);
    }
    unlink(tmp);
    json_decref(base);
    return fails;
}

/* Document framing from the post_processor (tk_default_framing) on the
 * SentencePiece fixture (<unk> 0, <s> 1, </s> 2). */
static int framing(void) {
    static const struct {
        const char *pp;
        int rc;
        int64_t bos, eos;
    } cases[] = {
        {"null", TK_OK, 1, 2}, /* no post_processor: the family's tokens by name */
        {"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
         "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\","
         "\"ids\":[1],\"tokens\":[\"<s>\"]}}}",
         TK_OK, 1, 2},
        {"{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
         "{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{}}",
         TK_OK, -1, 2},
        {"{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}", TK_OK, -1, 2},
        {"{\"type\":\"RobertaProcessing\",\"sep\":[\"</s>\",2],\"cls\":[\"<s>\",1],\"trim_offsets\":true,"
         "\"add_prefix_space\":false}",
         TK_OK, 1, 2},
        {"{\"type\":\"BertProcessing\",\"sep\":[\"<unk>\",0],\"cls\":[\"<s>\",1]}", TK_OK, 1, 0},
        {"{\"type\":\"Sequence\",\"processors\":[{\"type\":\"ByteLevel\"},{\"type\":\"TemplateProcessing\","
         "\"single\":[{\"SpecialToken\":{\"id\":\"<unk>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
         "{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}}],\"special_tokens\":{}}]}",
         TK_OK, 0, 2},
        {"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
         "{\"SpecialToken\":{\"id\":\"</s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]}",
         TK_ERR_UNSUPPORTED, -1, -1},
        {"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|nope|>\",\"type_id\":0}},"
         "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]}",
         TK_ERR_UNSUPPORTED, -1, -1},
        {"{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"X\",\"type_id\":0}},"
         "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"X\":{\"id\":\"X\",\"ids\":[1,2],"
         "\"tokens\":[\"<s>\",\"</s>\"]}}}",
         TK_ERR_UNSUPPORTED, -1, -1},
        {"{\"type\":\"SomethingNew\"}", TK_ERR_UNSUPPORTED, -1, -1},
    };
    json_error_t je;
    json_t *base = json_load_file(MKS_TEST_DATA "/tk_hf/sp_llama2.json", 0, &je);
    if (!base) {
        fprintf(stderr, "FAIL framing: no fixture\n");
        return 1;
    }
    int fails = 0;
    char tmp[] = "/tmp/tk_hf_frame.XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) return 1;
    close(fd);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *d = json_deep_copy(base), *v = json_loads(cases[k].pp, JSON_DECODE_ANY, &je);
        if (!v) {
            fprintf(stderr, "FAIL framing case %zu: bad JSON in the test: %s\n", k, je.text);
            fails++;
            json_decref(d);
            continue;
        }
        json_object_set_new(d, "post_processor", v);
        json_dump_file(d, tmp, 0);
        json_decref(d);
        tk_tokenizer *t = NULL;
        char err[512] = "";
        if (tk_load_hf_json(tmp, TK_PAT_NONE, &t, err, sizeof err) != TK_OK) {
            fprintf(stderr, "FAIL framing case %zu: load: %s\n", k, err);
            fails++;
            continue;
        }
        tk_framing f;
        err[0] = 0;
        int rc = tk_default_framing(t, &f, err, sizeof err);
        if (rc != cases[k].rc || (rc == TK_OK && (f.bos != cases[k].bos || f.eos != cases[k].eos)) ||
            (rc != TK_OK && !strstr(err, "post_processor"))) {
            fprintf(stderr, "FAIL framing case %zu: rc %d bos %lld eos %lld (%s), want rc %d bos %lld eos %lld\n", k,
                    rc, (long long)f.bos, (long long)f.eos, rc ? err : f.source, cases[k].rc, (long long)cases[k].bos,
                    (long long)cases[k].eos);
            fails++;
        }
        uint32_t id = 99;
        if (k == 0 && (tk_token_id(t, "</s>", &id) != TK_OK || id != 2 ||
                       tk_token_id(t, "no such token here", &id) != TK_ERR_NOT_FOUND)) {
            fprintf(stderr, "FAIL tk_token_id: </s> -> %u\n", id);
            fails++;
        }
        tk_free(t);
    }
    unlink(tmp);
    json_decref(base);
    /* rank-file tokenizers: no BOS, <|endoftext|> after; none without it */
    const uint8_t *toks[256];
    uint32_t lens[256];
    uint8_t bytes[256];
    for (int i = 0; i < 256; i++) bytes[i] = (uint8_t)i, toks[i] = &bytes[i], lens[i] = 1;
    tk_special sp = {"<|endoftext|>", 256};
    tk_tokenizer *t = NULL;
    tk_framing f;
    char err[256] = "";
    if (tk_create(toks, lens, 256, TK_PAT_GPT2, &sp, 1, &t) != TK_OK || tk_default_framing(t, &f, err, sizeof err) ||
        f.bos != -1 || f.eos != 256) {
        fprintf(stderr, "FAIL framing of a rank-file tokenizer\n");
        fails++;
    }
    tk_free(t);
    t = NULL;
    if (tk_create(toks, lens, 256, TK_PAT_GPT2, NULL, 0, &t) != TK_OK ||
        tk_default_framing(t, &f, err, sizeof err) != TK_ERR_NOT_FOUND || !strstr(err, "<|endoftext|>")) {
        fprintf(stderr, "FAIL framing without <|endoftext|>: %s\n", err);
        fails++;
    }
    tk_free(t);
    printf("framing: %zu post_processor cases\n", sizeof cases / sizeof cases[0]);
    return fails;
}

/* Crafted Unigram files (written at test time): what a hostile or odd file
 * costs and gives. Each returns the failures. */
static int write_tmp(char *path, const char *text) {
    int fd = mkstemps(path, 5);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) return -1;
    fputs(text, f);
    fclose(f);
    return 0;
}

static int load_text(const char *json, tk_tokenizer **t, char *err, size_t errlen) {
    char path[] = "/tmp/tk_hf_uni_XXXXXX.json";
    if (write_tmp(path, json)) return -1;
    int rc = tk_load_hf_json(path, TK_PAT_NONE, t, err, errlen);
    unlink(path);
    return rc;
}

static char *uni_json(const char *vocab, const char *unk_id, const char *pre) {
    static const char fmt[] = "{\"added_tokens\":[],\"normalizer\":null,\"pre_tokenizer\":%s,\"decoder\":null,"
                              "\"model\":{\"type\":\"Unigram\",\"unk_id\":%s,\"vocab\":%s,\"byte_fallback\":false}}";
    size_t n = strlen(fmt) + strlen(vocab) + strlen(unk_id) + strlen(pre) + 1;
    char *s = malloc(n);
    snprintf(s, n, fmt, pre, unk_id, vocab);
    return s;
}

static int hostile_unigram(void) {
    int fails = 0;
    char err[512];
    tk_tokenizer *t = NULL;
    /* scores at the ends of f64: path sums overflow to +-inf; every position
     * still gets a path (the first proposal wins), no crash, ids in range */
    char *j =
        uni_json("[[\"<unk>\",0],[\"a\",1.7e308],[\"aa\",1.7e308],[\"b\",-1.7e308],[\"ab\",-1.7e308]]", "0", "null");
    err[0] = 0;
    if (load_text(j, &t, err, sizeof err) != TK_OK) {
        fprintf(stderr, "FAIL unigram extreme scores: load: %s\n", err);
        fails++;
    } else {
        tk_ids v = {0};
        static const char txt[] = "aaaaabababbbbbaaxyzaaaa";
        int rc = tk_encode(t, (const uint8_t *)txt, sizeof txt - 1, &v);
        /* HF tokenizers 0.23.3's ids for this text and file */
        static const uint32_t want[] = {1, 1, 2, 4, 4, 4, 3, 3, 3, 3, 2, 0, 2, 2};
        if (!rc && (v.len != sizeof want / sizeof want[0] || memcmp(v.ids, want, sizeof want) != 0)) rc = -1;
        if (rc) {
            fprintf(stderr, "FAIL unigram extreme scores: rc %d, %zu ids\n", rc, v.len);
            fails++;
        }
        tk_ids_free(&v);
    }
    tk_free(t);
    t = NULL;
    free(j);
    /* no unk_id: a text with a character no piece covers is refused for
     * that document alone (HF: MissingUnkId), the next one encodes */
    j = uni_json("[[\"a\",-1],[\"b\",-2],[\"ab\",-1.5]]", "null", "null");
    if (load_text(j, &t, err, sizeof err) != TK_OK) {
        fprintf(stderr, "FAIL unigram no unk_id: load: %s\n", err);
        fails++;
    } else {
        tk_ids v = {0};
        int rc = tk_encode(t, (const uint8_t *)"abxab", 5, &v);
        if (rc != TK_ERR_DOC_UNK || !tk_err_is_document(rc) || v.len) {
            fprintf(stderr, "FAIL unigram no unk_id: rc %d, %zu ids, want TK_ERR_DOC_UNK and none\n", rc, v.len);
            fails++;
        }
        rc = tk_encode(t, (const uint8_t *)"abab", 4, &v);
        if (rc || v.len != 2 || v.ids[0] != 2 || v.ids[1] != 2) {
            fprintf(stderr, "FAIL unigram no unk_id: \"abab\" rc %d, %zu ids\n", rc, v.len);
            fails++;
        }
        tk_ids_free(&v);
    }
    tk_free(t);
    t = NULL;
    free(j);
    /* the lattice's work is (longest piece) x (text): pieces a, aa, ...,
     * a x 1024 over 256 KiB of 'a' - linear, ~2.7e8 trie steps, bounded by
     * the 1024-byte piece limit */
    {
        size_t cap = 1100 * 1100 + 100;
        char *voc = malloc(cap);
        size_t o = 0;
        o += (size_t)snprintf(voc + o, cap - o, "[[\"<unk>\",0]");
        for (int k = 1; k <= 1024; k++) {
            o += (size_t)snprintf(voc + o, cap - o, ",[\"");
            memset(voc + o, 'a', (size_t)k);
            o += (size_t)k;
            o += (size_t)snprintf(voc + o, cap - o, "\",%d.25]", -k);
        }
        snprintf(voc + o, cap - o, "]");
        j = uni_json(voc, "0", "null");
        free(voc);
        if (load_text(j, &t, err, sizeof err) != TK_OK) {
            fprintf(stderr, "FAIL unigram long pieces: load: %s\n", err);
            fails++;
        } else {
            size_t n = 256 << 10;
            uint8_t *txt = malloc(n);
            memset(txt, 'a', n);
            tk_ids v = {0};
            int rc = tk_encode(t, txt, n, &v);
            /* a x k (id k) scores -k - 0.25: 1024 a's as one piece beat any split */
            size_t k = 0;
            while (!rc && k < v.len && v.ids[k] == 1024) k++;
            if (rc || v.len != n / 1024 || k != v.len) {
                fprintf(stderr, "FAIL unigram long pieces: rc %d, %zu ids, want %zu of id 1024\n", rc, v.len, n / 1024);
                fails++;
            }
            free(txt);
            tk_ids_free(&v);
        }
        tk_free(t);
        t = NULL;
        free(j);
    }
    /* refusals name the file and the entry */
    static const struct {
        const char *vocab, *unk, *want;
    } bad[] = {
        {"[[\"a\",1e999]]", "null", "line 1"}, /* serde_json: out of range; jansson names the place */
        {"[]", "null", "empty Unigram vocabulary"}, {"[[\"a\",-1]]", "1", "unk_id"},
        {"[[\"a\",-1]]", "-1", "unk_id"},           {"[[\"a\"]]", "null", "model.vocab[0]"},
        {"{\"a\":0}", "null", "not an array"},      {"[[\"a\\u0000b\",-1]]", "null", "u0000"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        j = uni_json(bad[k].vocab, bad[k].unk, "null");
        err[0] = 0;
        int rc = load_text(j, &t, err, sizeof err);
        if (rc == TK_OK || !strstr(err, bad[k].want) || !strstr(err, "tk_hf_uni_")) {
            fprintf(stderr, "FAIL unigram refusal %zu: rc %d \"%s\", want \"%s\"\n", k, rc, err, bad[k].want);
            fails++;
        }
        tk_free(t);
        t = NULL;
        free(j);
    }
    /* a piece over 1024 bytes */
    {
        char *voc = malloc(3000);
        strcpy(voc, "[[\"");
        memset(voc + 3, 'x', 1500);
        strcpy(voc + 1503, "\",-1],[\"<unk>\",0]]");
        j = uni_json(voc, "1", "null");
        free(voc);
        err[0] = 0;
        int rc = load_text(j, &t, err, sizeof err);
        if (rc != TK_ERR_LIMIT || !strstr(err, "1024")) {
            fprintf(stderr, "FAIL unigram long piece: rc %d \"%s\"\n", rc, err);
            fails++;
        }
        tk_free(t);
        t = NULL;
        free(j);
    }
    printf("hostile unigram: done\n");
    return fails;
}

/* A vocab entry "" (Whisper's tokenizer.json, id 50256): HF loads it as an
 * id no text encodes to (the refs check that) and that decodes to nothing;
 * bl_empty_entry has it last. */
static int empty_entry(void) {
    tk_tokenizer *t = NULL;
    char err[512] = "";
    int fails = 0;
    if (tk_load_hf_json(MKS_TEST_DATA "/tk_hf/bl_empty_entry.json", TK_PAT_NONE, &t, err, sizeof err)) {
        fprintf(stderr, "FAIL empty entry: load: %s\n", err);
        return 1;
    }
    uint32_t e = tk_vocab_size(t) - 1, ids[3];
    const uint8_t *b;
    size_t bl = 1;
    tk_ids a = {0}, c = {0};
    tk_bytes out = {0};
    if (tk_token_bytes(t, e, &b, &bl) || bl != 0 || tk_encode(t, (const uint8_t *)"a", 1, &a) || a.len != 1 ||
        tk_encode(t, (const uint8_t *)"b", 1, &c) || c.len != 1) {
        fprintf(stderr, "FAIL empty entry: id %u is not an empty token (%zu bytes) or a/b not one token\n", e, bl);
        fails++;
    } else {
        ids[0] = a.ids[0], ids[1] = e, ids[2] = c.ids[0];
        if (tk_decode(t, ids, 3, &out) || out.len != 2 || memcmp(out.data, "ab", 2) != 0) {
            fprintf(stderr, "FAIL empty entry: decode [a, %u, b] is not \"ab\" (HF's)\n", e);
            fails++;
        }
    }
    tk_ids_free(&a);
    tk_ids_free(&c);
    tk_bytes_free(&out);
    tk_free(t);
    printf("empty entry: %s\n", fails ? "FAIL" : "ok");
    return fails;
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : MKS_SHARED_DIR;
    const char *only = argc > 2 && strcmp(argv[2], "-") != 0 ? argv[2] : NULL;
    const char *dir = argc > 3 ? argv[3] : "tk_hf";
    size_t rn;
    char rpath[4096];
    snprintf(rpath, sizeof rpath, "%s/%s/refs.jsonl.zst", MKS_TEST_DATA, dir);
    char *refs = test_read_zst(rpath, &rn);
    if (!refs) {
        fprintf(stderr, "no %s\n", rpath);
        return 1;
    }
    bool have_corpus = load_corpus(shared) == 0;
    if (!have_corpus) fprintf(stderr, "note: no corpus under %s: corpus checks skipped\n", shared);
    int fails = refusals() + framing() + (strcmp(dir, "tk_hf_uni") == 0 ? hostile_unigram() : empty_entry()),
        checked = 0, skipped = 0;
    char cur[128] = "";
    tk_tokenizer *tok = NULL;
    bool bytelevel = true;
    char *line = refs;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        line = nl ? nl + 1 : line + strlen(line);
        if (!o) continue;
        const char *name = json_string_value(json_object_get(o, "tok"));
        if (only && strcmp(only, name) != 0) {
            json_decref(o);
            continue;
        }
        if (strcmp(name, cur) != 0) {
            tk_free(tok);
            tok = NULL;
            snprintf(cur, sizeof cur, "%s", name);
            char p[4096], err[512] = "";
            snprintf(p, sizeof p, "%s/vocab/hf/%s/tokenizer.json", shared, name);
            FILE *f = fopen(p, "rb");
            if (f) fclose(f);
            else snprintf(p, sizeof p, "%s/%s/%s.json", MKS_TEST_DATA, dir, name);
            int rc = tk_load_hf_json(p, TK_PAT_NONE, &tok, err, sizeof err);
            if (rc) {
                f = fopen(p, "rb");
                if (!f) {
                    fprintf(stderr, "skip %s: %s not found\n", name, p);
                    skipped++;
                } else {
                    fclose(f);
                    fprintf(stderr, "FAIL %s: load: %s\n", name, err);
                    fails++;
                }
                tok = NULL;
            }
            bytelevel = strstr(name, "sp_") != name;
        }
        if (!tok) {
            json_decref(o);
            continue;
        }
        tk_ids v = {0};
        json_t *ids = json_object_get(o, "ids");
        bool hf_err = json_is_true(json_object_get(o, "err"));
        if (hf_err) { /* HF fails this text: so must we, for this document only */
            const char *text = json_string_value(json_object_get(o, "text"));
            size_t tl = json_string_length(json_object_get(o, "text"));
            const char *cat = json_string_value(json_object_get(o, "cat"));
            int doc = (int)json_integer_value(json_object_get(o, "doc"));
            int c = 0;
            while (cat && c < 4 && strcmp(CATS[c], cat) != 0) c++;
            if (cat && (!have_corpus || c == 4 || doc >= PER_CAT || !texts[c][doc])) text = NULL;
            else if (cat) text = texts[c][doc], tl = lens[c][doc];
            if (text) {
                bool special = !cat && strcmp(json_string_value(json_object_get(o, "mode")), "special") == 0;
                int rc = special ? tk_encode_special(tok, (const uint8_t *)text, tl, NULL, (size_t)-1, &v)
                                 : tk_encode(tok, (const uint8_t *)text, tl, &v);
                checked++;
                if (!tk_err_is_document(rc) || v.len) {
                    fprintf(stderr, "FAIL %s: \"%.60s\": rc %d with %zu ids, HF fails this text\n", name, text, rc,
                            v.len);
                    fails++;
                }
            }
        } else if (ids) {
            const char *text = json_string_value(json_object_get(o, "text"));
            size_t tl = json_string_length(json_object_get(o, "text"));
            bool special = strcmp(json_string_value(json_object_get(o, "mode")), "special") == 0;
            int rc = special ? tk_encode_special(tok, (const uint8_t *)text, tl, NULL, (size_t)-1, &v)
                             : tk_encode(tok, (const uint8_t *)text, tl, &v);
            int at = first_diff(&v, ids);
            checked++;
            if (rc || (size_t)at != json_array_size(ids) || (size_t)at != v.len) {
                fprintf(stderr, "FAIL %s %s edge case \"%.60s\" (rc %d)\n", name, special ? "special" : "plain", text,
                        rc);
                show("ids", &v, ids, at);
                fails++;
            } else if (json_object_get(o, "dec")) {
                json_t *dec = json_object_get(o, "dec");
                tk_bytes b = {0};
                if (tk_decode(tok, v.ids, v.len, &b) || b.len != json_string_length(dec) ||
                    (b.len && memcmp(b.data, json_string_value(dec), b.len) != 0)) {
                    fprintf(stderr, "FAIL %s decode of \"%.60s\": \"%.*s\", HF \"%s\"\n", name, text,
                            (int)(b.len > 80 ? 80 : b.len), b.data ? (const char *)b.data : "", json_string_value(dec));
                    fails++;
                }
                tk_bytes_free(&b);
            } else if (!special && bytelevel && tk_lossless(tok)) {
                tk_bytes b = {0};
                if (tk_decode(tok, v.ids, v.len, &b) || b.len != tl || (tl && memcmp(b.data, text, tl) != 0)) {
                    fprintf(stderr, "FAIL %s decode(encode(\"%.60s\")) differs\n", name, text);
                    fails++;
                }
                tk_bytes_free(&b);
            }
        } else if (have_corpus) {
            const char *cat = json_string_value(json_object_get(o, "cat"));
            int doc = (int)json_integer_value(json_object_get(o, "doc"));
            int c = 0;
            while (c < 4 && strcmp(CATS[c], cat) != 0) c++;
            if (c < 4 && doc < PER_CAT && texts[c][doc]) {
                int rc = tk_encode(tok, (const uint8_t *)texts[c][doc], lens[c][doc], &v);
                char sha[17];
                test_ids_sha(&v, sha);
                checked++;
                size_t n = (size_t)json_integer_value(json_object_get(o, "n"));
                if (rc || v.len != n || strcmp(sha, json_string_value(json_object_get(o, "sha"))) != 0) {
                    fprintf(stderr, "FAIL %s %s doc %d: %zu ids (HF %zu), rc %d\n", name, cat, doc, v.len, n, rc);
                    fails++;
                }
            }
        }
        tk_ids_free(&v);
        json_decref(o);
        if (fails > 20) break;
    }
    tk_free(tok);
    free(refs);
    printf("test_tk_hf: %d checks, %d failures, %d tokenizers skipped\n", checked, fails, skipped);
    return fails ? 1 : 0;
}
