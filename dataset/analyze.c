/* analyze.c - one streaming pass for lint and hist: the reader runs on the
 * calling thread and fills batches; worker threads check/count documents;
 * results are merged in input order (deterministic for any thread count). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ds.h"
#include "mks_common.h"
#include "ds_internal.h"
#include "pipeline_internal.h"
#include "tk.h"

/* ------------------------------------------------------------ rule table */

static const ds_rule_info k_rules[DS_RULE_COUNT] = {
    /* one id for every damaged container (it predates gzip and Parquet input; manifests' reject_reasons use it) */
    [DS_RULE_ZSTD] = {"zstd-corrupt", DS_SEV_ERROR,
                      "damaged input file (truncated or corrupt zstd / gzip stream, or unreadable Parquet / Arrow IPC "
                      "data); the rest of the file is lost",
                      "re-download or re-write the file (zstd -t / gzip -t FILE shows stream damage; for Parquet / "
                      "Arrow the detail quotes Arrow's message)"},
    [DS_RULE_JSON] = {"json-malformed", DS_SEV_ERROR, "line is not valid JSON",
                      "fix the writer; look for unescaped quotes/newlines or a cut line"},
    [DS_RULE_FIELD_MISSING] = {"field-missing", DS_SEV_ERROR, "the text field is absent (or the line is not an object)",
                               "pass --field with the right (dotted) name, or fix the records"},
    [DS_RULE_FIELD_TYPE] = {"field-not-string", DS_SEV_ERROR,
                            "the text field is not a string (null, number, object...)",
                            "point --field at the string, or fix the records"},
    [DS_RULE_UTF8] = {"utf8-invalid", DS_SEV_ERROR, "invalid UTF-8 bytes",
                      "re-decode the source with its real encoding (iconv -f latin1 ...)"},
    [DS_RULE_NUL] = {"nul-byte", DS_SEV_ERROR, "NUL byte (or \\u0000) inside a document",
                     "binary data leaked in; drop the document or strip NULs"},
    [DS_RULE_RECORD_TOO_LARGE] = {"record-too-large", DS_SEV_ERROR,
                                  "record over the reader's byte limit; it is skipped (or cut)",
                                  "a missed separator? use --doc-sep line|blank-line or split the file"},
    [DS_RULE_TOKENIZER_LIMIT] = {"tokenizer-limit", DS_SEV_ERROR,
                                 "the tokenizer refuses the document: its regex work budget or a normalizer's "
                                 "output bound is exceeded (build rejects it)",
                                 "inspect the document and the tokenizer.json (docs/tokenizer.md, Hostile files)"},
    [DS_RULE_CONTROL] = {"control-char", DS_SEV_WARNING, "C0/C1 control characters other than tab, newline, CR, FF",
                         "strip them, or check for mis-decoded text (cp1252 read as latin1)"},
    [DS_RULE_EMPTY] = {"empty-doc", DS_SEV_WARNING, "empty or whitespace-only document", "drop such records"},
    [DS_RULE_TOO_LONG] = {"doc-too-long", DS_SEV_WARNING,
                          "document longer than L tokens (or than the byte limit without a tokenizer)",
                          "pick an over-long policy (see mkshards hist) or split the documents"},
    [DS_RULE_OUTLIER] = {"outlier-doc", DS_SEV_WARNING,
                         "document many times longer than the median: is a whole file one document?",
                         "check the separator (--doc-sep) / the JSONL writer"},
    [DS_RULE_LONG_LINE] = {"long-line", DS_SEV_WARNING, "a single line of megabytes",
                           "a missed separator or a minified/serialized blob; split or drop it"},
    [DS_RULE_LOW_BPT] = {"low-bytes-per-token", DS_SEV_WARNING,
                         "very few bytes per token: binary-ish or garbage text that explodes into tokens",
                         "inspect and drop the document"},
    [DS_RULE_BLOB] = {"blob", DS_SEV_WARNING, "base64 or hex-dump data inside a document",
                      "strip embedded data (data: URIs, dumps) before training"},
    [DS_RULE_LONG_RUN] = {"long-run", DS_SEV_WARNING,
                          "a run of non-whitespace so long that BPE cost explodes (minified data, blobs)",
                          "drop or split the run"},
    [DS_RULE_DUPLICATE] = {"duplicate", DS_SEV_WARNING, "exact duplicate of an earlier document (64-bit hash)",
                           "deduplicate the corpus"},
    [DS_RULE_SPECIAL] = {"special-token", DS_SEV_WARNING, "special-token text such as <|endoftext|> inside a document",
                         "it is encoded as plain text by encode; remove it if it was meant as a separator"},
    [DS_RULE_SURROGATE] = {"json-lone-surrogate", DS_SEV_WARNING,
                           "unpaired \\uD800-\\uDFFF escape in JSON (replaced by U+FFFD)",
                           "fix the writer (usually text cut inside a UTF-16 pair)"},
    [DS_RULE_BOM] = {"bom", DS_SEV_INFO, "UTF-8 byte-order mark at the start (stripped by the reader)", "none needed"},
    [DS_RULE_MIXED_NL] = {"mixed-newlines", DS_SEV_INFO, "both CRLF and LF line endings in one document",
                          "normalise line endings (dos2unix)"},
    [DS_RULE_CHAT_ROLE] = {"chat-unknown-role", DS_SEV_ERROR,
                           "a message's role is not system, user, assistant or tool (build rejects the record)",
                           "map the role to one of the four, or drop the message"},
    [DS_RULE_CHAT_CONTENT] = {"chat-bad-content", DS_SEV_ERROR,
                              "a message's content is missing, not a string nor a list of text parts, or the "
                              "messages are not a list of objects (build rejects the record)",
                              "write content as a string (or [{\"type\":\"text\",\"text\":...}])"},
    [DS_RULE_CHAT_TEMPLATE] = {"chat-template-refused", DS_SEV_ERROR,
                               "the chat template refuses the conversation (its raise_exception; build rejects it)",
                               "fix the role order the template's message names, or pick another template"},
    [DS_RULE_CHAT_ASSISTANT_TWICE] = {"chat-assistant-twice", DS_SEV_ERROR,
                                      "two assistant messages in a row, which the template forbids (build "
                                      "rejects the record)",
                                      "merge the two messages, or put the user turn between them back"},
    [DS_RULE_CHAT_EMPTY] = {"chat-empty-content", DS_SEV_WARNING, "a message with empty or whitespace-only content",
                            "drop the message or the record"},
    [DS_RULE_CHAT_NO_ASSISTANT] = {"chat-no-assistant", DS_SEV_WARNING,
                                   "no assistant message: nothing to train on (build drops it: no-loss-tokens)",
                                   "drop the record, or check --messages-field / the role names"},
    [DS_RULE_CHAT_SYSTEM_NOT_FIRST] = {"chat-system-not-first", DS_SEV_WARNING,
                                       "a system message after the first message (templates render it as a "
                                       "turn, or refuse it)",
                                       "move the system message first"},
    [DS_RULE_CHAT_TOO_LONG] = {"chat-over-seq-len", DS_SEV_WARNING,
                               "conversation longer than L tokens (the note says what --over-long drop-turns "
                               "would drop)",
                               "pick --over-long drop-turns, truncate or drop (see mkshards hist)"},
    [DS_RULE_CHAT_SPECIAL] = {"chat-special-text", DS_SEV_WARNING,
                              "a special token's text inside a message (encoded as plain text, not as the token)",
                              "remove it if it was meant as markup; the template places the real tokens"},
    [DS_RULE_CHAT_PARTS] = {"chat-non-text-part", DS_SEV_WARNING,
                            "list-of-parts content with non-text parts (images, audio): left out",
                            "text-only training leaves them out; drop such records if they need them"},
};

const ds_rule_info *ds_rule_get(int rule) {
    if (rule < 0 || rule >= DS_RULE_COUNT) return NULL;
    return &k_rules[rule];
}
int ds_rule_find(const char *id) {
    for (int i = 0; i < DS_RULE_COUNT; i++)
        if (id && strcmp(k_rules[i].id, id) == 0) return i;
    return -1;
}
const char *ds_severity_name(ds_severity s) {
    return s == DS_SEV_ERROR ? "error" : s == DS_SEV_WARNING ? "warning" : "info";
}

void ds_analyze_opts_init(ds_analyze_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_examples = 5;
    o->lint = 1;
}

/* ------------------------------------------------------ per-doc checks */

typedef struct {
    ds_rec_status status; /* effective record facts (after deferred JSON parsing) */
    uint32_t flags;
    size_t len;
    int has_text;
    char detail[160];
    char special[72]; /* first special-token text seen */
    uint32_t hits;    /* bit per rule */
    uint64_t pos[DS_RULE_COUNT];
    uint64_t val[DS_RULE_COUNT];
    uint8_t note[DS_RULE_COUNT]; /* small code per rule (e.g. blob kind) */
    uint64_t tokens;
    int tok_rc;
    uint64_t hash;
    uint64_t nonascii; /* bytes >= 0x80 */
    /* chat formats: the record-level rule (-1: none) and the conversation's facts */
    int chat_rule;
    char chat_note[120];
    uint64_t loss;        /* targets of the whole conversation */
    uint64_t turns;       /* over L: turns drop-turns would drop */
    int turns_fit;        /* over L: 1 when drop-turns fits it */
    int chat_refused;     /* the template refuses it: no count (not in hist) */
    char special_tok[72]; /* chat-special-text: the special token's text (escaped) */
} doc_res;

#define HIT(res, rule, p, v)                                                                                           \
    do {                                                                                                               \
        if (!((res)->hits & (1u << (rule)))) {                                                                         \
            (res)->hits |= 1u << (rule);                                                                               \
            (res)->pos[rule] = (p);                                                                                    \
            (res)->val[rule] = (v);                                                                                    \
        }                                                                                                              \
    } while (0)

typedef struct {
    uint64_t long_line, long_run;
} scan_cfg;

static int is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Character classes for runs. */
enum { CL_UPPER = 1, CL_LOWER = 2, CL_DIGIT = 4, CL_B64 = 8, CL_HEX = 16 };
static uint8_t k_cls[256];
static uint8_t k_ord[256]; /* printable ASCII, not space, not '<': the fast path */
static void init_cls(void) {
    for (int c = 0; c < 256; c++) {
        k_ord[c] = c > 0x20 && c < 0x7F && c != '<';
        uint8_t m = 0;
        if (c >= 'A' && c <= 'Z') m |= CL_UPPER | CL_B64;
        if (c >= 'a' && c <= 'z') m |= CL_LOWER | CL_B64;
        if (c >= '0' && c <= '9') m |= CL_DIGIT | CL_B64 | CL_HEX;
        if ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) m |= CL_HEX;
        if (c == '+' || c == '/' || c == '=' || c == '-' || c == '_') m |= CL_B64;
        k_cls[c] = m;
    }
}

/* Blob note codes */
enum { BLOB_BASE64 = 1, BLOB_HEX = 2, BLOB_HEXDUMP = 3 };

/* One pass over the bytes: every in-document byte rule. Long (~130 lines) on
 * purpose: the rules share one walk over the document, so a function per
 * rule would read each document once per rule, and this loop is lint's
 * throughput. */
static void scan_doc(const uint8_t *p, size_t n, const scan_cfg *cfg, doc_res *res) {
    int nonws = 0;
    uint64_t line_start = 0, crlf = 0, lf = 0;
    uint64_t run_start = 0, run_len = 0;
    uint8_t run_and = 0xFF, run_or = 0;
    uint64_t b64_bytes = 0, hex_bytes = 0, hexword_bytes = 0, nonws_bytes = 0, longest_blob = 0, blob_pos = 0;
    int blob_kind = 0;
    uint64_t ctrl_count = 0, nul_count = 0, special_count = 0;
    size_t i = 0;
    while (i <= n) {
        if (i < n && k_ord[p[i]]) { /* fast path: a stretch of ordinary ASCII */
            if (run_len == 0) run_start = i;
            size_t j = i;
            uint8_t ra = run_and, ro = run_or;
            while (j < n && k_ord[p[j]]) {
                ra &= k_cls[p[j]];
                ro |= k_cls[p[j]];
                j++;
            }
            run_and = ra;
            run_or = ro;
            run_len += j - i;
            nonws_bytes += j - i;
            nonws = 1;
            i = j;
            continue;
        }
        uint8_t c = i < n ? p[i] : '\n'; /* sentinel newline ends line/run */
        int at_end = i == n;
        if (!at_end && c >= 0x80) {
            size_t k = mc_utf8_seq(p + i, n - i);
            res->nonascii += k ? k : 1;
            if (!k) {
                HIT(res, DS_RULE_UTF8, i, p[i]);
                k = 1;
            } else if (k == 2 && c == 0xC2 && p[i + 1] < 0xA0) {
                /* C1 control U+0080..U+009F */
                ctrl_count++;
                HIT(res, DS_RULE_CONTROL, i, 0x80 + (p[i + 1] & 0x1F));
            }
            nonws = 1;
            if (run_len == 0) run_start = i;
            run_len += k;
            run_and = 0; /* non-ASCII: not base64/hex */
            nonws_bytes += k;
            i += k;
            continue;
        }
        if (!at_end) {
            if (c == 0) {
                nul_count++;
                HIT(res, DS_RULE_NUL, i, 0);
            } else if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || c == 0x7F) {
                ctrl_count++;
                HIT(res, DS_RULE_CONTROL, i, c);
            }
            if (c == '<' && i + 3 < n && p[i + 1] == '|') {
                size_t j = i + 2, lim = i + 66 < n ? i + 66 : n;
                while (j < lim && (k_cls[p[j]] & (CL_UPPER | CL_LOWER | CL_DIGIT) || p[j] == '_')) j++;
                if (j > i + 2 && j + 1 < n && p[j] == '|' && p[j + 1] == '>') {
                    if (!special_count)
                        snprintf(res->special, sizeof res->special, "%.*s", (int)(j + 2 - i), (const char *)p + i);
                    special_count++;
                    HIT(res, DS_RULE_SPECIAL, i, j + 2 - i);
                }
            }
        }
        if (at_end || is_ws(c)) {
            if (run_len) {
                if (run_len >= cfg->long_run) HIT(res, DS_RULE_LONG_RUN, run_start, run_len);
                uint8_t need = CL_UPPER | CL_LOWER | CL_DIGIT;
                int kind = 0;
                if ((run_and & CL_B64) && (run_or & need) == need && run_len >= 64) {
                    b64_bytes += run_len;
                    kind = BLOB_BASE64;
                } else if ((run_and & CL_HEX) && (run_or & CL_DIGIT) && run_len >= 32) {
                    hex_bytes += run_len;
                    kind = BLOB_HEX;
                } else if (run_len >= 2 && run_len <= 10) {
                    /* hex-dump words: 2..8 hex digits, or 0x-prefixed */
                    const uint8_t *w = p + run_start;
                    size_t wl = run_len;
                    if (wl > 0 && w[wl - 1] == ',') wl--;
                    if (wl > 2 && w[0] == '0' && (w[1] == 'x' || w[1] == 'X')) w += 2, wl -= 2;
                    int ok = wl >= 2 && wl <= 8;
                    for (size_t q = 0; ok && q < wl; q++) ok = (k_cls[w[q]] & CL_HEX) != 0;
                    if (ok) hexword_bytes += run_len;
                }
                if (kind && run_len > longest_blob) {
                    longest_blob = run_len;
                    blob_pos = run_start;
                    blob_kind = kind;
                }
                run_len = 0;
                run_and = 0xFF;
                run_or = 0;
            }
            if (c == '\n') {
                uint64_t ll = i - line_start;
                if (ll >= cfg->long_line) HIT(res, DS_RULE_LONG_LINE, line_start, ll);
                if (!at_end) {
                    if (i > 0 && p[i - 1] == '\r') crlf++;
                    else lf++;
                }
                line_start = i + 1;
            }
        } else {
            nonws = 1;
            if (run_len == 0) run_start = i;
            run_len++;
            nonws_bytes++;
            run_and &= k_cls[c];
            run_or |= k_cls[c];
        }
        i++;
    }
    if (!nonws) HIT(res, DS_RULE_EMPTY, 0, n);
    if (crlf && lf) HIT(res, DS_RULE_MIXED_NL, 0, crlf < lf ? crlf : lf);
    if (res->hits & (1u << DS_RULE_CONTROL)) res->val[DS_RULE_CONTROL] |= ctrl_count << 8;
    if (res->hits & (1u << DS_RULE_NUL)) res->val[DS_RULE_NUL] = nul_count;
    if (res->hits & (1u << DS_RULE_SPECIAL)) res->val[DS_RULE_SPECIAL] = special_count;
    uint64_t blob = b64_bytes + hex_bytes;
    if (nonws_bytes >= 256 && hexword_bytes * 2 >= nonws_bytes) {
        HIT(res, DS_RULE_BLOB, 0, hexword_bytes);
        res->note[DS_RULE_BLOB] = BLOB_HEXDUMP;
    } else if (longest_blob >= 4096 || (blob >= 1024 && blob * 2 >= nonws_bytes)) {
        HIT(res, DS_RULE_BLOB, blob_pos, blob);
        res->note[DS_RULE_BLOB] = (uint8_t)blob_kind;
    }
}

/* ---------------------------------------------------------- batches */

/* A batch is the pipeline's (pipeline.c: a reader thread fills it while the
 * workers scan the previous one); doc_res[i] holds the workers' findings on
 * record i. */
typedef ds_batch_rec item;

/* Chat formats: one parsed record, rendering and ids per worker thread. */
typedef struct {
    ds_chat c;
    ds_chat_rendered r;
    ds_chat_ids v;
} chat_worker;

typedef struct analyzer analyzer;
struct analyzer {
    chat_worker *cw; /* chat formats: one per worker thread */
    ds_chat_render_opts cro;
    char bos_tok[256], eos_tok[256];
    const ds_analyze_opts *o;
    const ds_reader_opts *ro;
    atomic_int nomem;
    scan_cfg cfg;
    const tk_tokenizer *tok;
    ds_json_ctx **jctx; /* one per worker thread (NULL: process_item reports no memory) */
    int nth;
    const ds_batch *b; /* the batch the workers scan */
    doc_res *res;
    atomic_int tok_err;
};

/* The first special token of the tokenizer whose text occurs in buf (NULL:
 * none); *at its offset. One pass over the bytes: a special is only looked
 * for where a byte that starts one occurs. */
static const char *find_special(const tk_tokenizer *tok, const uint8_t *buf, size_t n, size_t *at) {
    size_t ns = tk_n_specials(tok);
    const tk_special *sp = tk_specials(tok);
    uint8_t first[256] = {0};
    for (size_t k = 0; k < ns; k++)
        if (sp[k].text[0]) first[(uint8_t)sp[k].text[0]] = 1;
    for (size_t i = 0; i < n; i++) {
        if (!first[buf[i]]) continue;
        for (size_t k = 0; k < ns; k++) {
            size_t l = strlen(sp[k].text);
            if (l && l <= n - i && !memcmp(buf + i, sp[k].text, l)) {
                *at = i;
                return sp[k].text;
            }
        }
    }
    return NULL;
}

static int is_blank(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_ws(p[i])) return 0;
    return 1;
}

/* Set the record-level chat rule (the first one found wins). */
static void chat_hit(doc_res *res, int rule, const char *fmt, const char *arg) {
    if (res->chat_rule >= 0) return;
    res->chat_rule = rule;
    char esc[80];
    mc_escape_text(arg ? arg : "", arg ? strlen(arg) : 0, esc, sizeof esc);
    snprintf(res->chat_note, sizeof res->chat_note, fmt, esc);
}

/* A chat / prompt-completion record (the raw JSONL line): parse it, check
 * its messages, render and count it. 1 with *t / *len the contents (for the
 * byte rules), 0 when the record cannot be parsed (res says why). */
static int chat_item(analyzer *a, int thread, const uint8_t *line, size_t n, doc_res *res, const uint8_t **t,
                     size_t *len) {
    const ds_analyze_opts *o = a->o;
    chat_worker *w = &a->cw[thread];
    char why[160];
    ds_chat_parse_opts po = {.format = o->format, .messages_field = o->messages_field, .text_field = a->ro->field};
    int rc = ds_chat_parse(line, n, &po, &w->c, why, sizeof why);
    if (rc == DS_ERR_NOMEM) {
        atomic_store(&a->nomem, 1);
        res->has_text = 0;
        return 0;
    }
    if (rc != DS_CHAT_OK) {
        res->has_text = 0;
        switch (rc) {
        case DS_CHAT_BAD_JSON: res->status = DS_REC_BAD_JSON; break;
        case DS_CHAT_TOO_LARGE: res->status = DS_REC_OVERLONG; break;
        case DS_CHAT_NO_MESSAGES: res->status = DS_REC_MISSING_FIELD; break;
        case DS_CHAT_UNKNOWN_ROLE: chat_hit(res, DS_RULE_CHAT_ROLE, "%s", why); break;
        default: chat_hit(res, DS_RULE_CHAT_CONTENT, "%s", why); break;
        }
        snprintf(res->detail, sizeof res->detail, "%s", why);
        if (res->status == DS_REC_BAD_JSON) { /* as the text path: an invalid byte is why */
            size_t bad = mc_utf8_valid_prefix(line, n);
            if (bad < n) HIT(res, DS_RULE_UTF8, bad, line[bad]);
        }
        return 0;
    }
    const ds_chat *c = &w->c;
    *t = c->buf;
    *len = c->buf_len;
    res->len = c->buf_len;
    if (c->format != DS_FMT_TEXT) {
        /* the warnings: every rule that applies (val: the message index, or a count) */
        int assistant = 0;
        for (size_t i = 0; i < c->n; i++) {
            const ds_chat_msg *m = &c->msgs[i];
            assistant |= m->role == DS_ROLE_ASSISTANT;
            /* an assistant message that makes tool calls has no content to give */
            if (is_blank(c->buf + m->off, m->len) && !m->calls_state) HIT(res, DS_RULE_CHAT_EMPTY, 0, i);
            if (m->role == DS_ROLE_SYSTEM && i > 0) HIT(res, DS_RULE_CHAT_SYSTEM_NOT_FIRST, 0, i);
        }
        if (!assistant) HIT(res, DS_RULE_CHAT_NO_ASSISTANT, 0, c->n);
        if (c->other_parts) HIT(res, DS_RULE_CHAT_PARTS, 0, c->other_parts);
        size_t at = 0;
        const char *sp = a->tok ? find_special(a->tok, c->buf, c->buf_len, &at) : NULL;
        if (sp) {
            HIT(res, DS_RULE_CHAT_SPECIAL, at, 0);
            mc_escape_text(sp, strlen(sp), res->special_tok, sizeof res->special_tok);
        }
    }
    if (!o->chat_template) return 1;
    /* the whole conversation: tokens and targets; then, over L, what
     * drop-turns does. Without a tokenizer: whether the template takes it. */
    ds_chat_fit_result fr;
    if (!a->tok) rc = ds_chat_render(o->chat_template, &w->c, &a->cro, &w->r, why, sizeof why);
    else
        rc = ds_chat_fit(a->tok, o->chat_template, &w->c, &a->cro, DS_CHAT_FIT_KEEP, 0, &w->r, &w->v, &fr, why,
                         sizeof why);
    if (rc == DS_CHAT_OK && a->tok) {
        res->tokens = fr.tokens;
        res->loss = fr.loss_tokens;
        if (o->seq_len && fr.tokens > o->seq_len) {
            rc = ds_chat_fit(a->tok, o->chat_template, &w->c, &a->cro, DS_CHAT_FIT_DROP_TURNS, o->seq_len, &w->r, &w->v,
                             &fr, why, sizeof why);
            res->turns = fr.turns_dropped;
            res->turns_fit = rc == DS_CHAT_OK && fr.fate != DS_CHAT_FATE_DROPPED;
        }
    }
    if (rc == DS_CHAT_TEMPLATE) {
        int twice = 0;
        for (size_t i = 1; i < c->n; i++)
            twice |= c->msgs[i].role == DS_ROLE_ASSISTANT && c->msgs[i - 1].role == DS_ROLE_ASSISTANT;
        res->chat_rule = -1; /* the template's refusal is what build does: it comes first */
        chat_hit(res, twice ? DS_RULE_CHAT_ASSISTANT_TWICE : DS_RULE_CHAT_TEMPLATE, "%s", why);
        res->chat_refused = 1; /* no count: not in hist */
    } else if (rc == DS_ERR_ARG) {
        res->chat_rule = -1;
        chat_hit(res, DS_RULE_CHAT_TEMPLATE, "%s", why);
        res->chat_refused = 1;
    } else if (rc == DS_ERR_NOMEM || rc == TK_ERR_NOMEM) {
        atomic_store(&a->nomem, 1);
    } else if (rc != DS_CHAT_OK) {
        res->tok_rc = rc;
        if (!tk_err_is_document(rc)) atomic_store(&a->tok_err, rc);
    }
    return 1;
}

static void process_item(void *ctx, int thread, size_t i) {
    analyzer *a = ctx;
    const ds_batch *b = a->b;
    ds_json_ctx *jc = a->jctx ? a->jctx[thread] : NULL;
    const item *it = &b->recs[i];
    doc_res *res = &a->res[i];
    res->hits = 0;
    res->nonascii = 0;
    res->tokens = 0;
    res->tok_rc = 0;
    res->hash = 0;
    res->detail[0] = 0;
    res->special[0] = 0;
    res->status = it->status;
    res->flags = it->flags;
    res->len = it->len;
    res->has_text = it->has_text;
    res->chat_rule = -1;
    res->loss = res->turns = 0;
    res->turns_fit = 0;
    res->chat_refused = 0;
    if (!it->has_text) return;
    const uint8_t *t = b->arena + it->off;
    size_t len = it->len;
    if (a->cw && (it->flags & DS_RECF_RAW_JSON) && !chat_item(a, thread, t, len, res, &t, &len)) return;
    if (!a->cw && (it->flags & DS_RECF_RAW_JSON)) {
        ds_record rec;
        memset(&rec, 0, sizeof rec);
        rec.flags = it->flags;
        if (!jc || ds_json_extract(jc, t, len, &rec) != DS_OK) {
            atomic_store(&a->nomem, 1);
            res->has_text = 0;
            return;
        }
        res->status = rec.status;
        res->flags = rec.flags;
        if (rec.detail) snprintf(res->detail, sizeof res->detail, "%s", rec.detail);
        res->has_text = rec.text != NULL;
        if (!rec.text) return;
        t = rec.text;
        len = rec.len;
        res->len = len;
    }
    if (res->status == DS_REC_BAD_JSON) {
        if (a->o->lint) {
            size_t bad = mc_utf8_valid_prefix(t, len);
            if (bad < len) HIT(res, DS_RULE_UTF8, bad, t[bad]);
        }
        return;
    }
    if (a->o->lint) {
        scan_doc(t, len, &a->cfg, res);
        res->hash = XXH3_64bits(t, len);
    }
    if (a->cw && a->tok) return; /* chat_item counted the rendered conversation */
    if (a->tok) {
        size_t nt = 0;
        res->tok_rc = tk_count(a->tok, t, len, &nt);
        res->tokens = res->tok_rc ? 0 : nt;
        /* a document over a per-document limit is a finding (tokenizer-limit)
         * and not counted by hist; any other failure stops the run */
        if (res->tok_rc && !tk_err_is_document(res->tok_rc)) atomic_store(&a->tok_err, res->tok_rc);
    }
}

/* ------------------------------------------------------- aggregation */

/* Duplicate set: 64-bit text hash -> index of the first record with it.
 * At most max distinct hashes are held (16 bytes each, load <= 3/4, so the
 * table is at most 2^ceil(log2(4/3 max)) slots); once full, a new hash is
 * looked up but not added. */
typedef struct {
    uint64_t *keys; /* hash (0 is remapped to 1) */
    uint64_t *first;
    size_t cap, n, max;
} hset;

/* 1: duplicate (*first set); 0: new, added; 2: new, not added (set full). */
static int hset_insert(hset *h, uint64_t key, uint64_t idx, uint64_t *first) {
    if (key == 0) key = 1;
    if (h->n >= h->max) {
        if (!h->cap) return 2;
        size_t j = key & (h->cap - 1);
        while (h->keys[j]) {
            if (h->keys[j] == key) {
                *first = h->first[j];
                return 1;
            }
            j = (j + 1) & (h->cap - 1);
        }
        return 2;
    }
    if ((h->n + 1) * 4 > h->cap * 3) {
        size_t nc = h->cap ? h->cap * 2 : 1 << 12;
        uint64_t *nk = calloc(nc, sizeof *nk), *nf = malloc(nc * sizeof *nf);
        if (!nk || !nf) {
            free(nk);
            free(nf);
            return DS_ERR_NOMEM;
        }
        for (size_t i = 0; i < h->cap; i++)
            if (h->keys[i]) {
                size_t j = h->keys[i] & (nc - 1);
                while (nk[j]) j = (j + 1) & (nc - 1);
                nk[j] = h->keys[i];
                nf[j] = h->first[i];
            }
        free(h->keys);
        free(h->first);
        h->keys = nk;
        h->first = nf;
        h->cap = nc;
    }
    size_t j = key & (h->cap - 1);
    while (h->keys[j]) {
        if (h->keys[j] == key) {
            *first = h->first[j];
            return 1;
        }
        j = (j + 1) & (h->cap - 1);
    }
    h->keys[j] = key;
    h->first[j] = idx;
    h->n++;
    return 0;
}

typedef struct {
    uint64_t len;
    ds_lint_example ex;
} big_doc;

typedef struct {
    analyzer *a;
    ds_lint_report *rep;
    ds_lenhist lens;   /* bytes per doc: median, outlier count */
    ds_lenhist counts; /* tokens per doc (hist percentiles) */
    ds_hist *hist;     /* hist: sums streamed per document */
    uint64_t hist_bytes, hist_skipped, hist_refused;
    char refused_first[300];
    hset dup;
    big_doc *big; /* min-heap of the largest docs (outlier candidates) */
    size_t n_big, cap_big;
    const char *last_file;
    size_t ex_cap[DS_RULE_COUNT]; /* allocated examples per rule */
} agg;

static void add_example(agg *g, int rule, const item *it, uint64_t pos, uint64_t value, const char *note) {
    ds_lint_finding *f = &g->rep->rules[rule];
    f->count++;
    size_t maxex = g->a->o->max_examples;
    if (f->n_examples >= maxex) return;
    if (f->n_examples == g->ex_cap[rule]) { /* grows with the examples found, not with max_examples */
        size_t nc = g->ex_cap[rule] ? g->ex_cap[rule] * 2 : 8;
        if (nc > maxex) nc = maxex;
        ds_lint_example *ne = realloc(f->examples, nc * sizeof *ne);
        if (!ne) return;
        f->examples = ne;
        g->ex_cap[rule] = nc;
    }
    memset(&f->examples[f->n_examples], 0, sizeof *f->examples);
    ds_lint_example *e = &f->examples[f->n_examples];
    e->file = strdup(it->file);
    if (!e->file) return;
    e->line = it->line;
    e->offset = it->offset;
    e->index = it->index;
    e->pos = pos;
    e->value = value;
    snprintf(e->note, sizeof e->note, "%s", note ? note : "");
    f->n_examples++;
}

static void heap_push(agg *g, uint64_t len, const item *it) {
    size_t cap = g->cap_big;
    big_doc d = {len, {0}};
    d.ex.line = it->line;
    d.ex.offset = it->offset;
    d.ex.index = it->index;
    d.ex.value = len;
    if (g->n_big == cap) {
        if (len <= g->big[0].len) return;
        free(g->big[0].ex.file);
        g->big[0] = g->big[--g->n_big];
        /* sift down */
        size_t i = 0;
        for (;;) {
            size_t l = 2 * i + 1, r = l + 1, m = i;
            if (l < g->n_big && g->big[l].len < g->big[m].len) m = l;
            if (r < g->n_big && g->big[r].len < g->big[m].len) m = r;
            if (m == i) break;
            big_doc t = g->big[i];
            g->big[i] = g->big[m];
            g->big[m] = t;
            i = m;
        }
    }
    d.ex.file = strdup(it->file);
    if (!d.ex.file) return;
    size_t i = g->n_big++;
    g->big[i] = d;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (g->big[p].len <= g->big[i].len) break;
        big_doc t = g->big[i];
        g->big[i] = g->big[p];
        g->big[p] = t;
        i = p;
    }
}

static const char *blob_name(int k) {
    return k == BLOB_BASE64 ? "base64" : k == BLOB_HEX ? "hex string" : k == BLOB_HEXDUMP ? "hex dump" : "blob";
}

/* Phase 1 of a record: the record-level findings (unreadable, not JSON, no
 * field, too large, BOM, lone surrogate, a chat record's own rule). */
static void agg_record_rules(agg *g, const item *it, const doc_res *r, const char *detail) {
    char note[160];
    switch (r->status) {
    case DS_REC_ZSTD_ERROR: add_example(g, DS_RULE_ZSTD, it, 0, 0, detail); break;
    case DS_REC_BAD_JSON:
        if (r->hits & (1u << DS_RULE_UTF8)) {
            snprintf(note, sizeof note, "byte 0x%02X in the JSON line (the parser rejects it)",
                     (unsigned)r->val[DS_RULE_UTF8]);
            add_example(g, DS_RULE_UTF8, it, r->pos[DS_RULE_UTF8], r->val[DS_RULE_UTF8], note);
        } else add_example(g, DS_RULE_JSON, it, 0, 0, detail);
        break;
    case DS_REC_MISSING_FIELD: add_example(g, DS_RULE_FIELD_MISSING, it, 0, 0, detail); break;
    case DS_REC_NOT_STRING: add_example(g, DS_RULE_FIELD_TYPE, it, 0, 0, detail); break;
    case DS_REC_OVERLONG:
        snprintf(note, sizeof note, "%llu bytes%s", (unsigned long long)it->record_bytes,
                 (it->flags & DS_RECF_CUT) ? ", cut" : ", skipped");
        add_example(g, DS_RULE_RECORD_TOO_LARGE, it, 0, it->record_bytes, note);
        break;
    default: break;
    }
    if (r->flags & DS_RECF_JSON_LONE_SURROGATE) add_example(g, DS_RULE_SURROGATE, it, 0, 0, NULL);
    if (r->flags & DS_RECF_BOM) add_example(g, DS_RULE_BOM, it, 0, 0, NULL);
    if (r->chat_rule >= 0) add_example(g, r->chat_rule, it, 0, 0, r->chat_note);
}

/* Phase 2 (hist): a document's token count, and for chat its targets and
 * what drop-turns does over L. */
static int agg_hist(agg *g, const doc_res *r, uint64_t len) {
    const ds_analyze_opts *o = g->a->o;
    if (ds_hist_add(g->hist, &g->counts, r->tokens)) return DS_ERR_NOMEM;
    g->hist_bytes += len;
    if (g->a->cw && o->chat_template) {
        ds_hist *h = g->hist;
        if (!h->chat || r->loss < h->loss_min) h->loss_min = r->loss;
        if (r->loss > h->loss_max) h->loss_max = r->loss;
        h->chat = 1;
        h->loss_tokens += r->loss;
        h->no_loss_docs += r->loss == 0;
        if (o->seq_len && r->tokens > o->seq_len) {
            h->turns_docs += r->turns_fit;
            h->turns_dropped += r->turns_fit ? r->turns : 0;
            h->turns_fail += !r->turns_fit;
        }
    }
    return DS_OK;
}

/* The note of an in-document rule's finding; v may be rescaled (CONTROL
 * packs the code point in its low byte). */
static void doc_rule_note(int rule, const doc_res *r, uint64_t pos, uint64_t *v, char *note, size_t cap) {
    note[0] = 0;
    switch (rule) {
    case DS_RULE_UTF8: snprintf(note, cap, "byte 0x%02X", (unsigned)*v); break;
    case DS_RULE_NUL: snprintf(note, cap, "%llu NUL byte(s)", (unsigned long long)*v); break;
    case DS_RULE_CONTROL:
        snprintf(note, cap, "U+%04X, %llu control char(s)", (unsigned)(*v & 0xFF), (unsigned long long)(*v >> 8));
        *v >>= 8;
        break;
    case DS_RULE_EMPTY: snprintf(note, cap, "%llu bytes, no visible text", (unsigned long long)*v); break;
    case DS_RULE_LONG_LINE: snprintf(note, cap, "line of %llu bytes", (unsigned long long)*v); break;
    case DS_RULE_LONG_RUN: snprintf(note, cap, "%llu bytes without whitespace", (unsigned long long)*v); break;
    case DS_RULE_BLOB:
        snprintf(note, cap, "%s, %llu bytes", blob_name(r->note[DS_RULE_BLOB]), (unsigned long long)*v);
        break;
    case DS_RULE_SPECIAL: snprintf(note, cap, "%s, %llu occurrence(s)", r->special, (unsigned long long)*v); break;
    case DS_RULE_CHAT_EMPTY: snprintf(note, cap, "message %llu: no text", (unsigned long long)*v); break;
    case DS_RULE_CHAT_SYSTEM_NOT_FIRST:
        snprintf(note, cap, "message %llu is a system message", (unsigned long long)*v);
        break;
    case DS_RULE_CHAT_NO_ASSISTANT:
        snprintf(note, cap, "%llu message(s), none from the assistant", (unsigned long long)*v);
        break;
    case DS_RULE_CHAT_PARTS: snprintf(note, cap, "%llu non-text part(s) left out", (unsigned long long)*v); break;
    case DS_RULE_CHAT_SPECIAL:
        snprintf(note, cap, "'%s' in the messages' text (byte %llu)", r->special_tok, (unsigned long long)pos);
        break;
    default: break;
    }
}

/* Phase 3: the length rules (too long by tokens, by turns for chat, by
 * bytes without a tokenizer; few bytes per token). A document the tokenizer
 * refused has no token count: no length rule applies to it. */
static void agg_length_rules(agg *g, const item *it, const doc_res *r, uint64_t len, int refused) {
    const ds_analyze_opts *o = g->a->o;
    char note[160];
    if (refused) {
        /* no token count: neither doc-too-long by tokens nor low-bytes-per-token */
    } else if (g->a->tok && o->seq_len && g->a->cw && o->chat_template) {
        if (r->tokens > o->seq_len) {
            if (r->turns_fit)
                snprintf(note, sizeof note, "%llu tokens > L=%llu; drop-turns would drop %llu turn(s)",
                         (unsigned long long)r->tokens, (unsigned long long)o->seq_len, (unsigned long long)r->turns);
            else
                snprintf(note, sizeof note,
                         "%llu tokens > L=%llu; drop-turns cannot fit it (its last turn "
                         "alone is over L)",
                         (unsigned long long)r->tokens, (unsigned long long)o->seq_len);
            add_example(g, DS_RULE_CHAT_TOO_LONG, it, 0, r->tokens, note);
        }
    } else if (g->a->tok && o->seq_len) {
        if (r->tokens > o->seq_len) {
            snprintf(note, sizeof note, "%llu tokens > L=%llu", (unsigned long long)r->tokens,
                     (unsigned long long)o->seq_len);
            add_example(g, DS_RULE_TOO_LONG, it, 0, r->tokens, note);
        }
    } else if (len > g->rep->max_doc_bytes) {
        snprintf(note, sizeof note, "%llu bytes > %llu", (unsigned long long)len,
                 (unsigned long long)g->rep->max_doc_bytes);
        add_example(g, DS_RULE_TOO_LONG, it, 0, len, note);
    }
    /* Only mostly-ASCII documents: in scripts a vocabulary covers poorly
     * (Thai, Armenian with cl100k) one token per byte is normal text. */
    double min_bpt = o->min_bytes_per_token > 0 ? o->min_bytes_per_token : 1.5;
    uint64_t bpt_min = o->bpt_min_bytes ? o->bpt_min_bytes : 1024;
    if (g->a->tok && !refused && len >= bpt_min && r->tokens && r->nonascii * 5 <= len &&
        (double)len / (double)r->tokens < min_bpt) {
        snprintf(note, sizeof note, "%.2f bytes/token (%llu tokens)", (double)len / (double)r->tokens,
                 (unsigned long long)r->tokens);
        add_example(g, DS_RULE_LOW_BPT, it, 0, r->tokens, note);
    }
}

/* Phase 4 (lint): in-document rules in rule order, length rules, the
 * duplicate check (non-empty documents only), the largest-documents heap. */
static int agg_lint_doc(agg *g, const item *it, const doc_res *r, uint64_t len, int refused) {
    char note[160];
    if (ds_lenhist_add(&g->lens, len)) return DS_ERR_NOMEM;
    for (int rule = 0; rule < DS_RULE_COUNT; rule++) {
        if (!(r->hits & (1u << rule))) continue;
        uint64_t pos = r->pos[rule], v = r->val[rule];
        doc_rule_note(rule, r, pos, &v, note, sizeof note);
        add_example(g, rule, it, pos, v, note);
    }
    agg_length_rules(g, it, r, len, refused);
    if (!(r->hits & (1u << DS_RULE_EMPTY))) {
        uint64_t first;
        int d = hset_insert(&g->dup, r->hash, it->index, &first);
        if (d < 0) return d;
        if (d == 2) g->rep->dup_untracked++;
        if (d == 1) {
            snprintf(note, sizeof note, "same text as record #%llu", (unsigned long long)first);
            add_example(g, DS_RULE_DUPLICATE, it, 0, first, note);
        }
    }
    heap_push(g, len, it);
    return DS_OK;
}

/* Folds one batch's per-document results into the report (lint) and the
 * histogram (hist), record by record, in the phases above. */
static int aggregate(agg *g, const ds_batch *b, const doc_res *res) {
    ds_lint_report *rep = g->rep;
    for (size_t i = 0; i < b->n; i++) {
        const item *it = &b->recs[i];
        const doc_res *r = &res[i];
        const char *detail = r->detail[0]                   ? r->detail
                             : it->detail_off != (size_t)-1 ? (const char *)b->arena + it->detail_off
                                                            : NULL;
        if (rep) {
            rep->records++;
            if (it->file != g->last_file) {
                g->last_file = it->file;
                rep->files++;
            }
        }
        int usable = r->has_text && (r->status == DS_REC_OK || r->status == DS_REC_OVERLONG);
        if (!usable) g->hist_skipped++;
        if (rep) agg_record_rules(g, it, r, detail);
        if (!usable) continue;
        if (r->chat_refused) { /* the template refuses it: a record build rejects, not a document */
            g->hist_skipped++;
            continue;
        }
        uint64_t len = r->len;
        int refused = r->tok_rc != 0; /* the tokenizer refused it: no token count */
        if (rep) {
            rep->docs++;
            rep->bytes += len;
            if (g->a->tok) rep->tokens += r->tokens;
            if (refused) add_example(g, DS_RULE_TOKENIZER_LIMIT, it, 0, 0, tk_strerror(r->tok_rc));
        }
        if (refused) {
            if (!g->hist_refused++)
                snprintf(g->refused_first, sizeof g->refused_first, "%.200s:%llu: %s", it->file,
                         (unsigned long long)it->line, tk_strerror(r->tok_rc));
        } else if (g->hist) {
            if (agg_hist(g, r, len)) return DS_ERR_NOMEM;
        }
        if (!rep) continue;
        int rc = agg_lint_doc(g, it, r, len, refused);
        if (rc) return rc;
    }
    return DS_OK;
}

static int cmp_big_desc(const void *a, const void *b) {
    const big_doc *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->ex.index < y->ex.index ? -1 : x->ex.index > y->ex.index;
}

static int finish_outliers(agg *g) {
    ds_lint_report *rep = g->rep;
    const ds_analyze_opts *o = g->a->o;
    uint64_t n = g->lens.total;
    if (!n) return DS_OK;
    uint64_t med_rank = (n - 1) / 2 + 1, med;
    if (ds_lenhist_ranks(&g->lens, &med_rank, &med, 1)) return DS_ERR_NOMEM;
    rep->median_bytes = med;
    rep->median_approximate = g->lens.coarse;
    double factor = o->outlier_factor > 0 ? o->outlier_factor : 100.0;
    uint64_t minb = o->outlier_min_bytes ? o->outlier_min_bytes : (1u << 20);
    double thr = factor * (double)(med ? med : 1);
    if (thr < (double)minb) thr = (double)minb;
    uint64_t count = 0;
    if (ds_lenhist_count_above(&g->lens, thr, &count)) return DS_ERR_NOMEM;
    qsort(g->big, g->n_big, sizeof *g->big, cmp_big_desc);
    ds_lint_finding *f = &rep->rules[DS_RULE_OUTLIER];
    f->count = count;
    size_t maxex = o->max_examples;
    for (size_t i = 0; i < g->n_big && f->n_examples < maxex; i++) {
        if ((double)g->big[i].len <= thr) break;
        if (!f->examples && !(f->examples = calloc(maxex < g->n_big ? maxex : g->n_big, sizeof *f->examples)))
            return DS_ERR_NOMEM;
        ds_lint_example *e = &f->examples[f->n_examples++];
        *e = g->big[i].ex;
        g->big[i].ex.file = NULL;
        snprintf(e->note, sizeof e->note, "%llu bytes = %.0fx the median (%llu)", (unsigned long long)g->big[i].len,
                 (double)g->big[i].len / (double)(med ? med : 1), (unsigned long long)med);
    }
    return DS_OK;
}

void ds_lint_report_free(ds_lint_report *r) {
    if (!r) return;
    for (int i = 0; i < DS_RULE_COUNT; i++) {
        for (size_t k = 0; k < r->rules[i].n_examples; k++) free(r->rules[i].examples[k].file);
        free(r->rules[i].examples);
    }
    free(r);
}

void ds_hist_free(ds_hist *h) { free(h); }

/* Reader thread -> workers (process_item) -> aggregate, in input order. */
static int scan_all(analyzer *a, agg *g, ds_reader *rd, uint64_t batch_bytes, int nth, char *err, size_t errlen) {
    int rc = DS_OK;
    size_t cap_res = 0;
    a->nth = nth;
    a->jctx = calloc((size_t)nth, sizeof *a->jctx);
    for (int t = 0; a->jctx && t < nth; t++) ds_json_ctx_new(a->ro, &a->jctx[t]); /* NULL on failure */
    ds_pipeline pl;
    memset(&pl, 0, sizeof pl);
    pl.rd = rd;
    pl.src = a->o->source;
    pl.src_max_record = a->ro->max_record_bytes;
    pl.max_bytes = batch_bytes;
    pl.max_docs = 4096;
    pl.keep_bad = 1;
    pl.keep_bad_text = 1;
    if (ds_pipeline_start(&pl) != DS_OK) {
        ds_set_err(err, errlen, "cannot start the reader thread");
        rc = DS_ERR_INTERNAL;
    }
    ds_analyze_event ev;
    memset(&ev, 0, sizeof ev);
    double t0 = ds_now();
    while (rc == DS_OK) {
        const ds_batch *b = ds_pipeline_next(&pl);
        if (b->fatal) {
            ds_set_err(err, errlen, "%s", b->errmsg);
            rc = b->rc ? b->rc : DS_ERR_IO;
            break;
        }
        if (b->n > cap_res) {
            doc_res *nr = realloc(a->res, b->n * sizeof *nr);
            if (!nr) {
                rc = DS_ERR_NOMEM;
                break;
            }
            a->res = nr;
            cap_res = b->n;
        }
        a->b = b;
        ds_parallel_for(b->n, nth, process_item, a, NULL);
        if (atomic_load(&a->nomem)) {
            rc = DS_ERR_NOMEM;
            break;
        }
        if (atomic_load(&a->tok_err)) {
            ds_set_err(err, errlen, "tokenizer failed: %s", tk_strerror(atomic_load(&a->tok_err)));
            rc = DS_ERR_INTERNAL;
            break;
        }
        rc = aggregate(g, b, a->res);
        int last = b->eof;
        if (rc == DS_OK && a->o->callback) {
            ev.records += b->n;
            ev.bytes_in += b->raw_bytes;
            ev.seconds = ds_now() - t0;
            ev.last = last;
            if (a->o->callback(&ev, a->o->user)) {
                ds_set_err(err, errlen, "canceled");
                rc = DS_ERR_CANCELED;
            }
        }
        ds_pipeline_release(&pl);
        if (last) break;
    }
    ds_pipeline_end(&pl);
    for (int t = 0; a->jctx && t < nth; t++) ds_json_ctx_free(a->jctx[t]);
    free(a->jctx);
    free(a->res);
    return rc;
}

/* Chat formats: one parse/render/encode state per worker, and the template's
 * bos/eos from the tokenizer's framing. */
static int chat_begin(analyzer *a, int nth, char *err, size_t errlen) {
    const ds_analyze_opts *o = a->o;
    if (!ds_format_name(o->format) || !ds_loss_on_name(o->loss_on)) {
        ds_set_err(err, errlen, "ds_analyze: format / loss_on out of range");
        return DS_ERR_ARG;
    }
    if (!(a->cw = calloc((size_t)nth, sizeof *a->cw))) return DS_ERR_NOMEM;
    if (a->tok) ds_chat_framing_tokens(a->tok, a->bos_tok, sizeof a->bos_tok, a->eos_tok, sizeof a->eos_tok);
    a->cro.bos_token = a->bos_tok;
    a->cro.eos_token = a->eos_tok;
    a->cro.loss_on = o->loss_on;
    return DS_OK;
}
static void chat_end(analyzer *a, int nth) {
    for (int t = 0; a->cw && t < nth; t++) {
        ds_chat_free(&a->cw[t].c);
        ds_chat_rendered_free(&a->cw[t].r);
        ds_chat_ids_free(&a->cw[t].v);
    }
    free(a->cw);
    a->cw = NULL;
}

int ds_analyze(const char *const *inputs, size_t n_inputs, const ds_reader_opts *ropts, const ds_analyze_opts *aopts,
               ds_lint_report **lint_out, ds_hist **hist_out, char *err, size_t errlen) {
    if (lint_out) *lint_out = NULL;
    if (hist_out) *hist_out = NULL;
    ds_analyze_opts o;
    if (aopts) o = *aopts;
    else ds_analyze_opts_init(&o);
    if (!o.set_examples && !o.max_examples) o.max_examples = 5;
    o.lint = lint_out != NULL;
    o.hist = hist_out != NULL;
    if (o.hist && !o.tok) {
        ds_set_err(err, errlen, "hist needs a tokenizer");
        return DS_ERR_ARG;
    }
    init_cls();
    analyzer a;
    memset(&a, 0, sizeof a);
    a.o = &o;
    a.tok = (const tk_tokenizer *)o.tok;
    a.cfg.long_line = o.long_line_bytes ? o.long_line_bytes : (1u << 20);
    a.cfg.long_run = o.long_run_bytes ? o.long_run_bytes : 4096;
    uint64_t batch_bytes = o.batch_bytes ? o.batch_bytes : (8u << 20);

    ds_reader_opts ro;
    if (ropts) ro = *ropts;
    else ds_reader_opts_init(&ro);
    ro.defer_json = 1; /* JSON parsing runs on the workers */
    /* chat formats: Parquet / Arrow IPC rows as JSON objects, for the chat parser */
    if (o.format != DS_FMT_TEXT) {
        ro.row_format = o.format;
        ro.messages_field = o.messages_field;
    }
    a.ro = &ro;
    ds_reader *rd = NULL;
    if (o.source && (n_inputs || !o.source->next || !o.source->name)) {
        ds_set_err(err, errlen, "ds_analyze: a source takes no inputs");
        return DS_ERR_ARG;
    }
    int rc = o.source ? DS_OK : ds_reader_open(inputs, n_inputs, &ro, &rd, err, errlen);
    if (rc) return rc;

    agg g;
    memset(&g, 0, sizeof g);
    g.a = &a;
    g.cap_big = o.max_examples > 64 ? o.max_examples : 64;
    g.big = calloc(g.cap_big, sizeof *g.big);
    g.dup.max = o.max_dup_docs ? (size_t)o.max_dup_docs : (size_t)DS_DUP_DEFAULT_MAX;
    if (o.hist && !(g.hist = calloc(1, sizeof *g.hist))) {
        ds_reader_free(rd);
        free(g.big);
        return DS_ERR_NOMEM;
    }
    if (g.hist) ds_hist_begin(g.hist, o.seq_len);
    if (o.lint) {
        g.rep = calloc(1, sizeof *g.rep);
        if (!g.rep || !g.big) {
            ds_reader_free(rd);
            free(g.rep);
            free(g.big);
            free(g.hist);
            return DS_ERR_NOMEM;
        }
        g.rep->seq_len = o.seq_len;
        g.rep->has_tokens = a.tok != NULL;
        g.rep->max_doc_bytes = o.max_doc_bytes ? o.max_doc_bytes : (o.seq_len && !a.tok ? 8 * o.seq_len : (8u << 20));
        if (a.tok) snprintf(g.rep->tokenizer, sizeof g.rep->tokenizer, "%s", tk_name(a.tok));
    }

    int nth = o.threads > 0 ? o.threads : ds_ncpus();
    if (nth > 256) nth = 256;
    if (o.format != DS_FMT_TEXT) rc = chat_begin(&a, nth, err, errlen);
    if (rc == DS_OK) rc = scan_all(&a, &g, rd, batch_bytes, nth, err, errlen);
    chat_end(&a, nth);

    if (rc == DS_OK && g.rep) {
        rc = finish_outliers(&g);
        g.rep->dup_tracked = g.dup.n;
    }
    ds_hist *h = g.hist;
    if (rc == DS_OK && h) {
        rc = ds_hist_end(h, &g.counts);
        h->bytes = g.hist_bytes;
        h->skipped = g.hist_skipped;
        h->refused = g.hist_refused;
        snprintf(h->refused_first, sizeof h->refused_first, "%s", g.refused_first);
        snprintf(h->tokenizer, sizeof h->tokenizer, "%s", tk_name(a.tok));
    }
    ds_reader_free(rd);
    for (size_t i = 0; i < g.n_big; i++) free(g.big[i].ex.file);
    free(g.big);
    ds_lenhist_free(&g.lens);
    ds_lenhist_free(&g.counts);
    free(g.dup.keys);
    free(g.dup.first);
    if (rc != DS_OK) {
        if (rc == DS_ERR_NOMEM) ds_set_err(err, errlen, "out of memory");
        ds_lint_report_free(g.rep);
        ds_hist_free(h);
        return rc;
    }
    if (lint_out) *lint_out = g.rep;
    if (hist_out) *hist_out = h;
    return DS_OK;
}
