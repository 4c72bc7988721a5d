/* optim.c - what is generic over an optimizer's table (train/optim.h): the
 * host model's state, its whole-model step on the CPU, and the checkpoint's
 * section list. */
#include "optim.h"

#include <string.h>

int tr_optim_host_init(const tr_optim_ops *o, tr_model *m) {
    if (!o || !m) return TR_MODEL_EINVAL;
    return tr_model_state_init(m, o->n_state, (size_t)o->state_bytes);
}

int tr_optim_host_step(const tr_optim_ops *o, tr_model *m, const tr_optim_hparams *h, int t) {
    if (!o || !m || !h || t < 1 || !o->step_cpu) return TR_MODEL_EINVAL;
    const tr_model_config *c = tr_model_get_config(m);
    char *state[TR_OPTIM_MAX_STATE];
    for (int k = 0; k < o->n_state; k++)
        if (!(state[k] = tr_model_state(m, k))) return TR_MODEL_ESTATE;
    float *p = tr_model_params(m), *g = tr_model_grads(m);
    size_t off = 0;
    for (int i = 0, n = tr_model_n_tensors(c); i < n; i++) { /* any family's tensor table */
        void *st[TR_OPTIM_MAX_STATE];
        size_t sz = tr_model_tensor_size(c, i);
        for (int k = 0; k < o->n_state; k++) st[k] = state[k] + off * (size_t)o->state_bytes;
        if (o->step_cpu(h, t, tr_model_tensor_decay(c, i), p + off, g + off, st, sz)) return TR_MODEL_EINVAL;
        off += sz;
    }
    return TR_MODEL_OK;
}

int tr_optim_ckpt_sections(const tr_optim_ops *o, tr_model *m, size_t P, uint64_t *extra, size_t extra_bytes,
                           int with_extra, tr_ckpt_section sec[TR_OPTIM_MAX_SECTIONS]) {
    int n = 0;
    sec[n++] = (tr_ckpt_section){"params", m ? tr_model_params(m) : NULL, (uint64_t)P * sizeof(float)};
    for (int k = 0; k < o->n_state; k++)
        sec[n++] =
            (tr_ckpt_section){o->section[k], m ? tr_model_state(m, k) : NULL, (uint64_t)P * (uint64_t)o->state_bytes};
    if (with_extra) sec[n++] = (tr_ckpt_section){TR_OPTIM_EXTRA_SECTION, extra, extra_bytes};
    return n;
}
