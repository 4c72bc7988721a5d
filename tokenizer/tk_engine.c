/* tk_engine.c - the engine dispatcher (tk_engine.h): the registry, the
 * engine of a tokenizer, and the API calls that only name the engine's op
 * (tk_describe, tk_lossless). */
#include "tk_engine.h"

#include <stdio.h>

static const tk_engine *const ENGINES[] = {
#define TK_ENGINE(name) &tk_engine_##name,
#include "tk_engines.def"
#undef TK_ENGINE
};

const tk_engine *const *tk_engines(size_t *n) {
    *n = sizeof ENGINES / sizeof ENGINES[0];
    return ENGINES;
}

const tk_engine *tk_engine_of(const tk_tokenizer *t) { return t->engine ? t->engine : &tk_engine_rank; }

void tk_describe(const tk_tokenizer *t, char *buf, size_t len) {
    if (!buf || !len) return;
    buf[0] = 0;
    if (!t) return;
    tk_engine_of(t)->describe(t, buf, len);
}

int tk_lossless(const tk_tokenizer *t) {
    if (!t) return 1;
    const tk_engine *e = tk_engine_of(t);
    return e->lossless ? e->lossless(t) : 1;
}
