/* error.c: first-failure-wins error recording. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_printf_(4, 0) static int error_vset(Error *err, int code, const char *prefix, const char *fmt,
                                     va_list ap) {
    if (!err || err->code != 0)
        return code;
    err->code = code;
    size_t n = 0;
    if (prefix) {
        n = strlen(prefix);
        if (n >= sizeof(err->message))
            n = sizeof(err->message) - 1;
        memcpy(err->message, prefix, n);
    }
    vsnprintf(err->message + n, sizeof(err->message) - n, fmt, ap);
    return code;
}

int(error_set)(Error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, NULL, fmt, ap);
    va_end(ap);
    return code;
}

int(error_set_at)(Error *err, int code, const char *file, unsigned line, unsigned column,
                  const char *fmt, ...) {
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "%s:%u:%u: ", file ? file : "<input>", line, column);
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, prefix, fmt, ap);
    va_end(ap);
    return code;
}

void error_clear(Error *err) {
    if (!err)
        return;
    err->code = 0;
    err->message[0] = '\0';
}
