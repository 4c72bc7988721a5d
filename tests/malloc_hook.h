/* malloc_hook.h - HOOK is 1 where a test may replace glibc's malloc family
 * with its own definitions forwarding to __libc_malloc & co. (a glibc build
 * without AddressSanitizer, which owns malloc), else 0. Include it after a
 * libc header, so __GLIBC__ is defined. */
#ifndef MKS_TEST_MALLOC_HOOK_H
#define MKS_TEST_MALLOC_HOOK_H

#if defined(__SANITIZE_ADDRESS__)
#define HOOK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOOK 0
#endif
#endif
#ifndef HOOK
#if defined(__GLIBC__)
#define HOOK 1
#else
#define HOOK 0
#endif
#endif

#endif
