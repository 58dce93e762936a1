/* test-work-wake.c: a parked work poll (GET /v1/nodes/{name}/work) is woken only by events
 * that may change its node's work, not by every event of the fleet: events about another node
 * leave it parked, one about its own node wakes it (to look, find its work unchanged, and park
 * again). The server counts such idle wake-ups in /metrics. Against the real server. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "srv-helpers.h"

static TestServer ts;

static void setup(void) {
    ts_start(&ts);
}

static void teardown(void) {
    ts_stop(&ts);
}

TestSuite(work_wake, .init = setup, .fini = teardown, .timeout = 120);

typedef struct Poll {
    char path[128];
    long status;
    json_t *answer;
} Poll;

/* The work poll, on its own connection (a Client per thread). */
static void *poll_main(void *userdata) {
    Poll *p = userdata;
    Client *cl = NULL;
    Error err = {0};
    if (client_new(ts.url, ts.admin, &cl, &err) >= 0)
        (void)client_call(cl, "GET", p->path, NULL, NULL, &p->status, &p->answer, &err);
    client_free(cl);
    return NULL;
}

/* Poll `name` with a generous deadline until it reaches at least `want`. */
static double await_at_least(const char *name, double want) {
    double v = ts_metric(&ts, name);
    for (int i = 0; i < 1200 && v < want; i++) {
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
        v = ts_metric(&ts, name);
    }
    return v;
}

static void cordon(const char *node, bool on) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s/%s", node, on ? "cordon" : "uncordon");
    long st = ts_call(&ts, ts.admin, "POST", path, NULL, NULL);
    cr_assert_eq(st, 200, "POST %s: %ld", path, st);
}

Test(work_wake, r17_a_work_poll_is_woken_only_by_events_of_its_node) {
    ts_add_h100_node(&ts, "n1", "root", 1);
    ts_add_h100_node(&ts, "n2", "root", 1);
    json_t *j = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/n2/work", NULL, &j), 200);
    const char *cursor = json_string_value(json_object_get(j, "cursor"));
    cr_assert(cursor);
    Poll p = {0};
    snprintf(p.path, sizeof(p.path), "/v1/nodes/n2/work?after=%s&wait=60", cursor);
    json_decref(j);
    double idle0 = ts_metric(&ts, "einsora_work_poll_idle_wakeups_total");
    cr_assert_geq(idle0, 0, "the counter is in /metrics");

    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, poll_main, &p), 0);
    cr_assert_geq(await_at_least("einsora_parked_long_polls", 1), 1, "n2's poll never parked");
    /* Two events about n1 (answered once committed and published), then one about n2: the
     * first wake-up seen is n2's, and by then n1's events are long published. */
    cordon("n1", true);
    cordon("n1", false);
    cordon("n2", true);
    double idle = await_at_least("einsora_work_poll_idle_wakeups_total", idle0 + 1);
    cr_expect_eq(idle, idle0 + 1, "n2's poll was woken %g times; only n2's event concerns it",
                 idle - idle0);
    cr_expect_geq(await_at_least("einsora_parked_long_polls", 1), 1,
                  "cordoning leaves n2's work as it was: the poll parks again");
    /* A change of n2's work answers the poll at once: a request placed on it. */
    cordon("n2", false);
    cordon("n1", true);
    json_decref(ts_wait_state(
            &ts, ts_submit(&ts, "{\"kind\":\"container\",\"class\":\"nvidia-h100-80gb\"}"),
            "placed", NULL));
    pthread_join(t, NULL);
    cr_expect_eq(p.status, 200);
    cr_expect_eq(json_array_size(json_object_get(p.answer, "workloads")), 1, "the placement");
    json_decref(p.answer);
}

/* The ids of the open tasks node's work answer lists, after waiting (60 s at most, never a
 * measure) for it to list `want` of them; each must name the node. */
static size_t open_tasks(const char *node, size_t want, uint64_t ids[4]) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s/work", node);
    size_t n = 0;
    for (int i = 0; i < 1200; i++) {
        json_t *w = NULL;
        cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &w), 200);
        json_t *tasks = json_object_get(w, "tasks"), *t;
        size_t k;
        n = json_array_size(tasks);
        json_array_foreach(tasks, k, t) {
            cr_expect_str_eq(json_string_value(json_object_get(t, "node")), node);
            if (k < 4)
                ids[k] = (uint64_t)json_integer_value(json_object_get(t, "id"));
        }
        json_decref(w);
        if (n == want)
            break;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    return n;
}

/* Open tasks are found through their node: a node's work and record list its own, a result
 * is taken only at its own node's address, and a restart finds each where it was. */
Test(work_wake, r9_a_nodes_open_tasks_are_its_own_through_results_and_a_restart) {
    ts_add_unchecked_gpu_node(&ts, "ga");
    ts_add_unchecked_gpu_node(&ts, "gb");
    uint64_t a[4] = {0}, b[4] = {0};
    cr_assert_eq(open_tasks("ga", 1, a), 1, "ga's reset check was not asked for");
    cr_assert_eq(open_tasks("gb", 1, b), 1, "gb's reset check was not asked for");
    cr_assert_neq(a[0], b[0]);
    char path[96];
    const char *pass = "{\"ok\":true,\"verdict\":\"pass\",\"message\":\"reset cycle ok\"}";
    snprintf(path, sizeof(path), "/v1/nodes/ga/tasks/%" PRIu64, b[0]);
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", path, pass, NULL), 404,
                 "gb's task was taken at ga's address");
    ts_kill(&ts, true);
    ts_spawn(&ts);
    uint64_t a2[4] = {0}, b2[4] = {0};
    cr_assert_eq(open_tasks("ga", 1, a2), 1);
    cr_assert_eq(open_tasks("gb", 1, b2), 1);
    cr_expect_eq(a2[0], a[0], "a restart lost or moved ga's task");
    cr_expect_eq(b2[0], b[0], "a restart lost or moved gb's task");
    snprintf(path, sizeof(path), "/v1/nodes/gb/tasks/%" PRIu64, b[0]);
    cr_expect_eq(ts_call(&ts, ts.admin, "POST", path, pass, NULL), 200);
    cr_expect_eq(open_tasks("gb", 0, b2), 0, "a finished task stayed in gb's work");
    json_t *ga = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/ga", NULL, &ga), 200);
    json_t *tasks = json_object_get(ga, "tasks");
    cr_expect_eq(json_array_size(tasks), 1, "ga's record lists its open task");
    cr_expect_eq((uint64_t)json_integer_value(json_object_get(json_array_get(tasks, 0), "id")),
                 a[0]);
    json_decref(ga);
}

/* R9: a failed check's reason is kept and shown, however long and in whatever script: one
 * longer than the field is cut before the character the limit falls in. Cut inside one, it
 * was not JSON: the node could not be saved and the control plane stopped. */
Test(work_wake, r9_a_long_utf8_quarantine_reason_is_kept_and_the_server_goes_on) {
    ts_add_unchecked_gpu_node(&ts, "ga");
    uint64_t a[4] = {0};
    cr_assert_eq(open_tasks("ga", 1, a), 1, "ga's reset check was not asked for");
    char reason[300] = "", body[400], path[96];
    for (int i = 0; i < 126; i++)
        strcat(reason, "x");
    strcat(reason, "\xc3\xa9 did not return: \xc3\xa9\xc3\xa9\xc3\xa9");
    snprintf(body, sizeof(body), "{\"ok\":true,\"verdict\":\"fail\",\"message\":\"%s\"}", reason);
    snprintf(path, sizeof(path), "/v1/nodes/ga/tasks/%" PRIu64, a[0]);
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", path, body, NULL), 200);
    json_t *ga = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/ga", NULL, &ga), 200);
    const char *q = json_string_value(
            json_object_get(json_array_get(json_object_get(ga, "devices"), 0), "quarantined"));
    cr_assert(q, "the GPU is quarantined");
    cr_expect(strlen(q) <= 127 && !strncmp(q, reason, 120) && strstr(q, "..."), "%s", q);
    json_decref(ga);
    /* Still there after a restart: it was stored. */
    ts_kill(&ts, true);
    ts_spawn(&ts);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/nodes/ga", NULL, &ga), 200);
    cr_expect(json_object_get(json_array_get(json_object_get(ga, "devices"), 0), "quarantined"));
    json_decref(ga);
}

/* The id of the first workload node's work answer lists; 0 when none. */
static long first_workload(const char *node) {
    char path[64];
    snprintf(path, sizeof(path), "/v1/nodes/%s/work", node);
    json_t *w = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", path, NULL, &w), 200);
    long id = (long)json_integer_value(
            json_object_get(json_array_get(json_object_get(w, "workloads"), 0), "id"));
    json_decref(w);
    return id;
}

/* R17: a request waiting for nodes that the core places on a node the moment it registers
 * is in that node's work, for its agent to start (it was placed and never started); also
 * after a restart. */
Test(work_wake, r17_a_request_placed_as_its_node_registers_is_that_nodes_work) {
    json_t *q = NULL;
    cr_assert_eq(ts_call(&ts, ts.admin, "POST", "/v1/requests",
                         "{\"kind\":\"notebook\",\"class\":\"nvidia-h100-80gb\","
                         "\"wait_for_nodes\":true}",
                         &q),
                 201);
    long id = (long)json_integer_value(json_object_get(q, "id"));
    json_decref(q);
    ts_add_h100_node(&ts, "late", "root", 1);
    cr_assert_eq(ts_call(&ts, ts.admin, "GET", "/v1/requests?state=placed", NULL, &q), 200);
    cr_assert_eq(json_array_size(json_object_get(q, "requests")), 1, "placed on registration");
    json_decref(q);
    cr_expect_eq(first_workload("late"), id, "the placement is the new node's work");
    ts_kill(&ts, false);
    ts_respawn_same_port(&ts);
    cr_expect_eq(first_workload("late"), id, "and stays so across a restart");
}
