/* workload-end.c: parse an agent's "this workload ended" body (workload-end.h). */
#include "server/workload-end.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/json-cleanup.h"
#include "util/macro.h"

int workload_end_parse(const char *text, size_t len, WorkloadEnd *ret, Error *err) {
    json_error_t je;
    _cleanup_json_ json_t *j =
            len ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &je) : json_object();
    if (!j)
        return error_set(err, -EINVAL, "the body is not JSON: %s", je.text);
    WorkloadEnd e = {0};
    int r = 0;
    const char *key;
    json_t *v;
    if (!json_is_object(j))
        r = error_set(err, -EINVAL, "the body must be a JSON object");
    else
        json_object_foreach(j, key, v) {
            if (STREQ(key, "exit_code")) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                    json_integer_value(v) > 255) {
                    r = error_set(err, -EINVAL, "'exit_code' must be a whole number from 0 to 255");
                    break;
                }
                e.has_exit_code = true;
                e.exit_code = (int)json_integer_value(v);
            } else if (STREQ(key, "failed")) {
                if (!json_is_boolean(v)) {
                    r = error_set(err, -EINVAL, "'failed' must be true or false");
                    break;
                }
                e.failed = json_is_true(v);
            } else if (STREQ(key, "message")) {
                if (!json_is_string(v) || json_string_length(v) >= sizeof(e.message) ||
                    strlen(json_string_value(v)) != json_string_length(v)) {
                    r = error_set(err, -EINVAL,
                                  "'message' must be a text of at most %zu characters",
                                  sizeof(e.message) - 1);
                    break;
                }
                snprintf(e.message, sizeof(e.message), "%s", json_string_value(v));
            } else {
                r = error_set(err, -EINVAL,
                              "a workload end has no field '%.64s' (exit_code, failed, message)",
                              key);
                break;
            }
        }
    if (r >= 0 && !e.failed && !e.has_exit_code)
        r = error_set(err, -EINVAL,
                      "a workload that ran ends with an 'exit_code'; one that could not run has "
                      "'failed': true");
    if (r < 0)
        return r;
    *ret = e;
    return 0;
}

int workload_activate_parse(const char *text, size_t len, char url[WORKLOAD_URL_MAX], Error *err) {
    url[0] = 0;
    if (!len)
        return 0;
    json_error_t je;
    _cleanup_json_ json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return error_set(err, -EINVAL, "the body is not JSON: %s", je.text);
    const char *key;
    json_t *v;
    int r = json_is_object(j) ? 0 : error_set(err, -EINVAL, "the body must be a JSON object");
    json_object_foreach(j, key, v) {
        if (r < 0)
            break;
        if (STRNEQ(key, "url")) {
            r = error_set(err, -EINVAL, "an activation has no field '%.64s' (url)", key);
            break;
        }
        const char *s = json_string_value(v);
        bool ok = s && json_string_length(v) < WORKLOAD_URL_MAX &&
                  strlen(s) == json_string_length(v) &&
                  (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8)) &&
                  s[strcspn(s, "://") + 3];
        for (const char *p = s; ok && *p; p++)
            ok = (unsigned char)*p > 0x20 && *p != 0x7f;
        if (!ok) {
            r = error_set(err, -EINVAL,
                          "'url' must be an http(s) URL of at most %d characters without spaces",
                          WORKLOAD_URL_MAX - 1);
            break;
        }
        snprintf(url, WORKLOAD_URL_MAX, "%s", s);
    }
    return r;
}

void workload_end_reason(const WorkloadEnd *e, char *buf, size_t size) {
    if (e->failed)
        snprintf(buf, size, "failed: %s",
                 e->message[0] ? e->message : "the workload could not run");
    else if (e->message[0])
        snprintf(buf, size, "exited with code %d: %s", e->exit_code, e->message);
    else
        snprintf(buf, size, "exited with code %d", e->exit_code);
}
