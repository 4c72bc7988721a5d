/* fuzz_ckpt.h - the small checkpoint layout shared by the `ckpt` fuzz target
 * (tests/fuzz_ckpt.c) and its seed generator (tests/train_hostile_gen.c
 * ckpt-corpus): three sections of FUZZ_CKPT_PARAMS floats, like a CPU run's
 * params / adam_m / adam_v. */
#ifndef FUZZ_CKPT_H
#define FUZZ_CKPT_H

#define FUZZ_CKPT_PARAMS 64

#endif
