/* placement.c: the placement and capacity row shapes (placement.h). */
#include "wire/placement.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "wire/json-text.h"
#include "util/macro.h"
#include "wire/decode.h"

void wire_placement_write(const Placement *p, const char *const *addresses, JsonText *b) {
    json_text_open(b, '{');
    json_text_member_string(b, "node", p->node);
    json_text_member_string(b, "class", p->class_name);
    json_text_member_string(b, "method", method_to_string(p->method));
    json_text_member_string(b, "container_runtime",
                            container_runtime_to_string(p->container_runtime));
    json_text_member_string(b, "endpoint_runtime", endpoint_runtime_to_string(p->endpoint_runtime));
    json_text_key(b, "devices");
    json_text_open(b, '[');
    for (unsigned i = 0; i < p->n_devices; i++)
        json_text_int(b, p->devices[i]);
    json_text_close(b, ']');
    json_text_key(b, "addresses");
    json_text_open(b, '[');
    for (unsigned i = 0; addresses && i < p->n_devices; i++)
        if (addresses[i])
            json_text_string(b, addresses[i]);
    json_text_close(b, ']');
    json_text_member_int(b, "fallback_index", p->fallback_index);
    if (p->method == METHOD_MIG) {
        json_text_member_int(b, "mig_start", p->mig_start);
        json_text_member_int(b, "mig_slots", p->mig_slots);
    }
    if (p->cpu_cores)
        json_text_member_int(b, "cpu_cores", p->cpu_cores);
    if (p->memory_gb)
        json_text_member_int(b, "memory_gb", p->memory_gb);
    json_text_close(b, '}');
}

json_t *wire_placement_to_json(const Placement *p, const char *const *addresses) {
    JsonText w = {.to_tree = true};
    wire_placement_write(p, addresses, &w);
    return json_text_take_tree(&w);
}

/* What the table decodes into; wire_placement_from_json resolves the names. */
typedef struct PlacementIn {
    char node[SCHED_ID_MAX];
    char cls[SCHED_ID_MAX];
    Method method;
    ContainerRuntime container_runtime;
    EndpointRuntime endpoint_runtime;
    Placement p;
} PlacementIn;

static_assert(sizeof(Method) == sizeof(int) && sizeof(ContainerRuntime) == sizeof(int) &&
                      sizeof(EndpointRuntime) == sizeof(int),
              "WIRE_ENUM stores an int");

static int method_parse(const char *s) {
    return (int)method_from_string(s);
}

static int container_runtime_parse(const char *s) {
    return (int)container_runtime_from_string(s);
}

static int endpoint_runtime_parse(const char *s) {
    return (int)endpoint_runtime_from_string(s);
}

static int decode_devices(json_t *devs, void *obj, Error *err) {
    PlacementIn *in = obj;
    if (!json_is_array(devs) || json_array_size(devs) > SCHED_NODE_MAX_DEVICES)
        return error_set(err, -EINVAL,
                         "field 'devices' must be a list of at most %d device indices",
                         SCHED_NODE_MAX_DEVICES);
    size_t i;
    json_t *v;
    json_array_foreach(devs, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= SCHED_NODE_MAX_DEVICES)
            return error_set(err, -EINVAL, "item %zu of 'devices' is not a device index", i);
        in->p.devices[in->p.n_devices++] = (unsigned)json_integer_value(v);
    }
    return 0;
}

static int decode_addresses(json_t *v, void *obj, Error *err) {
    if (!json_is_array(v))
        return error_set(err, -EINVAL, "field 'addresses' must be a list of PCI addresses");
    return 0; /* the node's devices say them again: nothing to keep */
}

static int decode_fallback_index(json_t *v, void *obj, Error *err) {
    PlacementIn *in = obj;
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) >= 64)
        return error_set(err, -EINVAL,
                         "field 'fallback_index' must be -1 or the index of a fallback");
    in->p.fallback_index = (int)json_integer_value(v);
    return 0;
}

/* Where the running workload answers, as its agent reported when it confirmed it (activate's
 * "url"): the server keeps it in the placement it stores, and a restore reads that placement
 * back, so the field is known here; the core's placement has no use for it. */
static int decode_url(json_t *v, void *obj, Error *err) {
    (void)obj;
    if (!json_is_string(v))
        return error_set(err, -EINVAL, "field 'url' must be a string");
    return 0;
}

static const WireField placement_fields[] = {
        WIRE_F_STRING(PlacementIn, "node", node, true),
        WIRE_F_STRING(PlacementIn, "class", cls, true),
        WIRE_F_ENUM(PlacementIn, "method", method, true, method_parse, "a placement method"),
        WIRE_F_ENUM(PlacementIn, "container_runtime", container_runtime, true,
                    container_runtime_parse, "none, runc or kata"),
        WIRE_F_ENUM(PlacementIn, "endpoint_runtime", endpoint_runtime, true, endpoint_runtime_parse,
                    "none, vllm, mlx or llama.cpp"),
        {.name = "devices", .type = WIRE_CUSTOM, .required = true, .decode = decode_devices},
        WIRE_F_CUSTOM("addresses", decode_addresses),
        WIRE_F_CUSTOM("fallback_index", decode_fallback_index),
        WIRE_F_CUSTOM("url", decode_url),
        WIRE_F_UINT(PlacementIn, "mig_start", p.mig_start, 0, 7),
        WIRE_F_UINT(PlacementIn, "mig_slots", p.mig_slots, 0, 8),
        WIRE_F_UINT(PlacementIn, "cpu_cores", p.cpu_cores, 0, 1u << 16),
        WIRE_F_UINT(PlacementIn, "memory_gb", p.memory_gb, 0, 1u << 20),
};

int wire_placement_from_json(const Catalog *cat, json_t *j, Placement *ret,
                             char node_buf[SCHED_ID_MAX], Error *err) {
    PlacementIn in = {.p.fallback_index = -1};
    int r = wire_decode(j, "a placement", placement_fields, ARRAY_SIZE(placement_fields), &in, err);
    if (r < 0)
        return r;
    Placement p = in.p;
    p.class_index = catalog_find_index(cat, in.cls);
    if (p.class_index < 0)
        return error_set(err, -EINVAL,
                         "a placement names class %.64s, which the catalog does not have", in.cls);
    p.class_name = cat->classes[p.class_index].name;
    p.method = in.method;
    p.container_runtime = in.container_runtime;
    p.endpoint_runtime = in.endpoint_runtime;
    strcpy(node_buf, in.node);
    p.node = node_buf;
    *ret = p;
    return 0;
}

json_t *wire_capacity_row_to_json(const CapacityRow *r) {
    json_t *j =
            json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "class", r->class_name, "mode",
                      capacity_mode_to_string(r->mode), "total", (json_int_t)r->total, "allocated",
                      (json_int_t)r->allocated, "free", (json_int_t)r->free, "cordoned",
                      (json_int_t)r->cordoned, "quarantined", (json_int_t)r->quarantined);
    if (!j)
        return NULL;
    json_object_set_new(j, "site", r->site ? json_string(r->site) : json_null());
    if (r->resource)
        json_object_set_new(j, "resource", json_string(r->resource));
    if (r->node_selector)
        json_object_set_new(j, "node_selector", json_string(r->node_selector));
    return j;
}
