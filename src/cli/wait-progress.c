/* wait-progress.c: the status line of a wait on a terminal (no I/O, no clock: the caller
 * passes the time, so it is tested as a pure function). */
#include "wait-progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *wait_format_duration(int64_t ms, char *buf, size_t size) {
    /* Rounded up: "opens in 0s" would read as open while it is not yet. */
    int64_t s = ms <= 0 ? 0 : (ms + 999) / 1000;
    if (s < 60)
        snprintf(buf, size, "%" PRId64 "s", s);
    else if (s < 3600)
        snprintf(buf, size, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else
        snprintf(buf, size, "%" PRId64 "h%02" PRId64 "m", s / 3600, s / 60 % 60);
    return buf;
}

const char *wait_progress_line(json_t *q, int64_t now_ms, size_t width, char *buf, size_t size) {
    if (!size)
        return buf;
    const char *state = json_string_value(json_object_get(q, "state"));
    const char *reason = json_string_value(json_object_get(q, "reason"));
    json_t *pos = json_object_get(q, "queue_position"), *at = json_object_get(q, "fallback_at_ms");
    size_t len = (size_t)snprintf(buf, size, "request %" PRId64 ": %s",
                                  (int64_t)json_integer_value(json_object_get(q, "id")),
                                  state ? state : "?");
    if (json_is_integer(pos) && len < size)
        len += (size_t)snprintf(buf + len, size - len, " [queue position %" PRId64 "]",
                                (int64_t)json_integer_value(pos));
    if (json_is_integer(at) && len < size) {
        int64_t left = (int64_t)json_integer_value(at) - now_ms;
        char d[32];
        if (left > 0)
            len += (size_t)snprintf(buf + len, size - len, " fallback opens in %s",
                                    wait_format_duration(left, d, sizeof(d)));
        else
            len += (size_t)snprintf(buf + len, size - len, " fallback open");
    }
    if (reason && reason[0] && len < size)
        len += (size_t)snprintf(buf + len, size - len, ": %s", reason);
    if (len >= size)
        len = size - 1;
    /* A line longer than the terminal would wrap, and \r would then redraw only its end.
     * Bytes are counted as columns (a UTF-8 character is never wider than its bytes), and the
     * cut never splits a character. */
    if (width >= 4 && len > width - 1) {
        size_t cut = width - 4;
        while (cut > 0 && ((unsigned char)buf[cut] & 0xC0) == 0x80)
            cut--;
        memcpy(buf + cut, "...", 4);
    }
    return buf;
}
