/* hostile_shards_gen.c - crafts hostile shard files for tests/cli_hostile_shards.sh
 * and writes the seed corpora of the `shard` and `manifest` fuzz targets.
 *
 *   hostile_shards_gen overflow FILE                 the 264-byte wrap-around shard
 *   hostile_shards_gen patch FILE OFF WIDTH VALUE [payload]
 *                      little-endian WIDTH(4|8)-byte VALUE at OFF, then the header
 *                      checksum (and with "payload" the block table + payload
 *                      checksums) recomputed: only the structural checks can object
 *   hostile_shards_gen rehash DIR                    the manifest's xxh3 and bytes of
 *                      every listed shard set to the files' (a consistent forgery)
 *   hostile_shards_gen lossify DIR                   the set's shards as version 2 (loss bits)
 *   hostile_shards_gen corpus-shard DIR              seeds for fuzz_shard
 *   hostile_shards_gen corpus-manifest DIR           seeds for fuzz_manifest
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostile_shards_util.h"

static int die(const char *m) {
    fprintf(stderr, "hostile_shards_gen: %s\n", m);
    return 1;
}

static int cmd_patch(const char *path, uint64_t off, int width, uint64_t v, int payload) {
    size_t len = 0;
    uint8_t *b = hs_read(path, &len);
    if (!b || off + (uint64_t)width > len || (width != 4 && width != 8)) return die("patch: bad file, offset or width");
    if (width == 4) hs_put32(b + off, (uint32_t)v);
    else hs_put64(b + off, v);
    if (payload) hs_fix_payload(b, len);
    else hs_fix_header(b);
    int rc = hs_write(path, b, len);
    free(b);
    return rc ? die("patch: cannot write") : 0;
}

static int cmd_rehash(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    json_error_t je;
    json_t *m = json_load_file(p, 0, &je);
    if (!m) return die("rehash: cannot read the manifest");
    json_t *sh = json_object_get(m, "shards");
    for (size_t i = 0; i < json_array_size(sh); i++) {
        json_t *e = json_array_get(sh, i);
        char f[4096], hx[17];
        snprintf(f, sizeof f, "%s/%s", dir, json_string_value(json_object_get(e, "file")));
        size_t len = 0;
        uint8_t *b = hs_read(f, &len);
        if (!b) continue;
        snprintf(hx, sizeof hx, "%016" PRIx64, (uint64_t)XXH3_64bits(b, len));
        free(b);
        json_object_set_new(e, "xxh3", json_string(hx));
        json_object_set_new(e, "bytes", json_integer((json_int_t)len));
    }
    int rc = json_dump_file(m, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(m);
    return rc ? die("rehash: cannot write") : 0;
}

/* Rewrite every shard of the set in DIR as a version-2 shard with the same
 * rows, targets where hs_loss_bit(row, position) (real tokens only), and
 * update the manifest (shard_format_version 2, loss_tokens, bytes, xxh3):
 * a valid version-2 set made from a real build, for the CLI and trainer. */
static int cmd_lossify(const char *dir) {
    char p[4096], err[512];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    json_error_t je;
    json_t *m = json_load_file(p, 0, &je);
    if (!m) return die("lossify: cannot read the manifest");
    json_t *sh = json_object_get(m, "shards");
    uint64_t split_loss[2] = {0, 0};
    int rc = 0;
    for (size_t i = 0; i < json_array_size(sh) && !rc; i++) {
        json_t *e = json_array_get(sh, i);
        char f[4096];
        snprintf(f, sizeof f, "%s/%s", dir, json_string_value(json_object_get(e, "file")));
        ds_shard *s = NULL;
        if (ds_shard_open(f, 0, &s, err, sizeof err) != DS_OK) return die(err);
        ds_shard_header h = *ds_shard_get_header(s);
        uint64_t n = h.n_rows, L = h.row_len, lb = ds_shard_loss_row_bytes(h.row_len), loss_n = 0;
        uint32_t *rows = calloc(n * L + 1, 4), *valid = calloc(n + 1, 4), *sidx = calloc(n + 2, 4);
        uint32_t *starts = calloc(n * L + 1, 4);
        uint8_t *loss = calloc(n * lb + 1, 1);
        if (!rows || !valid || !sidx || !starts || !loss) return die("out of memory");
        uint32_t ns = 0;
        for (uint64_t r = 0; r < n && !rc; r++) {
            uint32_t k = 0;
            sidx[r] = ns;
            if (ds_shard_read(s, r, rows + r * L, NULL, NULL, NULL, &valid[r]) != DS_OK ||
                ds_shard_row_starts(s, r, starts + ns, &k) != DS_OK)
                rc = die("lossify: unreadable row");
            ns += k;
            for (uint32_t j = 0; j < valid[r]; j++)
                if (hs_loss_bit((uint32_t)r, j)) loss[r * lb + j / 8] |= (uint8_t)(1u << (j % 8)), loss_n++;
        }
        sidx[n] = ns;
        ds_shard_close(s);
        ds_shard_image img;
        if (!rc && ds_shard_build_image_loss(&h, rows, NULL, valid, sidx, starts, loss, 0, &img, err, sizeof err))
            rc = die(err);
        if (!rc) {
            char hx[17];
            snprintf(hx, sizeof hx, "%016" PRIx64, img.file_xxh3);
            if (hs_write(f, img.data, img.len)) rc = die("lossify: cannot write a shard");
            json_object_set_new(e, "bytes", json_integer((json_int_t)img.len));
            json_object_set_new(e, "xxh3", json_string(hx));
            json_object_set_new(e, "loss_tokens", json_integer((json_int_t)loss_n));
            split_loss[!strcmp(json_string_value(json_object_get(e, "split")), "val")] += loss_n;
            ds_shard_image_free(&img);
        }
        free(rows), free(valid), free(sidx), free(starts), free(loss);
    }
    json_object_set_new(m, "shard_format_version", json_integer(DS_SHARD_VERSION_LOSS));
    for (int k = 0; k < 2; k++)
        json_object_set_new(json_object_get(json_object_get(m, "splits"), k ? "val" : "train"), "loss_tokens",
                            json_integer((json_int_t)split_loss[k]));
    if (!rc && json_dump_file(m, p, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) rc = die("lossify: cannot write");
    json_decref(m);
    return rc;
}

static void seed(const char *dir, const char *name, uint8_t mode, const uint8_t *b, size_t len) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    uint8_t *x = malloc(len + 1);
    x[0] = mode;
    memcpy(x + 1, b, len);
    if (hs_write(p, x, len + 1)) fprintf(stderr, "cannot write %s\n", p);
    free(x);
}

static int cmd_corpus_shard(const char *dir) {
    ds_shard_image img;
    struct {
        const char *name;
        uint32_t n, L;
        int split, zstd;
    } k[] = {{"plain", 5, 8, 0, 0}, {"val", 3, 4, 1, 0}, {"zstd", 7, 8, 0, 3}, {"empty", 0, 8, 0, 0}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (hs_make_shard(k[i].n, k[i].L, k[i].split, k[i].zstd, &img)) return die("cannot make a shard");
        seed(dir, k[i].name, 0, img.data, img.len);
        char nm[64];
        snprintf(nm, sizeof nm, "%s-fixpayload", k[i].name);
        seed(dir, nm, 2, img.data, img.len);
        if (i == 0) { /* a bad valid[] entry and a bad document start, checksums recomputed */
            uint64_t t = hs_get64(img.data + 72);
            hs_put32(img.data + 192 + t + 8, 1000);
            seed(dir, "plain-badvalid", 2, img.data, img.len);
            hs_put32(img.data + 192 + t + 8, 3);
            hs_put32(img.data + 192 + t + 4 * 11, 7);
            seed(dir, "plain-badstart", 2, img.data, img.len);
        }
        ds_shard_image_free(&img);
    }
    /* version 2 (per-token loss bits): valid, compressed, and a bit on padding */
    for (int z = 0; z < 2; z++) {
        if (hs_make_shard_v(6, 8, 0, z ? 3 : 0, 1, &img)) return die("cannot make a version-2 shard");
        seed(dir, z ? "loss-zstd" : "loss", 0, img.data, img.len);
        seed(dir, z ? "loss-zstd-fixpayload" : "loss-fixpayload", 2, img.data, img.len);
        if (!z) { /* row 2 (3 real tokens) with a target at position 7 */
            uint64_t lo = 192 + hs_get64(img.data + 72) + hs_get64(img.data + 80);
            img.data[lo + 2] |= 0x80;
            seed(dir, "loss-padbit", 2, img.data, img.len);
        }
        ds_shard_image_free(&img);
    }
    uint8_t ov[264];
    hs_make_overflow_shard(ov);
    seed(dir, "overflow-264", 1, ov, sizeof ov);
    if (hs_make_shard(5, 8, 0, 0, &img)) return die("cannot make a shard");
    hs_put32(img.data + 12, 64);
    seed(dir, "header-size-64", 1, img.data, img.len);
    hs_put32(img.data + 12, 192);
    hs_put32(img.data + 36, 0xFFFFFFFFu);
    seed(dir, "eot-ffffffff", 1, img.data, img.len);
    seed(dir, "truncated", 0, img.data, 100);
    ds_shard_image_free(&img);
    return 0;
}

static int cmd_corpus_manifest(const char *dir) {
    /* the same two shards fuzz_manifest writes next to each input */
    char tmp[] = "/tmp/hostile_shards_gen_XXXXXX";
    if (!mkdtemp(tmp)) return die("mkdtemp");
    static const char *const files[] = {"train-00000.mks", "val-00000.mks"};
    static const int splits[] = {0, 1};
    char p[4096];
    for (int k = 0; k < 2; k++) {
        ds_shard_image img;
        if (hs_make_shard(4 + k, 8, k, k ? 3 : 0, &img)) return die("cannot make a shard");
        snprintf(p, sizeof p, "%s/%s", tmp, files[k]);
        hs_write(p, img.data, img.len);
        ds_shard_image_free(&img);
    }
    json_t *m = hs_manifest(tmp, 8, files, splits, 2);
    hs_complete_manifest(m);
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", tmp, files[k]);
        unlink(p);
    }
    rmdir(tmp);
    char *txt = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    snprintf(p, sizeof p, "%s/valid.json", dir);
    hs_write(p, txt, strlen(txt));
    free(txt);
    /* variants: one field each */
    json_t *x = json_deep_copy(m);
    json_array_append(json_object_get(x, "shards"), json_array_get(json_object_get(x, "shards"), 0));
    txt = json_dumps(x, JSON_COMPACT | JSON_PRESERVE_ORDER);
    snprintf(p, sizeof p, "%s/listed-twice.json", dir);
    hs_write(p, txt, strlen(txt));
    free(txt), json_decref(x);
    x = json_deep_copy(m);
    json_object_set_new(json_array_get(json_object_get(x, "shards"), 0), "file", json_string("../x/train-00000.mks"));
    txt = json_dumps(x, JSON_COMPACT | JSON_PRESERVE_ORDER);
    snprintf(p, sizeof p, "%s/dotdot.json", dir);
    hs_write(p, txt, strlen(txt));
    free(txt), json_decref(x);
    x = json_deep_copy(m);
    json_object_del(json_object_get(x, "config"), "pack");
    json_t *h = json_array();
    for (int i = 0; i < 70; i++) json_array_append_new(h, json_integer(1));
    json_object_set_new(json_object_get(x, "accounting"), "doc_tokens_log2_hist", h);
    json_object_set_new(json_object_get(x, "config"), "part", json_loads("[0, 2]", 0, NULL));
    txt = json_dumps(x, JSON_COMPACT | JSON_PRESERVE_ORDER);
    snprintf(p, sizeof p, "%s/bad-config.json", dir);
    hs_write(p, txt, strlen(txt));
    free(txt), json_decref(x);
    x = json_deep_copy(m);
    json_object_set_new(x, "seq_len", json_string("8"));
    json_object_set_new(json_object_get(x, "tokenizer"), "eot_id", json_integer(4294967295ll));
    txt = json_dumps(x, JSON_COMPACT | JSON_PRESERVE_ORDER);
    snprintf(p, sizeof p, "%s/mistyped.json", dir);
    hs_write(p, txt, strlen(txt));
    free(txt), json_decref(x);
    x = json_deep_copy(m); /* a version-2 manifest (its shards are version 1: refused, after the parse) */
    json_object_set_new(x, "shard_format_version", json_integer(DS_SHARD_VERSION_LOSS));
    json_object_set_new(json_array_get(json_object_get(x, "shards"), 0), "loss_tokens", json_integer(3));
    json_object_set_new(json_object_get(json_object_get(x, "splits"), "train"), "loss_tokens", json_integer(3));
    txt = json_dumps(x, JSON_COMPACT | JSON_PRESERVE_ORDER);
    snprintf(p, sizeof p, "%s/loss-v2.json", dir);
    hs_write(p, txt, strlen(txt));
    free(txt), json_decref(x);
    snprintf(p, sizeof p, "%s/dupkey.json", dir);
    const char *dk = "{\"format\": \"mkshards-manifest\", \"format\": \"x\", \"shards\": []}";
    hs_write(p, dk, strlen(dk));
    json_decref(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "overflow")) {
        uint8_t ov[264];
        hs_make_overflow_shard(ov);
        return hs_write(argv[2], ov, sizeof ov) ? die("cannot write") : 0;
    }
    if ((argc == 6 || argc == 7) && !strcmp(argv[1], "patch"))
        return cmd_patch(argv[2], strtoull(argv[3], NULL, 0), atoi(argv[4]), strtoull(argv[5], NULL, 0),
                         argc == 7 && !strcmp(argv[6], "payload"));
    if (argc == 3 && !strcmp(argv[1], "rehash")) return cmd_rehash(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "lossify")) return cmd_lossify(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "corpus-shard")) return cmd_corpus_shard(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "corpus-manifest")) return cmd_corpus_manifest(argv[2]);
    fprintf(stderr, "usage: hostile_shards_gen overflow FILE | patch FILE OFF WIDTH VALUE [payload] | rehash DIR |\n"
                    "       lossify DIR | corpus-shard DIR | corpus-manifest DIR\n");
    return 64;
}
