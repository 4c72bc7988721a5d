/* test_shards.c - mkshards build/verify/merge and the shard reader API:
 *   - every packing policy on crafted documents (exact rows, masks, positions)
 *   - accounting sums, rejects.jsonl
 *   - byte-identical output for 1, 2 and 4 threads (plain and zstd)
 *   - --part K/N + merge == single build (byte-identical)
 *   - every single-byte corruption of a small shard is detected by verify
 * Drives the real mkshards binary; reads with ds_shardset_* / ds_shard_*. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "shard_internal.h"
#include "tk.h"
#include <xxhash.h>
#include "test_check.h"

static char g_tmp[256];
static const char *g_bin = MKS_BINARY_DIR "/tools/mkshards";
static tk_tokenizer *g_tok;
static uint32_t g_eot;

static int sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

/* ------------------------------------------------------------ crafted docs */
#define ND 7
static const int k_lens[ND] = {5, 2, 6, 1, 9, 0, 3}; /* tokens per document */
static tk_ids g_ids[ND];

static void doc_text(int n, char *out) {
    out[0] = 0;
    for (int i = 0; i < n; i++) strcat(out, i ? " a" : "a");
}

static void write_docs(const char *path, int nd) {
    FILE *f = fopen(path, "w");
    for (int d = 0; d < nd; d++) {
        char t[256];
        doc_text(k_lens[d], t);
        fprintf(f, "{\"text\": \"%s\"}\n", t);
    }
    fclose(f);
}

/* token k of document d's sequence (ids + EOT) */
static uint32_t seqtok(int d, int k) { return k < (int)g_ids[d].len ? g_ids[d].ids[k] : g_eot; }

typedef struct {
    int doc, from, len;
} seg;
typedef struct {
    int n;
    seg s[8];
    int cont; /* first segment continues a document from the previous row (no start at 0) */
} xrow;

/* Compare row r of split 0 with the expectation. */
static void check_row(ds_shardset *set, uint64_t r, const xrow *x, uint32_t L, const char *what) {
    uint32_t tok[64], pos[64], doc[64];
    uint8_t mask[64];
    CHECK(ds_shardset_read(set, DS_SPLIT_TRAIN, r, tok, pos, doc, mask) == DS_OK);
    uint32_t i = 0;
    for (int k = 0; k < x->n; k++)
        for (int j = 0; j < x->s[k].len; j++, i++) {
            int ok = tok[i] == seqtok(x->s[k].doc, x->s[k].from + j) && mask[i] == 1 && doc[i] == (uint32_t)k &&
                     pos[i] == (uint32_t)j;
            if (!ok) {
                fprintf(stderr, "%s: row %llu pos %u: got tok %u mask %u doc %u pos %u, want tok %u doc %d pos %d\n",
                        what, (unsigned long long)r, i, tok[i], mask[i], doc[i], pos[i],
                        seqtok(x->s[k].doc, x->s[k].from + j), k, j);
                failures++;
            }
        }
    uint32_t nv = i;
    for (; i < L; i++) {
        int ok = tok[i] == g_eot && mask[i] == 0 && doc[i] == (uint32_t)x->n && pos[i] == i - nv;
        if (!ok) {
            fprintf(stderr, "%s: row %llu pad pos %u: tok %u mask %u doc %u pos %u\n", what, (unsigned long long)r, i,
                    tok[i], mask[i], doc[i], pos[i]);
            failures++;
        }
    }
}

static json_t *load_manifest(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    json_error_t e;
    json_t *m = json_load_file(p, 0, &e);
    CHECK(m != NULL);
    return m;
}

static long long acc(json_t *m, const char *grp, const char *key) {
    json_t *a = json_object_get(m, "accounting");
    if (grp) a = json_object_get(a, grp);
    return json_integer_value(json_object_get(a, key));
}

/* documents in == whole + truncated + chunked + dropped + rejected; tokens add up */
static void check_accounting(json_t *m, uint32_t L) {
    CHECK(acc(m, "documents", "in") == acc(m, "documents", "whole") + acc(m, "documents", "truncated") +
                                           acc(m, "documents", "chunked") + acc(m, "documents", "dropped") +
                                           acc(m, "documents", "rejected"));
    CHECK(acc(m, "documents", "in") == acc(m, NULL, "records"));
    CHECK(acc(m, "tokens", "in") == acc(m, "tokens", "whole") + acc(m, "tokens", "truncated_kept") +
                                        acc(m, "tokens", "truncated_lost") + acc(m, "tokens", "chunked") +
                                        acc(m, "tokens", "dropped"));
    CHECK(acc(m, "tokens", "written") == acc(m, "tokens", "whole") + acc(m, "tokens", "truncated_kept") +
                                             acc(m, "tokens", "chunked") + acc(m, "tokens", "eot"));
    long long rows = acc(m, "rows", "train") + acc(m, "rows", "val");
    CHECK(acc(m, "tokens", "written") + acc(m, "tokens", "pad") == rows * (long long)L);
}

static ds_shardset *build(const char *name, const char *opts, const char *input) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", g_tmp, name);
    int rc = sh("%s build -q -t gpt2 -L 8 --no-shuffle %s -o %s %s", g_bin, opts, dir, input);
    CHECK(rc == 0);
    ds_shardset *set = NULL;
    char err[512];
    int r = ds_shardset_open(dir, DS_SHARD_OPEN_VERIFY, &set, err, sizeof err);
    if (r != DS_OK) fprintf(stderr, "%s: %s\n", name, err);
    CHECK(r == DS_OK);
    return set;
}

static void test_policies(void) {
    char in[512], in5[512];
    snprintf(in, sizeof in, "%s/docs.jsonl", g_tmp);
    snprintf(in5, sizeof in5, "%s/docs5.jsonl", g_tmp);
    write_docs(in, ND);
    write_docs(in5, 5);
    for (int d = 0; d < ND; d++) {
        char t[256];
        doc_text(k_lens[d], t);
        CHECK(tk_encode(g_tok, (const uint8_t *)t, strlen(t), &g_ids[d]) == TK_OK);
        CHECK((int)g_ids[d].len == k_lens[d]);
    }
    const uint32_t L = 8;

    /* concat: sequences 6,3,7,2,10,1,4 = 33 tokens -> rows of 8 (last: 1 real) */
    {
        ds_shardset *set = build("concat", "--pack concat", in);
        xrow x[5] = {
            {3, {{0, 0, 6}, {1, 0, 2}}, 0},
            {2, {{1, 2, 1}, {2, 0, 7}}, 1},
            {3, {{3, 0, 2}, {4, 0, 6}}, 0},
            {4, {{4, 6, 4}, {5, 0, 1}, {6, 0, 3}}, 1},
            {1, {{6, 3, 1}}, 1},
        };
        CHECK(set && ds_shardset_rows(set, DS_SPLIT_TRAIN) == 5);
        for (int r = 0; set && r < 5; r++) check_row(set, (uint64_t)r, &x[r], L, "concat");
        /* a continuation row has no start at 0, but positions still restart there */
        ds_shardset_close(set);
        char d[512];
        snprintf(d, sizeof d, "%s/concat", g_tmp);
        json_t *m = load_manifest(d);
        check_accounting(m, L);
        CHECK(acc(m, "documents", "whole") == ND && acc(m, "tokens", "pad") == 7 && acc(m, "tokens", "eot") == ND);
        json_decref(m);
    }
    /* bfd on docs 0-4: pieces 6,3,7,2,8+2 -> [8] [7] [6,2] [3,2] */
    {
        ds_shardset *set = build("bfd", "--pack bfd", in5);
        xrow x[4] = {
            {1, {{4, 0, 8}}, 0},
            {1, {{2, 0, 7}}, 0},
            {2, {{0, 0, 6}, {3, 0, 2}}, 0},
            {2, {{1, 0, 3}, {4, 8, 2}}, 0},
        };
        CHECK(set && ds_shardset_rows(set, DS_SPLIT_TRAIN) == 4);
        for (int r = 0; set && r < 4; r++) check_row(set, (uint64_t)r, &x[r], L, "bfd");
        ds_shardset_close(set);
        char d[512];
        snprintf(d, sizeof d, "%s/bfd", g_tmp);
        json_t *m = load_manifest(d);
        check_accounting(m, L);
        CHECK(acc(m, "documents", "whole") == 4 && acc(m, "documents", "chunked") == 1 && acc(m, NULL, "pieces") == 6);
        CHECK(acc(m, "tokens", "pad") == 4);
        json_decref(m);
    }
    /* none: one row per document; doc 4 (9 tokens + EOT) is over-long */
    const char *ol[3] = {"truncate", "chunk", "drop"};
    for (int o = 0; o < 3; o++) {
        char name[64], opts[128];
        snprintf(name, sizeof name, "none-%s", ol[o]);
        snprintf(opts, sizeof opts, "--pack none --over-long %s", ol[o]);
        ds_shardset *set = build(name, opts, in);
        xrow x[8];
        int n = 0;
        for (int d = 0; d < ND; d++) {
            int len = k_lens[d] + 1;
            if (len <= (int)L) {
                x[n++] = (xrow){1, {{d, 0, len}}, 0};
            } else if (o == 0) {
                x[n++] = (xrow){1, {{d, 0, (int)L}}, 0};
            } else if (o == 1) {
                x[n++] = (xrow){1, {{d, 0, (int)L}}, 0};
                x[n++] = (xrow){1, {{d, (int)L, len - (int)L}}, 0};
            }
        }
        CHECK(set && ds_shardset_rows(set, DS_SPLIT_TRAIN) == (uint64_t)n);
        for (int r = 0; set && r < n; r++) check_row(set, (uint64_t)r, &x[r], L, name);
        ds_shardset_close(set);
        char d[512];
        snprintf(d, sizeof d, "%s/%s", g_tmp, name);
        json_t *m = load_manifest(d);
        check_accounting(m, L);
        if (o == 0) CHECK(acc(m, "documents", "truncated") == 1 && acc(m, "tokens", "truncated_lost") == 1);
        if (o == 1) CHECK(acc(m, "documents", "chunked") == 1 && acc(m, "tokens", "chunked") == 9);
        if (o == 2) {
            CHECK(acc(m, "documents", "dropped") == 1 && acc(m, "tokens", "dropped") == 9);
            CHECK(sh("grep -q '\"line\":5,.*\"reason\":\"over-long\"' %s/rejects.jsonl", d) == 0);
        }
        json_decref(m);
    }
}

/* The public manifest reader (ds_manifest_read) and the enum name tables:
 * the figures inspect prints, equal to the manifest's; a config that names
 * no pack is refused with the library's names. */
static void test_manifest_reader(void) {
    for (int i = 0; ds_pack_name(i); i++) {
        ds_pack p;
        CHECK(ds_pack_parse(ds_pack_name(i), &p) == 0 && (int)p == i);
    }
    for (int i = 0; ds_over_long_name(i); i++) {
        ds_over_long o;
        CHECK(ds_over_long_parse(ds_over_long_name(i), &o) == 0 && (int)o == i);
    }
    ds_doc_sep s;
    CHECK(ds_doc_sep_parse("blank", &s) == 0 && s == DS_SEP_BLANK && ds_doc_sep_parse("para", &s) == -1);
    ds_split sp;
    CHECK(ds_split_parse("val", &sp) == 0 && sp == DS_SPLIT_VAL && !strcmp(ds_split_name(DS_SPLIT_TRAIN), "train"));
    CHECK(ds_split_parse("test", &sp) == -1 && ds_split_name(2) == NULL);
    CHECK(ds_pack_name(3) == NULL && ds_pack_name(-1) == NULL && ds_pack_parse(NULL, &(ds_pack){0}) == -1);
    char names[64];
    CHECK(!strcmp(ds_names_list(ds_over_long_name, names, sizeof names), "truncate, chunk, drop or drop-turns"));
    CHECK(!strcmp(ds_names_list(ds_pack_name, names, 8), "concat,"));
    char d[512], err[512];
    snprintf(d, sizeof d, "%s/none-chunk", g_tmp);
    ds_manifest_info m;
    CHECK(ds_manifest_read(d, &m, err, sizeof err) == DS_OK);
    json_t *j = load_manifest(d);
    CHECK(m.pack == DS_PACK_NONE && m.over_long == DS_OL_CHUNK && m.seq_len == 8 && !m.shuffle);
    CHECK(!strcmp(m.tokenizer_spec, "gpt2") && !strcmp(m.tokenizer_name, "gpt2") && m.eot_id == g_eot);
    CHECK(m.docs_in == (uint64_t)acc(j, "documents", "in") && m.tokens_in == (uint64_t)acc(j, "tokens", "in"));
    CHECK(m.tokens_written == (uint64_t)acc(j, "tokens", "written"));
    CHECK(!strcmp(m.utilisation, json_string_value(json_object_get(json_object_get(j, "accounting"), "utilisation"))));
    const ds_build_account *a = ds_manifest_account(&m);
    CHECK(a && a->docs_chunked == 1 && a->tok_chunked == 9 && a->rows[0] == m.split_rows[0]);
    uint64_t rows = 0;
    for (size_t i = 0; i < m.n_shards; i++) rows += m.shards[i].split == DS_SPLIT_TRAIN ? m.shards[i].rows : 0;
    CHECK(m.n_shards >= 1 && rows == m.split_rows[0]);
    ds_manifest_info_free(&m);
    CHECK(ds_manifest_account(&m) == NULL);
    /* a config naming no pack: refused, the message from the library's table */
    json_object_set_new(json_object_get(j, "config"), "pack", json_string("zigzag"));
    snprintf(d, sizeof d, "%s/bad-pack", g_tmp);
    CHECK(sh("mkdir -p %s", d) == 0);
    char mp[600];
    snprintf(mp, sizeof mp, "%s/manifest.json", d);
    CHECK(json_dump_file(j, mp, 0) == 0);
    json_decref(j);
    CHECK(ds_manifest_read(d, &m, err, sizeof err) == DS_ERR_FORMAT);
    CHECK(strstr(err, "config.pack must be concat, bfd or none") != NULL);
    if (!strstr(err, "config.pack")) fprintf(stderr, "ds_manifest_read: %s\n", err);
}

/* rejected records: listed with file, line and reason; accounted */
static void test_rejects(void) {
    char in[512];
    snprintf(in, sizeof in, "%s/rej.jsonl", g_tmp);
    FILE *f = fopen(in, "w");
    fprintf(f, "{\"text\": \"good one\"}\n{\"text\": broken\n{\"other\": 1}\n{\"text\": 5}\n");
    fprintf(f, "{\"text\": \"nul \\u0000 here\"}\n");
    fputs("{\"text\": \"bad \xff utf8\"}\n", f);
    fprintf(f, "{\"text\": \"good two\"}\n");
    fclose(f);
    ds_shardset *set = build("rej", "--pack concat", in);
    ds_shardset_close(set);
    char d[512];
    snprintf(d, sizeof d, "%s/rej", g_tmp);
    json_t *m = load_manifest(d);
    check_accounting(m, 8);
    CHECK(acc(m, "documents", "in") == 7 && acc(m, "documents", "rejected") == 5 && acc(m, "documents", "whole") == 2);
    json_decref(m);
    CHECK(sh("test $(wc -l < %s/rejects.jsonl) -eq 5", d) == 0);
    const char *want[] = {"\"line\":2,.*json-malformed", "\"line\":3,.*field-missing", "\"line\":4,.*field-not-string",
                          "\"line\":5,.*nul-byte", "\"line\":6,.*utf8-invalid"};
    for (int i = 0; i < 5; i++) CHECK(sh("grep -Eq '%s' %s/rejects.jsonl", want[i], d) == 0);
    /* invalid UTF-8 in a .txt document */
    snprintf(in, sizeof in, "%s/bad.txt", g_tmp);
    f = fopen(in, "w");
    fputs("ok line\nbad \xc3\x28 line\n", f);
    fclose(f);
    CHECK(sh("%s build -q -t gpt2 -L 8 --doc-sep line -o %s/rejtxt %s", g_bin, g_tmp, in) == 0);
    CHECK(sh("grep -q '\"line\":2,.*utf8-invalid' %s/rejtxt/rejects.jsonl", g_tmp) == 0);
}

/* the records build rejects are the records lint reports with error rules */
static void test_lint_agreement(void) {
    char d[512], lj[512];
    snprintf(d, sizeof d, "%s/lintagree", g_tmp);
    snprintf(lj, sizeof lj, "%s/lint.json", g_tmp);
    CHECK(sh("%s build -q -t gpt2 -L 64 -o %s %s/bad", g_bin, d, MKS_TEST_DATA) == 0);
    CHECK(sh("%s lint --json %s/bad > %s 2>/dev/null; test $? -le 2", g_bin, MKS_TEST_DATA, lj) == 0);
    json_error_t e;
    json_t *l = json_load_file(lj, 0, &e);
    json_t *m = load_manifest(d);
    CHECK(l && m);
    if (!l || !m) return;
    json_t *reasons = json_object_get(json_object_get(m, "accounting"), "reject_reasons");
    json_t *f = json_object_get(l, "findings");
    long long lint_errors = 0;
    for (size_t i = 0; i < json_array_size(f); i++) {
        json_t *x = json_array_get(f, i);
        if (strcmp(json_string_value(json_object_get(x, "severity")), "error")) continue;
        const char *rule = json_string_value(json_object_get(x, "rule"));
        long long n = json_integer_value(json_object_get(x, "count"));
        lint_errors += n;
        if (json_integer_value(json_object_get(reasons, rule)) != n) {
            fprintf(stderr, "rule %s: lint %lld, build rejected %lld\n", rule, n,
                    (long long)json_integer_value(json_object_get(reasons, rule)));
            failures++;
        }
    }
    CHECK(lint_errors > 10 && acc(m, "documents", "rejected") == lint_errors);
    json_decref(l);
    json_decref(m);
}

/* exit codes and refusals */
static void test_cli_errors(void) {
    CHECK(sh("%s build -q -L 8 -o %s/e1 %s/docs.jsonl 2>/dev/null", g_bin, g_tmp, g_tmp) == 64);    /* no tokenizer */
    CHECK(sh("%s build -q -t gpt2 -o %s/e1 %s/docs.jsonl 2>/dev/null", g_bin, g_tmp, g_tmp) == 64); /* no L */
    CHECK(sh("%s build -q -t gpt2 -L 8 --pack zig -o %s/e1 %s/docs.jsonl 2>/dev/null", g_bin, g_tmp, g_tmp) == 64);
    CHECK(sh("%s build -q -t gpt2 -L 8 --part 3/2 -o %s/e1 %s/docs.jsonl 2>/dev/null", g_bin, g_tmp, g_tmp) == 64);
    CHECK(sh("%s build -q -t gpt2 -L 8 -o %s/e1 %s/nonexistent.jsonl 2>/dev/null", g_bin, g_tmp, g_tmp) == 2);
    CHECK(sh("%s verify %s/nonexistent 2>/dev/null", g_bin, g_tmp) == 2);
    CHECK(sh("%s inspect %s/concat --row 999 2>/dev/null >/dev/null", g_bin, g_tmp) == 64);
    CHECK(sh("%s inspect %s/concat --row 1 >/dev/null", g_bin, g_tmp) == 0);
    CHECK(sh("%s inspect %s/concat/train-00000.mks --row 0 >/dev/null", g_bin, g_tmp) == 0);
    /* the same folder with another configuration is refused unless --force */
    CHECK(sh("%s build -q -t gpt2 -L 16 -o %s/concat %s/docs.jsonl 2>/dev/null", g_bin, g_tmp, g_tmp) == 2);
    CHECK(sh("%s build -q -t gpt2 -L 16 --force -o %s/e2 %s/docs.jsonl", g_bin, g_tmp, g_tmp) == 0);
    CHECK(sh("%s build -q -t gpt2 -L 8 --force -o %s/e2 %s/docs.jsonl", g_bin, g_tmp, g_tmp) == 0);
    CHECK(sh("%s verify -q %s/e2", g_bin, g_tmp) == 0);
    CHECK(sh("ls %s/e2 | grep -c mks | grep -qx 1", g_tmp) == 0); /* the L=16 shard is gone */
}

static int same_dirs(const char *a, const char *b) { return sh("diff -r %s %s >/dev/null", a, b) == 0; }

#define INPUTS MKS_TEST_DATA "/clean " MKS_SOURCE_DIR "/samples/tiny.jsonl " MKS_TEST_DATA "/bad"

static void test_threads_parts(void) {
    const char *common = "-t gpt2 -L 64 --pack bfd --bfd-window 8 --val-fraction 0.3 --seed 7 --shard-tokens 8K "
                         "--batch-bytes 16K -q";
    int th[3] = {1, 2, 4};
    for (int z = 0; z < 2; z++) {
        for (int i = 0; i < 3; i++)
            CHECK(sh("%s build %s %s -j %d -o %s/t%d_%d " INPUTS, g_bin, common, z ? "--zstd 3 --frame-rows 16" : "",
                     th[i], g_tmp, z, th[i]) == 0);
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/t%d_1", g_tmp, z);
        for (int i = 1; i < 3; i++) {
            snprintf(b, sizeof b, "%s/t%d_%d", g_tmp, z, th[i]);
            CHECK(same_dirs(a, b));
        }
        CHECK(sh("%s verify -q %s", g_bin, a) == 0);
        json_t *m = load_manifest(a);
        check_accounting(m, 64);
        CHECK(acc(m, "documents", "rejected") > 5 && acc(m, "rows", "val") > 0 && acc(m, "rows", "train") > 0);
        CHECK(json_array_size(json_object_get(m, "shards")) > 4);
        json_decref(m);
    }
    /* concat too, 1 vs 4 threads */
    CHECK(sh("%s build -t gpt2 -L 100 --val-fraction 0.2 --shard-tokens 10K --batch-bytes 8K -q -j1 -o %s/c1 " INPUTS,
             g_bin, g_tmp) == 0);
    CHECK(sh("%s build -t gpt2 -L 100 --val-fraction 0.2 --shard-tokens 10K --batch-bytes 8K -q -j4 -o %s/c4 " INPUTS,
             g_bin, g_tmp) == 0);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/c1", g_tmp);
    snprintf(b, sizeof b, "%s/c4", g_tmp);
    CHECK(same_dirs(a, b));

    /* --part K/N + merge == single build (N = 3 and N = 2) */
    for (int n = 2; n <= 3; n++) {
        for (int k = 1; k <= n; k++)
            CHECK(sh("%s build %s -j 2 --part %d/%d -o %s/p%d_%d " INPUTS, g_bin, common, k, n, g_tmp, n, k) == 0);
        char parts[2048] = "";
        for (int k = n; k >= 1; k--) { /* any order on the command line */
            size_t l = strlen(parts);
            snprintf(parts + l, sizeof parts - l, " %s/p%d_%d", g_tmp, n, k);
        }
        CHECK(sh("%s merge -q -o %s/merged%d %s", g_bin, g_tmp, n, parts) == 0);
        snprintf(a, sizeof a, "%s/t0_1", g_tmp);
        snprintf(b, sizeof b, "%s/merged%d", g_tmp, n);
        CHECK(same_dirs(a, b));
    }
    /* mismatched parts are refused */
    CHECK(sh("%s merge -q -o %s/bad_merge %s/p2_1 %s/p3_2 2>/dev/null", g_bin, g_tmp, g_tmp, g_tmp) == 2);
}

/* every single-byte change of a small shard is caught */
static void test_corruption(void) {
    for (int z = 0; z < 2; z++) {
        char dir[512], path[600];
        snprintf(dir, sizeof dir, "%s/small%d", g_tmp, z);
        CHECK(sh("%s build -q -t gpt2 -L 8 --pack bfd %s -o %s %s/docs5.jsonl", g_bin,
                 z ? "--zstd 1 --frame-rows 2" : "", dir, g_tmp) == 0);
        snprintf(path, sizeof path, "%s/train-00000.mks", dir);
        int fd = open(path, O_RDWR);
        CHECK(fd >= 0);
        struct stat st;
        fstat(fd, &st);
        size_t n = (size_t)st.st_size;
        uint8_t *orig = malloc(n);
        CHECK(pread(fd, orig, n, 0) == (ssize_t)n);
        char err[512];
        CHECK(ds_shard_verify(path, NULL, err, sizeof err) == DS_OK);
        long undetected = 0, tried = 0;
        for (size_t i = 0; i < n; i++) {
            for (int v = 0; v < 256; v++) {
                if (v == orig[i]) continue;
                uint8_t b = (uint8_t)v;
                CHECK(pwrite(fd, &b, 1, (off_t)i) == 1);
                tried++;
                if (ds_shard_verify(path, NULL, err, sizeof err) == DS_OK) {
                    if (undetected < 5) fprintf(stderr, "undetected: byte %zu = %d\n", i, v);
                    undetected++;
                }
            }
            CHECK(pwrite(fd, &orig[i], 1, (off_t)i) == 1);
        }
        CHECK(undetected == 0);
        CHECK(tried == (long)n * 255);
        /* truncated and extended files */
        CHECK(ftruncate(fd, (off_t)n - 1) == 0);
        CHECK(ds_shard_verify(path, NULL, err, sizeof err) != DS_OK);
        CHECK(pwrite(fd, orig + n - 1, 1, (off_t)n - 1) == 1);
        CHECK(pwrite(fd, "x", 1, (off_t)n) == 1);
        CHECK(ds_shard_verify(path, NULL, err, sizeof err) != DS_OK);
        CHECK(ftruncate(fd, (off_t)n) == 0);
        CHECK(ds_shard_verify(path, NULL, err, sizeof err) == DS_OK);
        /* the CLI names the shard and the offset */
        uint8_t b = orig[DS_SHARD_HEADER_BYTES + 3] ^ 0x10;
        CHECK(pwrite(fd, &b, 1, DS_SHARD_HEADER_BYTES + 3) == 1);
        CHECK(sh("%s verify %s 2>%s/verify.err >/dev/null", g_bin, dir, g_tmp) == 2);
        CHECK(sh("grep -q 'train-00000.mks: offset 192-' %s/verify.err", g_tmp) == 0);
        CHECK(pwrite(fd, &orig[DS_SHARD_HEADER_BYTES + 3], 1, DS_SHARD_HEADER_BYTES + 3) == 1);
        CHECK(sh("%s verify -q %s", g_bin, dir) == 0);
        printf("corruption (%s): %ld single-byte changes of a %zu-byte shard, all detected\n", z ? "zstd" : "plain",
               tried, n);
        free(orig);
        close(fd);
    }
}

/* concurrent readers on one handle see the same rows as one reader */
typedef struct {
    ds_shardset *set;
    int split;
    uint64_t sum;
} rd_arg;

static void *reader_thread(void *p) {
    rd_arg *a = p;
    ds_shardset_info in;
    ds_shardset_get_info(a->set, &in);
    uint32_t *t = malloc(in.row_len * sizeof *t), *pos = malloc(in.row_len * sizeof *pos),
             *doc = malloc(in.row_len * sizeof *doc);
    uint8_t *m = malloc(in.row_len);
    uint64_t n = ds_shardset_rows(a->set, (ds_split)a->split);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t r = (k * 7919) % n; /* scattered order */
        if (ds_shardset_read(a->set, (ds_split)a->split, r, t, pos, doc, m) != DS_OK) {
            a->sum = 0;
            break;
        }
        a->sum += XXH3_64bits(t, in.row_len * 4) ^ XXH3_64bits(pos, in.row_len * 4) ^ XXH3_64bits(doc, in.row_len * 4) ^
                  XXH3_64bits(m, in.row_len) ^ r;
    }
    free(t), free(pos), free(doc), free(m);
    return NULL;
}

static void test_concurrent_read(void) {
    for (int z = 0; z < 2; z++) {
        char dir[512], err[512];
        snprintf(dir, sizeof dir, "%s/t%d_1", g_tmp, z);
        ds_shardset *set = NULL;
        CHECK(ds_shardset_open(dir, DS_SHARD_OPEN_VERIFY, &set, err, sizeof err) == DS_OK);
        if (!set) continue;
        ds_shardset_info in;
        ds_shardset_get_info(set, &in);
        CHECK(in.row_len == 64 && in.vocab_size == 50257 && in.dtype_bytes == 2 && in.rows[0] > 0 && in.rows[1] > 0);
        uint8_t fp[32];
        tk_fingerprint(g_tok, fp);
        CHECK(memcmp(fp, in.fingerprint, 32) == 0);
        for (int split = 0; split < 2; split++) {
            rd_arg one = {set, split, 0};
            reader_thread(&one);
            CHECK(one.sum != 0);
            pthread_t th[4];
            rd_arg a[4];
            for (int i = 0; i < 4; i++) {
                a[i] = (rd_arg){set, split, 0};
                pthread_create(&th[i], NULL, reader_thread, &a[i]);
            }
            for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                CHECK(a[i].sum == one.sum);
            }
        }
        CHECK(ds_shardset_read(set, DS_SPLIT_TRAIN, in.rows[0], NULL, NULL, NULL, NULL) == DS_ERR_ARG);
        ds_shardset_close(set);
    }
}

int main(void) {
    setenv("MKS_VOCAB_DIR", MKS_SHARED_DIR "/vocab", 1);
    if (access(MKS_SHARED_DIR "/vocab/gpt2.tiktoken", R_OK) != 0) {
        fprintf(stderr, "skip: no gpt2 vocabulary in %s/vocab\n", MKS_SHARED_DIR);
        return 77;
    }
    char err[256];
    if (tk_load(MKS_SHARED_DIR "/vocab/gpt2.tiktoken", TK_PAT_NONE, &g_tok, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tk_load: %s\n", err);
        return 1;
    }
    tk_eot_id(g_tok, &g_eot);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_shards_XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    test_policies();
    test_manifest_reader();
    test_rejects();
    test_lint_agreement();
    test_cli_errors();
    test_threads_parts();
    test_concurrent_read();
    test_corruption();
    if (!failures) sh("rm -rf %s", g_tmp);
    else fprintf(stderr, "outputs kept in %s\n", g_tmp);
    for (int d = 0; d < ND; d++) tk_ids_free(&g_ids[d]);
    tk_free(g_tok);
    printf("%s (%d failures)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
