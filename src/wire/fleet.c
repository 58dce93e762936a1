/* fleet.c: the fleet endpoints' bodies (fleet.h), on the strict decoder (decode.h). */
#include "wire/fleet.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"
#include "wire/decode.h"

/* An empty body is an empty object. */
static json_t *load_object(const char *text, size_t len, Error *err) {
    json_t *j = NULL;
    if (!len)
        return json_object();
    if (wire_parse_text(text, len, &j, err) < 0)
        return NULL;
    return j;
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

static int decode_running(json_t *run, void *obj, Error *err) {
    FleetHeartbeat *h = obj;
    if (!json_is_array(run))
        return error_set(err, -EINVAL, "'running' must be a list of request ids");
    h->has_running = true;
    h->running = calloc(json_array_size(run) + 1, sizeof(uint64_t));
    if (!h->running)
        return error_set(err, -ENOMEM, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(run, i, v) {
        uint64_t id;
        if (json_is_integer(v) && json_integer_value(v) > 0)
            id = (uint64_t)json_integer_value(v);
        else if (!json_is_string(v) ||
                 parse_decimal_uint64(json_string_value(v), UINT64_MAX, &id) < 0 || !id)
            return error_set(err, -EINVAL, "'running' item %zu is not a request id", i);
        h->running[h->n_running++] = id;
    }
    qsort(h->running, h->n_running, sizeof(uint64_t), cmp_u64);
    return 0;
}

static const WireField heartbeat_fields[] = {
        WIRE_F_UINT(FleetHeartbeat, "interval_s", interval_s, 1, FLEET_HEARTBEAT_MAX_S),
        WIRE_F_CUSTOM("running", decode_running),
};

int fleet_heartbeat_parse(const char *text, size_t len, FleetHeartbeat *ret, Error *err) {
    json_t *j = load_object(text, len, err);
    if (!j)
        return -EINVAL;
    FleetHeartbeat h = {0};
    int r = wire_decode(j, "a heartbeat", heartbeat_fields, ARRAY_SIZE(heartbeat_fields), &h, err);
    json_decref(j);
    if (r < 0) {
        fleet_heartbeat_done(&h);
        return r;
    }
    *ret = h;
    return 0;
}

static const WireField task_result_fields[] = {
        {.name = "ok", .type = WIRE_BOOL, .required = true, WIRE_MEMBER(FleetTaskResult, ok)},
        WIRE_F_STRING(FleetTaskResult, "message", message, false),
        WIRE_F_STRING(FleetTaskResult, "verdict", verdict, false),
        WIRE_F_BOOL(FleetTaskResult, "progress", progress),
        WIRE_F_BOOL(FleetTaskResult, "unchanged", unchanged),
};

int fleet_task_result_parse(const char *text, size_t len, FleetTaskResult *ret, Error *err) {
    json_t *j = load_object(text, len, err);
    if (!j)
        return -EINVAL;
    FleetTaskResult t = {0};
    int r = wire_decode(j, "a task result", task_result_fields, ARRAY_SIZE(task_result_fields), &t,
                        err);
    json_decref(j);
    if (r < 0)
        return r;
    if (t.verdict[0] && STRNEQ(t.verdict, "pass") && STRNEQ(t.verdict, "degraded") &&
        STRNEQ(t.verdict, "fail"))
        return error_set(err, -EINVAL, "'verdict' is pass, degraded or fail");
    *ret = t;
    return 0;
}

static const WireField mode_fields[] = {
        WIRE_F_STRING(FleetModeRequest, "mode", mode, false),
        WIRE_F_STRING(FleetModeRequest, "drain", drain, false),
        WIRE_F_STRING(FleetModeRequest, "gpu", gpu, false),
};

int fleet_mode_parse(const char *text, size_t len, FleetModeRequest *ret, Error *err) {
    json_t *j = load_object(text, len, err);
    if (!j)
        return -EINVAL;
    FleetModeRequest m = {.drain = "none"};
    int r = wire_decode(j, "a mode switch", mode_fields, ARRAY_SIZE(mode_fields), &m, err);
    bool has_gpu = r >= 0 && json_object_get(j, "gpu");
    json_decref(j);
    if (r < 0)
        return r;
    if (!m.mode[0])
        return error_set(err, -EINVAL,
                         "a mode switch names the 'mode': container or vm-passthrough");
    if (STREQ(m.mode, "vm-vgpu"))
        return error_set(err, -EOPNOTSUPP,
                         "vGPU is not offered (R2d): use vm-passthrough for VMs, or container "
                         "for containers and MIG slices");
    if (STRNEQ(m.mode, "container") && STRNEQ(m.mode, "vm-passthrough"))
        return error_set(err, -EINVAL, "unknown mode '%.24s' (container or vm-passthrough)",
                         m.mode);
    if (STRNEQ(m.drain, "none") && STRNEQ(m.drain, "wait") && STRNEQ(m.drain, "evict"))
        return error_set(err, -EINVAL, "unknown drain '%.8s' (none, wait or evict)", m.drain);
    if (has_gpu && !m.gpu[0])
        return error_set(err, -EINVAL, "'gpu' names a GPU by index or PCI address");
    *ret = m;
    return 0;
}

json_t *fleet_workload_end_body(bool failed, int exit_code, const char *message) {
    char text[WORKLOAD_END_MESSAGE_MAX + 1];
    str_copy_cut_utf8(text, sizeof(text), message ? message : ""); /* an engine's bytes */
    json_t *body = json_pack("{s:b, s:s}", "failed", failed, "message", text);
    if (body && !failed && json_object_set_new(body, "exit_code", json_integer(exit_code)) < 0) {
        json_decref(body);
        return NULL;
    }
    return body;
}
