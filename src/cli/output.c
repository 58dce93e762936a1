/* output.c: shared CLI edges: JSON printing, error reporting, the clock of deadlines. */
#include "output.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/strutil.h"
#include "verbs.h"

json_t *json_mask_control(json_t *j) {
    const char *key;
    size_t i;
    json_t *v;
    if (json_is_object(j))
        json_object_foreach(j, key, v) json_mask_control(v);
    else if (json_is_array(j))
        json_array_foreach(j, i, v) json_mask_control(v);
    else if (json_is_string(j) && string_has_control(json_string_value(j))) {
        char *copy = strdup(json_string_value(j));
        if (copy)
            json_string_set(j, string_mask_control(copy));
        free(copy);
    }
    return j;
}

int print_json(json_t *j) {
    if (!j)
        return fail(EXIT_FAIL, "out of memory");
    int r = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(j);
    return r < 0 ? EXIT_FAIL : EXIT_OK;
}

int output_one_object(const char *format, bool *json) {
    if (strcmp(format, "json") == 0)
        *json = true;
    else if (strcmp(format, "table") != 0)
        return fail(EXIT_USAGE, "-o takes json or table here, not '%s'", format);
    return 0;
}

int fail(int exit_code, const char *fmt, ...) {
    va_list ap;
    fputs("einsora: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return exit_code;
}

int fail_error(int exit_code, const Error *err) {
    return fail(exit_code, "%s", error_message(err));
}

int64_t cli_monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void warn_if_others_can_read(const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & (S_IRGRP | S_IROTH)))
        fprintf(stderr, "einsora: warning: %s %s can be read by others (mode %04o): chmod 600 %s\n",
                what, path, (unsigned)(st.st_mode & 07777), path);
}
