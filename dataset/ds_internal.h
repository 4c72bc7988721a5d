/* ds_internal.h - helpers shared by the dataset module (not public). */
#ifndef DS_INTERNAL_H
#define DS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define DS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DS_PRINTF(a, b)
#endif

void ds_set_err(char *err, size_t errlen, const char *fmt, ...) DS_PRINTF(3, 4);

#endif
