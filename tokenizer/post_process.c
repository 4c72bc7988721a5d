/* post_process.c - tk_post_process_ids: the ids a tokenizer.json's
 * post_processor puts around one sequence, HF's add_special_tokens=True. */
#include "tk_internal.h"

int tk_post_process_ids(const tk_tokenizer *t, int64_t *bos, int64_t *eos, const char **why) {
    if (!t || !bos || !eos) return TK_ERR_ARG;
    *bos = *eos = -1;
    if (why) *why = NULL;
    if (t->pp == TK_PP_UNUSABLE) {
        if (why) *why = t->pp_why;
        return TK_ERR_UNSUPPORTED;
    }
    if (t->pp == TK_PP_TEMPLATE) {
        if (t->pp_bos != TK_NO_RANK) *bos = t->pp_bos;
        if (t->pp_eos != TK_NO_RANK) *eos = t->pp_eos;
    }
    return TK_OK; /* no post_processor, ByteLevel's, or not a tokenizer.json: nothing added */
}
