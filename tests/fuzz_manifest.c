/* fuzz_manifest.c - libFuzzer target for manifest.json: the input is written
 * as DIR/manifest.json next to two valid shards (train-00000.mks,
 * val-00000.mks; tests/hostile_shards_util.h), then ds_manifest_load,
 * ds_shardset_open (cheap, VERIFY and FULL: ds_verify, all of `mkshards
 * verify`) with every row read, and the tools'
 * parsers of config and accounting (ds_build_config_from_json /
 * ds_build_account_from_json, dataset/build_manifest.c) and the public
 * reader over them (ds_manifest_read, every field touched).
 * Seeds: hostile_shards_gen corpus-manifest. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_internal.h"
#include "hostile_shards_util.h"

static char g_dir[64];

static void cleanup(void) {
    static const char *const names[] = {"manifest.json", "train-00000.mks", "val-00000.mks"};
    char p[128];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    rmdir(g_dir);
}

static int setup(void) {
    static int state; /* 0 not tried, 1 ok, -1 failed */
    if (state) return state;
    state = -1;
    snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_manifest_XXXXXX");
    if (!mkdtemp(g_dir)) return state;
    atexit(cleanup);
    static const char *const names[] = {"train-00000.mks", "val-00000.mks"};
    for (int k = 0; k < 2; k++) {
        ds_shard_image img;
        char p[128];
        if (hs_make_shard(4 + k, 8, k, k ? 3 : 0, &img)) return state;
        snprintf(p, sizeof p, "%s/%s", g_dir, names[k]);
        int rc = hs_write(p, img.data, img.len);
        ds_shard_image_free(&img);
        if (rc) return state;
    }
    return state = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (setup() != 1) return 0;
    char p[128], err[1024];
    snprintf(p, sizeof p, "%s/manifest.json", g_dir);
    if (hs_write(p, data, size)) return 0;
    ds_manifest m;
    if (ds_manifest_load(g_dir, &m, err, sizeof err) == DS_OK) {
        ds_build_config c;
        ds_build_account a;
        ds_build_config_from_json(json_object_get(m.root, "config"), &c, err, sizeof err);
        ds_build_config_free(&c);
        ds_build_account_from_json(json_object_get(m.root, "accounting"), &a, err, sizeof err);
        ds_manifest_free(&m);
    }
    ds_manifest_info mi;
    if (ds_manifest_read(g_dir, &mi, err, sizeof err) == DS_OK) {
        /* every field as mkshards inspect prints it */
        volatile size_t sink = strlen(mi.tokenizer_name) + strlen(mi.tokenizer_spec) + strlen(mi.utilisation);
        sink += (size_t)(mi.split_rows[0] + mi.split_tokens[1] + mi.docs_in + mi.tokens_written);
        sink += ds_pack_name(mi.pack) ? 1 : 0;
        sink += ds_over_long_name(mi.over_long) ? 1 : 0;
        for (size_t i = 0; i < mi.n_shards; i++) sink += strlen(mi.shards[i].file) + (size_t)mi.shards[i].rows;
        const ds_build_account *acc = ds_manifest_account(&mi);
        sink += acc ? (size_t)acc->records : 0;
        (void)sink;
        ds_manifest_info_free(&mi);
    }
    static const int k_flags[] = {0, DS_SHARD_OPEN_VERIFY, DS_SHARD_OPEN_FULL}; /* FULL: ds_verify first */
    for (size_t fi = 0; fi < sizeof k_flags / sizeof *k_flags; fi++) {
        int flags = k_flags[fi];
        ds_shardset *set = NULL;
        if (ds_shardset_open(g_dir, flags, &set, err, sizeof err) != DS_OK) continue;
        ds_shardset_info in;
        ds_shardset_get_info(set, &in);
        uint32_t *buf = malloc((size_t)in.row_len * 12);
        uint8_t *mask = malloc(in.row_len);
        for (int k = 0; buf && mask && k < 2; k++)
            for (uint64_t r = 0; r < ds_shardset_rows(set, (ds_split)k) && r < 1000; r++)
                ds_shardset_read(set, (ds_split)k, r, buf, buf + in.row_len, buf + 2 * (size_t)in.row_len, mask);
        free(buf), free(mask);
        ds_shardset_close(set);
    }
    return 0;
}
