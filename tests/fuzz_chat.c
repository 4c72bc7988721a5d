/* fuzz_chat.c - libFuzzer target for fine-tuning records (dataset/chat.c,
 * chat_template.c): the input is one JSONL line, parsed by ds_chat_parse
 * (format auto, then chat and prompt-completion), rendered through every
 * built-in template with each loss-on, and encoded with a byte-level
 * tokenizer holding the templates' special tokens; the invariants checked
 * are the ones shards rely on: pieces tile the rendered text, loss spans lie
 * inside it in order, one mask byte per id. The input is also offered to
 * ds_chat_template_recognise as a Jinja source. Seeds:
 * tests/data/fuzz/make_chat_seeds.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_chat.h"
#include "tk.h"

static tk_tokenizer *g_tok;

static tk_tokenizer *tokenizer(void) {
    if (g_tok) return g_tok;
    static uint8_t bytes[256];
    static const uint8_t *toks[256];
    static uint32_t lens[256];
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        toks[i] = &bytes[i];
        lens[i] = 1;
    }
    static const char *const names[] = {"<|im_start|>",
                                        "<|im_end|>",
                                        "<|begin_of_text|>",
                                        "<|end_of_text|>",
                                        "<|start_header_id|>",
                                        "<|end_header_id|>",
                                        "<|eot_id|>",
                                        "<start_of_turn>",
                                        "<end_of_turn>",
                                        "<|system|>",
                                        "<|user|>",
                                        "<|assistant|>",
                                        "<|end|>"};
    tk_special sp[sizeof names / sizeof *names];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) sp[i] = (tk_special){names[i], 256 + (uint32_t)i};
    if (tk_create(toks, lens, 256, TK_PAT_CL100K, sp, sizeof names / sizeof *names, &g_tok) != TK_OK) abort();
    return g_tok;
}

static void check(const ds_chat_rendered *r, const ds_chat_ids *v) {
    size_t at = 0;
    for (size_t i = 0; i < r->n_pieces; i++) {
        if (r->pieces[i].off != at || !r->pieces[i].len) abort();
        at += r->pieces[i].len;
    }
    if (at != r->len) abort();
    size_t end = 0;
    for (size_t i = 0; i < r->n_spans; i++) {
        if (r->spans[i].off < end || r->spans[i].off + r->spans[i].len > r->len || !r->spans[i].len) abort();
        end = r->spans[i].off + r->spans[i].len;
    }
    for (size_t i = 0; i < v->len; i++)
        if (v->mask[i] > 1) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tk_tokenizer *tok = tokenizer();
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    ds_chat_ids v = {0};
    char why[200];
    static const ds_format fmts[] = {DS_FMT_AUTO, DS_FMT_CHAT, DS_FMT_PROMPT_COMPLETION};
    for (size_t f = 0; f < 3; f++) {
        ds_chat_parse_opts po = {.format = fmts[f]};
        int rc = ds_chat_parse(data, size, &po, &c, why, sizeof why);
        if (rc != DS_CHAT_OK) {
            if (rc > 0 && !why[0]) abort(); /* every refusal says why */
            continue;
        }
        for (size_t t = 0; ds_chat_template_at(t); t++)
            for (int l = 0; l < 4; l++) {
                ds_chat_render_opts ro = {
                    .bos_token = "<|begin_of_text|>", .eos_token = "<|end_of_text|>", .loss_on = (ds_loss_on)l};
                if (ds_chat_render(ds_chat_template_at(t), &c, &ro, &r, why, sizeof why) != DS_CHAT_OK) continue;
                v.len = 0;
                if (ds_chat_encode(tok, &r, &v, why, sizeof why) != DS_OK) continue;
                check(&r, &v);
            }
    }
    ds_chat_template_recognise((const char *)data, size);
    ds_chat_free(&c);
    ds_chat_rendered_free(&r);
    ds_chat_ids_free(&v);
    return 0;
}
