/* hostile_shards_util.h - crafting shard files and shard sets for the
 * hostile-input tests (test_hostile_shards.c), the CLI generator
 * (hostile_shards_gen.c) and the fuzz targets' seed corpora. Static helpers
 * only; every file is made at test time, nothing is committed but the code. */
#ifndef MKS_HOSTILE_SHARDS_UTIL_H
#define MKS_HOSTILE_SHARDS_UTIL_H

#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ds.h"
#include "shard_internal.h"

static inline void hs_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void hs_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t hs_get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t hs_get64(const uint8_t *p) { return (uint64_t)hs_get32(p) | (uint64_t)hs_get32(p + 4) << 32; }

/* header checksum over bytes 0..183 (what a crafted file carries) */
static inline void hs_fix_header(uint8_t *img) { hs_put64(img + 184, XXH3_64bits(img, 184)); }

/* Recompute the block table and payload checksums from the header's sizes
 * (when they fit in len), then the header checksum. */
static inline void hs_fix_payload(uint8_t *img, size_t len) {
    if (len < DS_SHARD_HEADER_BYTES) return;
    uint64_t t = hs_get64(img + 72), m = hs_get64(img + 80), nb = hs_get64(img + 88);
    uint64_t payload = t + m;
    if (hs_get32(img + 8) == DS_SHARD_VERSION_LOSS) payload += hs_get64(img + 144); /* the loss section */
    if (payload < t || payload > len - DS_SHARD_HEADER_BYTES || nb > (len - DS_SHARD_HEADER_BYTES - payload) / 8) {
        hs_fix_header(img);
        return;
    }
    uint8_t *pay = img + DS_SHARD_HEADER_BYTES, *tab = pay + payload;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t o = b * DS_SHARD_BLOCK_BYTES;
        uint64_t l = o >= payload ? 0 : payload - o < DS_SHARD_BLOCK_BYTES ? payload - o : DS_SHARD_BLOCK_BYTES;
        hs_put64(tab + 8 * b, XXH3_64bits(pay + (o < payload ? o : payload), (size_t)l));
    }
    hs_put64(img + 96, XXH3_64bits(pay, (size_t)payload));
    hs_put64(img + 104, XXH3_64bits(tab, (size_t)(8 * nb)));
    hs_fix_header(img);
}

/* A small valid shard: n rows of L tokens (vocab 300, EOT/pad 299),
 * row r holds r%L+1 real tokens with a document start at 0 (and at 2 when
 * there are more than 3); zstd > 0 compresses with frames of 3 rows. */
static inline int hs_make_shard_v(uint32_t n, uint32_t L, int split, int zstd, int loss_bits, ds_shard_image *img);
static inline int hs_make_shard(uint32_t n, uint32_t L, int split, int zstd, ds_shard_image *img) {
    return hs_make_shard_v(n, L, split, zstd, 0, img);
}

/* Loss bit i of row r in hs_make_shard_v's version-2 shards (i < valid). */
static inline int hs_loss_bit(uint32_t r, uint32_t i) { return (r + i) % 3 != 0; }

/* hs_make_shard; loss_bits: a version-2 shard whose row r has bit i set
 * where hs_loss_bit(r, i) (real tokens only). */
static inline int hs_make_shard_v(uint32_t n, uint32_t L, int split, int zstd, int loss_bits, ds_shard_image *img) {
    uint32_t *rows = calloc((size_t)n * L + 1, 4), *valid = calloc(n + 1, 4), *sidx = calloc(n + 2, 4);
    uint32_t *starts = calloc((size_t)n * 2 + 1, 4);
    if (!rows || !valid || !sidx || !starts) return -1;
    uint32_t ns = 0;
    for (uint32_t r = 0; r < n; r++) {
        valid[r] = r % L + 1;
        sidx[r] = ns;
        starts[ns++] = 0;
        if (valid[r] > 3) starts[ns++] = 2;
        for (uint32_t i = 0; i < L; i++) rows[(size_t)r * L + i] = i < valid[r] ? (r * 7 + i) % 299 : 299;
    }
    sidx[n] = ns;
    ds_shard_header h;
    memset(&h, 0, sizeof h);
    h.dtype_bytes = 2;
    h.flags = (split ? DS_SHARD_F_VAL : 0) | (zstd ? DS_SHARD_F_ZSTD : 0);
    h.row_len = L;
    h.n_rows = n;
    h.vocab_size = 300;
    h.pad_id = h.eot_id = 299;
    h.frame_rows = zstd ? 3 : 0;
    for (int i = 0; i < 32; i++) h.fingerprint[i] = (uint8_t)(i * 11);
    char err[256];
    uint64_t lb = ds_shard_loss_row_bytes(L);
    uint8_t *loss = loss_bits ? calloc((size_t)(n * lb) + 1, 1) : NULL;
    for (uint32_t r = 0; loss && r < n; r++)
        for (uint32_t i = 0; i < valid[r]; i++)
            if (hs_loss_bit(r, i)) loss[r * lb + i / 8] |= (uint8_t)(1u << (i % 8));
    int rc = loss_bits && !loss
                 ? DS_ERR_NOMEM
                 : ds_shard_build_image_loss(&h, rows, NULL, valid, sidx, starts, loss, zstd, img, err, sizeof err);
    if (rc != DS_OK) fprintf(stderr, "hs_make_shard: %s\n", err);
    free(rows), free(valid), free(sidx), free(starts), free(loss);
    return rc == DS_OK ? 0 : -1;
}

/* The 264-byte shard of issue 12 item 1: rows 2^40, row length 2^23 with u32
 * ids, document starts near 2^62, sizes chosen so that the old 64-bit size
 * checks wrapped around to the real file size, header checksum recomputed. */
static inline void hs_make_overflow_shard(uint8_t out[264]) {
    memset(out, 0, 264);
    memcpy(out, DS_SHARD_MAGIC, 8);
    hs_put32(out + 8, DS_SHARD_VERSION);
    hs_put32(out + 12, DS_SHARD_HEADER_BYTES);
    hs_put32(out + 16, 4);
    hs_put32(out + 24, 1u << 23);
    hs_put32(out + 28, 1000);
    hs_put32(out + 32, 5);
    hs_put32(out + 36, 5);
    uint64_t n = 1ull << 40, L = 1ull << 23;
    uint64_t tok = n * L * 4;                        /* 2^65 wraps to 0 */
    uint64_t starts = (1ull << 62) - 2 * n - 1 + 16; /* 4 x (2n + 1 + S) = 2^64 + 64 wraps to 64 */
    uint64_t meta = 4 * (2 * n + 1 + starts);
    hs_put64(out + 48, n);
    hs_put64(out + 64, starts);
    hs_put64(out + 72, tok);
    hs_put64(out + 80, meta);
    hs_put64(out + 88, 1); /* 192 + 0 + 64 + 8 = 264 */
    hs_fix_header(out);
}

static inline int hs_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static inline uint8_t *hs_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n + 1 : 1);
    *len = b ? fread(b, 1, (size_t)(n > 0 ? n : 0), f) : 0;
    fclose(f);
    return b;
}

/* A manifest listing shard files (all of split given by splits[i]) with their
 * real rows/bytes/xxh3 read from dir; tokenizer as hs_make_shard writes it.
 * The returned object may be edited before hs_write_manifest. */
static inline json_t *hs_manifest(const char *dir, uint32_t L, const char *const *files, const int *splits, size_t n) {
    json_t *m = json_object();
    json_object_set_new(m, "format", json_string("mkshards-manifest"));
    json_object_set_new(m, "version", json_integer(1));
    json_object_set_new(m, "shard_format_version", json_integer(1));
    json_object_set_new(m, "seq_len", json_integer(L));
    json_object_set_new(m, "dtype", json_string("u16"));
    json_t *tk = json_object();
    uint8_t fp[32];
    char fph[65];
    for (int i = 0; i < 32; i++) fp[i] = (uint8_t)(i * 11);
    ds_shard_hex(fp, 32, fph);
    json_object_set_new(tk, "name", json_string("test"));
    json_object_set_new(tk, "fingerprint", json_string(fph));
    json_object_set_new(tk, "vocab_size", json_integer(300));
    json_object_set_new(tk, "eot_id", json_integer(299));
    json_object_set_new(tk, "pad_id", json_integer(299));
    json_object_set_new(m, "tokenizer", tk);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char p[4096], hx[17];
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        size_t len = 0;
        uint8_t *b = hs_read(p, &len);
        uint64_t rows = b && len >= 192 ? hs_get64(b + 48) : 0, toks = 0;
        if (b && len >= 192 && !(hs_get32(b + 20) & DS_SHARD_F_ZSTD) && hs_get64(b + 72) + 192 <= len)
            for (uint64_t r = 0; r < rows && 192 + hs_get64(b + 72) + 4 * r + 4 <= len; r++)
                toks += hs_get32(b + 192 + hs_get64(b + 72) + 4 * r);
        else if (b && len >= 192) /* zstd: rows r hold r%L+1 tokens (hs_make_shard) */
            for (uint64_t r = 0; r < rows && r < (1u << 20); r++) toks += r % L + 1;
        snprintf(hx, sizeof hx, "%016" PRIx64, b ? (uint64_t)XXH3_64bits(b, len) : 0);
        /* a version-2 shard: the set is version 2 and each shard lists its targets */
        int v2 = b && len >= 192 && hs_get32(b + 8) == DS_SHARD_VERSION_LOSS;
        uint64_t loss = 0, lo = v2 ? 192 + hs_get64(b + 72) + hs_get64(b + 80) : 0, lsz = v2 ? hs_get64(b + 144) : 0;
        for (uint64_t k = 0; v2 && k < lsz && lo + k < len; k++) loss += (uint64_t)__builtin_popcount(b[lo + k]);
        if (v2) json_object_set_new(m, "shard_format_version", json_integer(DS_SHARD_VERSION_LOSS));
        free(b);
        json_t *e = json_object();
        json_object_set_new(e, "file", json_string(files[i]));
        json_object_set_new(e, "split", json_string(splits[i] ? "val" : "train"));
        json_object_set_new(e, "rows", json_integer((json_int_t)rows));
        json_object_set_new(e, "tokens", json_integer((json_int_t)toks));
        if (v2) json_object_set_new(e, "loss_tokens", json_integer((json_int_t)loss));
        json_object_set_new(e, "bytes", json_integer((json_int_t)len));
        json_object_set_new(e, "xxh3", json_string(hx));
        json_array_append_new(arr, e);
    }
    json_object_set_new(m, "shards", arr);
    return m;
}

static inline int hs_write_manifest(const char *dir, json_t *m) {
    char p[4096];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    return json_dump_file(m, p, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
}

/* The config, splits and accounting objects a build writes, consistent with
 * the shards listed in m (so that `mkshards verify` passes on the set). */
static inline void hs_complete_manifest(json_t *m) {
    json_t *sh = json_object_get(m, "shards");
    uint64_t rows[2] = {0, 0}, toks[2] = {0, 0}, n[2] = {0, 0}, loss[2] = {0, 0};
    int v2 = 0;
    for (size_t i = 0; i < json_array_size(sh); i++) {
        json_t *e = json_array_get(sh, i);
        int k = !strcmp(json_string_value(json_object_get(e, "split")), "val");
        rows[k] += (uint64_t)json_integer_value(json_object_get(e, "rows"));
        toks[k] += (uint64_t)json_integer_value(json_object_get(e, "tokens"));
        if (json_object_get(e, "loss_tokens")) v2 = 1;
        loss[k] += (uint64_t)json_integer_value(json_object_get(e, "loss_tokens"));
        n[k]++;
    }
    uint64_t L = (uint64_t)json_integer_value(json_object_get(m, "seq_len"));
    json_error_t je;
    json_t *cfg =
        json_loads("{\"tokenizer\": \"tok.tiktoken\", \"seq_len\": 8, \"pack\": \"concat\", \"over_long\": "
                   "\"truncate\", \"bfd_window_rows\": 1024, \"val_fraction\": 0.01, \"seed\": 0, \"shuffle\": "
                   "false, \"shard_tokens\": 32, \"zstd_level\": 0, \"frame_rows\": 0, \"field\": \"text\", "
                   "\"doc_sep\": \"file\", \"part\": [1, 1], \"inputs\": [\"in.jsonl\"], \"files\": "
                   "[{\"path\": \"in.jsonl\", \"bytes\": 10}]}",
                   0, &je);
    json_object_set_new(cfg, "seq_len", json_integer((json_int_t)L));
    json_object_set_new(m, "config", cfg);
    json_t *sp = json_object();
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object();
        json_object_set_new(o, "shards", json_integer((json_int_t)n[k]));
        json_object_set_new(o, "rows", json_integer((json_int_t)rows[k]));
        json_object_set_new(o, "tokens", json_integer((json_int_t)toks[k]));
        if (v2) json_object_set_new(o, "loss_tokens", json_integer((json_int_t)loss[k]));
        json_object_set_new(sp, k ? "val" : "train", o);
    }
    json_object_set_new(m, "splits", sp);
    uint64_t written = toks[0] + toks[1], pad = (rows[0] + rows[1]) * L - written;
    char txt[2048];
    snprintf(
        txt, sizeof txt,
        "{\"documents\": {\"in\": 3, \"whole\": 3, \"truncated\": 0, \"chunked\": 0, \"dropped\": 0, \"rejected\": 0, "
        "\"train\": 2, \"val\": 1}, \"tokens\": {\"in\": %" PRIu64 ", \"whole\": %" PRIu64 ", \"truncated_kept\": 0, "
        "\"truncated_lost\": 0, \"chunked\": 0, \"dropped\": 0, \"eot\": 0, \"written\": %" PRIu64 ", \"pad\": %" PRIu64
        "}, \"reject_reasons\": {\"zstd-corrupt\": 0, \"json-malformed\": 0, \"field-missing\": 0, "
        "\"field-not-string\": 0, \"record-too-large\": 0, \"utf8-invalid\": 0, \"nul-byte\": 0, \"over-long\": 0}, "
        "\"records\": 3, \"bytes_in\": 10, \"rejected_bytes\": 0, \"pieces\": 0, \"rows\": {\"train\": %" PRIu64
        ", \"val\": %" PRIu64 "}, \"utilisation\": \"0.500000\", \"doc_tokens_log2_hist\": [0, 1, 2]}",
        written, written, written, pad, rows[0], rows[1]);
    json_object_set_new(m, "accounting", json_loads(txt, 0, &je));
    json_object_set_new(m, "rejects", json_string("rejects.jsonl"));
}

#endif
