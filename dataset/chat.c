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

void ds_chat_free(ds_chat *c) {
    if (!c) return;
    free(c->msgs);
    free(c->buf);
    memset(c, 0, sizeof *c);
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

/* Content: a string, or a list of parts whose text parts are joined with
 * "\n" (as vLLM's "string" content format does); other parts (images,
 * audio) are counted in other_parts and left out. */
static int add_content(ds_chat *c, json_t *content, size_t idx, char *why, size_t whylen) {
    char at[32];
    snprintf(at, sizeof at, "%zu", idx);
    if (json_is_string(content)) return buf_append(c, json_string_value(content), json_string_length(content));
    if (!json_is_array(content))
        return set_why(why, whylen, DS_CHAT_BAD_CONTENT, "message %s: content is not a string nor a list of parts", at);
    size_t i, n_text = 0;
    json_t *part;
    json_array_foreach(content, i, part) {
        json_t *type = json_object_get(part, "type");
        json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            c->other_parts++;
            continue;
        }
        if (n_text++ && buf_append(c, "\n", 1)) return DS_ERR_NOMEM;
        if (buf_append(c, json_string_value(text), json_string_length(text))) return DS_ERR_NOMEM;
    }
    if (!n_text) return set_why(why, whylen, DS_CHAT_BAD_CONTENT, "message %s: content has no text part", at);
    return DS_OK;
}

static int add_messages(ds_chat *c, json_t *list, int completion, const char *what, char *why, size_t whylen) {
    if (!json_is_array(list)) return set_why(why, whylen, DS_CHAT_NOT_LIST, "%s is not a list", what);
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m) {
        if (!json_is_object(m)) return set_why(why, whylen, DS_CHAT_NOT_LIST, "%s holds a non-object", what);
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return set_why(why, whylen, DS_CHAT_UNKNOWN_ROLE, "%s: a message without role", what);
        int r = parse_name(role_names, N_OF(role_names), json_string_value(role));
        if (r < 0) return set_why(why, whylen, DS_CHAT_UNKNOWN_ROLE, "unknown role '%s'", json_string_value(role));
        size_t off = c->buf_len;
        json_t *content = json_object_get(m, "content");
        int rc = add_content(c, content, c->n, why, whylen);
        if (rc) return rc;
        if (msg_push(c, (ds_role)r, off, completion)) return DS_ERR_NOMEM;
    }
    return DS_OK;
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
    json_error_t jerr;
    json_t *root = json_loadb((const char *)line, len, JSON_ALLOW_NUL, &jerr);
    if (!root) return set_why(why, whylen, DS_CHAT_BAD_JSON, "%s", jerr.text);
    int rc = DS_OK;
    const char *mf = o && o->messages_field ? o->messages_field : "messages";
    const char *tf = o && o->text_field ? o->text_field : "text";
    ds_format f = o ? o->format : DS_FMT_CHAT;
    if (!json_is_object(root)) {
        rc = set_why(why, whylen, DS_CHAT_BAD_JSON, "%s", "the line is not a JSON object");
        goto done;
    }
    json_t *msgs = json_object_get(root, mf);
    json_t *prompt = json_object_get(root, "prompt"), *compl = json_object_get(root, "completion");
    if (f == DS_FMT_AUTO) f = msgs ? DS_FMT_CHAT : (prompt && compl ) ? DS_FMT_PROMPT_COMPLETION : DS_FMT_TEXT;
    c->format = f;
    if (f == DS_FMT_TEXT) {
        json_t *t = json_object_get(root, tf);
        if (!json_is_string(t)) {
            rc = set_why(why, whylen, DS_CHAT_NO_MESSAGES, "no string field '%s'", tf);
            goto done;
        }
        rc = buf_append(c, json_string_value(t), json_string_length(t));
    } else if (f == DS_FMT_CHAT) {
        if (!msgs) {
            rc = set_why(why, whylen, DS_CHAT_NO_MESSAGES, "no field '%s'", mf);
            goto done;
        }
        rc = add_messages(c, msgs, 0, mf, why, whylen);
    } else { /* prompt-completion: two strings, or two message lists (TRL's conversational form) */
        if (!prompt || !compl ) {
            rc = set_why(why, whylen, DS_CHAT_NO_MESSAGES, "%s", "no 'prompt' and 'completion' fields");
            goto done;
        }
        if (json_is_string(prompt) && json_is_string(compl )) {
            c->pc_strings = 1;
            size_t off = c->buf_len;
            if ((rc = buf_append(c, json_string_value(prompt), json_string_length(prompt))) ||
                (rc = msg_push(c, DS_ROLE_USER, off, 0)))
                goto done;
            off = c->buf_len;
            if ((rc = buf_append(c, json_string_value(compl ), json_string_length(compl ))) ||
                (rc = msg_push(c, DS_ROLE_ASSISTANT, off, 1)))
                goto done;
        } else if (json_is_array(prompt) && json_is_array(compl )) {
            if ((rc = add_messages(c, prompt, 0, "prompt", why, whylen)) ||
                (rc = add_messages(c, compl, 1, "completion", why, whylen)))
                goto done;
        } else {
            rc = set_why(why, whylen, DS_CHAT_BAD_CONTENT, "%s",
                         "prompt and completion must both be strings or both be message lists");
        }
    }
done:
    json_decref(root);
    return rc;
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
