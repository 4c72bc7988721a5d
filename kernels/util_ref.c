/* util_ref.c - small shared helpers of the reference kernels. */
#include "kn.h"
#include "kn_internal.h"

int kn_pad_vocab(int v) {
    if (v <= 0 || v > 0x7fffffff - 127) return KN_EINVAL;
    return (v + 127) / 128 * 128;
}
