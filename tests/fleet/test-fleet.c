/* test-fleet.c: end to end on loopback: six agents on fixture machines (HGX H100, H200 with
 * MIG, RTX 4090, MI300X, CPU-only, Mac) joined to the real control plane; placement, fallback,
 * strangers, mode switches with drains, agent and server crashes, unreachable nodes. */
#include <criterion/criterion.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fleet-helpers.h"
#include "helpers.h"
#include "util/fileio.h"

typedef struct ReqIs {
    long id;
    const char *state;
} ReqIs;

static bool req_is(Fleet *f, const void *arg) {
    const ReqIs *r = arg;
    return fleet_request_is(f, r->id, r->state);
}

static void wait_request(Fleet *f, long id, const char *state, int ms) {
    ReqIs r = {id, state};
    char buf[32];
    cr_assert(fleet_wait(f, req_is, &r, ms), "request %ld is %s, not %s", id,
              fleet_request_state(f, id, buf, sizeof(buf)), state);
}

typedef struct NodeIs {
    const char *node;
    bool in_switch;
    const char *key, *value;
} NodeIs;

static bool node_is(Fleet *f, const void *arg) {
    const NodeIs *n = arg;
    return fleet_node_field_is(f, n->node, n->in_switch, n->key, n->value);
}

static void wait_node(Fleet *f, const char *node, bool in_switch, const char *key,
                      const char *value, int ms) {
    NodeIs n = {node, in_switch, key, value};
    cr_assert(fleet_wait(f, node_is, &n, ms), "node %s: %s%s never became %s", node,
              in_switch ? "switch." : "", key, value);
}

typedef struct EventIs {
    const char *type, *object;
} EventIs;

static bool event_is(Fleet *f, const void *arg) {
    const EventIs *e = arg;
    return fleet_has_event(f, e->type, e->object);
}

/* An event becomes visible once its transaction committed, which may be after a GET already
 * shows the change it records (the server's state is read before the commit): wait for it. */
static void wait_event(Fleet *f, const char *type, const char *object, int ms) {
    EventIs e = {type, object};
    cr_assert(fleet_wait(f, event_is, &e, ms), "no event %s %s", type, object ? object : "");
}

static json_t *get(Fleet *f, const char *path) {
    json_t *j = NULL;
    long st = fleet_call(f, "GET", path, NULL, &j);
    cr_assert_eq(st, 200, "GET %s: %ld", path, st);
    return j;
}

static const char *placement_str(Fleet *f, long id, const char *key, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld", id);
    json_t *j = get(f, path);
    snprintf(buf, size, "%s",
             json_string_value(json_object_get(json_object_get(j, "placement"), key)) ?: "");
    json_decref(j);
    return buf;
}

/* The whole-class capacity row summed over sites. */
static json_int_t capacity(Fleet *f, const char *cls, const char *mode, const char *field) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/capacity?class=%s", cls);
    json_t *j = get(f, path);
    json_int_t v = -1;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(j, "classes"), i,
                       row) if (json_is_null(json_object_get(row, "site")) &&
                                !strcmp(json_string_value(json_object_get(row, "mode")), mode)) v =
            json_integer_value(json_object_get(row, field));
    json_decref(j);
    return v;
}

typedef struct CapIs {
    const char *cls, *mode, *field;
    json_int_t value;
} CapIs;

static bool cap_is(Fleet *f, const void *arg) {
    const CapIs *c = arg;
    return capacity(f, c->cls, c->mode, c->field) == c->value;
}

static Fleet fleet;

static void setup(void) {
    fleet_start(&fleet);
}

static void teardown(void) {
    fleet_stop(&fleet);
}

TestSuite(fleet, .init = setup, .fini = teardown, .timeout = 120);

Test(fleet, r1_r6_r8_six_agents_register_every_kind_of_machine) {
    Fleet *f = &fleet;
    /* R1/R6: every accelerator kind shows up as capacity; R9: the 4090 waits for its check. */
    cr_expect_eq(capacity(f, "nvidia-h100-80gb", "container", "total"), 8);
    cr_expect_eq(capacity(f, "amd-mi300x", "container", "total"), 2);
    cr_expect_eq(capacity(f, "apple-silicon-64gb", "apple", "total"), 1);
    cr_expect_gt(capacity(f, "nvidia-h200-141gb-mig-1g.18gb", "container", "total"), 0);
    cr_expect_eq(capacity(f, "nvidia-rtx-4090", "vm", "total"), 1);
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000), "the RTX 4090 never passed its reset check (R9)");
    wait_event(f, "gpu.reset-checked", NULL, 10000);
    /* R8: the 4090 machine's APU matches no class and is shown, not dropped. */
    json_t *caps = get(f, "/v1/capacity");
    cr_expect_geq(json_integer_value(json_object_get(caps, "unclassified")), 1);
    json_decref(caps);
    /* Each node reports through its agent. */
    json_t *nodes = get(f, "/v1/nodes");
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(nodes, "nodes"), i, n) {
        cr_expect(json_object_get(n, "agent"), "node %s has no agent",
                  json_string_value(json_object_get(n, "name")));
        cr_expect(json_is_false(json_object_get(n, "unreachable")));
    }
    json_decref(nodes);
    fleet_assert_invariants(f);
}

Test(fleet, r13_r14_placements_fallback_after_wait_and_agents_start_them) {
    Fleet *f = &fleet;
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    char buf[64];
    long vm = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    long nb = fleet_submit(f, NULL, "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}");
    long ep = fleet_submit(f, NULL, "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\"}");
    long mig = fleet_submit(f, NULL,
                            "{\"kind\":\"endpoint\",\"class\":\"nvidia-h200-141gb-mig-1g.18gb\"}");
    long amd = fleet_submit(f, NULL, "{\"kind\":\"container\",\"class\":\"amd-mi300x\"}");
    long cpu = fleet_submit(f, NULL, "{\"kind\":\"endpoint\",\"class\":\"cpu\",\"count\":2}");
    /* The agents confirm each workload (placed -> active). */
    long ids[] = {vm, nb, ep, mig, amd, cpu};
    for (size_t i = 0; i < 6; i++)
        wait_request(f, ids[i], "active", 10000);
    cr_expect_str_eq(placement_str(f, vm, "method", buf, sizeof(buf)), "passthrough");
    cr_expect_str_eq(placement_str(f, ep, "endpoint_runtime", buf, sizeof(buf)), "mlx"); /* R14 */
    cr_expect_str_eq(placement_str(f, mig, "endpoint_runtime", buf, sizeof(buf)), "vllm");
    cr_expect_str_eq(placement_str(f, cpu, "endpoint_runtime", buf, sizeof(buf)), "llama.cpp");
    cr_expect_str_eq(placement_str(f, amd, "node", buf, sizeof(buf)), "lab-mi300x");
    /* R13: the 4090 is taken; after the 2 s wait the notebook falls back to an H100. */
    long fb = fleet_submit(f, NULL,
                           "{\"kind\":\"notebook\",\"class\":\"nvidia-rtx-4090\","
                           "\"fallback\":[\"nvidia-h100-80gb\",\"cpu\"],\"wait_s\":2}");
    cr_expect(fleet_request_is(f, fb, "pending"));
    wait_request(f, fb, "active", 10000);
    cr_expect_str_eq(placement_str(f, fb, "class", buf, sizeof(buf)), "nvidia-h100-80gb");
    /* The agent records what it runs (the no-op driver). */
    char *path = fleet_agent_file(f, A_H100, "running"), *running = NULL;
    cr_assert_geq(read_full_file(path, 4096, &running, NULL), 0);
    free(path);
    snprintf(buf, sizeof(buf), "%ld\n", nb);
    cr_expect(strstr(running, buf), "the H100 agent does not record notebook %ld: %s", nb, running);
    free(running);
    fleet_assert_invariants(f);
}

Test(fleet, r5_r15_strangers_wait_for_kata_and_never_share_a_gpu) {
    Fleet *f = &fleet;
    char *alice = ts_token(&f->ts, "alice", "user", NULL),
         *bob = ts_token(&f->ts, "bob", "user", NULL);
    /* Strangers' containers need Kata on a vm-passthrough node; the H100 node is in container
     * mode and placement never flips it (R5): they wait. */
    long a1 = fleet_submit(f, alice,
                           "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\",\"share\":true}");
    cr_expect(fleet_request_is(f, a1, "pending"));
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "mode", "container"));
    /* After the owner switches the node (its agent rebinds every GPU), they run under Kata,
     * each on a GPU of its own. */
    cr_assert_eq(
            fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode", "{\"mode\":\"vm-passthrough\"}", NULL),
            202);
    wait_node(f, "dc1-h100", true, "step", "done", 10000);
    long b1 = fleet_submit(f, bob,
                           "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\",\"share\":true}");
    long a2 = fleet_submit(f, alice,
                           "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\",\"share\":true}");
    long ids[] = {a1, b1, a2};
    json_int_t devs[3];
    char buf[32];
    for (int i = 0; i < 3; i++) {
        wait_request(f, ids[i], "active", 10000);
        cr_expect_str_eq(placement_str(f, ids[i], "container_runtime", buf, sizeof(buf)), "kata");
        char path[64];
        snprintf(path, sizeof(path), "/v1/requests/%ld", ids[i]);
        json_t *j = get(f, path);
        devs[i] = json_integer_value(
                json_array_get(json_object_get(json_object_get(j, "placement"), "devices"), 0));
        json_decref(j);
    }
    cr_expect_neq(devs[0], devs[1], "alice and bob share GPU %lld", (long long)devs[0]);
    cr_expect_neq(devs[2], devs[1], "alice and bob share GPU %lld", (long long)devs[1]);
    fleet_assert_invariants(f);
    free(alice);
    free(bob);
}

Test(fleet, r4_switch_refused_while_a_workload_runs_naming_it) {
    Fleet *f = &fleet;
    long nb = fleet_submit(f, NULL, "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}");
    wait_request(f, nb, "active", 10000);
    json_t *j = NULL;
    cr_assert_eq(
            fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode", "{\"mode\":\"vm-passthrough\"}", &j),
            409);
    char want[32];
    snprintf(want, sizeof(want), "%ld (root, notebook)", nb);
    cr_expect(strstr(json_string_value(json_object_get(j, "message")), want), "%s",
              json_string_value(json_object_get(j, "message")));
    /* The same workloads for a script, without parsing the sentence. */
    json_t *ws = json_object_get(j, "workloads");
    cr_assert_eq(json_array_size(ws), 1);
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(ws, 0), "id")), nb);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ws, 0), "kind")), "notebook");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(ws, 0), "user")), "root");
    json_decref(j);
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "mode", "container"));
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "cordoned", "false"));
    /* R2d: vGPU is refused by name. */
    cr_expect_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode", "{\"mode\":\"vm-vgpu\"}", NULL),
                 400);
    /* R3: a datacenter node switches as a whole. */
    cr_expect_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode",
                            "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\",\"gpu\":\"0\"}", NULL),
                 400);
}

/* A notebook runs on dc1-h100, whose switch to vm-passthrough with --drain wait now waits
 * for it (R4): the notebook's request id. */
static long notebook_on_a_draining_h100(Fleet *f) {
    long nb = fleet_submit(f, NULL, "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}");
    wait_request(f, nb, "active", 10000);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode",
                            "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\"}", NULL),
                 202);
    cr_expect(fleet_node_field_is(f, "dc1-h100", true, "step", "drain"));
    return nb;
}

Test(fleet, r4_switch_with_drain_wait_then_r7_lab_gpu_with_evict) {
    Fleet *f = &fleet;
    long nb = notebook_on_a_draining_h100(f);
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "cordoned", "true"));
    /* The same switch asked again follows the running one; another mode is refused, saying
     * how to get out, and changes nothing (the notebook still runs). */
    cr_expect_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode",
                            "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\"}", NULL),
                 202);
    cr_expect_eq(
            fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode", "{\"mode\":\"vm-passthrough\"}", NULL),
            202);
    json_t *no = NULL;
    cr_expect_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode", "{\"mode\":\"container\"}", &no),
                 409);
    cr_expect(strstr(json_string_value(json_object_get(no, "message")) ?: "", "--drain evict"),
              "the way out is named");
    json_decref(no);
    cr_expect(fleet_node_field_is(f, "dc1-h100", true, "step", "drain"));
    cr_expect(fleet_request_is(f, nb, "active"));
    /* Cordoned: a new notebook does not land there. */
    long other = fleet_submit(f, NULL, "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}");
    cr_expect(fleet_request_is(f, other, "pending"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", nb);
    cr_assert_eq(fleet_call(f, "POST", path, NULL, NULL), 200);
    wait_node(f, "dc1-h100", true, "step", "done", 5000);
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "mode", "vm-passthrough"));
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "cordoned", "false"));
    wait_event(f, "node.relabeled", "dc1-h100", 10000);
    cr_expect_eq(capacity(f, "nvidia-h100-80gb", "vm", "total"), 8);
    /* R3: the node's agent rebound every GPU to vfio-pci: a label alone would hand VMs GPUs
     * still on their host driver. */
    char *bound = fleet_agent_file(f, A_H100, "sim-binding"), *sim = NULL;
    cr_assert_geq(read_full_file(bound, 4096, &sim, NULL), 0, "no GPU was rebound");
    free(bound);
    cr_expect(strstr(sim, "0000:18:00.0 vfio") && strstr(sim, "0000:db:00.0 vfio"), "%s", sim);
    free(sim);

    /* R7: the lab 4090 runs a VM; switching it to containers with --drain evict stops the VM,
     * the agent rebinds the GPU to its host driver, and the GPU comes back as a container GPU. */
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    long vm = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    wait_request(f, vm, "active", 10000);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/mode",
                            "{\"mode\":\"container\",\"drain\":\"evict\",\"gpu\":\"0000:01:00.0\"}",
                            NULL),
                 202);
    cr_expect(fleet_request_is(f, vm, "released"));
    cr_expect(fleet_has_event(f, "request.evicted", NULL));
    wait_node(f, "lab-4090", true, "step", "done", 10000);
    cr_expect_eq(capacity(f, "nvidia-rtx-4090", "container", "total"), 1);
    json_t *n = get(f, "/v1/nodes/lab-4090");
    cr_expect_str_eq(json_string_value(json_object_get(
                             json_array_get(json_object_get(n, "devices"), 0), "binding")),
                     "host");
    json_decref(n);
    fleet_assert_invariants(f);
}

/* R4, R7: the one lab GPU a per-GPU switch drains still runs its VM (state allocated, as
 * capacity counts it) and says it is cordoned; the cordon goes with the switch's end. */
Test(fleet, r7_a_gpu_a_per_gpu_switch_drains_is_shown_cordoned_while_its_vm_runs) {
    Fleet *f = &fleet;
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    long vm = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    wait_request(f, vm, "active", 10000);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/mode",
                            "{\"mode\":\"container\",\"drain\":\"wait\",\"gpu\":\"0\"}", NULL),
                 202);
    json_t *n = get(f, "/v1/nodes/lab-4090");
    json_t *d = json_array_get(json_object_get(n, "devices"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(d, "state")), "allocated");
    cr_expect(json_is_true(json_object_get(d, "cordoned")), "the drained GPU says it is cordoned");
    json_decref(n);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", vm);
    cr_assert_eq(fleet_call(f, "POST", path, NULL, NULL), 200);
    wait_node(f, "lab-4090", true, "step", "done", 10000);
    n = get(f, "/v1/nodes/lab-4090");
    d = json_array_get(json_object_get(n, "devices"), 0);
    cr_expect(!json_object_get(d, "cordoned"), "the switch's cordon went with it");
    json_decref(n);
    fleet_assert_invariants(f);
}

/* R4: a drain that waits for a workload that may run for days is not a dead end: asking the
 * same switch again with --drain evict stops the workload now and the switch goes on. */
Test(fleet, r4_a_waiting_drain_asked_again_with_evict_stops_its_workloads) {
    Fleet *f = &fleet;
    long nb = notebook_on_a_draining_h100(f);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode",
                            "{\"mode\":\"vm-passthrough\",\"drain\":\"evict\"}", NULL),
                 202);
    cr_expect(fleet_request_is(f, nb, "released"), "evicted by the second ask");
    cr_expect(fleet_has_event(f, "request.evicted", NULL));
    wait_node(f, "dc1-h100", true, "step", "done", 10000);
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "mode", "vm-passthrough"));
    fleet_assert_invariants(f);
}

Test(fleet, r4_agent_killed_and_restarted_mid_switch_finishes_it) {
    Fleet *f = &fleet;
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    /* The agent dies just as the switch queues its rebind. */
    fleet_agent_kill(f, A_4090, true);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/mode",
                            "{\"mode\":\"container\",\"gpu\":\"0\"}", NULL),
                 202);
    cr_expect(fleet_node_field_is(f, "lab-4090", true, "step", "rebind"));
    json_t *n = get(f, "/v1/nodes/lab-4090");
    cr_expect_eq(json_array_size(json_object_get(n, "tasks")), 1,
                 "the rebind task waits for the agent");
    json_decref(n);
    /* It comes back, reconciles, finds the task and finishes the switch. */
    fleet_agent_start(f, A_4090);
    wait_node(f, "lab-4090", true, "step", "done", 10000);
    cr_expect_eq(capacity(f, "nvidia-rtx-4090", "container", "total"), 1);
    char *path = fleet_agent_file(f, A_4090, "sim-binding"), *sim = NULL;
    cr_assert_geq(read_full_file(path, 4096, &sim, NULL), 0);
    free(path);
    cr_expect(strstr(sim, "0000:01:00.0 host"), "%s", sim);
    free(sim);
}

Test(fleet, r4_r16_server_killed_mid_drain_resumes_the_switch) {
    Fleet *f = &fleet;
    long nb = fleet_submit(f, NULL, "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\"}");
    wait_request(f, nb, "active", 10000);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/dc1-h100/mode",
                            "{\"mode\":\"vm-passthrough\",\"drain\":\"wait\"}", NULL),
                 202);
    ts_kill(&f->ts, true);
    fleet_server_restart(f);
    /* The switch is still draining, the node still cordoned, the notebook still active. */
    cr_expect(fleet_node_field_is(f, "dc1-h100", true, "step", "drain"));
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "cordoned", "true"));
    cr_expect(fleet_request_is(f, nb, "active"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", nb);
    cr_assert_eq(fleet_call(f, "POST", path, NULL, NULL), 200);
    wait_node(f, "dc1-h100", true, "step", "done", 5000);
    cr_expect(fleet_node_field_is(f, "dc1-h100", false, "mode", "vm-passthrough"));
    /* The agents found the restarted server again. */
    wait_event(f, "node.switched", "dc1-h100", 1000);
    fleet_assert_invariants(f);
}

Test(fleet, agent_loss_makes_node_unreachable_and_keeps_its_allocations) {
    Fleet *f = &fleet;
    long ep = fleet_submit(f, NULL, "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\"}");
    wait_request(f, ep, "active", 10000);
    fleet_agent_kill(f, A_MAC, true);
    wait_node(f, "mac-m2", false, "unreachable", "true", 10000);
    wait_event(f, "node.unreachable", "mac-m2", 10000);
    /* The allocation is kept (the workload may still run); nothing new goes there. */
    cr_expect(fleet_request_is(f, ep, "active"));
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", ep);
    cr_assert_eq(fleet_call(f, "POST", path, NULL, NULL), 200); /* an admin releases it */
    long next = fleet_submit(f, NULL, "{\"kind\":\"endpoint\",\"class\":\"apple-silicon-64gb\"}");
    cr_expect(fleet_request_is(f, next, "pending"));
    /* The agent comes back, reports the truth, and the waiting endpoint lands. */
    fleet_agent_start(f, A_MAC);
    wait_node(f, "mac-m2", false, "unreachable", "false", 10000);
    wait_request(f, next, "active", 10000);
    /* Its record of the released endpoint was stopped on reconcile. */
    char rpath[200], *running = NULL, want[32];
    snprintf(rpath, sizeof(rpath), "%s/running", f->agents[A_MAC].state_dir);
    cr_assert_geq(read_full_file(rpath, 4096, &running, NULL), 0);
    snprintf(want, sizeof(want), "%ld\n", ep);
    cr_expect(!strstr(running, want), "released endpoint %ld still recorded: %s", ep, running);
    free(running);
    fleet_assert_invariants(f);
}

Test(fleet, agent_restart_reconciles_lost_workloads) {
    Fleet *f = &fleet;
    long c = fleet_submit(f, NULL, "{\"kind\":\"container\",\"class\":\"amd-mi300x\"}");
    wait_request(f, c, "active", 10000);
    /* The machine rebooted: the agent's records are gone. What it reports wins. */
    fleet_agent_kill(f, A_MI300X, true);
    char *path = fleet_agent_file(f, A_MI300X, "running");
    cr_assert_eq(unlink(path), 0);
    free(path);
    fleet_agent_start(f, A_MI300X);
    wait_request(f, c, "ended", 10000); /* on its own: not released by anyone */
    wait_event(f, "request.lost", NULL, 10000);
}

Test(fleet, r9_failed_reset_check_quarantines_and_vm_end_rechecks) {
    Fleet *f = &fleet;
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    /* A VM ends: the core asks for the check again; this time the board fails it. */
    char *path = fleet_agent_file(f, A_4090, "sim-reset");
    FILE *s = fopen(path, "w");
    free(path);
    cr_assert(s);
    fprintf(s, "0000:01:00.0 fail the device fell off the bus after reset 2\n");
    fclose(s);
    long vm = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    wait_request(f, vm, "active", 10000);
    char rel[64];
    snprintf(rel, sizeof(rel), "/v1/requests/%ld/release", vm);
    cr_assert_eq(fleet_call(f, "POST", rel, NULL, NULL), 200);
    CapIs q = {"nvidia-rtx-4090", "vm", "quarantined", 1};
    cr_assert(fleet_wait(f, cap_is, &q, 10000), "the failing 4090 was not quarantined");
    json_t *n = get(f, "/v1/nodes/lab-4090");
    json_t *d = json_array_get(json_object_get(n, "devices"), 0);
    cr_expect_str_eq(json_string_value(json_object_get(d, "quarantined")) ?: "",
                     "the device fell off the bus after reset 2", "the check's reason, as it is");
    json_decref(n);
    /* R9: "with the reason shown" -- by node show too, not only in its JSON. */
    char *out = NULL, *err = NULL;
    cr_assert_eq(run_einsora(&out, &err, "node", "show", "lab-4090", "--server", f->ts.url,
                             "--token", f->ts.admin, NULL),
                 0, "%s", err);
    cr_expect(
            strstr(out, "Quarantined: #0 0000:01:00.0: the device fell off the bus after reset 2"),
            "%s", out);
    free(out);
    free(err);
    long next = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    cr_expect(fleet_request_is(f, next, "pending"));
    /* The board is seen to: the owner lifts the quarantine, the GPU is checked again (it
     * passes now) and the waiting VM gets it. */
    path = fleet_agent_file(f, A_4090, "sim-reset");
    cr_assert_eq(unlink(path), 0);
    free(path);
    cr_assert_eq(run_einsora(&out, &err, "node", "unquarantine", "lab-4090", "0", "--server",
                             f->ts.url, "--token", f->ts.admin, NULL),
                 0, "%s", err);
    free(out);
    free(err);
    wait_event(f, "gpu.unquarantined", "lab-4090/0", 10000);
    wait_request(f, next, "active", 10000);
    cr_expect_eq(run_einsora(NULL, &err, "node", "unquarantine", "lab-4090", "0", "--server",
                             f->ts.url, "--token", f->ts.admin, NULL),
                 1, "not quarantined any more: %s", err);
    free(err);
    /* The index as a JSON number names the GPU as its digits do (409: not quarantined). */
    cr_expect_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/unquarantine", "{\"gpu\": 0}", NULL),
                 409);
    cr_expect_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/unquarantine", "{\"gpu\": -1}", NULL),
                 400);
    fleet_assert_invariants(f);
}

/* R9 "after each VM on it stops": also a VM a switch to containers evicted. The reset check
 * runs on vfio-pci only, so the switch has it run before the GPU leaves for the host driver;
 * the failing board is quarantined instead of going to containers. */
Test(fleet, r9_a_vm_evicted_by_a_switch_to_containers_is_reset_checked_before_the_rebind) {
    Fleet *f = &fleet;
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    long vm = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    wait_request(f, vm, "active", 10000);
    char *path = fleet_agent_file(f, A_4090, "sim-reset");
    FILE *s = fopen(path, "w");
    free(path);
    cr_assert(s);
    fprintf(s, "0000:01:00.0 fail the device fell off the bus after reset 1\n");
    fclose(s);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/mode",
                            "{\"mode\":\"container\",\"drain\":\"evict\",\"gpu\":\"0\"}", NULL),
                 202);
    wait_node(f, "lab-4090", true, "step", "done", 10000);
    CapIs q = {"nvidia-rtx-4090", "container", "quarantined", 1};
    cr_assert(fleet_wait(f, cap_is, &q, 10000), "the failing 4090 went to containers unchecked");
    cr_expect(fleet_has_event(f, "gpu.reset-checked", NULL));
    long next = fleet_submit(f, NULL, "{\"kind\":\"container\",\"class\":\"nvidia-rtx-4090\"}");
    cr_expect(fleet_request_is(f, next, "pending"), "never on the quarantined board");
    fleet_assert_invariants(f);
}

/* R9, R16: the reset check a switch waits for before its GPU leaves vfio-pci is waited for
 * still after the server restarts (or another replica takes over): the bind is not queued
 * while the check is open. */
Test(fleet, r9_r16_the_reset_check_a_switch_waits_for_is_still_waited_for_after_a_restart) {
    Fleet *f = &fleet;
    CapIs c = {"nvidia-rtx-4090", "vm", "free", 1};
    cr_assert(fleet_wait(f, cap_is, &c, 10000));
    long vm = fleet_submit(f, NULL, "{\"kind\":\"vm\",\"class\":\"nvidia-rtx-4090\"}");
    wait_request(f, vm, "active", 10000);
    pid_t agent = f->agents[A_4090].pid;
    cr_assert_eq(kill(agent, SIGSTOP), 0); /* its tasks stay open */
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/lab-4090/mode",
                            "{\"mode\":\"container\",\"drain\":\"evict\",\"gpu\":\"0\"}", NULL),
                 202);
    ts_kill(&f->ts, true);
    fleet_server_restart(f);
    json_t *n = get(f, "/v1/nodes/lab-4090");
    json_t *tasks = json_object_get(n, "tasks");
    cr_expect_eq(json_array_size(tasks), 1, "only the check: no bind before its result");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(tasks, 0), "kind")),
                     "reset-check");
    json_decref(n);
    cr_assert_eq(kill(agent, SIGCONT), 0);
    wait_node(f, "lab-4090", true, "step", "done", 10000);
    cr_expect(fleet_has_event(f, "gpu.reset-checked", NULL));
    fleet_assert_invariants(f);
}

/* A simulated lab agent without NVML named `name` on fixture `machine`, keeping its state in
 * `state`; returns its pid once its node registered (the token to free in *ret_token). */
static pid_t spawn_lab_agent(Fleet *f, const char *name, const char *machine, const char *state,
                             char **ret_token) {
    char sys[PATH_MAX], proc[PATH_MAX];
    snprintf(sys, sizeof(sys), "%s/machines/%s/sys", TEST_FIXTURES, machine);
    snprintf(proc, sizeof(proc), "%s/machines/%s/proc", TEST_FIXTURES, machine);
    const char *args[] = {"--site",       "lab",       "--site-kind", "lab",
                          "--sysfs-root", sys,         "--proc-root", proc,
                          "--simulate",   "--no-nvml", NULL};
    *ret_token = ts_token(&f->ts, name, "node", name);
    pid_t pid = fleet_spawn_agent(f->ts.url, *ret_token, name, state, args, NULL);
    wait_node(f, name, false, "platform", "linux", 10000);
    return pid;
}

/* R7 on the simulated path too: a rebind moves the GPU's whole IOMMU group, and the 5090's
 * group holds the board's USB controller, which no VM may take: the switch fails naming the
 * group, as `einsora agent bind` refuses it, and the GPU stays on its host driver. (The
 * fixture's processes are a picture: a simulated rebind does not wait for them.) */
Test(fleet, r7_a_simulated_rebind_still_refuses_a_gpu_sharing_its_iommu_group) {
    Fleet *f = &fleet;
    char state[PATH_MAX], *token = NULL;
    snprintf(state, sizeof(state), "%s/agent-5090", f->ts.dir);
    cr_assert_eq(mkdir(state, 0700), 0);
    pid_t pid = spawn_lab_agent(f, "lab-5090", "rtx5090-dirty-group", state, &token);
    cr_assert_eq(fleet_call(f, "POST", "/v1/nodes/lab-5090/mode",
                            "{\"mode\":\"vm-passthrough\",\"gpu\":\"0\"}", NULL),
                 202);
    wait_node(f, "lab-5090", true, "step", "failed", 10000);
    json_t *n = get(f, "/v1/nodes/lab-5090");
    const char *msg = json_string_value(json_object_get(json_object_get(n, "switch"), "message"));
    cr_expect(msg && strstr(msg, "IOMMU group"), "%s", msg ? msg : "(none)");
    cr_expect_str_eq(json_string_value(json_object_get(
                             json_array_get(json_object_get(n, "devices"), 0), "binding")),
                     "host");
    json_decref(n);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    free(token);
}

/* R9/R7: a GPU the agent quarantined itself (a rebind the kernel never finished, left for
 * `einsora agent recover`) reaches the control plane quarantined, with the agent's reason:
 * counted quarantined and never placed, though its reset check would pass. */
Test(fleet, r9_a_gpu_the_agent_quarantined_is_quarantined_in_the_control_plane) {
    Fleet *f = &fleet;
    char state[PATH_MAX], q[PATH_MAX + 32];
    snprintf(state, sizeof(state), "%s/agent-q", f->ts.dir);
    snprintf(q, sizeof(q), "%s/quarantine", state);
    cr_assert_eq(mkdir(state, 0700), 0);
    cr_assert_eq(mkdir(q, 0700), 0);
    strcat(q, "/0000:01:00.0");
    FILE *fp = fopen(q, "w");
    cr_assert_not_null(fp);
    fputs("the kernel never finished binding it to vfio-pci\n", fp);
    fclose(fp);
    char *token = NULL;
    pid_t pid = spawn_lab_agent(f, "lab-q", "rtx4090-clean-group", state, &token);
    json_t *n = get(f, "/v1/nodes/lab-q");
    const char *why = json_string_value(
            json_object_get(json_array_get(json_object_get(n, "devices"), 0), "quarantined"));
    cr_expect(why && strstr(why, "never finished binding"), "%s", why ? why : "(not quarantined)");
    json_decref(n);
    json_t *ans = NULL;
    cr_assert_eq(fleet_call(f, "POST", "/v1/requests",
                            "{\"kind\":\"container\",\"class\":\"nvidia-rtx-4090\","
                            "\"wait_for_nodes\":true}",
                            &ans),
                 201);
    json_t *pl = json_object_get(ans, "placement");
    cr_expect(!pl || !json_string_value(json_object_get(pl, "node")) ||
                      strcmp(json_string_value(json_object_get(pl, "node")), "lab-q") != 0,
              "placed on the quarantined GPU");
    json_decref(ans);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    free(token);
}
