/* ds_names.c - the one spelling of the public dataset enums (ds.h "Enum
 * names"): the CLI options (--pack, --over-long, --doc-sep), the manifest's
 * config and the Python arguments all name the values through these tables,
 * so adding a value (a packer, a policy) is one line here next to its enum. */
#include "ds.h"

#include <stdio.h>
#include <string.h>

static const char *const k_pack[] = {[DS_PACK_CONCAT] = "concat", [DS_PACK_BFD] = "bfd", [DS_PACK_NONE] = "none"};
static const char *const k_over_long[] = {
    [DS_OL_TRUNCATE] = "truncate", [DS_OL_CHUNK] = "chunk", [DS_OL_DROP] = "drop", [DS_OL_DROP_TURNS] = "drop-turns"};
static const char *const k_doc_sep[] = {[DS_SEP_FILE] = "file", [DS_SEP_LINE] = "line", [DS_SEP_BLANK] = "blank-line"};
static const char *const k_split[] = {[DS_SPLIT_TRAIN] = "train", [DS_SPLIT_VAL] = "val"};

#define N_OF(a) ((int)(sizeof(a) / sizeof(a)[0]))

static int find(const char *const *names, int n, const char *name) {
    for (int i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

const char *ds_pack_name(int v) { return v >= 0 && v < N_OF(k_pack) ? k_pack[v] : NULL; }
const char *ds_over_long_name(int v) { return v >= 0 && v < N_OF(k_over_long) ? k_over_long[v] : NULL; }
const char *ds_doc_sep_name(int v) { return v >= 0 && v < N_OF(k_doc_sep) ? k_doc_sep[v] : NULL; }
const char *ds_split_name(int v) { return v >= 0 && v < N_OF(k_split) ? k_split[v] : NULL; }

int ds_split_parse(const char *name, ds_split *out) {
    int i = find(k_split, N_OF(k_split), name);
    if (i < 0) return -1;
    *out = (ds_split)i;
    return 0;
}

int ds_pack_parse(const char *name, ds_pack *out) {
    int i = find(k_pack, N_OF(k_pack), name);
    if (i < 0) return -1;
    *out = (ds_pack)i;
    return 0;
}

int ds_over_long_parse(const char *name, ds_over_long *out) {
    int i = find(k_over_long, N_OF(k_over_long), name);
    if (i < 0) return -1;
    *out = (ds_over_long)i;
    return 0;
}

int ds_doc_sep_parse(const char *name, ds_doc_sep *out) {
    int i = find(k_doc_sep, N_OF(k_doc_sep), name);
    if (i < 0 && name && !strcmp(name, "blank")) /* the short spelling build/encode/tokenizer always took */
        i = DS_SEP_BLANK;
    if (i < 0) return -1;
    *out = (ds_doc_sep)i;
    return 0;
}

const char *ds_names_list(const char *(*name)(int), char *buf, size_t cap) {
    if (!cap) return buf;
    buf[0] = 0;
    int n = 0;
    while (name(n)) n++;
    size_t len = 0;
    for (int i = 0; i < n && len < cap; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", name(i));
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}
