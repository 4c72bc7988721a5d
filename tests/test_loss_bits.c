/* test_loss_bits.c - per-token loss bits (issue 28 item 3): documents with
 * loss masks go through the packers (ds_packer_add_loss) and the shard
 * writer into version-2 shards, and the reader (ds_shardset_read's
 * loss_mask), ds_verify and the manifest's loss-token counts give back
 * exactly the masks that went in, through truncation, chunking, BFD packing,
 * framing, zstd frames and the shuffle. Builds without masks stay version 1.
 *
 * Each masked document's ids carry their own loss bit (id = 2k + bit, ids
 * below 500), unmasked documents use ids 500..989, the BOS is 995 and the
 * EOS 999: so every row read back can be checked token by token. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_internal.h"
#include "ds.h"
#define XXH_INLINE_ALL /* the checkpoint's checksum, recomputed after an edit */
#include <xxhash.h>

static int g_fail;
#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #c);                                      \
            fprintf(stderr, " " __VA_ARGS__);                                                                          \
            fprintf(stderr, "\n");                                                                                     \
            g_fail++;                                                                                                  \
        }                                                                                                              \
    } while (0)

enum { VOCAB = 1000, BOS = 995, EOS = 999, UNMASKED0 = 500 };

static uint64_t g_rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

static void init_cfg(ds_build_config *c, uint32_t L, ds_pack pack, ds_over_long ol, int framed, int zstd, int bits) {
    memset(c, 0, sizeof *c);
    snprintf(c->tokenizer_spec, sizeof c->tokenizer_spec, "test");
    snprintf(c->tokenizer_name, sizeof c->tokenizer_name, "test");
    for (int i = 0; i < 32; i++) c->fingerprint[i] = (uint8_t)(i * 7);
    c->vocab_size = VOCAB;
    c->eot_id = EOS;
    c->framed = framed;
    c->bos_id = framed ? BOS : -1;
    c->eos_id = EOS;
    snprintf(c->bos_text, sizeof c->bos_text, "<s>");
    snprintf(c->eos_text, sizeof c->eos_text, "</s>");
    c->seq_len = L;
    c->pack = pack;
    c->over_long = ol;
    c->bfd_window = 4;
    c->seed = 7;
    c->shuffle = 1;
    c->shard_tokens = 40ull * L; /* several shards */
    c->zstd_level = zstd;
    c->frame_rows = zstd ? 3 : 0;
    snprintf(c->field, sizeof c->field, "text");
    snprintf(c->doc_sep, sizeof c->doc_sep, "file");
    c->part_k = c->part_n = 1;
    c->loss_bits = bits;
}

/* The expected bit of row position i (tok: the row, nv real tokens). -1: not
 * determined by the row alone (an EOS or BOS cut away from its document). */
static int expect_bit(const uint32_t *tok, uint32_t nv, uint32_t i) {
    uint32_t t = tok[i];
    if (t < UNMASKED0) return (int)(t & 1);
    if (t < 990) return 1;
    if (t == BOS) { /* a masked document's BOS is no target */
        if (i + 1 >= nv || tok[i + 1] >= 990) return -1;
        return tok[i + 1] >= UNMASKED0;
    }
    /* EOS: a target when the document's last token is */
    if (i == 0 || tok[i - 1] >= 990) return -1;
    return tok[i - 1] >= UNMASKED0 ? 1 : (int)(tok[i - 1] & 1);
}

static char g_dir[256];

static void rm_set(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* Build a set in dir from n_docs generated documents (masked where
 * masked_every divides the index, unmasked otherwise). */
static void build_set(const char *dir, const ds_build_config *cfg, int n_docs, int masked_every) {
    rm_set(dir);
    CHECK(ds_mkdir_p(dir) == 0);
    ds_shard_rec *recs = NULL;
    size_t n_recs = 0, cap_recs = 0;
    ds_build_account acc;
    memset(&acc, 0, sizeof acc);
    ds_shard_writer wr;
    ds_packer pk;
    ds_shard_writer_init(&wr, cfg, 0, dir, &recs, &n_recs, &cap_recs);
    CHECK(ds_packer_init(&pk, cfg, &wr, &acc) == DS_OK);
    uint32_t ids[64];
    uint8_t loss[64];
    for (int d = 0; d < n_docs; d++) {
        uint32_t n = 1 + rnd(40);
        int masked = masked_every && d % masked_every == 0;
        for (uint32_t i = 0; i < n; i++) {
            loss[i] = (uint8_t)(rnd(3) != 0);
            ids[i] = masked ? 2 * rnd(UNMASKED0 / 2) + loss[i] : UNMASKED0 + rnd(490);
        }
        int dropped = 0;
        int rc = ds_packer_add_loss(&pk, ids, masked ? loss : NULL, n, &dropped);
        CHECK(rc == DS_OK, "doc %d: %d %s", d, rc, wr.err);
        acc.records++;
        acc.docs_split[0]++;
        acc.hist[0]++; /* not checked against anything */
    }
    CHECK(ds_packer_flush(&pk) == DS_OK);
    CHECK(ds_shard_writer_finish(&wr, &acc) == DS_OK, "%s", wr.err);
    char err[1024] = "";
    CHECK(ds_manifest_write(dir, cfg, &acc, recs, n_recs, err, sizeof err) == DS_OK, "%s", err);
    ds_packer_free(&pk);
    ds_shard_writer_free(&wr);
    free(recs);
}

/* Read every row back: each bit as its token says, none on padding; totals
 * as the manifest and ds_verify say. Returns the targets read. */
static uint64_t check_set(const char *what, const char *dir, uint32_t want_version) {
    char err[1024] = "";
    ds_shardset *set = NULL;
    int rc = ds_shardset_open(dir, DS_SHARD_OPEN_FULL, &set, err, sizeof err);
    CHECK(rc == DS_OK, "%s: open: %s", what, err);
    if (rc != DS_OK) return 0;
    ds_shardset_info in;
    ds_shardset_get_info(set, &in);
    CHECK(in.shard_version == want_version, "%s: version %u", what, in.shard_version);
    uint32_t L = in.row_len, *tok = malloc(L * 4ull), *tok2 = malloc(L * 4ull);
    uint8_t *mask = malloc(L), *mask2 = malloc(L);
    uint64_t targets = 0, tokens = 0, undetermined = 0, zeros = 0, row = 0;
    for (size_t k = 0; k < ds_shardset_n_shards(set, DS_SPLIT_TRAIN); k++) {
        const ds_shard *sh = ds_shardset_shard(set, DS_SPLIT_TRAIN, k, NULL);
        for (uint64_t r = 0; r < ds_shard_get_header(sh)->n_rows; r++, row++) {
            uint32_t nv = 0;
            CHECK(ds_shard_read_msg(sh, r, tok, NULL, NULL, mask, &nv, err, sizeof err) == DS_OK, "%s", err);
            /* the set's read (what the trainer calls) gives the same row */
            CHECK(ds_shardset_read(set, DS_SPLIT_TRAIN, row, tok2, NULL, NULL, mask2) == DS_OK);
            CHECK(!memcmp(tok, tok2, L * 4ull) && !memcmp(mask, mask2, L), "%s: row %llu differs", what,
                  (unsigned long long)row);
            tokens += nv;
            for (uint32_t i = 0; i < L; i++) {
                targets += mask[i];
                int e = i >= nv ? 0 : want_version == DS_SHARD_VERSION ? 1 : expect_bit(tok, nv, i);
                if (e == -1) {
                    undetermined++;
                    continue;
                }
                if (mask[i] != e) {
                    CHECK(0, "%s: row %llu position %u (valid %u) token %u: bit %u, want %d", what,
                          (unsigned long long)row, i, nv, tok[i], mask[i], e);
                    break;
                }
                zeros += i < nv && !mask[i];
            }
        }
    }
    CHECK(tokens == in.tokens[0], "%s: tokens", what);
    CHECK(targets == in.loss_tokens[0], "%s: %llu targets read, manifest %llu", what, (unsigned long long)targets,
          (unsigned long long)in.loss_tokens[0]);
    if (want_version == DS_SHARD_VERSION)
        CHECK(targets == tokens, "%s: version 1: targets %llu != tokens %llu", what, (unsigned long long)targets,
              (unsigned long long)tokens);
    else CHECK(targets < tokens && zeros > 0, "%s: the masks removed no target", what);
    ds_verify_result vr;
    CHECK(ds_verify(dir, &vr, err, sizeof err) == DS_OK, "%s: verify: %s", what, err);
    CHECK(vr.loss_tokens[0] == targets && vr.shard_version == want_version, "%s: verify counts", what);
    printf("ok   %-40s %llu rows, %llu tokens, %llu targets (%llu bits decided by the document outside the row)\n",
           what, (unsigned long long)in.rows[0], (unsigned long long)tokens, (unsigned long long)targets,
           (unsigned long long)undetermined);
    free(tok), free(tok2), free(mask), free(mask2);
    ds_shardset_close(set);
    return targets;
}

static void test_packers(void) {
    struct {
        const char *what;
        ds_pack pack;
        ds_over_long ol;
        int framed, zstd;
    } cases[] = {
        {"concat", DS_PACK_CONCAT, DS_OL_TRUNCATE, 0, 0},
        {"concat, BOS framing, zstd", DS_PACK_CONCAT, DS_OL_TRUNCATE, 1, 3},
        {"bfd", DS_PACK_BFD, DS_OL_TRUNCATE, 0, 0},
        {"bfd, BOS framing", DS_PACK_BFD, DS_OL_TRUNCATE, 1, 0},
        {"none, truncate", DS_PACK_NONE, DS_OL_TRUNCATE, 0, 0},
        {"none, truncate, BOS framing", DS_PACK_NONE, DS_OL_TRUNCATE, 1, 3},
        {"none, chunk", DS_PACK_NONE, DS_OL_CHUNK, 0, 0},
        {"none, chunk, BOS framing", DS_PACK_NONE, DS_OL_CHUNK, 1, 0},
    };
    char dir[300];
    snprintf(dir, sizeof dir, "%s/set", g_dir);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ds_build_config cfg;
        init_cfg(&cfg, 16, cases[k].pack, cases[k].ol, cases[k].framed, cases[k].zstd, 1);
        build_set(dir, &cfg, 300, 2); /* every other document masked */
        check_set(cases[k].what, dir, DS_SHARD_VERSION_LOSS);
    }
    /* a plain build (no masks, no loss bits): version-1 shards, every real token a target */
    ds_build_config cfg;
    init_cfg(&cfg, 16, DS_PACK_CONCAT, DS_OL_TRUNCATE, 0, 0, 0);
    build_set(dir, &cfg, 100, 0);
    check_set("plain build: version 1", dir, DS_SHARD_VERSION);
    /* loss bits without any mask: version 2 with every real token a target */
    init_cfg(&cfg, 16, DS_PACK_BFD, DS_OL_TRUNCATE, 1, 0, 1);
    build_set(dir, &cfg, 100, 0);
    char err[512];
    ds_shardset *set = NULL;
    CHECK(ds_shardset_open(dir, 0, &set, err, sizeof err) == DS_OK, "%s", err);
    if (set) {
        ds_shardset_info in;
        ds_shardset_get_info(set, &in);
        CHECK(in.shard_version == DS_SHARD_VERSION_LOSS && in.loss_tokens[0] == in.tokens[0]);
        ds_shardset_close(set);
    }
    /* a mask for a build without loss bits is refused, not dropped */
    init_cfg(&cfg, 16, DS_PACK_CONCAT, DS_OL_TRUNCATE, 0, 0, 0);
    ds_shard_rec *recs = NULL;
    size_t n_recs = 0, cap = 0;
    ds_build_account acc;
    memset(&acc, 0, sizeof acc);
    ds_shard_writer wr;
    ds_packer pk;
    ds_shard_writer_init(&wr, &cfg, 0, dir, &recs, &n_recs, &cap);
    CHECK(ds_packer_init(&pk, &cfg, &wr, &acc) == DS_OK);
    uint32_t ids[3] = {1, 2, 3};
    uint8_t loss[3] = {0, 1, 1};
    int dropped = 0;
    CHECK(ds_packer_add_loss(&pk, ids, loss, 3, &dropped) == DS_ERR_ARG);
    CHECK(strstr(wr.err, "loss bits") != NULL, "%s", wr.err);
    ds_packer_free(&pk);
    ds_shard_writer_free(&wr);
    free(recs);
    printf("ok   %-40s %s\n", "mask without loss bits refused", wr.err);
}

/* The writer refuses a bit on padding (it would write a shard every reader refuses). */
static void test_image_refuses_padding_bit(void) {
    ds_shard_header h;
    memset(&h, 0, sizeof h);
    h.dtype_bytes = 2;
    h.row_len = 10;
    h.n_rows = 1;
    h.vocab_size = 300;
    h.pad_id = h.eot_id = 299;
    uint32_t rows[10] = {1, 2, 3, 299, 299, 299, 299, 299, 299, 299}, valid[1] = {3}, sidx[2] = {0, 1}, starts[1] = {0};
    uint8_t loss[2] = {0x07, 0x00};
    ds_shard_image img = {0};
    char err[256] = "";
    CHECK(ds_shard_build_image_loss(&h, rows, NULL, valid, sidx, starts, loss, 0, &img, err, sizeof err) == DS_OK, "%s",
          err);
    ds_shard_image_free(&img);
    loss[0] = 0x0f; /* position 3: padding */
    CHECK(ds_shard_build_image_loss(&h, rows, NULL, valid, sidx, starts, loss, 0, &img, err, sizeof err) == DS_ERR_ARG,
          "bit on padding accepted");
    loss[0] = 0x07, loss[1] = 0x04; /* position 10: past the row */
    CHECK(ds_shard_build_image_loss(&h, rows, NULL, valid, sidx, starts, loss, 0, &img, err, sizeof err) == DS_ERR_ARG,
          "bit past the row accepted");
    printf("ok   %-40s %s\n", "writer refuses a bit on padding", err);
}

/* Feed documents d0..d1 of the deterministic stream (the same ids and masks
 * whatever the cut) to the train packer. */
static void feed(ds_packer *pk, int d0, int d1) {
    for (int d = d0; d < d1; d++) {
        uint64_t st = 0x9E3779B97F4A7C15ull * (uint64_t)(d + 1);
        uint32_t ids[64], n = 1 + (uint32_t)(st % 40);
        uint8_t loss[64];
        for (uint32_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            loss[i] = (uint8_t)((st >> 33) % 3 != 0);
            ids[i] = 2 * (uint32_t)((st >> 40) % (UNMASKED0 / 2)) + loss[i];
        }
        int dropped = 0;
        CHECK(ds_packer_add_loss(pk, ids, loss, n, &dropped) == DS_OK, "%s", pk->wr->err);
        pk->acc->records++;
        pk->acc->docs_split[0]++;
    }
}

/* Run the stream into dir; cut > 0: checkpoint after `cut` documents, drop
 * every in-memory state (as a crash would), restore it from build.ckpt and
 * go on. */
static void run_resumable(const char *dir, const ds_build_config *cfg, int n_docs, int cut) {
    rm_set(dir);
    CHECK(ds_mkdir_p(dir) == 0);
    ds_shard_rec *recs = NULL;
    size_t n_recs = 0, cap_recs = 0;
    ds_build_account acc;
    memset(&acc, 0, sizeof acc);
    ds_shard_writer wr[2];
    ds_packer pk[2];
    for (int s = 0; s < 2; s++) {
        ds_shard_writer_init(&wr[s], cfg, s, dir, &recs, &n_recs, &cap_recs);
        CHECK(ds_packer_init(&pk[s], cfg, &wr[s], &acc) == DS_OK);
    }
    if (cut > 0) {
        feed(&pk[0], 0, cut);
        CHECK(ds_ckpt_save(dir, 42, &acc, 0, NULL, pk, wr, recs, n_recs, 0) == 0);
        for (int s = 0; s < 2; s++) ds_packer_free(&pk[s]), ds_shard_writer_free(&wr[s]);
        free(recs);
        recs = NULL;
        n_recs = cap_recs = 0;
        memset(&acc, 0xAB, sizeof acc);
        for (int s = 0; s < 2; s++) {
            ds_shard_writer_init(&wr[s], cfg, s, dir, &recs, &n_recs, &cap_recs);
            CHECK(ds_packer_init(&pk[s], cfg, &wr[s], &acc) == DS_OK);
        }
        uint64_t toks = 0, rej = 0;
        char *cur = NULL;
        CHECK(ds_ckpt_load(dir, 42, &acc, &toks, &cur, pk, wr, &recs, &n_recs, &cap_recs, &rej) == 0,
              "checkpoint not restored");
        free(cur);
        ds_ckpt_remove(dir);
    }
    feed(&pk[0], cut > 0 ? cut : 0, n_docs);
    for (int s = 0; s < 2; s++) {
        CHECK(ds_packer_flush(&pk[s]) == DS_OK);
        CHECK(ds_shard_writer_finish(&wr[s], &acc) == DS_OK, "%s", wr[s].err);
    }
    char err[1024] = "";
    CHECK(ds_manifest_write(dir, cfg, &acc, recs, n_recs, err, sizeof err) == DS_OK, "%s", err);
    for (int s = 0; s < 2; s++) ds_packer_free(&pk[s]), ds_shard_writer_free(&wr[s]);
    free(recs);
}

/* A checkpoint holds the loss bits of the pending tokens (the concat row, the
 * BFD window, the writer's rows): a resumed build writes the same bytes. */
static void test_resume(void) {
    ds_pack packs[2] = {DS_PACK_CONCAT, DS_PACK_BFD};
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/whole", g_dir);
    snprintf(b, sizeof b, "%s/resumed", g_dir);
    for (int k = 0; k < 2; k++) {
        ds_build_config cfg;
        init_cfg(&cfg, 16, packs[k], DS_OL_TRUNCATE, 1, 0, 1);
        cfg.bfd_window = 8;
        run_resumable(a, &cfg, 400, 0);
        run_resumable(b, &cfg, 400, 237); /* a cut inside a shard, a concat row and a BFD window */
        char cmd[800];
        snprintf(cmd, sizeof cmd, "diff -r '%s' '%s' >/dev/null", a, b);
        CHECK(system(cmd) == 0, "%s: the resumed build differs", ds_pack_name(packs[k]));
        check_set(packs[k] == DS_PACK_BFD ? "resumed bfd build" : "resumed concat build", b, DS_SHARD_VERSION_LOSS);
    }
}

/* A hostile build.ckpt's loss state (the file lies in the output folder,
 * which others may write): each variant is the checkpoint of a cut build
 * with its loss bytes edited and the checksum recomputed, so the loader's
 * own checks are what refuse it. ds_ckpt_load must answer -1 (no usable
 * checkpoint: the build starts over) and never read or write out of bounds
 * (ASan run). The unedited, resealed file restores, so the edits are what
 * the refusals are about. */
static int ckpt_try(const char *dir, const ds_build_config *cfg, const uint8_t *img, size_t n, int reseal) {
    uint8_t *d = malloc(n);
    CHECK(d != NULL);
    if (!d) return -2;
    memcpy(d, img, n);
    if (reseal && n >= 8) {
        uint64_t h = XXH3_64bits(d, n - 8);
        memcpy(d + n - 8, &h, 8);
    }
    char path[400];
    snprintf(path, sizeof path, "%s/build.ckpt", dir);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(d, 1, n, f) == n);
    if (f) fclose(f);
    free(d);
    ds_shard_rec *recs = NULL;
    size_t n_recs = 0, cap_recs = 0;
    ds_build_account acc;
    memset(&acc, 0, sizeof acc);
    ds_shard_writer wr[2];
    ds_packer pk[2];
    for (int s = 0; s < 2; s++) {
        ds_shard_writer_init(&wr[s], cfg, s, dir, &recs, &n_recs, &cap_recs);
        CHECK(ds_packer_init(&pk[s], cfg, &wr[s], &acc) == DS_OK);
    }
    uint64_t toks = 0, rej = 0;
    char *cur = NULL;
    int rc = ds_ckpt_load(dir, 42, &acc, &toks, &cur, pk, wr, &recs, &n_recs, &cap_recs, &rej);
    free(cur);
    for (int s = 0; s < 2; s++) ds_packer_free(&pk[s]), ds_shard_writer_free(&wr[s]);
    free(recs);
    return rc;
}

static void test_ckpt_hostile(void) {
    ds_pack packs[2] = {DS_PACK_CONCAT, DS_PACK_BFD};
    char dir[300];
    snprintf(dir, sizeof dir, "%s/ckpt", g_dir);
    for (int k = 0; k < 2; k++) {
        const char *pn = ds_pack_name(packs[k]);
        ds_build_config cfg;
        init_cfg(&cfg, 13, packs[k], DS_OL_TRUNCATE, 1, 0, 1); /* 13: 3 bits of padding in each row's 2 bytes */
        cfg.bfd_window = 8;
        rm_set(dir);
        CHECK(ds_mkdir_p(dir) == 0);
        ds_shard_rec *recs = NULL;
        size_t n_recs = 0, cap_recs = 0;
        ds_build_account acc;
        memset(&acc, 0, sizeof acc);
        ds_shard_writer wr[2];
        ds_packer pk[2];
        for (int s = 0; s < 2; s++) {
            ds_shard_writer_init(&wr[s], &cfg, s, dir, &recs, &n_recs, &cap_recs);
            CHECK(ds_packer_init(&pk[s], &cfg, &wr[s], &acc) == DS_OK);
        }
        feed(&pk[0], 0, 237);
        for (int d = 237; d < 400 && !(packs[k] == DS_PACK_BFD ? pk[0].pool_len : pk[0].fill); d++)
            feed(&pk[0], d, d + 1); /* a cut with pending packer tokens */
        CHECK(ds_ckpt_save(dir, 42, &acc, 0, NULL, pk, wr, recs, n_recs, 0) == 0);
        /* split 0's loss state: the concat row's bytes, the BFD pool's, the
         * writer's rows; then split 1's 7 zero counts (nothing fed) and the
         * checksum */
        size_t fill = pk[0].fill, pool = pk[0].pool_len, rows = wr[0].n_rows, lb = ds_shard_loss_row_bytes(13);
        uint32_t valid0 = rows ? wr[0].valid[0] : 0;
        for (int s = 0; s < 2; s++) ds_packer_free(&pk[s]), ds_shard_writer_free(&wr[s]);
        free(recs);
        char path[400];
        snprintf(path, sizeof path, "%s/build.ckpt", dir);
        FILE *f = fopen(path, "rb");
        static uint8_t img[1 << 20], ed[(1 << 20) + 16];
        size_t n = f ? fread(img, 1, sizeof img, f) : 0;
        if (f) fclose(f);
        size_t S = fill + pool + rows * lb, tail = 8 + 7 * 8;
        CHECK(n > tail + S && rows > 0 && valid0 <= 13, "%s: n %zu S %zu rows %zu valid %u", pn, n, S, rows, valid0);
        if (!(n > tail + S && rows > 0 && valid0 <= 13)) continue;
        size_t at = n - tail - S; /* where split 0's loss bytes start */
        CHECK(ckpt_try(dir, &cfg, img, n, 1) == 0, "%s: the resealed, unedited checkpoint was not restored", pn);
        int rc, nv = 3; /* + the three checks after the VARIANTs */
#define VARIANT(what, edit, len)                                                                                       \
    do {                                                                                                               \
        memcpy(ed, img, n);                                                                                            \
        size_t m = n;                                                                                                  \
        edit;                                                                                                          \
        rc = ckpt_try(dir, &cfg, ed, (len), 1);                                                                        \
        CHECK(rc == -1, "%s: %s: restored (%d)", pn, what, rc);                                                        \
        nv++;                                                                                                          \
    } while (0)
        if (fill) VARIANT("a concat-row mask byte 2", ed[at] = 2, m);
        if (pool) VARIANT("a BFD-pool mask byte 2", ed[at + fill] = 2, m);
        /* the first writer row: a bit just past its tokens (padding, or past
         * a full row's 13 in its 2 bytes), its last byte all ones */
        VARIANT("a bit past a row's tokens", ed[at + fill + pool + valid0 / 8] |= (uint8_t)(1u << (valid0 % 8)), m);
        VARIANT("a row's last byte 0xff", ed[at + fill + pool + lb - 1] = 0xff, m);
        /* counts not matching the bytes: one loss byte short, one too many
         * (the rest of the file shifted, the checksum recomputed) */
        VARIANT("one loss byte cut", memmove(ed + at, ed + at + 1, n - at - 1); m = n - 1, m);
        VARIANT("one loss byte added", memmove(ed + at + 1, img + at, n - at); ed[at] = 0; m = n + 1, m);
        VARIANT("the loss bytes cut", memmove(ed + at, img + at + S, n - at - S); m = n - S, m);
        VARIANT("truncated inside the loss bytes", m = at + S / 2 + 8, m);
#undef VARIANT
        /* a flipped bit without a new checksum */
        memcpy(ed, img, n);
        ed[at + fill + pool] ^= 0x01;
        CHECK(ckpt_try(dir, &cfg, ed, n, 0) == -1, "%s: a flipped loss bit with the old checksum was restored", pn);
        /* the other format: a version-2 checkpoint for a version-1 build
         * (bytes left over), and one without loss bytes for a version-2 build */
        ds_build_config v1 = cfg;
        v1.loss_bits = 0;
        CHECK(ckpt_try(dir, &v1, img, n, 1) == -1, "%s: a loss-bit checkpoint restored into a build without", pn);
        memcpy(ed, img, n);
        memmove(ed + at, img + at + S, n - at - S);
        CHECK(ckpt_try(dir, &cfg, ed, n - S, 1) == -1, "%s: a checkpoint without loss bytes was restored", pn);
        printf(
            "ok   %s: build.ckpt loss state (%zu row + %zu pool + %zu x %zu row bytes): %d hostile variants refused\n",
            pn, fill, pool, rows, lb, nv);
    }
    rm_set(dir);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/test_loss_bits_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    test_image_refuses_padding_bit();
    test_packers();
    test_resume();
    test_ckpt_hostile();
    rm_set(g_dir);
    if (g_fail) {
        fprintf(stderr, "FAIL (%d failures)\n", g_fail);
        return 1;
    }
    printf("PASS\n");
    return 0;
}
