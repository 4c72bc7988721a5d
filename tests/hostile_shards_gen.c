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
    if (argc == 3 && !strcmp(argv[1], "corpus-shard")) return cmd_corpus_shard(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "corpus-manifest")) return cmd_corpus_manifest(argv[2]);
    fprintf(stderr, "usage: hostile_shards_gen overflow FILE | patch FILE OFF WIDTH VALUE [payload] | rehash DIR |\n"
                    "       corpus-shard DIR | corpus-manifest DIR\n");
    return 64;
}
