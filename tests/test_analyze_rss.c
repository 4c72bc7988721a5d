/* test_analyze_rss.c - lint + hist memory does not grow with the number of
 * documents (issue 12 item 9). Many one-word documents ("w<i>\n", all
 * distinct) are streamed through a pipe into ds_analyze ("-", one document
 * per line) in a child process whose peak RSS (ru_maxrss) is measured.
 *
 *   fast: N and 4N documents with the duplicate set capped small
 *         (max_dup_docs), so every per-document structure is at its cap in
 *         both runs: the peak at 4N must not exceed the peak at N by more
 *         than a few MiB (it grew 4 bytes per document per report before).
 *   slow: 20 M documents with the default settings: peak under a fixed
 *         bound (878 MiB before the fix, about 206 MiB after: 128 MiB of it
 *         is the full default duplicate table, 192 MiB while it last grows).
 *
 * With the shared gpt2 vocabulary the run is lint + hist with token counts;
 * without it, lint only. Under AddressSanitizer the figures are printed but
 * not checked (shadow memory and quarantine dominate). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ds.h"
#include "tk.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static void writer(int fd, unsigned long long n) {
    FILE *f = fdopen(fd, "w");
    if (!f) _exit(1);
    for (unsigned long long i = 0; i < n; i++)
        if (fprintf(f, "w%llu\n", i) < 0) _exit(0); /* reader gone */
    fclose(f);
    _exit(0);
}

typedef struct {
    long peak_mib;
    unsigned long long docs, untracked, p50;
    int rc;
} result;

/* One run in a child process (fresh peak RSS); the result comes back over a pipe. */
static int run(unsigned long long n, uint64_t max_dup, const char *vocab, result *res) {
    int rp[2];
    if (pipe(rp)) return -1;
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        close(rp[0]);
        result out = {0, 0, 0, 0, -1};
        tk_tokenizer *tok = NULL;
        char err[256] = "";
        if (vocab && tk_load(vocab, TK_PAT_NONE, &tok, err, sizeof err)) {
            fprintf(stderr, "tk_load: %s\n", err);
            _exit(1);
        }
        int p[2];
        if (pipe(p)) _exit(1);
        pid_t w = fork();
        if (w == 0) {
            close(p[0]);
            writer(p[1], n);
        }
        close(p[1]);
        dup2(p[0], 0);
        close(p[0]);
        ds_reader_opts ro;
        ds_reader_opts_init(&ro);
        ro.doc_sep = DS_SEP_LINE;
        ds_analyze_opts ao;
        ds_analyze_opts_init(&ao);
        ao.tok = (const struct tk_tokenizer *)tok;
        ao.seq_len = 1024;
        ao.threads = 2;
        ao.max_dup_docs = max_dup;
        const char *in[] = {"-"};
        ds_lint_report *rep = NULL;
        ds_hist *h = NULL;
        out.rc = ds_analyze(in, 1, &ro, &ao, &rep, tok ? &h : NULL, err, sizeof err);
        if (out.rc) fprintf(stderr, "ds_analyze: %s\n", err);
        int st;
        waitpid(w, &st, 0);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        out.peak_mib = ru.ru_maxrss / 1024;
        if (rep) {
            out.docs = rep->docs;
            out.untracked = rep->dup_untracked;
        }
        if (h) out.p50 = h->p50;
        if (write(rp[1], &out, sizeof out) != (ssize_t)sizeof out) _exit(1);
        _exit(0);
    }
    close(rp[1]);
    ssize_t got = read(rp[0], res, sizeof *res);
    close(rp[0]);
    int st;
    waitpid(c, &st, 0);
    return got == (ssize_t)sizeof *res && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int slow = argc > 1 && strcmp(argv[1], "slow") == 0;
    char vocab[1024];
    snprintf(vocab, sizeof vocab, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
    const char *vp = access(vocab, R_OK) == 0 ? vocab : NULL;
    if (!vp) printf("note: %s not found: lint only (no token counts)\n", vocab);
    int fails = 0;
    if (!slow) {
        const unsigned long long n = 250000;
        const uint64_t cap = 20000;
        result a, b;
        if (run(n, cap, vp, &a) || run(4 * n, cap, vp, &b)) {
            fprintf(stderr, "a run failed\n");
            return 1;
        }
        printf("N=%llu docs: peak RSS %ld MiB; 4N=%llu docs: peak RSS %ld MiB (duplicate set capped at %llu)\n", a.docs,
               a.peak_mib, b.docs, b.peak_mib, (unsigned long long)cap);
        if (a.rc || b.rc || a.docs != n || b.docs != 4 * n) fails++, fprintf(stderr, "wrong document counts\n");
        if (a.untracked != n - cap || b.untracked != 4 * n - cap)
            fails++, fprintf(stderr, "untracked %llu / %llu\n", a.untracked, b.untracked);
        if (vp && (a.p50 == 0 || b.p50 == 0)) fails++, fprintf(stderr, "p50 %llu / %llu\n", a.p50, b.p50);
        if (!UNDER_ASAN && b.peak_mib > a.peak_mib + 6)
            fails++,
                fprintf(stderr, "peak RSS grows with the document count: %ld -> %ld MiB\n", a.peak_mib, b.peak_mib);
    } else {
        const unsigned long long n = 20000000;
        const long bound = 288;
        result a;
        if (run(n, 0, vp, &a)) {
            fprintf(stderr, "the run failed\n");
            return 1;
        }
        printf("%llu docs: peak RSS %ld MiB (bound %ld MiB), duplicate set tracked %llu, untracked %llu\n", a.docs,
               a.peak_mib, bound, (unsigned long long)(a.docs - a.untracked), a.untracked);
        if (a.rc || a.docs != n) fails++, fprintf(stderr, "wrong document count\n");
        if (a.untracked != n - DS_DUP_DEFAULT_MAX) fails++, fprintf(stderr, "untracked %llu\n", a.untracked);
        if (!UNDER_ASAN && a.peak_mib > bound) fails++, fprintf(stderr, "peak RSS over the bound\n");
    }
    if (fails) return 1;
    printf("test_analyze_rss %s: ok\n", slow ? "slow" : "fast");
    return 0;
}
