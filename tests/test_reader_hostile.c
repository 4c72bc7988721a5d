/* test_reader_hostile.c - hostile input trees for the dataset reader and the
 * bounded-memory structures of lint/hist (issue 12 items 6, 8, 9):
 * empty (sub)folders (qsort(NULL) before; run it under ASan/UBSan), FIFOs,
 * sockets and devices inside folders and named directly (refused, never a
 * blocking read; "-" stays the way to read a pipe), symlink loops, dangling
 * links, deep nesting, over-long paths; exact length histograms (ranks equal
 * a sort), their coarse mode past the cap (within 1/64, flagged), the
 * duplicate-set cap (report counts what was not tracked), and the examples
 * arrays growing with what was found. An alarm turns any hang into a failure. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "ds.h"
#include "ds_internal.h"
#include "test_check.h"

static char tmpdir[256];

static const char *path_of(const char *rel) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, rel);
    return buf[k];
}

static void put(const char *rel, const char *text) {
    FILE *f = fopen(path_of(rel), "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        fprintf(stderr, "cannot write %s\n", rel);
        exit(1);
    }
}

static void mkd(const char *rel) {
    if (mkdir(path_of(rel), 0700) && errno != EEXIST) {
        fprintf(stderr, "mkdir %s: %s\n", rel, strerror(errno));
        exit(1);
    }
}

/* Opens and reads every record of one input. Returns the open/read status;
 * *n gets the number of records, err the message. */
static int read_input(const char *path, uint64_t *n, char *err, size_t errlen) {
    const char *in[] = {path};
    ds_reader *r = NULL;
    *n = 0;
    err[0] = 0;
    int rc = ds_reader_open(in, 1, NULL, &r, err, errlen);
    if (rc) return rc;
    ds_record rec;
    while ((rc = ds_reader_next(r, &rec, err, errlen)) == 1) (*n)++;
    ds_reader_free(r);
    return rc;
}

static void folders(void) {
    char err[512];
    uint64_t n;
    /* empty folder, empty subfolders (qsort(NULL, 0) before), a folder of
     * only hidden entries */
    mkd("empty");
    CHECK(read_input(path_of("empty"), &n, err, sizeof err) == 0 && n == 0, "empty folder: %s", err);
    mkd("tree");
    mkd("tree/a");
    mkd("tree/a/empty");
    mkd("tree/b");
    mkd("tree/hidden");
    put("tree/hidden/.x.jsonl", "{\"text\":\"hidden\"}\n");
    put("tree/a/one.jsonl", "{\"text\":\"one\"}\n{\"text\":\"two\"}\n");
    put("tree/b/z.txt", "three");
    put("tree/notes.md", "not a dataset file");
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == 0 && n == 3, "tree with empty folders: n=%llu %s",
          (unsigned long long)n, err);

    /* symlink loops: a link to the parent, to itself, to the root folder;
     * links to folders are not followed, so the walk ends */
    CHECK(symlink("..", path_of("tree/a/up")) == 0);
    CHECK(symlink(".", path_of("tree/b/self")) == 0);
    CHECK(symlink(tmpdir, path_of("tree/root")) == 0);
    CHECK(symlink("loop2.jsonl", path_of("tree/loop1.jsonl")) == 0); /* ELOOP on a dataset name */
    CHECK(symlink("loop1.jsonl", path_of("tree/loop2.jsonl")) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "loop1.jsonl") &&
              strstr(err, "symbolic link"),
          "link loop between two dataset names: %s", err);
    unlink(path_of("tree/loop1.jsonl"));
    unlink(path_of("tree/loop2.jsonl"));
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == 0 && n == 3, "folder links not followed: n=%llu %s",
          (unsigned long long)n, err);
    /* a link to a file is followed */
    CHECK(symlink("a/one.jsonl", path_of("tree/c.jsonl")) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == 0 && n == 5, "file link followed: n=%llu %s",
          (unsigned long long)n, err);
    /* a dangling link with a dataset name: refused, named */
    CHECK(symlink("nowhere.jsonl", path_of("tree/dangling.jsonl")) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "dangling.jsonl"),
          "dangling link: %s", err);
    unlink(path_of("tree/dangling.jsonl"));
    /* a dangling link with another name is ignored like any unknown file */
    CHECK(symlink("nowhere", path_of("tree/dangling.md")) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == 0 && n == 5, "dangling non-data link: %s", err);

    /* FIFO inside a folder: a dataset name is refused without blocking; any
     * other name is skipped */
    CHECK(mkfifo(path_of("tree/b/pipe.jsonl"), 0600) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "pipe.jsonl") &&
              strstr(err, "not a regular file"),
          "FIFO in folder: %s", err);
    unlink(path_of("tree/b/pipe.jsonl"));
    CHECK(mkfifo(path_of("tree/b/pipe"), 0600) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == 0 && n == 5, "FIFO without dataset name: %s", err);
    /* a socket with a dataset name */
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    int w = snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path_of("tree/b/sock.jsonl"));
    if (sfd >= 0 && w > 0 && (size_t)w < sizeof sa.sun_path && bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0) {
        CHECK(read_input(path_of("tree"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "socket"), "socket: %s",
              err);
        unlink(path_of("tree/b/sock.jsonl"));
    }
    if (sfd >= 0) close(sfd);
    /* a link to a character device with a dataset name */
    CHECK(symlink("/dev/zero", path_of("tree/zero.jsonl")) == 0);
    CHECK(read_input(path_of("tree"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "character device"),
          "device link in folder: %s", err);
    unlink(path_of("tree/zero.jsonl"));

    /* deep nesting: 70 levels is refused with a message, not a stack overflow */
    char rel[1024] = "deep";
    mkd(rel);
    for (int i = 0; i < 70; i++) {
        strcat(rel, "/d");
        mkd(rel);
    }
    CHECK(read_input(path_of("deep"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "nested more than"), "deep: %s",
          err);
}

/* A path of more than 4096 bytes, built with chdir + relative mkdir. */
static void long_path(void) {
    char err[512];
    uint64_t n;
    if (chdir(tmpdir) != 0) return;
    mkd("long");
    if (chdir("long") != 0) return;
    char comp[256];
    memset(comp, 'n', 200);
    comp[200] = 0;
    int levels = 0;
    for (; levels < 22; levels++) {
        if (mkdir(comp, 0700) != 0 || chdir(comp) != 0) break;
    }
    FILE *f = fopen("x.jsonl", "w");
    if (f) {
        fputs("{\"text\":\"deep\"}\n", f);
        fclose(f);
    }
    if (chdir(tmpdir) != 0) return;
    if (levels == 22) {
        /* relative input: tmpdir is the cwd */
        CHECK(read_input("long", &n, err, sizeof err) == DS_ERR_IO && strstr(err, "path longer than"), "long path: %s",
              err);
    }
}

static void named_directly(void) {
    char err[512];
    uint64_t n;
    /* a FIFO named as an input: refused at open, before any read (no writer:
     * a plain open() would block forever) */
    CHECK(mkfifo(path_of("fifo.jsonl"), 0600) == 0);
    CHECK(read_input(path_of("fifo.jsonl"), &n, err, sizeof err) == DS_ERR_IO && strstr(err, "fifo.jsonl") &&
              strstr(err, "use - to read from standard input"),
          "FIFO named: %s", err);
    /* a pipe as /dev/fd/N (what <(...) passes) */
    int p[2];
    CHECK(pipe(p) == 0);
    char devfd[64];
    snprintf(devfd, sizeof devfd, "/dev/fd/%d", p[0]);
    CHECK(read_input(devfd, &n, err, sizeof err) == DS_ERR_IO && strstr(err, "pipe"), "/dev/fd pipe: %s", err);
    close(p[0]);
    close(p[1]);
    /* devices */
    CHECK(read_input("/dev/zero", &n, err, sizeof err) == DS_ERR_IO && strstr(err, "character device"), "/dev/zero: %s",
          err);
    CHECK(read_input("/dev/null", &n, err, sizeof err) == DS_ERR_IO, "/dev/null: %s", err);
    /* "-" still reads a pipe */
    CHECK(pipe(p) == 0);
    int saved = dup(0);
    CHECK(write(p[1], "{\"text\":\"from stdin\"}\n", 22) == 22);
    close(p[1]);
    dup2(p[0], 0);
    close(p[0]);
    CHECK(read_input("-", &n, err, sizeof err) == 0 && n == 1, "stdin pipe: %s", err);
    dup2(saved, 0);
    close(saved);
    /* a regular file swapped for a FIFO after the input list was made:
     * ds_reader_next refuses it instead of blocking */
    put("swap.jsonl", "{\"text\":\"x\"}\n");
    const char *in[] = {path_of("swap.jsonl")};
    ds_reader *r = NULL;
    CHECK(ds_reader_open(in, 1, NULL, &r, err, sizeof err) == 0, "%s", err);
    unlink(path_of("swap.jsonl"));
    CHECK(mkfifo(path_of("swap.jsonl"), 0600) == 0);
    ds_record rec;
    if (r) {
        CHECK(ds_reader_next(r, &rec, err, sizeof err) == DS_ERR_IO && strstr(err, "not a regular file"),
              "swapped to FIFO: %s", err);
        ds_reader_free(r);
    }
    /* lint over a FIFO named directly: the same refusal from ds_analyze */
    ds_lint_report *rep = NULL;
    const char *fin[] = {path_of("fifo.jsonl")};
    CHECK(ds_analyze(fin, 1, NULL, NULL, &rep, NULL, err, sizeof err) == DS_ERR_IO && !rep, "analyze FIFO: %s", err);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ds_lenhist ranks equal the sorted array's; past the cap they are within
 * 1/64 below and the flag is set. */
static void lenhist(void) {
    enum { N = 300000 };
    uint64_t *v = malloc(N * sizeof *v);
    uint64_t seed = 12345;
    for (int round = 0; round < 2; round++) {
        ds_lenhist h;
        memset(&h, 0, sizeof h);
        if (round == 1) h.sparse_max = 1000; /* force coarse mode */
        for (size_t i = 0; i < N; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            uint64_t x = seed >> 33;
            /* mostly small, some large: 0..65535 exact array, up to 2^40 in the map */
            v[i] = (x & 3) ? x % 5000 : (x % 200000) * (1 + (x % 7) * 1000000ULL);
            CHECK(ds_lenhist_add(&h, v[i]) == 0);
        }
        qsort(v, N, sizeof *v, cmp_u64);
        uint64_t ranks[] = {1, 2, N / 2, N * 9 / 10, N - 17, N - 1, N}, out[7];
        CHECK(ds_lenhist_ranks(&h, ranks, out, 7) == 0);
        CHECK(h.coarse == round, "coarse flag %d in round %d", h.coarse, round);
        for (int q = 0; q < 7; q++) {
            uint64_t exact = v[ranks[q] - 1];
            if (round == 0)
                CHECK(out[q] == exact, "rank %llu: %llu vs %llu", (unsigned long long)ranks[q],
                      (unsigned long long)out[q], (unsigned long long)exact);
            else
                CHECK(out[q] <= exact && out[q] >= exact - exact / 64, "coarse rank %llu: %llu vs %llu",
                      (unsigned long long)ranks[q], (unsigned long long)out[q], (unsigned long long)exact);
        }
        uint64_t above = 0, want = 0;
        for (size_t i = 0; i < N; i++) want += v[i] > 70000;
        CHECK(ds_lenhist_count_above(&h, 70000.0, &above) == 0);
        if (round == 0) CHECK(above == want, "above %llu vs %llu", (unsigned long long)above, (unsigned long long)want);
        /* memory: the coarse map holds at most 48 x 64 buckets */
        if (round == 1) CHECK(h.n <= 48 * 64, "coarse buckets %zu", h.n);
        else CHECK(h.cap <= 2 * DS_LH_SPARSE_MAX, "map slots %zu", h.cap);
        ds_lenhist_free(&h);
    }
    free(v);

    /* hist on token counts of 2^32 and more: exact, no truncation to 32 bits */
    ds_hist hh;
    memset(&hh, 0, sizeof hh);
    ds_lenhist lh;
    memset(&lh, 0, sizeof lh);
    ds_hist_begin(&hh, 0);
    uint64_t big[] = {5, (1ULL << 32) + 7, 3, 1ULL << 40};
    for (int i = 0; i < 4; i++) CHECK(ds_hist_add(&hh, &lh, big[i]) == 0);
    CHECK(ds_hist_end(&hh, &lh) == 0);
    CHECK(hh.max == 1ULL << 40 && hh.min == 3 && hh.p50 == 5 && hh.p90 == 1ULL << 40 && !hh.approximate);
    CHECK(hh.tokens == 5 + (1ULL << 32) + 7 + 3 + (1ULL << 40));
    ds_lenhist_free(&lh);
}

/* Duplicate set capped: later distinct documents are counted as untracked,
 * duplicates of tracked ones still found; the report says so. Examples
 * arrays are sized by what was found even with a large max_examples. */
static void dup_cap(void) {
    FILE *f = fopen(path_of("dups.txt"), "w");
    for (int i = 0; i < 100; i++) fprintf(f, "doc %d\n", i);
    for (int i = 0; i < 100; i++) fprintf(f, "doc %d\n", i); /* duplicates of all 100 */
    fclose(f);
    ds_reader_opts ro;
    ds_reader_opts_init(&ro);
    ro.doc_sep = DS_SEP_LINE;
    ds_analyze_opts ao;
    ds_analyze_opts_init(&ao);
    ao.threads = 2;
    ao.max_dup_docs = 40;
    ao.max_examples = 100000;
    ao.set_examples = 1;
    const char *in[] = {path_of("dups.txt")};
    ds_lint_report *rep = NULL;
    char err[256];
    CHECK(ds_analyze(in, 1, &ro, &ao, &rep, NULL, err, sizeof err) == 0, "%s", err);
    if (!rep) return;
    CHECK(rep->rules[DS_RULE_DUPLICATE].count == 40, "dups found %llu",
          (unsigned long long)rep->rules[DS_RULE_DUPLICATE].count);
    CHECK(rep->dup_tracked == 40 && rep->dup_untracked == 120, "tracked %llu untracked %llu",
          (unsigned long long)rep->dup_tracked, (unsigned long long)rep->dup_untracked);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    ds_lint_print(rep, m);
    ds_lint_write_json(rep, m);
    fclose(m);
    CHECK(buf && strstr(buf, "duplicate detection remembered the first 40 distinct documents; 120 later"), "note: %s",
          buf ? buf : "");
    CHECK(buf && strstr(buf, "\"duplicates_tracked\":40,\"duplicates_untracked\":120"), "json: %s", buf ? buf : "");
    free(buf);
    ds_lint_report_free(rep);
    /* default cap: nothing untracked, no note */
    ao.max_dup_docs = 0;
    CHECK(ds_analyze(in, 1, &ro, &ao, &rep, NULL, err, sizeof err) == 0, "%s", err);
    if (rep) {
        CHECK(rep->rules[DS_RULE_DUPLICATE].count == 100 && rep->dup_untracked == 0 && rep->dup_tracked == 100);
        ds_lint_report_free(rep);
    }
}

/* JSONL lines jansson would turn into a huge tree: over 1 MiB the scanner's
 * verdict stands and jansson is not run (a 16 MiB "[0,0,..." line took
 * 429 MiB and 6.6 s before, 36 MiB and 0.3 s after). */
static void json_amplification(void) {
    const size_t n = (size_t)32 << 20;
    FILE *f = fopen(path_of("arr.jsonl"), "w");
    fputs("{\"text\":[", f);
    for (size_t i = 0; i < n / 2; i++) fputs("0,", f);
    fputs("0\n", f); /* never closed: invalid */
    fputs("{\"text\":\"", f);
    for (size_t i = 0; i < (2u << 20); i++) fputc('a', f);
    fputs("\",\"score\":1e400}\n", f);                  /* over 1 MiB and undecided by the scanner */
    fputs("{\"text\":\"small\",\"score\":1e400}\n", f); /* small: jansson decides (overflow) */
    fputs("{\"text\":\"ok\",\"score\":1e300}\n", f);
    fclose(f);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        const char *in[] = {path_of("arr.jsonl")};
        ds_reader *r = NULL;
        char err[256];
        int bad = 0;
        if (ds_reader_open(in, 1, NULL, &r, err, sizeof err)) _exit(10);
        ds_record rec;
        int k = 0;
        while (ds_reader_next(r, &rec, err, sizeof err) == 1) {
            const char *d = rec.detail ? rec.detail : "";
            if (k == 0) bad |= !(rec.status == DS_REC_BAD_JSON && strstr(d, "no parser message")) << 0;
            if (k == 1) bad |= !(rec.status == DS_REC_BAD_JSON && strstr(d, "not parsed: a number")) << 1;
            if (k == 2) bad |= !(rec.status == DS_REC_BAD_JSON && strstr(d, "overflow")) << 2;
            if (k == 3) bad |= !(rec.status == DS_REC_OK && rec.len == 2) << 3;
            if (bad) fprintf(stderr, "record %d: status %d detail '%s'\n", k, (int)rec.status, d);
            k++;
        }
        ds_reader_free(r);
        if (k != 4) bad |= 16;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long mib = ru.ru_maxrss / 1024;
#if !defined(__SANITIZE_ADDRESS__)
        if (mib > 160) bad |= 32; /* the 32 MiB line itself is held once or twice */
#endif
        printf("json amplification: 32 MiB invalid line, peak RSS %ld MiB\n", mib);
        fflush(stdout);
        _exit(bad);
    }
    int st;
    waitpid(c, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "json amplification case: status %d", WEXITSTATUS(st));
}

/* ---- gzip inputs (issue 29): members written here with zlib's deflate */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} gzbuf;

static void gz_put(gzbuf *b, const void *p, size_t n) {
    if (!n) return;
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) exit(1);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* Appends one gzip member holding data[0..n); extra: a bgzip-style FEXTRA
 * field ("BC" subfield), as bgzip writes every block. */
static void gz_member(gzbuf *b, const void *data, size_t n, int extra) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
    static uint8_t bc[] = {'B', 'C', 2, 0, 0, 0};
    gz_header h;
    memset(&h, 0, sizeof h);
    if (extra) {
        h.extra = bc;
        h.extra_len = sizeof bc;
        if (deflateSetHeader(&z, &h) != Z_OK) exit(1);
    }
    uint8_t out[1 << 16];
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)n;
    int ret;
    do {
        z.next_out = out;
        z.avail_out = sizeof out;
        ret = deflate(&z, Z_FINISH);
        gz_put(b, out, sizeof out - z.avail_out);
    } while (ret == Z_OK);
    if (ret != Z_STREAM_END) exit(1);
    deflateEnd(&z);
}

static void gz_write(const char *rel, const gzbuf *b, size_t n) {
    FILE *f = fopen(path_of(rel), "wb");
    if (!f || fwrite(b->p, 1, n, f) != n || fclose(f)) exit(1);
}

typedef struct {
    uint64_t ok, bad, last_offset;
    char detail[256], file[512];
} gz_result;

/* Reads one input with the given record cap; counts good records and the
 * damage record (there is at most one: the file ends there). */
static int gz_read(const char *rel, size_t max_record, gz_result *g) {
    memset(g, 0, sizeof *g);
    ds_reader_opts o;
    ds_reader_opts_init(&o);
    o.field = "text";
    o.max_record_bytes = max_record;
    const char *in[] = {path_of(rel)};
    ds_reader *r = NULL;
    char err[256];
    int rc = ds_reader_open(in, 1, &o, &r, err, sizeof err);
    if (rc) return rc;
    ds_record rec;
    while ((rc = ds_reader_next(r, &rec, err, sizeof err)) == 1) {
        if (rec.status == DS_REC_OK) g->ok++;
        else if (rec.status == DS_REC_ZSTD_ERROR) {
            g->bad++;
            g->last_offset = rec.offset;
            snprintf(g->detail, sizeof g->detail, "%s", rec.detail ? rec.detail : "");
            snprintf(g->file, sizeof g->file, "%s", rec.file);
        }
    }
    ds_reader_free(r);
    return rc;
}

static void gzip_inputs(void) {
    /* 60000 JSONL lines in three members (gzip -c a b c, pigz), a bgzip-style
     * member with FEXTRA, and an empty member (bgzip's EOF block). Random
     * hex keeps each member over the reader's 256 KiB raw reads, so the
     * inflate thread runs (small files inflate inline: the tiny cases). */
    gzbuf plain = {0}, gz = {0};
    char line[128];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 60000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = snprintf(line, sizeof line, "{\"text\":\"document %d %016llx\"}\n", i, (unsigned long long)x);
        gz_put(&plain, line, (size_t)k);
    }
    size_t cut1 = plain.n / 3, cut2 = 2 * plain.n / 3;
    gz_member(&gz, plain.p, cut1, 0);
    gz_member(&gz, plain.p + cut1, cut2 - cut1, 0);
    gz_member(&gz, plain.p + cut2, plain.n - cut2, 1);
    gz_member(&gz, "", 0, 1);
    size_t whole = gz.n;
    mkd("gz");
    gz_write("gz/multi.jsonl.gz", &gz, whole);
    gz_write("gz/sniffed.jsonl", &gz, whole); /* no suffix: found by its magic */
    gz_result g;
    CHECK(gz_read("gz/multi.jsonl.gz", 0, &g) == 0 && g.ok == 60000 && g.bad == 0, "multi-member: %llu ok %llu bad %s",
          (unsigned long long)g.ok, (unsigned long long)g.bad, g.detail);
    CHECK(gz_read("gz/sniffed.jsonl", 0, &g) == 0 && g.ok == 60000 && g.bad == 0, "sniffed: %llu ok",
          (unsigned long long)g.ok);
    uint64_t n;
    char err[512];
    { /* freed after one record: the inflate thread, blocked on full slots, is joined */
        const char *in[] = {path_of("gz/multi.jsonl.gz")};
        ds_reader *r = NULL;
        ds_record rec;
        CHECK(ds_reader_open(in, 1, NULL, &r, err, sizeof err) == 0 && ds_reader_next(r, &rec, err, sizeof err) == 1);
        ds_reader_free(r);
    }
    CHECK(read_input(path_of("gz"), &n, err, sizeof err) == 0 && n == 120000, "folder walk lists .gz: %llu records %s",
          (unsigned long long)n, err);

    /* truncated inside the last data member: the records before it, then
     * one damage record naming the file and the decompressed offset */
    gz_write("trunc.jsonl.gz", &gz, whole - 40);
    CHECK(gz_read("trunc.jsonl.gz", 0, &g) == 0 && g.bad == 1 && g.ok > 40000 && g.ok < 60000 &&
              strstr(g.detail, "truncated") && strstr(g.file, "trunc.jsonl.gz") && g.last_offset <= plain.n,
          "truncated: %llu ok, detail '%s'", (unsigned long long)g.ok, g.detail);
    /* a file named .gz that is empty, or not gzip at all */
    gz_write("empty.jsonl.gz", &gz, 0);
    CHECK(gz_read("empty.jsonl.gz", 0, &g) == 0 && g.bad == 1 && g.ok == 0, "empty .gz: '%s'", g.detail);
    put("fake.jsonl.gz", "{\"text\":\"not compressed\"}\n");
    CHECK(gz_read("fake.jsonl.gz", 0, &g) == 0 && g.bad == 1 && g.ok == 0 && strstr(g.detail, "gzip"), "not gzip: '%s'",
          g.detail);

    /* bad CRC-32 / ISIZE of the first member: its last line is still
     * delivered (deflate checks at the end), then the damage record */
    gzbuf one = {0};
    gz_member(&one, plain.p, cut1, 0);
    printf("gzip inputs: %zu-byte multi-member file, %zu-byte first member\n", gz.n, one.n);
    one.p[one.n - 8] ^= 1;
    gz_write("crc.jsonl.gz", &one, one.n);
    CHECK(gz_read("crc.jsonl.gz", 0, &g) == 0 && g.bad == 1 && strstr(g.detail, "incorrect data check") &&
              g.last_offset == cut1,
          "bad crc: '%s' @%llu", g.detail, (unsigned long long)g.last_offset);
    one.p[one.n - 8] ^= 1;
    one.p[one.n - 1] ^= 1;
    gz_write("isize.jsonl.gz", &one, one.n);
    CHECK(
        gz_read("isize.jsonl.gz", 0, &g) == 0 && g.bad == 1 &&
            (strstr(g.detail, "incorrect length check") || strstr(g.detail, "incorrect data check (CRC-32 or length)")),
        "bad isize: '%s'", g.detail);
    one.p[one.n - 1] ^= 1;
    /* trailing garbage after a good member: named, with its compressed byte */
    size_t good = one.n;
    gz_put(&one, "garbage\n", 8);
    gz_write("tail.jsonl.gz", &one, one.n);
    char want[64];
    snprintf(want, sizeof want, "compressed byte %zu ", good);
    CHECK(gz_read("tail.jsonl.gz", 0, &g) == 0 && g.bad == 1 && strstr(g.detail, "trailing garbage") &&
              strstr(g.detail, want) && g.last_offset == cut1,
          "trailing garbage: '%s'", g.detail);
    /* a short tail (shorter than a member header) and zero padding count as
     * garbage as well (gzip -t warns) */
    gz_put(&one, "\n", 1);
    gz_write("nl.jsonl.gz", &one, good + 1);
    CHECK(gz_read("nl.jsonl.gz", 0, &g) == 0 && g.bad == 1 && strstr(g.detail, "trailing garbage: 1 bytes"),
          "short tail: '%s'", g.detail);
    one.n = good;
    gz_put(&one, "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
    gz_write("pad.jsonl.gz", &one, one.n);
    CHECK(gz_read("pad.jsonl.gz", 0, &g) == 0 && g.bad == 1, "zero padding: '%s'", g.detail);

    /* a bomb: 256 MiB of one line from ~256 KiB. Memory stays bounded by
     * the record cap (1 MiB here) plus the fixed windows. */
    gzbuf bomb = {0};
    {
        z_stream z;
        memset(&z, 0, sizeof z);
        if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
        static uint8_t zeros[1 << 20], out[1 << 16];
        memset(zeros, 'a', sizeof zeros);
        for (int i = 0; i <= 256; i++) {
            z.next_in = zeros;
            z.avail_in = i < 256 ? sizeof zeros : 0;
            int ret;
            do {
                z.next_out = out;
                z.avail_out = sizeof out;
                ret = deflate(&z, i < 256 ? Z_NO_FLUSH : Z_FINISH);
                gz_put(&bomb, out, sizeof out - z.avail_out);
            } while (z.avail_out == 0 || (i == 256 && ret == Z_OK));
        }
        deflateEnd(&z);
    }
    gz_write("bomb.jsonl.gz", &bomb, bomb.n);
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        gz_result b;
        int bad = gz_read("bomb.jsonl.gz", (size_t)1 << 20, &b) != 0 || b.ok != 0 || b.bad != 0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long mib = ru.ru_maxrss / 1024;
#if !defined(__SANITIZE_ADDRESS__)
        if (mib > 48) bad |= 2;
#endif
        printf("gzip bomb: %zu compressed bytes -> 256 MiB, peak RSS %ld MiB\n", bomb.n, mib);
        fflush(stdout);
        _exit(bad);
    }
    int st;
    waitpid(c, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gzip bomb: status %d", WEXITSTATUS(st));
    free(plain.p);
    free(gz.p);
    free(one.p);
    free(bomb.p);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_reader_hostile: timed out (a read blocked?)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(2);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(60);
    snprintf(tmpdir, sizeof tmpdir, "%s/rdhostile.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    folders();
    long_path();
    named_directly();
    lenhist();
    dup_cap();
    json_amplification();
    gzip_inputs();
    /* the status of every refused file: it said "unknown input kind", of a corrupt shard or manifest too */
    CHECK(strstr(ds_strerror(DS_ERR_FORMAT), "malformed") && !strstr(ds_strerror(DS_ERR_FORMAT), "input kind"),
          "ds_strerror(DS_ERR_FORMAT): %s", ds_strerror(DS_ERR_FORMAT));
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cleanup failed\n");
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test_reader_hostile: ok\n");
    return 0;
}
