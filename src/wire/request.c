/* request.c: the request shape (request.h). */
#include "wire/request.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "wire/json-text.h"

static_assert(sizeof(WorkloadKind) == sizeof(int) && sizeof(GuestOs) == sizeof(int) &&
                      sizeof(EndpointRuntime) == sizeof(int),
              "WIRE_ENUM stores an int");

static int kind_parse(const char *s) {
    return (int)workload_kind_from_string(s);
}

static int guest_parse(const char *s) {
    return (int)guest_os_from_string(s);
}

/* "none" is the core's absence, never a value a client names. */
static int runtime_parse(const char *s) {
    EndpointRuntime e = endpoint_runtime_from_string(s);
    return e == ENDPOINT_RUNTIME_NONE ? -1 : (int)e;
}

/* "ports": 1 to SPEC_MAX_PORTS distinct container ports, each an integer 1..65535. */
static int decode_ports(json_t *v, void *obj, Error *err) {
    ApiRequest *r = obj;
    if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > SPEC_MAX_PORTS)
        return error_set(err, -EINVAL, "field 'ports' must be a list of 1 to %d ports",
                         SPEC_MAX_PORTS);
    size_t i;
    json_t *a;
    json_array_foreach(v, i, a) {
        json_int_t n = json_integer_value(a);
        if (!json_is_integer(a) || n < 1 || n > 65535)
            return error_set(err, -EINVAL,
                             "item %zu of 'ports' is not a port number from 1 to 65535", i);
        for (size_t k = 0; k < i; k++)
            if (r->ports[k] == (unsigned)n)
                return error_set(err, -EINVAL, "port %u is in 'ports' twice", (unsigned)n);
        r->ports[i] = (unsigned)n;
    }
    r->n_ports = json_array_size(v);
    return 0;
}

static int decode_fallback(json_t *fb, void *obj, Error *err) {
    ApiRequest *r = obj;
    if (!json_is_array(fb))
        return error_set(err, -EINVAL, "field 'fallback' must be a list of class names");
    if (json_array_size(fb) > SPEC_MAX_FALLBACK)
        return error_set(err, -E2BIG, "field 'fallback' lists at most %d classes",
                         SPEC_MAX_FALLBACK);
    size_t i;
    json_t *v;
    json_array_foreach(fb, i, v) {
        const char *s = json_string_value(v);
        if (!s || !wire_name_is_valid(s))
            return error_set(err, -EINVAL, "entry %zu of 'fallback' is not a class name", i);
        strcpy(r->fallback[r->n_fallback++], s);
    }
    return 0;
}

static const WireField request_fields[] = {
        WIRE_F_ENUM(ApiRequest, "kind", kind, true, kind_parse,
                    "vm, container, notebook or endpoint"),
        WIRE_F_STRING(ApiRequest, "class", cls, false),
        WIRE_F_UINT(ApiRequest, "count", count, 1, SPEC_MAX_COUNT),
        WIRE_F_UINT(ApiRequest, "memory_gb", memory_gb, 1, 1u << 20),
        WIRE_F_ENUM_OPT(ApiRequest, "guest_os", guest_os, guest_parse, "linux or macos"),
        WIRE_F_BOOL(ApiRequest, "share", share),
        WIRE_F_BOOL(ApiRequest, "wait_for_nodes", wait_for_nodes),
        WIRE_F_UINT(ApiRequest, "wait_s", wait_s, 0, SPEC_MAX_WAIT_S),
        WIRE_F_ENUM_OPT(ApiRequest, "runtime", runtime, runtime_parse, "vllm, mlx or llama.cpp"),
        WIRE_F_STRING(ApiRequest, "image", image, false),
        WIRE_F_ARGV(ApiRequest, "command", command),
        WIRE_F_ENVV(ApiRequest, "env", env),
        WIRE_F_STRING(ApiRequest, "model", model, false),
        WIRE_F_CUSTOM("ports", decode_ports),
        WIRE_F_CUSTOM("fallback", decode_fallback),
};

int api_request_from_json(json_t *j, ApiRequest *ret, Error *err) {
    /* guest_os starts as no value at all, so that a guest_os given for another kind shows. */
    ApiRequest r = {.count = 1, .guest_os = (GuestOs)-1, .runtime = ENDPOINT_RUNTIME_NONE};
    /* An empty string would read as "not given" below (a default runtime, no image): the
     * client meant something, so say so rather than run what it did not ask for. */
    static const char *const not_empty[] = {"class", "image", "model", "runtime", "guest_os"};
    for (size_t i = 0; json_is_object(j) && i < sizeof(not_empty) / sizeof(not_empty[0]); i++) {
        json_t *v = json_object_get(j, not_empty[i]);
        if (json_is_string(v) && json_string_length(v) == 0)
            return error_set(err, -EINVAL, "field '%s' is empty: leave it out or give a value",
                             not_empty[i]);
    }
    int k = wire_decode(j, "a request", request_fields,
                        sizeof(request_fields) / sizeof(request_fields[0]), &r, err);
    if (k < 0)
        return k;
    /* Checked once the kind is known. */
    if (r.model[0] && r.kind != WORKLOAD_ENDPOINT)
        return error_set(err, -EINVAL, "field 'model' applies to kind endpoint only");
    if (r.n_ports && r.kind == WORKLOAD_VM)
        return error_set(err, -EINVAL,
                         "field 'ports' applies to containers, notebooks and endpoints, not VMs");
    if (!r.cls[0] && !r.memory_gb)
        return error_set(err, -EINVAL,
                         "a request names a 'class' (or 'cpu') or a 'memory_gb' need");
    if (r.cls[0] && !wire_name_is_valid(r.cls))
        return error_set(err, -EINVAL, "field 'class' is not a valid class name");
    if (r.guest_os != (GuestOs)-1 && r.kind != WORKLOAD_VM)
        return error_set(err, -EINVAL, "field 'guest_os' applies to kind vm only");
    if (r.guest_os == (GuestOs)-1)
        r.guest_os = GUEST_LINUX;
    if (r.runtime != ENDPOINT_RUNTIME_NONE && r.kind != WORKLOAD_ENDPOINT)
        return error_set(err, -EINVAL, "field 'runtime' applies to kind endpoint only");
    if (r.wait_s && !r.n_fallback)
        return error_set(err, -EINVAL, "field 'wait_s' needs a 'fallback' list to fall back to");
    if (r.memory_gb && strcmp(r.cls, "cpu") == 0) /* not ignored: the client meant something */
        return error_set(err, -EINVAL,
                         "field 'memory_gb' is GPU memory; class cpu takes 'count' cores");
    *ret = r;
    return 0;
}

bool api_request_model_is_gguf(const ApiRequest *r) {
    size_t n = strlen(r->model);
    return r->kind == WORKLOAD_ENDPOINT && n > 5 && strcasecmp(r->model + n - 5, ".gguf") == 0;
}

bool vm_image_name_is_valid(const char *name) {
    size_t n = strlen(name);
    if (!n || n > 255 || name[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && !strchr("._+-", name[i]))
            return false;
    return true;
}

/* A container image reference as engines take it ([registry[:port]/]path[:tag][@digest]): the
 * characters of those parts, starting with a letter or digit, no empty or dot-dot part. What
 * passes may still name no image; what fails never could, and would only fail on the node. */
static bool container_image_is_valid(const char *ref) {
    size_t n = strlen(ref);
    if (!n || n > 255 || !isalnum((unsigned char)ref[0]) || strstr(ref, "..") ||
        strstr(ref, "//") || ref[n - 1] == '/' || ref[n - 1] == ':')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)ref[i]) && !strchr("._-/:@", ref[i]))
            return false;
    return true;
}

int api_request_check_new(const ApiRequest *r, Error *err) {
    /* The agent runs as root: a path would hand any host file to a stranger's VM as its disk. */
    if (r->kind == WORKLOAD_VM && r->image[0] && !vm_image_name_is_valid(r->image))
        return error_set(err, -EINVAL,
                         "field 'image' of a VM names one of the site's disk images by its file "
                         "name (such as 'ubuntu-24.04.qcow2'), not a path");
    if (r->kind != WORKLOAD_VM && r->image[0] && !container_image_is_valid(r->image))
        return error_set(err, -EINVAL,
                         "field 'image' is not a container image reference (such as "
                         "'registry.example/team/app:1.2' or 'app@sha256:...')");
    /* Not dropped without a word: a VM boots its disk image, which runs what it runs. */
    if (r->kind == WORKLOAD_VM && (r->command[0] || r->env[0]))
        return error_set(err, -EINVAL,
                         "field '%s' applies to containers, notebooks and endpoints; a VM boots "
                         "its disk image",
                         r->command[0] ? "command" : "env");
    /* R2e time-slices one GPU among a user's containers: asked where it cannot be, it would
     * be dropped without a word (new requests only: stored ones load as they were). */
    if (r->share && r->kind == WORKLOAD_VM)
        return error_set(err, -EINVAL,
                         "field 'share' time-slices a GPU among containers, notebooks and "
                         "endpoints (R2e); a VM owns its GPU whole (passthrough, R2a)");
    if (r->share && r->count > 1)
        return error_set(err, -EINVAL,
                         "field 'share' time-slices one GPU (R2e): it takes count 1 (leave it "
                         "out to ask for %u whole units)",
                         r->count);
    if (r->runtime == ENDPOINT_RUNTIME_MLX && api_request_model_is_gguf(r))
        return error_set(err, -EINVAL,
                         "field 'runtime' mlx loads safetensors weights; the GGUF model '%.200s' "
                         "runs on llama.cpp (leave 'runtime' out, or ask llama.cpp)",
                         r->model);
    for (size_t i = 0; i < r->n_fallback; i++) {
        const char *f = r->fallback[i];
        if (r->cls[0] && strcmp(f, r->cls) == 0)
            return error_set(err, -EINVAL, "field 'fallback' repeats the first choice '%s'", f);
        for (size_t k = 0; k < i; k++)
            if (strcmp(f, r->fallback[k]) == 0)
                return error_set(err, -EINVAL, "field 'fallback' names '%s' twice", f);
    }
    /* Order last: "cpu,cpu" is a repeat to say, not an order. */
    for (size_t i = 0; i + 1 < r->n_fallback; i++)
        if (strcmp(r->fallback[i], "cpu") == 0)
            return error_set(err, -EINVAL,
                             "field 'fallback' puts 'cpu' before '%s': other GPU classes come "
                             "first, then cpu (R13)",
                             r->fallback[i + 1]);
    return 0;
}

int api_request_parse(const char *text, size_t len, ApiRequest *ret, Error *err) {
    json_t *j;
    int r = wire_parse_text(text, len, &j, err);
    if (r < 0)
        return r;
    r = api_request_from_json(j, ret, err);
    json_decref(j);
    return r;
}

void api_request_write(const ApiRequest *r, JsonText *b) {
    json_text_open(b, '{');
    json_text_member_string(b, "kind", workload_kind_to_string(r->kind));
    if (r->cls[0])
        json_text_member_string(b, "class", r->cls);
    json_text_member_int(b, "count", r->count);
    if (r->memory_gb)
        json_text_member_int(b, "memory_gb", r->memory_gb);
    if (r->kind == WORKLOAD_VM)
        json_text_member_string(b, "guest_os", guest_os_to_string(r->guest_os));
    if (r->share)
        json_text_member_bool(b, "share", true);
    if (r->n_fallback) {
        json_text_key(b, "fallback");
        json_text_open(b, '[');
        for (size_t i = 0; i < r->n_fallback; i++)
            json_text_string(b, r->fallback[i]);
        json_text_close(b, ']');
        json_text_member_int(b, "wait_s", r->wait_s);
    }
    if (r->runtime != ENDPOINT_RUNTIME_NONE)
        json_text_member_string(b, "runtime", endpoint_runtime_to_string(r->runtime));
    if (r->wait_for_nodes)
        json_text_member_bool(b, "wait_for_nodes", true);
    if (r->image[0])
        json_text_member_string(b, "image", r->image);
    /* command and env are held as the compact text of their arrays (the decoder wrote it) */
    if (r->command[0])
        json_text_member_raw(b, "command", r->command);
    if (r->env[0])
        json_text_member_raw(b, "env", r->env);
    if (r->model[0])
        json_text_member_string(b, "model", r->model);
    if (r->n_ports) {
        json_text_key(b, "ports");
        json_text_open(b, '[');
        for (size_t i = 0; i < r->n_ports; i++)
            json_text_int(b, r->ports[i]);
        json_text_close(b, ']');
    }
    json_text_close(b, '}');
}

json_t *api_request_to_json(const ApiRequest *r) {
    JsonText w = {.to_tree = true};
    api_request_write(r, &w);
    return json_text_take_tree(&w);
}

char *api_request_text(const ApiRequest *r) {
    JsonText w = {0};
    api_request_write(r, &w);
    return json_text_take(&w);
}
