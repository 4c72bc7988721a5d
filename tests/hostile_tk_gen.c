/* hostile_tk_gen.c - writes the crafted tokenizers of hostile_tk.h into a
 * folder for tests/tk_limits_cli.sh (issue 32, items 1-3):
 *
 *   hostile_tk_gen DIR
 *
 * DIR/regex.json (Split (?:x+x+)+y|.), DIR/replace.json, DIR/precompiled.json,
 * DIR/decoder.json, DIR/spm_norm.model, DIR/spm_denorm.model, and the
 * documents DIR/regex_120k.txt (120,000 bytes of x-runs), DIR/regex_3k.txt
 * (3,000 bytes of them) and DIR/a_3k.txt (3,000 'a'). */
#include "hostile_tk.h"

static int put_doc(const char *dir, const char *name, int c, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    htk_buf b = {0};
    htk_grow(&b, n);
    if (c) memset(b.p, c, n);
    else htk_regex_doc((char *)b.p, n);
    b.n = n;
    return htk_save(&b, path);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: hostile_tk_gen DIR\n");
        return 64;
    }
    const char *dir = argv[1];
    char p[1024];
    int rc = 0;
#define P(name) (snprintf(p, sizeof p, "%s/%s", dir, name), p)
    rc |= htk_regex_json(P("regex.json"), HTK_REGEX);
    rc |= htk_replace_json(P("replace.json"));
    rc |= htk_precompiled_json(P("precompiled.json"));
    rc |= htk_decoder_json(P("decoder.json"));
    rc |= htk_spm_model(P("spm_norm.model"), 0);
    rc |= htk_spm_model(P("spm_denorm.model"), 1);
    rc |= put_doc(dir, "regex_120k.txt", 0, 120000);
    rc |= put_doc(dir, "regex_3k.txt", 0, 3000);
    rc |= put_doc(dir, "a_3k.txt", 'a', 3000);
    return rc ? 1 : 0;
}
