/* kn_internal.h - private helpers of the kn reference kernels. */
#ifndef KN_INTERNAL_H
#define KN_INTERNAL_H

#ifdef _OPENMP
#include <omp.h>
#define KN_STR_(x) #x
#define KN_OMP(x) _Pragma(KN_STR_(omp x))
#else
#define KN_OMP(x)
#endif

#endif
