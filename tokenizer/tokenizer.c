/* tokenizer.c - construction, accessors, fingerprint and error strings. */
#include "tk_engine.h"
#include "mks_common.h"

#include <nettle/sha1.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

const char *tk_strerror(int err) {
    switch (err) {
    case TK_OK: return "ok";
    case TK_ERR_NOMEM: return "out of memory";
    case TK_ERR_IO: return "file missing or unreadable";
    case TK_ERR_FORMAT: return "malformed vocabulary file";
    case TK_ERR_BASE64: return "bad base64 in rank file";
    case TK_ERR_DUP_RANK: return "duplicate rank or token";
    case TK_ERR_MISSING_RANK: return "ranks not contiguous or single bytes missing";
    case TK_ERR_RANGE: return "token id out of range";
    case TK_ERR_UNSUPPORTED: return "unsupported tokenizer type";
    case TK_ERR_ARG: return "invalid argument";
    case TK_ERR_PATTERN: return "unknown or missing pre-tokenizer pattern";
    case TK_ERR_NOT_FOUND: return "not found";
    case TK_ERR_THREAD: return "could not start a thread";
    case TK_ERR_LIMIT: return "beyond a tokenizer size limit";
    case TK_ERR_DOC_REGEX: return "the document exceeds the tokenizer's regex work budget";
    case TK_ERR_DOC_EXPAND: return "a normalizer or decoder step would expand the document more than 16x";
    case TK_ERR_DOC_UNK:
        return "the document has a character (WordPiece / WordLevel: a word) that no token covers and the tokenizer "
               "has no unk token";
    default: return "unknown error";
    }
}

int tk_err_is_document(int err) { return err == TK_ERR_DOC_REGEX || err == TK_ERR_DOC_EXPAND || err == TK_ERR_DOC_UNK; }

void tk_set_err(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mc_vset_err(err, errlen, fmt, ap);
    va_end(ap);
}

void tk_sha256(const void *p, size_t n, uint8_t out[32]) {
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, n, p);
    sha256_digest(&c, 32, out);
}

void tk_sha1_hex(const char *s, char out[41]) {
    struct sha1_ctx c;
    uint8_t d[20];
    sha1_init(&c);
    sha1_update(&c, strlen(s), (const uint8_t *)s);
    sha1_digest(&c, 20, d);
    for (int i = 0; i < 20; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the other 68
 * to U+0100.. in byte order. */
uint32_t tk_byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    uint32_t k = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) k++;
    return 256 + k;
}

int tk_cp_to_byte(uint32_t cp) {
    static int inv[512];
    static int ready = 0;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        int tmp[512];
        for (int i = 0; i < 512; i++) tmp[i] = -1;
        for (int b = 0; b < 256; b++) tmp[tk_byte_to_cp((uint8_t)b)] = b;
        memcpy(inv, tmp, sizeof inv);
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    return cp < 512 ? inv[cp] : -1;
}

static int map_build(tk_tokenizer *t) {
    uint32_t n_short = 0, n_long = 0;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        size_t n = t->tok_off[r + 1] - t->tok_off[r];
        /* the empty token (a rank file's "= 50256", as in Whisper's files) is
         * kept as tiktoken keeps it: an id that decodes to nothing and that
         * no lookup can find, since pieces and merge candidates are never
         * empty; the other loaders refuse an empty token themselves */
        if (n == 0) continue;
        if (n > t->max_token_len) t->max_token_len = (uint32_t)n;
        if (n <= 8) n_short++;
        else n_long++;
    }
    uint64_t cap = 16;
    while (cap < (uint64_t)n_long * 2 + 16) cap <<= 1;
    /* zeroed tables from tk_table_alloc (2 MiB pages for the multi-MB ones:
     * filled at random they would otherwise fault page by page) */
    t->map.slots = tk_table_alloc(cap * sizeof *t->map.slots);
    t->map.mask = cap - 1;
    uint64_t scap = 16;
    while (scap * 3 < (uint64_t)n_short * 5) scap <<= 1; /* load <= 0.6 */
    t->smap.slots = tk_table_alloc(scap * sizeof *t->smap.slots);
    t->smap.mask = scap - 1;
    t->filter = calloc((1u << TK_FILTER_BITS) / 64, sizeof *t->filter);
    if (!t->map.slots || !t->smap.slots || !t->filter) return TK_ERR_NOMEM;
        /* Each insertion probes a multi-MB table at random: the slot of the
     * token MB_AHEAD ranks on is prefetched while this one is placed, and
     * the probe for an empty slot is also the duplicate check. */
#define MB_AHEAD 16
    uint64_t ring[MB_AHEAD];
    for (uint32_t r = 0; r < t->n_ranks + MB_AHEAD; r++) {
        if (r >= MB_AHEAD) { /* place token q, hashed MB_AHEAD iterations ago */
            uint32_t q = r - MB_AHEAD;
            const uint8_t *p = t->arena + t->tok_off[q];
            size_t n = t->tok_off[q + 1] - t->tok_off[q];
            uint64_t h = ring[q % MB_AHEAD], fb = h >> (64 - TK_FILTER_BITS), i;
            if (n == 0) {
                /* the empty token is not indexed (see above); token r is
                 * still hashed below */
            } else if (n <= 8) {
                uint64_t w = tk_short_word(p, n);
                for (i = h & t->smap.mask; t->smap.slots[i].rank1; i = (i + 1) & t->smap.mask)
                    if (t->smap.slots[i].word == w && t->smap.slots[i].len == n) {
                        t->bad_rank = q;
                        t->bad_rank2 = t->smap.slots[i].rank1 - 1;
                        t->bad_what = "two tokens have the same bytes";
                        return TK_ERR_DUP_RANK;
                    }
                t->smap.slots[i] = (tk_shortslot){w, q + 1, (uint32_t)n};
            } else {
                for (i = h & t->map.mask; t->map.slots[i]; i = (i + 1) & t->map.mask) {
                    uint64_t sl = t->map.slots[i];
                    uint32_t o = (uint32_t)sl - 1;
                    if ((sl >> 32) == (h >> 32) && t->tok_off[o + 1] - t->tok_off[o] == n &&
                        tk_bytes_eq(t->arena + t->tok_off[o], p, n)) {
                        t->bad_rank = q;
                        t->bad_rank2 = o;
                        t->bad_what = "two tokens have the same bytes";
                        return TK_ERR_DUP_RANK;
                    }
                }
                t->map.slots[i] = ((h >> 32) << 32) | (uint64_t)(q + 1);
            }
            if (n) t->filter[fb >> 6] |= 1ull << (fb & 63);
        }
        if (r < t->n_ranks) { /* hash token r, prefetch its slot */
            const uint8_t *p = t->arena + t->tok_off[r];
            size_t n = t->tok_off[r + 1] - t->tok_off[r];
            if (n == 0) { /* the empty token: nothing to hash (p may be the arena's end) */
                ring[r % MB_AHEAD] = 0;
                continue;
            }
            uint64_t h = n <= 8 ? tk_short_hash(tk_short_word(p, n), n) : tk_hash_bytes(p, n);
            ring[r % MB_AHEAD] = h;
            if (n <= 8) __builtin_prefetch(&t->smap.slots[h & t->smap.mask], 1);
            else __builtin_prefetch(&t->map.slots[h & t->map.mask], 1);
        }
    }
#undef MB_AHEAD
    return TK_OK;
}

void tk_compute_fingerprint(tk_tokenizer *t) {
    struct sha256_ctx c;
    sha256_init(&c);
    uint8_t hdr[12] = {'t', 'k', 'f', 'p', 1, (uint8_t)t->pattern, 0, 0};
    memcpy(hdr + 8, &t->n_ranks, 4);
    sha256_update(&c, sizeof hdr, hdr);
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        uint32_t len = (uint32_t)(t->tok_off[r + 1] - t->tok_off[r]);
        sha256_update(&c, 4, (const uint8_t *)&len);
        sha256_update(&c, len, t->arena + t->tok_off[r]);
        if (t->rank_to_id) sha256_update(&c, 4, (const uint8_t *)&t->rank_to_id[r]);
    }
    for (size_t k = 0; k < t->n_specials; k++) {
        uint32_t len = (uint32_t)strlen(t->specials[k].text);
        sha256_update(&c, 4, (const uint8_t *)&len);
        sha256_update(&c, len, (const uint8_t *)t->specials[k].text);
        sha256_update(&c, 4, (const uint8_t *)&t->specials[k].id);
    }
    sha256_digest(&c, 32, t->fingerprint);
}

int tk_set_specials(tk_tokenizer *t, const tk_special *sp, size_t n) {
    for (size_t k = 0; k < t->n_specials; k++) free((char *)t->specials[k].text);
    free(t->specials);
    t->specials = NULL;
    t->n_specials = 0;
    t->eot = TK_NO_RANK;
    if (!n) return TK_OK;
    t->specials = calloc(n, sizeof *t->specials);
    if (!t->specials) return TK_ERR_NOMEM;
    for (size_t k = 0; k < n; k++) {
        if (!sp[k].text || !sp[k].text[0]) return TK_ERR_ARG;
        t->specials[k].text = strdup(sp[k].text);
        t->specials[k].id = sp[k].id;
        t->n_specials = k + 1;
        if (!t->specials[k].text) return TK_ERR_NOMEM;
        if (strcmp(sp[k].text, "<|endoftext|>") == 0) t->eot = sp[k].id;
    }
    return TK_OK;
}

static int cmp_text(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Two specials with the same text: tk_special_id would answer only one. */
static int specials_distinct(tk_tokenizer *t) {
    if (t->n_specials < 2) return TK_OK;
    const char **texts = malloc(t->n_specials * sizeof *texts);
    if (!texts) return TK_ERR_NOMEM;
    for (size_t k = 0; k < t->n_specials; k++) texts[k] = t->specials[k].text;
    qsort(texts, t->n_specials, sizeof *texts, cmp_text);
    int rc = TK_OK;
    for (size_t k = 1; k < t->n_specials && rc == TK_OK; k++)
        if (strcmp(texts[k - 1], texts[k]) == 0) {
            for (size_t j = 0; j < t->n_specials; j++)
                if (t->specials[j].text == texts[k]) t->bad_id = t->specials[j].id;
            t->bad_what = "two special tokens have the same text";
            rc = TK_ERR_DUP_RANK;
        }
    free(texts);
    return rc;
}

/* vocab_size from the ids in use, within TK_MAX_VOCAB and with at most
 * TK_MAX_ID_GAP ids that name nothing (the table of ids is 4 bytes each, so
 * a few-byte file naming id 2^31 must not get 8 GiB). Ids are checked before
 * any + 1, so 2^32 - 1 cannot wrap. */
static int vocab_size_of(tk_tokenizer *t) {
    uint64_t vs = t->n_ranks;
    if (t->rank_to_id) {
        vs = 0;
        for (uint32_t r = 0; r < t->n_ranks; r++) {
            if (t->rank_to_id[r] >= TK_MAX_VOCAB) {
                t->bad_rank = r;
                t->bad_id = t->rank_to_id[r];
                t->bad_what = "token id out of range";
                return TK_ERR_RANGE;
            }
            if ((uint64_t)t->rank_to_id[r] + 1 > vs) vs = (uint64_t)t->rank_to_id[r] + 1;
        }
    }
    for (size_t k = 0; k < t->n_specials; k++) {
        uint32_t id = t->specials[k].id;
        if (id >= TK_MAX_VOCAB) {
            t->bad_id = id;
            t->bad_what = "special token id out of range";
            return TK_ERR_RANGE;
        }
        if (!t->rank_to_id && id < t->n_ranks) {
            t->bad_id = id;
            t->bad_rank = id;
            t->bad_what = "a special token has the id of a mergeable token";
            return TK_ERR_DUP_RANK;
        }
        if ((uint64_t)id + 1 > vs) vs = (uint64_t)id + 1;
    }
    if (vs > TK_MAX_VOCAB || vs > (uint64_t)t->n_ranks + t->n_specials + TK_MAX_ID_GAP) {
        t->bad_id = (uint32_t)(vs - 1);
        t->bad_what = vs > TK_MAX_VOCAB ? "vocabulary larger than the limit of 2^24 ids"
                                        : "ids leave more than 65536 unused (the vocabulary would be far larger "
                                          "than its entries)";
        return TK_ERR_RANGE;
    }
    t->vocab_size = (uint32_t)vs;
    return TK_OK;
}

uint64_t tk_next_serial(void) {
    static uint64_t next_serial;
    return __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
}

/* Validate and index a tokenizer whose arena/tok_off/n_ranks are set. */
int tk_finalize(tk_tokenizer *t) {
    int rc;
    t->bad_rank = t->bad_rank2 = t->bad_id = TK_NO_RANK;
    t->bad_what = NULL;
    if (t->n_ranks > TK_MAX_VOCAB) {
        t->bad_what = "more than 2^24 tokens";
        return TK_ERR_RANGE;
    }
    tk_classes_init();
    for (int b = 0; b < 256; b++) t->byte_rank[b] = TK_NO_RANK;
    if (t->decode_only) goto ids; /* SentencePiece-style tokenizer.json: hf.c encodes */
    if ((rc = map_build(t))) return rc;
    /* single bytes and pairs straight from the tokens (no map probes) */
    t->pair2 = malloc(65536 * sizeof *t->pair2);
    if (!t->pair2) return TK_ERR_NOMEM;
    for (uint32_t i = 0; i < 65536; i++) t->pair2[i] = TK_NO_RANK;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        uint64_t off = t->tok_off[r], len = t->tok_off[r + 1] - off;
        if (len == 1) t->byte_rank[t->arena[off]] = r;
        else if (len == 2) t->pair2[(uint32_t)t->arena[off] << 8 | t->arena[off + 1]] = r;
    }
    for (int b = 0; b < 256 && !t->partial_bytes; b++) {
        if (t->byte_rank[b] == TK_NO_RANK) {
            t->bad_what = "not every single byte is a token";
            t->bad_id = (uint32_t)b;
            return TK_ERR_MISSING_RANK;
        }
    }
    uint32_t n3 = 0;
    for (uint32_t r = 0; r < t->n_ranks; r++) n3 += t->tok_off[r + 1] - t->tok_off[r] == 3;
    uint32_t bits = 4;
    /* load <= 2/3: o200k's 18k 3-byte tokens fit 256 KiB, which stays in L2
     * beside the 2-byte table and the filter while merging (at load <= 1/4 it
     * was 1 MiB: o200k 0-5% slower per cell); a miss reads ~3 slots of one
     * cache line or two */
    while ((1u << bits) < n3 + n3 / 2) bits++;
    t->map3 = calloc((size_t)1 << bits, sizeof *t->map3);
    if (!t->map3) return TK_ERR_NOMEM;
    t->map3_shift = 64 - bits;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        uint64_t off = t->tok_off[r];
        if (t->tok_off[r + 1] - off != 3) continue;
        const uint8_t *b = t->arena + off;
        uint64_t key = ((uint64_t)b[0] | (uint64_t)b[1] << 8 | (uint64_t)b[2] << 16) + 1,
                 mask = ((uint64_t)1 << bits) - 1;
        uint64_t i = (key * 0x9E3779B97F4A7C15ull) >> t->map3_shift;
        while (t->map3[i]) i = (i + 1) & mask;
        t->map3[i] = key << 32 | r;
    }
    /* Longest token behind each two-byte prefix: merging a long run asks
     * mostly for 3-6 byte strings that no token of that length begins with. */
    t->reach = calloc(t->n_ranks, 1);
    if (!t->reach) return TK_ERR_NOMEM;
    t->maxlen2 = calloc(65536, 1);
    if (!t->maxlen2) return TK_ERR_NOMEM;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        uint64_t off = t->tok_off[r], len = t->tok_off[r + 1] - off;
        if (len < 2) continue;
        uint32_t k = ((uint32_t)t->arena[off] << 8) | t->arena[off + 1];
        uint8_t l = len > 255 ? 255 : (uint8_t)len;
        if (l > t->maxlen2[k]) t->maxlen2[k] = l;
    }
ids:
    if ((rc = vocab_size_of(t))) return rc;
    if ((rc = specials_distinct(t))) return rc;
    uint32_t vs = t->vocab_size;
    t->serial = tk_next_serial();
    t->id_to_rank = malloc((size_t)vs * sizeof *t->id_to_rank);
    if (!t->id_to_rank) return TK_ERR_NOMEM;
    for (uint32_t i = 0; i < vs; i++) t->id_to_rank[i] = TK_NO_RANK;
    for (uint32_t r = 0; r < t->n_ranks; r++) {
        uint32_t id = t->rank_to_id ? t->rank_to_id[r] : r;
        if (t->id_to_rank[id] != TK_NO_RANK) {
            t->bad_id = id;
            t->bad_rank = r;
            t->bad_rank2 = t->id_to_rank[id];
            t->bad_what = "two tokens have the same id";
            return TK_ERR_DUP_RANK;
        }
        t->id_to_rank[id] = r;
    }
    /* a special's id must be free: not a rank's, not another special's
     * (marked with TK_NO_RANK - 1 here, cleared again below) */
    for (size_t k = 0; k < t->n_specials; k++) {
        uint32_t *slot = &t->id_to_rank[t->specials[k].id];
        if (*slot != TK_NO_RANK) {
            t->bad_id = t->specials[k].id;
            if (*slot != TK_NO_RANK - 1) t->bad_rank = *slot;
            t->bad_what = *slot == TK_NO_RANK - 1 ? "two special tokens have the same id"
                                                  : "a special token has the id of a mergeable token";
            return TK_ERR_DUP_RANK; /* t is freed: the marks need no clearing */
        }
        *slot = TK_NO_RANK - 1;
    }
    for (size_t k = 0; k < t->n_specials; k++) t->id_to_rank[t->specials[k].id] = TK_NO_RANK;
    if (!t->name[0]) snprintf(t->name, sizeof t->name, "custom");
    tk_compute_fingerprint(t);
    return TK_OK;
}

int tk_create(const uint8_t *const *tokens, const uint32_t *lens, uint32_t n_ranks, tk_pattern pat,
              const tk_special *specials, size_t n_specials, tk_tokenizer **out) {
    if (!out || !tokens || !lens || n_ranks < 256) return TK_ERR_ARG;
    *out = NULL;
    if (pat < TK_PAT_GPT2 || pat > TK_PAT_O200K) return TK_ERR_PATTERN;
    tk_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return TK_ERR_NOMEM;
    t->eot = TK_NO_RANK;
    t->pattern = pat;
    size_t total = 0;
    for (uint32_t r = 0; r < n_ranks; r++) total += lens[r];
    t->arena = malloc(total ? total : 1);
    t->tok_off = malloc(((size_t)n_ranks + 1) * sizeof *t->tok_off);
    int rc = TK_ERR_NOMEM;
    if (!t->arena || !t->tok_off) goto fail;
    t->n_ranks = n_ranks;
    size_t off = 0;
    for (uint32_t r = 0; r < n_ranks; r++) {
        t->tok_off[r] = off;
        memcpy(t->arena + off, tokens[r], lens[r]);
        off += lens[r];
    }
    t->tok_off[n_ranks] = off;
    if ((rc = tk_set_specials(t, specials, n_specials))) goto fail;
    if ((rc = tk_finalize(t))) goto fail;
    *out = t;
    return TK_OK;
fail:
    tk_free(t);
    return rc;
}

void tk_free(tk_tokenizer *t) {
    if (!t) return;
    if (t->image) { /* the tables live in the mapped image (tk_image.c) */
        munmap(t->image, t->image_len);
        t->arena = NULL;
        t->tok_off = NULL;
        t->map.slots = NULL;
        t->smap.slots = NULL;
        t->filter = NULL;
        t->pair2 = NULL;
        t->maxlen2 = NULL;
        t->map3 = NULL;
        t->id_to_rank = NULL;
        t->charmin = NULL;
    }
    free(t->arena);
    free(t->tok_off);
    free(t->map.slots);
    free(t->smap.slots);
    free(t->filter);
    free(t->pair2);
    free(t->maxlen2);
    free(t->reach);
    tk_chartab_free(t->chartab);
    free(t->map3);
    free(t->rank_to_id);
    free(t->id_to_rank);
    if (t->engine && t->engine->free) t->engine->free(t->engine_state);
    for (size_t k = 0; k < t->n_specials; k++) free((char *)t->specials[k].text);
    free(t->specials);
    free(t);
}

uint32_t tk_n_ranks(const tk_tokenizer *t) { return t ? t->n_ranks : 0; }
uint32_t tk_vocab_size(const tk_tokenizer *t) { return t ? t->vocab_size : 0; }
tk_pattern tk_get_pattern(const tk_tokenizer *t) { return t ? t->pattern : TK_PAT_NONE; }
const char *tk_name(const tk_tokenizer *t) { return t ? t->name : ""; }
size_t tk_n_specials(const tk_tokenizer *t) { return t ? t->n_specials : 0; }
const tk_special *tk_specials(const tk_tokenizer *t) { return t ? t->specials : NULL; }
void tk_fingerprint(const tk_tokenizer *t, uint8_t out[32]) { memcpy(out, t->fingerprint, 32); }

int tk_special_id(const tk_tokenizer *t, const char *text, uint32_t *id) {
    if (!t || !text) return TK_ERR_ARG;
    for (size_t k = 0; k < t->n_specials; k++)
        if (strcmp(t->specials[k].text, text) == 0) {
            if (id) *id = t->specials[k].id;
            return TK_OK;
        }
    return TK_ERR_NOT_FOUND;
}

int tk_eot_id(const tk_tokenizer *t, uint32_t *id) {
    if (!t) return TK_ERR_ARG;
    if (t->eot == TK_NO_RANK) return TK_ERR_NOT_FOUND;
    if (id) *id = t->eot;
    return TK_OK;
}

int tk_token_bytes(const tk_tokenizer *t, uint32_t id, const uint8_t **bytes, size_t *len) {
    if (!t) return TK_ERR_ARG;
    if (id >= t->vocab_size) return TK_ERR_RANGE;
    uint32_t r = t->id_to_rank[id];
    if (r != TK_NO_RANK) {
        *bytes = t->arena + t->tok_off[r];
        *len = t->tok_off[r + 1] - t->tok_off[r];
        return TK_OK;
    }
    for (size_t k = 0; k < t->n_specials; k++)
        if (t->specials[k].id == id) {
            *bytes = (const uint8_t *)t->specials[k].text;
            *len = strlen(t->specials[k].text);
            return TK_OK;
        }
    return TK_ERR_RANGE;
}

int64_t tk_rank_of(const tk_tokenizer *t, const uint8_t *bytes, size_t len) {
    if (!t || !len || t->decode_only) return -1;
    uint32_t r = tk_map_get(t, bytes, len);
    return r == TK_NO_RANK ? -1 : (int64_t)r;
}

void tk_ids_free(tk_ids *v) {
    if (!v) return;
    free(v->ids);
    v->ids = NULL;
    v->len = v->cap = 0;
}

void tk_bytes_free(tk_bytes *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int tk_bytes_append(tk_bytes *b, const void *p, size_t n) {
    if (n > SIZE_MAX - b->len) return TK_ERR_NOMEM; /* len + n would wrap (and the buffer be overrun) */
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) return TK_ERR_NOMEM;
        b->data = d;
        b->cap = cap;
    }
    if (n && p) memcpy(b->data + b->len, p, n);
    b->len += n;
    return TK_OK;
}
