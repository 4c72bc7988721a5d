/* test_chat_build.c - ds_build on chat records (issue 28): each --over-long
 * policy (truncate, drop, drop-turns, chunk) and the no-target drop give
 * exactly the rows and loss masks written below; bfd keeps each
 * conversation whole in one row; the accounting counts loss tokens, turns
 * dropped and the reasons. A tiny tokenizer makes the ids readable: one
 * token per byte (id = the byte) and ChatML's specials <|im_start|> = 257,
 * <|im_end|> = 258 (written '{' and '}' in the expected rows). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ds.h"
#include "test_check.h"
#include "tk.h"

static tk_tokenizer *tiny(void) {
    static uint8_t bytes[256];
    const uint8_t *tokens[256];
    uint32_t lens[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        tokens[i] = &bytes[i];
        lens[i] = 1;
    }
    tk_special sp[3] = {{"<|endoftext|>", 256}, {"<|im_start|>", 257}, {"<|im_end|>", 258}};
    tk_tokenizer *t = NULL;
    CHECK(tk_create(tokens, lens, 256, TK_PAT_GPT2, sp, 3, &t) == TK_OK && t, "tk_create");
    return t;
}

static char g_dir[256];

static void write_file(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL, "fopen %s", p);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A (65 tokens rendered): system, two user/assistant turns; its last assistant message starts at token 57. */
#define CONV_A                                                                                                         \
    "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"u1\"},"                   \
    "{\"role\":\"assistant\",\"content\":\"a1\"},{\"role\":\"user\",\"content\":\"u2\"},"                              \
    "{\"role\":\"assistant\",\"content\":\"a2a2a2\"}]}\n"
/* B: no assistant message (no target). C (25 tokens), D (23 tokens): short ones. */
#define CONV_B "{\"messages\":[{\"role\":\"user\",\"content\":\"alone\"}]}\n"
#define CONV_C "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"yo\"}]}\n"
#define CONV_D "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"a\"}]}\n"

typedef struct {
    ds_over_long ol;
    ds_pack pack;
    uint32_t L;
    const char *input;
    size_t n_rows;
    const char *rows[3];  /* '{' <|im_start|>, '}' <|im_end|>, other chars their byte */
    const char *masks[3]; /* '1' target, '0' not, for each token of the row */
    uint64_t loss, truncated, dropped, turns, no_loss, overlong;
} scenario;

static const scenario k_cases[] = {
    /* truncate: a token prefix cut inside the last assistant message (its <|im_end|> lost) */
    {DS_OL_TRUNCATE,
     DS_PACK_NONE,
     60,
     "a.jsonl",
     1,
     {"{system\nS}\n{user\nu1}\n{assistant\na1}\n{user\nu2}\n{assistant\na2a"},
     {"000000000000000000000000000000001110000000000000000000000111"},
     6,
     1,
     0,
     0,
     0,
     0},
    /* truncate where the end-of-turn fits and only the trailing newline does not */
    {DS_OL_TRUNCATE,
     DS_PACK_NONE,
     64,
     "a.jsonl",
     1,
     {"{system\nS}\n{user\nu1}\n{assistant\na1}\n{user\nu2}\n{assistant\na2a2a2}"},
     {"0000000000000000000000000000000011100000000000000000000001111111"},
     10,
     1,
     0,
     0,
     0,
     0},
    /* truncate that would cut before the last assistant message: dropped (over-long) */
    {DS_OL_TRUNCATE, DS_PACK_NONE, 40, "a.jsonl", 0, {NULL}, {NULL}, 0, 0, 1, 0, 0, 1},
    /* drop-turns: the oldest user/assistant turn goes, the system message stays: 40 tokens */
    {DS_OL_DROP_TURNS,
     DS_PACK_NONE,
     40,
     "a.jsonl",
     1,
     {"{system\nS}\n{user\nu2}\n{assistant\na2a2a2}\n"},
     {"0000000000000000000000000000000011111110"},
     7,
     1,
     0,
     1,
     0,
     0},
    /* drop-turns that cannot fit the last turn: dropped */
    {DS_OL_DROP_TURNS, DS_PACK_NONE, 24, "a.jsonl", 0, {NULL}, {NULL}, 0, 0, 1, 1, 0, 1},
    /* drop */
    {DS_OL_DROP, DS_PACK_NONE, 40, "a.jsonl", 0, {NULL}, {NULL}, 0, 0, 1, 0, 0, 1},
    /* chunk: the packer cuts it, the mask follows its tokens */
    {DS_OL_CHUNK,
     DS_PACK_NONE,
     40,
     "a.jsonl",
     2,
     {"{system\nS}\n{user\nu1}\n{assistant\na1}\n{use", "r\nu2}\n{assistant\na2a2a2}\n"},
     {"0000000000000000000000000000000011100000", "0000000000000000011111110"},
     10,
     0,
     0,
     0,
     0,
     0},
    /* a conversation without an assistant message: dropped (no-loss-tokens), the other one kept */
    {DS_OL_TRUNCATE,
     DS_PACK_NONE,
     40,
     "bc.jsonl",
     1,
     {"{user\nhi}\n{assistant\nyo}\n"},
     {"0000000000000000000001110"},
     3,
     0,
     1,
     0,
     1,
     0},
    /* bfd: every conversation whole in one row (A after drop-turns 40, C 25, D 23 at L 64:
     * A and D share row 0, C alone in row 1) */
    {DS_OL_DROP_TURNS,
     DS_PACK_BFD,
     64,
     "acd.jsonl",
     2,
     {"{system\nS}\n{user\nu2}\n{assistant\na2a2a2}\n{user\nq}\n{assistant\na}\n", "{user\nhi}\n{assistant\nyo}\n"},
     {"000000000000000000000000000000001111111000000000000000000000110", "0000000000000000000001110"},
     12,
     1,
     0,
     1,
     0,
     0},
};

static uint32_t id_of(char ch) { return ch == '{' ? 257u : ch == '}' ? 258u : (uint32_t)(uint8_t)ch; }

static void run_case(const tk_tokenizer *tok, const ds_chat_template *chatml, size_t k) {
    const scenario *sc = &k_cases[k];
    char out[512], in[512], err[1024] = "";
    snprintf(out, sizeof out, "%s/out%zu", g_dir, k);
    snprintf(in, sizeof in, "%s/%s", g_dir, sc->input);
    const char *inputs[] = {in};
    ds_build_opts o;
    ds_build_opts_init(&o);
    o.tok = tok;
    o.tokenizer_spec = "tiny";
    o.inputs = inputs;
    o.n_inputs = 1;
    o.out_dir = out;
    o.seq_len = sc->L;
    o.pack = sc->pack;
    o.over_long = sc->ol;
    o.shuffle = 0;
    o.threads = 2;
    o.format = DS_FMT_CHAT;
    o.chat_template = chatml;
    ds_build_result res;
    int rc = ds_build(&o, &res, err, sizeof err);
    if (!sc->n_rows) {
        CHECK(rc == DS_ERR_EMPTY, "case %zu: rc %d (%s), want DS_ERR_EMPTY", k, rc, err);
        return; /* no manifest: the accounting is in the message */
    }
    CHECK(rc == DS_OK, "case %zu: ds_build: %s", k, err);
    if (rc) return;
    const ds_build_account *a = &res.acc;
    CHECK(a->loss_tokens == sc->loss, "case %zu: %llu loss tokens, want %llu", k, (unsigned long long)a->loss_tokens,
          (unsigned long long)sc->loss);
    CHECK(a->docs_truncated == sc->truncated && a->docs_dropped == sc->dropped && a->turns_dropped == sc->turns &&
              a->reasons[DS_REJ_NO_LOSS] == sc->no_loss && a->reasons[DS_REJ_OVERLONG_DROP] == sc->overlong,
          "case %zu: truncated %llu dropped %llu turns %llu no-loss %llu over-long %llu", k,
          (unsigned long long)a->docs_truncated, (unsigned long long)a->docs_dropped,
          (unsigned long long)a->turns_dropped, (unsigned long long)a->reasons[DS_REJ_NO_LOSS],
          (unsigned long long)a->reasons[DS_REJ_OVERLONG_DROP]);
    ds_shardset *set = NULL;
    rc = ds_shardset_open(out, DS_SHARD_OPEN_FULL, &set, err, sizeof err);
    CHECK(rc == DS_OK, "case %zu: open: %s", k, err);
    if (rc) return;
    CHECK(ds_shardset_rows(set, DS_SPLIT_TRAIN) == sc->n_rows, "case %zu: %llu rows, want %zu", k,
          (unsigned long long)ds_shardset_rows(set, DS_SPLIT_TRAIN), sc->n_rows);
    uint32_t *tokens = calloc(sc->L, sizeof *tokens), *docs = calloc(sc->L, sizeof *docs);
    uint8_t *mask = calloc(sc->L, 1);
    for (size_t r = 0; r < sc->n_rows && r < ds_shardset_rows(set, DS_SPLIT_TRAIN); r++) {
        CHECK(ds_shardset_read_msg(set, DS_SPLIT_TRAIN, r, tokens, NULL, docs, mask, err, sizeof err) == DS_OK,
              "case %zu row %zu: %s", k, r, err);
        const char *want = sc->rows[r], *wm = sc->masks[r];
        size_t n = strlen(want);
        CHECK(strlen(wm) == n, "case %zu row %zu: the expected mask has %zu entries for %zu tokens", k, r, strlen(wm),
              n);
        char got[256] = "", gotm[256] = "";
        for (uint32_t i = 0; i < sc->L && i < sizeof got - 1; i++) {
            got[i] = tokens[i] == 257 ? '{' : tokens[i] == 258 ? '}' : (char)tokens[i];
            gotm[i] = mask[i] ? '1' : '0';
        }
        int same = 1;
        for (size_t i = 0; i < sc->L; i++) {
            uint32_t w = i < n ? id_of(want[i]) : 256; /* past the row: padding (<|endoftext|>, no target) */
            uint8_t m = i < n ? (uint8_t)(wm[i] == '1') : 0;
            if (tokens[i] != w || mask[i] != m) same = 0;
        }
        CHECK(same, "case %zu row %zu:\n  got  %s\n  mask %s\n  want %s\n  mask %s", k, r, got, gotm, want, wm);
    }
    if (sc->pack == DS_PACK_BFD) { /* A' and D: two segments in row 0, no conversation split over rows */
        CHECK(ds_shardset_read(set, DS_SPLIT_TRAIN, 0, tokens, NULL, docs, mask) == DS_OK, "bfd row 0");
        CHECK(docs[0] == 0 && docs[39] == 0 && docs[40] == 1 && docs[62] == 1, "bfd: segments %u %u %u %u", docs[0],
              docs[39], docs[40], docs[62]);
    }
    free(tokens);
    free(docs);
    free(mask);
    ds_shardset_close(set);
}

int main(void) {
    const char *td = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/test_chat_build.XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    tk_tokenizer *tok = tiny();
    const ds_chat_template *chatml = ds_chat_template_find("chatml");
    CHECK(chatml != NULL, "chatml");
    write_file("a.jsonl", CONV_A);
    write_file("bc.jsonl", CONV_B CONV_C);
    write_file("acd.jsonl", CONV_A CONV_C CONV_D);
    if (tok && chatml)
        for (size_t k = 0; k < sizeof k_cases / sizeof *k_cases; k++) run_case(tok, chatml, k);
    /* a text build refuses drop-turns (a conversation policy) */
    if (tok) {
        char out[512], in[512], err[512] = "";
        snprintf(out, sizeof out, "%s/text", g_dir);
        snprintf(in, sizeof in, "%s/a.jsonl", g_dir);
        const char *inputs[] = {in};
        ds_build_opts o;
        ds_build_opts_init(&o);
        o.tok = tok;
        o.inputs = inputs;
        o.n_inputs = 1;
        o.out_dir = out;
        o.seq_len = 64;
        o.over_long = DS_OL_DROP_TURNS;
        CHECK(ds_build(&o, NULL, err, sizeof err) == DS_ERR_ARG && strstr(err, "drop-turns"), "text + drop-turns: %s",
              err);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    tk_free(tok);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_chat_build: ok (%zu cases)\n", sizeof k_cases / sizeof *k_cases);
    return 0;
}
