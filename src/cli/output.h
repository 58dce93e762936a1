/* output.h: shared CLI edges: JSON printing and error reporting. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

/* CLOCK_MONOTONIC in ms: the deadlines of --timeout. */
int64_t cli_monotonic_ms(void);

/* Print JSON (pretty, sorted keys stable as inserted) followed by a newline; frees j. */
int print_json(json_t *j);
/* Every string of j with its control bytes as '?': server text (a cordon's reason, an event's)
 * printed as text never moves the cursor nor starts an escape sequence on a terminal (JSON
 * output escapes them instead). Returns j. */
json_t *json_mask_control(json_t *j);

/* "einsora: <message>" on stderr; returns the given exit code. */
int fail(int exit_code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int fail_error(int exit_code, const Error *err);

/* `-o FORMAT` on a verb that prints one object: json sets *json, table is the default;
 * anything else is a usage error (printed; its exit code returned). 0 when taken. */
int output_one_object(const char *format, bool *json);

/* A file holding a secret (a token) that others may read: warned about on stderr, as ssh
 * and kubectl do, naming the chmod that fixes it; the command goes on. */
void warn_if_others_can_read(const char *path, const char *what);

/* "1 node", "2 nodes": the word for n (no "node(s)"). */
static inline const char *plural(long long n, const char *one, const char *many) {
    return n == 1 ? one : many;
}
