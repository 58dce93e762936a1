/* task.c: the task shape (task.h). */
#include "wire/task.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "util/macro.h"
#include "util/name-table.h"
#include "wire/node.h"
#include "wire/pci-address.h"

static_assert(sizeof(TaskKind) == sizeof(int), "WIRE_ENUM stores an int");

NAME_TABLE(TaskKind, task_kind,
           _TASK_KIND_MAX, [TASK_BIND] = "bind", [TASK_RESET_CHECK] = "reset-check")

static int kind_parse(const char *s) {
    return (int)task_kind_from_string(s);
}

/* The ids and times are 64-bit: wider than WIRE_UINT. */
static int decode_id(json_t *v, void *obj, Error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 1)
        return error_set(err, -EINVAL, "field 'id' must be a positive integer");
    ((Task *)obj)->id = (uint64_t)json_integer_value(v);
    return 0;
}

static int decode_created(json_t *v, void *obj, Error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return error_set(err, -EINVAL, "field 'created_ms' must be an integer from 0");
    ((Task *)obj)->created_ms = json_integer_value(v);
    return 0;
}

static const WireField task_fields[] = {
        {.name = "id", .type = WIRE_CUSTOM, .required = true, .decode = decode_id},
        WIRE_F_STRING(Task, "node", node, true),
        WIRE_F_ENUM(Task, "kind", kind, true, kind_parse, "bind or reset-check"),
        WIRE_F_UINT(Task, "device", dev, 0, SPEC_MAX_DEVICES - 1),
        WIRE_F_STRING(Task, "gpu", gpu, true),
        WIRE_F_STRING(Task, "target", target, false),
        {.name = "created_ms", .type = WIRE_CUSTOM, .required = true, .decode = decode_created},
};

int wire_task_from_json(json_t *j, Task *ret, uint64_t *ret_id, Error *err) {
    Task t = {0};
    /* The id first, so that a task refused for another field can still be answered. */
    json_t *id = json_object_get(j, "id");
    uint64_t known = json_is_integer(id) && json_integer_value(id) > 0
                             ? (uint64_t)json_integer_value(id)
                             : 0;
    int r = wire_decode(j, "a task", task_fields, ARRAY_SIZE(task_fields), &t, err);
    if (r >= 0 && !wire_name_is_valid(t.node))
        r = error_set(err, -EINVAL, "field 'node' is not a valid node name");
    if (r >= 0 && t.gpu[0] && !pci_bdf_is_valid(t.gpu))
        r = error_set(err, -EINVAL, "field 'gpu' is not a PCI address: '%.32s'", t.gpu);
    if (r >= 0 && t.kind == TASK_BIND && !STREQ(t.target, "vfio") && !STREQ(t.target, "host"))
        r = error_set(err, -EINVAL, "a bind task's 'target' must be vfio or host");
    if (r >= 0 && t.kind != TASK_BIND && t.target[0])
        r = error_set(err, -EINVAL, "field 'target' applies to bind tasks only");
    if (ret_id)
        *ret_id = r < 0 ? known : t.id;
    if (r < 0)
        return r;
    *ret = t;
    return 0;
}

json_t *wire_task_to_json(const Task *t) {
    json_t *j = json_pack("{s:I, s:s, s:s, s:i, s:s, s:I}", "id", (json_int_t)t->id, "node",
                          t->node, "kind", task_kind_to_string(t->kind), "device", (int)t->dev,
                          "gpu", t->gpu, "created_ms", (json_int_t)t->created_ms);
    if (j && t->target[0])
        json_object_set_new(j, "target", json_string(t->target));
    return j;
}
