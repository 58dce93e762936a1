/* error.h: negative-errno returns paired with a human sentence the caller can show. */
#pragma once

#include <assert.h>
#include <stddef.h>

#include "macro.h"

#define ERROR_MESSAGE_MAX 512

/* An Error carries the message of the first failure; code is the negative errno also
 * returned by the failing function. Callers may pass NULL when they only want the code. */
typedef struct Error {
    int code;
    char message[ERROR_MESSAGE_MAX];
} Error;

/* Record a failure (only the first one sticks) and return code, so that callers can write
 * `return error_set(err, -EINVAL, "...")`. code must be negative. */
int error_set(Error *err, int code, const char *fmt, ...) _printf_(3, 4);

/* Like error_set() but prefixes "FILE:LINE:COLUMN: " as compilers do. */
int error_set_at(Error *err, int code, const char *file, unsigned line, unsigned column,
                 const char *fmt, ...) _printf_(6, 7);

/* A non-negative code would read as success to the caller: that is a bug at the call site,
 * so it is asserted. The macros also return the code itself, so that readers (and the static
 * analyzer of `./dev lint`) see that `return error_set(...)` returns a negative value. */
#define error_set(err, code, ...)                                                                  \
    ({                                                                                             \
        int _code_ = (code);                                                                       \
        assert(_code_ < 0);                                                                        \
        (void)(error_set)((err), _code_, __VA_ARGS__);                                             \
        _code_;                                                                                    \
    })
#define error_set_at(err, code, ...)                                                               \
    ({                                                                                             \
        int _code_ = (code);                                                                       \
        assert(_code_ < 0);                                                                        \
        (void)(error_set_at)((err), _code_, __VA_ARGS__);                                          \
        _code_;                                                                                    \
    })

void error_clear(Error *err);

static inline const char *error_message(const Error *err) {
    return err && err->message[0] ? err->message : "unknown error";
}
