/* test-workload-ports.c: a request's own container ports (R17) - parsed strictly, stored and
 * handed to the agent, published exactly (nothing else) - and process endpoints (R10, R14):
 * which placements the agent runs as a native process, and their server command line. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "agent/workloads.h"
#include "drivers/engine-body.h"
#include "wire/request.h"

Test(workload_ports, r17_request_ports_are_parsed_strictly) {
    ApiRequest r;
    Error err = {0};
    const char *ok = "{\"kind\":\"notebook\",\"class\":\"cpu\",\"ports\":[8888,6006]}";
    cr_assert_eq(api_request_parse(ok, strlen(ok), &r, &err), 0, "%s", error_message(&err));
    cr_assert_eq(r.n_ports, 2);
    cr_assert_eq(r.ports[1], 6006);
    /* Stored as JSON and read back the same (the control plane's state and the agent's item). */
    json_t *j = api_request_to_json(&r);
    cr_assert_eq(json_integer_value(json_array_get(json_object_get(j, "ports"), 0)), 8888);
    ApiRequest back;
    cr_assert_eq(api_request_from_json(j, &back, &err), 0, "%s", error_message(&err));
    cr_assert_eq(back.n_ports, 2);
    cr_assert_eq(back.ports[0], 8888);
    json_decref(j);
    struct {
        const char *body, *words;
    } bad[] = {
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[]}", "list of 1 to 16"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":8080}", "list of 1 to 16"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[0]}", "from 1 to 65535"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[65536]}", "from 1 to 65535"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[-1]}", "from 1 to 65535"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[\"80\"]}", "from 1 to 65535"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[80.5]}", "from 1 to 65535"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[80,81,80]}", "twice"},
            {"{\"kind\":\"container\",\"class\":\"cpu\",\"ports\":[1,2,3,4,5,6,7,8,9,10,11,12,13,"
             "14,15,16,17]}",
             "list of 1 to 16"},
            {"{\"kind\":\"vm\",\"class\":\"cpu\",\"ports\":[22]}", "not VMs"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Error e = {0};
        cr_assert_eq(api_request_parse(bad[i].body, strlen(bad[i].body), &r, &e), -EINVAL,
                     "case %zu", i);
        cr_assert(strstr(e.message, bad[i].words), "case %zu: %s", i, e.message);
    }
}

static json_t *work(const char *kind, const char *method, const char *rt, const char *req) {
    char text[512];
    snprintf(text, sizeof(text),
             "{\"id\":7,\"kind\":\"%s\",\"request\":%s,\"placement\":{\"method\":\"%s\",\"endpoint_"
             "runtime\":\"%s\","
             "\"container_runtime\":\"runc\",\"addresses\":[]}}",
             kind, req, method, rt);
    json_t *j = json_loads(text, 0, NULL);
    cr_assert(j, "%s", text);
    return j;
}

Test(workload_ports, r17_the_engine_publishes_exactly_the_requested_ports) {
    AgentWorkloadConfig cfg = {.images = "notebook=nb:1"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = work("notebook", "cpu", "none", "{\"ports\":[6006,8888]}");
    cr_assert_eq(agent_work_spec(&cfg, w, NULL, &buf, &s, &err), 0, "%s", error_message(&err));
    cr_assert_eq(s.n_ports, 2, "the request's ports, not the kind's 8888 added");
    cr_assert_eq(s.ports[0], 6006);
    cr_assert_eq(s.ports[1], 8888);
    json_decref(w);
    w = work("notebook", "cpu", "none", "{}");
    cr_assert_eq(agent_work_spec(&cfg, w, NULL, &buf, &s, &err), 0, "%s", error_message(&err));
    cr_assert_eq(s.n_ports, 1);
    cr_assert_eq(s.ports[0], 8888, "none asked: the kind's own");
    json_decref(w);
    w = work("notebook", "cpu", "none", "{\"ports\":[70000]}");
    cr_assert_eq(agent_work_spec(&cfg, w, NULL, &buf, &s, &err), -EINVAL);
    cr_assert(strstr(err.message, "'ports'"), "%s", err.message);
    json_decref(w);
}

Test(workload_ports, r14_which_endpoints_run_as_processes) {
    AgentWorkloadConfig plain = {0},
                        cpu_proc = {.llama_server = "/x", .cpu_endpoints_as_process = true};
    json_t *mac = work("endpoint", "apple-whole", "mlx", "{}");
    json_t *cpu = work("endpoint", "cpu", "llama.cpp", "{}");
    json_t *nb = work("notebook", "apple-whole", "none", "{}");
    cr_assert(agent_work_is_process(&plain, mac), "a Mac endpoint is always a process");
    cr_assert(!agent_work_is_process(&plain, cpu),
              "a cpu endpoint is a container unless configured");
    cr_assert(agent_work_is_process(&cpu_proc, cpu));
    cr_assert(!agent_work_is_process(&cpu_proc, nb), "only endpoints");
    json_decref(mac);
    json_decref(cpu);
    json_decref(nb);
}

Test(workload_ports, r14_process_endpoint_command_line) {
    AgentWorkloadConfig cfg = {.mlx_server = "/opt/mlx/bin/mlx_lm.server",
                               .llama_server = "/usr/bin/llama-server"};
    AgentSpecBuf buf;
    WorkloadSpec s;
    Error err = {0};
    json_t *w = work("endpoint", "apple-whole", "mlx",
                     "{\"model\":\"mlx-community/x-4bit\",\"env\":[\"HF_HOME=/h\"]}");
    cr_assert_eq(agent_work_process_spec(&cfg, w, NULL, 0, &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.id, "7");
    cr_assert_str_eq(s.command[0], "/opt/mlx/bin/mlx_lm.server", "this agent's binary");
    cr_assert_str_eq(s.command[2], "mlx-community/x-4bit");
    cr_assert_str_eq(s.command[6], "8080");
    cr_assert_str_eq(s.env[0], "HF_HOME=/h");
    cr_assert_eq(s.ports[0], 8080);
    json_decref(w);
    /* A CPU llama.cpp endpoint with its own port: no layer on a GPU, the request's port. */
    w = work("endpoint", "cpu", "llama.cpp", "{\"model\":\"/m/q4.gguf\",\"ports\":[9001]}");
    cr_assert_eq(agent_work_process_spec(&cfg, w, NULL, 0, &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.command[0], "/usr/bin/llama-server");
    cr_assert_str_eq(s.command[6], "9001");
    cr_assert_str_eq(s.command[8], "0");
    cr_assert_eq(s.ports[0], 9001);
    /* No GPU for a cpu placement: the request's own CUDA_VISIBLE_DEVICES does not win. */
    json_decref(w);
    w = work("endpoint", "cpu", "llama.cpp",
             "{\"model\":\"/m/q4.gguf\",\"env\":[\"A=1\",\"CUDA_VISIBLE_DEVICES=0,1\"]}");
    cr_assert_eq(agent_work_process_spec(&cfg, w, NULL, 0, &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.env[0], "A=1");
    size_t n_env = 0, n_cuda = 0;
    for (; s.env[n_env]; n_env++)
        n_cuda += strncmp(s.env[n_env], "CUDA_VISIBLE_DEVICES=", 21) == 0;
    cr_assert_eq(n_cuda, 1, "one CUDA_VISIBLE_DEVICES");
    bool hidden = false;
    for (size_t i = 0; i < n_env; i++)
        hidden |= strcmp(s.env[i], "CUDA_VISIBLE_DEVICES=") == 0;
    cr_assert(hidden, "empty: no GPU");
    json_decref(w);
    /* Processes share the host's ports: the next endpoint takes the first port none of this
     * agent's other processes holds. */
    static const unsigned taken[] = {8080, 8081, 9000};
    w = work("endpoint", "cpu", "llama.cpp", "{\"model\":\"/m/q4.gguf\"}");
    cr_assert_eq(agent_work_process_spec(&cfg, w, taken, 3, &buf, &s, &err), 0, "%s",
                 error_message(&err));
    cr_assert_str_eq(s.command[6], "8082");
    cr_assert_eq(s.ports[0], 8082);
    json_decref(w);
    struct {
        AgentWorkloadConfig cfg;
        const char *method, *rt, *req, *words;
    } bad[] = {
            {{.llama_server = "/l"}, "apple-whole", "mlx", "{\"model\":\"m\"}", "--mlx-server"},
            {{.mlx_server = "/m"},
             "apple-whole",
             "llama.cpp",
             "{\"model\":\"m\"}",
             "--llama-server"},
            {cfg, "apple-whole", "vllm", "{\"model\":\"m\"}", "vLLM does not run on a Mac"},
            {cfg, "apple-whole", "mlx", "{}", "needs a model"},
            {cfg, "apple-whole", "mlx", "{\"model\":\"m\",\"ports\":[0]}", "'ports'"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Error e = {0};
        w = work("endpoint", bad[i].method, bad[i].rt, bad[i].req);
        cr_assert_lt(agent_work_process_spec(&bad[i].cfg, w, NULL, 0, &buf, &s, &e), 0, "case %zu",
                     i);
        cr_assert(strstr(e.message, bad[i].words), "case %zu: %s", i, e.message);
        json_decref(w);
    }
}

Test(workload_ports, r17_engine_bodies_publish_exactly_the_given_ports) {
    static const unsigned ports[] = {6006, 8888};
    WorkloadSpec s = {.id = "9", .kind = "notebook", .image = "nb:1", .ports = ports, .n_ports = 2};
    EngineGpus g = {0};
    json_t *b = engine_create_body(ENGINE_DOCKER, &s, &g);
    json_t *exposed = json_object_get(b, "ExposedPorts");
    cr_assert_eq(json_object_size(exposed), 2, "exactly the two, nothing else");
    cr_assert(json_object_get(exposed, "6006/tcp") && json_object_get(exposed, "8888/tcp"));
    cr_assert_eq(
            json_object_size(json_object_get(json_object_get(b, "HostConfig"), "PortBindings")), 2);
    cr_assert_str_eq(
            json_string_value(json_object_get(json_object_get(b, "Labels"), ENGINE_LABEL_PORT)),
            "6006");
    json_decref(b);
    b = engine_create_body(ENGINE_LIBPOD, &s, &g);
    json_t *maps = json_object_get(b, "portmappings");
    cr_assert_eq(json_array_size(maps), 2);
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(maps, 0), "container_port")),
                 6006);
    cr_assert_str_eq(
            json_string_value(json_object_get(json_object_get(b, "labels"), ENGINE_LABEL_PORT)),
            "6006");
    json_decref(b);
}

Test(workload_ports, r17_url_uses_the_first_requested_port) {
    /* The engine lists its ports sorted by name; the first requested one (8888 here) is the URL's.
     */
    const char *inspect =
            "{\"State\":{\"Status\":\"running\",\"ExitCode\":0},"
            "\"Config\":{\"Labels\":{\"einsora.request\":\"9\",\"einsora.port\":\"8888\"}},"
            "\"NetworkSettings\":{\"Ports\":{\"6006/"
            "tcp\":[{\"HostIp\":\"\",\"HostPort\":\"41000\"}],"
            "\"8888/tcp\":[{\"HostIp\":\"\",\"HostPort\":\"41001\"}]}}}";
    json_t *j = json_loads(inspect, 0, NULL);
    WorkloadState st;
    Error err = {0};
    cr_assert_eq(engine_state_from_inspect(j, &st, NULL, &err), 0, "%s", error_message(&err));
    cr_assert_eq(st.status, WORKLOAD_RUNNING);
    cr_assert_eq(st.host_port, 41001);
    json_decref(j);
    AgentWorkloadConfig cfg = {.address = "lab-1"};
    json_t *w = work("notebook", "cpu", "none", "{\"ports\":[8888,6006]}");
    char url[200];
    agent_work_url(&cfg, w, st.host_port, url, sizeof(url));
    cr_assert_str_eq(url, "http://lab-1:41001/");
    json_decref(w);
}

Test(workload_ports, r14_an_endpoint_request_takes_a_model) {
    /* 'model' is checked against the kind once the kind is known, whatever the field order. */
    ApiRequest r;
    Error err = {0};
    const char *ok = "{\"kind\":\"endpoint\",\"class\":\"cpu\",\"model\":\"/m/q4.gguf\"}";
    cr_assert_eq(api_request_parse(ok, strlen(ok), &r, &err), 0, "%s", error_message(&err));
    cr_assert_str_eq(r.model, "/m/q4.gguf");
    const char *bad = "{\"model\":\"/m/q4.gguf\",\"kind\":\"notebook\",\"class\":\"cpu\"}";
    cr_assert_eq(api_request_parse(bad, strlen(bad), &r, &err), -EINVAL);
    cr_assert(strstr(err.message, "'model' applies to kind endpoint only"), "%s", err.message);
}
