/* macro.h: small language helpers shared by every module (cleanup, sizes, ownership). */
#pragma once

#include <stddef.h>
#include <stdlib.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hand ownership of *p to the caller: returns the pointer and leaves NULL behind,
 * so the _cleanup_ handler of the local variable does nothing. */
#define TAKE_PTR(p)                                                                                \
    ({                                                                                             \
        __typeof__(p) _p_ = (p);                                                                   \
        (p) = NULL;                                                                                \
        _p_;                                                                                       \
    })

/* Define NAMEp(T **p) that calls NAME(*p) for use with _cleanup_. NAME must accept NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
    static inline void func##p(type *p) {                                                          \
        if (*p)                                                                                    \
            func(*p);                                                                              \
    }

static inline void freep(void *p) {
    free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

#define STREQ(a, b) (strcmp((a), (b)) == 0)
#define STRNEQ(a, b) (strcmp((a), (b)) != 0)
#define strempty(s) ((s) ? (s) : "")
#define isempty(s) (!(s) || !(s)[0])
