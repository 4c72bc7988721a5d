/* cmd_build.c - mkshards build: raw corpus in, fixed-length token rows out.
 *
 * Pipeline: a reader thread fills batches of records (JSON parsing deferred);
 * worker threads parse, validate (the lint error rules) and encode each
 * document; the calling thread then packs and writes in input order, so the
 * output does not depend on the thread count. Packing restarts at every input
 * file, which makes `--part K/N` + `merge` byte-identical to a single build.
 * Format: docs/shard-format.md. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "cli.h"
#include "handoff.h"
#include "record_batch.h"
#include "ds.h"
#include "shards_common.h"
#include "tk.h"

static const char k_usage[] =
    "Usage: mkshards build --tokenizer T --seq-len L --out DIR [options] INPUT...\n"
    "\n"
    "Tokenizes the inputs and writes fixed-length rows of L tokens into shards\n"
    "(DIR/train-NNNNN.mks, DIR/val-NNNNN.mks), DIR/rejects.jsonl and, last,\n"
    "DIR/manifest.json. Format: docs/shard-format.md.\n"
    "\n"
    "Options:\n"
    "  -t, --tokenizer T       .tiktoken file, tokenizer.json, or a name (gpt2, cl100k_base,\n"
    "                          o200k_base; looked up in $MKSHARDS_VOCAB_DIR)      [required]\n"
    "  -L, --seq-len L         tokens per row, 1..16777216                         [required]\n"
    "  -o, --out DIR           output directory (created)                          [required]\n"
    "  -j, --threads N         worker threads, 0..256 (default 0: all cores); output is byte-identical\n"
    "                          for any N\n"
    "      --pack P            concat (default): documents joined with EOT, cut into rows;\n"
    "                          bfd: documents cut into pieces of <= L, best-fit-decreasing\n"
    "                          packed within a window; none: one document per row, padded\n"
    "      --over-long M       --pack none: truncate (default), chunk or drop documents\n"
    "                          longer than L (document + EOT)\n"
    "      --bfd-window R      rows per BFD packing window, 1..16777216 (default 1024);\n"
    "                          R x L must stay below 2^31\n"
    "      --val-fraction F    fraction of documents for validation, by document hash,\n"
    "                          0 <= F < 1 (default 0)\n"
    "      --seed S            seed of the per-shard row shuffle, 0..2^64-1 (default 0)\n"
    "      --no-shuffle        keep rows in packing order\n"
    "      --shard-tokens N    target tokens per shard, K/M/G suffixes (default 32M)\n"
    "      --zstd LEVEL        compress rows in independent zstd frames, 0..22 (0 = off, default)\n"
    "      --frame-rows N      rows per zstd frame, 1..1048576 (default 64)\n"
    "  -f, --field NAME        JSONL text field (default: text)\n"
    "      --doc-sep MODE      .txt inputs: file (default), line or blank-line\n"
    "      --part K/N          build the K-th of N partitions of the input files\n"
    "                          (1 <= K <= N <= 1000000)\n"
    "      --batch-bytes SIZE  text read per batch, 1..1T (default 32M)\n"
    "      --resume            finish an interrupted build from its last checkpoint\n"
    "                          (running the same command again does the same)\n"
    "      --force             overwrite DIR even if it holds a build with another config\n"
    "                          (never when DIR is, or lies inside, an input folder)\n"
    "  -q, --quiet             no progress line\n"
    "  -h, --help              show this help\n"
    "\n"
    "Records with lint errors (bad JSON, missing field, invalid UTF-8, NUL bytes, zstd\n"
    "damage, oversized records) are rejected and listed in DIR/rejects.jsonl with file,\n"
    "line and reason, as are documents dropped by --over-long drop.\n"
    "\n"
    "DIR is locked (DIR/.lock) for the whole build: a second build or merge into DIR\n"
    "fails at once. An existing DIR is \"complete and up to date\" only when its manifest\n"
    "has the same configuration and every shard passes the checks of `mkshards verify`\n"
    "(file checksum, size and rows against the manifest); otherwise it is rebuilt.\n"
    "\n"
    "Exit codes: 0 ok, 2 bad input or output error (also: no row could be written because\n"
    "every record was rejected or dropped; --out is, holds or lies inside an input; DIR is\n"
    "locked by another build), 64 usage error (every one with a message).\n"
    "\n"
    "Example:\n"
    "  mkshards build -t gpt2 -L 1024 --val-fraction 0.01 -o shards/ corpus/*.jsonl.zst\n";

enum {
    OPT_PACK = 1000, OPT_OVERLONG, OPT_BFD_WINDOW, OPT_VAL, OPT_SEED, OPT_NO_SHUFFLE, OPT_SHARD_TOKENS, OPT_ZSTD,
    OPT_FRAME_ROWS, OPT_DOC_SEP, OPT_PART, OPT_RESUME, OPT_FORCE, OPT_BATCH_BYTES
};

static const struct option k_opts[] = {{"tokenizer", required_argument, 0, 't'},
                                       {"seq-len", required_argument, 0, 'L'},
                                       {"out", required_argument, 0, 'o'},
                                       {"threads", required_argument, 0, 'j'},
                                       {"pack", required_argument, 0, OPT_PACK},
                                       {"over-long", required_argument, 0, OPT_OVERLONG},
                                       {"bfd-window", required_argument, 0, OPT_BFD_WINDOW},
                                       {"val-fraction", required_argument, 0, OPT_VAL},
                                       {"seed", required_argument, 0, OPT_SEED},
                                       {"no-shuffle", no_argument, 0, OPT_NO_SHUFFLE},
                                       {"shard-tokens", required_argument, 0, OPT_SHARD_TOKENS},
                                       {"zstd", required_argument, 0, OPT_ZSTD},
                                       {"frame-rows", required_argument, 0, OPT_FRAME_ROWS},
                                       {"field", required_argument, 0, 'f'},
                                       {"doc-sep", required_argument, 0, OPT_DOC_SEP},
                                       {"part", required_argument, 0, OPT_PART},
                                       {"resume", no_argument, 0, OPT_RESUME},
                                       {"force", no_argument, 0, OPT_FORCE},
                                       {"batch-bytes", required_argument, 0, OPT_BATCH_BYTES},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};

static const char *CMD = "build";

/* ------------------------------------------------------------ input files */
typedef struct {
    char **path;
    uint64_t *bytes;
    size_t n, cap;
} flist;

static int flist_push(flist *l, const char *p, uint64_t bytes) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        char **np = realloc(l->path, nc * sizeof *np);
        if (np) l->path = np;
        uint64_t *nb = realloc(l->bytes, nc * sizeof *nb);
        if (nb) l->bytes = nb;
        if (!np || !nb) return -1;
        l->cap = nc;
    }
    if (!(l->path[l->n] = strdup(p))) return -1;
    l->bytes[l->n++] = bytes;
    return 0;
}

static int known_ext(const char *p) {
    static const char *const ex[] = {".jsonl", ".ndjson", ".json", ".txt", ".text"};
    size_t n = strlen(p);
    if (n > 4 && !strcmp(p + n - 4, ".zst")) n -= 4;
    else if (n > 5 && !strcmp(p + n - 5, ".zstd")) n -= 5;
    for (size_t i = 0; i < 5; i++) {
        size_t k = strlen(ex[i]);
        if (n >= k && !strncmp(p + n - k, ex[i], k)) return 1;
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Same expansion as the reader: folders recursive, sorted by name, hidden
 * names skipped, files with a dataset extension. */
static int walk(flist *l, const char *dir, int depth) {
    if (depth > 64) {
        cli_error(CMD, "folder '%s' is nested more than 64 levels deep", dir);
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        cli_error(CMD, "cannot read folder '%s': %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            char **nn = realloc(names, nc * sizeof *names);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(e->d_name))) rc = -1;
        else n++;
    }
    closedir(d);
    if (n > 1) qsort(names, n, sizeof *names, cmp_str); /* an empty folder: names is NULL */
    if (rc) cli_error(CMD, "out of memory listing '%s'", dir);
    for (size_t i = 0; i < n && rc == 0; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *p = malloc(len);
        if (!p) {
            rc = -1;
            break;
        }
        snprintf(p, len, "%s/%s", dir, names[i]);
        struct stat ls, st;
        if (lstat(p, &ls) == 0 && stat(p, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                if (!S_ISLNK(ls.st_mode)) rc = walk(l, p, depth + 1);
            } else if (S_ISREG(st.st_mode) && known_ext(p)) {
                rc = flist_push(l, p, (uint64_t)st.st_size);
            }
        }
        free(p);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

static int expand_inputs(char **inputs, size_t n, flist *out) {
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!strcmp(inputs[i], "-")) {
            if (flist_push(out, "-", 0)) return -1;
            continue;
        }
        if (stat(inputs[i], &st) != 0) {
            cli_error(CMD, "cannot open input '%s': %s", inputs[i], strerror(errno));
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            if (walk(out, inputs[i], 0)) return -1;
        } else if (flist_push(out, inputs[i], (uint64_t)st.st_size))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ batches */
typedef struct {
    size_t off, len;
    uint64_t line, offset, record_bytes;
    const char *file;
    int status;
    uint32_t flags;
    char detail[96];
} brec;

typedef struct {
    uint8_t *arena;
    size_t cap, used;
    brec *recs;
    size_t n, cap_recs;
    uint64_t raw_bytes;
    int eof, fatal;
    char errmsg[512];
} batch;

typedef struct {
    ds_reader *rd;
    uint64_t max_bytes;
    size_t max_docs;
    uint64_t skip; /* resume: records already processed (read and discarded before the first batch) */
    batch slot[2];
    handoff h; /* slot full: ready for the builder; free: for the reader */
} pipeline;

static void fill_batch(pipeline *pl, batch *b) {
    b->n = 0;
    b->used = 0;
    b->eof = 0;
    b->fatal = 0;
    b->raw_bytes = 0;
    if (!pl->rd) {
        b->eof = 1;
        return;
    }
    while (pl->skip) {
        ds_record rec;
        int r = ds_reader_next(pl->rd, &rec, b->errmsg, sizeof b->errmsg);
        if (r <= 0) {
            if (r == 0) snprintf(b->errmsg, sizeof b->errmsg, "the inputs have fewer records than the checkpoint "
                                 "says were processed; they changed: delete the output folder and build again");
            else if (!b->errmsg[0]) snprintf(b->errmsg, sizeof b->errmsg, "%s", ds_strerror(r));
            b->fatal = b->eof = 1;
            return;
        }
        pl->skip--;
    }
    while (b->n < pl->max_docs && b->used < pl->max_bytes) {
        ds_record rec;
        int r = batch_next_record(pl->rd, &rec, b->errmsg, sizeof b->errmsg);
        if (r <= 0) {
            b->eof = 1;
            b->fatal = r < 0;
            if (r < 0) return;
            break;
        }
        if (b->n == b->cap_recs) {
            size_t nc = b->cap_recs ? 2 * b->cap_recs : 1024;
            brec *nr = realloc(b->recs, nc * sizeof *nr);
            if (!nr) goto oom;
            b->recs = nr;
            b->cap_recs = nc;
        }
        size_t len = rec.text ? rec.len : 0;
        if (rec.status != DS_REC_OK) len = 0; /* never train on a bad record's payload */
        size_t off = b->used;
        if (batch_arena_append(&b->arena, &b->cap, &b->used, rec.text, len)) goto oom;
        brec *br = &b->recs[b->n++];
        br->off = off;
        br->len = len;
        br->line = rec.line;
        br->offset = rec.offset;
        br->record_bytes = rec.record_bytes;
        br->file = rec.file;
        br->status = rec.status;
        br->flags = rec.flags;
        snprintf(br->detail, sizeof br->detail, "%s", rec.detail ? rec.detail : "");
        b->raw_bytes += rec.record_bytes;
    }
    return;
oom:
    snprintf(b->errmsg, sizeof b->errmsg, "out of memory");
    b->fatal = b->eof = 1;
}

static int fill_slot(void *ctx, unsigned k) {
    pipeline *pl = ctx;
    fill_batch(pl, &pl->slot[k]);
    return pl->slot[k].eof;
}

static void *reader_main(void *arg) {
    pipeline *pl = arg;
    handoff_produce(&pl->h, fill_slot, pl);
    return NULL;
}

/* ------------------------------------------------------------ workers */
typedef struct {
    tk_ids ids;
    int reason; /* -1: accepted */
    uint64_t hash;
    char detail[96];
} dres;

typedef struct {
    const tk_tokenizer *tok;
    batch *b;
    dres *res;
    ds_json_ctx **jctx;
    atomic_size_t next;
    atomic_int rc;
} work;

typedef struct {
    work *w;
    int t;
} warg;

static int status_reason(int st) {
    switch (st) {
    case DS_REC_BAD_JSON: return SH_R_JSON;
    case DS_REC_MISSING_FIELD: return SH_R_FIELD_MISSING;
    case DS_REC_NOT_STRING: return SH_R_FIELD_TYPE;
    case DS_REC_OVERLONG: return SH_R_TOO_LARGE;
    case DS_REC_ZSTD_ERROR: return SH_R_ZSTD;
    }
    return SH_R_JSON;
}

static void do_doc(work *w, int t, size_t i) {
    const brec *br = &w->b->recs[i];
    dres *r = &w->res[i];
    r->ids.len = 0;
    r->reason = -1;
    r->detail[0] = 0;
    if (br->status != DS_REC_OK) {
        r->reason = status_reason(br->status);
        snprintf(r->detail, sizeof r->detail, "%s", br->detail);
        return;
    }
    const uint8_t *text = w->b->arena + br->off;
    size_t len = br->len;
    if (br->flags & DS_RECF_RAW_JSON) {
        ds_record rec = {0};
        if (ds_json_extract(w->jctx[t], text, len, &rec) != DS_OK) {
            atomic_store(&w->rc, TK_ERR_NOMEM);
            return;
        }
        if (rec.status != DS_REC_OK) {
            r->reason = status_reason(rec.status);
            snprintf(r->detail, sizeof r->detail, "%s", rec.detail ? rec.detail : "");
            size_t bad;
            if (rec.status == DS_REC_BAD_JSON && (bad = sh_utf8_invalid_at(text, len)) < len) {
                /* as lint reports it: the invalid byte is why the parser failed */
                r->reason = SH_R_UTF8;
                snprintf(r->detail, sizeof r->detail, "byte 0x%02X at line offset %zu (the JSON parser rejects it)",
                         text[bad], bad);
            }
            return;
        }
        text = rec.text;
        len = rec.text ? rec.len : 0;
    }
    const void *nul = len ? memchr(text, 0, len) : NULL;
    if (nul) {
        r->reason = SH_R_NUL;
        snprintf(r->detail, sizeof r->detail, "NUL byte at text offset %zu", (size_t)((const uint8_t *)nul - text));
        return;
    }
    size_t bad = sh_utf8_invalid_at(text, len);
    if (bad < len) {
        r->reason = SH_R_UTF8;
        snprintf(r->detail, sizeof r->detail, "invalid UTF-8 at text offset %zu", bad);
        return;
    }
    r->hash = XXH3_64bits(text, len);
    int rc = tk_encode(w->tok, text, len, &r->ids);
    if (rc != TK_OK) atomic_store(&w->rc, rc);
}

static void *worker_main(void *arg) {
    warg *a = arg;
    work *w = a->w;
    for (;;) {
        size_t i = atomic_fetch_add(&w->next, 1);
        if (i >= w->b->n || atomic_load(&w->rc) != TK_OK) break;
        do_doc(w, a->t, i);
    }
    return NULL;
}

static int run_workers(work *w, int threads) {
    atomic_store(&w->next, 0);
    pthread_t th[256];
    warg args[256];
    if (threads > 256) threads = 256;
    int started = 0;
    for (int t = 1; t < threads; t++) {
        args[t].w = w;
        args[t].t = t;
        if (pthread_create(&th[t], NULL, worker_main, &args[t]) != 0) break;
        started++;
    }
    args[0].w = w;
    args[0].t = 0;
    worker_main(&args[0]);
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    return atomic_load(&w->rc);
}

/* ------------------------------------------------------------ packers */
typedef struct {
    uint32_t off, len, order, next;
} piece;

typedef struct {
    const sh_config *cfg;
    sh_writer *wr;
    sh_account *acc;
    /* concat */
    uint32_t *row;
    uint32_t fill;
    uint32_t starts[1]; /* unused placeholder */
    uint32_t *st;
    uint32_t n_st;
    /* bfd */
    uint32_t *pool;
    size_t pool_len, pool_cap;
    piece *pc;
    size_t n_pc, cap_pc;
} packer;

static int emit(packer *p, const uint32_t *toks, uint32_t n, const uint32_t *starts, uint32_t ns) {
    return sh_writer_add(p->wr, toks, n, starts, ns, p->acc);
}

static int concat_push(packer *p, const uint32_t *src, uint32_t n, int doc_start) {
    uint32_t L = p->cfg->seq_len;
    while (n) {
        if (doc_start) {
            p->st[p->n_st++] = p->fill;
            doc_start = 0;
        }
        uint32_t k = L - p->fill < n ? L - p->fill : n;
        memcpy(p->row + p->fill, src, k * sizeof *src);
        p->fill += k;
        src += k;
        n -= k;
        if (p->fill == L) {
            int rc = emit(p, p->row, L, p->st, p->n_st);
            p->fill = 0;
            p->n_st = 0;
            if (rc) return rc;
        }
    }
    return 0;
}

static int concat_add(packer *p, const tk_ids *ids) {
    uint32_t eot = p->cfg->eot_id;
    p->acc->docs_whole++;
    p->acc->tok_whole += ids->len;
    p->acc->eot++;
    int rc = 0;
    if (ids->len) rc = concat_push(p, ids->ids, (uint32_t)ids->len, 1);
    if (!rc) rc = concat_push(p, &eot, 1, ids->len == 0);
    return rc;
}

static int concat_flush(packer *p) {
    int rc = 0;
    if (p->fill) rc = emit(p, p->row, p->fill, p->st, p->n_st);
    p->fill = 0;
    p->n_st = 0;
    return rc;
}

static int pool_add(packer *p, const uint32_t *src, size_t n) {
    if (p->pool_len + n > p->pool_cap) {
        size_t nc = p->pool_cap ? p->pool_cap : 65536;
        while (nc < p->pool_len + n) nc *= 2;
        uint32_t *np = realloc(p->pool, nc * sizeof *np);
        if (!np) return DS_ERR_NOMEM;
        p->pool = np;
        p->pool_cap = nc;
    }
    if (n) memcpy(p->pool + p->pool_len, src, n * sizeof *src);
    p->pool_len += n;
    return 0;
}

static int cmp_piece(const void *a, const void *b) {
    const piece *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Best-fit decreasing over the window's pieces: each piece goes into the open
 * row with the least room that still fits it (ties: the most recently
 * refilled such row), else into a new row. Rows are written in the order they
 * were opened; inside a row pieces keep their placement order. */
static int bfd_flush(packer *p) {
    if (!p->n_pc) return 0;
    uint32_t L = p->cfg->seq_len;
    qsort(p->pc, p->n_pc, sizeof *p->pc, cmp_piece);
    size_t nb = 0;
    uint32_t *rem = malloc(p->n_pc * sizeof *rem), *head = malloc(p->n_pc * sizeof *head),
             *tail = malloc(p->n_pc * sizeof *tail), *bnext = malloc(p->n_pc * sizeof *bnext);
    uint32_t *bucket = malloc(((size_t)L + 1) * sizeof *bucket);
    size_t words = (L + 64) / 64;
    uint64_t *bits = calloc(words, sizeof *bits);
    uint32_t *row = malloc((size_t)L * sizeof *row), *st = malloc((size_t)L * sizeof *st);
    int rc = 0;
    if (!rem || !head || !tail || !bnext || !bucket || !bits || !row || !st) {
        rc = DS_ERR_NOMEM;
        goto out;
    }
    for (uint32_t r = 0; r <= L; r++) bucket[r] = UINT32_MAX;
    for (size_t i = 0; i < p->n_pc; i++) {
        piece *pc = &p->pc[i];
        pc->next = UINT32_MAX;
        uint32_t need = pc->len, found = UINT32_MAX;
        for (size_t wd = need / 64; wd < words; wd++) {
            uint64_t m = bits[wd];
            if (wd == need / 64) m &= ~0ull << (need % 64);
            if (m) {
                found = (uint32_t)(wd * 64 + (size_t)__builtin_ctzll(m));
                break;
            }
        }
        uint32_t b;
        if (found != UINT32_MAX && found <= L) {
            b = bucket[found];
            bucket[found] = bnext[b];
            if (bucket[found] == UINT32_MAX) bits[found / 64] &= ~(1ull << (found % 64));
            p->pc[tail[b]].next = (uint32_t)i;
            tail[b] = (uint32_t)i;
            rem[b] -= need;
        } else {
            b = (uint32_t)nb++;
            head[b] = tail[b] = (uint32_t)i;
            rem[b] = L - need;
        }
        if (rem[b] > 0) {
            bnext[b] = bucket[rem[b]];
            bucket[rem[b]] = b;
            bits[rem[b] / 64] |= 1ull << (rem[b] % 64);
        }
    }
    for (size_t b = 0; b < nb && !rc; b++) {
        uint32_t n = 0, ns = 0;
        for (uint32_t i = head[b]; i != UINT32_MAX; i = p->pc[i].next) {
            st[ns++] = n;
            memcpy(row + n, p->pool + p->pc[i].off, p->pc[i].len * sizeof *row);
            n += p->pc[i].len;
        }
        rc = emit(p, row, n, st, ns);
    }
out:
    free(rem), free(head), free(tail), free(bnext), free(bucket), free(bits), free(row), free(st);
    p->n_pc = 0;
    p->pool_len = 0;
    return rc;
}

static int bfd_add(packer *p, const tk_ids *ids) {
    uint32_t L = p->cfg->seq_len, eot = p->cfg->eot_id;
    uint64_t t = ids->len, n = t + 1;
    uint64_t npieces = (n + L - 1) / L;
    if (npieces == 1) {
        p->acc->docs_whole++;
        p->acc->tok_whole += t;
    } else {
        p->acc->docs_chunked++;
        p->acc->tok_chunked += t;
    }
    p->acc->pieces += npieces;
    p->acc->eot++;
    size_t off = p->pool_len;
    if (pool_add(p, ids->ids, t) || pool_add(p, &eot, 1)) return DS_ERR_NOMEM;
    for (uint64_t k = 0; k < npieces; k++) {
        if (p->n_pc == p->cap_pc) {
            size_t nc = p->cap_pc ? 2 * p->cap_pc : 1024;
            piece *np = realloc(p->pc, nc * sizeof *np);
            if (!np) return DS_ERR_NOMEM;
            p->pc = np;
            p->cap_pc = nc;
        }
        piece *pc = &p->pc[p->n_pc];
        pc->off = (uint32_t)(off + k * L);
        pc->len = (uint32_t)(k + 1 < npieces ? L : n - k * L);
        pc->order = (uint32_t)p->n_pc;
        p->n_pc++;
    }
    if (p->pool_len >= p->cfg->bfd_window * (uint64_t)L) return bfd_flush(p);
    return 0;
}

/* --pack none; returns 1 when the document was dropped. */
static int none_add(packer *p, const tk_ids *ids, int *dropped) {
    uint32_t L = p->cfg->seq_len, eot = p->cfg->eot_id;
    uint64_t t = ids->len;
    uint32_t zero = 0;
    *dropped = 0;
    if (t + 1 <= L) {
        p->acc->docs_whole++;
        p->acc->tok_whole += t;
        p->acc->eot++;
        if (t) memcpy(p->row, ids->ids, t * sizeof *p->row);
        p->row[t] = eot;
        return emit(p, p->row, (uint32_t)t + 1, &zero, 1);
    }
    switch (p->cfg->over_long) {
    case OL_TRUNCATE:
        p->acc->docs_truncated++;
        p->acc->tok_trunc_kept += L;
        p->acc->tok_trunc_lost += t - L;
        return emit(p, ids->ids, L, &zero, 1);
    case OL_DROP:
        p->acc->docs_dropped++;
        p->acc->tok_dropped += t;
        *dropped = 1;
        return 0;
    case OL_CHUNK: {
        p->acc->docs_chunked++;
        p->acc->tok_chunked += t;
        p->acc->eot++;
        uint64_t n = t + 1, np = (n + L - 1) / L;
        p->acc->pieces += np;
        for (uint64_t k = 0; k < np; k++) {
            uint64_t a = k * L, len = k + 1 < np ? L : n - a;
            for (uint64_t i = 0; i < len; i++) p->row[i] = a + i < t ? ids->ids[a + i] : eot;
            int rc = emit(p, p->row, (uint32_t)len, &zero, 1);
            if (rc) return rc;
        }
        return 0;
    }
    }
    return 0;
}

static int pack_flush(packer *p) {
    if (p->cfg->pack == PACK_CONCAT) return concat_flush(p);
    if (p->cfg->pack == PACK_BFD) return bfd_flush(p);
    return 0;
}

/* ------------------------------------------------------------ helpers */
static int write_reject(FILE *f, const char *file, uint64_t line, uint64_t offset, int reason, const char *detail,
                        uint64_t bytes) {
    json_t *o = json_object();
    json_object_set_new(o, "file", json_string(file ? file : "?"));
    json_object_set_new(o, "line", json_integer((json_int_t)line));
    json_object_set_new(o, "offset", json_integer((json_int_t)offset));
    json_object_set_new(o, "reason", json_string(sh_reason_name(reason)));
    json_object_set_new(o, "detail", json_string(detail && detail[0] ? detail : sh_reason_name(reason)));
    json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
    int rc = json_dumpf(o, f, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(o);
    if (rc || fputc('\n', f) == EOF) return -1;
    return 0;
}

/* DIR/rejects.jsonl.part, opened without following a link planted in the
 * output folder: fresh (whatever was there is unlinked, then created
 * exclusively) or, on resume, the existing regular file cut back to len (the
 * length the checkpoint recorded) and appended to. NULL + errno on failure. */
static FILE *open_rejects(const char *path, int resume, uint64_t len) {
    int fd;
    if (resume) {
        struct stat st;
        fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < len ||
                        len > (uint64_t)INT64_MAX || ftruncate(fd, (off_t)len) != 0)) {
            close(fd);
            errno = EINVAL;
            return NULL;
        }
    } else {
        if (unlink(path) != 0 && errno != ENOENT) return NULL;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, resume ? "a" : "w");
    if (!f) close(fd);
    return f;
}

static uint64_t estimate_bytes(const char *path, uint64_t size) {
    size_t n = strlen(path);
    if (!(n > 4 && !strcmp(path + n - 4, ".zst"))) return size;
    uint8_t hb[32];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return size * 4;
    ssize_t r = read(fd, hb, sizeof hb);
    close(fd);
    if (r > 0) {
        unsigned long long cs = ZSTD_getFrameContentSize(hb, (size_t)r);
        if (cs != ZSTD_CONTENTSIZE_UNKNOWN && cs != ZSTD_CONTENTSIZE_ERROR && cs > size) return cs;
    }
    return size * 4;
}

static int mkdir_p(const char *dir) {
    char *d = strdup(dir);
    if (!d) return -1;
    for (char *p = d + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(d, 0755);
            *p = '/';
        }
    int r = mkdir(d, 0755);
    free(d);
    return r == 0 || errno == EEXIST ? 0 : -1;
}

/* Names this build reads back or replaces in DIR. Anything under one of them
 * that is not a regular file (a FIFO, a device, a symbolic link planted in
 * the folder) is removed before the build looks at DIR: opening a FIFO would
 * block (reading the manifest, the checkpoint, or comparing a shard before
 * rewriting it), and a link would make the build read or write outside DIR.
 * 0, or -1 with a message (a folder under such a name). */
static int remove_special_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        cli_error(CMD, "cannot read --out '%s': %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        size_t l = strlen(n);
        int ours = !strcmp(n, "manifest.json") || !strcmp(n, "build.ckpt") || !strcmp(n, "rejects.jsonl") ||
                   !strcmp(n, "rejects.jsonl.part") || (l > 4 && !strcmp(n + l - 4, ".tmp")) ||
                   (l > 4 && !strcmp(n + l - 4, ".mks") && (!strncmp(n, "train-", 6) || !strncmp(n, "val-", 4)));
        if (!ours) continue;
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, n);
        if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) continue;
        if (S_ISDIR(st.st_mode)) {
            cli_error(CMD, "'%s' is a folder where the build writes a file; remove it or use another --out", path);
            rc = -1;
        } else if (unlink(path) != 0) {
            cli_error(CMD, "cannot remove '%s' (not a regular file): %s", path, strerror(errno));
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

/* A shard name as this tool writes it: train-NNNNN.mks / val-NNNNN.mks, no
 * '/' or "..", so a crafted manifest cannot point outside DIR. */
static int plain_shard_name(const char *n) {
    if (!n || !*n || strchr(n, '/') || strstr(n, "..") || strlen(n) >= 64) return 0;
    size_t l = strlen(n);
    return l > 4 && !strcmp(n + l - 4, ".mks") && (!strncmp(n, "train-", 6) || !strncmp(n, "val-", 4));
}

/* Nothing to do when DIR holds a complete manifest with the same config whose
 * shards all pass what `mkshards verify` checks per shard: the structure
 * (header, block checksums, metadata) and the whole-file XXH3, size and rows
 * recorded in the manifest. *n_checked: shards checked. 1: up to date, 0:
 * rebuild, -1: refuse (different config, no --force). */
static int check_existing(const char *dir, json_t *cfgj, const uint8_t fp[32], int force, size_t *n_checked,
                          char *why, size_t whylen) {
    *n_checked = 0;
    why[0] = 0;
    char err[512];
    json_t *m = sh_manifest_load(dir, err, sizeof err);
    if (!m) return 0;
    char fph[65];
    ds_shard_hex(fp, 32, fph);
    const char *mfp = json_string_value(json_object_get(json_object_get(m, "tokenizer"), "fingerprint"));
    int same = json_equal(json_object_get(m, "config"), cfgj) && mfp && !strcmp(mfp, fph);
    if (!same && !force) {
        json_decref(m);
        cli_error(CMD, "'%s' holds a build with a different configuration; use another --out or --force", dir);
        return -1;
    }
    int ok = same;
    json_t *sh = json_object_get(m, "shards");
    if (!json_is_array(sh)) ok = 0;
    for (size_t i = 0; ok && i < json_array_size(sh); i++) {
        json_t *s = json_array_get(sh, i);
        const char *name = json_string_value(json_object_get(s, "file"));
        const char *mx = json_string_value(json_object_get(s, "xxh3"));
        char path[4200], hx[17];
        if (!plain_shard_name(name) || !mx) {
            snprintf(why, whylen, "shard %zu of the manifest has no valid file name or xxh3", i);
            ok = 0;
            break;
        }
        snprintf(path, sizeof path, "%s/%s", dir, name);
        /* regular file only: ds_shard_verify must not block on a FIFO */
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
            (json_int_t)st.st_size != json_integer_value(json_object_get(s, "bytes"))) {
            snprintf(why, whylen, "%.400s is missing, not a regular file or not the size the manifest records", path);
            ok = 0;
            break;
        }
        uint64_t xx = 0;
        if (ds_shard_verify(path, &xx, err, sizeof err) != DS_OK) {
            snprintf(why, whylen, "%s", err);
            ok = 0;
            break;
        }
        snprintf(hx, sizeof hx, "%016" PRIx64, xx);
        ds_shard *h = NULL;
        if (strcmp(hx, mx) || ds_shard_open(path, 0, &h, err, sizeof err) != DS_OK) {
            snprintf(why, whylen, "%.400s: file checksum %s disagrees with the manifest's %s", path, hx, mx);
            ok = 0;
            break;
        }
        if (ds_shard_get_header(h)->n_rows != (uint64_t)json_integer_value(json_object_get(s, "rows"))) {
            snprintf(why, whylen, "%.400s: rows disagree with the manifest", path);
            ok = 0;
        }
        ds_shard_close(h);
        if (ok) ++*n_checked;
    }
    char rp[4200];
    snprintf(rp, sizeof rp, "%s/rejects.jsonl", dir);
    if (ok && access(rp, R_OK) != 0) ok = 0;
    json_decref(m);
    if (ok) {
        char cp[4200];
        snprintf(cp, sizeof cp, "%s/build.ckpt", dir);
        unlink(cp);
        return 1;
    }
    /* the old manifest must not reference shards we are about to rewrite */
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.json", dir);
    unlink(mp);
    return 0;
}

/* ------------------------------------------------------------ checkpoint
 * DIR/build.ckpt, written (crash-safe) at batch boundaries after a shard was
 * written: records processed, accounting, both splits' packer and writer
 * state (rows not yet in a shard), the shards written so far and the length
 * of rejects.jsonl.part. A rerun with the same config restores it, skips the
 * processed records (read, not parsed or encoded) and continues; the output
 * is the same bytes as an uninterrupted run. */
#define CKPT_MAGIC "MKSCKPT1"

typedef struct {
    uint8_t *d;
    size_t n, cap;
    int oom;
} obuf;

static void ob_put(obuf *o, const void *p, size_t n) {
    if (o->oom) return;
    if (o->n + n > o->cap) {
        size_t nc = o->cap ? o->cap : 1 << 16;
        while (nc < o->n + n) nc *= 2;
        uint8_t *nd = realloc(o->d, nc);
        if (!nd) {
            o->oom = 1;
            return;
        }
        o->d = nd;
        o->cap = nc;
    }
    if (n) memcpy(o->d + o->n, p, n);
    o->n += n;
}
static void ob_u64(obuf *o, uint64_t v) { ob_put(o, &v, 8); }

typedef struct {
    const uint8_t *p;
    size_t n, at;
    int bad;
} ibuf;

static int ib_get(ibuf *b, void *dst, size_t n) {
    if (b->bad || b->n - b->at < n) {
        b->bad = 1;
        return -1;
    }
    if (n) memcpy(dst, b->p + b->at, n);
    b->at += n;
    return 0;
}
static uint64_t ib_u64(ibuf *b) {
    uint64_t v = 0;
    ib_get(b, &v, 8);
    return v;
}

static uint64_t config_hash(json_t *cfgj, const uint8_t fp[32]) {
    char *t = json_dumps(cfgj, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    uint64_t h = t ? XXH3_64bits_withSeed(t, strlen(t), XXH3_64bits(fp, 32)) : 0;
    free(t);
    return h;
}

static int ckpt_save(const char *dir, uint64_t cfg_hash, const sh_account *acc, uint64_t toks_total,
                     const char *cur_file, packer *pk, sh_writer *wr, const sh_shard_rec *recs, size_t n_recs,
                     uint64_t rej_len) {
    obuf o = {0};
    uint32_t L = pk[0].cfg->seq_len;
    ob_put(&o, CKPT_MAGIC, 8);
    ob_u64(&o, cfg_hash);
    ob_put(&o, acc, sizeof *acc);
    ob_u64(&o, toks_total);
    ob_u64(&o, rej_len);
    uint64_t fl = cur_file ? strlen(cur_file) + 1 : 0;
    ob_u64(&o, fl);
    ob_put(&o, cur_file, fl);
    ob_u64(&o, n_recs);
    ob_put(&o, recs, n_recs * sizeof *recs);
    for (int s = 0; s < 2; s++) {
        packer *p = &pk[s];
        sh_writer *w = &wr[s];
        ob_u64(&o, p->fill);
        ob_put(&o, p->row, p->fill * sizeof(uint32_t));
        ob_u64(&o, p->n_st);
        ob_put(&o, p->st, p->n_st * sizeof(uint32_t));
        ob_u64(&o, p->pool_len);
        ob_put(&o, p->pool, p->pool_len * sizeof(uint32_t));
        ob_u64(&o, p->n_pc);
        ob_put(&o, p->pc, p->n_pc * sizeof *p->pc);
        ob_u64(&o, w->shard_index);
        ob_u64(&o, w->n_rows);
        ob_u64(&o, w->n_starts);
        ob_put(&o, w->tok, w->n_rows * L * sizeof(uint32_t));
        ob_put(&o, w->valid, w->n_rows * sizeof(uint32_t));
        ob_put(&o, w->sidx, (w->n_rows ? w->n_rows + 1 : 0) * sizeof(uint32_t));
        ob_put(&o, w->starts, w->n_starts * sizeof(uint32_t));
    }
    uint64_t h = XXH3_64bits(o.d, o.n);
    ob_u64(&o, h);
    if (o.oom) {
        free(o.d);
        return -1;
    }
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/build.ckpt", dir);
    int rc = ds_write_file_atomic(path, o.d, o.n, NULL, err, sizeof err);
    free(o.d);
    return rc;
}

static int grow_u32(uint32_t **a, size_t n) {
    uint32_t *x = realloc(*a, (n ? n : 1) * sizeof **a);
    if (!x) return -1;
    *a = x;
    return 0;
}

/* Bytes left in b; n_items of item_bytes each fit in them (no overflow). */
static int ib_fits(const ibuf *b, uint64_t n_items, uint64_t item_bytes) {
    uint64_t need;
    return !b->bad && !__builtin_mul_overflow(n_items, item_bytes, &need) && need <= b->n - b->at;
}

static int ids_below(const uint32_t *ids, size_t n, uint32_t vocab) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= vocab) return 0;
    return 1;
}

/* Document starts of one row: strictly increasing and below its valid count. */
static int starts_ok(const uint32_t *st, size_t n, uint32_t valid) {
    for (size_t i = 0; i < n; i++)
        if (st[i] >= valid || (i && st[i] <= st[i - 1])) return 0;
    return 1;
}

/* A shard the checkpoint says was written: its name is the one the writer
 * gives the split's next shard, and the file in DIR is a regular file with
 * the recorded size and whole-file XXH3 (what resume builds the manifest
 * from; a tampered or missing shard means starting over). */
static int ckpt_shard_ok(const char *dir, const sh_shard_rec *r, uint64_t index) {
    char want[64], path[4200], err[256];
    if ((r->split != 0 && r->split != 1) || !memchr(r->file, 0, sizeof r->file)) return 0;
    sh_shard_name(r->split, index, want, sizeof want);
    if (strcmp(want, r->file)) return 0;
    snprintf(path, sizeof path, "%s/%s", dir, r->file);
    struct stat st;
    uint64_t xx = 0;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->bytes) return 0;
    if (ds_shard_verify(path, &xx, err, sizeof err) != DS_OK || xx != r->xxh3) return 0;
    return 1;
}

/* Restore the state saved by ckpt_save. The file lies in the output folder,
 * which other users may be able to write: everything is checked before it is
 * used (checksum, every count against the bytes present and the limits the
 * writer keeps, ids < vocab, piece and start offsets inside their buffers,
 * the listed shards on disk), and memory is bounded by the file's size.
 * 0: restored; -1: no usable checkpoint (start from scratch). */
static int ckpt_load(const char *dir, uint64_t cfg_hash, sh_account *acc, uint64_t *toks_total, char **cur_file,
                     packer *pk, sh_writer *wr, sh_shard_rec **recs, size_t *n_recs, size_t *cap_recs,
                     uint64_t *rej_len) {
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/build.ckpt", dir);
    int fd = ds_open_regular(path, err, sizeof err); /* a FIFO here must not hang the build */
    if (fd < 0) return -1;
    struct stat fst;
    if (fstat(fd, &fst) != 0 || fst.st_size <= 16 || (uint64_t)fst.st_size > SIZE_MAX / 2) {
        close(fd);
        return -1;
    }
    size_t sz = (size_t)fst.st_size, got = 0;
    uint8_t *d = malloc(sz);
    while (d && got < sz) {
        ssize_t r = read(fd, d + got, sz - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!d || got != sz) {
        free(d);
        return -1;
    }
    uint64_t h;
    memcpy(&h, d + sz - 8, 8);
    ibuf b = {d, sz - 8, 0, 0};
    char magic[8];
    const sh_config *cfg = pk[0].cfg;
    uint32_t L = cfg->seq_len, vocab = cfg->vocab_size;
    if (XXH3_64bits(d, sz - 8) != h || ib_get(&b, magic, 8) || memcmp(magic, CKPT_MAGIC, 8) ||
        ib_u64(&b) != cfg_hash) {
        free(d);
        return -1;
    }
    ib_get(&b, acc, sizeof *acc);
    *toks_total = ib_u64(&b);
    *rej_len = ib_u64(&b);
    uint64_t fl = ib_u64(&b);
    if (fl) {
        /* the file being packed when the checkpoint was taken: one of this build's files */
        if (!ib_fits(&b, fl, 1) || !(*cur_file = malloc(fl)) || ib_get(&b, *cur_file, fl) ||
            memchr(*cur_file, 0, fl) != *cur_file + fl - 1) {
            b.bad = 1;
        } else {
            int known = 0;
            for (size_t i = 0; i < cfg->n_files && !known; i++) known = !strcmp(cfg->files[i], *cur_file);
            if (!known) b.bad = 1;
        }
    }
    uint64_t nr = ib_u64(&b);
    if (ib_fits(&b, nr, sizeof **recs)) {
        *recs = malloc((nr ? nr : 1) * sizeof **recs);
        *cap_recs = nr ? nr : 1;
        *n_recs = nr;
        if (!*recs || ib_get(&b, *recs, nr * sizeof **recs)) b.bad = 1;
    } else b.bad = 1;
    uint64_t per_split[2] = {0, 0};
    for (uint64_t i = 0; i < nr && !b.bad; i++) {
        const sh_shard_rec *r = &(*recs)[i];
        if (r->split != 0 && r->split != 1) b.bad = 1;
        else if (!ckpt_shard_ok(dir, r, per_split[r->split]++)) b.bad = 1;
    }
    if (!b.bad && (acc->shards[0] != per_split[0] || acc->shards[1] != per_split[1])) b.bad = 1;
    for (int s = 0; s < 2 && !b.bad; s++) {
        packer *p = &pk[s];
        sh_writer *w = &wr[s];
        /* concat: the row being filled and its document starts */
        uint64_t fill = ib_u64(&b);
        if (fill > L || ib_get(&b, p->row, (size_t)fill * sizeof(uint32_t))) { b.bad = 1; break; }
        p->fill = (uint32_t)fill;
        uint64_t nst = ib_u64(&b);
        if (nst > L || ib_get(&b, p->st, (size_t)nst * sizeof(uint32_t))) { b.bad = 1; break; }
        p->n_st = (uint32_t)nst;
        if (!ids_below(p->row, p->fill, vocab) || !starts_ok(p->st, p->n_st, p->fill)) { b.bad = 1; break; }
        /* bfd: the window's token pool (flushed at bfd_window x L) and its pieces */
        uint64_t pl = ib_u64(&b);
        if (pl > cfg->bfd_window * (uint64_t)L || !ib_fits(&b, pl, sizeof(uint32_t)) || grow_u32(&p->pool, (size_t)pl)) {
            b.bad = 1;
            break;
        }
        p->pool_len = p->pool_cap = (size_t)pl;
        if (!p->pool_cap) p->pool_cap = 1;
        if (ib_get(&b, p->pool, (size_t)pl * sizeof(uint32_t)) || !ids_below(p->pool, p->pool_len, vocab)) {
            b.bad = 1;
            break;
        }
        uint64_t npc = ib_u64(&b);
        if (npc > pl || !ib_fits(&b, npc, sizeof *p->pc)) { b.bad = 1; break; }
        free(p->pc);
        p->pc = malloc((npc ? npc : 1) * sizeof *p->pc);
        p->cap_pc = (size_t)(npc ? npc : 1);
        p->n_pc = 0;
        if (!p->pc || ib_get(&b, p->pc, (size_t)npc * sizeof *p->pc)) { b.bad = 1; break; }
        p->n_pc = (size_t)npc;
        for (size_t i = 0; i < p->n_pc && !b.bad; i++) /* bfd_flush copies pool[off, off + len) into a row of L */
            if (p->pc[i].len == 0 || p->pc[i].len > L || p->pc[i].off > pl || p->pc[i].len > pl - p->pc[i].off)
                b.bad = 1;
        if (b.bad) break;
        /* the writer: rows not yet in a shard (fewer than a shard's worth) */
        w->shard_index = ib_u64(&b);
        uint64_t rows = ib_u64(&b), ns = ib_u64(&b);
        if (b.bad || w->shard_index != per_split[s] || rows >= w->rows_per_shard ||
            !ib_fits(&b, rows, (uint64_t)L * 4 + 8) || !ib_fits(&b, ns, 4) || grow_u32(&w->tok, (size_t)(rows * L)) ||
            grow_u32(&w->valid, (size_t)rows) || grow_u32(&w->sidx, (size_t)rows + 1) || grow_u32(&w->starts, (size_t)ns)) {
            b.bad = 1;
            break;
        }
        /* capacity = what grow_u32 allocated: with no row pending that is one
         * element, not a row of L, so cap_rows stays 0 and sh_writer_add grows
         * the buffers before the first row (cap_rows = 1 here overflowed them) */
        w->n_rows = w->cap_rows = (size_t)rows;
        w->n_starts = w->cap_starts = (size_t)ns;
        if (!w->cap_starts) w->cap_starts = 1;
        ib_get(&b, w->tok, (size_t)rows * L * sizeof(uint32_t));
        ib_get(&b, w->valid, (size_t)rows * sizeof(uint32_t));
        ib_get(&b, w->sidx, (rows ? (size_t)rows + 1 : 0) * sizeof(uint32_t));
        if (!rows) w->sidx[0] = 0;
        ib_get(&b, w->starts, (size_t)ns * sizeof(uint32_t));
        if (b.bad || w->sidx[0] != 0 || w->sidx[rows] != ns) { b.bad = 1; break; }
        for (size_t j = 0; j < rows && !b.bad; j++) {
            if (w->valid[j] > L || w->sidx[j] > w->sidx[j + 1] || w->sidx[j + 1] > ns ||
                !ids_below(w->tok + j * L, L, vocab) ||
                !starts_ok(w->starts + w->sidx[j], w->sidx[j + 1] - w->sidx[j], w->valid[j]))
                b.bad = 1;
        }
    }
    int ok = !b.bad && b.at == b.n;
    free(d);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------ main */
int cmd_build(int argc, char **argv) {
    const char *spec = NULL, *out_dir = NULL, *field = NULL;
    long seq_len = 0, threads = 0, frame_rows = 64, zstd_level = 0;
    uint64_t shard_tokens = 32ull << 20, bfd_window = 1024, seed = 0, batch_bytes = 32ull << 20;
    double val_fraction = 0;
    sh_pack pack = PACK_CONCAT;
    sh_overlong ol = OL_TRUNCATE;
    int shuffle = 1, force = 0, quiet = 0, ol_given = 0, c;
    long part_k = 1, part_n = 1;
    const char *doc_sep = "file";
    ds_doc_sep sep = DS_SEP_FILE;
    char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    size_t n_inputs = 0;
    if (!inputs) return EXIT_BAD_INPUT;

    cli_getopt_reset();
    while ((c = cli_getopt(argc, argv, CMD, ":t:L:o:j:f:qh", k_opts)) != -1) {
        switch (c) {
        case 't': spec = optarg; break;
        case 'L':
            if (cli_parse_long(CMD, "--seq-len", optarg, 1, 1L << 24, &seq_len)) goto usage;
            break;
        case 'o': out_dir = optarg; break;
        case 'j':
            if (cli_parse_long(CMD, "--threads", optarg, 0, 256, &threads)) goto usage;
            break;
        case 'f': field = optarg; break;
        case 'q': quiet = 1; break;
        case OPT_PACK:
            if (!strcmp(optarg, "concat")) pack = PACK_CONCAT;
            else if (!strcmp(optarg, "bfd")) pack = PACK_BFD;
            else if (!strcmp(optarg, "none")) pack = PACK_NONE;
            else {
                free(inputs);
                return cli_usage_error(CMD, "--pack expects concat, bfd or none, got '%s'", optarg);
            }
            break;
        case OPT_OVERLONG:
            if (!strcmp(optarg, "truncate")) ol = OL_TRUNCATE;
            else if (!strcmp(optarg, "chunk")) ol = OL_CHUNK;
            else if (!strcmp(optarg, "drop")) ol = OL_DROP;
            if (!strcmp(optarg, "truncate") || !strcmp(optarg, "chunk") || !strcmp(optarg, "drop")) ol_given = 1;
            else {
                free(inputs);
                return cli_usage_error(CMD, "--over-long expects truncate, chunk or drop, got '%s'", optarg);
            }
            break;
        case OPT_BFD_WINDOW:
            if (cli_parse_u64(CMD, "--bfd-window", optarg, 1, 1u << 24, &bfd_window)) goto usage;
            break;
        case OPT_VAL:
            /* 1 would send every document to validation and leave no training rows */
            if (cli_parse_double(CMD, "--val-fraction", optarg, 0, 0, 1, 1, &val_fraction)) goto usage;
            break;
        case OPT_SEED:
            if (cli_parse_u64(CMD, "--seed", optarg, 0, UINT64_MAX, &seed)) goto usage;
            break;
        case OPT_NO_SHUFFLE: shuffle = 0; break;
        case OPT_SHARD_TOKENS:
            if (cli_parse_size(CMD, "--shard-tokens", optarg, 1, 1ull << 40, &shard_tokens)) goto usage;
            break;
        case OPT_ZSTD:
            if (cli_parse_long(CMD, "--zstd", optarg, 0, 22, &zstd_level)) goto usage;
            break;
        case OPT_FRAME_ROWS:
            if (cli_parse_long(CMD, "--frame-rows", optarg, 1, 1L << 20, &frame_rows)) goto usage;
            break;
        case OPT_DOC_SEP:
            if (!strcmp(optarg, "file")) sep = DS_SEP_FILE, doc_sep = "file";
            else if (!strcmp(optarg, "line")) sep = DS_SEP_LINE, doc_sep = "line";
            else if (!strcmp(optarg, "blank-line") || !strcmp(optarg, "blank")) sep = DS_SEP_BLANK, doc_sep = "blank-line";
            else {
                free(inputs);
                return cli_usage_error(CMD, "--doc-sep expects file, line or blank-line, got '%s'", optarg);
            }
            break;
        case OPT_PART:
            if (cli_parse_part(CMD, "--part", optarg, 1000000, &part_k, &part_n)) goto usage;
            break;
        case OPT_RESUME: break; /* resuming is what every run does */
        case OPT_FORCE: force = 1; break;
        case OPT_BATCH_BYTES:
            if (cli_parse_size(CMD, "--batch-bytes", optarg, 1, 1ull << 40, &batch_bytes)) goto usage;
            break;
        case 'h':
            fputs(k_usage, stdout);
            free(inputs);
            return EXIT_OK;
        default: goto usage;
        }
    }
    for (int i = optind; i < argc; i++) inputs[n_inputs++] = argv[i];
    if (!spec) {
        free(inputs);
        return cli_usage_error(CMD, "--tokenizer is required (a .tiktoken file or a name such as gpt2)");
    }
    if (!seq_len) {
        free(inputs);
        return cli_usage_error(CMD, "--seq-len is required (tokens per row, e.g. 1024)");
    }
    if (!out_dir) {
        free(inputs);
        return cli_usage_error(CMD, "--out is required (the output folder)");
    }
    if (!n_inputs) {
        free(inputs);
        return cli_usage_error(CMD, "no INPUT given (files, folders, or - for stdin)");
    }
    if (threads <= 0) threads = cli_ncpus();
    if (bfd_window * (uint64_t)seq_len >= (1ull << 31)) {
        free(inputs);
        return cli_usage_error(CMD, "--bfd-window x --seq-len must stay below 2^31 tokens");
    }
    if (ol_given && pack != PACK_NONE)
        cli_warn(CMD, "--over-long applies to --pack none only (concat keeps every token; bfd chunks)");

    int rc = EXIT_OK;
    tk_tokenizer *tok = NULL;
    sh_config cfg;
    memset(&cfg, 0, sizeof cfg);
    flist all = {0};
    ds_reader *rd = NULL;
    pipeline pl;
    memset(&pl, 0, sizeof pl);
    int pl_inited = 0, reader_started = 0;
    pthread_t reader_thread;
    ds_json_ctx **jctx = NULL;
    dres *res = NULL;
    size_t cap_res = 0;
    sh_writer wr[2];
    memset(wr, 0, sizeof wr);
    packer pk[2];
    memset(pk, 0, sizeof pk);
    sh_account acc;
    memset(&acc, 0, sizeof acc);
    sh_shard_rec *recs = NULL;
    size_t n_recs = 0, cap_recs = 0;
    FILE *rej = NULL;
    char rej_tmp[4200], rej_path[4200];
    char err[512] = "";
    json_t *cfgj = NULL;
    char *resume_file = NULL;
    int lock_fd = -1;

    rc = cli_load_tokenizer(spec, NULL, &tok);
    if (rc != EXIT_OK) goto done;
    uint32_t eot;
    if (tk_eot_id(tok, &eot) != TK_OK) {
        cli_error(CMD, "tokenizer %s has no <|endoftext|> token (needed to separate documents)", tk_name(tok));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    snprintf(cfg.tokenizer_spec, sizeof cfg.tokenizer_spec, "%s", spec);
    snprintf(cfg.tokenizer_name, sizeof cfg.tokenizer_name, "%s", tk_name(tok));
    tk_fingerprint(tok, cfg.fingerprint);
    cfg.vocab_size = tk_vocab_size(tok);
    cfg.eot_id = eot;
    cfg.seq_len = (uint32_t)seq_len;
    cfg.pack = pack;
    cfg.over_long = ol;
    cfg.bfd_window = bfd_window;
    cfg.val_fraction = val_fraction;
    cfg.seed = seed;
    cfg.shuffle = shuffle;
    cfg.shard_tokens = shard_tokens;
    cfg.zstd_level = (int)zstd_level;
    cfg.frame_rows = zstd_level ? (uint32_t)frame_rows : 0;
    snprintf(cfg.field, sizeof cfg.field, "%s", field ? field : "text");
    snprintf(cfg.doc_sep, sizeof cfg.doc_sep, "%s", doc_sep);
    cfg.part_k = (uint32_t)part_k;
    cfg.part_n = (uint32_t)part_n;
    cfg.inputs = calloc(n_inputs, sizeof *cfg.inputs);
    cfg.n_inputs = cfg.inputs ? n_inputs : 0;
    for (size_t i = 0; i < cfg.n_inputs; i++) cfg.inputs[i] = strdup(inputs[i]);

    if (expand_inputs(inputs, n_inputs, &all)) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    /* partition: contiguous ranges of the file list, balanced by bytes */
    {
        uint64_t total = 0, cum = 0;
        for (size_t i = 0; i < all.n; i++) total += all.bytes[i];
        cfg.files = calloc(all.n + 1, sizeof *cfg.files);
        cfg.file_bytes = calloc(all.n + 1, sizeof *cfg.file_bytes);
        if (!cfg.files || !cfg.file_bytes || !cfg.inputs) {
            cli_error(CMD, "out of memory");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        for (size_t i = 0; i < all.n; i++) {
            if (part_n > 1 && !strcmp(all.path[i], "-")) {
                cli_error(CMD, "--part cannot split stdin; give files or folders");
                rc = EXIT_USAGE;
                goto done;
            }
            uint64_t p = total ? (uint64_t)(((unsigned __int128)(2 * cum + all.bytes[i]) * (uint64_t)part_n) / (2 * (unsigned __int128)total))
                               : (uint64_t)i * (uint64_t)part_n / all.n;
            if (p >= (uint64_t)part_n) p = (uint64_t)part_n - 1;
            cum += all.bytes[i];
            if (p + 1 == (uint64_t)part_k) {
                cfg.files[cfg.n_files] = strdup(all.path[i]);
                cfg.file_bytes[cfg.n_files++] = all.bytes[i];
            }
        }
    }
    cfgj = sh_config_json(&cfg);

    /* before anything is created or deleted: --out must be neither an input,
     * nor inside an input folder, nor hold an input (it would read its own
     * manifest and shards, and --force would delete them) */
    if (cli_refuse_overwrite(CMD, "--out", out_dir, "the input", (const char *const *)inputs, n_inputs)) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    for (size_t i = 0; i < n_inputs + all.n; i++) {
        const char *in = i < n_inputs ? inputs[i] : all.path[i - n_inputs];
        if (strcmp(in, "-") && ds_path_within(in, out_dir) == 1) {
            cli_error(CMD, "the input '%s' lies inside --out '%s': the build would overwrite or delete its own "
                           "input; choose an --out outside the inputs",
                      in, out_dir);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }

    if (mkdir_p(out_dir)) {
        cli_error(CMD, "cannot create --out '%s': %s", out_dir, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    /* held until exit: resume, shard writes, manifest and cleanup */
    lock_fd = cli_lock_dir(CMD, out_dir, "build or merge");
    if (lock_fd < 0 || remove_special_entries(out_dir)) {
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    {
        int from_stdin = 0;
        for (size_t i = 0; i < cfg.n_files; i++) from_stdin |= !strcmp(cfg.files[i], "-");
        size_t n_checked = 0;
        char why[600];
        int ex = check_existing(out_dir, cfgj, cfg.fingerprint, force, &n_checked, why, sizeof why);
        if (ex == 0 && why[0] && !quiet)
            fprintf(stderr, "mkshards build: the previous build in %s fails verification (%s); building again\n",
                    out_dir, why);
        if (ex == 1 && from_stdin) { /* stdin may differ each time: never "up to date" */
            char mp[4200];
            snprintf(mp, sizeof mp, "%s/manifest.json", out_dir);
            unlink(mp);
            ex = 0;
        }
        if (ex < 0) {
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        if (ex == 1) {
            if (!quiet)
                fprintf(stderr,
                        "mkshards build: %s is complete and up to date (same configuration; %zu shard(s) verified: "
                        "structure, file checksum, size and rows match the manifest); nothing to do\n",
                        out_dir, n_checked);
            goto done;
        }
    }
    sh_clean_dir(out_dir, NULL, 0); /* stale *.tmp from an interrupted run */

    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    if (field) ro.field = field;
    ro.doc_sep = sep;
    ro.defer_json = 1;
    if (cfg.n_files) {
        int orc = ds_reader_open((const char *const *)cfg.files, cfg.n_files, &ro, &rd, err, sizeof err);
        if (orc != DS_OK) {
            cli_error(CMD, "%s", err[0] ? err : ds_strerror(orc));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    jctx = calloc((size_t)threads, sizeof *jctx);
    for (long t = 0; jctx && t < threads; t++)
        if (ds_json_ctx_new(&ro, &jctx[t]) != DS_OK) {
            cli_usage_error(CMD, "bad --field '%s'", field ? field : "text");
            rc = EXIT_USAGE;
            goto done;
        }
    if (!jctx) {
        cli_error(CMD, "out of memory");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    for (int s = 0; s < 2; s++) {
        sh_writer_init(&wr[s], &cfg, s, out_dir, &recs, &n_recs, &cap_recs);
        pk[s].cfg = &cfg;
        pk[s].wr = &wr[s];
        pk[s].acc = &acc;
        pk[s].row = malloc((size_t)seq_len * sizeof *pk[s].row);
        pk[s].st = malloc(((size_t)seq_len + 1) * sizeof *pk[s].st);
        if (!pk[s].row || !pk[s].st) {
            cli_error(CMD, "out of memory");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    uint64_t toks_total = 0, cfg_hash = config_hash(cfgj, cfg.fingerprint), rej_len = 0;
    int use_ckpt = 1;
    snprintf(rej_path, sizeof rej_path, "%s/rejects.jsonl", out_dir);
    snprintf(rej_tmp, sizeof rej_tmp, "%s/rejects.jsonl.part", out_dir);
    {
        for (size_t i = 0; i < cfg.n_files; i++)
            if (!strcmp(cfg.files[i], "-")) use_ckpt = 0; /* stdin cannot be replayed */
        int resumed = use_ckpt && ckpt_load(out_dir, cfg_hash, &acc, &toks_total, &resume_file, pk, wr, &recs, &n_recs, &cap_recs,
                                &rej_len) == 0 &&
                      (rej = open_rejects(rej_tmp, 1, rej_len)) != NULL;
        if (resumed) {
            pl.skip = acc.records;
            if (!quiet)
                fprintf(stderr, "mkshards build: resuming after %" PRIu64 " records (%zu shards already written)\n",
                        acc.records, n_recs);
        } else { /* fresh start */
            memset(&acc, 0, sizeof acc);
            toks_total = 0;
            free(resume_file);
            resume_file = NULL;
            n_recs = 0;
            for (int s = 0; s < 2; s++) {
                pk[s].fill = pk[s].n_st = 0;
                pk[s].pool_len = pk[s].n_pc = 0;
                wr[s].n_rows = wr[s].n_starts = 0;
                wr[s].shard_index = 0;
            }
            rej = open_rejects(rej_tmp, 0, 0);
        }
        if (!rej) {
            cli_error(CMD, "cannot create '%s': %s", rej_tmp, strerror(errno));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    size_t ckpt_recs = n_recs;
    double last_ckpt = cli_now(), ckpt_every = 0.5;
    {
        const char *e = getenv("MKSHARDS_CHECKPOINT_SECONDS"); /* tests: 0 = at every batch that wrote a shard */
        if (e && *e) {
            ckpt_every = atof(e);
            if (!(ckpt_every >= 0 && ckpt_every < 1e9)) ckpt_every = 0.5;
        }
    }

    uint64_t est_total = 0;
    for (size_t i = 0; i < cfg.n_files; i++) est_total += estimate_bytes(cfg.files[i], cfg.file_bytes[i]);
    int progress = !quiet && isatty(2);
    double t0 = cli_now(), last_prog = t0;

    pl.rd = rd;
    pl.max_bytes = batch_bytes;
    pl.max_docs = 1u << 18;
    handoff_init(&pl.h);
    pl_inited = 1;
    if (pthread_create(&reader_thread, NULL, reader_main, &pl) != 0) {
        cli_error(CMD, "cannot start the reader thread");
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    reader_started = 1;
    const char *cur_file = resume_file;
    double vthr = val_fraction * 18446744073709551616.0; /* 2^64 */
    for (unsigned k = 0;; k ^= 1) {
        handoff_wait_full(&pl.h, k); /* the reader always publishes, eof included */
        batch *b = &pl.slot[k];
        if (b->fatal) {
            cli_error(CMD, "%s", b->errmsg);
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        if (b->n > cap_res) {
            dres *nr = realloc(res, b->n * sizeof *nr);
            if (!nr) {
                cli_error(CMD, "out of memory");
                rc = EXIT_BAD_INPUT;
                goto done;
            }
            memset(nr + cap_res, 0, (b->n - cap_res) * sizeof *nr);
            res = nr;
            cap_res = b->n;
        }
        work w = {.tok = tok, .b = b, .res = res, .jctx = jctx};
        atomic_init(&w.rc, TK_OK);
        if (b->n && run_workers(&w, (int)threads) != TK_OK) {
            cli_error(CMD, "encoding failed: %s", tk_strerror(atomic_load(&w.rc)));
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        int prc = 0, rej_errno = 0;
        for (size_t i = 0; i < b->n && !prc; i++) {
            const brec *br = &b->recs[i];
            dres *r = &res[i];
            if (!cur_file || (br->file != cur_file && strcmp(br->file, cur_file) != 0)) {
                if (cur_file) prc = pack_flush(&pk[0]) ? -1 : pack_flush(&pk[1]) ? -1 : 0;
            }
            cur_file = br->file;
            acc.records++;
            acc.bytes_in += br->record_bytes;
            if (r->reason >= 0) {
                acc.docs_rejected++;
                acc.rejected_bytes += br->record_bytes;
                acc.reasons[r->reason]++;
                if (write_reject(rej, br->file, br->line, br->offset, r->reason, r->detail, br->record_bytes)) {
                    rej_errno = errno ? errno : EIO;
                    prc = -1;
                }
                continue;
            }
            uint64_t t = r->ids.len;
            int bin = 0;
            while (bin < SH_HIST_BINS - 1 && t >= (1ull << bin)) bin++;
            acc.hist[bin]++;
            int split = val_fraction > 0 && (double)r->hash < vthr;
            acc.docs_split[split]++;
            toks_total += t;
            packer *p = &pk[split];
            if (pack == PACK_CONCAT) prc = concat_add(p, &r->ids);
            else if (pack == PACK_BFD) prc = bfd_add(p, &r->ids);
            else {
                int dropped = 0;
                prc = none_add(p, &r->ids, &dropped);
                if (!prc && dropped) {
                    char d[96];
                    snprintf(d, sizeof d, "%" PRIu64 " tokens + EOT > seq-len %ld", t, seq_len);
                    acc.reasons[SH_R_OVERLONG_DROP]++;
                    if (write_reject(rej, br->file, br->line, br->offset, SH_R_OVERLONG_DROP, d, br->record_bytes)) {
                        rej_errno = errno ? errno : EIO;
                        prc = -1;
                    }
                }
            }
            if (r->ids.cap > (16u << 20)) {
                tk_ids_free(&r->ids);
                memset(&r->ids, 0, sizeof r->ids);
            }
        }
        if (prc) {
            /* the rejects file and the shard writer fail separately: name the one that failed (a
             * DS_ERR_* of the writer must never read as a rejects.jsonl.part failure) */
            if (rej_errno) cli_error(CMD, "cannot write '%s': %s", rej_tmp, strerror(rej_errno));
            else cli_error(CMD, "%s", wr[0].err[0] ? wr[0].err : wr[1].err[0] ? wr[1].err : "out of memory");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
        double now = cli_now();
        if (use_ckpt && n_recs != ckpt_recs && now - last_ckpt >= ckpt_every && !b->eof) {
            /* records so far are all packed: a consistent point to resume from */
            if (fflush(rej) != 0 || fsync(fileno(rej)) != 0) {
                cli_error(CMD, "cannot write '%s': %s", rej_tmp, strerror(errno));
                rc = EXIT_BAD_INPUT;
                goto done;
            }
            long rl = ftell(rej);
            if (ckpt_save(out_dir, cfg_hash, &acc, toks_total, cur_file, pk, wr, recs, n_recs, (uint64_t)rl) != DS_OK)
                cli_warn(CMD, "cannot write the checkpoint %s/build.ckpt (the build goes on)", out_dir);
            ckpt_recs = n_recs;
            last_ckpt = now;
        }
        if (progress && (now - last_prog > 0.5 || b->eof)) {
            double mb = (double)acc.bytes_in / 1e6, dt = now - t0, rate = dt > 0 ? mb / dt : 0;
            double left = est_total > acc.bytes_in ? (double)(est_total - acc.bytes_in) / 1e6 : 0;
            double eta = rate > 0 ? left / rate : 0;
            fprintf(stderr, "\r  %" PRIu64 " docs  %.1f MB  %" PRIu64 " tokens  %.1f MB/s  ETA %d:%02d   ",
                    acc.records, mb, toks_total, rate, (int)eta / 60, (int)eta % 60);
            last_prog = now;
        }
        int last = b->eof;
        handoff_release(&pl.h, k);
        if (last) break;
    }
    pthread_join(reader_thread, NULL);
    reader_started = 0;
    if (progress) fputc('\n', stderr);
    for (int s = 0; s < 2; s++) {
        if (pack_flush(&pk[s]) || sh_writer_finish(&wr[s], &acc)) {
            cli_error(CMD, "%s", wr[s].err[0] ? wr[s].err : "out of memory");
            rc = EXIT_BAD_INPUT;
            goto done;
        }
    }
    if (fflush(rej) != 0 || fsync(fileno(rej)) != 0 || fclose(rej) != 0) {
        rej = NULL;
        cli_error(CMD, "cannot write '%s': %s", rej_tmp, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    rej = NULL;
    if (rename(rej_tmp, rej_path) != 0) {
        cli_error(CMD, "cannot rename '%s': %s", rej_tmp, strerror(errno));
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    if (cfg.n_files && acc.rows[0] + acc.rows[1] == 0) {
        /* a manifest without rows would make the next run report "up to date" */
        char cp[4200];
        snprintf(cp, sizeof cp, "%s/build.ckpt", out_dir);
        unlink(cp);
        if (acc.records == 0)
            cli_error(CMD, "no documents in the inputs: nothing to write (no manifest written)");
        else
            cli_error(CMD,
                      "no row written: all %" PRIu64 " record(s) were rejected (%" PRIu64 ") or dropped (%" PRIu64
                      "); reasons in %s (no manifest written)",
                      acc.records, acc.docs_rejected, acc.docs_dropped, rej_path);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    sh_clean_dir(out_dir, recs, n_recs);
    if (sh_manifest_write(out_dir, &cfg, &acc, recs, n_recs, err, sizeof err) != DS_OK) {
        cli_error(CMD, "%s", err);
        rc = EXIT_BAD_INPUT;
        goto done;
    }
    {
        char cp[4200];
        snprintf(cp, sizeof cp, "%s/build.ckpt", out_dir);
        unlink(cp);
    }
    if (!quiet) {
        double dt = cli_now() - t0;
        uint64_t written = acc.tok_whole + acc.tok_trunc_kept + acc.tok_chunked + acc.eot;
        uint64_t cells = (acc.rows[0] + acc.rows[1]) * (uint64_t)seq_len;
        fprintf(stderr,
                "mkshards build: %" PRIu64 " docs (%" PRIu64 " whole, %" PRIu64 " truncated, %" PRIu64
                " chunked, %" PRIu64 " dropped, %" PRIu64 " rejected), %" PRIu64 " rows (%" PRIu64
                " train, %" PRIu64 " val) in %" PRIu64 " shard(s), utilisation %.4f, %.1f MB in %.2f s (%.1f MB/s)\n",
                acc.records, acc.docs_whole, acc.docs_truncated, acc.docs_chunked, acc.docs_dropped,
                acc.docs_rejected, acc.rows[0] + acc.rows[1], acc.rows[0], acc.rows[1], (uint64_t)n_recs,
                cells ? (double)written / (double)cells : 0.0, (double)acc.bytes_in / 1e6, dt,
                dt > 0 ? (double)acc.bytes_in / 1e6 / dt : 0.0);
        if (acc.docs_rejected || acc.docs_dropped)
            fprintf(stderr, "mkshards build: %" PRIu64 " record(s) listed in %s\n",
                    acc.docs_rejected + acc.docs_dropped, rej_path);
    }

done:
    if (reader_started) {
        handoff_stop(&pl.h);
        pthread_join(reader_thread, NULL);
    }
    if (pl_inited) handoff_destroy(&pl.h);
    for (int k = 0; k < 2; k++) {
        free(pl.slot[k].arena);
        free(pl.slot[k].recs);
        sh_writer_free(&wr[k]);
        free(pk[k].row);
        free(pk[k].st);
        free(pk[k].pool);
        free(pk[k].pc);
    }
    if (rej) fclose(rej);
    for (size_t i = 0; i < cap_res; i++) tk_ids_free(&res[i].ids);
    free(res);
    if (jctx)
        for (long t = 0; t < threads; t++) ds_json_ctx_free(jctx[t]);
    free(jctx);
    if (rd) ds_reader_free(rd);
    for (size_t i = 0; i < all.n; i++) free(all.path[i]);
    free(all.path);
    free(all.bytes);
    json_decref(cfgj);
    free(resume_file);
    sh_config_free(&cfg);
    free(recs);
    if (tok) tk_free(tok);
    free(inputs);
    cli_unlock_dir(out_dir, lock_fd);
    return rc;
usage:
    free(inputs);
    return EXIT_USAGE;
}
