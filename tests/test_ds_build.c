/* test_ds_build.c - the build pipeline as a library, without the CLI:
 * ds_build (result, progress events, cancellation + resume to the same
 * bytes, thread count, up-to-date rerun, the lock, refusing an output inside
 * an input, no rows), ds_merge of parts against a single build, ds_encode
 * against tk_encode, ds_refuse_overwrite / ds_lock_dir, a ds_source against
 * the same documents in JSONL (build and lint). Needs the gpt2
 * vocabulary of the shared folder (exit 77 without it). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ds.h"
#include "test_check.h"
#include "tk.h"

static tk_tokenizer *g_tok;
static char g_dir[256];

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Two JSONL files of 400 documents each (lengths 1..~300 tokens) and one with bad records. */
static void make_inputs(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/in", g_dir);
    mkdir(p, 0755);
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/in/%c.jsonl", g_dir, 'a' + k);
        FILE *f = fopen(p, "wb");
        for (int d = 0; f && d < 400; d++) {
            fprintf(f, "{\"text\": \"doc %d of file %d:", d, k);
            for (int w = 0; w < (d * 37 + k * 11) % 300; w++) fprintf(f, " word%d", (w * 7 + d) % 50);
            fputs("\"}\n", f);
        }
        if (f) fclose(f);
    }
    snprintf(p, sizeof p, "%s/in/c.jsonl", g_dir);
    put(p, "{\"text\": \"fine\"}\nnot json\n{\"other\": 1}\n{\"text\": \"also fine\"}\n");
}

/* Concatenated bytes of every file of DIR (sorted names), for comparing sets. */
static char *slurp_dir(const char *dir, size_t *len) {
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    char *all = NULL;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", dir, names[i]->d_name);
            FILE *f = fopen(p, "rb");
            if (f) {
                fseek(f, 0, SEEK_END);
                long sz = ftell(f);
                fseek(f, 0, SEEK_SET);
                size_t nl = strlen(names[i]->d_name);
                all = realloc(all, used + nl + (size_t)sz + 1);
                memcpy(all + used, names[i]->d_name, nl);
                used += nl;
                used += fread(all + used, 1, (size_t)sz, f);
                fclose(f);
            }
        }
        free(names[i]);
    }
    free(names);
    *len = used;
    return all;
}

static int same_dirs(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = slurp_dir(a, &la), *y = slurp_dir(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static void base_opts(ds_build_opts *o, const char *const *inputs, size_t n, const char *out) {
    ds_build_opts_init(o);
    o->tok = g_tok;
    o->tokenizer_spec = "gpt2";
    o->inputs = inputs;
    o->n_inputs = n;
    o->out_dir = out;
    o->seq_len = 64;
    o->val_fraction = 0.1;
    o->shard_tokens = 4096;
    o->batch_bytes = 16 << 10; /* many batches: progress events and checkpoints */
    o->checkpoint_seconds = 0;
}

typedef struct {
    int progress, last, cancel_after;
} events;

static int on_event(const ds_build_event *ev, void *user) {
    events *e = user;
    if (ev->kind != DS_BUILD_EV_PROGRESS) return 0;
    e->progress++;
    e->last |= ev->last;
    return e->cancel_after && e->progress >= e->cancel_after;
}

static void test_build(void) {
    char in[512], out1[512], out2[512], out3[512], err[1024];
    snprintf(in, sizeof in, "%s/in", g_dir);
    const char *inputs[] = {in};
    snprintf(out1, sizeof out1, "%s/o1", g_dir);
    snprintf(out2, sizeof out2, "%s/o2", g_dir);
    snprintf(out3, sizeof out3, "%s/o3", g_dir);
    for (int pack = 0; pack < 3; pack++) {
        ds_build_opts o;
        ds_build_result r;
        events ev = {0};
        base_opts(&o, inputs, 1, out1);
        o.pack = (ds_pack)pack;
        o.bfd_window = 16; /* windows flush (and shards get written) early: a checkpoint before the cancel */
        o.over_long = DS_OL_CHUNK;
        o.force = 1; /* the folders hold the previous pack's build */
        o.threads = 1;
        o.callback = on_event;
        o.user = &ev;
        int rc = ds_build(&o, &r, err, sizeof err);
        CHECK(rc == DS_OK, "pack %d: %s", pack, err);
        CHECK(!r.up_to_date && r.n_shards >= 2 && ev.progress >= 2 && ev.last, "pack %d: %zu shards, %d events", pack,
              r.n_shards, ev.progress);
        CHECK(r.acc.records == 804 && r.acc.docs_rejected == 2, "pack %d: %llu records, %llu rejected", pack,
              (unsigned long long)r.acc.records, (unsigned long long)r.acc.docs_rejected);
        CHECK(r.acc.docs_whole + r.acc.docs_truncated + r.acc.docs_chunked + r.acc.docs_dropped + r.acc.docs_rejected ==
              r.acc.records);
        /* 2 threads: the same bytes */
        o.out_dir = out2;
        o.threads = 2;
        o.callback = NULL;
        CHECK(ds_build(&o, &r, err, sizeof err) == DS_OK, "%s", err);
        CHECK(same_dirs(out1, out2), "pack %d: 1 and 2 threads differ", pack);
        /* cancelled after 3 batches, then run again: it resumes, same bytes */
        memset(&ev, 0, sizeof ev);
        ev.cancel_after = 3;
        o.out_dir = out3;
        o.callback = on_event;
        rc = ds_build(&o, &r, err, sizeof err);
        CHECK(rc == DS_ERR_CANCELED, "pack %d: cancel gave %d (%s)", pack, rc, err);
        ev.cancel_after = 0;
        rc = ds_build(&o, &r, err, sizeof err);
        CHECK(rc == DS_OK && r.resumed, "pack %d: resume rc %d resumed %d (%s)", pack, rc, r.resumed, err);
        CHECK(same_dirs(out1, out3), "pack %d: resumed build differs", pack);
        /* again: up to date */
        rc = ds_build(&o, &r, err, sizeof err);
        CHECK(rc == DS_OK && r.up_to_date && r.n_checked >= 2, "pack %d: rerun rc %d up_to_date %d", pack, rc,
              r.up_to_date);
        /* another configuration into the same folder: refused without force */
        o.seq_len = 65;
        o.force = 0;
        rc = ds_build(&o, &r, err, sizeof err);
        CHECK(rc == DS_ERR_CONFLICT && strstr(err, "different configuration"), "rc %d: %s", rc, err);
    }
}

static void test_refusals(void) {
    char in[512], inside[600], out[512], err[1024];
    snprintf(in, sizeof in, "%s/in", g_dir);
    snprintf(inside, sizeof inside, "%s/in/out", g_dir);
    snprintf(out, sizeof out, "%s/o4", g_dir);
    const char *inputs[] = {in};
    ds_build_opts o;
    base_opts(&o, inputs, 1, inside);
    int rc = ds_build(&o, NULL, err, sizeof err);
    CHECK(rc == DS_ERR_CONFLICT && strstr(err, "lies inside the input folder"), "rc %d: %s", rc, err);
    CHECK(ds_refuse_overwrite("--out", in, "the input", inputs, 1, err, sizeof err) == DS_ERR_CONFLICT);
    /* a folder locked by someone else */
    mkdir(out, 0755);
    int fd = ds_lock_dir(out, "build or merge", err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    base_opts(&o, inputs, 1, out);
    rc = ds_build(&o, NULL, err, sizeof err);
    CHECK(rc == DS_ERR_BUSY && strstr(err, "another build or merge holds"), "rc %d: %s", rc, err);
    ds_unlock_dir(out, fd);
    /* nothing but bad records: no row, no manifest */
    char bad[512];
    snprintf(bad, sizeof bad, "%s/bad.jsonl", g_dir);
    put(bad, "not json\n{\"x\": 1}\n");
    const char *bad_in[] = {bad};
    base_opts(&o, bad_in, 1, out);
    rc = ds_build(&o, NULL, err, sizeof err);
    CHECK(rc == DS_ERR_EMPTY && strstr(err, "no row written"), "rc %d: %s", rc, err);
    /* bad options */
    base_opts(&o, inputs, 1, out);
    o.seq_len = 0;
    CHECK(ds_build(&o, NULL, err, sizeof err) == DS_ERR_ARG);
}

static void test_merge(void) {
    char in[512], whole[512], p1[512], p2[512], merged[512], err[1024];
    snprintf(in, sizeof in, "%s/in", g_dir);
    snprintf(whole, sizeof whole, "%s/m-whole", g_dir);
    snprintf(p1, sizeof p1, "%s/m-p1", g_dir);
    snprintf(p2, sizeof p2, "%s/m-p2", g_dir);
    snprintf(merged, sizeof merged, "%s/m-merged", g_dir);
    const char *inputs[] = {in};
    ds_build_opts o;
    base_opts(&o, inputs, 1, whole);
    o.pack = DS_PACK_BFD;
    CHECK(ds_build(&o, NULL, err, sizeof err) == DS_OK, "%s", err);
    o.part_n = 2;
    o.part_k = 1;
    o.out_dir = p1;
    CHECK(ds_build(&o, NULL, err, sizeof err) == DS_OK, "%s", err);
    o.part_k = 2;
    o.out_dir = p2;
    CHECK(ds_build(&o, NULL, err, sizeof err) == DS_OK, "%s", err);
    const char *parts[] = {p2, p1};
    size_t n_shards = 0;
    uint64_t rt = 0, rv = 0;
    CHECK(ds_merge(merged, parts, 2, 0, &n_shards, &rt, &rv, err, sizeof err) == DS_OK, "%s", err);
    CHECK(n_shards >= 2 && rt > 0 && rv > 0);
    CHECK(same_dirs(whole, merged), "merge of 2 parts differs from the single build");
    const char *one[] = {p1};
    CHECK(ds_merge(merged, one, 1, 0, NULL, NULL, NULL, err, sizeof err) == DS_ERR_FORMAT);
}

typedef struct {
    size_t docs, mismatches;
    FILE *src; /* the texts, one per line, in order */
} enc_check;

static int sink(const uint32_t *ids, size_t n, void *user) {
    enc_check *c = user;
    char line[16384];
    if (!fgets(line, sizeof line, c->src)) {
        c->mismatches++;
        return 0;
    }
    line[strcspn(line, "\n")] = 0;
    tk_ids want = {0};
    tk_encode(g_tok, (const uint8_t *)line, strlen(line), &want);
    if (want.len != n || (n && memcmp(want.ids, ids, n * sizeof *ids))) c->mismatches++;
    tk_ids_free(&want);
    c->docs++;
    return 0;
}

static void test_encode(void) {
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/enc.txt", g_dir);
    FILE *f = fopen(path, "wb");
    for (int d = 0; f && d < 3000; d++) fprintf(f, "line %d: the quick brown fox %d jumps\n", d, d * d);
    if (f) fclose(f);
    for (int threads = 1; threads <= 3; threads++) {
        enc_check c = {0};
        c.src = fopen(path, "rb");
        const char *inputs[] = {path};
        ds_encode_opts o;
        ds_encode_opts_init(&o);
        o.tok = g_tok;
        o.inputs = inputs;
        o.n_inputs = 1;
        o.doc_sep = DS_SEP_LINE;
        o.threads = threads;
        o.batch_docs = 100;
        o.sink = sink;
        o.user = &c;
        ds_encode_result r;
        int rc = ds_encode(&o, &r, err, sizeof err);
        CHECK(rc == DS_OK, "%s", err);
        CHECK(r.docs == 3000 && c.docs == 3000 && c.mismatches == 0, "threads %d: %llu docs, %zu mismatches", threads,
              (unsigned long long)r.docs, c.mismatches);
        if (c.src) fclose(c.src);
    }
}

/* Framing: bos_id / eos_id in ds_build (every pack), the shard set's info,
 * the old (implicit) framing, refusals, and ds_encode's. */
static void test_framing(void) {
    char in[512], out[512], err[1024];
    snprintf(in, sizeof in, "%s/in", g_dir);
    const char *inputs[] = {in};
    uint32_t eot = 0;
    CHECK(tk_eot_id(g_tok, &eot) == TK_OK);
    for (int pack = 0; pack < 3; pack++) {
        snprintf(out, sizeof out, "%s/fr%d", g_dir, pack);
        ds_build_opts o;
        ds_build_result r;
        base_opts(&o, inputs, 1, out);
        o.pack = (ds_pack)pack;
        o.seq_len = 2048; /* pack none: one whole document per row */
        o.shard_tokens = 1 << 20;
        o.bos_id = 220;
        int rc = ds_build(&o, &r, err, sizeof err);
        CHECK(rc == DS_OK && r.bos_id == 220 && r.eos_id == (int64_t)eot, "pack %d: %s", pack, err);
        CHECK(r.acc.bos == r.acc.records - r.acc.docs_rejected && r.acc.eot == r.acc.bos, "pack %d: %llu BOS", pack,
              (unsigned long long)r.acc.bos);
        ds_shardset *set = NULL;
        CHECK(ds_shardset_open(out, DS_SHARD_OPEN_VERIFY, &set, err, sizeof err) == DS_OK, "%s", err);
        if (!set) continue;
        ds_shardset_info info;
        ds_shardset_get_info(set, &info);
        CHECK(info.bos_id == 220 && info.eos_id == (int64_t)eot && info.eot_id == eot, "pack %d: info %lld %lld", pack,
              (long long)info.bos_id, (long long)info.eos_id);
        uint32_t *tok = malloc(2048 * sizeof *tok), *pos = malloc(2048 * sizeof *pos);
        uint64_t starts = 0, bos_at_start = 0;
        for (uint64_t i = 0; tok && pos && i < ds_shardset_rows(set, DS_SPLIT_TRAIN); i++) {
            ds_shardset_read(set, DS_SPLIT_TRAIN, i, tok, pos, NULL, NULL);
            for (uint32_t k = 0; k < 2048; k++)
                /* a document start: a segment start that is not padding (nor, in concat, a row's continuation) */
                if (pos[k] == 0 && (k ? tok[k - 1] != eot || tok[k] != eot : pack != DS_PACK_CONCAT))
                    starts++, bos_at_start += tok[k] == 220;
        }
        CHECK(starts > 0 && bos_at_start == starts, "pack %d: %llu of %llu segments start with BOS", pack,
              (unsigned long long)bos_at_start, (unsigned long long)starts);
        free(tok), free(pos);
        ds_shardset_close(set);
    }
    /* eos none: the headers' EOT / pad id is the BOS; an id beyond the vocabulary is refused */
    ds_build_opts o;
    ds_build_result r;
    snprintf(out, sizeof out, "%s/fr-noeos", g_dir);
    base_opts(&o, inputs, 1, out);
    o.bos_id = 220;
    o.eos_id = -1;
    CHECK(ds_build(&o, &r, err, sizeof err) == DS_OK && r.acc.eot == 0, "%s", err);
    ds_shardset *set = NULL;
    if (ds_shardset_open(out, 0, &set, err, sizeof err) == DS_OK) {
        ds_shardset_info info;
        ds_shardset_get_info(set, &info);
        CHECK(info.bos_id == 220 && info.eos_id == -1 && info.eot_id == 220 && info.pad_id == 220);
        ds_shardset_close(set);
    }
    snprintf(out, sizeof out, "%s/fr-bad", g_dir);
    base_opts(&o, inputs, 1, out);
    o.eos_id = 60000;
    CHECK(ds_build(&o, &r, err, sizeof err) == DS_ERR_ARG, "id beyond the vocabulary: %s", err);
    /* a build with the old framing reads as no BOS, EOS = eot_id */
    snprintf(out, sizeof out, "%s/fr-old", g_dir);
    base_opts(&o, inputs, 1, out);
    CHECK(ds_build(&o, &r, err, sizeof err) == DS_OK && r.bos_id == -1 && r.eos_id == (int64_t)eot, "%s", err);
    set = NULL;
    if (ds_shardset_open(out, 0, &set, err, sizeof err) == DS_OK) {
        ds_shardset_info info;
        ds_shardset_get_info(set, &info);
        CHECK(info.bos_id == -1 && info.eos_id == (int64_t)eot);
        ds_shardset_close(set);
    }
}

/* ds_source: the documents of a.jsonl and b.jsonl (make_inputs) from a
 * callback, then one item with no field and, in the stopping variant, an
 * error after stop_at items. */
typedef struct {
    int k, d, n, stop_at, tail;
    char text[4096];
} gen_src;

static int gen_next(void *user, ds_source_item *it, char *err, size_t errlen) {
    gen_src *g = user;
    if (g->stop_at && g->n == g->stop_at) {
        snprintf(err, errlen, "the generator failed");
        return DS_ERR_IO;
    }
    if (g->k == 2) {
        if (g->tail) return 0;
        g->tail = 1;
        g->n++;
        it->status = DS_REC_MISSING_FIELD;
        it->detail = "no field 'text'";
        return 1;
    }
    int len = snprintf(g->text, sizeof g->text, "doc %d of file %d:", g->d, g->k);
    for (int w = 0; w < (g->d * 37 + g->k * 11) % 300; w++)
        len += snprintf(g->text + len, sizeof g->text - (size_t)len, " word%d", (w * 7 + g->d) % 50);
    it->status = DS_REC_OK;
    it->text = (const uint8_t *)g->text;
    it->len = (size_t)len;
    if (++g->d == 400) g->d = 0, g->k++;
    g->n++;
    return 1;
}

static void rm_manifest(const char *dir) {
    char p[600];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/rejects.jsonl", dir);
    unlink(p);
}

static void test_source(void) {
    char a[512], b[512], c[512], out1[512], out2[512], err[1024];
    snprintf(a, sizeof a, "%s/in/a.jsonl", g_dir);
    snprintf(b, sizeof b, "%s/in/b.jsonl", g_dir);
    /* one file: packing restarts at each input file (so that --part + merge equal one build), and a source is
     * one stream */
    snprintf(c, sizeof c, "%s/src.jsonl", g_dir);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cat '%s' '%s' > '%s' && echo '{\"other\": 1}' >> '%s'", a, b, c, c);
    CHECK(system(cmd) == 0, "%s", cmd);
    const char *inputs[] = {c};
    snprintf(out1, sizeof out1, "%s/src_files", g_dir);
    snprintf(out2, sizeof out2, "%s/src_cb", g_dir);
    ds_build_opts o;
    ds_build_result r;
    base_opts(&o, inputs, 1, out1);
    o.pack = DS_PACK_BFD;
    o.threads = 2;
    CHECK(ds_build(&o, &r, err, sizeof err) == DS_OK, "files: %s", err);
    gen_src g = {0};
    ds_source src = {gen_next, &g, "<gen>"};
    base_opts(&o, NULL, 0, out2);
    o.pack = DS_PACK_BFD;
    o.threads = 2;
    o.source = &src;
    int rc = ds_build(&o, &r, err, sizeof err);
    CHECK(rc == DS_OK && !r.resumed, "source: rc %d %s", rc, err);
    CHECK(r.acc.records == 801 && r.acc.docs_rejected == 1, "source: %llu records, %llu rejected",
          (unsigned long long)r.acc.records, (unsigned long long)r.acc.docs_rejected);
    char rp[600];
    snprintf(rp, sizeof rp, "%s/rejects.jsonl", out2);
    size_t rl = 0;
    FILE *f = fopen(rp, "rb");
    char rej[512] = {0};
    if (f) {
        rl = fread(rej, 1, sizeof rej - 1, f);
        fclose(f);
    }
    CHECK(rl && strstr(rej, "\"<gen>\"") && strstr(rej, "\"line\":801"), "rejects: %s", rej);
    /* a second run is not "up to date" (a source may differ) and gives the same bytes */
    memset(&g, 0, sizeof g);
    rc = ds_build(&o, &r, err, sizeof err);
    CHECK(rc == DS_OK && !r.up_to_date, "source rerun: rc %d up_to_date %d", rc, r.up_to_date);
    rm_manifest(out1);
    rm_manifest(out2);
    CHECK(same_dirs(out1, out2), "a source and the same documents in JSONL give different shards");
    /* the source's error stops the build with its message; no manifest */
    char out3[512];
    snprintf(out3, sizeof out3, "%s/src_err", g_dir);
    memset(&g, 0, sizeof g);
    g.stop_at = 500;
    o.out_dir = out3;
    rc = ds_build(&o, &r, err, sizeof err);
    snprintf(rp, sizeof rp, "%s/manifest.json", out3);
    CHECK(rc == DS_ERR_IO && strstr(err, "the generator failed") && access(rp, F_OK) != 0, "stop: rc %d %s", rc, err);
    /* refusals: a source with inputs, or with --part */
    memset(&g, 0, sizeof g);
    o.part_n = 2;
    CHECK(ds_build(&o, &r, err, sizeof err) == DS_ERR_ARG, "part with a source accepted");
    o.part_n = 1;
    o.inputs = inputs;
    o.n_inputs = 1;
    CHECK(ds_build(&o, &r, err, sizeof err) == DS_ERR_ARG, "inputs with a source accepted");
    /* ds_analyze over the source counts the same documents as over the files */
    ds_analyze_opts ao;
    ds_analyze_opts_init(&ao);
    ao.tok = g_tok;
    ao.threads = 2;
    ds_lint_report *l1 = NULL, *l2 = NULL;
    CHECK(ds_analyze(inputs, 1, NULL, &ao, &l1, NULL, err, sizeof err) == DS_OK, "%s", err);
    memset(&g, 0, sizeof g);
    ao.source = &src;
    CHECK(ds_analyze(NULL, 0, NULL, &ao, &l2, NULL, err, sizeof err) == DS_OK, "%s", err);
    if (l1 && l2) {
        char *j1 = NULL, *j2 = NULL;
        size_t n1 = 0, n2 = 0;
        FILE *f1 = open_memstream(&j1, &n1), *f2 = open_memstream(&j2, &n2);
        ds_lint_write_json(l1, f1);
        ds_lint_write_json(l2, f2);
        fclose(f1);
        fclose(f2);
        /* the same report but for where: the one example's file and offset (its line is 801 in both) */
        CHECK(j1 && j2 && strstr(j2, "\"<gen>\"") && strstr(j1, "src.jsonl"), "lint reports:\n%s\n%s", j1, j2);
        const char *c1 = j1 ? strstr(j1, "\"findings\"") : NULL, *c2 = j2 ? strstr(j2, "\"findings\"") : NULL;
        CHECK(c1 && c2 && (size_t)(c1 - j1) == (size_t)(c2 - j2) && !memcmp(j1, j2, (size_t)(c1 - j1)),
              "lint counts differ:\n%s\n%s", j1, j2);
        free(j1);
        free(j2);
    }
    ds_lint_report_free(l1);
    ds_lint_report_free(l2);
}

int main(void) {
    char err[512];
    if (access(MKS_SHARED_DIR "/vocab/gpt2.tiktoken", R_OK) != 0) {
        fprintf(stderr, "skip: no gpt2 vocabulary in %s/vocab\n", MKS_SHARED_DIR);
        return 77;
    }
    if (tk_load(MKS_SHARED_DIR "/vocab/gpt2.tiktoken", TK_PAT_NONE, &g_tok, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tk_load: %s\n", err);
        return 1;
    }
    snprintf(g_dir, sizeof g_dir, "/tmp/test_ds_build.XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    make_inputs();
    test_build();
    test_refusals();
    test_merge();
    test_encode();
    test_framing();
    test_source();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    tk_free(g_tok);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("test_ds_build: all checks passed\n");
    return failures ? 1 : 0;
}
