/* test_rss.c (label slow) - memory stays bounded on a generated 1 GB
 * single-line input: streamed through a pipe into the reader ("-"), linted
 * in a child process whose peak RSS (ru_maxrss) is checked. Cases: one
 * 1 GB JSONL line, a 1 GB txt file read as one document, and the same read
 * line by line, with the default 256 MiB record limit and with a 16 MiB one. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ds.h"

#define GB (1024ULL * 1024 * 1024)

static void writer(int fd, int json) {
    static char buf[1 << 16];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = "lorem ipsum dolor sit amet "[i % 27];
    unsigned long long left = GB;
    if (json) {
        if (write(fd, "{\"text\":\"", 9) != 9) _exit(1);
    }
    while (left) {
        size_t n = left < sizeof buf ? (size_t)left : sizeof buf;
        ssize_t w = write(fd, buf, n);
        if (w <= 0) _exit(0); /* reader gone */
        left -= (unsigned long long)w;
    }
    if (json && write(fd, "\"}\n", 3) != 3) _exit(1);
    if (write(fd, "\n{\"text\":\"tail\"}\n", json ? 17 : 1) < 0) _exit(1);
    _exit(0);
}

/* Runs one case in a child; returns 0 on success. */
static int run_case(const char *name, int json, ds_doc_sep sep, size_t max_rec, long max_rss_mb,
                    uint64_t want_records) {
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        int p[2];
        if (pipe(p)) _exit(2);
        pid_t w = fork();
        if (w == 0) {
            close(p[0]);
            writer(p[1], json);
        }
        close(p[1]);
        dup2(p[0], 0);
        close(p[0]);
        ds_reader_opts ro;
        ds_reader_opts_init(&ro);
        ro.doc_sep = sep;
        ro.max_record_bytes = max_rec;
        ds_analyze_opts ao;
        ds_analyze_opts_init(&ao);
        ao.threads = 2;
        const char *in[] = {"-"};
        ds_lint_report *rep = NULL;
        char err[256] = "";
        int rc = ds_analyze(in, 1, &ro, &ao, &rep, NULL, err, sizeof err);
        int st;
        waitpid(w, &st, 0);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long mb = ru.ru_maxrss / 1024;
        int ok = rc == 0 && mb <= max_rss_mb;
        if (rc == 0) {
            ok = ok && rep->rules[DS_RULE_RECORD_TOO_LARGE].count == 1 && rep->records == want_records;
            ok = ok && rep->rules[DS_RULE_RECORD_TOO_LARGE].examples[0].value >= GB;
        }
        printf("%-34s peak RSS %5ld MiB (limit %ld)  records %llu  %s %s\n", name, mb, max_rss_mb,
               rep ? (unsigned long long)rep->records : 0ULL, ok ? "ok" : "FAILED", err);
        ds_lint_report_free(rep);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int st;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    int fails = 0;
    fails += run_case("jsonl 1 GB line, 16 MiB limit", 1, DS_SEP_FILE, 16u << 20, 96, 2) != 0;
    fails += run_case("txt 1 GB file-doc, 16 MiB limit", 0, DS_SEP_FILE, 16u << 20, 96, 1) != 0;
    fails += run_case("txt 1 GB line, line mode, 16 MiB", 0, DS_SEP_LINE, 16u << 20, 96, 1) != 0;
    fails += run_case("jsonl 1 GB line, default limit", 1, DS_SEP_FILE, 0, 256 + 96, 2) != 0;
    fails += run_case("txt 1 GB blank-line, default limit", 0, DS_SEP_BLANK, 0, 256 + 96, 1) != 0;
    if (fails) {
        fprintf(stderr, "%d case(s) failed\n", fails);
        return 1;
    }
    printf("test_rss: ok\n");
    return 0;
}
