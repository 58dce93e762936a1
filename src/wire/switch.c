/* switch.c: the mode switch's shape (switch.h). */
#include "wire/switch.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "util/macro.h"
#include "util/name-table.h"
#include "wire/decode.h"

static_assert(sizeof(SwitchStep) == sizeof(int) && sizeof(DrainMode) == sizeof(int),
              "WIRE_ENUM stores an int");

NAME_TABLE(SwitchStep, switch_step, _SW_STEP_MAX, [SW_CORDON] = "cordon", [SW_DRAIN] = "drain",
           [SW_REBIND] = "rebind", [SW_VERIFY] = "verify", [SW_UNCORDON] = "uncordon",
           [SW_DONE] = "done", [SW_FAILED] = "failed")
NAME_TABLE(DrainMode, drain_mode,
           _DRAIN_MAX, [DRAIN_NONE] = "none", [DRAIN_WAIT] = "wait", [DRAIN_EVICT] = "evict")

json_t *wire_switch_to_json(const NodeSwitch *sw) {
    json_t *tasks = json_array();
    for (size_t i = 0; i < sw->n_tasks; i++)
        json_array_append_new(tasks, json_pack("{s:I, s:b, s:b}", "id", (json_int_t)sw->tasks[i],
                                               "done", sw->task_done[i], "ok", sw->task_ok[i]));
    return json_pack("{s:s, s:s, s:i, s:s, s:b, s:I, s:I, s:s, s:o}", "mode", sw->mode, "drain",
                     drain_mode_to_string(sw->drain), "gpu", sw->gpu, "step",
                     switch_step_to_string(sw->step), "was_cordoned", sw->was_cordoned,
                     "started_ms", (json_int_t)sw->started_ms, "updated_ms",
                     (json_int_t)sw->updated_ms, "message", sw->message, "tasks", tasks);
}

static int step_parse(const char *s) {
    return (int)switch_step_from_string(s);
}

static int drain_parse(const char *s) {
    return (int)drain_mode_from_string(s);
}

static int get_ms(json_t *v, const char *name, int64_t *ret, Error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return error_set(err, -EINVAL, "field '%s' must be an integer from 0", name);
    *ret = json_integer_value(v);
    return 0;
}

static int decode_started(json_t *v, void *obj, Error *err) {
    return get_ms(v, "started_ms", &((NodeSwitch *)obj)->started_ms, err);
}

static int decode_updated(json_t *v, void *obj, Error *err) {
    return get_ms(v, "updated_ms", &((NodeSwitch *)obj)->updated_ms, err);
}

/* -1 (the whole node) or a device index: wider than WIRE_UINT takes. */
static int decode_gpu(json_t *v, void *obj, Error *err) {
    json_int_t g = json_integer_value(v);
    if (!json_is_integer(v) || g < -1 || g >= SPEC_MAX_DEVICES)
        return error_set(err, -EINVAL,
                         "field 'gpu' must be -1 (every GPU) or a device index from 0 to %d",
                         SPEC_MAX_DEVICES - 1);
    ((NodeSwitch *)obj)->gpu = (int)g;
    return 0;
}

typedef struct SwitchTaskIn {
    uint64_t id;
    bool done, ok;
} SwitchTaskIn;

static int decode_task_id(json_t *v, void *obj, Error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return error_set(err, -EINVAL, "field 'id' of a switch's task must be a positive integer");
    ((SwitchTaskIn *)obj)->id = (uint64_t)json_integer_value(v);
    return 0;
}

static const WireField task_fields[] = {
        {.name = "id", .type = WIRE_CUSTOM, .required = true, .decode = decode_task_id},
        {.name = "done", .type = WIRE_BOOL, .required = true, WIRE_MEMBER(SwitchTaskIn, done)},
        {.name = "ok", .type = WIRE_BOOL, .required = true, WIRE_MEMBER(SwitchTaskIn, ok)},
};

static int decode_tasks(json_t *v, void *obj, Error *err) {
    NodeSwitch *sw = obj;
    if (!json_is_array(v) || json_array_size(v) > SPEC_MAX_DEVICES)
        return error_set(err, -EINVAL, "field 'tasks' must be a list of at most %d tasks",
                         SPEC_MAX_DEVICES);
    size_t i;
    json_t *t;
    json_array_foreach(v, i, t) {
        SwitchTaskIn in = {0};
        int r = wire_decode(t, "a switch's task", task_fields, ARRAY_SIZE(task_fields), &in, err);
        if (r < 0)
            return r;
        sw->tasks[i] = in.id;
        sw->task_done[i] = in.done;
        sw->task_ok[i] = in.ok;
    }
    sw->n_tasks = json_array_size(v);
    return 0;
}

static const WireField switch_fields[] = {
        WIRE_F_STRING(NodeSwitch, "mode", mode, true),
        WIRE_F_ENUM(NodeSwitch, "drain", drain, true, drain_parse, "none, wait or evict"),
        {.name = "gpu", .type = WIRE_CUSTOM, .required = true, .decode = decode_gpu},
        WIRE_F_ENUM(NodeSwitch, "step", step, true, step_parse,
                    "cordon, drain, rebind, verify, uncordon, done or failed"),
        {.name = "was_cordoned",
         .type = WIRE_BOOL,
         .required = true,
         WIRE_MEMBER(NodeSwitch, was_cordoned)},
        {.name = "started_ms", .type = WIRE_CUSTOM, .required = true, .decode = decode_started},
        {.name = "updated_ms", .type = WIRE_CUSTOM, .required = true, .decode = decode_updated},
        WIRE_F_STRING(NodeSwitch, "message", message, true),
        {.name = "tasks", .type = WIRE_CUSTOM, .required = true, .decode = decode_tasks},
};

int wire_switch_from_json(json_t *j, NodeSwitch *ret, Error *err) {
    NodeSwitch sw = {.gpu = -1};
    int r = wire_decode(j, "a mode switch", switch_fields, ARRAY_SIZE(switch_fields), &sw, err);
    if (r < 0)
        return r;
    if (!STREQ(sw.mode, "container") && !STREQ(sw.mode, "vm-passthrough"))
        return error_set(err, -EINVAL,
                         "field 'mode' must be container or vm-passthrough, not '%.24s'", sw.mode);
    *ret = sw;
    return 0;
}
