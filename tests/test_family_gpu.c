/* test_family_gpu.c - in a CUDA build every model family names its GPU
 * model (train/family.h tr_family_ops.gpu, a train/gpu_family.h table) and
 * the plan's GPU rows come from it or from plan.c (GPT-2): the CUDA backend
 * reaches a family's model only through this field, and a static link that
 * took tr_plan's layout-only family (no gpu) instead of tr's would leave
 * `llmtrain --device cuda` refusing every model. No device needed (label
 * cpu; built with MKS_ENABLE_CUDA only). */
#include <stdio.h>
#include <string.h>

#include "family.h"
#include "gpu_family.h"

int main(void) {
    int fails = 0, n = 0;
    for (int i = 0; tr_family_table[i]; i++, n++) {
        const tr_family_ops *f = tr_family_table[i];
        const struct tr_gpu_model_ops *g = f->gpu;
        if (!g || !g->create || !g->fwd_bwd || !g->step_scaled || !g->set_state || !g->get || !g->grads ||
            strcmp(g->name, f->name)) {
            printf("FAIL family %s: no complete GPU model (%s)\n", f->name, g ? g->name : "none");
            fails++;
            continue;
        }
        /* GPT-2's rows are plan.c's own; every other family brings its own */
        if (f->id != TR_FAMILY_GPT2 && !f->gpu_plan) {
            printf("FAIL family %s: no GPU plan rows\n", f->name);
            fails++;
        }
        printf("ok   family %s: GPU model %s (recompute up to %d)\n", f->name, g->name, g->recompute_max);
    }
    if (n < 2) printf("FAIL %d families (gpt2 and llama expected)\n", n), fails++;
    return fails ? 1 : 0;
}
