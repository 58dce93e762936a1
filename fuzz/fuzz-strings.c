/* fuzz-strings.c: libFuzzer target for the string parsers of the server's input: decimal-only
 * numbers, durations, and making text valid UTF-8. Each either refuses or returns a value
 * that spells back to its input; valid UTF-8 stays byte for byte what it was. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/strutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    uint64_t v;
    if (parse_decimal_uint64(s, UINT64_MAX, &v) == 0) {
        char back[32];
        snprintf(back, sizeof(back), "%llu", (unsigned long long)v);
        if (strcmp(back, s) != 0)
            abort(); /* one spelling per number */
    }
    int64_t ms;
    if (parse_duration_ms(s, INT64_MAX, &ms) == 0 && ms < 0)
        abort();
    char *copy = strdup(s);
    if (copy) {
        utf8_make_valid(copy);
        if (strlen(copy) != strlen(s))
            abort(); /* bytes are replaced, never dropped */
        /* Idempotent: valid stays as it is. */
        char *again = strdup(copy);
        if (again && strcmp(utf8_make_valid(again), copy) != 0)
            abort();
        free(again);
        free(copy);
    }
    free(s);
    return 0;
}
