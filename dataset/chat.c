/* chat.c - fine-tuning records (chat, prompt/completion) -> messages, and a
 * rendered conversation -> ids + loss mask (ds_chat.h, docs/chat.md). The
 * templates themselves are in chat_template.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_chat.h"
#include "ds_internal.h"
#include "tk.h"

static const char *const format_names[] = {"text", "chat", "prompt-completion", "auto"};
static const char *const loss_names[] = {"assistant", "completion", "all", "default"};
static const char *const role_names[] = {"system", "user", "assistant", "tool"};
static const char *const status_names[] = {"ok",
                                           "json-malformed",
                                           "chat-no-messages",
                                           "chat-not-list",
                                           "chat-unknown-role",
                                           "chat-bad-content",
                                           "chat-template-refused",
                                           "chat-record-too-large"};

#define N_OF(a) (sizeof(a) / sizeof *(a))
const char *ds_format_name(int v) { return v >= 0 && (size_t)v < N_OF(format_names) ? format_names[v] : NULL; }
const char *ds_loss_on_name(int v) { return v >= 0 && (size_t)v < N_OF(loss_names) ? loss_names[v] : NULL; }
const char *ds_role_name(int v) { return v >= 0 && (size_t)v < N_OF(role_names) ? role_names[v] : NULL; }
const char *ds_chat_status_name(int s) { return s >= 0 && (size_t)s < N_OF(status_names) ? status_names[s] : NULL; }

static int parse_name(const char *const *names, size_t n, const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return (int)i;
    return -1;
}
int ds_format_parse(const char *name, ds_format *out) {
    int v = parse_name(format_names, N_OF(format_names), name);
    if (v < 0) return -1;
    *out = (ds_format)v;
    return 0;
}
int ds_loss_on_parse(const char *name, ds_loss_on *out) {
    int v = parse_name(loss_names, N_OF(loss_names), name);
    if (v < 0) return -1;
    *out = (ds_loss_on)v;
    return 0;
}

/* ---- parsing */

static int buf_append(ds_chat *c, const void *p, size_t n) {
    if (n > SIZE_MAX - c->buf_len - 1) return DS_ERR_NOMEM;
    if (c->buf_len + n + 1 > c->buf_cap) {
        size_t nc = c->buf_cap ? c->buf_cap : 256;
        while (nc < c->buf_len + n + 1) nc = nc > SIZE_MAX / 2 ? c->buf_len + n + 1 : nc * 2;
        uint8_t *q = realloc(c->buf, nc);
        if (!q) return DS_ERR_NOMEM;
        c->buf = q;
        c->buf_cap = nc;
    }
    if (n) memcpy(c->buf + c->buf_len, p, n);
    c->buf_len += n;
    c->buf[c->buf_len] = 0;
    return DS_OK;
}

static int msg_push(ds_chat *c, ds_role role, size_t off, int completion) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? 2 * c->cap : 16;
        ds_chat_msg *m = realloc(c->msgs, nc * sizeof *m);
        if (!m) return DS_ERR_NOMEM;
        c->msgs = m;
        c->cap = nc;
    }
    c->msgs[c->n++] = (ds_chat_msg){.role = role, .off = off, .len = c->buf_len - off, .completion = completion};
    return DS_OK;
}

static int set_why(char *why, size_t whylen, int status, const char *fmt, const char *arg) {
    if (why && whylen) {
        char esc[80];
        tk_escape_text(arg ? arg : "", arg ? strlen(arg) : 0, esc, sizeof esc);
        snprintf(why, whylen, fmt, esc);
    }
    return status;
}

/* The record's JSON is read as a tape (json_scan.c: ~5x fewer instructions
 * per byte than jansson's tree, which was ~20% of a chat build); jansson
 * only gives its verdict and message on the rare line the tape refuses or
 * leaves undecided. */
static int tape_is(const ds_jtape *t, long i, int type) { return i >= 0 && t->n[i].type == type; }
static int tape_eq(const ds_jtape *t, long i, const char *s) {
    size_t n = strlen(s);
    return tape_is(t, i, DS_JSCAN_T_STRING) && t->n[i].len == n && !memcmp(t->text + t->n[i].off, s, n);
}
/* The messages field: a key of the record, or a dotted path into nested
 * objects ("conv.messages"), as --field walks the text field (a key that
 * itself holds the dots is found first, as before paths were walked). */
static long tape_path(const ds_jtape *t, const char *path) {
    long v = ds_jtape_get(t, 0, path);
    if (v >= 0 || !strchr(path, '.')) return v;
    char key[256];
    v = 0;
    for (const char *s = path;;) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n >= sizeof key) return -1;
        memcpy(key, s, n);
        key[n] = 0;
        v = ds_jtape_get(t, (size_t)v, key); /* -1 when v is no object */
        if (v < 0 || !dot) return v;
        s = dot + 1;
    }
}

static int tape_append(ds_chat *c, const ds_jtape *t, long i) {
    return buf_append(c, t->text + t->n[i].off, t->n[i].len);
}

/* Content: a string, or a list of parts whose text parts are joined with
 * "\n" (as vLLM's "string" content format does); other parts (images,
 * audio) are counted in other_parts and left out. */
static int add_content(ds_chat *c, const ds_jtape *t, long content, size_t idx, char *why, size_t whylen) {
    char at[32];
    snprintf(at, sizeof at, "%zu", idx);
    if (tape_is(t, content, DS_JSCAN_T_STRING)) return tape_append(c, t, content);
    if (!tape_is(t, content, DS_JSCAN_T_ARRAY))
        return set_why(why, whylen, DS_CHAT_BAD_CONTENT, "message %s: content is not a string nor a list of parts", at);
    size_t n_text = 0;
    for (size_t i = (size_t)content + 1; i < t->n[content].end; i = t->n[i].end) {
        long type = ds_jtape_get(t, i, "type"), text = ds_jtape_get(t, i, "text");
        if (!tape_eq(t, type, "text") || !tape_is(t, text, DS_JSCAN_T_STRING)) {
            c->other_parts++;
            continue;
        }
        if (n_text++ && buf_append(c, "\n", 1)) return DS_ERR_NOMEM;
        if (tape_append(c, t, text)) return DS_ERR_NOMEM;
    }
    if (!n_text) return set_why(why, whylen, DS_CHAT_BAD_CONTENT, "message %s: content has no text part", at);
    return DS_OK;
}

/* The bytes in LINE of tape node V, a number or literal: the tape keeps no
 * position for them, so the (valid) line is walked counting nodes in the
 * tape's order, one per value and per key. Only reached for a reasoning that
 * is not a string, which no real record has. */
static const uint8_t *scalar_bytes(const uint8_t *p, const uint8_t *e, long v, size_t *len) {
    long k = -1;
    while (p < e) {
        uint8_t ch = *p;
        if (ch == '"') {
            k++;
            for (p++; p < e && *p != '"'; p++)
                if (*p == '\\') p++;
            p++;
        } else if (ch == '{' || ch == '[') {
            k++;
            p++;
        } else if (ch == '-' || (ch >= '0' && ch <= '9') || ch == 't' || ch == 'f' || ch == 'n') {
            const uint8_t *a = p;
            while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
                p++;
            if (++k == v) {
                *len = (size_t)(p - a);
                return a;
            }
        } else {
            p++;
        }
    }
    *len = 0;
    return p;
}

/* Python's truth of a JSON value that is neither a string nor null. */
static int tape_truthy(const ds_jtape *t, long v, const uint8_t *line, size_t n) {
    const ds_jnode *nd = &t->n[v];
    if (nd->type == DS_JSCAN_T_ARRAY || nd->type == DS_JSCAN_T_OBJECT) return nd->end > (uint32_t)v + 1;
    size_t len;
    const uint8_t *s = scalar_bytes(line, line + n, v, &len);
    if (nd->type == DS_JSCAN_T_BOOLEAN) return len && s[0] == 't';
    /* a number is false when json.loads makes it 0 or 0.0: -0, 0e5, and 1e-400
     * too (underflow to 0.0, as strtod) */
    char buf[64], *z = len < sizeof buf ? buf : malloc(len + 1);
    if (!z) return 1;
    memcpy(z, s, len);
    z[len] = 0;
    int truthy = strtod(z, NULL) != 0;
    if (z != buf) free(z);
    return truthy;
}

/* The message's reasoning: the first of reasoning_content, thinking and
 * reasoning that is present and not null (transformers' apply_chat_template
 * copies that one into reasoning_content before rendering). */
static int add_reasoning(ds_chat *c, const ds_jtape *t, size_t m, const uint8_t *line, size_t n) {
    static const char *const keys[] = {"reasoning_content", "thinking", "reasoning"};
    ds_chat_msg *msg = &c->msgs[c->n - 1];
    for (size_t k = 0; k < N_OF(keys); k++) {
        long v = ds_jtape_get(t, m, keys[k]);
        if (v < 0 || t->n[v].type == DS_JSCAN_T_NULL) continue;
        if (t->n[v].type != DS_JSCAN_T_STRING) {
            msg->reason = tape_truthy(t, v, line, n) ? DS_REASON_OTHER_TRUE : DS_REASON_OTHER_FALSE;
            return DS_OK;
        }
        size_t off = c->buf_len;
        if (tape_append(c, t, v)) return DS_ERR_NOMEM;
        msg = &c->msgs[c->n - 1];
        msg->reason = DS_REASON_STRING;
        msg->r_off = off;
        msg->r_len = c->buf_len - off;
        return DS_OK;
    }
    return DS_OK;
}

static int add_messages(ds_chat *c, const ds_jtape *t, const uint8_t *line, size_t n, long list, int completion,
                        const char *what, char *why, size_t whylen) {
    if (!tape_is(t, list, DS_JSCAN_T_ARRAY)) return set_why(why, whylen, DS_CHAT_NOT_LIST, "%s is not a list", what);
    for (size_t m = (size_t)list + 1; m < t->n[list].end; m = t->n[m].end) {
        if (!tape_is(t, (long)m, DS_JSCAN_T_OBJECT))
            return set_why(why, whylen, DS_CHAT_NOT_LIST, "%s holds a non-object", what);
        long role = ds_jtape_get(t, m, "role");
        if (!tape_is(t, role, DS_JSCAN_T_STRING))
            return set_why(why, whylen, DS_CHAT_UNKNOWN_ROLE, "%s: a message without role", what);
        int r = -1;
        for (size_t k = 0; k < N_OF(role_names) && r < 0; k++)
            if (tape_eq(t, role, role_names[k])) r = (int)k;
        if (r < 0) {
            char name[64];
            size_t nl = t->n[role].len < sizeof name - 1 ? t->n[role].len : sizeof name - 1;
            memcpy(name, t->text + t->n[role].off, nl);
            name[nl] = 0;
            return set_why(why, whylen, DS_CHAT_UNKNOWN_ROLE, "unknown role '%s'", name);
        }
        size_t off = c->buf_len;
        int rc = add_content(c, t, ds_jtape_get(t, m, "content"), c->n, why, whylen);
        if (rc) return rc;
        if (msg_push(c, (ds_role)r, off, completion) || add_reasoning(c, t, m, line, n)) return DS_ERR_NOMEM;
    }
    return DS_OK;
}

void ds_chat_free(ds_chat *c) {
    if (!c) return;
    free(c->msgs);
    free(c->buf);
    if (c->impl) ds_jtape_free(c->impl);
    free(c->impl);
    memset(c, 0, sizeof *c);
}

/* jansson's verdict on a line the tape refused or left undecided: 0 when it
 * parses (an undecided number jansson takes), else DS_CHAT_BAD_JSON with
 * its message. A lone surrogate escape, which the tape decodes as U+FFFD,
 * is refused here too, as jansson refuses it. */
static int jansson_verdict(const uint8_t *line, size_t len, char *why, size_t whylen) {
    json_error_t jerr;
    json_t *root = json_loadb((const char *)line, len, JSON_ALLOW_NUL, &jerr);
    if (!root) return set_why(why, whylen, DS_CHAT_BAD_JSON, "%s", jerr.text);
    json_decref(root);
    return 0;
}

int ds_chat_parse(const uint8_t *line, size_t len, const ds_chat_parse_opts *o, ds_chat *c, char *why, size_t whylen) {
    c->n = 0;
    c->buf_len = 0;
    c->pc_strings = 0;
    c->other_parts = 0;
    if (why && whylen) why[0] = 0;
    if (len > DS_CHAT_MAX_RECORD) {
        if (why && whylen)
            snprintf(why, whylen, "a record of %zu bytes, over the %zu MiB bound of a chat record", len,
                     DS_CHAT_MAX_RECORD >> 20);
        return DS_CHAT_TOO_LARGE;
    }
    if (!c->impl && !(c->impl = calloc(1, sizeof(ds_jtape)))) return DS_ERR_NOMEM;
    ds_jtape *t = c->impl;
    int lone = 0;
    ds_jscan_status st = ds_json_tape(line, len, t, &lone);
    if (st == DS_JSCAN_NOMEM) return DS_ERR_NOMEM;
    if (st != DS_JSCAN_OK || lone) {
        int v = jansson_verdict(line, len, why, whylen);
        if (v) return v;
        if (st != DS_JSCAN_UNSURE || lone) /* jansson took what the tape refuses (a NUL after a number) */
            return set_why(why, whylen, DS_CHAT_BAD_JSON, "%s", "not JSON the record parser accepts");
    }
    const char *mf = o && o->messages_field ? o->messages_field : "messages";
    const char *tf = o && o->text_field ? o->text_field : "text";
    ds_format f = o ? o->format : DS_FMT_CHAT;
    if (!tape_is(t, 0, DS_JSCAN_T_OBJECT))
        return set_why(why, whylen, DS_CHAT_BAD_JSON, "%s", "the line is not a JSON object");
    long msgs = tape_path(t, mf);
    long prompt = ds_jtape_get(t, 0, "prompt"), compl = ds_jtape_get(t, 0, "completion");
    if (f == DS_FMT_AUTO)
        f = msgs >= 0 ? DS_FMT_CHAT : (prompt >= 0 && compl >= 0) ? DS_FMT_PROMPT_COMPLETION : DS_FMT_TEXT;
    c->format = f;
    if (f == DS_FMT_TEXT) {
        long tx = ds_jtape_get(t, 0, tf);
        if (!tape_is(t, tx, DS_JSCAN_T_STRING))
            return set_why(why, whylen, DS_CHAT_NO_MESSAGES, "no string field '%s'", tf);
        return tape_append(c, t, tx);
    }
    if (f == DS_FMT_CHAT) {
        if (msgs < 0) return set_why(why, whylen, DS_CHAT_NO_MESSAGES, "no field '%s'", mf);
        return add_messages(c, t, line, len, msgs, 0, mf, why, whylen);
    }
    /* prompt-completion: two strings, or two message lists (TRL's conversational form) */
    if (prompt < 0 || compl < 0)
        return set_why(why, whylen, DS_CHAT_NO_MESSAGES, "%s", "no 'prompt' and 'completion' fields");
    int rc;
    if (tape_is(t, prompt, DS_JSCAN_T_STRING) && tape_is(t, compl, DS_JSCAN_T_STRING)) {
        c->pc_strings = 1;
        size_t off = c->buf_len;
        if ((rc = tape_append(c, t, prompt)) || (rc = msg_push(c, DS_ROLE_USER, off, 0))) return rc;
        off = c->buf_len;
        if ((rc = tape_append(c, t, compl )) || (rc = msg_push(c, DS_ROLE_ASSISTANT, off, 1))) return rc;
        return DS_OK;
    }
    if (tape_is(t, prompt, DS_JSCAN_T_ARRAY) && tape_is(t, compl, DS_JSCAN_T_ARRAY)) {
        if ((rc = add_messages(c, t, line, len, prompt, 0, "prompt", why, whylen))) return rc;
        return add_messages(c, t, line, len, compl, 1, "completion", why, whylen);
    }
    return set_why(why, whylen, DS_CHAT_BAD_CONTENT, "%s",
                   "prompt and completion must both be strings or both be message lists");
}

/* ---- encoding a rendering */

void ds_chat_rendered_free(ds_chat_rendered *r) {
    if (!r) return;
    free(r->text);
    free(r->pieces);
    free(r->spans);
    memset(r, 0, sizeof *r);
}

void ds_chat_ids_free(ds_chat_ids *v) {
    if (!v) return;
    free(v->ids);
    free(v->mask);
    memset(v, 0, sizeof *v);
}

static int ids_reserve(ds_chat_ids *v, size_t extra) {
    if (extra > SIZE_MAX / 8 - v->len) return DS_ERR_NOMEM;
    if (v->len + extra <= v->cap) return DS_OK;
    size_t nc = v->cap ? v->cap : 256;
    while (nc < v->len + extra) nc *= 2;
    uint32_t *ids = realloc(v->ids, nc * sizeof *ids);
    if (!ids) return DS_ERR_NOMEM;
    v->ids = ids;
    uint8_t *m = realloc(v->mask, nc);
    if (!m) return DS_ERR_NOMEM;
    v->mask = m;
    v->cap = nc;
    return DS_OK;
}

/* 1 when [a, a+n) overlaps a loss span (spans are in text order, disjoint). */
static int in_loss(const ds_chat_rendered *r, size_t *si, size_t a, size_t n) {
    while (*si < r->n_spans && r->spans[*si].off + r->spans[*si].len <= a) (*si)++;
    if (*si >= r->n_spans) return 0;
    const ds_chat_span *s = &r->spans[*si];
    size_t end = a + (n ? n : 1);
    return s->off < end && a < s->off + s->len;
}

/* Text runs between special pieces are encoded as one text, as the
 * reference tokenizes the whole rendered string (a text token may straddle
 * two of our pieces, e.g. a role header and the content); each token's
 * bytes then say which part of the text it covers, for the mask. A
 * tokenizer with a normalizer (NFC) may give token bytes that differ from
 * the input's; the mask then follows the token bytes' running length,
 * clamped to the run. */
int ds_chat_encode(const tk_tokenizer *tok, const ds_chat_rendered *r, ds_chat_ids *out, char *why, size_t whylen) {
    tk_ids tmp = {0};
    size_t si = 0;
    int rc = DS_OK;
    for (size_t p = 0; p < r->n_pieces;) {
        const ds_chat_piece *pc = &r->pieces[p];
        if (pc->special) {
            char name[256];
            if (pc->len >= sizeof name) {
                rc = set_why(why, whylen, DS_ERR_ARG, "%s", "a template special token over 255 bytes");
                break;
            }
            memcpy(name, r->text + pc->off, pc->len);
            name[pc->len] = 0;
            uint32_t id;
            if (tk_special_id(tok, name, &id) != TK_OK && tk_token_id(tok, name, &id) != TK_OK) {
                rc =
                    set_why(why, whylen, DS_ERR_ARG, "the template's special token '%s' is not in the tokenizer", name);
                break;
            }
            if ((rc = ids_reserve(out, 1))) break;
            out->ids[out->len] = id;
            out->mask[out->len++] = (uint8_t)in_loss(r, &si, pc->off, pc->len);
            p++;
            continue;
        }
        size_t a = pc->off, e = pc->off + pc->len;
        size_t q = p + 1;
        while (q < r->n_pieces && !r->pieces[q].special) e = r->pieces[q].off + r->pieces[q].len, q++;
        p = q;
        tmp.len = 0;
        int trc = tk_encode(tok, r->text + a, e - a, &tmp);
        if (trc != TK_OK) {
            rc = trc;
            if (why && whylen) snprintf(why, whylen, "%s", tk_strerror(trc));
            break;
        }
        if ((rc = ids_reserve(out, tmp.len))) break;
        /* a run outside every span, or inside one, needs no token bytes */
        while (si < r->n_spans && r->spans[si].off + r->spans[si].len <= a) si++;
        int none = si >= r->n_spans || r->spans[si].off >= e;
        if (none || (r->spans[si].off <= a && r->spans[si].off + r->spans[si].len >= e)) {
            memcpy(out->ids + out->len, tmp.ids, tmp.len * sizeof *tmp.ids);
            memset(out->mask + out->len, none ? 0 : 1, tmp.len);
            out->len += tmp.len;
            continue;
        }
        size_t pos = a;
        for (size_t i = 0; i < tmp.len; i++) {
            /* once the rest of the run lies inside one span (an assistant
             * message after its role header), or past every span, its
             * tokens need no byte lengths: ~4% of a chat build was
             * tk_token_bytes over whole assistant messages */
            while (si < r->n_spans && r->spans[si].off + r->spans[si].len <= pos) si++;
            int rest_none = si >= r->n_spans || r->spans[si].off >= e;
            if (rest_none || (r->spans[si].off <= pos && r->spans[si].off + r->spans[si].len >= e)) {
                size_t k = tmp.len - i;
                memcpy(out->ids + out->len, tmp.ids + i, k * sizeof *tmp.ids);
                memset(out->mask + out->len, rest_none ? 0 : 1, k);
                out->len += k;
                break;
            }
            const uint8_t *b;
            size_t bl = 0;
            if (tk_token_bytes(tok, tmp.ids[i], &b, &bl) != TK_OK) bl = 0;
            if (pos + bl > e) bl = e - pos;
            if (i + 1 == tmp.len) bl = e - pos; /* the last token ends the run */
            out->ids[out->len] = tmp.ids[i];
            out->mask[out->len++] = (uint8_t)in_loss(r, &si, pos, bl);
            pos += bl;
        }
    }
    tk_ids_free(&tmp);
    return rc;
}

void ds_chat_framing_tokens(const tk_tokenizer *tok, char *bos, size_t boscap, char *eos, size_t eoscap) {
    tk_framing fr;
    char err[200];
    if (boscap) bos[0] = 0;
    if (eoscap) eos[0] = 0;
    if (tk_default_framing(tok, &fr, err, sizeof err) != TK_OK) return;
    const uint8_t *b;
    size_t n;
    if (fr.bos >= 0 && tk_token_bytes(tok, (uint32_t)fr.bos, &b, &n) == TK_OK && n < boscap) {
        memcpy(bos, b, n);
        bos[n] = 0;
    }
    if (fr.eos >= 0 && tk_token_bytes(tok, (uint32_t)fr.eos, &b, &n) == TK_OK && n < eoscap) {
        memcpy(eos, b, n);
        eos[n] = 0;
    }
}

/* ---- fitting a conversation into a row (ds_chat_fit) */

static size_t count_targets(const ds_chat_ids *v) {
    size_t n = 0;
    for (size_t i = 0; i < v->len; i++) n += v->mask[i] != 0;
    return n;
}

static int render_encode(const tk_tokenizer *tok, const ds_chat_template *t, const ds_chat *c,
                         const ds_chat_render_opts *ro, ds_chat_rendered *r, ds_chat_ids *out, char *why,
                         size_t whylen) {
    int rc = ds_chat_render(t, c, ro, r, why, whylen);
    if (rc != DS_CHAT_OK) return rc;
    out->len = 0;
    rc = ds_chat_encode(tok, r, out, why, whylen);
    /* a text record (format auto): every token is a target, as in a text build */
    if (rc == DS_OK && c->format == DS_FMT_TEXT) memset(out->mask, 1, out->len);
    return rc;
}

/* [*s, *e): the oldest turn after the system message that may go: a user
 * message and what follows up to the next user message. 0 when none may:
 * the last turn (the one that ends the conversation, or the prompt before a
 * completion) always stays. */
static int oldest_turn(const ds_chat *c, size_t *s, size_t *e) {
    size_t a = c->n && c->msgs[0].role == DS_ROLE_SYSTEM ? 1 : 0;
    if (a >= c->n || c->msgs[a].completion) return 0;
    size_t b = a + 1;
    while (b < c->n && c->msgs[b].role != DS_ROLE_USER && !c->msgs[b].completion) b++;
    if (b >= c->n || c->msgs[b].completion) return 0;
    *s = a;
    *e = b;
    return 1;
}

/* The first token of the last run of assistant targets in v (the last
 * assistant message's content under loss_on assistant); v->len when none. */
static size_t last_assistant_start(const ds_chat_ids *v) {
    size_t i = v->len;
    while (i > 0 && !v->mask[i - 1]) i--;
    if (!i) return v->len;
    while (i > 0 && v->mask[i - 1]) i--;
    return i;
}

static int fit_out(ds_chat_fit_result *res, ds_chat_fate fate, ds_chat_ids *out, char *why, size_t whylen,
                   const char *fmt, size_t a, size_t b) {
    res->fate = fate;
    if (fate == DS_CHAT_FATE_DROPPED || fate == DS_CHAT_FATE_NO_LOSS) out->len = 0;
    res->loss_tokens = count_targets(out);
    if (fmt && why && whylen) snprintf(why, whylen, fmt, a, b);
    return DS_CHAT_OK;
}

int ds_chat_fit(const tk_tokenizer *tok, const ds_chat_template *t, ds_chat *c, const ds_chat_render_opts *ro,
                ds_chat_fit_policy policy, size_t budget, ds_chat_rendered *r, ds_chat_ids *out,
                ds_chat_fit_result *res, char *why, size_t whylen) {
    memset(res, 0, sizeof *res);
    if (why && whylen) why[0] = 0;
    int rc = render_encode(tok, t, c, ro, r, out, why, whylen);
    if (rc != DS_OK) return rc;
    res->tokens = out->len;
    if (out->len <= budget || policy == DS_CHAT_FIT_KEEP) {
        if (!count_targets(out))
            return fit_out(res, DS_CHAT_FATE_NO_LOSS, out, why, whylen, "%zu tokens, none of them a target%.0zu",
                           res->tokens, 0);
        return fit_out(res, DS_CHAT_FATE_WHOLE, out, why, whylen, NULL, 0, 0);
    }
    if (policy == DS_CHAT_FIT_DROP)
        return fit_out(res, DS_CHAT_FATE_DROPPED, out, why, whylen, "%zu tokens > %zu (--over-long drop)", res->tokens,
                       budget);
    if (policy == DS_CHAT_FIT_DROP_TURNS) {
        size_t s, e;
        while (out->len > budget && oldest_turn(c, &s, &e)) {
            memmove(c->msgs + s, c->msgs + e, (c->n - e) * sizeof *c->msgs);
            c->n -= e - s;
            res->turns_dropped++;
            if ((rc = render_encode(tok, t, c, ro, r, out, why, whylen)) != DS_OK) return rc;
        }
        if (out->len > budget)
            return fit_out(res, DS_CHAT_FATE_DROPPED, out, why, whylen,
                           "its last turn alone is %zu tokens > %zu (--over-long drop-turns)", out->len, budget);
        if (!count_targets(out))
            return fit_out(res, DS_CHAT_FATE_NO_LOSS, out, why, whylen,
                           "no target token left after dropping %zu turn(s)%.0zu", res->turns_dropped, 0);
        return fit_out(res, res->turns_dropped ? DS_CHAT_FATE_TURNS_DROPPED : DS_CHAT_FATE_WHOLE, out, why, whylen,
                       NULL, 0, 0);
    }
    /* truncate: a token prefix, so no special token is ever split and the ids
     * are those of the whole conversation; the cut must fall inside the last
     * assistant message or after it (its end-of-turn then stays when it fits) */
    size_t start;
    if (c->format == DS_FMT_TEXT) {
        start = 0;
    } else if (ro->loss_on == DS_LOSS_ASSISTANT || (ro->loss_on == DS_LOSS_DEFAULT && c->format == DS_FMT_CHAT)) {
        start = last_assistant_start(out);
    } else { /* the mask in force is not the assistant's: find its last message with one */
        ds_chat_render_opts ao = *ro;
        ao.loss_on = DS_LOSS_ASSISTANT;
        ds_chat_rendered r2 = {0};
        ds_chat_ids v2 = {0};
        rc = render_encode(tok, t, c, &ao, &r2, &v2, why, whylen);
        start = rc == DS_OK ? last_assistant_start(&v2) : 0;
        ds_chat_rendered_free(&r2);
        ds_chat_ids_free(&v2);
        if (rc != DS_OK) return rc;
    }
    if (start >= budget)
        return fit_out(res, DS_CHAT_FATE_DROPPED, out, why, whylen,
                       "%zu tokens before its last assistant message, not < %zu (--over-long truncate)", start, budget);
    out->len = budget;
    if (!count_targets(out))
        return fit_out(res, DS_CHAT_FATE_NO_LOSS, out, why, whylen, "no target token in its first %zu tokens%.0zu",
                       budget, 0);
    return fit_out(res, DS_CHAT_FATE_TRUNCATED, out, why, whylen, NULL, 0, 0);
}
