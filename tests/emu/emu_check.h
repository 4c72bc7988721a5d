/* emu_check.h - what the CPU-emulator tests (test_attn_tc_emu,
 * test_adamw_emu) share: a seeded xorshift generator and the PASS/FAIL row. */
#ifndef EMU_CHECK_H
#define EMU_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

static int g_checks, g_fail;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull; /* a test may reseed (KN_TEST_SEED) */

static uint64_t rnd64(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
/* uniform in [0, 1) with 24 bits */
static inline float urand(void) { return (float)((rnd64() >> 40) & 0xFFFFFF) / 16777216.0f; }
/* standard normal (Box-Muller) */
static inline float randn(void) {
    double u1 = ((rnd64() >> 11) + 1.0) / 9007199254740993.0, u2 = (rnd64() >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void expect(bool ok, const char *what) {
    g_checks++;
    if (!ok) g_fail++;
    printf("| %-72s | %s |\n", what, ok ? "PASS" : "FAIL");
}

#endif
