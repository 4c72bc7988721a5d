/* train_hostile_gen.c - crafts hostile trainer inputs at test time (used by
 * tests/train_hostile.sh; nothing crafted is committed except the fuzz seed
 * corpus this program also writes).
 *
 *   train_hostile_gen badid DIR FILE ROW POS ID
 *       set token POS of row ROW of shard DIR/FILE (uncompressed) to ID and
 *       recompute every checksum (blocks, payload, header) and the shard's
 *       xxh3 in DIR/manifest.json: a consistent shard set whose data holds an
 *       id the model cannot index
 *   train_hostile_gen vocab DIR FILE V
 *       set the header vocab_size of DIR/FILE to V (checksums and manifest
 *       xxh3 recomputed; the manifest's vocabulary left alone)
 *   train_hostile_gen firstrow N SEED
 *       the train row the loader reads first (N rows, --seed SEED)
 *   train_hostile_gen ckpt-corpus OUTDIR
 *       the seed corpus of the `ckpt` fuzz target (tests/data/fuzz/ckpt): a
 *       real small checkpoint (tr_ckpt_save, tests/fuzz_ckpt.h layout) and
 *       edge cases derived from it
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ds.h"
#include "fuzz_ckpt.h"
#include "shard_internal.h"
#include "tr.h"

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static int spit(const char *path, const void *b, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(b, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static void put64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void hex_of(uint64_t v, char out[17]) {
    uint8_t b[8];
    for (int q = 0; q < 8; q++) b[q] = (uint8_t)(v >> (56 - 8 * q));
    ds_shard_hex(b, 8, out);
}

/* Recompute the block table, payload/blocks checksums and the header of a
 * shard image whose payload was edited; then replace the shard's xxh3 in the
 * manifest (a plain text substitution of the old hex). */
static int reseal(const char *dir, const char *file, uint8_t *img, size_t len, ds_shard_header *h) {
    char path[4096], mpath[4096], oldx[17], newx[17];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    size_t olen = 0;
    uint8_t *orig = slurp(path, &olen);
    if (!orig) return -1;
    hex_of(ds_xxh3(orig, olen), oldx);
    free(orig);
    uint64_t payload = h->tokens_bytes + h->meta_bytes;
    uint8_t *pay = img + DS_SHARD_HEADER_BYTES, *tab = pay + payload;
    for (uint64_t b = 0; b < h->n_blocks; b++) {
        uint64_t o = b * DS_SHARD_BLOCK_BYTES;
        uint64_t l = payload - o < DS_SHARD_BLOCK_BYTES ? payload - o : DS_SHARD_BLOCK_BYTES;
        put64le(tab + 8 * b, ds_xxh3(pay + o, (size_t)l));
    }
    h->payload_xxh3 = ds_xxh3(pay, (size_t)payload);
    h->blocks_xxh3 = ds_xxh3(tab, (size_t)(8 * h->n_blocks));
    ds_shard_header_encode(h, img);
    hex_of(ds_xxh3(img, len), newx);
    if (spit(path, img, len)) return -1;
    size_t mlen = 0;
    char *m = (char *)slurp(mpath, &mlen);
    if (!m) return -1;
    m[mlen] = 0;
    char *at = strstr(m, oldx);
    if (!at) {
        fprintf(stderr, "xxh3 %s of %s not in the manifest\n", oldx, file);
        free(m);
        return -1;
    }
    memcpy(at, newx, 16);
    int rc = spit(mpath, m, mlen);
    free(m);
    return rc;
}

static int load_shard(const char *dir, const char *file, uint8_t **img, size_t *len, ds_shard_header *h) {
    char path[4096], e[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    *img = slurp(path, len);
    if (!*img || *len < DS_SHARD_HEADER_BYTES || ds_shard_header_decode(*img, h, e, sizeof e) != DS_OK) {
        fprintf(stderr, "%s: cannot read the shard\n", path);
        return -1;
    }
    return 0;
}

static int cmd_badid(const char *dir, const char *file, uint64_t row, uint64_t pos, uint64_t id) {
    uint8_t *img;
    size_t len;
    ds_shard_header h;
    if (load_shard(dir, file, &img, &len, &h)) return 1;
    if ((h.flags & DS_SHARD_F_ZSTD) || row >= h.n_rows || pos >= h.row_len) {
        fprintf(stderr, "badid: needs an uncompressed shard and a row/pos inside it\n");
        return 1;
    }
    uint8_t *t = img + DS_SHARD_HEADER_BYTES + (row * h.row_len + pos) * h.dtype_bytes;
    for (uint32_t i = 0; i < h.dtype_bytes; i++) t[i] = (uint8_t)(id >> (8 * i));
    int rc = reseal(dir, file, img, len, &h);
    free(img);
    return rc ? 1 : 0;
}

static int cmd_vocab(const char *dir, const char *file, uint32_t v) {
    uint8_t *img;
    size_t len;
    ds_shard_header h;
    if (load_shard(dir, file, &img, &len, &h)) return 1;
    h.vocab_size = v;
    int rc = reseal(dir, file, img, len, &h);
    free(img);
    return rc ? 1 : 0;
}

/* ------------------------------------------------------------ ckpt seeds */
static int seed(const char *dir, const char *name, const uint8_t *b, size_t len) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return spit(p, b, len);
}

static int cmd_ckpt_corpus(const char *out) {
    char tmpd[] = "/tmp/ckpt_seedXXXXXX", err[512];
    if (!mkdtemp(tmpd)) return 1;
    static float p[FUZZ_CKPT_PARAMS], am[FUZZ_CKPT_PARAMS], av[FUZZ_CKPT_PARAMS];
    for (int i = 0; i < FUZZ_CKPT_PARAMS; i++) {
        p[i] = (float)i * 0.01f;
        am[i] = (float)i * 1e-4f;
        av[i] = (float)i * 1e-6f;
    }
    tr_ckpt_meta m;
    memset(&m, 0, sizeof m);
    m.step = 5;
    m.loader_pos = 40;
    m.seed = 7;
    tr_rng_seed(&m.rng, 7);
    m.n_layer = 1;
    m.n_head = 1;
    m.n_embd = 4;
    m.max_seq = 8;
    m.seq_len = 8;
    m.vocab_size = 8;
    tr_ckpt_section sec[3] = {{"params", p, sizeof p}, {"adam_m", am, sizeof am}, {"adam_v", av, sizeof av}};
    if (tr_ckpt_save(tmpd, &m, sec, 3, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/ckpt.bin", tmpd);
    size_t len = 0;
    uint8_t *b = slurp(ck, &len);
    unlink(ck);
    rmdir(tmpd);
    if (!b) return 1;
    /* offsets: magic 0, step 8, loader_pos 16, seed 24, rng 32, fingerprint
     * 64, i32 x6 96 (n_layer..vocab), n_sections 120, section table 128 */
    uint8_t *c = malloc(len + 64);
    if (!c) return 1;
    int rc = seed(out, "valid.bin", b, len);
    memcpy(c, b, len);
    memset(c + len, 0xAB, 16);
    rc |= seed(out, "trailing_bytes.bin", c, len + 16);
    rc |= seed(out, "truncated_payload.bin", b, len - 9);
    rc |= seed(out, "header_only.bin", b, 128);
    memcpy(c, b, len);
    put64le(c + 120, 0xFFFFFFFFFFFFFFFFull);
    rc |= seed(out, "n_sections_max.bin", c, len);
    memcpy(c, b, len);
    put64le(c + 128 + 32, 0xFFFFFFFFFFFFFF00ull); /* params bytes: the sum wraps */
    rc |= seed(out, "section_size_wraps.bin", c, len);
    memcpy(c, b, len);
    put64le(c + 120, 2);
    rc |= seed(out, "two_sections.bin", c, len);
    memcpy(c, b, len);
    memset(c + 128, 'x', 32); /* section name without its NUL */
    rc |= seed(out, "name_unterminated.bin", c, len);
    memcpy(c, b, len);
    c[len - 1] ^= 0x40; /* checksum */
    rc |= seed(out, "bad_checksum.bin", c, len);
    memcpy(c, b, len);
    put64le(c + 96, 0x7fffffff7fffffffull); /* n_layer, n_head huge */
    rc |= seed(out, "model_huge.bin", c, len);
    rc |= seed(out, "empty.bin", (const uint8_t *)"", 0);
    free(c);
    free(b);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 7 && !strcmp(argv[1], "badid"))
        return cmd_badid(argv[2], argv[3], strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
                         strtoull(argv[6], NULL, 10));
    if (argc == 5 && !strcmp(argv[1], "vocab"))
        return cmd_vocab(argv[2], argv[3], (uint32_t)strtoul(argv[4], NULL, 10));
    if (argc == 4 && !strcmp(argv[1], "firstrow")) { /* the train row the loader reads first */
        printf("%llu\n", (unsigned long long)tr_row_at(0, strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), 1));
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "ckpt-corpus")) return cmd_ckpt_corpus(argv[2]);
    fprintf(stderr, "usage: %s badid DIR FILE ROW POS ID | vocab DIR FILE V | firstrow N SEED | ckpt-corpus OUTDIR\n",
            argv[0]);
    return 64;
}
