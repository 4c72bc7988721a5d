/* load_tekken.c - Mistral's Tekken vocabularies (tekken.json: Mistral NeMo,
 * Pixtral, Ministral and later), told apart from an HF tokenizer.json so
 * that they are refused for what they are.
 *
 * A tekken.json is {"config": {"pattern", "num_vocab_tokens",
 * "default_vocab_size", "default_num_special_tokens", "version"}, "vocab":
 * [{"rank", "token_bytes" (base64), "token_str"}...], "special_tokens"?,
 * ...}: tiktoken-style ranks under their own regex, ids shifted by the
 * number of special ids. Without this engine the hf engine took it (any
 * .json) and refused it for a "\u0000" token_str, a message that reads like
 * damage. Running it (ids equal to mistral_common's Tekkenizer) needs its
 * pattern through the general regex engine for rank files, which this build
 * does not have yet: the loader refuses, naming the kind. */
#include "load_internal.h"
#include "tk_engine.h"

#include <stdio.h>
#include <string.h>

/* A .json named tekken*.json, or whose first key is "config" (Mistral's
 * files start so; a tokenizer.json starts with "version", "truncation" or
 * "model", never "config"). */
static bool tekken_sniff(const char *path, const uint8_t *head, size_t n) {
    size_t a = strlen(path);
    if (a < 5 || strcmp(path + a - 5, ".json") != 0) return false;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (strncmp(base, "tekken", 6) == 0) return true;
    size_t i = 0;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    if (i == n || head[i++] != '{') return false;
    while (i < n && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
    return n - i >= 8 && memcmp(head + i, "\"config\"", 8) == 0;
}

static int tekken_load(const char *path, tk_pattern pat, tk_tokenizer **out, char *err, size_t errlen) {
    (void)pat;
    *out = NULL;
    char sb[160];
    tk_set_err(err, errlen,
               "%s: a Mistral Tekken vocabulary (tekken.json: base64 ranks under its own regex, ids after its "
               "special tokens), not an HF tokenizer.json; this build does not run Tekken vocabularies yet",
               tk_escape_text(path, strlen(path), sb, sizeof sb));
    return TK_ERR_UNSUPPORTED;
}

const tk_engine tk_engine_tekken = {
    .name = "tekken",
    .sniff = tekken_sniff,
    .load = tekken_load,
};
