/* test-agent-process.c: end to end, R10 R14 R17: the real control plane and the real agent on
 * the Mac fixture machine, with a shell script standing in for the MLX server (--mlx-server).
 * An endpoint placed on the Mac runs as a native process with the model and the requested port
 * on its command line and its URL reported; a server that exits ends its request with its exit
 * code; an agent killed and restarted adopts the process and never starts it twice; release
 * stops it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../fleet/fleet-helpers.h"
#include "helpers.h"
#include "util/fileio.h"
#include "util/strutil.h"

#define NODE "mac-m2"

static TestServer ts;
static char tmp[64], state_dir[128], procs[160], server[128], *token;
static pid_t agent;

static const char server_sh[] = "#!/bin/sh\n"
                                "echo \"mlx server: $*\"\n"
                                "echo \"agent token: ${EINSORA_TOKEN:-none}\"\n"
                                "[ \"$MODE\" = exit3 ] && exit 3\n"
                                "while :; do sleep 0.05; done\n";

static void sleep_ms(int ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* heartbeat: the agent's interval in seconds, as its flag takes it; caps: its capabilities
 * (NULL: none) */
static void spawn_agent_with(const char *heartbeat, const char *caps) {
    static char apple[256];
    snprintf(apple, sizeof(apple), "%s/machines/mac-m2-max-64gb.txt", TEST_FIXTURES);
    const char *args[] = {"--site",
                          "home",
                          "--site-kind",
                          "solo",
                          "--sysfs-root",
                          TEST_FIXTURES "/machines/no-accelerator/sys",
                          "--proc-root",
                          TEST_FIXTURES "/machines/no-accelerator/proc",
                          "--simulate",
                          "--no-nvml",
                          "--apple-fixture",
                          apple,
                          "--mlx-server",
                          server,
                          "--stop-grace",
                          "1",
                          "--address",
                          "127.0.0.1",
                          "--heartbeat",
                          heartbeat,
                          caps ? "--capabilities" : NULL,
                          caps,
                          NULL};
    agent = fleet_spawn_agent(ts.url, token, NODE, state_dir, args, NULL);
}

static void spawn_agent_beating(const char *heartbeat) {
    spawn_agent_with(heartbeat, NULL);
}

static void spawn_agent(void) {
    spawn_agent_beating("1");
}

static void stop_agent(bool hard) {
    if (agent > 0) {
        kill(agent, hard ? SIGKILL : SIGTERM);
        waitpid(agent, NULL, 0);
        agent = 0;
    }
}

/* The process group a pid file names (0: none). */
static pid_t group_of(long id) {
    _cleanup_free_ char *path = strprintf("%s/%ld.pid", procs, id), *text = NULL;
    return read_full_file(path, 256, &text, NULL) >= 0 ? (pid_t)atoi(text) : 0;
}

static void setup(void) {
    snprintf(tmp, sizeof(tmp), "/tmp/einsora-agent-proc-XXXXXX");
    cr_assert(mkdtemp(tmp));
    snprintf(state_dir, sizeof(state_dir), "%s/agent", tmp);
    snprintf(procs, sizeof(procs), "%s/processes.d", state_dir);
    snprintf(server, sizeof(server), "%s/mlx_lm.server", tmp);
    cr_assert_eq(mkdir(state_dir, 0700), 0);
    FILE *f = fopen(server, "w");
    cr_assert(f);
    fputs(server_sh, f);
    fclose(f);
    cr_assert_eq(chmod(server, 0755), 0);
    ts_start(&ts);
    token = ts_token(&ts, NODE, "node", NODE);
    spawn_agent();
    for (int i = 0; i < 600 && ts_call(&ts, ts.admin, "GET", "/v1/nodes/" NODE, NULL, NULL) != 200;
         i++)
        sleep_ms(100);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/" NODE, NULL, NULL), 200,
                 "the agent registered");
}

static void teardown(void) {
    stop_agent(false);
    /* The servers outlive their agent by design: end whatever a failed test left running. */
    DIR *d = opendir(procs);
    for (struct dirent *e; d && (e = readdir(d));) {
        long id = atol(e->d_name);
        pid_t g = id > 0 && strstr(e->d_name, ".pid") ? group_of(id) : 0;
        if (g > 1)
            kill(-g, SIGKILL);
    }
    if (d)
        closedir(d);
    ts_stop(&ts);
    free(token);
    (void)remove_temp_tree(tmp);
}

TestSuite(agent_process, .init = setup, .fini = teardown, .timeout = 300);

static long submit(const char *body) {
    return ts_submit(&ts, body);
}

/* Poll until the request is in state (generous deadline); returns its JSON. */
static json_t *wait_state(long id, const char *state) {
    return ts_wait_state(&ts, id, state, state_dir);
}

static bool file_has(const char *path, const char *words) {
    _cleanup_free_ char *text = NULL;
    return read_full_file(path, 1 << 20, &text, NULL) >= 0 && strstr(text, words);
}

static void wait_file_has(const char *path, const char *words) {
    for (int i = 0; i < 1200 && !file_has(path, words); i++)
        sleep_ms(50);
    cr_assert(file_has(path, words), "%s never said '%s'", path, words);
}

static void release(long id) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
}

static void wait_gone(long id) {
    for (int i = 0; i < 1200 && group_of(id); i++)
        sleep_ms(50);
    cr_assert_eq(group_of(id), 0, "the process of %ld is gone", id);
}

Test(agent_process, r14_a_mac_endpoint_runs_as_a_process_and_release_stops_it) {
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"mlx-"
                     "community/x-4bit\","
                     "\"ports\":[18123]}");
    json_t *j = wait_state(id, "active");
    const char *url = json_string_value(json_object_get(json_object_get(j, "placement"), "url"));
    cr_assert_str_eq(url, "http://127.0.0.1:18123/v1", "the URL uses the requested port");
    json_decref(j);
    _cleanup_free_ char *log = strprintf("%s/%ld.log", procs, id);
    wait_file_has(log, "mlx server: --model mlx-community/x-4bit --host 127.0.0.1 --port 18123");
    pid_t g = group_of(id);
    cr_assert_gt(g, 1);
    cr_assert_eq(kill(g, 0), 0, "its process runs");
    release(id);
    wait_gone(id);
    for (int i = 0; i < 200 && kill(g, 0) == 0; i++)
        sleep_ms(50);
    _cleanup_free_ char *stat = strprintf("/proc/%d/stat", (int)g), *text = NULL;
    cr_assert(read_full_file(stat, 4096, &text, NULL) < 0 || strstr(text, ") Z"),
              "the wrapper ended");
}

/* Processes share the host's ports (R17: each runs, reachable at its own URL): two endpoints
 * on one Mac get two ports, and neither gets the agent's node token from its environment. */
Test(agent_process, r17_two_process_endpoints_get_their_own_ports_and_not_the_agents_token) {
    long a = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"m\"}");
    json_t *ja = wait_state(a, "active");
    long b = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"m\"}");
    json_t *jb = wait_state(b, "active");
    const char *ua = json_string_value(json_object_get(json_object_get(ja, "placement"), "url")),
               *ub = json_string_value(json_object_get(json_object_get(jb, "placement"), "url"));
    cr_assert_str_eq(ua, "http://127.0.0.1:8080/v1", "the runtime's port for the first");
    cr_assert_str_eq(ub, "http://127.0.0.1:8081/v1", "the next free one for the second");
    json_decref(ja);
    json_decref(jb);
    _cleanup_free_ char *log = strprintf("%s/%ld.log", procs, b);
    wait_file_has(log, "--port 8081");
    wait_file_has(log, "agent token: none");
    release(a);
    release(b);
    wait_gone(a);
    wait_gone(b);
}

Test(agent_process, r17_a_process_that_exits_ends_its_request_with_its_code) {
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"m\","
                     "\"env\":[\"MODE=exit3\"]}");
    json_t *j = wait_state(id, "ended");
    cr_assert_str_eq(json_string_value(json_object_get(j, "reason")), "exited with code 3");
    json_decref(j);
    wait_gone(id);
    /* The list says how it ended too: a batch job's outcome at a glance. */
    char *out = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&out, &err, "requests", "--server", ts.url, "--token", ts.admin, NULL),
                 0, "%s", err);
    cr_expect(strstr(out, "exited with code 3"), "%s", out);
    free(out), free(err);
}

/* The allocations on the node's GPUs, as the control plane counts them. */
static json_int_t allocations(void) {
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/" NODE, NULL, &j), 200);
    json_int_t n = 0;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(j, "devices"), i, d) n +=
            json_integer_value(json_object_get(d, "allocations"));
    json_decref(j);
    return n;
}

Test(agent_process, r17_a_process_that_exits_frees_its_gpu_at_once_not_at_the_next_heartbeat) {
    /* A heartbeat far longer than the test: whatever the agent reports after its first one
     * came without a heartbeat, whatever the machine's speed. */
    stop_agent(false);
    spawn_agent_beating("600");
    json_int_t seen = fleet_await_heartbeat(&ts, NODE, 600);
    cr_assert_eq(allocations(), 0, "nothing holds the node's GPU yet");
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"m\","
                     "\"env\":[\"MODE=exit3\"]}");
    json_t *j = wait_state(id, "ended");
    cr_assert_str_eq(json_string_value(json_object_get(j, "reason")), "exited with code 3");
    json_decref(j);
    cr_assert_eq(allocations(), 0, "its GPU is free again");
    cr_assert_eq(fleet_last_seen_ms(&ts, NODE), seen,
                 "the exit was reported with a heartbeat, not at once");
    wait_gone(id);
}

Test(agent_process, r14_an_endpoint_without_a_model_fails_with_a_sentence) {
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\"}");
    json_t *j = wait_state(id, "ended");
    const char *reason = json_string_value(json_object_get(j, "reason"));
    cr_assert(strstr(reason, "needs a model"), "%s", reason);
    json_decref(j);
}

Test(agent_process, r17_an_agent_restarted_adopts_its_process_and_never_starts_it_twice) {
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"m\"}");
    json_decref(wait_state(id, "active"));
    pid_t g = group_of(id);
    cr_assert_gt(g, 1);
    stop_agent(true);
    /* What the agent remembered is lost: the pid files are the truth. */
    char path[256];
    snprintf(path, sizeof(path), "%s/running", state_dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/processes", state_dir);
    unlink(path);
    cr_assert_eq(kill(g, 0), 0, "the server outlives its agent");
    spawn_agent();
    _cleanup_free_ char *alog = strprintf("%s/agent.log", state_dir);
    wait_file_has(alog, "adopted the workload of request");
    json_decref(wait_state(id, "active"));
    cr_assert_eq(group_of(id), g, "the same process: not started twice");
    _cleanup_free_ char *log = strprintf("%s/%ld.log", procs, id), *text = NULL;
    cr_assert_geq(read_full_file(log, 1 << 20, &text, NULL), 0);
    size_t starts = 0;
    for (const char *p = text; (p = strstr(p, "mlx server:")); p++)
        starts++;
    cr_assert_eq(starts, 1, "the server was started once: %s", text);
    release(id);
    wait_gone(id);
}

/* An inventory push the control plane refuses while a workload runs (its description changed:
 * a capability added) is tried again every turn, and its refusal logged once, not at every
 * heartbeat. */
Test(agent_process, r4_a_push_refused_while_a_workload_runs_is_logged_once) {
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\",\"model\":\"m\"}");
    json_decref(wait_state(id, "active"));
    stop_agent(true);
    const char *route = "einsora_api_request_seconds_count{route=\"PUT /v1/nodes/{name}\"}";
    double before = ts_metric(&ts, route);
    spawn_agent_with("1", "kata");
    /* Three pushes refused (a condition, with a generous deadline). */
    for (int i = 0; i < 1200 && ts_metric(&ts, route) < before + 3; i++)
        sleep_ms(50);
    cr_assert_geq(ts_metric(&ts, route), before + 3, "the agent tried its push again");
    _cleanup_free_ char *log = strprintf("%s/agent.log", state_dir), *text = NULL;
    cr_assert_geq(read_full_file(log, 1 << 20, &text, NULL), 0);
    size_t refusals = 0;
    for (const char *p = text; (p = strstr(p, "PUT /v1/nodes/" NODE ": 409")); p++)
        refusals++;
    cr_expect_eq(refusals, 1, "the same refusal logged %zu times:\n%s", refusals, text);
    release(id);
    wait_gone(id);
}
