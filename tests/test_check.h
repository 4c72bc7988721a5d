/* test_check.h - the assertion macro of the C tests: CHECK(cond) or
 * CHECK(cond, "printf format", args...) reports file, line, the condition
 * and the optional message on stderr, counts the failure in `failures` and
 * goes on (a test reports them all, then exits 1 if any). */
#ifndef MKS_TEST_CHECK_H
#define MKS_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures;

/* The optional message of a failed CHECK ("" when none was given). */
static inline void check_note(const char *fmt, ...) {
    if (fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
}

#define CHECK(c, ...)                                                                                                  \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s", __FILE__, __LINE__, #c);                                        \
            check_note("" __VA_ARGS__);                                                                                \
            failures++;                                                                                                \
        }                                                                                                              \
    } while (0)

#endif
