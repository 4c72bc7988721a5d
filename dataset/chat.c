/* chat.c - fine-tuning records (chat, prompt/completion) -> messages, and a
 * rendered conversation -> ids + loss mask (ds_chat.h, docs/chat.md). The
 * templates themselves are in chat_template.c, fitting a conversation into
 * a row in chat_fit.c. */
#include <jansson.h>
#include <math.h>
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

/* The parser's reused state (ds_chat.impl): the tape, and where each of its
 * nodes starts in the line, found by one walk on the first need (numbers and
 * literals keep no bytes in the tape; only records with tool calls, tools or
 * a reasoning that is not a string need them): 4 bytes per node, so at most
 * 4x the line (DS_CHAT_MAX_RECORD) on top of the tape's 17x. */
typedef struct {
    ds_jtape tape;
    const uint8_t *line;
    size_t n;
    uint32_t *pos;
    size_t pos_cap;
    int pos_ok;
} chat_impl;

static int node_positions(chat_impl *im) {
    if (im->pos_ok) return DS_OK;
    if (im->tape.len > im->pos_cap) {
        uint32_t *p = realloc(im->pos, im->tape.len * sizeof *p);
        if (!p) return DS_ERR_NOMEM;
        im->pos = p;
        im->pos_cap = im->tape.len;
    }
    const uint8_t *p = im->line, *e = im->line + im->n;
    size_t k = 0;
    while (p < e && k < im->tape.len) { /* the line is valid JSON: one node per value and per key */
        uint8_t ch = *p;
        if (ch == '"') {
            im->pos[k++] = (uint32_t)(p - im->line);
            for (p++; p < e && *p != '"'; p++)
                if (*p == '\\') p++;
            p++;
        } else if (ch == '{' || ch == '[' || ch == '-' || (ch >= '0' && ch <= '9') || ch == 't' || ch == 'f' ||
                   ch == 'n') {
            im->pos[k++] = (uint32_t)(p - im->line);
            p++;
            if (ch != '{' && ch != '[')
                while (p < e && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
                                 *p == '-' || (*p >= 'a' && *p <= 'z')))
                    p++;
        } else {
            p++;
        }
    }
    if (k != im->tape.len) return DS_ERR_FORMAT; /* cannot happen on a line the tape took */
    im->pos_ok = 1;
    return DS_OK;
}

/* The bytes of scalar node V (a number or literal) in the line. */
static const uint8_t *scalar_bytes(chat_impl *im, long v, size_t *len) {
    const uint8_t *s = im->line + im->pos[v], *p = s, *e = im->line + im->n;
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
    *len = (size_t)(p - s);
    return s;
}

/* Python's truth of a JSON value (json.loads, then bool): 1 or 0, or
 * DS_ERR_NOMEM when the scalar's position or copy cannot be allocated (a
 * guess there would render the record as if the value were true). */
static int tape_truthy(chat_impl *im, long v) {
    const ds_jtape *t = &im->tape;
    const ds_jnode *nd = &t->n[v];
    if (nd->type == DS_JSCAN_T_STRING) return nd->len > 0;
    if (nd->type == DS_JSCAN_T_NULL) return 0;
    if (nd->type == DS_JSCAN_T_ARRAY || nd->type == DS_JSCAN_T_OBJECT) return nd->end > (uint32_t)v + 1;
    if (node_positions(im)) return DS_ERR_NOMEM;
    size_t len;
    const uint8_t *s = scalar_bytes(im, v, &len);
    if (nd->type == DS_JSCAN_T_BOOLEAN) return len && s[0] == 't';
    /* a number is false when json.loads makes it 0 or 0.0: -0, 0e5, and 1e-400
     * too (underflow to 0.0, as strtod) */
    char buf[64], *z = len < sizeof buf ? buf : malloc(len + 1);
    if (!z) return DS_ERR_NOMEM;
    memcpy(z, s, len);
    z[len] = 0;
    int truthy = strtod(z, NULL) != 0;
    if (z != buf) free(z);
    return truthy;
}

/* ---- transformers' tojson filter: json.dumps(x, ensure_ascii=False) with
 * the default separators ", " and ": ", keys in the record's order (a key
 * that repeats: its first place, its last value, as a Python dict built by
 * json.loads), numbers as json.loads makes them and Python prints them. */

static int put_json_string(ds_chat *c, const uint8_t *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (buf_append(c, "\"", 1)) return DS_ERR_NOMEM;
    size_t a = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        if (buf_append(c, s + a, i - a)) return DS_ERR_NOMEM;
        char e[7] = {'\\', 0};
        size_t el = 2;
        switch (ch) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[ch >> 4];
            e[5] = hex[ch & 15];
            el = 6;
        }
        if (buf_append(c, e, el)) return DS_ERR_NOMEM;
        a = i + 1;
    }
    if (buf_append(c, s + a, n - a) || buf_append(c, "\"", 1)) return DS_ERR_NOMEM;
    return DS_OK;
}

/* Python's repr of the double json.loads makes of a JSON number with a
 * fraction or exponent: the shortest digits that read back the same, in
 * fixed notation for 1e-4 <= |x| < 1e16 (always with a '.'), else d.ddde+XX. */
static size_t py_float_repr(const uint8_t *s, size_t len, char *out, size_t cap) {
    char num[400], e[40];
    if (len >= sizeof num) len = sizeof num - 1; /* a JSON number that long still reads as its first 399 bytes */
    memcpy(num, s, len);
    num[len] = 0;
    double x = strtod(num, NULL);
    if (isnan(x)) return (size_t)snprintf(out, cap, "NaN");
    if (isinf(x)) return (size_t)snprintf(out, cap, "%s", x > 0 ? "Infinity" : "-Infinity");
    if (x == 0) return (size_t)snprintf(out, cap, "%s", signbit(x) ? "-0.0" : "0.0");
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, x);
    /* e: [-]d[.ddd]e[+-]XX */
    char digits[20];
    size_t nd = 0;
    int neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    size_t o = 0;
    char buf[64];
    if (neg) buf[o++] = '-';
    if (exp10 >= -4 && exp10 < 16) {
        if (exp10 < 0) {
            buf[o++] = '0';
            buf[o++] = '.';
            for (int k = -1; k > exp10; k--) buf[o++] = '0';
            for (size_t k = 0; k < nd; k++) buf[o++] = digits[k];
        } else {
            for (int k = 0; k <= exp10; k++) buf[o++] = (size_t)k < nd ? digits[k] : '0';
            buf[o++] = '.';
            if ((size_t)exp10 + 1 < nd)
                for (size_t k = (size_t)exp10 + 1; k < nd; k++) buf[o++] = digits[k];
            else buf[o++] = '0';
        }
    } else {
        buf[o++] = digits[0];
        if (nd > 1) {
            buf[o++] = '.';
            for (size_t k = 1; k < nd; k++) buf[o++] = digits[k];
        }
        o += (size_t)snprintf(buf + o, sizeof buf - o, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
    buf[o] = 0;
    return (size_t)snprintf(out, cap, "%s", buf);
}

/* A JSON number as Python prints what json.loads makes of it: an integer's
 * digits ("-0" is 0), a real's repr. */
static int put_number(ds_chat *c, chat_impl *im, long v) {
    if (node_positions(im)) return DS_ERR_NOMEM;
    size_t len;
    const uint8_t *s = scalar_bytes(im, v, &len);
    int real = 0;
    for (size_t i = 0; i < len; i++) real |= s[i] == '.' || s[i] == 'e' || s[i] == 'E';
    if (!real) {
        if (len == 2 && s[0] == '-' && s[1] == '0') return buf_append(c, "0", 1);
        return buf_append(c, s, len);
    }
    char out[64];
    size_t n = py_float_repr(s, len, out, sizeof out);
    return buf_append(c, out, n);
}

static int key_cmp(const ds_jtape *t, uint32_t a, uint32_t b) {
    const ds_jnode *x = &t->n[a], *y = &t->n[b];
    size_t n = x->len < y->len ? x->len : y->len;
    int r = memcmp(t->text + x->off, t->text + y->off, n);
    if (r) return r;
    return x->len < y->len ? -1 : x->len > y->len;
}
/* qsort has no context argument: the tape being sorted, per thread */
static _Thread_local const ds_jtape *tl_sort_tape;
static int key_order(const void *pa, const void *pb) {
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
    int r = key_cmp(tl_sort_tape, a, b);
    return r ? r : (a > b) - (a < b);
}

static int tojson(ds_chat *c, chat_impl *im, long v, int depth);

/* The entries of object V as the dict json.loads builds: each key at its
 * first place with the value of its last. kv[2i], kv[2i+1]: key and value
 * nodes (malloc'd, *n entries). Small objects compare keys pairwise; larger
 * ones sort key indices (n log n), so a hostile object of a million keys,
 * equal or not, costs no more than its sort. */
static int dict_entries(const ds_jtape *t, long v, uint32_t **kv, size_t *n) {
    size_t nk = 0;
    for (size_t k = (size_t)v + 1; k < t->n[v].end; k = t->n[k + 1].end) nk++;
    *n = 0;
    *kv = malloc((nk ? nk : 1) * 2 * sizeof **kv);
    if (!*kv) return DS_ERR_NOMEM;
    uint32_t *keys = NULL, *sorted = NULL, *val = NULL; /* doc order; by (key, place); value to write or 0 */
    if (nk > 16) {
        keys = malloc(nk * sizeof *keys);
        sorted = malloc(nk * sizeof *sorted);
        val = malloc(nk * sizeof *val);
        if (!keys || !sorted || !val) {
            free(keys);
            free(sorted);
            free(val);
            free(*kv);
            *kv = NULL;
            return DS_ERR_NOMEM;
        }
        size_t i = 0;
        for (size_t k = (size_t)v + 1; k < t->n[v].end; k = t->n[k + 1].end) keys[i] = sorted[i] = (uint32_t)k, i++;
        tl_sort_tape = t;
        qsort(sorted, nk, sizeof *sorted, key_order);
        for (size_t a = 0, b; a < nk; a = b + 1) {
            for (b = a; b + 1 < nk && !key_cmp(t, sorted[b + 1], sorted[a]);) b++;
            for (size_t j = a; j <= b; j++) {
                size_t lo = 0, hi = nk; /* keys[] ascends: the place of sorted[j] */
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (keys[mid] < sorted[j]) lo = mid + 1;
                    else hi = mid;
                }
                val[lo] = j == a ? sorted[b] + 1 : 0;
            }
        }
    }
    size_t i = 0;
    for (size_t k = (size_t)v + 1; k < t->n[v].end; k = t->n[k + 1].end, i++) {
        size_t vv = k + 1;
        if (val) {
            if (!val[i]) continue;
            vv = val[i];
        } else {
            int dup = 0;
            for (size_t j = (size_t)v + 1; j < t->n[v].end; j = t->n[j + 1].end) {
                if (j == k || key_cmp(t, (uint32_t)j, (uint32_t)k)) continue;
                if (j < k) dup = 1;
                else vv = j + 1;
            }
            if (dup) continue;
        }
        (*kv)[2 * *n] = (uint32_t)k;
        (*kv)[2 * *n + 1] = (uint32_t)vv;
        (*n)++;
    }
    free(keys);
    free(sorted);
    free(val);
    return DS_OK;
}

static int tojson_object(ds_chat *c, chat_impl *im, long v, int depth) {
    const ds_jtape *t = &im->tape;
    uint32_t *kv;
    size_t n;
    if (dict_entries(t, v, &kv, &n) || buf_append(c, "{", 1)) {
        free(kv);
        return DS_ERR_NOMEM;
    }
    int rc = DS_OK;
    for (size_t i = 0; i < n && rc == DS_OK; i++) {
        if (i && buf_append(c, ", ", 2)) rc = DS_ERR_NOMEM;
        if (rc == DS_OK) rc = put_json_string(c, t->text + t->n[kv[2 * i]].off, t->n[kv[2 * i]].len);
        if (rc == DS_OK && buf_append(c, ": ", 2)) rc = DS_ERR_NOMEM;
        if (rc == DS_OK) rc = tojson(c, im, (long)kv[2 * i + 1], depth + 1);
    }
    free(kv);
    if (rc == DS_OK && buf_append(c, "}", 1)) rc = DS_ERR_NOMEM;
    return rc;
}

static int tojson(ds_chat *c, chat_impl *im, long v, int depth) {
    const ds_jtape *t = &im->tape;
    const ds_jnode *nd = &t->n[v];
    (void)depth; /* the tape's nesting is bounded by the scanner (JS_MAX_DEPTH) */
    switch (nd->type) {
    case DS_JSCAN_T_STRING: return put_json_string(c, t->text + nd->off, nd->len);
    case DS_JSCAN_T_NULL: return buf_append(c, "null", 4);
    case DS_JSCAN_T_BOOLEAN: {
        if (node_positions(im)) return DS_ERR_NOMEM;
        size_t len;
        const uint8_t *s = scalar_bytes(im, v, &len);
        return s[0] == 't' ? buf_append(c, "true", 4) : buf_append(c, "false", 5);
    }
    case DS_JSCAN_T_NUMBER: return put_number(c, im, v);
    case DS_JSCAN_T_ARRAY: {
        if (buf_append(c, "[", 1)) return DS_ERR_NOMEM;
        for (size_t k = (size_t)v + 1; k < nd->end; k = t->n[k].end) {
            if (k > (size_t)v + 1 && buf_append(c, ", ", 2)) return DS_ERR_NOMEM;
            int rc = tojson(c, im, (long)k, depth + 1);
            if (rc) return rc;
        }
        return buf_append(c, "]", 1);
    }
    default: return tojson_object(c, im, v, depth);
    }
}

/* The message's reasoning: the first of reasoning_content, thinking and
 * reasoning that is present and not null (transformers' apply_chat_template
 * copies that one into reasoning_content before rendering). */
static int add_reasoning(ds_chat *c, chat_impl *im, size_t m) {
    static const char *const keys[] = {"reasoning_content", "thinking", "reasoning"};
    const ds_jtape *t = &im->tape;
    ds_chat_msg *msg = &c->msgs[c->n - 1];
    for (size_t k = 0; k < N_OF(keys); k++) {
        long v = ds_jtape_get(t, m, keys[k]);
        if (v < 0 || t->n[v].type == DS_JSCAN_T_NULL) continue;
        if (t->n[v].type != DS_JSCAN_T_STRING) {
            int truthy = tape_truthy(im, v);
            if (truthy < 0) return truthy;
            msg->reason = truthy ? DS_REASON_OTHER_TRUE : DS_REASON_OTHER_FALSE;
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

static size_t utf8_chars(const uint8_t *s, size_t n) { /* Python's len() of a str */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (s[i] & 0xc0) != 0x80;
    return k;
}

/* name / arguments of object OBJ (not an object: both absent) as the
 * templates print them: a name through str() ({{ name }}), arguments as the
 * string itself or through tojson. */
static int callview(ds_chat *c, chat_impl *im, long obj, ds_chat_callview *cv) {
    const ds_jtape *t = &im->tape;
    memset(cv, 0, sizeof *cv);
    if (!tape_is(t, obj, DS_JSCAN_T_OBJECT)) return DS_OK;
    long nm = ds_jtape_get(t, (size_t)obj, "name"), ar = ds_jtape_get(t, (size_t)obj, "arguments");
    int rc = DS_OK;
    if (nm >= 0) {
        size_t off = c->buf_len;
        int ty = t->n[nm].type;
        cv->name_kind = ty == DS_JSCAN_T_STRING                             ? DS_TC_STRING
                        : ty == DS_JSCAN_T_ARRAY || ty == DS_JSCAN_T_OBJECT ? DS_TC_BAD
                                                                            : DS_TC_JSON;
        if (ty == DS_JSCAN_T_STRING) rc = tape_append(c, t, nm);
        else if (ty == DS_JSCAN_T_NUMBER) rc = put_number(c, im, nm);
        else if (ty == DS_JSCAN_T_NULL) rc = buf_append(c, "None", 4);
        else if (ty == DS_JSCAN_T_BOOLEAN) {
            int truthy = tape_truthy(im, nm);
            rc = truthy < 0 ? truthy : truthy ? buf_append(c, "True", 4) : buf_append(c, "False", 5);
        }
        cv->name_off = off;
        cv->name_len = c->buf_len - off;
    }
    if (rc == DS_OK && ar >= 0) {
        size_t off = c->buf_len;
        cv->args_kind = t->n[ar].type == DS_JSCAN_T_STRING ? DS_TC_STRING : DS_TC_JSON;
        rc = cv->args_kind == DS_TC_STRING ? tape_append(c, t, ar) : tojson(c, im, ar, 0);
        cv->args_off = off;
        cv->args_len = c->buf_len - off;
    }
    return rc;
}

/* The message's tool_calls (a non-empty list: each element's views). */
static int add_calls(ds_chat *c, chat_impl *im, long list) {
    const ds_jtape *t = &im->tape;
    for (size_t e = (size_t)list + 1; e < t->n[list].end; e = t->n[e].end) {
        if (c->n_calls == c->calls_cap) {
            size_t nc = c->calls_cap ? 2 * c->calls_cap : 8;
            ds_chat_call *p = realloc(c->calls, nc * sizeof *p);
            if (!p) return DS_ERR_NOMEM;
            c->calls = p;
            c->calls_cap = nc;
        }
        ds_chat_call call = {0};
        int rc = callview(c, im, (long)e, &call.call);
        long fn = tape_is(t, (long)e, DS_JSCAN_T_OBJECT) ? ds_jtape_get(t, e, "function") : -1;
        if (rc == DS_OK && fn >= 0) { /* Mistral: function | tojson */
            call.fn_json_kind = DS_TC_JSON;
            call.fn_json_off = c->buf_len;
            rc = tojson(c, im, fn, 0);
            call.fn_json_len = c->buf_len - call.fn_json_off;
        }
        long id = tape_is(t, (long)e, DS_JSCAN_T_OBJECT) ? ds_jtape_get(t, e, "id") : -1;
        if (rc == DS_OK && id >= 0) {
            call.id_kind = tape_is(t, id, DS_JSCAN_T_STRING) ? DS_TC_STRING : DS_TC_JSON;
            if (call.id_kind == DS_TC_STRING) {
                call.id_off = c->buf_len;
                rc = tape_append(c, t, id);
                call.id_len = c->buf_len - call.id_off;
                call.id_chars = utf8_chars(c->buf + call.id_off, call.id_len);
            }
        }
        int fn_truthy = rc == DS_OK && fn >= 0 ? tape_truthy(im, fn) : 0;
        if (fn_truthy < 0) rc = fn_truthy;
        else if (rc == DS_OK && fn >= 0) {
            if (tape_is(t, fn, DS_JSCAN_T_OBJECT)) {
                call.fn_state = fn_truthy ? DS_FN_OBJECT : DS_FN_EMPTY;
                rc = callview(c, im, fn, &call.fn);
            } else {
                call.fn_state = fn_truthy ? DS_FN_TRUTHY : DS_FN_FALSY;
            }
        }
        if (rc) return rc;
        c->calls[c->n_calls++] = call;
        c->msgs[c->n - 1].n_calls++;
    }
    return DS_OK;
}

/* The record's tools: each element's tojson. */
static int add_tools(ds_chat *c, chat_impl *im, long tools) {
    const ds_jtape *t = &im->tape;
    c->tools_state = 0;
    c->tools_defined = tools >= 0 && t->n[tools].type != DS_JSCAN_T_NULL;
    c->tools_json_off = c->tools_json_len = 0;
    if (c->tools_defined && !tape_is(t, tools, DS_JSCAN_T_ARRAY)) {
        /* Mistral v7 writes the whole value through tojson (a list: its elements' below, joined) */
        c->tools_json_off = c->buf_len;
        if (tojson(c, im, tools, 0)) return DS_ERR_NOMEM;
        c->tools_json_len = c->buf_len - c->tools_json_off;
    }
    int tools_truthy = tools >= 0 ? tape_truthy(im, tools) : 0;
    if (tools_truthy < 0) return tools_truthy;
    if (tools >= 0 && !tools_truthy &&
        (t->n[tools].type == DS_JSCAN_T_NUMBER || t->n[tools].type == DS_JSCAN_T_BOOLEAN)) {
        c->tools_state = 3; /* 0 / false: no tools to `if tools`, not iterable to `for tool in tools` */
        return DS_OK;
    }
    if (tools < 0 || !tools_truthy) return DS_OK;
    if (!tape_is(t, tools, DS_JSCAN_T_ARRAY)) {
        c->tools_state = 2;
        return DS_OK;
    }
    c->tools_state = 1;
    for (size_t e = (size_t)tools + 1; e < t->n[tools].end; e = t->n[e].end) {
        if (c->n_tools == c->tools_cap) {
            size_t nc = c->tools_cap ? 2 * c->tools_cap : 8;
            ds_chat_tool *p = realloc(c->tools, nc * sizeof *p);
            if (!p) return DS_ERR_NOMEM;
            c->tools = p;
            c->tools_cap = nc;
        }
        ds_chat_tool tool = {.off = c->buf_len};
        int rc = tojson(c, im, (long)e, 0);
        if (rc) return rc;
        tool.len = c->buf_len - tool.off;
        long fn = tape_is(t, (long)e, DS_JSCAN_T_OBJECT) ? ds_jtape_get(t, e, "function") : -1;
        if (tape_is(t, fn, DS_JSCAN_T_OBJECT)) { /* Mistral's items: '"key": "str"' raw, else '"key": ' + tojson */
            uint32_t *kv;
            size_t n;
            if (dict_entries(t, fn, &kv, &n)) return DS_ERR_NOMEM;
            tool.items_ok = 1;
            tool.items_off = c->buf_len;
            int first = 1;
            for (size_t i = 0; i < n && rc == DS_OK; i++) {
                const ds_jnode *k = &t->n[kv[2 * i]], *v = &t->n[kv[2 * i + 1]];
                if (k->len == 6 && !memcmp(t->text + k->off, "return", 6)) continue;
                if (!first && buf_append(c, ", ", 2)) rc = DS_ERR_NOMEM;
                first = 0;
                if (rc == DS_OK && (buf_append(c, "\"", 1) || buf_append(c, t->text + k->off, k->len)))
                    rc = DS_ERR_NOMEM;
                if (rc == DS_OK && v->type == DS_JSCAN_T_STRING) {
                    if (buf_append(c, "\": \"", 4) || buf_append(c, t->text + v->off, v->len) || buf_append(c, "\"", 1))
                        rc = DS_ERR_NOMEM;
                } else if (rc == DS_OK) {
                    rc = buf_append(c, "\": ", 3) ? DS_ERR_NOMEM : tojson(c, im, (long)kv[2 * i + 1], 0);
                }
            }
            free(kv);
            if (rc) return rc;
            tool.items_len = c->buf_len - tool.items_off;
        }
        c->tools[c->n_tools++] = tool;
    }
    return DS_OK;
}

static int add_messages(ds_chat *c, chat_impl *im, long list, int completion, const char *what, char *why,
                        size_t whylen) {
    const ds_jtape *t = &im->tape;
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
        /* tool_calls: a non-empty list, another true value, or nothing */
        long tc = ds_jtape_get(t, m, "tool_calls");
        int calls_defined = tc >= 0 && t->n[tc].type != DS_JSCAN_T_NULL;
        if (r != DS_ROLE_ASSISTANT) tc = -1;
        int tc_truthy = tc < 0 ? 0 : tape_truthy(im, tc);
        if (tc_truthy < 0) return tc_truthy;
        uint8_t calls = !tc_truthy ? 0 : tape_is(t, tc, DS_JSCAN_T_ARRAY) ? 1 : 2;
        size_t off = c->buf_len;
        long content = ds_jtape_get(t, m, "content");
        int null_content =
            (content < 0 || t->n[content].type == DS_JSCAN_T_NULL) && r == DS_ROLE_ASSISTANT && calls_defined;
        if (!null_content) {
            int rc = add_content(c, t, content, c->n, why, whylen);
            if (rc) return rc;
        }
        if (msg_push(c, (ds_role)r, off, completion) || add_reasoning(c, im, m)) return DS_ERR_NOMEM;
        ds_chat_msg *msg = &c->msgs[c->n - 1];
        msg->content_null = null_content;
        msg->calls_state = calls;
        msg->calls_defined = (uint8_t)calls_defined;
        msg->call0 = c->n_calls;
        msg->node = (uint32_t)m;
        msg->parts = tape_is(t, content, DS_JSCAN_T_ARRAY);
        long id = ds_jtape_get(t, m, "tool_call_id");
        if (id >= 0) {
            msg->tcid_kind = tape_is(t, id, DS_JSCAN_T_STRING) ? DS_TC_STRING : DS_TC_JSON;
            if (msg->tcid_kind == DS_TC_STRING) {
                msg->tcid_off = c->buf_len;
                if (tape_append(c, t, id)) return DS_ERR_NOMEM;
                msg = &c->msgs[c->n - 1];
                msg->tcid_len = c->buf_len - msg->tcid_off;
                msg->tcid_chars = utf8_chars(c->buf + msg->tcid_off, msg->tcid_len);
            }
        }
        if (calls == 1 && add_calls(c, im, tc)) return DS_ERR_NOMEM;
    }
    return DS_OK;
}

/* Python's == of two JSON values as json.loads makes them. */
static int num_value(chat_impl *im, long v, double *d, const uint8_t **s, size_t *len, int *is_int) {
    const ds_jnode *nd = &im->tape.n[v];
    if (node_positions(im)) return -1;
    *s = scalar_bytes(im, v, len);
    if (nd->type == DS_JSCAN_T_BOOLEAN) {
        *d = (*s)[0] == 't';
        *is_int = 1;
        *s = (const uint8_t *)((*s)[0] == 't' ? "1" : "0");
        *len = 1;
        return 0;
    }
    char buf[400];
    size_t n = *len < sizeof buf - 1 ? *len : sizeof buf - 1;
    memcpy(buf, *s, n);
    buf[n] = 0;
    *d = strtod(buf, NULL);
    *is_int = !memchr(*s, '.', *len) && !memchr(*s, 'e', *len) && !memchr(*s, 'E', *len);
    if (*is_int && *len == 2 && !memcmp(*s, "-0", 2)) *s = (const uint8_t *)"0", *len = 1;
    return 0;
}
static int tape_py_equal(chat_impl *im, long a, long b) {
    const ds_jtape *t = &im->tape;
    int ta = t->n[a].type, tb = t->n[b].type;
    int na = ta == DS_JSCAN_T_NUMBER || ta == DS_JSCAN_T_BOOLEAN,
        nb = tb == DS_JSCAN_T_NUMBER || tb == DS_JSCAN_T_BOOLEAN;
    if (na && nb) { /* True == 1 == 1.0; two integers exactly, by their digits */
        double x, y;
        const uint8_t *sa, *sb;
        size_t la, lb;
        int ia, ib;
        if (num_value(im, a, &x, &sa, &la, &ia) || num_value(im, b, &y, &sb, &lb, &ib)) return 0;
        if (ia && ib) return la == lb && !memcmp(sa, sb, la);
        return x == y;
    }
    if (ta != tb) return 0;
    if (ta == DS_JSCAN_T_NULL) return 1;
    if (ta == DS_JSCAN_T_STRING)
        return t->n[a].len == t->n[b].len && !memcmp(t->text + t->n[a].off, t->text + t->n[b].off, t->n[a].len);
    if (ta == DS_JSCAN_T_ARRAY) {
        size_t i = (size_t)a + 1, j = (size_t)b + 1;
        for (; i < t->n[a].end && j < t->n[b].end; i = t->n[i].end, j = t->n[j].end)
            if (!tape_py_equal(im, (long)i, (long)j)) return 0;
        return i >= t->n[a].end && j >= t->n[b].end;
    }
    uint32_t *ka = NULL, *kb = NULL;
    size_t n1 = 0, n2 = 0;
    int eq = !dict_entries(t, a, &ka, &n1) && !dict_entries(t, b, &kb, &n2) && n1 == n2;
    if (eq) { /* both entry lists by key (keys are unique now), then side by side: n log n */
        tl_sort_tape = t;
        qsort(ka, n1, 2 * sizeof *ka, key_order);
        qsort(kb, n2, 2 * sizeof *kb, key_order);
    }
    for (size_t i = 0; eq && i < n1; i++)
        eq = !key_cmp(t, ka[2 * i], kb[2 * i]) && tape_py_equal(im, (long)ka[2 * i + 1], (long)kb[2 * i + 1]);
    free(ka);
    free(kb);
    return eq;
}
int ds_chat_msg_equal(const ds_chat *c, size_t i, size_t j) {
    if (i == j) return 1;
    chat_impl *im = c->impl;
    if (!im || i >= c->n || j >= c->n) return 0;
    return tape_py_equal(im, (long)c->msgs[i].node, (long)c->msgs[j].node);
}

void ds_chat_free(ds_chat *c) {
    if (!c) return;
    free(c->msgs);
    free(c->buf);
    free(c->calls);
    free(c->tools);
    chat_impl *im = c->impl;
    if (im) {
        ds_jtape_free(&im->tape);
        free(im->pos);
        free(im);
    }
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
    c->n_calls = c->n_tools = 0;
    c->tools_state = c->tools_defined = 0;
    c->tools_json_len = 0;
    if (why && whylen) why[0] = 0;
    if (len > DS_CHAT_MAX_RECORD) {
        if (why && whylen)
            snprintf(why, whylen, "a record of %zu bytes, over the %zu MiB bound of a chat record", len,
                     DS_CHAT_MAX_RECORD >> 20);
        return DS_CHAT_TOO_LARGE;
    }
    if (!c->impl && !(c->impl = calloc(1, sizeof(chat_impl)))) return DS_ERR_NOMEM;
    chat_impl *im = c->impl;
    ds_jtape *t = &im->tape;
    im->line = line;
    im->n = len;
    im->pos_ok = 0;
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
        if (add_tools(c, im, ds_jtape_get(t, 0, "tools"))) return DS_ERR_NOMEM;
        return add_messages(c, im, msgs, 0, mf, why, whylen);
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
        if (add_tools(c, im, ds_jtape_get(t, 0, "tools"))) return DS_ERR_NOMEM;
        if ((rc = add_messages(c, im, prompt, 0, "prompt", why, whylen))) return rc;
        return add_messages(c, im, compl, 1, "completion", why, whylen);
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
