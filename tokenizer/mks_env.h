/* mks_env.h - the project's environment variables, read through one function
 * (public: the libraries and the front ends use it; tokenizer/mks_env.c).
 *
 * Every variable of this project is named MKS_* (the third-party ones keep
 * their names: OMP_*, TIKTOKEN_CACHE_DIR, TMPDIR, XDG_CACHE_HOME, HOME,
 * SLURM_*, OMPI_*, PMI_*, ...). Four were named MKSHARDS_* before; for one
 * release the old name is still read when the new one is unset, with a
 * one-line warning on stderr (once per process for each name):
 *   MKS_VOCAB_DIR           (was MKSHARDS_VOCAB_DIR)
 *   MKS_CACHE_DIR           (was MKSHARDS_CACHE_DIR)
 *   MKS_CHECKPOINT_SECONDS  (was MKSHARDS_CHECKPOINT_SECONDS)
 *   MKS_NO_SIMD_UTF8        (was MKSHARDS_NO_SIMD_UTF8)
 * README.md "Environment variables" lists them all. */
#ifndef MKS_ENV_H
#define MKS_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

/* getenv(name) for a project variable (name: "MKS_..."); when it is unset
 * and the variable had an MKSHARDS_* name, that one's value, with the
 * warning. When both are set the new one wins (the warning says the old one
 * is ignored). NULL when neither is set. */
const char *mks_getenv(const char *name);

#ifdef __cplusplus
}
#endif
#endif
