/* test_cli_fmt.c - the id formatter of `mkshards encode` (tools/cli.h)
 * against printf, on every value below 3e6, a stride up to 1.2e9 and the
 * edges of the fast ranges and of uint64. */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check(uint64_t v) {
    char got[48], want[32];
    memset(got, 'x', sizeof got);
    size_t n = cli_fmt_u64(got, v);
    int wn = snprintf(want, sizeof want, "%" PRIu64, v);
    if (n != (size_t)wn || memcmp(got, want, n) != 0) {
        got[n < sizeof got ? n : sizeof got - 1] = 0;
        fprintf(stderr, "FAIL %" PRIu64 ": got '%s' (%zu bytes), want '%s'\n", v, got, n, want);
        return 1;
    }
    return 0;
}

int main(void) {
    int bad = 0;
    for (uint64_t v = 0; v < 3000000 && bad < 10; v++) bad += check(v);
    for (uint64_t v = 3000000; v < 1200000000 && bad < 10; v += 71) bad += check(v);
    static const uint64_t edges[] = {999,       1000,       999999,        1000000,
                                     999999999, 1000000000, 4294967295ull, 18446744073709551615ull};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) bad += check(edges[i]);
    printf("%s\n", bad ? "FAILED" : "cli_fmt_u64 agrees with printf");
    return bad ? 1 : 0;
}
