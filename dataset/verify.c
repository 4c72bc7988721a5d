/* verify.c - ds_verify: everything `mkshards verify DIR|SHARD` checks, in
 * the library so that every reader that promises a verified set (the CLI,
 * ShardSet(verify=True) through DS_SHARD_OPEN_FULL) runs the same checks:
 * per shard ds_shard_verify (header, size, header/payload/block checksums,
 * every row's metadata, frame and ids as a read sees them), then agreement
 * with the manifest (file checksum, rows, tokens, bytes, tokenizer
 * fingerprint, vocabulary, dtype, EOT/pad ids, row length, split,
 * compression, shuffle flag), the set-level checks of ds_shardset_open (one
 * file under two names), splits and the accounting sums. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "build_internal.h"
#include "ds_internal.h"

/* One shard: ds_shard_verify, then its header, real-token and target counts
 * (a version-1 shard's targets are its real tokens). */
static int verify_one(const char *path, uint64_t *xx, uint64_t *tokens, uint64_t *loss_tokens, ds_shard_header *hdr,
                      char *err, size_t errlen) {
    int rc = ds_shard_verify(path, xx, err, errlen);
    if (rc != DS_OK) return rc;
    ds_shard *s = NULL;
    if ((rc = ds_shard_open(path, 0, &s, err, errlen)) != DS_OK) return rc;
    *hdr = *ds_shard_get_header(s);
    *tokens = *loss_tokens = 0;
    int bits = hdr->version == DS_SHARD_VERSION_LOSS;
    uint8_t *mask = bits ? malloc(hdr->row_len) : NULL; /* row_len <= 2^24 (header checked) */
    if (bits && !mask) {
        ds_shard_close(s);
        return DS_ERR_NOMEM;
    }
    for (uint64_t r = 0; r < hdr->n_rows; r++) {
        uint32_t nv = 0;
        if (ds_shard_read(s, r, NULL, NULL, NULL, mask, &nv) != DS_OK) { /* changed since the verify above */
            ds_set_err(err, errlen, "%s: row %" PRIu64 ": metadata corrupt", path, r);
            free(mask);
            ds_shard_close(s);
            return DS_ERR_FORMAT;
        }
        *tokens += nv;
        if (!bits) *loss_tokens += nv;
        else
            for (uint32_t i = 0; i < nv; i++) *loss_tokens += mask[i];
    }
    free(mask);
    ds_shard_close(s);
    return DS_OK;
}

/* The manifest's splits and accounting against the shards' totals. */
static int check_totals(const char *dir, json_t *m, const ds_build_account *a, uint32_t L, const uint64_t rows[2],
                        const uint64_t toks[2], const uint64_t loss[2], const uint64_t n_sh[2], char *err,
                        size_t errlen) {
    json_t *sp = json_object_get(m, "splits");
    for (int k = 0; k < 2; k++) {
        json_t *o = json_object_get(sp, k ? "val" : "train");
        /* targets: recorded in version-2 sets (optional key; where present it must be right) */
        json_t *jl = json_object_get(o, "loss_tokens");
        if (jl && (!json_is_integer(jl) || (uint64_t)json_integer_value(jl) != loss[k])) {
            ds_set_err(err, errlen, "%s/manifest.json: splits.%s.loss_tokens does not match its shards", dir,
                       k ? "val" : "train");
            return DS_ERR_FORMAT;
        }
        json_t *r = json_object_get(o, "rows"), *t = json_object_get(o, "tokens"), *n = json_object_get(o, "shards");
        if (!json_is_integer(r) || !json_is_integer(t) || !json_is_integer(n) ||
            (uint64_t)json_integer_value(r) != rows[k] || (uint64_t)json_integer_value(t) != toks[k] ||
            (uint64_t)json_integer_value(n) != n_sh[k]) {
            ds_set_err(err, errlen, "%s/manifest.json: splits.%s does not match its shards", dir, k ? "val" : "train");
            return DS_ERR_FORMAT;
        }
    }
    /* accounting must add up (sums in 128 bits: the counters are untrusted) */
    json_t *acc = json_object_get(m, "accounting");
    json_t *d = json_object_get(acc, "documents"), *t = json_object_get(acc, "tokens");
    json_t *jin = json_object_get(d, "in"), *jw = json_object_get(t, "written");
    unsigned __int128 din = (uint64_t)json_integer_value(jin), written = (uint64_t)json_integer_value(jw);
    unsigned __int128 docs =
        (unsigned __int128)a->docs_whole + a->docs_truncated + a->docs_chunked + a->docs_dropped + a->docs_rejected;
    unsigned __int128 cells = ((unsigned __int128)rows[0] + rows[1]) * L;
    if (!json_is_integer(jin) || !json_is_integer(jw) || json_integer_value(jin) < 0 || json_integer_value(jw) < 0 ||
        din != docs || din != a->records || written + a->pad != cells ||
        written != (unsigned __int128)toks[0] + toks[1] || a->rows[0] != rows[0] || a->rows[1] != rows[1]) {
        ds_set_err(err, errlen,
                   "%s/manifest.json: accounting does not add up (documents in = whole + truncated + chunked + "
                   "dropped + rejected; written + pad = rows x seq_len)",
                   dir);
        return DS_ERR_FORMAT;
    }
    json_t *jl = json_object_get(t, "loss"); /* chat / prompt-completion builds record their targets */
    if (jl && (!json_is_integer(jl) || json_integer_value(jl) < 0 ||
               (unsigned __int128)(uint64_t)json_integer_value(jl) != (unsigned __int128)loss[0] + loss[1])) {
        ds_set_err(err, errlen, "%s/manifest.json: accounting.tokens.loss differs from the shards' targets", dir);
        return DS_ERR_FORMAT;
    }
    return DS_OK;
}

static int verify_set(const char *dir, ds_verify_result *res, char *err, size_t errlen) {
    char e[1024];
    ds_manifest man;
    int rc = ds_manifest_load(dir, &man, err, errlen);
    if (rc != DS_OK) return rc;
    json_t *m = man.root;
    ds_build_config cfg;
    ds_build_account a;
    memset(&cfg, 0, sizeof cfg);
    if (ds_build_config_from_json(json_object_get(m, "config"), &cfg, e, sizeof e) ||
        ds_build_account_from_json(json_object_get(m, "accounting"), &a, e, sizeof e)) {
        ds_set_err(err, errlen, "%s: %s", man.path, e);
        rc = DS_ERR_FORMAT;
    }
    uint32_t L = man.seq_len;
    if (rc == DS_OK && cfg.seq_len != L) {
        ds_set_err(err, errlen, "%s: config.seq_len %u differs from seq_len %u", man.path, cfg.seq_len, L);
        rc = DS_ERR_FORMAT;
    }
    for (size_t i = 0; i < man.n_shards && rc == DS_OK; i++) {
        const ds_manifest_shard *ms = &man.shards[i];
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, ms->file);
        uint64_t xx = 0, tokens = 0, loss = 0;
        ds_shard_header h;
        if ((rc = verify_one(path, &xx, &tokens, &loss, &h, err, errlen)) != DS_OK) break;
        int k = ms->split;
        uint64_t bytes = DS_SHARD_HEADER_BYTES + h.tokens_bytes + h.meta_bytes + h.loss_bytes + 8 * h.n_blocks;
        const char *what =
            ms->xxh3 != xx                               ? "file checksum"
            : h.version != man.shard_version             ? "shard version (shard_format_version)"
            : ms->rows != h.n_rows                       ? "rows"
            : ms->tokens != tokens                       ? "tokens"
            : ms->loss_tokens != loss                    ? "loss_tokens"
            : ms->bytes != bytes                         ? "bytes"
            : memcmp(h.fingerprint, man.fingerprint, 32) ? "tokenizer fingerprint"
            : h.vocab_size != man.vocab_size             ? "vocab size"
            : h.dtype_bytes != man.dtype_bytes           ? "dtype"
            : h.eot_id != man.eot_id                     ? "EOT id"
            : h.pad_id != man.pad_id                     ? "pad id"
            : h.row_len != L                             ? "row length"
            : ((h.flags & DS_SHARD_F_VAL) != 0) != k     ? "split"
            : ((h.flags & DS_SHARD_F_ZSTD) != 0) != (cfg.zstd_level != 0) || h.frame_rows != cfg.frame_rows
                ? "compression (config.zstd_level / frame_rows)"
            : ((h.flags & DS_SHARD_F_SHUFFLED) != 0) != (cfg.shuffle != 0) ? "shuffle flag"
                                                                           : NULL;
        if (what) {
            ds_set_err(err, errlen, "%s: %s disagrees with the manifest", path, what);
            rc = DS_ERR_FORMAT;
            break;
        }
        res->rows[k] += h.n_rows;
        res->tokens[k] += tokens;
        res->loss_tokens[k] += loss;
        res->shards[k]++;
    }
    if (rc == DS_OK) { /* the set-level checks the trainer makes (one file under two names) */
        ds_shardset *set = NULL;
        rc = ds_shardset_open_files(dir, 0, &set, err, errlen);
        ds_shardset_close(set);
    }
    if (rc == DS_OK)
        rc = check_totals(dir, m, &a, L, res->rows, res->tokens, res->loss_tokens, res->shards, err, errlen);
    res->row_len = L;
    res->shard_version = man.shard_version;
    ds_build_config_free(&cfg);
    ds_manifest_free(&man);
    return rc;
}

int ds_verify(const char *path, ds_verify_result *res, char *err, size_t errlen) {
    ds_verify_result dummy;
    if (!res) res = &dummy;
    memset(res, 0, sizeof *res);
    struct stat st;
    if (!path || stat(path, &st) != 0) {
        ds_set_err(err, errlen, "cannot open '%s'", path ? path : "");
        return DS_ERR_IO;
    }
    if (S_ISDIR(st.st_mode)) {
        res->is_set = 1;
        return verify_set(path, res, err, errlen);
    }
    ds_shard_header h;
    int rc = verify_one(path, &res->file_xxh3, &res->tokens[0], &res->loss_tokens[0], &h, err, errlen);
    if (rc != DS_OK) return rc;
    int k = (h.flags & DS_SHARD_F_VAL) != 0;
    if (k) res->tokens[1] = res->tokens[0], res->tokens[0] = 0;
    if (k) res->loss_tokens[1] = res->loss_tokens[0], res->loss_tokens[0] = 0;
    res->shard_version = h.version;
    res->rows[k] = h.n_rows;
    res->shards[k] = 1;
    res->row_len = h.row_len;
    return DS_OK;
}

/* ds_shardset_open (ds_shard.h) lives here, above ds_verify, and not in
 * shard.c: DS_SHARD_OPEN_FULL runs ds_verify, which reads the shards through
 * shard.c, so shard.c (the format) never calls up into the verifier (no call
 * circle in dataset/: ctest lib_layering). */
int ds_shardset_open(const char *dir, int flags, ds_shardset **out, char *err, size_t errlen) {
    *out = NULL;
    struct stat dst; /* ds_verify would take a file for one shard: ds_manifest_load refuses a non-folder */
    if ((flags & DS_SHARD_OPEN_FULL) && stat(dir, &dst) == 0 && S_ISDIR(dst.st_mode)) {
        int vrc = ds_verify(dir, NULL, err, errlen);
        if (vrc != DS_OK) return vrc;
        flags &= ~DS_SHARD_OPEN_VERIFY; /* every file was hashed against the manifest */
    }
    return ds_shardset_open_files(dir, flags & ~DS_SHARD_OPEN_FULL, out, err, errlen);
}
