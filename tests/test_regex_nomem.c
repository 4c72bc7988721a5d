/* test_regex_nomem.c - the Unicode tables a regex class is evaluated with
 * (regex_sets.c's category parts, regex_ucd.c's measured PCRE2 differences)
 * are built on first use; a first use that runs out of memory must fail
 * with TK_ERR_NOMEM and leave nothing behind, so that the next call builds
 * them and succeeds. Before, the failure was kept for the life of the
 * process: a long-running Python process refused every such pattern after
 * one allocation failure. The hook replaces glibc's malloc family in this
 * executable (tests/malloc_hook.h), so the test exits 77 in sanitizer
 * builds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "malloc_hook.h"
#include "regex_sets.h"
#include "tk.h"

#if HOOK
static int failing; /* 1: every allocation fails */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return failing ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return failing ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return failing ? NULL : __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

/* tk_rx_rust_set on RE (a class with a set operation, so it is evaluated
 * from the tables); its status, *out the translation */
static int translate(const char *re, char **out) {
    size_t pos = 0;
    bool plain = false;
    char err[256] = "";
    *out = NULL;
    int rc = tk_rx_rust_set(re, strlen(re), &pos, false, &plain, out, err, sizeof err);
    if (rc && rc != TK_ERR_NOMEM) printf("  status %d: %s\n", rc, err);
    return plain ? -1000 : rc;
}
#endif

int main(void) {
#if !HOOK
    puts("skip: test_regex_nomem replaces glibc's malloc, which a sanitizer owns");
    return 77;
#else
    const char *re = "[\\p{L}&&\\p{Greek}--[\\p{Lu}]]";
    int fails = 0;
    char *first = NULL, *again = NULL, *third = NULL;
    failing = 1; /* the first use of the tables, with no memory */
    int rc = translate(re, &first);
    failing = 0;
    if (rc != TK_ERR_NOMEM) {
        printf("FAIL: with every allocation failing, status %d instead of TK_ERR_NOMEM\n", rc);
        fails++;
    }
    rc = translate(re, &again);
    if (rc != TK_OK || !again || !*again) {
        printf("FAIL: the call after an out-of-memory one gave status %d (the failure was kept)\n", rc);
        fails++;
    }
    rc = translate(re, &third);
    if (rc != TK_OK || !third || !again || strcmp(again, third)) {
        printf("FAIL: a third call differs (status %d)\n", rc);
        fails++;
    }
    free(first), free(again), free(third);
    printf("test_regex_nomem: %d failures\n", fails);
    return fails ? 1 : 0;
#endif
}
