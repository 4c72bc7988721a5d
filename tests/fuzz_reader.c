/* fuzz_reader.c - libFuzzer target for the JSONL/txt/zstd reader and the lint
 * byte checks. The first input byte picks the configuration; the rest is the
 * file content (zstd is sniffed by its magic, so compressed inputs are
 * covered too). Built as a libFuzzer binary with -DMKS_FUZZ=ON (clang), and
 * always linked into test_fuzz_replay, which replays tests/data/fuzz/reader. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t cfg = data[0];
    data++;
    size--;
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ds_reader_opts o;
    ds_reader_opts_init(&o);
    static const char *const fields[] = {"text", "a.b", "text.x", NULL};
    int mode = cfg & 3; /* 0,1: JSONL; 2: txt line; 3: txt blank-line */
    if (mode <= 1) o.field = fields[(cfg >> 2) & 3] ? fields[(cfg >> 2) & 3] : "text";
    else o.doc_sep = mode == 2 ? DS_SEP_LINE : DS_SEP_BLANK;
    /* with no field and an unknown extension, "file" mode would be used for
     * txt: cover it through field == NULL when bit 4 is set */
    if (mode == 1 && (cfg & 0x10)) {
        o.field = NULL;
        o.doc_sep = DS_SEP_FILE;
    }
    o.max_record_bytes = (cfg & 0x20) ? 64 : 0;
    o.overlong = (cfg & 0x40) ? DS_OVERLONG_CUT : DS_OVERLONG_SKIP;
    const char *in[] = {path};
    char err[256];
    if (cfg & 0x80) {
        ds_analyze_opts ao;
        ds_analyze_opts_init(&ao);
        ao.threads = 1;
        ao.long_line_bytes = 32;
        ao.long_run_bytes = 16;
        ao.outlier_min_bytes = 8;
        ds_lint_report *rep = NULL;
        if (ds_analyze(in, 1, &o, &ao, &rep, NULL, err, sizeof err) == 0) {
            FILE *f = fopen("/dev/null", "w");
            if (f) {
                ds_lint_print(rep, f);
                ds_lint_write_json(rep, f);
                fclose(f);
            }
            ds_lint_report_free(rep);
        }
    } else {
        ds_reader *r = NULL;
        if (ds_reader_open(in, 1, &o, &r, err, sizeof err) == 0) {
            ds_record rec;
            uint64_t last_off = 0;
            int rc;
            while ((rc = ds_reader_next(r, &rec, err, sizeof err)) == 1) {
                if (rec.text && rec.len) {
                    volatile uint8_t s = rec.text[0] ^ rec.text[rec.len - 1];
                    (void)s;
                }
                if (rec.offset < last_off) abort(); /* offsets never go backwards */
                last_off = rec.offset;
                if (rec.line < 1) abort();
                if (rec.status == DS_REC_OK && !rec.text) abort();
            }
            ds_reader_free(r);
        }
    }
    close(fd);
    return 0;
}
