/* test_reader.c - dataset reader: txt modes, JSONL fields, zstd, folders,
 * line/offset bookkeeping, overlong records, corrupt zstd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "ds.h"
#include "test_check.h"

static char tmpdir[256];

static void write_file(const char *name, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    if (!f) {
        perror(p);
        exit(1);
    }
    fwrite(data, 1, n, f);
    fclose(f);
}

static void write_zst(const char *name, const void *data, size_t n, size_t truncate_by) {
    size_t cap = ZSTD_compressBound(n);
    void *buf = malloc(cap);
    size_t z = ZSTD_compress(buf, cap, data, n, 3);
    if (ZSTD_isError(z)) {
        fprintf(stderr, "zstd\n");
        exit(1);
    }
    write_file(name, buf, z - (truncate_by < z ? truncate_by : 0));
    free(buf);
}

typedef struct {
    int n;      /* records stored (first 64) */
    long total; /* all records */
    long by_status[8];
    char last_file[512];
    ds_record rec[64];
    char *text[64];
} recs;

static void read_all(const char *const *names, size_t n, const ds_reader_opts *o, recs *out) {
    char paths[16][512];
    const char *ins[16];
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], "-") == 0) ins[i] = "-";
        else {
            snprintf(paths[i], sizeof paths[i], "%s/%s", tmpdir, names[i]);
            ins[i] = paths[i];
        }
    }
    ds_reader *r;
    char err[256];
    int rc = ds_reader_open(ins, n, o, &r, err, sizeof err);
    if (rc) {
        fprintf(stderr, "open: %s\n", err);
        exit(1);
    }
    for (int i = 0; i < out->n; i++) free(out->text[i]);
    out->n = 0;
    out->total = 0;
    memset(out->by_status, 0, sizeof out->by_status);
    ds_record rec;
    while ((rc = ds_reader_next(r, &rec, err, sizeof err)) == 1) {
        out->total++;
        out->by_status[rec.status]++;
        snprintf(out->last_file, sizeof out->last_file, "%s", rec.file);
        if (out->n < 64) {
            out->rec[out->n] = rec;
            out->text[out->n] = rec.text ? strndup((const char *)rec.text, rec.len) : NULL;
            out->n++;
        }
    }
    CHECK(rc == 0);
    ds_reader_free(r);
}

static int streq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/ds_reader_test_XXXXXX", MKS_BINARY_DIR);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    recs R = {0};
    ds_reader_opts o;

    /* --- JSONL basics, blank lines, line/offset, nested field --- */
    const char *jl = "{\"text\":\"a\"}\n\n{\"text\":\"bb\",\"m\":{\"t\":\"x\"}}\n{\"nope\":1}\n{\"text\":3}\n{bad\n"
                     "{\"text\":\"\\ud800z\"}\r\n{\"text\":\"nul\\u0000in\"}";
    write_file("a.jsonl", jl, strlen(jl));
    ds_reader_opts_init(&o);
    const char *a[] = {"a.jsonl"};
    read_all(a, 1, &o, &R);
    CHECK(R.n == 7);
    CHECK(R.rec[0].status == DS_REC_OK && streq(R.text[0], "a") && R.rec[0].line == 1 && R.rec[0].offset == 0);
    CHECK(R.rec[1].status == DS_REC_OK && streq(R.text[1], "bb") && R.rec[1].line == 3 && R.rec[1].offset == 14);
    CHECK(R.rec[2].status == DS_REC_MISSING_FIELD && R.rec[2].line == 4);
    CHECK(R.rec[3].status == DS_REC_NOT_STRING && R.rec[3].line == 5);
    CHECK(R.rec[4].status == DS_REC_BAD_JSON && R.rec[4].line == 6 && streq(R.text[4], "{bad"));
    CHECK(R.rec[5].status == DS_REC_OK && (R.rec[5].flags & DS_RECF_JSON_LONE_SURROGATE) &&
          streq(R.text[5], "\xEF\xBF\xBDz"));
    CHECK(R.rec[6].status == DS_REC_OK && R.rec[6].len == 6 && R.rec[6].line == 8);
    CHECK(R.rec[6].index == 6 && R.rec[6].record_bytes == strlen("{\"text\":\"nul\\u0000in\"}"));
    o.field = "m.t";
    read_all(a, 1, &o, &R);
    CHECK(R.rec[1].status == DS_REC_OK && streq(R.text[1], "x"));
    CHECK(R.rec[0].status == DS_REC_MISSING_FIELD);

    /* --- txt modes --- */
    const char *tx = "\xEF\xBB\xBFone\r\ntwo\n\n  \nthree\nfour\n\n";
    write_file("t.txt", tx, strlen(tx));
    const char *t[] = {"t.txt"};
    ds_reader_opts_init(&o);
    read_all(t, 1, &o, &R);
    CHECK(R.n == 1 && (R.rec[0].flags & DS_RECF_BOM) && streq(R.text[0], "one\r\ntwo\n\n  \nthree\nfour\n\n"));
    CHECK(R.rec[0].record_bytes == strlen(tx));
    o.doc_sep = DS_SEP_LINE;
    read_all(t, 1, &o, &R);
    CHECK(R.n == 7);
    CHECK(streq(R.text[0], "one") && (R.rec[0].flags & DS_RECF_CRLF) && (R.rec[0].flags & DS_RECF_BOM));
    CHECK(streq(R.text[1], "two") && R.rec[1].line == 2 && R.rec[1].offset == 8);
    CHECK(streq(R.text[4], "three") && R.rec[4].line == 5 && R.rec[4].offset == 16);
    o.doc_sep = DS_SEP_BLANK;
    read_all(t, 1, &o, &R);
    CHECK(R.n == 2);
    CHECK(streq(R.text[0], "one\r\ntwo") && R.rec[0].line == 1);
    CHECK(streq(R.text[1], "three\nfour") && R.rec[1].line == 5 && R.rec[1].offset == 16);

    /* blank-line mode on a CRLF file: no trailing \r in documents */
    const char *crlf = "a1\r\na2\r\n\r\nb1\r\n";
    write_file("crlf.txt", crlf, strlen(crlf));
    const char *cf[] = {"crlf.txt"};
    read_all(cf, 1, &o, &R);
    CHECK(R.n == 2 && streq(R.text[0], "a1\r\na2") && streq(R.text[1], "b1") && R.rec[1].line == 4 &&
          R.rec[1].offset == 10);

    /* --- zstd: good, concatenated frames, truncated, corrupt --- */
    write_zst("z.jsonl.zst", jl, strlen(jl), 0);
    const char *z[] = {"z.jsonl.zst"};
    ds_reader_opts_init(&o);
    read_all(z, 1, &o, &R);
    CHECK(R.n == 7 && streq(R.text[1], "bb") && R.rec[1].offset == 14);
    /* big enough that truncation hits the middle */
    size_t bign = 3u << 20;
    char *big = malloc(bign + 1);
    size_t p = 0;
    int k = 0;
    while (p + 64 < bign)
        p += (size_t)snprintf(big + p, bign - p, "{\"text\":\"doc %d %08x\"}\n", k, k * 2654435761u), k++;
    write_zst("big.jsonl.zst", big, p, 0);
    write_zst("trunc.jsonl.zst", big, p, 1000);
    const char *bz[] = {"big.jsonl.zst"};
    read_all(bz, 1, &o, &R);
    CHECK(R.total == k && R.by_status[DS_REC_OK] == k);
    {
        char path[512];
        snprintf(path, sizeof path, "%s/trunc.jsonl.zst", tmpdir);
        const char *in1[] = {path};
        ds_reader *r;
        char err[256];
        CHECK(ds_reader_open(in1, 1, &o, &r, err, sizeof err) == 0);
        ds_record rec;
        int rc, n = 0, nz = 0;
        uint64_t last_ok_end = 0;
        while ((rc = ds_reader_next(r, &rec, err, sizeof err)) == 1) {
            if (rec.status == DS_REC_OK) {
                n++;
                last_ok_end = rec.offset + rec.record_bytes + 1;
            } else if (rec.status == DS_REC_ZSTD_ERROR) {
                nz++;
                CHECK(rec.offset >= last_ok_end && rec.offset < p);
                CHECK(rec.detail != NULL);
            } else CHECK(0);
        }
        CHECK(rc == 0 && nz == 1 && n > 0 && n < k);
        ds_reader_free(r);
        /* corrupt: flip bytes in the middle */
        size_t cap = ZSTD_compressBound(p);
        unsigned char *buf = malloc(cap);
        size_t zn = ZSTD_compress(buf, cap, big, p, 3);
        for (size_t i = zn / 2; i < zn / 2 + 64; i++) buf[i] ^= 0x5A;
        write_file("corrupt.jsonl.zst", buf, zn);
        /* not zstd at all but named .zst */
        write_file("fake.txt.zst", "hello", 5);
        free(buf);
        const char *cz[] = {"corrupt.jsonl.zst", "fake.txt.zst", "t.txt"};
        read_all(cz, 3, &o, &R);
        CHECK(R.by_status[DS_REC_ZSTD_ERROR] == 2);
        CHECK(R.total >= 3 && streq(R.last_file + strlen(R.last_file) - 5, "t.txt"));
    }

    /* --- overlong: skip / cut with UTF-8 boundary --- */
    const char *ol = "short\n0123456789\xC3\xA9xyz\nend";
    write_file("ol.txt", ol, strlen(ol));
    const char *olf[] = {"ol.txt"};
    ds_reader_opts_init(&o);
    o.doc_sep = DS_SEP_LINE;
    o.max_record_bytes = 11;
    read_all(olf, 1, &o, &R);
    CHECK(R.n == 3 && R.rec[1].status == DS_REC_OVERLONG && R.text[1] == NULL && R.rec[1].record_bytes == 15);
    CHECK(R.rec[2].status == DS_REC_OK && streq(R.text[2], "end") && R.rec[2].offset == 22);
    o.overlong = DS_OVERLONG_CUT;
    read_all(olf, 1, &o, &R);
    CHECK(R.rec[1].status == DS_REC_OVERLONG && streq(R.text[1], "0123456789") && (R.rec[1].flags & DS_RECF_CUT));

    /* --- folders: recursive and sorted; unknown extensions ignored --- */
    char d[512];
    snprintf(d, sizeof d, "%s/dir", tmpdir);
    mkdir(d, 0755);
    snprintf(d, sizeof d, "%s/dir/sub", tmpdir);
    mkdir(d, 0755);
    write_file("dir/b.txt", "B", 1);
    write_file("dir/a.txt", "A", 1);
    write_file("dir/sub/c.jsonl", "{\"text\":\"C\"}\n", 13);
    write_file("dir/zz.bin", "X", 1);
    const char *df[] = {"dir"};
    ds_reader_opts_init(&o);
    read_all(df, 1, &o, &R);
    CHECK(R.n == 3 && streq(R.text[0], "A") && streq(R.text[1], "B") && streq(R.text[2], "C"));

    /* --- stdin: sniffed JSONL --- */
    {
        char path[512];
        snprintf(path, sizeof path, "%s/z.jsonl.zst", tmpdir);
        FILE *f = freopen(path, "rb", stdin);
        CHECK(f != NULL);
        const char *sin[] = {"-"};
        read_all(sin, 1, &o, &R);
        CHECK(R.n == 7 && streq(R.text[0], "a") && streq(R.last_file, "-"));
    }

    /* --- ds_reader_take_text: the text's buffer changes hands, the reader
     * goes on with the buffer it got in exchange (or one of its own) --- */
    {
        const char *t1 = "\xEF\xBB\xBF"
                         "first document\nwith two lines\n",
                   *t2 = "second";
        write_file("take1.txt", t1, strlen(t1));
        write_file("take2.txt", t2, strlen(t2));
        const char *jt = "{\"text\":\"plain\"}\n{\"text\":\"esc\\n\"}\n{\"text\":\"last\"}\n";
        write_file("take.jsonl", jt, strlen(jt));
        char p1[512], p2[512], p3[512];
        snprintf(p1, sizeof p1, "%s/take1.txt", tmpdir);
        snprintf(p2, sizeof p2, "%s/take2.txt", tmpdir);
        snprintf(p3, sizeof p3, "%s/take.jsonl", tmpdir);
        const char *ins[] = {p1, p2};
        ds_reader *r;
        ds_record rec;
        char err[256];
        ds_reader_opts_init(&o);
        CHECK(ds_reader_open(ins, 2, &o, &r, err, sizeof err) == 0);
        CHECK(ds_reader_next(r, &rec, err, sizeof err) == 1);
        uint8_t *buf = NULL;
        size_t cap = 0;
        long long at = ds_reader_take_text(r, &rec, &buf, &cap);
        CHECK(at == 3 && buf && cap > strlen(t1)); /* BOM stripped: the text starts 3 bytes in */
        CHECK(at >= 0 && rec.len == strlen(t1) - 3 && memcmp(buf + at, t1 + 3, rec.len) == 0);
        CHECK(ds_reader_next(r, &rec, err, sizeof err) == 1 && rec.len == 6 && memcmp(rec.text, "second", 6) == 0);
        uint8_t *spare = malloc(16); /* the reader takes this one for what follows */
        size_t spare_cap = 16;
        at = ds_reader_take_text(r, &rec, &spare, &spare_cap);
        CHECK(at == 0 && spare && memcmp(spare, "second", 6) == 0);
        CHECK(ds_reader_next(r, &rec, err, sizeof err) == 0);
        ds_reader_free(r);
        free(spare);
        free(buf);
        /* JSONL: a text without escapes may live in the line buffer (then it
         * is handed over), one with escapes does not (-1, nothing changes) */
        const char *jin[] = {p3};
        CHECK(ds_reader_open(jin, 1, &o, &r, err, sizeof err) == 0);
        buf = NULL;
        cap = 0;
        int handed = 0;
        for (int k = 0; ds_reader_next(r, &rec, err, sizeof err) == 1; k++) {
            const char *want = k == 0 ? "plain" : k == 1 ? "esc\n" : "last";
            CHECK(rec.status == DS_REC_OK && rec.len == strlen(want) && memcmp(rec.text, want, rec.len) == 0);
            uint8_t *b2 = NULL;
            size_t c2 = 0;
            at = ds_reader_take_text(r, &rec, &b2, &c2);
            if (at >= 0) {
                handed++;
                CHECK(b2 && memcmp(b2 + at, want, strlen(want)) == 0);
            } else {
                CHECK(!b2 && c2 == 0);
            }
            free(b2);
        }
        CHECK(ds_reader_take_text(NULL, &rec, &buf, &cap) == -1);
        printf("take_text: %d of 3 JSONL texts handed over\n", handed);
        ds_reader_free(r);
    }

    /* --- errors --- */
    {
        ds_reader *r;
        char err[256] = "";
        const char *missing[] = {"/nonexistent/file.txt"};
        CHECK(ds_reader_open(missing, 1, NULL, &r, err, sizeof err) == DS_ERR_IO && err[0]);
        ds_reader_opts_init(&o);
        o.field = "a..b";
        CHECK(ds_reader_open(a, 0, &o, &r, err, sizeof err) == DS_ERR_ARG);
    }

    for (int i = 0; i < R.n; i++) free(R.text[i]);
    free(big);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_reader: ok\n");
    return 0;
}
