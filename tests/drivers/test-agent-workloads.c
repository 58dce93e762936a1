/* test-agent-workloads.c: end to end, R17: the real control plane, the real agent on a fixture
 * machine (8 H100s whose NVML UUIDs match the fake GPUs of the Podman fixture's CDI spec), and a
 * real Podman service. A placement starts exactly one container with its GPU; a container that
 * exits frees its GPU (request `ended`, exit code in the reason); release stops it; a container
 * killed from outside ends its request; a missing image fails it with the engine's sentence;
 * an agent killed and restarted adopts its container and never starts it twice. A passthrough
 * VM on the GPU the fixture has bound to vfio-pci goes to libvirt (its test driver, inside the
 * agent's process) and release stops it. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "drivers/engine.h"
#include "../fleet/fleet-helpers.h"
#include "podman-fixture.h"
#include "helpers.h"
#include "util/fileio.h"

static PodmanFixture pm;
static TestServer ts;
static bool usable;
static char why[160], state_dir[160], nvml[160], *agent_token;
static pid_t agent;

#define NODE "lab-h100"

/* heartbeat: the agent's interval in seconds, as its flag takes it */
static void spawn_agent_beating(const char *heartbeat) {
    static char sys[256], proc[256], sock_arg[160];
    snprintf(sys, sizeof(sys), "%s/machines/hgx-h100-8gpu/sys", TEST_FIXTURES);
    snprintf(proc, sizeof(proc), "%s/machines/hgx-h100-8gpu/proc", TEST_FIXTURES);
    snprintf(sock_arg, sizeof(sock_arg), "%s", pm.socket);
    const char *args[] = {"--site",
                          "lab",
                          "--site-kind",
                          "lab",
                          "--sysfs-root",
                          sys,
                          "--proc-root",
                          proc,
                          "--simulate",
                          "--nvml-lib",
                          FAKE_NVML_LIB,
                          "--engine-socket",
                          sock_arg,
                          "--engine-api",
                          "libpod",
                          "--images",
                          "notebook=" PODMAN_PROBE_IMAGE ",container=" PODMAN_SLEEPER_IMAGE
                          ",endpoint=localhost/no-such:1,vm=/var/lib/einsora/images/test.qcow2",
                          "--vm-uri",
                          "test:///default",
                          "--vm-domain-type",
                          "test",
                          "--stop-grace",
                          "1",
                          "--address",
                          "127.0.0.1",
                          "--heartbeat",
                          heartbeat,
                          NULL};
    agent = fleet_spawn_agent(ts.url, agent_token, NODE, state_dir, args, nvml);
}

static void spawn_agent(void) {
    spawn_agent_beating("1");
}

/* The fixture machine's NVML answers with the UUIDs of the Podman fixture's fake GPUs. */
static void write_nvml(void) {
    char *text = NULL, src[256];
    snprintf(src, sizeof(src), "%s/machines/hgx-h100-8gpu/nvml.txt", TEST_FIXTURES);
    cr_assert_geq(read_full_file(src, 1 << 20, &text, NULL), 0);
    for (int i = 0; i < PODMAN_GPUS; i++) {
        char old[64];
        snprintf(old, sizeof(old), "GPU-5d3c1a0e-77f2-4b1e-9c3d-%012d", i);
        char *p = strstr(text, old);
        cr_assert(p, "fixture UUID %s", old);
        memcpy(p, pm.uuid[i], strlen(old)); /* same length by construction */
    }
    snprintf(nvml, sizeof(nvml), "%s/nvml.txt", pm.dir);
    FILE *f = fopen(nvml, "w");
    fputs(text, f);
    fclose(f);
    free(text);
}

static bool node_registered(void) {
    return ts_call(&ts, ts.admin, "GET", "/v1/nodes/" NODE, NULL, NULL) == 200;
}

static void setup(void) {
    usable = podman_fixture_usable(why, sizeof(why));
    if (!usable)
        return;
    podman_fixture_start(&pm);
    cr_assert_eq(strlen(pm.uuid[0]), strlen("GPU-5d3c1a0e-77f2-4b1e-9c3d-000000000000"));
    write_nvml();
    ts_start(&ts);
    agent_token = ts_token(&ts, NODE, "node", NODE);
    snprintf(state_dir, sizeof(state_dir), "%s/agent", pm.dir);
    mkdir(state_dir, 0700);
    /* The machine's last GPU is on vfio-pci (simulated binding): a VM can take it (R7). */
    char sim[256];
    snprintf(sim, sizeof(sim), "%s/sim-binding", state_dir);
    FILE *f = fopen(sim, "w");
    fputs("0000:db:00.0 vfio\n", f);
    fclose(f);
    spawn_agent();
    for (int i = 0; i < 600 && !node_registered(); i++)
        nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
    cr_assert(node_registered(), "the agent registered its node");
}

static void teardown(void) {
    if (!usable)
        return;
    if (agent > 0) {
        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
    }
    ts_stop(&ts);
    free(agent_token);
    podman_fixture_stop(&pm);
}

TestSuite(agent_workloads, .init = setup, .fini = teardown, .timeout = 300);

#define NEED_PODMAN()                                                                              \
    do {                                                                                           \
        if (!usable)                                                                               \
            cr_skip_test("no Podman service: %s", why);                                            \
    } while (0)

static long submit(const char *body) {
    return ts_submit(&ts, body);
}

/* Poll until the request is in state (generous deadline); returns its JSON. */
static json_t *wait_state(long id, const char *state) {
    return ts_wait_state(&ts, id, state, state_dir);
}

static Driver *engine(void) {
    EngineConfig c;
    engine_config_init(&c);
    c.socket = pm.socket;
    Driver *d = NULL;
    char product[128];
    Error err = {0};
    cr_assert_eq(engine_driver_new(&c, &d, product, sizeof(product), &err), 0, "%s",
                 error_message(&err));
    return d;
}

static WorkloadStatus engine_status(Driver *d, long id) {
    char s[32];
    snprintf(s, sizeof(s), "%ld", id);
    WorkloadState st;
    Error err = {0};
    cr_assert_eq(d->ops->status(d, s, &st, &err), 0, "%s", error_message(&err));
    return st.status;
}

static void wait_absent(Driver *d, long id) {
    for (int i = 0; i < 1200 && engine_status(d, id) != WORKLOAD_ABSENT; i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert_eq(engine_status(d, id), WORKLOAD_ABSENT, "the container of %ld is gone", id);
}

static size_t our_containers(Driver *d) {
    char **ids = NULL;
    size_t n = 0;
    Error err = {0};
    cr_assert_eq(d->ops->list(d, &ids, &n, &err), 0, "%s", error_message(&err));
    driver_ids_free(ids, n);
    return n;
}

/* A notebook (the probe image exits at once) ends its request with code 0, its GPU is offered
 * again (all 8 free) and its container is removed. */
static void notebook_exits_and_frees_its_gpu(void) {
    long id = submit("{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}");
    json_t *j = wait_state(id, "ended");
    cr_assert_str_eq(json_string_value(json_object_get(j, "reason")), "exited with code 0");
    json_decref(j);
    json_t *cap = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests?state=active", NULL, &cap), 200);
    cr_assert_eq(json_array_size(json_object_get(cap, "requests")), 0);
    json_decref(cap);
    Driver *d = engine();
    wait_absent(d, id);
    driver_free(d);
}

Test(agent_workloads, r17_a_notebook_that_exits_ends_its_request_and_frees_its_gpu) {
    NEED_PODMAN();
    notebook_exits_and_frees_its_gpu();
}

Test(agent_workloads, r17_a_container_that_exits_frees_its_gpu_at_once_not_at_the_next_heartbeat) {
    NEED_PODMAN();
    /* A heartbeat far longer than the test: the exit is reported without one. */
    kill(agent, SIGTERM);
    waitpid(agent, NULL, 0);
    spawn_agent_beating("600");
    json_int_t seen = fleet_await_heartbeat(&ts, NODE, 600);
    notebook_exits_and_frees_its_gpu();
    cr_assert_eq(fleet_last_seen_ms(&ts, NODE), seen,
                 "the exit was reported with a heartbeat, not at once");
}

Test(agent_workloads, r17_release_stops_the_running_container) {
    NEED_PODMAN();
    Driver *d = engine();
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(wait_state(id, "active"));
    cr_assert_eq(engine_status(d, id), WORKLOAD_RUNNING);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    wait_absent(d, id);
    driver_free(d);
}

Test(agent_workloads, r17_a_container_killed_from_outside_ends_its_request) {
    NEED_PODMAN();
    Driver *d = engine();
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(wait_state(id, "active"));
    char args[64];
    snprintf(args, sizeof(args), "kill -s KILL einsora-%ld", id);
    cr_assert_eq(podman_fixture_cli(&pm, args), 0);
    json_t *j = wait_state(id, "ended");
    cr_assert_str_eq(json_string_value(json_object_get(j, "reason")), "exited with code 137");
    json_decref(j);
    wait_absent(d, id);
    driver_free(d);
}

Test(agent_workloads, r17_a_missing_image_fails_the_request_with_the_engines_sentence) {
    NEED_PODMAN();
    long id = submit("{\"kind\":\"endpoint\",\"class\":\"nvidia-h100-80gb\"}");
    json_t *j = wait_state(id, "ended");
    const char *reason = json_string_value(json_object_get(j, "reason"));
    cr_assert(strstr(reason, "failed: the image localhost/no-such:1 is not on the engine"), "%s",
              reason);
    json_decref(j);
}

/* SIGKILL the agent and remove what it remembered of its workloads (its running and
 * containers records), as a lost state folder would. */
static void kill_agent_losing_its_records(void) {
    kill(agent, SIGKILL);
    waitpid(agent, NULL, 0);
    char running[256];
    snprintf(running, sizeof(running), "%s/running", state_dir);
    unlink(running);
    snprintf(running, sizeof(running), "%s/containers", state_dir);
    unlink(running);
}

Test(agent_workloads,
     r17_an_agent_killed_and_restarted_adopts_its_container_and_never_starts_it_twice) {
    NEED_PODMAN();
    Driver *d = engine();
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(wait_state(id, "active"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld", id);
    /* What the agent remembered is lost: the engine is the truth. */
    kill_agent_losing_its_records();
    spawn_agent();
    /* Wait until the new agent has connected to the engine (it adopts then). */
    char log[256];
    snprintf(log, sizeof(log), "%s/agent.log", state_dir);
    bool adopted = false;
    for (int i = 0; i < 1200 && !adopted; i++) {
        char *text = NULL;
        adopted = read_full_file(log, 1 << 20, &text, NULL) >= 0 &&
                  strstr(text, "adopted the workload of request");
        free(text);
        if (!adopted)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert(adopted, "the restarted agent adopted the running container");
    json_decref(wait_state(id, "active"));
    cr_assert_eq(our_containers(d), 1, "exactly one container: not started twice");
    cr_assert_eq(engine_status(d, id), WORKLOAD_RUNNING);
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    wait_absent(d, id);
    driver_free(d);
}

/* R17: a request released while its agent was down and had lost its records: the restarted
 * agent finds the container with no record of it, and the control plane no longer places it.
 * An agent of this node made it (its making is labelled), so it is stopped, not left running on
 * GPUs the next placement is given. */
Test(agent_workloads, r17_a_container_released_while_its_agent_lost_its_records_is_stopped) {
    NEED_PODMAN();
    Driver *d = engine();
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(wait_state(id, "active"));
    kill_agent_losing_its_records();
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    cr_assert_eq(engine_status(d, id), WORKLOAD_RUNNING, "its agent is down");
    spawn_agent();
    wait_absent(d, id);
    driver_free(d);
}

static bool agent_log_has(const char *words) {
    char log[256], *text = NULL;
    snprintf(log, sizeof(log), "%s/agent.log", state_dir);
    bool has = read_full_file(log, 1 << 20, &text, NULL) >= 0 && strstr(text, words);
    free(text);
    return has;
}

static void wait_log(const char *words) {
    bool has = false;
    for (int i = 0; i < 1200 && !(has = agent_log_has(words)); i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert(has, "the agent's log says '%s'", words);
}

/* fleet.md: while the engine does not answer, the agent keeps the allocations and retries
 * every heartbeat; a placement made then starts once the engine is back, with no other work
 * for the node to wake the agent. */
Test(agent_workloads, r17_a_placement_made_while_the_engine_is_down_starts_when_it_returns) {
    NEED_PODMAN();
    podman_fixture_kill_service(&pm);
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    wait_log("retrying every heartbeat");
    podman_fixture_start_service(&pm);
    json_decref(wait_state(id, "active"));
    Driver *d = engine();
    cr_assert_eq(engine_status(d, id), WORKLOAD_RUNNING);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    wait_absent(d, id);
    driver_free(d);
}

/* An agent stopped between the engine's create and start leaves a container that never ran;
 * the restarted agent must not take it for the running workload (R17): it removes it and
 * starts the placement afresh -- one container, running. */
Test(agent_workloads, r17_a_container_created_but_never_started_is_not_adopted_as_running) {
    NEED_PODMAN();
    podman_fixture_kill_service(&pm);
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    wait_log("retrying every heartbeat");
    kill(agent, SIGKILL);
    waitpid(agent, NULL, 0);
    /* What the killed agent left: the engine's create done, its start not. */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "create --name einsora-%ld --label einsora.request=%ld %s", id, id,
             PODMAN_SLEEPER_IMAGE);
    cr_assert_eq(podman_fixture_cli(&pm, cmd), 0);
    podman_fixture_start_service(&pm);
    Driver *d = engine();
    cr_assert_eq(engine_status(d, id), WORKLOAD_STARTING, "created, never started");
    spawn_agent();
    wait_log("removed the never-started workload of request");
    json_decref(wait_state(id, "active"));
    cr_assert_eq(our_containers(d), 1, "one container");
    cr_assert_eq(engine_status(d, id), WORKLOAD_RUNNING, "and it runs");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    wait_absent(d, id);
    driver_free(d);
}

/* R17: a container this agent never started, made by hand with its name and labels (or
 * another fleet's under this node name), is not the agent's to stop: adopted when the agent
 * starts (its state folder might be lost), it is taken as ours only once the control plane
 * places its request here; otherwise it is left running and forgotten. */
Test(agent_workloads, r17_a_container_made_by_hand_with_our_labels_is_left_alone) {
    NEED_PODMAN();
    kill(agent, SIGKILL);
    waitpid(agent, NULL, 0);
    cr_assert_eq(podman_fixture_cli(&pm, "run -d --name einsora-9990 --label einsora.request=9990 "
                                         "--label einsora.node=" NODE " " PODMAN_SLEEPER_IMAGE),
                 0);
    Driver *d = engine();
    cr_assert_eq(engine_status(d, 9990), WORKLOAD_RUNNING);
    spawn_agent();
    wait_log("left alone the container engine's workload labelled request 9990");
    cr_expect_eq(engine_status(d, 9990), WORKLOAD_RUNNING, "still running, untouched");
    cr_expect(!agent_log_has("stopped 9990"), "not stopped as ours");
    cr_assert_eq(podman_fixture_cli(&pm, "rm -f einsora-9990"), 0);
    driver_free(d);
}

/* R17: a container with our name and labels but another request's making (a fleet started
 * again on a fresh state gives ids from 1 again; or labels copied by hand) is not taken for the
 * request placed now under that id: that would run the old command on the old devices. The
 * request ends saying so, and the other container is left as it is. */
Test(agent_workloads, r17_a_leftover_container_of_an_earlier_request_is_not_taken_for_this_one) {
    NEED_PODMAN();
    long first = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(wait_state(first, "active"));
    long next = first + 1;
    char cmd[384];
    snprintf(cmd, sizeof(cmd),
             "run -d --name einsora-%ld --label einsora.request=%ld --label einsora.node=" NODE
             " --label einsora.created=1 " PODMAN_SLEEPER_IMAGE,
             next, next);
    cr_assert_eq(podman_fixture_cli(&pm, cmd), 0);
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    cr_assert_eq(id, next, "ids are given in turn");
    json_t *j = wait_state(id, "ended");
    const char *reason = json_string_value(json_object_get(j, "reason"));
    cr_expect(reason && strstr(reason, "of an earlier request"), "%s", reason);
    json_decref(j);
    Driver *d = engine();
    cr_expect_eq(engine_status(d, id), WORKLOAD_RUNNING, "the other container is left as it is");
    snprintf(cmd, sizeof(cmd), "stopped %ld", id);
    cr_expect(!agent_log_has(cmd), "not stopped as ours");
    snprintf(cmd, sizeof(cmd), "rm -f einsora-%ld", next);
    cr_assert_eq(podman_fixture_cli(&pm, cmd), 0);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", first);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    wait_absent(d, first);
    driver_free(d);
}

/* An agent killed after the engine started a container and its records named it, but before
 * its "running" list did: a request released meanwhile must still have its container stopped
 * by the restarted agent, or the GPU would go to the next workload while it runs (R17). */
Test(agent_workloads, r17_a_container_started_just_before_a_kill_is_stopped_once_released) {
    NEED_PODMAN();
    long id = submit("{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}");
    json_decref(wait_state(id, "active"));
    kill(agent, SIGKILL);
    waitpid(agent, NULL, 0);
    /* What a kill at that moment leaves: the records name it, "running" does not. */
    char running[PATH_MAX + 16];
    snprintf(running, sizeof(running), "%s/running", state_dir);
    FILE *f = fopen(running, "w");
    cr_assert(f);
    fclose(f);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    Driver *d = engine();
    cr_assert_eq(engine_status(d, id), WORKLOAD_RUNNING, "still running while the agent is away");
    spawn_agent();
    wait_absent(d, id);
    driver_free(d);
}

Test(agent_workloads, r17_a_vm_placement_starts_a_libvirt_domain_and_release_stops_it) {
    NEED_PODMAN();
    long id = submit("{\"kind\":\"vm\",\"class\":\"nvidia-h100-80gb\"}");
    json_t *j = wait_state(id, "active");
    cr_assert_str_eq(json_string_value(json_array_get(
                             json_object_get(json_object_get(j, "placement"), "addresses"), 0)),
                     "0000:db:00.0");
    json_decref(j);
    char words[64], vms[256], *text = NULL;
    snprintf(words, sizeof(words), "started vm %ld", id);
    for (int i = 0; i < 1200 && !agent_log_has(words);
         i++) /* logged once the activation is answered */
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert(agent_log_has(words), "the agent started the VM");
    snprintf(vms, sizeof(vms), "%s/vms", state_dir);
    cr_assert_geq(read_full_file(vms, 4096, &text, NULL), 0);
    cr_assert_eq(atol(text), id, "libvirt runs the VM of the request: %s", text);
    free(text);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    snprintf(words, sizeof(words), "stopped %ld", id);
    for (int i = 0; i < 1200 && !agent_log_has(words); i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    cr_assert(agent_log_has(words), "the agent stopped the VM");
    text = NULL;
    cr_assert_geq(read_full_file(vms, 4096, &text, NULL), 0);
    cr_assert_str_eq(text, "", "libvirt no longer has it");
    free(text);
}

/* The CLI: `einsora run` follows a workload to its end (its exit code decides the exit
 * status); with --detach it returns once it runs; `einsora logs` shows its output from the
 * node's engine; `einsora stop` releases it and its container goes. */
Test(agent_workloads, r17_cli_run_logs_and_stop) {
    NEED_PODMAN();
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "run", "--server", ts.url, "--token", ts.admin, "--kind",
                         "container", "--class", "nvidia-h100-80gb", "--image", PODMAN_IMAGE, "--",
                         "sh", "-c", "echo bye; exit 3", NULL);
    cr_assert_eq(rc, 1, "a workload that exits 3 fails the run:\n%s%s", out, err);
    cr_assert(strstr(out, "ended - exited with code 3"), "%s", out);
    free(out), free(err);
    rc = run_einsora(&out, &err, "run", "--server", ts.url, "--token", ts.admin, "--kind",
                     "container", "--class", "nvidia-h100-80gb", "--image", PODMAN_IMAGE,
                     "--detach", "--", "sh", "-c", "echo hello from einsora run; sleep 100000",
                     NULL);
    cr_assert_eq(rc, 0, "%s%s", out, err);
    cr_assert(strstr(out, ": active"), "%s", out);
    long id = atol(strstr(out, "request ") + 8);
    free(out), free(err);
    char ids[32];
    snprintf(ids, sizeof(ids), "%ld", id);
    bool seen = false;
    for (int i = 0; i < 600 && !seen; i++) {
        rc = run_einsora(&out, &err, "logs", ids, "--engine-socket", pm.socket, NULL);
        seen = rc == 0 && strstr(out, "hello from einsora run");
        free(out), free(err);
        if (!seen)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    cr_assert(seen, "einsora logs shows the container's output");
    rc = run_einsora(&out, &err, "stop", ids, "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s%s", out, err);
    cr_assert(strstr(out, "released"), "%s", out);
    free(out), free(err);
    Driver *d = engine();
    wait_absent(d, id);
    driver_free(d);
    /* Its container is gone with its output: "not found" (5), said on stderr only (stdout is
     * the logs' stream, where no engine error body may land). */
    rc = run_einsora(&out, &err, "logs", ids, "--engine-socket", pm.socket, NULL);
    cr_assert_eq(rc, 5, "%s%s", out, err);
    cr_assert_str_eq(out, "", "nothing on stdout");
    cr_assert(strstr(err, "the engine has no container for request"), "%s", err);
    free(out), free(err);
    rc = run_einsora(&out, &err, "stop", ids, "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 1, "stopping it again says it already ended");
    cr_assert(strstr(err, "already released"), "%s", err);
    free(out), free(err);
}

static size_t keep(char *ptr, size_t size, size_t nmemb, void *userdata) {
    (void)ptr, (void)userdata;
    return size * nmemb;
}

/* A notebook's URL: the agent publishes its port, reads the host port back from the engine and
 * reports http://ADDRESS:PORT/ with the activation; the URL really reaches the container. */
Test(agent_workloads, r17_a_running_notebook_reports_its_url) {
    NEED_PODMAN();
    long id =
            submit("{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\",\"image\":\"" PODMAN_IMAGE
                   "\",\"command\":[\"httpd\",\"-f\",\"-p\",\"8888\",\"-h\",\"/\"]}");
    json_t *j = wait_state(id, "active");
    const char *url = json_string_value(json_object_get(json_object_get(j, "placement"), "url"));
    cr_assert(url && !strncmp(url, "http://127.0.0.1:", 17),
              "the placement has the notebook's URL: %s", url ? url : "none");
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    long status = 0;
    CURLcode rc = CURLE_COULDNT_CONNECT;
    for (int i = 0; i < 200 && rc != CURLE_OK; i++) { /* httpd may still be starting */
        rc = curl_easy_perform(h);
        if (rc != CURLE_OK)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    cr_assert_eq(rc, CURLE_OK, "%s answers: %s", url, curl_easy_strerror(rc));
    cr_assert_gt(status, 0, "an HTTP answer from inside the container");
    json_decref(j);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    Driver *d = engine();
    wait_absent(d, id);
    driver_free(d);
}

/* Start `einsora run ARGS...` with its output in a file; returns its pid. */
static pid_t spawn_run(const char *out_path, const char *const *args) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        const char *argv[32] = {EINSORA_BIN, "run", "--server", ts.url, "--token", ts.admin};
        size_t n = 6;
        for (size_t i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(EINSORA_BIN, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static bool file_has(const char *path, const char *words) {
    char *text = NULL;
    bool has = read_full_file(path, 1 << 20, &text, NULL) >= 0 && strstr(text, words);
    free(text);
    return has;
}

/* Ctrl-C while `einsora run` waits: with --rm the request is cancelled, without it the command
 * says how to end it; never a silent pending request. */
Test(agent_workloads, r17_ctrl_c_while_run_waits_cancels_with_rm_or_says_how) {
    NEED_PODMAN();
    long all = submit(
            "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\",\"count\":7}"); /* the 7
                                                                                       host-bound
                                                                                       GPUs */
    json_decref(wait_state(all, "active"));
    char out[2][256];
    for (int rm = 0; rm < 2; rm++) {
        snprintf(out[rm], sizeof(out[rm]), "%s/run-%d.out", pm.dir, rm);
        const char *args[] = {
                "--kind", "container", "--class", "nvidia-h100-80gb", rm ? "--rm" : "--detach",
                NULL};
        pid_t pid = spawn_run(out[rm], args); /* its stdout and stderr both go to out[rm] */
        for (int i = 0; i < 1200 && !file_has(out[rm], ": pending"); i++)
            nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        cr_assert(file_has(out[rm], ": pending"), "it waits, saying why");
        kill(pid, SIGINT);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "Ctrl-C in a wait is 130");
        cr_assert(file_has(out[rm], rm ? "cancelled" : "is still pending; `einsora stop"), "run %d",
                  rm);
    }
    json_t *list = ts_list_all(&ts, ts.admin, "/v1/requests", "requests");
    size_t i, pending = 0, cancelled = 0;
    json_t *r;
    json_array_foreach(list, i, r) {
        const char *st = json_string_value(json_object_get(r, "state"));
        pending += st && !strcmp(st, "pending");
        cancelled += st && !strcmp(st, "cancelled");
    }
    json_decref(list);
    cr_assert_eq(cancelled, 1, "--rm cancelled its request");
    cr_assert_eq(pending, 1, "without --rm it stays, and the command said how to end it");
}
