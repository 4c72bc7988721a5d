/* test_json_scan.c - differential test: dataset/json_scan.c vs jansson.
 *
 * The reference is the jansson path of ds_json_extract (json_loadb with
 * JSON_ALLOW_NUL | JSON_DECODE_ANY, the lone-surrogate retry, the dotted
 * path walk), restated here. On every input:
 *   - ds_json_scan must agree with it on valid vs invalid, on the kind of
 *     result (ok / missing / not an object / not a string + type), on the
 *     lone-surrogate flag and on the decoded bytes; DS_JSCAN_UNSURE is no
 *     claim (counted, must stay rare);
 *   - ds_json_extract (fast path + fallback) must give exactly the
 *     reference's status, text bytes, flags and detail.
 * Inputs: hand-written edge cases, every line of ../shared/corpus/ *.jsonl.zst files
 * (fields "text" and "src"; exit 77 if ../shared is missing, after the
 * other checks) and 200k random mutations of valid lines. */
#include "ds.h"
#include "ds_internal.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long n_checked, n_fail, n_unsure, n_valid, n_invalid, n_lone;

/* ---------------------------------------------------------------- reference */

typedef struct {
    ds_jscan_status st; /* OK, MISSING, NOT_OBJECT, PARENT_NOT_OBJECT, NOT_STRING, INVALID */
    ds_jscan_type type;
    int lone;
    uint8_t *text; /* malloc'd copy */
    size_t len;
} ref_t;

static void ref_extract(const uint8_t *line, size_t n, char **parts, size_t n_parts, ref_t *r) {
    memset(r, 0, sizeof *r);
    if (n >= 3 && line[0] == 0xEF && line[1] == 0xBB && line[2] == 0xBF) {
        line += 3;
        n -= 3;
    }
    json_error_t je;
    json_t *j = json_loadb((const char *)line, n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
    if (!j && memchr(line, '\\', n)) {
        uint8_t *c = malloc(n ? n : 1);
        memcpy(c, line, n);
        if (ds_fix_lone_surrogates(c, n)) {
            j = json_loadb((const char *)c, n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
            if (j) r->lone = 1;
        }
        free(c);
    }
    if (!j) {
        r->st = DS_JSCAN_INVALID;
        return;
    }
    json_t *v = j;
    r->st = DS_JSCAN_OK;
    for (size_t i = 0; i < n_parts; i++) {
        if (!json_is_object(v)) {
            r->st = i == 0 ? DS_JSCAN_NOT_OBJECT : DS_JSCAN_PARENT_NOT_OBJECT;
            break;
        }
        v = json_object_get(v, parts[i]);
        if (!v) {
            r->st = DS_JSCAN_MISSING;
            break;
        }
    }
    if (r->st == DS_JSCAN_OK) {
        if (json_is_string(v)) {
            r->type = DS_JSCAN_T_STRING;
            r->len = json_string_length(v);
            r->text = malloc(r->len + 1);
            memcpy(r->text, json_string_value(v), r->len);
        } else {
            r->st = DS_JSCAN_NOT_STRING;
            r->type = json_is_null(v)     ? DS_JSCAN_T_NULL
                      : json_is_object(v) ? DS_JSCAN_T_OBJECT
                      : json_is_array(v)  ? DS_JSCAN_T_ARRAY
                      : json_is_number(v) ? DS_JSCAN_T_NUMBER
                                          : DS_JSCAN_T_BOOLEAN;
        }
    }
    json_decref(j);
}

/* ---------------------------------------------------------------- checks */

typedef struct {
    const char *field;
    char *buf;
    char *parts[8];
    size_t n_parts;
    ds_json_ctx *ctx;
    ds_jscan_buf sb;
    ds_jtape tape; /* ds_json_tape, the chat records' reader */
} field_t;

static void field_init(field_t *f, const char *field) {
    memset(f, 0, sizeof *f);
    f->field = field;
    f->buf = strdup(field);
    f->parts[f->n_parts++] = f->buf;
    for (char *q = f->buf; *q; q++)
        if (*q == '.') {
            *q = 0;
            f->parts[f->n_parts++] = q + 1;
        }
    ds_reader_opts o;
    ds_reader_opts_init(&o);
    o.field = field;
    if (ds_json_ctx_new(&o, &f->ctx) != DS_OK) {
        fprintf(stderr, "ctx %s\n", field);
        exit(1);
    }
}
static void field_free(field_t *f) {
    free(f->buf);
    ds_json_ctx_free(f->ctx);
    ds_jscan_buf_free(&f->sb);
    ds_jtape_free(&f->tape);
}

static void show(const char *what, const char *ctx, const uint8_t *line, size_t n) {
    fprintf(stderr, "FAIL %s [%s] line (%zu bytes): ", what, ctx, n);
    for (size_t i = 0; i < n && i < 300; i++) {
        uint8_t c = line[i];
        if (c >= 0x20 && c < 0x7F) fputc(c, stderr);
        else fprintf(stderr, "<%02X>", c);
    }
    fputc('\n', stderr);
}

static const char *st_name(int s) {
    static const char *const nm[] = {"OK",         "MISSING", "NOT_OBJECT", "PARENT_NOT_OBJECT",
                                     "NOT_STRING", "INVALID", "UNSURE",     "NOMEM"};
    return s >= 0 && s < 8 ? nm[s] : "?";
}

static void check(field_t *f, const uint8_t *line, size_t n, const char *ctx) {
    ref_t r;
    ref_extract(line, n, f->parts, f->n_parts, &r);
    n_checked++;
    if (r.st == DS_JSCAN_INVALID) n_invalid++;
    else n_valid++;
    if (r.lone) n_lone++;
    /* 1. the scanner alone */
    const uint8_t *p = line;
    size_t pn = n;
    if (pn >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
        p += 3;
        pn -= 3;
    }
    ds_jscan_result sr;
    ds_jscan_status st = ds_json_scan(p, pn, f->parts, f->n_parts, &f->sb, &sr);
    if (st == DS_JSCAN_UNSURE) {
        n_unsure++;
    } else if (st != r.st) {
        if (n_fail++ < 30) {
            fprintf(stderr, "scan %s, jansson %s, field %s\n", st_name(st), st_name(r.st), f->field);
            show("status", ctx, line, n);
        }
    } else if (st != DS_JSCAN_INVALID &&
               (sr.lone_surrogate != r.lone || (st == DS_JSCAN_NOT_STRING && sr.type != r.type) ||
                (st == DS_JSCAN_OK && (sr.len != r.len || memcmp(sr.text, r.text, r.len))))) {
        if (n_fail++ < 30) {
            fprintf(stderr, "scan lone %d/%d type %d/%d len %zu/%zu field %s\n", sr.lone_surrogate, r.lone, sr.type,
                    r.type, sr.len, r.len, f->field);
            show("result", ctx, line, n);
        }
    }
    /* 1b. the tape (chat records): accepts what jansson accepts (lone surrogates as the
     * reference retry does), and decodes a top-level string field to the same bytes */
    int tlone = 0;
    ds_jscan_status ts = ds_json_tape(p, pn, &f->tape, &tlone);
    if (st != DS_JSCAN_UNSURE && ts != DS_JSCAN_UNSURE) {
        int tape_ok = ts == DS_JSCAN_OK, ref_ok = r.st != DS_JSCAN_INVALID;
        int bad = tape_ok != ref_ok || (tape_ok && tlone != r.lone);
        if (!bad && tape_ok && r.st == DS_JSCAN_OK && f->n_parts == 1) {
            long v = ds_jtape_get(&f->tape, 0, f->parts[0]);
            bad = v < 0 || f->tape.n[v].type != DS_JSCAN_T_STRING || f->tape.n[v].len != r.len ||
                  memcmp(f->tape.text + f->tape.n[v].off, r.text, r.len);
        }
        if (bad && n_fail++ < 30) {
            fprintf(stderr, "tape %s lone %d, jansson %s lone %d, field %s\n", st_name(ts), tlone, st_name(r.st),
                    r.lone, f->field);
            show("tape", ctx, line, n);
        }
    }
    /* 2. ds_json_extract (fast path + jansson fallback) vs the reference */
    ds_record rec;
    memset(&rec, 0, sizeof rec);
    rec.flags = DS_RECF_RAW_JSON;
    if (ds_json_extract(f->ctx, line, n, &rec) != DS_OK) {
        n_fail++;
        fprintf(stderr, "ds_json_extract error\n");
    } else {
        ds_rec_status want = r.st == DS_JSCAN_OK           ? DS_REC_OK
                             : r.st == DS_JSCAN_INVALID    ? DS_REC_BAD_JSON
                             : r.st == DS_JSCAN_NOT_STRING ? DS_REC_NOT_STRING
                                                           : DS_REC_MISSING_FIELD;
        int bad = rec.status != want || !!(rec.flags & DS_RECF_JSON_LONE_SURROGATE) != r.lone ||
                  (rec.flags & DS_RECF_RAW_JSON);
        if (!bad && want == DS_REC_OK) bad = rec.len != r.len || memcmp(rec.text, r.text, r.len) || rec.detail;
        if (!bad && want != DS_REC_OK) {
            char d[300];
            const char *t = r.type == DS_JSCAN_T_NULL     ? "null"
                            : r.type == DS_JSCAN_T_OBJECT ? "an object"
                            : r.type == DS_JSCAN_T_ARRAY  ? "an array"
                            : r.type == DS_JSCAN_T_NUMBER ? "a number"
                                                          : "a boolean";
            if (want == DS_REC_MISSING_FIELD)
                snprintf(d, sizeof d, "%s",
                         r.st == DS_JSCAN_MISSING      ? ""
                         : r.st == DS_JSCAN_NOT_OBJECT ? "line is not a JSON object"
                                                       : "parent of the field is not an object");
            if (want == DS_REC_MISSING_FIELD && r.st == DS_JSCAN_MISSING)
                snprintf(d, sizeof d, "no field '%s'", f->field);
            if (want == DS_REC_NOT_STRING) snprintf(d, sizeof d, "field '%s' is %s, not a string", f->field, t);
            if (want == DS_REC_BAD_JSON) {
                /* detail is jansson's message: recompute it */
                const uint8_t *q = line;
                size_t qn = n;
                if (qn >= 3 && q[0] == 0xEF && q[1] == 0xBB && q[2] == 0xBF) {
                    q += 3;
                    qn -= 3;
                }
                json_error_t je;
                json_t *j = json_loadb((const char *)q, qn, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
                json_decref(j);
                snprintf(d, sizeof d, "%s (column %d)", je.text, je.column);
                bad = rec.text != line || rec.len != n;
            }
            if (!rec.detail || strcmp(rec.detail, d)) bad = 1;
        }
        if (bad && n_fail++ < 30) {
            fprintf(stderr, "extract status %d want %d flags %x detail %s\n", rec.status, want, rec.flags,
                    rec.detail ? rec.detail : "(null)");
            show("extract", ctx, line, n);
        }
    }
    free(r.text);
}

/* ---------------------------------------------------------------- inputs */

#define S(x)                                                                                                           \
    { x, sizeof(x) - 1 }
typedef struct {
    const char *s;
    size_t n;
} lit_t;

static const lit_t cases[] = {
    S("{\"text\":\"hello\"}"),
    S("{\"text\": \"hello\", \"src\": \"web\"}"),
    S(" \t\r\n{ \"text\" : \"x\" } \r\n\t "),
    S("{\"text\":\"\"}"),
    S("{}"),
    S("{\"a\":{\"b\":\"nested\"}}"),
    S("{\"a\":{\"b\":{\"c\":\"deep\"}}}"),
    S("{\"a\":{\"b\":\"x\"},\"a\":{\"c\":1}}"),
    S("{\"a\":{\"b\":\"x\"},\"a\":5}"),
    S("{\"a\":{\"b\":\"x\",\"b\":\"y\"}}"),
    S("{\"a\":{\"b\":\"x\",\"b\":{}}}"),
    S("{\"a\":[{\"b\":\"x\"}]}"),
    S("{\"a\":\"str\"}"),
    S("{\"a\":null}"),
    S("{\"a\":{\"b\":\"1\"},\"z\":{\"a\":{\"b\":\"2\"}}}"),
    S("{\"text\":\"first\",\"text\":\"second\"}"),
    S("{\"text\":\"first\",\"text\":7}"),
    S("{\"text\":7,\"text\":\"last\"}"),
    S("{\"text\":1}"),
    S("{\"text\":-1.5e3}"),
    S("{\"text\":true}"),
    S("{\"text\":false}"),
    S("{\"text\":null}"),
    S("{\"text\":[]}"),
    S("{\"text\":{}}"),
    S("{\"text\":[1,\"a\",{\"b\":[]}]}"),
    S("{\"t\\u0065xt\":\"escaped key\"}"),
    S("{\"te\\\"xt\":\"q\"}"),
    S("{\"\\u00e9\":\"e-acute key\",\"text\":\"t\"}"),
    S("{\"\xc3\xa9\":\"raw key\"}"),
    S("{\"text\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"}"),
    S("{\"text\":\"\\u0041\\u00e9\\u20ac\\uFFFF\\uffff\"}"),
    S("{\"text\":\"\\ud83d\\ude00 pair\"}"),
    S("{\"text\":\"\\uD83D\\uDE00\\uDBFF\\uDFFF\\uD800\\uDC00\"}"),
    S("{\"text\":\"lone high \\ud800 x\"}"),
    S("{\"text\":\"lone low \\udc00 x\"}"),
    S("{\"text\":\"\\ud800\"}"),
    S("{\"text\":\"\\ud800\\ud800\\udc00\"}"),
    S("{\"text\":\"\\ud800\\u0041\"}"),
    S("{\"text\":\"\\udc00\\ud800\"}"),
    S("{\"text\":\"\\ud800\\n\"}"),
    S("{\"text\":\"\\\\ud800\"}"),
    S("{\"text\":\"ok\",\"src\":\"\\ud800\"}"),
    S("{\"\\ud800\":1,\"text\":\"key lone\"}"),
    S("{\"text\":\"\\ud800\\uZZZZ\"}"),
    S("{\"text\":\"\\ud800\",\"bad\":01}"),
    S("\"\\ud800\""),
    S("{\"text\":\"nul \\u0000 inside\"}"),
    S("{\"text\":\"\\u0000\"}"),
    S("{\"te\\u0000xt\":\"nul key\"}"),
    S("{\"x\\u0000\":1,\"text\":\"nul other key\"}"),
    S("{\"text\":\"raw nul \0 inside\"}"),
    S("{\"text\":\"tab\there\"}"),
    S("{\"text\":\"nl\nhere\"}"),
    S("{\"text\":\"\x1f\"}"),
    S("{\"text\":\"\x7f del ok\"}"),
    S("{\"text\":\"bad esc \\x\"}"),
    S("{\"text\":\"bad u \\u12\"}"),
    S("{\"text\":\"bad u \\u12G4\"}"),
    S("{\"text\":\"unterminated}"),
    S("{\"text\":\"trailing backslash\\"),
    S("{\"text\":\"utf8 \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"}"),
    S("{\"text\":\"overlong \xc0\xaf\"}"),
    S("{\"text\":\"overlong \xc1\xbf\"}"),
    S("{\"text\":\"overlong \xe0\x80\xaf\"}"),
    S("{\"text\":\"overlong \xf0\x80\x80\xaf\"}"),
    S("{\"text\":\"surrogate \xed\xa0\x80\"}"),
    S("{\"text\":\"max \xed\x9f\xbf\"}"),
    S("{\"text\":\"too big \xf4\x90\x80\x80\"}"),
    S("{\"text\":\"f5 \xf5\x80\x80\x80\"}"),
    S("{\"text\":\"ff \xff\"}"),
    S("{\"text\":\"cont \x80\"}"),
    S("{\"text\":\"short \xe2\x82\"}"),
    S("{\"text\":\"short \xe2\x82"),
    S("{\"text\":\"x\"}\xc3\xa9"),
    S("{\"text\":\"x\"}x"),
    S("{\"text\":\"x\"} {}"),
    S("{\"text\":\"x\"},"),
    S("{\"text\":\"x\"}\0"),
    S("\0{\"text\":\"x\"}"),
    S("{\"text\":\"x\",}"),
    S("{\"text\":\"x\",,\"a\":1}"),
    S("{,\"text\":\"x\"}"),
    S("{\"text\" \"x\"}"),
    S("{\"text\"::\"x\"}"),
    S("{text:\"x\"}"),
    S("{'text':'x'}"),
    S("{\"text\":\"x\"]"),
    S("[\"text\"}"),
    S("{\"a\":[1,2,]}"),
    S("{\"a\":[,1]}"),
    S("{\"a\":[1 2]}"),
    S("{\"a\":[1,2],\"text\":\"after array\"}"),
    S("{\"a\":{}}"),
    S("{\"a\":{\"b\":{}}}"),
    S(""),
    S("   "),
    S("\xef\xbb\xbf{\"text\":\"bom\"}"),
    S("\xef\xbb\xbf\xef\xbb\xbf{\"text\":\"double bom\"}"),
    S("\xef\xbb{\"text\":\"half bom\"}"),
    S("[]"),
    S("[1,2,3]"),
    S("\"just a string\""),
    S("123"),
    S("-0"),
    S("true"),
    S("null"),
    S("nul"),
    S("tru"),
    S("{\"text\":tru}"),
    S("{\"text\":truee}"),
    S("{\"text\":nulls}"),
    S("{\"text\":True}"),
    S("{\"text\":NaN}"),
    S("{\"text\":Infinity}"),
    S("{\"text\":-Infinity}"),
    S("{\"n\":0,\"text\":\"n\"}"),
    S("{\"n\":-0,\"text\":\"n\"}"),
    S("{\"n\":01,\"text\":\"n\"}"),
    S("{\"n\":-01,\"text\":\"n\"}"),
    S("{\"n\":00,\"text\":\"n\"}"),
    S("{\"n\":1.,\"text\":\"n\"}"),
    S("{\"n\":.5,\"text\":\"n\"}"),
    S("{\"n\":-,\"text\":\"n\"}"),
    S("{\"n\":-.5,\"text\":\"n\"}"),
    S("{\"n\":+1,\"text\":\"n\"}"),
    S("{\"n\":1e,\"text\":\"n\"}"),
    S("{\"n\":1e+,\"text\":\"n\"}"),
    S("{\"n\":1e-,\"text\":\"n\"}"),
    S("{\"n\":1E5,\"text\":\"n\"}"),
    S("{\"n\":1e+5,\"text\":\"n\"}"),
    S("{\"n\":1e-5,\"text\":\"n\"}"),
    S("{\"n\":0.0e0,\"text\":\"n\"}"),
    S("{\"n\":0e0,\"text\":\"n\"}"),
    S("{\"n\":-0.0,\"text\":\"n\"}"),
    S("{\"n\":1.5.3,\"text\":\"n\"}"),
    S("{\"n\":1e5e3,\"text\":\"n\"}"),
    S("{\"n\":0x10,\"text\":\"n\"}"),
    S("{\"n\":1_000,\"text\":\"n\"}"),
    S("{\"n\":9223372036854775807,\"text\":\"n\"}"),
    S("{\"n\":9223372036854775808,\"text\":\"n\"}"),
    S("{\"n\":-9223372036854775808,\"text\":\"n\"}"),
    S("{\"n\":-9223372036854775809,\"text\":\"n\"}"),
    S("{\"n\":99999999999999999999,\"text\":\"n\"}"),
    S("{\"n\":1000000000000000000,\"text\":\"n\"}"),
    S("{\"n\":99999999999999999999.0,\"text\":\"n\"}"),
    S("{\"n\":1e308,\"text\":\"n\"}"),
    S("{\"n\":1.7976931348623157e308,\"text\":\"n\"}"),
    S("{\"n\":1e309,\"text\":\"n\"}"),
    S("{\"n\":1e400,\"text\":\"n\"}"),
    S("{\"n\":-1e400,\"text\":\"n\"}"),
    S("{\"n\":1e-400,\"text\":\"n\"}"),
    S("{\"n\":0.00001e-99999999999,\"text\":\"n\"}"),
    S("{\"n\":1e99999999999999999999,\"text\":\"n\"}"),
    S("{\"n\":0e400,\"text\":\"n\"}"),
    S("{\"n\":[-1,0,1.0,2e2,3E-2,-4.5e+6],\"text\":\"n\"}"),
    S("{\"text\" : \"a\" , \"src\" : \"b\" }"),
    S("{\"text\":\"a\"\f}"),
    S("{\"text\":\"a\"\v}"),
    S("{\"text\":\"a\"\xc2\xa0}"),
    S("{\"text\":\"a\"}\n"),
    S("{\"text\":\"a\"}\r"),
    S("{\"n\":1\0,\"text\":\"nul after number\"}"),
    S("{\"n\":true\0,\"text\":\"nul after literal\"}"),
    S("{\"n\":1\0\0,\"text\":\"two nuls\"}"),
    S("{\"n\":\"s\"\0,\"text\":\"nul after string\"}"),
    S("123\0"),
};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *const snippets[] = {"\"",
                                       "\\",
                                       "{",
                                       "}",
                                       "[",
                                       "]",
                                       ",",
                                       ":",
                                       " ",
                                       "\\u",
                                       "\\uD800",
                                       "\\uDC00",
                                       "\\ud83d\\ude00",
                                       "\\u0000",
                                       "\\n",
                                       "0",
                                       "01",
                                       "-",
                                       ".",
                                       "e",
                                       "1e400",
                                       "99999999999999999999",
                                       "true",
                                       "null",
                                       "\xc3\xa9",
                                       "\xe2\x82",
                                       "\xed\xa0\x80",
                                       "\x80",
                                       "\xff",
                                       "\x01",
                                       "\t",
                                       "\"text\":",
                                       "{\"b\":\"z\"}",
                                       "\"a\":",
                                       "\xef\xbb\xbf"};

static void mutate_and_check(field_t *fs, const uint8_t *src, size_t n, uint8_t *buf) {
    size_t len = n;
    memcpy(buf, src, n);
    int muts = 1 + (int)(rnd() % 3);
    for (int m = 0; m < muts; m++) {
        unsigned kind = (unsigned)(rnd() % 6);
        size_t pos = len ? (size_t)(rnd() % (len + 1)) : 0;
        if (kind == 0 && len) { /* byte flip */
            if (pos == len) pos--;
            buf[pos] ^= (uint8_t)(1u << (rnd() % 8));
        } else if (kind == 1 && len) { /* random byte */
            if (pos == len) pos--;
            buf[pos] = (uint8_t)rnd();
        } else if (kind == 2) { /* insert a snippet */
            const char *s = snippets[rnd() % (sizeof snippets / sizeof *snippets)];
            size_t sl = strlen(s);
            memmove(buf + pos + sl, buf + pos, len - pos);
            memcpy(buf + pos, s, sl);
            len += sl;
        } else if (kind == 3) { /* truncate */
            len = pos;
        } else if (kind == 4 && len) { /* delete a few bytes */
            size_t d = 1 + (size_t)(rnd() % 4);
            if (pos + d > len) d = len - pos;
            memmove(buf + pos, buf + pos + d, len - pos - d);
            len -= d;
        } else { /* insert a random byte */
            memmove(buf + pos + 1, buf + pos, len - pos);
            buf[pos] = (uint8_t)rnd();
            len++;
        }
    }
    check(&fs[0], buf, len, "mutation"); /* text */
    check(&fs[2], buf, len, "mutation"); /* a.b */
}

/* Strings of random UTF-8 pieces, valid and not, long enough for the 16-byte
 * validation (dataset/json_scan.c, u8_span) and cut at every alignment:
 * boundary code points, overlongs, surrogates, > U+10FFFF, stray and missing
 * continuations, escapes, a closing quote and control bytes among them. */
static void utf8_mix(field_t *fs, int n_lines) {
    static const char *const good[] = {"a",
                                       " ",
                                       "\x7f",
                                       "\xc2\x80",
                                       "\xdf\xbf",
                                       "\xe0\xa0\x80",
                                       "\xe4\xb8\xad",
                                       "\xed\x9f\xbf",
                                       "\xee\x80\x80",
                                       "\xef\xbf\xbf",
                                       "\xf0\x90\x80\x80",
                                       "\xf4\x8f\xbf\xbf",
                                       "\xf3\xa0\x80\x81",
                                       "\xd0\x96",
                                       "\\n",
                                       "\\u00e9",
                                       "\\ud83d\\ude00",
                                       "\\\"",
                                       "\\\\"};
    static const char *const bad[] = {"\xc0\x80",
                                      "\xc1\xbf",
                                      "\xe0\x9f\xbf",
                                      "\xed\xa0\x80",
                                      "\xed\xbf\xbf",
                                      "\xf0\x8f\xbf\xbf",
                                      "\xf4\x90\x80\x80",
                                      "\xf5\x80\x80\x80",
                                      "\xff",
                                      "\x80",
                                      "\xbf",
                                      "\xe4\xb8",
                                      "\xf0\x90\x80",
                                      "\xc3",
                                      "\x01",
                                      "\x1f",
                                      "\"",
                                      "\xe4\x41\x80",
                                      "\xc3\xc3\xa9"};
    enum { NG = sizeof good / sizeof *good, NB = sizeof bad / sizeof *bad };
    uint8_t buf[512];
    for (int l = 0; l < n_lines; l++) {
        size_t n = 0;
        memcpy(buf, "{\"text\":\"", 9);
        n = 9;
        size_t pad = rnd() % 17, pieces = 8 + rnd() % 60;
        for (size_t i = 0; i < pad; i++) buf[n++] = 'x';
        for (size_t i = 0; i < pieces; i++) {
            /* one line in four has one bad piece somewhere; the others none */
            const char *pc = (l % 4 == 0 && i == (size_t)l % pieces) ? bad[rnd() % NB] : good[rnd() % NG];
            size_t pl = strlen(pc);
            if (n + pl + 8 > sizeof buf) break;
            memcpy(buf + n, pc, pl);
            n += pl;
        }
        memcpy(buf + n, "\"}", 2);
        n += 2;
        check(&fs[0], buf, n, "utf8 mix");
    }
}

static void deep(field_t *fs, size_t nf, int levels, const char *open, const char *close, const char *inner) {
    size_t il = strlen(inner), ol = strlen(open), cl = strlen(close);
    size_t n = levels * (ol + cl) + il + 16;
    char *b = malloc(n), *q = b;
    for (int i = 0; i < levels; i++) {
        memcpy(q, open, ol);
        q += ol;
    }
    memcpy(q, inner, il);
    q += il;
    for (int i = 0; i < levels; i++) {
        memcpy(q, close, cl);
        q += cl;
    }
    char ctx[64];
    snprintf(ctx, sizeof ctx, "deep %d", levels);
    for (size_t i = 0; i < nf; i++) check(&fs[i], (uint8_t *)b, (size_t)(q - b), ctx);
    free(b);
}

int main(void) {
    static const char *const fields[] = {"text", "src", "a.b", "a.b.c", "n", "\xc3\xa9", "te\"xt"};
    enum { NF = sizeof fields / sizeof *fields };
    field_t fs[NF];
    for (size_t i = 0; i < NF; i++) field_init(&fs[i], fields[i]);

    /* hand-written cases */
    size_t nc = sizeof cases / sizeof *cases;
    for (size_t c = 0; c < nc; c++)
        for (size_t i = 0; i < NF; i++) check(&fs[i], (const uint8_t *)cases[c].s, cases[c].n, "case");
    for (int lv = 2040; lv <= 2050; lv++) {
        deep(fs, NF, lv, "[", "]", "");
        deep(fs, NF, lv, "[", "]", "1");
        deep(fs, NF, lv, "[", "]", "\"s\"");
        deep(fs, NF, lv, "{\"a\":", "}", "\"s\"");
        deep(fs, NF, lv, "{\"a\":", "}", "{}");
    }
    deep(fs, NF, 100, "{\"a\":", "}", "{\"b\":\"x\"}");
    deep(fs, NF, 1, "{\"a\":{\"b\":{\"c\":[", "]}}}", "1");
    utf8_mix(fs, 200000);
    long hand_fail = n_fail;
    printf("hand-written: %ld checks, %ld failures\n", n_checked, hand_fail);

    /* corpus */
    int have_corpus = 0;
    size_t pool_n = 0, pool_cap = 4096;
    uint8_t **pool = malloc(pool_cap * sizeof *pool);
    size_t *pool_len = malloc(pool_cap * sizeof *pool_len);
    for (size_t c = 0; c < nc; c++) { /* valid hand-written lines seed the mutations */
        ref_t r;
        ref_extract((const uint8_t *)cases[c].s, cases[c].n, fs[0].parts, 1, &r);
        free(r.text);
        if (r.st == DS_JSCAN_INVALID) continue;
        pool[pool_n] = malloc(cases[c].n + 1);
        memcpy(pool[pool_n], cases[c].s, cases[c].n);
        pool_len[pool_n++] = cases[c].n;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/corpus", MKS_SHARED_DIR);
    DIR *d = opendir(dir);
    if (d) {
        char *paths[64];
        size_t np = 0;
        struct dirent *de;
        while ((de = readdir(d)) && np < 64) {
            size_t l = strlen(de->d_name);
            if (l > 10 && !strcmp(de->d_name + l - 10, ".jsonl.zst")) {
                paths[np] = malloc(strlen(dir) + l + 2);
                sprintf(paths[np], "%s/%s", dir, de->d_name);
                np++;
            }
        }
        closedir(d);
        long before = n_checked, lines = 0, unsure_before = n_unsure;
        for (size_t i = 0; i < np; i++) {
            ds_reader_opts o;
            ds_reader_opts_init(&o);
            o.field = "text";
            o.defer_json = 1;
            ds_reader *rd;
            char err[256];
            const char *in[1] = {paths[i]};
            if (ds_reader_open(in, 1, &o, &rd, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            ds_record rec;
            while (ds_reader_next(rd, &rec, err, sizeof err) == 1) {
                if (!(rec.flags & DS_RECF_RAW_JSON)) continue;
                lines++;
                check(&fs[0], rec.text, rec.len, paths[i]);
                check(&fs[1], rec.text, rec.len, paths[i]);
                if (rec.len <= 3000 && pool_n < pool_cap && (lines % 7) == 0) {
                    pool[pool_n] = malloc(rec.len + 1);
                    memcpy(pool[pool_n], rec.text, rec.len);
                    pool_len[pool_n++] = rec.len;
                }
            }
            ds_reader_free(rd);
            free(paths[i]);
            have_corpus = 1;
        }
        printf("corpus: %ld lines, %ld checks, %ld unsure, %ld failures so far\n", lines, n_checked - before,
               n_unsure - unsure_before, n_fail);
        if (n_unsure != unsure_before) {
            fprintf(stderr, "FAIL: UNSURE on corpus lines (the fast path must decide real data)\n");
            n_fail++;
        }
    }

    /* 200k random mutations of valid lines (fields text and a.b) */
    size_t maxl = 0;
    for (size_t i = 0; i < pool_n; i++) maxl = pool_len[i] > maxl ? pool_len[i] : maxl;
    uint8_t *buf = malloc(maxl + 3 * 64 + 64);
    for (int m = 0; m < 200000; m++) {
        size_t k = (size_t)(rnd() % pool_n);
        mutate_and_check(fs, pool[k], pool_len[k], buf);
    }
    free(buf);
    for (size_t i = 0; i < pool_n; i++) free(pool[i]);
    free(pool);
    free(pool_len);

    printf("total: %ld checks (%ld valid, %ld invalid, %ld with lone surrogates), %ld unsure, %ld failures\n",
           n_checked, n_valid, n_invalid, n_lone, n_unsure, n_fail);
    for (size_t i = 0; i < NF; i++) field_free(&fs[i]);
    if (n_fail) return 1;
    if (n_unsure * 100 > n_checked) { /* mutations insert 1e400 and NUL bytes */
        fprintf(stderr, "too many UNSURE results\n");
        return 1;
    }
    if (!have_corpus) {
        printf("SKIP corpus: %s missing\n", dir);
        return 77;
    }
    return 0;
}
