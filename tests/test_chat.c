/* test_chat - chat records and templates (dataset/chat.c, chat_template.c)
 * against transformers: tests/data/chat/fixtures.jsonl, made by
 * tests/data/chat/make_fixtures.py (apply_chat_template with each family's
 * Jinja and the real Qwen2 / Llama 3 tokenizers in ../shared/vocab/hf).
 * Per case: the rendered text byte for byte, the template's refusals, and
 * where the tokenizer holds the template's special tokens the ids and the
 * loss mask. Plus the record parser's refusals and `auto` recognition.
 * argv[1]: shared dir (default MKS_SHARED_DIR). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "ds_chat.h"
#include "tk.h"

static int failures;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            failures++;                                                                                                \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

static tk_tokenizer *toks[2];
static const char *tok_names[2] = {"qwen2", "llama3"};

static tk_tokenizer *get_tok(const char *shared, const char *name) {
    for (int i = 0; i < 2; i++) {
        if (strcmp(name, tok_names[i])) continue;
        if (!toks[i]) {
            char path[1024], err[256];
            snprintf(path, sizeof path, "%s/vocab/hf/%s/tokenizer.json", shared, name);
            if (tk_load(path, TK_PAT_NONE, &toks[i], err, sizeof err) != TK_OK) {
                fprintf(stderr, "FAIL: cannot load %s: %s\n", path, err);
                failures++;
                return NULL;
            }
        }
        return toks[i];
    }
    return NULL;
}

static size_t n_cases, n_ids, n_refused;

static void run_case(const char *shared, json_t *row, ds_chat *c, ds_chat_rendered *r, ds_chat_ids *v) {
    const char *tname = json_string_value(json_object_get(row, "template"));
    const ds_chat_template *t = ds_chat_template_find(tname);
    CHECK(t, "no built-in template %s", tname);
    if (!t) return;
    /* a raw line where the record holds what jansson's dump would change (a repeated key) */
    json_t *raw = json_object_get(row, "line");
    char *line = raw ? strdup(json_string_value(raw)) : json_dumps(json_object_get(row, "record"), JSON_COMPACT);
    ds_chat_parse_opts po = {.format = DS_FMT_AUTO};
    char why[300];
    int rc = ds_chat_parse((const uint8_t *)line, strlen(line), &po, c, why, sizeof why);
    CHECK(rc == DS_CHAT_OK && c->format == DS_FMT_CHAT, "%s: parse %d (%s)", tname, rc, why);
    ds_chat_render_opts ro = {.bos_token = json_string_value(json_object_get(row, "bos")),
                              .eos_token = json_string_value(json_object_get(row, "eos")),
                              .loss_on = DS_LOSS_DEFAULT};
    rc = ds_chat_render(t, c, &ro, r, why, sizeof why);
    n_cases++;
    json_t *err = json_object_get(row, "error");
    if (err) {
        n_refused++;
        CHECK(rc == DS_CHAT_TEMPLATE, "%s: transformers raised '%s', we rendered (%d) %s", tname,
              json_string_value(err), rc, line);
        free(line);
        return;
    }
    const char *want = json_string_value(json_object_get(row, "text"));
    CHECK(rc == DS_CHAT_OK, "%s: render refused: %s", tname, why);
    if (rc != DS_CHAT_OK) {
        free(line);
        return;
    }
    CHECK(r->len == strlen(want) && !memcmp(r->text, want, r->len), "%s: text differs\n ours: %.*s\n want: %s\n rec %s",
          tname, (int)r->len, r->text, want, line);
    json_t *ids = json_object_get(row, "ids"), *mask = json_object_get(row, "mask");
    const char *tkname = json_string_value(json_object_get(row, "tokenizer"));
    if (ids && tkname) {
        tk_tokenizer *tok = get_tok(shared, tkname);
        if (!tok) {
            free(line);
            return;
        }
        v->len = 0;
        rc = ds_chat_encode(tok, r, v, why, sizeof why);
        CHECK(rc == DS_OK, "%s: encode %d %s", tname, rc, why);
        size_t n = json_array_size(ids);
        int same = v->len == n, same_mask = v->len == n;
        for (size_t i = 0; same && i < n; i++) same = v->ids[i] == (uint32_t)json_integer_value(json_array_get(ids, i));
        for (size_t i = 0; same_mask && i < n; i++)
            same_mask = v->mask[i] == (uint8_t)json_integer_value(json_array_get(mask, i));
        CHECK(same, "%s: ids differ (%zu vs %zu) for %s", tname, v->len, n, line);
        if (same && !same_mask) {
            fprintf(stderr, "mask ours/want:\n");
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, "%u/%lld ", v->mask[i], (long long)json_integer_value(json_array_get(mask, i)));
            fputc('\n', stderr);
        }
        CHECK(!same || same_mask, "%s: mask differs for %s", tname, line);
        n_ids++;
    }
    free(line);
}

/* The record parser's refusals and list-of-parts joining. */
static void parse_cases(void) {
    ds_chat c = {0};
    char why[300];
    ds_chat_parse_opts po = {.format = DS_FMT_CHAT};
    struct {
        const char *line;
        int want;
    } cases[] = {
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", DS_CHAT_OK},
        {"{\"messages\":[{\"role\":\"robot\",\"content\":\"hi\"}]}", DS_CHAT_UNKNOWN_ROLE},
        {"{\"messages\":[{\"role\":\"user\"}]}", DS_CHAT_BAD_CONTENT},
        {"{\"messages\":[{\"role\":\"user\",\"content\":3}]}", DS_CHAT_BAD_CONTENT},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", DS_CHAT_BAD_CONTENT},
        {"{\"messages\":{\"role\":\"user\"}}", DS_CHAT_NOT_LIST},
        {"{\"messages\":[3]}", DS_CHAT_NOT_LIST},
        {"{\"text\":\"x\"}", DS_CHAT_NO_MESSAGES},
        {"{\"messages\":[", DS_CHAT_BAD_JSON},
        {"[1]", DS_CHAT_BAD_JSON},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = ds_chat_parse((const uint8_t *)cases[i].line, strlen(cases[i].line), &po, &c, why, sizeof why);
        CHECK(rc == cases[i].want, "parse %s: %d (%s), want %d", cases[i].line, rc, why, cases[i].want);
        CHECK(rc == DS_CHAT_OK || why[0], "parse %s: no reason", cases[i].line);
    }
    /* the role name in a message is escaped */
    const char *esc = "{\"messages\":[{\"role\":\"\\u001b[31m\",\"content\":\"x\"}]}";
    ds_chat_parse((const uint8_t *)esc, strlen(esc), &po, &c, why, sizeof why);
    CHECK(!strchr(why, 0x1b), "control byte in the message: %s", why);
    /* auto: by the fields; prompt-completion strings and lists; --messages-field */
    po.format = DS_FMT_AUTO;
    const char *pc = "{\"prompt\":\"Q: 2+2?\",\"completion\":\" 4\"}";
    CHECK(ds_chat_parse((const uint8_t *)pc, strlen(pc), &po, &c, why, sizeof why) == DS_CHAT_OK &&
              c.format == DS_FMT_PROMPT_COMPLETION && c.pc_strings && c.n == 2 && c.msgs[1].completion,
          "prompt-completion strings");
    const char *pcl = "{\"prompt\":[{\"role\":\"user\",\"content\":\"q\"}],\"completion\":[{\"role\":\"assistant\","
                      "\"content\":\"a\"}]}";
    CHECK(ds_chat_parse((const uint8_t *)pcl, strlen(pcl), &po, &c, why, sizeof why) == DS_CHAT_OK &&
              c.format == DS_FMT_PROMPT_COMPLETION && !c.pc_strings && c.n == 2 && !c.msgs[0].completion &&
              c.msgs[1].completion,
          "prompt-completion lists");
    const char *mixed = "{\"prompt\":\"q\",\"completion\":[]}";
    CHECK(ds_chat_parse((const uint8_t *)mixed, strlen(mixed), &po, &c, why, sizeof why) == DS_CHAT_BAD_CONTENT,
          "prompt string + completion list");
    const char *txt = "{\"text\":\"plain\"}";
    CHECK(ds_chat_parse((const uint8_t *)txt, strlen(txt), &po, &c, why, sizeof why) == DS_CHAT_OK &&
              c.format == DS_FMT_TEXT && c.buf_len == 5,
          "auto text");
    po.messages_field = "conversation";
    const char *conv = "{\"conversation\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                       "{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]}]}";
    CHECK(ds_chat_parse((const uint8_t *)conv, strlen(conv), &po, &c, why, sizeof why) == DS_CHAT_OK && c.n == 1 &&
              c.msgs[0].len == 3 && !memcmp(c.buf + c.msgs[0].off, "a\nb", 3) && c.other_parts == 1,
          "messages field + parts");
    /* a record over DS_CHAT_MAX_RECORD is refused before jansson builds its tree (~26x the bytes) */
    size_t big = DS_CHAT_MAX_RECORD + 64;
    char *line = malloc(big);
    if (line) {
        const char *head = "{\"messages\":[{\"role\":\"user\",\"content\":\"";
        memset(line, 'a', big);
        memcpy(line, head, strlen(head));
        memcpy(line + big - 4, "\"}]}", 4);
        po.format = DS_FMT_CHAT;
        po.messages_field = NULL;
        int rc = ds_chat_parse((const uint8_t *)line, big, &po, &c, why, sizeof why);
        CHECK(rc == DS_CHAT_TOO_LARGE && strstr(why, "MiB"), "over-large record: %d %s", rc, why);
        CHECK(!strcmp(ds_chat_status_name(rc), "chat-record-too-large"), "status name");
        CHECK(ds_chat_parse((const uint8_t *)line + big - 200, 0, &po, &c, why, sizeof why) == DS_CHAT_BAD_JSON,
              "empty line");
        free(line);
    }
    ds_chat_free(&c);
    /* names */
    ds_format f;
    ds_loss_on l;
    CHECK(!ds_format_parse("prompt-completion", &f) && f == DS_FMT_PROMPT_COMPLETION, "format parse");
    CHECK(ds_format_parse("jsonl", &f) == -1, "format parse unknown");
    CHECK(!ds_loss_on_parse("all", &l) && l == DS_LOSS_ALL &&
              !strcmp(ds_loss_on_name(DS_LOSS_COMPLETION), "completion"),
          "loss-on names");
}

/* Prompt/completion strings: completion + eos is the target; loss-on all / completion. */
static void loss_cases(const char *shared) {
    tk_tokenizer *tok = get_tok(shared, "qwen2");
    if (!tok) return;
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    ds_chat_ids v = {0};
    char why[200];
    ds_chat_parse_opts po = {.format = DS_FMT_AUTO};
    const char *pc = "{\"prompt\":\"Question: two plus two?\",\"completion\":\" Answer: four\"}";
    CHECK(ds_chat_parse((const uint8_t *)pc, strlen(pc), &po, &c, why, sizeof why) == DS_CHAT_OK, "pc parse");
    ds_chat_render_opts ro = {.eos_token = "<|endoftext|>", .loss_on = DS_LOSS_DEFAULT};
    const ds_chat_template *t = ds_chat_template_find("chatml");
    CHECK(ds_chat_render(t, &c, &ro, &r, why, sizeof why) == DS_CHAT_OK && r.n_spans == 1, "pc render");
    CHECK(ds_chat_encode(tok, &r, &v, why, sizeof why) == DS_OK && v.len > 3, "pc encode");
    size_t first = v.len;
    for (size_t i = 0; i < v.len; i++)
        if (v.mask[i] && first == v.len) first = i;
    for (size_t i = first; i < v.len; i++) CHECK(v.mask[i], "pc mask: a hole at %zu", i);
    CHECK(first > 0 && first < v.len - 1, "pc mask starts inside (%zu of %zu)", first, v.len);
    /* the prompt's tokens are not targets: their text is the prompt */
    size_t plen = 0;
    for (size_t i = 0; i < first; i++) {
        const uint8_t *b;
        size_t n;
        tk_token_bytes(tok, v.ids[i], &b, &n);
        plen += n;
    }
    CHECK(plen == strlen("Question: two plus two?"), "pc prompt tokens cover %zu bytes", plen);
    ro.loss_on = DS_LOSS_ALL;
    v.len = 0;
    CHECK(ds_chat_render(t, &c, &ro, &r, why, sizeof why) == DS_CHAT_OK &&
              ds_chat_encode(tok, &r, &v, why, sizeof why) == DS_OK,
          "all");
    for (size_t i = 0; i < v.len; i++) CHECK(v.mask[i], "loss-on all: token %zu not a target", i);
    /* chat with loss-on completion: the last assistant message only */
    const char *ch = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"},"
                     "{\"role\":\"user\",\"content\":\"c\"},{\"role\":\"assistant\",\"content\":\"d\"}]}";
    ds_chat_parse((const uint8_t *)ch, strlen(ch), &po, &c, why, sizeof why);
    ro.loss_on = DS_LOSS_COMPLETION;
    CHECK(ds_chat_render(t, &c, &ro, &r, why, sizeof why) == DS_CHAT_OK && r.n_spans == 1 &&
              r.text[r.spans[0].off] == 'd',
          "chat loss-on completion: the last assistant turn");
    /* a template special token the tokenizer lacks is refused, named */
    v.len = 0;
    const ds_chat_template *g = ds_chat_template_find("gemma");
    ro.loss_on = DS_LOSS_DEFAULT;
    ro.bos_token = NULL;
    CHECK(ds_chat_render(g, &c, &ro, &r, why, sizeof why) == DS_CHAT_OK, "gemma render");
    CHECK(ds_chat_encode(tok, &r, &v, why, sizeof why) == DS_ERR_ARG && strstr(why, "<start_of_turn>"),
          "gemma specials with qwen2: %s", why);
    ds_chat_free(&c);
    ds_chat_rendered_free(&r);
    ds_chat_ids_free(&v);
}

/* Qwen3: a reasoning that is not a string, on an assistant turn after the
 * last query that is not the last message, is rendered (and the template
 * raises on its .strip) exactly when Python finds it true; the spellings of a
 * JSON number json.loads makes 0 or 0.0 are false (the fixtures' records go
 * through json.dumps, which never writes these). */
static void qwen3_reasoning_cases(void) {
    const ds_chat_template *t = ds_chat_template_find("qwen3");
    CHECK(t, "no qwen3");
    if (!t) return;
    struct {
        const char *value;
        int raises; /* bool(json.loads(value)) */
    } cases[] = {{"-0", 0},    {"0e5", 0}, {"1e-400", 0}, {"-0.0e-0", 0}, {"0.5", 1},       {"true", 1},
                 {"false", 0}, {"[]", 0},  {"[0]", 1},    {"{}", 0},      {"{\"a\":1}", 1}, {"null", 0}};
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    ds_chat_parse_opts po = {.format = DS_FMT_CHAT};
    ds_chat_render_opts ro = {.loss_on = DS_LOSS_DEFAULT};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char line[400], why[200];
        snprintf(line, sizeof line,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":"
                 "\"a</think>b\",\"reasoning_content\" : %s },{\"role\":\"tool\",\"content\":\"t\"},"
                 "{\"role\":\"assistant\",\"content\":\"c\"}]}",
                 cases[i].value);
        int rc = ds_chat_parse((const uint8_t *)line, strlen(line), &po, &c, why, sizeof why);
        CHECK(rc == DS_CHAT_OK, "qwen3 reasoning %s: parse %d %s", cases[i].value, rc, why);
        rc = ds_chat_render(t, &c, &ro, &r, why, sizeof why);
        CHECK(rc == (cases[i].raises ? DS_CHAT_TEMPLATE : DS_CHAT_OK), "qwen3 reasoning %s: render %d (%s)",
              cases[i].value, rc, why);
        /* not rendered: the content stays whole ('</think>' is split off only without a reasoning) */
        if (rc == DS_CHAT_OK && strcmp(cases[i].value, "null"))
            CHECK(strstr((const char *)r.text, "assistant\na</think>b"), "qwen3 reasoning %s: %s", cases[i].value,
                  r.text);
    }
    ds_chat_free(&c);
    ds_chat_rendered_free(&r);
}

/* Tool calling records where mkshards refuses what Jinja would print
 * through Python's repr (a tool call name that is a list or object; tools
 * that is a true non-list, which Jinja iterates as keys or characters), and
 * a null content beside tool_calls under a template that renders no tool
 * calls; the same records' parse keeps the rest. */
static void tool_refusal_cases(void) {
    struct {
        const char *tmpl, *line;
        int want;
    } cases[] = {
        {"qwen2.5",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"\","
         "\"tool_calls\":[{\"function\":{\"name\":[1],\"arguments\":{}}}]}]}",
         DS_CHAT_TEMPLATE},
        {"qwen3",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"\","
         "\"tool_calls\":[{\"name\":{\"a\":1},\"arguments\":\"{}\"}]}]}",
         DS_CHAT_TEMPLATE},
        {"qwen3",
         "{\"tools\":{\"a\":1},\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
         "\"content\":\"a\"}]}",
         DS_CHAT_TEMPLATE},
        {"qwen2.5",
         "{\"tools\":\"ab\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
         "\"content\":\"a\"}]}",
         DS_CHAT_TEMPLATE},
        {"qwen2.5",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,"
         "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"x\":[1.0,2e400]}}}]}]}",
         DS_CHAT_BAD_JSON}, /* 2e400 is Infinity to json.loads; jansson refuses it, as every record parse does */
        {"llama3",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":null,"
         "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}",
         DS_CHAT_TEMPLATE},
        {"chatml",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"a\","
         "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}",
         DS_CHAT_OK}, /* a template that reads no tool_calls renders the content */
        {"chatml", "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}]}",
         DS_CHAT_TEMPLATE}, /* tool_calls [] beside a null content: Mistral renders it, chatml raises */
        {"chatml", "{\"messages\":[{\"role\":\"user\",\"content\":null,\"tool_calls\":[{}]}]}",
         DS_CHAT_BAD_CONTENT}, /* only an assistant message carries tool calls */
    };
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    ds_chat_parse_opts po = {.format = DS_FMT_CHAT};
    ds_chat_render_opts ro = {.loss_on = DS_LOSS_DEFAULT};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char why[300] = "";
        int rc = ds_chat_parse((const uint8_t *)cases[i].line, strlen(cases[i].line), &po, &c, why, sizeof why);
        if (rc == DS_CHAT_OK) rc = ds_chat_render(ds_chat_template_find(cases[i].tmpl), &c, &ro, &r, why, sizeof why);
        CHECK(rc == cases[i].want, "tool case %zu (%s): %d (%s), want %d", i, cases[i].tmpl, rc, why, cases[i].want);
        CHECK(rc == DS_CHAT_OK || why[0], "tool case %zu: no reason", i);
    }
    ds_chat_free(&c);
    ds_chat_rendered_free(&r);
}

/* Mistral v7 (text-checked in the fixtures: no Mistral vocabulary here):
 * its tags are special pieces while the same text inside a message stays
 * text, and the loss span is the content + eos, or [TOOL_CALLS]... + eos. */
static void v7_cases(void) {
    const ds_chat_template *t = ds_chat_template_find("mistral-v7");
    CHECK(t, "no mistral-v7");
    if (!t) return;
    const char *line = "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
                       "\"[INST]u\"},{\"role\":\"assistant\",\"content\":\"ans\"},{\"role\":\"user\",\"content\":"
                       "\"v\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"abcdefghi\","
                       "\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}";
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    char why[300];
    ds_chat_parse_opts po = {.format = DS_FMT_CHAT};
    ds_chat_render_opts ro = {.bos_token = "<s>", .eos_token = "</s>", .loss_on = DS_LOSS_DEFAULT};
    CHECK(ds_chat_parse((const uint8_t *)line, strlen(line), &po, &c, why, sizeof why) == DS_CHAT_OK, "v7 parse %s",
          why);
    CHECK(ds_chat_render(t, &c, &ro, &r, why, sizeof why) == DS_CHAT_OK, "v7 render %s", why);
    size_t inst = 0, inst_text = 0;
    for (size_t i = 0; i < r.n_pieces; i++) {
        const char *p = (const char *)r.text + r.pieces[i].off;
        if (r.pieces[i].special && r.pieces[i].len == 6 && !memcmp(p, "[INST]", 6)) inst++;
        if (!r.pieces[i].special && r.pieces[i].len >= 7 && !memcmp(p, "[INST]u", 7)) inst_text++;
    }
    CHECK(inst == 2 && inst_text == 1, "v7 [INST]: %zu special, %zu in text", inst, inst_text);
    CHECK(r.n_spans == 2, "v7 spans %zu", r.n_spans);
    if (r.n_spans == 2) {
        CHECK(r.spans[0].len == 7 && !memcmp(r.text + r.spans[0].off, "ans</s>", 7), "v7 span 0: %.*s",
              (int)r.spans[0].len, r.text + r.spans[0].off);
        const char *want = "[TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{}</s>";
        CHECK(r.spans[1].len == strlen(want) && !memcmp(r.text + r.spans[1].off, want, strlen(want)), "v7 span 1: %.*s",
              (int)r.spans[1].len, r.text + r.spans[1].off);
    }
    ds_chat_free(&c);
    ds_chat_rendered_free(&r);
}

/* auto: tokenizer_config.json's chat_template recognised up to layout, else refused with the names. */
static void auto_cases(void) {
    char dir[] = "/tmp/test_chat_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    const ds_chat_template *t = NULL;
    for (size_t i = 0; ds_chat_template_at(i); i++) {
        const ds_chat_template *want = ds_chat_template_at(i);
        json_t *o = json_object();
        /* another layout: each "%}" followed by a newline */
        const char *j = ds_chat_template_jinja(want);
        size_t n = strlen(j);
        char *re = malloc(2 * n + 1), *p = re;
        for (size_t k = 0; k < n; k++) {
            *p++ = j[k];
            if (k > 0 && j[k] == '}' && j[k - 1] == '%') *p++ = '\n';
        }
        *p = 0;
        json_object_set_new(o, "chat_template", json_string(re));
        json_dump_file(o, path, 0);
        json_decref(o);
        free(re);
        t = NULL;
        int rc = ds_chat_template_auto(dir, &t, err, sizeof err);
        CHECK(rc == DS_OK && t == want, "auto %s: %d %s", ds_chat_template_name(want), rc, err);
    }
    FILE *f = fopen(path, "w");
    fputs("{\"chat_template\":\"{{ messages[0]['content'] }}\"}", f);
    fclose(f);
    CHECK(ds_chat_template_auto(dir, &t, err, sizeof err) == DS_ERR_FORMAT && strstr(err, "chatml") &&
              strstr(err, "llama3"),
          "unrecognised: %s", err);
    /* a changed string literal is another template */
    f = fopen(path, "w");
    fputs("{\"chat_template\":\"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\\\n' + "
          "message['content'] + '<|im_end|>' + ' '}}{% endfor %}{% if add_generation_prompt %}{{ "
          "'<|im_start|>assistant\\\\n' }}{% endif %}\"}",
          f);
    fclose(f);
    CHECK(ds_chat_template_auto(dir, &t, err, sizeof err) == DS_ERR_FORMAT, "changed literal recognised");
    unlink(path);
    CHECK(ds_chat_template_auto(dir, &t, err, sizeof err) == DS_ERR_IO, "no config");
    rmdir(dir);
}

/* Published chat_template strings (tests/data/chat/published, made by its
 * make_published.py): each is recognised as the built-in MANIFEST names, as
 * a .jinja file and inside a tokenizer_config.json (what `auto` reads). */
static void published_cases(void) {
    char dir[1024], path[1400], err[512];
    snprintf(dir, sizeof dir, "%s/chat/published", MKS_TEST_DATA);
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    FILE *m = fopen(path, "r");
    CHECK(m, "no %s", path);
    if (!m) return;
    char tmp[] = "/tmp/test_chat_pub_XXXXXX";
    if (!mkdtemp(tmp)) {
        fclose(m);
        return;
    }
    char line[512], file[256], want[64], cfg[300];
    snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", tmp);
    int n = 0;
    while (fgets(line, sizeof line, m)) {
        if (line[0] == '#' || sscanf(line, "%255s %63s", file, want) != 2) continue;
        n++;
        snprintf(path, sizeof path, "%s/%s", dir, file);
        const ds_chat_template *t = NULL;
        int rc = ds_chat_template_resolve(path, NULL, &t, err, sizeof err);
        CHECK(rc == DS_OK && t && !strcmp(ds_chat_template_name(t), want), "%s as %s: rc %d (%s) %s", file, want, rc,
              t ? ds_chat_template_name(t) : "-", rc ? err : "");
        FILE *jf = fopen(path, "rb");
        char *text = NULL;
        size_t len = 0;
        if (jf) {
            fseek(jf, 0, SEEK_END);
            len = (size_t)ftell(jf);
            rewind(jf);
            text = malloc(len + 1);
            if (text && fread(text, 1, len, jf) != len) len = 0;
            fclose(jf);
        }
        CHECK(text && len, "read %s", path);
        if (!text) continue;
        json_t *o = json_object();
        json_object_set_new(o, "chat_template", json_stringn(text, len));
        json_dump_file(o, cfg, 0);
        json_decref(o);
        free(text);
        t = NULL;
        rc = ds_chat_template_auto(tmp, &t, err, sizeof err);
        CHECK(rc == DS_OK && t && !strcmp(ds_chat_template_name(t), want), "auto %s as %s: rc %d %s", file, want, rc,
              rc ? err : "");
    }
    fclose(m);
    CHECK(n >= 6, "published copies: %d", n);
    unlink(cfg);
    rmdir(tmp);
}

int main(int argc, char **argv) {
    const char *shared = argc > 1 ? argv[1] : MKS_SHARED_DIR;
    char fx[1024];
    snprintf(fx, sizeof fx, "%s/chat/fixtures.jsonl", MKS_TEST_DATA);
    FILE *f = fopen(fx, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", fx);
        return 1;
    }
    struct stat st;
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/vocab/hf/qwen2/tokenizer.json", shared);
    if (stat(probe, &st)) {
        fprintf(stderr, "skip: no %s\n", probe);
        fclose(f);
        return 77;
    }
    parse_cases();
    auto_cases();
    published_cases();
    loss_cases(shared);
    qwen3_reasoning_cases();
    tool_refusal_cases();
    v7_cases();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int first = 1;
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    ds_chat_ids v = {0};
    while ((n = getline(&line, &cap, f)) > 0) {
        json_error_t je;
        json_t *row = json_loadb(line, (size_t)n, 0, &je);
        CHECK(row, "fixture line: %s", je.text);
        if (!row) continue;
        if (first) { /* the Jinja sources: ours must be the ones rendered */
            first = 0;
            const char *k;
            json_t *val;
            json_object_foreach(json_object_get(row, "jinja"), k, val) {
                const ds_chat_template *t = ds_chat_template_find(k);
                CHECK(t && !strcmp(ds_chat_template_jinja(t), json_string_value(val)), "jinja of %s differs", k);
            }
        } else {
            run_case(shared, row, &c, &r, &v);
        }
        json_decref(row);
    }
    free(line);
    fclose(f);
    ds_chat_free(&c);
    ds_chat_rendered_free(&r);
    ds_chat_ids_free(&v);
    for (int i = 0; i < 2; i++) tk_free(toks[i]);
    printf("test_chat: %zu cases (%zu refused by their template, %zu with ids and masks), %d failures\n", n_cases,
           n_refused, n_ids, failures);
    CHECK(n_cases > 250 && n_ids > 180, "too few cases");
    return failures ? 1 : 0;
}
