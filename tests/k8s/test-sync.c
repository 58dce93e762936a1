/* test-sync.c: `einsora k8s sync` between the real control plane and the API-server double:
 * nodes built from the cluster (R3, R6), mode switches through the Eviction API and the GPU
 * Operator (R4): clean both ways, a PDB that blocks for a while, an operator that never
 * converges, 410 Gone mid-switch, the sync killed and restarted, RBAC 403, a node deleted. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "double.h"
#include "helpers.h"
#include "srv-helpers.h"

static TestServer ts;
static K8sDouble dbl;
static pid_t sync_pid;
static char sync_log[128];

/* switch_timeout: seconds the GPU Operator gets after a relabel; generous unless a test wants
 * it to run out, so that a slow machine never fails a switch that should succeed. */
static void sync_start_every(const char *interval, const char *switch_timeout) {
    sync_pid = fork();
    cr_assert(sync_pid >= 0);
    if (sync_pid == 0) {
        int fd = open(sync_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0)
            dup2(fd, 2);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execl(EINSORA_BIN, EINSORA_BIN, "k8s", "sync", "--server", ts.url, "--token", ts.admin,
              "--kubeconfig", dbl.kubeconfig, "--interval", interval, "--switch-timeout",
              switch_timeout, "--catalog", TEST_DATA "/catalog.yaml", "--capabilities", "kata",
              "--owner", "root", (char *)NULL);
        _exit(127);
    }
}

static void sync_start_with(const char *switch_timeout) {
    sync_start_every("1", switch_timeout);
}

static void sync_start(void) {
    sync_start_with("120");
}

static void sync_kill(bool hard) {
    if (sync_pid <= 0)
        return;
    kill(sync_pid, hard ? SIGKILL : SIGTERM);
    int status;
    waitpid(sync_pid, &status, 0);
    if (!hard)
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the sync did not stop cleanly");
    sync_pid = 0;
}

static void setup(void) {
    ts_start(&ts);
    k8s_double_start(&dbl, "cluster.json", 0.5);
    snprintf(sync_log, sizeof(sync_log), "%s/sync.log", dbl.dir);
    sync_start();
}

static void teardown(void) {
    sync_kill(false);
    k8s_double_stop(&dbl);
    ts_stop(&ts);
}

TestSuite(k8s_sync, .init = setup, .fini = teardown, .timeout = 180);

static void sleep_ms(long ms) {
    nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* Poll until pred holds; generous deadline, never a timing assertion. */
typedef bool (*Pred)(const void *arg);
static bool wait_for(Pred pred, const void *arg) {
    for (int i = 0; i < 600; i++) { /* 60 s */
        if (pred(arg))
            return true;
        sleep_ms(100);
    }
    return false;
}

static json_t *cp_node(const char *name) {
    char path[128];
    snprintf(path, sizeof(path), "/v1/nodes/%s", name);
    json_t *j = NULL;
    if (ts_call(&ts, ts.admin, "GET", path, NULL, &j) != 200) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static bool registered(const void *arg) {
    json_t *j = cp_node(arg);
    bool ok = j && json_object_get(j, "agent");
    json_decref(j);
    return ok;
}

static bool cordoned_for_the_label(const void *arg) {
    json_t *j = cp_node(arg);
    const char *why = json_string_value(json_object_get(j, "cordon_reason"));
    bool ok = json_is_true(json_object_get(j, "cordoned")) && why &&
              strstr(why, "nvidia.com/gpu.workload.config");
    json_decref(j);
    return ok;
}

static const char *switch_field(json_t *node, const char *key) {
    return json_string_value(json_object_get(json_object_get(node, "switch"), key));
}

typedef struct StepIs {
    const char *node, *step, *message_part;
} StepIs;

static bool step_is(const void *arg) {
    const StepIs *w = arg;
    json_t *j = cp_node(w->node);
    const char *step = switch_field(j, "step"), *msg = switch_field(j, "message");
    bool ok = step && strcmp(step, w->step) == 0 &&
              (!w->message_part || (msg && strstr(msg, w->message_part)));
    json_decref(j);
    return ok;
}

static char *last_switch_message(const char *node) {
    json_t *j = cp_node(node);
    char *m = strdup(j && switch_field(j, "message") ? switch_field(j, "message") : "(no switch)");
    json_decref(j);
    return m;
}

static void wait_step(const char *node, const char *step, const char *part) {
    StepIs w = {node, step, part};
    if (!wait_for(step_is, &w)) {
        char *m = last_switch_message(node), *log = slurp(sync_log), text[8192];
        snprintf(text, sizeof(text), "it says: %s\nsync log:\n%s", m, log);
        free(m);
        free(log);
        cr_assert_fail("switch of %s never reached %s (%s); %s", node, step, part ? part : "",
                       text);
    }
}

static void ask_switch(const char *node, const char *mode, const char *drain) {
    char path[128], body[128];
    snprintf(path, sizeof(path), "/v1/nodes/%s/mode", node);
    snprintf(body, sizeof(body), "{\"mode\": \"%s\", \"drain\": \"%s\"}", mode, drain);
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "POST", path, body, &j);
    cr_assert(st == 200 || st == 202, "mode switch answered %ld: %s", st,
              j ? json_string_value(json_object_get(j, "message")) : "");
    json_decref(j);
}

static json_t *k8s_node(const char *name) {
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
    return k8s_double_get(&dbl, path);
}

static const char *label(json_t *node, const char *key) {
    return json_string_value(
            json_object_get(json_object_get(json_object_get(node, "metadata"), "labels"), key));
}

static bool unschedulable(json_t *node) {
    return json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
}

static long allocatable(json_t *node, const char *res) {
    const char *v = json_string_value(
            json_object_get(json_object_get(json_object_get(node, "status"), "allocatable"), res));
    return v ? atol(v) : -1;
}

static void k8s_write(const char *method, const char *path, const char *body) {
    K8sClient *c = k8s_double_client(&dbl, NULL);
    json_t *j = body ? json_loads(body, 0, NULL) : NULL;
    Error err = {0};
    int r = strcmp(method, "PATCH") == 0 ? k8s_merge_patch(c, path, j, NULL, &err)
                                         : k8s_call(c, method, path, NULL, j, NULL, &err);
    cr_assert_eq(r, 0, "%s %s: %s", method, path, err.message);
    json_decref(j);
    k8s_client_free(c);
}

static void add_pdb(void) {
    k8s_write("POST", "/apis/policy/v1/namespaces/ml/poddisruptionbudgets",
              "{\"apiVersion\": \"policy/v1\", \"kind\": \"PodDisruptionBudget\", \"metadata\": "
              "{\"name\": "
              "\"train-pdb\"}, \"spec\": {\"minAvailable\": 1, \"selector\": {\"matchLabels\": "
              "{\"app\": \"train\"}}}}");
}

static bool sync_logged(const void *arg) {
    char *log = slurp(sync_log);
    bool ok = strstr(log, arg) != NULL;
    free(log);
    return ok;
}

/* A control-plane token the server refuses, or one that is not an admin's, stops the sync at
 * once with a sentence, rather than a 401 or 403 per node at every interval. */
Test(k8s_sync, bad_input_a_sync_token_the_control_plane_refuses_stops_it_at_once) {
    char *user = ts_token(&ts, "bob", "user", NULL);
    const char *tokens[] = {"not-a-token", user};
    const char *words[] = {"refuses this token", "needs an admin token"};
    for (size_t i = 0; i < 2; i++) {
        char *out = NULL, *err = NULL;
        int rc = run_einsora(&out, &err, "k8s", "sync", "--server", ts.url, "--token", tokens[i],
                             "--kubeconfig", dbl.kubeconfig, "--catalog", TEST_DATA "/catalog.yaml",
                             NULL);
        cr_expect_neq(rc, 0, "case %zu", i);
        cr_expect(err && strstr(err, words[i]), "case %zu: %s", i, err);
        free(out), free(err);
    }
    free(user);
}

Test(k8s_sync, r3_r6_nodes_are_built_from_the_cluster) {
    const char *names[] = {"gpu-a", "gpu-b", "gpu-d"};
    for (size_t i = 0; i < 3; i++)
        cr_assert(wait_for(registered, names[i]), "%s was not registered", names[i]);
    /* gpu-c has GPUs and no mode label: an error shown where nodes are shown, not a default
     * guessed (R3): registered cordoned, saying why, its GPUs counted as cordoned */
    cr_expect(wait_for(sync_logged, "gpu-c has GPUs and no nvidia.com/gpu.workload.config label"));
    cr_assert(wait_for(cordoned_for_the_label, "gpu-c"),
              "gpu-c is not shown, cordoned, saying why");
    json_t *c0 = cp_node("gpu-c");
    cr_expect_gt(json_array_size(json_object_get(c0, "devices")), 0u, "its GPUs are not shown");
    json_decref(c0);
    json_t *q = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\": \"container\", \"class\": \"nvidia-h200-141gb\"}", &q),
                 201);
    const char *on = json_string_value(json_object_get(json_object_get(q, "placement"), "node"));
    cr_expect(!on || strcmp(on, "gpu-c") != 0, "placed on a node whose mode is not known");
    bool placed = on != NULL;
    char end[64];
    snprintf(end, sizeof(end), "/v1/requests/%lld/%s",
             (long long)json_integer_value(json_object_get(q, "id")),
             placed ? "release" : "cancel");
    json_decref(q);
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", end, NULL, NULL), 200);
    k8s_write("PATCH", "/api/v1/nodes/gpu-c",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": "
              "\"container\"}}}");
    cr_assert(wait_for(registered, "gpu-c"), "gpu-c is served once labeled");
    json_t *a = cp_node("gpu-a"), *b = cp_node("gpu-b"), *c = cp_node("gpu-c"),
           *d = cp_node("gpu-d");
    cr_expect_str_eq(json_string_value(json_object_get(a, "mode")), "container");
    cr_expect_eq(json_array_size(json_object_get(a, "devices")), 8u);
    cr_expect_str_eq(json_string_value(json_object_get(
                             json_array_get(json_object_get(a, "devices"), 0), "class")),
                     "nvidia-h100-80gb");
    cr_expect_str_eq(json_string_value(json_object_get(b, "mode")), "vm-passthrough");
    cr_expect_str_eq(json_string_value(json_object_get(
                             json_array_get(json_object_get(b, "devices"), 0), "binding")),
                     "vfio");
    /* labeled container; cordoned from spec.unschedulable */
    cr_expect_str_eq(json_string_value(json_object_get(c, "mode")), "container");
    cr_expect(json_is_true(json_object_get(c, "cordoned")));
    cr_expect_str_eq(json_string_value(json_object_get(
                             json_array_get(json_object_get(c, "devices"), 0), "class")),
                     "nvidia-h200-141gb");
    /* a device name the catalog does not use: the class from the product label, and said so */
    cr_expect_eq(json_array_size(json_object_get(d, "devices")), 2u);
    cr_expect(sync_logged(
            "gpu-d advertises nvidia.com/GH100H100_SXM5_80GB, not the catalog's vm_device_name"));
    cr_expect_null(cp_node("cpu-1"), "a node without GPUs is not an Einsora node");
    json_decref(a), json_decref(b), json_decref(c), json_decref(d);

    /* cordon follows spec.unschedulable; an unknown mode label is an error shown (R3) */
    k8s_write("PATCH", "/api/v1/nodes/gpu-a", "{\"spec\": {\"unschedulable\": true}}");
    k8s_write("PATCH", "/api/v1/nodes/gpu-b",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": "
              "\"vm-vgpu\"}}}");
    bool cordoned = false;
    for (int i = 0; i < 600 && !cordoned; i++, sleep_ms(100)) {
        json_t *j = cp_node("gpu-a");
        cordoned = json_is_true(json_object_get(j, "cordoned"));
        json_decref(j);
    }
    if (!cordoned) {
        char *log = slurp(sync_log), text[8192];
        snprintf(text, sizeof(text), "%s", log);
        free(log);
        cr_expect_fail("spec.unschedulable did not cordon gpu-a; sync log:\n%s", text);
    }
    cr_expect(wait_for(sync_logged,
                       "gpu-b has nvidia.com/gpu.workload.config=vm-vgpu, which is not a mode"));
}

static bool cp_cordoned(const void *arg) {
    json_t *j = cp_node(arg);
    bool on = json_is_true(json_object_get(j, "cordoned"));
    json_decref(j);
    return on;
}

static bool not_cordoned(const void *arg) {
    return !cp_cordoned(arg);
}

/* A cordon made in Einsora (einsora node cordon) on a Kubernetes node stays: the sync mirrors
 * a change of spec.unschedulable, not its value at every turn. */
Test(k8s_sync, r4_an_einsora_cordon_of_a_kubernetes_node_is_not_undone_by_the_sync) {
    cr_assert(wait_for(registered, "gpu-a"));
    cr_assert(wait_for(registered, "gpu-b"));
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/gpu-b/cordon", NULL, NULL), 200);
    /* Turns go by: one mirrors a cordon made in Kubernetes on gpu-a meanwhile. */
    k8s_write("PATCH", "/api/v1/nodes/gpu-a", "{\"spec\": {\"unschedulable\": true}}");
    cr_assert(wait_for(cp_cordoned, "gpu-a"), "the sync mirrors a Kubernetes cordon");
    /* and a later turn its end: a whole pass over every node came after the Einsora cordon */
    k8s_write("PATCH", "/api/v1/nodes/gpu-a", "{\"spec\": {\"unschedulable\": false}}");
    cr_assert(wait_for(not_cordoned, "gpu-a"), "the sync mirrors a Kubernetes uncordon");
    cr_expect(cp_cordoned("gpu-b"), "the Einsora cordon of gpu-b stays");
    cr_expect(!sync_logged("node gpu-b uncordoned"));
    /* A Kubernetes cordon and uncordon of gpu-b (another team's drain) leave its Einsora
     * cordon, which is not the mirrored one. gpu-a's, patched after it each time, shows when
     * the sync has seen gpu-b's (the watch delivers them in order). */
    k8s_write("PATCH", "/api/v1/nodes/gpu-b", "{\"spec\": {\"unschedulable\": true}}");
    k8s_write("PATCH", "/api/v1/nodes/gpu-a", "{\"spec\": {\"unschedulable\": true}}");
    cr_assert(wait_for(cp_cordoned, "gpu-a"));
    k8s_write("PATCH", "/api/v1/nodes/gpu-b", "{\"spec\": {\"unschedulable\": false}}");
    k8s_write("PATCH", "/api/v1/nodes/gpu-a", "{\"spec\": {\"unschedulable\": false}}");
    cr_assert(wait_for(not_cordoned, "gpu-a"));
    cr_expect(cp_cordoned("gpu-b"), "a Kubernetes uncordon lifted the Einsora cordon");
    cr_expect(sync_logged("node gpu-b: an uncordon in Kubernetes leaves its Einsora cordon"));
}

static bool capacity_counts(const void *arg) {
    (void)arg;
    json_t *cap = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity?class=nvidia-h100-80gb", NULL, &cap),
                 200);
    long vm = 0, ct = 0;
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(cap, "classes"), i, row) {
        const char *mode = json_string_value(json_object_get(row, "mode"));
        long total = (long)json_integer_value(json_object_get(row, "total"));
        if (mode && strstr(mode, "vm"))
            vm += total;
        else
            ct += total;
    }
    json_decref(cap);
    return ct >= 8 && vm >= 10;
}

Test(k8s_sync, r6_capacity_is_the_clusters_and_names_a_differing_device) {
    cr_assert(wait_for(registered, "gpu-d"));
    cr_assert(wait_for(capacity_counts, NULL),
              "capacity never counted gpu-a (8 container) and gpu-b + gpu-d (10 VM)");
    json_t *cap = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/capacity", NULL, &cap), 200);
    size_t i;
    json_t *n;
    bool seen = false;
    json_array_foreach(json_object_get(cap, "nodes"), i, n) {
        if (strcmp(json_string_value(json_object_get(n, "node")), "gpu-d") != 0)
            continue;
        seen = true;
        json_t *res = json_object_get(n, "resources");
        cr_expect_eq(json_integer_value(json_object_get(res, "nvidia.com/GH100H100_SXM5_80GB")), 2,
                     "the node's own name");
        cr_expect_null(json_object_get(res, "nvidia.com/GH100_H100_SXM5_80GB"));
        cr_expect(strstr(json_string_value(json_object_get(n, "note")),
                         "not the catalog's vm_device_name"));
    }
    cr_expect(seen);
    json_decref(cap);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "capacity", "--server", ts.url, "--token", ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(
            strstr(out,
                   "note: node gpu-d advertises nvidia.com/GH100H100_SXM5_80GB, not the catalog's "
                   "vm_device_name nvidia.com/GH100_H100_SXM5_80GB"),
            "%s", out);
    free(out);
    free(err);
}

static long log_index(json_t *log, const char *verb, const char *resource, const char *name,
                      const char *lbl) {
    size_t i;
    json_t *e;
    json_array_foreach(log, i, e) {
        const char *l = json_string_value(json_object_get(e, "label"));
        if (strcmp(json_string_value(json_object_get(e, "verb")), verb) == 0 &&
            strcmp(json_string_value(json_object_get(e, "resource")), resource) == 0 &&
            strcmp(json_string_value(json_object_get(e, "name")), name) == 0 &&
            (!lbl || (l && strcmp(l, lbl) == 0)))
            return (long)i;
    }
    return -1;
}

static json_t *double_log(void) {
    K8sClient *c = k8s_double_client(&dbl, NULL);
    long st = 0;
    json_t *j = NULL;
    Error err = {0};
    cr_assert_eq(k8s_request(c, "GET", "/_double/log", NULL, NULL, &st, &j, &err), 0);
    k8s_client_free(c);
    return j;
}

Test(k8s_sync, r4_clean_switch_both_ways_evicts_gpu_pods_first) {
    cr_assert(wait_for(registered, "gpu-a"));
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "done", NULL);
    json_t *n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "vm-passthrough");
    cr_expect_not(unschedulable(n), "uncordoned at the end");
    cr_expect_eq(allocatable(n, "nvidia.com/gpu"), -1, "the container resource is gone");
    cr_expect_eq(allocatable(n, "nvidia.com/GH100_H100_SXM5_80GB"), 8);
    json_decref(n);
    cr_expect_null(k8s_double_get(&dbl, "/api/v1/namespaces/ml/pods/train-0"),
                   "the GPU pod was evicted");
    json_t *web = k8s_double_get(&dbl, "/api/v1/namespaces/ml/pods/web-0");
    cr_expect_not_null(web, "a pod without GPUs stays");
    json_decref(web);
    json_t *log = double_log();
    long ev = log_index(log, "create", "pods/eviction", "train-0", NULL),
         cordon = log_index(log, "patch", "nodes", "gpu-a", NULL),
         relabel = log_index(log, "patch", "nodes", "gpu-a", "vm-passthrough");
    cr_expect(cordon >= 0 && ev > cordon && relabel > ev, "cordon %ld, eviction %ld, relabel %ld",
              cordon, ev, relabel);
    json_decref(log);
    json_t *cp = cp_node("gpu-a");
    cr_expect_str_eq(json_string_value(json_object_get(cp, "mode")), "vm-passthrough");
    cr_expect_not(json_is_true(json_object_get(cp, "cordoned")));
    json_decref(cp);

    ask_switch("gpu-a", "container", "none"); /* no GPU pod left: no drain needed */
    wait_step("gpu-a", "done", NULL);
    n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "container");
    cr_expect_eq(allocatable(n, "nvidia.com/gpu"), 8);
    cr_expect_eq(allocatable(n, "nvidia.com/GH100_H100_SXM5_80GB"), -1);
    cr_expect_not(unschedulable(n));
    json_decref(n);
}

/* R4: --drain wait waits for the GPU pods to end; only a forced drain (--drain evict) evicts
 * them. The node is cordoned meanwhile and relabeled once the last one ended. */
Test(k8s_sync, r4_drain_wait_waits_for_gpu_pods_and_never_evicts_them) {
    cr_assert(wait_for(registered, "gpu-a"));
    ask_switch("gpu-a", "vm-passthrough", "wait");
    wait_step("gpu-a", "rebind", "waiting for the end of 1 GPU pod(s)");
    json_t *pod = k8s_double_get(&dbl, "/api/v1/namespaces/ml/pods/train-0");
    cr_expect_not_null(pod, "the GPU pod runs on");
    json_decref(pod);
    json_t *n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "container");
    cr_expect(unschedulable(n), "cordoned while it waits");
    json_decref(n);
    /* The pod's owner ends it: the switch goes on. */
    k8s_write("DELETE", "/api/v1/namespaces/ml/pods/train-0", NULL);
    wait_step("gpu-a", "done", NULL);
    json_t *log = double_log();
    cr_expect_eq(log_index(log, "create", "pods/eviction", "train-0", NULL), -1,
                 "no eviction was asked");
    json_decref(log);
    n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "vm-passthrough");
    json_decref(n);
}

Test(k8s_sync, r4_switch_without_drain_is_refused_naming_gpu_pods) {
    cr_assert(wait_for(registered, "gpu-a"));
    ask_switch("gpu-a", "vm-passthrough", "none");
    wait_step("gpu-a", "failed", "ml/train-0");
    json_t *n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "container",
                     "never relabeled with GPU pods");
    cr_expect(!unschedulable(n), "nothing was done in Kubernetes");
    json_decref(n);
    /* Refused, not half begun: the Einsora node serves as before (no cordon left behind). */
    cr_expect(!cp_cordoned("gpu-a"), "the refused switch left the node cordoned in Einsora");
}

/* R4: a VM with host GPUs that Einsora did not start (a KubeVirt VMI of someone else's) also
 * refuses a switch without a drain, named; once it has finished (KubeVirt keeps the object,
 * phase Succeeded) it holds no GPU, and a switch goes through rather than wait for ever. */
Test(k8s_sync,
     r4_switch_without_drain_is_refused_naming_a_gpu_vmi_and_a_finished_one_is_not_waited_for) {
    cr_assert(wait_for(registered, "gpu-b"));
    k8s_write("POST", "/apis/kubevirt.io/v1/namespaces/ml/virtualmachineinstances",
              "{\"apiVersion\": \"kubevirt.io/v1\", \"kind\": \"VirtualMachineInstance\", "
              "\"metadata\": {\"name\": \"vm-a\"}, \"spec\": {\"nodeSelector\": "
              "{\"kubernetes.io/hostname\": \"gpu-b\"}, \"domain\": {\"devices\": {\"gpus\": "
              "[{\"name\": \"g0\", \"deviceName\": \"nvidia.com/GH100_H100_SXM5_80GB\"}]}}}}");
    ask_switch("gpu-b", "container", "none");
    wait_step("gpu-b", "failed", "ml/vm-a");
    json_t *n = k8s_node("gpu-b");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "vm-passthrough",
                     "never relabeled under a GPU VM");
    cr_expect(!unschedulable(n), "nothing was done in Kubernetes");
    json_decref(n);
    k8s_double_control(&dbl, "phase",
                       "{\"plural\": \"virtualmachineinstances\", \"namespace\": \"ml\", "
                       "\"name\": \"vm-a\", \"phase\": \"Succeeded\"}");
    ask_switch("gpu-b", "container", "wait");
    wait_step("gpu-b", "done", NULL);
    n = k8s_node("gpu-b");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "container");
    json_decref(n);
}

Test(k8s_sync, r4_pdb_blocks_eviction_for_a_while) {
    cr_assert(wait_for(registered, "gpu-a"));
    add_pdb();
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "rebind", "train-pdb");
    json_t *n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "container",
                     "not relabeled while a GPU pod runs");
    cr_expect(unschedulable(n), "cordoned while it drains");
    json_decref(n);
    json_t *pod = k8s_double_get(&dbl, "/api/v1/namespaces/ml/pods/train-0");
    cr_expect_not_null(pod, "the budget protects the pod");
    json_decref(pod);
    k8s_write("DELETE", "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/train-pdb", NULL);
    wait_step("gpu-a", "done", NULL);
    n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "vm-passthrough");
    json_decref(n);
}

static bool k8s_schedulable(const void *arg) {
    json_t *n = k8s_node(arg);
    bool ok = n && !unschedulable(n);
    json_decref(n);
    return ok;
}

static bool cp_mode_is_vm(const void *arg) {
    json_t *n = cp_node(arg);
    const char *m = json_string_value(json_object_get(n, "mode"));
    bool ok = m && !strcmp(m, "vm-passthrough");
    json_decref(n);
    return ok;
}

Test(k8s_sync, r4_operator_that_never_converges_fails_the_switch_cordoned_until_uncordoned) {
    cr_assert(wait_for(registered, "gpu-a"));
    k8s_double_control(&dbl, "operator", "{\"converge\": false}");
    sync_kill(false);
    sync_start_with("3");
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "failed", "did not bring node gpu-a back in vm-passthrough mode");
    json_t *n = k8s_node("gpu-a");
    cr_expect(unschedulable(n), "the Kubernetes node stays cordoned");
    json_decref(n);
    json_t *cp = cp_node("gpu-a");
    cr_expect(json_is_true(json_object_get(cp, "cordoned")), "the Einsora node stays cordoned");
    json_decref(cp);
    /* The operator takes the node as it is: the uncordon in Einsora lifts the switch's cordon
     * in Kubernetes too, or pods placed there would never be scheduled. */
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/gpu-a/uncordon", NULL, NULL), 200);
    cr_assert(wait_for(k8s_schedulable, "gpu-a"), "the switch's cordon was never lifted");
    n = k8s_node("gpu-a");
    cr_expect_null(json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"),
                                   "einsora.io/was-unschedulable"));
    json_decref(n);
    cr_expect(!cp_cordoned("gpu-a"), "the sync did not cordon it again");
    /* "As it is" is the label's mode with the GPUs the cluster advertises (none while the
     * operator has not converged), never the old mode's GPUs (R3). */
    cr_assert(wait_for(cp_mode_is_vm, "gpu-a"), "the node kept its old mode");
    cp = cp_node("gpu-a");
    cr_expect_eq(json_array_size(json_object_get(cp, "devices")), 0, "no GPU advertised yet");
    json_decref(cp);
}

/* Whether the Kubernetes node's mode label is `mode`. */
static bool labeled_as(const char *node, const char *mode) {
    json_t *n = k8s_node(node);
    const char *l = label(n, "nvidia.com/gpu.workload.config");
    bool ok = l && strcmp(l, mode) == 0;
    json_decref(n);
    return ok;
}

static bool relabeled(const void *arg) {
    return labeled_as(arg, "vm-passthrough");
}

Test(k8s_sync, r4_watch_410_gone_mid_switch_relists) {
    cr_assert(wait_for(registered, "gpu-a"));
    k8s_double_control(&dbl, "operator", "{\"delay\": 2}");
    ask_switch("gpu-a", "vm-passthrough", "evict");
    cr_assert(wait_for(relabeled, "gpu-a"));
    k8s_double_control(&dbl, "compact", "{}");
    wait_step("gpu-a", "done", NULL);
    cr_expect(sync_logged("410 Gone: listing again"));
}

Test(k8s_sync, r4_sync_killed_and_restarted_mid_switch_resumes) {
    cr_assert(wait_for(registered, "gpu-a"));
    add_pdb();
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "rebind", "train-pdb");
    sync_kill(true);
    k8s_write("DELETE", "/apis/policy/v1/namespaces/ml/poddisruptionbudgets/train-pdb", NULL);
    sync_start();
    wait_step("gpu-a", "done", NULL);
    json_t *n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "vm-passthrough");
    cr_expect_not(unschedulable(n));
    json_decref(n);
}

/* One API call that hangs in a switch must not hold every node's heartbeat back: the switch
 * gives up on it within half an interval and tries again, and no node -- the switching one
 * included -- goes unreachable (3 missed heartbeats) meanwhile. */
Test(k8s_sync, r4_a_hung_api_call_in_a_switch_leaves_every_node_reachable) {
    cr_assert(wait_for(registered, "gpu-a")); /* the sync runs (its signal handler is set) */
    sync_kill(false);
    sync_start_every("2", "120");
    cr_assert(wait_for(registered, "gpu-a"));
    cr_assert(wait_for(registered, "gpu-b"));
    k8s_double_control(&dbl, "hang", "{\"verb\": \"patch\", \"count\": 1, \"seconds\": 14}");
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "done", NULL);
    cr_expect(sync_logged("retrying: "), "the hung call was given up and retried");
    json_t *ev = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0&limit=10000", NULL, &ev), 200);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ev, "events"), i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        char *text = json_dumps(e, JSON_COMPACT);
        cr_expect(!type || strcmp(type, "node.unreachable") != 0, "a node went unreachable: %s",
                  text);
        free(text);
    }
    json_decref(ev);
}

Test(k8s_sync, r4_rbac_403_fails_the_switch_naming_the_rule) {
    cr_assert(wait_for(registered, "gpu-a"));
    k8s_double_control(&dbl, "rbac", "{\"deny\": [[\"create\", \"pods/eviction\"]]}");
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "failed", "verb \"create\" on resource \"pods/eviction\"");
}

Test(k8s_sync, r4_node_deleted_during_a_switch_fails_it) {
    cr_assert(wait_for(registered, "gpu-a"));
    add_pdb();
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "rebind", "train-pdb");
    k8s_write("DELETE", "/api/v1/nodes/gpu-a", NULL);
    wait_step("gpu-a", "failed", "was deleted from the Kubernetes cluster");
}

Test(k8s_sync, r6_kubevirt_config_applies_permitted_host_devices) {
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "k8s", "kubevirt-config", "--kubeconfig", dbl.kubeconfig,
                         "--catalog", TEST_DATA "/catalog.yaml", "--apply", NULL);
    cr_assert_eq(rc, 0, "%s", err);
    json_t *kv =
            k8s_double_get(&dbl, "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt");
    json_t *list = json_object_get(
            json_object_get(json_object_get(json_object_get(kv, "spec"), "configuration"),
                            "permittedHostDevices"),
            "pciHostDevices");
    bool h100 = false;
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d) {
        const char *sel = json_string_value(json_object_get(d, "pciVendorSelector"));
        if (sel && strcmp(sel, "10DE:2330") == 0) {
            h100 = true;
            cr_expect_str_eq(json_string_value(json_object_get(d, "resourceName")),
                             "nvidia.com/GH100_H100_SXM5_80GB");
            cr_expect(json_is_true(json_object_get(d, "externalResourceProvider")));
        }
    }
    cr_expect(h100, "no entry for the H100");
    cr_expect_not_null(
            json_object_get(json_object_get(json_object_get(kv, "spec"), "configuration"),
                            "developerConfiguration"),
            "a merge patch keeps the rest of the CR");
    json_decref(kv);
    free(out);
    free(err);
}

static long submit(const char *body) {
    json_t *j = NULL;
    long st = ts_call(&ts, ts.admin, "POST", "/v1/requests", body, &j);
    cr_assert(st == 201 || st == 200 || st == 202, "submit answered %ld", st);
    long id = (long)json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    return id;
}

static json_t *request(long id) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld", id);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &j), 200);
    return j;
}

/* The KubeVirt device resource a passthrough node advertises. */
static const char *node_device(json_t *node) {
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(json_object_get(node, "status"), "allocatable"), key,
                        v) if (strncmp(key, "nvidia.com/", 11) == 0 &&
                               strcmp(key, "nvidia.com/gpu") != 0) return key;
    return "(none)";
}

static bool request_active(const void *arg) {
    json_t *j = request(*(const long *)arg);
    const char *st = json_string_value(json_object_get(j, "state"));
    bool ok = st && strcmp(st, "active") == 0;
    json_decref(j);
    return ok;
}

static bool gone(const void *arg) {
    json_t *j = k8s_double_get(&dbl, arg);
    json_decref(j);
    return j == NULL;
}

Test(k8s_sync, r17_a_notebook_pod_and_a_vmi_follow_their_placements) {
    cr_assert(wait_for(registered, "gpu-a"));
    cr_assert(wait_for(registered, "gpu-b"));
    long nb = submit("{\"kind\": \"notebook\", \"class\": \"nvidia-h100-80gb\"}");
    long vm = submit("{\"kind\": \"vm\", \"class\": \"nvidia-h100-80gb\"}");
    cr_assert(wait_for(request_active, &nb), "the notebook never became active (its Pod Running)");
    cr_assert(wait_for(request_active, &vm), "the VM never became active (its VMI Running)");

    char path[128];
    json_t *r = request(nb), *p = json_object_get(r, "placement");
    const char *node = json_string_value(json_object_get(p, "node"));
    snprintf(path, sizeof(path), "/api/v1/namespaces/einsora/pods/einsora-%ld", nb);
    json_t *pod = k8s_double_get(&dbl, path);
    cr_assert_not_null(pod);
    json_t *spec = json_object_get(pod, "spec");
    cr_expect_str_eq(json_string_value(json_object_get(spec, "nodeName")), node,
                     "pinned to the placement's node");
    json_t *limits = json_object_get(
            json_object_get(json_array_get(json_object_get(spec, "containers"), 0), "resources"),
            "limits");
    json_t *kn = k8s_node(node);
    const char *mode = label(kn, "nvidia.com/gpu.workload.config");
    const char *want =
            mode && strcmp(mode, "vm-passthrough") == 0 ? node_device(kn) : "nvidia.com/gpu";
    char *lt = json_dumps(limits, JSON_COMPACT);
    cr_expect_str_eq(json_string_value(json_object_get(limits, want)), "1",
                     "limits of %s: %s; placement %s", node, lt,
                     json_string_value(json_object_get(p, "method")));
    free(lt);
    const char *crt = json_string_value(json_object_get(p, "container_runtime"));
    if (crt && strcmp(crt, "kata") == 0)
        cr_expect_str_eq(json_string_value(json_object_get(spec, "runtimeClassName")),
                         "kata-qemu-nvidia-gpu");
    else
        cr_expect_null(json_object_get(spec, "runtimeClassName"));
    json_decref(kn);
    json_decref(pod);
    json_decref(r);

    r = request(vm);
    p = json_object_get(r, "placement");
    node = json_string_value(json_object_get(p, "node"));
    snprintf(path, sizeof(path),
             "/apis/kubevirt.io/v1/namespaces/einsora/virtualmachineinstances/einsora-%ld", vm);
    json_t *vmi = k8s_double_get(&dbl, path);
    cr_assert_not_null(vmi);
    json_t *gpus = json_object_get(
            json_object_get(json_object_get(json_object_get(vmi, "spec"), "domain"), "devices"),
            "gpus");
    cr_expect_eq(json_array_size(gpus), 1u);
    kn = k8s_node(node);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(gpus, 0), "deviceName")),
                     node_device(kn), "the node's own device name");
    json_decref(kn);
    json_decref(vmi);
    json_decref(r);

    snprintf(path, sizeof(path), "/v1/requests/%ld/release", nb);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    snprintf(path, sizeof(path), "/api/v1/namespaces/einsora/pods/einsora-%ld", nb);
    cr_expect(wait_for(gone, path), "release deletes the Pod");

    /* a VMI that disappears ends its request and frees the GPU (R17) */
    snprintf(path, sizeof(path),
             "/apis/kubevirt.io/v1/namespaces/einsora/virtualmachineinstances/einsora-%ld", vm);
    k8s_write("DELETE", path, NULL);
    bool ended = false;
    for (int i = 0; i < 600 && !ended; i++, sleep_ms(100)) {
        json_t *j = request(vm);
        const char *st = json_string_value(json_object_get(j, "state"));
        ended = st && strcmp(st, "active") != 0;
        json_decref(j);
    }
    cr_expect(ended, "the VM's request did not end when its VMI went away");
}

/* Pods that start running on a node in the same turn are activated in one call
 * (POST /v1/nodes/{name}/activate, one commit), each request as its own activation would. */
Test(k8s_sync, r17_pods_running_on_one_node_are_activated_in_one_call) {
    cr_assert(wait_for(registered, "gpu-a"));
    cr_assert(wait_for(registered, "gpu-b"));
    long ids[4];
    for (int i = 0; i < 4; i++)
        ids[i] = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    for (int i = 0; i < 4; i++)
        cr_assert(wait_for(request_active, &ids[i]), "request %ld never became active", ids[i]);
    double batches = ts_metric(
            &ts, "einsora_api_request_seconds_count{route=\"POST /v1/nodes/{name}/activate\"}");
    cr_expect_geq(batches, 1, "four containers on two nodes, and no activation of several at once");
    cr_expect_leq(batches, 3);
}

Test(k8s_sync, r2c_mig_slices_of_a_mixed_strategy_node_are_offered_and_run) {
    cr_assert(wait_for(registered, "gpu-e"));
    json_t *e = cp_node("gpu-e");
    json_t *devs = json_object_get(e, "devices");
    cr_assert_eq(json_array_size(devs), 2u, "one whole GPU and one MIG GPU");
    cr_expect(json_is_true(json_object_get(json_array_get(devs, 1), "mig_enabled")));
    cr_expect_eq(json_array_size(json_object_get(json_array_get(devs, 1), "mig")), 7u);
    json_decref(e);
    long id = submit("{\"kind\": \"endpoint\", \"class\": \"nvidia-h100-80gb-mig-1g.10gb\"}");
    if (!wait_for(request_active, &id)) {
        json_t *r = request(id);
        char *t = json_dumps(r, JSON_COMPACT), *log = slurp(sync_log), text[12000];
        snprintf(text, sizeof(text), "%s\nsync log:\n%s", t, log);
        free(t);
        free(log);
        json_decref(r);
        cr_assert_fail("the MIG endpoint never became active: %s", text);
    }
    char path[128];
    snprintf(path, sizeof(path), "/api/v1/namespaces/einsora/pods/einsora-%ld", id);
    json_t *pod = k8s_double_get(&dbl, path);
    cr_assert_not_null(pod);
    json_t *spec = json_object_get(pod, "spec");
    cr_expect_str_eq(json_string_value(json_object_get(spec, "nodeName")), "gpu-e");
    json_t *limits = json_object_get(
            json_object_get(json_array_get(json_object_get(spec, "containers"), 0), "resources"),
            "limits");
    cr_expect_str_eq(json_string_value(json_object_get(limits, "nvidia.com/mig-1g.10gb")), "1");
    json_decref(pod);
}

static bool request_left_active(const void *arg) {
    json_t *j = request(*(const long *)arg);
    const char *st = json_string_value(json_object_get(j, "state"));
    bool ok = st && strcmp(st, "active") != 0;
    json_decref(j);
    return ok;
}

/* R17: a Pod that exits ends its request `ended`, saying how (failed, or finished), not as
 * a workload the node lost: the heartbeat that comes first still names it. */
Test(k8s_sync, r17_a_pod_that_exits_ends_its_request_not_lost) {
    cr_assert(wait_for(registered, "gpu-a"));
    const char *phases[] = {"Failed", "Succeeded"};
    for (size_t i = 0; i < 2; i++) {
        long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
        cr_assert(wait_for(request_active, &id), "the container never became active");
        char body[200];
        snprintf(body, sizeof(body),
                 "{\"plural\": \"pods\", \"namespace\": \"einsora\", \"name\": \"einsora-%ld\", "
                 "\"phase\": \"%s\"}",
                 id, phases[i]);
        k8s_double_control(&dbl, "phase", body);
        cr_assert(wait_for(request_left_active, &id), "the request stayed active");
        json_t *r = request(id);
        cr_expect_str_eq(json_string_value(json_object_get(r, "state")), "ended", "%s: %s",
                         phases[i], json_string_value(json_object_get(r, "reason")));
        json_decref(r);
    }
}

static bool request_ended(const void *arg) {
    json_t *j = request(*(const long *)arg);
    const char *st = json_string_value(json_object_get(j, "state"));
    bool ok = st && !strcmp(st, "ended");
    json_decref(j);
    return ok;
}

/* R17: a Pod that Kubernetes refuses for good (here RBAC) can never run: the request ends
 * failed with Kubernetes' own sentence where its user looks, and its GPU goes to the next
 * request, rather than staying placed with the reason in the sync's log only. */
Test(k8s_sync, r17_a_pod_kubernetes_refuses_ends_its_request_with_the_refusal) {
    cr_assert(wait_for(registered, "gpu-a"));
    k8s_double_control(&dbl, "rbac", "{\"deny\": [[\"create\", \"pods\"]]}");
    long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    if (!wait_for(request_ended, &id)) {
        char *log = slurp(sync_log);
        cr_log_error("sync log:\n%s", log);
        free(log);
        cr_assert_fail("the refused request stayed placed");
    }
    json_t *r = request(id);
    const char *why = json_string_value(json_object_get(r, "reason"));
    cr_expect(why && strstr(why, "Kubernetes refused the Pod") && strstr(why, "forbidden"), "%s",
              why);
    json_decref(r);
    /* Once RBAC allows it, the next request runs on the GPU the refused one gave back. */
    k8s_double_control(&dbl, "rbac", "{\"deny\": []}");
    long next = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    cr_assert(wait_for(request_active, &next), "the next request never ran");
}

static bool cordoned_for_a_stuck_delete(const void *arg) {
    json_t *j = cp_node(arg);
    const char *why = json_string_value(json_object_get(j, "cordon_reason"));
    bool ok = json_is_true(json_object_get(j, "cordoned")) && why &&
              strstr(why, "Kubernetes refuses to delete");
    json_decref(j);
    return ok;
}

/* R17, R16: a released request's Pod that Kubernetes refuses to delete still holds the GPUs
 * the release freed: its node is cordoned in Einsora saying which Pod, so nothing new lands
 * on them, and the cordon goes once the Pod is gone. */
Test(k8s_sync, r17_a_released_pod_kubernetes_will_not_delete_cordons_its_node_until_gone) {
    cr_assert(wait_for(registered, "gpu-a"));
    long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    cr_assert(wait_for(request_active, &id), "the Pod never ran");
    json_t *r = request(id);
    char node[64], pod[128], path[64];
    snprintf(node, sizeof(node), "%s",
             json_string_value(json_object_get(json_object_get(r, "placement"), "node")));
    json_decref(r);
    snprintf(pod, sizeof(pod), "/api/v1/namespaces/einsora/pods/einsora-%ld", id);
    k8s_double_control(&dbl, "rbac", "{\"deny\": [[\"delete\", \"pods\"]]}");
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    if (!wait_for(cordoned_for_a_stuck_delete, node)) {
        char *log = slurp(sync_log);
        cr_log_error("sync log:\n%s", log);
        free(log);
        cr_assert_fail("%s was not cordoned while the released Pod runs", node);
    }
    json_t *pj = k8s_double_get(&dbl, pod);
    cr_expect_not_null(pj, "the Pod is still there");
    json_decref(pj);
    k8s_double_control(&dbl, "rbac", "{\"deny\": []}");
    cr_assert(wait_for(gone, pod), "the Pod was never deleted");
    cr_assert(wait_for(not_cordoned, node), "%s stayed cordoned after the Pod went", node);
}

/* R17: the Pod name of a request taken by a Pod Einsora did not make (no request label): the
 * create answers 409, nothing runs for the request, and it ends saying so - never "created"
 * and placed forever on a GPU nothing uses. */
Test(k8s_sync, r17_a_pod_name_taken_by_a_foreign_pod_ends_the_request_saying_so) {
    cr_assert(wait_for(registered, "gpu-a"));
    long first = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    char name[32], path[128];
    snprintf(name, sizeof(name), "einsora-%ld", first + 1);
    snprintf(path, sizeof(path), "/api/v1/namespaces/einsora/pods/%s", name);
    K8sClient *kc = k8s_double_client(&dbl, NULL);
    json_t *foreign = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:[{s:s, s:s}]}}", "apiVersion", "v1",
                                "kind", "Pod", "metadata", "name", name, "namespace", "einsora",
                                "spec", "containers", "name", "x", "image", "busybox");
    Error err = {0};
    cr_assert_eq(k8s_call(kc, "POST", "/api/v1/namespaces/einsora/pods", NULL, foreign, NULL, &err),
                 0, "%s", error_message(&err));
    json_decref(foreign);
    long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    cr_assert_eq(id, first + 1);
    cr_assert(wait_for(request_ended, &id), "the request stayed placed under a foreign Pod's name");
    json_t *r = request(id);
    const char *why = json_string_value(json_object_get(r, "reason"));
    cr_expect(why && strstr(why, "did not make"), "%s", why ? why : "(no reason)");
    json_decref(r);
    /* The foreign Pod is left as it was. */
    json_t *pod = k8s_double_get(&dbl, path);
    cr_expect_not_null(pod);
    cr_expect_null(json_object_get(json_object_get(json_object_get(pod, "metadata"), "labels"),
                                   "einsora.io/request"));
    json_decref(pod);
    (void)k8s_call(kc, "DELETE", path, NULL, NULL, NULL, &err);
    k8s_client_free(kc);
}

/* A cordon made in Kubernetes while no sync ran is mirrored when one starts: the first look
 * at a node takes its cordon for news (not its uncordon, which would undo an Einsora one). */
Test(k8s_sync, r4_a_kubernetes_cordon_made_while_the_sync_was_down_is_mirrored) {
    cr_assert(wait_for(registered, "gpu-a"));
    sync_kill(false);
    k8s_write("PATCH", "/api/v1/nodes/gpu-a", "{\"spec\": {\"unschedulable\": true}}");
    sync_start();
    cr_assert(wait_for(cp_cordoned, "gpu-a"), "the cordon made meanwhile was never mirrored");
}

typedef struct ModeIs {
    const char *node, *mode;
} ModeIs;

static bool cp_mode_is(const void *arg) {
    const ModeIs *m = arg;
    json_t *j = cp_node(m->node);
    const char *mode = json_string_value(json_object_get(j, "mode"));
    bool ok = mode && strcmp(mode, m->mode) == 0 && !json_is_true(json_object_get(j, "cordoned"));
    json_decref(j);
    return ok;
}

/* R3: a node relabeled by hand while an Einsora workload runs there keeps its old mode in the
 * control plane until the workload ends; meanwhile it is cordoned in Einsora, so nothing new
 * is placed by the old mode on GPUs the GPU Operator moved to the new one. Then it takes the
 * label's mode and opens again. */
Test(k8s_sync, r3_a_node_relabeled_by_hand_under_a_workload_takes_no_new_work) {
    cr_assert(wait_for(registered, "gpu-a"));
    long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\", \"count\": 8}");
    cr_assert(wait_for(request_active, &id), "the container never became active");
    json_t *r = request(id);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "placement"), "node")),
                     "gpu-a");
    json_decref(r);
    k8s_write("PATCH", "/api/v1/nodes/gpu-a",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": "
              "\"vm-passthrough\"}}}");
    cr_assert(wait_for(cp_cordoned, "gpu-a"), "the relabeled node was not held");
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    ModeIs m = {"gpu-a", "vm-passthrough"};
    cr_assert(wait_for(cp_mode_is, &m), "the node never took the label's mode, open");
}

/* The events of a node, of one type, as one text (for strstr), "" when none. */
static char *node_events(const char *node, const char *type) {
    json_t *ev = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/events?after=0&limit=10000", NULL, &ev), 200);
    size_t size = 1, i;
    char *all = calloc(1, size);
    json_t *e;
    json_array_foreach(json_object_get(ev, "events"), i, e) {
        const char *t = json_string_value(json_object_get(e, "type"));
        char *text = json_dumps(e, JSON_COMPACT);
        if (t && strcmp(t, type) == 0 && text && strstr(text, node)) {
            size += strlen(text) + 1;
            all = realloc(all, size);
            strcat(all, text);
            strcat(all, "\n");
        }
        free(text);
    }
    json_decref(ev);
    return all;
}

/* R4 (docs/fleet.md step 5): "uncordon (unless the node was cordoned before)". An Einsora
 * cordon of a Kubernetes node is Einsora's (spec.unschedulable is not touched); the switch
 * cordons the Kubernetes node for its duration and gives it back its spec.unschedulable; the
 * sync never takes that restore of its own for an uncordon made in Kubernetes. */
Test(k8s_sync, r4_a_node_cordoned_before_a_switch_stays_cordoned_after_it) {
    cr_assert(wait_for(registered, "gpu-a"));
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/gpu-a/cordon", NULL, NULL), 200);
    ask_switch("gpu-a", "vm-passthrough", "evict");
    wait_step("gpu-a", "done", NULL);
    cr_assert(wait_for(k8s_schedulable, "gpu-a"),
              "the switch did not give the Kubernetes node its spec.unschedulable back");
    /* Turns of the sync go by (1 s each): the restore must not be mirrored as an uncordon. */
    sleep_ms(4000);
    json_t *cp = cp_node("gpu-a");
    cr_expect(json_is_true(json_object_get(cp, "cordoned")),
              "the node cordoned before the switch was uncordoned after it");
    cr_expect(json_is_true(json_object_get(json_object_get(cp, "switch"), "was_cordoned")));
    json_decref(cp);
    cr_expect(!sync_logged("node gpu-a uncordoned"), "the sync mirrored its own restore");
    char *up = node_events("gpu-a", "node.uncordoned");
    cr_expect_str_empty(up, "events: %s", up);
    free(up);
}

static bool k8s_switch_cordoned_node(const void *arg) {
    json_t *n = k8s_node(arg);
    bool ok = n && unschedulable(n) &&
              json_object_get(json_object_get(json_object_get(n, "metadata"), "annotations"),
                              "einsora.io/switch-to");
    json_decref(n);
    return ok;
}

/* R4: cordon -> drain. While the control plane waits for its own workloads to end (drain
 * wait), the Kubernetes node is cordoned already, so the Kubernetes scheduler puts no new GPU
 * pod on a node being drained; the switch then goes on as before. */
Test(k8s_sync, r4_the_kubernetes_node_is_cordoned_while_einsora_drains_it) {
    cr_assert(wait_for(registered, "gpu-a"));
    long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\", \"count\": 8}");
    cr_assert(wait_for(request_active, &id), "the container never became active");
    ask_switch("gpu-a", "vm-passthrough", "wait");
    wait_step("gpu-a", "drain", "waiting for 1 workload(s) to end");
    if (!wait_for(k8s_switch_cordoned_node, "gpu-a")) {
        char *log = slurp(sync_log);
        cr_log_error("sync log:\n%s", log);
        free(log);
        cr_assert_fail("the Kubernetes node stayed schedulable during the drain step");
    }
    json_t *cp = cp_node("gpu-a");
    cr_expect_str_eq(switch_field(cp, "step"), "drain", "cordoned in Kubernetes from the drain");
    json_decref(cp);
    json_t *n = k8s_node("gpu-a");
    cr_expect_str_eq(label(n, "nvidia.com/gpu.workload.config"), "container", "not relabeled yet");
    json_decref(n);
    char path[64];
    snprintf(path, sizeof(path), "/v1/requests/%ld/release", id);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, NULL, NULL), 200);
    wait_step("gpu-a", "rebind", "waiting for the end of 1 GPU pod(s)"); /* ml/train-0 */
    k8s_write("DELETE", "/api/v1/namespaces/ml/pods/train-0", NULL);
    wait_step("gpu-a", "done", NULL);
    cr_assert(wait_for(k8s_schedulable, "gpu-a"), "uncordoned in Kubernetes at the end");
    cr_expect(wait_for(not_cordoned, "gpu-a"), "uncordoned in Einsora at the end");
}

static bool cpus_are_16(const void *arg) {
    json_t *j = cp_node(arg);
    bool ok = json_integer_value(json_object_get(j, "cpus")) == 16;
    json_decref(j);
    return ok;
}

/* R3: "a missing or unknown label is an error shown to the operator, not a silent default".
 * A served node relabeled by hand to a mode Einsora does not serve, or whose label is removed,
 * is cordoned in Einsora with the sentence as the cordon's reason (node show, the event), and
 * stays heartbeated: never taken for a lost agent ("unreachable, missed heartbeats"). Labeled
 * again, it is uncordoned. */
/* R17 on a node whose label went bad: its workloads are still followed (an ended Pod ends its
 * request) while it is cordoned for the label; R11: its allocatable cores, changed in
 * Kubernetes, reach Einsora. */
Test(k8s_sync, r17_r11_a_node_with_a_bad_label_still_ends_its_workloads_and_cores_follow) {
    cr_assert(wait_for(registered, "gpu-a"));
    long id = submit("{\"kind\": \"container\", \"class\": \"nvidia-h100-80gb\"}");
    cr_assert(wait_for(request_active, &id), "the container never became active");
    k8s_write("PATCH", "/api/v1/nodes/gpu-a",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": null}}}");
    cr_assert(wait_for(cordoned_for_the_label, "gpu-a"));
    char body[200];
    snprintf(body, sizeof(body),
             "{\"plural\": \"pods\", \"namespace\": \"einsora\", \"name\": \"einsora-%ld\", "
             "\"phase\": \"Succeeded\"}",
             id);
    k8s_double_control(&dbl, "phase", body);
    cr_assert(wait_for(request_ended, &id), "the Pod ended, its request did not");
    k8s_write("PATCH", "/api/v1/nodes/gpu-a",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": \"container\"}},"
              " \"status\": {\"allocatable\": {\"cpu\": \"16\"}}}");
    cr_assert(wait_for(cpus_are_16, "gpu-a"), "the node's new cores never reached Einsora");
}

Test(k8s_sync, r3_a_served_node_with_an_unknown_or_missing_mode_label_is_shown_so) {
    cr_assert(wait_for(registered, "gpu-b"));
    k8s_write("PATCH", "/api/v1/nodes/gpu-b",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": \"vm-vgpu\"}}}");
    if (!wait_for(cordoned_for_the_label, "gpu-b")) {
        char *log = slurp(sync_log);
        cr_log_error("sync log:\n%s", log);
        free(log);
        cr_assert_fail("gpu-b was not cordoned saying why");
    }
    json_t *j = cp_node("gpu-b");
    const char *why = json_string_value(json_object_get(j, "cordon_reason"));
    cr_expect(strstr(why, "vm-vgpu, which is not a mode Einsora serves"), "%s", why);
    json_decref(j);
    char *ev = node_events("gpu-b", "node.cordoned");
    cr_expect(strstr(ev, "vm-vgpu"), "the cordon's event names the label: %s", ev);
    free(ev);
    char *out = NULL, *err = NULL;
    int rc = run_einsora(&out, &err, "node", "show", "gpu-b", "--server", ts.url, "--token",
                         ts.admin, NULL);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect(strstr(out, "cordoned  yes: Node gpu-b has nvidia.com/gpu.workload.config=vm-vgpu"),
              "%s", out);
    cr_expect(strstr(out, "reporting"), "%s", out);
    free(out), free(err);

    /* The label removed: the reason follows. Heartbeats go on (3 missed make a node
     * unreachable: 1 s each here). */
    k8s_write("PATCH", "/api/v1/nodes/gpu-b",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": null}}}");
    cr_assert(wait_for(sync_logged, "gpu-b has GPUs and no nvidia.com/gpu.workload.config label"));
    sleep_ms(4000);
    j = cp_node("gpu-b");
    why = json_string_value(json_object_get(j, "cordon_reason"));
    cr_expect(why && strstr(why, "has GPUs and no nvidia.com/gpu.workload.config label"), "%s",
              why);
    cr_expect(!json_is_true(json_object_get(j, "unreachable")), "taken for a lost agent");
    json_decref(j);
    char *lost = node_events("gpu-b", "node.unreachable");
    cr_expect_str_empty(lost, "%s", lost);
    free(lost);

    /* From Einsora, a switch to the mode it has is not "already done": it relabels the node. */
    json_t *sw = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/nodes/gpu-b/mode",
                         "{\"mode\": \"vm-passthrough\", \"drain\": \"evict\"}", &sw),
                 202, "%s", json_string_value(json_object_get(sw, "message")));
    json_decref(sw);
    cr_assert(wait_for(relabeled, "gpu-b"), "the switch never relabeled gpu-b");
    cr_assert(wait_for(not_cordoned, "gpu-b"), "labeled again, gpu-b stayed cordoned");
    j = cp_node("gpu-b");
    cr_expect_null(json_object_get(j, "cordon_reason"));
    cr_expect_str_eq(json_string_value(json_object_get(j, "mode")), "vm-passthrough");
    json_decref(j);
}

static bool labeled_container(const void *arg) {
    return labeled_as(arg, "container");
}

/* R3: a node without the label has no mode, not the GPU Operator's default "container": the
 * switch to container that fixes it writes the label and lifts the cordon, it is not found
 * "done before". */
Test(k8s_sync, r3_a_switch_to_container_labels_a_node_that_has_no_label) {
    cr_assert(wait_for(registered, "gpu-a"));
    k8s_write("PATCH", "/api/v1/nodes/gpu-a",
              "{\"metadata\": {\"labels\": {\"nvidia.com/gpu.workload.config\": null}}}");
    cr_assert(wait_for(cordoned_for_the_label, "gpu-a"));
    ask_switch("gpu-a", "container", "evict");
    cr_assert(wait_for(labeled_container, "gpu-a"), "the switch never labeled gpu-a");
    cr_assert(wait_for(not_cordoned, "gpu-a"), "labeled, gpu-a stayed cordoned");
    json_t *j = cp_node("gpu-a");
    cr_expect_null(json_object_get(j, "cordon_reason"));
    cr_expect_str_eq(json_string_value(json_object_get(j, "mode")), "container");
    json_decref(j);
}
