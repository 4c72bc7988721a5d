/* test_chat_nomem.c - a chat record parsed and rendered while each of its
 * allocations fails in turn: every attempt either gives DS_ERR_NOMEM or the
 * same rendering as the unfailed run, never another rendering. Python's
 * truth of a scalar (the record's `tools`, a tool call's `function`, a
 * boolean tool name, a non-string reasoning field) needs the scalar's bytes,
 * found through a position table that is allocated on first use; a failed
 * allocation there used to read as "true" and render the record otherwise.
 * The hook replaces glibc's malloc family in this executable, so the test
 * runs on glibc builds without ASan (which owns malloc) and exits 77
 * elsewhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ds.h"
#include "ds_chat.h"

#include "malloc_hook.h"

#if HOOK
/* armed > 0: the armed-th allocation from now fails (and only that one) */
static long armed, seen;
static int fired;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
static int fail_now(void) {
    if (armed <= 0) return 0;
    if (++seen != armed) return 0;
    fired = 1;
    return 1;
}
void *malloc(size_t n) { return fail_now() ? NULL : __libc_malloc(n); }
void *calloc(size_t a, size_t b) { return fail_now() ? NULL : __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return fail_now() ? NULL : __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }

/* parse LINE and render it through TEMPLATE into OUT (malloc'd, NUL-ended);
 * the status of the first step that did not give DS_CHAT_OK */
static int parse_render(const char *line, const char *template, char **out) {
    ds_chat c = {0};
    ds_chat_rendered r = {0};
    ds_chat_parse_opts po = {.format = DS_FMT_CHAT};
    ds_chat_render_opts ro = {.loss_on = DS_LOSS_DEFAULT};
    char why[256];
    *out = NULL;
    int rc = ds_chat_parse((const uint8_t *)line, strlen(line), &po, &c, why, sizeof why);
    if (rc == DS_CHAT_OK) rc = ds_chat_render(ds_chat_template_find(template), &c, &ro, &r, why, sizeof why);
    if (rc == DS_CHAT_OK) {
        long keep = armed;
        armed = 0; /* the copy for the comparison is the test's own */
        *out = __libc_malloc(r.len + 1);
        armed = keep;
        if (*out) {
            memcpy(*out, r.text, r.len);
            (*out)[r.len] = 0;
        }
    }
    ds_chat_rendered_free(&r);
    ds_chat_free(&c);
    return rc;
}
#endif

int main(void) {
#if !HOOK
    puts("skip: test_chat_nomem replaces glibc's malloc, which a sanitizer owns");
    return 77;
#else
#define Z16 "0000000000000000"
    static const struct {
        const char *template, *line;
    } cases[] = {
        /* tools: 0 is false (no tools), a number's truth needs its bytes */
        {"qwen2.5", "{\"tools\": 0, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                    "{\"role\": \"assistant\", \"content\": \"yo\"}]}"},
        /* over 63 bytes: its truth is read from a malloc'd copy */
        {"qwen2.5",
         "{\"tools\": 0." Z16 Z16 Z16 Z16 Z16 "e5, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
         "{\"role\": \"assistant\", \"content\": \"yo\"}]}"},
        {"qwen2.5", "{\"tools\": 0.0e5, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                    "{\"role\": \"assistant\", \"content\": \"yo\"}]}"},
        /* a tool call whose name is a boolean (printed True/False) and whose
         * function is an object; tool_calls false */
        {"qwen2.5", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
                    "\"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": false, "
                    "\"arguments\": {\"x\": 1.5, \"y\": -0}}}]}, {\"role\": \"tool\", \"content\": \"ok\"}, "
                    "{\"role\": \"assistant\", \"content\": \"done\", \"tool_calls\": false}]}"},
        /* qwen3: a reasoning field that is a number (refused where rendered) */
        {"qwen3", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
                  "\"content\": \"yo\", \"reasoning_content\": 0}]}"},
        {"qwen2.5",
         "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", "
         "\"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\": 0." Z16 Z16 Z16 Z16 "}]}]}"},
        /* Mistral raises on a false number: it must not turn into "no tools" */
        {"mistral-v3",
         "{\"tools\": 0." Z16 Z16 Z16 Z16 Z16 ", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
         "{\"role\": \"assistant\", \"content\": \"yo\"}]}"},
        {"mistral-v3", "{\"tools\": false, \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
                       "{\"role\": \"assistant\", \"content\": \"yo\"}]}"},
    };
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *want = NULL;
        armed = 0;
        int want_rc = parse_render(cases[i].line, cases[i].template, &want);
        long tried = 0;
        for (long k = 1;; k++) {
            char *got = NULL;
            seen = 0;
            fired = 0;
            armed = k;
            int rc = parse_render(cases[i].line, cases[i].template, &got);
            armed = 0;
            if (!fired) { /* past the last allocation: the unfailed run again */
                if (rc != want_rc || (want && (!got || strcmp(got, want)))) {
                    printf("FAIL case %zu: a rerun differs from the first run\n", i);
                    failures++;
                }
                __libc_free(got);
                break;
            }
            tried++;
            int same = rc == want_rc && ((!want && !got) || (want && got && !strcmp(want, got)));
            if (rc != DS_ERR_NOMEM && !same) {
                printf("FAIL case %zu (%s): allocation %ld failed, status %d (%s) instead of %d or "
                       "DS_ERR_NOMEM%s%s\n",
                       i, cases[i].template, k, rc, rc >= 0 ? ds_chat_status_name(rc) : "error", want_rc,
                       got ? ", rendered: " : "", got ? got : "");
                failures++;
            }
            __libc_free(got);
        }
        printf("case %zu (%s): status %d, %ld allocations failed in turn\n", i, cases[i].template, want_rc, tried);
        if (tried == 0) {
            printf("FAIL case %zu: no allocation to fail (the hook saw none)\n", i);
            failures++;
        }
        __libc_free(want);
    }
    printf("test_chat_nomem: %d failures\n", failures);
    return failures ? 1 : 0;
#endif
}
