/* family_gpt2.c - GPT-2 as a model family (train/family.h): its presets,
 * tensor table and memory from model_config.c's GPT-2 functions (tr_gpt2_*,
 * model.h), never the tr_model_* ones that dispatch back through family.c. Its instance is model.c's own
 * tr_model (the host model every family shares), so the instance ops are
 * NULL: model.c computes GPT-2 directly, bit for bit as before families.
 * Compiled into tr_plan (layout) and into tr, where a CUDA build names its
 * GPU model (gpu_model.cu's tr_gpu_model_gpt2). */
#include "family.h"
#include "tr.h"
#ifdef TR_HAVE_CUDA
#include "gpu_family.h"
#endif

static const char *const names[] = {"tiny", "d12", "d24", "d36", "d48"};

static int gpt2_preset(const char *name, int vocab, int max_seq, tr_model_config *out) {
    return tr_model_config_preset(name, vocab, max_seq, out) == TR_MODEL_OK ? TR_OK : TR_ERR_ARG;
}
static const char *gpt2_preset_name(int i) {
    return i >= 0 && (size_t)i < sizeof names / sizeof names[0] ? names[i] : NULL;
}
static int gpt2_n_tensors(const tr_model_config *c) {
    (void)c;
    return TR_NUM_PARAM_TENSORS;
}
static void gpt2_tensor(const tr_model_config *c, int i, tr_tensor_info *t) {
    size_t s[TR_NUM_PARAM_TENSORS];
    tr_model_param_sizes(c, s);
    snprintf(t->name, sizeof t->name, "%s", tr_model_param_name(i));
    t->size = s[i];
    t->decay = tr_model_param_decay(i);
    t->layers = tr_gpt2_param_layers(c, i);
}

const tr_family_ops tr_family_gpt2 = {
    .name = "gpt2",
    .id = TR_FAMILY_GPT2,
    .preset = gpt2_preset,
    .preset_name = gpt2_preset_name,
    .from_json = NULL, /* --init-from reads GPT-2 folders (hf_import.c) */
    .check = tr_gpt2_config_check,
    .param_count = tr_gpt2_param_count,
    .n_tensors = gpt2_n_tensors,
    .tensor = gpt2_tensor,
    .grad_groups = tr_gpt2_grad_groups,
    .grad_group_of = tr_gpt2_grad_group_of,
    .memory = tr_gpt2_memory,
    .gpu_plan = NULL, /* plan.c's own GPU rows */
#ifdef TR_HAVE_CUDA
    .gpu = &tr_gpu_model_gpt2,
#endif
};
