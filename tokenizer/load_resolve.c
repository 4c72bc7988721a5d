/* load_resolve.c - tk_load: a path (file or folder) or a vocabulary name,
 * handed to the loader for its kind. */
#include "load_internal.h"
#include "rank_pretok.h"
#include "tk_engine.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mks_env.h"

/* ---- resolution by path or name -------------------------------------------- */

#define BLOB "https://openaipublic.blob.core.windows.net/"

/* The first bytes of a rank file: a base64 token, one space, a decimal
 * rank, a line end (or the 16 bytes end inside the line). */
static bool tk_ld_rank_head(const uint8_t *h, size_t n) {
    size_t i = 0, d = 0;
    while (i < n && ((h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= 'a' && h[i] <= 'z') || (h[i] >= '0' && h[i] <= '9') ||
                     h[i] == '+' || h[i] == '/' || h[i] == '='))
        i++;
    if (i == 0 || i == n) return i == n && n > 0 && n == 16; /* one long token fills the head */
    if (h[i++] != ' ') return false;
    while (i < n && h[i] >= '0' && h[i] <= '9') i++, d++;
    if (i == n) return d > 0 || n == 16;
    return d > 0 && (h[i] == '\n' || h[i] == '\r');
}

/* A file, to the first engine of the registry whose sniffer takes it (by
 * its name or its first bytes; the rank engine takes any file). */
static int load_file(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    uint8_t head[16];
    size_t size, n = 0;
    int fd = tk_open_regular(path, TK_MAX_FILE_BYTES, &size, NULL, 0);
    if (fd >= 0) {
        ssize_t r = read(fd, head, sizeof head);
        close(fd);
        if (r > 0) n = (size_t)r;
    }
    /* Meta ships Llama 3 / Llama 4's tiktoken rank file as tokenizer.model:
     * the content decides, not the name (a SentencePiece model starts with a
     * protobuf tag byte, never with a base64 line) */
    size_t pl = strlen(path);
    if (pl >= 6 && strcmp(path + pl - 6, ".model") == 0 && tk_ld_rank_head(head, n))
        return tk_load_tiktoken(path, pat, out, err, errlen);
    size_t ne;
    const tk_engine *const *eng = tk_engines(&ne);
    for (size_t k = 0; k < ne; k++)
        if (eng[k]->sniff && eng[k]->sniff(path, head, n)) {
            /* a pre-tokenizer regex (tk_load_ex) is for rank files and encoder.json only */
            if (pat == TK_PAT_REGEX && eng[k] != &tk_engine_rank) {
                tk_set_err(err, errlen,
                           "%s: this file carries its own pre-tokenizer (the %s engine's): --pattern REGEX "
                           "applies to rank files (.tiktoken) and encoder.json + vocab.bpe",
                           path, eng[k]->name);
                return TK_ERR_UNSUPPORTED;
            }
            return eng[k]->load(path, pat, out, err, errlen);
        }
    return tk_load_tiktoken(path, pat, out, err, errlen);
}

int tk_load(const char *spec, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    if (!spec || !out) return TK_ERR_ARG;
    if (err && errlen) err[0] = 0;
    char a[4096], b[4096];
    /* Whatever exists under a path is handed to its loader, which refuses a
     * FIFO or device with a message instead of blocking on it. */
    if (tk_ld_is_dir(spec)) {
        if (!tk_ld_join_path(a, sizeof a, spec, "/encoder.json", err, errlen) ||
            !tk_ld_join_path(b, sizeof b, spec, "/vocab.bpe", err, errlen))
            return TK_ERR_ARG;
        if (tk_ld_exists(a) || tk_ld_exists(b)) {
            if (!tk_ld_exists(a) || !tk_ld_exists(b)) {
                tk_set_err(err, errlen, "%s: has %s but not %s", spec, tk_ld_exists(a) ? "encoder.json" : "vocab.bpe",
                           tk_ld_exists(a) ? "vocab.bpe" : "encoder.json");
                return TK_ERR_NOT_FOUND;
            }
            return tk_load_gpt2(a, b, pat, out, err, errlen);
        }
        if (!tk_ld_join_path(a, sizeof a, spec, "/tokenizer.json", err, errlen)) return TK_ERR_ARG;
        if (tk_ld_exists(a)) return load_file(a, pat, out, err, errlen);
        if (!tk_ld_join_path(a, sizeof a, spec, "/tokenizer.model", err, errlen)) return TK_ERR_ARG;
        if (tk_ld_exists(a)) return load_file(a, pat, out, err, errlen);
        /* Mistral's model folders: tekken.json (beside an HF tokenizer.json
         * in most, which is taken first) */
        if (!tk_ld_join_path(a, sizeof a, spec, "/tekken.json", err, errlen)) return TK_ERR_ARG;
        if (tk_ld_exists(a)) return load_file(a, pat, out, err, errlen);
        tk_set_err(err, errlen,
                   "%s: folder holds neither encoder.json + vocab.bpe nor tokenizer.json nor "
                   "tokenizer.model nor tekken.json",
                   spec);
        return TK_ERR_NOT_FOUND;
    }
    if (tk_ld_exists(spec)) return load_file(spec, pat, out, err, errlen);
    /* a name */
    static const struct {
        const char *name;
        const char *files[2];
        const char *url;
    } names[] = {
        {"gpt2", {"gpt2.tiktoken", "r50k_base.tiktoken"}, BLOB "encodings/r50k_base.tiktoken"},
        {"r50k_base", {"r50k_base.tiktoken", "gpt2.tiktoken"}, BLOB "encodings/r50k_base.tiktoken"},
        {"cl100k_base", {"cl100k_base.tiktoken", NULL}, BLOB "encodings/cl100k_base.tiktoken"},
        {"o200k_base", {"o200k_base.tiktoken", NULL}, BLOB "encodings/o200k_base.tiktoken"},
    };
    int which = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(spec, names[k].name) == 0) which = k;
    if (which < 0) {
        tk_set_err(err, errlen,
                   "%s: no such file, folder or vocabulary name (names: gpt2, r50k_base, cl100k_base, "
                   "o200k_base)",
                   spec);
        return errno == ENOENT || errno == 0 ? TK_ERR_IO : TK_ERR_IO;
    }
    const char *vd = mks_getenv("MKS_VOCAB_DIR");
    if (vd && *vd) {
        for (int f = 0; f < 2 && names[which].files[f]; f++) {
            if (snprintf(a, sizeof a, "%s/%s", vd, names[which].files[f]) >= (int)sizeof a) break;
            if (tk_ld_exists(a)) return tk_load_tiktoken(a, pat, out, err, errlen);
        }
        if (which == 0) {
            if (tk_ld_join_path(a, sizeof a, vd, "/encoder.json", NULL, 0) &&
                tk_ld_join_path(b, sizeof b, vd, "/vocab.bpe", NULL, 0) && tk_ld_exists(a) && tk_ld_exists(b))
                return tk_load_gpt2(a, b, pat, out, err, errlen);
        }
    }
    /* tiktoken's cache: files named by sha1 of the download URL */
    const char *cd = getenv("TIKTOKEN_CACHE_DIR");
    if (!cd || !*cd) cd = getenv("DATA_GYM_CACHE_DIR");
    char tmpd[4096];
    if (!cd || !*cd) {
        const char *td = getenv("TMPDIR");
        snprintf(tmpd, sizeof tmpd, "%s/data-gym-cache", td && *td ? td : "/tmp");
        cd = tmpd;
    }
    char h[41];
    if (strlen(cd) > sizeof a - 64) {
        tk_set_err(err, errlen, "cache folder path too long: %s", cd);
        return TK_ERR_ARG;
    }
    tk_sha1_hex(names[which].url, h);
    snprintf(a, sizeof a, "%.4000s/%s", cd, h);
    if (tk_ld_exists(a)) return tk_load_tiktoken(a, pat, out, err, errlen);
    if (which == 0) {
        char h2[41];
        tk_sha1_hex(BLOB "gpt-2/encodings/main/encoder.json", h);
        tk_sha1_hex(BLOB "gpt-2/encodings/main/vocab.bpe", h2);
        snprintf(a, sizeof a, "%.4000s/%s", cd, h);
        snprintf(b, sizeof b, "%.4000s/%s", cd, h2);
        if (tk_ld_exists(a) && tk_ld_exists(b)) return tk_load_gpt2(a, b, pat, out, err, errlen);
    }
    tk_set_err(err, errlen,
               "vocabulary %s not found: looked in $MKS_VOCAB_DIR (%s) for %s and in tiktoken's "
               "cache %s; set MKS_VOCAB_DIR to a folder holding %s",
               spec, vd && *vd ? vd : "unset", names[which].files[0], cd, names[which].files[0]);
    return TK_ERR_NOT_FOUND;
}
