/* fuzz_reader.c - libFuzzer target for the JSONL/txt/zstd/gzip reader and the lint
 * byte checks. The first input byte picks the configuration; the rest is the
 * file content (zstd and gzip are sniffed by their magic, so compressed inputs are
 * covered too). Built as a libFuzzer binary with -DMKS_FUZZ=ON (clang), and
 * always linked into test_fuzz_replay, which replays tests/data/fuzz/reader. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ds.h"
#include "tk.h"

/* A small byte-level tokenizer (256 byte tokens + a few merges), written to
 * a memfd once: lint with token counts and hist run on fuzz inputs too. */
static tk_tokenizer *fuzz_tokenizer(void) {
    static int tried;
    static tk_tokenizer *tok;
    if (tried) return tok;
    tried = 1;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int fd = memfd_create("fuzz_tok", 0);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "w+");
    if (!f) {
        close(fd);
        return NULL;
    }
    for (int i = 0; i < 256; i++) /* one byte: base64 of 1 byte is 2 chars + "==" */
        fprintf(f, "%c%c== %d\n", b64[i >> 2], b64[(i & 3) << 4], i);
    static const char *const merges[] = {"dGg=", "aGU=", "dGhl", "IHQ=", "aW4="}; /* th he the " t" in */
    for (int i = 0; i < 5; i++) fprintf(f, "%s %d\n", merges[i], 256 + i);
    fflush(f);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char err[256];
    if (tk_load_tiktoken(path, TK_PAT_GPT2, &tok, err, sizeof err) != 0) tok = NULL;
    fclose(f);
    return tok;
}

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
        /* txt modes leave bits 2-3 free: bit 2 adds a tokenizer (token
         * rules + hist), bit 3 the smallest caps (duplicate set, examples) */
        int with_tok = mode >= 2 && (cfg & 0x04);
        if (with_tok) {
            ao.tok = (const struct tk_tokenizer *)fuzz_tokenizer();
            ao.seq_len = 8;
            ao.bpt_min_bytes = 4;
        }
        if (mode >= 2 && (cfg & 0x08)) {
            ao.max_dup_docs = 1;
            ao.max_examples = 1;
            ao.set_examples = 1;
        }
        ds_lint_report *rep = NULL;
        ds_hist *h = NULL;
        if (ds_analyze(in, 1, &o, &ao, &rep, ao.tok ? &h : NULL, err, sizeof err) == 0) {
            FILE *f = fopen("/dev/null", "w");
            if (f) {
                ds_lint_print(rep, f);
                ds_lint_write_json(rep, f);
                if (h) {
                    ds_hist_print(h, f, 40);
                    ds_hist_write_json(h, f);
                }
                fclose(f);
            }
            if (h && rep && (h->docs != rep->docs || h->tokens != rep->tokens)) abort(); /* one pass, same docs */
            if (h && h->docs &&
                (h->p50 > h->p90 || h->p90 > h->p99 || h->p99 > h->p999 || h->p999 > h->max || h->min > h->p50))
                abort();
            ds_lint_report_free(rep);
            ds_hist_free(h);
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
