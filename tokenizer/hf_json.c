/* hf_json.c - fast reading of a tokenizer.json's model.vocab and model.merges.
 *
 * A 150k-token tokenizer.json is 7-10 MB, almost all of it vocab and merges;
 * a jansson tree of it costs ~1 s here. This reader finds the two values in
 * the raw bytes, decodes them into flat arrays (strict JSON: UTF-8 checked,
 * escapes and surrogate pairs decoded, integer ids only), and leaves the rest
 * of the file (with the two values replaced by {} and []) to jansson. It
 * never decides an error itself: anything unusual (a duplicate key, a float
 * id, an empty key, bad UTF-8, a third merge form ...) makes it answer
 * TK_HFJ_FALLBACK, and the loader reads the file with jansson as before, so
 * the messages for bad files stay the loader's own.
 */
#include "tk_internal.h"

#include <stdlib.h>

static size_t ws(const uint8_t *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

/* End (after the closing quote) of the string starting at s[i] == '"'; 0 if none. */
static size_t str_end(const uint8_t *s, size_t n, size_t i) {
    for (i++; i < n; i++) {
        if (s[i] == '"') return i + 1;
        if (s[i] == '\\') i++;
        else if (s[i] < 0x20) return 0;
    }
    return 0;
}

/* End of the value at s[i]; 0 on anything odd. */
static size_t skip_value(const uint8_t *s, size_t n, size_t i, int depth) {
    if (i >= n || depth > 64) return 0;
    if (s[i] == '"') return str_end(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        uint8_t close = s[i] == '{' ? '}' : ']';
        bool obj = s[i] == '{';
        i = ws(s, n, i + 1);
        if (i < n && s[i] == close) return i + 1;
        for (;;) {
            if (obj) {
                if (i >= n || s[i] != '"' || !(i = str_end(s, n, i))) return 0;
                i = ws(s, n, i);
                if (i >= n || s[i] != ':') return 0;
                i = ws(s, n, i + 1);
            }
            if (!(i = skip_value(s, n, i, depth + 1))) return 0;
            i = ws(s, n, i);
            if (i >= n) return 0;
            if (s[i] == close) return i + 1;
            if (s[i] != ',') return 0;
            i = ws(s, n, i + 1);
        }
    }
    size_t j = i;
    while (j < n && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] != ' ' && s[j] != '\n' && s[j] != '\t' &&
           s[j] != '\r')
        j++;
    return j > i ? j : 0;
}

static int hexv(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static long hex4(const uint8_t *s) {
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexv(s[k]);
        if (h < 0) return -1;
        v = v << 4 | h;
    }
    return v;
}

static size_t put_utf8(uint8_t *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | cp >> 6); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decode the string at s[*i] into o (NUL-terminated); its length, or -1. */
static long decode_str(const uint8_t *s, size_t n, size_t *i, uint8_t *o) {
    size_t p = *i, w = 0;
    if (p >= n || s[p] != '"') return -1;
    p++;
    while (p < n) {
        uint8_t c = s[p];
        if (c == '"') {
            o[w] = 0;
            *i = p + 1;
            return (long)w;
        }
        if (c < 0x20) return -1;
        if (c == '\\') {
            if (p + 1 >= n) return -1;
            uint8_t e = s[p + 1];
            p += 2;
            switch (e) {
            case '"': o[w++] = '"'; break;
            case '\\': o[w++] = '\\'; break;
            case '/': o[w++] = '/'; break;
            case 'b': o[w++] = '\b'; break;
            case 'f': o[w++] = '\f'; break;
            case 'n': o[w++] = '\n'; break;
            case 'r': o[w++] = '\r'; break;
            case 't': o[w++] = '\t'; break;
            case 'u': {
                if (p + 4 > n) return -1;
                long u = hex4(s + p);
                p += 4;
                if (u <= 0) return -1; /* \u0000: the loader's message */
                if (u >= 0xDC00 && u <= 0xDFFF) return -1;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (p + 6 > n || s[p] != '\\' || s[p + 1] != 'u') return -1;
                    long l = hex4(s + p + 2);
                    if (l < 0xDC00 || l > 0xDFFF) return -1;
                    p += 6;
                    u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
                }
                w += put_utf8(o + w, (uint32_t)u);
                break;
            }
            default: return -1;
            }
            continue;
        }
        if (c < 0x80) {
            o[w++] = c;
            p++;
            continue;
        }
        /* one UTF-8 sequence, checked */
        size_t l = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (c < 0xC2 || c > 0xF4 || p + l > n) return -1;
        uint32_t cp = c & (l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07);
        for (size_t k = 1; k < l; k++) {
            if ((s[p + k] & 0xC0) != 0x80) return -1;
            cp = cp << 6 | (s[p + k] & 0x3F);
        }
        if ((l == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (l == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return -1;
        memcpy(o + w, s + p, l);
        w += l;
        p += l;
    }
    return -1;
}

static bool key_is(const uint8_t *s, size_t a, size_t b, const char *k) {
    size_t kl = strlen(k);
    return b - a == kl + 2 && memcmp(s + a + 1, k, kl) == 0;
}

static uint64_t hash(const uint8_t *p, size_t n) { return tk_hash_bytes(p, n); }

int tk_hfj_lookup(const tk_hfj *j, const char *k, size_t kl) {
    uint64_t h = hash((const uint8_t *)k, kl), tag = h >> 32;
    for (size_t i = h & j->mask;; i = (i + 1) & j->mask) {
        uint64_t x = j->slots[i];
        if (!x) return -1;
        if (x >> 32 != tag) continue;
        uint32_t e = (uint32_t)x - 1;
        if (j->vlen[e] == kl && memcmp(j->vkey[e], k, kl) == 0) return (int)e;
    }
}

void tk_hfj_free(tk_hfj *j) {
    free(j->arena);
    free(j->vkey);
    free(j->vlen);
    free(j->vid);
    free(j->slots);
    free(j->ma);
    free(j->mb);
    free(j->rest);
    memset(j, 0, sizeof *j);
}

int tk_hfj_index(tk_hfj *j) {
    size_t slots = 16;
    while (slots < j->nv * 2 + 16) slots *= 2;
    j->slots = calloc(slots, sizeof *j->slots);
    if (!j->slots) return TK_ERR_NOMEM;
    j->mask = slots - 1;
    for (size_t e = 0; e < j->nv; e++) {
        uint64_t h = hash((const uint8_t *)j->vkey[e], j->vlen[e]);
        size_t i = h & j->mask;
        for (;; i = (i + 1) & j->mask) {
            uint64_t y = j->slots[i];
            if (!y) break;
            uint32_t x = (uint32_t)y - 1;
            if (y >> 32 == h >> 32 && j->vlen[x] == j->vlen[e] && memcmp(j->vkey[x], j->vkey[e], j->vlen[e]) == 0)
                return TK_HFJ_FALLBACK;
        }
        j->slots[i] = (h >> 32) << 32 | ((uint64_t)e + 1);
    }
    return TK_OK;
}

static int grow(void **p, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return TK_OK;
    size_t c = *cap ? *cap * 2 : 1024;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q) return TK_ERR_NOMEM;
    *p = q;
    *cap = c;
    return TK_OK;
}

int tk_hfj_parse(const uint8_t *s, size_t n, tk_hfj *j) {
    memset(j, 0, sizeof *j);
    size_t i = ws(s, n, 0), vs = 0, ve = 0, ms = 0, me = 0;
    if (i >= n || s[i] != '{') return TK_HFJ_FALLBACK;
    i = ws(s, n, i + 1);
    while (i < n && s[i] != '}') {
        size_t ks = i;
        if (s[i] != '"' || !(i = str_end(s, n, i))) return TK_HFJ_FALLBACK;
        size_t ke = i;
        i = ws(s, n, i);
        if (i >= n || s[i] != ':') return TK_HFJ_FALLBACK;
        i = ws(s, n, i + 1);
        if (key_is(s, ks, ke, "model") && i < n && s[i] == '{') {
            i = ws(s, n, i + 1);
            while (i < n && s[i] != '}') {
                size_t a = i;
                if (s[i] != '"' || !(i = str_end(s, n, i))) return TK_HFJ_FALLBACK;
                size_t b = i;
                i = ws(s, n, i);
                if (i >= n || s[i] != ':') return TK_HFJ_FALLBACK;
                i = ws(s, n, i + 1);
                size_t e = skip_value(s, n, i, 1);
                if (!e) return TK_HFJ_FALLBACK;
                if (key_is(s, a, b, "vocab")) {
                    if (ve || s[i] != '{') return TK_HFJ_FALLBACK;
                    vs = i;
                    ve = e;
                } else if (key_is(s, a, b, "merges")) {
                    if (me || s[i] != '[') return TK_HFJ_FALLBACK;
                    ms = i;
                    me = e;
                }
                i = ws(s, n, e);
                if (i < n && s[i] == ',') i = ws(s, n, i + 1);
                else if (i >= n || s[i] != '}') return TK_HFJ_FALLBACK;
            }
            if (i >= n) return TK_HFJ_FALLBACK;
            i++;
        } else {
            if (!(i = skip_value(s, n, i, 0))) return TK_HFJ_FALLBACK;
        }
        i = ws(s, n, i);
        if (i < n && s[i] == ',') i = ws(s, n, i + 1);
        else if (i >= n || s[i] != '}') return TK_HFJ_FALLBACK;
    }
    if (!ve || !me || vs > ms) return TK_HFJ_FALLBACK;
    int rc = TK_ERR_NOMEM;
    /* decoded strings are never longer than their JSON text */
    j->arena = malloc((ve - vs) + (me - ms) + 16);
    if (!j->arena) goto fail;
    uint8_t *o = j->arena;
    size_t vcap = 0, mcap = 0, c2 = 0, c3 = 0, c4 = 0;
    /* vocab */
    i = ws(s, n, vs + 1);
    while (s[i] != '}') {
        if (grow((void **)&j->vkey, &vcap, j->nv + 1, sizeof *j->vkey) ||
            grow((void **)&j->vlen, &c2, j->nv + 1, sizeof *j->vlen) ||
            grow((void **)&j->vid, &c3, j->nv + 1, sizeof *j->vid))
            goto fail;
        long l = decode_str(s, ve, &i, o);
        if (l <= 0) goto fallback;
        i = ws(s, ve, i);
        if (s[i] != ':') goto fallback;
        i = ws(s, ve, i + 1);
        uint64_t id = 0;
        size_t d = i;
        while (i < ve && s[i] >= '0' && s[i] <= '9' && id < TK_MAX_VOCAB) id = id * 10 + (s[i++] - '0');
        if (i == d || (s[d] == '0' && i - d > 1) || id >= TK_MAX_VOCAB) goto fallback;
        if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') goto fallback;
        j->vkey[j->nv] = (const char *)o;
        j->vlen[j->nv] = (uint32_t)l;
        j->vid[j->nv] = (uint32_t)id;
        if (id > j->max_id) j->max_id = (uint32_t)id;
        j->nv++;
        o += l + 1;
        i = ws(s, ve, i);
        if (s[i] == ',') i = ws(s, ve, i + 1);
        else if (s[i] != '}') goto fallback;
    }
    /* merges */
    i = ws(s, n, ms + 1);
    while (s[i] != ']') {
        if (grow((void **)&j->ma, &mcap, j->nm + 1, sizeof *j->ma) ||
            grow((void **)&j->mb, &c4, j->nm + 1, sizeof *j->mb))
            goto fail;
        if (s[i] == '"') {
            long l = decode_str(s, me, &i, o);
            if (l <= 0) goto fallback;
            if (l > 8 * (long)TK_MAX_TOKEN_BYTES) goto fallback;
            uint8_t *sp = memchr(o, ' ', (size_t)l);
            if (!sp || sp == o || sp == o + l - 1 || memchr(sp + 1, ' ', (size_t)(o + l - sp - 1))) goto fallback;
            if (sp - o >= 4 * (long)TK_MAX_TOKEN_BYTES || o + l - sp - 1 >= 4 * (long)TK_MAX_TOKEN_BYTES) goto fallback;
            *sp = 0;
            j->ma[j->nm] = (const char *)o;
            j->mb[j->nm] = (const char *)sp + 1;
            o += l + 1;
        } else if (s[i] == '[') {
            i = ws(s, me, i + 1);
            long la = decode_str(s, me, &i, o);
            if (la <= 0 || la >= 4 * (long)TK_MAX_TOKEN_BYTES) goto fallback;
            j->ma[j->nm] = (const char *)o;
            o += la + 1;
            i = ws(s, me, i);
            if (s[i] != ',') goto fallback;
            i = ws(s, me, i + 1);
            long lb = decode_str(s, me, &i, o);
            if (lb <= 0 || lb >= 4 * (long)TK_MAX_TOKEN_BYTES) goto fallback;
            j->mb[j->nm] = (const char *)o;
            o += lb + 1;
            i = ws(s, me, i);
            if (s[i] != ']') goto fallback;
            i++;
        } else {
            goto fallback;
        }
        j->nm++;
        i = ws(s, me, i);
        if (s[i] == ',') i = ws(s, me, i + 1);
        else if (s[i] != ']') goto fallback;
    }
    /* the rest, for jansson: the two values replaced by {} and [] */
    j->rest = malloc(n - (ve - vs) - (me - ms) + 8);
    if (!j->rest) goto fail;
    size_t w = 0;
    memcpy(j->rest + w, s, vs);
    w += vs;
    memcpy(j->rest + w, "{}", 2);
    w += 2;
    memcpy(j->rest + w, s + ve, ms - ve);
    w += ms - ve;
    memcpy(j->rest + w, "[]", 2);
    w += 2;
    memcpy(j->rest + w, s + me, n - me);
    w += n - me;
    j->rest_len = w;
    if ((rc = tk_hfj_index(j))) goto fail_rc;
    return TK_OK;
fallback:
    rc = TK_HFJ_FALLBACK;
    goto fail_rc;
fail:
    rc = TK_ERR_NOMEM;
fail_rc:
    tk_hfj_free(j);
    return rc;
}
