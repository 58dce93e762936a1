/* fleet-spec.c: parsing of the fleet endpoints' bodies (fleet-spec.h). */
#include "server/fleet-spec.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

static json_t *load_object(const char *text, size_t len, Error *err) {
    json_error_t je;
    json_t *j = len ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &je) : json_object();
    if (!j) {
        error_set(err, -EINVAL, "The body is not JSON: %s (line %d, column %d).", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        error_set(err, -EINVAL, "The body must be a JSON object.");
        return NULL;
    }
    return j;
}

static bool only_fields(json_t *j, const char *const *fields, size_t n, const char **ret_bad) {
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        bool known = false;
        for (size_t i = 0; i < n; i++)
            known = known || STREQ(key, fields[i]);
        if (!known) {
            *ret_bad = key;
            return false;
        }
    }
    return true;
}

/* A string field that fits size-1 bytes; absent leaves buf untouched. */
static int get_str(json_t *j, const char *key, char *buf, size_t size, Error *err) {
    json_t *v = json_object_get(j, key);
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= size || strlen(json_string_value(v)) != json_string_length(v))
        return error_set(err, -EINVAL, "'%s' must be a string of at most %zu characters.", key, size - 1);
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

void fleet_heartbeat_done(FleetHeartbeat *h) {
    free(h->running);
    *h = (FleetHeartbeat){0};
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

bool fleet_heartbeat_runs(const FleetHeartbeat *h, uint64_t id) {
    return h->n_running && bsearch(&id, h->running, h->n_running, sizeof(uint64_t), cmp_u64);
}

int fleet_heartbeat_parse(const char *text, size_t len, FleetHeartbeat *ret, Error *err) {
    static const char *const fields[] = {"interval_s", "running"};
    const char *bad = NULL;
    json_t *j = load_object(text, len, err);
    if (!j)
        return -EINVAL;
    FleetHeartbeat h = {0};
    int r = 0;
    json_t *iv = json_object_get(j, "interval_s"), *run = json_object_get(j, "running");
    if (!only_fields(j, fields, ARRAY_SIZE(fields), &bad))
        r = error_set(err, -EINVAL, "A heartbeat has no field '%.64s' (interval_s, running).", bad);
    else if (iv && (!json_is_integer(iv) || json_integer_value(iv) < 1 ||
                    json_integer_value(iv) > FLEET_HEARTBEAT_MAX_S))
        r = error_set(err, -EINVAL, "'interval_s' must be a number of seconds from 1 to %d.", FLEET_HEARTBEAT_MAX_S);
    else if (run && !json_is_array(run))
        r = error_set(err, -EINVAL, "'running' must be a list of request ids.");
    if (r >= 0 && run) {
        h.has_running = true;
        h.running = calloc(json_array_size(run) + 1, sizeof(uint64_t));
        if (!h.running)
            r = error_set(err, -ENOMEM, "Out of memory.");
        size_t i;
        json_t *v;
        json_array_foreach(run, i, v) {
            uint64_t id;
            if (r < 0)
                break;
            if (json_is_integer(v) && json_integer_value(v) > 0)
                id = (uint64_t)json_integer_value(v);
            else if (!json_is_string(v) || parse_decimal_uint64(json_string_value(v), UINT64_MAX, &id) < 0 || !id) {
                r = error_set(err, -EINVAL, "'running' item %zu is not a request id.", i);
                break;
            }
            h.running[h.n_running++] = id;
        }
    }
    if (r >= 0 && h.n_running)
        qsort(h.running, h.n_running, sizeof(uint64_t), cmp_u64);
    if (r >= 0 && iv)
        h.interval_s = (unsigned)json_integer_value(iv);
    json_decref(j);
    if (r < 0) {
        fleet_heartbeat_done(&h);
        return r;
    }
    *ret = h;
    return 0;
}

int fleet_task_result_parse(const char *text, size_t len, FleetTaskResult *ret, Error *err) {
    static const char *const fields[] = {"ok", "message", "verdict", "progress"};
    const char *bad = NULL;
    json_t *j = load_object(text, len, err);
    if (!j)
        return -EINVAL;
    FleetTaskResult t = {0};
    int r = 0;
    json_t *ok = json_object_get(j, "ok");
    if (!only_fields(j, fields, ARRAY_SIZE(fields), &bad))
        r = error_set(err, -EINVAL, "A task result has no field '%.64s' (ok, message, verdict, progress).", bad);
    else if (json_object_get(j, "progress") && !json_is_boolean(json_object_get(j, "progress")))
        r = error_set(err, -EINVAL, "'progress' is true or false.");
    else if (!json_is_boolean(ok))
        r = error_set(err, -EINVAL, "A task result needs 'ok': true or false.");
    else if ((r = get_str(j, "message", t.message, sizeof(t.message), err)) >= 0 &&
             (r = get_str(j, "verdict", t.verdict, sizeof(t.verdict), err)) >= 0 && t.verdict[0] &&
             STRNEQ(t.verdict, "pass") && STRNEQ(t.verdict, "degraded") && STRNEQ(t.verdict, "fail"))
        r = error_set(err, -EINVAL, "'verdict' is pass, degraded or fail.");
    if (r >= 0) {
        t.ok = json_is_true(ok);
        t.progress = json_is_true(json_object_get(j, "progress"));
    }
    json_decref(j);
    if (r < 0)
        return r;
    *ret = t;
    return 0;
}

int fleet_mode_parse(const char *text, size_t len, FleetModeRequest *ret, Error *err) {
    static const char *const fields[] = {"mode", "drain", "gpu"};
    const char *bad = NULL;
    json_t *j = load_object(text, len, err);
    if (!j)
        return -EINVAL;
    FleetModeRequest m = {.drain = "none"};
    int r = 0;
    if (!only_fields(j, fields, ARRAY_SIZE(fields), &bad))
        r = error_set(err, -EINVAL, "A mode switch has no field '%.64s' (mode, drain, gpu).", bad);
    else if (!json_object_get(j, "mode"))
        r = error_set(err, -EINVAL, "A mode switch names the 'mode': container or vm-passthrough.");
    else if ((r = get_str(j, "mode", m.mode, sizeof(m.mode), err)) < 0 ||
             (r = get_str(j, "drain", m.drain, sizeof(m.drain), err)) < 0 ||
             (r = get_str(j, "gpu", m.gpu, sizeof(m.gpu), err)) < 0)
        ;
    else if (STREQ(m.mode, "vm-vgpu"))
        r = error_set(err, -EOPNOTSUPP, "vGPU is not offered (R2d): use vm-passthrough for VMs, or container "
                                        "for containers and MIG slices.");
    else if (STRNEQ(m.mode, "container") && STRNEQ(m.mode, "vm-passthrough"))
        r = error_set(err, -EINVAL, "Unknown mode '%.24s' (container or vm-passthrough).", m.mode);
    else if (STRNEQ(m.drain, "none") && STRNEQ(m.drain, "wait") && STRNEQ(m.drain, "evict"))
        r = error_set(err, -EINVAL, "Unknown drain '%.8s' (none, wait or evict).", m.drain);
    else if (json_object_get(j, "gpu") && !m.gpu[0])
        r = error_set(err, -EINVAL, "'gpu' names a GPU by index or PCI address.");
    json_decref(j);
    if (r < 0)
        return r;
    *ret = m;
    return 0;
}
