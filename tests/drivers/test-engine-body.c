/* test-engine-body.c: the pure half of the container driver: dialect detection from GET
 * /version, the create bodies checked field by field against the Docker Engine API's
 * documented shapes (ContainerConfig, HostConfig.DeviceRequests/Devices/Runtime) and the
 * libpod SpecGenerator, inspect answers, and CDI specs as nvidia-ctk writes them. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "drivers/cdi.h"
#include "drivers/engine-body.h"

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert(j, "bad test JSON: %s", e.text);
    return j;
}

Test(engine_body, r17_dialect_from_docker_and_podman_version_answers) {
    /* Docker Engine's /version (its documented example's fields). */
    json_t *docker = parse(
            "{\"Platform\":{\"Name\":\"Docker Engine - Community\"},\"Components\":[{\"Name\":"
            "\"Engine\",\"Version\":\"24.0.5\"}],\"Version\":\"24.0.5\",\"ApiVersion\":\"1.43\","
            "\"MinAPIVersion\":\"1.12\",\"Os\":\"linux\",\"Arch\":\"amd64\"}");
    json_t *podman = parse(
            "{\"Platform\":{\"Name\":\"linux/amd64/debian-12\"},\"Components\":[{\"Name\":\"Podman "
            "Engine\",\"Version\":\"4.3.1\"}],\"Version\":\"4.3.1\",\"ApiVersion\":\"1.41\"}");
    EngineDialect d;
    char product[96];
    Error err = {0};
    cr_assert_eq(engine_dialect_from_version(docker, &d, product, sizeof(product), &err), 0);
    cr_assert_eq(d, ENGINE_DOCKER);
    cr_assert(strstr(product, "Docker Engine 24.0.5"), "%s", product);
    cr_assert_eq(engine_dialect_from_version(podman, &d, product, sizeof(product), &err), 0);
    cr_assert_eq(d, ENGINE_LIBPOD);
    cr_assert_str_eq(product, "Podman 4.3.1");
    json_t *neither = parse("{\"hello\":1}");
    cr_assert_eq(engine_dialect_from_version(neither, &d, product, sizeof(product), &err), -EPROTO);
    cr_assert(strstr(err.message, "names neither"), "%s", err.message);
    json_decref(docker);
    json_decref(podman);
    json_decref(neither);
}

static const char *const cmd[] = {"jupyter", "lab", NULL};
static const char *const env[] = {"TOKEN=x", NULL};
static const unsigned ports[] = {8888};

static WorkloadSpec spec(void) {
    return (WorkloadSpec){.id = "42",
                          .kind = "notebook",
                          .image = "einsora/notebook:1",
                          .command = cmd,
                          .env = env,
                          .ports = ports,
                          .n_ports = 1,
                          .oci_runtime = "kata-runtime"};
}

static const char *str(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_string(v), "field %s is a string", key);
    return json_string_value(v);
}

Test(engine_body, r17_docker_body_device_requests_shape) {
    static const char *const ids[] = {"GPU-aaaa", "MIG-bbbb"};
    EngineGpus g = {.nvidia_ids = ids, .n_nvidia_ids = 2};
    WorkloadSpec s = spec();
    json_t *b = engine_create_body(ENGINE_DOCKER, &s, &g);
    cr_assert(b);
    cr_assert_str_eq(str(b, "Image"), "einsora/notebook:1");
    cr_assert_eq(json_array_size(json_object_get(b, "Cmd")), 2);
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(b, "Cmd"), 0)), "jupyter");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(b, "Env"), 0)), "TOKEN=x");
    cr_assert_str_eq(str(json_object_get(b, "Labels"), "einsora.request"), "42");
    cr_assert(json_is_object(json_object_get(json_object_get(b, "ExposedPorts"), "8888/tcp")));
    cr_assert_null(json_object_get(b, "name"), "Docker takes the name in the query");
    json_t *h = json_object_get(b, "HostConfig");
    cr_assert_str_eq(str(h, "Runtime"), "kata-runtime");
    json_t *reqs = json_object_get(h, "DeviceRequests");
    cr_assert_eq(json_array_size(reqs), 1);
    json_t *r = json_array_get(reqs, 0);
    /* DeviceRequest: Driver, Count, DeviceIDs, Capabilities (OR list of AND lists), Options. */
    cr_assert_str_eq(str(r, "Driver"), "nvidia");
    cr_assert_null(json_object_get(r, "Count"), "Count and DeviceIDs are exclusive");
    json_t *dids = json_object_get(r, "DeviceIDs");
    cr_assert_eq(json_array_size(dids), 2);
    cr_assert_str_eq(json_string_value(json_array_get(dids, 0)), "GPU-aaaa");
    cr_assert_str_eq(json_string_value(json_array_get(dids, 1)), "MIG-bbbb");
    json_t *caps = json_object_get(r, "Capabilities");
    cr_assert_eq(json_array_size(caps), 1);
    cr_assert_eq(json_array_size(json_array_get(caps, 0)), 1);
    cr_assert_str_eq(json_string_value(json_array_get(json_array_get(caps, 0), 0)), "gpu");
    cr_assert_null(json_object_get(h, "Devices"));
    json_t *pb = json_array_get(json_object_get(json_object_get(h, "PortBindings"), "8888/tcp"), 0);
    cr_assert_str_eq(str(pb, "HostPort"), "");
    json_decref(b);
}

Test(engine_body, r17_docker_body_cdi_and_explicit_devices_shape) {
    static const char *const names[] = {"nvidia.com/gpu=GPU-aaaa"};
    static const EngineDevice devs[] = {{"/dev/kfd", "/dev/kfd"},
                                        {"/dev/dri/renderD129", "/dev/dri/renderD129"}};
    static const char *const extra[] = {"ROCR_VISIBLE_DEVICES=0"};
    EngineGpus g = {.cdi_names = names,
                    .n_cdi_names = 1,
                    .devices = devs,
                    .n_devices = 2,
                    .env = extra,
                    .n_env = 1};
    WorkloadSpec s = spec();
    s.oci_runtime = NULL;
    s.command = NULL;
    json_t *b = engine_create_body(ENGINE_DOCKER, &s, &g);
    cr_assert_null(json_object_get(b, "Cmd"), "no command: the image's own");
    json_t *h = json_object_get(b, "HostConfig");
    cr_assert_null(json_object_get(h, "Runtime"), "no runtime asked: the engine's default");
    json_t *r = json_array_get(json_object_get(h, "DeviceRequests"), 0);
    cr_assert_str_eq(str(r, "Driver"), "cdi");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(r, "DeviceIDs"), 0)),
                     "nvidia.com/gpu=GPU-aaaa");
    json_t *d = json_object_get(h, "Devices");
    cr_assert_eq(json_array_size(d), 2);
    /* DeviceMapping: PathOnHost, PathInContainer, CgroupPermissions. */
    cr_assert_str_eq(str(json_array_get(d, 1), "PathOnHost"), "/dev/dri/renderD129");
    cr_assert_str_eq(str(json_array_get(d, 1), "PathInContainer"), "/dev/dri/renderD129");
    cr_assert_str_eq(str(json_array_get(d, 1), "CgroupPermissions"), "rwm");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(b, "Env"), 1)),
                     "ROCR_VISIBLE_DEVICES=0");
    json_decref(b);
}

Test(engine_body, r17_libpod_body_uses_cdi_names_and_env_map) {
    static const char *const names[] = {"nvidia.com/gpu=GPU-aaaa"};
    EngineGpus g = {.cdi_names = names, .n_cdi_names = 1};
    WorkloadSpec s = spec();
    json_t *b = engine_create_body(ENGINE_LIBPOD, &s, &g);
    cr_assert_str_eq(str(b, "name"), "einsora-42");
    cr_assert_str_eq(str(b, "image"), "einsora/notebook:1");
    cr_assert_str_eq(str(json_object_get(b, "env"), "TOKEN"), "x");
    cr_assert_str_eq(str(json_object_get(b, "labels"), "einsora.request"), "42");
    cr_assert_str_eq(str(b, "oci_runtime"), "kata-runtime");
    cr_assert_str_eq(str(json_array_get(json_object_get(b, "devices"), 0), "path"),
                     "nvidia.com/gpu=GPU-aaaa");
    cr_assert_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(b, "portmappings"), 0), "container_port")),
                 8888);
    json_decref(b);
}

/* --stop-grace reaches the engine in the parameter its dialect reads (libpod ignores
 * Docker's `t` and waits its own 10 s). */
Test(engine_body, r17_stop_grace_goes_in_each_dialects_own_parameter) {
    char *lp = engine_stop_path(ENGINE_LIBPOD, "einsora-7", 1),
         *dk = engine_stop_path(ENGINE_DOCKER, "einsora-7", 30);
    cr_expect_str_eq(lp, "/containers/einsora-7/stop?timeout=1");
    cr_expect_str_eq(dk, "/containers/einsora-7/stop?t=30");
    free(lp), free(dk);
}

Test(engine_body, r17_inspect_states) {
    struct {
        const char *json;
        WorkloadStatus want;
        int code;
        const char *words;
    } cases[] = {
            {"{\"State\":{\"Status\":\"running\",\"ExitCode\":0}}", WORKLOAD_RUNNING, 0, ""},
            {"{\"State\":{\"Status\":\"created\"}}", WORKLOAD_STARTING, 0, ""},
            {"{\"State\":{\"Status\":\"exited\",\"ExitCode\":3}}", WORKLOAD_EXITED, 3,
             "exited with code 3"},
            {"{\"State\":{\"Status\":\"exited\",\"ExitCode\":137,\"OOMKilled\":true}}",
             WORKLOAD_EXITED, 137, "out of memory"},
            {"{\"State\":{\"Status\":\"exited\",\"ExitCode\":127,\"Error\":\"exec: not found\"}}",
             WORKLOAD_FAILED, 127, "exec: not found"},
            {"{\"State\":{\"Status\":\"dead\"}}", WORKLOAD_FAILED, 0, "dead"},
            /* A stop in progress still holds its GPUs (R7, R17): not ended, not freed. */
            {"{\"State\":{\"Status\":\"stopping\",\"ExitCode\":0}}", WORKLOAD_RUNNING, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = parse(cases[i].json);
        WorkloadState st;
        Error err = {0};
        cr_assert_eq(engine_state_from_inspect(j, &st, NULL, &err), 0);
        cr_assert_eq(st.status, cases[i].want, "case %zu", i);
        cr_assert_eq(st.exit_code, cases[i].code, "case %zu", i);
        cr_assert(strstr(st.message, cases[i].words), "case %zu: %s", i, st.message);
        json_decref(j);
    }
    json_t *bad = parse("{\"Id\":\"x\"}");
    WorkloadState st;
    Error err = {0};
    cr_assert_eq(engine_state_from_inspect(bad, &st, NULL, &err), -EPROTO);
    json_decref(bad);
}

static const char nvidia_ctk_spec[] =
        "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n"
        "- name: GPU-aaaa\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
        "- name: \"0\"\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
        "- name: GPU-bbbb\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia1\n      "
        "hostPath: /host/nvidia1\n"
        "containerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n  deviceNodes:\n  - path: "
        "/dev/nvidiactl\n"
        "  - path: /dev/nvidia-uvm\n  hooks:\n  - hookName: createContainer\n    path: "
        "/usr/bin/nvidia-ctk\n";

Test(cdi, r17_cdi_resolves_the_device_and_the_common_edits) {
    CdiDevice d = {0};
    Error err = {0};
    cr_assert_eq(cdi_resolve_text(nvidia_ctk_spec, strlen(nvidia_ctk_spec), "t.yaml",
                                  "nvidia.com/gpu=GPU-bbbb", &d, &err),
                 0, "%s", error_message(&err));
    cr_assert_eq(d.n_nodes, 3);
    cr_assert_str_eq(d.nodes[0].path, "/dev/nvidia1");
    cr_assert_str_eq(d.nodes[0].host_path, "/host/nvidia1");
    cr_assert_str_eq(d.nodes[1].host_path, "/dev/nvidiactl", "hostPath defaults to path");
    cr_assert_eq(d.n_env, 1);
    cr_assert_str_eq(d.env[0], "NVIDIA_VISIBLE_DEVICES=void");
    cdi_device_done(&d);
    cr_assert_eq(cdi_resolve_text(nvidia_ctk_spec, strlen(nvidia_ctk_spec), "t.yaml",
                                  "nvidia.com/gpu=GPU-cccc", &d, &err),
                 -ENOENT);
    cr_assert_eq(cdi_resolve_text(nvidia_ctk_spec, strlen(nvidia_ctk_spec), "t.yaml",
                                  "amd.com/gpu=GPU-aaaa", &d, &err),
                 -ENOENT);
    /* JSON specs too (nvidia-ctk --format=json). */
    const char *json = "{\"cdiVersion\":\"0.6.0\",\"kind\":\"nvidia.com/"
                       "gpu\",\"devices\":[{\"name\":\"MIG-1\","
                       "\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/nvidia-caps/"
                       "nvidia-cap21\"}]}}]}";
    cr_assert_eq(cdi_resolve_text(json, strlen(json), "t.json", "nvidia.com/gpu=MIG-1", &d, &err),
                 0, "%s", error_message(&err));
    cr_assert_str_eq(d.nodes[0].path, "/dev/nvidia-caps/nvidia-cap21");
    cdi_device_done(&d);
}

Test(cdi, r17_cdi_malformed_specs_and_names_are_refused_clearly) {
    const char *bad[] = {
            "kind: nvidia.com/gpu\ndevices: []\n", /* no cdiVersion */
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- containerEdits: {}\n", /* no name
                                                                                          */
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: X\n  containerEdits:\n    "
            "deviceNodes:\n    - path: relative\n",
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: X\n  containerEdits:\n    "
            "env: [NOEQUALS]\n",
            "[1, 2",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CdiDevice d = {0};
        Error err = {0};
        cr_assert_eq(
                cdi_resolve_text(bad[i], strlen(bad[i]), "bad.yaml", "nvidia.com/gpu=X", &d, &err),
                -EINVAL, "case %zu", i);
        cr_assert(strstr(err.message, "bad.yaml:"), "the sentence has the position: %s",
                  err.message);
    }
    CdiDevice d = {0};
    Error err = {0};
    cr_assert_eq(cdi_resolve(NULL, "no-equals-sign", &d, &err), -EINVAL);
    cr_assert(strstr(err.message, "is not a CDI device name"), "%s", err.message);
    Error e2 = {0};
    cr_assert_eq(cdi_resolve("/nonexistent-cdi-dir", "nvidia.com/gpu=GPU-x", &d, &e2), -ENOENT);
    cr_assert(strstr(e2.message, "has no CDI entry in /nonexistent-cdi-dir"), "%s", e2.message);
    cr_assert(strstr(e2.message, "nvidia-ctk cdi generate"), "%s", e2.message);
}
