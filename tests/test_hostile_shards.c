/* test_hostile_shards.c - crafted shard files and manifests (issue 12 items
 * 1, 8, 13, 14, 15): ds_shard_open / ds_shard_verify / ds_shardset_open
 * refuse each one with DS_ERR_FORMAT or DS_ERR_IO and a message naming what
 * is wrong, never crash, hang or allocate in proportion to a header field.
 * Every file is crafted here (tests/hostile_shards_util.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostile_shards_util.h"
#include "test_check.h"

static char g_tmp[256];

/* rc of ds_shard_verify on img (written to a file), with err */
static int verify_img(const uint8_t *img, size_t len, char *err, size_t errlen) {
    char p[512];
    snprintf(p, sizeof p, "%s/one.mks", g_tmp);
    CHECK(hs_write(p, img, len) == 0);
    int rc = ds_shard_verify(p, NULL, err, errlen);
    ds_shard *s = NULL;
    char e2[512];
    int rc2 = ds_shard_open(p, DS_SHARD_OPEN_VERIFY, &s, e2, sizeof e2);
    if (rc2 == DS_OK) { /* open accepted: every row read must still be safe */
        const ds_shard_header *h = ds_shard_get_header(s);
        uint32_t *t = malloc(h->row_len * 12ull), *n_valid = t;
        for (uint64_t r = 0; r < h->n_rows; r++)
            ds_shard_read(s, r, t, t + h->row_len, t + 2 * h->row_len, NULL, n_valid);
        free(t);
        ds_shard_close(s);
    }
    return rc;
}

/* header field at off (width 4 or 8) set to v, header checksum recomputed:
 * verify must fail with a message containing want */
static void header_case(const char *what, size_t off, int width, uint64_t v, const char *want) {
    ds_shard_image img;
    CHECK(hs_make_shard(5, 8, 0, 0, &img) == 0);
    if (width == 4) hs_put32(img.data + off, (uint32_t)v);
    else hs_put64(img.data + off, v);
    hs_fix_header(img.data);
    char err[512] = "";
    int rc = verify_img(img.data, img.len, err, sizeof err);
    CHECK(rc == DS_ERR_FORMAT, "%s: rc %d (%s)", what, rc, err);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", what, err, want);
    printf("ok   %-36s %s\n", what, err);
    ds_shard_image_free(&img);
}

static void test_headers(void) {
    /* the 264-byte wrap-around shard */
    uint8_t ov[264];
    hs_make_overflow_shard(ov);
    char err[512] = "";
    CHECK(verify_img(ov, sizeof ov, err, sizeof err) == DS_ERR_FORMAT, "%s", err);
    CHECK(strstr(err, "row length 8388608") || strstr(err, "exceed"), "%s", err);
    printf("ok   %-36s %s\n", "264-byte overflow shard", err);
    /* same, with the row length in range: the row count is refused */
    hs_put32(ov + 24, 1u << 20);
    hs_fix_header(ov);
    CHECK(verify_img(ov, sizeof ov, err, sizeof err) == DS_ERR_FORMAT);
    CHECK(strstr(err, "offset 48") != NULL, "%s", err);
    printf("ok   %-36s %s\n", "2^40 rows", err);

    header_case("header size 64", 12, 4, 64, "offset 12: header size 64");
    header_case("version 3", 8, 4, 3, "unsupported shard version 3");
    header_case("version 2 without its loss section", 8, 4, 2, "offset 144: loss section of 0 bytes");
    header_case("dtype 3", 16, 4, 3, "dtype bytes 3");
    header_case("unknown flag bit", 20, 4, 1u << 5, "unknown flag bits 0x20");
    header_case("row length 0", 24, 4, 0, "row length 0");
    header_case("row length 2^24+1", 24, 4, (1u << 24) + 1, "row length 16777217");
    header_case("vocab 0", 28, 4, 0, "vocab size 0");
    header_case("vocab 2^31", 28, 4, 1u << 31, "vocab size 2147483648");
    header_case("u16 with vocab 70000", 28, 4, 70000, "dtype u16 cannot hold");
    header_case("pad id >= vocab", 32, 4, 300, "pad id 300 >= vocab size 300");
    header_case("EOT id 0xFFFFFFFF", 36, 4, 0xFFFFFFFFu, "EOT id 4294967295 >= vocab size");
    header_case("frame rows on uncompressed", 40, 4, 3, "frame fields");
    header_case("frames on uncompressed", 56, 8, 2, "frame fields");
    header_case("reserved u32", 44, 4, 1, "offset 44: reserved");
    header_case("reserved bytes", 150, 4, 7, "offset 150: reserved");
    header_case("rows 2^33", 48, 8, 1ull << 33, "offset 48");
    header_case("rows +1", 48, 8, 6, "offset 72");
    header_case("starts near 2^62", 64, 8, (1ull << 62) - 3, "offset 64");
    header_case("starts +1", 64, 8, 9, "offset 80");
    header_case("token bytes 2^64-1", 72, 8, ~0ull, "offset 72");
    header_case("meta bytes 2^63", 80, 8, 1ull << 63, "offset 80");
    header_case("blocks 2^61", 88, 8, 1ull << 61, "offset 88");

    /* zstd: frame rows so large that one frame decodes to > 256 MiB */
    ds_shard_image img;
    CHECK(hs_make_shard(7, 8, 0, 3, &img) == 0);
    CHECK(verify_img(img.data, img.len, err, sizeof err) == DS_OK, "%s", err);
    hs_put32(img.data + 24, 1u << 24); /* row length 2^24, 3 rows per frame x u16 = 96 MiB: ok, but ... */
    hs_put32(img.data + 40, 16);       /* ... 7 rows per frame (min(frame_rows, rows)) = 224 MiB: size check */
    hs_fix_header(img.data);
    CHECK(verify_img(img.data, img.len, err, sizeof err) == DS_ERR_FORMAT);
    printf("ok   %-36s %s\n", "zstd frame fields", err);
    hs_put32(img.data + 16, 4);
    hs_put32(img.data + 28, 70000);
    hs_fix_header(img.data);
    CHECK(verify_img(img.data, img.len, err, sizeof err) == DS_ERR_FORMAT);
    CHECK(strstr(err, "exceed 268435456 bytes decoded") != NULL, "%s", err);
    printf("ok   %-36s %s\n", "zstd frame > 256 MiB", err);
    ds_shard_image_free(&img);
    /* zstd frame offsets out of range with every checksum recomputed */
    CHECK(hs_make_shard(7, 8, 0, 3, &img) == 0);
    uint64_t t = hs_get64(img.data + 72), s = hs_get64(img.data + 64);
    uint8_t *foff = img.data + 192 + t + 4 * (2 * 7 + 1 + s);
    hs_put64(foff + 8, ~0ull);
    hs_fix_payload(img.data, img.len);
    CHECK(verify_img(img.data, img.len, err, sizeof err) == DS_ERR_FORMAT);
    CHECK(strstr(err, "bad zstd frame offset") != NULL, "%s", err);
    printf("ok   %-36s %s\n", "zstd frame offset 2^64-1", err);
    ds_shard_image_free(&img);

    /* valid[] of row 2 beyond the row length, checksums recomputed: open
     * succeeds (cheap checks), reading that row fails, verify names it */
    CHECK(hs_make_shard(5, 8, 0, 0, &img) == 0);
    t = hs_get64(img.data + 72);
    hs_put32(img.data + 192 + t + 4 * 2, 1000);
    hs_fix_payload(img.data, img.len);
    char p[512];
    snprintf(p, sizeof p, "%s/valid.mks", g_tmp);
    CHECK(hs_write(p, img.data, img.len) == 0);
    ds_shard *sh = NULL;
    CHECK(ds_shard_open(p, DS_SHARD_OPEN_VERIFY, &sh, err, sizeof err) == DS_OK, "%s", err);
    uint32_t tok[8], nv = 12345;
    CHECK(ds_shard_read(sh, 1, tok, NULL, NULL, NULL, &nv) == DS_OK && nv == 2);
    CHECK(ds_shard_read(sh, 2, tok, NULL, NULL, NULL, &nv) == DS_ERR_FORMAT);
    ds_shard_close(sh);
    CHECK(ds_shard_verify(p, NULL, err, sizeof err) == DS_ERR_FORMAT);
    CHECK(strstr(err, "row 2 claims 1000 valid tokens") != NULL, "%s", err);
    printf("ok   %-36s %s\n", "valid[2] = 1000", err);
    ds_shard_image_free(&img);

    /* the writer refuses what the reader would refuse */
    ds_shard_header h;
    memset(&h, 0, sizeof h);
    h.dtype_bytes = 2, h.row_len = 4, h.n_rows = 1, h.vocab_size = 10, h.eot_id = h.pad_id = 10;
    uint32_t rows[4] = {0}, valid[1] = {0}, sidx[2] = {0, 0};
    CHECK(ds_shard_build_image(&h, rows, NULL, valid, sidx, NULL, 0, &img, err, sizeof err) == DS_ERR_ARG);
    h.eot_id = h.pad_id = 9, h.flags = 1u << 7;
    CHECK(ds_shard_build_image(&h, rows, NULL, valid, sidx, NULL, 0, &img, err, sizeof err) == DS_ERR_ARG);
}

/* a fresh set folder with train-00000.mks, train-00001.mks, val-00000.mks */
static void make_set(const char *dir, json_t **man) {
    char cmd[600], p[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0);
    static const char *const files[] = {"train-00000.mks", "train-00001.mks", "val-00000.mks"};
    static const int splits[] = {0, 0, 1};
    for (int i = 0; i < 3; i++) {
        ds_shard_image img;
        CHECK(hs_make_shard(4 + i, 8, splits[i], i == 1 ? 3 : 0, &img) == 0);
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECK(hs_write(p, img.data, img.len) == 0);
        ds_shard_image_free(&img);
    }
    *man = hs_manifest(dir, 8, files, splits, 3);
}

/* ds_shardset_open(dir) with flags 0 and VERIFY: want_rc and message */
static void set_case(const char *what, const char *dir, json_t *man, int want_rc, const char *want) {
    if (man) CHECK(hs_write_manifest(dir, man) == 0);
    for (int v = 0; v < 2; v++) {
        ds_shardset *set = NULL;
        char err[1024] = "";
        int rc = ds_shardset_open(dir, v ? DS_SHARD_OPEN_VERIFY : 0, &set, err, sizeof err);
        CHECK(rc == want_rc, "%s: rc %d want %d (%s)", what, rc, want_rc, err);
        if (want) CHECK(strstr(err, want) != NULL, "%s: message '%s' lacks '%s'", what, err, want);
        if (rc == DS_OK) {
            ds_shardset_info in;
            ds_shardset_get_info(set, &in);
            uint32_t tok[8];
            for (uint64_t r = 0; r < ds_shardset_rows(set, DS_SPLIT_TRAIN); r++)
                CHECK(ds_shardset_read(set, DS_SPLIT_TRAIN, r, tok, NULL, NULL, NULL) == DS_OK);
        }
        ds_shardset_close(set);
        if (v == 0) printf("%s   %-36s %s\n", rc == want_rc ? "ok" : "FAIL", what, err);
    }
}

static json_t *shard_entry(json_t *m, size_t i) { return json_array_get(json_object_get(m, "shards"), i); }

static void test_sets(void) {
    char dir[512], p[600], q[600];
    snprintf(dir, sizeof dir, "%s/set", g_tmp);
    json_t *m;
    make_set(dir, &m);
    set_case("valid set", dir, m, DS_OK, NULL);

    /* the overflow shard under a manifest with its matching xxh3 */
    uint8_t ov[264];
    hs_make_overflow_shard(ov);
    snprintf(p, sizeof p, "%s/train-00001.mks", dir);
    CHECK(hs_write(p, ov, sizeof ov) == 0);
    json_decref(m);
    static const char *const files[] = {"train-00000.mks", "train-00001.mks", "val-00000.mks"};
    static const int splits[] = {0, 0, 1};
    m = hs_manifest(dir, 8, files, splits, 3);
    json_object_set_new(shard_entry(m, 1), "rows", json_integer(0)); /* rows 2^40 is out of the manifest's range */
    set_case("overflow shard, matching xxh3", dir, m, DS_ERR_FORMAT, "train-00001.mks");
    json_decref(m);

    struct {
        const char *what, *file, *want;
    } names[] = {{"../ in a shard name", "../set/train-00000.mks", "not a plain file name"},
                 {"'/' in a shard name", "sub/train-00000.mks", "holds '/'"},
                 {"absolute shard name", "/etc/passwd", "holds '/'"},
                 {"'..' shard name", "..", "holds '..'"},
                 {"empty shard name", "", "empty"},
                 {"hidden shard name", ".train-00000.mks", "starts with '.'"},
                 {"control byte in a name", "train\n00000.mks", "control byte"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        make_set(dir, &m);
        json_object_set_new(shard_entry(m, 1), "file", json_string(names[i].file));
        set_case(names[i].what, dir, m, DS_ERR_FORMAT, names[i].want);
        json_decref(m);
    }
    make_set(dir, &m);
    json_object_set_new(shard_entry(m, 1), "file", json_stringn("train-00000.mks\0x", 17));
    set_case("NUL in a shard name", dir, m, DS_ERR_FORMAT, "NUL"); /* jansson already refuses \u0000 */
    json_decref(m);
    make_set(dir, &m);
    char longname[300];
    memset(longname, 'a', 299);
    longname[299] = 0;
    json_object_set_new(shard_entry(m, 1), "file", json_string(longname));
    set_case("name over NAME_MAX", dir, m, DS_ERR_FORMAT, "NAME_MAX");
    json_decref(m);

    /* a shard listed twice: by name, and one file under two names */
    make_set(dir, &m);
    json_array_append(json_object_get(m, "shards"), shard_entry(m, 0));
    set_case("shard listed twice", dir, m, DS_ERR_FORMAT, "train-00000.mks is listed twice");
    json_decref(m);
    make_set(dir, &m);
    snprintf(p, sizeof p, "%s/train-00000.mks", dir);
    snprintf(q, sizeof q, "%s/train-00009.mks", dir);
    CHECK(link(p, q) == 0);
    json_t *dup = json_deep_copy(shard_entry(m, 0));
    json_object_set_new(dup, "file", json_string("train-00009.mks"));
    json_array_insert_new(json_object_get(m, "shards"), 2, dup);
    set_case("hard link listed twice", dir, m, DS_ERR_FORMAT, "are the same file");
    json_decref(m);

    /* fields of the wrong type or range */
    struct {
        const char *what, *path, *json, *want;
    } fields[] = {
        {"seq_len a string", "seq_len", "\"8\"", "seq_len"},
        {"seq_len 0", "seq_len", "0", "seq_len"},
        {"seq_len 2^40", "seq_len", "1099511627776", "seq_len"},
        {"vocab -1", "tokenizer.vocab_size", "-1", "vocab_size"},
        {"eot 2^32-1", "tokenizer.eot_id", "4294967295", "eot_id"},
        {"fingerprint short", "tokenizer.fingerprint", "\"abcd\"", "fingerprint"},
        {"dtype u32 for vocab 300", "dtype", "\"u32\"", "dtype"},
        {"version 2", "version", "2", "version"},
        {"format other", "format", "\"x\"", "not a mkshards manifest"},
        {"shards an object", "shards", "{}", "shards"},
        {"rows negative", "shards.0.rows", "-5", "rows"},
        {"rows 2^62", "shards.0.rows", "4611686018427387904", "rows"},
        {"rows a real", "shards.0.rows", "4.0", "rows"},
        {"rows off by one", "shards.0.rows", "5", "rows in the header disagrees"},
        {"tokens > rows x L", "shards.0.tokens", "1000", "tokens"},
        {"bytes wrong", "shards.0.bytes", "300", "file size in the header disagrees"},
        {"xxh3 not hex", "shards.0.xxh3", "\"zz\"", "xxh3"},
        {"split other", "shards.0.split", "\"test\"", "split"},
        {"split swapped", "shards.2.split", "\"train\"", "split in the header disagrees"},
        {"file a number", "shards.0.file", "7", "file"},
        {"eot differs from header", "tokenizer.eot_id", "5", "EOT id in the header"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        make_set(dir, &m);
        json_t *o = m;
        char path[64];
        snprintf(path, sizeof path, "%s", fields[i].path);
        char *k = strtok(path, "."), *next;
        while ((next = strtok(NULL, "."))) {
            o = json_is_array(o) ? json_array_get(o, (size_t)atoi(k)) : json_object_get(o, k);
            k = next;
        }
        json_error_t je;
        json_t *v = json_loads(fields[i].json, JSON_DECODE_ANY, &je);
        CHECK(v != NULL, "%s", fields[i].json);
        json_object_set_new(o, k, v);
        set_case(fields[i].what, dir, m, DS_ERR_FORMAT, fields[i].want);
        json_decref(m);
    }
    /* xxh3 consistent with a different file: only VERIFY sees it */
    make_set(dir, &m);
    json_object_set_new(shard_entry(m, 0), "xxh3", json_string("0123456789abcdef"));
    CHECK(hs_write_manifest(dir, m) == 0);
    ds_shardset *set = NULL;
    char err[1024];
    CHECK(ds_shardset_open(dir, 0, &set, err, sizeof err) == DS_OK, "%s", err);
    ds_shardset_close(set);
    CHECK(ds_shardset_open(dir, DS_SHARD_OPEN_VERIFY, &set, err, sizeof err) == DS_ERR_FORMAT);
    CHECK(strstr(err, "differs from the manifest's 0123456789abcdef") != NULL, "%s", err);
    json_decref(m);

    /* raw manifest texts */
    struct {
        const char *what, *text, *want;
    } raw[] = {{"duplicate key", "{\"format\": \"mkshards-manifest\", \"format\": \"mkshards-manifest\"}", "duplicate"},
               {"not JSON", "{\"format\": ", "manifest.json"},
               {"an array", "[1, 2]", "not a JSON object"},
               {"deep nesting", NULL, "manifest.json"},
               {"empty file", "", "manifest.json"}};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        make_set(dir, &m);
        json_decref(m);
        snprintf(p, sizeof p, "%s/manifest.json", dir);
        if (raw[i].text) CHECK(hs_write(p, raw[i].text, strlen(raw[i].text)) == 0);
        else {
            static char deep[200001];
            memset(deep, '[', 100000);
            memset(deep + 100000, ']', 100000);
            CHECK(hs_write(p, deep, 200000) == 0);
        }
        set_case(raw[i].what, dir, NULL, DS_ERR_FORMAT, raw[i].want);
    }
    /* a manifest over the size limit is refused before it is read (sparse) */
    make_set(dir, &m);
    CHECK(hs_write_manifest(dir, m) == 0);
    json_decref(m);
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    int fd = open(p, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)DS_MANIFEST_MAX_BYTES + 1) == 0);
    close(fd);
    set_case("manifest over 256 MiB", dir, NULL, DS_ERR_FORMAT, "limit");

    /* special files: FIFO manifest, FIFO shard, FIFO / file as the folder */
    make_set(dir, &m);
    CHECK(hs_write_manifest(dir, m) == 0);
    snprintf(p, sizeof p, "%s/val-00000.mks", dir);
    unlink(p);
    CHECK(mkfifo(p, 0600) == 0);
    set_case("FIFO as a shard", dir, NULL, DS_ERR_IO, "val-00000.mks: not a regular file");
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    unlink(p);
    CHECK(mkfifo(p, 0600) == 0);
    set_case("FIFO as manifest.json", dir, NULL, DS_ERR_IO, "manifest.json: not a regular file");
    unlink(p);
    CHECK(mkdir(p, 0700) == 0);
    set_case("folder as manifest.json", dir, NULL, DS_ERR_IO, "not a regular file");
    rmdir(p);
    set_case("no manifest.json", dir, NULL, DS_ERR_IO, "manifest.json");
    json_decref(m);
    snprintf(p, sizeof p, "%s/fifo_dir", g_tmp);
    CHECK(mkfifo(p, 0600) == 0);
    set_case("FIFO as the set folder", p, NULL, DS_ERR_IO, "not a directory");
    snprintf(p, sizeof p, "%s/valid.mks", g_tmp);
    set_case("a file as the set folder", p, NULL, DS_ERR_IO, "not a directory");
    /* a FIFO passed to ds_shard_open / ds_shard_verify directly */
    snprintf(p, sizeof p, "%s/fifo_dir", g_tmp);
    ds_shard *s = NULL;
    CHECK(ds_shard_open(p, 0, &s, err, sizeof err) == DS_ERR_IO && strstr(err, "not a regular file"), "%s", err);
    CHECK(ds_shard_verify(p, NULL, err, sizeof err) == DS_ERR_IO);
}

/* ---- issue 32 item 10: row metadata and ids that `verify` refuses, with
 * every checksum recomputed (the shard opens with DS_SHARD_OPEN_VERIFY):
 * each read that returns them refuses them too, with verify's reason, and
 * ds_shardset_open(DS_SHARD_OPEN_FULL) refuses the set. */

/* A shard of n rows of L u16 ids (vocab 300, pad 299) where row r holds
 * r%L+1 real tokens, starts at 0 and 2 when over 3; bad_row/bad_pos/bad_id:
 * one id put in (bad_row < 0: none). zstd: frames of 3 rows. */
static void row_shard(uint32_t n, uint32_t L, int zstd, int bad_row, uint32_t bad_pos, uint32_t bad_id,
                      ds_shard_image *img) {
    uint32_t *rows = calloc((size_t)n * L, 4), *valid = calloc(n, 4), *sidx = calloc(n + 1, 4);
    uint32_t *starts = calloc((size_t)n * 2, 4), ns = 0;
    CHECK(rows && valid && sidx && starts);
    for (uint32_t r = 0; r < n; r++) {
        valid[r] = r % L + 1;
        sidx[r] = ns;
        starts[ns++] = 0;
        if (valid[r] > 3) starts[ns++] = 2;
        for (uint32_t i = 0; i < L; i++) rows[(size_t)r * L + i] = i < valid[r] ? (r * 7 + i) % 299 : 299;
    }
    sidx[n] = ns;
    if (bad_row >= 0) rows[(size_t)bad_row * L + bad_pos] = bad_id;
    ds_shard_header h;
    memset(&h, 0, sizeof h);
    h.dtype_bytes = 2;
    h.flags = zstd ? DS_SHARD_F_ZSTD : 0;
    h.row_len = L;
    h.n_rows = n;
    h.vocab_size = 300;
    h.pad_id = h.eot_id = 299;
    h.frame_rows = zstd ? 3 : 0;
    for (int i = 0; i < 32; i++) h.fingerprint[i] = (uint8_t)(i * 11);
    char err[256];
    CHECK(ds_shard_build_image(&h, rows, NULL, valid, sidx, starts, zstd ? 3 : 0, img, err, sizeof err) == DS_OK, "%s",
          err);
    free(rows), free(valid), free(sidx), free(starts);
}

/* Byte offset of the document-start entry k of img (uncompressed or not). */
static size_t start_off(const ds_shard_image *img, uint32_t k) {
    uint64_t n = hs_get64(img->data + 48), tb = hs_get64(img->data + 72);
    return (size_t)(DS_SHARD_HEADER_BYTES + tb + 4 * (2 * n + 1) + 4 * (uint64_t)k);
}

/* img (checksums fixed) as train-00000.mks of a set with a matching manifest:
 * the cheap and hashing opens accept it; row `row` read with tokens and the
 * position arrays, ds_shard_verify and the full open all refuse it with want. */
static void row_case(const char *what, ds_shard_image *img, uint64_t row, const char *want) {
    char dir[512], p[1100], err[1024] = "";
    int failures0 = failures;
    snprintf(dir, sizeof dir, "%s/rowset", g_tmp);
    snprintf(p, sizeof p, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(p) == 0);
    snprintf(p, sizeof p, "%s/train-00000.mks", dir);
    CHECK(hs_write(p, img->data, img->len) == 0);
    static const char *const files[] = {"train-00000.mks"};
    static const int splits[] = {0};
    json_t *m = hs_manifest(dir, 8, files, splits, 1);
    hs_complete_manifest(m);
    CHECK(hs_write_manifest(dir, m) == 0);
    json_decref(m);

    ds_shard *s = NULL;
    CHECK(ds_shard_open(p, DS_SHARD_OPEN_VERIFY, &s, err, sizeof err) == DS_OK, "%s: %s", what, err);
    uint32_t t[8], pos[8], doc[8], nv = 0;
    uint8_t mask[8];
    int rc = s ? ds_shard_read_msg(s, row, t, pos, doc, mask, &nv, err, sizeof err) : -1;
    CHECK(rc == DS_ERR_FORMAT && strstr(err, want), "%s: ds_shard_read rc %d (%s), want '%s'", what, rc, err, want);
    CHECK(s && ds_shard_read(s, row, t, NULL, NULL, NULL, NULL) == DS_ERR_FORMAT, "%s: tokens only", what);
    ds_shard_close(s);
    rc = ds_shard_verify(p, NULL, err, sizeof err);
    CHECK(rc == DS_ERR_FORMAT && strstr(err, want), "%s: verify rc %d (%s)", what, rc, err);

    ds_shardset *set = NULL;
    CHECK(ds_shardset_open(dir, DS_SHARD_OPEN_VERIFY, &set, err, sizeof err) == DS_OK, "%s: %s", what, err);
    rc = set ? ds_shardset_read_msg(set, DS_SPLIT_TRAIN, row, t, pos, doc, mask, err, sizeof err) : -1;
    CHECK(rc == DS_ERR_FORMAT && strstr(err, "train-00000.mks: ") && strstr(err, want),
          "%s: ds_shardset_read rc %d (%s)", what, rc, err);
    ds_shardset_close(set);
    set = NULL;
    rc = ds_shardset_open(dir, DS_SHARD_OPEN_FULL, &set, err, sizeof err);
    CHECK(rc == DS_ERR_FORMAT && strstr(err, want) && !set, "%s: full open rc %d (%s)", what, rc, err);
    ds_shardset_close(set);
    printf("%s %-36s %s\n", failures == failures0 ? "ok  " : "FAIL", what, err);
}

static void test_rows(void) {
    ds_shard_image img;
    /* the valid set opens fully and every row reads */
    row_shard(6, 8, 0, -1, 0, 0, &img);
    {
        char dir[512], p[1100], err[1024] = "";
        snprintf(dir, sizeof dir, "%s/rowok", g_tmp);
        snprintf(p, sizeof p, "mkdir -p '%s'", dir);
        CHECK(system(p) == 0);
        snprintf(p, sizeof p, "%s/train-00000.mks", dir);
        CHECK(hs_write(p, img.data, img.len) == 0);
        static const char *const files[] = {"train-00000.mks"};
        static const int splits[] = {0};
        json_t *m = hs_manifest(dir, 8, files, splits, 1);
        hs_complete_manifest(m);
        CHECK(hs_write_manifest(dir, m) == 0);
        json_decref(m);
        ds_shardset *set = NULL;
        CHECK(ds_shardset_open(dir, DS_SHARD_OPEN_FULL, &set, err, sizeof err) == DS_OK, "%s", err);
        uint32_t t[8], pos[8], doc[8];
        for (uint64_t r = 0; set && r < 6; r++)
            CHECK(ds_shardset_read_msg(set, DS_SPLIT_TRAIN, r, t, pos, doc, NULL, err, sizeof err) == DS_OK, "%s", err);
        ds_shardset_close(set);
    }
    /* row 4: 5 valid tokens, starts 0 and 2 (entries 5 and 6 of the table:
     * rows 0-2 hold one start each, row 3 two) */
    hs_put32(img.data + start_off(&img, 6), 7);
    hs_fix_payload(img.data, img.len);
    row_case("document start beyond the valid tokens", &img, 4, "row 4 document start 7 invalid");
    ds_shard_image_free(&img);
    row_shard(6, 8, 0, -1, 0, 0, &img);
    hs_put32(img.data + start_off(&img, 5), 3); /* 3, 2: out of order */
    hs_fix_payload(img.data, img.len);
    row_case("document starts out of order", &img, 4, "row 4 document start 2 invalid");
    ds_shard_image_free(&img);
    row_shard(6, 8, 0, 1, 0, 400, &img);
    row_case("id >= vocabulary in a real position", &img, 1, "token id 400 is outside the vocabulary of 300 ids");
    ds_shard_image_free(&img);
    row_shard(6, 8, 0, 0, 5, 7, &img);
    row_case("padding that is not the pad id", &img, 0, "position 5: token id 7 is padding that is not the pad id");
    ds_shard_image_free(&img);
    row_shard(6, 8, 1, 4, 1, 65535, &img);
    row_case("id >= vocabulary in a zstd frame", &img, 4, "row 4 position 1 (compressed): token id 65535");
    ds_shard_image_free(&img);
    /* ds_shard_row_starts (merge) refuses the same starts */
    row_shard(6, 8, 0, -1, 0, 0, &img);
    hs_put32(img.data + start_off(&img, 6), 7);
    hs_fix_payload(img.data, img.len);
    char p[600], err[512];
    snprintf(p, sizeof p, "%s/starts.mks", g_tmp);
    CHECK(hs_write(p, img.data, img.len) == 0);
    ds_shard *s = NULL;
    CHECK(ds_shard_open(p, DS_SHARD_OPEN_VERIFY, &s, err, sizeof err) == DS_OK, "%s", err);
    uint32_t st[8], nst = 0;
    CHECK(s && ds_shard_row_starts(s, 4, st, &nst) == DS_ERR_FORMAT);
    CHECK(s && ds_shard_row_starts(s, 2, st, &nst) == DS_OK && nst == 1 && st[0] == 0);
    ds_shard_close(s);
    ds_shard_image_free(&img);
}

/* ---- issue 32 items 8, 9: ds_check_output, the one check of every writer */
static void out_case(const char *what, const char *out, const ds_read_paths *in, int want_rc, const char *want) {
    char err[1024] = "";
    int rc = ds_check_output("--out", out, in, err, sizeof err);
    CHECK(rc == want_rc && (!want || strstr(err, want)), "%s: rc %d want %d (%s), want '%s'", what, rc, want_rc, err,
          want ? want : "");
    printf("%s %-36s %s\n", rc == want_rc ? "ok  " : "FAIL", what, err);
}

static void test_outputs(void) {
    char d[512], set[600], tok[600], side[700], cmd[9000], p[700], q[700];
    snprintf(d, sizeof d, "%s/outs", g_tmp);
    snprintf(set, sizeof set, "%s/set", d);
    snprintf(tok, sizeof tok, "%s/tok.tiktoken", d);
    snprintf(side, sizeof side, "%s.meta.json", tok);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/in/sub' '%s' && echo x >'%s/in/a.jsonl' && echo t >'%s' && echo m >'%s' && "
             "echo r >'%s/rejects.jsonl' && echo s >'%s/train-00000.mks' && ln '%s/rejects.jsonl' '%s/hard.jsonl' && "
             "ln -s '%s/rejects.jsonl' '%s/sym.jsonl'",
             d, set, d, tok, side, set, set, set, d, set, d);
    CHECK(system(cmd) == 0);
    snprintf(p, sizeof p, "%s/in", d);
    const char *ins[] = {p, "-", NULL};
    const char *sets[] = {set};
    ds_read_paths in = {.inputs = ins, .n_inputs = 3, .tokenizer = tok, .sets = sets, .n_sets = 1};
    snprintf(q, sizeof q, "%s/in/a.jsonl", d);
    out_case("a file of an input folder", q, &in, DS_ERR_CONFLICT, "lies inside the input folder");
    snprintf(q, sizeof q, "%s/in/sub/new.svg", d);
    out_case("a new file deep in an input folder", q, &in, DS_ERR_CONFLICT, "lies inside the input folder");
    out_case("the tokenizer file", tok, &in, DS_ERR_CONFLICT, "is the same file as the tokenizer file");
    out_case("the tokenizer's sidecar", side, &in, DS_ERR_CONFLICT, "is the same file as the tokenizer file");
    snprintf(q, sizeof q, "%s/rejects.jsonl", set);
    out_case("a shard set's rejects.jsonl", q, &in, DS_ERR_CONFLICT, "lies inside the shard set");
    snprintf(q, sizeof q, "%s/hard.jsonl", d);
    out_case("a hard link to a file of the set", q, &in, DS_ERR_CONFLICT, "rejects.jsonl' of the shard set");
    snprintf(q, sizeof q, "%s/sym.jsonl", d);
    out_case("a symbolic link into the set", q, &in, DS_ERR_CONFLICT, "lies inside the shard set");
    snprintf(q, sizeof q, "%s/new.svg", d);
    out_case("a new file elsewhere", q, &in, DS_OK, NULL);
    out_case("stdout", "-", &in, DS_OK, NULL);
    in.set_what = "the data folder";
    snprintf(q, sizeof q, "%s/ck", set);
    out_case("named as the caller names sets", q, &in, DS_ERR_CONFLICT, "lies inside the data folder");
    /* a vocabulary name: its files in $MKS_VOCAB_DIR */
    setenv("MKS_VOCAB_DIR", d, 1);
    ds_read_paths byname = {.tokenizer = "tok"};
    out_case("a tokenizer named, found in the vocab folder", tok, &byname, DS_ERR_CONFLICT, "the tokenizer file");
    char paths[DS_TK_SOURCES_MAX][DS_PATH_BYTES];
    CHECK(ds_tokenizer_sources(tok, paths, DS_TK_SOURCES_MAX) == 2 && !strcmp(paths[1], side));
    unsetenv("MKS_VOCAB_DIR");
}

/* ---- version-2 shards: the per-token loss bits (issue 28 item 3) */

/* a one-shard v2 set in g_tmp/lossset from img; returns its manifest (to edit) */
static json_t *loss_set(const char *dir, const ds_shard_image *img) {
    char p[1100];
    snprintf(p, sizeof p, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(p) == 0);
    snprintf(p, sizeof p, "%s/train-00000.mks", dir);
    CHECK(hs_write(p, img->data, img->len) == 0);
    static const char *const files[] = {"train-00000.mks"};
    static const int splits[] = {0};
    json_t *m = hs_manifest(dir, 8, files, splits, 1);
    hs_complete_manifest(m);
    return m;
}

static void test_loss_bits(void) {
    char dir[512], p[600], err[1024] = "";
    snprintf(dir, sizeof dir, "%s/lossset", g_tmp);
    snprintf(p, sizeof p, "%s/train-00000.mks", dir);
    ds_shard_image img;
    /* the valid set: every check passes and the masks read back as made */
    CHECK(hs_make_shard_v(6, 8, 0, 0, 1, &img) == 0);
    json_t *m = loss_set(dir, &img);
    CHECK(hs_write_manifest(dir, m) == 0);
    ds_shardset *set = NULL;
    CHECK(ds_shardset_open(dir, DS_SHARD_OPEN_FULL, &set, err, sizeof err) == DS_OK, "%s", err);
    uint64_t targets = 0;
    for (uint64_t r = 0; set && r < 6; r++) {
        uint8_t mask[8];
        CHECK(ds_shardset_read(set, DS_SPLIT_TRAIN, r, NULL, NULL, NULL, mask) == DS_OK);
        for (uint32_t i = 0; i < 8; i++) {
            CHECK(mask[i] == (i < r % 8 + 1 && hs_loss_bit((uint32_t)r, i)), "row %llu bit %u", (unsigned long long)r,
                  i);
            targets += mask[i];
        }
    }
    if (set) {
        ds_shardset_info in;
        ds_shardset_get_info(set, &in);
        CHECK(in.shard_version == DS_SHARD_VERSION_LOSS && in.loss_tokens[0] == targets && targets < in.tokens[0]);
    }
    ds_shardset_close(set);
    printf("ok   %-36s %llu targets\n", "version-2 set", (unsigned long long)targets);
    json_decref(m);

    /* the loss section of row 2 (valid 3): its byte and the size field */
    size_t loss_off = DS_SHARD_HEADER_BYTES + (size_t)(hs_get64(img.data + 72) + hs_get64(img.data + 80));
    struct {
        const char *what;
        int kind; /* 0: bit on padding (checksums recomputed), 1: size field, 2: flipped bit, checksums stale,
                     3: one byte short, 4: version 1 with a loss size */
        const char *want;
    } cases[] = {
        {"loss bit on padding", 0, "row 2 has a loss bit set on padding (valid 3)"},
        {"loss section size off by one", 1, "offset 144: loss section of 7 bytes"},
        {"loss bit flipped, stale checksums", 2, "checksum mismatch (token / row-metadata / loss sections)"},
        {"loss section cut short", 3, "truncated"},
        {"version 1 with a loss section size", 4, "offset 144: reserved byte"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ds_shard_image bad;
        CHECK(hs_make_shard_v(6, 8, 0, 0, 1, &bad) == 0);
        size_t len = bad.len;
        switch (cases[k].kind) {
        case 0:
            bad.data[loss_off + 2] |= 0x80; /* row 2, position 7 */
            hs_fix_payload(bad.data, len);
            break;
        case 1:
            hs_put64(bad.data + 144, 7);
            hs_fix_header(bad.data);
            break;
        case 2: bad.data[loss_off + 1] ^= 0x01; break;
        case 3: len--; break;
        case 4:
            hs_put32(bad.data + 8, DS_SHARD_VERSION);
            hs_fix_header(bad.data);
            break;
        }
        CHECK(hs_write(p, bad.data, len) == 0);
        int rc = ds_shard_verify(p, NULL, err, sizeof err);
        CHECK(rc == DS_ERR_FORMAT && strstr(err, cases[k].want), "%s: verify rc %d (%s), want '%s'", cases[k].what, rc,
              err, cases[k].want);
        if (cases[k].kind == 0) { /* checksums valid: the file opens, the row read refuses it */
            ds_shard *s = NULL;
            CHECK(ds_shard_open(p, DS_SHARD_OPEN_VERIFY, &s, err, sizeof err) == DS_OK, "%s", err);
            uint8_t mask[8];
            rc = s ? ds_shard_read_msg(s, 2, NULL, NULL, NULL, mask, NULL, err, sizeof err) : -1;
            CHECK(rc == DS_ERR_FORMAT && strstr(err, cases[k].want), "%s: read rc %d (%s)", cases[k].what, rc, err);
            CHECK(s && ds_shard_read(s, 1, NULL, NULL, NULL, mask, NULL) == DS_OK, "other rows still read");
            ds_shard_close(s);
        }
        printf("ok   %-36s %s\n", cases[k].what, err);
        ds_shard_image_free(&bad);
    }

    /* the manifest against the shards */
    struct {
        const char *what, *field, *json, *want;
        int open_ok; /* the cheap open accepts it; verify refuses */
    } mc[] = {
        {"manifest version 1, shard version 2", "shard_format_version", "1",
         "shard version (shard_format_version) disagrees", 0},
        {"manifest version 3", "shard_format_version", "3", "shard_format_version", 0},
        {"v2 shard without loss_tokens", "shards.0.loss_tokens", NULL, "loss_tokens", 0},
        {"loss_tokens > tokens", "shards.0.loss_tokens", "1000", "loss_tokens", 0},
        {"loss_tokens off by one", "shards.0.loss_tokens", "1", "loss_tokens disagrees with the manifest", 1},
        {"splits loss_tokens wrong", "splits.train.loss_tokens", "2", "splits.train.loss_tokens", 1},
    };
    for (size_t k = 0; k < sizeof mc / sizeof mc[0]; k++) {
        m = loss_set(dir, &img);
        json_t *o = m;
        char path[64];
        snprintf(path, sizeof path, "%s", mc[k].field);
        char *key = strtok(path, "."), *next;
        while ((next = strtok(NULL, "."))) {
            o = json_is_array(o) ? json_array_get(o, (size_t)atoi(key)) : json_object_get(o, key);
            key = next;
        }
        if (!mc[k].json) json_object_del(o, key);
        else if (!strcmp(mc[k].field, "shards.0.loss_tokens") && !strcmp(mc[k].json, "1"))
            json_object_set_new(o, key, json_integer(json_integer_value(json_object_get(o, key)) + 1));
        else json_object_set_new(o, key, json_loads(mc[k].json, JSON_DECODE_ANY, NULL));
        CHECK(hs_write_manifest(dir, m) == 0);
        json_decref(m);
        set = NULL;
        int rc = ds_shardset_open(dir, 0, &set, err, sizeof err);
        ds_shardset_close(set);
        CHECK((rc == DS_OK) == mc[k].open_ok, "%s: open rc %d (%s)", mc[k].what, rc, err);
        rc = ds_verify(dir, NULL, err, sizeof err);
        CHECK(rc == DS_ERR_FORMAT && strstr(err, mc[k].want), "%s: verify rc %d (%s), want '%s'", mc[k].what, rc, err,
              mc[k].want);
        printf("ok   %-36s %s\n", mc[k].what, err);
    }
    ds_shard_image_free(&img);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_hostile_shards_XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    test_headers();
    test_sets();
    test_rows();
    test_outputs();
    test_loss_bits();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) failures++;
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
