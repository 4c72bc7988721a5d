/* fuzz_llama_config.c - libFuzzer target for the Llama family's config.json
 * reader (train/llama_config.c: tr_llama_config_from_json): arbitrary bytes
 * as a config.json. A config that reads must pass tr_llama_config_check and
 * have a parameter count (the shapes llama_model.c would allocate). Seeds:
 * tests/data/fuzz/llama_config, the Llama 3.2 1B, Qwen2.5 0.5B and Mistral
 * 7B config.json strings of tests/test_llama_config.c as files, and a
 * config.json written by transformers 5.25 (rope_parameters, llama3). */
#include <stdint.h>
#include <stdio.h>

#include "llama_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tr_llama_config c;
    tr_llama_arch a;
    int sw;
    char err[512];
    if (tr_llama_config_from_json((const char *)data, size, &c, &a, &sw, err, sizeof err) == 0) {
        if (tr_llama_config_check(&c) || !tr_llama_param_count(&c) || !tr_llama_arch_name(a) || sw < 0)
            __builtin_trap();
    }
    return 0;
}
