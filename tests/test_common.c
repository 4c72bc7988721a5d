/* test_common: the common layer (dataset/common/mks_common.h) - messages,
 * the clock, the UTF-8 validator against a table of tricky sequences and an
 * exhaustive differential check against a code-point decoder, the bounded
 * regular-file read (over-cap, FIFO, device, folder, missing), and the atomic
 * write (content, no temporary left behind on any failure, a planted link
 * as the temporary not written through). */
#include "mc_json.h"
#include "mks_common.h"
#include "test_check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reference: decode a code point the slow way, then judge it. */
static size_t ref_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if ((c & 0xE0) == 0xC0) k = 1, cp = c & 0x1F;
        else if ((c & 0xF0) == 0xE0) k = 2, cp = c & 0x0F;
        else if ((c & 0xF8) == 0xF0) k = 3, cp = c & 0x07;
        else return i;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (s[i + j] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += k + 1;
    }
    return n;
}

static void test_utf8(void) {
    static const struct {
        const char *b;
        size_t prefix; /* valid bytes before the first invalid one */
    } cases[] = {
        {"", 0},
        {"plain ascii text, long enough for the 8-byte path", 49},
        {"\xC2\x80", 2},         /* U+0080, smallest 2-byte */
        {"\xC0\x80", 0},         /* overlong NUL */
        {"\xC1\xBF", 0},         /* overlong U+007F */
        {"\xE0\x9F\xBF", 0},     /* overlong U+07FF */
        {"\xE0\xA0\x80", 3},     /* U+0800 */
        {"\xED\x9F\xBF", 3},     /* U+D7FF, last before the surrogates */
        {"\xED\xA0\x80", 0},     /* U+D800, high surrogate */
        {"\xED\xBF\xBF", 0},     /* U+DFFF, low surrogate */
        {"\xEE\x80\x80", 3},     /* U+E000 */
        {"\xEF\xBF\xBF", 3},     /* U+FFFF (a noncharacter, but valid) */
        {"\xF0\x8F\xBF\xBF", 0}, /* overlong U+FFFF */
        {"\xF0\x90\x80\x80", 4}, /* U+10000 */
        {"\xF4\x8F\xBF\xBF", 4}, /* U+10FFFF */
        {"\xF4\x90\x80\x80", 0}, /* U+110000 */
        {"\xF5\x80\x80\x80", 0}, /* lead byte beyond F4 */
        {"\xFF", 0},
        {"\x80", 0},                          /* lone continuation */
        {"ab\xE2\x82", 2},                    /* cut by the end */
        {"ab\xE2\x82\xAC", 5},                /* the euro sign, whole */
        {"abcdefgh\xE2\x28\xA1", 8},          /* bad second byte after an ASCII run */
        {"\xF0\x9F\x98\x80x\xF0\x9F\x98", 5}, /* an emoji, then one cut */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const uint8_t *b = (const uint8_t *)cases[i].b;
        size_t n = strlen(cases[i].b);
        size_t got = mc_utf8_valid_prefix(b, n);
        CHECK(got == cases[i].prefix, "case %zu: prefix %zu, want %zu", i, got, cases[i].prefix);
        CHECK(mc_utf8_valid(b, n) == (cases[i].prefix == n), "case %zu", i);
        CHECK(ref_prefix(b, n) == cases[i].prefix, "reference disagrees with the table on case %zu", i);
    }
    /* every 1-, 2- and 3-byte string, and 4-byte ones with a lead F0..F7,
     * against the reference decoder */
    uint8_t s[4];
    size_t bad = 0;
    for (uint32_t x = 0; x < (1u << 24); x++) {
        s[0] = (uint8_t)(x >> 16), s[1] = (uint8_t)(x >> 8), s[2] = (uint8_t)x;
        for (size_t n = 1; n <= 3; n++)
            if (mc_utf8_valid_prefix(s, n) != ref_prefix(s, n) && bad++ < 5)
                CHECK(0, "%02x %02x %02x (n %zu): %zu vs reference %zu", s[0], s[1], s[2], n,
                      mc_utf8_valid_prefix(s, n), ref_prefix(s, n));
    }
    for (uint32_t x = 0; x < (1u << 21); x++) {
        s[0] = (uint8_t)(0xF0 | (x >> 18)), s[1] = (uint8_t)(0x80 | ((x >> 12) & 0x3F));
        s[2] = (uint8_t)(0x80 | ((x >> 6) & 0x3F)), s[3] = (uint8_t)(0x80 | (x & 0x3F));
        if (mc_utf8_valid_prefix(s, 4) != ref_prefix(s, 4) && bad++ < 10)
            CHECK(0, "%02x %02x %02x %02x", s[0], s[1], s[2], s[3]);
    }
    CHECK(bad == 0, "%zu disagreements with the reference", bad);
    CHECK(mc_utf8_seq((const uint8_t *)"\xE2\x82\xAC", 3) == 3);
    CHECK(mc_utf8_seq((const uint8_t *)"\xE2\x82\xAC", 2) == 0);
    CHECK(mc_utf8_seq((const uint8_t *)"a", 0) == 0);
}

static char dir[256];

static void put(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
}

static void test_read(void) {
    char p[512], err[256];
    uint8_t *d;
    size_t n;
    put("ten", "0123456789");
    snprintf(p, sizeof p, "%s/ten", dir);
    CHECK(mc_read_regular(p, 10, &d, &n, err, sizeof err) == MC_OK && n == 10 && d[10] == 0 &&
              !memcmp(d, "0123456789", 10),
          "%s", err);
    free(d);
    CHECK(mc_read_regular(p, 9, &d, &n, err, sizeof err) == MC_ERR_LIMIT && !d && n == 10, "over the cap: %s", err);
    CHECK(strstr(err, "10 bytes, more than the 9-byte limit"), "%s", err);
    CHECK(mc_read_regular(p, 0, &d, &n, err, sizeof err) == MC_ERR_LIMIT && !d, "no cap is refused");
    uint64_t sz;
    int fd = mc_open_regular(p, 0, &sz, err, sizeof err);
    CHECK(fd >= 0 && sz == 10, "no cap for the open: %s", err);
    if (fd >= 0) {
        CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "blocking again after the checks");
        CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
    }
    put("empty", "");
    snprintf(p, sizeof p, "%s/empty", dir);
    CHECK(mc_read_regular(p, 1, &d, &n, err, sizeof err) == MC_OK && n == 0 && d && d[0] == 0, "%s", err);
    free(d);
    /* not regular files: a FIFO with no writer (must not block), a device,
     * a folder, a link to a FIFO; and a missing file */
    snprintf(p, sizeof p, "%s/fifo", dir);
    CHECK(mkfifo(p, 0600) == 0);
    CHECK(mc_read_regular(p, 100, &d, &n, err, sizeof err) == MC_ERR_IO && !d);
    CHECK(strstr(err, "fifo: not a regular file"), "%s", err);
    char l[512];
    snprintf(l, sizeof l, "%s/link_to_fifo", dir);
    CHECK(symlink(p, l) == 0);
    CHECK(mc_open_regular(l, 100, NULL, err, sizeof err) == MC_ERR_IO && strstr(err, "not a regular file"), "%s", err);
    CHECK(mc_open_regular("/dev/zero", 100, NULL, err, sizeof err) == MC_ERR_IO, "a device");
    CHECK(mc_open_regular(dir, 0, NULL, err, sizeof err) == MC_ERR_IO, "a folder");
    snprintf(p, sizeof p, "%s/missing", dir);
    CHECK(mc_open_regular(p, 0, NULL, err, sizeof err) == MC_ERR_IO && strstr(err, "missing: "), "%s", err);
    /* a link to a regular file is followed, as the folder walk follows it */
    snprintf(p, sizeof p, "%s/ten", dir);
    snprintf(l, sizeof l, "%s/link_to_ten", dir);
    CHECK(symlink(p, l) == 0);
    CHECK(mc_read_regular(l, 10, &d, &n, err, sizeof err) == MC_OK && n == 10, "%s", err);
    free(d);
}

/* Names in dir that start with prefix. */
static int count_prefixed(const char *prefix) {
    DIR *d = opendir(dir);
    int k = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) k++;
    closedir(d);
    return k;
}

static int fail_fill(int fd, void *ctx, char *err, size_t errlen) {
    (void)ctx, (void)err, (void)errlen;
    return mc_write_all(fd, "partial", 7) ? -1 : -1; /* wrote some, then gave up */
}

static void test_atomic(void) {
    char p[512], err[256], back[64];
    snprintf(p, sizeof p, "%s/out.bin", dir);
    const void *parts[] = {"hello ", "world"};
    size_t lens[] = {6, 5};
    CHECK(mc_atomic_write(p, NULL, 0644, parts, lens, 2, err, sizeof err) == MC_OK, "%s", err);
    FILE *f = fopen(p, "rb");
    size_t n = fread(back, 1, sizeof back, f);
    fclose(f);
    CHECK(n == 11 && !memcmp(back, "hello world", 11));
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == (0644 & ~(mode_t)umask(022)));
    CHECK(count_prefixed("out.bin.tmp") == 0, "no temporary after success");
    /* the fill fails: the old content stays, no temporary */
    CHECK(mc_atomic_write_fn(p, NULL, 0644, fail_fill, NULL, err, sizeof err) == MC_ERR_IO);
    f = fopen(p, "rb");
    n = fread(back, 1, sizeof back, f);
    fclose(f);
    CHECK(n == 11 && !memcmp(back, "hello world", 11), "the old file untouched");
    CHECK(count_prefixed("out.bin.tmp") == 0, "no temporary after a failed fill");
    /* the rename fails (a folder is in the way): no temporary either */
    char sub[512];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    CHECK(mkdir(sub, 0700) == 0);
    char in[600];
    snprintf(in, sizeof in, "%s/x", sub);
    put("adir/x", "x");
    CHECK(mc_atomic_write(sub, NULL, 0644, parts, lens, 2, err, sizeof err) == MC_ERR_IO && strstr(err, "rename"), "%s",
          err);
    CHECK(count_prefixed("adir.tmp") == 0, "no temporary after a failed rename");
    /* a link planted under the temporary's name is not written through */
    put("victim", "keep");
    char tmp[600], victim[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    CHECK(symlink(victim, tmp) == 0);
    CHECK(mc_atomic_write(p, NULL, 0644, parts, lens, 1, err, sizeof err) == MC_OK, "%s", err);
    f = fopen(victim, "rb");
    n = fread(back, 1, sizeof back, f);
    fclose(f);
    CHECK(n == 4 && !memcmp(back, "keep", 4), "the link's target untouched");
    CHECK(count_prefixed("out.bin.tmp") == 0);
    /* an unwritable place: the error names the temporary */
    CHECK(mc_atomic_write("/nonexistent-dir/x", NULL, 0644, parts, lens, 1, err, sizeof err) == MC_ERR_IO &&
              strstr(err, "/nonexistent-dir/x.tmp"),
          "%s", err);
    /* a temporary the caller names (a writer that races other processes) */
    char own[600];
    snprintf(own, sizeof own, "%s.tmp.%ld", p, (long)getpid());
    CHECK(mc_atomic_write_fn(p, own, 0644, fail_fill, NULL, err, sizeof err) == MC_ERR_IO);
    CHECK(count_prefixed("out.bin.tmp") == 0, "the caller's temporary removed too");
    CHECK(mc_atomic_write(p, own, 0600, parts, lens, 2, err, sizeof err) == MC_OK, "%s", err);
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 11);
}

static void test_misc(void) {
    char e[8];
    mc_set_err(e, sizeof e, "%s-%d", "abcdef", 42);
    CHECK(!strcmp(e, "abcdef-"), "truncated to fit: %s", e);
    mc_set_err(NULL, 10, "x");
    mc_set_err(e, 0, "x");
    double a = mc_now_s(), b = mc_now_s();
    CHECK(a > 0 && b >= a);
}

/* The launcher-number parser both launch_env.c and part_env.c use. */
static void test_env(void) {
    static const struct {
        const char *value; /* NULL: unset */
        int plain, first;  /* mc_env_uint, mc_env_first_uint on it (max 1000) */
        uint64_t v;
    } cases[] = {
        {NULL, 0, 0, 0},
        {"", 0, 0, 0},
        {"0", 1, 1, 0},
        {"17", 1, 1, 17},
        {"1000", 1, 1, 1000},
        {"1001", -1, -1, 0},
        {"-1", -1, -1, 0},
        {"+3", -1, -1, 0},
        {" 3", -1, -1, 0},
        {"3 ", -1, -1, 0},
        {"0x10", -1, -1, 0},
        {"4(x2),3", -1, 1, 4},
        {"4,3", -1, 1, 4},
        {"(x2)", -1, -1, 0},
        {"99999999999999999999999", -1, -1, 0},
        {"18446744073709551617", -1, -1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].value) setenv("MC_TEST_ENV", cases[i].value, 1);
        else unsetenv("MC_TEST_ENV");
        uint64_t v = 12345;
        int r = mc_env_uint("MC_TEST_ENV", 1000, &v);
        CHECK(r == cases[i].plain && (r != 1 || v == cases[i].v), "mc_env_uint(%s) = %d (%llu)",
              cases[i].value ? cases[i].value : "unset", r, (unsigned long long)v);
        v = 12345;
        r = mc_env_first_uint("MC_TEST_ENV", 1000, &v);
        CHECK(r == cases[i].first && (r != 1 || v == cases[i].v), "mc_env_first_uint(%s) = %d (%llu)",
              cases[i].value ? cases[i].value : "unset", r, (unsigned long long)v);
    }
    unsetenv("MC_TEST_ENV");
}

/* mc_json.h: the pieces the three JSON scanners share. The scanners' own
 * tests (test_json_scan against jansson, test_tk_tekken, test_tk_hf) hold
 * their acceptance; these hold the pieces' contract at its edges. */
static void test_json(void) {
    uint32_t v = 0, cp = 0;
    CHECK(mc_json_hex4((const uint8_t *)"00aF", &v) == 1 && v == 0xAF);
    CHECK(mc_json_hex4((const uint8_t *)"12g4", &v) == 0);
    const uint8_t *pair = (const uint8_t *)"\\ud83d\\ude00x";
    CHECK(mc_json_u_escape(pair, 13, &cp) == 12 && cp == 0x1F600);
    CHECK(mc_json_u_escape(pair, 11, &cp) == 6 && cp == 0xD83D); /* the low half cut: lone, for the caller */
    CHECK(mc_json_u_escape((const uint8_t *)"\\ude00", 6, &cp) == 6 && cp == 0xDE00);
    CHECK(mc_json_u_escape((const uint8_t *)"\\ud83d\\u0041", 12, &cp) == 6 && cp == 0xD83D);
    CHECK(mc_json_u_escape((const uint8_t *)"\\u00e9", 6, &cp) == 6 && cp == 0xE9);
    CHECK(mc_json_u_escape((const uint8_t *)"\\u00e", 5, &cp) == 0);
    CHECK(mc_json_u_escape((const uint8_t *)"\\u00eZ", 6, &cp) == 0);
    static const struct {
        const char *in;
        int rc;
        size_t len, n_digits; /* len: bytes taken (OK) or where it failed */
        int neg, real;
        long exp;
    } nums[] = {
        {"0", MC_JNUM_OK, 1, 1, 0, 0, 0},
        {"-12.5e+3,", MC_JNUM_OK, 8, 2, 1, 1, 3},
        {"01", MC_JNUM_OK, 1, 1, 0, 0, 0},
        {"7E-2]", MC_JNUM_OK, 4, 1, 0, 1, -2},
        {"-", MC_JNUM_NONE, 1, 0, 1, 0, 0},
        {"-x", MC_JNUM_NONE, 1, 0, 1, 0, 0},
        {"1.", MC_JNUM_BAD, 2, 1, 0, 1, 0},
        {"1.e5", MC_JNUM_BAD, 2, 1, 0, 1, 0},
        {"2e+", MC_JNUM_BAD, 3, 1, 0, 1, 0},
        {"2e999999999999", MC_JNUM_OK, 14, 1, 0, 1, 1000000000L - 1},
        {"123456789012345678901", MC_JNUM_OK, 21, 21, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++) {
        const uint8_t *p = (const uint8_t *)nums[k].in;
        mc_jnum nm;
        int rc = mc_json_number(p, p + strlen(nums[k].in), &nm);
        int ok = rc == nums[k].rc && (size_t)(nm.end - p) == nums[k].len && nm.neg == nums[k].neg &&
                 (rc == MC_JNUM_NONE || (nm.n_digits == nums[k].n_digits && nm.real == nums[k].real)) &&
                 (rc != MC_JNUM_OK || nm.exp == nums[k].exp);
        if (!ok)
            fprintf(stderr, "mc_json_number(\"%s\"): rc %d, end %td, exp %ld\n", nums[k].in, rc, nm.end - p, nm.exp);
        CHECK(ok);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/test_common.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_misc();
    test_env();
    test_utf8();
    test_json();
    test_read();
    test_atomic();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
    if (failures) fprintf(stderr, "test_common: %d failures\n", failures);
    else printf("test_common: ok\n");
    return failures ? 1 : 0;
}
