/* fuzz_family_config.c - libFuzzer target for a checkpoint's model record
 * (DIR/model.txt, train/family.c: tr_family_config_from_text): arbitrary
 * bytes as the record. One that reads must be a configuration the trainer
 * can run (tr_model_config_check) and survive its own round trip (written
 * again, it reads back to the same text). Seeds: tests/data/fuzz/family_config,
 * made by tests/data/fuzz/make_family_config_seeds.py. */
#include <stdint.h>
#include <string.h>

#include "family.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tr_model_config c, d;
    if (tr_family_config_from_text((const char *)data, size, &c) == TR_OK) {
        char a[1024], b[1024];
        size_t n = tr_family_config_to_text(&c, a, sizeof a);
        if (tr_model_config_check(&c) || !n || tr_family_config_from_text(a, n, &d) ||
            tr_family_config_to_text(&d, b, sizeof b) != n || memcmp(a, b, n))
            __builtin_trap();
    }
    return 0;
}
