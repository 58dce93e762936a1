/* spec.c: strict JSON -> ApiRequest / ApiNode, and back. */
#include "spec.h"

#include <errno.h>
#include <string.h>

#include "util/macro.h"

static const char *const api_kinds[_WORK_MAX] = {
        [WORK_VM] = "vm", [WORK_CONTAINER] = "container", [WORK_NOTEBOOK] = "notebook",
        [WORK_ENDPOINT] = "endpoint"};

const char *api_kind_to_string(ApiKind k) {
    return k < _WORK_MAX ? api_kinds[k] : NULL;
}

bool spec_name_is_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= SPEC_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

/* Every object is checked against the list of the fields it may have, so a misspelt field
 * is an error rather than ignored. */
static int check_fields(json_t *obj, const char *what, const char *const *allowed, Error *err) {
    if (!json_is_object(obj))
        return error_set(err, -EINVAL, "%s must be a JSON object.", what);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = STREQ(key, allowed[i]);
        if (!ok) {
            if (STREQ(key, "user"))
                return error_set(err, -EINVAL,
                                 "Field 'user' is not accepted in %s: the user is the token's.", what);
            return error_set(err, -EINVAL, "Unknown field '%.64s' in %s.", key, what);
        }
    }
    return 0;
}

static int get_string(json_t *obj, const char *key, bool required, char *buf, size_t size,
                      Error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return error_set(err, -EINVAL, "Field '%s' is required.", key);
        return 0;
    }
    if (!json_is_string(v))
        return error_set(err, -EINVAL, "Field '%s' must be a string.", key);
    const char *s = json_string_value(v);
    if (strlen(s) >= size || strlen(s) != json_string_length(v))
        return error_set(err, -EINVAL, "Field '%s' is too long or holds a NUL byte.", key);
    memcpy(buf, s, strlen(s) + 1);
    return 1;
}

static int get_uint(json_t *obj, const char *key, unsigned min, unsigned max, unsigned *ret,
                    Error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v))
        return error_set(err, -EINVAL, "Field '%s' must be an integer.", key);
    json_int_t i = json_integer_value(v);
    if (i < (json_int_t)min || i > (json_int_t)max)
        return error_set(err, -ERANGE, "Field '%s' must be between %u and %u.", key, min, max);
    *ret = (unsigned)i;
    return 1;
}

static int get_bool(json_t *obj, const char *key, bool *ret, Error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return error_set(err, -EINVAL, "Field '%s' must be true or false.", key);
    *ret = json_is_true(v);
    return 1;
}

/* "command" (arguments) or "env" (KEY=VALUE items): a list of 1 to 64 texts, kept as its
 * compact JSON text. */
static int get_strv(json_t *obj, const char *key, bool kv, char *buf, size_t size, Error *err) {
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > 64)
        return error_set(err, -EINVAL, "Field '%s' must be a list of 1 to 64 texts.", key);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        const char *s = json_string_value(a);
        if (!s || strlen(s) != json_string_length(a) || (kv && (!strchr(s, '=') || s[0] == '=')))
            return error_set(err, -EINVAL, "Item %zu of '%s' is not a text%s.", i, key, kv ? " KEY=VALUE" : "");
    }
    char *text = json_dumps(v, JSON_COMPACT);
    if (!text)
        return error_set(err, -ENOMEM, "Out of memory.");
    int r = strlen(text) < size ? 1 : error_set(err, -E2BIG, "Field '%s' is longer than %zu bytes.", key, size - 1);
    if (r > 0)
        memcpy(buf, text, strlen(text) + 1);
    free(text);
    return r;
}

/* "ports": 1 to SPEC_MAX_PORTS distinct container ports, each an integer 1..65535. */
static int get_ports(json_t *obj, ApiRequest *r, Error *err) {
    json_t *v = json_object_get(obj, "ports");
    if (!v)
        return 0;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > SPEC_MAX_PORTS)
        return error_set(err, -EINVAL, "Field 'ports' must be a list of 1 to %d ports.", SPEC_MAX_PORTS);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        json_int_t n = json_integer_value(a);
        if (!json_is_integer(a) || n < 1 || n > 65535)
            return error_set(err, -EINVAL, "Item %zu of 'ports' is not a port number from 1 to 65535.", i);
        for (size_t k = 0; k < i; k++)
            if (r->ports[k] == (unsigned)n)
                return error_set(err, -EINVAL, "Port %u is in 'ports' twice.", (unsigned)n);
        r->ports[i] = (unsigned)n;
    }
    r->n_ports = json_array_size(v);
    return 1;
}

static int one_of(const char *key, const char *value, const char *const *choices, Error *err) {
    for (size_t i = 0; choices[i]; i++)
        if (STREQ(value, choices[i]))
            return 0;
    return error_set(err, -EINVAL, "Field '%s' has unknown value '%.64s'.", key, value);
}

int api_request_from_json(json_t *j, ApiRequest *ret, Error *err) {
    static const char *const fields[] = {"kind", "class", "count", "memory_gb", "guest_os",
                                         "share", "fallback", "wait_s", "runtime",
                                         "wait_for_nodes", "image", "command", "env", "model",
                                         "ports", NULL};
    ApiRequest r = {.count = 1};
    char kind[16];
    int k;
    if ((k = check_fields(j, "a request", fields, err)) < 0 ||
        (k = get_string(j, "kind", true, kind, sizeof(kind), err)) < 0 ||
        (k = get_string(j, "class", false, r.cls, sizeof(r.cls), err)) < 0 ||
        (k = get_uint(j, "count", 1, SPEC_MAX_COUNT, &r.count, err)) < 0 ||
        (k = get_uint(j, "memory_gb", 1, 1u << 20, &r.memory_gb, err)) < 0 ||
        (k = get_string(j, "guest_os", false, r.guest_os, sizeof(r.guest_os), err)) < 0 ||
        (k = get_bool(j, "share", &r.share, err)) < 0 ||
        (k = get_bool(j, "wait_for_nodes", &r.wait_for_nodes, err)) < 0 ||
        (k = get_uint(j, "wait_s", 0, SPEC_MAX_WAIT_S, &r.wait_s, err)) < 0 ||
        (k = get_string(j, "runtime", false, r.runtime, sizeof(r.runtime), err)) < 0 ||
        (k = get_string(j, "image", false, r.image, sizeof(r.image), err)) < 0 ||
        (k = get_strv(j, "command", false, r.command, sizeof(r.command), err)) < 0 ||
        (k = get_strv(j, "env", true, r.env, sizeof(r.env), err)) < 0 ||
        (k = get_string(j, "model", false, r.model, sizeof(r.model), err)) < 0 ||
        (k = get_ports(j, &r, err)) < 0)
        return k;
    bool found = false;
    for (ApiKind w = 0; w < _WORK_MAX; w++)
        if (STREQ(kind, api_kinds[w]))
            r.kind = w, found = true;
    if (!found)
        return error_set(err, -EINVAL,
                         "Field 'kind' must be vm, container, notebook or endpoint, not '%.32s'.", kind);
    /* Checked once the kind is known (r.kind was still its zero value above). */
    if (r.model[0] && r.kind != WORK_ENDPOINT)
        return error_set(err, -EINVAL, "Field 'model' applies to kind endpoint only.");
    if (r.n_ports && r.kind == WORK_VM)
        return error_set(err, -EINVAL, "Field 'ports' applies to containers, notebooks and endpoints, not VMs.");
    if (!r.cls[0] && !r.memory_gb)
        return error_set(err, -EINVAL, "A request names a 'class' (or 'cpu') or a 'memory_gb' need.");
    if (r.cls[0] && !spec_name_is_valid(r.cls))
        return error_set(err, -EINVAL, "Field 'class' is not a valid class name.");
    if (r.guest_os[0]) {
        static const char *const oses[] = {"linux", "macos", NULL};
        if (r.kind != WORK_VM)
            return error_set(err, -EINVAL, "Field 'guest_os' applies to kind vm only.");
        if ((k = one_of("guest_os", r.guest_os, oses, err)) < 0)
            return k;
    } else if (r.kind == WORK_VM)
        strcpy(r.guest_os, "linux");
    if (r.runtime[0]) {
        static const char *const runtimes[] = {"vllm", "mlx", "llama.cpp", NULL};
        if (r.kind != WORK_ENDPOINT)
            return error_set(err, -EINVAL, "Field 'runtime' applies to kind endpoint only.");
        if ((k = one_of("runtime", r.runtime, runtimes, err)) < 0)
            return k;
    }
    json_t *fb = json_object_get(j, "fallback");
    if (fb) {
        if (!json_is_array(fb))
            return error_set(err, -EINVAL, "Field 'fallback' must be a list of class names.");
        if (json_array_size(fb) > SPEC_MAX_FALLBACK)
            return error_set(err, -E2BIG, "Field 'fallback' lists at most %d classes.", SPEC_MAX_FALLBACK);
        size_t i;
        json_t *v;
        json_array_foreach(fb, i, v) {
            const char *s = json_string_value(v);
            if (!s || !spec_name_is_valid(s))
                return error_set(err, -EINVAL, "Entry %zu of 'fallback' is not a class name.", i);
            strcpy(r.fallback[r.n_fallback++], s);
        }
    }
    if (r.wait_s && !r.n_fallback)
        return error_set(err, -EINVAL, "Field 'wait_s' needs a 'fallback' list to fall back to.");
    *ret = r;
    return 0;
}

static int parse_text(const char *text, size_t len, json_t **ret, Error *err) {
    json_error_t je;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return error_set(err, -EINVAL, "Malformed JSON at line %d column %d: %s.", je.line,
                         je.column, je.text);
    *ret = j;
    return 0;
}

int api_request_parse(const char *text, size_t len, ApiRequest *ret, Error *err) {
    json_t *j;
    int r = parse_text(text, len, &j, err);
    if (r < 0)
        return r;
    r = api_request_from_json(j, ret, err);
    json_decref(j);
    return r;
}

json_t *api_request_to_json(const ApiRequest *r) {
    json_t *j = json_object();
    json_object_set_new(j, "kind", json_string(api_kinds[r->kind]));
    if (r->cls[0])
        json_object_set_new(j, "class", json_string(r->cls));
    json_object_set_new(j, "count", json_integer(r->count));
    if (r->memory_gb)
        json_object_set_new(j, "memory_gb", json_integer(r->memory_gb));
    if (r->guest_os[0])
        json_object_set_new(j, "guest_os", json_string(r->guest_os));
    if (r->share)
        json_object_set_new(j, "share", json_true());
    if (r->n_fallback) {
        json_t *fb = json_array();
        for (size_t i = 0; i < r->n_fallback; i++)
            json_array_append_new(fb, json_string(r->fallback[i]));
        json_object_set_new(j, "fallback", fb);
        json_object_set_new(j, "wait_s", json_integer(r->wait_s));
    }
    if (r->runtime[0])
        json_object_set_new(j, "runtime", json_string(r->runtime));
    if (r->wait_for_nodes)
        json_object_set_new(j, "wait_for_nodes", json_true());
    if (r->image[0])
        json_object_set_new(j, "image", json_string(r->image));
    if (r->command[0])
        json_object_set_new(j, "command", json_loads(r->command, 0, NULL));
    if (r->env[0])
        json_object_set_new(j, "env", json_loads(r->env, 0, NULL));
    if (r->model[0])
        json_object_set_new(j, "model", json_string(r->model));
    if (r->n_ports) {
        json_t *ports = json_array();
        for (size_t i = 0; i < r->n_ports; i++)
            json_array_append_new(ports, json_integer(r->ports[i]));
        json_object_set_new(j, "ports", ports);
    }
    return j;
}

/* nvidia.com/NAME, NAME of letters, digits, '.', '_', '-'. */
static bool device_resource_is_valid(const char *s) {
    if (strncmp(s, "nvidia.com/", 11) != 0 || !s[11])
        return false;
    for (const char *p = s + 11; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '_' || *p == '-'))
            return false;
    return true;
}

/* "10de:2335": four lower-case hex digits, a colon, four more. */
static bool pci_id_is_valid(const char *s) {
    for (size_t i = 0; i < 9; i++)
        if (i == 4 ? s[i] != ':' : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[9] == 0;
}

static int device_from_json(json_t *j, size_t idx, ApiDevice *d, Error *err) {
    static const char *const fields[] = {"pci", "class", "memory_gb", "binding", "mig_enabled",
                                         "mig", "reset_verified", "quarantined", "pci_id", NULL};
    static const char *const bindings[] = {"host", "vfio", NULL};
    char what[48];
    snprintf(what, sizeof(what), "device %zu", idx);
    int k;
    *d = (ApiDevice){.binding = "host"};
    if ((k = check_fields(j, what, fields, err)) < 0 ||
        (k = get_string(j, "pci", false, d->pci, sizeof(d->pci), err)) < 0 ||
        (k = get_string(j, "class", false, d->cls, sizeof(d->cls), err)) < 0 ||
        (k = get_string(j, "pci_id", false, d->pci_id, sizeof(d->pci_id), err)) < 0 ||
        (k = get_uint(j, "memory_gb", 0, 1u << 20, &d->memory_gb, err)) < 0 ||
        (k = get_string(j, "binding", false, d->binding, sizeof(d->binding), err)) < 0 ||
        (k = one_of("binding", d->binding, bindings, err)) < 0 ||
        (k = get_bool(j, "mig_enabled", &d->mig_enabled, err)) < 0 ||
        (k = get_bool(j, "reset_verified", &d->reset_verified, err)) < 0 ||
        (k = get_string(j, "quarantined", false, d->quarantine_reason,
                        sizeof(d->quarantine_reason), err)) < 0)
        return k;
    d->quarantined = k > 0;
    if (d->cls[0] && !spec_name_is_valid(d->cls))
        return error_set(err, -EINVAL, "Device %zu: 'class' is not a valid class name.", idx);
    if (d->pci_id[0] && !pci_id_is_valid(d->pci_id))
        return error_set(err, -EINVAL, "Device %zu: 'pci_id' must be the PCI vendor:device ids "
                                       "in lower-case hex, such as 10de:2335.", idx);
    json_t *mig = json_object_get(j, "mig");
    if (mig) {
        if (!json_is_array(mig) || json_array_size(mig) > SPEC_MAX_MIG)
            return error_set(err, -EINVAL, "Device %zu: 'mig' must be a list of at most %d instances.",
                             idx, SPEC_MAX_MIG);
        size_t i;
        json_t *v;
        json_array_foreach(mig, i, v) {
            static const char *const mf[] = {"profile", "start", NULL};
            ApiMigInstance *m = &d->mig[d->n_mig++];
            if ((k = check_fields(v, "a MIG instance", mf, err)) < 0 ||
                (k = get_string(v, "profile", true, m->profile, sizeof(m->profile), err)) < 0 ||
                (k = get_uint(v, "start", 0, 7, &m->start, err)) < 0)
                return k;
        }
        d->mig_enabled = d->mig_enabled || d->n_mig > 0;
    }
    return 0;
}

int api_node_from_json(json_t *j, ApiNode *ret, Error *err) {
    static const char *const fields[] = {"name", "site", "site_kind", "platform", "owner", "mode",
                                         "capabilities", "cordoned", "cpus", "time_slice_replicas",
                                         "apple_unified_memory_gb", "apple_usable_memory_gb",
                                         "devices", "device_resource", NULL};
    static const char *const sites[] = {"solo", "lab", "datacenter", NULL};
    static const char *const platforms[] = {"linux", "macos", NULL};
    static const char *const modes[] = {"container", "vm-passthrough", NULL};
    ApiNode *n = ret;
    memset(n, 0, sizeof(*n));
    int k;
    if ((k = check_fields(j, "a node", fields, err)) < 0 ||
        (k = get_string(j, "name", true, n->name, sizeof(n->name), err)) < 0 ||
        (k = get_string(j, "site", true, n->site, sizeof(n->site), err)) < 0 ||
        (k = get_string(j, "site_kind", true, n->site_kind, sizeof(n->site_kind), err)) < 0 ||
        (k = one_of("site_kind", n->site_kind, sites, err)) < 0 ||
        (k = get_string(j, "platform", true, n->platform, sizeof(n->platform), err)) < 0 ||
        (k = one_of("platform", n->platform, platforms, err)) < 0 ||
        (k = get_string(j, "owner", true, n->owner, sizeof(n->owner), err)) < 0 ||
        (k = get_string(j, "mode", false, n->mode, sizeof(n->mode), err)) < 0 ||
        (k = get_bool(j, "cordoned", &n->cordoned, err)) < 0 ||
        (k = get_uint(j, "cpus", 0, 1u << 16, &n->cpus, err)) < 0 ||
        (k = get_uint(j, "time_slice_replicas", 0, 64, &n->time_slice_replicas, err)) < 0 ||
        (k = get_uint(j, "apple_unified_memory_gb", 0, 1u << 16, &n->apple_unified_memory_gb, err)) < 0 ||
        (k = get_uint(j, "apple_usable_memory_gb", 0, 1u << 16, &n->apple_usable_memory_gb, err)) < 0 ||
        (k = get_string(j, "device_resource", false, n->device_resource, sizeof(n->device_resource), err)) < 0)
        return k;
    if (n->device_resource[0] && !device_resource_is_valid(n->device_resource))
        return error_set(err, -EINVAL, "Field 'device_resource' must be a resource like nvidia.com/GH100_H100_SXM5_80GB.");
    if (!spec_name_is_valid(n->site))
        return error_set(err, -EINVAL, "Field 'site' must be 1-63 of a-z, 0-9, '.', '_', '-'.");
    if (!spec_name_is_valid(n->name))
        return error_set(err, -EINVAL, "Field 'name' must be 1-63 of a-z, 0-9, '.', '_', '-'.");
    if (!spec_name_is_valid(n->owner))
        return error_set(err, -EINVAL, "Field 'owner' is not a valid user name.");
    if (STREQ(n->mode, "vm-vgpu"))
        return error_set(err, -EINVAL, "Node mode vm-vgpu is not supported (R2d); use "
                                       "vm-passthrough or container.");
    if (STREQ(n->site_kind, "datacenter")) {
        /* R3: a datacenter node's mode is never a silent default. */
        if (!n->mode[0])
            return error_set(err, -EINVAL, "A datacenter node needs 'mode' (container or "
                                           "vm-passthrough, R3).");
        if ((k = one_of("mode", n->mode, modes, err)) < 0)
            return k;
    } else if (n->mode[0])
        return error_set(err, -EINVAL, "Field 'mode' applies to datacenter nodes only; lab and "
                                       "solo machines switch per GPU (R7).");
    json_t *caps = json_object_get(j, "capabilities");
    if (caps) {
        if (!json_is_array(caps) || json_array_size(caps) > SPEC_MAX_CAPS)
            return error_set(err, -EINVAL, "Field 'capabilities' must be a list of at most %d names.",
                             SPEC_MAX_CAPS);
        size_t i;
        json_t *v;
        json_array_foreach(caps, i, v) {
            const char *s = json_string_value(v);
            if (!s || strlen(s) >= sizeof(n->caps[0]) || !spec_name_is_valid(s))
                return error_set(err, -EINVAL, "Entry %zu of 'capabilities' is not a name.", i);
            strcpy(n->caps[n->n_caps++], s);
        }
    }
    json_t *devs = json_object_get(j, "devices");
    if (devs) {
        if (!json_is_array(devs) || json_array_size(devs) > SPEC_MAX_DEVICES)
            return error_set(err, -EINVAL, "Field 'devices' must be a list of at most %d devices.",
                             SPEC_MAX_DEVICES);
        size_t i;
        json_t *v;
        json_array_foreach(devs, i, v) {
            if ((k = device_from_json(v, i, &n->devices[n->n_devices++], err)) < 0)
                return k;
            /* One PCI address is one device: a second entry would let the core hand the
             * same GPU to two workloads. A Kubernetes node's GPUs have no address (its device
             * plugin picks which one a Pod gets), so only addresses that are given count. */
            for (size_t d = 0; d + 1 < n->n_devices && n->devices[i].pci[0]; d++)
                if (STREQ(n->devices[d].pci, n->devices[i].pci))
                    return error_set(err, -EINVAL, "Devices %zu and %zu have the same PCI address %s.",
                                     d, i, n->devices[i].pci);
        }
    }
    return 0;
}

int api_node_parse(const char *text, size_t len, ApiNode *ret, Error *err) {
    json_t *j;
    int r = parse_text(text, len, &j, err);
    if (r < 0)
        return r;
    r = api_node_from_json(j, ret, err);
    json_decref(j);
    return r;
}

bool api_node_has_cap(const ApiNode *n, const char *cap) {
    for (size_t i = 0; i < n->n_caps; i++)
        if (STREQ(n->caps[i], cap))
            return true;
    return false;
}

json_t *api_node_to_json(const ApiNode *n) {
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "name", n->name, "site", n->site,
                          "site_kind", n->site_kind, "platform", n->platform, "owner", n->owner,
                          "cordoned", n->cordoned);
    if (!j)
        return NULL;
    if (n->mode[0])
        json_object_set_new(j, "mode", json_string(n->mode));
    if (n->device_resource[0])
        json_object_set_new(j, "device_resource", json_string(n->device_resource));
    if (n->cpus)
        json_object_set_new(j, "cpus", json_integer(n->cpus));
    if (n->time_slice_replicas)
        json_object_set_new(j, "time_slice_replicas", json_integer(n->time_slice_replicas));
    if (n->apple_unified_memory_gb)
        json_object_set_new(j, "apple_unified_memory_gb", json_integer(n->apple_unified_memory_gb));
    if (n->apple_usable_memory_gb)
        json_object_set_new(j, "apple_usable_memory_gb", json_integer(n->apple_usable_memory_gb));
    json_t *caps = json_array();
    for (size_t i = 0; i < n->n_caps; i++)
        json_array_append_new(caps, json_string(n->caps[i]));
    json_object_set_new(j, "capabilities", caps);
    json_t *devs = json_array();
    for (size_t i = 0; i < n->n_devices; i++) {
        const ApiDevice *d = &n->devices[i];
        json_t *dj = json_pack("{s:s, s:s, s:i, s:s}", "pci", d->pci, "class", d->cls, "memory_gb",
                               (int)d->memory_gb, "binding", d->binding);
        if (d->pci_id[0])
            json_object_set_new(dj, "pci_id", json_string(d->pci_id));
        if (d->mig_enabled) {
            json_object_set_new(dj, "mig_enabled", json_true());
            json_t *mig = json_array();
            for (size_t m = 0; m < d->n_mig; m++)
                json_array_append_new(mig, json_pack("{s:s, s:i}", "profile", d->mig[m].profile,
                                                     "start", (int)d->mig[m].start));
            json_object_set_new(dj, "mig", mig);
        }
        if (d->reset_verified)
            json_object_set_new(dj, "reset_verified", json_true());
        if (d->quarantined)
            json_object_set_new(dj, "quarantined", json_string(d->quarantine_reason));
        json_array_append_new(devs, dj);
    }
    json_object_set_new(j, "devices", devs);
    return j;
}
