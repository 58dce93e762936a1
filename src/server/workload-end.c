/* workload-end.c: parse the bodies an agent sends about a workload: its end, its activation,
 * several activations at once (workload-end.h). */
#include "server/workload-end.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/json-cleanup.h"
#include "util/macro.h"
#include "util/strutil.h"

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
    if (r >= 0 && e.failed == e.has_exit_code)
        r = error_set(err, -EINVAL,
                      "a workload that ran ends with an 'exit_code'; one that could not run has "
                      "'failed': true (one of the two, not both)");
    if (r < 0)
        return r;
    *ret = e;
    return 0;
}

/* An activation's url member: an http(s) URL without spaces or controls, into url. */
static int url_parse(json_t *v, char url[WORKLOAD_URL_MAX], Error *err) {
    const char *s = json_string_value(v);
    bool ok = s && json_string_length(v) < WORKLOAD_URL_MAX && strlen(s) == json_string_length(v) &&
              (!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8)) && s[strcspn(s, "://") + 3];
    for (const char *p = s; ok && *p; p++)
        ok = (unsigned char)*p > 0x20 && *p != 0x7f;
    if (!ok)
        return error_set(err, -EINVAL,
                         "'url' must be an http(s) URL of at most %d characters without spaces",
                         WORKLOAD_URL_MAX - 1);
    snprintf(url, WORKLOAD_URL_MAX, "%s", s);
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
        if (STRNEQ(key, "url"))
            r = error_set(err, -EINVAL, "an activation has no field '%.64s' (url)", key);
        else
            r = url_parse(v, url, err);
    }
    return r;
}

/* One item of a batch: {"id": "12", "url": ...}; the id a positive decimal string. */
static int batch_item_parse(json_t *item, size_t i, WorkloadActivation *ret, Error *err) {
    if (!json_is_object(item))
        return error_set(err, -EINVAL,
                         "requests[%zu] must be an object {\"id\": ..., \"url\": ...}", i);
    *ret = (WorkloadActivation){0};
    bool has_id = false;
    const char *key;
    json_t *v;
    json_object_foreach(item, key, v) {
        if (STREQ(key, "id")) {
            const char *s = json_string_value(v);
            if (!s || strlen(s) != json_string_length(v) ||
                parse_decimal_uint64(s, UINT64_MAX, &ret->id) < 0 || ret->id == 0)
                return error_set(err, -EINVAL,
                                 "requests[%zu].id must be a request id (a positive number, as "
                                 "a string)",
                                 i);
            has_id = true;
        } else if (STREQ(key, "url")) {
            Error uerr = {0};
            if (url_parse(v, ret->url, &uerr) < 0)
                return error_set(err, -EINVAL, "requests[%zu]: %s", i, error_message(&uerr));
        } else
            return error_set(err, -EINVAL, "requests[%zu] has no field '%.64s' (id, url)", i, key);
    }
    if (!has_id)
        return error_set(err, -EINVAL, "requests[%zu] has no id", i);
    return 0;
}

int workload_activate_batch_parse(const char *text, size_t len, WorkloadActivations *ret,
                                  Error *err) {
    json_error_t je;
    _cleanup_json_ json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return error_set(err, -EINVAL, "the body is not JSON: %s", je.text);
    json_t *list = json_object_get(j, "requests");
    if (!json_is_object(j) || json_object_size(j) != 1 || !json_is_array(list))
        return error_set(err, -EINVAL, "the body must be {\"requests\": [{\"id\": ...}, ...]}");
    size_t n = json_array_size(list);
    if (n == 0 || n > WORKLOAD_ACTIVATE_BATCH_MAX)
        return error_set(err, -EINVAL, "'requests' must list 1 to %d activations, not %zu",
                         WORKLOAD_ACTIVATE_BATCH_MAX, n);
    ret->n = 0;
    for (size_t i = 0; i < n; i++) {
        int r = batch_item_parse(json_array_get(list, i), i, &ret->items[i], err);
        if (r < 0)
            return r;
        for (size_t k = 0; k < i; k++)
            if (ret->items[k].id == ret->items[i].id)
                return error_set(err, -EINVAL, "request %" PRIu64 " is listed twice",
                                 ret->items[i].id);
    }
    ret->n = n;
    return 0;
}

void workload_end_reason(const WorkloadEnd *e, char *buf, size_t size) {
    char text[sizeof(e->message) + 64];
    if (e->failed)
        snprintf(text, sizeof(text), "failed: %s",
                 e->message[0] ? e->message : "the workload could not run");
    else if (e->message[0])
        snprintf(text, sizeof(text), "exited with code %d: %s", e->exit_code, e->message);
    else
        snprintf(text, sizeof(text), "exited with code %d", e->exit_code);
    str_copy_cut_utf8(buf, size, text); /* never inside a character: the reason is JSON */
}
