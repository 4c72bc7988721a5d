/* chat_template.c - the built-in chat templates (ds_chat.h, docs/chat.md).
 *
 * Each template is one table entry: its name, the family's Jinja source it
 * reproduces (what `auto` recognises in a tokenizer_config.json, and what
 * tests/data/chat/make_fixtures.py renders through transformers to make the
 * parity fixtures) and a C function that lays a conversation out exactly as
 * that Jinja does with add_generation_prompt false. Adding a template is one
 * function and one entry of `templates`.
 *
 * Loss spans (the mask, docs/chat.md): none of these Jinja sources has
 * {% generation %} blocks, so each target message's span is its rendered
 * content through the end-of-turn token that follows it (ChatML <|im_end|>,
 * Llama 3 <|eot_id|>, Gemma <end_of_turn>, Phi-3 <|end|>, and eos_token for
 * [INST] and DeepSeek; Llama 2 also the ' ' before its eos). The fixtures'
 * reference is transformers' return_assistant_tokens_mask on the same Jinja
 * with {% generation %} around exactly that part.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_chat.h"
#include "ds_internal.h"

/* ---- rendering helpers */

typedef struct {
    const ds_chat *c;
    const ds_chat_render_opts *o;
    ds_chat_rendered *r;
    int nomem;
    size_t span_start; /* SIZE_MAX: no span open */
} rd;

static void put(rd *d, const char *s, size_t n, int special) {
    ds_chat_rendered *r = d->r;
    if (d->nomem || !n) return;
    if (r->len + n + 1 > r->cap) {
        size_t nc = r->cap ? r->cap : 1024;
        while (nc < r->len + n + 1) nc *= 2;
        uint8_t *t = realloc(r->text, nc);
        if (!t) {
            d->nomem = 1;
            return;
        }
        r->text = t;
        r->cap = nc;
    }
    memcpy(r->text + r->len, s, n);
    /* text that follows text extends the last piece */
    if (!special && r->n_pieces && !r->pieces[r->n_pieces - 1].special) {
        r->pieces[r->n_pieces - 1].len += n;
    } else {
        if (r->n_pieces == r->pieces_cap) {
            size_t nc = r->pieces_cap ? 2 * r->pieces_cap : 32;
            ds_chat_piece *p = realloc(r->pieces, nc * sizeof *p);
            if (!p) {
                d->nomem = 1;
                return;
            }
            r->pieces = p;
            r->pieces_cap = nc;
        }
        r->pieces[r->n_pieces++] = (ds_chat_piece){.off = r->len, .len = n, .special = special};
    }
    r->len += n;
    r->text[r->len] = 0;
}
static void text(rd *d, const char *s) { put(d, s, strlen(s), 0); }
static void special(rd *d, const char *s) { put(d, s, strlen(s), 1); }
/* bos_token / eos_token: special tokens of the tokenizer (empty: none) */
static void tok_opt(rd *d, const char *s) {
    if (s && *s) special(d, s);
}
static const char *content(rd *d, size_t i, size_t *n) {
    *n = d->c->msgs[i].len;
    return (const char *)d->c->buf + d->c->msgs[i].off;
}
static void msg_text(rd *d, size_t i) {
    size_t n;
    const char *s = content(d, i, &n);
    put(d, s, n, 0);
}

/* Python's str.isspace() on the code point at s (bytes in *n): what Jinja's
 * trim filter and str.strip() remove. */
static int py_space_at(const uint8_t *s, size_t avail, size_t *n) {
    *n = 1;
    uint8_t c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x80) return 0;
    unsigned cp;
    size_t len;
    if ((c & 0xe0) == 0xc0) cp = c & 0x1f, len = 2;
    else if ((c & 0xf0) == 0xe0) cp = c & 0x0f, len = 3;
    else return 0;
    if (len > avail) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[k] & 0x3f);
    }
    *n = len;
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
/* Python's str.rstrip() / str.strip() of s[0..n) (UTF-8): the last code
 * point before e starts at the last byte that is not 10xxxxxx. */
static size_t rstrip_end(const uint8_t *p, size_t a, size_t e) {
    size_t k;
    while (e > a) {
        size_t b = e - 1;
        while (b > a && (p[b] & 0xc0) == 0x80 && e - b < 3) b--;
        if (!py_space_at(p + b, e - b, &k) || b + k != e) break;
        e = b;
    }
    return e;
}
static void py_rstrip(const char *s, size_t *n) { *n = rstrip_end((const uint8_t *)s, 0, *n); }
static void py_strip(const char **s, size_t *n) {
    const uint8_t *p = (const uint8_t *)*s;
    size_t a = 0, e = *n, k;
    while (a < e && py_space_at(p + a, e - a, &k)) a += k;
    e = rstrip_end(p, a, e);
    *s = (const char *)p + a;
    *n = e - a;
}
static void msg_trimmed(rd *d, size_t i) {
    size_t n;
    const char *s = content(d, i, &n);
    py_strip(&s, &n);
    put(d, s, n, 0);
}

/* Whether message i is a target under the options. */
static int target(rd *d, size_t i) {
    const ds_chat *c = d->c;
    if (c->msgs[i].role != DS_ROLE_ASSISTANT) return 0;
    ds_loss_on l = d->o->loss_on;
    if (l == DS_LOSS_DEFAULT) l = c->format == DS_FMT_PROMPT_COMPLETION ? DS_LOSS_COMPLETION : DS_LOSS_ASSISTANT;
    if (l == DS_LOSS_ASSISTANT) return 1;
    if (l == DS_LOSS_COMPLETION) {
        if (c->format == DS_FMT_PROMPT_COMPLETION) return c->msgs[i].completion;
        for (size_t k = i + 1; k < c->n; k++) /* chat: the last assistant message */
            if (c->msgs[k].role == DS_ROLE_ASSISTANT) return 0;
        return 1;
    }
    return 0; /* all: one span over everything, added by ds_chat_render */
}
static void span_open(rd *d, size_t i) { d->span_start = target(d, i) ? d->r->len : SIZE_MAX; }
static void span_close(rd *d) {
    ds_chat_rendered *r = d->r;
    if (d->span_start == SIZE_MAX || d->nomem) return;
    if (r->n_spans == r->spans_cap) {
        size_t nc = r->spans_cap ? 2 * r->spans_cap : 16;
        ds_chat_span *s = realloc(r->spans, nc * sizeof *s);
        if (!s) {
            d->nomem = 1;
            return;
        }
        r->spans = s;
        r->spans_cap = nc;
    }
    if (r->len > d->span_start) r->spans[r->n_spans++] = (ds_chat_span){d->span_start, r->len - d->span_start};
    d->span_start = SIZE_MAX;
}
static ds_role role(rd *d, size_t i) { return d->c->msgs[i].role; }
static const char *rname(rd *d, size_t i) { return ds_role_name(role(d, i)); }

static int refuse(char *why, size_t whylen, const char *msg) {
    if (why && whylen) snprintf(why, whylen, "%s", msg);
    return DS_CHAT_TEMPLATE;
}
#define ALTERNATE "Conversation roles must alternate user/assistant/user/assistant/..."

/* ---- the templates */

/* ChatML as Qwen2 and many others ship it; qwen2 adds a default system
 * message when the first one is not a system message. */
static int chatml_common(rd *d, const char *default_system) {
    for (size_t i = 0; i < d->c->n; i++) {
        if (i == 0 && default_system && role(d, 0) != DS_ROLE_SYSTEM) {
            special(d, "<|im_start|>");
            text(d, "system\n");
            text(d, default_system);
            special(d, "<|im_end|>");
            text(d, "\n");
        }
        special(d, "<|im_start|>");
        text(d, rname(d, i));
        text(d, "\n");
        span_open(d, i);
        msg_text(d, i);
        special(d, "<|im_end|>");
        span_close(d);
        text(d, "\n");
    }
    return DS_CHAT_OK;
}
static int r_chatml(rd *d, char *why, size_t whylen) {
    (void)why, (void)whylen;
    return chatml_common(d, NULL);
}
static int r_qwen2(rd *d, char *why, size_t whylen) {
    (void)why, (void)whylen;
    return chatml_common(d, "You are a helpful assistant.");
}

/* ---- ChatML tool calling (Qwen2.5, Qwen3): the record's `tools` in the
 * system turn, an assistant message's tool_calls as <tool_call> blocks. */

/* json.dumps of a str (ensure_ascii=False): what tojson makes of string arguments. */
static void put_json_str(rd *d, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    text(d, "\"");
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        put(d, s + a, i - a, 0);
        char e[7] = {'\\', 0, 0, 0, 0, 0, 0};
        e[1] = ch == '"'    ? '"'
               : ch == '\\' ? '\\'
               : ch == '\n' ? 'n'
               : ch == '\r' ? 'r'
               : ch == '\t' ? 't'
               : ch == '\b' ? 'b'
               : ch == '\f' ? 'f'
                            : 0;
        if (!e[1]) e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[ch >> 4], e[5] = hex[ch & 15];
        text(d, e);
        a = i + 1;
    }
    put(d, s + a, n - a, 0);
    text(d, "\"");
}
static void put_buf(rd *d, size_t off, size_t len) { put(d, (const char *)d->c->buf + off, len, 0); }

#define QWEN_TOOLS_HEAD                                                                                                \
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function "  \
    "signatures within <tools></tools> XML tags:\n<tools>"
#define QWEN_TOOLS_TAIL                                                                                                \
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "              \
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "                      \
    "<args-json-object>}\n</tool_call>"
#define NOT_SERIALIZABLE "Object of type Undefined is not JSON serializable"

/* `tools` as both templates list them, after the system header they write. */
static int qwen_tools(rd *d, char *why, size_t whylen) {
    const ds_chat *c = d->c;
    if (c->tools_state == 2) return refuse(why, whylen, "tools is not a list");
    text(d, QWEN_TOOLS_HEAD);
    for (size_t i = 0; i < c->n_tools; i++) {
        text(d, "\n");
        put_buf(d, c->tools[i].off, c->tools[i].len);
    }
    text(d, QWEN_TOOLS_TAIL);
    special(d, "<|im_end|>");
    text(d, "\n");
    return DS_CHAT_OK;
}

/* The view a template reads of tool call k: Qwen2.5 takes `function` when it
 * is defined, Qwen3 when it is true; a function that is not an object has
 * no name or arguments. */
static const ds_chat_callview *call_view(const ds_chat_call *k, int qwen3) {
    static const ds_chat_callview none = {0};
    if (!qwen3) return k->fn_state == DS_FN_ABSENT ? &k->call : k->fn_state <= DS_FN_EMPTY ? &k->fn : &none;
    return k->fn_state == DS_FN_OBJECT ? &k->fn : k->fn_state == DS_FN_TRUTHY ? &none : &k->call;
}

/* A tool result, as Qwen2.5 and Qwen3 write it: consecutive tool messages
 * share one user turn, each in its own <tool_response> block. */
static void qwen_tool_response(rd *d, size_t i, size_t n) {
    if (i == 0 || role(d, i - 1) != DS_ROLE_TOOL) {
        special(d, "<|im_start|>");
        text(d, "user");
    }
    text(d, "\n<tool_response>\n");
    msg_text(d, i);
    text(d, "\n</tool_response>");
    if (i + 1 == n || role(d, i + 1) != DS_ROLE_TOOL) {
        special(d, "<|im_end|>");
        text(d, "\n");
    }
}

/* One '<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>' (the
 * newline before it is the caller's). */
static int qwen_call(rd *d, const ds_chat_call *k, int qwen3, char *why, size_t whylen) {
    const ds_chat_callview *v = call_view(k, qwen3);
    if (v->name_kind == DS_TC_BAD)
        return refuse(why, whylen, "a tool call name that is a list or an object (its Python repr is not rendered)");
    if (v->args_kind == DS_TC_ABSENT) return refuse(why, whylen, NOT_SERIALIZABLE);
    text(d, "<tool_call>\n{\"name\": \"");
    put_buf(d, v->name_off, v->name_len);
    text(d, "\", \"arguments\": ");
    if (v->args_kind == DS_TC_STRING && !qwen3)
        put_json_str(d, (const char *)d->c->buf + v->args_off, v->args_len); /* tojson of a str */
    else put_buf(d, v->args_off, v->args_len); /* Qwen3: a string as it is; else its tojson */
    text(d, "}\n</tool_call>");
    return DS_CHAT_OK;
}

/* An assistant message's tool calls and the end of its turn, as both
 * templates write them: a '\n' before each call but a first one that follows
 * no content ((loop.first and content) or not loop.first), then <|im_end|>,
 * which closes the message's loss span, and '\n'. */
static int qwen_calls_end(rd *d, const ds_chat_msg *m, int content_set, int qwen3, char *why, size_t whylen) {
    for (size_t k = 0; k < m->n_calls; k++) {
        if (k || content_set) text(d, "\n");
        int rc = qwen_call(d, &d->c->calls[m->call0 + k], qwen3, why, whylen);
        if (rc) return rc;
    }
    special(d, "<|im_end|>");
    span_close(d);
    text(d, "\n");
    return DS_CHAT_OK;
}

/* Qwen2.5: its own default system message (or the `tools` system turn),
 * consecutive tool messages in one user turn as <tool_response>, an
 * assistant message with tool_calls as '<|im_start|>assistant', '\n' +
 * content when there is content, '\n<tool_call>...' per call, '<|im_end|>'. */
static int r_qwen25(rd *d, char *why, size_t whylen) {
    size_t n = d->c->n;
    if (d->c->tools_state == 1 || d->c->tools_state == 2) {
        special(d, "<|im_start|>");
        text(d, "system\n");
        if (n && role(d, 0) == DS_ROLE_SYSTEM) msg_text(d, 0);
        else text(d, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
        text(d, "\n\n");
        int rc = qwen_tools(d, why, whylen);
        if (rc) return rc;
    } else {
        special(d, "<|im_start|>");
        text(d, "system\n");
        if (n && role(d, 0) == DS_ROLE_SYSTEM) msg_text(d, 0);
        else text(d, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
        special(d, "<|im_end|>");
        text(d, "\n");
    }
    for (size_t i = 0; i < n; i++) {
        ds_role r = role(d, i);
        const ds_chat_msg *m = &d->c->msgs[i];
        if (r == DS_ROLE_USER || (r == DS_ROLE_SYSTEM && i > 0) || (r == DS_ROLE_ASSISTANT && !m->calls_state)) {
            if (m->content_null) return refuse(why, whylen, "can only concatenate str (not \"NoneType\") to str");
            special(d, "<|im_start|>");
            text(d, rname(d, i));
            text(d, "\n");
            span_open(d, i);
            msg_text(d, i);
            special(d, "<|im_end|>");
            span_close(d);
            text(d, "\n");
        } else if (r == DS_ROLE_ASSISTANT) {
            if (m->calls_state == 2) return refuse(why, whylen, NOT_SERIALIZABLE); /* iterating a str or dict */
            special(d, "<|im_start|>");
            text(d, "assistant\n"); /* the '\n' of '\n' + content or of the first '\n<tool_call>' */
            span_open(d, i);
            if (m->len) msg_text(d, i);
            int rc = qwen_calls_end(d, m, m->len > 0, 0, why, whylen);
            if (rc) return rc;
        } else if (r == DS_ROLE_TOOL) {
            qwen_tool_response(d, i, n);
        }
    }
    return DS_CHAT_OK;
}

/* Qwen3 (Qwen/Qwen3-0.6B's published template, the whole Qwen3 family):
 * ChatML without a default system message; an assistant message's reasoning
 * (reasoning_content, or what content holds before '</think>') is rendered as
 * '<think>\n' + reasoning + '\n</think>\n\n' + content only on assistant
 * turns after the last real user query (a user message that is not wholly a
 * '<tool_response>...</tool_response>'), and there only when the message is
 * the last one or its reasoning is not empty; elsewhere the content without
 * its reasoning. enable_thinking only changes the generation prompt, which a
 * training rendering does not have. The loss span of an assistant message
 * runs from after its 'assistant\n' header through <|im_end|>: the think
 * block where the template renders one is part of what the model is trained
 * to produce after that header (docs/chat.md). */
static const char *find_bytes(const char *s, size_t n, const char *pat, size_t pn) {
    for (size_t i = 0; pn <= n && i + pn <= n; i++)
        if (s[i] == pat[0] && !memcmp(s + i, pat, pn)) return s + i;
    return NULL;
}
static const char *rfind_bytes(const char *s, size_t n, const char *pat, size_t pn) {
    for (size_t i = n >= pn ? n - pn + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, pat, pn)) return s + i;
    return NULL;
}
static void lstrip_nl(const char **s, size_t *n) {
    while (*n && **s == '\n') (*s)++, (*n)--;
}
static void rstrip_nl(const char *s, size_t *n) {
    (void)s;
    while (*n && s[*n - 1] == '\n') (*n)--;
}
static int qwen3_tool_response(const char *s, size_t n) { /* startswith and endswith, as the template tests it */
    static const char a[] = "<tool_response>", b[] = "</tool_response>";
    return n >= sizeof a - 1 && !memcmp(s, a, sizeof a - 1) && n >= sizeof b - 1 &&
           !memcmp(s + n - (sizeof b - 1), b, sizeof b - 1);
}
static int r_qwen3(rd *d, char *why, size_t whylen) {
    const ds_chat *c = d->c;
    size_t n = c->n;
    if (!n) return refuse(why, whylen, "list object has no element 0"); /* messages[0].role */
    if (c->tools_state == 1 || c->tools_state == 2) {
        special(d, "<|im_start|>");
        text(d, "system\n");
        if (role(d, 0) == DS_ROLE_SYSTEM) {
            msg_text(d, 0);
            text(d, "\n\n");
        }
        int rc = qwen_tools(d, why, whylen);
        if (rc) return rc;
    } else if (role(d, 0) == DS_ROLE_SYSTEM) {
        special(d, "<|im_start|>");
        text(d, "system\n");
        msg_text(d, 0);
        special(d, "<|im_end|>");
        text(d, "\n");
    }
    size_t last_query = n ? n - 1 : 0;
    for (size_t i = n; i-- > 0;) {
        size_t len;
        const char *s = content(d, i, &len);
        if (role(d, i) == DS_ROLE_USER && !qwen3_tool_response(s, len)) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        ds_role r = role(d, i);
        if (r == DS_ROLE_USER || (r == DS_ROLE_SYSTEM && i > 0)) {
            special(d, "<|im_start|>");
            text(d, rname(d, i));
            text(d, "\n");
            msg_text(d, i);
            special(d, "<|im_end|>");
            text(d, "\n");
        } else if (r == DS_ROLE_ASSISTANT) {
            const ds_chat_msg *m = &c->msgs[i];
            if (m->content_null) return refuse(why, whylen, "argument of type 'NoneType' is not iterable");
            size_t cn, rn = 0;
            const char *cs = content(d, i, &cn), *rs = "";
            static const char close[] = "</think>", open[] = "<think>";
            if (m->reason == DS_REASON_STRING) {
                rs = (const char *)c->buf + m->r_off;
                rn = m->r_len;
            } else if (m->reason == DS_REASON_NONE && find_bytes(cs, cn, close, sizeof close - 1)) {
                /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
                const char *first = find_bytes(cs, cn, close, sizeof close - 1);
                rs = cs;
                rn = (size_t)(first - cs);
                rstrip_nl(rs, &rn);
                const char *o = rfind_bytes(rs, rn, open, sizeof open - 1);
                if (o) rn -= (size_t)(o + sizeof open - 1 - rs), rs = o + sizeof open - 1;
                lstrip_nl(&rs, &rn);
                /* content.split('</think>')[-1].lstrip('\n') */
                const char *last = rfind_bytes(cs, cn, close, sizeof close - 1) + sizeof close - 1;
                cn -= (size_t)(last - cs);
                cs = last;
                lstrip_nl(&cs, &cn);
            }
            int truthy = m->reason == DS_REASON_OTHER_TRUE || rn > 0; /* `reasoning_content` in an if */
            int content_set = cn > 0;                                 /* `content` in an if (before its lstrip) */
            special(d, "<|im_start|>");
            text(d, "assistant\n");
            span_open(d, i);
            if (i > last_query && (i + 1 == n || truthy)) {
                if (m->reason == DS_REASON_OTHER_TRUE || m->reason == DS_REASON_OTHER_FALSE)
                    return refuse(why, whylen, "reasoning_content is not a string (the template calls .strip on it)");
                text(d, "<think>\n");
                while (rn && *rs == '\n') rs++, rn--; /* .strip('\n') */
                rstrip_nl(rs, &rn);
                put(d, rs, rn, 0);
                text(d, "\n</think>\n\n");
                lstrip_nl(&cs, &cn);
            }
            put(d, cs, cn, 0);
            if (m->calls_state == 2) return refuse(why, whylen, NOT_SERIALIZABLE);
            int rc = qwen_calls_end(d, m, content_set, 1, why, whylen);
            if (rc) return rc;
        } else if (r == DS_ROLE_TOOL) {
            qwen_tool_response(d, i, n);
        }
    }
    return DS_CHAT_OK;
}

/* Llama 3 Instruct: bos, then each message's header and trimmed content. */
static int r_llama3(rd *d, char *why, size_t whylen) {
    (void)why, (void)whylen;
    for (size_t i = 0; i < d->c->n; i++) {
        if (i == 0) tok_opt(d, d->o->bos_token);
        special(d, "<|start_header_id|>");
        text(d, rname(d, i));
        special(d, "<|end_header_id|>");
        text(d, "\n\n");
        span_open(d, i);
        msg_trimmed(d, i);
        special(d, "<|eot_id|>");
        span_close(d);
    }
    return DS_CHAT_OK;
}

/* Llama 2 chat: the system message folded into the first user turn. */
static int r_llama2(rd *d, char *why, size_t whylen) {
    size_t first = d->c->n && role(d, 0) == DS_ROLE_SYSTEM ? 1 : 0;
    for (size_t i = first; i < d->c->n; i++) {
        size_t k = i - first;
        if ((role(d, i) == DS_ROLE_USER) != (k % 2 == 0)) return refuse(why, whylen, ALTERNATE);
        if (role(d, i) == DS_ROLE_USER) {
            tok_opt(d, d->o->bos_token);
            text(d, "[INST] ");
            size_t n;
            const char *s = content(d, i, &n);
            if (k == 0 && first) {
                /* ('<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content).strip(): the left end is
                 * '<', so only the content's right end is stripped, and when the content is all
                 * space the "\n\n" before it goes too */
                size_t sn;
                const char *sys = content(d, 0, &sn);
                text(d, "<<SYS>>\n");
                put(d, sys, sn, 0);
                text(d, "\n<</SYS>>\n\n");
                py_rstrip(s, &n);
                if (n == 0 && !d->nomem) {
                    d->r->len -= 2;
                    d->r->pieces[d->r->n_pieces - 1].len -= 2;
                    d->r->text[d->r->len] = 0;
                }
            } else {
                py_strip(&s, &n);
            }
            put(d, s, n, 0);
            text(d, " [/INST]");
        } else if (role(d, i) == DS_ROLE_ASSISTANT) {
            text(d, " ");
            span_open(d, i);
            msg_trimmed(d, i);
            text(d, " ");
            tok_opt(d, d->o->eos_token);
            span_close(d);
        }
    }
    return DS_CHAT_OK;
}

/* Mistral Instruct v0.1-v0.3 ([INST] as text): user and assistant only, alternating. */
static int r_mistral(rd *d, char *why, size_t whylen) {
    tok_opt(d, d->o->bos_token);
    for (size_t i = 0; i < d->c->n; i++) {
        if ((role(d, i) == DS_ROLE_USER) != (i % 2 == 0)) return refuse(why, whylen, ALTERNATE);
        if (role(d, i) == DS_ROLE_USER) {
            text(d, "[INST] ");
            msg_text(d, i);
            text(d, " [/INST]");
        } else if (role(d, i) == DS_ROLE_ASSISTANT) {
            span_open(d, i);
            msg_text(d, i);
            tok_opt(d, d->o->eos_token);
            span_close(d);
        } else {
            return refuse(why, whylen, "Only user and assistant roles are supported!");
        }
    }
    return DS_CHAT_OK;
}

/* Mistral's 'v1' template (Mistral-7B-Instruct-v0.2/v0.3 as mistralai
 * updated them): the system message folded into the first user turn,
 * ' [INST] ' with spaces both sides, ' ' + content + eos for the assistant. */
#define ALTERNATE_AFTER_SYS                                                                                            \
    "After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."
#define ONLY_USER_ASSISTANT                                                                                            \
    "Only user and assistant roles are supported, with the exception of an initial optional system message!"
static int r_mistral_v1(rd *d, char *why, size_t whylen) {
    size_t first = d->c->n && role(d, 0) == DS_ROLE_SYSTEM ? 1 : 0;
    tok_opt(d, d->o->bos_token);
    for (size_t i = first; i < d->c->n; i++) {
        size_t k = i - first;
        if ((role(d, i) == DS_ROLE_USER) != (k % 2 == 0)) return refuse(why, whylen, ALTERNATE_AFTER_SYS);
        if (role(d, i) == DS_ROLE_USER) {
            text(d, " [INST] ");
            if (k == 0 && first) {
                msg_text(d, 0);
                text(d, "\n\n");
            }
            msg_text(d, i);
            text(d, " [/INST]");
        } else if (role(d, i) == DS_ROLE_ASSISTANT) {
            text(d, " ");
            span_open(d, i);
            msg_text(d, i);
            tok_opt(d, d->o->eos_token);
            span_close(d);
        } else {
            return refuse(why, whylen, ONLY_USER_ASSISTANT);
        }
    }
    return DS_CHAT_OK;
}

/* Mistral's 'v3' (Mistral-Large-Instruct-2407) and 'v3-tekken'
 * (Mistral-Nemo-Instruct-2407) templates without tools: the system message
 * goes into the LAST message when that is a user turn, else nowhere (so a
 * training conversation, which ends with the assistant, loses it: that is
 * what the published template does); tool messages need a 9-character
 * tool_call_id, which records here never carry (refused as the template
 * refuses them). v3: '[INST] ' + content + '[/INST]', ' ' + trimmed
 * content + eos; tekken: no spaces, the content untrimmed. */
#define TOOL_ID_9 "Tool call IDs should be alphanumeric strings with length 9!"
static int mistral_v3_common(rd *d, int tekken, char *why, size_t whylen) {
    const ds_chat *c = d->c;
    size_t first = c->n && role(d, 0) == DS_ROLE_SYSTEM ? 1 : 0, idx = 0, last_user = SIZE_MAX;
    for (size_t i = first; i < c->n; i++) { /* the alternation check skips tool messages and tool calls */
        if (role(d, i) == DS_ROLE_USER) last_user = i;
        if (role(d, i) == DS_ROLE_TOOL || c->msgs[i].calls_defined) continue;
        if ((role(d, i) == DS_ROLE_USER) != (idx % 2 == 0)) return refuse(why, whylen, ALTERNATE_AFTER_SYS);
        idx++;
    }
    tok_opt(d, d->o->bos_token);
    for (size_t i = first; i < c->n; i++) {
        const ds_chat_msg *m = &c->msgs[i];
        if (role(d, i) == DS_ROLE_USER) {
            /* the tools before every user message equal to the last one (Python ==) */
            if (c->tools_defined && ds_chat_msg_equal(c, i, last_user)) {
                if (c->tools_state == 2 || c->tools_state == 3) return refuse(why, whylen, "tools is not a list");
                text(d, tekken ? "[AVAILABLE_TOOLS][" : "[AVAILABLE_TOOLS] [");
                for (size_t k = 0; k < c->n_tools; k++) {
                    if (!c->tools[k].items_ok) return refuse(why, whylen, "tool.function is not a mapping");
                    text(d, "{\"type\": \"function\", \"function\": {");
                    put_buf(d, c->tools[k].items_off, c->tools[k].items_len);
                    text(d, "}}");
                    text(d, k + 1 < c->n_tools ? ", " : "]");
                }
                text(d, "[/AVAILABLE_TOOLS]");
            }
            text(d, tekken ? "[INST]" : "[INST] ");
            if (i + 1 == c->n && first) {
                msg_text(d, 0);
                text(d, "\n\n");
            }
            msg_text(d, i);
            text(d, "[/INST]");
        } else if (m->calls_defined) {
            if (role(d, i) != DS_ROLE_ASSISTANT)
                return refuse(why, whylen, "tool_calls on a message that is not the assistant's (not rendered)");
            if (m->calls_state == 2) return refuse(why, whylen, NOT_SERIALIZABLE);
            span_open(d, i);
            text(d, tekken ? "[TOOL_CALLS][" : "[TOOL_CALLS] [");
            for (size_t k = 0; k < m->n_calls; k++) {
                const ds_chat_call *call = &c->calls[m->call0 + k];
                if (call->fn_json_kind != DS_TC_JSON) return refuse(why, whylen, NOT_SERIALIZABLE);
                put_buf(d, call->fn_json_off, call->fn_json_len ? call->fn_json_len - 1 : 0); /* out[:-1] */
                if (call->id_kind != DS_TC_STRING || call->id_chars != 9) return refuse(why, whylen, TOOL_ID_9);
                text(d, ", \"id\": \"");
                put_buf(d, call->id_off, call->id_len);
                text(d, "\"}");
                if (k + 1 < m->n_calls) text(d, ", ");
                else {
                    text(d, "]");
                    tok_opt(d, d->o->eos_token);
                }
            }
            span_close(d);
        } else if (role(d, i) == DS_ROLE_ASSISTANT) {
            if (!tekken) text(d, " ");
            span_open(d, i);
            if (tekken) msg_text(d, i);
            else msg_trimmed(d, i);
            tok_opt(d, d->o->eos_token);
            span_close(d);
        } else if (role(d, i) == DS_ROLE_TOOL) {
            text(d, tekken ? "[TOOL_RESULTS]{\"content\": " : "[TOOL_RESULTS] {\"content\": ");
            msg_text(d, i); /* content|string: a str as it is */
            text(d, ", ");
            if (m->tcid_kind != DS_TC_STRING || m->tcid_chars != 9) return refuse(why, whylen, TOOL_ID_9);
            text(d, "\"call_id\": \"");
            put_buf(d, m->tcid_off, m->tcid_len);
            text(d, "\"}[/TOOL_RESULTS]");
        } else {
            return refuse(why, whylen, ONLY_USER_ASSISTANT);
        }
    }
    return DS_CHAT_OK;
}
static int r_mistral_v3(rd *d, char *why, size_t whylen) { return mistral_v3_common(d, 0, why, whylen); }
static int r_mistral_tekken(rd *d, char *why, size_t whylen) { return mistral_v3_common(d, 1, why, whylen); }

/* Mistral v7 (Mistral-Small-3.2-24B-Instruct-2506's published template):
 * [SYSTEM_PROMPT], [INST], [AVAILABLE_TOOLS], [TOOL_CALLS], [CALL_ID],
 * [ARGS], [TOOL_RESULTS], [TOOL_CONTENT] are control tokens of its Tekken
 * vocabulary, so they are special pieces here (a message's text holding
 * them stays text). Its default system prompt holds the day the template is
 * rendered (strftime_now("%Y-%m-%d")): shards must not depend on the day
 * they were built, so a record without its own system message is refused,
 * naming why (docs/chat.md). List-of-parts content, which this template
 * concatenates without separators (and a system message's first part
 * only), is refused rather than rendered with the parser's "\n" joins. */
static int r_mistral_v7(rd *d, char *why, size_t whylen) {
    const ds_chat *c = d->c;
    if (!c->n || role(d, 0) != DS_ROLE_SYSTEM)
        return refuse(why, whylen,
                      "mistral-v7's default system prompt holds the current date (strftime_now): give the record "
                      "its own system message");
    size_t idx = 0, last_user = SIZE_MAX;
    for (size_t i = 1; i < c->n; i++) { /* the alternation check skips tool messages and true tool_calls */
        if (c->msgs[i].parts)
            return refuse(why, whylen, "list-of-parts content (mistral-v7 joins parts its own way): give a string");
        if (role(d, i) == DS_ROLE_USER) last_user = i;
        if (role(d, i) == DS_ROLE_TOOL || c->msgs[i].calls_state) continue;
        if ((role(d, i) == DS_ROLE_USER) != (idx % 2 == 0)) return refuse(why, whylen, ALTERNATE_AFTER_SYS);
        idx++;
    }
    if (c->msgs[0].parts)
        return refuse(why, whylen, "list-of-parts content (mistral-v7 joins parts its own way): give a string");
    tok_opt(d, d->o->bos_token);
    special(d, "[SYSTEM_PROMPT]");
    msg_text(d, 0);
    special(d, "[/SYSTEM_PROMPT]");
    for (size_t i = 1; i < c->n; i++) {
        const ds_chat_msg *m = &c->msgs[i];
        if (role(d, i) == DS_ROLE_SYSTEM) {
            special(d, "[SYSTEM_PROMPT]");
            msg_text(d, i);
            special(d, "[/SYSTEM_PROMPT]");
        } else if (role(d, i) == DS_ROLE_USER) {
            if (c->tools_defined && ds_chat_msg_equal(c, i, last_user)) {
                special(d, "[AVAILABLE_TOOLS]");
                if (c->tools_state == 1 || (c->tools_defined && !c->tools_json_len)) { /* a list: tojson joined */
                    text(d, "[");
                    for (size_t k = 0; k < c->n_tools; k++) {
                        if (k) text(d, ", ");
                        put_buf(d, c->tools[k].off, c->tools[k].len);
                    }
                    text(d, "]");
                } else {
                    put_buf(d, c->tools_json_off, c->tools_json_len);
                }
                special(d, "[/AVAILABLE_TOOLS]");
            }
            special(d, "[INST]");
            msg_text(d, i);
            special(d, "[/INST]");
        } else if (role(d, i) == DS_ROLE_ASSISTANT && m->calls_state) {
            if (m->calls_state == 2) return refuse(why, whylen, NOT_SERIALIZABLE);
            span_open(d, i);
            for (size_t k = 0; k < m->n_calls; k++) {
                const ds_chat_call *call = &c->calls[m->call0 + k];
                /* '[TOOL_CALLS]' + tool_call.function.name: a str, or the template raises */
                if (call->fn_state != DS_FN_OBJECT || call->fn.name_kind != DS_TC_STRING)
                    return refuse(why, whylen, "tool_call.function.name is not a string");
                special(d, "[TOOL_CALLS]");
                put_buf(d, call->fn.name_off, call->fn.name_len);
                if (call->id_kind != DS_TC_STRING || call->id_chars != 9) return refuse(why, whylen, TOOL_ID_9);
                special(d, "[CALL_ID]");
                put_buf(d, call->id_off, call->id_len);
                if (call->fn.args_kind == DS_TC_ABSENT) return refuse(why, whylen, NOT_SERIALIZABLE);
                special(d, "[ARGS]");
                if (call->fn.args_kind == DS_TC_STRING)
                    put_json_str(d, (const char *)c->buf + call->fn.args_off, call->fn.args_len);
                else put_buf(d, call->fn.args_off, call->fn.args_len);
            }
            tok_opt(d, d->o->eos_token);
            span_close(d);
        } else if (role(d, i) == DS_ROLE_ASSISTANT) {
            if (m->content_null) return refuse(why, whylen, "'NoneType' object is not iterable");
            span_open(d, i);
            msg_text(d, i);
            tok_opt(d, d->o->eos_token);
            span_close(d);
        } else if (role(d, i) == DS_ROLE_TOOL) {
            if (m->tcid_kind != DS_TC_STRING || m->tcid_chars != 9) return refuse(why, whylen, TOOL_ID_9);
            special(d, "[TOOL_RESULTS]");
            put_buf(d, m->tcid_off, m->tcid_len);
            special(d, "[TOOL_CONTENT]");
            msg_text(d, i);
            special(d, "[/TOOL_RESULTS]");
        } else {
            return refuse(why, whylen, "Only system, user, assistant, and tool roles are supported!");
        }
    }
    return DS_CHAT_OK;
}

/* Gemma: no system role, alternating turns, assistant is "model". */
static int r_gemma(rd *d, char *why, size_t whylen) {
    tok_opt(d, d->o->bos_token);
    if (d->c->n && role(d, 0) == DS_ROLE_SYSTEM) return refuse(why, whylen, "System role not supported");
    for (size_t i = 0; i < d->c->n; i++) {
        if ((role(d, i) == DS_ROLE_USER) != (i % 2 == 0)) return refuse(why, whylen, ALTERNATE);
        special(d, "<start_of_turn>");
        text(d, role(d, i) == DS_ROLE_ASSISTANT ? "model" : rname(d, i));
        text(d, "\n");
        span_open(d, i);
        msg_trimmed(d, i);
        special(d, "<end_of_turn>");
        span_close(d);
        text(d, "\n");
    }
    return DS_CHAT_OK;
}

/* Phi-3 (Phi-3.5-mini-instruct's published template): <|role|> headers, <|end|>, eos at the
 * end; a system message with empty content and tool messages are left out. */
static int r_phi3(rd *d, char *why, size_t whylen) {
    (void)why, (void)whylen;
    for (size_t i = 0; i < d->c->n; i++) {
        if (role(d, i) == DS_ROLE_SYSTEM && d->c->msgs[i].len == 0) continue; /* `and message['content']` */
        const char *h = role(d, i) == DS_ROLE_SYSTEM      ? "<|system|>"
                        : role(d, i) == DS_ROLE_USER      ? "<|user|>"
                        : role(d, i) == DS_ROLE_ASSISTANT ? "<|assistant|>"
                                                          : NULL;
        if (!h) continue;
        special(d, h);
        text(d, "\n");
        span_open(d, i);
        msg_text(d, i);
        special(d, "<|end|>");
        span_close(d);
        text(d, "\n");
    }
    tok_opt(d, d->o->eos_token);
    return DS_CHAT_OK;
}

/* DeepSeek (V2 chat): "User: ...\n\n", "Assistant: ...<eos>", system as is; tool left out. */
static int r_deepseek(rd *d, char *why, size_t whylen) {
    (void)why, (void)whylen;
    tok_opt(d, d->o->bos_token);
    for (size_t i = 0; i < d->c->n; i++) {
        if (role(d, i) == DS_ROLE_USER) {
            text(d, "User: ");
            msg_text(d, i);
            text(d, "\n\n");
        } else if (role(d, i) == DS_ROLE_ASSISTANT) {
            text(d, "Assistant: ");
            span_open(d, i);
            msg_text(d, i);
            tok_opt(d, d->o->eos_token);
            span_close(d);
        } else if (role(d, i) == DS_ROLE_SYSTEM) {
            msg_text(d, i);
            text(d, "\n\n");
        }
    }
    return DS_CHAT_OK;
}

/* ---- the table: one entry per template */

struct ds_chat_template {
    const char *name;
    const char *jinja;
    int (*render)(rd *d, char *why, size_t whylen);
};

static const ds_chat_template templates[] = {
    {"chatml",
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
     "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     r_chatml},
    {"qwen2",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
     "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|im_start|>assistant\\n' }}{% endif %}",
     r_qwen2},
    {"qwen2.5",
     "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n        {{- "
     "messages[0]['content'] }}\n    {%- else %}\n        {{- 'You are Qwen, created by Alibaba Cloud. You are a "
     "helpful assistant.' }}\n    {%- endif %}\n    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to "
     "assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML "
     "tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- "
     "endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and "
     "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, "
     "\\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n{%- else %}\n    {%- if "
     "messages[0]['role'] == 'system' %}\n        {{- '<|im_start|>system\\n' + messages[0]['content'] + "
     "'<|im_end|>\\n' }}\n    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
     "You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- for message in messages %}\n  "
     "  {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == "
     "\"assistant\" and not message.tool_calls) %}\n        {{- '<|im_start|>' + message.role + '\\n' + "
     "message.content + '<|im_end|>' + '\\n' }}\n    {%- elif message.role == \"assistant\" %}\n        {{- "
     "'<|im_start|>' + message.role }}\n        {%- if message.content %}\n            {{- '\\n' + message.content "
     "}}\n        {%- endif %}\n        {%- for tool_call in message.tool_calls %}\n            {%- if "
     "tool_call.function is defined %}\n                {%- set tool_call = tool_call.function %}\n            {%- "
     "endif %}\n            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n            {{- tool_call.name }}\n            "
     "{{- '\", \"arguments\": ' }}\n            {{- tool_call.arguments | tojson }}\n            {{- "
     "'}\\n</tool_call>' }}\n        {%- endfor %}\n        {{- '<|im_end|>\\n' }}\n    {%- elif message.role == "
     "\"tool\" %}\n        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n          "
     "  {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<tool_response>\\n' }}\n        {{- "
     "message.content }}\n        {{- '\\n</tool_response>' }}\n        {%- if loop.last or "
     "(messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n  "
     "  {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- "
     "endif %}\n",
     r_qwen25},
    {"qwen3",
     "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0].role == 'system' %}\n   "
     "     {{- messages[0].content + '\\n\\n' }}\n    {%- endif %}\n    {{- \"# Tools\\n\\nYou may call on"
     "e or more functions to assist with the user query.\\n\\nYou are provided with function signatures wi"
     "thin <tools></tools> XML tags:\\n<tools>\" }}\n    {%- for tool in tools %}\n        {{- \"\\n\" }}"
     "\n        {{- tool | tojson }}\n    {%- endfor %}\n    {{- \"\\n</tools>\\n\\nFor each function call"
     ", return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<"
     "tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|"
     "im_end|>\\n\" }}\n{%- else %}\n    {%- if messages[0].role == 'system' %}\n        {{- '<|im_start|>"
     "system\\n' + messages[0].content + '<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n{%- set ns = "
     "namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n{%- for message in message"
     "s[::-1] %}\n    {%- set index = (messages|length - 1) - loop.index0 %}\n    {%- if ns.multi_step_too"
     "l and message.role == \"user\" and not(message.content.startswith('<tool_response>') and message.con"
     "tent.endswith('</tool_response>')) %}\n        {%- set ns.multi_step_tool = false %}\n        {%- se"
     "t ns.last_query_index = index %}\n    {%- endif %}\n{%- endfor %}\n{%- for message in messages %}\n "
     "   {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n        "
     "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- elif "
     "message.role == \"assistant\" %}\n        {%- set content = message.content %}\n        {%- set reas"
     "oning_content = '' %}\n        {%- if message.reasoning_content is defined and message.reasoning_con"
     "tent is not none %}\n            {%- set reasoning_content = message.reasoning_content %}\n        {"
     "%- else %}\n            {%- if '</think>' in message.content %}\n                {%- set content = m"
     "essage.content.split('</think>')[-1].lstrip('\\n') %}\n                {%- set reasoning_content = m"
     "essage.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n           "
     " {%- endif %}\n        {%- endif %}\n        {%- if loop.index0 > ns.last_query_index %}\n          "
     "  {%- if loop.last or (not loop.last and reasoning_content) %}\n                {{- '<|im_start|>' +"
     " message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lst"
     "rip('\\n') }}\n            {%- else %}\n                {{- '<|im_start|>' + message.role + '\\n' + "
     "content }}\n            {%- endif %}\n        {%- else %}\n            {{- '<|im_start|>' + message."
     "role + '\\n' + content }}\n        {%- endif %}\n        {%- if message.tool_calls %}\n            {"
     "%- for tool_call in message.tool_calls %}\n                {%- if (loop.first and content) or (not l"
     "oop.first) %}\n                    {{- '\\n' }}\n                {%- endif %}\n                {%- i"
     "f tool_call.function %}\n                    {%- set tool_call = tool_call.function %}\n            "
     "    {%- endif %}\n                {{- '<tool_call>\\n{\"name\": \"' }}\n                {{- tool_cal"
     "l.name }}\n                {{- '\", \"arguments\": ' }}\n                {%- if tool_call.arguments "
     "is string %}\n                    {{- tool_call.arguments }}\n                {%- else %}\n         "
     "           {{- tool_call.arguments | tojson }}\n                {%- endif %}\n                {{- '}"
     "\\n</tool_call>' }}\n            {%- endfor %}\n        {%- endif %}\n        {{- '<|im_end|>\\n' }}"
     "\n    {%- elif message.role == \"tool\" %}\n        {%- if loop.first or (messages[loop.index0 - 1]."
     "role != \"tool\") %}\n            {{- '<|im_start|>user' }}\n        {%- endif %}\n        {{- '\\n<"
     "tool_response>\\n' }}\n        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n       "
     " {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n            {{- '<|im_end|>\\n"
     "' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{"
     "- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false "
     "%}\n        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}",
     r_qwen3},
    {"llama3",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
     "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
     "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
     r_llama3},
    {"llama2",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
     "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
     "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
     "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
     "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
     "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
     "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
     r_llama2},
    {"mistral",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
     "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
     "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
     "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
     "are supported!') }}{% endif %}{% endfor %}",
     r_mistral},
    {"mistral-v1",
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n "
     "   {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%"
     "- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == "
     "'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message"
     ", conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%"
     "- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n     "
     "       {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- "
     "else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    "
     "{%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    "
     "{%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exce"
     "ption of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n",
     r_mistral_v1},
    {"mistral-v3",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"]"
     " %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages "
     "%}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set"
     " user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This b"
     "lock checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns ="
     " namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (messa"
     "ge.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and messag"
     "e.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0)"
     " %}\n            {{- raise_exception(\"After the optional system message, conversation roles must al"
     "ternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns"
     ".index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages"
     " %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == u"
     "ser_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools "
     "%}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", "
     "\"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n     "
     "               {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '"
     "\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojso"
     "n }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n               "
     "         {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n           "
     "     {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n    "
     "            {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n           "
     " {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if "
     "loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n"
     "\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + messa"
     "ge[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message.tool_calls is defined a"
     "nd message.tool_calls is not none %}\n        {{- \"[TOOL_CALLS] [\" }}\n        {%- for tool_call i"
     "n message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out"
     "[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n           "
     "     {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n      "
     "      {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not"
     " loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + e"
     "os_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"as"
     "sistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- elif message[\"ro"
     "le\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is def"
     "ined and message.content.content is defined %}\n            {%- set content = message.content.conten"
     "t %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n "
     "       {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        {%- if not message."
     "tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"To"
     "ol call IDs should be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '"
     "\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- rais"
     "e_exception(\"Only user and assistant roles are supported, with the exception of an initial optional"
     " system message!\") }}\n    {%- endif %}\n{%- endfor %}\n",
     r_mistral_v3},
    {"mistral-tekken",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"]"
     " %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages "
     "%}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set"
     " user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This b"
     "lock checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns ="
     " namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (messa"
     "ge.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and messag"
     "e.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0)"
     " %}\n            {{- raise_exception(\"After the optional system message, conversation roles must al"
     "ternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns"
     ".index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages"
     " %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == u"
     "ser_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS][\" }}\n            {%- for tool in tools %"
     "}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \""
     "function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n       "
     "             {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"'"
     " }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }"
     "}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                  "
     "      {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n              "
     "  {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n       "
     "         {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%"
     "- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loo"
     "p.last and system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + message[\"c"
     "ontent\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif (message.tool_calls is defined and me"
     "ssage.tool_calls is not none) %}\n        {{- \"[TOOL_CALLS][\" }}\n        {%- for tool_call in mes"
     "sage.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1]"
     " }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n                "
     "{{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n           "
     " {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not loop"
     ".last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + eos_to"
     "ken }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"assista"
     "nt\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- elif message[\"role\"] == \"tool_re"
     "sults\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and message.c"
     "ontent.content is defined %}\n            {%- set content = message.content.content %}\n        {%- "
     "else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- '[TOOL_"
     "RESULTS]{\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id is def"
     "ined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs should "
     "be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '\"call_id\": \"' + "
     "message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception(\"Only "
     "user and assistant roles are supported, with the exception of an initial optional system message!\")"
     " }}\n    {%- endif %}\n{%- endfor %}\n",
     r_mistral_tekken},
    {"mistral-v7",
     "{%- set today = strftime_now(\"%Y-%m-%d\") %}\n{%- set default_system_message = \"You are Mistral Sm"
     "all 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in Paris."
     "\\nYour knowledge base was last updated on 2023-10-01. The current date is \" + today + \".\\n\\nWhe"
     "n you're not sure about some information or when the user's request requires up-to-date or specific "
     "data, you must use the available tools to fetch the information. Do not hesitate to use tools whenev"
     "er they can provide a more accurate or complete response. If no relevant tools are available, then c"
     "learly state that you don't have the information and avoid making up anything.\n\nIf the user's ques"
     "tion is not clear, ambiguous, or does not provide enough context for you to accurately answer the qu"
     "estion, you do not try to answer it right away and you rather ask the user to clarify their request "
     "(e.g. \\\"What are some good restaurants around me?\\\" => \\\"Where are you?\\\" or \\\"When is the"
     " next flight to Tokyo\\\" => \\\"Where do you travel from?\\\").\nYou are always very attentive to d"
     "ates, and when asked about information at specific dates, you discard information that is at another"
     " date.\nYou follow these instructions in all languages, and always respond to the user in the langua"
     "ge they use or request.\nNext sections describe the capabilities that you have.\n\n# WEB BROWSING IN"
     "STRUCTIONS\n\nYou cannot perform any web search or access internet to open URLs, links etc. If it se"
     "ems like the user is expecting you to do so, you clarify the situation and ask the user to copy past"
     "e the text directly in the chat.\n\n# MULTI-MODAL INSTRUCTIONS\n\nYou have the ability to read image"
     "s, but you cannot generate images. You also cannot transcribe audio files or videos.\nYou cannot rea"
     "d nor transcribe audio files or videos.\n\n# TOOL CALLING INSTRUCTIONS\n\nYou may have access to too"
     "ls that you can use to fetch information or perform actions. You must use these tools in the followi"
     "ng situations:\n\n1. When the request requires up-to-date information.\n2. When the request requires"
     " specific data that you do not have in your knowledge base.\n3. When the request involves actions th"
     "at you cannot perform without tools.\n\nAlways prioritize using tools to provide the most accurate a"
     "nd helpful response. If tools are not available, inform the user that you cannot perform the request"
     "ed action at the moment.\" %}\n\n{{- bos_token }}\n\n{%- set system_prompt = default_system_message "
     "%}\n{%- set loop_messages = messages %}\n\n{%- if not tools is defined %}\n    {%- set tools = none "
     "%}\n{%- endif %}\n\n{%- if messages|length > 0 and messages[0]['role'] == 'system' %}\n    {%- if me"
     "ssages[0]['content'] is string %}\n        {%- set system_prompt = messages[0]['content'] %}\n    {%"
     "- else %}\n        {%- set system_prompt = messages[0]['content'][0]['text'] %}\n    {%- endif %}\n "
     "   {%- set loop_messages = messages[1:] %}\n{%- endif %}\n\n{%- set user_messages = loop_messages | "
     "selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{%- set ns = namespace(index=0) %}\n{%- for"
     " message in loop_messages %}\n    {%- if not (message.role == \"tool\" or (message.get('tool_calls')"
     ")) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}\n            {{- rai"
     "se_exception(\"After the optional system message, conversation roles must alternate user/assistant/u"
     "ser/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- e"
     "ndif %}\n{%- endfor %}\n\n{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}\n\n{%- for m"
     "essage in loop_messages %}\n    {%- if message['role'] == 'system' %}\n        {%- if message['conte"
     "nt'] is string %}\n            {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}\n "
     "       {%- else %}\n            {{- '[SYSTEM_PROMPT]' + message['content'][0]['text'] + '[/SYSTEM_PR"
     "OMPT]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'user' %}\n        {%- if tools is "
     "not none and (message == user_messages[-1]) %}\n            {{- '[AVAILABLE_TOOLS]' + tools|tojson +"
     " '[/AVAILABLE_TOOLS]' }}\n        {%- endif %}\n        {{- '[INST]' }}\n        {%- if message['con"
     "tent'] is string %}\n            {{- message['content'] }}\n        {%- else %}\n            {%- for"
     " block in message['content'] %}\n                {%- if block['type'] == 'text' %}\n                "
     "    {{- block['text'] }}\n                {%- elif block['type'] in ['image', 'image_url'] %}\n     "
     "               {{- '[IMG]' }}\n                {%- else %}\n                    {{- raise_exception("
     "'Only text and image blocks are supported in message content!') }}\n                {%- endif %}\n  "
     "          {%- endfor %}\n        {%- endif %}\n        {{- '[/INST]' }}\n    {%- elif message['role'"
     "] == 'assistant' %}\n        {%- if message.get('tool_calls') %}\n            {%- for tool_call in m"
     "essage.tool_calls %}\n                {{- '[TOOL_CALLS]' + tool_call.function.name }}\n             "
     "   {%- if not tool_call.id is defined or tool_call.id is not string or tool_call.id|length != 9 %}\n"
     "                    {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9"
     "!\") }}\n                {%- endif %}\n                {{- '[CALL_ID]' + tool_call.id }}\n          "
     "      {{- '[ARGS]' + tool_call['function']['arguments']|tojson }}\n            {%- endfor %}\n      "
     "      {{- eos_token }}\n        {%- elif message['content'] is string %}\n            {{- message['c"
     "ontent'] + eos_token }}\n        {%- else %}\n            {%- for block in message['content'] %}\n  "
     "              {%- if block['type'] == 'text' %}\n                    {{- block['text'] }}\n         "
     "       {%- elif block['type'] in ['image', 'image_url'] %}\n                    {{- '[IMG]' }}\n    "
     "            {%- else %}\n                    {{- raise_exception('Only text and image blocks are sup"
     "ported in assistant content!') }}\n                {%- endif %}\n            {%- endfor %}\n        "
     "    {{- eos_token }}\n        {%- endif %}\n    {%- elif message['role'] == 'tool_results' or messag"
     "e['role'] == 'tool' %}\n        {%- if message.content is defined and message.content.content is def"
     "ined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n            "
     "{%- set content = message.content %}\n        {%- endif %}\n        {%- if not message.tool_call_id "
     "is defined or message.tool_call_id is not string or message['tool_call_id']|length != 9 %}\n        "
     "    {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n       "
     " {%- endif %}\n        {{- '[TOOL_RESULTS]' + message.tool_call_id + '[TOOL_CONTENT]' + content|stri"
     "ng + '[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception('Only system, user, assistan"
     "t, and tool roles are supported!') }}\n    {%- endif %}\n{%- endfor %}\n",
     r_mistral_v7},
    {"gemma",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% "
     "endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
     "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
     "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif "
     "%}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if "
     "add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     r_gemma},
    {"phi3",
     "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\\n' + "
     "message['content'] + "
     "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif "
     "message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% "
     "endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}",
     r_phi3},
    {"deepseek",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token "
     "}}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\\n\\n' "
     "}}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif "
     "message['role'] == 'system' %}{{ message['content'] + '\\n\\n' }}{% endif %}{% endfor %}{% if "
     "add_generation_prompt %}{{ 'Assistant:' }}{% endif %}",
     r_deepseek},
};
#define N_TEMPLATES (sizeof templates / sizeof *templates)

const ds_chat_template *ds_chat_template_at(size_t i) { return i < N_TEMPLATES ? &templates[i] : NULL; }
const char *ds_chat_template_name(const ds_chat_template *t) { return t ? t->name : NULL; }
const char *ds_chat_template_jinja(const ds_chat_template *t) { return t ? t->jinja : NULL; }
const ds_chat_template *ds_chat_template_find(const char *name) {
    for (size_t i = 0; name && i < N_TEMPLATES; i++)
        if (!strcmp(templates[i].name, name)) return &templates[i];
    return NULL;
}

/* Next significant unit of a Jinja source: whitespace outside string
 * literals is skipped (how tokenizer_config.json files differ in layout
 * without differing in output: the {%- / -%} trims remain significant), and
 * a literal's bytes are compared by value, as Jinja's lexer decodes them:
 * Gemma 2's published template has a real newline inside '...' where a copy
 * written through a C or JSON string has the escape backslash-n, and both
 * render the same.  A literal's bytes come back offset by 256 so that an
 * escaped quote never equals the quote that closes a literal. */
typedef struct {
    const char *s;
    size_t n, i;
    char quote; /* inside a string literal: its quote */
} jnorm;
static int jnext(jnorm *j) {
    while (j->i < j->n) {
        char c = j->s[j->i++];
        if (j->quote) {
            if (c == j->quote) {
                j->quote = 0;
                return (unsigned char)c;
            }
            if (c == '\r' && j->i < j->n && j->s[j->i] == '\n') continue; /* Jinja normalises newlines */
            if (c == '\\' && j->i < j->n) {
                char e = j->s[j->i];
                int v = e == 'n'                               ? '\n'
                        : e == 't'                             ? '\t'
                        : e == 'r'                             ? '\r'
                        : (e == '\\' || e == '\'' || e == '"') ? e
                                                               : -1;
                if (v >= 0) {
                    j->i++;
                    return 256 + v;
                }
                /* any other escape: Python keeps the backslash, so it is compared as written */
            }
            return 256 + (unsigned char)c;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
        if (c == '\'' || c == '"') j->quote = c;
        return (unsigned char)c;
    }
    return -1;
}
static int jinja_equal(const char *a, size_t an, const char *b, size_t bn) {
    jnorm x = {a, an, 0, 0}, y = {b, bn, 0, 0};
    for (;;) {
        int ca = jnext(&x), cb = jnext(&y);
        if (ca != cb) return 0;
        if (ca < 0) return 1;
    }
}

const ds_chat_template *ds_chat_template_recognise(const char *jinja, size_t len) {
    for (size_t i = 0; jinja && i < N_TEMPLATES; i++)
        if (jinja_equal(jinja, len, templates[i].jinja, strlen(templates[i].jinja))) return &templates[i];
    return NULL;
}

int ds_chat_render(const ds_chat_template *t, const ds_chat *c, const ds_chat_render_opts *o, ds_chat_rendered *r,
                   char *why, size_t whylen) {
    r->len = r->n_pieces = r->n_spans = 0;
    if (why && whylen) why[0] = 0;
    rd d = {.c = c, .o = o, .r = r, .span_start = SIZE_MAX};
    int rc;
    if (c->format == DS_FMT_TEXT || c->pc_strings) {
        /* plain text: the text itself; prompt-completion strings: prompt then
         * completion + eos, the completion (and eos) the target */
        for (size_t i = 0; i < c->n || (c->format == DS_FMT_TEXT && i == 0); i++) {
            if (c->format == DS_FMT_TEXT) {
                put(&d, (const char *)c->buf, c->buf_len, 0);
                break;
            }
            span_open(&d, i);
            msg_text(&d, i);
            if (i + 1 == c->n) tok_opt(&d, o->eos_token);
            span_close(&d);
        }
        rc = DS_CHAT_OK;
    } else {
        rc = DS_CHAT_OK;
        /* a null content (accepted beside tool_calls) reaches only the
         * templates that render tool calls: the others raise on it (they add
         * it to a string) or print "None" (Llama 3 and Gemma's `| trim`),
         * which is refused too */
        for (size_t i = 0; i < c->n && t->render != r_qwen25 && t->render != r_qwen3 && t->render != r_mistral_v3 &&
                           t->render != r_mistral_tekken && t->render != r_mistral_v7;
             i++)
            if (c->msgs[i].content_null) {
                if (why && whylen)
                    snprintf(why, whylen, "message %zu: content is null and template %s renders no tool_calls", i,
                             t->name);
                rc = DS_CHAT_TEMPLATE;
                break;
            }
        if (rc == DS_CHAT_OK) rc = t->render(&d, why, whylen);
    }
    if (d.nomem) return DS_ERR_NOMEM;
    if (rc != DS_CHAT_OK) return rc;
    ds_loss_on l = o->loss_on;
    if (l == DS_LOSS_ALL) {
        r->n_spans = 0;
        if (r->len) {
            d.span_start = 0;
            span_close(&d);
            if (d.nomem) return DS_ERR_NOMEM;
        }
    }
    return DS_CHAT_OK;
}

static void template_names(char *names, size_t cap) {
    size_t k = 0;
    names[0] = 0;
    for (size_t i = 0; i < N_TEMPLATES && k < cap; i++)
        k += (size_t)snprintf(names + k, cap - k, "%s%s", i ? ", " : "", templates[i].name);
}

/* A file's bytes (regular files only, at most 16 MiB: a template or a
 * tokenizer_config.json is small). NULL with err set. */
static char *read_small(const char *path, size_t *n, char *err, size_t errlen) {
    FILE *f = ds_fopen_regular(path, err, errlen);
    if (!f) return NULL;
    size_t cap = (size_t)16 << 20;
    char *buf = malloc(cap + 1);
    if (!buf) {
        fclose(f);
        ds_set_err(err, errlen, "out of memory");
        return NULL;
    }
    *n = fread(buf, 1, cap + 1, f);
    fclose(f);
    if (*n > cap) {
        free(buf);
        ds_set_err(err, errlen, "%s: over 16 MiB, not a chat template", path);
        return NULL;
    }
    buf[*n] = 0;
    return buf;
}

/* The template of a tokenizer_config.json's bytes (DS_OK), or why not. */
static int from_config(const char *path, const char *buf, size_t n, const ds_chat_template **out, char *err,
                       size_t errlen) {
    char names[300], why[200];
    template_names(names, sizeof names);
    ds_chat c = {0};
    ds_chat_parse_opts po = {.format = DS_FMT_TEXT, .text_field = "chat_template"};
    int rc = ds_chat_parse((const uint8_t *)buf, n, &po, &c, why, sizeof why);
    if (rc != DS_CHAT_OK) {
        ds_chat_free(&c);
        ds_set_err(err, errlen, "%s has no string chat_template (%s); name one with --chat-template: %s", path, why,
                   names);
        return rc == DS_ERR_NOMEM ? rc : DS_ERR_FORMAT;
    }
    const ds_chat_template *t = ds_chat_template_recognise((const char *)c.buf, c.buf_len);
    ds_chat_free(&c);
    if (!t) {
        ds_set_err(err, errlen,
                   "the chat_template of %s is none of the built-in templates; name one with --chat-template: %s", path,
                   names);
        return DS_ERR_FORMAT;
    }
    *out = t;
    return DS_OK;
}

int ds_chat_template_resolve(const char *arg, const char *tokenizer_spec, const ds_chat_template **out, char *err,
                             size_t errlen) {
    if (!arg || !strcmp(arg, "auto")) {
        if (!tokenizer_spec) {
            ds_set_err(err, errlen, "--chat-template auto needs the tokenizer's folder");
            return DS_ERR_ARG;
        }
        return ds_chat_template_auto(tokenizer_spec, out, err, errlen);
    }
    const ds_chat_template *t = ds_chat_template_find(arg);
    if (t) {
        *out = t;
        return DS_OK;
    }
    char names[300];
    template_names(names, sizeof names);
    if (!strchr(arg, '/') && !strchr(arg, '.')) {
        ds_set_err(err, errlen, "unknown chat template '%s': a file, auto, or one of %s", arg, names);
        return DS_ERR_ARG;
    }
    size_t n;
    char *buf = read_small(arg, &n, err, errlen);
    if (!buf) return DS_ERR_IO;
    int rc;
    size_t a = 0;
    while (a < n && (buf[a] == ' ' || buf[a] == '\n' || buf[a] == '\t' || buf[a] == '\r')) a++;
    if (a < n && buf[a] == '{' && a + 1 < n && buf[a + 1] != '%' && buf[a + 1] != '{' && buf[a + 1] != '#') {
        rc = from_config(arg, buf, n, out, err, errlen); /* a JSON object: tokenizer_config.json */
    } else {
        t = ds_chat_template_recognise(buf, n);
        rc = t ? DS_OK : DS_ERR_FORMAT;
        if (t) *out = t;
        else
            ds_set_err(err, errlen, "the template in %s is none of the built-in templates; name one of: %s", arg,
                       names);
    }
    free(buf);
    return rc;
}

int ds_chat_template_auto(const char *spec, const ds_chat_template **out, char *err, size_t errlen) {
    char path[DS_PATH_BYTES];
    size_t sl = strlen(spec);
    const char *slash = strrchr(spec, '/');
    int is_json = sl > 5 && !strcmp(spec + sl - 5, ".json");
    if (is_json)
        snprintf(path, sizeof path, "%.*s%stokenizer_config.json", slash ? (int)(slash - spec) : 0, spec,
                 slash ? "/" : "");
    else snprintf(path, sizeof path, "%s/tokenizer_config.json", spec);
    size_t n;
    char *buf = read_small(path, &n, err, errlen);
    if (!buf) {
        char names[300];
        size_t l = strlen(err);
        template_names(names, sizeof names);
        if (l < errlen) snprintf(err + l, errlen - l, "; name a template with --chat-template: %s", names);
        return DS_ERR_IO;
    }
    int rc = from_config(path, buf, n, out, err, errlen);
    free(buf);
    return rc;
}
