/* watch-event.c: watch-stream lines and the RBAC words of a request. */
#include "watch-event.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"

static const char *const types[_K8S_EVENT_MAX] = {
        [K8S_ADDED] = "ADDED",       [K8S_MODIFIED] = "MODIFIED", [K8S_DELETED] = "DELETED",
        [K8S_BOOKMARK] = "BOOKMARK", [K8S_ERROR] = "ERROR",
};

const char *k8s_event_type_to_string(K8sEventType t) {
    return t < _K8S_EVENT_MAX ? types[t] : NULL;
}

void k8s_event_done(K8sEvent *e) {
    if (!e)
        return;
    json_decref(e->object);
    *e = (K8sEvent){0};
}

int k8s_watch_event_parse(const char *text, size_t len, K8sEvent *ret, Error *err) {
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return error_set(err, -EINVAL, "a watch event is not JSON: %s", je.text);
    const char *type = NULL;
    json_t *obj = NULL;
    if (json_unpack(j, "{s:s, s:o}", "type", &type, "object", &obj) < 0 || !json_is_object(obj)) {
        json_decref(j);
        return error_set(err, -EINVAL, "a watch event must be {\"type\": ..., \"object\": {...}}");
    }
    K8sEvent e = {.type = _K8S_EVENT_MAX};
    for (K8sEventType t = 0; t < _K8S_EVENT_MAX; t++)
        if (STREQ(type, types[t]))
            e.type = t;
    if (e.type == _K8S_EVENT_MAX) {
        int r = error_set(err, -EINVAL, "unknown watch event type '%.32s'", type);
        json_decref(j);
        return r;
    }
    if (e.type == K8S_ERROR) {
        json_t *code = json_object_get(obj, "code");
        if (!json_is_integer(code)) {
            json_decref(j);
            return error_set(err, -EINVAL, "a watch ERROR event must carry a Status with a code");
        }
        e.code = (long)json_integer_value(code);
        e.message = json_string_value(json_object_get(obj, "message"));
    } else {
        json_t *md = json_object_get(obj, "metadata");
        e.resource_version = json_string_value(json_object_get(md, "resourceVersion"));
        e.name = json_string_value(json_object_get(md, "name"));
        if (!e.resource_version || !*e.resource_version ||
            (e.type != K8S_BOOKMARK && (!e.name || !*e.name))) {
            /* the sentence first: type points into j */
            int r = error_set(err, -EINVAL, "a watch %s event's object has no metadata.%s", type,
                              e.resource_version && *e.resource_version ? "name"
                                                                        : "resourceVersion");
            json_decref(j);
            return r;
        }
        if (e.type == K8S_BOOKMARK)
            e.name = NULL;
    }
    e.object = json_incref(obj);
    json_decref(j);
    *ret = e;
    return 0;
}

static size_t split(const char *path, char seg[8][256]) {
    size_t n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p && *p != '?' && n < 8) {
        size_t k = strcspn(p, "/?");
        snprintf(seg[n++], 256, "%.*s", (int)MIN(k, 255u), p);
        p += k;
        while (*p == '/')
            p++;
    }
    return n;
}

void k8s_describe_access(const char *method, const char *path, K8sAccess *ret) {
    K8sAccess a = {0};
    char seg[8][256];
    size_t n = split(path, seg), i;
    const char *query = strchr(path, '?');
    if (n >= 2 && STREQ(seg[0], "api"))
        i = 2;
    else if (n >= 3 && STREQ(seg[0], "apis")) {
        snprintf(a.group, sizeof(a.group), "%.95s", seg[1]);
        i = 3;
    } else {
        snprintf(a.verb, sizeof(a.verb), "request");
        snprintf(a.resource, sizeof(a.resource), "%.95s", path);
        *ret = a;
        return;
    }
    if (n >= i + 3 && STREQ(seg[i], "namespaces"))
        i += 2; /* a namespaced resource: namespaces/NS/RESOURCE... */
    const char *resource = i < n ? seg[i] : "", *name = i + 1 < n ? seg[i + 1] : "",
               *sub = i + 2 < n ? seg[i + 2] : NULL;
    if (sub)
        snprintf(a.resource, sizeof(a.resource), "%.40s/%.40s", resource, sub);
    else
        snprintf(a.resource, sizeof(a.resource), "%.90s", resource);
    snprintf(a.name, sizeof(a.name), "%.200s", name);
    bool watch = query && (strstr(query, "watch=1") || strstr(query, "watch=true"));
    const char *verb = STREQ(method, "GET")      ? (watch   ? "watch"
                                                    : *name ? "get"
                                                            : "list")
                       : STREQ(method, "POST")   ? "create"
                       : STREQ(method, "PUT")    ? "update"
                       : STREQ(method, "PATCH")  ? "patch"
                       : STREQ(method, "DELETE") ? (*name ? "delete" : "deletecollection")
                                                 : "request";
    snprintf(a.verb, sizeof(a.verb), "%s", verb);
    *ret = a;
}
