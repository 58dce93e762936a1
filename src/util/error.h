/* error.h: negative-errno returns paired with a human sentence the caller can show. */
#pragma once

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

void error_clear(Error *err);

static inline const char *error_message(const Error *err) {
    return err && err->message[0] ? err->message : "unknown error";
}
