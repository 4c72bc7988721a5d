/* manifest_info.c - the public manifest reader (ds_manifest_read, ds_shard.h;
 * ds_manifest_account, ds.h): the internal reader ds_manifest_load (shard.c)
 * plus the config and accounting checks of build_manifest.c, as plain values,
 * so a front end (mkshards inspect) reads a manifest without jansson or the
 * build's internal types. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_internal.h"
#include "ds.h"
#include "shard_internal.h"

typedef struct {
    ds_manifest man;
    ds_build_config cfg;
    ds_build_account acc;
} manifest_impl;

/* A recorded non-negative integer, 0 when absent or not one (the summaries
 * ds_verify checks against the shards). */
static uint64_t recorded(json_t *o, const char *k) {
    json_int_t v = json_integer_value(json_object_get(o, k));
    return v > 0 ? (uint64_t)v : 0;
}

void ds_manifest_info_free(ds_manifest_info *m) {
    if (!m) return;
    manifest_impl *x = m->impl;
    if (x) {
        ds_build_config_free(&x->cfg);
        ds_manifest_free(&x->man);
        free(x);
    }
    memset(m, 0, sizeof *m);
}

int ds_manifest_read(const char *dir, ds_manifest_info *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    manifest_impl *x = calloc(1, sizeof *x);
    if (!x) {
        snprintf(err, errlen, "%s: out of memory", dir);
        return DS_ERR_NOMEM;
    }
    int rc = ds_manifest_load(dir, &x->man, err, errlen);
    if (rc != DS_OK) {
        free(x);
        return rc;
    }
    m->impl = x;
    json_t *r = x->man.root;
    char e[512];
    if (ds_build_config_from_json(json_object_get(r, "config"), &x->cfg, e, sizeof e) ||
        ds_build_account_from_json(json_object_get(r, "accounting"), &x->acc, e, sizeof e)) {
        snprintf(err, errlen, "%s: %s", x->man.path, e);
        ds_manifest_info_free(m);
        return DS_ERR_FORMAT;
    }
    const ds_manifest *man = &x->man;
    const ds_build_config *c = &x->cfg;
    m->tokenizer_name = man->tokenizer_name;
    memcpy(m->fingerprint, man->fingerprint, 32);
    m->vocab_size = man->vocab_size;
    m->eot_id = man->eot_id;
    m->pad_id = man->pad_id;
    m->seq_len = man->seq_len;
    m->dtype_bytes = man->dtype_bytes;
    m->bos_id = man->bos_id;
    m->eos_id = man->eos_id;
    m->tokenizer_spec = c->tokenizer_spec;
    m->pack = (int)c->pack;
    m->over_long = (int)c->over_long;
    m->val_fraction = c->val_fraction;
    m->seed = c->seed;
    m->shuffle = c->shuffle;
    m->zstd_level = c->zstd_level;
    m->frame_rows = c->frame_rows;
    m->part_k = c->part_k;
    m->part_n = c->part_n;
    json_t *sp = json_object_get(r, "splits");
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object_get(sp, k ? "val" : "train");
        m->split_shards[k] = recorded(o, "shards");
        m->split_rows[k] = recorded(o, "rows");
        m->split_tokens[k] = recorded(o, "tokens");
    }
    json_t *acc = json_object_get(r, "accounting");
    m->docs_in = recorded(json_object_get(acc, "documents"), "in");
    m->tokens_in = recorded(json_object_get(acc, "tokens"), "in");
    m->tokens_written = recorded(json_object_get(acc, "tokens"), "written");
    const char *u = json_string_value(json_object_get(acc, "utilisation"));
    snprintf(m->utilisation, sizeof m->utilisation, "%s", u ? u : "");
    m->n_shards = man->n_shards;
    m->shard_version = man->shard_version;
    m->shards = man->shards;
    return DS_OK;
}

const ds_build_account *ds_manifest_account(const ds_manifest_info *m) {
    return m && m->impl ? &((const manifest_impl *)m->impl)->acc : NULL;
}
