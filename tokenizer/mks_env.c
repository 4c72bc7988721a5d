/* mks_env.c - the project's environment variables (mks_env.h). In tk, the
 * library every other one links, so each variable is read by one function. */
#include "mks_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The variables renamed from MKSHARDS_<suffix> to MKS_<suffix>: the old
 * names are read for one release. */
static const char *const k_renamed[] = {"VOCAB_DIR", "CACHE_DIR", "CHECKPOINT_SECONDS", "NO_SIMD_UTF8"};
#define N_RENAMED (sizeof k_renamed / sizeof k_renamed[0])
static int g_warned[N_RENAMED]; /* set once its warning is printed (atomic exchange: threads may race) */

const char *mks_getenv(const char *name) {
    const char *v = getenv(name);
    if (strncmp(name, "MKS_", 4) != 0) return v;
    for (size_t i = 0; i < N_RENAMED; i++) {
        if (strcmp(name + 4, k_renamed[i]) != 0) continue;
        char old[64];
        snprintf(old, sizeof old, "MKSHARDS_%s", k_renamed[i]);
        const char *o = getenv(old);
        if (o && !__atomic_exchange_n(&g_warned[i], 1, __ATOMIC_RELAXED))
            fprintf(stderr,
                    v ? "warning: environment variable %s is ignored: %s is set (old names are dropped in the next "
                        "release)\n"
                      : "warning: environment variable %s is deprecated: set %s instead (the old name is read until "
                        "the next release)\n",
                    old, name);
        return v ? v : o;
    }
    return v;
}
