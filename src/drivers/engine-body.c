/* engine-body.c: container-create bodies and inspect answers of both engine dialects. */
#include "drivers/engine-body.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/strutil.h"

static const char *const dialect_names[_ENGINE_DIALECT_MAX] = {
        [ENGINE_DOCKER] = "docker", [ENGINE_LIBPOD] = "libpod"};
static const char *const gpu_mode_names[_ENGINE_GPU_MODE_MAX] = {[ENGINE_GPU_DEVICE_REQUESTS] =
                                                                         "device-requests",
                                                                 [ENGINE_GPU_CDI] = "cdi",
                                                                 [ENGINE_GPU_DEVICES] = "devices"};

const char *engine_dialect_to_string(EngineDialect d) {
    return d >= 0 && d < _ENGINE_DIALECT_MAX ? dialect_names[d] : NULL;
}

EngineDialect engine_dialect_from_string(const char *s) {
    for (int i = 0; s && i < _ENGINE_DIALECT_MAX; i++)
        if (STREQ(s, dialect_names[i]))
            return (EngineDialect)i;
    return _ENGINE_DIALECT_INVALID;
}

const char *engine_gpu_mode_to_string(EngineGpuMode m) {
    return m >= 0 && m < _ENGINE_GPU_MODE_MAX ? gpu_mode_names[m] : NULL;
}

EngineGpuMode engine_gpu_mode_from_string(const char *s) {
    for (int i = 0; s && i < _ENGINE_GPU_MODE_MAX; i++)
        if (STREQ(s, gpu_mode_names[i]))
            return (EngineGpuMode)i;
    return _ENGINE_GPU_MODE_INVALID;
}

int engine_dialect_from_version(json_t *version, EngineDialect *ret, char *ret_product, size_t size,
                                Error *err) {
    if (!json_is_object(version))
        return error_set(err, -EPROTO, "the engine's /version answer is not a JSON object");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(version, "Components"), i, c) {
        const char *name = json_string_value(json_object_get(c, "Name"));
        if (name && STREQ(name, "Podman Engine")) {
            snprintf(ret_product, size, "Podman %.32s",
                     strempty(json_string_value(json_object_get(c, "Version"))));
            *ret = ENGINE_LIBPOD;
            return 0;
        }
    }
    const char *api = json_string_value(json_object_get(version, "ApiVersion"));
    if (!api)
        return error_set(
                err, -EPROTO,
                "the engine's /version answer names neither Podman nor a Docker API version");
    snprintf(ret_product, size, "Docker Engine %.32s (API %.16s)",
             strempty(json_string_value(json_object_get(version, "Version"))), api);
    *ret = ENGINE_DOCKER;
    return 0;
}

static json_t *string_array(const char *const *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static size_t count_strv(const char *const *v) {
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* The labels that make the container ours; the first published port goes in one too, as the
 * engine's inspect answer lists the ports in its own order and the URL is the first one's. */
static json_t *labels_of(const WorkloadSpec *spec) {
    json_t *labels =
            json_pack("{s:s, s:s}", DRIVER_LABEL, spec->id, "einsora.kind", strempty(spec->kind));
    if (labels && spec->node)
        json_object_set_new(labels, DRIVER_LABEL_NODE, json_string(spec->node));
    if (labels && spec->created)
        json_object_set_new(labels, DRIVER_LABEL_CREATED, json_string(spec->created));
    if (labels && spec->n_ports) {
        char port[16];
        snprintf(port, sizeof(port), "%u", spec->ports[0]);
        json_object_set_new(labels, ENGINE_LABEL_PORT, json_string(port));
    }
    return labels;
}

static void labels_set(json_t *o, const WorkloadSpec *spec) {
    json_object_set_new(o, "labels", labels_of(spec));
}

static json_t *docker_body(const WorkloadSpec *spec, const EngineGpus *g) {
    json_t *env = string_array(spec->env, count_strv(spec->env));
    for (size_t i = 0; i < g->n_env; i++)
        json_array_append_new(env, json_string(g->env[i]));
    json_t *host = json_object(), *body = json_pack("{s:s, s:o}", "Image", spec->image, "Env", env);
    if (!body || !host) {
        json_decref(body);
        json_decref(host);
        return NULL;
    }
    if (spec->command)
        json_object_set_new(body, "Cmd", string_array(spec->command, count_strv(spec->command)));
    json_object_set_new(body, "Labels", labels_of(spec));
    if (spec->oci_runtime)
        json_object_set_new(host, "Runtime", json_string(spec->oci_runtime));
    if (spec->cpu_limit) /* a cpu placement's cores, and no more (R17) */
        json_object_set_new(host, "NanoCpus",
                            json_integer((json_int_t)spec->cpu_limit * 1000000000));
    json_t *reqs = json_array();
    if (g->n_nvidia_ids)
        json_array_append_new(reqs,
                              json_pack("{s:s, s:o, s:[[s]]}", "Driver", "nvidia", "DeviceIDs",
                                        string_array(g->nvidia_ids, g->n_nvidia_ids),
                                        "Capabilities", "gpu"));
    if (g->n_cdi_names)
        json_array_append_new(reqs, json_pack("{s:s, s:o}", "Driver", "cdi", "DeviceIDs",
                                              string_array(g->cdi_names, g->n_cdi_names)));
    if (json_array_size(reqs))
        json_object_set_new(host, "DeviceRequests", reqs);
    else
        json_decref(reqs);
    if (g->n_devices) {
        json_t *devs = json_array();
        for (size_t i = 0; i < g->n_devices; i++)
            json_array_append_new(devs, json_pack("{s:s, s:s, s:s}", "PathOnHost",
                                                  g->devices[i].host_path, "PathInContainer",
                                                  g->devices[i].container_path, "CgroupPermissions",
                                                  "rwm"));
        json_object_set_new(host, "Devices", devs);
    }
    if (spec->n_ports) {
        json_t *exposed = json_object(), *bindings = json_object();
        for (size_t i = 0; i < spec->n_ports; i++) {
            char key[24];
            snprintf(key, sizeof(key), "%u/tcp", spec->ports[i]);
            json_object_set_new(exposed, key, json_object());
            /* An empty HostPort: the engine picks a free one; the driver reads it back. */
            json_object_set_new(bindings, key,
                                json_pack("[{s:s, s:s}]", "HostIp", "", "HostPort", ""));
        }
        json_object_set_new(body, "ExposedPorts", exposed);
        json_object_set_new(host, "PortBindings", bindings);
    }
    json_object_set_new(body, "HostConfig", host);
    return body;
}

static json_t *libpod_body(const WorkloadSpec *spec, const EngineGpus *g) {
    json_t *env = json_object();
    for (size_t pass = 0; pass < 2; pass++) {
        const char *const *v = pass ? g->env : spec->env;
        size_t n = pass ? g->n_env : count_strv(spec->env);
        for (size_t i = 0; i < n; i++) {
            const char *eq = strchr(v[i], '=');
            if (!eq)
                continue;
            _cleanup_free_ char *key = strndup(v[i], (size_t)(eq - v[i]));
            if (key)
                json_object_set_new(env, key, json_string(eq + 1));
        }
    }
    char name[64];
    snprintf(name, sizeof(name), DRIVER_NAME_PREFIX "%s", spec->id);
    json_t *body = json_pack("{s:s, s:s, s:o}", "name", name, "image", spec->image, "env", env);
    if (!body)
        return NULL;
    labels_set(body, spec);
    if (spec->command)
        json_object_set_new(body, "command",
                            string_array(spec->command, count_strv(spec->command)));
    if (spec->oci_runtime)
        json_object_set_new(body, "oci_runtime", json_string(spec->oci_runtime));
    if (spec->cpu_limit) /* a cpu placement's cores, and no more (R17) */
        json_object_set_new(body, "resource_limits",
                            json_pack("{s:{s:I, s:I}}", "cpu", "quota",
                                      (json_int_t)spec->cpu_limit * 100000, "period",
                                      (json_int_t)100000));
    json_t *devs = json_array();
    for (size_t i = 0; i < g->n_cdi_names; i++)
        json_array_append_new(devs, json_pack("{s:s}", "path", g->cdi_names[i]));
    for (size_t i = 0; i < g->n_devices; i++)
        json_array_append_new(devs, json_pack("{s:s++}", "path", g->devices[i].host_path, ":",
                                              g->devices[i].container_path));
    if (json_array_size(devs))
        json_object_set_new(body, "devices", devs);
    else
        json_decref(devs);
    if (spec->n_ports) {
        json_t *maps = json_array();
        for (size_t i = 0; i < spec->n_ports; i++)
            json_array_append_new(maps, json_pack("{s:i, s:s}", "container_port",
                                                  (int)spec->ports[i], "protocol", "tcp"));
        json_object_set_new(body, "portmappings", maps);
    }
    return body;
}

char *engine_stop_path(EngineDialect dialect, const char *name, unsigned grace_s) {
    return strprintf("/containers/%s/stop?%s=%u", name, dialect == ENGINE_LIBPOD ? "timeout" : "t",
                     grace_s);
}

json_t *engine_create_body(EngineDialect dialect, const WorkloadSpec *spec,
                           const EngineGpus *gpus) {
    static const EngineGpus none = {0};
    if (!spec || !spec->id || !spec->image)
        return NULL;
    return dialect == ENGINE_LIBPOD ? libpod_body(spec, gpus ? gpus : &none)
                                    : docker_body(spec, gpus ? gpus : &none);
}

int engine_state_from_inspect(json_t *inspect, WorkloadState *ret, const char **ret_runtime,
                              Error *err) {
    json_t *st = json_object_get(inspect, "State");
    const char *status = json_string_value(json_object_get(st, "Status"));
    if (!status)
        return error_set(err, -EPROTO, "the engine's inspect answer has no State.Status");
    WorkloadState s = {.exit_code = (int)json_integer_value(json_object_get(st, "ExitCode"))};
    const char *msg = json_string_value(json_object_get(st, "Error"));
    /* Podman's "stopping": a stop in progress (an operator's `podman stop -t 30`), whose
     * processes may still hold the GPUs: running until they are gone, never freed early. */
    if (STREQ(status, "running") || STREQ(status, "paused") || STREQ(status, "restarting") ||
        STREQ(status, "stopping"))
        s.status = WORKLOAD_RUNNING;
    else if (STREQ(status, "created") || STREQ(status, "configured") ||
             STREQ(status, "initialized"))
        s.status = WORKLOAD_STARTING;
    else if (STREQ(status, "exited") || STREQ(status, "stopped"))
        s.status = msg && msg[0] ? WORKLOAD_FAILED : WORKLOAD_EXITED;
    else /* dead, removing, unknown */
        s.status = WORKLOAD_FAILED;
    if (msg && msg[0])
        snprintf(s.message, sizeof(s.message), "%s", msg);
    else if (json_is_true(json_object_get(st, "OOMKilled")))
        snprintf(s.message, sizeof(s.message), "killed: out of memory");
    else if (s.status == WORKLOAD_EXITED)
        snprintf(s.message, sizeof(s.message), "exited with code %d", s.exit_code);
    else if (s.status == WORKLOAD_FAILED)
        snprintf(s.message, sizeof(s.message), "the engine reports the container %s", status);
    /* NetworkSettings.Ports: {"8888/tcp": [{"HostIp": "", "HostPort": "46767"}]} */
    const char *key;
    json_t *binds, *ports = json_object_get(json_object_get(inspect, "NetworkSettings"), "Ports");
    const char *first = json_string_value(json_object_get(
            json_object_get(json_object_get(inspect, "Config"), "Labels"), ENGINE_LABEL_PORT));
    if (first) {
        char k[24];
        snprintf(k, sizeof(k), "%.8s/tcp", first);
        const char *hp = json_string_value(
                json_object_get(json_array_get(json_object_get(ports, k), 0), "HostPort"));
        unsigned long port = hp ? strtoul(hp, NULL, 10) : 0;
        if (port > 0 && port < 65536)
            s.host_port = (unsigned)port;
    }
    json_object_foreach(ports, key, binds) {
        const char *hp = json_string_value(json_object_get(json_array_get(binds, 0), "HostPort"));
        unsigned long port = hp ? strtoul(hp, NULL, 10) : 0;
        if (port > 0 && port < 65536 && !s.host_port)
            s.host_port = (unsigned)port;
    }
    if (ret_runtime) {
        /* libpod: OCIRuntime; Docker: HostConfig.Runtime. */
        const char *rt = json_string_value(json_object_get(inspect, "OCIRuntime"));
        if (!rt)
            rt = json_string_value(
                    json_object_get(json_object_get(inspect, "HostConfig"), "Runtime"));
        *ret_runtime = rt;
    }
    *ret = s;
    return 0;
}

void engine_error_sentence(json_t *answer, long status, char *buf, size_t size) {
    const char *m = json_string_value(json_object_get(answer, "message"));
    if (m && m[0])
        snprintf(buf, size, "%s", m);
    else
        snprintf(buf, size, "the engine answered HTTP %ld", status);
}
